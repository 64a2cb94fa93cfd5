"""Streams read and decoded in a worker process (``millipyde.data.process``), on the cpu
backend (shared host memory): the same batches, labels, refills, warnings and errors as in
this process, slots recycled, failures loud, no process left behind.

Tiny images; each test starts one or two worker processes (a Python start each). With
``MILLIPYDE_BACKEND=cuda`` on a GPU the same tests take the CUDA IPC path.
"""

from __future__ import annotations

import os
import signal
import warnings

import numpy as np
import pytest
from test_data_generator import BAD, OPS, _bad_tree, _epoch, _tree

import millipyde as mp
from millipyde.data import BadSampleError, DecodeWorkerError, fileread, process

pytestmark = pytest.mark.skipif(not process.supported(), reason="no memfd / fd passing here")


def _run(gen, size, epochs):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with gen.batches(size, epochs=epochs, with_indices=True, with_labels=True) as bs:
            out = [(np.asarray(x), s.copy(), np.asarray(y)) for x, _, s, y in bs]
            loader = bs._loader
    msgs = [str(w.message) for w in got if issubclass(w.category, UserWarning)]
    return out, msgs, loader


def test_worker_batches_equal_in_process_and_slots_recycle(tmp_path, monkeypatch) -> None:
    root, _ = _bad_tree(tmp_path / "bad")
    # two slots for 12 batches: each batch's slot must come back once its arrays are gone
    monkeypatch.setattr(process, "MAX_SLOTS", 2)
    mine = mp.Generator(root, OPS, shuffle=True, seed=3, rank=1, world_size=2,
                        decode_process=True)
    here = mp.Generator(root, OPS, shuffle=True, seed=3, rank=1, world_size=2,
                        decode_process=False)
    a, msgs_a, loader = _run(mine, 2, 4)
    b, msgs_b, _ = _run(here, 2, 4)
    assert isinstance(loader, process.ProcessLoader)
    assert loader._proc.returncode is not None  # closed with its batches: the worker ended
    assert loader.reader.nogil_reads is fileread.available()  # runs read without the GIL
    # the worker's Loader's times come over, the first decode call kept apart in them
    st = loader.stats
    assert st["batches"] >= 12 and 0.0 < st["decode_first_s"] <= st["decode_s"]
    assert len(a) == len(b) == 12
    for (x, s, y), (x2, s2, y2) in zip(a, b, strict=True):
        assert np.array_equal(x, x2) and np.array_equal(s, s2) and np.array_equal(y, y2)
        assert np.array_equal(y, mine.labels[s])
    assert sorted(msgs_a) == sorted(msgs_b)
    met = {name for name in BAD for m in msgs_a if name in m}
    assert met and all(sum(name in m for m in msgs_a) == 1 for name in met)
    assert mine.bad_samples.names == here.bad_samples.names
    assert mine.bad_samples.skipped == here.bad_samples.skipped
    mine.close()
    here.close()


def test_worker_resumes_as_the_uninterrupted_stream_and_strict_raises(tmp_path) -> None:
    tree = _tree(tmp_path / "t")

    def stream(worker):
        return mp.Generator(tree, OPS, shuffle=True, seed=9, decode_process=worker).batches(
            3, with_labels=True, epochs=2)

    with stream(False) as whole:
        full = [(np.asarray(x), np.asarray(y)) for x, y in whole]
    with stream(False) as first:
        for _ in range(3):
            next(first)
        saved = first.state_dict()
    with stream(True) as rest:
        rest.load_state_dict(saved)
        tail = [(np.asarray(x), np.asarray(y)) for x, y in rest]
    assert len(tail) == len(full) - 3
    for (x, y), (x2, y2) in zip(full[3:], tail, strict=True):
        assert np.array_equal(x, x2) and np.array_equal(y, y2)
    root, _ = _bad_tree(tmp_path / "bad")
    strict = mp.Generator(root, OPS, seed=0, strict=True, decode_process=True)
    with pytest.raises(BadSampleError, match="corrupt.jpg|cut.png|zero.jpg"):
        _epoch(strict, 0, size=4)
    strict.close()


def test_a_dead_worker_raises_naming_stream_and_worker_and_next_works(tmp_path) -> None:
    root = _tree(tmp_path / "p", classes=1, per=3)
    paths = sorted(root.rglob("*.jpg")) + [root / "missing.jpg"]
    # next() (chunks of outputs) through a worker: the missing file refilled as in-process
    gen = mp.Generator(mp.data.Paths(paths, labels=[5, 6, 7, 8]), [mp.Operation("fliplr")],
                       outputs=4, return_to_host=True, seed=0, decode_process=True)
    with pytest.warns(UserWarning, match="missing.jpg"):
        outs = list(gen)
    assert len(outs) == 4 and np.array_equal(outs[3], outs[0])
    gen.close()
    gen = mp.Generator(root, [mp.Operation("fliplr")], seed=0, decode_process=True)
    bs = gen.batches(1)
    next(bs)
    proc = bs._loader._proc
    os.kill(proc.pid, signal.SIGKILL)
    with pytest.raises(Exception, match=rf"decode worker pid {proc.pid} of stream .*"
                                        r"Folder.* was killed by SIGKILL") as got:
        for _ in range(8):  # batches decoded before the kill may still come
            next(bs)
    assert isinstance(got.value, DecodeWorkerError) or \
        isinstance(got.value.__cause__, DecodeWorkerError)
    bs.close()
    gen.close()
    assert proc.poll() is not None


