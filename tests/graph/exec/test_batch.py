"""Batched materialization (graph/batch.py, codegen_batch.py): bit-identical to one-by-one."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref
from tiers import cpu_backend, tiered

import millipyde as mp
from millipyde import faults
from millipyde import random as mprandom
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import batch as codegen_batch
from millipyde.graph.codegen import gpu as codegen_gpu
from millipyde.graph.exec import batch, batch_stencil
from millipyde.graph.exec import variants as exec_variants
from millipyde.graph.ir.node import Node
from millipyde.pipeline import PipelineError

cudasim_ok = pytest.mark.cudasim_ok


def _inputs(kind: str, n: int, h: int, w: int) -> list[np.ndarray]:
    """``n`` distinct same-shape photo crops of one kind (uint8 RGB/RGBA, float64 or uint8 grey)."""
    base = ref.photo("rgb" if kind == "grey8" else kind, h + n, w + n)
    out = [np.ascontiguousarray(base[i:i + h, n - i:n - i + w]) for i in range(n)]
    if kind == "grey8":
        out = [np.ascontiguousarray(o[..., 1]) for o in out]
    return out


def _ops(colour: bool, square: bool) -> list[mp.Operation]:
    """A figure-5.1-like chain: every op probabilistic, so outputs take different structures."""
    ops = [mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_brightness", -0.2, 0.3, probability=0.8),
           mp.Operation("random_gaussian", 0, 1.5, probability=0.7),
           mp.Operation("random_adjust_gamma", [0.7, 1.4], [0.9, 1.1], probability=0.5)]
    if square:
        ops.insert(0, mp.Operation("transpose", probability=0.5))
    if colour:
        ops += [mp.Operation("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5],
                             probability=0.5),
                mp.Operation("rgb2grey", probability=0.4)]
    ops.append(mp.Operation("random_rotate", 0, 120, probability=0.6))
    return ops


def _recorded(x: mp.gpuimage, ops: list[mp.Operation], seed: int, k: int) -> mp.gpuimage:
    y = x.clone()
    for j, op in enumerate(ops):
        op.apply(y, seed, k, j)
    return y


def _check_batched(kind: str, h: int, w: int, outputs: int, seed: int,
                   monkeypatch: pytest.MonkeyPatch, max_alone: int) -> None:
    hosts = _inputs(kind, 3, h, w)
    xs = [mp.gpuimage(a) for a in hosts]
    for x in xs:
        x._materialize()
    ops = _ops(kind in ("rgb", "rgba"), h == w)
    stacks = batch.stack_inputs([x._node for x in xs], xs[0].device)
    got = [_recorded(xs[k % 3], ops, seed, k) for k in range(outputs)]
    alone = []
    run_alone = batch.execute.materialize
    monkeypatch.setattr(batch.execute, "materialize", lambda n: alone.append(n) or run_alone(n))
    targets = {id(y._node) for y in got}
    errors = batch.materialize_batch(got, stacks)
    monkeypatch.undo()
    assert errors == [None] * outputs
    # rotations of tiny images often need skimage's data-dependent clip: those run alone
    assert sum(id(n) in targets for n in alone) <= max_alone
    for k, y in enumerate(got):
        want = np.asarray(_recorded(xs[k % 3], ops, seed, k))
        out = np.asarray(y)
        assert out.dtype == want.dtype and out.shape == want.shape, k
        _assert_same(out, want, f"output {k}")


def _assert_same(out: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bit-identical on the CPU and CUDASIM. On real GPUs the batched and per-image kernels
    are compiled separately and NVVM may contract a multiply-add into an FMA in one and not
    the other (measured on an H200: float64 results 1-5 ulp apart), so floats compare to
    1e-12 and uint8 may move a rint tie by one."""
    if mp.backend() not in ("cuda", "hip"):
        np.testing.assert_array_equal(out, want, err_msg=what)
    elif out.dtype == np.uint8:
        diff = np.abs(out.astype(int) - want.astype(int))
        assert diff.max(initial=0) <= 1 and (diff > 0).mean() < 0.01, what
    else:
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-12, err_msg=what)


@cudasim_ok
# (on the cpu backend the CI tier takes the uint8 RGB writer; CUDASIM every kind. The cpu
# backend's float64 grey writer is test_batch_gates.py's grey group, its uint8 grey one
# test_batched_equals_unbatched's grey8 case)
@pytest.mark.parametrize("kind", tiered(["rgb", "rgba", "grey", "grey8"],
                                        lambda k: not cpu_backend() or k == "rgb"))
