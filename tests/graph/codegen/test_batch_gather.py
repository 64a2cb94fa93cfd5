"""Flat batched gathers (``codegen.batch_gather``): access rewriting, 32-bit index math, the
batch writer's normalization table."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ptx_compile import ptx_of
from tiers import cpu_backend, tiered

from millipyde.graph.codegen import batch_gather, batch_writer
from millipyde.graph.codegen import target as codegen_target
from millipyde.graph.codegen.gather_sig import GatherSig

cudasim_ok = pytest.mark.cudasim_ok
# loads with no state space, 64-bit integer multiplies (as tests/graph/codegen/test_ptx.py)
GENERIC_LOAD = re.compile(r"\bld\.(?!global|shared|param|local|const)[a-z0-9]+\b")
MUL64 = re.compile(r"\b(?:mul|mad)\.lo\.[su]64\b")

# the figure-5.1 batch kernels: the colour writer (table stage, rotation, gates), the grey
# writer (float64 values), the first colour gather (tables only)
WRITER_RGB = GatherSig(3, "lut", True, True, "", lut_stages=(True, False), clip=False)
WRITER_GREY = GatherSig(1, "chain", False, True, "", lut_stages=(False, False), clip=False)
FIRST_RGB = GatherSig(3, "lut", True, False, "", lut_stages=(True, False), clip=False)


def test_flat_accesses_of_a_body() -> None:
    text = "dst[y, x, 1] = lut[1, 2, int(v2)] * p[7] + src[_u(sy), _u(sx), 1]"
    got = batch_gather.flat_accesses(text, WRITER_RGB)
    assert got == ("dst[_u(db_ + _ix((y * w + x) * 3 + 1))] = "
                   "lut[_u(lb_ + _ix(_ix(int(v2)) + (1 * 3 + 2) * 256))] * p[_u(pb_ + 7)] + "
                   "src[_u(ib_ + _ix((sy * sw_ + sx) * 3 + 1))]")


def test_narrow_up_to_2_31_elements() -> None:
    assert batch_gather.narrow((512, 512, 3), (1, 1, 1))
    assert batch_gather.narrow((2**31 - 1,))
    assert not batch_gather.narrow((8, 8), (2**16, 2**15))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_writer_tables_only_whole_numbers_on_gpus(target: str) -> None:
    rgb = batch_writer.gather_writer_source(WRITER_RGB, target, False, True, 3, "NCHW")
    grey = batch_writer.gather_writer_source(WRITER_GREY, target, False, True, 3, "NCHW")
    assert ("tab_[" in rgb) == (target == "cuda")
    assert "tab_[" not in grey and "if same_:" in grey
    for text in (rgb, grey):
        # every source/output access is flat: one subscript, a member base and an offset
        assert not re.search(r"\b(?:src|dst|out|lut)\[[^\]\[]*, ", text)


def test_wide_kernels_index_with_64_bits() -> None:
    narrow = batch_gather.gather_flat_source(FIRST_RGB, "cuda")
    wide = batch_gather.gather_flat_source(FIRST_RGB, "cuda", wide=True)
    assert "import int32 as _ix" in narrow and "import int64 as _ix" in wide


class _Arr:
    def __init__(self, *shape: int) -> None:
        self.shape, self.ndim = shape, len(shape)


def test_launch_args_check_the_arrays() -> None:
    src, sidx, lut, p = _Arr(4, 8, 8, 3), _Arr(2), _Arr(2, 2, 3, 256), _Arr(2, 18)
    args, wide = batch_gather.launch_args(WRITER_RGB, True, src, sidx, lut, p, (8, 8),
                                          lambda a: a)
    assert args[4:] == (2, 8, 8, 192, 8) and not wide
    with pytest.raises(RuntimeError, match="do not fit"):
        batch_gather.launch_args(WRITER_RGB, False, src, sidx, lut, p, (8, 8), lambda a: a)


@pytest.fixture
def rows_per_trip(monkeypatch: pytest.MonkeyPatch):
    """Sets ``ROWS_PER_TRIP`` for the test, compiled kernels forgotten before and after."""
    from millipyde.graph.exec import batch as exec_batch
    from millipyde.training import batch_convert

    def forget() -> None:
        exec_batch.gather_fn.cache_clear()
        batch_convert.fused_writer.cache_clear()

    def set_rows(gather: int, writer: int) -> None:
        monkeypatch.setitem(batch_gather.ROWS_PER_TRIP, "gather", gather)
        monkeypatch.setitem(batch_gather.ROWS_PER_TRIP, "writer", writer)
        monkeypatch.setitem(batch_gather.ROWS_PER_TRIP, "grey writer", writer)
        forget()

    yield set_rows
    forget()


@cudasim_ok
# (rows per trip are the GPUs' form: the cpu backend's CI tier takes the signed -0.0 mean case)
@pytest.mark.parametrize("mean,std,rows,layout", tiered([
    (None, None, (4, 1), "NCHW"), ([0.5, -0.0, 0.25], [0.25, 1.0, -2.0], (1, 2), "NHWC"),
    (0.5, 0.25, (3, 3), "NCHW")], lambda case: not cpu_backend() or case[3] == "NHWC",
    several=True))
def test_batches_convert_whole_numbers_and_greys_exactly(mean, std, rows, layout,
                                                         rows_per_trip) -> None:
    """The writer's table (uint8 samples on GPUs) and its once-normalized grey equal the
    reference conversion bit for bit (a mean of -0.0 keeps its sign), whatever the rows per
    trip (rows past the image computed and not stored)."""
    from generator_reference import batch_spec, eager_outputs

    import millipyde as mp
    from millipyde.training.batches import convert_reference

    rows_per_trip(*rows)

    rng = np.random.default_rng(3)
    imgs = [mp.gpuimage(rng.integers(0, 256, (6, 7, 3), dtype=np.uint8)) for _ in range(2)]
    from millipyde.graph.exec import batch as exec_batch
    from millipyde.training import batch_convert

    # a stencil between two gathers: the batch is recorded (``batch_record``), a first gather,
    # the stencil, and the last gather writing the batch (the arena takes gathers alone)
    ops = [mp.Operation("fliplr", probability=0.5), mp.Operation("random_gaussian", 0, 1),
           mp.Operation("rgb2grey", probability=0.5),
           mp.Operation("random_rotate", 0, 60, probability=0.5)]
    # seed 9: 3 coin patterns over the 6 outputs (seed 2: 5), every coin both ways; each is a
    # batch template and a reference chain of its own, compiled for seconds on the cpu backend
    want = eager_outputs(imgs, ops, 6, 9)
    spec = batch_spec(6, mean=mean, std=std, layout=layout)
    with mp.Generator(imgs, ops, outputs=6, seed=9).batches(6, mean=mean, std=std,
                                                            layout=layout) as bs:
        (got,) = list(bs)
    got = np.asarray(got)
    assert exec_batch.gather_fn.cache_info().currsize >= 1
    assert batch_convert.fused_writer.cache_info().currsize >= 1
    for k in range(6):
        ref = convert_reference(want[k], spec)
        assert np.array_equal(got[k].view(np.uint32), ref.view(np.uint32)), f"sample {k}"


def test_rows_per_trip_computes_before_it_stores() -> None:
    from millipyde.graph.codegen import batch_rows

    compute, stores = batch_rows.split_stores("sy = y * 3 + x\ndst[y, x, 0] = src[sy]")
    assert (compute, stores) == ("sy = y * 3 + x\nsv0_ = src[sy]", "dst[y, x, 0] = sv0_")
    got = batch_rows.rows_body(compute, stores, 2).splitlines()
    assert got == ["sy = y * 3 + x", "sv0_ = src[sy]",
                   "y_r1 = min(_ix(y + 1 * sy_), _ix(h - 1))",
                   "sy_r1 = y_r1 * 3 + x", "sv0__r1 = src[sy_r1]",
                   "dst[y, x, 0] = sv0_",
                   "if _ix(y + 1 * sy_) < h:", "    dst[y_r1, x, 0] = sv0__r1"]


@pytest.mark.ptx
def test_batch_writer_ptx_divides_only_for_its_table() -> None:
    """The RGB writer's float64 divisions all build the per-block table (before the barrier):
    none per pixel; every load names its space; the first gather's 64-bit multiplies are the
    per-member prologue's."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
    from numba import types
    from numba.np.numpy_support import from_dtype

    def arr(dtype: type) -> types.Array:
        return types.Array(from_dtype(np.dtype(dtype)), 1, "C")

    lead = (arr(np.uint8), arr(np.int64), arr(np.uint8), arr(np.float64)) + (types.int64,) * 5
    fn = batch_writer.gather_writer_kernel(WRITER_RGB, "cuda", False, True, 3, "NCHW")
    ptx = ptx_of(fn.py_func, lead + (arr(np.float32), arr(np.int64), arr(np.float64),
                                     arr(np.float64), types.float64))
    barrier = ptx.index("bar.sync")
    assert "div.rn.f64" in ptx[:barrier] and "div.rn.f64" not in ptx[barrier:]
    assert "ld.shared.f32" in ptx[barrier:]
    assert not GENERIC_LOAD.findall(ptx)
    fn = batch_gather.gather_flat_kernel(FIRST_RGB, "cuda")
    ptx = ptx_of(fn.py_func, lead + (arr(np.uint8),))
    assert not GENERIC_LOAD.findall(ptx)
    assert len(MUL64.findall(ptx)) <= 16


