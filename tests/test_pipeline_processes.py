"""``Pipeline(processes=True)`` (``pipeline.processes``): chunks recorded and launched by a
worker process per device, on the cpu backend (host memory shared by memfd) and on GPUs (CUDA
IPC; the two-device case on virtual cpu devices): the outputs of the thread path byte for
byte, in place, all-or-nothing on a failure, a killed worker named and replaced, no process
or thread left after ``close``.

One worker (device 0) serves the module: its start (an interpreter and millipyde's import,
~1 s) is paid once, by the module's fixture."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from multidevice import (
    ROOT,
    TESTS,
    assert_same,
    crops,
    reference,
    run_with_devices,
    wait_for_workers,
)

import millipyde as mp
from millipyde import faults
from millipyde.array import ArgumentError
from millipyde.backend import ACTIVE as runtime
from millipyde.pipeline import PipelineError, processes
from millipyde.pipeline import chunks as pipeline_chunks

pytestmark = pytest.mark.skipif(not processes.supported(),
                                reason="no worker processes on this backend (CUDASIM, HIP)")

OPS = [mp.Operation("random_rotate", -20, 20), mp.Operation("fliplr", probability=0.5),
       mp.Operation("gaussian", 1.0, probability=0.5)]


@pytest.fixture(scope="module", autouse=True)
def worker():
    """The module's worker of device 0, started once (its start is the cold start)."""
    took = processes.start([0])
    assert took[0] > 0  # (seconds to its first reply: reported apart from any run)
    yield processes.workers()[0]
    processes.close()


@pytest.fixture(autouse=True)
def _clean():
    faults.clear()
    yield
    faults.clear()


def _hosts():
    """Mixed shapes and dtypes: RGB uint8 of two sizes, grey float32, RGBA uint8."""
    rgb = crops(5, 8, 12) + crops(3, 10, 6)
    grey = [np.linspace(0, 1, 80, dtype=np.float32).reshape(8, 10) * (i + 1) / 4
            for i in range(3)]
    rgba = [np.dstack([c, np.full(c.shape[:2], 200, np.uint8)]) for c in crops(2, 6, 8)]
    return rgb + grey + rgba


def _run(hosts, ops, seed, **kwargs):
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(imgs, ops, seed=seed, device=0, **kwargs).run()
    return imgs


