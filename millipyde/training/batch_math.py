"""Vectorised host math of a batch recorded at once (``batch_record``).

Each function gives, for many outputs at once, exactly the values the per-output code computes
(tests compare every bit): uint8 tables, sampler maps, scikit-image's warp-clip decision and
Gaussian taps.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import numpy as np

from ..graph.codegen.loader import load
from ..graph.codegen.lut import compose_tables
from ..graph.codegen.target import HEADER
from ..graph.plan.schedule import affine3
from ..kernels import REGISTRY

# (Gaussian taps live in ``batch_taps``; named here with the rest of the batch host math)
from .batch_taps import gaussian_taps  # noqa: F401


def lut_many():
    """Host function ``build_many(codes, params, channels, full, out)``: ``exec.tables.build_lut``
    for every row of ``params`` (n, K, 3) into ``out`` (n, C, 256), the same table passes
    (built-in ops: ``batch_record`` records gpuimage methods only). The recorded templates
    hold no op that reads a statistic (their forms are not template forms), so the passes'
    statistic row is an unused zero."""
    return _build_many


_NO_STATS = np.zeros(1)


def _build_many(codes: np.ndarray, params: np.ndarray, channels: int, full: float,
                out: np.ndarray) -> None:
    names = [_name_of(int(c)) for c in codes]
    compose_tables(names, params, _NO_STATS, channels, full, out)


@functools.cache
def _name_of(code: int) -> str:
    # (codes are numbered per kind: the built-in elementwise op of this one)
    for spec in REGISTRY.values():
        if spec.kind == "elementwise" and spec.user is None and spec.code == code:
            return spec.name
    raise KeyError(f"no built-in elementwise op has code {code}")


def sampler_maps(spec: Any, h: int, w: int, vals: np.ndarray) -> np.ndarray:
    """(n, 6) rows ``affine_of(spec, h, w, vals[m])[:2].ravel()``: :func:`affine_rows` with
    every row's size ``(h, w)`` (compiled host code, its first row checked)."""
    n = len(vals)
    if not n:
        return np.empty((0, 6))
    rows = affine_rows(spec, np.full(n, h, np.int64), np.full(n, w, np.int64), vals)
    return np.ascontiguousarray(rows[:, :2]).reshape(n, 6)


def warp_clips(maps: np.ndarray, mid: tuple[int, int], shape: tuple[int, int]) -> np.ndarray:
    """``schedule.needs_warp_clip`` of every (n, 6) row: compiled, the same arithmetic in the
    same order (IEEE operations, no fused multiply-add: Numba contracts nothing unless
    ``fastmath``; ``rint`` is Python's ``round``, half to even)."""
    maps = np.ascontiguousarray(maps, dtype=np.float64)
    out = np.empty(len(maps), dtype=np.bool_)
    _clip_module().warp_clips(maps, int(mid[0]), int(mid[1]), int(shape[0]) - 1,
                              int(shape[1]) - 1, out)
    return out


_CLIP_SOURCE = '''# millipyde generated warp-clip decisions of sampler maps (batch_math.warp_clips)
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def warp_clips(maps, mh, mw, ylast, xlast, out):
    for i in range(maps.shape[0]):
        integer = True
        for q in range(6):
            v = maps[i, q]
            if not abs(v - np.rint(v)) <= 1e-12:
                integer = False
        clip = not integer
        if clip:
            for y in (0, ylast):
                for x in (0, xlast):
                    fy = maps[i, 0] * y + maps[i, 1] * x + maps[i, 2]
                    fx = maps[i, 3] * y + maps[i, 4] * x + maps[i, 5]
                    if fy <= -1 or fy >= mh or fx <= -1 or fx >= mw:
                        clip = False
        out[i] = clip
'''


@functools.cache
def _clip_module():
    return load(_CLIP_SOURCE, "cpu")


@functools.cache
def _affine_rows(name: str, nparams: int):
    """Host kernel ``affine_rows(params, hs, ws, out)``: as ``_affine_many`` with each row's
    own input height and width (a resize after a random crop)."""
    args = "".join(f", params[m, {i}]" for i in range(nparams))
    src = (f"# millipyde generated per-row affine maps of index map or sampler {name}\n"
           + HEADER["cpu"] + f"_f = _dev(_R[{name!r}].fn)\n"
           "\n\n@njit(cache=True, nogil=True)\n"
           "def affine_rows(params, hs, ws, out):\n"
           "    for m in range(hs.shape[0]):\n"
           "        h = hs[m]\n        w = ws[m]\n"
           f"        oy, ox = _f(0.0, 0.0, h, w{args})\n"
           f"        y1, x1 = _f(1.0, 0.0, h, w{args})\n"
           f"        y2, x2 = _f(0.0, 1.0, h, w{args})\n"
           "        out[m, 0, 0] = float(y1) - oy\n        out[m, 0, 1] = float(y2) - oy\n"
           "        out[m, 0, 2] = oy\n        out[m, 1, 0] = float(x1) - ox\n"
           "        out[m, 1, 1] = float(x2) - ox\n        out[m, 1, 2] = ox\n"
           "        out[m, 2, 0] = 0.0\n        out[m, 2, 1] = 0.0\n        out[m, 2, 2] = 1.0\n")
    return load(src, "cpu").affine_rows