def test_register_caps_only_on_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """``MAX_REGISTERS`` caps the GPU writers (a link option: the kernel text is otherwise the
    same); the simulator's and the cpu's kernels take no cap."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
    monkeypatch.setitem(codegen_target.MAX_REGISTERS, "writer", 80)
    monkeypatch.setitem(codegen_target.MAX_REGISTERS, "gather", None)
    capped = batch_writer.gather_writer_source(WRITER_RGB, "cuda", False, True, 3, "NCHW")
    assert "@cuda.jit(cache=True, max_registers=80)\ndef kernel(" in capped
    assert "max_registers" not in batch_writer.gather_writer_source(WRITER_RGB, "cuda", True,
                                                                     True, 3, "NCHW")
    assert "max_registers" not in batch_writer.gather_writer_source(WRITER_RGB, "cpu", False,
                                                                     True, 3, "NCHW")
    assert "max_registers" not in batch_gather.gather_flat_source(FIRST_RGB, "cuda")
    fn = batch_writer.gather_writer_kernel(WRITER_RGB, "cuda", False, True, 3, "NCHW")
    assert fn.targetoptions["max_registers"] == 80
    monkeypatch.setitem(codegen_target.MAX_REGISTERS, "writer", None)
    plain = batch_writer.gather_writer_source(WRITER_RGB, "cuda", False, True, 3, "NCHW")
    assert "max_registers" not in plain
    # the rest of the kernel text is the same
    assert capped.replace(", max_registers=80", "") == plain


def test_arena_and_statistic_gathers_take_their_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The arena gathers and arena statistic gathers read ``MAX_REGISTERS["arena"]`` and
    ``["stat"]`` (uncapped by default) on GPUs only, the rest of their text unchanged."""
    from millipyde.graph.codegen import arena, stat

    sig = GatherSig(cin=3, mode="chain", is_int=True, sampler=True, grey="", pre=(),
                    post=("adjust_contrast", "posterize"), lut_stages=(False, False), clip=False)
    sources = {"arena": lambda t, sim: arena.arena_gather_source(sig, t, sim, layout="NCHW"),
               "stat": lambda t, sim: stat.arena_stat_source(sig, "grey_sum", t, sim)}
    for kind, source in sources.items():
        assert codegen_target.MAX_REGISTERS[kind] is None
        plain = source("cuda", False)
        assert "max_registers" not in plain
        monkeypatch.setitem(codegen_target.MAX_REGISTERS, kind, 96)
        capped = source("cuda", False)
        assert "@cuda.jit(cache=True, max_registers=96)\ndef kernel(" in capped
        assert capped.replace(", max_registers=96", "") == plain
        assert "max_registers" not in source("cuda", True)
        assert "max_registers" not in source("cpu", False)


