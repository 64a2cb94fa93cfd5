"""What an op is: one definition that the method, the Operation, batches and warmup all read.

An op (:class:`OpDef`) owns its scalar kernels (registered with ``millipyde.kernels``'s
decorators, in the op's own module) and one or more *forms*: the public methods that record
it, such as ``adjust_gamma`` and its random form ``random_adjust_gamma``. A :class:`Form` is

- ``parse(kind, *args, **kwargs)``: the method's signature and argument validation
  (``ValueError`` naming the argument), given only what every image of a batch shares (its
  :class:`ImageKind`: channels and dtype). It returns the validated arguments: a tuple of the
  kernel's parameters, a :class:`Ranges` of uniform draws that are the kernel's parameters, or
  None (nothing to record, such as saturation on a grey image);
- ``sample(args, draws, hw, kind)``, optional: the per-sample parameters of ``n`` images at
  once (``hw``: their (n, 2) sizes; ``draws``: their counter-based streams, :class:`Draws`) as
  a list of :class:`Emit` (a kernel and its (n, k) parameter rows) and :class:`Reject` (images
  the arguments do not fit). Without one, a tuple is recorded as it is and a :class:`Ranges`
  is drawn uniformly.

A method call on one image is ``sample`` over one image (``millipyde.image``); a batch of
outputs is ``sample`` over all of them (``training.batch_ops``): the same code, so the same
bits. This module imports nothing above ``millipyde.kernels``: code generation reads kernels
through the recorded graph nodes, never through the op definitions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

import numpy as np
from numba.extending import register_jitable

from ..checks import EXACT, bounds, integer, number, number_range
from ..kernels.registry import REGISTRY, OpSpec

__all__ = [
    "FAMILIES", "FORMS", "OPS", "Draws", "Emit", "Form", "ImageKind", "OpDef", "Ranges",
    "Reject", "Try", "between", "between1", "bounds", "chance", "coin", "columns", "first_fits",
    "integer", "kind_for", "kind_of", "number", "pair", "span",
]

#: the op families, in the order the documentation lists them
FAMILIES = ("colour", "intensity", "geometry", "noise", "filters")

span = number_range


class ImageKind(NamedTuple):
    """What every image of a batch shares: its channel count (1 grey, 3 RGB, 4 RGBA) and
    dtype. Argument validation sees only this; sizes are per image (``Form.sample``)."""

    channels: int
    dtype: np.dtype

    @property
    def is_colour(self) -> bool:
        """RGB or RGBA."""
        return self.channels >= 3

    @property
    def full(self) -> float:
        """The value of full intensity: the integer type's largest, or 1.0 for floats."""
        return float(np.iinfo(self.dtype).max) if self.dtype.kind in "ui" else 1.0


@lru_cache(maxsize=64)
def _kind(channels: int, dtype: np.dtype) -> ImageKind:
    return ImageKind(channels, dtype)


def kind_of(shape: tuple[int, ...], dtype: np.dtype) -> ImageKind:
    """The :class:`ImageKind` of an image of ``shape`` and ``dtype`` (cached)."""
    return _kind(shape[2] if len(shape) == 3 else 1, dtype)


def kind_for(channels: int, dtype: Any) -> ImageKind:
    """The :class:`ImageKind` of images of ``channels`` channels and ``dtype`` (cached)."""
    return _kind(int(channels), np.dtype(dtype))


class Ranges(tuple):
    """Uniform draw ranges ``((lo, hi), ...)``: draw ``t`` of the op's stream, mapped to range
    ``t``, is the kernel's parameter ``t`` (what a :class:`Form`'s parse returns for a random
    form whose parameters are plain uniform draws)."""


class Draws(Protocol):
    """The counter-based streams of ``n`` images for one op (``millipyde.random``): draw ``t``
    of image ``i`` is a pure function of (seed, sample, op index, t)."""

    @property
    def n(self) -> int:
        """How many images."""

    def u(self, t: int) -> np.ndarray:
        """Draw ``t`` of every image: (n,) floats in [0, 1)."""

    def key64(self, t: int) -> np.ndarray:
        """The 64-bit key of draw ``t`` of every image: (n,) uint64."""

    def member(self, i: int) -> Callable[[int], float]:
        """``u(t)`` of image ``i`` alone, as a Python float (for per-image fallbacks)."""


