"""A fixed chain's Pipeline chunks (no coin, nothing drawn) reuse the groups and uploaded pack
of their worker's last chunk of their size (``pipeline.chunks.REUSE_FIXED``): the values of
the per-input path bit for bit, over chunks of one and of two sizes, chunks stacked from
another run's batch buffers, a warp clip measured per chunk, two devices; a chain with a coin
or a drawn parameter records every chunk."""

import numpy as np
import pytest
from multidevice import assert_same, crops, reference, run_with_devices

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.exec import batch_group
from millipyde.pipeline import chunks as pipeline_chunks
from millipyde.training import template_share
from millipyde.training.batch_groups import ArrayGroup
from millipyde.training.batch_record import Recorder

THESIS = [mp.Operation("gaussian", 2), mp.Operation("adjust_gamma", 2), mp.Operation("fliplr"),
          mp.Operation("rotate", 45), mp.Operation("rgb2grey")]
SIM = runtime.simulated  # (the simulator runs every GPU thread as a Python thread: small)
H, W = (6, 8) if SIM else (8, 12)


@pytest.fixture
def counts(monkeypatch):
    """Per run: chunks launched, ``Recorder.groups`` calls, chunks that reused a pack; one
    worker a device (each worker keeps its own chunks)."""
    monkeypatch.setenv("MILLIPYDE_WORKERS", "1")
    seen = {"chunks": 0, "groups": 0, "reused": 0}
    groups, launch, rebound = Recorder.groups, pipeline_chunks.StageChunks.launch, \
        batch_group.Group.rebound

    def count_groups(self, *a, **k):
        seen["groups"] += 1
        return groups(self, *a, **k)

    def count_launch(self, *a, **k):
        seen["chunks"] += 1
        return launch(self, *a, **k)

    def count_rebound(self, stack):
        seen["reused"] += stack is not None
        return rebound(self, stack)

    monkeypatch.setattr(Recorder, "groups", count_groups)
    monkeypatch.setattr(pipeline_chunks.StageChunks, "launch", count_launch)
    monkeypatch.setattr(batch_group.Group, "rebound", count_rebound)
    return seen


def _run(hosts, ops, seed=0, chunk=2):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline_chunks, "CHUNK", chunk)
        imgs = [mp.gpuimage(h) for h in hosts]
        mp.Pipeline(imgs, ops, seed=seed, device=0).run()
    return imgs


def _assert_reference(imgs, hosts, ops, seed=0):
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        assert_same(np.asarray(x), reference(h, ops, seed, i), err_msg=f"input {i}")