@pytest.mark.parametrize("stack_in_worker", [False, True])
def test_outputs_equal_the_thread_path_twice_over(worker, monkeypatch, stack_in_worker):
    """Twice: the second run's inputs are the first's outputs, in the worker's shared memory
    (no copy), the first's plain arrays (copied in); the chunks stacked here, or each input
    sent and stacked by the worker."""
    monkeypatch.setattr(processes, "STACK_IN_WORKER", stack_in_worker)
    sent = []
    launch = processes.ProcessChunks.launch

    def spy(self, key, positions, *args, **kwargs):
        sent.append(len(positions))
        return launch(self, key, positions, *args, **kwargs)

    monkeypatch.setattr(processes.ProcessChunks, "launch", spy)
    hosts = _hosts()
    threads = _run(hosts, OPS, 5, processes=False)
    assert not sent
    procs = _run(hosts, OPS, 5, processes=True)
    assert sorted(sent) == [2, 3, 3, 5]  # every group a chunk in the worker
    for i, (a, b) in enumerate(zip(threads, procs, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        assert (a.dtype, a.shape) == (b.dtype, b.shape), i
        assert a.tobytes() == b.tobytes(), f"input {i}"
    if runtime.name == "cpu":  # (the outputs' memory: mappings shared with the worker)
        assert processes.HostArena.of(procs[0]._node.buffer) is not None  # (read above)
    for imgs, flag in ((threads, False), (procs, True)):
        mp.Pipeline(imgs, OPS, seed=9, device=0, processes=flag).run()
    for i, (a, b) in enumerate(zip(threads, procs, strict=True)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), f"input {i}, run 2"
    assert processes.workers() == {0: worker}  # the same worker served every run


def test_in_place_and_connected(worker):
    """The inputs themselves take the outputs; connected pipelines hand chunks on."""
    hosts = crops(4, 8, 12)
    a = [mp.gpuimage(h) for h in hosts]
    ids = [id(x) for x in a]
    p1 = mp.Pipeline(a, OPS[:2], seed=3, processes=True)
    p2 = mp.Pipeline([], [mp.Operation("adjust_gamma", 2)], seed=3, processes=True)
    p1.connect_to(p2)
    p1.run()
    assert [id(x) for x in p1.inputs] == ids and [id(x) for x in p2.inputs] == ids
    for i, h in enumerate(hosts):
        want = reference(h, OPS[:2], 3, i)
        x = mp.gpuimage(want)
        x.adjust_gamma(2)
        assert_same(np.asarray(a[i]), np.asarray(x))


def test_failing_op_in_the_worker_rolls_the_chunk_back(worker):
    hosts = crops(6, 8, 12)
    ops = OPS[:2] + [mp.Operation("gaussian", 1.0)]
    imgs = [mp.gpuimage(h) for h in hosts]
    faults.inject("op:gaussian", "raise", at_call=3)  # (sent to the worker with the stage)
    with pytest.raises(PipelineError, match="fused kernels of operations 'random_rotate', "
                                            "'fliplr', 'gaussian' failed on input 2 on "
                                            "device 0") as info:
        mp.Pipeline(imgs, ops, device=0, processes=True).run()
    assert "InjectedFault" in str(info.value)
    for x, h in zip(imgs, hosts, strict=True):
        np.testing.assert_array_equal(np.asarray(x), h)  # none of the chunk bound
    faults.clear()
    mp.Pipeline(imgs, ops, seed=1, device=0, processes=True).run()
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        assert_same(np.asarray(x), reference(h, ops, 1, i))


def _messages():
    return processes.messages().get(0, (0, 0, 0))


def test_one_message_a_chunk_each_way(worker, monkeypatch):
    """A stage's first run learns its outputs' size an input (each chunk then two exchanges:
    the layout replied, buffers sent); a later run of the same stage sends each chunk its
    output region: one message a chunk each way. The outputs are the thread path's."""
    monkeypatch.setattr(pipeline_chunks, "CHUNK", 3)  # (several chunks in flight at once)
    hosts = crops(8, 8, 12)
    want = _run(hosts, OPS, 11, processes=False)
    m0 = _messages()
    _run(hosts, OPS, 11, processes=True)
    m1 = _messages()
    got = _run(hosts, OPS, 11, processes=True)
    m2 = _messages()
    sent, received, chunks = (m2[i] - m1[i] for i in range(3))
    assert chunks == 3 and sent == chunks + 1 and received == chunks  # (+1: the stage)
    assert m1[2] - m0[2] == 3 and m1[1] - m0[1] >= 3
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), f"input {i}"


def test_a_region_too_small_takes_the_second_exchange(worker, monkeypatch):
    """A chunk sent with a region too small for its outputs is replied its layout and given
    buffers (two exchanges): the thread path's outputs still."""

    class Small(dict):
        def get(self, key, default=None):
            return 1  # (one byte an input: never enough)

    monkeypatch.setattr(processes, "_LEARNED", Small())
    hosts = crops(5, 8, 12)
    want = _run(hosts, OPS, 12, processes=False)
    m0 = _messages()
    got = _run(hosts, OPS, 12, processes=True)
    m1 = _messages()
    assert m1[2] - m0[2] == 1 and m1[1] - m0[1] == 2  # (the layout, then done)
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), f"input {i}"


@pytest.mark.parametrize("small", [False, True])
def test_fixed_chain_chunks_in_flight_in_the_worker(worker, monkeypatch, small):
    """A fixed chain (the worker reuses its first chunk's groups and pack for the others)
    with a warp clip measured per chunk (each chunk's inputs of another range), chunks of
    two in flight at once; with a region too small, each chunk recorded, its layout replied,
    and launched later: the thread path's outputs."""

    class Small(dict):
        def get(self, key, default=None):
            return 1

    if small:
        monkeypatch.setattr(processes, "_LEARNED", Small())
    monkeypatch.setattr(pipeline_chunks, "CHUNK", 2)
    hosts = [np.clip(h, 10 * i, 255 - 10 * i).astype(np.uint8)
             for i, h in enumerate(crops(8, 8, 12))]
    ops = [mp.Operation("gaussian", 1.0), mp.Operation("rotate", 3),
           mp.Operation("adjust_gamma", 1.5)]
    want = _run(hosts, ops, 0, processes=False)
    got = _run(hosts, ops, 0, processes=True)
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), f"input {i}"
        assert_same(np.asarray(b), reference(hosts[i], ops, 0, i), err_msg=f"input {i}")


