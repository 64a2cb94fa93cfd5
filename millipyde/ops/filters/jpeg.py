"""``jpeg`` / ``random_jpeg``: the artefacts of a JPEG round trip at a quality (torchvision v2
``JPEG``, albumentations ``ImageCompression``, kornia ``RandomJPEG``), computed on the device.

A stencil whose taps function returns a ``BlockCodec`` (the quality's quantisation tables):
the block codec passes (``graph.codegen.codec``) run libjpeg's pipeline (integer colour
conversion, 4:2:0 chroma, quantisation, fancy upsampling) with a float DCT in place of its
integer one, so the result is Pillow's within a few levels where a coefficient lands on a
quantisation boundary (``tests/kernels/test_jpeg.py`` measures it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import BlockCodec, stencil
from ..base import Draws, Emit, ImageKind, columns, define, integer

#: the IJG tables of the JPEG standard (Annex K), luma then chroma, row-major
IJG_TABLES = np.array([
    [16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
     14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
     18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
     49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99],
    [17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99,
     24, 26, 56, 99, 99, 99, 99, 99, 47, 66, 99, 99, 99, 99, 99, 99,
     *([99] * 32)],
], dtype=np.int64)


def quality_tables(quality: int) -> np.ndarray:
    """libjpeg's ``jpeg_set_quality`` (``jcparam.c``): the IJG tables times ``5000 / q`` %
    below quality 50 and ``200 - 2 q`` % from it, ``(t * scale + 50) // 100`` kept within
    [1, 255] (baseline tables, as Pillow writes them): (2, 64) float64."""
    q = int(quality)
    scale = 5000 // q if q < 50 else 200 - 2 * q
    return np.clip((IJG_TABLES * scale + 50) // 100, 1, 255).astype(np.float64)


@stencil(nparams=1, name="jpeg")
def jpeg_codec(quality):
    """The round trip's quantisation tables at ``quality``."""
    return BlockCodec(quality_tables(int(quality)))


JPEG = define("jpeg", "filters", [jpeg_codec],
              reference="Pillow's JPEG encode + decode (libjpeg-turbo; PSNR >= 44 dB)")


def _quality(value: Any, name: str) -> int:
    q = integer(value, name)
    if not 1 <= q <= 100:
        raise ValueError(f"{name} must be an integer in [1, 100], got {value!r}")
    return q


def _uint8(kind: ImageKind, what: str) -> None:
    if kind.dtype != np.uint8:
        raise ValueError(f"{what} takes uint8 images (as torchvision's JPEG), got "
                         f"{kind.dtype}")


@JPEG.form()
def jpeg(kind: ImageKind, quality: int = 75) -> tuple:
    """torchvision ``JPEG``: the image after a JPEG encode and decode at ``quality`` (1..100,
    libjpeg's scaling of the IJG tables), as libjpeg(-turbo) does it: 4:2:0 chroma for colour
    images, luma only for grey, alpha kept; a float DCT where libjpeg's is integer (within a
    few levels of Pillow's, PSNR >= 44 dB). uint8 images only."""
    _uint8(kind, "jpeg")
    return (float(_quality(quality, "quality")),)


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    lo, hi = args
    # torch.randint(lo, hi + 1): each integer quality equally likely
    q = np.minimum(lo + np.floor(d.u(0) * (hi - lo + 1)), hi)
    return [Emit("jpeg", columns(q, n=len(hw)))]


@JPEG.form(random=True, sample=_sample)
def random_jpeg(kind: ImageKind, quality: Any = (50, 100)) -> tuple:
    """torchvision ``JPEG(quality=(lo, hi))``: ``jpeg`` at a quality drawn per image, each
    integer of [lo, hi] equally likely (one integer: that quality)."""
    _uint8(kind, "random_jpeg")
    if isinstance(quality, Sequence) and not isinstance(quality, str):
        if len(quality) != 2:
            raise ValueError(f"quality must be one integer or (min, max), got {quality!r}")
        lo, hi = _quality(quality[0], "quality[0]"), _quality(quality[1], "quality[1]")
        if lo > hi:
            raise ValueError(f"quality must be (min, max) with min <= max, got {quality!r}")
    else:
        lo = hi = _quality(quality, "quality")
    return float(lo), float(hi)
