"""``random_resized_crop``: torchvision's ``RandomResizedCrop`` window, then ``crop`` and
``resize`` (scikit-image's)."""

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..base import Draws, Emit, ImageKind, between, between1, define, integer, span
from .crop import CROP, crop_window
from .resize import resize_map, resize_to


def crop_params(height: int, width: int, scale: tuple[float, float],
                ratio: tuple[float, float], u: Callable[[int], float]) -> tuple[int, int, int, int]:
    """torchvision ``RandomResizedCrop.get_params`` with uniform draws ``u(k)``: (i, j, h, w).

    An empty image's window is the whole (empty) image: its resize reads only the zero
    outside it. Draws beyond float64 (``scale=(0, 1e308)``) are windows that do not fit.
    """
    if height <= 0 or width <= 0:
        return 0, 0, height, width
    area = height * width
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for t in range(10):
        target = area * between1(scale[0], scale[1], u(4 * t))
        aspect = _exp1(between1(lr[0], lr[1], u(4 * t + 1)))
        fw, fh = math.sqrt(target * aspect), math.sqrt(target / aspect)
        if not (fw <= width + 1 and fh <= height + 1):  # (also NaN and infinities)
            continue
        w = int(round(fw))
        h = int(round(fh))
        if 0 < w <= width and 0 < h <= height:
            i = int(u(4 * t + 2) * (height - h + 1))
            j = int(u(4 * t + 3) * (width - w + 1))
            return i, j, h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def _exp1(v: float) -> float:
    """``math.exp``, infinite where it overflows (an extreme ``ratio``: no window fits)."""
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _exp(x: np.ndarray) -> np.ndarray:
    # math.exp per value: NumPy's exp may differ from CPython's in the last bit (mapped:
    # no Python call per value; the per-value path only where one overflows); x is 1-D
    vals = x.tolist()
    try:
        return np.array(list(map(math.exp, vals)), dtype=np.float64)
    except OverflowError:
        return np.array([_exp1(v) for v in vals], dtype=np.float64)


def _uniforms(d: Draws, ts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(len(rows), len(ts)) draws ``ts`` of the images ``rows``: at once where ``d`` can
    (``batch_ops.Ctx.uniforms``), else one ``u`` per draw."""
    many = getattr(d, "uniforms", None)
    if many is not None:
        return many(ts, rows)
    return np.stack([d.u(int(t))[rows] for t in ts], axis=1).reshape(len(rows), len(ts))


def random_windows(hw: np.ndarray, scale: tuple, ratio: tuple, d: Draws,
                   erasing: bool) -> tuple[np.ndarray, np.ndarray]:
    """torchvision's ten tries of a random window for every image at once: (n, 4) windows
    (top, left, height, width) and the images no try fitted. RandomResizedCrop takes the
    aspect as width / height and accepts windows inside the image; RandomErasing takes it as
    height / width and accepts windows strictly smaller than it.

    The first try for every image, then the nine others at once for the images it missed
    (each image's first try that fits; the same values per try as one try at a time).
    Draws that offer ``windows`` (``batch_ops.Ctx``: compiled, the same values) give them."""
    fast = getattr(d, "windows", None)
    if fast is not None:
        got = fast(hw, scale, ratio, erasing)
        if got is not None:
            return got
    n = len(hw)
    H, W = hw[:, 0], hw[:, 1]
    area = H * W
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    out = np.zeros((n, 4), dtype=np.int64)
    pending = np.arange(n)
    # an empty image has no window (the resized crop then reads its whole, empty, self)
    pending = pending[area[pending] > 0]
    for tries in _TRIES:
        if not len(pending):
            break
        k = len(tries)
        # (p, k, 4): draws 4 t .. 4 t + 3 of each try t
        u = _uniforms(d, (4 * tries[:, None] + np.arange(4)).reshape(-1),
                      pending).reshape(len(pending), k, 4)
        aspect = _exp(between(lr[0], lr[1], u[:, :, 1].reshape(-1))).reshape(-1, k)
        Hp, Wp = H[pending][:, None], W[pending][:, None]
        with np.errstate(all="ignore"):  # extreme scale or ratio: inf or 0, no fit below
            target = area[pending][:, None] * between(scale[0], scale[1],
                                                      u[:, :, 0].reshape(-1)).reshape(-1, k)
            fa, fb = np.rint(np.sqrt(target * aspect)), np.rint(np.sqrt(target / aspect))
        # sides beyond the image never fit: clipped (beyond either side) before the integer
        # cast, NaN and infinities too
        big = np.maximum(Hp, Wp) + 1
        a = np.where(np.isfinite(fa), np.minimum(fa, big), big).astype(np.int64)
        b = np.where(np.isfinite(fb), np.minimum(fb, big), big).astype(np.int64)
        if erasing:
            h, w = a, b
            ok = (h < Hp) & (w < Wp)
        else:
            w, h = a, b
            ok = (w > 0) & (w <= Wp) & (h > 0) & (h <= Hp)
        hit = ok.any(axis=1)
        r = np.flatnonzero(hit)
        f = np.argmax(ok[r], axis=1)  # each image's first try that fits
        rows = pending[r]
        hh, ww = h[r, f], w[r, f]
        out[rows, 0] = (u[r, f, 2] * (H[rows] - hh + 1)).astype(np.int64)
        out[rows, 1] = (u[r, f, 3] * (W[rows] - ww + 1)).astype(np.int64)
        out[rows, 2] = hh
        out[rows, 3] = ww
        pending = pending[~hit]
    return out, pending


#: ``random_windows``' rounds: the first try, then the nine others
_TRIES = (np.arange(1), np.arange(1, 10))


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    oh, ow, sc, ra = args
    win, pending = random_windows(hw, sc, ra, d, erasing=False)
    for r in pending.tolist():  # ten misses: torchvision's central fallback, per image
        win[r] = crop_params(int(hw[r, 0]), int(hw[r, 1]), sc, ra, d.member(r))
    return [Emit(CROP.kernels[0], win.astype(np.float64)), resize_to(oh, ow, len(hw))]


RRC = define("random_resized_crop", "geometry", [crop_window, resize_map],
             reference="torchvision RandomResizedCrop.get_params, then skimage resize")


@RRC.form(random=True, sample=_sample)
def random_resized_crop(kind: ImageKind, height: int, width: int,
                        scale: Sequence[float] = (0.08, 1.0),
                        ratio: Sequence[float] = (3 / 4, 4 / 3)) -> tuple:
    """torchvision ``RandomResizedCrop`` window sampling, then ``crop`` and ``resize``."""
    oh, ow = integer(height, "height", 1), integer(width, "width", 1)
    sc, ra = span(scale, "scale"), span(ratio, "ratio")
    if sc[0] < 0:
        raise ValueError(f"scale must be >= 0, got {sc}")
    if ra[0] <= 0:
        raise ValueError(f"ratio must be > 0, got {ra}")
    return oh, ow, sc, ra
