"""torchvision v2's augmentation policies: ``RandAugment``, ``TrivialAugmentWide`` and
``AutoAugment`` (``millipyde.policies``: the same constructor arguments; drawn per sample as
torchvision draws them, recorded as gates in ``Generator.batches``), and ``AugMix``
(``millipyde.augmix``: its chains gated entries too, forked and mixed in one launch)."""

from ..augmix import AugMix
from ..policies import AutoAugment, AutoAugmentPolicy, RandAugment, TrivialAugmentWide

__all__ = ["AugMix", "AutoAugment", "AutoAugmentPolicy", "RandAugment", "TrivialAugmentWide"]
