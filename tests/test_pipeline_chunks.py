"""A Pipeline's inputs recorded as batches (``pipeline.chunks``, ``pipeline.run``): the values of
the per-input path bit for bit, a kernel count per chunk that does not grow with its inputs,
all-or-nothing per input on a fault in the middle of a chunk, chunks over several devices."""

import threading

import numpy as np
import pytest
from multidevice import (
    assert_same,
    crops,
    reference,
    run_with_devices,
    running_threads,
    standard_ops,
    wait_for_workers,
)

import millipyde as mp
from millipyde import faults
from millipyde.backend import ACTIVE as runtime
from millipyde.pipeline import PipelineError
from millipyde.pipeline import chunks as pipeline_chunks

THESIS = [mp.Operation("gaussian", 2), mp.Operation("adjust_gamma", 2), mp.Operation("fliplr"),
          mp.Operation("rotate", 45), mp.Operation("rgb2grey")]


@pytest.fixture(autouse=True)
def _clean():
    faults.clear()
    yield
    faults.clear()


@pytest.fixture
def chunks(monkeypatch):
    """Every chunk the test's Pipelines launch: (inputs, inputs left per input, device)."""
    seen = []
    launch = pipeline_chunks.StageChunks.launch

    def spy(self, key, positions, xs, nodes, device, *args, **kwargs):
        at = len(seen)
        seen.append((len(positions), None, device))  # (a chunk that raises: left None)
        got = launch(self, key, positions, xs, nodes, device, *args, **kwargs)
        seen[at] = (len(positions), len(got.left), device)
        return got

    monkeypatch.setattr(pipeline_chunks.StageChunks, "launch", spy)
    return seen


def _per_input(monkeypatch, hosts, ops, seed, **kwargs):
    monkeypatch.setattr(pipeline_chunks, "ENABLED", False)
    if runtime.simulated:  # (the simulator runs one kernel at a time: one worker)
        monkeypatch.setenv("MILLIPYDE_WORKERS", "1")
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(imgs, ops, seed=seed, **kwargs).run()
    monkeypatch.setattr(pipeline_chunks, "ENABLED", True)
    return [np.asarray(x) for x in imgs]


# (the simulator runs every GPU thread as a Python thread: fewer, smaller images there)
SIM = runtime.simulated
N = 4 if SIM else 6


def _small(n, h=None, w=None, alpha=False):
    out = crops(n, h or (6 if SIM else 8), w or (8 if SIM else 12))
    if alpha:
        out = [np.dstack([c, np.full(c.shape[:2], 200, np.uint8)]) for c in out]
    return out


@pytest.mark.parametrize("name", [pytest.param("standard", marks=pytest.mark.cudasim_ok),
                                  pytest.param("thesis", marks=pytest.mark.cudasim_ok),
                                  "thesis-rgba"])
def test_chunks_equal_the_per_input_path(monkeypatch, chunks, name):
    ops = standard_ops() if name == "standard" else THESIS
    hosts = _small(N, alpha=name == "thesis-rgba")
    want = _per_input(monkeypatch, hosts, ops, 5)
    assert not chunks  # (the per-input path made those)
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(imgs, ops, seed=5).run()
    assert sum(n for n, _, _ in chunks) == N and all(left == 0 for _, left, _ in chunks)
    for i, (x, w) in enumerate(zip(imgs, want, strict=True)):
        assert_same(np.asarray(x), w, err_msg=f"input {i}")
        assert_same(np.asarray(x), reference(hosts[i], ops, 5, i))


