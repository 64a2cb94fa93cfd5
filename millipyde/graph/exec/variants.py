"""Which kernel variant runs here: the hand-tuned GPU variants on or off, the stencil's
one-pass, tiled or generic passes, and uint8 RGBA images read as uint32 words."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import config
from ...backend import ACTIVE as runtime
from ..codegen import gpu as codegen_gpu


def gpu_variants_enabled() -> bool:
    """Hand-tuned GPU variants run on the real ``cuda``/``hip`` backends only.

    ``MILLIPYDE_GPU_VARIANTS=0`` forces the generic kernels (benchmarks compare both); it is
    read once (``config.refresh`` reads it again).
    """
    return runtime.caps.tuned_kernels and config.once(config.gpu_variants)


def c_contiguous(a: Any) -> bool:
    """Whether a host or device array is C-contiguous.

    Parameters
    ----------
    a : Any
        A NumPy array or a backend buffer (``is_c_contiguous()``).

    Returns
    -------
    bool
    """
    return a.flags.c_contiguous if isinstance(a, np.ndarray) else a.is_c_contiguous()


def words(a: Any, flat: bool = False) -> Any:
    """A contiguous (h, w, 4) uint8 image as its (h, w) uint32 pixels, or (h * w) ``flat``."""
    shape = (a.shape[0] * a.shape[1],) if flat else (a.shape[0], a.shape[1])
    return a.view(np.uint32).reshape(*shape)


def stencil_passes(radius: int) -> int:
    """Launches (1 or 2) of a stencil of this radius on this backend; 2 means a float64
    temporary goes through device memory between them."""
    return 1 if not runtime.caps.shared_memory or stencil_2d_fits(radius) else 2


def stencil_2d_fits(radius: int) -> bool:
    """Whether the one-pass 2-D tiled stencil runs here for taps of this radius."""
    geometry = codegen_gpu.tile_geometry(runtime.simulated)
    return (gpu_variants_enabled()
            and codegen_gpu.tile_shared_bytes(radius, geometry) <= runtime.SHARED_DEFAULT)


def stencil_2d_reads(buffer: Any, image: tuple[int, ...]) -> bool:
    """Whether the one-pass stencil reads ``buffer`` as flat images of shape ``image`` (it
    must be C-contiguous; offsets in one image are 32-bit)."""
    return c_contiguous(buffer) and codegen_gpu.indexable(image)


def stencil_2d_packs(src3: Any, dst3: Any, radius: int) -> bool:
    """Whether the one-pass stencil runs on uint32 words (uint8 RGBA, contiguous, fits)."""
    geometry = codegen_gpu.tile_geometry(runtime.simulated)
    return (src3.shape[2] == 4 and src3.dtype == np.uint8 and dst3.dtype == np.uint8
            and c_contiguous(src3) and c_contiguous(dst3)
            and codegen_gpu.packed_shared_bytes(radius, geometry) <= runtime.SHARED_DEFAULT)
