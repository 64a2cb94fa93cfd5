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

import functools
from typing import Any

import numpy as np

from .. import config
from .. import random as mprandom
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
        #: the compiled boxes' arguments (:func:`compiled_args`), None where the first op's
        #: windows are drawn by its form in Python
        self.compiled = compiled_args(step, self.seed)

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
        if self.compiled is not None:  # one compiled call (the GIL kept: no hand-over)
            return _boxes_module().boxes(np.asarray(ks, dtype=np.int64).reshape(-1), hw,
                                         *self.compiled, data_region.ALIGN)
        win = self.windows(ks, hw)
        if win is None:
            return np.concatenate([np.zeros_like(hw), hw], axis=1)
        return data_region.aligned(win, hw, data_region.ALIGN)

    def rows(self, ks: np.ndarray) -> RowBoxes:
        """The boxes of a decoder's rows whose outputs are ``ks`` (see :class:`RowBoxes`)."""
        return RowBoxes(self, np.ascontiguousarray(ks, dtype=np.int64))


class RowBoxes:
    """A batch's boxes as a decoder asks for them: ``boxes(rows, hw)`` of its rows ``rows``
    (outputs ``ks[rows]``, sizes ``hw``), :meth:`RegionPlan.boxes`; and, where the plan's
    windows are compiled, :meth:`layout`: the boxes and the allocation's layout in one call,
    and :meth:`parse_decode`: those inside the C decoder's compiled pass (None otherwise).

    Parameters
    ----------
    plan : RegionPlan
        The plan.
    ks : numpy.ndarray
        (n,) int64 output index of each of the decoder's rows.
    """

    def __init__(self, plan: RegionPlan, ks: np.ndarray) -> None:
        self.plan, self.ks = plan, ks
        if plan.compiled is None:
            self.layout = self.parse_decode = None  # type: ignore[assignment]

    def __call__(self, rows: np.ndarray, hw: np.ndarray) -> np.ndarray:
        return self.plan.boxes(self.ks[rows], hw)

    def layout(self, state: np.ndarray, dims: np.ndarray, taken: tuple[int, int],
               align: int, box: np.ndarray, slots: np.ndarray, offsets: np.ndarray) -> int:
        """After a parse pass (``data.capi_loop.parse``): ``box`` (n, 4) each row's rectangle,
        its box (:meth:`RegionPlan.boxes`) where its state is one of ``taken`` and its
        ``dims`` (n, 5: height, width, EXIF rotation and flips) has no orientation, else its
        whole image; ``slots`` each taken row's bytes (its rectangle's RGB), ``offsets``
        theirs laid out one after the other at multiples of ``align``. Returns the bytes laid
        out. One compiled call, the GIL kept."""
        return int(_boxes_module().layout(self.ks, state, dims, int(taken[0]), int(taken[1]),
                                          int(align), box, slots, offsets,
                                          *self.plan.compiled, data_region.ALIGN))

    def parse_decode(self, loop: Any, parse_args: tuple, taken: tuple[int, int], align: int,
                     box: np.ndarray, slots: np.ndarray, capacity: int, decode_args: tuple,
                     got: np.ndarray) -> int:
        """``data.capi_loop.parse`` (``loop``: the compiled loop's module; ``parse_args`` its
        arguments, ``clock`` last), :meth:`layout` after it (of ``parse``'s ``state``,
        ``dims`` and ``offsets``), then, where the bytes laid out fit ``capacity`` (0: never),
        the regions made and decoded (``data.capi_loop.regions_decode``; ``decode_args``: its
        arguments from the decoder's handle on, less those the parse shares, in its order:
        ``decoder, out, params, images, work, statuses, base, cuda_stream, done, fn_sub,
        view, at_start, at_end, region, parents``), in one compiled call without the GIL, its
        end stamp taken after the layout or the decode. ``got``: the bytes laid out (0 where
        nothing was taken), and 1 where the decode ran (its result returned)."""
        mod = _parse_module(loop.__name__, _boxes_module().__name__)
        return int(mod.parse_decode(*parse_args, self.ks, int(taken[0]), int(taken[1]),
                                    int(align), box, slots, *self.plan.compiled,
                                    data_region.ALIGN, int(capacity), *decode_args, got))


def compiled_args(step: Any, seed: int) -> tuple | None:
    """The arguments of the compiled boxes (:func:`_boxes_module`) after the outputs and
    sizes: the seed's round of the first op's draws (``random.mix`` of the seed), the op's
    index (0), ``resized_crop.window_params`` of the form's scale and ratio, its ratio and
    the tries; None where the first op is not ``random_resized_crop``, whose windows are the
    ones compiled (the other window forms draw theirs in Python)."""
    from ..ops.geometry import resized_crop

    if getattr(step.op, "method", None) != resized_crop.WINDOW_FORM:
        return None
    _, _, sc, ra = step.args_for(_KIND_CHANNELS, _KIND_DTYPE)
    params = resized_crop.window_params(sc, ra, False)
    return (np.uint64(mprandom.mix(seed & mprandom.MASK)), np.uint64(0),
            tuple(float(v) for v in params), (float(ra[0]), float(ra[1])),
            resized_crop.TRIES)


