"""Small uploads through the pinned staging ring (``backend/staging.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from millipyde.backend import ACTIVE as runtime


@pytest.mark.gpu
def test_more_uploads_than_slots_all_arrive_intact():
    if not getattr(runtime, "staged_uploads", False):
        pytest.skip("this backend copies small arrays directly")
    ring_slots = runtime._ring(0).slots
    rng = np.random.default_rng(0)
    hosts = [rng.integers(0, 256, (2, 3, 256), dtype=np.uint8) for _ in range(3 * ring_slots)]
    devs = [runtime.upload_small(h, 0) for h in hosts]
    for h, d in zip(hosts, devs, strict=True):
        np.testing.assert_array_equal(runtime.to_host(d), h)


@pytest.mark.gpu
def test_the_host_array_may_change_once_upload_returns():
    a = np.arange(1000, dtype=np.float64)
    d = runtime.upload_small(a, 0)
    a[:] = -1.0  # the staged bytes, not this buffer, feed the copy
    np.testing.assert_array_equal(runtime.to_host(d), np.arange(1000, dtype=np.float64))


@pytest.mark.gpu
def test_uploads_on_a_worker_stream_are_ordered_before_its_reads():
    stream = runtime.new_stream(0)
    with runtime.using_stream(stream):
        vals = [np.full(4096, i, dtype=np.float32) for i in range(200)]
        devs = [runtime.upload_small(v, 0) for v in vals]
        got = [runtime.to_host(d) for d in devs]
    for v, g in zip(vals, got, strict=True):
        np.testing.assert_array_equal(g, v)


@pytest.mark.gpu
def test_arrays_over_a_slot_go_the_direct_way():
    big = np.arange(runtime.SMALL_MAX // 8 + 100, dtype=np.float64)
    np.testing.assert_array_equal(runtime.to_host(runtime.upload_small(big, 0)), big)