def affine_rows(spec: Any, hs: np.ndarray, ws: np.ndarray,
                vals: np.ndarray | None = None) -> np.ndarray:
    """(n, 3, 3) matrices ``schedule.affine3(spec, hs[m], ws[m], vals[m])``, compiled host
    code; the first row is checked against ``schedule.affine3`` itself (a difference: Python
    for every row)."""
    n = len(hs)
    vals = np.zeros((n, 0)) if vals is None else np.ascontiguousarray(vals, dtype=np.float64)
    out = np.empty((n, 3, 3))
    if n and spec.projective:  # homogeneous coordinates (a homography): in Python, per row
        for m in range(n):
            out[m] = affine3(spec, int(hs[m]), int(ws[m]), tuple(vals[m].tolist()))
        return out
    if n:
        # integer sizes as Python ints would pass them: int64 (the map divides in float64)
        hs = np.ascontiguousarray(hs, dtype=np.int64)
        ws = np.ascontiguousarray(ws, dtype=np.int64)
        _affine_rows(spec.name, vals.shape[1])(vals, hs, ws, out)
        first = affine3(spec, int(hs[0]), int(ws[0]), tuple(vals[0].tolist()))
        if first.tolist() != out[0].tolist():  # pragma: no cover - a libm that differs
            for m in range(n):
                out[m] = affine3(spec, int(hs[m]), int(ws[m]), tuple(vals[m].tolist()))
    return out


def compose(x: np.ndarray, m: np.ndarray, on: np.ndarray | None = None) -> np.ndarray:
    """Per row ``x[i] @ m[i]`` (where ``on[i]``; else ``x[i]``): the products ``Gather.add``
    takes one 3x3 matrix at a time, checked on the first row (a difference: row by row).

    Where every ``x[i]`` is the identity (bit for bit) and ``m`` is finite with no -0.0, the
    product is ``m`` itself, whatever the order of the sums or a fused multiply-add: each
    entry is ``m[i, r, c]`` plus products ``0.0 * finite`` (zeros), which leave a non-zero
    value as it is and a +0.0 at +0.0 (a batch's first map, a crop's: no matrix product)."""
    # (``on`` every member: the products as they are, a new array either way)
    every = on is None or bool(on.all())
    if _identities(x) and np.isfinite(m).all() and not (np.signbit(m) & (m == 0.0)).any():
        return m.copy() if every else np.where(on[:, None, None], m, x)
    out = np.matmul(x, m)
    if len(x) and out[0].tolist() != (x[0] @ m[0]).tolist():  # pragma: no cover
        out = np.stack([a @ b for a, b in zip(x, m, strict=True)])
    if not every:
        out = np.where(on[:, None, None], out, x)
    return out


#: the 3x3 identity's bits (+1.0 and +0.0)
_EYE_BITS = np.eye(3).reshape(9).view(np.int64)


def _identities(x: np.ndarray) -> bool:
    """Whether ``x`` is (n, 3, 3) identities, every entry's bits those of ``np.eye(3)``."""
    if x.ndim != 3 or x.shape[1:] != (3, 3) or not x.flags.c_contiguous:
        return False
    return bool((x.reshape(len(x), 9).view(np.int64) == _EYE_BITS).all())


#: ``random.mix`` (a SplitMix64 round) in compiled host code: the head of the draws' modules
MIX_HEAD = '''import math

import numpy as np
from numba import njit, uint64


@njit(cache=True, nogil=True, inline="always")
def _mix(z):
    z = z + uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> uint64(30))) * uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> uint64(27))) * uint64(0x94D049BB133111EB)
    return z ^ (z >> uint64(31))
'''