#: the compiled boxes of ``random_resized_crop`` (after ``batch_math``'s draws' head): per
#: output the draws of ``batch_ops.Ctx`` (op 0), the first fitting try of
#: ``resized_crop.window_try`` (``batch_math.first_fits``), torchvision's central window where
#: none fits (``resized_crop.central_window``), the window aligned (``data.region.aligned``),
#: each function compiled from its one definition (``cpu_devices.device``)
_BOXES_SOURCE = """

from millipyde.data.region import aligned as _aligned_py
from millipyde.graph.codegen import cpu_devices
from millipyde.ops.geometry.resized_crop import central_window as _central_py
from millipyde.ops.geometry.resized_crop import window_try as _try_py

_try = cpu_devices.device(_try_py)
_central = cpu_devices.device(_central_py)
_aligned = cpu_devices.device(_aligned_py)


# (the GIL kept: a decode lane draws its boxes with it; a release waits to take it back)
@njit(cache=True, error_model="numpy")
def windows(ks, hw, head, op, params, ratio, tries):
    win = np.empty((ks.shape[0], 4), np.int64)
    for i in range(ks.shape[0]):
        z = _mix(_mix(head ^ uint64(ks[i])) ^ op)
        missed = True
        for t in range(tries):
            got = _try(hw[i, 0], hw[i, 1], {draws}params)
            if got[0]:
                win[i, 0] = got[1]
                win[i, 1] = got[2]
                win[i, 2] = got[3]
                win[i, 3] = got[4]
                missed = False
                break
        if missed:
            c = _central(hw[i, 0], hw[i, 1], ratio)
            win[i, 0] = c[0]
            win[i, 1] = c[1]
            win[i, 2] = c[2]
            win[i, 3] = c[3]
    return win


@njit(cache=True, error_model="numpy")
def boxes(ks, hw, head, op, params, ratio, tries, align):
    return _aligned(windows(ks, hw, head, op, params, ratio, tries), hw, align)


@njit(cache=True, error_model="numpy")
def layout(ks, state, dims, taken_a, taken_b, byte_align, box, slots, offsets, head, op,
           params, ratio, tries, align):
    n = state.shape[0]
    plain = np.zeros(n, np.bool_)
    for r in range(n):
        box[r, 0] = 0
        box[r, 1] = 0
        box[r, 2] = dims[r, 0]
        box[r, 3] = dims[r, 1]
        plain[r] = (state[r] == taken_a or state[r] == taken_b) and dims[r, 2] == 0 \
            and dims[r, 3] == 0 and dims[r, 4] == 0
    rows = np.flatnonzero(plain)
    if rows.shape[0]:
        got = boxes(ks[rows], dims[rows, 0:2].copy(), head, op, params, ratio, tries, align)
        for q in range(rows.shape[0]):
            for c in range(4):
                box[rows[q], c] = got[q, c]
    total = 0
    for r in range(n):
        if state[r] == taken_a or state[r] == taken_b:
            slots[r] = (box[r, 2] - box[r, 0]) * (box[r, 3] - box[r, 1]) * 3
            offsets[r] = total
            total += -(-slots[r] // byte_align) * byte_align
        else:
            slots[r] = 0
    return total
"""


@functools.cache
def _boxes_module() -> Any:
    from ..graph.codegen.loader import load
    from ..ops.geometry import resized_crop
    from . import batch_math

    draw = batch_math.FITS_DRAW.replace("z[i]", "z")
    return load(f"# millipyde generated region boxes of {resized_crop.WINDOW_FORM} "
                "(region_plan)\n"
                + batch_math.MIX_HEAD + _BOXES_SOURCE.format(draws="".join(
                    draw.format(d=resized_crop.DRAWS_PER_TRY, k=k)
                    for k in range(resized_crop.DRAWS_PER_TRY))), "cpu")


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


#: the parse pass of the C decoder's compiled loop (``data.capi_loop``, imported by its module's
#: name), the boxes' layout after it and the decode where the batch fits its allocation, one
#: pass without the GIL (one compiled function for both uses: one compile)
_PARSE_SOURCE = """# millipyde generated parse pass and region layout (region_plan)
from numba import njit

from {loop} import _stamp as _end_stamp
from {loop} import parse as _parse
from {loop} import regions_decode as _regions_decode
from {boxes} import layout as _layout


@njit(cache=True, nogil=True)
def parse_decode(fns, lay, instance, template, address, size, handle, state, dims, offsets,
                 limit, clock, ks, taken_a, taken_b, byte_align, box, slots, head, op, params,
                 ratio, tries, align, capacity, decoder, out, dparams, images, work, statuses,
                 base, cuda_stream, done, fn_sub, view, at_start, at_end, region, parents,
                 got):
    got[0] = 0
    got[1] = 0
    if _parse(fns, lay, instance, template, address, size, handle, state, dims, offsets,
              limit, clock) == 0:
        return 0
    total = _layout(ks, state, dims, taken_a, taken_b, byte_align, box, slots, offsets, head,
                    op, params, ratio, tries, align)
    got[0] = total
    if total > capacity:
        _end_stamp(clock)
        return 0
    got[1] = 1
    return _regions_decode(fns, lay, instance, decoder, out, dparams, images, work, statuses,
                           base, cuda_stream, handle, state, dims, offsets, done, fn_sub,
                           view, at_start, at_end, box, region, parents, slots, clock)
"""


@functools.cache
def _parse_module(loop: str, boxes: str) -> Any:
    from ..graph.codegen.loader import load

    return load(_PARSE_SOURCE.format(loop=loop, boxes=boxes), "cpu")
