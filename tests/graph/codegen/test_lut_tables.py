"""``codegen.lut.compose_tables`` of a chain of one op: its one compiled call (``tables``)
against the op's row pass (``apply`` over rows of 0 .. 255, then the cast), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from tiers import tiered

import millipyde.ops  # noqa: F401  (registers the built-in kernels)
from millipyde.graph.codegen import lut


def _by_rows(name: str, params: np.ndarray, stats: np.ndarray, channels: int,
             full: float) -> np.ndarray:
    """The tables as the row pass makes them (``compose_tables``' steps for any chain)."""
    n, nc = params.shape[0], min(channels, 3)
    vals = np.empty((n * nc, 256), dtype=np.float64)
    vals[:] = np.arange(256, dtype=np.float64)
    chan = np.tile(np.arange(nc, dtype=np.int64), n)
    p = np.ascontiguousarray(np.repeat(params[:, 0, :3], nc, axis=0), dtype=np.float64)
    lut.table_pass(name)(vals, chan, p, stats, full)
    out = np.empty((n, channels, 256), dtype=np.uint8)
    out[:, :nc] = vals.reshape(n, nc, 256)
    out[:, nc:] = np.arange(256).astype(np.uint8)
    return out


CASES = tiered([("brightness_contrast", 3), ("colorize", 4), ("adjust_contrast", 1),
                ("adjust_gamma", 3)], [0, 1, 2], several=True)


@pytest.mark.parametrize(("name", "channels"), CASES)
def test_one_op_tables_equal_the_row_pass(name: str, channels: int) -> None:
    rng = np.random.default_rng(7)
    n = 37
    params = rng.uniform(-1.5, 2.5, (n, 1, 3))
    params[:4] = [[[0.0, 0.0, 0.0]], [[1.0, 1.0, 0.0]], [[-0.0, 1e300, 0.0]],
                  [[np.inf, -np.inf, 0.0]]]
    if name == "adjust_contrast":  # (a statistic op: its row's offset in the third slot)
        params[:, 0, 2] = 0.0
    stats = rng.uniform(0, 255 * 64, 4)
    want = _by_rows(name, params, stats, channels, 255.0)
    got = np.full((n, channels, 256), 7, dtype=np.uint8)
    lut.compose_tables([name], params, stats, channels, 255.0, got)
    np.testing.assert_array_equal(got, want)
    # float32 parameters are taken as float64, as the row pass takes them
    p32 = params[4:].astype(np.float32)
    got32 = np.empty_like(got[4:])
    lut.compose_tables([name], p32, stats, channels, 255.0, got32)
    np.testing.assert_array_equal(got32, _by_rows(name, p32, stats, channels, 255.0))
