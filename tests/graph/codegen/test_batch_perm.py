"""The axis-map batched gather (``codegen.batch_perm``): where it launches, and its members'
contiguous, tiled and general branches bit for bit against the general tabled gather."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from tiers import tiered

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import batch_gather, batch_perm, loader
from millipyde.graph.codegen import gather_sig as gs

cudasim_ok = pytest.mark.cudasim_ok
gpu_kernels = pytest.mark.skipif(not runtime.caps.grid_launches,
                                 reason="GPU kernels: cuda or cudasim")
# the figure-5.1 first gather: brightness through the per-block table, no sampler
FIRST = gs.GatherSig(3, "chain", True, False, "", pre=("brightness",),
                     lut_stages=(False, False), clip=False)

# the 8 axis maps of an n x n image as (q0, q1, q3, q4) with the offsets (q2, q5) that keep
# them inside it: identity, flips, transposes, rotations
AXIS = {"identity": (1, 0, 0, 1, 0, 0), "fliplr": (1, 0, 0, -1, 0, 1),
        "flipud": (-1, 0, 0, 1, 1, 0), "rot180": (-1, 0, 0, -1, 1, 1),
        "transpose": (0, 1, 1, 0, 0, 0), "rot90": (0, 1, -1, 0, 0, 1),
        "rot270": (0, -1, 1, 0, 1, 0), "antitranspose": (0, -1, -1, 0, 1, 1)}


def test_applies_to_tabled_gathers_of_whole_pixels() -> None:
    assert batch_perm.applies(FIRST, "cuda", np.uint8)
    assert batch_perm.applies(dataclasses.replace(FIRST, cin=1), "cuda", np.uint8)
    for sig, target, dtype in ((FIRST, "cpu", np.uint8), (FIRST, "cuda", np.uint16),
                               (dataclasses.replace(FIRST, sampler=True), "cuda", np.uint8),
                               (dataclasses.replace(FIRST, grey=True), "cuda", np.uint8),
                               (dataclasses.replace(FIRST, cin=4), "cuda", np.uint8),
                               (dataclasses.replace(FIRST, pre=()), "cuda", np.uint8)):
        assert not batch_perm.applies(sig, target, dtype), (sig, target, dtype)
    with pytest.raises(ValueError, match="whole pixels"):
        batch_gather.gather_axis_source(dataclasses.replace(FIRST, sampler=True), "cuda")


class _Words:
    """A backend whose ``words`` says whether a buffer is whole aligned words."""

    def __init__(self, ok: set[int]) -> None:
        self.ok = ok

    def flat(self, a: np.ndarray) -> np.ndarray:
        return a.reshape(-1)

    def words(self, a: np.ndarray) -> np.ndarray | None:
        return a.view(np.uint64) if a.size in self.ok else None


def test_launches_where_rows_and_buffers_are_whole_words() -> None:
    src = np.zeros((2, 16, 16, 3), np.uint8)
    dst = np.zeros(4 * 16 * 16 * 3, np.uint8)
    rt = _Words({src.size, dst.size})
    got = batch_gather.axis_words(FIRST, "cuda", src, dst, 16, False, rt)
    assert got is not None and got[0].dtype == np.uint64 and got[1].size * 8 == dst.size
    assert batch_gather.axis_words(FIRST, "cuda", src, dst, 12, False, rt) is None  # w % 8
    assert batch_gather.axis_words(FIRST, "cuda", src, dst, 16, True, rt) is None  # wide
    assert batch_gather.axis_words(FIRST, "cpu", src, dst, 16, False, rt) is None
    narrow_src = np.zeros((2, 16, 12, 3), np.uint8)  # source rows of 36 bytes
    assert batch_gather.axis_words(FIRST, "cuda", narrow_src, dst, 16, False, rt) is None
    assert batch_gather.axis_words(FIRST, "cuda", src, dst, 16, False,
                                   _Words({src.size})) is None  # the output is not words


def _params(sig: gs.GatherSig, maps: list[tuple[int, ...]], rng: np.random.Generator
            ) -> np.ndarray:
    """Parameter rows (gates after them) of members with integer maps ``maps``
    (q0, q1, q3, q4, q2, q5), random chain parameters and gate flags."""
    n, ng = gs.gather_nparams(sig), gs.gather_ngates(sig)
    p = np.zeros((len(maps), n + ng))
    for i, (q0, q1, q3, q4, q2, q5) in enumerate(maps):
        p[i, gs.P_OFF:gs.P_OFF + 6] = (q0, q1, q2, q3, q4, q5)
        p[i, gs.FULL_OFF], p[i, gs.CLIP_OFF], p[i, gs.CLIP_HI_OFF] = 255.0, 0.0, 255.0
        offs = gs.op_offsets(gs.chained(sig))
        p[i, offs[0]] = rng.uniform(-0.4, 0.4)
        if len(offs) > 1:  # colorize's gains
            p[i, offs[1]:offs[1] + 3] = rng.uniform(0.5, 1.5, 3)
        # the chain gated off for every third member (not the identities: 0, 8, the last)
        p[i, n:n + len(sig.pre)] = float(i % 3 == 1)
        p[i, n + len(sig.pre)] = 1.0
    return p


def _maps(n: int, sh: int, sw: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Every axis map of an ``n`` x ``n`` output from an ``sh`` x ``sw`` source at random
    offsets inside it, twice; a row crop; and, where the source is large enough, two shears
    (not axis maps: the general branch)."""
    out = []
    for _ in range(2):
        for q0, q1, q3, q4, r, c in AXIS.values():
            # the flipped axes start at their far end
            oy, ox = int(rng.integers(0, sh - n + 1)), int(rng.integers(0, sw - n + 1))
            out.append((q0, q1, q3, q4, oy + r * (n - 1), ox + c * (n - 1)))
    out.append((1, 0, 0, 1, sh - n, 0))
    out.append((1, 1, 0, 1, 0, 0) if sh >= 2 * n else (0, 1, 1, 0, 0, 0))
    out.append((1, 0, 1, 1, 0, 0) if sw >= 2 * n else (1, 0, 0, -1, 0, n - 1))
    return out