@pytest.mark.cudasim_ok
@pytest.mark.parametrize("n, chunk, sizes", [(6, 2, [2, 2, 2]), (7, 3, [3, 2, 2])])
def test_fixed_chain_records_once_a_chunk_size(counts, n, chunk, sizes):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline_chunks, "CHUNK", chunk)
        assert pipeline_chunks.chunk_sizes(n, (H, W, 3), 1) == sizes
    hosts = crops(n, H, W)
    imgs = _run(hosts, THESIS, chunk=chunk)
    _assert_reference(imgs, hosts, THESIS)
    # one recording a size; every other chunk the last one's groups over its own stack
    assert counts["chunks"] == len(sizes) and counts["groups"] == len(set(sizes))
    assert counts["reused"] == len(sizes) - len(set(sizes))
    # off: every chunk recorded, the same values
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline_chunks, "REUSE_FIXED", False)
        again = _run(hosts, THESIS, chunk=chunk)
    assert counts["groups"] == len(set(sizes)) + len(sizes)
    for x, y in zip(imgs, again, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.cudasim_ok
def test_a_later_run_of_the_chain_records_nothing(counts):
    """A second Pipeline of the same fixed chain over other inputs of the same kind finds
    the first one's chunks in the shared template store (its stream's, or thread's, entry):
    nothing recorded, the per-input path's values; what is kept holds no chunk's stack."""
    hosts = crops(6, H, W)
    _assert_reference(_run(hosts, THESIS), hosts, THESIS)
    assert counts["groups"] == 1 and counts["reused"] == 2
    others = [np.ascontiguousarray(h[::-1]) for h in hosts]
    _assert_reference(_run(others, THESIS, seed=7), others, THESIS, seed=7)
    assert counts["groups"] == 1 and counts["reused"] == 2 + 3
    kept = [g for store in template_share._STORES.values() for sizes in store.reused.values()
            for groups, _ in sizes.values() for g in groups]
    assert kept and all(g.stack is None for g in kept)
    # (a batch's groups share the recorder's view of the last stack: a kept copy has its own)
    arrays = [g for g in kept if isinstance(g, ArrayGroup)]
    assert arrays and all(g._s4 == {} for g in arrays)


@pytest.mark.cudasim_ok
@pytest.mark.parametrize("ops", [
    [mp.Operation("adjust_gamma", 2), mp.Operation("fliplr", probability=0.5)],
    [mp.Operation("random_rotate", -20, 20), mp.Operation("adjust_gamma", 2)],
], ids=["coin", "drawn"])
def test_a_coin_or_a_draw_records_every_chunk(counts, ops):
    hosts = crops(6, H, W)
    imgs = _run(hosts, ops, seed=4)
    _assert_reference(imgs, hosts, ops, 4)
    assert counts["chunks"] == 3 and counts["groups"] == 3 and counts["reused"] == 0


@pytest.mark.cudasim_ok
def test_chunks_stacked_from_another_runs_batches(counts):
    """Inputs bound to members of a previous run's chunks: each chunk's stack is rows of
    another batch buffer (no copy), its groups re-pointed at it."""
    hosts = crops(6, H, W)
    first = [mp.Operation("adjust_gamma", 2)]
    imgs = _run(hosts, first)
    assert all("_member" in x.__dict__ for x in imgs)
    before = counts["groups"]
    second = [mp.Operation("fliplr"), mp.Operation("rotate", 30)]
    # chunks of 3 over the first run's chunks of 2: stacks that span two buffers (copied)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline_chunks, "CHUNK", 3)
        mp.Pipeline(imgs, second, device=0).run()
    assert counts["groups"] - before == 1 and counts["reused"] >= 2
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        assert_same(np.asarray(x), reference(reference(h, first, 0, i), second, 0, i),
                    err_msg=f"input {i}")


@pytest.mark.cudasim_ok
def test_warp_clip_bounds_measured_per_chunk(counts, monkeypatch):
    """A small rotation needs scikit-image's data-dependent warp clip: its bounds, written
    into the pack by a kernel, are each chunk's own (each chunk's inputs of another range)."""
    calls = []
    clip = batch_group.clip_bounds
    monkeypatch.setattr(batch_group, "clip_bounds",
                        lambda *a: calls.append(a[3]) or clip(*a))
    hosts = [np.clip(h, lo, hi).astype(np.uint8) for h, (lo, hi) in
             zip(crops(6, H, W), [(40, 200)] * 2 + [(90, 120)] * 2 + [(5, 250)] * 2,
                 strict=True)]
    ops = [mp.Operation("rotate", 3), mp.Operation("adjust_gamma", 1.5)]
    imgs = _run(hosts, ops)
    _assert_reference(imgs, hosts, ops)
    assert calls == [2, 2, 2] and counts["groups"] == 1 and counts["reused"] == 2


@pytest.mark.cudasim_ok
def test_a_value_twice_in_a_chunk_is_recorded(counts):
    """A chunk whose inputs share a value (its stack rows are not 0 .. n - 1) is recorded
    and not kept; one without is kept."""
    hosts = crops(2, H, W)
    xs = [mp.gpuimage(h) for h in hosts]
    nodes = [x._value() for x in xs]
    ops = [mp.Operation("fliplr")]
    stage = pipeline_chunks.StageChunks(ops, 0)
    key = pipeline_chunks.group_key(xs[0], nodes[0])
    assert stage.takes(key, xs[0])
    stream = runtime.current_stream()  # (one worker's stream: a pack is kept per stream)

    def record(at):
        got = stage.record(key, [0, 1, 2], [xs[i] for i in at], [nodes[i] for i in at], 0,
                           stream, lambda: None, lambda: False)
        out = stage.start(got, stream)
        out.wait()
        for v, i in zip(out.values, at, strict=True):
            np.testing.assert_array_equal(np.asarray(v.view()), np.fliplr(hosts[i]))

    for at in ([0, 0, 1], [1, 0, 1], [0, 1, 1]):
        record(at)
    assert counts["groups"] == 3 and counts["reused"] == 0
    third = mp.gpuimage(hosts[0][::-1].copy())
    xs.append(third)
    nodes.append(third._value())
    hosts.append(np.asarray(third))
    record([0, 1, 2])
    record([2, 0, 1])
    assert counts["groups"] == 4 and counts["reused"] == 1


TWO = """
import json
import numpy as np
import millipyde as mp
from millipyde.pipeline import chunks as pipeline_chunks
from millipyde.training.batch_record import Recorder
from multidevice import crops, reference
calls = []
groups = Recorder.groups
def spy(self, ks, device, *a, **k):
    calls.append(device)
    return groups(self, ks, device, *a, **k)
Recorder.groups = spy
pipeline_chunks.CHUNK = 2
ops = [mp.Operation("gaussian", 2), mp.Operation("adjust_gamma", 2), mp.Operation("fliplr"),
       mp.Operation("rotate", 45), mp.Operation("rgb2grey")]
hosts = crops(24, 8, 12)
imgs = []
for i, h in enumerate(hosts):
    with mp.Device(i % 2):
        imgs.append(mp.gpuimage(h))
mp.Pipeline(imgs, ops).run()
np.save(f"{OUT}/two.npy", np.stack([np.asarray(x) for x in imgs]))
# the per-input path on the same (cpu) backend, image by image on device 0
np.save(f"{OUT}/ref.npy", np.stack([reference(h, ops, 0, i) for i, h in enumerate(hosts)]))
print(json.dumps({"calls": calls, "devices": [x.device for x in imgs]}))

"""


def test_fixed_chain_on_two_devices(tmp_path):
    res = run_with_devices("import os\nos.environ['MILLIPYDE_WORKERS'] = '1'\n" + TWO, 2,
                           tmp_path)
    got, want = np.load(tmp_path / "two.npy"), np.load(tmp_path / "ref.npy")
    for i in range(len(want)):
        np.testing.assert_array_equal(got[i], want[i], err_msg=f"input {i}")
    # twelve inputs a device, chunks of two: a device's worker records its first chunk of
    # each group it takes (its own; another device's, where it takes one of those) only
    assert set(res["calls"]) == {0, 1} and len(res["calls"]) <= 4
