"""The training augmentations of gpuimage: geometry, colour, noise and erasing (issue 15).

Like the thesis methods, each validates its arguments, records nodes and returns None. Random
variants draw from the image's counter-based stream (``millipyde.random``) with torchvision's
parameter distributions, so a seed gives the same parameters on any number of devices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import random as mprandom
from ._args import _bounds, _int, _number, _range

#: the methods below (each records under the image's commit lock, as the thesis methods do)
AUGMENT_METHODS = frozenset({
    "resize", "crop", "pad", "warp_affine", "random_affine", "random_resized_crop",
    "adjust_contrast", "adjust_saturation", "adjust_hue", "random_contrast",
    "random_saturation", "random_hue", "gaussian_noise", "random_gaussian_noise", "erase",
    "random_erasing",
})

# draw index of the 64-bit key of a noise op's per-pixel counters (parameter draws use k >= 0,
# the probability coin k = -1)
_NOISE_KEY = -2


def _pair(value: Any, name: str, symmetric: bool = False,
          low: float | None = None) -> tuple[float, float]:
    """A number ``v`` as ``(-v, v)`` (``symmetric``) or a [low, high] pair."""
    if symmetric and not isinstance(value, (Sequence, np.ndarray)):
        v = _number(value, name)
        if v < 0:
            raise ValueError(f"{name} must be >= 0 when a single number, got {v}")
        return -v, v
    lo, hi = _range(value, name)
    if low is not None and lo < low:
        raise ValueError(f"{name} must be >= {low}, got low bound {lo}")
    return lo, hi


def _affine_matrix(h: int, w: int, angle: float, translate: tuple[float, float],
                   scale: float, shear: tuple[float, float]) -> np.ndarray:
    """torchvision's ``_get_inverse_affine_matrix`` about the image centre, in pixels.

    The 2x3 map from output (col, row) to input (col, row): rotation by ``angle`` degrees,
    ``scale``, ``shear`` degrees (x, y), then ``translate`` pixels, all about the centre
    ``((w - 1) / 2, (h - 1) / 2)`` (where torchvision's tensor grid puts it).
    """
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    cx, cy = (w - 1) * 0.5, (h - 1) * 0.5
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    m = [v / scale for v in (d, -b, 0.0, -c, a, 0.0)]
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty) + cx
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty) + cy
    return np.array([m[:3], m[3:]])


def crop_params(height: int, width: int, scale: tuple[float, float],
                ratio: tuple[float, float], u: Any) -> tuple[int, int, int, int]:
    """torchvision ``RandomResizedCrop.get_params`` with uniform draws ``u(k)``: (i, j, h, w)."""
    area = height * width
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for t in range(10):
        target = area * (scale[0] + (scale[1] - scale[0]) * u(4 * t))
        aspect = math.exp(lr[0] + (lr[1] - lr[0]) * u(4 * t + 1))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
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


def erasing_params(height: int, width: int, scale: tuple[float, float],
                   ratio: tuple[float, float], u: Any) -> tuple[int, int, int, int] | None:
    """torchvision ``RandomErasing.get_params`` with draws ``u(k)``: (i, j, h, w), or None
    when ten tries find no window (torchvision then returns the image unchanged)."""
    area = height * width
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for t in range(10):
        target = area * (scale[0] + (scale[1] - scale[0]) * u(4 * t))
        aspect = math.exp(lr[0] + (lr[1] - lr[0]) * u(4 * t + 1))
        h = int(round(math.sqrt(target * aspect)))
        w = int(round(math.sqrt(target / aspect)))
        if not (h < height and w < width):
            continue
        i = int(u(4 * t + 2) * (height - h + 1))
        j = int(u(4 * t + 3) * (width - w + 1))
        return i, j, h, w
    return None


class AugmentMixin:
    """gpuimage methods of issue 15 (see the module docstring)."""

    # -- streams ------------------------------------------------------------------------
    def _key(self) -> mprandom.StreamKey:
        key = mprandom.current_key()
        if key is None:
            key = mprandom.StreamKey(mprandom.global_seed(), self._sample, self._opcount)
            self._opcount += 1
        return key

    def _drawer(self) -> Any:
        """``u(k)``: draw k of this op's stream (drawn only when asked for)."""
        key = self._key()
        return lambda k: mprandom.uniform01(key.seed, key.sample, key.op, k)

    def _value(self, value: Any, name: str) -> float:
        v = _number(value, name)
        if self.dtype == np.uint8 and not (0 <= v <= 255 and v == int(v)):
            raise ValueError(f"{name} must be a whole number in 0..255 for uint8 images, got {v}")
        if self.dtype.kind == "f" and not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1] for float images, got {v}")
        return v

    # -- geometry -----------------------------------------------------------------------
    def resize(self, height: int, width: int) -> None:
        """skimage ``resize(order=1, mode="edge", anti_aliasing=False)`` to height x width."""
        h, w = _int(height, "height", 1), _int(width, "width", 1)
        self._record("resize", (h, w))

    def crop(self, top: int, left: int, height: int, width: int) -> None:
        """``img[top:top + height, left:left + width]``; the window must lie inside."""
        t, lf = _int(top, "top", 0), _int(left, "left", 0)
        h, w = _int(height, "height", 1), _int(width, "width", 1)
        if t + h > self.shape[0]:
            raise ValueError(f"crop top + height ({t + h}) exceeds the image height "
                             f"{self.shape[0]}")
        if lf + w > self.shape[1]:
            raise ValueError(f"crop left + width ({lf + w}) exceeds the image width "
                             f"{self.shape[1]}")
        self._record("crop", (t, lf, h, w))

    def pad(self, top: int, bottom: int, left: int, right: int, value: float = 0) -> None:
        """``np.pad`` of H and W with the constant ``value`` (image units; alpha too)."""
        sides = tuple(_int(v, n, 0) for v, n in ((top, "top"), (bottom, "bottom"),
                                                 (left, "left"), (right, "right")))
        self._record("pad", (*sides, self._value(value, "value")))

    def warp_affine(self, matrix: Any) -> None:
        """skimage ``warp(AffineTransform(matrix=M), order=1, cval=0)``; M (2x3 or 3x3) maps
        output (col, row) to input (col, row)."""
        try:
            m = np.asarray(matrix, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"matrix must be a 2x3 or 3x3 array of numbers, got "
                             f"{type(matrix).__name__}") from None
        if m.shape not in ((2, 3), (3, 3)):
            raise ValueError(f"matrix must be 2x3 or 3x3, got shape {m.shape}")
        if not np.isfinite(m).all():
            raise ValueError("matrix must be finite")
        if m.shape == (3, 3) and not np.array_equal(m[2], [0.0, 0.0, 1.0]):
            raise ValueError(f"matrix must be affine (last row 0, 0, 1), got {m[2].tolist()}")
        self._record("warp_affine", tuple(float(v) for v in m[:2].ravel()))

    def random_affine(self, degrees: Any, translate: Any = None, scale: Any = None,
                      shear: Any = None) -> None:
        """torchvision ``RandomAffine`` parameters about the centre, then ``warp_affine``."""
        deg = _pair(degrees, "degrees", symmetric=True)
        tr = None
        if translate is not None:
            tr = _range(translate, "translate")
            if not (0 <= tr[0] <= 1 and 0 <= tr[1] <= 1):
                raise ValueError(f"translate values must lie in [0, 1], got {tr}")
        sc = None if scale is None else _pair(scale, "scale")
        if sc is not None and sc[0] <= 0:
            raise ValueError(f"scale must be > 0, got {sc}")
        sh = self._shear(shear)
        u = self._drawer()
        h, w = self.shape[0], self.shape[1]
        angle = deg[0] + (deg[1] - deg[0]) * u(0)
        tx = ty = 0.0
        if tr is not None:
            tx = float(round((2 * u(1) - 1) * tr[0] * w))
            ty = float(round((2 * u(2) - 1) * tr[1] * h))
        s = 1.0 if sc is None else sc[0] + (sc[1] - sc[0]) * u(3)
        shx = shy = 0.0
        if sh is not None:
            shx = sh[0] + (sh[1] - sh[0]) * u(4)
            if len(sh) == 4:
                shy = sh[2] + (sh[3] - sh[2]) * u(5)
        m = _affine_matrix(h, w, angle, (tx, ty), s, (shx, shy))
        self._record("warp_affine", tuple(float(v) for v in m.ravel()))

    @staticmethod
    def _shear(shear: Any) -> tuple[float, ...] | None:
        if shear is None:
            return None
        if not isinstance(shear, (Sequence, np.ndarray)) or isinstance(shear, (str, bytes)):
            return _pair(shear, "shear", symmetric=True)
        if len(shear) == 4:
            return _range(shear[:2], "shear") + _range(shear[2:], "shear")
        return _range(shear, "shear")

    def random_resized_crop(self, height: int, width: int,
                            scale: Sequence[float] = (0.08, 1.0),
                            ratio: Sequence[float] = (3 / 4, 4 / 3)) -> None:
        """torchvision ``RandomResizedCrop`` window sampling, then ``crop`` and ``resize``."""
        oh, ow = _int(height, "height", 1), _int(width, "width", 1)
        sc, ra = _range(scale, "scale"), _range(ratio, "ratio")
        if sc[0] < 0:
            raise ValueError(f"scale must be >= 0, got {sc}")
        if ra[0] <= 0:
            raise ValueError(f"ratio must be > 0, got {ra}")
        i, j, h, w = crop_params(self.shape[0], self.shape[1], sc, ra, self._drawer())
        self._record("crop", (i, j, h, w))
        self._record("resize", (oh, ow))

    # -- colour -------------------------------------------------------------------------
    def adjust_contrast(self, factor: float) -> None:
        """torchvision ``adjust_contrast``: blend with the grey mean (alpha untouched)."""
        f = _number(factor, "factor")
        if f < 0:
            raise ValueError(f"adjust_contrast factor must be >= 0, got {f}")
        self._record("adjust_contrast", (f,))

    def adjust_saturation(self, factor: float) -> None:
        """torchvision ``adjust_saturation`` (alpha untouched; a no-op on grey images)."""
        f = _number(factor, "factor")
        if f < 0:
            raise ValueError(f"adjust_saturation factor must be >= 0, got {f}")
        if self.is_colour:
            self._record("adjust_saturation", (f,))

    def adjust_hue(self, delta: float) -> None:
        """torchvision ``adjust_hue`` by ``delta`` in [-0.5, 0.5] (a no-op on grey images)."""
        d = _number(delta, "delta")
        if not -0.5 <= d <= 0.5:
            raise ValueError(f"adjust_hue delta must be in [-0.5, 0.5], got {d}")
        if self.is_colour:
            self._record("adjust_hue", (d,))

    def random_contrast(self, min_factor: float, max_factor: float) -> None:
        """``adjust_contrast`` by a factor drawn uniformly from [min_factor, max_factor]."""
        lo, hi = _bounds(min_factor, max_factor, "min_factor", "max_factor")
        if lo < 0:
            raise ValueError(f"random_contrast min_factor must be >= 0, got {lo}")
        self._record("adjust_contrast", (lo + (hi - lo) * self._drawer()(0),))

    def random_saturation(self, min_factor: float, max_factor: float) -> None:
        """``adjust_saturation`` by a factor drawn uniformly from [min_factor, max_factor]."""
        lo, hi = _bounds(min_factor, max_factor, "min_factor", "max_factor")
        if lo < 0:
            raise ValueError(f"random_saturation min_factor must be >= 0, got {lo}")
        f = lo + (hi - lo) * self._drawer()(0)
        if self.is_colour:
            self._record("adjust_saturation", (f,))

    def random_hue(self, min_delta: float, max_delta: float) -> None:
        """``adjust_hue`` by a delta drawn uniformly from [min_delta, max_delta]."""
        lo, hi = _bounds(min_delta, max_delta, "min_delta", "max_delta")
        if lo < -0.5 or hi > 0.5:
            raise ValueError(f"random_hue bounds must lie in [-0.5, 0.5], got [{lo}, {hi}]")
        d = lo + (hi - lo) * self._drawer()(0)
        if self.is_colour:
            self._record("adjust_hue", (d,))

    # -- noise and erasing --------------------------------------------------------------
    def gaussian_noise(self, sigma: float) -> None:
        """Add N(0, sigma) to values in [0, 1] and clip (alpha untouched); same seed, same
        noise on every device."""
        s = _number(sigma, "sigma")
        if s < 0:
            raise ValueError(f"gaussian_noise sigma must be >= 0, got {s}")
        self._noise(self._key(), s)

    def random_gaussian_noise(self, min_sigma: float, max_sigma: float) -> None:
        """``gaussian_noise`` with sigma drawn uniformly from [min_sigma, max_sigma]."""
        lo, hi = _bounds(min_sigma, max_sigma, "min_sigma", "max_sigma")
        if lo < 0:
            raise ValueError(f"random_gaussian_noise min_sigma must be >= 0, got {lo}")
        key = self._key()
        self._noise(key, lo + (hi - lo) * mprandom.uniform01(key.seed, key.sample, key.op, 0))

    def _noise(self, key: mprandom.StreamKey, sigma: float) -> None:
        k = mprandom.key64(key.seed, key.sample, key.op, _NOISE_KEY)
        # two exact float64 halves: the kernel rebuilds the 64-bit key from them
        self._record("gaussian_noise", (float(k >> 32), float(k & 0xFFFFFFFF), sigma))

    def erase(self, top: int, left: int, height: int, width: int, value: float = 0) -> None:
        """torchvision ``erase``: the window set to ``value`` (image units), every channel."""
        t, lf = _int(top, "top", 0), _int(left, "left", 0)
        h, w = _int(height, "height", 0), _int(width, "width", 0)
        self._record("erase", (t, lf, h, w, self._value(value, "value")))

    def random_erasing(self, scale: Sequence[float] = (0.02, 0.33),
                       ratio: Sequence[float] = (0.3, 3.3), value: float = 0) -> None:
        """torchvision ``RandomErasing`` window sampling, then ``erase`` (its probability is
        the Operation's)."""
        sc, ra = _range(scale, "scale"), _range(ratio, "ratio")
        if sc[0] < 0 or sc[1] > 1:
            raise ValueError(f"scale must lie in [0, 1], got {sc}")
        if ra[0] <= 0:
            raise ValueError(f"ratio must be > 0, got {ra}")
        v = self._value(value, "value")
        win = erasing_params(self.shape[0], self.shape[1], sc, ra, self._drawer())
        if win is not None:
            self._record("erase", (*win, v))
