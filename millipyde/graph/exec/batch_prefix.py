"""Kernels that several groups of a recorded batch begin with, launched once for all of them.

A figure-5.1 batch splits into groups by what follows the batched Gaussian (colour writer,
grey conversion then grey writer, a rotation whose warp clip plans its own writer), but the
groups' first kernels have the same key: the brightness gather and the Gaussian run for every
member with per-member parameters. Launched per group, each is a separate, smaller launch
with its own partial last wave (two or three ``tile2d`` launches per batch, the ncu in
bench/RESULTS.md). Here the groups whose keys agree on their first ``k`` kernels (their
arguments stacked alike: gate flags on the same gathers, one shared table equal) run those
``k`` kernels as one group of all their members (:class:`PrefixGroup`); each group then goes
on from kernel ``k``, its member m reading the prefix's buffer at its offset plus m
(``Group.launch(start=k)``). Every member's kernels and arguments are its own, so values are
those of the groups launched apart (tests compare).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backend import ACTIVE as runtime
from .batch_group import Group, Pack, as4, tables_of

#: Shared prefixes launched once (False: every group launches all its kernels; benchmarks and
#: tests set this to compare).
ENABLED = True


def _arrays_fit(groups: list[Any], i: int, kernel: Any) -> bool:
    """Whether kernel ``i``'s arrays of ``groups`` stack into one launch's arguments."""
    arrays = [g.arrays[i] for g in groups]
    if "p" not in arrays[0]:
        return True  # taps and radii: padded to the widest
    if len({a["gated"] for a in arrays}) > 1 or len({a["p"].shape[1] for a in arrays}) > 1:
        return False
    if tables_of(kernel):
        return True  # a table per member: stacked
    first = arrays[0]["lut"]
    return all(a["lut"] is first or np.array_equal(a["lut"], first) for a in arrays[1:])


def shared_prefix(groups: list[Any]) -> int:
    """How many first kernels ``groups`` (two or more) can run as one group (0: none).

    Keys equal up to there, every group keeping a kernel after it, arguments that stack.
    """
    key0, kernels0 = groups[0].key, groups[0].kernels()
    n = min(len(g.kernels()) for g in groups) - 1
    k = 0
    while k < n and all(g.key[:3 + k] == key0[:3 + k] for g in groups[1:]) and \
            _arrays_fit(groups, k, kernels0[k]):
        k += 1
    return k


def prefixes(groups: list[Any]) -> list[tuple[list[Any], int]]:
    """The runs of ``groups`` (array groups of one batch) that share a prefix, and its length.

    Only on backends that launch grids (the cpu backend runs a batch member by member).
    """
    if not ENABLED or not runtime.caps.grid_launches:
        return []
    by_first: dict[Any, list[Any]] = {}
    for g in groups:
        if hasattr(g, "arrays") and len(g.key) > 3:
            by_first.setdefault(g.key[:3], []).append(g)
    runs = []
    for gs in by_first.values():
        k = _shared_prefix(gs) if len(gs) > 1 else 0
        if k:
            runs.append((gs, k))
    return runs


def _shared_prefix(groups: list[Any]) -> int:
    """``shared_prefix``, kept per combination of the groups' key plans: what it compares
    (keys, gate flags, row widths, shared tables) is the plans', not the batch's (groups
    without their plans' snapshot, ``ArrayGroup.plans``, are compared every time)."""
    plans = [getattr(g, "plans", None) for g in groups]
    if any(p is None for p in plans):
        return shared_prefix(groups)
    key = tuple(map(id, plans))
    got = _PREFIXES.get(key)
    if got is None or any(a is not b for a, b in zip(got[0], plans, strict=True)):
        if len(_PREFIXES) >= 1024:
            _PREFIXES.clear()
        got = _PREFIXES[key] = (plans, shared_prefix(groups))
    return got[1]


#: ``_shared_prefix``: the plans' ids -> (the plans, held so the ids stay theirs; the length)
_PREFIXES: dict[tuple[int, ...], tuple[list[Any], int]] = {}


class PrefixGroup(Group):
    """The first ``k`` kernels of ``groups`` as one group of all their members, in order."""

    def __init__(self, groups: list[Any], k: int) -> None:
        g0 = groups[0]
        super().__init__(g0.key[:2 + k], g0.stack, g0.device)
        self.memo = g0.memo  # the same compiled kernels as the groups' first k
        self.groups = groups
        self._kernels = g0.kernels()[:k]
        self.sidx = np.concatenate([g.sidx for g in groups])
        self.offsets, at = [], 0
        for g in groups:
            self.offsets.append(at)
            at += g.size()
        self.arrays = [self._stacked(i) for i in range(k)]
        self._starts: list[int] = []

    def _stack4(self) -> Any:
        return self.groups[0]._stack4()  # (where the groups keep it: not in a shared memo)

    def _stacked(self, i: int) -> dict[str, Any]:
        arrays = [g.arrays[i] for g in self.groups]
        if "p" in arrays[0]:
            p = np.concatenate([a["p"] for a in arrays])
            if tables_of(self._kernels[i]):
                return {"lut": np.concatenate([a["lut"] for a in arrays]), "p": p,
                        "gated": arrays[0]["gated"]}
            # one table (equal in every group: ``_arrays_fit``), the first group's constant
            return {"lut": arrays[0]["lut"], "p": p, "gated": arrays[0]["gated"],
                    "lut_held": arrays[0].get("lut_held")}
        rad = np.concatenate([a["rad"] for a in arrays])
        widths = {a["taps"].shape[1] for a in arrays}
        if len(widths) == 1:  # (the usual case: one reach) stacked as they are
            return {"taps": np.concatenate([a["taps"] for a in arrays]), "rad": rad}
        taps = np.zeros((len(self.sidx), max(widths)))
        at = 0
        for a in arrays:
            t = a["taps"]
            taps[at:at + t.shape[0], :t.shape[1]] = t
            at += t.shape[0]
        return {"taps": taps, "rad": rad}

    def kernels(self) -> list:
        return self._kernels

    def sidx_host(self) -> list[int]:
        return self.sidx.tolist()

    def size(self) -> int:
        return len(self.sidx)

    def radius(self, i: int) -> int:
        return int(self.arrays[i]["rad"].max(initial=0))

    def pack(self, pk: Pack) -> None:
        """The union's slots (as ``ArrayGroup.pack``), and each group's offsets into it."""
        self.pack_arrays(pk, self.sidx, self.arrays)
        self._starts = [pk.add(np.arange(o, o + g.size(), dtype=np.int64))
                        for o, g in zip(self.offsets, self.groups, strict=True)]

    def run_prefix(self, pk: Pack) -> list[tuple[Any, int, Any, Any]]:
        """Launch the prefix; per group ``(group, k, src, sidx)`` for ``launch(start=k)``."""
        out = self.launch(pk)
        node = self._kernels[-1].output
        buf = runtime.reshape(out, (len(self.sidx), *as4(node.shape)))
        k = len(self._kernels)
        return [(g, k, buf, pk.views[s]) for g, s in zip(self.groups, self._starts,
                                                          strict=True)]
