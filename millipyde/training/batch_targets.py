"""Targets of ``Generator.batches(with_targets=True)``: per sample, its boxes, keypoints, mask.

The batch path records no graph per output, so nothing carries a sample's targets (see
``millipyde.targets``). Here each sample whose input has targets is recorded once more on a lazy
clone of its input, by the Generator's own recording (``workers.record_operations``: the same
draws for the same seed and output index), and the clone's targets are read; the clone is
never materialized, so no kernel runs. A batch resized to ``shape`` moves them once more, by
the batch conversion's resize map (``kernels.convert.resize_map``). Inputs without targets
give ``None``.

Only method Operations record without side effects, so Generators with callable Operations
refuse ``with_targets`` (:func:`check_operations`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import targets
from ..kernels import OpSpec
from ..kernels.convert import resize_map
from ..workers import record_operations

#: the batch's resize to ``shape`` as a sampler (not a registered op: targets read its map)
_BATCH_RESIZE = OpSpec("batch_resize", "sampler", resize_map, 2, mode="edge")


def check_operations(operations: Sequence[Any]) -> None:
    """ValueError naming ``with_targets`` when an Operation is a Python callable."""
    for op in operations:
        if op.method is None:
            raise ValueError(
                f"with_targets: operation {op.name!r} is a callable; batch targets follow "
                "method Operations only (use the per-output Generator for callables)")


def sample_targets(state: Any, ks: Sequence[int], device: int,
                   hw: tuple[int, int]) -> list[targets.Targets | None]:
    """Per output index in ``ks``, its targets in the batch's ``hw`` (None: its input has none)."""
    out: list[targets.Targets | None] = []
    for k in ks:
        src = state.inputs[state.input_index(k)]
        if targets.of(src._node) is None:
            out.append(None)
            continue
        y = src.clone()
        record_operations(y, state.operations, state.seed, k, device, lambda: False)
        t = targets.of(y._node)
        shape = tuple(y.shape)
        if t is not None and tuple(shape[:2]) != tuple(hw):
            t = t.moved(_BATCH_RESIZE, (hw[0], hw[1]), shape, (hw[0], hw[1]))
        out.append(t)
    return out