_MIX_SOURCE = ("# millipyde generated SplitMix64 rounds of random.key64 over arrays (batch draws)\n"
               + MIX_HEAD + '''


# (the GIL held: microseconds a batch, and a decode lane draws its region boxes with it,
# where each release waited up to the switch interval to take the GIL back)
@njit(cache=True)
def rounds(z, ts, out):
    for i in range(z.shape[0]):
        for t in range(ts.shape[0]):
            out[i, t] = _mix(z[i] ^ ts[t])


@njit(cache=True, nogil=True)
def op_uniforms(z, js, ts, out):
    # per op j: the op's round (z ^ js[j]), then uniforms as ``uniforms`` of it
    for j in range(js.shape[0]):
        for i in range(z.shape[0]):
            zj = _mix(z[i] ^ js[j])
            for t in range(ts.shape[0]):
                out[j, i, t] = float(_mix(zj ^ ts[t]) >> uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, nogil=True)
def uniforms(z, ts, out):
    for i in range(z.shape[0]):
        for t in range(ts.shape[0]):
            out[i, t] = float(_mix(z[i] ^ ts[t]) >> uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, nogil=True)
def group_ints(keys, order, uniq, first, inverse, bounds):
    # ``order``: the stable argsort of ``keys``; per distinct key (ascending) its value, its
    # first position and where its members start in ``order``; per member its key's rank
    u = -1
    for q in range(order.shape[0]):
        i = order[q]
        if q == 0 or keys[i] != keys[order[q - 1]]:
            u += 1
            uniq[u] = keys[i]
            first[u] = i
            bounds[u] = q
        inverse[i] = u
    bounds[u + 1] = order.shape[0]
    return u + 1


@njit(cache=True, nogil=True)
def ranged(u, lo, span, fixed, out):
    # column t: lo[t] + span[t] * u[:, t + 1] (an fmul, then an fadd: nothing contracted),
    # or lo[t] itself where the range is one value
    for i in range(out.shape[0]):
        for t in range(out.shape[1]):
            out[i, t] = lo[t] if fixed[t] else lo[t] + span[t] * u[i, t + 1]
''')


@functools.cache
def _mix_module():
    return load(_MIX_SOURCE, "cpu")


