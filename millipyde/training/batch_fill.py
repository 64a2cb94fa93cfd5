"""A key plan's gathers' parameter rows filled at once (``batch_groups``' host path).

Each gather of a key plan (``batch_groups._GatherPlan``) fills its members' parameter rows
with one ``batch_math.fill_rows`` call: its base rows and gate flags, then pieces that copy
drawn columns and sampler maps from a *source*, the batch's columns side by side. A plan
of several gathers fills them all in one call (:class:`RowsFill`): their rows side by side,
their sources each once, each gather's rows then a view of its own columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import batch_math


def source_columns(sources: list[Any], key: tuple, d: Any) -> np.ndarray:
    """(N, W) the drawn columns and sampler maps of ``sources`` side by side (an op's index:
    its drawn parameters; a sampler: its six map values, then its clip, 0 or 1), made once
    per batch for each ``key`` (kept in ``d.cache``, ``batch_groups.Draws``)."""
    got = d.cache.get(("source", key))
    if got is None:
        parts = []
        for x in sources:
            if isinstance(x, tuple):
                maps, clips = d.maps(*x)
                parts += [maps, clips[:, None].astype(np.float64)]
            else:
                parts.append(d.params[x])
        got = (np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]) if parts \
            else np.zeros((1, 0))
        d.cache[("source", key)] = got
    return got


class KernelPlans(list):
    """A key plan's kernel plans, and their gathers' parameter rows as one fill
    (:class:`RowsFill`, None where there are fewer than two gathers)."""

    fill: Any = None


class RowsFill:
    """The parameter rows of a key plan's gathers side by side, filled by one
    ``batch_math.fill_rows`` call per batch instead of one per gather: each gather's base
    row and gate flags are base columns at its offset, its pieces copy the same drawn columns
    and sampler maps (from the gathers' sources side by side) into its own columns, in its
    own order (the gathers' columns do not overlap). Each gather's rows are then a view of
    its columns: the values one call per gather gives."""

    def __init__(self, gathers: list[tuple[int, Any]]) -> None:
        plans = [kp for _, kp in gathers]
        widths = [kp.p.shape[1] + kp.flags.shape[1] for kp in plans]
        self.cols = [(i, o, o + w) for (i, _), o, w in
                     zip(gathers, np.cumsum([0, *widths[:-1]]).tolist(), widths, strict=True)]
        self.base = np.concatenate([np.concatenate([kp.p, kp.flags], axis=1) for kp in plans],
                                   axis=1)
        self.flags = np.zeros((self.base.shape[0], 0))
        # the gathers' sources, each once, side by side
        self.sources: list[Any] = []
        keys: list[Any] = []
        at: dict[Any, int] = {}
        moved = []  # per gather: its source column -> the combined one
        width = 0
        for kp in plans:
            cols, own = [], 0
            for x, key, n in zip(kp.sources, kp.skey, kp.source_widths, strict=True):
                if key not in at:
                    at[key] = width
                    self.sources.append(x)
                    keys.append(key)
                    width += n
                cols.append((own, n, at[key]))
                own += n
            moved.append(cols)
        self.skey = tuple(keys)
        parts: list[list[Any]] = [[], [], [], [], [], []]
        for (_, o, _), kp, cols in zip(self.cols, plans, moved, strict=True):
            dst, wid, src_at, sel, clip_at, clip = kp.pieces
            for q in range(len(dst)):
                parts[0].append(int(dst[q]) + o)
                parts[1].append(int(wid[q]))
                parts[2].append(_moved(cols, int(src_at[q])))
                parts[3].append(sel[q])
                parts[4].append(-1 if clip_at[q] < 0 else _moved(cols, int(clip_at[q])))
                parts[5].append(float(clip[q]))
        n = self.base.shape[0]
        self.pieces = (np.array(parts[0], dtype=np.int64), np.array(parts[1], dtype=np.int64),
                       np.array(parts[2], dtype=np.int64),
                       np.array(parts[3], dtype=bool).reshape(len(parts[0]), n),
                       np.array(parts[4], dtype=np.int64),
                       np.array(parts[5], dtype=np.float64))

    @classmethod
    def of(cls, gathers: list[tuple[int, Any]]) -> RowsFill | None:
        """The fill of a key plan's gathers (kernel index, gather plan); None for fewer
        than two."""
        return cls(gathers) if len(gathers) > 1 else None

    def rows(self, tid: np.ndarray, rows: np.ndarray, d: Any,
             ok: np.ndarray) -> dict[int, np.ndarray]:
        """Per gather (kernel index) its members' parameter rows: views of one fill."""
        p = batch_math.fill_rows(self.base, self.flags, tid, rows,
                                 source_columns(self.sources, self.skey, d), self.pieces, ok)
        return {i: p[:, a:b] for i, a, b in self.cols}


def _moved(cols: list[tuple[int, int, int]], column: int) -> int:
    """Where a gather's source ``column`` is in the combined source."""
    for own, n, at in cols:
        if own <= column < own + n:
            return at + column - own
    raise AssertionError(f"source column {column} outside the gather's sources")
