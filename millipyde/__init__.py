"""millipyde: GPU image work from Python on lazy, fused Numba kernels.

The backend (cuda, hip, cpu or cudasim) is chosen once, at import; see :func:`backend`.
"""

from . import data
from .array import gpuarray
from .augmix import AugMix
from .backend import backend
from .compose import OneOf, RandomChoice, RandomOrder, SomeOf
from .decorators import elementwise, index_map, pixelwise
from .devices import (
    DEVICE_COUNT,
    Device,
    device_count,
    get_current_device,
    get_device_count,
    synchronize,
)
from .image import gpuimage
from .io import image_from_path, images_from_path, max_image_pixels, set_max_image_pixels
from .operation import Operation
from .pipeline import Pipeline
from .policies import AutoAugment, AutoAugmentPolicy, RandAugment, TrivialAugmentWide
from .random import seed
from .training.batch_mix import CutMix, MixUp
from .training.generator import Generator
from .version import __version__ as __version__

__all__ = [
    "AugMix",
    "AutoAugment",
    "AutoAugmentPolicy",
    "CutMix",
    "DEVICE_COUNT",
    "Device",
    "Generator",
    "MixUp",
    "OneOf",
    "Operation",
    "Pipeline",
    "RandAugment",
    "RandomChoice",
    "RandomOrder",
    "SomeOf",
    "TrivialAugmentWide",
    "data",
    "backend",
    "device_count",
    "elementwise",
    "get_current_device",
    "get_device_count",
    "gpuarray",
    "gpuimage",
    "image_from_path",
    "images_from_path",
    "index_map",
    "max_image_pixels",
    "pixelwise",
    "seed",
    "set_max_image_pixels",
    "synchronize",
]
