"""The kernel registry: name -> OpSpec. Kernel math is declared once here, as scalar Python.

Kinds (what the fuser and code generator need to know about an op):

- ``elementwise``: ``f(v, c, full, a, b, d) -> v`` per channel value; alpha passes through.
  An op that reads a per-image statistic (``stat``, one of ``kernels.stats.STATISTICS``) is
  ``f(v, c, full, a, b, st, o) -> v``: ``st[o:]`` is the statistic of the image it sees.
- ``pixelwise``: ``f(r, g, b, full, a, b, d) -> (r, g, b)``: a colour pixel to a colour pixel
  (channels mixed: saturation, hue); alpha passes through; colour images only. One that draws
  (``draws``) is ``f(r, g, b, full, u1, u2, u3, u4, *params)``: four uniform draws of the
  pixel's counter (those a positional op's channels 0 and 1 would get; keys its first two
  parameters), and, like a positional op, nothing geometric may follow it in a fused kernel.
  One that reads a per-image statistic (``stat``) gets ``st, o`` after the draws.
- ``positional``: ``f(v, c, full, y, x, u1, u2, *params) -> v``: a value map that depends on
  where the pixel is (erase) or on two uniform draws of the pixel's counter (noise; one pair
  per channel, or with ``shared`` one pair per pixel, the same in every channel). Nothing
  geometric may follow it in a fused kernel: ``(y, x)`` are the kernel's output coordinates.
- ``neighbourhood``: ``f(acc, v, full, a, b) -> v`` per channel value: ``acc`` the sum of its
  input's 3x3 neighbourhood (``v`` its centre); pixels on the image's border keep ``v``
  (torchvision's ``adjust_sharpness``). The fused kernel computes the neighbours' values by
  running what comes before the op at each of them, so nothing geometric may follow it.
- ``pixel``: ``f(r, g, b, alpha, has_alpha) -> grey`` colour pixel to one float value.
- ``index_map``: ``f(y, x, h, w, *params) -> (sy, sx)``, an integer affine gather (flip,
  transpose, crop, pad); with ``fills`` the map may leave its input and reads the fill value
  (the last parameter) there.
- ``sampler``: ``f(y, x, h, w, *params) -> (sy, sx)``, a real affine map sampled bilinearly
  (``nearest``: at the nearest pixel, halves to even, as torch's ``grid_sample``); ``mode``
  says what lies outside the input: ``"constant"`` zero, ``"edge"`` the nearest edge;
  ``warp_clip``: scikit-image's clip to the input's range may apply (torchvision's samplers
  have none). A ``projective`` sampler returns homogeneous coordinates ``(sy, sx, sz)``, each
  affine in (y, x): it samples at ``(sy / sz, sx / sz)`` (a homography: ``perspective``), and
  composes with its neighbours' maps as a 3x3 matrix whose third row the gather divides by.
- ``user_map``: ``f(y, x, h, w, *params) -> (sy, sx)``, any map (not checked affine), called
  in the kernel and sampled bilinearly with zero outside (``@mp.index_map``).
- ``stencil``: separable taps computed on the host from the parameters: ``f(*params) ->
  taps`` (one 1-D array for both axes, zero outside the image: the tuned kernels), or a
  :class:`Window` (taps per axis and a border mode from :data:`BORDERS`, or a median window:
  the generic window passes), or a :class:`BlockCodec` (the JPEG round trip's block passes).

``h`` and ``w`` are the height and width of the op's input. ``shape_fn(h, w, *params)`` gives
the output's height and width when an op changes them (resize, crop, pad).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from .stats import STATISTICS

KINDS = ("elementwise", "pixelwise", "positional", "neighbourhood", "pixel", "index_map",
         "sampler", "user_map", "stencil")
#: kinds whose ops change where pixels are (a positional op may not be followed by one)
GEOMETRIC = ("index_map", "sampler", "user_map")


@dataclass(frozen=True)
class OpSpec:
    """One registered kernel: its kind, scalar math and the shape rule of its output."""

    name: str
    kind: str
    fn: Callable
    nparams: int = 0
    swaps_axes: bool = False
    code: int = field(default=-1, compare=False)
    shape_fn: Callable | None = field(default=None, compare=False)
    mode: str = "constant"
    # samplers: the nearest pixel instead of a bilinear blend; whether scikit-image's clip may
    # apply
    nearest: bool = False
    warp_clip: bool = True
    # samplers: homogeneous coordinates (sy, sx, sz), sampled at (sy / sz, sx / sz)
    projective: bool = False
    fills: bool = False
    # positional ops: whether the kernel draws (u1, u2) for it (keys are its first two params)
    draws: bool = False
    # positional ops that draw: one pair of draws per pixel, the same in every channel (salt
    # and pepper, pixel dropout), instead of one pair per channel
    shared: bool = False
    # positional ops: whether alpha is changed too (erase, like torchvision on 4 channels)
    alpha: bool = False
    # elementwise ops that read a per-image statistic of their input (``kernels.stats``: the
    # grey sum of adjust_contrast, the channel ranges of autocontrast...): its name; one
    # reduction kernel runs before the gather that holds the op
    stat: str = ""
    # elementwise and pixelwise ops: on integer images (``full`` the type's largest) every
    # value it returns is a whole number within the type's range, so a fused kernel does not
    # round and clip it again (``_rint_clip``, some 8 cycles of latency a value in the pixel's
    # chain: bench/RESULTS.md, "cpu backend: the colour kernels' chains shortened")
    whole: bool = False
    # public-decorator ops: the user's (frozen) function, the key of what it computes
    # (``millipyde.user_functions``) and the values a partial binds before / after the
    # parameters the kernels pass
    user: Callable | None = field(default=None, compare=False)
    digest: str = ""
    user_args: tuple = field(default=((), ()), compare=False)

    @cached_property
    def reads_position(self) -> bool:
        """Whether its values depend on the output pixel it computes (positional and
        neighbourhood ops, and pixelwise ops that draw per pixel): nothing geometric may
        follow it in a fused kernel."""
        return self.kind in ("positional", "neighbourhood") or (self.kind == "pixelwise"
                                                                 and self.draws)

    @cached_property
    def keeps_shape(self) -> bool:
        """Whether the output has its input's shape and dtype whatever the parameters (not a
        pixel op, no shape rule, no axes swapped: a flip, a rotation about the centre, a blur
        as an elementwise op): ``out_shape`` is the identity."""
        return self.kind != "pixel" and self.shape_fn is None and not self.swaps_axes

    def out_shape(self, shape: tuple[int, ...], params: tuple = ()) -> tuple[int, ...]:
        """Shape of this op's output for an input of ``shape`` (and ``params``)."""
        if self.kind == "pixel":
            return shape[:2]
        if self.shape_fn is not None:
            h, w = self.shape_fn(shape[0], shape[1], *params)
            return (int(h), int(w)) + tuple(shape[2:])
        if self.swaps_axes:
            return (shape[1], shape[0]) + tuple(shape[2:])
        return tuple(shape)

    @property
    def slots(self) -> int:
        """Parameter slots this op takes in a fused kernel's parameter array."""
        return max(3, self.nparams)


