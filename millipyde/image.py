"""``gpuimage``: a gpuarray with image rules and the thesis's image methods.

Every method validates its arguments, records one node and returns None; nothing runs until the
value is needed. Random variants draw their parameters from the image's counter-based stream.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from operator import is_
from typing import Any

import numpy as np

from . import devices, targets
from . import random as mprandom
from .array import gpuarray
from .backend import ACTIVE as runtime  # the active backend
from .checks import MAX_SIDE
from .graph.ir.node import Node
from .kernels import REGISTRY
from .locks import commit_lock
from .ops import FORMS, Emit, Form, Ranges, Reject
from .ops.base import ImageKind, between, between1, kind_of


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


class gpuimage(gpuarray):  # noqa: N801  (the thesis's public name)
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
        return len(self._node.shape) == 3  # (``ndim``'s test without its call)

    # -- recording -----------------------------------------------------------------------
    def _record(self, name: str, params: tuple[float, ...] = ()) -> None:
        spec = REGISTRY[name]
        old = self._node
        # checked before anything is recorded (or a target moved): what the output needs
        shape = None
        if not spec.keeps_shape:  # (no ``out_shape`` call on the per-op path)
            shape = spec.out_shape(old.shape, params)
            if shape[:2] != old.shape[:2]:
                dtype = np.dtype(np.float64) if spec.kind == "pixel" else old.dtype
                _check_output_size(spec.name, params, shape, dtype, old.device)
        entry = None
        if targets.ANY and targets.of(old) is not None:
            # an op the targets cannot follow changes nothing
            entry = targets.following(old, spec, params, shape or old.shape)
        # (``_placed``, two calls, only where a pinned or targeted device may move the image)
        dev = self._pinned
        if dev is None:
            stack = getattr(devices.TARGETS, "stack", None)  # (``devices.target_device``)
            dev = stack[-1] if stack else None
        node = old if dev is None or dev == old.device else self._placed()
        if shape is None:
            new = Node(spec, (node,), params, node.shape, node.dtype, node.device)
        else:
            dtype = np.dtype(np.float64) if spec.kind == "pixel" else node.dtype
            new = Node(spec, (node,), params, shape, dtype, node.device)
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

    def _key(self) -> mprandom.StreamKey:
        """The stream of this image's next random op: the executor's (``operation_stream``),
        else (global seed, this image's sample, its next op index)."""
        key = mprandom.current_key()
        if key is None:
            key = mprandom.StreamKey(mprandom.global_seed(), self._sample, self._opcount)
            self._opcount += 1
        return key

    def _drawer(self) -> Callable[[int], float]:
        """``u(t)``: draw t of this op's stream (drawn only when asked for)."""
        key = self._key()
        return lambda t: mprandom.uniform01(key.seed, key.sample, key.op, t)

    def _emit(self, entries: list) -> None:
        """Record an op form's :class:`~millipyde.ops.Emit` rows for this one image, after
        checking its :class:`~millipyde.ops.Reject` entries (nothing is recorded if one
        refuses the image)."""
        for kernel, params in self._emitted(entries)[0]:
            self._record(kernel, params)

    def _emitted(self, entries: list) -> tuple[list[tuple[str, tuple]], bool]:
        """The (kernel, parameters) records of ``entries`` on this image, after checking its
        :class:`~millipyde.ops.Reject` entries and every output's size (``ValueError``), and
        whether they depend on the entries, the image's shape and its dtype alone (no output
        large enough that its check asked the device for its memory)."""
        for e in entries:
            if isinstance(e, Reject) and e.mask[0]:
                raise ValueError(e.message(0))
        # every output's size before the first is recorded (random_resized_crop is a crop,
        # then a resize: a refused resize must not leave the crop recorded)
        shape, alone = tuple(self.shape), True
        records = []
        for e in entries:
            if isinstance(e, Emit) and (e.skip is None or not e.skip[0]):
                params = tuple(e.params[0].tolist())
                records.append((e.kernel, params))
                spec = REGISTRY[e.kernel]
                if not spec.keeps_shape:
                    out = spec.out_shape(shape, params)
                    if out[:2] != shape[:2]:
                        dtype = np.dtype(np.float64) if spec.kind == "pixel" else self.dtype
                        _check_output_size(spec.name, params, out, dtype, self._node.device)
                        alone = alone and max(out[:2]) <= MAX_SIDE and \
                            math.prod(out) * dtype.itemsize <= _SMALL_OUTPUT
                    shape = out
        return records, alone

    def clone(self) -> gpuimage:
        """Deep copy on the current target device (targets too); a gpuimage."""
        out = super().clone()
        t = targets.of(self._node)
        if t is not None:
            targets.attach(out._node, t)
        region = self.__dict__.get("_region")
        if region is not None:  # the same pixels: the same place in their sample
            out._region = region
        return out


#: outputs up to this many bytes are recorded without asking the device for its memory
_SMALL_OUTPUT = 1 << 30


def _check_output_size(op: str, params: tuple, shape: tuple[int, ...], dtype: np.dtype,
                       device: int) -> None:
    """``ValueError`` naming the op and its arguments when the output it would record has a
    side beyond ``MAX_SIDE`` or needs more bytes than the device has: memory follows the
    image, never an argument (``resize(10**30, 4)`` and ``pad(10**12, ...)`` were recorded,
    then left the image unreadable)."""
    need = math.prod(shape) * np.dtype(dtype).itemsize
    if max(shape[:2]) <= MAX_SIDE and need <= _SMALL_OUTPUT:
        return  # (no device query on the per-op path: every device holds this much)
    memory = runtime.memory_bytes(device)
    if max(shape[:2]) > MAX_SIDE or (memory is not None and need > memory):
        args = ", ".join(repr(p) for p in params)
        raise ValueError(f"{op}({args}) would make a {' x '.join(map(str, shape))} "
                         f"{np.dtype(dtype)} image ({need} bytes): more than device {device} "
                         f"holds ({memory} bytes; each side at most {MAX_SIDE})")


class _OneImage:
    """The :class:`~millipyde.ops.Draws` of one image: its op's stream ``key``."""

    n = 1

    def __init__(self, key: mprandom.StreamKey) -> None:
        self.key = key

    def u(self, t: int) -> np.ndarray:
        return np.array([mprandom.uniform01(*self.key, t)])

    def key64(self, t: int) -> np.ndarray:
        return np.array([mprandom.key64(*self.key, t)], dtype=np.uint64)

    def member(self, i: int) -> Callable[[int], float]:
        return lambda t: mprandom.uniform01(*self.key, t)


class _NoDraws:
    """The :class:`~millipyde.ops.Draws` of a form that draws nothing."""

    n = 1

    def u(self, t: int) -> np.ndarray:  # pragma: no cover - a form that says it draws nothing
        raise RuntimeError("this op form takes no draws (declare draws=True)")

    key64 = u
    member = u


_NO_DRAWS = _NoDraws()

#: per op form that draws nothing, the (kernel, parameters) records of one image
#: (``Form.emits``, ``gpuimage._emitted``) per (repr of the parsed arguments, shape, dtype); at
#: most ``_FIXED_KEPT`` a form
FIXED_RECORDS: dict[str, dict[tuple, tuple]] = {}
#: per op form that draws nothing (with a sample or none), the records of its calls with plain
#: arguments per (repr of the call's arguments (and of its keywords), shape, dtype): a call
#: made before on an image of that shape and dtype records them after one lookup, its
#: arguments not parsed again (a parse is a function of the image's kind and its arguments
#: alone, and a call it refused was never kept, so it refuses every such call again); at most
#: ``_FIXED_KEPT`` a form, emptied when full, and then the form's next ``_IDLE_CALLS`` calls
#: take no key (none of a loop's new values would be found again)
KEPT_CALLS: dict[str, dict[tuple, tuple]] = {}
_FIXED_KEPT = 64
#: calls of a form that take no key after its kept calls filled up
_IDLE_CALLS = 4096
_PLAIN = frozenset((int, float, bool, str, type(None)))


def _plain(value: Any) -> bool:
    """Whether ``value`` is built of Python scalars, strings, None and tuples alone: its repr
    then tells apart every value that could be emitted differently (``1`` / ``1.0`` /
    ``True``, ``0.0`` / ``-0.0``), where equality would not."""
    t = type(value)
    if t in _PLAIN:
        return True
    return t is tuple and all(_plain(v) for v in value)


def _claim_parse(claim: mprandom.ClaimDraws, parse: Callable[..., Any],
                 kind: Any) -> tuple[Any, list[tuple[float, ...]] | None]:
    """A random form's parse of a batched Generator callable's own arguments for one claim,
    and where it gives float ranges the claim draws, its outputs' parameters, row by row:
    :func:`between` of each range over the claim's draws, the values :func:`between1` gives
    per output (the same float64 operations)."""
    a = parse(kind, *claim.args)
    if not isinstance(a, Ranges) or not 0 < len(a) <= claim.block.shape[1] or \
            not all(type(lo) is float and type(hi) is float for lo, hi in a):
        return a, None
    return a, list(zip(*[between(lo, hi, claim.block[:, t]).tolist()
                         for t, (lo, hi) in enumerate(a)], strict=True))


def _method(form: Form) -> Callable[..., None]:
    """The gpuimage method of an op form: parse (validate) its arguments, then record it on
    this image (one image's ``sample``; tuples as they are, ranges drawn one by one), under
    the image's commit lock (``_atomic``)."""
    parse, kernel = form.parse, form.kernel
    locks = False  # whether ``method`` takes the commit lock itself (else ``_atomic``)
    if not form.draws:
        # a form that draws nothing: what a call records is a function of its arguments and
        # the image's shape and dtype alone (a plain form's one record; a sample's, kept per
        # parsed arguments in ``FIXED_RECORDS``), so a call with plain arguments keeps its
        # records in ``KEPT_CALLS`` and a repeated call (``rotate(45)``, ``adjust_gamma(2)``
        # on same-size images) records them after one lookup: no parse, no sample, no checks
        # but the output size's (``_record``), and the commit lock taken here (one call less)
        locks = True
        calls = KEPT_CALLS.setdefault(form.name, {})
        fixed = form.sample is not None
        kept = FIXED_RECORDS.setdefault(form.name, {}) if fixed else None

        def sampled(self: gpuimage, node: Node, a: Any, kind: ImageKind) -> tuple | None:
            """Record the sample's records of parsed arguments ``a``; those a repeat of the
            call may take (None: not to be kept)."""
            region = self.__dict__.pop("_region", None)
            if region is not None:  # (as in the drawing forms' method below)
                self._emit(form.emits_on_region(a, _NO_DRAWS, region, kind))
                return None
            shape, dtype = node.shape, node.dtype
            key = (repr(a), shape, dtype) if _plain(a) else None
            records = None if key is None else kept.get(key)
            alone = records is not None
            if records is None:
                entries = form.emits(a, _NO_DRAWS, np.array([shape[:2]], dtype=np.int64), kind)
                records, alone = self._emitted(entries)  # (a refusal raises: nothing kept)
                records = tuple(records)
                if key is not None and alone:
                    if len(kept) >= _FIXED_KEPT:
                        kept.pop(next(iter(kept), None), None)
                    kept[key] = records
            for name, params in records:
                self._record(name, params)
            return records if alone else None

        # calls left that take no key: set when the kept calls fill up (a loop that passes a
        # new value each call, ``adjust_gamma(g)``, then pays for no key it never finds again)
        idle = 0

        def method(self: gpuimage, *args: Any, **kwargs: Any) -> None:
            nonlocal idle
            d = self.__dict__
            with d.get("_commit_lock") or commit_lock(self):
                node = self._node
                key = None
                if idle and calls:
                    idle -= 1
                else:
                    idle = 0  # (an emptied dict, ``KEPT_CALLS[name].clear()``: keyed again)
                    if not kwargs:
                        for v in args:
                            if type(v) not in _PLAIN and not _plain(v):
                                break
                        else:
                            key = (repr(args), node.shape, node.dtype)
                    elif _plain(args) and _plain(tuple(kwargs.values())):
                        key = (repr(args), repr(kwargs), node.shape, node.dtype)
                records = None if key is None else calls.get(key)
                if records is not None and "_region" not in d:
                    for name, params in records:
                        self._record(name, params)
                    return
                kind = kind_of(node.shape, node.dtype)
                a = parse(kind, *args, **kwargs)
                if fixed:
                    records = sampled(self, node, a, kind)
                elif a is None:
                    records = ()
                else:
                    self._record(kernel, a)
                    # (a tuple: parameters shared by the nodes of every repeat)
                    records = ((kernel, a),) if type(a) is tuple else None
                if records is not None and key is not None:
                    if len(calls) >= _FIXED_KEPT:
                        calls.clear()
                        idle = _IDLE_CALLS
                    calls[key] = records
    elif form.sample is None:
        locks = True

        def method(self: gpuimage, *args: Any, **kwargs: Any) -> None:
            with self.__dict__.get("_commit_lock") or commit_lock(self):
                node = self._node
                key = getattr(mprandom.STREAM_KEYS, "key", None)  # (``current_key``)
                claim = key.claim if type(key) is mprandom.DrawnKey else None
                if claim is not None and not kwargs and len(args) == claim.nargs and \
                        all(map(is_, args, claim.args)):
                    # a batched Generator's callable passing on its Operation's own
                    # arguments (fixed while it runs): parsed once a claim, its parameters
                    # drawn for the claim's outputs at once, not per output (kept by the
                    # image's channels, ``shape[2:]``, and dtype: its kind made only for the
                    # parse)
                    got = claim.parsed.get((parse, node.shape[2:], node.dtype))
                    if got is None:
                        got = claim.parsed[parse, node.shape[2:], node.dtype] = _claim_parse(
                            claim, parse, kind_of(node.shape, node.dtype))
                    a, rows = got
                    if rows is not None:
                        self._record(kernel, rows[key.at])
                        return
                else:
                    a = parse(kind_of(node.shape, node.dtype), *args, **kwargs)
                    if key is None:
                        key = self._key()
                if isinstance(a, Ranges):
                    n = len(a)
                    if claim is not None and n <= claim.block.shape[1]:
                        us = claim.block[key.at, :n].tolist()
                    else:
                        us = mprandom.uniforms(key.seed, key.sample, key.op, n)
                    # (a list made, then the tuple: no generator resumed per draw)
                    self._record(kernel, tuple([between1(lo, hi, u)
                                                for (lo, hi), u in zip(a, us, strict=True)]))
                elif a is not None:
                    self._record(kernel, a)
    else:
        def method(self: gpuimage, *args: Any, **kwargs: Any) -> None:
            kind = kind_of(self.shape, self.dtype)
            a = parse(kind, *args, **kwargs)
            d = _OneImage(self._key())
            # an input decoded as a region of its sample (``data.region``): its first op
            # drawn on the whole sample's size, its window shifted onto the region
            region = self.__dict__.pop("_region", None)
            self._emit(form.emits(a, d, np.array([self.shape[:2]], dtype=np.int64), kind)
                       if region is None else form.emits_on_region(a, d, region, kind))
    sig = inspect.signature(parse)
    params = list(sig.parameters.values())
    params[0] = params[0].replace(name="self", annotation=inspect.Parameter.empty)
    method.__signature__ = sig.replace(parameters=params,  # type: ignore[attr-defined]
                                       return_annotation=None)
    method.__name__ = method.__qualname__ = form.name
    method.__doc__ = parse.__doc__
    method.__module__ = parse.__module__
    return method if locks else _atomic(method)


def _atomic(method: Callable[..., None]) -> Callable[..., None]:
    """``method`` run under the image's commit lock (``locks.py``): its draws and its record
    land together, never between a Pipeline worker's claim and commit of the same image."""

    @functools.wraps(method)
    def locked(self: gpuimage, *args: object, **kwargs: object) -> None:
        # (``commit_lock``'s lookup first: it makes the lock only on first use)
        with self.__dict__.get("_commit_lock") or commit_lock(self):
            return method(self, *args, **kwargs)

    return locked


#: gpuimage methods that only record graph nodes and never read a value, and that the
#: same-size batch recorder records through templates: a batched Generator may record them
#: gated off, and after gated-off nodes (``Operation.apply``).
RECORDING_METHODS = frozenset(name for name, f in FORMS.items() if f.template)

for _name, _form in sorted(FORMS.items()):
    _m = _method(_form)
    if _name != _form.name:  # an alias: the form's own name in messages and help
        _m.__name__ = _name
    setattr(gpuimage, _name, _m)
