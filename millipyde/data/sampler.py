"""Which sample each output is: epochs and shuffle as torch's ``DistributedSampler``.

A Generator numbers its outputs ``k = 0, 1, 2, ...`` over all ranks; rank ``r`` of
``world`` makes the ``k`` with ``k % world == r``, and every random draw of output ``k`` is keyed
on ``(seed, k)``. :class:`EpochSampler` says which sample of the source output ``k`` shows:

- epoch ``e`` is the outputs ``e * T <= k < (e + 1) * T``, with ``T = world * L`` and ``L`` the
  length of every rank's share: ``ceil(n / world)`` (padded) or ``n // world`` (``drop_last``);
- its order is ``0 .. n-1`` (``shuffle=False``) or a permutation drawn from ``(seed, e)``;
- position ``p = k - e * T`` shows ``order[p]`` while ``p < n``; the positions past ``n`` (the
  padding that makes the shares equal) repeat the rank's own samples from the start of its
  share (``order[r + world * (i % own)]``, ``i = p // world``), so shares are disjoint before
  padding and complete together.

Since ``T`` is a multiple of ``world``, rank ``r``'s ``j``-th output from the start of epoch
``e0`` is ``k = e0 * T + r + world * j``, and every draw is a function of ``(seed, epoch,
position)``. With ``shuffle=False`` and ``world`` dividing ``n``, ``T = n`` and output ``k``
shows sample ``k % n``: the thesis Generator's cycle, so in-memory inputs give what they gave
before epochs existed.

``cycle=True`` keeps that cycle even where ``world`` does not divide ``n`` (in-memory inputs in
order with a count of ``outputs``, the Generator's earlier contract): no padding, no epochs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

#: permutations kept (epochs in flight at once: the one being read and the next)
_KEPT_ORDERS = 3


class EpochSampler:
    """The sample of every output index ``k`` (see the module doc).

    Parameters
    ----------
    n : int
        Samples in the source (>= 1).
    world, rank : int
        Data-parallel ranks: this sampler's rank and how many there are.
    shuffle : bool
        Draw each epoch's order from ``(seed, epoch)``; else ``0 .. n-1``.
    seed : int
        The Generator's seed.
    drop_last : bool
        Cut every rank's share to ``n // world`` instead of padding it to ``ceil(n / world)``.
    cycle : bool
        Output ``k`` shows sample ``k % n`` and no epoch is defined (see the module doc).
    """

    def __init__(self, n: int, world: int = 1, rank: int = 0, shuffle: bool = False,
                 seed: int = 0, drop_last: bool = False, cycle: bool = False) -> None:
        if n < 1:
            raise ValueError("a sampler needs at least one sample")
        self.n, self.world, self.rank = int(n), int(world), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.cycle = bool(cycle)
        if self.cycle:
            self.length = len(range(self.rank, self.n, self.world))
            self.period = self.n
        else:
            self.length = self.n // self.world if self.drop_last else -(-self.n // self.world)
            if self.length == 0:
                raise ValueError(f"drop_last with {self.n} samples over {self.world} ranks "
                                 "leaves every rank an empty share")
            self.period = self.world * self.length
        self._orders: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # readers and the decode thread ask at once

    def __getstate__(self) -> dict:
        # sent to a decode worker process (``data.process``): the lock and the cache stay
        state = self.__dict__.copy()
        state["_lock"] = None
        state["_orders"] = OrderedDict()
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- epochs --------------------------------------------------------------------------
    def order(self, epoch: int) -> np.ndarray:
        """Epoch ``epoch``'s order of the samples (int64, a permutation of ``0 .. n-1``)."""
        if not self.shuffle:
            return np.arange(self.n, dtype=np.int64)
        with self._lock:
            got = self._orders.get(epoch)
            if got is None:
                ss = np.random.SeedSequence([self.seed % (1 << 128), int(epoch), 0x6D705F65])
                got = np.random.Generator(np.random.PCG64(ss)).permutation(self.n)
                got = self._orders[epoch] = got.astype(np.int64)
                while len(self._orders) > _KEPT_ORDERS:
                    self._orders.popitem(last=False)
            else:
                self._orders.move_to_end(epoch)
            return got

    def start(self, epoch: int) -> int:
        """The output index where this rank's share of ``epoch`` starts."""
        if self.cycle and epoch:
            raise ValueError("epochs need equal shares: in-memory inputs in order with a "
                             "count of outputs cycle instead (give shuffle=True, or "
                             "outputs=None)")
        return int(epoch) * self.period + self.rank

    def output(self, epoch: int, j: int | np.ndarray) -> Any:
        """Output index of this rank's ``j``-th output counted from the start of ``epoch``."""
        return self.start(epoch) + self.world * j

    def epoch_of(self, k: int) -> int:
        """The epoch output ``k`` belongs to."""
        return int(k) // self.period

    # -- samples -------------------------------------------------------------------------
    def sample_of(self, k: Any) -> Any:
        """The sample index output ``k`` shows (an int, or an int64 array for an array)."""
        scalar = np.ndim(k) == 0
        karr = np.atleast_1d(np.asarray(k, dtype=np.int64))
        if self.cycle or (not self.shuffle and self.period == self.n):
            out = karr % self.n
        else:
            out = np.empty_like(karr)
            epochs = karr // self.period
            for e in np.unique(epochs).tolist():
                at = epochs == e
                out[at] = self._positions(self.order(int(e)), karr[at] - e * self.period)
        return int(out[0]) if scalar else out

    def _positions(self, order: np.ndarray, p: np.ndarray) -> np.ndarray:
        n, world = self.n, self.world
        out = np.empty_like(p)
        direct = p < n
        out[direct] = order[p[direct]]
        pad = ~direct
        if pad.any():
            q = p[pad]
            r = q % world
            i = q // world
            own = np.maximum(0, -(-(n - r) // world))  # len(range(r, n, world))
            idx = np.where(own > 0, r + world * (i % np.maximum(own, 1)), q % n)
            out[pad] = order[idx]
        return out

    def refills(self, k: int) -> Iterator[int]:
        """Output indices of this rank's share of ``k``'s epoch after ``k`` (wrapping round),
        in order: whose samples take ``k``'s place where its sample cannot be read."""
        if self.cycle:  # in-memory inputs: nothing to refill
            return
        e = self.epoch_of(k)
        i = (int(k) - e * self.period) // self.world
        first = e * self.period + self.rank
        for t in range(1, self.length):
            yield first + self.world * ((i + t) % self.length)

    # -- batches -------------------------------------------------------------------------
    def batches_per_epoch(self, size: int, drop_last: bool = False) -> int:
        """Batches of ``size`` in this rank's share of one epoch."""
        return self.length // size if drop_last else -(-self.length // size)

    def epoch_batch(self, epoch0: int, b: int, size: int, drop_last: bool = False) -> np.ndarray:
        """Output indices of batch ``b`` of the epoch-aligned batches from ``epoch0``."""
        per = self.batches_per_epoch(size, drop_last)
        e, bb = epoch0 + b // per, b % per
        j0 = bb * size
        m = min(size, self.length - j0)
        return self.output(e, j0 + np.arange(m, dtype=np.int64))

    def state(self) -> dict:
        """What a resumed stream must agree on."""
        return {"n": self.n, "world": self.world, "rank": self.rank, "shuffle": self.shuffle,
                "seed": self.seed, "drop_last": self.drop_last, "cycle": self.cycle}