def test_groups_by_shape_dtype_and_pending_work(chunks):
    """Two shapes, a grey input and an input with pending work (per input: its pending op
    fuses with the Operations there) in one Pipeline: each input its own reference."""
    hosts = _small(3) + _small(2, 10, 6) + [np.linspace(0, 1, 80).reshape(8, 10)]
    ops = [mp.Operation("random_rotate", -30, 30), mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_brightness", -0.2, 0.2)]
    imgs = [mp.gpuimage(h) for h in hosts]
    pending = mp.gpuimage(hosts[0])
    pending.transpose()  # not stored yet
    # (one device: with several, a group of inputs on one device is cut into a chunk each)
    mp.Pipeline(imgs + [pending], ops, seed=3, device=0).run()
    assert sorted(n for n, _, _ in chunks) == [1, 2, 3]  # grey, (10, 6), (8, 12)
    for i, h in enumerate(hosts):
        np.testing.assert_array_equal(np.asarray(imgs[i]), reference(h, ops, 3, i))
    x = mp.gpuimage(hosts[0])
    x.transpose()
    for j, op in enumerate(ops):
        op.apply(x, 3, len(hosts), j)
    np.testing.assert_array_equal(np.asarray(pending), np.asarray(x))


def test_connected_pipelines_hand_chunks_on(chunks):
    # (not under the simulator: its kernels can not run from two stages' threads at once)
    hosts = _small(5)
    own = _small(2, 6, 6)
    p1 = mp.Pipeline([mp.gpuimage(h) for h in hosts], [mp.Operation("random_rotate", -10, 10)],
                     seed=4)
    p2 = mp.Pipeline([mp.gpuimage(h) for h in own], [mp.Operation("fliplr", probability=0.5),
                                                     mp.Operation("adjust_gamma", 1.5)], seed=4)
    p1.connect_to(p2)
    p1.run()
    # stage 1: one chunk of 5; stage 2: its own 2, then the 5 handed on as a chunk
    assert sorted(n for n, _, _ in chunks) == [2, 5, 5]
    for i, h in enumerate(own):
        np.testing.assert_array_equal(np.asarray(p2.inputs[i]),
                                      reference(h, p2.operations, 4, i))
    for i, h in enumerate(hosts):
        ref = reference(reference(h, p1.operations, 4, i), p2.operations, 4, 2 + i)
        np.testing.assert_array_equal(np.asarray(p1.inputs[i]), ref)


def _launches(patch):
    """Count the kernel launches (every launch of the cpu backend and the simulator goes
    through one of these)."""
    count = [0]
    for name in ("launch_2d", "launch_blocks", "launch_grid", "launch_1d"):
        orig = getattr(runtime, name)

        def counted(*args, _orig=orig, **kwargs):
            count[0] += 1
            return _orig(*args, **kwargs)

        patch.setattr(runtime, name, counted)
    return count


@pytest.mark.cudasim_ok
def test_kernel_count_per_chunk_does_not_grow_with_inputs(chunks):
    counts = []
    for n in ((2, 5) if SIM else (2, 4, 12)):
        imgs = [mp.gpuimage(h) for h in _small(n)]
        mp.Pipeline([mp.gpuimage(h) for h in _small(1)], THESIS, device=0).run()  # compiled
        with pytest.MonkeyPatch.context() as patch:
            count = _launches(patch)
            mp.Pipeline(imgs, THESIS, device=0).run()
        counts.append(count[0])
    assert [n for n, _, _ in chunks][-1] == (5 if SIM else 12)  # one chunk
    # the chain plans to a stencil and one gather (gamma, flip, rotate, grey), plus a bounds
    # reduction where the warp clip binds
    assert len(set(counts)) == 1 and counts[0] <= 3, counts


def _assert_untouched_or_done(imgs, hosts, ops, seed):
    done = []
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        got = np.asarray(x)
        if np.array_equal(got, reference(h, ops, seed, i)):
            done.append(i)
        else:
            np.testing.assert_array_equal(got, h, err_msg=f"input {i} half-written")
    return done


@pytest.mark.parametrize("point, at, what", [
    ("operation:rotate", 3, "operation 1 \\('rotate'\\)"),
    pytest.param("op:gaussian", 3, "fused kernels of operations 'gaussian', 'rotate'",
                 marks=pytest.mark.cudasim_ok),
])
def test_fault_in_the_middle_of_a_chunk_changes_none_of_it(chunks, point, at, what):
    hosts = _small(N)
    ops = [mp.Operation("gaussian", 0.5), mp.Operation("rotate", 20)]
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline([mp.gpuimage(h) for h in hosts], ops, device=0).run()  # compiled before
    chunks.clear()
    base = running_threads()
    faults.inject(point, "raise", at_call=at)
    with pytest.raises(PipelineError, match=f"{what} failed on input {at - 1} on device 0") \
            as info:
        mp.Pipeline(imgs, ops, device=0).run()
    assert isinstance(info.value.__cause__, faults.InjectedFault)
    assert [n for n, _, _ in chunks] == [N]  # the fault was met inside one chunk
    assert _assert_untouched_or_done(imgs, hosts, ops, 0) == []  # none of it bound
    assert running_threads() == base
    faults.clear()
    mp.Pipeline(imgs, ops, device=0).run()  # usable afterwards
    assert len(_assert_untouched_or_done(imgs, hosts, ops, 0)) == N


@pytest.mark.cudasim_ok
def test_failed_chunk_launch_binds_nothing_and_names_the_batch(chunks):
    hosts = _small(N)
    ops = [mp.Operation("adjust_gamma", 2), mp.Operation("fliplr")]
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline([mp.gpuimage(h) for h in hosts], ops, device=0).run()
    # the stack (on a GPU also its table of input addresses: one kernel stacks them), each
    # input's output as the per-input path allocates it (fault points are met per input),
    # then the chunk's own buffers
    stack = 2 if runtime.name == "cuda" and not runtime.simulated else 1
    faults.inject("alloc", "oom", at_call=stack + N + 1)
    with pytest.raises(PipelineError, match=rf"a batch of {N} inputs, 0\.\.{N - 1}, none of "
                                            r"them changed\) on device 0") as info:
        mp.Pipeline(imgs, ops, device=0).run()
    assert "out of memory on device 0" in str(info.value)
    assert _assert_untouched_or_done(imgs, hosts, ops, 0) == []


def test_input_changed_during_its_chunk_gets_the_update_on_its_new_value(monkeypatch):
    """A chunk binds an output only to an input that still holds the value it read; one that
    changed meanwhile is processed again from its new value (no update lost or doubled)."""
    hosts = _small(4)
    imgs = [mp.gpuimage(h) for h in hosts]
    launch = pipeline_chunks.StageChunks.launch

    def meddle(self, key, positions, xs, nodes, *args, **kwargs):
        got = launch(self, key, positions, xs, nodes, *args, **kwargs)
        imgs[2].fliplr()  # between the chunk's read and its commit
        return got

    monkeypatch.setattr(pipeline_chunks.StageChunks, "launch", meddle)
    mp.Pipeline(imgs, [mp.Operation("adjust_gamma", 2)], device=0).run()
    for i, h in enumerate(hosts):
        want = mp.gpuimage(np.fliplr(h) if i == 2 else h)
        want.adjust_gamma(2)
        np.testing.assert_array_equal(np.asarray(imgs[i]), np.asarray(want))


def test_timeout_while_a_chunk_hangs_restores_it():
    hosts = _small(6)
    imgs = [mp.gpuimage(h) for h in hosts]
    ops = [mp.Operation("fliplr")]
    faults.inject("operation:fliplr", "hang", at_call=2, seconds=1.0)
    with pytest.raises(TimeoutError, match=r"[0-6] of 6 inputs done"):
        mp.Pipeline(imgs, ops, device=0).run(timeout=0.3)
    faults.clear()
    wait_for_workers()
    assert _assert_untouched_or_done(imgs, hosts, ops, 0) == []


SPREAD = """
import json
import numpy as np
import millipyde as mp
from millipyde.pipeline import chunks as pipeline_chunks
from multidevice import crops
seen = []
launch = pipeline_chunks.StageChunks.launch
def spy(self, key, positions, xs, nodes, device, *a, **k):
    seen.append((device, key[1], len(positions)))
    return launch(self, key, positions, xs, nodes, device, *a, **k)
pipeline_chunks.StageChunks.launch = spy
ops = [mp.Operation("random_rotate", -20, 20), mp.Operation("gaussian", 1.0, probability=0.5),
       mp.Operation("fliplr", probability=0.5)]
hosts = crops(36, 8, 12)
res = {}
def run(tag, made_on, **kw):
    seen.clear()
    imgs = []
    for i, h in enumerate(hosts):
        with mp.Device(made_on(i)):
            imgs.append(mp.gpuimage(h))
    mp.Pipeline(imgs, ops, seed=6, **kw).run()
    np.save(f"{OUT}/{tag}.npy", np.stack([np.asarray(x) for x in imgs]))
    res[tag] = {"chunks": seen[:], "devices": [x.device for x in imgs]}
run("spread", lambda i: i % 3)
run("on0", lambda i: 0)
run("pinned", lambda i: i % 3, device=2)
print(json.dumps(res))
"""


def test_chunks_over_three_virtual_devices(tmp_path):
    res = run_with_devices(SPREAD, 3, tmp_path)
    ops = [mp.Operation("random_rotate", -20, 20), mp.Operation("gaussian", 1.0, probability=0.5),
           mp.Operation("fliplr", probability=0.5)]
    hosts = crops(36, 8, 12)
    for tag in ("spread", "on0", "pinned"):
        got = np.load(tmp_path / f"{tag}.npy")
        for i, h in enumerate(hosts):
            np.testing.assert_array_equal(got[i], reference(h, ops, 6, i), err_msg=f"{tag} {i}")
        assert sum(n for _, _, n in res[tag]["chunks"]) == 36
    # inputs made on every device: each chunk runs where its inputs live, and stays there
    assert all(d == home for d, home, _ in res["spread"]["chunks"])
    assert res["spread"]["devices"] == [i % 3 for i in range(36)]
    # all made on device 0: one group cut into chunks that every device takes
    assert {home for _, home, _ in res["on0"]["chunks"]} == {0}
    assert len(res["on0"]["chunks"]) == 9
    # a pinned Pipeline computes on its device: outputs live there
    assert {d for d, _, _ in res["pinned"]["chunks"]} == {2}
    assert set(res["pinned"]["devices"]) == {2}


@pytest.mark.cudasim_ok
def test_fixed_taps_made_once_a_chunk_size(monkeypatch) -> None:
    """A stencil of one template that draws no taps (the thesis chain's gaussian 2) gets its
    members' taps and radii made once for chunks of one size, read-only: the same arrays in
    every chunk's pack; outputs as per input."""
    from millipyde.graph.exec import batch_group
    from millipyde.training import batch_groups

    hosts = _small(N)
    want = _per_input(monkeypatch, hosts, THESIS, 3)
    made: list[int] = []
    tiled = batch_groups._tiled_taps
    monkeypatch.setattr(batch_groups, "_tiled_taps",
                        lambda taps, n: made.append(n) or tiled(taps, n))
    seen: list[int] = []
    pack = batch_group.Group.pack_arrays

    def spy(self, pk, sidx, arrays, start=0):
        seen.extend(id(a["taps"]) for a in arrays if "taps" in a)
        return pack(self, pk, sidx, arrays, start)

    monkeypatch.setattr(batch_group.Group, "pack_arrays", spy)
    monkeypatch.setattr(pipeline_chunks, "CHUNK", 2)  # (N inputs: chunks of two)
    # (every chunk packed: a fixed chain's chunks would reuse the first one's pack)
    monkeypatch.setattr(pipeline_chunks, "REUSE_FIXED", False)
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(imgs, THESIS, seed=3, device=0).run()
    assert_same([np.asarray(x) for x in imgs], want)
    # (one recorder a worker thread: the cpu backend may run two)
    assert set(made) == {2} and len(seen) == N // 2 and len(set(seen)) == len(made)


@pytest.mark.cudasim_ok
def test_a_new_pipeline_of_the_same_chain_records_no_template_again():
    from millipyde.training import template_share

    hosts = _small(N)
    ops = [mp.Operation("adjust_gamma", 2), mp.Operation("fliplr")]
    first = [mp.gpuimage(h) for h in hosts]
    # on device 0: templates are per device, and over several devices which ones a run's
    # chunks reach is timing's (four virtual devices: the second run reached one more)
    mp.Pipeline(first, ops, seed=3, device=0).run()
    before = template_share.recorded
    again = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(again, ops, seed=4, device=0).run()  # (another seed: the same templates)
    assert template_share.recorded == before
    for x, y in zip(first, again, strict=True):  # fixed ops: the same values
        assert_same(np.asarray(x), np.asarray(y))
    # a changed argument is another chain: its templates recorded, its values its own
    other = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(other, [mp.Operation("adjust_gamma", 3), mp.Operation("fliplr")], seed=3).run()
    assert template_share.recorded > before
    ref = [mp.gpuimage(h) for h in hosts]
    for x in ref:
        x.adjust_gamma(3)
        x.fliplr()
    for x, y in zip(other, ref, strict=True):
        assert_same(np.asarray(x), np.asarray(y))


def test_fair_lock_hands_over_in_arrival_order():
    from millipyde.workers import FairLock

    lock = FairLock()
    order: list[int] = []
    lock.__enter__()  # held here: the threads queue in the order they start
    threads = []
    for i in range(4):
        queued = threading.Event()

        def take(i=i, queued=queued):
            queued.set()
            with lock:
                order.append(i)

        t = threading.Thread(target=take)
        t.start()
        queued.wait(5)
        deadline = 200
        while len(lock._waiters) < i + 1 and deadline:  # (its turn queued, then the next)
            threading.Event().wait(0.005)
            deadline -= 1
        assert len(lock._waiters) == i + 1
        threads.append(t)
    lock.__exit__(None, None, None)
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2, 3]
    with lock:  # free again: taken at once
        assert not lock._waiters