def _run(fn, args: tuple) -> None:
    from numba import cuda

    fn[(2, 2, 4), (8, 4, 1)](*args)
    cuda.synchronize()


@cudasim_ok
@gpu_kernels
# (the CI tier: one- and three-channel members, two words per load, a tail of 8 members)
@pytest.mark.parametrize("n,sh,sw,cin,words", tiered([
    (72, 72, 72, 3, 1), (72, 72, 72, 3, 3), (16, 40, 32, 3, 1), (16, 40, 32, 3, 2),
    (24, 48, 48, 1, 1), (8, 9, 8, 3, 1)], [3, 4, 5], several=True))
def test_axis_kernel_equals_the_general_gather(n: int, sh: int, sw: int, cin: int, words: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each member's branch (contiguous, tiles of an axis map, general) stores what the
    general tabled gather stores, bit for bit: all 8 axis maps at offsets that misalign the
    source's words, sizes that are not multiples of the tile, gated members, every member
    through a grid smaller than its work (the loops stride), ``words`` words a trip."""
    from numba import cuda

    monkeypatch.setattr(batch_perm, "WORDS_PER_TRIP", words)

    # per-channel gains after the brightness: each channel's table is its own
    sig = dataclasses.replace(FIRST, cin=cin, pre=("brightness", "colorize"))
    rng = np.random.default_rng(n + sh + sw + cin)
    src = rng.integers(0, 256, (3, sh, sw, cin), dtype=np.uint8)
    # a tall source's identity at row 0 is one run of bytes: the contiguous branch
    maps = _maps(n, sh, sw, rng) + ([(1, 0, 0, 1, 0, 0)] if sw == n else [])
    nb = len(maps)
    p = _params(sig, maps, rng)
    sidx = rng.integers(0, 3, nb).astype(np.int64)
    lut = np.zeros(1, np.uint8)
    general = batch_gather.gather_flat_kernel(sig, "cuda", True, True, tabled_=True)
    axis = batch_gather.gather_axis_kernel(sig, "cuda", True, True)
    d_src, d_sidx, d_lut, d_p = (cuda.to_device(a.reshape(-1) if a.ndim > 1 else a)
                                 for a in (src, sidx, lut, p))
    lead = (d_src, d_sidx, d_lut, d_p, nb, n, n, sh * sw * cin, sw)
    want = cuda.to_device(np.zeros(nb * n * n * cin, np.uint8))
    _run(general, (*lead, want))
    got = cuda.to_device(np.full(nb * n * n * cin, 7, np.uint8))
    _run(axis, (*lead, got, d_src.view(np.uint64), got.view(np.uint64)))
    want, got = want.copy_to_host(), got.copy_to_host()
    for b, m in enumerate(maps):
        k = slice(b * n * n * cin, (b + 1) * n * n * cin)
        assert np.array_equal(got[k], want[k]), (b, m)
    # the values are the map's: a member whose chain is gated off is its source moved
    off = [b for b in range(nb) if p[b, gs.gather_nparams(sig)] != 0.0]
    assert off
    y, x = np.mgrid[:n, :n]
    for b in off:
        q0, q1, q3, q4, q2, q5 = maps[b]
        moved = src[sidx[b]][q0 * y + q1 * x + q2, q3 * y + q4 * x + q5]
        assert np.array_equal(got[b * n * n * cin:(b + 1) * n * n * cin].reshape(n, n, cin),
                              moved), (b, maps[b])


@cudasim_ok
@gpu_kernels
def test_batches_take_the_axis_kernel_and_equal_outputs(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    from generator_reference import batch_spec, eager_outputs

    from millipyde.training import precompile
    from millipyde.training.batches import convert_reference

    # the batches compile as they go (the kernels are the test's, not the worker processes')
    monkeypatch.setattr(precompile, "ENABLED", False)

    ops = [mp.Operation("transpose", probability=0.5), mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_brightness", -0.3, 0.6, probability=0.8),
           mp.Operation("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5],
                        probability=0.7),
           mp.Operation("random_gaussian", 0, 1, probability=0.5)]
    rng = np.random.default_rng(5)
    imgs = [mp.gpuimage(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)) for _ in range(3)]
    want = eager_outputs(imgs, ops, 8, 5)
    spec = batch_spec(8)
    with mp.Generator(imgs, ops, outputs=8, seed=5).batches(8, with_indices=True) as bs:
        for batch, outs, _ in bs:
            arr = np.asarray(batch)
            for i, k in enumerate(outs.tolist()):
                assert np.array_equal(arr[i], convert_reference(want[k], spec)), k
    heads = [inspect.getsource(m).splitlines()[0] for m in list(loader.LOADED.values())]
    assert any("gather axis-map words" in h for h in heads)
