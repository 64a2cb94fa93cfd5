"""Gaussian taps of many sigmas at once for a batch recorded at once (``batch_math``,
``batch_groups.Draws.taps``): the values the op definition's ``gaussian_taps``
(``ops/filters/gaussian.py``) gives each sigma, bit for bit (``tests/test_batch_math.py``,
``tests/test_batch_record.py``)."""

from __future__ import annotations

import functools

import numpy as np

from ..graph.codegen.loader import load


def gaussian_taps(sigmas: np.ndarray, reach: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The op definition's ``gaussian_taps(s, reach)`` for every sigma > 0: taps
    (n, 2 max(radius) + 1), row ``i`` starting with sigma ``i``'s, and the radii (-1 and zero
    taps where a sigma is not > 0: not blurred).

    Sigmas whose radius fits the reach: radii and every row's exp arguments laid out flat
    (compiled, the same products), one NumPy ``exp`` over all of them (an elementwise ufunc
    gives each element the value it gives it in a 1-D array), then per row NumPy's own
    pairwise sum of its ``2 r + 1`` values and the division (compiled: ``_taps_module``),
    checked against ``phi.sum()`` on the longest row (a NumPy that sums otherwise: the
    per-radius NumPy code). The others call the scalar function.
    """
    from ..ops.filters.gaussian import TRUNCATE
    from ..ops.filters.gaussian import gaussian_taps as gaussian

    s = np.ascontiguousarray(sigmas, dtype=np.float64)
    mod = _taps_module()
    radius = np.empty(len(s), dtype=np.int64)
    starts = np.empty(len(s), dtype=np.int64)
    # radius -1: not blurred; -2: past the reach (the scalar function)
    total, longest = mod.taps_layout(s, TRUNCATE, -1 if reach is None else int(reach),
                                     radius, starts)
    capped = np.flatnonzero(radius == -2).tolist() if reach is not None else []
    scalar = {i: gaussian(float(s[i]), reach) for i in capped}
    width = max([int(radius[longest]) if longest >= 0 else 0]
                + [len(t) // 2 for t in scalar.values()])
    out = np.zeros((len(s), 2 * width + 1))
    if total:
        args = np.empty(total)
        mod.taps_args(s, radius, starts, args)
        phi = np.exp(args)
        mod.taps_norm(phi, radius, starts, out)
        # NumPy's pairwise sum, as the compiled one does it: the longest row checked
        n = 2 * int(radius[longest]) + 1
        seg = phi[starts[longest]:starts[longest] + n]
        if (seg / seg.sum()).tolist() != out[longest, :n].tolist():  # pragma: no cover
            _taps_numpy(s, radius, out)
    for i, taps in scalar.items():
        radius[i] = len(taps) // 2
        out[i, :len(taps)] = taps
    return out, radius


def _taps_numpy(s: np.ndarray, radius: np.ndarray, out: np.ndarray) -> None:
    """``gaussian_taps``' rows of radius >= 0 per radius in NumPy (``phi.sum(axis=1)``)."""
    for r in np.unique(radius[radius >= 0]).tolist():
        idx = np.flatnonzero(radius == r)
        x = np.arange(-r, r + 1, dtype=np.float64)
        p = np.exp((-0.5 / (s[idx] * s[idx]))[:, None] * x * x)
        out[idx, :2 * r + 1] = p / p.sum(axis=1)[:, None]


_TAPS_SOURCE = '''# millipyde generated batched Gaussian taps (batch_taps.gaussian_taps)
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def taps_layout(s, truncate, reach, radius, starts):
    # per row its radius (``int(truncate * s + 0.5)``; -1: s not > 0; -2: past ``reach``,
    # when >= 0) and where its 2 r + 1 values start; the total and the longest row (-1: none)
    at = 0
    longest = -1
    for i in range(s.shape[0]):
        starts[i] = at
        if not s[i] > 0:
            radius[i] = -1
            continue
        r = np.int64(truncate * s[i] + 0.5)
        if r < 0 or (reach >= 0 and r > reach):
            radius[i] = -2
            continue
        radius[i] = r
        at += 2 * r + 1
        if longest < 0 or r > radius[longest]:
            longest = i
    return at, longest


@njit(cache=True, nogil=True)
def taps_args(s, radius, starts, args):
    # the arguments of ``filters.gaussian``'s exp, row after row: (-0.5 / s**2 * x) * x
    for i in range(s.shape[0]):
        r = radius[i]
        if r < 0:
            continue
        c = -0.5 / (s[i] * s[i])
        at = starts[i]
        for q in range(2 * r + 1):
            x = float(q - r)
            args[at + q] = c * x * x


@njit(cache=True, nogil=True)
def _pairwise(a, lo, n):
    # NumPy's pairwise_sum of float64 (``phi.sum()``): 8 accumulators up to 128 values
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    if n <= 128:
        r0 = a[lo]
        r1 = a[lo + 1]
        r2 = a[lo + 2]
        r3 = a[lo + 3]
        r4 = a[lo + 4]
        r5 = a[lo + 5]
        r6 = a[lo + 6]
        r7 = a[lo + 7]
        i = 8
        m = n - n % 8
        while i < m:
            r0 += a[lo + i]
            r1 += a[lo + i + 1]
            r2 += a[lo + i + 2]
            r3 += a[lo + i + 3]
            r4 += a[lo + i + 4]
            r5 += a[lo + i + 5]
            r6 += a[lo + i + 6]
            r7 += a[lo + i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[lo + i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a, lo, n2) + _pairwise(a, lo + n2, n - n2)


@njit(cache=True, nogil=True)
def taps_norm(phi, radius, starts, out):
    for i in range(radius.shape[0]):
        r = radius[i]
        if r < 0:
            continue
        at = starts[i]
        n = 2 * r + 1
        total = _pairwise(phi, at, n)
        for q in range(n):
            out[i, q] = phi[at + q] / total
'''


@functools.cache
def _taps_module():
    return load(_TAPS_SOURCE, "cpu")
