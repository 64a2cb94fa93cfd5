"""Shared pytest wiring: markers, backend-dependent skips and image sizes.

pytest options (strict markers, warnings-as-errors, timeouts) live in pyproject.toml.
"""

from __future__ import annotations

import os
import sys

import pytest

# make ``tests/reference.py`` importable as ``reference`` from every test folder
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GPU_BACKENDS = ("cuda", "hip")

# (h, w) crops.  CUDASIM runs ~200 us per simulated thread: keep it tiny.
CUDASIM_SIZES = [(1, 1), (1, 7), (7, 1), (17, 23)]
FULL_SIZES = [(1, 1), (1, 7), (7, 1), (97, 131), (256, 320), (512, 512)]


def pytest_configure(config):
    _rotate_gpus(config)
    for line in (
        "gpu: needs a real GPU (backend cuda or hip); skipped otherwise",
        "multigpu: needs at least two real GPUs; skipped otherwise",
        "slow: long-running test",
        "exhaustive: a further case of a check the CI tier makes; runs in make test-full only",
        "cudasim_ok: kernel test cheap enough to also run under CUDASIM",
        # (with pytest 9.2 the mark groups nothing: groups go to xdist by node id, below)
        "xdist_group(name): run on one pytest-xdist worker with the rest of its group",
    ):
        config.addinivalue_line("markers", line)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        # the simulator's block runner: pooled threads, a poller handing the GIL on
        # (simulator_poll.py)
        import simulator_poll

        config.stash[_SIM_POLL] = simulator_poll.install()


_SIM_POLL = pytest.StashKey[bool]()


def _rotate_gpus(config) -> None:
    """With ``MILLIPYDE_TEST_GPUS=n`` (``bench/gpu_suite.py`` sets it on a machine of n > 1
    GPUs), pytest-xdist worker k sees the GPUs in the order k, k+1, ...: its device 0 is
    GPU k mod n, so the workers' one-device tests are spread over the GPUs instead of all
    sharing GPU 0, and every worker still sees every GPU (the multi-GPU tests). Set before
    any test starts CUDA in the worker."""
    n = int(os.environ.get("MILLIPYDE_TEST_GPUS") or 0)
    worker = getattr(config, "workerinput", {}).get("workerid", "")
    if n > 1 and worker.startswith("gw") and "CUDA_VISIBLE_DEVICES" not in os.environ:
        k = int(worker[2:]) % n
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str((k + i) % n) for i in range(n))


def pytest_report_header(config):
    if _SIM_POLL in config.stash:
        return ("CUDA simulator: block runner on pooled threads, yielding the GIL "
                "(tests/simulator_poll.py): "
                + ("yes" if config.stash[_SIM_POLL] else "NO, another numba-cuda's runner"))
    return None


def _backend():
    import millipyde as mp

    return mp.backend()


def _device_count():
    import millipyde as mp

    return mp.get_device_count()


#: Epoch seconds after which no further test starts (``MILLIPYDE_TEST_DEADLINE``; unset: none).
#: ``bench/gpu_suite.py`` sets it so that a device call's run ends with its report (failures'
#: tracebacks, durations) before the call's time limit kills it; the tests it leaves are
#: reported as skipped with :data:`NOT_RUN` as the reason, never as passed.
DEADLINE = float(os.environ.get("MILLIPYDE_TEST_DEADLINE") or 0)
NOT_RUN = "not run: the run's deadline (MILLIPYDE_TEST_DEADLINE) had passed"


def pytest_runtest_setup(item):
    if DEADLINE:
        import time

        if time.time() > DEADLINE:
            pytest.skip(NOT_RUN)
    # each test's Generators record their own templates, whatever tests ran before in the
    # worker (Generators of one chain share them in a process: ``template_share``)
    share = sys.modules.get("millipyde.training.template_share")
    if share is not None:
        share.clear()
    if item.get_closest_marker("gpu") or item.get_closest_marker("multigpu"):
        backend = _backend()
        if backend not in GPU_BACKENDS:
            pytest.skip(f"needs a real GPU: millipyde backend is {backend!r}, "
                        f"not one of {GPU_BACKENDS}")
    if item.get_closest_marker("multigpu"):
        n = _device_count()
        if n < 2:
            pytest.skip(f"needs at least 2 GPUs: {n} usable device(s)")


# Test modules whose tests must share one pytest-xdist worker (``make test`` runs ``--dist
# loadgroup``): each builds a costly module-scoped fixture that a second worker would build
# again.
ONE_WORKER = {
    "test_distributed.py": "dask_cluster",  # a LocalCluster of 2 worker processes
}

# Test modules whose tests compile the same generated kernels (the batch paths and their eager
# references; almost all of their time is Numba compiling). On one worker each kernel compiles
# once and the rest load it; handed out test by test, the two workers run neighbouring tests at
# once and both compile the kernels they share, neither finding them in the disk cache yet
# (14% of these modules' compile seconds, bench/RESULTS.md "CI time: xdist groups that group
# again", 2026-11-23).
SHARED_KERNELS = (
    "tests/graph/exec/test_batch.py",
    "tests/graph/exec/test_batch_gates.py",
    "tests/graph/codegen/test_batch_gather.py",
    "tests/test_batch_record.py",
    "tests/test_generator_batches_ops.py",
    "tests/test_generator_ops_batched.py",
    # the RandAugment / TrivialAugmentWide batches: the torchvision-recipe tests record the
    # same structures as the batch-equality test (0 compiles after it on one worker; 75 CPU-s
    # when the two ran at once on CI's two workers, 2026-11-28)
    "tests/test_policies.py",
)


def xdist_group(nodeid: str) -> str | None:
    """The worker group of the test ``nodeid`` (relative to the repository root); None: any
    worker."""
    path = nodeid.split("::", 1)[0]
    group = ONE_WORKER.get(path.rsplit("/", 1)[-1])
    return group if group is not None else (path if path in SHARED_KERNELS else None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    # The groups are given to xdist's loadgroup scheduler here, by node id, not as xdist_group
    # marks: pytest-xdist 3.8 passes a mark on by appending it to the node id, which pytest 9.2
    # no longer lets it change, so marked tests are spread over the workers like any other
    # (pytest-xdist issue 1386). xdist hands out the groups before single tests, largest first.
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ByGroup(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = xdist_group(nodeid)
            return group if group is not None else super()._split_scope(nodeid)

    return ByGroup(config, log)


def pytest_collection_modifyitems(config, items):
    # xdist hands tests out in this order as workers free up: the long ones first (the
    # subprocess compiles marked slow, then the PTX compiles, up to a minute or two each on CI's
    # two cores), so that the last tests handed out are short ones and no worker waits alone on
    # a long test at the end.
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None,
                                 item.get_closest_marker("ptx") is None))


def image_sizes():
    """Image sizes for kernel tests, depending on the active backend."""
    if _backend() == "cudasim":
        return list(CUDASIM_SIZES)
    return list(FULL_SIZES)


def pytest_generate_tests(metafunc):
    # ``size`` is parametrized at collection time so each size is its own test id.
    if "size" in metafunc.fixturenames:
        sizes = image_sizes()
        metafunc.parametrize("size", sizes, ids=[f"{h}x{w}" for h, w in sizes],
                             indirect=True)


@pytest.fixture
def size(request):
    """(h, w) of the test image; small crops under CUDASIM, real-photo sizes otherwise."""
    return request.param