def mix_rounds(z: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """(n, T) ``random.mix(z[i] ^ ts[t])`` (uint64: integer arithmetic, the same bits)."""
    out = np.empty((len(z), len(ts)), dtype=np.uint64)
    _mix_module().rounds(np.ascontiguousarray(z, dtype=np.uint64),
                         np.ascontiguousarray(ts, dtype=np.uint64), out)
    return out


def mix_uniforms(z: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """(n, T) ``random.uniform01``'s float of ``random.mix(z[i] ^ ts[t])``."""
    out = np.empty((len(z), len(ts)))
    _mix_module().uniforms(np.ascontiguousarray(z, dtype=np.uint64),
                           np.ascontiguousarray(ts, dtype=np.uint64), out)
    return out


def op_uniforms(z: np.ndarray, js: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """(J, n, T) ``mix_uniforms(mix_rounds(z, js[j:j + 1])[:, 0], ts)`` for every j, one call."""
    out = np.empty((len(js), len(z), len(ts)))
    _mix_module().op_uniforms(np.ascontiguousarray(z, dtype=np.uint64),
                              np.ascontiguousarray(js, dtype=np.uint64),
                              np.ascontiguousarray(ts, dtype=np.uint64), out)
    return out


_ROWS_SOURCE = '''# millipyde generated parameter rows of a recorded batch's gather (batch_groups)
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def fill_rows(out, base, flags, tid, rows, src, dst, width, at, sel, clip_at, clip, ok):
    p = base.shape[1]
    for i in range(tid.shape[0]):
        t = tid[i]
        r = rows[i]
        for c in range(p):
            out[i, c] = base[t, c]
        for c in range(flags.shape[1]):
            out[i, p + c] = flags[t, c]
        for k in range(dst.shape[0]):
            if sel[k, t]:
                for c in range(width[k]):
                    out[i, dst[k] + c] = src[r, at[k] + c]
                if clip_at[k] >= 0 and src[r, clip_at[k]] != clip[k]:
                    ok[i] = False
'''


@functools.cache
def _rows_module():
    return load(_ROWS_SOURCE, "cpu")


def fill_rows(base: np.ndarray, flags: np.ndarray, tid: np.ndarray, rows: np.ndarray,
              src: np.ndarray, pieces: tuple, ok: np.ndarray) -> np.ndarray:
    """(n, P + G) rows: ``base[tid[i]]``, then ``flags[tid[i]]``, and each piece ``k`` that
    template ``tid[i]`` has (``sel[k]``) copies ``width[k]`` values of ``src[rows[i]]`` from
    column ``at[k]`` to column ``dst[k]``, in order (copies, no arithmetic: the values are the
    drawn ones); a piece with a clip column clears ``ok[i]`` where that column is not its
    ``clip``. ``pieces``: (dst, width, at, sel, clip_at, clip) arrays."""
    out = np.empty((len(tid), base.shape[1] + flags.shape[1]))
    _rows_module().fill_rows(out, base, flags, tid, rows, src, *pieces, ok)
    return out


def ranged(block: np.ndarray, ranges: tuple[tuple[float, float], ...]) -> np.ndarray:
    """(n, T) draws ``lo + (hi - lo) * block[:, t + 1]`` of each range ``(lo, hi)`` (``lo``
    where ``lo == hi``), as ``batch_record.draw`` computes them column by column in NumPy."""
    lo, span, fixed = _range_arrays(tuple(ranges))
    out = np.empty((block.shape[0], len(ranges)))
    _mix_module().ranged(block, lo, span, fixed, out)
    return out


@functools.lru_cache(maxsize=256)
def _range_arrays(ranges: tuple[tuple[float, float], ...]) -> tuple[np.ndarray, ...]:
    """``ranged``'s per-column ``lo``, ``span`` and ``fixed`` (an op's ranges are the same
    every batch: made once; read only)."""
    lo = np.array([a for a, _ in ranges], dtype=np.float64)
    span = np.array([b - a for a, b in ranges], dtype=np.float64)  # (Python floats)
    fixed = np.array([a == b for a, b in ranges], dtype=np.bool_)
    for a in (lo, span, fixed):
        a.flags.writeable = False
    return lo, span, fixed


_FITS_SOURCE = '''
from millipyde.graph.codegen import cpu_devices
from {module} import {name} as _try_py

_try = cpu_devices.device(_try_py)


# (the GIL held, as ``rounds``: a decode lane draws its region boxes with it)
@njit(cache=True, error_model="numpy")
def first_fits(z, hs, ws, params, tries, out, missed):
    # per member its first try that fits; draw k of try t ``uniforms``' of z ^ (D t + k)
    for i in range(z.shape[0]):
        for c in range(out.shape[1]):
            out[i, c] = 0
        missed[i] = True
        for t in range(tries):
            got = _try(hs[i], ws[i], {draws}params)
            if got[0]:
{stores}                missed[i] = False
                break
'''

#: draw ``D t + k`` of a member in ``_FITS_SOURCE``: ``uniforms``' float of ``_mix(z ^ word)``
FITS_DRAW = ("float(_mix(z[i] ^ uint64({d} * t + {k})) >> uint64(11))"
              " * (1.0 / 9007199254740992.0), ")


@functools.cache
def _fits_module(fn: Any, draws: int, values: int) -> Any:
    """The compiled loop of :func:`first_fits` for the try ``fn``, which it imports by name
    and compiles as a cpu device function (``cpu_devices.device``)."""
    module, name = fn.__module__, fn.__name__
    if getattr(importlib.import_module(module), name, None) is not fn:
        raise ValueError(f"fn must be a module-level function, got {fn!r}")
    src = (f"# millipyde generated first fitting tries of {module}.{name} "
           "(batch_math.first_fits)\n" + MIX_HEAD + _FITS_SOURCE.format(
               module=module, name=name,
               draws="".join(FITS_DRAW.format(d=draws, k=k) for k in range(draws)),
               stores="".join(f"                out[i, {c}] = got[{c + 1}]\n"
                              for c in range(values))))
    return load(src, "cpu")


def first_fits(fn: Any, z: np.ndarray, hw: np.ndarray, params: tuple[float, ...], tries: int,
               draws: int, values: int) -> tuple[np.ndarray, np.ndarray]:
    """``ops.base.first_fits`` of the members whose draw ``t`` is ``uniforms``' of ``z ^ t``
    (``batch_ops.Ctx``): the try ``fn`` (``resized_crop.window_try``) compiled into one loop
    over the members, the same IEEE operations in the same order as ``fn`` in Python
    (libm's ``exp`` as CPython's ``math.exp``; NumPy's error model, where the try's Python
    guards against dividing by zero)."""
    n = len(z)
    out = np.empty((n, values), dtype=np.int64)
    missed = np.empty(n, dtype=np.bool_)
    if n:
        _fits_module(fn, draws, values).first_fits(
            np.ascontiguousarray(z, dtype=np.uint64),
            np.ascontiguousarray(hw[:, 0], dtype=np.int64),
            np.ascontiguousarray(hw[:, 1], dtype=np.int64),
            tuple(float(v) for v in params), int(tries), out, missed)
    return out, np.flatnonzero(missed)


def group_ints(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                         np.ndarray]:
    """``np.unique(keys, return_index=True, return_inverse=True)`` (first positions: the first
    occurrence), the stable argsort of the inverse (members by key, in order) and where each
    key's members start in it (one more entry: the end): what ``batch_record`` groups by."""
    n = len(keys)
    order = np.argsort(keys, kind="stable")
    uniq = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    inverse = np.empty(n, dtype=np.int64)
    bounds = np.empty(n + 1, dtype=np.int64)
    m = _mix_module().group_ints(keys, order, uniq, first, inverse, bounds) if n else 0
    if not n:
        bounds[0] = 0
    return uniq[:m], first[:m], inverse, order, bounds[:m + 1]