def test_batched_equals_unbatched_small(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _check_batched(kind, 9, 9, 8, 3, monkeypatch, max_alone=5)


@pytest.mark.parametrize("seed, kind, h, w", tiered(
    [(seed, *case) for seed in (0, 1)
     for case in (("rgb", 24, 24), ("rgba", 17, 23), ("grey", 20, 20), ("grey8", 31, 19))],
    [3], several=True))
def test_batched_equals_unbatched(kind: str, h: int, w: int, seed: int,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _check_batched(kind, h, w, 40, seed, monkeypatch, max_alone=8)


@cudasim_ok
def test_generic_batched_stencil_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # the cpu backend normally runs its fused per-image stencil inside batches
    for kind, h, w, seed in (("rgba", 8, 8, 5), ("grey8", 7, 10, 6)):
        monkeypatch.setattr(batch_stencil, "CPU_FUSED_STENCIL", False)
        _check_batched(kind, h, w, 6, seed, monkeypatch, max_alone=2)


@cudasim_ok
@pytest.mark.skipif(not runtime.caps.grid_launches, reason="GPU kernels: cuda, hip or cudasim")
@pytest.mark.parametrize("one_pass", [True, False], ids=["2d-tiles", "two-tiled-passes"])
def test_batched_tiled_stencil(one_pass: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # real GPUs pick the tiled kernels themselves; the simulator runs them with small blocks
    for kind, h, w, seed in (("rgba", 7, 7, 8), ("grey8", 6, 9, 9), ("rgb", 13, 11, 3)):
        monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: True)
        if not one_pass:
            monkeypatch.setattr(exec_variants, "stencil_2d_fits", lambda radius: False)
        if runtime.simulated:
            monkeypatch.setattr(codegen_gpu, "ROWS_BLOCK", (2, 2))
            monkeypatch.setattr(codegen_gpu, "COLS_BLOCK", (4, 2))
        _check_batched(kind, h, w, 5, seed, monkeypatch, max_alone=3)


@cudasim_ok
def test_unbatchable_handles_fall_back() -> None:
    hosts = _inputs("rgb", 2, 8, 8)
    xs = [mp.gpuimage(a) for a in hosts]
    for x in xs:
        x._materialize()
    stacks = batch.stack_inputs([xs[0]._node], xs[0].device)  # xs[1] is not stacked
    a, b, c = xs[0].clone(), xs[1].clone(), xs[0].clone()
    a.fliplr()
    b.fliplr()
    # c: no operation at all (a lone copy)
    assert batch.materialize_batch([a, b, c], stacks) == [None, None, None]
    np.testing.assert_array_equal(np.asarray(a), hosts[0][:, ::-1])
    np.testing.assert_array_equal(np.asarray(b), hosts[1][:, ::-1])
    np.testing.assert_array_equal(np.asarray(c), hosts[0])


@cudasim_ok
def test_fault_fails_only_its_member() -> None:
    hosts = _inputs("rgb", 2, 6, 6)
    xs = [mp.gpuimage(a) for a in hosts]
    for x in xs:
        x._materialize()
    stacks = batch.stack_inputs([x._node for x in xs], xs[0].device)
    ys = [x.clone() for x in xs + xs]
    for y in ys:
        y.fliplr()
    faults.inject("op:fliplr", "raise", at_call=3)
    try:
        errors = batch.materialize_batch(ys, stacks)
    finally:
        faults.clear()
    assert [e is None for e in errors] == [True, True, False, True]
    assert isinstance(errors[2], faults.InjectedFault)
    np.testing.assert_array_equal(np.asarray(ys[3]), hosts[1][:, ::-1])


def test_access_substitution_touches_only_array_names() -> None:
    text = "dst[y, x, 0] = lut[0, 0, src[sy, sx, 0]] + p[3] + xp[1] + a.p[2] + tmp_[0]"
    got = codegen_batch.batched(text, {"src": "s", "dst": "b", "lut": "b", "p": "b"})
    assert got == ("dst[b, y, x, 0] = lut[b, 0, 0, src[s, sy, sx, 0]] + p[b, 3] + xp[1] + "
                   "a.p[2] + tmp_[0]")


def test_batch_size_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    def node(shape, dtype=np.uint8):
        return Node(None, (), (), shape, dtype, 0, buffer=np.zeros(1))

    assert batch.batch_size([node((8, 8, 3)), node((8, 8, 3))]) == batch.BATCH
    assert batch.batch_size([node((8, 8, 3)), node((8, 9, 3))]) == 1  # mixed shapes
    assert batch.batch_size([node((8, 8)), node((8, 8), np.float64)]) == 1  # mixed dtypes
    assert batch.batch_size([node((5,))]) == 1  # not an image
    assert batch.batch_size([node((1 << 14, 1 << 14, 3))]) == 1  # huge: no room for two
    monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", "5")
    assert batch.batch_size([node((8, 8, 3))]) == 5
    monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", "zero")
    with pytest.raises(ValueError, match="MILLIPYDE_GENERATOR_BATCH"):
        batch.batch_size([node((8, 8, 3))])


# ------------------------------------------------------------------ the Generator


@pytest.fixture(autouse=True)
def _one_worker_under_cudasim(monkeypatch: pytest.MonkeyPatch) -> None:
    # the simulator swaps the kernel's `cuda` module per launch: launches from two threads at
    # once trip over each other, so Generator tests use one worker there
    if mp.backend() == "cudasim":
        monkeypatch.setenv("MILLIPYDE_WORKERS", "1")


def _generate(hosts, ops, outputs, seed, monkeypatch, size: str) -> list[np.ndarray]:
    monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", size)
    with mp.Generator([mp.gpuimage(a) for a in hosts], ops, outputs=outputs, seed=seed,
                      return_to_host=True) as gen:
        assert gen._state.batch == int(size)
        return list(gen)


@cudasim_ok
@pytest.mark.parametrize("kind", tiered(["rgb", "grey"], lambda k: not cpu_backend() or k == "rgb"))
def test_generator_batched_equals_per_output(kind: str, monkeypatch) -> None:
    hosts = _inputs(kind, 3, 8, 8)
    ops = _ops(kind == "rgb", True)
    n = 11  # not a multiple of the batch: the last batch is short
    batched = _generate(hosts, ops, n, 7, monkeypatch, "4")
    single = _generate(hosts, ops, n, 7, monkeypatch, "1")
    assert len(batched) == len(single) == n
    for k in range(n):
        want = np.asarray(_recorded(mp.gpuimage(hosts[k % 3]), ops, 7, k))
        _assert_same(single[k], want, f"output {k}")
        _assert_same(batched[k], want, f"output {k}")


@cudasim_ok
def test_generator_batch_errors_name_the_output(monkeypatch) -> None:
    monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", "4")

    def boom(x):
        if mprandom.current_key().sample == 6:  # a Generator's sample is the output index
            raise OSError("disk on fire")

    hosts = _inputs("rgb", 2, 6, 6)
    gen = mp.Generator([mp.gpuimage(a) for a in hosts], [mp.Operation("fliplr"),
                                                         mp.Operation(boom)], outputs=9)
    got = []
    with pytest.raises(PipelineError, match="'boom'.*output 6 \\(input 0\\) on device 0"):
        for out in gen:
            got.append(np.asarray(out))
    assert len(got) == 6
    for k, out in enumerate(got):
        np.testing.assert_array_equal(out, hosts[k % 2][:, ::-1])
    with pytest.raises(StopIteration):
        next(gen)


@cudasim_ok
@pytest.mark.parametrize("shape", [(3, 5, 7, 3), (4, 6, 2), (2, 9)])
def test_member_views_are_the_batch_buffers_members(shape):
    host = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    buf = runtime.from_host(host, 0)
    views = runtime.members(buf)
    assert len(views) == shape[0]
    for m, view in enumerate(views):
        assert tuple(view.shape) == shape[1:]
        assert tuple(view.strides) == host.strides[1:]
        np.testing.assert_array_equal(runtime.to_host(view), host[m])
        # the same memory as indexing gives
        if runtime.caps.device_memory and not runtime.simulated:
            assert view.device_ctypes_pointer.value == buf[m].device_ctypes_pointer.value


@cudasim_ok
def test_packed_parameters_come_back_as_uploaded():
    parts = [np.arange(12, dtype=np.float64).reshape(3, 4), np.array([7], dtype=np.int64),
             np.arange(2 * 3 * 256, dtype=np.uint8).reshape(2, 3, 256), np.zeros((0, 3))]
    pk = batch.Pack()
    slots = [pk.add(a) for a in parts]
    pk.upload(0)
    for slot, a in zip(slots, parts, strict=True):
        got = pk[slot]
        assert tuple(got.shape) == a.shape and got.dtype == a.dtype
        np.testing.assert_array_equal(runtime.to_host(got), a)
