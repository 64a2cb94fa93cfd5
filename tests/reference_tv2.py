"""NumPy transcriptions of torchvision v2's functional ops added with the op library (issue 31):
per-image statistics (autocontrast, equalize), stencils (sharpness, blurs), policies and
perspective. CI has no torchvision; each transcription follows torchvision 0.26's kernel line by
line (uint8 images computed in float32 and cast back, as there; float images in their own
precision) and is checked once against torchvision itself on the GPU machine
(``bench/bench_recipes.py``). Images are H x W (grey) or H x W x C (RGB; RGBA with alpha kept,
as millipyde keeps it, where torchvision refuses four channels).
"""

from __future__ import annotations

import numpy as np

_F = np.float32


def _channels(img: np.ndarray) -> tuple[np.ndarray, int]:
    """The measured channels (C, H, W) of ``img`` (alpha dropped) and how many."""
    if img.ndim == 2:
        return img[None], 1
    c = min(img.shape[2], 3)
    return np.moveaxis(img[..., :c], -1, 0), c


def _back(img: np.ndarray, chw: np.ndarray) -> np.ndarray:
    """``chw`` (the measured channels) put back into a copy of ``img``."""
    out = img.copy()
    if img.ndim == 2:
        out[...] = chw[0]
    else:
        out[..., :chw.shape[0]] = np.moveaxis(chw, 0, -1)
    return out


def bound(dtype: np.dtype) -> float:
    """torchvision's ``_max_value``: the integer type's largest, 1.0 for floats."""
    return float(np.iinfo(dtype).max) if np.dtype(dtype).kind in "iu" else 1.0


def autocontrast(img: np.ndarray) -> np.ndarray:
    """``autocontrast_image``: per channel ``(v - min) / ((max - min) / bound)``, clamped, cast
    (integer images computed in float32)."""
    chw, _ = _channels(img)
    fp = img.dtype.kind == "f"
    x = chw if fp else chw.astype(_F)
    b = bound(img.dtype)
    lo = x.min(axis=(1, 2), keepdims=True)
    hi = x.max(axis=(1, 2), keepdims=True)
    eq = hi == lo
    inv_scale = (hi - lo) * x.dtype.type(1.0 / b)
    lo = np.where(eq, 0, lo).astype(x.dtype)
    inv_scale = np.where(eq, 1, inv_scale).astype(x.dtype)
    out = np.clip((x - lo) / inv_scale, 0, b).astype(img.dtype)
    return _back(img, out)


def to_uint8(img: np.ndarray) -> np.ndarray:
    """``to_dtype_image(image, torch.uint8, scale=True)`` for uint8 and float images."""
    if img.dtype == np.uint8:
        return img
    return (img * (255 + 1.0 - 1e-3)).astype(np.uint8)


def equalize(img: np.ndarray) -> np.ndarray:
    """``equalize_image``: Pillow's table from each channel's 256-bin histogram."""
    chw, c = _channels(img)
    u8 = to_uint8(chw)
    out = np.empty_like(u8)
    for k in range(c):
        flat = u8[k].reshape(-1).astype(np.int64)
        hist = np.bincount(flat, minlength=256)
        cum = np.cumsum(hist)
        top = int(np.argmax(cum))  # the first bin holding the last value
        step = (flat.size - hist[top]) // 255
        if step == 0:
            out[k] = u8[k]
            continue
        lut = np.clip((cum[:-1] + step // 2) // step, 0, 255)
        lut = np.concatenate([[0], lut]).astype(np.uint8)
        out[k] = lut[u8[k]]
    if img.dtype.kind == "f":
        out = out.astype(img.dtype) * (1.0 / 255)
    return _back(img, out)
