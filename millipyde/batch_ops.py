"""Per-Operation vectorised recording for ``batch_arena``: every coin and parameter of a batch's
members drawn at once, bit-identical to what each gpuimage method draws and records for one
output (``image.py``, ``image_ops.py``, ``decorators.py``), applied to a ``batch_chain.VGather``.

A handler gets the batch context (seed, output indices, the Operation's index), the bound
arguments (validated as the method validates them), the members' coins and the gather. Math
whose NumPy form could differ from CPython's in the last bit (``exp``) runs per member through
``math``; NumPy's ``sqrt``, ``rint`` and arithmetic are IEEE operations, the same as Python's.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import batch_math
from . import random as mprandom
from ._args import _bounds, _int, _number, _range
from .batch_chain import Unsupported, VGather
from .decorators import UserOp
from .image import gpuimage
from .image_ops import _NOISE_KEY, _affine_matrix, _pair, crop_params

_I64 = np.int64


def sample_round(seed: int, ks: np.ndarray) -> np.ndarray:
    """The first SplitMix64 rounds of ``random.key64`` (seed, then sample): the same for
    every op of an output (pass it to each op's :class:`Ctx`)."""
    s = ks.astype(np.int64).view(np.uint64)
    return batch_math.mix_rounds(s, np.array([mprandom._mix(seed & mprandom._MASK)],
                                             dtype=np.uint64))[:, 0]


def _word(t: int) -> np.ndarray:
    return np.array([t & mprandom._MASK], dtype=np.uint64)


#: draws ``-1 .. BLOCK - 2`` of an op (the coin, then the first parameters) come in one block
BLOCK = 10
_BLOCK_WORDS = np.array([t & mprandom._MASK for t in range(-1, BLOCK - 1)], dtype=np.uint64)


class Ctx:
    """What a handler draws from: the seed, the members' output indices, the op's index.

    The first two SplitMix64 rounds of ``random.key64`` depend only on (seed, sample, op):
    they are computed once per op and batch, and the coin and first draws in one more round
    over an (n, BLOCK) block (``batch_math.mix_uniforms``: integer arithmetic); the values
    are ``random.uniform01_array``'s, bit for bit.
    """

    def __init__(self, seed: int, ks: np.ndarray, j: int, _z: np.ndarray | None = None,
                 _block: np.ndarray | None = None, _z1: np.ndarray | None = None) -> None:
        self.seed, self.ks, self.j = seed, ks, j
        if _z is None:
            z = sample_round(seed, ks) if _z1 is None else _z1
            _z = batch_math.mix_rounds(z, _word(j))[:, 0]
        self._z = _z
        self._block = _block

    def block(self) -> np.ndarray:
        """(n, BLOCK) draws ``-1 .. BLOCK - 2`` (column ``t + 1``)."""
        if self._block is None:
            self._block = batch_math.mix_uniforms(self._z, _BLOCK_WORDS)
        return self._block

    def coins(self, probability: float | None) -> np.ndarray:
        """``random.gate_array`` of every member."""
        if probability is None:
            return np.ones(len(self.ks), dtype=bool)
        return self.block()[:, 0] < probability

    def sub(self, rows: np.ndarray) -> Ctx:
        """The members ``rows`` only."""
        return Ctx(self.seed, self.ks[rows], self.j, self._z[rows],
                   None if self._block is None else self._block[rows])

    def u(self, t: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Draw ``t`` of this op's stream for every member (or ``rows``)."""
        if -1 <= t < BLOCK - 1:
            b = self.block()[:, t + 1]
            return b if rows is None else b[rows]
        z = self._z if rows is None else self._z[rows]
        return batch_math.mix_uniforms(z, _word(t))[:, 0]

    def key64(self, t: int) -> np.ndarray:
        """``random.key64(seed, k, j, t)`` of every member (uint64)."""
        return batch_math.mix_rounds(self._z, _word(t))[:, 0]


def between(lo: float, hi: float, u: np.ndarray) -> np.ndarray:
    """``_args._between`` of every draw."""
    if lo == hi:
        return np.full(len(u), lo)
    span = hi - lo
    if math.isfinite(span):
        return lo + span * u
    return np.minimum(np.maximum(lo * (1.0 - u) + hi * u, lo), hi)


def _once(a: dict, name: str, make: Callable[[], Any]) -> Any:
    """``make()`` parsed once per Operation (kept in its bound arguments)."""
    key = "\0" + name
    if key not in a:
        a[key] = make()
    return a[key]


def _col(*cols: Any, n: int) -> np.ndarray:
    return np.stack([np.broadcast_to(np.asarray(c, dtype=np.float64), (n,)) for c in cols],
                    axis=1)


def _exp(x: np.ndarray) -> np.ndarray:
    return np.array([math.exp(v) for v in x.tolist()])


def _windows(hw: np.ndarray, scale: tuple, ratio: tuple, c: Ctx,
             erasing: bool) -> tuple[np.ndarray, np.ndarray]:
    """torchvision's ten tries of a random window for every member at once: (n, 4) windows
    (top, left, height, width) and the members no try fitted. RandomResizedCrop takes the
    aspect as width / height and accepts windows inside the image; RandomErasing takes it as
    height / width and accepts windows strictly smaller than it."""
    n = len(hw)
    H, W = hw[:, 0], hw[:, 1]
    area = H * W
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    out = np.zeros((n, 4), dtype=_I64)
    pending = np.arange(n)
    for t in range(10):
        if not len(pending):
            break
        target = area[pending] * (scale[0] + (scale[1] - scale[0]) * c.u(4 * t, pending))
        aspect = _exp(lr[0] + (lr[1] - lr[0]) * c.u(4 * t + 1, pending))
        a = np.rint(np.sqrt(target * aspect)).astype(_I64)
        b = np.rint(np.sqrt(target / aspect)).astype(_I64)
        if erasing:
            h, w = a, b
            ok = (h < H[pending]) & (w < W[pending])
        else:
            w, h = a, b
            ok = (w > 0) & (w <= W[pending]) & (h > 0) & (h <= H[pending])
        rows = pending[ok]
        i = (c.u(4 * t + 2, rows) * (H[rows] - h[ok] + 1)).astype(_I64)
        jj = (c.u(4 * t + 3, rows) * (W[rows] - w[ok] + 1)).astype(_I64)
        out[rows] = np.stack([i, jj, h[ok], w[ok]], axis=1)
        pending = pending[~ok]
    return out, pending


def crop_windows(hw: np.ndarray, scale: tuple, ratio: tuple, c: Ctx) -> np.ndarray:
    """``image_ops.crop_params`` of every member (hw: (n, 2) input sizes): (n, 4) windows."""
    out, pending = _windows(hw, scale, ratio, c, erasing=False)
    for r in pending.tolist():  # ten misses: torchvision's central fallback, per member
        out[r] = crop_params(int(hw[r, 0]), int(hw[r, 1]), scale, ratio,
                             lambda k, r=r: mprandom.uniform01(c.seed, int(c.ks[r]), c.j, k))
    return out


def erasing_windows(hw: np.ndarray, scale: tuple, ratio: tuple,
                    c: Ctx) -> tuple[np.ndarray, np.ndarray]:
    """``image_ops.erasing_params`` of every member: (n, 4) windows, and which found one."""
    out, pending = _windows(hw, scale, ratio, c, erasing=True)
    found = np.ones(len(hw), dtype=bool)
    found[pending] = False
    return out, found


# --------------------------------------------------------------------------- handlers

Handler = Callable[[VGather, Ctx, dict, np.ndarray], None]
HANDLERS: dict[str, Handler] = {}
#: methods whose recording changes the image's size (their coins split a batch's structure)
RESHAPES = frozenset({"crop", "pad", "resize", "random_resized_crop"})


def _handler(*names: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = fn
        return fn
    return deco


@_handler("fliplr")
def _fliplr(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    g.index_map("fliplr", None, on)


@_handler("crop")
def _crop(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    t, lf = _int(a["top"], "top", 0), _int(a["left"], "left", 0)
    h, w = _int(a["height"], "height", 1), _int(a["width"], "width", 1)
    g.left |= (t + h > g.cur[:, 0]) | (lf + w > g.cur[:, 1])  # the method's ValueError
    g.index_map("crop", _col(t, lf, h, w, n=g.n), on)


@_handler("pad")
def _pad(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    sides = [_int(a[n], n, 0) for n in ("top", "bottom", "left", "right")]
    g.index_map("pad", _col(*sides, _number(a["value"], "value"), n=g.n), on)


def _resize_to(g: VGather, h: int, w: int, on: np.ndarray) -> None:
    g.sampler("resize", _col(h, w, n=g.n), on, np.tile([h, w], (g.n, 1)))


@_handler("resize")
def _resize(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    _resize_to(g, _int(a["height"], "height", 1), _int(a["width"], "width", 1), on)


@_handler("random_resized_crop")
def _rrc(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    oh, ow, sc, ra = _once(a, "rrc", lambda: (
        _int(a["height"], "height", 1), _int(a["width"], "width", 1),
        _range(a["scale"], "scale"), _range(a["ratio"], "ratio")))
    win = crop_windows(g.cur, sc, ra, c)
    g.index_map("crop", win.astype(np.float64), on)
    _resize_to(g, oh, ow, on)


@_handler("warp_affine")
def _warp(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    m = np.asarray(a["matrix"], dtype=np.float64)[:2].ravel()
    g.sampler("warp_affine", np.tile(m, (g.n, 1)), on)


@_handler("random_affine")
def _random_affine(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    deg = _pair(a["degrees"], "degrees", symmetric=True)
    tr = None if a["translate"] is None else _range(a["translate"], "translate")
    sc = None if a["scale"] is None else _pair(a["scale"], "scale")
    sh = gpuimage._shear(a["shear"])
    u = [c.u(t).tolist() for t in range(6)]
    rows = []
    for m, (h, w) in enumerate(g.cur.tolist()):  # per member: cos/sin/tan as CPython's
        angle = deg[0] + (deg[1] - deg[0]) * u[0][m]
        tx = ty = 0.0
        if tr is not None:
            tx = float(round((2 * u[1][m] - 1) * tr[0] * w))
            ty = float(round((2 * u[2][m] - 1) * tr[1] * h))
        s = 1.0 if sc is None else sc[0] + (sc[1] - sc[0]) * u[3][m]
        shx = shy = 0.0
        if sh is not None:
            shx = sh[0] + (sh[1] - sh[0]) * u[4][m]
            if len(sh) == 4:
                shy = sh[2] + (sh[3] - sh[2]) * u[5][m]
        rows.append(_affine_matrix(h, w, angle, (tx, ty), s, (shx, shy)).ravel())
    g.sampler("warp_affine", np.array(rows).reshape(g.n, 6), on)


@_handler("rotate", "random_rotate")
def _rotate(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    if "angle" in a:
        angle = np.full(g.n, _number(a["angle"], "angle"))
    else:
        angle = between(*_bounds(a["min_angle"], a["max_angle"], "", ""), c.u(0))
    g.sampler("rotate", angle[:, None], on)


def _chain(name: str, *cols: Any) -> Callable[[VGather, np.ndarray], None]:
    return lambda g, on: g.chain(name, _col(*cols, n=g.n), on)


@_handler("brightness", "random_brightness")
def _brightness(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    d = _number(a["delta"], "delta") if "delta" in a else \
        between(*_bounds(a["min_delta"], a["max_delta"], "", ""), c.u(0))
    _chain("brightness", d)(g, on)


@_handler("colorize", "random_colorize")
def _colorize(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    if "r_mult" in a:
        gains = [_number(a[n], n) for n in ("r_mult", "g_mult", "b_mult")]
    else:
        gains = [between(*_range(a[n], n), c.u(t))
                 for t, n in enumerate(("r_range", "g_range", "b_range"))]
    _chain("colorize", *gains)(g, on)


@_handler("adjust_gamma", "random_adjust_gamma")
def _gamma(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    if "gamma" in a:
        vals = [_number(a["gamma"], "gamma"), _number(a["gain"], "gain")]
    else:
        vals = [between(*_range(a["gamma_range"], ""), c.u(0)),
                between(*_range(a["gain_range"], ""), c.u(1))]
    _chain("adjust_gamma", *vals)(g, on)


def _factor(a: dict, c: Ctx, name: str) -> Any:
    if name in a:
        return _once(a, name, lambda: _number(a[name], name))
    lo, hi = _once(a, name, lambda: _bounds(a[f"min_{name}"], a[f"max_{name}"], "", ""))
    return lo + (hi - lo) * c.u(0)


@_handler("adjust_contrast", "random_contrast")
def _contrast(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    _chain("adjust_contrast", _factor(a, c, "factor"))(g, on)


@_handler("adjust_saturation", "random_saturation")
def _saturation(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    f = _factor(a, c, "factor")
    if g.cin >= 3:  # a no-op on grey images (nothing recorded)
        _chain("adjust_saturation", f)(g, on)


@_handler("adjust_hue", "random_hue")
def _hue(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    d = _factor(a, c, "delta")
    if g.cin >= 3:
        _chain("adjust_hue", d)(g, on)


@_handler("gaussian_noise", "random_gaussian_noise")
def _noise(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    s = _factor(a, c, "sigma")
    k = c.key64(_NOISE_KEY)
    # the method's two exact float64 halves of the 64-bit key
    _chain("gaussian_noise", (k >> np.uint64(32)).astype(np.float64),
           (k & np.uint64(0xFFFFFFFF)).astype(np.float64), s)(g, on)


@_handler("erase")
def _erase(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    vals = [_int(a[n], n, 0) for n in ("top", "left", "height", "width")]
    _chain("erase", *vals, _number(a["value"], "value"))(g, on)


@_handler("random_erasing")
def _random_erasing(g: VGather, c: Ctx, a: dict, on: np.ndarray) -> None:
    win, found = erasing_windows(g.cur, _range(a["scale"], "scale"),
                                 _range(a["ratio"], "ratio"), c)
    # no window found: the method records nothing, as a skipped coin
    _chain("erase", *win.T, _number(a["value"], "value"))(g, on & found)


def user_op(g: VGather, c: Ctx, fn: UserOp, params: tuple, on: np.ndarray) -> None:
    """A user ``@mp.elementwise`` / ``@mp.pixelwise`` / ``@mp.index_map`` op
    (``UserOp._values``' draws)."""
    cols = []
    for i, p in enumerate(params):
        if isinstance(p, (tuple, list, np.ndarray)):
            lo, hi = _range(p, "") if len(p) != 2 or not all(
                type(v) is float for v in p) else p
            cols.append(lo + (hi - lo) * c.u(i))
        else:
            cols.append(_number(p, ""))
    vals = _col(*cols, n=g.n) if cols else np.zeros((g.n, 0))
    if fn.kind != "index_map":
        g.chain(fn.name, vals, on)
        return
    if not on.all():  # pragma: no cover - the recorder splits a user map's coins
        raise Unsupported("a user map gated off")
    spec = fn.spec
    out = [spec.out_shape((h, w), tuple(v))[:2] for (h, w), v in zip(
        g.cur.tolist(), vals.tolist(), strict=True)]
    g.user_map(fn.name, vals, np.array(out, dtype=np.int64))


def bound_args(op: Any) -> dict | None:
    """A method Operation's arguments by name, defaults applied (None: not a handled method)."""
    if op.method not in HANDLERS:
        return None
    sig = inspect.signature(getattr(gpuimage, op.method))
    bound = sig.bind(None, *op.args, **op.kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)