def test_batched_tile_register_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tile2d.BATCH_MAX_REGISTERS`` (a benchmark knob) caps the batched GPU tile only."""
    from millipyde.graph.codegen import tile2d

    monkeypatch.setattr(tile2d, "BATCH_MAX_REGISTERS", 64)
    capped = tile2d.stencil_2d_source(3, 3, batch=True, unsigned=True)
    assert "@cuda.jit(cache=True, max_registers=64)\ndef tile2d(" in capped
    assert "max_registers" not in tile2d.stencil_2d_source(3, 3, unsigned=True)
    assert "max_registers" not in tile2d.stencil_2d_source(3, 3, batch=True, sim=True)
    monkeypatch.setattr(tile2d, "BATCH_MAX_REGISTERS", None)
    plain = tile2d.stencil_2d_source(3, 3, batch=True, unsigned=True)
    assert capped.replace(", max_registers=64", "") == plain


def test_tabled_batched_gathers_only_for_uint8_rgb_or_grey_chains() -> None:
    # (samplers after the chain are fine: their taps read the table, test_batch_tables)
    import dataclasses

    chain = GatherSig(3, "chain", True, False, "", pre=("brightness",),
                      lut_stages=(False, False), clip=False)
    assert batch_gather.tabled(chain, "cuda", np.uint8)
    assert batch_gather.tabled(dataclasses.replace(chain, cin=1), "cuda", "uint8")
    for sig, target, dtype in ((chain, "cpu", np.uint8), (chain, "cuda", np.uint16),
                               (dataclasses.replace(chain, cin=4), "cuda", np.uint8),
                               (dataclasses.replace(chain, post=("brightness",)), "cuda",
                                np.uint8),
                               (FIRST_RGB, "cuda", np.uint8)):
        assert not batch_gather.tabled(sig, target, dtype), (sig, target, dtype)
    # the chain runs once per table entry (three channels), not once per pixel of a trip
    text = batch_gather.gather_flat_source(chain, "cuda", gates=True, tabled_=True)
    assert text.count("_f_brightness(v") == 3
    assert "ct_[_u32(_u32(src[_u(ib_ + _ix(sy + 2))]) + 2 * 256)]" in text
    inline = batch_gather.gather_flat_source(chain, "cuda", gates=True)
    assert inline.count("_f_brightness(v") == 3 * batch_gather.ROWS_PER_TRIP["gather"]
    with pytest.raises(ValueError, match="tabled"):
        batch_gather.gather_flat_source(FIRST_RGB, "cuda", tabled_=True)


# --------------------------------------------------------------------- gated-off samplers

WRITER_CHAIN = GatherSig(3, "chain", True, True, "", pre=("colorize",),
                         lut_stages=(False, False), clip=False)


def test_gated_samplers_get_a_one_tap_loop() -> None:
    """GPU kernels with a gated sampler run a member whose sampler is gated off through its
    own pixel loop, which reads tap 0 alone; the cpu's keep the per-pixel branch."""
    text = batch_writer.gather_writer_source(WRITER_CHAIN, "cuda", False, True, 3, "NCHW")
    loops = text.split("\n        if cton_ and gs_ == 0.0:\n", 1)[1]
    table_on, rest = loops.split("\n        elif cton_:\n", 1)
    table_off, rest = rest.split("\n        elif gs_ == 0.0:\n", 1)
    inline_on, inline_off = rest.split("\n        else:\n", 1)
    for on, off in ((table_on, table_off), (inline_on, inline_off)):
        assert "gs_" not in on and "gs_" not in off  # no branch per pixel
        assert all(f"t{c}_3 " in on for c in range(3)) and "dr * (" in on
        assert "_1" not in off and "t0_0 =" in off and "dr * (" not in off
    assert table_off.count("ct_[") == 3 and inline_off.count("_f_colorize(") == 3
    flat = batch_gather.gather_flat_source(WRITER_GREY, "cuda", gates=True)
    assert "if gs_ == 0.0:\n" in flat and flat.count("while x < w:") == 2
    cpu = batch_writer.gather_writer_source(WRITER_CHAIN, "cpu", False, True, 3, "NCHW")
    assert "if gs_ != 0.0:" in cpu and cpu.count("for x in range(w):") == 1
    # without gates there is one loop
    assert batch_gather.gather_flat_source(WRITER_GREY, "cuda").count("while x < w:") == 1


