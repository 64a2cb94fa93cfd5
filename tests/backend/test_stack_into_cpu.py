"""``CpuBackend.stack_into``: sources of the stack's shape copied by one concatenation, any
other (flat sources, another dtype, a non-contiguous stack) one assignment each, the same
values either way."""

from __future__ import annotations

import numpy as np

from millipyde.backend.cpu import CpuBackend


def _sources(n: int, shape: tuple[int, ...], dtype: type = np.uint8) -> list[np.ndarray]:
    rng = np.random.default_rng(n)
    return [rng.integers(0, 256, shape).astype(dtype) for _ in range(n)]


def test_stacks_equal_the_members_in_order():
    backend = CpuBackend()
    cases = [
        (_sources(5, (4, 3, 3)), np.empty((5, 4, 3, 3), np.uint8)),  # concatenated
        (_sources(3, (4, 3, 3)), np.zeros((6, 4, 3, 3), np.uint8)),  # a longer stack
        (_sources(4, (6,)), np.empty((4, 6), np.uint8)),  # 1-D members
        (_sources(3, (36,)), np.empty((3, 4, 3, 3), np.uint8)),  # flat members: reshaped
        (_sources(3, (4, 3, 3), np.float32), np.empty((3, 4, 3, 3), np.uint8)),  # cast
        (_sources(3, (2, 3)), np.empty((3, 2, 6), np.uint8)[:, :, ::2]),  # strided stack
    ]
    for sources, dst in cases:
        backend.stack_into(dst, sources)
        want = np.stack([s.reshape(dst.shape[1:]) for s in sources]).astype(dst.dtype)
        np.testing.assert_array_equal(dst[:len(sources)], want)
        if len(dst) > len(sources):
            assert not dst[len(sources):].any(), "rows past the sources were written"
