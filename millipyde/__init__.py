"""millipyde: GPU image work from Python on lazy, fused Numba kernels.

The backend (cuda, hip, cpu or cudasim) is chosen once, at import; see :func:`backend`.
The rest of the public API (gpuimage, Operation, Generator, ...) is imported on first use:
``import millipyde`` costs the backend's choice only, so a command that starts processes
(``millipyde augment``'s compile workers) can start them before the framework's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .backend import backend
from .version import __version__ as __version__

#: public name -> the module that defines it (imported on first use, ``__getattr__``)
_LAZY: dict[str, str] = {
    "AugMix": ".augmix",
    "AutoAugment": ".policies",
    "AutoAugmentPolicy": ".policies",
    "CutMix": ".training.batch_mix",
    "DEVICE_COUNT": ".devices",
    "Device": ".devices",
    "Generator": ".training.generator",
    "MixUp": ".training.batch_mix",
    "OneOf": ".compose",
    "Operation": ".operation",
    "Pipeline": ".pipeline",
    "RandAugment": ".policies",
    "RandomChoice": ".compose",
    "RandomOrder": ".compose",
    "SomeOf": ".compose",
    "TrivialAugmentWide": ".policies",
    "device_count": ".devices",
    "elementwise": ".decorators",
    "get_current_device": ".devices",
    "get_device_count": ".devices",
    "gpuarray": ".array",
    "gpuimage": ".image",
    "image_from_path": ".io",
    "images_from_path": ".io",
    "index_map": ".decorators",
    "max_image_pixels": ".io",
    "pixelwise": ".decorators",
    "seed": ".random",
    "set_max_image_pixels": ".io",
    "synchronize": ".devices",
}

__all__ = [
    "AugMix", "AutoAugment", "AutoAugmentPolicy", "CutMix", "DEVICE_COUNT", "Device",
    "Generator", "MixUp", "OneOf", "Operation", "Pipeline", "RandAugment", "RandomChoice",
    "RandomOrder", "SomeOf", "TrivialAugmentWide", "backend", "data", "device_count",
    "elementwise", "get_current_device", "get_device_count", "gpuarray", "gpuimage",
    "image_from_path", "images_from_path", "index_map", "max_image_pixels", "pixelwise",
    "seed", "set_max_image_pixels", "synchronize",
]


def __getattr__(name: str) -> Any:
    """A public name, or a submodule (``mp.data``, ``mp.devices``), imported on first use."""
    where = _LAZY.get(name)
    if where is not None:
        value = getattr(importlib.import_module(where, __name__), name)
    elif not name.startswith("_"):
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise  # the submodule exists and failed to import something
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from . import data as data
    from .array import gpuarray as gpuarray
    from .augmix import AugMix as AugMix
    from .compose import OneOf as OneOf
    from .compose import RandomChoice as RandomChoice
    from .compose import RandomOrder as RandomOrder
    from .compose import SomeOf as SomeOf
    from .decorators import elementwise as elementwise
    from .decorators import index_map as index_map
    from .decorators import pixelwise as pixelwise
    from .devices import DEVICE_COUNT as DEVICE_COUNT
    from .devices import Device as Device
    from .devices import device_count as device_count
    from .devices import get_current_device as get_current_device
    from .devices import get_device_count as get_device_count
    from .devices import synchronize as synchronize
    from .image import gpuimage as gpuimage
    from .io import image_from_path as image_from_path
    from .io import images_from_path as images_from_path
    from .io import max_image_pixels as max_image_pixels
    from .io import set_max_image_pixels as set_max_image_pixels
    from .operation import Operation as Operation
    from .pipeline import Pipeline as Pipeline
    from .policies import AutoAugment as AutoAugment
    from .policies import AutoAugmentPolicy as AutoAugmentPolicy
    from .policies import RandAugment as RandAugment
    from .policies import TrivialAugmentWide as TrivialAugmentWide
    from .random import seed as seed
    from .training.batch_mix import CutMix as CutMix
    from .training.generator import Generator as Generator
    from .version import __version__ as __version__
