"""NumPy transcriptions of kornia's and torchvision v2's geometric transforms added with the
geometric ops (translate, shear, perspective): CI has neither library.
Each follows the library's own pipeline (kornia: ``normalize_homography``, ``affine_grid``,
``grid_sample``), not millipyde's formulas; uint8 images are computed in float64 and rounded back
(the libraries take float tensors), compared within one level."""

from __future__ import annotations

import math

import numpy as np


def _to_dtype(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if np.dtype(dtype).kind in "ui":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    return values.astype(dtype)


def grid_sample_zeros(img: np.ndarray, sx: np.ndarray, sy: np.ndarray) -> np.ndarray:
    """``grid_sample(mode="bilinear", padding_mode="zeros")`` at pixel positions (``sx``,
    ``sy``) (arrays of the output's shape): each of the four taps outside the image reads 0."""
    x = img.astype(np.float64)
    if x.ndim == 2:
        x = x[..., None]
    h, w = x.shape[:2]
    x0 = np.floor(sx).astype(np.int64)
    y0 = np.floor(sy).astype(np.int64)
    fx = (sx - x0)[..., None]
    fy = (sy - y0)[..., None]
    out = np.zeros(sx.shape + (x.shape[2],))
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            yy, xx = y0 + dy, x0 + dx
            ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            tap = np.zeros_like(out)
            tap[ok] = x[yy[ok], xx[ok]]
            out += wy * wx * tap
    if img.ndim == 2:
        out = out[..., 0]
    return _to_dtype(out, img.dtype)


def _normal(h: int, w: int) -> np.ndarray:
    """kornia ``normal_transform_pixel``: pixels to [-1, 1] by the corners' (size - 1)."""
    eps = 1e-14
    wd = eps if w == 1 else w - 1.0
    hd = eps if h == 1 else h - 1.0
    return np.array([[2.0 / wd, 0.0, -1.0], [0.0, 2.0 / hd, -1.0], [0.0, 0.0, 1.0]])


def kornia_warp_affine(img: np.ndarray, m: np.ndarray) -> np.ndarray:
    """kornia ``warp_affine(src, M, dsize=(h, w), align_corners=False)`` (bilinear, zeros)."""
    h, w = img.shape[:2]
    m3 = np.vstack([np.asarray(m, dtype=np.float64)[:2], [0.0, 0.0, 1.0]])
    n = _normal(h, w)
    dst_from_src = n @ m3 @ np.linalg.inv(n)
    src_from_dst = np.linalg.inv(dst_from_src)
    # affine_grid(align_corners=False): pixel centres ((2 j + 1) / w - 1)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    gx = (2 * xx + 1) / w - 1
    gy = (2 * yy + 1) / h - 1
    px = src_from_dst[0, 0] * gx + src_from_dst[0, 1] * gy + src_from_dst[0, 2]
    py = src_from_dst[1, 0] * gx + src_from_dst[1, 1] * gy + src_from_dst[1, 2]
    # grid_sample(align_corners=False): back to pixels
    return grid_sample_zeros(img, ((px + 1) * w - 1) / 2, ((py + 1) * h - 1) / 2)


def translation_matrix(dx: float, dy: float) -> np.ndarray:
    """kornia ``get_translation_matrix2d``."""
    return np.array([[1.0, 0.0, dx], [0.0, 1.0, dy], [0.0, 0.0, 1.0]])


def shear_matrix(h: int, w: int, shx: float, shy: float) -> np.ndarray:
    """kornia ``RandomShear``'s ``get_shear_matrix2d(center, deg2rad(sx), deg2rad(sy))`` about
    ``center = (w, h) / 2 - 0.5``."""
    x, y = w / 2.0 - 0.5, h / 2.0 - 0.5
    tx, ty = math.tan(math.radians(shx)), math.tan(math.radians(shy))
    return np.array([[1.0, -tx, tx * y], [-ty, 1.0 + tx * ty, ty * (tx * y + x)],
                     [0.0, 0.0, 1.0]])


def perspective_coeffs(startpoints, endpoints) -> list[float]:
    """torchvision ``_get_perspective_coeffs``: least squares in float64, then float32."""
    a = np.zeros((8, 8))
    for i, (p1, p2) in enumerate(zip(endpoints, startpoints, strict=True)):
        a[2 * i] = [p1[0], p1[1], 1, 0, 0, 0, -p2[0] * p1[0], -p2[0] * p1[1]]
        a[2 * i + 1] = [0, 0, 0, p1[0], p1[1], 1, -p2[1] * p1[0], -p2[1] * p1[1]]
    b = np.asarray(startpoints, dtype=np.float64).reshape(8)
    res = np.linalg.lstsq(a, b, rcond=None)[0]
    return res.astype(np.float32).astype(np.float64).tolist()


def perspective(img: np.ndarray, coeffs) -> np.ndarray:
    """torchvision v2 ``perspective_image(..., interpolation=BILINEAR, fill=None)``:
    ``_perspective_grid`` (pixel centres ``j + 0.5``, the division, then ``/ (size / 2) - 1``)
    and ``grid_sample(align_corners=False, padding_mode="zeros")``, in float32 for integer
    images as there (``img.dtype`` for float ones)."""
    dt = np.float32 if img.dtype.kind in "ui" else img.dtype.type
    h, w = img.shape[:2]
    c = np.asarray(coeffs, dtype=dt)
    xs = np.linspace(0.5, w - 0.5, w, dtype=dt)[None, :]
    ys = np.linspace(0.5, h - 0.5, h, dtype=dt)[:, None]
    den = c[6] * xs + c[7] * ys + dt(1.0)
    gx = (c[0] * xs + c[1] * ys + c[2]) / dt(0.5 * w) / den - dt(1.0)
    gy = (c[3] * xs + c[4] * ys + c[5]) / dt(0.5 * h) / den - dt(1.0)
    px = ((gx.astype(np.float64) + 1) * w - 1) / 2
    py = ((gy.astype(np.float64) + 1) * h - 1) / 2
    return grid_sample_zeros(img, px, py)


def random_perspective_endpoints(h: int, w: int, scale: float, draws) -> list[list[int]]:
    """torchvision ``RandomPerspective.make_params``'s end points, ``torch.randint(lo, hi)`` of
    draw ``t`` as ``lo + int(u * (hi - lo))``."""
    bh = int(scale * (h // 2)) + 1
    bw = int(scale * (w // 2)) + 1

    def randint(lo, hi, t):
        return lo + min(int(draws[t] * (hi - lo)), hi - lo - 1)

    return [[randint(0, bw, 0), randint(0, bh, 1)], [randint(w - bw, w, 2), randint(0, bh, 3)],
            [randint(w - bw, w, 4), randint(h - bh, h, 5)],
            [randint(0, bw, 6), randint(h - bh, h, 7)]]


def pad_if_needed_sides(h: int, w: int, min_height: int, min_width: int, position: str,
                        draws=(0.0, 0.0)) -> tuple[int, int, int, int]:
    """albumentations ``PadIfNeeded``'s (top, bottom, left, right): ``get_pad_dims`` (the
    shortfall's floor half on top / left) and ``adjust_padding_by_position``; ``random``:
    ``random.randint(0, pad)`` of each draw."""
    dh, dw = max(min_height - h, 0), max(min_width - w, 0)
    top, bottom, left, right = dh // 2, dh - dh // 2, dw // 2, dw - dw // 2
    if position == "top_left":
        top, bottom, left, right = 0, top + bottom, 0, left + right
    elif position == "top_right":
        top, bottom, left, right = 0, top + bottom, left + right, 0
    elif position == "bottom_left":
        top, bottom, left, right = top + bottom, 0, 0, left + right
    elif position == "bottom_right":
        top, bottom, left, right = top + bottom, 0, left + right, 0
    elif position == "random":
        top = min(int(draws[0] * (dh + 1)), dh)
        left = min(int(draws[1] * (dw + 1)), dw)
        bottom, right = dh - top, dw - left
    return top, bottom, left, right


def zoom_out_sides(h: int, w: int, side_range, p: float, draws) -> tuple[int, int, int, int]:
    """torchvision ``RandomZoomOut.make_params``' padding as (top, bottom, left, right) (zeros
    where its coin, draw 3, says no)."""
    if not draws[3] < p:
        return 0, 0, 0, 0
    r = side_range[0] + draws[0] * (side_range[1] - side_range[0])
    cw, ch = int(w * r), int(h * r)
    left = int((cw - w) * draws[1])
    top = int((ch - h) * draws[2])
    return top, ch - (top + h), left, cw - (left + w)


def pad(img: np.ndarray, top: int, bottom: int, left: int, right: int, fill=0) -> np.ndarray:
    widths = ((top, bottom), (left, right)) + (((0, 0),) if img.ndim == 3 else ())
    return np.pad(img, widths, mode="constant", constant_values=fill).astype(img.dtype)