def test_decode_process_choice() -> None:
    assert process.use_process(False) is False
    assert process.use_process(True) is True  # the cpu backend can
    os.environ["MILLIPYDE_DECODE_PROCESS"] = "1"
    try:
        assert process.use_process(None) is True
        os.environ["MILLIPYDE_DECODE_PROCESS"] = "maybe"
        with pytest.raises(ValueError, match="MILLIPYDE_DECODE_PROCESS"):
            process.use_process(None)
    finally:
        del os.environ["MILLIPYDE_DECODE_PROCESS"]
    # the default, "auto": a worker on a GPU, for an epoch long enough to pay for its start
    gpu = mp.backend() == "cuda"
    assert process.use_process(None) is gpu
    assert process.use_process(None, samples=process.AUTO_SAMPLES) is gpu
    assert process.use_process(None, samples=process.AUTO_SAMPLES - 1) is False
    assert process.use_process("auto") is gpu
    with pytest.raises(ValueError, match="decode_process"):
        mp.Generator(["a.jpg"], OPS, decode_process="yes")




def test_a_source_that_does_not_pickle_is_named(tmp_path) -> None:
    root = _tree(tmp_path / "p", classes=1, per=2)

    class Unsent(mp.data.Folder):
        pass

    gen = mp.Generator(Unsent(root), OPS, seed=0, decode_process=True)
    with pytest.raises(DecodeWorkerError, match="cannot be sent to a process.*"
                                                "decode_process=False"):
        next(gen.batches(2))
    gen.close()


class _NotRebuilt(mp.data.Folder):
    """Pickles here; the worker cannot rebuild it (its module is not on the worker's path, or
    its state refuses)."""

    def __setstate__(self, state):
        raise RuntimeError("not in another process")


def test_a_worker_that_cannot_rebuild_the_source_says_so(tmp_path) -> None:
    root = _tree(tmp_path / "p", classes=1, per=2)
    gen = mp.Generator(_NotRebuilt(root), OPS, seed=0, decode_process=True)
    bs = gen.batches(2)
    with pytest.raises(Exception, match="could not rebuild the source") as got:
        next(bs)
    err = got.value if isinstance(got.value, DecodeWorkerError) else got.value.__cause__
    assert isinstance(err, DecodeWorkerError) and "decode worker pid" in str(err)
    proc = bs._loader._proc
    bs.close()
    gen.close()
    assert proc.poll() is not None


def test_worker_reads_files_as_the_training_process_says(tmp_path, monkeypatch) -> None:
    # fileread.ENABLED off in this process: the worker reads each file by Python too
    _tree(tmp_path)
    monkeypatch.setattr(fileread, "ENABLED", False)
    gen = mp.Generator(tmp_path, OPS, seed=0, decode_process=True)
    _, _, loader = _run(gen, 4, 1)
    assert isinstance(loader, process.ProcessLoader) and loader.reader.nogil_reads is False
    gen.close()


def test_worker_decodes_in_the_passes_the_training_process_says(tmp_path, monkeypatch) -> None:
    # decode.ONE_PASS off in this process: the worker is told so with the other decode settings
    from millipyde.data import decode

    _tree(tmp_path)
    sent: list[dict] = []
    dumps = process.pickle.dumps
    monkeypatch.setattr(process.pickle, "dumps",
                        lambda obj, *a, **k: (sent.append(obj) if isinstance(obj, dict) and
                                              "regions_in_decode" in obj else None,
                                              dumps(obj, *a, **k))[1])
    monkeypatch.setattr(decode, "ONE_PASS", False)  # (on: the default)
    gen = mp.Generator(tmp_path, OPS, seed=0, decode_process=True)
    _, _, loader = _run(gen, 4, 1)
    assert isinstance(loader, process.ProcessLoader)
    gen.close()
    assert sent and sent[-1]["one_pass"] is False


def test_shards_read_natively_in_the_worker_as_in_process(tmp_path) -> None:
    import io
    import tarfile

    root, _ = _bad_tree(tmp_path / "bad")
    folder = mp.data.Folder(root)
    shard = tmp_path / "train-0.tar"
    with tarfile.open(shard, "w") as tf:  # the bad files too: bad members, named once
        for i, p in enumerate(folder.paths):
            tf.add(p, arcname=f"{i:04d}{p.suffix}")
            cls = str(int(folder.labels[i])).encode()
            ti = tarfile.TarInfo(f"{i:04d}.cls")
            ti.size = len(cls)
            tf.addfile(ti, io.BytesIO(cls))
    mine = mp.Generator(str(shard), OPS, shuffle=True, seed=3, decode_process=True)
    here = mp.Generator(str(shard), OPS, shuffle=True, seed=3, decode_process=False)
    a, msgs_a, loader = _run(mine, 2, 2)
    b, msgs_b, here_loader = _run(here, 2, 2)
    assert isinstance(loader, process.ProcessLoader)
    # the worker's read-ahead read runs of members without the GIL, as this process's did
    assert loader.reader.nogil_reads is fileread.available()
    assert here_loader.reader.nogil_reads is fileread.available()
    assert len(a) == len(b) > 0
    for (x, s, y), (x2, s2, y2) in zip(a, b, strict=True):
        assert np.array_equal(x, x2) and np.array_equal(s, s2) and np.array_equal(y, y2)
        assert np.array_equal(y, folder.labels[s])
    assert msgs_a and sorted(msgs_a) == sorted(msgs_b)
    assert mine.bad_samples.names == here.bad_samples.names and mine.bad_samples.names
    mine.close()
    here.close()
