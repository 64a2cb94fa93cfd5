"""torchvision v2's augmentation policies: ``RandAugment``, ``TrivialAugmentWide`` and
``AutoAugment`` (``millipyde.policies``: the same constructor arguments; drawn per sample as
torchvision draws them, recorded as gates in ``Generator.batches``)."""

from ..policies import AutoAugment, AutoAugmentPolicy, RandAugment, TrivialAugmentWide

__all__ = ["AutoAugment", "AutoAugmentPolicy", "RandAugment", "TrivialAugmentWide"]