def test_a_failure_among_chunks_in_flight_binds_none(worker, monkeypatch):
    """Chunks of two inputs, up to WINDOW in flight: a fault in the third chunk fails the
    run; its inputs and those of the chunks after it are untouched, each input of the chunks
    before it whole (processed, or untouched where the run stopped before its commit)."""
    monkeypatch.setattr(pipeline_chunks, "CHUNK", 2)
    hosts = crops(8, 8, 12)
    ops = OPS[:2] + [mp.Operation("gaussian", 1.0)]
    imgs = [mp.gpuimage(h) for h in hosts]
    faults.inject("op:gaussian", "raise", at_call=5)
    with pytest.raises(PipelineError, match="failed on input 4 .*device 0"):
        mp.Pipeline(imgs, ops, seed=4, device=0, processes=True).run()
    faults.clear()
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        got = np.asarray(x)
        if i >= 4 or got.tobytes() == h.tobytes():
            np.testing.assert_array_equal(got, h)
        else:
            assert_same(got, reference(h, ops, 4, i))


def test_runs_from_two_threads_share_the_worker(worker):
    hosts = crops(8, 8, 12)
    halves = [[mp.gpuimage(h) for h in hosts[:4]], [mp.gpuimage(h) for h in hosts[4:]]]
    errors = []

    def run(imgs, seed):
        try:
            mp.Pipeline(imgs, OPS, seed=seed, device=0, processes=True).run()
        except BaseException as err:  # (reported by the assertion below)
            errors.append(err)

    threads = [threading.Thread(target=run, args=(imgs, 7 + k))
               for k, imgs in enumerate(halves)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for k, imgs in enumerate(halves):
        for i, x in enumerate(imgs):
            assert_same(np.asarray(x), reference(hosts[4 * k + i], OPS, 7 + k, i))


def test_the_environment_sets_the_default(monkeypatch):
    monkeypatch.setenv("MILLIPYDE_PIPELINE_PROCESSES", "1")
    assert mp.Pipeline([], []).uses_processes()
    assert not mp.Pipeline([], [], processes=False).uses_processes()
    monkeypatch.delenv("MILLIPYDE_PIPELINE_PROCESSES")
    assert not mp.Pipeline([], []).uses_processes()


def test_callables_stay_in_this_process():
    def double(x):
        return x

    st = pipeline_chunks.StageChunks([mp.Operation(double)], 0)
    assert processes.ProcessChunks.of(st) is None
    with pytest.raises(ArgumentError, match="processes must be True, False or None"):
        mp.Pipeline([], [], processes="yes")


def test_a_killed_worker_is_named_and_replaced(worker):
    hosts = crops(4, 8, 12)
    imgs = [mp.gpuimage(h) for h in hosts]
    os.kill(worker, signal.SIGKILL)
    with pytest.raises(PipelineError, match=rf"device 0 \(pid {worker}\) was killed by SIGKILL"):
        mp.Pipeline(imgs, OPS, seed=2, device=0, processes=True).run()
    for x, h in zip(imgs, hosts, strict=True):
        np.testing.assert_array_equal(np.asarray(x), h)
    mp.Pipeline(imgs, OPS, seed=2, device=0, processes=True).run()  # a fresh worker
    assert processes.workers()[0] != worker
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        assert_same(np.asarray(x), reference(h, OPS, 2, i))


def test_close_leaves_no_process_or_thread():
    pids = list(processes.workers().values())
    assert pids
    processes.close()
    assert processes.workers() == {}
    for pid in pids:
        with pytest.raises(ChildProcessError):  # exited and reaped
            os.waitpid(pid, os.WNOHANG)
    wait_for_workers()
    assert not [t for t in threading.enumerate() if t.name.startswith("millipyde-pipeline")]
    processes.start([0])  # (the module's fixture closes it again)


SPREAD = """
import json
import numpy as np
import millipyde as mp
from millipyde.pipeline import processes
from multidevice import crops
ops = [mp.Operation("random_rotate", -20, 20), mp.Operation("fliplr", probability=0.5)]
hosts = crops(12, 8, 12)
out = {}
for flag in (False, True):
    imgs = []
    for i, h in enumerate(hosts):
        with mp.Device(i % 2):
            imgs.append(mp.gpuimage(h))
    mp.Pipeline(imgs, ops, seed=4, processes=flag).run()
    out[flag] = [np.asarray(x).tobytes() for x in imgs]
    devs = [x.device for x in imgs]
pids = processes.workers()
processes.close()
print(json.dumps({"same": out[False] == out[True], "devices": devs, "workers": sorted(pids)}))
"""


def test_two_devices_two_workers(tmp_path):
    res = run_with_devices(SPREAD, 2, tmp_path)
    assert res["same"] and res["workers"] == [0, 1]
    assert res["devices"] == [i % 2 for i in range(12)]


ORPHAN = """
import os
import millipyde as mp
from millipyde.pipeline import processes
processes.start([0])
print(processes.workers()[0], flush=True)
os._exit(0)  # (no atexit: the worker sees its socket close)
"""


def test_a_worker_exits_when_its_parent_goes():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, TESTS])}
    out = subprocess.run([sys.executable, "-c", ORPHAN], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    pid = int(out.stdout.split()[-1])
    end = time.monotonic() + 20
    while time.monotonic() < end and _running(pid):
        time.sleep(0.05)
    assert not _running(pid)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # (a zombie has exited)
    except FileNotFoundError:
        return False


def test_ipc_regions_as_sent_and_the_workers_open_allocations(monkeypatch):
    """The GPU message's encoding without a GPU (the driver calls stood in for): each input's
    allocation once, by its handle's bytes, with its device's identity; the worker opens an
    allocation once, keeps it open while any chunk uses it, and closes the least recently
    used unused ones past its bound."""
    from numba import cuda
    from numba.cuda.cudadrv import driver

    handles = {100: b"a" * 64, 200: b"b" * 64}  # base -> the allocation's handle
    monkeypatch.setattr(processes, "_export", lambda mem: (handles[mem.base], mem.off, 4096))
    monkeypatch.setattr(processes, "_identity", lambda d: {"device": d})
    opened = []

    class Handle:
        def __init__(self, key, size, ident):
            self.key, self.size, self.ident = key, size, ident

        def open(self, ctx):
            opened.append((self.key[:1], self.ident["device"]))
            return self

        def close(self):
            opened.append(("closed", self.key[:1]))

    monkeypatch.setattr(driver.IpcHandle, "_rebuild",
                        classmethod(lambda cls, key, size, ident, off: Handle(key, size, ident)))
    monkeypatch.setattr(cuda, "current_context", lambda: None)
    # devices 0 and 1 are named whatever the machine has (a GPU machine may show one)
    monkeypatch.setattr(processes.runtime, "on_device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(processes, "_OPEN", type(processes._OPEN)())
    monkeypatch.setattr(processes, "_OPEN_BYTES", [0])

    class Buf:  # (what ``add`` reads of a device array)
        def __init__(self, base, off):
            self.gpu_data = self
            self.base, self.off = base, off
            self.shape, self.dtype, self.strides = (2, 3), np.uint8, (3, 1)

    ex = processes.Exports(1)
    ex.host = False
    bufs = [Buf(100, 0), Buf(200, 64), Buf(100, 512)]
    place = ex.add_all(bufs, [1, 0, 1])
    assert place[0] == "each" and place[1].tolist() == [0, 1, 0]
    assert place[2].tolist() == [0, 64, 512] and place[3:] == ((2, 3), np.uint8, (3, 1))
    (kind, keys, sizes, on, idents), = ex.seal()[0]
    assert kind == "ipc"
    assert keys == b"a" * 64 + b"b" * 64 and sizes.tolist() == [4096, 4096]
    assert [idents[i]["device"] for i in on.tolist()] == [1, 0]
    regions = ex.seal()[0]
    first = processes.Opened(regions, [], False, 1)
    second = processes.Opened(regions, [], False, 1)  # (a second chunk queued meanwhile)
    assert opened == [(b"a", 1), (b"b", 0)]  # each allocation opened once
    monkeypatch.setattr(processes, "KEEP_OPEN", 0)
    first.close()
    assert len(processes._OPEN) == 2  # (still used by the second chunk)
    second.close()
    assert processes._OPEN == {} and opened[2:] == [("closed", b"a"), ("closed", b"b")]