REGISTRY: dict[str, OpSpec] = {}


#: pixelwise ops' forms for whole values in [0, 255] on uint8 images (another ``full``: the
#: op's own function), the same values with cheaper arithmetic; the cpu arena gathers call
#: them on integer chains (``graph.codegen.cpu_tables.byte_forms``)
BYTE_FORMS: dict[str, Callable] = {}


def source_digest(fn: Callable) -> str:
    """SHA-1 (12 hex digits) of a built-in kernel's source (a user op's key is made by
    ``millipyde.user_functions`` instead)."""
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = repr(getattr(fn, "__code__", fn))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


#: how many times an op was registered: what is worked out from the registry's specs and kept
#: (``gather_sig.op_offsets``) is keyed on it, so a replaced op is never read stale
GENERATION = [0]


def register(spec: OpSpec, replace_existing: bool = False) -> OpSpec:
    """Add ``spec`` to the registry (its ``code`` numbers it within its kind)."""
    if not spec.digest:
        spec = replace(spec, digest=source_digest(spec.fn))
    if spec.kind not in KINDS:
        raise ValueError(f"kernel kind must be one of {KINDS}, got {spec.kind!r}")
    old = REGISTRY.get(spec.name)
    if old is not None and not replace_existing:
        raise ValueError(f"kernel {spec.name!r} is registered twice")
    if old is not None and old.kind == spec.kind:
        code = old.code
    else:
        code = sum(1 for s in REGISTRY.values() if s.kind == spec.kind)
    spec = replace(spec, code=code)
    REGISTRY[spec.name] = spec
    GENERATION[0] += 1
    return spec


_register = register


def elementwise(nparams: int, stat: str = "", name: str | None = None,
                whole: bool = False) -> Callable[[Callable], Callable]:
    """Register ``f(v, c, full, a, b, d)``: a per-channel value map (channels 0..2, or grey).

    ``stat``: the per-image statistic it reads (``kernels.stats.STATISTICS``); it is then
    ``f(v, c, full, a, b, st, o)``, with at most two parameters. ``name``: the kernel's
    registered name (default: the function's). ``whole``: on integer images it returns whole
    numbers within the type's range only (``OpSpec.whole``: not rounded and clipped again)."""

    def deco(fn: Callable) -> Callable:
        if stat:
            if stat not in STATISTICS:
                raise ValueError(f"statistic must be one of {sorted(STATISTICS)}, got {stat!r}")
            if nparams > 2:
                raise ValueError("an elementwise op that reads a statistic takes at most two "
                                 f"parameters, got {nparams}")
        _register(OpSpec(name or fn.__name__, "elementwise", fn, nparams, stat=stat,
                         whole=whole))
        return fn

    return deco