def _members(sig: GatherSig, n: int, rng: np.random.Generator, full: list[float]
             ) -> np.ndarray:
    """Parameter rows of ``n`` members of ``sig``: integer maps (identity or a flip), affine
    maps (rotations, also for members whose sampler is gated off: the one-tap loop must read
    tap 0 of any map), chain gains, and every combination of gate flags."""
    from millipyde.graph.codegen import gather_sig as gs

    np_ = gs.gather_nparams(sig)
    p = np.zeros((n, np_ + gs.gather_ngates(sig)))
    for b in range(n):
        p[b, gs.P_OFF:gs.P_OFF + 6] = (1, 0, 0, 0, 1, 0) if b % 2 else (1, 0, 0, 0, -1, 8)
        t = rng.uniform(0, 2 * np.pi)
        c, s = np.cos(t), np.sin(t)
        p[b, gs.A_OFF:gs.A_OFF + 6] = (c, -s, 4 - 4 * c + 4 * s, s, c, 4 - 4 * s - 4 * c)
        p[b, gs.MID_OFF:gs.MID_OFF + 2] = 9, 9
        p[b, gs.FULL_OFF] = full[b % len(full)]
        p[b, gs.CLIP_OFF:gs.CLIP_HI_OFF + 1] = -np.inf, np.inf
        p[b, gs.OPS_OFF:np_] = rng.uniform(0.5, 1.5, np_ - gs.OPS_OFF)
        p[b, np_:] = [(b >> k) & 1 for k in range(p.shape[1] - np_)]
    return p


def test_uint8_writers_hold_only_the_table_loops() -> None:
    """A chained writer over a known uint8 source runs every member through the table; over
    another source, none (``gather_writer_source``'s ``u8``)."""
    u8 = batch_writer.gather_writer_source(WRITER_CHAIN, "cuda", False, True, 3, "NCHW",
                                           u8=True)
    assert "cton_" not in u8 and u8.count("while x < w:") == 2 and " uint8:" in u8
    assert u8.count("_f_colorize(") == 3  # the table's fill only
    other = batch_writer.gather_writer_source(WRITER_CHAIN, "cuda", False, True, 3, "NCHW",
                                              u8=False)
    assert "ct_" not in other and "cton_" not in other and other.count("while x < w:") == 2
    assert other.count("_f_colorize(") == 12 + 3
    # writers without a chain table are the same whatever the source
    for u in (True, False):
        assert batch_writer.gather_writer_source(WRITER_GREY, "cuda", False, True, 3, "NCHW",
                                                 u8=u) == batch_writer.gather_writer_source(
            WRITER_GREY, "cuda", False, True, 3, "NCHW")


@cudasim_ok
@pytest.mark.parametrize("sig,cfull,u8", [(WRITER_CHAIN, 255.0, None),
                                          (WRITER_CHAIN, 255.0, True),
                                          (WRITER_CHAIN, 65535.0, None),
                                          (WRITER_RGB, 255.0, None), (WRITER_GREY, 1.0, None)],
                         ids=["chain-tables", "chain-uint8", "chain-inline", "lut", "grey"])
