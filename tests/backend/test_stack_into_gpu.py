"""``CudaBackend.stack_into`` on a GPU: a Pipeline chunk's inputs stacked by one kernel over a
table of addresses (every source on the stack's device) or by one batch of driver copies
(sources on other devices), byte for byte."""

from __future__ import annotations

import numpy as np
import pytest

from millipyde.backend import ACTIVE as runtime
from millipyde.backend import cuda_memory


def _sources(n: int, shape: tuple[int, ...], device: int, seed: int) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    host = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(n)]
    return host, [runtime.from_host(h, device) for h in host]


def _stacked(sources: list, shape: tuple[int, ...], device: int | None, extra: int = 0):
    stack = runtime.empty((len(sources) + extra, *shape), np.uint8, 0)
    with runtime.on_device(0):
        stream = runtime.new_stream(0)
        runtime.stack_into(stack, sources, stream, device=device)
        stream.synchronize()
    return runtime.to_host(stack)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(512, 512, 3), (33, 17, 4), (3, 5, 3)])
def test_one_kernel_stacks_inputs_of_its_device(shape):
    host, bufs = _sources(37, shape, 0, seed=1)
    got = _stacked(bufs, shape, device=0, extra=3)  # a stack longer than its inputs
    np.testing.assert_array_equal(got[:37], np.stack(host))
    if (np.prod(shape) % 4) == 0:
        assert cuda_memory._STACK, "the kernel path was not taken"


@pytest.mark.gpu
def test_batched_copies_stack_inputs_without_a_device():
    host, bufs = _sources(20, (64, 48, 3), 0, seed=2)
    np.testing.assert_array_equal(_stacked(bufs, (64, 48, 3), device=None), np.stack(host))


@pytest.mark.multigpu
def test_inputs_of_another_device_come_by_peer_copies():
    host, bufs = _sources(9, (128, 96, 3), 1, seed=3)
    np.testing.assert_array_equal(_stacked(bufs, (128, 96, 3), device=None), np.stack(host))


@pytest.mark.multigpu
def test_one_kernel_reads_inputs_of_a_peer_device(monkeypatch):
    from millipyde import devices

    if not devices.can_peer(0, 1):
        pytest.skip("device 0 has no peer access to device 1")
    host, bufs = _sources(11, (64, 40, 3), 1, seed=4)

    def no_copies(*args, **kwargs):
        raise AssertionError("peer copies taken where the stack kernel reads by peer access")

    monkeypatch.setattr(runtime, "copy_addresses", no_copies)
    np.testing.assert_array_equal(_stacked(bufs, (64, 40, 3), device=0), np.stack(host))