def pixelwise(nparams: int, name: str | None = None, draws: bool = False,
              stat: str = "", whole: bool = False) -> Callable[[Callable], Callable]:
    """Register ``f(r, g, b, full, a, b, d) -> (r, g, b)``: a colour pixel map (``draws``:
    four uniform draws of the pixel before the parameters; ``stat``: the per-image statistic
    it reads, ``st, o`` after the draws; ``whole``: as :func:`elementwise`'s; see the module
    doc)."""

    def deco(fn: Callable) -> Callable:
        if stat and stat not in STATISTICS:
            raise ValueError(f"statistic must be one of {sorted(STATISTICS)}, got {stat!r}")
        _register(OpSpec(name or fn.__name__, "pixelwise", fn, nparams, draws=draws,
                         stat=stat, whole=whole))
        return fn

    return deco


def positional(nparams: int, draws: bool = False, alpha: bool = False, shared: bool = False,
               name: str | None = None) -> Callable[[Callable], Callable]:
    """Register ``f(v, c, full, y, x, u1, u2, *params)``: a value map that knows its pixel
    (``shared``: its draws are the pixel's, the same in every channel)."""

    def deco(fn: Callable) -> Callable:
        if shared and not draws:
            raise ValueError("a positional op shares draws across channels only if it draws")
        _register(OpSpec(name or fn.__name__, "positional", fn, nparams, draws=draws,
                         alpha=alpha, shared=shared))
        return fn

    return deco


def pixel(name: str | None = None) -> Callable[[Callable], Callable]:
    """Register ``f(r, g, b, alpha, has_alpha) -> float``: colour pixel to a grey value."""

    def deco(fn: Callable) -> Callable:
        _register(OpSpec(name or fn.__name__, "pixel", fn))
        return fn

    return deco


def index_map(swaps_axes: bool = False, nparams: int = 0, shape: Callable | None = None,
              fills: bool = False, name: str | None = None) -> Callable[[Callable], Callable]:
    """Register ``f(y, x, h, w, *params) -> (sy, sx)``: where output pixel (y, x) reads from."""

    def deco(fn: Callable) -> Callable:
        _register(OpSpec(name or fn.__name__, "index_map", fn, nparams, swaps_axes,
                         shape_fn=shape, fills=fills))
        return fn

    return deco


def sampler(nparams: int, shape: Callable | None = None, mode: str = "constant",
            name: str | None = None, nearest: bool = False,
            warp_clip: bool = True, projective: bool = False) -> Callable[[Callable], Callable]:
    """Register ``f(y, x, h, w, *params) -> (sy, sx)``: a real map sampled bilinearly (or at
    the ``nearest`` pixel); ``warp_clip``: scikit-image's clip to the input's range may apply;
    ``projective``: ``f`` returns homogeneous ``(sy, sx, sz)`` (see the module doc)."""

    def deco(fn: Callable) -> Callable:
        if projective and (mode != "constant" or nearest or warp_clip):
            raise ValueError("a projective sampler reads zero outside, blends bilinearly and "
                             "has no scikit-image clip (mode='constant', nearest=False, "
                             "warp_clip=False)")
        _register(OpSpec(name or fn.__name__, "sampler", fn, nparams, shape_fn=shape,
                         mode=mode, nearest=nearest, warp_clip=warp_clip,
                         projective=projective))
        return fn

    return deco


def neighbourhood(nparams: int, name: str | None = None) -> Callable[[Callable], Callable]:
    """Register ``f(acc, v, full, a, b) -> v``: a value from the sum ``acc`` of its input's 3x3
    neighbourhood and its centre ``v`` (at most two parameters; see the module doc)."""

    def deco(fn: Callable) -> Callable:
        if nparams > 2:
            raise ValueError(f"a neighbourhood op takes at most two parameters, got {nparams}")
        _register(OpSpec(name or fn.__name__, "neighbourhood", fn, nparams))
        return fn

    return deco


#: what a stencil's window reads outside the image (``numpy.pad``'s and torchvision's names):
#: zero, the nearest edge, a mirror about the edge pixel (d c b | a b c d | c b a), a mirror
#: about the edge (d c b a | a b c d | d c b a)
BORDERS = ("constant", "edge", "reflect", "symmetric")


