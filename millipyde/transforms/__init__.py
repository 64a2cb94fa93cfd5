"""torchvision.transforms.v2's class names and arguments over millipyde's op library.

A torchvision recipe moves to a Generator by changing its import::

    import millipyde.transforms as T       # was: import torchvision.transforms.v2 as T

    recipe = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                        T.ToDtype(torch.float32, scale=True),
                        T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    gen = mp.Generator(images, recipe, seed=0)
    for batch in gen.batches(256): ...

Each class is an :class:`~millipyde.Operation` (``Compose`` a list of them): usable wherever
operations are, drawn per sample from the counter-based streams. ``ToDtype`` and ``Normalize``
set the batches' ``dtype``, ``mean`` and ``std``. Differences from torchvision are in each
class's doc (bilinear sampling only: NEAREST warns; no anti-aliased resize yet: a warning);
classes not supported yet raise ``NotImplementedError`` naming what they need.
"""

from .base import InterpolationMode
from .colour import (
    ColorJitter,
    Grayscale,
    RandomChannelPermutation,
    RandomErasing,
    RandomGrayscale,
    RandomInvert,
    RandomPosterize,
    RandomSolarize,
)
from .containers import Compose, RandomApply, RandomChoice, RandomOrder
from .geometry import (
    CenterCrop,
    Pad,
    RandomAffine,
    RandomCrop,
    RandomHorizontalFlip,
    RandomPerspective,
    RandomResizedCrop,
    RandomRotation,
    RandomVerticalFlip,
    RandomZoomOut,
    Resize,
)
from .misc import JPEG, Lambda
from .mix import CutMix, MixUp
from .options import (
    ConvertImageDtype,
    Normalize,
    PILToTensor,
    ToDtype,
    ToImage,
    ToPureTensor,
    ToTensor,
)
from .policies import AugMix, AutoAugment, AutoAugmentPolicy, RandAugment, TrivialAugmentWide
from .unsupported import *  # noqa: F403  (classes that raise NotImplementedError)
from .unsupported import PENDING

__all__ = [
    "AugMix", "AutoAugment", "AutoAugmentPolicy", "RandAugment", "TrivialAugmentWide",
    "CenterCrop", "ColorJitter", "Compose", "ConvertImageDtype", "CutMix", "Grayscale",
    "InterpolationMode", "JPEG", "Lambda", "MixUp", "Normalize", "PILToTensor", "Pad",
    "RandomAffine", "RandomApply", "RandomChannelPermutation", "RandomChoice", "RandomCrop",
    "RandomErasing",
    "RandomGrayscale", "RandomHorizontalFlip", "RandomInvert", "RandomOrder",
    "RandomPerspective", "RandomPosterize", "RandomResizedCrop", "RandomRotation",
    "RandomSolarize", "RandomVerticalFlip", "RandomZoomOut", "Resize", "ToDtype", "ToImage",
    "ToPureTensor", "ToTensor",
]
#: torchvision v2 classes that raise NotImplementedError here (and what each needs)
NOT_SUPPORTED = dict(PENDING)