#: a scalar try of a random draw that may miss (``resized_crop.window_try``): ``fn(h, w, u_0 ..
#: u_{D-1}, params)`` of one image's size, its try's ``D`` draws and a tuple of floats, gives
#: (fits, v_1 .. v_k), k ints
Try = Callable[..., tuple]


def first_fits(fn: Try, hw: np.ndarray, params: tuple[float, ...], d: Draws, tries: int,
               draws: int, values: int) -> tuple[np.ndarray, np.ndarray]:
    """Each image's first of ``tries`` tries ``fn`` that fits (try ``t`` takes draws
    ``draws * t`` .. ``draws * t + draws - 1``): (n, values) int64 values (zeros where none
    fitted) and the images none fitted.

    Draws that offer ``first_fits`` (``training.batch_ops.Ctx``: ``fn`` compiled into one
    loop over the members, the same arithmetic) give them; otherwise ``fn`` runs in Python
    on each image's own draws (``Draws.member``)."""
    fast = getattr(d, "first_fits", None)
    if fast is not None:
        return fast(fn, hw, params, tries, draws, values)
    out = np.zeros((len(hw), values), dtype=np.int64)
    missed = []
    for r in range(len(hw)):
        u = d.member(r)
        h, w = int(hw[r, 0]), int(hw[r, 1])
        for t in range(tries):
            got = fn(h, w, *(u(draws * t + k) for k in range(draws)), params)
            if got[0]:
                out[r] = got[1:]
                break
        else:
            missed.append(r)
    return out, np.array(missed, dtype=np.int64)


@dataclass(frozen=True)
class Emit:
    """One kernel node to record on each image: ``params`` (n, k) its parameters per image,
    ``skip`` (n,) the images it is not recorded on, ``out`` (n, 2) the output sizes of a
    sampler that resizes (None: its shape rule's)."""

    kernel: str
    params: np.ndarray
    skip: np.ndarray | None = None
    out: np.ndarray | None = None


@dataclass(frozen=True)
class Reject:
    """Images the arguments do not fit (``mask``, (n,) bool): a method call raises
    ``ValueError(message(i))``; a batch leaves them to the per-output path, which raises."""

    mask: np.ndarray
    message: Callable[[int], str]


Sample = Callable[[Any, Draws, np.ndarray, ImageKind], list]


def columns(*values: Any, n: int) -> np.ndarray:
    """(n, len(values)) float64 rows from scalars and (n,) arrays."""
    if not values:
        return np.zeros((n, 0))
    return np.stack([np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)) for v in values],
                    axis=1)


def between(lo: float, hi: float, u: np.ndarray) -> np.ndarray:
    """``u`` in [0, 1) mapped to [lo, hi] for every image, as :func:`between1` maps one
    (also for bounds whose difference overflows)."""
    if lo == hi:
        return np.full(len(u), lo)
    width = hi - lo
    if math.isfinite(width):
        return lo + width * u
    return np.minimum(np.maximum(lo * (1.0 - u) + hi * u, lo), hi)


@register_jitable
def between1(lo: float, hi: float, u: float) -> float:
    """The draw ``u`` in [0, 1) mapped to [lo, hi]: :func:`between` of one draw.

    Plain Python where Python calls it; compiled where compiled code calls it (a window try,
    ``resized_crop.window_try``, in a batch's compiled loop)."""
    if lo == hi:
        return lo
    width = hi - lo
    if math.isfinite(width):
        return lo + width * u
    # bounds near float64's largest: hi - lo overflows, the weighted sum does not
    return min(max(lo * (1.0 - u) + hi * u, lo), hi)


def pair(value: Any, name: str, symmetric: bool = False,
         low: float | None = None) -> tuple[float, float]:
    """A number ``v`` as ``(-v, v)`` (``symmetric``) or a [low, high] pair."""
    if symmetric and not isinstance(value, (Sequence, np.ndarray)):
        v = number(value, name)
        if v < 0:
            raise ValueError(f"{name} must be >= 0 when a single number, got {v}")
        return -v, v
    lo, hi = number_range(value, name)
    if low is not None and lo < low:
        raise ValueError(f"{name} must be >= {low}, got low bound {lo}")
    return lo, hi


def colour_only(kind: ImageKind, what: str) -> None:
    """``ValueError`` unless the image is RGB/RGBA."""
    if not kind.is_colour:
        raise ValueError(f"{what} needs an RGB/RGBA image; this one is greyscale")


