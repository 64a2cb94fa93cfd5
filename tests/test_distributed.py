"""``millipyde.distributed``: process() and Generator(client=) on a LocalCluster of 2 processes.

One cluster serves the module. A worker plugin counts every file a worker publishes (each
``os.replace`` into ``out_dir``), so "written exactly once" is counted, not inferred. Outputs
are compared with single-process Pipelines and Generators made here, on the same backend.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("distributed")

import cloudpickle  # noqa: E402  (a dependency of distributed)
from distributed import Client, LocalCluster  # noqa: E402
from distributed.diagnostics.plugin import WorkerPlugin  # noqa: E402

import millipyde as mp  # noqa: E402
from millipyde import cli  # noqa: E402
from millipyde import distributed as md  # noqa: E402

# The workers cannot import this file by name: send its functions and classes by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SEED = 11


def ops_uint8() -> list:
    """Random operations that keep uint8 images uint8 (so PNG holds them exactly)."""
    return [mp.Operation("fliplr", probability=0.5), mp.Operation("random_brightness", -0.2, 0.2),
            mp.Operation("random_rotate", -30, 30), mp.Operation("random_gaussian", 0, 1.5)]


class CountWrites(WorkerPlugin):
    """Log the path of every file a worker publishes (wraps ``_commit``, re-applied on restart)."""

    def __init__(self, log: str) -> None:
        self.log = log

    def setup(self, worker) -> None:
        from millipyde.distributed import tasks

        if getattr(tasks._commit, "counted", False):
            return
        original, log = tasks._commit, self.log

        def commit(tmp: str, final: str) -> None:
            original(tmp, final)
            with open(log, "a") as fh:
                fh.write(final + "\n")

        commit.counted = True
        tasks._commit = commit


def die_once(img, marker: str, sample: int) -> None:
    """Kill this Dask worker process at ``sample``, once (a no-op outside a worker)."""
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return
    if mp.random.current_key().sample != sample:
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # the workers share this process's kernel disk cache instead of compiling again
    os.environ.setdefault("MILLIPYDE_CACHE_DIR", str(Path.home() / ".cache" / "millipyde"))
    log = tmp_path_factory.mktemp("writes") / "writes.log"
    log.touch()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as lc, \
            Client(lc) as client:
        client.register_plugin(CountWrites(str(log)))
        yield client, log


def writes(log: Path, out: Path) -> list[str]:
    """Names published into ``out`` so far, one entry per write."""
    return [Path(line).name for line in log.read_text().splitlines()
            if Path(line).parent == out]


def make_images(d: Path, colour: int, grey: int) -> Path:
    """``colour`` 16x20 RGB files then ``grey`` 12x14 grey ones, random pixels."""
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    for i in range(colour):
        Image.fromarray(rng.integers(0, 256, (16, 20, 3), dtype=np.uint8)).save(d / f"a{i:03d}.png")
    for i in range(grey):
        Image.fromarray(rng.integers(0, 256, (12, 14), dtype=np.uint8)).save(d / f"b{i:03d}.png")
    return d


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    return make_images(tmp_path_factory.mktemp("src"), 180, 20)


def pipeline_reference(src: Path, ops: list, seed: int) -> list[np.ndarray]:
    images = mp.images_from_path(src)
    mp.Pipeline(images, ops, seed=seed).run()
    return [np.asarray(x) for x in images]


def read(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path)
    if path.suffix == ".tiff":
        import tifffile

        return tifffile.imread(path)
    with Image.open(path) as im:
        return np.asarray(im)


def test_workers_run_this_millipyde(cluster) -> None:
    client, _ = cluster
    files = client.run(lambda: __import__("millipyde").__file__)
    assert set(files.values()) == {mp.__file__}


def test_pipeline_mode_writes_each_file_once_equal_to_a_pipeline(cluster, src, tmp_path) -> None:
    client, log = cluster
    out = tmp_path / "out"
    paths = md.process(src, ops_uint8(), out, seed=SEED, client=client)
    names = [p.name for p in sorted(src.iterdir())]
    assert [p.name for p in paths] == names  # <stem>.png, in input order
    assert sorted(writes(log, out)) == sorted(names)  # every file exactly once
    for p, ref in zip(paths, pipeline_reference(src, ops_uint8(), SEED), strict=True):
        got = read(p)
        assert got.dtype == ref.dtype and np.array_equal(got, ref), p.name
    stamps = {p: p.stat().st_mtime_ns for p in paths}
    again = md.process(src, ops_uint8(), out, seed=SEED, client=client)
    assert again == paths
    assert len(writes(log, out)) == len(names)  # the re-run wrote nothing
    assert {p: p.stat().st_mtime_ns for p in paths} == stamps


@pytest.mark.parametrize("uniform", [True, False], ids=["batched", "per-output"])
def test_generator_mode_writes_each_output_once_equal_to_a_generator(cluster, src, tmp_path,
                                                                      uniform) -> None:
    client, log = cluster
    out = tmp_path / "gen"
    # one shape: the Generator batches its outputs, and so do the tasks; mixed: per output
    files = sorted(src.iterdir())[:180] if uniform else src
    ops = cli.figure_5_1_operations()  # float greyscale and uint8 colour outputs: npy
    paths = md.process(files, ops, out, outputs=230, seed=SEED, client=client, fmt="npy")
    assert [p.name for p in paths] == [f"{k:06d}.npy" for k in range(230)]
    assert sorted(writes(log, out)) == [p.name for p in paths]
    inputs = [mp.image_from_path(p) for p in files] if uniform else mp.images_from_path(src)
    gen = mp.Generator(inputs, ops, outputs=230, seed=SEED, return_to_host=True)
    assert (gen._state.batch > 1) == uniform
    refs = list(gen)
    kinds = set()
    for p, ref in zip(paths, refs, strict=True):
        got = read(p)
        kinds.add(got.dtype.kind)
        assert got.dtype == ref.dtype and np.array_equal(got, ref), p.name
    assert kinds == {"u", "f"}
    # a resumed run makes only what is missing (whole batches computed, missing files written)
    for k in (3, 64, 65, 229):
        paths[k].unlink()
    md.process(files, ops, out, outputs=230, seed=SEED, client=client, fmt="npy")
    assert sorted(writes(log, out)) == sorted([p.name for p in paths] +
                                              [paths[k].name for k in (3, 64, 65, 229)])
    for k in (3, 64, 65, 229):
        assert np.array_equal(read(paths[k]), refs[k])


def test_generator_with_client_yields_the_single_process_outputs(cluster, src) -> None:
    client, _ = cluster
    ops = cli.figure_5_1_operations()
    ref = list(mp.Generator(src, ops, outputs=70, seed=SEED, return_to_host=True))
    got = list(mp.Generator(src, ops, outputs=70, seed=SEED, client=client))
    assert len(got) == 70
    for k, (a, b) in enumerate(zip(got, ref, strict=True)):
        assert a.dtype == b.dtype and np.array_equal(a, b), k
    # gpuarray inputs (one shape: batched outputs) are scattered to the workers
    images = mp.images_from_path(src)[100:120]
    ref = list(mp.Generator(images, ops, outputs=25, seed=SEED, return_to_host=True))
    with mp.Generator(images, ops, outputs=25, seed=SEED, client=client) as g:
        assert g._state.batch > 1
        got = list(g)
    assert all(np.array_equal(a, b) for a, b in zip(got, ref, strict=True)) and len(got) == 25


def test_chaos_a_killed_worker_leaves_every_file_once_and_no_temporary(cluster, src,
                                                                       tmp_path) -> None:
    client, log = cluster
    out = tmp_path / "chaos"
    marker = tmp_path / "killed"
    files = sorted(src.iterdir())[:180]  # batched Generator semantics
    ops = ops_uint8()
    ops.insert(2, mp.Operation(die_once, str(marker), 150))
    paths = md.process(files, ops, out, outputs=200, seed=SEED, client=client)
    assert marker.exists()  # a worker did die in the middle of the run
    names = [p.name for p in paths]
    assert sorted(writes(log, out)) == names  # each file exactly once
    assert sorted(p.name for p in out.iterdir()) == sorted(names + [md.MANIFEST])  # no temps
    refs = mp.Generator([mp.image_from_path(p) for p in files], ops, outputs=200, seed=SEED,
                        return_to_host=True)
    for p, ref in zip(paths, refs, strict=True):
        assert np.array_equal(read(p), ref), p.name
    md.process(files, ops, out, outputs=200, seed=SEED, client=client)
    assert len(writes(log, out)) == len(names)


def test_a_bad_file_is_named_and_every_other_output_written(cluster, tmp_path) -> None:
    client, log = cluster
    d = make_images(tmp_path / "src", 30, 0)
    (d / "a015.png").write_bytes(b"not a png at all")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="a015.png"):
        md.process(d, ops_uint8(), out, seed=SEED, client=client)
    expected = sorted(f"a{i:03d}.png" for i in range(30) if i != 15)
    assert sorted(p.name for p in out.glob("*.png")) == expected
    assert sorted(writes(log, out)) == expected


def fail_at(img, sample: int) -> None:
    """Raise on one sample (the others pass unchanged)."""
    if mp.random.current_key().sample == sample:
        raise RuntimeError("boom")


def test_an_operation_failing_on_one_output_names_it_and_writes_the_others(cluster,
                                                                           tmp_path) -> None:
    client, log = cluster
    d = make_images(tmp_path / "src", 12, 0)
    out = tmp_path / "out"
    ops = [mp.Operation(fail_at, 5)] + ops_uint8()
    with pytest.raises(mp.pipeline.PipelineError, match=r"output 5 .*a005.png.*boom"):
        md.process(d, ops, out, seed=SEED, client=client)
    assert sorted(writes(log, out)) == sorted(f"a{i:03d}.png" for i in range(12) if i != 5)


def test_a_different_run_refuses_unless_overwrite(cluster, tmp_path) -> None:
    client, log = cluster
    d = make_images(tmp_path / "src", 12, 0)
    out = tmp_path / "out"
    md.process(d, ops_uint8(), out, seed=1, client=client)
    with pytest.raises(ValueError, match="seed: was 1, now 2"):
        md.process(d, ops_uint8(), out, seed=2, client=client)
    with pytest.raises(ValueError, match="overwrite=True"):
        md.process(d, ops_uint8()[:2], out, seed=1, client=client)
    paths = md.process(d, ops_uint8(), out, seed=2, client=client, overwrite=True)
    assert len(writes(log, out)) == 24
    for p, ref in zip(paths, pipeline_reference(d, ops_uint8(), 2), strict=True):
        assert np.array_equal(read(p), ref)


def test_formats_hold_outputs_exactly_or_refuse(cluster, tmp_path) -> None:
    client, _ = cluster
    d = make_images(tmp_path / "src", 6, 0)
    grey = [mp.Operation("rgb2grey"), mp.Operation("random_rotate", -10, 10)]
    with pytest.raises(ValueError, match="fmt='png' cannot hold.*float64.*npy"):
        md.process(d, grey, tmp_path / "png", seed=SEED, client=client)
    paths = md.process(d, grey, tmp_path / "tiff", seed=SEED, client=client, fmt="tiff")
    for p, ref in zip(paths, pipeline_reference(d, grey, SEED), strict=True):
        got = read(p)
        assert got.dtype == np.float64 and np.array_equal(got, ref)
    with pytest.raises(ValueError, match="fmt must be one of"):
        md.process(d, grey, tmp_path / "x", client=client, fmt="bmp")


def test_two_inputs_with_one_stem_refuse_before_any_work(cluster, tmp_path) -> None:
    client, log = cluster
    a = make_images(tmp_path / "a", 2, 0)
    b = make_images(tmp_path / "b", 1, 0)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="a000.png"):
        md.process([a / "a000.png", a / "a001.png", b / "a000.png"], ops_uint8(), out,
                   client=client)
    assert not out.exists() or not any(out.iterdir())
    assert writes(log, out) == []


def test_numpy_integer_outputs_and_16_bit_inputs_on_the_cluster(cluster, tmp_path) -> None:
    """Issue 32: ``process(outputs=np.int64(2))`` was refused (Generator accepts it), and a
    16-bit PNG at 30000 was written (``augment --cluster``: ``to_uint8``) as 255 everywhere."""
    client, _ = cluster
    d = tmp_path / "deep"
    d.mkdir()
    Image.fromarray(np.full((6, 7), 30000, np.uint16)).save(d / "deep.png")
    paths, _ = md.run_files(d, [mp.Operation("fliplr")], tmp_path / "out",
                            outputs=np.int64(2), seed=SEED, client=client, to_uint8=True)
    assert [p.name for p in paths] == ["000000.png", "000001.png"]
    for p in paths:
        got = read(p)
        assert got.dtype == np.uint8 and (got == 117).all(), np.unique(got)


# (~55 CPU-s: the CLI's local run, then two fresh worker processes; the CI tier's cluster runs
# are process()'s on the module's cluster above)
@pytest.mark.exhaustive
def test_cli_augment_on_a_local_cluster_writes_the_local_images(tmp_path) -> None:
    # (6 outputs: each coin pattern of the recipe a kernel the workers compile or load)
    d = make_images(tmp_path / "src", 4, 2)
    assert cli.main(["augment", str(d), "-o", str(tmp_path / "local"), "-n", "6", "--seed",
                     "3", "-q"]) == 0
    assert cli.main(["augment", str(d), "-o", str(tmp_path / "dist"), "-n", "6", "--seed",
                     "3", "-q", "--cluster", "local:2"]) == 0
    for k in range(6):
        assert np.array_equal(read(tmp_path / "dist" / f"{k:06d}.png"),
                              read(tmp_path / "local" / f"aug_{k}.png")), k  # (as wide as n - 1)
    assert (tmp_path / "dist" / "contact_sheet.png").exists()


def test_a_bad_cluster_address_names_the_form() -> None:
    with pytest.raises(ValueError, match="local:WORKERS"):
        with md.cluster_client("local:zero"):
            pass


def test_millipyde_imports_without_dask() -> None:
    code = ("import sys; sys.modules['dask'] = sys.modules['distributed'] = None; "
            "import millipyde; print(millipyde.Generator.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(mp.__file__).parents[1])},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Generator"


def test_pinned_cluster_gives_each_worker_its_own_device_first() -> None:
    var = "MILLIPYDE_TEST_VISIBLE"
    with md.pinned_cluster(["4", "7"], 2, 1, var) as lc, Client(lc) as client:
        seen = client.run(lambda: os.environ.get("MILLIPYDE_TEST_VISIBLE"))
    assert sorted(seen.values()) == ["4,7", "7,4"]
    with pytest.raises(ValueError, match="between 1 and 2"):
        md.pinned_cluster(["4", "7"], 3, 1, var)
