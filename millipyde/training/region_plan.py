"""Region decoding, the plan: where a streamed Generator's first op is a window
(``random_resized_crop``, ``crop``, ``center_crop``, ``random_crop`` without padding), only the
part of each sample that the window reads is decoded (``data.region``: the decoders' side).

The window is a pure function of (seed, output, op) and the image's size
(``ops.geometry.resized_crop.window_try`` and the other forms' ``sample``), so it is drawn from
the size in the sample's header before the sample is decoded: :meth:`RegionPlan.boxes` runs the
first op's form on the batch's draws (``training.batch_ops.Ctx``, op 0: the recorder's draws)
and the headers' sizes, and gives each sample the rectangle to decode, the window widened to
``data.region.ALIGN`` (JPEG's largest MCU, 16 pixels: a decoder that works in whole MCUs
decodes those anyway) and kept inside the image. The decoded region goes to the recorder with
its place in the image (``(top, left, height, width)`` of the whole image:
``DecodedBatch.regions``), and the first op is recorded on it by ``Form.emits_on_region``:
drawn from the whole image's size, its window shifted by the region's top and left. Nothing
outside the window is read by a window op (``crop`` is an index map; ``random_resized_crop``'s
resize samples the crop with its edges repeated, inside the window), so the outputs equal the
whole image's wherever the decoder's region pixels equal its whole decode's (nvImageCodec's
equal them on the GPU; the tests cut Pillow's whole decodes, ``data.region.CUT_WHOLE``, to
check the recording on the cpu backend: tests/test_data_region.py).

On by default (:data:`ENABLED`; ``MILLIPYDE_DECODE_REGION=0`` turns it off); never for sources
with detection targets (their boxes are in the whole image's coordinates) or where the first op
has a probability (a member whose coin is off reads the whole image).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import config
from ..data import region as data_region

#: region decoding where the first op allows it (``MILLIPYDE_DECODE_REGION``). Read when a
#: Generator's stream is made.
ENABLED = config.decode_region()
#: the image kind the window is drawn for (a window does not depend on the kind; the form's
#: arguments are parsed once for it)
_KIND_CHANNELS, _KIND_DTYPE = 3, np.dtype(np.uint8)


class RegionPlan:
    """The regions of a Generator's first op (see the module doc).

    Parameters
    ----------
    step : training.batch_ops.Step
        The first op's step (a built-in form without a probability).
    seed : int
        The Generator's seed.
    """

    def __init__(self, step: Any, seed: int) -> None:
        self.step, self.seed = step, int(seed)

    def __reduce__(self) -> tuple:
        # sent to a decode worker process (``data.process``) as its Operation's method and
        # arguments and the seed: the worker rebuilds the step with this module, which the
        # data package does not import
        op = self.step.op
        return (_rebuilt, (op.method, op.args, op.kwargs, self.seed))

    def windows(self, ks: np.ndarray, hw: np.ndarray) -> np.ndarray | None:
        """(n, 4) windows (top, left, height, width) the first op takes on outputs ``ks`` of
        images of sizes ``hw`` ((n, 2)), as the recorder draws them; None where the form's
        entries do not begin with a window on every image (``ops.base.first_window``)."""
        from ..ops.base import first_window
        from .batch_ops import Ctx, kind_for

        ks = np.asarray(ks, dtype=np.int64).reshape(-1)
        hw = np.asarray(hw, dtype=np.int64).reshape(-1, 2)
        if not len(ks):
            return np.zeros((0, 4), dtype=np.int64)
        step = self.step
        args = step.args_for(_KIND_CHANNELS, _KIND_DTYPE)
        entries = step.form.emits(args, Ctx(self.seed, ks, 0), hw,
                                  kind_for(_KIND_CHANNELS, _KIND_DTYPE))
        at = first_window(entries)
        if at is None:
            return None
        return np.asarray(entries[at].params[:, :4]).astype(np.int64)

    def boxes(self, ks: np.ndarray, hw: np.ndarray) -> np.ndarray:
        """(n, 4) rectangles to decode (top, left, bottom, right; bottom and right exclusive)
        of outputs ``ks`` of images of sizes ``hw``: each window aligned to
        ``data.region.ALIGN`` and kept inside its image (the whole image where no window is
        drawn)."""
        hw = np.asarray(hw, dtype=np.int64).reshape(-1, 2)
        win = self.windows(ks, hw)
        if win is None:
            return np.concatenate([np.zeros_like(hw), hw], axis=1)
        return data_region.aligned(win, hw, data_region.ALIGN)


def plan_of(operations: list, seed: int, has_targets: bool = False) -> RegionPlan | None:
    """The region plan of a streamed Generator's ``operations``, or None where regions do not
    apply: switched off (:data:`ENABLED`), a source with targets, a first Operation that is not
    a built-in form beginning with a window (tried on a 64 x 64 image), or that has a
    probability."""
    if not ENABLED or has_targets or not operations:
        return None
    from ..compose import Choice
    from .batch_ops import step_of

    op = operations[0]
    if isinstance(op, Choice) or getattr(op, "method", None) is None or \
            getattr(op, "probability", None) is not None:
        return None
    step = step_of(op)
    if step is None:
        return None
    plan = RegionPlan(step, seed)
    try:
        win = plan.windows(np.zeros(1, np.int64), np.array([[64, 64]]))
    except Exception:  # arguments the image refuses: the per-output path says why
        return None
    return None if win is None else plan


def _rebuilt(method: str, args: tuple, kwargs: dict, seed: int) -> RegionPlan:
    """A :class:`RegionPlan` of the method Operation ``method(*args, **kwargs)`` (unpickling)."""
    from ..operation import Operation
    from .batch_ops import step_of

    return RegionPlan(step_of(Operation(method, *args, **kwargs)), seed)
