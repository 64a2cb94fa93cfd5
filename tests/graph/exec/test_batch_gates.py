"""Probability gates inside batched kernels (graph/batch.py): outputs of one Generator batch
that differ only in their coins share one group, and each value is exactly the skip's."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref
from tiers import cpu_backend, tiered

import millipyde as mp
from millipyde import random as mprandom
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import gpu as codegen_gpu
from millipyde.graph.exec import batch, batch_stencil, execute
from millipyde.graph.exec import variants as exec_variants
from millipyde.graph.ir import node
from millipyde.kernels import REGISTRY

cudasim_ok = pytest.mark.cudasim_ok
SIM = mp.backend() == "cudasim"
# small under the simulator (every GPU thread is a Python thread), photo-sized crops otherwise
SIDE = 10 if SIM else 24
OUTPUTS = 8 if SIM else 24


def _gated_ops(colour: bool) -> list[mp.Operation]:
    """Gated ops of every kind with an identity form; rotations big enough that scikit-image's
    data-dependent clip never applies (such a sampler runs alone, which is not what is tested)."""
    ops = [mp.Operation("transpose", probability=0.5),
           mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_adjust_gamma", [0.6, 1.6], [0.9, 1.1], probability=0.5),
           mp.Operation("random_gaussian", 0.6, 1.2, probability=0.5),
           mp.Operation("random_rotate", 20, 70, probability=0.5),
           mp.Operation("random_brightness", -0.2, 0.2, probability=0.5)]
    if colour:
        ops.append(mp.Operation("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5],
                                probability=0.5))
    return ops


def _ungated(ops: list[mp.Operation]) -> list[mp.Operation]:
    """The same ops without coins: every output takes the pattern "all ran"."""
    return [mp.Operation(op.method, *op.args, **op.kwargs) for op in ops]


def _image(kind: str) -> list[np.ndarray]:
    """Three same-shape inputs; grey ones hold some -0.0, which only a path that leaves the
    value untouched keeps (a blend or a sum with +0.0 makes it +0.0)."""
    base = ref.photo(kind, SIDE + 2, SIDE + 2)
    out = [np.ascontiguousarray(base[i:i + SIDE, 2 - i:2 - i + SIDE]) for i in range(3)]
    if kind == "grey":
        for a in out:
            a[:3, :3] = -0.0
    return out


def _patterns(ops: list[mp.Operation], seed: int, n: int) -> list[tuple[bool, ...]]:
    return [tuple(mprandom.gate(seed, k, j, op.probability) for j, op in enumerate(ops))
            for k in range(n)]


def _assert_mixed(ops: list[mp.Operation], seed: int, n: int) -> None:
    pats = _patterns(ops, seed, n)
    assert len(set(pats)) > 1
    for j, op in enumerate(ops):  # every gated op both runs and is skipped in this batch
        if op.probability is not None:
            assert {p[j] for p in pats} == {True, False}, op


def _eager(host: np.ndarray, ops: list[mp.Operation], seed: int, k: int) -> np.ndarray:
    """Output ``k`` one op at a time, each materialized before the next (no batch, no fusion
    across ops, skipped ops not recorded)."""
    y = mp.gpuimage(host)
    for j, op in enumerate(ops):
        op.apply(y, seed, k, j)
        y._materialize()
    return np.asarray(y)


def _assert_same(out: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bit for bit (-0.0 included) on the CPU and CUDASIM; on real GPUs the batched and
    per-image kernels are compiled apart and may differ by an FMA (see test_batch.py)."""
    assert out.dtype == want.dtype and out.shape == want.shape, what
    if mp.backend() not in ("cuda", "hip"):
        assert out.tobytes() == want.tobytes(), what
    elif out.dtype == np.uint8:
        diff = np.abs(out.astype(int) - want.astype(int))
        assert diff.max(initial=0) <= 1 and (diff > 0).mean() < 0.01, what
    else:
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-12, err_msg=what)