def unsigned_only(kind: ImageKind, what: str,
                  why: str = "signed values may be negative, which scikit-image refuses"
                  ) -> None:
    """``ValueError`` for a signed-integer image: scikit-image refuses negative values for its
    exposure corrections, and a signed type may hold them (refused by type, when the op is
    recorded, not by value, which would need the data); ``why`` says so in the message."""
    if kind.dtype.kind == "i":
        raise ValueError(f"{what} needs an unsigned integer or float image; this one is "
                         f"{kind.dtype} ({why})")


def chance(p: Any, name: str = "p") -> float:
    """torchvision's probability ``p``: a real number in [0, 1], both ends included."""
    v = number(p, name)
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {v}")
    return v


#: the parameters of an op's own coin that always runs it (``u = 0 < p = 1``)
ALWAYS = (0.0, 1.0)


def coin(p: Any, name: str = "p") -> list[tuple[float, float]]:
    """The draw ranges of a kernel's own coin: a uniform ``u`` and the fixed ``p``; the kernel
    runs its op where ``u < p``. A per-image coin carried as two parameters (a gate as data):
    the op keeps one kernel whatever the coins, and its plain-range draws let the same-size
    batch recorder take it (``Form.template``). Deterministic forms pass :data:`ALWAYS`."""
    v = chance(p, name)
    return [(0.0, 1.0), (v, v)]


def image_value(kind: ImageKind, value: Any, name: str) -> float:
    """A fill value in the image's own units: a whole number the image's integer type holds
    (0..255 for uint8, -32768..32767 for int16, ...), or in [0, 1] for float images. What the
    type cannot hold is refused (a pad wrapped it, uint16 -5 -> 65531, where erase clipped)."""
    v = number(value, name)
    if kind.dtype.kind in "ui":
        info = np.iinfo(kind.dtype)
        # values travel as float64: the 64-bit types hold only what it holds exactly
        lo, hi = max(int(info.min), -EXACT), min(int(info.max), EXACT)
        # (a Python or NumPy integer compared as itself: its float may round into the range)
        whole = int(value) if isinstance(value, (int, np.integer)) else v
        if whole != math.floor(v) or not lo <= whole <= hi:
            raise ValueError(f"{name} must be a whole number in {lo}..{hi} for "
                             f"{kind.dtype} images, got {value!r}")
    if kind.dtype.kind == "f" and not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1] for float images, got {v}")
    return v


def channel_values(kind: ImageKind, value: Any, name: str) -> tuple[float, float, float, float]:
    """A fill of every channel in the image's units (:func:`image_value`): one number for all,
    or one per channel (torchvision's sequence ``value``); four slots, the unused repeated."""
    if isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytes)):
        vals = [image_value(kind, v, f"{name}[{i}]") for i, v in enumerate(value)]
        if len(vals) == 1:
            vals = vals * kind.channels
        if len(vals) != kind.channels:
            raise ValueError(f"{name} must be one number or one per channel ({kind.channels}), "
                             f"got {len(vals)} values")
        return tuple((vals + [vals[-1]] * 4)[:4])  # type: ignore[return-value]
    v = image_value(kind, value, name)
    return v, v, v, v


# --------------------------------------------------------------------------- definitions