@dataclass(frozen=True)
class Window:
    """A stencil's window for the generic window passes (what its taps function returns):
    ``ty`` the taps along rows' direction y, ``tx`` along x (each of odd length, centred;
    ``median`` or ``plane``: their length is the window's and their values unused), ``border``
    one of :data:`BORDERS`, ``median`` whether the output is the window's median (a sort)
    instead of its weighted sum (two separable passes); ``plane`` a square (k, k) array of
    taps that is not separable (a line at an angle: motion blur), summed in one pass:
    ``out(y, x) = sum plane[i, j] in(y + i - k // 2, x + j - k // 2)`` (a correlation)."""

    ty: np.ndarray
    tx: np.ndarray
    border: str = "constant"
    median: bool = False
    plane: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.border not in BORDERS:
            raise ValueError(f"border must be one of {BORDERS}, got {self.border!r}")
        for t in (self.ty, self.tx):
            if t.ndim != 1 or len(t) % 2 != 1:
                raise ValueError("window taps must be 1-D, of odd length")
        if self.plane is not None and (self.plane.shape != (len(self.ty), len(self.tx))
                                       or len(self.ty) != len(self.tx)):
            raise ValueError("a plane window's taps must be square, of the window's side")


@dataclass(frozen=True)
class BlockCodec:
    """What a stencil's taps function returns for a JPEG round trip (``jpeg``): ``quant``
    (2, 64) the luma and chroma quantisation tables, row-major; run by the block codec
    passes (``graph.codegen.codec``), not by taps."""

    quant: np.ndarray

    def __post_init__(self) -> None:
        if self.quant.shape != (2, 64) or (self.quant < 1).any():
            raise ValueError("a block codec's quantisation tables are (2, 64), every step >= 1")


def stencil(nparams: int, name: str | None = None) -> Callable[[Callable], Callable]:
    """Register ``f(*params) -> taps``: a separable stencil whose 1-D taps come from the host
    (or a :class:`Window`, or a :class:`BlockCodec`)."""

    def deco(fn: Callable) -> Callable:
        _register(OpSpec(name or fn.__name__, "stencil", fn, nparams))
        return fn

    return deco


def matrix_of(spec: OpSpec, h: int, w: int, params: tuple[float, ...] = ()) -> np.ndarray:
    """The 3x3 matrix ``M`` of an index map or sampler: ``(sy, sx, sz) = M @ (y, x, 1)``, the
    position read ``(sy / sz, sx / sz)``; the third row is (0, 0, 1) unless ``projective``."""
    if not spec.projective:
        m = np.eye(3)
        m[:2] = affine_of(spec, h, w, params)
        return m
    f = spec.fn
    o = [float(v) for v in f(0.0, 0.0, h, w, *params)]
    a = [float(v) - b for v, b in zip(f(1.0, 0.0, h, w, *params), o, strict=True)]
    b = [float(v) - c for v, c in zip(f(0.0, 1.0, h, w, *params), o, strict=True)]
    p = [float(v) for v in f(3.0, 7.0, h, w, *params)]
    for i in range(3):
        if abs(3.0 * a[i] + 7.0 * b[i] + o[i] - p[i]) > 1e-9 * max(1.0, abs(p[i])):
            raise ValueError(f"{spec.name} is registered as a projective map but its "
                             "homogeneous coordinates are not affine")
    return np.array([[a[i], b[i], o[i]] for i in range(3)])


def affine_of(spec: OpSpec, h: int, w: int, params: tuple[float, ...] = ()) -> np.ndarray:
    """The 2x3 matrix ``M`` with ``(sy, sx) = M @ (y, x, 1)`` for an index map or sampler.

    The scalar map is evaluated at three points; a fourth checks that it really is affine.
    """
    # plain floats, not small NumPy arrays: this runs for every recorded map on the hot path
    f = spec.fn
    oy, ox = (float(v) for v in f(0.0, 0.0, h, w, *params))
    ay, ax = (float(v) - o for v, o in zip(f(1.0, 0.0, h, w, *params), (oy, ox), strict=True))
    by, bx = (float(v) - o for v, o in zip(f(0.0, 1.0, h, w, *params), (oy, ox), strict=True))
    py, px = (float(v) for v in f(3.0, 7.0, h, w, *params))
    tol = 1e-9 * max(1.0, abs(py), abs(px))
    if abs(3.0 * ay + 7.0 * by + oy - py) > tol or abs(3.0 * ax + 7.0 * bx + ox - px) > tol:
        raise ValueError(f"{spec.name} is registered as an affine map but is not affine")
    return np.array([[ay, by, oy], [ax, bx, ox]])
