"""``gpuimage``: a gpuarray with image rules and the thesis's image methods.

Every method validates its arguments, records one node and returns None; nothing runs until the
value is needed. Random variants draw their parameters from the image's counter-based stream.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import random as mprandom
from . import targets
from ._args import _between, _bounds, _number, _range
from .array import gpuarray
from .graph.ir.node import Node
from .image_ops import AUGMENT_METHODS, AugmentMixin
from .kernels import REGISTRY
from .locks import commit_lock


def _colour_to_uint8(host: np.ndarray) -> np.ndarray:
    kind = host.dtype.kind
    if host.dtype == np.uint8:
        return host
    if kind in "iu":
        lo, hi = (int(host.min()), int(host.max())) if host.size else (0, 0)
        if lo < 0 or hi > 255:
            raise ValueError(
                f"gpuimage colour data of dtype {host.dtype} must lie in 0..255, "
                f"found values in {lo}..{hi}"
            )
        return host.astype(np.uint8)
    if kind == "f":
        if host.size and not np.isfinite(host).all():
            raise ValueError("gpuimage colour data contains NaN or infinity")
        if host.size and (host.min() < 0.0 or host.max() > 1.0):
            raise ValueError(
                f"gpuimage float colour data must lie in [0, 1], found "
                f"[{host.min()}, {host.max()}]"
            )
        from skimage.util import img_as_ubyte

        return np.ascontiguousarray(img_as_ubyte(host))
    raise ValueError(f"gpuimage colour data must be integer or float, got {host.dtype}")


def _grey(host: np.ndarray) -> np.ndarray:
    kind = host.dtype.kind
    if kind in "iu":
        return host
    if kind == "b":
        return host.astype(np.float64)
    if kind == "f":
        if host.size and not np.isfinite(host).all():
            raise ValueError("gpuimage greyscale data contains NaN or infinity")
        if host.size and (host.min() < 0.0 or host.max() > 1.0):
            raise ValueError(
                f"gpuimage float greyscale data must lie in [0, 1], found "
                f"[{host.min()}, {host.max()}]"
            )
        return host.astype(np.float64, copy=False)
    raise ValueError(f"gpuimage greyscale data must be real, got {host.dtype}")


#: gpuimage methods that only record graph nodes and never read a value: a batched Generator
#: may record them gated off, and after gated-off nodes (``Operation.apply``).
RECORDING_METHODS = frozenset({
    "rgb2grey", "rgb2gray", "rgba2grey", "rgba2gray", "colorize", "random_colorize",
    "brightness", "random_brightness", "adjust_gamma", "random_adjust_gamma", "transpose",
    "fliplr", "rotate", "random_rotate", "gaussian", "random_gaussian",
})


class gpuimage(AugmentMixin, gpuarray):  # noqa: N801  (the thesis's public name)
    """An image on the device: 2-D greyscale, or H x W x 3 (RGB) / H x W x 4 (RGBA) uint8.

    Colour data of other integer dtypes in 0..255 is converted to uint8, float colour in [0, 1]
    is scaled as ``skimage.img_as_ubyte``; greyscale floats become float64 in [0, 1] and
    greyscale integers are kept as given. Anything else raises ``ValueError``.
    """

    def _convert(self, host: np.ndarray) -> np.ndarray:
        self._check_shape(host.shape)
        if host.ndim == 3:
            return _colour_to_uint8(host)
        return _grey(host)

    def _validate_device_copy(self) -> None:
        self._check_shape(self.shape)
        if self.ndim == 3 and self.dtype != np.uint8:
            raise ValueError(f"gpuimage colour data on the device must be uint8, got {self.dtype}")
        if self.ndim == 2 and self.dtype.kind not in "iuf":
            raise ValueError(f"gpuimage greyscale data must be real, got {self.dtype}")

    @staticmethod
    def _check_shape(shape: tuple[int, ...]) -> None:
        if len(shape) == 2 or (len(shape) == 3 and shape[2] in (3, 4)):
            return
        raise ValueError(
            "gpuimage needs a 2-D greyscale array or an H x W x 3 (RGB) / H x W x 4 (RGBA) "
            f"array, got shape {tuple(shape)}"
        )

    @property
    def is_colour(self) -> bool:
        """True for RGB/RGBA images."""
        return self.ndim == 3

    # -- recording -----------------------------------------------------------------------
    def _record(self, name: str, params: tuple[float, ...] = ()) -> None:
        spec = REGISTRY[name]
        old = self._node
        entry = None
        if targets.ANY and targets.of(old) is not None:
            # before anything is recorded: an op the targets cannot follow changes nothing
            entry = targets.following(old, spec, params, spec.out_shape(old.shape, params))
        node = self._placed()
        if spec.keeps_shape:  # (no ``out_shape`` call on the per-op path)
            new = Node(spec, (node,), params, node.shape, node.dtype, node.device)
        else:
            dtype = np.dtype(np.float64) if spec.kind == "pixel" else node.dtype
            new = Node(spec, (node,), params, spec.out_shape(node.shape, params), dtype,
                       node.device)
        self._bind(new)
        if entry is not None:
            targets.store(new, entry)

    # -- targets -------------------------------------------------------------------------
    def set_targets(self, boxes: Any = None, labels: Any = None, keypoints: Any = None,
                    mask: Any = None, min_area: float = 1.0) -> None:
        """Attach targets that follow this image through geometric ops (``millipyde.targets``):
        ``boxes`` (N, 4) xyxy with ``labels``, ``keypoints`` (K, 2) (x, y), an integer H x W
        ``mask``; boxes smaller than ``min_area`` after an op are dropped."""
        targets.attach(self._node, targets.make(self.shape, boxes, labels, keypoints, mask,
                                                 min_area))

    @property
    def targets(self) -> targets.Targets | None:
        """The attached targets as they are now (None when none are attached)."""
        return targets.of(self._node)

    def _target(self, name: str) -> Any:
        t = targets.of(self._node)
        return None if t is None else getattr(t, name)

    boxes = property(lambda self: self._target("boxes"), doc="(N, 4) xyxy boxes, or None.")
    labels = property(lambda self: self._target("labels"), doc="Labels of the boxes, or None.")
    keypoints = property(lambda self: self._target("keypoints"), doc="(K, 2) (x, y), or None.")
    keypoints_visible = property(lambda self: self._target("visible"),
                                 doc="Which keypoints are inside the image, or None.")
    mask = property(lambda self: self._target("mask"), doc="The H x W mask, or None.")

    def _draws(self, n: int) -> list[float]:
        key = mprandom.current_key()
        if key is None:
            key = mprandom.StreamKey(mprandom.global_seed(), self._sample, self._opcount)
            self._opcount += 1
        return [mprandom.uniform01(key.seed, key.sample, key.op, k) for k in range(n)]

    def _uniform(self, ranges: list[tuple[float, float]]) -> list[float]:
        us = self._draws(len(ranges))
        return [_between(lo, hi, u) for (lo, hi), u in zip(ranges, us, strict=True)]

    # -- colour --------------------------------------------------------------------------
    def rgb2grey(self) -> None:
        """Convert RGB/RGBA to float64 greyscale (alpha blended onto white); no-op on grey."""
        if self.is_colour:
            self._record("rgb2grey")

    rgb2gray = rgb2grey
    rgba2grey = rgb2grey
    rgba2gray = rgb2grey

    def colorize(self, r_mult: float, g_mult: float, b_mult: float) -> None:
        """Multiply the R, G and B channels (clipped to 0..255); colour images only."""
        gains = tuple(_number(v, n) for v, n in ((r_mult, "r_mult"), (g_mult, "g_mult"),
                                                 (b_mult, "b_mult")))
        self._colour_only("colorize")
        for g, n in zip(gains, ("r_mult", "g_mult", "b_mult"), strict=True):
            if g < 0:
                raise ValueError(f"colorize {n} must be >= 0, got {g}")
        self._record("colorize", gains)

    def random_colorize(self, r_range: Sequence[float], g_range: Sequence[float],
                        b_range: Sequence[float]) -> None:
        """``colorize`` with gains drawn uniformly from the three ranges."""
        ranges = [_range(r, n) for r, n in ((r_range, "r_range"), (g_range, "g_range"),
                                            (b_range, "b_range"))]
        self._colour_only("random_colorize")
        for (lo, _), n in zip(ranges, ("r_range", "g_range", "b_range"), strict=True):
            if lo < 0:
                raise ValueError(f"random_colorize {n} must be >= 0, got low bound {lo}")
        self._record("colorize", tuple(self._uniform(ranges)))

    def _unsigned_only(self, what: str) -> None:
        # scikit-image refuses negative values for its exposure corrections; a signed type
        # may hold them, so it is refused by type, when the op is recorded (not by value, which
        # would need the data)
        if self._node.dtype.kind == "i":
            raise ValueError(f"{what} needs an unsigned integer or float image; this one is "
                             f"{self.dtype} (signed values may be negative, which scikit-image "
                             "refuses)")

    def _colour_only(self, what: str) -> None:
        if not self.is_colour:
            raise ValueError(f"{what} needs an RGB/RGBA image; this one is greyscale {self.shape}")

    # -- intensity -----------------------------------------------------------------------
    def brightness(self, delta: float) -> None:
        """Add ``delta`` (fraction of full range, in [-1, 1]) and clip; alpha untouched."""
        d = _number(delta, "delta")
        if not -1.0 <= d <= 1.0:
            raise ValueError(f"brightness delta must be in [-1, 1], got {d}")
        self._record("brightness", (d,))

    def random_brightness(self, min_delta: float, max_delta: float) -> None:
        """``brightness`` with ``delta`` drawn uniformly from [min_delta, max_delta]."""
        lo, hi = _bounds(min_delta, max_delta, "min_delta", "max_delta")
        if lo < -1.0 or hi > 1.0:
            raise ValueError(f"random_brightness min_delta and max_delta must lie in [-1, 1], "
                             f"got [{lo}, {hi}]")
        self._record("brightness", tuple(self._uniform([(lo, hi)])))

    def adjust_gamma(self, gamma: float = 1, gain: float = 1) -> None:
        """skimage ``adjust_gamma``: ``gain * full * (v / full) ** gamma``; alpha untouched."""
        g, k = _number(gamma, "gamma"), _number(gain, "gain")
        if self._node.dtype.kind == "i":  # (``_unsigned_only``'s test: no call per op)
            self._unsigned_only("adjust_gamma")
        if g < 0:
            raise ValueError(f"adjust_gamma gamma must be >= 0, got {g}")
        if k < 0:
            raise ValueError(f"adjust_gamma gain must be >= 0, got {k}")
        self._record("adjust_gamma", (g, k))

    def random_adjust_gamma(self, gamma_range: Sequence[float],
                            gain_range: Sequence[float] = (1.0, 1.0)) -> None:
        """``adjust_gamma`` with gamma and gain drawn uniformly from their ranges."""
        gr, kr = _range(gamma_range, "gamma_range"), _range(gain_range, "gain_range")
        self._unsigned_only("random_adjust_gamma")
        if gr[0] < 0 or kr[0] < 0:
            raise ValueError("random_adjust_gamma ranges must be >= 0")
        self._record("adjust_gamma", tuple(self._uniform([gr, kr])))

    # -- geometry ------------------------------------------------------------------------
    def transpose(self) -> None:
        """Swap the two spatial axes (axes (1, 0, 2) for colour)."""
        self._record("transpose")

    def fliplr(self) -> None:
        """Mirror left to right (``np.fliplr``)."""
        self._record("fliplr")

    def rotate(self, angle: float) -> None:
        """Rotate counter-clockwise by ``angle`` degrees about the centre (bilinear, 0 fill)."""
        self._record("rotate", (_number(angle, "angle"),))

    def random_rotate(self, min_angle: float, max_angle: float) -> None:
        """``rotate`` by an angle drawn uniformly from [min_angle, max_angle]."""
        lo, hi = _bounds(min_angle, max_angle, "min_angle", "max_angle")
        self._record("rotate", tuple(self._uniform([(lo, hi)])))

    # -- filters -------------------------------------------------------------------------
    def gaussian(self, sigma: float = 1) -> None:
        """Gaussian blur (``mode="constant"``, ``truncate=8``); colour per channel, alpha kept."""
        s = _number(sigma, "sigma")
        if s <= 0:
            raise ValueError(f"gaussian sigma must be > 0, got {s}")
        self._record("gaussian", (s, self._reach()))

    def _reach(self) -> int:
        # the furthest any pixel is from another along one axis: a Gaussian's taps beyond it
        # only meet the zero padding (kernels/filters.py bounds the taps by it)
        return max(max(self.shape[:2]) - 1, 0)

    def random_gaussian(self, min_sigma: float, max_sigma: float) -> None:
        """``gaussian`` with sigma drawn from [min_sigma, max_sigma]; sigma 0 leaves it as is."""
        lo, hi = _bounds(min_sigma, max_sigma, "min_sigma", "max_sigma")
        if lo < 0:
            raise ValueError(f"random_gaussian min_sigma must be >= 0, got {lo}")
        (s,) = self._uniform([(lo, hi)])
        if s > 0:
            self._record("gaussian", (s, self._reach()))

    def clone(self) -> gpuimage:
        """Deep copy on the current target device (targets too); a gpuimage."""
        out = super().clone()
        t = targets.of(self._node)
        if t is not None:
            targets.attach(out._node, t)
        return out


def _atomic(method: Callable[..., None]) -> Callable[..., None]:
    """``method`` run under the image's commit lock (``locks.py``): its draws and its record
    land together, never between a Pipeline worker's claim and commit of the same image."""

    @functools.wraps(method)
    def locked(self: gpuimage, *args: object, **kwargs: object) -> None:
        # (``commit_lock``'s lookup first: it makes the lock only on first use)
        with self.__dict__.get("_commit_lock") or commit_lock(self):
            return method(self, *args, **kwargs)

    return locked


for _name in sorted(RECORDING_METHODS | AUGMENT_METHODS):
    setattr(gpuimage, _name, _atomic(getattr(gpuimage, _name)))