@dataclass(eq=False)
class Form:
    """A public method that records an op (see the module doc).

    ``random``: its parameters are drawn per image; ``draws``: it takes a key of the image's
    stream (random forms, and ops with per-pixel draws); ``template``: the same-size batch
    recorder records it through a template (it has a gated-off form and plain-range draws);
    ``skips``: its ``sample`` may leave images unrecorded (a zero sigma, no window found).
    """

    name: str
    op: OpDef
    parse: Callable[..., Any]
    sample: Sample | None
    kernel: str
    random: bool
    draws: bool
    template: bool
    skips: bool
    aliases: tuple[str, ...] = ()

    @property
    def reshapes(self) -> bool:
        """Whether it may change the image's size (its kernels have a shape rule)."""
        return any(REGISTRY[k].shape_fn is not None for k in self.op.kernels)

    def emits(self, args: Any, draws: Draws, hw: np.ndarray, kind: ImageKind) -> list:
        """The :class:`Emit` and :class:`Reject` entries for ``n`` images (``hw``: their
        sizes), the default rules applied where the form has no ``sample``."""
        if self.sample is not None:
            return self.sample(args, draws, hw, kind)
        if args is None:
            return []
        n = len(hw)
        if isinstance(args, Ranges):
            cols = [between(lo, hi, draws.u(t)) for t, (lo, hi) in enumerate(args)]
            return [Emit(self.kernel, columns(*cols, n=n))]
        return [Emit(self.kernel, columns(*args, n=n))]

    def emits_on_region(self, args: Any, draws: Draws, region: np.ndarray,
                        kind: ImageKind) -> list:
        """:meth:`emits` for images that are a region of larger ones: ``region`` (n, 4) the
        region's top and left in its image and that image's height and width. Everything is
        drawn from the whole image's size (as on the whole image), and a first window
        (:data:`WINDOW_KERNELS`) is shifted by the region's top and left, so that on a region
        holding the window the op reads the pixels it reads on the whole image."""
        region = np.asarray(region, dtype=np.int64).reshape(-1, 4)
        entries = self.emits(args, draws, region[:, 2:4], kind)
        at = first_window(entries)
        if at is None:
            return entries
        e = entries[at]
        params = np.array(e.params, dtype=np.float64)
        params[:, 0] -= region[:, 0]
        params[:, 1] -= region[:, 1]
        return [*entries[:at], Emit(e.kernel, params, e.skip, e.out), *entries[at + 1:]]


#: window kernels: index maps ``(y + top, x + left)`` whose first two parameters are the
#: window's top and left (the crop kernel and its forms that read a fill or the edge outside
#: the image), each named by its own op module through :func:`mark_window`
WINDOW_KERNELS: set[str] = set()


def mark_window(*kernels: str) -> None:
    """Name ``kernels`` window kernels (:data:`WINDOW_KERNELS`): a form's entries that begin
    with one can be recorded on a region of the image holding the window
    (:meth:`Form.emits_on_region`)."""
    WINDOW_KERNELS.update(kernels)


def first_window(entries: list) -> int | None:
    """The index in a form's entries of its first :class:`Emit`, where that is a window on
    every image (:data:`WINDOW_KERNELS`, nothing skipped) and no entry before it is an Emit;
    else None (a form that does not begin with a window)."""
    for at, e in enumerate(entries):
        if isinstance(e, Emit):
            ok = e.kernel in WINDOW_KERNELS and e.skip is None and e.params.shape[1] >= 4
            return at if ok else None
    return None


@dataclass(eq=False)
class OpDef:
    """One op: its name, family, kernels and forms (see the module doc)."""

    name: str
    family: str
    kernels: tuple[str, ...]
    reference: str = ""
    forms: dict[str, Form] = field(default_factory=dict)

    def form(self, *, random: bool = False, draws: bool | None = None, template: bool = False,
             skips: bool = False, kernel: str | None = None, sample: Sample | None = None,
             aliases: tuple[str, ...] = ()) -> Callable[[Callable], Form]:
        """Decorate ``parse`` (named as the public method, first parameter the image kind) as a
        form of this op."""

        def deco(parse: Callable) -> Form:
            f = Form(parse.__name__, self, parse, sample, kernel or self.kernels[0], random,
                     random if draws is None else draws, template, skips, aliases)
            for name in (f.name, *aliases):
                if name in FORMS:
                    raise ValueError(f"op form {name!r} is defined twice")
                FORMS[name] = f
            self.forms[f.name] = f
            return f

        return deco

    @property
    def specs(self) -> tuple[OpSpec, ...]:
        """Its registered kernels."""
        return tuple(REGISTRY[k] for k in self.kernels)


#: every op by name
OPS: dict[str, OpDef] = {}
#: every form by public method name (aliases included)
FORMS: dict[str, Form] = {}


def define(name: str, family: str, kernels: Sequence[Any], reference: str = "") -> OpDef:
    """Declare an op: ``kernels`` are its kernel functions (or registered names)."""
    if family not in FAMILIES:
        raise ValueError(f"op family must be one of {FAMILIES}, got {family!r}")
    if name in OPS:
        raise ValueError(f"op {name!r} is defined twice")
    by_fn = {id(spec.fn): spec.name for spec in REGISTRY.values()}
    names = tuple(k if isinstance(k, str) else by_fn.get(id(k), getattr(k, "__name__", k))
                  for k in kernels)
    for k in names:
        if k not in REGISTRY:
            raise ValueError(f"op {name!r}: kernel {k!r} is not registered")
    op = OPS[name] = OpDef(name, family, names, reference)
    return op