class _Counts:
    """Groups run, kernel launches (at the runtime's lowest level or through a driver template,
    whatever launches them) and outputs computed alone during ``materialize_batch``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.groups = self.launches = self.alone = 0
        # the lowest launch level: _launch on grid backends, _run_cpu on the cpu
        low = "_launch" if runtime.caps.grid_launches else "_run_cpu"
        run, launch, alone = batch.Group.launch, getattr(runtime, low), execute.materialize

        def count_run(group, pk, *a):
            # every group's kernels run through launch: per-output and recorded batches
            self.groups += 1
            return run(group, pk, *a)

        def count_launch(*a, **kw):
            self.launches += 1
            return launch(*a, **kw)

        def count_alone(node):
            self.alone += not node.materialized
            return alone(node)

        monkeypatch.setattr(batch.Group, "launch", count_run)
        monkeypatch.setattr(runtime, low, count_launch)
        direct = getattr(runtime, "launch_batched", None)
        if direct is not None:
            # the batch engine's launches straight through driver templates (cuda) skip
            # ``_launch``: a launch counts once whichever way it went
            def count_direct(*a, **kw):
                done = direct(*a, **kw)
                self.launches += bool(done)
                return done

            monkeypatch.setattr(runtime, "launch_batched", count_direct)
        monkeypatch.setattr(execute, "materialize", count_alone)


def _batch(hosts: list[np.ndarray], ops: list[mp.Operation], seed: int, n: int, lift: bool,
           monkeypatch: pytest.MonkeyPatch) -> tuple[list[np.ndarray], _Counts]:
    """Outputs ``0 .. n - 1`` recorded as a batched Generator does, then one
    ``materialize_batch``; the counts are of that call only."""
    xs = [mp.gpuimage(a) for a in hosts]
    for x in xs:
        x._materialize()
    stacks = batch.stack_inputs([x._node for x in xs], xs[0].device)
    ys = []
    for k in range(n):
        y = xs[k % len(xs)].clone()
        for j, op in enumerate(ops):
            op.apply(y, seed, k, j, lift)
        ys.append(y)
    with monkeypatch.context() as m:
        counts = _Counts(m)
        errors = batch.materialize_batch(ys, stacks)
    assert errors == [None] * n
    return [np.asarray(y) for y in ys], counts


@cudasim_ok
@pytest.mark.parametrize("kind", tiered(["rgba", "grey"],
                                        lambda kind: not cpu_backend() or kind == "grey"))
def test_gated_batch_is_one_group(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the cpu backend's per-member stencil would make launches depend on the coins (a gated
    # member copies instead of launching): count the batched passes
    monkeypatch.setattr(batch_stencil, "CPU_FUSED_STENCIL", False)
    hosts, seed = _image(kind), 7
    ops = _gated_ops(kind == "rgba")
    _assert_mixed(ops, seed, OUTPUTS)
    _, one = _batch(hosts, _ungated(ops), seed, OUTPUTS, True, monkeypatch)
    got, counts = _batch(hosts, ops, seed, OUTPUTS, True, monkeypatch)
    _, split = _batch(hosts, ops, seed, OUTPUTS, False, monkeypatch)
    assert one.groups == 1 and one.alone == 0
    # one coin pattern's launches (gather, stencil passes, gather) for the whole batch
    assert (counts.groups, counts.launches, counts.alone) == (1, one.launches, 0)
    # the coins alone split the batch when skipped ops are not recorded
    assert split.groups > 1 and split.launches > one.launches
    for k in range(OUTPUTS):
        _assert_same(got[k], _eager(hosts[k % 3], ops, seed, k), f"output {k}")
    if kind == "grey":  # some output kept its -0.0: gates skip, they do not add zeros
        assert any(np.signbit(g).any() for g in got)


@cudasim_ok
@pytest.mark.parametrize("kind", ["rgba", "grey"])
def test_generator_gated_batch_equals_unbatched_and_eager(kind: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    if SIM:  # the simulator's launches from two threads at once trip over each other
        monkeypatch.setenv("MILLIPYDE_WORKERS", "1")
    hosts, seed, n = _image(kind), 5, OUTPUTS
    ops = _gated_ops(kind == "rgba")
    _assert_mixed(ops, seed, n)

    def generate(size: int) -> tuple[list[np.ndarray], _Counts]:
        monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", str(size))
        with monkeypatch.context() as m:
            counts = _Counts(m)
            with mp.Generator([mp.gpuimage(a) for a in hosts], ops, outputs=n, seed=seed,
                              return_to_host=True) as gen:
                assert gen._state.batch == size
                out = list(gen)
        return out, counts

    batched, counts = generate(n)  # one batch: one worker makes every output
    single, _ = generate(1)
    assert counts.groups == 1 and counts.alone == 0
    for k in range(n):
        want = _eager(hosts[k % 3], ops, seed, k)
        _assert_same(single[k], want, f"output {k} unbatched")
        _assert_same(batched[k], want, f"output {k} batched")


@cudasim_ok
@pytest.mark.skipif(not runtime.caps.grid_launches, reason="GPU kernels: cuda, hip or cudasim")
@pytest.mark.parametrize("variant", ["2d-tiles", "two-tiled-passes", "generic"])
def test_gated_stencil_gpu_variants(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # every batched stencil kernel copies a member whose stencil is gated off (radius -1)
    monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: variant != "generic")
    if variant != "2d-tiles":
        monkeypatch.setattr(exec_variants, "stencil_2d_fits", lambda radius: False)
    if runtime.simulated:
        monkeypatch.setattr(codegen_gpu, "ROWS_BLOCK", (2, 2))
        monkeypatch.setattr(codegen_gpu, "COLS_BLOCK", (4, 2))
    ops = [mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_gaussian", 0.5, 1.0, probability=0.5)]
    for kind, seed in (("rgba", 2), ("grey", 4)):
        hosts = [a[:7, :9] for a in _image(kind)]
        _assert_mixed(ops, seed, 6)
        got, counts = _batch(hosts, ops, seed, 6, True, monkeypatch)
        assert counts.groups == 1 and counts.alone == 0
        for k in range(6):
            _assert_same(got[k], _eager(hosts[k % 3], ops, seed, k), f"{kind} output {k}")


_CLIPPED = [mp.Operation("random_adjust_gamma", [0.5, 0.7], probability=0.5),
            mp.Operation("fliplr", probability=0.5),
            mp.Operation("rotate", 3.0),
            mp.Operation("random_gaussian", 0.7, 0.9, probability=0.5)]


@cudasim_ok
def test_members_run_alone_without_their_gated_off_nodes(monkeypatch) -> None:
    # members that cannot batch (here: none may) run alone (execute.materialize), which must
    # not run the ops their coins skipped
    seed, n = 3, 6
    _assert_mixed(_CLIPPED, seed, n)
    monkeypatch.setattr(batch, "analyse", lambda *a: None)
    for kind in ("rgba", "grey"):
        hosts = [a[:8, :8] for a in _image(kind)]
        got, counts = _batch(hosts, _CLIPPED, seed, n, True, monkeypatch)
        assert counts.alone >= n
        for k in range(n):
            _assert_same(got[k], _eager(hosts[k % 3], _CLIPPED, seed, k), f"{kind} output {k}")


@cudasim_ok
def test_warp_clipped_members_batch(monkeypatch) -> None:
    # a 3 degree rotation needs scikit-image's data-dependent clip: its bounds are measured
    # per member on the device (batch_group.clip_bounds), the members stay in their groups;
    # inputs whose minimum is above 0 make the clip bind
    seed, n = 3, 6
    for kind in ("rgba", "grey"):
        hosts = [a[:8, :8] for a in _image(kind)]
        hosts = [np.maximum(a, a.dtype.type(40) if a.dtype == np.uint8 else 0.2)
                 for a in hosts]
        got, counts = _batch(hosts, _CLIPPED, seed, n, True, monkeypatch)
        assert counts.alone == 0 and counts.groups <= 2
        for k in range(n):
            _assert_same(got[k], _eager(hosts[k % 3], _CLIPPED, seed, k), f"{kind} output {k}")


@cudasim_ok
def test_only_ops_with_an_identity_form_are_recorded_gated_off() -> None:
    seed = 1
    k = next(k for k in range(100) if not mprandom.gate(seed, k, 0, 0.5))  # coin: skip
    square = mp.gpuimage(ref.photo("grey", 6, 6))
    wide = mp.gpuimage(ref.photo("rgb", 6, 9))

    def lifted(x: mp.gpuimage, method: str, *args) -> bool:
        y = x.clone()
        before, users = y._node, y._node.users
        ran = mp.Operation(method, *args, probability=0.5).apply(y, seed, k, 0, lift=True)
        assert not ran
        if y._node is before:
            assert before.users == users  # an undone recording leaves no trace
            return False
        assert y._node.gated_off and y._node.inputs == (before,)
        return True

    assert lifted(square, "transpose")
    assert lifted(square, "random_gaussian", 0.5, 1.0)
    assert lifted(wide, "random_colorize", [1, 2], [1, 2], [1, 2])
    assert not lifted(wide, "transpose")  # shape changes: no identity
    assert not lifted(wide, "rgb2grey")  # dtype changes
    assert not lifted(square, "random_colorize", [1, 2], [1, 2], [1, 2])  # raises if it ran
    # a stencil's cut stores its input: exact for integers and float64, not float32 (a grey
    # image's device value may be any real dtype)
    for dtype, ok in ((np.float32, False), (np.float64, True), (np.int16, True)):
        src = node.leaf(np.zeros((6, 6), dtype), (6, 6), dtype, 0)
        n = node.apply(REGISTRY["gaussian"], src, (1.0,), (6, 6), dtype)
        assert batch._identity_form(n) is ok, dtype
    # and what was skipped stays skipped, also for an output that runs alone (nothing stacked)
    y = square.clone()
    mp.Operation("random_gaussian", 0.5, 1.0, probability=0.5).apply(y, seed, k, 0, lift=True)
    assert y._node.gated_off
    assert batch.materialize_batch([y], {}) == [None]
    np.testing.assert_array_equal(np.asarray(y), np.asarray(square))


@cudasim_ok
def test_a_callable_reads_the_value_without_gated_off_ops(monkeypatch) -> None:
    # a Python callable may read the value mid-recording (per-image kernels): the ops its
    # output's coins skipped must not run there, nor be recorded after it
    if SIM:
        monkeypatch.setenv("MILLIPYDE_WORKERS", "1")

    def darker_if_bright(x: mp.gpuimage) -> None:
        x.brightness(-0.3 if float(x.mean()) > 0.4 else 0.05)

    ops = [mp.Operation("random_gaussian", 0.6, 0.9, probability=0.5),
           mp.Operation("random_adjust_gamma", [0.5, 2.0], probability=0.5),
           mp.Operation(darker_if_bright),
           mp.Operation("fliplr", probability=0.5)]
    seed, n = 9, 8
    _assert_mixed(ops, seed, n)
    hosts = [a[:8, :8] for a in _image("grey")]
    for size in (n, 1):
        monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", str(size))
        with mp.Generator([mp.gpuimage(a) for a in hosts], ops, outputs=n, seed=seed,
                          return_to_host=True) as gen:
            got = list(gen)
        for k in range(n):
            _assert_same(got[k], _eager(hosts[k % 3], ops, seed, k), f"output {k}")