def test_gated_off_samplers_write_the_per_pixel_branchs_values(
        sig: GatherSig, cfull: float, u8: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer and the flat gather with one loop per member's sampler gate equal the
    kernels that branch per pixel, bit for bit, every gate combination (members whose
    sampler is on or off, chain on or off, through the table or inline; the uint8 writer
    with the table loops alone)."""
    from millipyde.backend import ACTIVE as runtime

    if runtime.codegen_target != "cuda":
        pytest.skip("CUDA kernels (cuda or cudasim)")
    from numba import cuda

    rng = np.random.default_rng(5)
    n, hw, sim = 8, 9, runtime.simulated
    grey = sig.cin == 1
    src = (rng.uniform(0, 1, (2, hw, hw, 1)) if grey
           else rng.integers(0, 256, (2, hw, hw, 3), dtype=np.uint8))
    p = _members(sig, n, rng, [255.0, 65535.0] if cfull == 65535.0 else [cfull])
    lut = rng.integers(0, 256, (n, 2, sig.cin, 256), dtype=np.uint8)
    sidx = np.arange(n, dtype=np.int64) % 2
    pos = rng.permutation(n).astype(np.int64)
    mean, std = np.array([0.4, 0.5, 0.6]), np.array([0.2, 0.25, 0.3])
    src_, sidx_, lut_, p_ = (cuda.to_device(a.reshape(-1)) for a in (src, sidx, lut, p))
    args = (src_, sidx_, lut_, p_, n, hw, hw, src[0].size, hw)
    # the flat gather stores the values themselves: uint8 ones only where they fit
    flat_too, tabled = cfull != 65535.0, bool(sig.pre)

    def run(split: bool) -> list[np.ndarray]:
        for mod in (batch_gather, batch_writer):  # (the writer imports it by name)
            monkeypatch.setattr(mod, "gated_sampler",
                                lambda s, g, t: split and t != "cpu" and g and s.sampler)
        u = u8 if split else None
        text = batch_writer.gather_writer_source(sig, "cuda", sim, True, 3, "NCHW", u8=u)
        assert ("if gs_ != 0.0:" not in text) == split
        out = cuda.to_device(np.full(n * 3 * hw * hw, np.nan, np.float32))
        kernel = batch_writer.gather_writer_kernel(sig, "cuda", sim, True, 3, "NCHW", u8=u)
        kernel[(1, 1, n), (4, 4, 1)](*args, out, cuda.to_device(pos), cuda.to_device(mean),
                                     cuda.to_device(std), cfull)
        got = [out.copy_to_host()]
        if flat_too:
            dst = cuda.to_device(np.zeros(n * hw * hw * sig.cin,
                                          np.float64 if grey else np.uint8))
            flat = batch_gather.gather_flat_kernel(sig, "cuda", sim, True, tabled_=tabled)
            flat[(1, 1, n), (4, 4, 1)](*args, dst)
            got.append(dst.copy_to_host())
        return got

    split, branch = run(True), run(False)
    assert not np.isnan(split[0]).any()
    for a, b in zip(split, branch, strict=True):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


# --------------------------------------------------------------------- word taps

def test_word_taps_only_for_uint8_rgb_samplers_on_gpus() -> None:
    """The writers read their taps as words for a known uint8 RGB source with a sampler on
    GPUs; a member's four word reads replace its 12 byte reads inside the image, and the
    gated-off loop (one tap) keeps its bytes."""
    for sig in (WRITER_CHAIN, WRITER_RGB):
        assert batch_writer.word_taps(sig, "cuda", True)
        assert not batch_writer.word_taps(sig, "cuda", None)
        assert not batch_writer.word_taps(sig, "cpu", True)
    assert not batch_writer.word_taps(WRITER_GREY, "cuda", True)
    assert not batch_writer.word_taps(FIRST_RGB, "cuda", True)
    with pytest.raises(ValueError, match="word taps"):
        batch_writer.gather_writer_source(WRITER_CHAIN, "cuda", False, True, 3, "NCHW",
                                          u8=None, words=True)
    text = batch_writer.gather_writer_source(WRITER_CHAIN, "cuda", False, True, 3, "NCHW",
                                             u8=True, words=True)
    assert "cfull, srcw):" in text and " words" in text
    on, off = text.split("\n        if gs_ == 0.0:\n", 1)[1].split("\n        else:\n", 1)
    assert on.count("_w6(srcw") == 2 and on.count("if wi_:") == 4
    # the words' 12 bytes, and the 12 byte loads at the edges
    assert len(re.findall(r"r[01]_ >> _u\(\d+\)\) & _u\(255\)|r[01]_ & _u\(255\)", on)) == 12
    assert on.count("src[") == 12 and "wi_" not in off and off.count("src[") == 3
    plain = batch_writer.gather_writer_source(WRITER_CHAIN, "cuda", False, True, 3, "NCHW",
                                              u8=True)
    assert "srcw" not in plain and "_w6" not in plain


def _word_members(sig: GatherSig, n: int, rng: np.random.Generator, h: int, w: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Parameter rows and source images of ``n`` members of ``sig`` over ``h`` x ``w``
    sources: integer maps keeping columns (the word taps), flipping them or transposing
    (byte taps); affine maps shifting by half a pixel either way (the taps reach the last
    row and column, or start before the first), an identity (whole-number taps), rotations;
    a gated-off sampler every 8th member, other gates at random. Every 16 members hold each
    integer map with each affine map once (members 16-31 would repeat the kinds)."""
    from millipyde.graph.codegen import gather_sig as gs

    np_ = gs.gather_nparams(sig)
    p = np.zeros((n, np_ + gs.gather_ngates(sig)))
    sidx = np.zeros(n, np.int64)
    for b in range(n):
        q, mid = [((1, 0, 0, 0, 1, 0), (h, w)), ((1, 0, 0, 0, 1, 0), (h, w)),
                  ((1, 0, 0, 0, -1, w - 1), (h, w)), ((0, 1, 0, 1, 0, 0), (w, h))][b % 4]
        t = rng.uniform(0, 2 * np.pi)
        c, s = np.cos(t), np.sin(t)
        cy, cx = (mid[0] - 1) / 2, (mid[1] - 1) / 2
        a = [(1, 0, 0.5, 0, 1, 0.5), (1, 0, -0.5, 0, 1, -0.5), (1, 0, 0, 0, 1, 0),
             (c, -s, cy - c * cy + s * cx, s, c, cx - s * cy - c * cx)][(b // 4) % 4]
        p[b, gs.P_OFF:gs.P_OFF + 6] = q
        p[b, gs.A_OFF:gs.A_OFF + 6] = a
        p[b, gs.MID_OFF:gs.MID_OFF + 2] = mid
        p[b, gs.FULL_OFF] = 255.0
        p[b, gs.CLIP_OFF:gs.CLIP_HI_OFF + 1] = -np.inf, np.inf
        p[b, gs.OPS_OFF:np_] = rng.uniform(0.5, 1.5, np_ - gs.OPS_OFF)
        p[b, np_:-1] = rng.integers(0, 2, p.shape[1] - np_ - 1)
        p[b, -1] = b % 8 == 7  # the sampler's gate
        # members keeping columns read the last image: its last pair ends the buffer
        sidx[b] = 7 if b % 4 == 0 else b % 8
    return p, sidx


@cudasim_ok
@pytest.mark.parametrize("sig, hw", tiered(
    [(sig, hw) for sig in (WRITER_CHAIN, WRITER_RGB) for hw in ((9, 9), (6, 11), (5, 13))],
    [2, 4], several=True,
    ids=lambda case: f"{'chain' if case[0] is WRITER_CHAIN else 'lut'}-{case[1][0]}x{case[1][1]}"))
def test_word_taps_write_the_byte_taps_values(sig: GatherSig, hw: tuple[int, int]) -> None:
    """The writer reading its taps as words equals the one reading bytes, bit for bit: every
    member base's byte alignment (odd widths), taps at every edge, the last image's last
    pixel pair at the buffer's end (the simulator bounds-checks each word read), members
    whose integer map flips or transposes columns, gated members."""
    from millipyde.backend import ACTIVE as runtime

    if runtime.codegen_target != "cuda":
        pytest.skip("CUDA kernels (cuda or cudasim)")
    from numba import cuda

    rng = np.random.default_rng(11)
    n, (h, w), sim = 16, hw, runtime.simulated
    src = rng.integers(0, 256, (8, h, w, 3), dtype=np.uint8)  # 8 h w 3 bytes: whole words
    p, sidx = _word_members(sig, n, rng, h, w)
    lut = rng.integers(0, 256, (n, 2, sig.cin, 256), dtype=np.uint8)
    pos = rng.permutation(n).astype(np.int64)
    mean, std = np.array([0.4, 0.5, 0.6]), np.array([0.2, 0.25, 0.3])
    src_, sidx_, lut_, p_ = (cuda.to_device(a.reshape(-1)) for a in (src, sidx, lut, p))
    srcw = runtime.words(src_)
    assert srcw is not None and srcw.shape[0] * 8 == src.size
    args = (src_, sidx_, lut_, p_, n, h, w, src[0].size, w)

    def run(words: bool) -> np.ndarray:
        out = cuda.to_device(np.full(n * 3 * h * w, np.nan, np.float32))
        kernel = batch_writer.gather_writer_kernel(sig, "cuda", sim, True, 3, "NCHW", u8=True,
                                                   words=words)
        kernel[(2, 2, n), (4, 4, 1)](*args, out, cuda.to_device(pos), cuda.to_device(mean),
                                     cuda.to_device(std), 255.0, *((srcw,) if words else ()))
        return out.copy_to_host()

    got, want = run(True), run(False)
    assert not np.isnan(want).any()
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@cudasim_ok
def test_batches_read_whole_word_stacks_as_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose colour writer reads a uint8 RGB stack of whole words takes the word
    taps, and its samples equal the per-output Generator's, converted."""
    from generator_reference import batch_spec, eager_outputs

    import millipyde as mp
    from millipyde.backend import ACTIVE as runtime
    from millipyde.training import batch_convert
    from millipyde.training.batches import convert_reference

    if runtime.codegen_target != "cuda":
        pytest.skip("the word taps are the GPU writers'")
    took: list[bool] = []
    make = batch_convert.fused_writer
    monkeypatch.setattr(batch_convert, "fused_writer",
                        lambda *a, **k: took.append(a[-1]) or make(*a, **k))
    monkeypatch.setattr("millipyde.training.batches.fused_writer", batch_convert.fused_writer)
    rng = np.random.default_rng(4)
    imgs = [mp.gpuimage(rng.integers(0, 256, (8, 7, 3), dtype=np.uint8)) for _ in range(2)]
    ops = [mp.Operation("random_gaussian", 0, 1), mp.Operation("random_colorize", [0.5, 1.5],
                                                                [0.5, 1.5], [0.5, 1.5]),
           mp.Operation("random_rotate", 0, 60, probability=0.7)]
    want = eager_outputs(imgs, ops, 8, 3)
    spec = batch_spec(8)
    with mp.Generator(imgs, ops, outputs=8, seed=3).batches(8) as bs:
        (got,) = list(bs)
    got = np.asarray(got)
    assert True in took
    for k in range(8):
        ref = convert_reference(want[k], spec)
        assert np.array_equal(got[k].view(np.uint32), ref.view(np.uint32)), f"sample {k}"


@pytest.mark.ptx
def test_word_taps_ptx_loads_words() -> None:
    """The word-tap writer's four tap words are global uint64 loads (named space), and it
    adds no byte load to the byte-tap writer's (those at the edges)."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is part of the test extra")
    from numba import types
    from numba.np.numpy_support import from_dtype

    def arr(dtype: type) -> types.Array:
        return types.Array(from_dtype(np.dtype(dtype)), 1, "C")

    sig = (arr(np.uint8), arr(np.int64), arr(np.uint8), arr(np.float64)) + (types.int64,) * 5
    sig += (arr(np.float32), arr(np.int64), arr(np.float64), arr(np.float64), types.float64)
    got = {}
    for words in (False, True):
        fn = batch_writer.gather_writer_kernel(WRITER_CHAIN, "cuda", False, True, 3, "NCHW",
                                               u8=True, words=words)
        ptx = ptx_of(fn.py_func, sig + ((arr(np.uint64),) if words else ()))
        assert not GENERIC_LOAD.findall(ptx)
        got[words] = [len(re.findall(rf"\bld\.global\.{t}\b", ptx)) for t in ("u8", "u64")]
    assert got[True][0] == got[False][0] and got[True][1] == got[False][1] + 4


# --------------------------------------------------------------------- writer text flags

_WRITER_FLAGS = ("INT_INDEX", "UNIT_DIVISIONS", "INT32_TAPS")


def test_writer_text_flags_shape_the_uint8_and_grey_writers() -> None:
    """The uint8 table writer rounds its blends to table indices, a gated-off member's tap
    is its table byte, tap indices are 32-bit; the
    grey writer normalizes through ``_normu`` with the launch's first statistics; the cpu's
    writers keep their text."""
    u8 = batch_writer.gather_writer_source(WRITER_CHAIN, "cuda", False, True, 3, "NCHW",
                                           u8=True, words=True)
    on, off = u8.split("\n        if gs_ == 0.0:\n", 1)[1].split("\n        else:\n", 1)
    assert on.count("_rint_u8(v") == 3 and "_rint_clip(v" not in on
    assert on.count("_b2f(ct_[") == 24 and "_b2f(" not in off
    assert off.count("_ix(ct_[") == 3 and off.count("= _ix(0)") == 3
    assert on.count("tab_[_u(256 + sv1_)]") == 1 and "iv_" not in on + off
    assert "int(ty0)" not in u8 and on.count("_fi(t") == 2 and "_u(iy" not in u8
    grey = batch_writer.gather_writer_source(WRITER_GREY, "cuda", False, True, 3, "NCHW")
    assert "m0_ = mean[0]" in grey and grey.count("_normu(cv_, cfull, m0_, s0_)") == 2
    assert "_norm(cv_" not in grey
    # inline chains (another source) keep their float values and conversion
    other = batch_writer.gather_writer_source(WRITER_CHAIN, "cuda", False, True, 3, "NCHW",
                                              u8=False)
    assert "_rint_u8" not in other and "_rint_clip(v" in other
    for sig in (WRITER_CHAIN, WRITER_GREY):
        cpu = batch_writer.gather_writer_source(sig, "cpu", False, True, 3, "NCHW")
        assert not any(k in cpu for k in ("_normu", "_rint_u8", "_fi("))


def _flags(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    for name in _WRITER_FLAGS:
        monkeypatch.setattr(batch_writer, name, on)


@cudasim_ok
@pytest.mark.parametrize("words", tiered([True, False], [0]), ids=["words", "bytes"])
def test_uint8_writer_flags_keep_the_values(words: bool, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """The uint8 chain writer with its text flags on equals the one with them off, bit for
    bit: taps at every edge and half-pixel shifts (blends on ties), rotations, flipped and
    transposed members, gated-off samplers; the table conversion and the inline one (a
    ``cfull`` other than 255)."""
    from millipyde.backend import ACTIVE as runtime

    if runtime.codegen_target != "cuda":
        pytest.skip("CUDA kernels (cuda or cudasim)")
    from numba import cuda

    rng = np.random.default_rng(21)
    n, (h, w), sim = 16, (6, 11), runtime.simulated
    src = rng.integers(0, 256, (8, h, w, 3), dtype=np.uint8)
    p, sidx = _word_members(WRITER_CHAIN, n, rng, h, w)
    lut = np.zeros((n, 2, 3, 256), np.uint8)
    pos = rng.permutation(n).astype(np.int64)
    mean, std = np.array([0.4, 0.5, 0.6]), np.array([0.2, 1.0, 0.3])
    src_, sidx_, lut_, p_ = (cuda.to_device(a.reshape(-1)) for a in (src, sidx, lut, p))
    args = (src_, sidx_, lut_, p_, n, h, w, src[0].size, w)
    srcw = (runtime.words(src_),) if words else ()

    def run(on: bool, cfull: float) -> np.ndarray:
        _flags(monkeypatch, on)
        out = cuda.to_device(np.full(n * 3 * h * w, np.nan, np.float32))
        kernel = batch_writer.gather_writer_kernel(WRITER_CHAIN, "cuda", sim, True, 3, "NCHW",
                                                   u8=True, words=words)
        kernel[(2, 2, n), (4, 4, 1)](*args, out, cuda.to_device(pos), cuda.to_device(mean),
                                     cuda.to_device(std), cfull, *srcw)
        return out.copy_to_host()

    for cfull in (255.0, 1.0):
        got, want = run(True, cfull), run(False, cfull)
        assert not np.isnan(want).any()
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), cfull


@cudasim_ok
@pytest.mark.parametrize("cfull,std", [(1.0, (1.0, 1.0, 1.0)), (1.0, (0.5, 0.5, 0.5)),
                                       (255.0, (1.0, 1.0, 1.0)), (1.0, (1.0, 0.5, 1.0))],
                         ids=["unit", "std", "full", "mixed"])
def test_grey_writer_flags_keep_the_values(cfull: float, std: tuple,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The grey writer with its text flags on equals the one with them off, bit for bit:
    divisions by 1.0 skipped or not, the one normalization or per channel, -0.0 and NaN
    among the values."""
    from millipyde.backend import ACTIVE as runtime

    if runtime.codegen_target != "cuda":
        pytest.skip("CUDA kernels (cuda or cudasim)")
    from numba import cuda

    rng = np.random.default_rng(22)
    n, hw, sim = 8, 9, runtime.simulated
    src = rng.uniform(-1, 2, (2, hw, hw, 1))
    src.reshape(-1)[:3] = -0.0, np.nan, -0.0  # (infinities: the simulator's blend warns)
    p = _members(WRITER_GREY, n, rng, [cfull])
    lut = np.zeros((n, 2, 1, 256), np.uint8)
    sidx = np.arange(n, dtype=np.int64) % 2
    pos = rng.permutation(n).astype(np.int64)
    mean = np.array([0.0, -0.0, 0.0]) if std[1] == 1.0 else np.array([0.25, 0.25, 0.25])
    src_, sidx_, lut_, p_ = (cuda.to_device(a.reshape(-1)) for a in (src, sidx, lut, p))
    args = (src_, sidx_, lut_, p_, n, hw, hw, src[0].size, hw)

    def run(on: bool) -> np.ndarray:
        _flags(monkeypatch, on)
        out = cuda.to_device(np.full(n * 3 * hw * hw, 7.0, np.float32))
        kernel = batch_writer.gather_writer_kernel(WRITER_GREY, "cuda", sim, True, 3, "NCHW")
        kernel[(1, 1, n), (4, 4, 1)](*args, out, cuda.to_device(pos), cuda.to_device(mean),
                                     cuda.to_device(np.array(std)), cfull)
        return out.copy_to_host()

    got, want = run(True), run(False)
    assert (want != 7.0).all() and np.isnan(want).any()
    assert (want == 0.0).any() or mean[0] != 0.0  # the zeros' signs
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