@pytest.mark.cudasim_ok
def test_templates_kept_only_within_the_shared_stores_bound(monkeypatch):
    from millipyde.training import template_share

    hosts = _small(N)
    ops = [mp.Operation("adjust_gamma", 2, probability=0.5), mp.Operation("fliplr")]
    # two coin patterns, up to two templates each, each keeping one input alive: shared
    # only where 2 * 2 inputs fit the store's bound on its inputs' bytes
    monkeypatch.setattr(template_share, "MAX_INPUT_BYTES", 4 * hosts[0].nbytes - 1)
    # every run on device 0: templates are per device, and on several devices which chunks
    # (so which coin patterns) a device meets depends on the timing
    mp.Pipeline([mp.gpuimage(h) for h in hosts], ops, seed=1, device=0).run()
    before = template_share.recorded
    mp.Pipeline([mp.gpuimage(h) for h in hosts], ops, seed=1, device=0).run()
    assert template_share.recorded > before  # its own templates, recorded again
    monkeypatch.setattr(template_share, "MAX_INPUT_BYTES", 4 * hosts[0].nbytes)
    mp.Pipeline([mp.gpuimage(h) for h in hosts], ops, seed=1, device=0).run()
    before = template_share.recorded
    got = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(got, ops, seed=1, device=0).run()
    assert template_share.recorded == before  # shared: none recorded again
    want = _per_input(monkeypatch, hosts, ops, 1)
    for x, w in zip(got, want, strict=True):
        assert_same(np.asarray(x), w)
