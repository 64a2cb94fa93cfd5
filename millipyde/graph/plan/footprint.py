"""Which pixels of a stencil's output the one gather reading it needs (bounds inference).

A fused gather reads its source through an affine map: a rotation reads a rotated rectangle, a
crop a window, a flip everything. When a stencil's output is an intermediate that only this
gather reads, the stencil need not compute the rest. ``spans`` gives, per band of ``band``
rows of the stencil's output, the column range ``[lo, hi)`` that holds every pixel the gather
can read; the one-pass tile kernel skips the tiles outside it. Fusion is what makes this
possible: with fusion off the stencil's output is read whole by the next op.

The read set, in the gather's terms (``gather_body.gather_body``): output pixel ``o`` samples at
``f = A o`` (or ``f = o`` with no sampler), reads the taps ``floor(f) + {0, 1}`` per axis when
they fall inside the sampler's input, and maps each through the integer map ``P``. So every
read lies in ``P (f + [-1, 1]^2)``. The ``f`` of all outputs form a parallelogram (``A`` maps
the output rectangle's corners); the box around it becomes, under ``P``, a box of half-widths
``|P00| + |P01|`` rows and ``|P10| + |P11|`` columns. One more pixel each way absorbs any
difference between this float64 arithmetic and the kernel's.
"""

from __future__ import annotations

import functools

import numpy as np

from .schedule import Gather


def _corners(A: np.ndarray | None, P: np.ndarray, out_shape: tuple[int, int]) -> np.ndarray:
    """(2, 4): the source positions a gather's four output corners map to, in order."""
    h, w = out_shape
    o = np.array([[0, 0, 1], [0, w - 1, 1], [h - 1, w - 1, 1], [h - 1, 0, 1]], float).T
    f = o if A is None else A @ o
    return (np.rint(P) @ f)[:2]


def _x_ranges(vy: np.ndarray, vx: np.ndarray, ya: np.ndarray, yb: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Per strip ``[ya, yb]``: the columns of the convex polygon (vertices in order) within it,
    as (min, max); +inf / -inf where the strip misses the polygon."""
    ya, yb = ya[:, None], yb[:, None]
    inside = (ya <= vy) & (vy <= yb)
    lo = np.where(inside, vx, np.inf).min(1)
    hi = np.where(inside, vx, -np.inf).max(1)
    y0, x0, y1, x1 = vy, vx, np.roll(vy, -1), np.roll(vx, -1)
    dy = np.where(y0 == y1, np.nan, y1 - y0)  # a flat edge: its vertices already count
    for yc in (ya, yb):
        t = (yc - y0) / dy
        hit = (t >= 0.0) & (t <= 1.0)
        xc = x0 + np.where(hit, t, 0.0) * (x1 - x0)
        lo = np.minimum(lo, np.where(hit, xc, np.inf).min(1))
        hi = np.maximum(hi, np.where(hit, xc, -np.inf).max(1))
    return lo, hi


def spans(k: Gather, band: int) -> np.ndarray:
    """(bands, 2) int32 ``[lo, hi)`` columns of ``k.source`` per band of ``band`` rows that hold
    every pixel gather ``k`` reads (``lo == hi`` where it reads none); read-only."""
    a = None if k.A is None else np.asarray(k.A, np.float64).tobytes()
    return _spans(a, np.asarray(k.P, np.float64).tobytes(), tuple(k.output.shape[:2]),
                  tuple(k.source.shape[:2]), band)


# A Pipeline meets the same maps for every input; working them out takes 0.1-0.2 ms of host time
@functools.lru_cache(maxsize=256)
def _spans(a: bytes | None, p: bytes, out_shape: tuple[int, int], src_shape: tuple[int, int],
           band: int) -> np.ndarray:
    sh, sw = src_shape
    A = None if a is None else np.frombuffer(a).reshape(3, 3)
    P = np.frombuffer(p).reshape(3, 3)
    p = np.rint(P)
    pad = 1 if A is not None else 0
    ry = pad * (abs(p[0, 0]) + abs(p[0, 1])) + 1
    rx = pad * (abs(p[1, 0]) + abs(p[1, 1])) + 1
    vy, vx = _corners(A, P, out_shape)
    top = np.arange(0, sh, band, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # NaN slopes of flat edges compare False
        lo, hi = _x_ranges(vy, vx, top - ry, np.minimum(sh, top + band) - 1 + ry)
    out = np.zeros((top.size, 2), np.int32)
    hit = np.isfinite(lo)
    out[hit, 0] = np.clip(np.floor(lo[hit] - rx), 0, sw)
    out[hit, 1] = np.clip(np.ceil(hi[hit] + rx) + 1, 0, sw)
    out[out[:, 0] >= out[:, 1]] = 0
    out.flags.writeable = False
    return out


# every stencil launch without a private reader asks for these (read-only, like ``spans``)
@functools.lru_cache(maxsize=256)
def full_spans(h: int, w: int, band: int) -> np.ndarray:
    """Every column of every band: compute all of an ``h`` x ``w`` output."""
    out = np.zeros(((h + band - 1) // band, 2), np.int32)
    out[:, 1] = w
    out.flags.writeable = False
    return out
