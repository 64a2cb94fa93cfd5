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


# --------------------------------------------------------------------------- filters
def _conv2d_valid(x: np.ndarray, k2: np.ndarray) -> np.ndarray:
    """torch's ``conv2d`` (a correlation) of each channel of (C, H, W) ``x`` with ``k2``, no
    padding, summed in the kernel's row-major order in ``x``'s dtype."""
    kh, kw = k2.shape
    h, w = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], h, w), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            out += k2[i, j] * x[:, i:i + h, j:j + w]
    return out


def adjust_sharpness(img: np.ndarray, factor: float) -> np.ndarray:
    """``adjust_sharpness_image``: the 3x3 kernel (1 1 1 / 1 5 1 / 1 1 1) / 13 on the interior
    (rounded on integer images), blended ``v + (1 - f)(blurred - v)``, clamped, cast; images
    of 2 or fewer rows or columns and the border pixels as they are."""
    chw, _ = _channels(img)
    h, w = chw.shape[1:]
    if h <= 2 or w <= 2:
        return img.copy()
    fp = img.dtype.kind == "f"
    dt = img.dtype if fp else np.dtype(_F)
    a, b = dt.type(1.0 / 13.0), dt.type(5.0 / 13.0)
    k2 = np.array([[a, a, a], [a, b, a], [a, a, a]], dtype=dt)
    out = chw.astype(dt)
    blurred = _conv2d_valid(out, k2)
    if not fp:
        blurred = np.round(blurred)
    view = out[:, 1:-1, 1:-1]
    view += (blurred - view) * dt.type(1.0 - factor)
    out = np.clip(out, 0, bound(img.dtype))
    return _back(img, out.astype(img.dtype))


def gaussian_kernel1d(k: int, sigma: float, dtype=np.float32) -> np.ndarray:
    """``_get_gaussian_kernel1d``: ``softmax(-(x / sigma)**2)``, x evenly in [-lim, lim]."""
    lim = (k - 1) / (2.0 * np.sqrt(2.0))
    x = np.linspace(-lim, lim, k).astype(dtype)
    e = -((x / dtype(sigma)) ** 2)
    p = np.exp(e - e.max())
    return (p / p.sum()).astype(dtype)


def gaussian_blur(img: np.ndarray, kernel_size, sigma=None) -> np.ndarray:
    """``gaussian_blur_image``: reflect padding, the 2-D kernel (outer product of the 1-D ones,
    x first as torchvision orders them), a correlation; integer images in float32, rounded."""
    kx, ky = (kernel_size, kernel_size) if np.isscalar(kernel_size) else kernel_size
    if sigma is None:
        sx, sy = kx * 0.15 + 0.35, ky * 0.15 + 0.35
    else:
        sx, sy = (sigma, sigma) if np.isscalar(sigma) else sigma
    chw, _ = _channels(img)
    fp = img.dtype.kind == "f"
    dt = img.dtype.type if fp else _F
    k2 = gaussian_kernel1d(ky, sy, dt)[:, None] * gaussian_kernel1d(kx, sx, dt)[None, :]
    x = np.pad(chw.astype(dt), ((0, 0), (ky // 2, ky // 2), (kx // 2, kx // 2)), mode="reflect")
    out = _conv2d_valid(x, k2)
    if not fp:
        out = np.round(out)
    return _back(img, out.astype(img.dtype))


SCIPY_MODES = {"reflect": "mirror", "symmetric": "reflect", "edge": "nearest",
               "constant": "constant"}


def _scipy_filter(img: np.ndarray, fn, mode: str, **kw) -> np.ndarray:
    """A scipy.ndimage filter of each measured channel in float64, rounded back on integers
    (millipyde's border names mapped to SciPy's)."""
    chw, c = _channels(img)
    out = np.stack([fn(chw[k].astype(np.float64), mode=SCIPY_MODES[mode], **kw)
                    for k in range(c)])
    if img.dtype.kind in "iu":
        out = np.clip(np.rint(out), 0, bound(img.dtype))
    return _back(img, out.astype(img.dtype))


def box_blur(img: np.ndarray, size, mode: str = "reflect") -> np.ndarray:
    """scipy.ndimage.uniform_filter (``size`` one or (rows, columns))."""
    from scipy import ndimage

    return _scipy_filter(img, ndimage.uniform_filter, mode, size=size)


def median_blur(img: np.ndarray, size: int, mode: str = "reflect") -> np.ndarray:
    """scipy.ndimage.median_filter of a ``size`` x ``size`` window."""
    from scipy import ndimage

    return _scipy_filter(img, ndimage.median_filter, mode, size=size)
