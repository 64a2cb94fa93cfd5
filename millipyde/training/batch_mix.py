"""``MixUp`` and ``CutMix``: torchvision v2's batch mixers on ``(images, labels)`` batches.

Each call mixes a whole batch on its device with one generated kernel (and one for the soft
labels, ``graph.codegen.mix``): sample ``b`` with sample ``b - 1`` (the batch rolled by one,
as torchvision's ``roll(1, 0)``). ``lam`` (and CutMix's box) are drawn per batch from the
counter-based streams: draw ``t`` of (seed, ``step``, the mixer's stream index), ``step`` the
batch's number (by default the mixer's call count), so the same seed and step give the same
mix on any device or rank.

``lam`` is ``Beta(alpha, alpha)`` by the inverse of its CDF (``scipy.special.betaincinv``) at
one uniform draw: torchvision's distribution, not its bits (torch's sampler draws Gammas).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from .. import random as mprandom
from ..array import ArgumentError, gpuarray
from ..backend import ACTIVE as runtime
from ..graph.ir.node import leaf
from ..workers import STREAMS, sync

__all__ = ["BatchMix", "CutMix", "MixChoice", "MixUp", "check_batches_mix",
           "check_mix_labels"]

#: stream indices of the mixers' draws (apart from any Operation's)
_MIXUP, _CUTMIX, _CHOICE = (mprandom.key64(0x6D1C, i, 0, 0) for i in range(3))


def _kernel() -> Any:
    got = _KERNELS.get(runtime.name)
    if got is None:  # (imported here: a batch worker asks for it every batch)
        from ..graph.codegen.mix import mix_kernel

        got = _KERNELS[runtime.name] = mix_kernel(runtime.codegen_target, runtime.simulated)
    return got


_KERNELS: dict[str, Any] = {}


def _alpha(alpha: Any, owner: str) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(alpha)) or float(alpha) <= 0:
        raise ArgumentError(f"{owner} alpha must be a number > 0, got {alpha!r}")
    return float(alpha)


def beta_of(u: Any, alpha: float) -> Any:
    """``Beta(alpha, alpha)`` at the uniform draws ``u`` (inverse CDF; a ufunc: elementwise
    the same values for an array as for each of its floats)."""
    from scipy.special import betaincinv

    return betaincinv(alpha, alpha, u)


#: steps whose draws a mixer makes at once (``BatchMix._block``), and the steps it draws so
_AHEAD = 64
_FAR = 1 << 62


class BatchMix:
    """A batch mixer (``MixUp``, ``CutMix``): ``mixer(images, labels, step=None)`` gives the
    mixed images and soft labels (see the module doc).

    Parameters
    ----------
    alpha : float
        ``Beta(alpha, alpha)`` of ``lam`` (torchvision's default 1.0: uniform).
    num_classes : int, optional
        Classes of the one-hot labels; needed for integer labels (soft labels (n, K) are
        mixed as they are).
    layout : {"NCHW", "NHWC"}
        The images' layout (``Generator.batches``' ``layout``).
    seed : int, optional
        Seed of the draws; the global seed (``mp.seed``) at construction if None.
    """

    _stream = 0

    def __init__(self, *, alpha: float = 1.0, num_classes: int | None = None,
                 layout: str = "NCHW", seed: int | None = None) -> None:
        owner = type(self).__name__
        self.alpha = _alpha(alpha, owner)
        if num_classes is not None and (isinstance(num_classes, bool) or
                                        not isinstance(num_classes, (int, np.integer))
                                        or num_classes < 1):
            raise ArgumentError(f"{owner} num_classes must be an int >= 1, got {num_classes!r}")
        self.num_classes = None if num_classes is None else int(num_classes)
        if layout not in ("NCHW", "NHWC"):
            raise ArgumentError(f"{owner} layout must be 'NCHW' or 'NHWC', got {layout!r}")
        self.layout = layout
        self.seed = mprandom.global_seed() if seed is None else mprandom.as_seed(seed)
        self._lock = threading.Lock()
        self._calls = 0
        #: per (h, w): step -> :meth:`params`, made a block of steps at a time
        self._params_kept: dict[tuple[int, int], dict[int, tuple]] = {}
        self._last: int | None = None
        #: per (images' shape, labels' shape and type, layout, classes): what the checks of a
        #: gpuarray batch worked out (``queue``: a batch worker's batches all have one)
        self._plans: dict[tuple, tuple] = {}
        #: per (n, h, w, c, k, dtype, device): the kept launch of ``queue_classes``, or False
        self._bound: dict[tuple, Any] = {}

    # -- draws --------------------------------------------------------------------------
    def _step(self, step: Any) -> int:
        if step is not None:
            return mprandom.as_seed(step, f"{type(self).__name__} step")
        with self._lock:
            s = self._calls
            self._calls += 1
        return s

    def u(self, step: int, t: int) -> float:
        """Draw ``t`` of batch ``step`` (``t`` < 3), from the scalar stream (the blocks
        :meth:`params` works from hold the same values)."""
        return mprandom.uniform01(self.seed, step, self._stream, t)

    def lam(self, step: int) -> float:
        """``Beta(alpha, alpha)`` of batch ``step`` at its draw 0 (:func:`beta_of`)."""
        return float(beta_of(self.u(step, 0), self.alpha))

    def _block(self, step: int, last: int | None) -> tuple[list[int], list[np.ndarray],
                                                           np.ndarray]:
        """(steps, their three uniforms' arrays, their ``lam``s) of the block drawn at a miss
        of ``step``: ``step`` and ``_AHEAD - 1`` steps after it at the stride from ``last``,
        the step asked for before it (a batch worker's steps are its batches' first outputs:
        ``size`` apart), each step's values its own (``mprandom.uniform01_array`` is
        bit-identical to ``uniform01``, ``beta_of`` elementwise): a worker draws and inverts
        once per ``_AHEAD`` batches, not per batch. (The stride is the last two steps asked
        for, hits included: from the last step that missed it would be ``_AHEAD`` batches
        wide, and every other draw would serve one batch.) Steps near int64's ends: ``step``
        alone, by the scalar stream."""
        stride = step - last if last is not None and 0 < step - last <= _FAR // _AHEAD else 1
        if not -_FAR < step < _FAR - stride * _AHEAD:  # past int64's range: drawn alone
            us = [np.array([mprandom.uniform01(self.seed, step, self._stream, t)])
                  for t in range(3)]
            return [step], us, beta_of(us[0], self.alpha)
        steps = step + stride * np.arange(_AHEAD, dtype=np.int64)
        us = [mprandom.uniform01_array(self.seed, steps, self._stream, t) for t in range(3)]
        return steps.tolist(), us, beta_of(us[0], self.alpha)

    def _keep(self, kept: dict, made: dict) -> None:
        """``made`` into ``kept`` (emptied first once it holds a few blocks: the steps asked
        for move on)."""
        with self._lock:
            if len(kept) > 4 * _AHEAD:
                kept.clear()
            kept.update(made)

    def params(self, step: int, h: int, w: int) -> tuple[float, tuple[int, int, int, int],
                                                           float]:
        """(the blend's ``lam`` inside the box, the box (x1, y1, x2, y2), the labels' lam) of
        batch ``step`` on ``h`` x ``w`` images: worked out for the whole block of steps drawn
        with it (:meth:`_block`, :meth:`_params` on its arrays), so a batch worker's batch
        looks its params up."""
        kept = self._params_kept.get((h, w))
        got = None if kept is None else kept.get(step)
        last, self._last = self._last, step
        if got is not None:
            return got
        steps, us, lams = self._block(step, last)
        made = dict(zip(steps, self._params(us, lams, h, w), strict=True))
        if kept is None:
            with self._lock:
                if len(self._params_kept) >= 8:
                    self._params_kept.clear()
                kept = self._params_kept.setdefault((h, w), {})
        self._keep(kept, made)
        return made[step]

    def _params(self, us: list[np.ndarray], lams: np.ndarray, h: int,
                w: int) -> list[tuple[float, tuple[int, int, int, int], float]]:
        """:meth:`params` of a block of steps from their draws' arrays (float64 arithmetic
        as Python's on each step's floats: the same values)."""
        raise NotImplementedError

    # -- mixing -------------------------------------------------------------------------
    def __call__(self, images: Any, labels: Any, step: Any = None) -> tuple[Any, Any]:
        """Mix a batch in place: ``images`` (n, C, H, W) or (n, H, W, C) float (a gpuarray:
        on its device, one kernel, waited for; a writable ndarray: with NumPy), ``labels``
        (n,) class indices (int) or (n, K) soft labels. Returns (``images``, soft labels
        (n, K) float32 of the images' kind)."""
        return self._mix(images, labels, step, wait=True)

    def queue(self, images: gpuarray, labels: Any, step: Any) -> tuple[Any, Any]:
        """:meth:`__call__`'s mix of a gpuarray batch, queued on the current stream of its
        device and not waited for (``Generator.batches(mix=)``: the batch's worker queues it
        behind the batch's kernels, and the batch's event behind it)."""
        return self._mix(images, labels, step, wait=False)

    def _mix(self, images: Any, labels: Any, step: Any, wait: bool) -> tuple[Any, Any]:
        n, h, w, c, k, soft = self._plan(images, labels)
        lam, box, lam_labels = self.params(self._step(step), h, w)
        if not isinstance(images, gpuarray):
            self._blend_host(images, lam, box)
            return images, _soft(np.asarray(labels), soft, k, lam_labels)
        x = runtime.reshape(images._materialize(), (n * h * w * c,))  # (the plan's shape)
        args = (x, images, labels, soft, n, h, w, c, k, lam, box, lam_labels)
        if wait:
            return self._on_device(*args)
        with runtime.on_device(images.device):
            return self._queue(*args)

    def _plan(self, images: Any, labels: Any) -> tuple[int, int, int, int, int, bool]:
        """(n, h, w, c, k, soft) of a batch and its labels, or the ArgumentError naming what
        does not fit; worked out once per kind of gpuarray batch (the checks read only the
        shapes and the mixer's settings)."""
        key = None
        if isinstance(images, gpuarray):
            key = (tuple(images.shape), tuple(labels.shape), type(labels), self.layout,
                   self.num_classes)
            got = self._plans.get(key)
            if got is not None:
                return got
        owner = type(self).__name__
        if not isinstance(images, gpuarray) and not (isinstance(images, np.ndarray)
                                                     and images.flags.writeable):
            raise ArgumentError(f"{owner} mixes in place: images must be a gpuarray or a "
                                f"writable ndarray, got {type(images).__name__}")
        shape = tuple(images.shape)
        if len(shape) != 4:
            raise ArgumentError(f"{owner} images must be a batch (n, C, H, W) or (n, H, W, C), "
                                f"got shape {shape}")
        n = shape[0]
        h, w = (shape[2], shape[3]) if self.layout == "NCHW" else (shape[1], shape[2])
        c = shape[1] if self.layout == "NCHW" else shape[3]
        lshape = tuple(labels.shape)
        if lshape[:1] != (n,) or len(lshape) not in (1, 2):
            raise ArgumentError(f"{owner} labels must be (n,) class indices or (n, K) soft "
                                f"labels for a batch of {n}, got shape {lshape}")
        soft = len(lshape) == 2
        if not soft and self.num_classes is None:
            raise ArgumentError(f"{owner} needs num_classes for class-index labels")
        k = lshape[1] if soft else self.num_classes
        got = (n, h, w, c, k, soft)
        if key is not None:
            with self._lock:
                if len(self._plans) >= 64:
                    self._plans.clear()
                self._plans[key] = got
        return got

    def _blend_host(self, images: np.ndarray, lam: float, box: tuple) -> None:
        """The images' blend with NumPy, in place (a host batch; float16 on the cpu)."""
        x1, y1, x2, y2 = box
        sl = (slice(None), slice(None), slice(y1, y2), slice(x1, x2)) if self.layout == "NCHW" \
            else (slice(None), slice(y1, y2), slice(x1, x2))
        # torchvision's float32 arithmetic: the rolled batch times (1 - lam), plus it times lam
        part = images[sl].astype(np.float32)
        images[sl] = (np.roll(part, 1, axis=0) * np.float32(1.0 - lam)
                      + part * np.float32(lam)).astype(images.dtype)

    def _on_device(self, x: Any, images: gpuarray, labels: Any, soft: bool, n: int, h: int,
                   w: int, c: int, k: int, lam: float, box: tuple, lam_labels: float) -> tuple:
        """:meth:`_queue` on a pooled stream of the device, waited for."""
        dev = images.device
        if not runtime.caps.launches_on_streams:
            with runtime.on_device(dev):
                return self._queue(x, images, labels, soft, n, h, w, c, k, lam, box,
                                   lam_labels)
        # On a pooled stream of the device, waited for alone. The current stream of a
        # consumer's thread is the legacy default stream, which would wait for every kernel
        # the batch workers have queued (the batches made ahead) and make theirs wait for it
        # (an H200 measured the same cost either way: the call's own work is what a mix
        # costs; bench/RESULTS.md).
        stream, generation = STREAMS.acquire(dev)
        try:
            with runtime.on_device(dev), runtime.using_stream(stream):
                out = self._queue(x, images, labels, soft, n, h, w, c, k, lam, box,
                                  lam_labels)
            sync(stream)  # mixed: any stream may read the batch, as batches() hands it out
        finally:
            STREAMS.release(dev, stream, generation)
        return out

    def _queue(self, x: Any, images: gpuarray, labels: Any, soft: bool, n: int, h: int, w: int,
               c: int, k: int, lam: float, box: tuple, lam_labels: float) -> tuple:
        """Queue the mix of ``x`` (``images``' buffer, flat) and its labels' on the current
        stream: one launch (images and class-index labels); on the device of ``images``
        (the callers' ``runtime.on_device``)."""
        dev = images.device
        if soft:  # soft labels: a (n, K) blend of the labels with themselves rolled
            lab = np.asarray(labels, dtype=np.float64)
            host = (lam_labels * lab + (1.0 - lam_labels) * np.roll(lab, 1, axis=0))
            out_labels = gpuarray(host.astype(np.float32))
            self._launch(x, images, n, h, w, c, lam, box, *_no_labels(dev), lam_labels)
            return images, out_labels
        if isinstance(labels, gpuarray):
            lab = runtime.reshape(labels._materialize(), (n,))
            if labels.dtype != np.int64:
                raise ArgumentError(f"{type(self).__name__} labels must be int64, got "
                                    f"{labels.dtype}")
        else:
            host = np.asarray(labels)
            if host.dtype.kind not in "iu":
                raise ArgumentError(f"{type(self).__name__} labels must be integers, got "
                                    f"{host.dtype}")
            _check_range(host, k)
            lab = runtime.from_host(np.ascontiguousarray(host, dtype=np.int64), dev)
        return images, self._labelled(x, images, n, h, w, c, k, lam, box, lab, lam_labels)

    def queue_classes(self, images: gpuarray, classes: Any, step: int) -> gpuarray:
        """``Generator.batches(mix=)``'s mix, queued on the current stream: ``images`` a
        gpuarray batch, ``classes`` its int64 class indices as a 1-D device buffer on its
        device, in range (the worker checked them), ``step`` the batch's; the caller inside
        ``runtime.on_device(images.device)``. Returns the soft labels. :meth:`queue`'s mix,
        without its per-call wrapping of the labels and its second entry of the device; from
        a batch shape's second batch on, where the backend keeps launches
        (``Backend.bind_grid``: a GPU's driver template packed once), the launch is that kept
        one with the batch's, the labels' and the soft labels' addresses and the batch's
        scalars written over it, the soft labels allocated by it."""
        n, h, w, c, k, _ = self._plan(images, classes)
        lam, box, lam_labels = self.params(step, h, w)
        node = images._node
        buf = node.buffer if node.buffer is not None else images._materialize()
        dev = node.device
        key = (n, h, w, c, k, node.dtype, dev)
        bound = self._bound.get(key)
        if bound and n:
            _, _, _, y1, y2, q1, q2 = self._rows(box, h, w, c)
            dst = bound(buf, [lam, y1, y2, q1, q2, lam_labels], classes)
            if dst is not None:
                return gpuarray._wrap(leaf(dst, (n, k), _F32, dev))
        x = runtime.reshape(buf, (n * h * w * c,))
        out = self._labelled(x, images, n, h, w, c, k, lam, box, classes, lam_labels)
        if bound is None and n and runtime.codegen_target != "cpu":
            self._bind(key, x, buf, out._node.buffer, classes, lam, box, lam_labels)
        return out

    def _bind(self, key: tuple, x: Any, buf: Any, dst: Any, classes: Any, lam: float,
              box: tuple, lam_labels: float) -> None:
        """Keep the launch :meth:`queue_classes` just made for batches of ``key``'s shape
        (``Backend.bind_grid``; the grid of the whole image: the kernel strides over the
        box, so CutMix's boxes take the same grid), or that none is kept (False: the
        backend keeps its general one only, ``base.Bound2D``, no faster than the launch
        itself). Nothing while the backend has not kept the kernel's template yet (its
        first launch)."""
        from ..backend.base import Bound2D

        n, h, w, c, k, _, dev = key
        P, R, Q, y1, y2, q1, q2 = self._rows(box, h, w, c)
        args = (x, dst, classes, n, P, R, Q, k, lam, y1, y2, q1, q2, lam_labels)
        grid, block = _grid_of((P, R, Q))
        size = n * h * w * c
        got = runtime.bind_grid(_kernel(), grid, block, dev, buf, dst, args, 6,
                                lambda src, out: (runtime.reshape(src, (size,)), out))
        if got is None:
            return
        with self._lock:
            if len(self._bound) >= 64:
                self._bound.clear()
            self._bound[key] = False if isinstance(got, Bound2D) and not GENERIC_BOUND else got

    def _rows(self, box: tuple, h: int, w: int, c: int) -> tuple[int, ...]:
        """(P, R, Q, r1, r2, q1, q2): the batch as (n, P, R, Q) planes (NCHW: C planes of H x
        W; NHWC: one plane of H x (W * C)) and the box's rows and columns in them, all 0
        where it is empty."""
        P, R, Q = (c, h, w) if self.layout == "NCHW" else (1, h, w * c)
        x1, y1, x2, y2 = box
        q1, q2 = (x1, x2) if self.layout == "NCHW" else (x1 * c, x2 * c)
        if not (y2 > y1 and q2 > q1):
            y1 = y2 = q1 = q2 = 0
        return P, R, Q, y1, y2, q1, q2

    def _labelled(self, x: Any, images: gpuarray, n: int, h: int, w: int, c: int, k: int,
                  lam: float, box: tuple, lab: Any, lam_labels: float) -> gpuarray:
        """:meth:`_launch` with the class indices ``lab`` (int64, (n,), on the device):
        the soft labels (n, k) float32 it writes."""
        dev = images.device
        # (the batch engine's allocator of the layout where a worker mixes on its device)
        dst = getattr(runtime, "empty_batched", runtime.empty)((n * k,), np.float32, dev)
        self._launch(x, images, n, h, w, c, lam, box, lab, dst, k, lam_labels)
        return gpuarray._wrap(leaf(dst, (n, k), _F32, dev))

    def _launch(self, x: Any, images: gpuarray, n: int, h: int, w: int, c: int, lam: float,
                box: tuple, lab: Any, dst: Any, kk: int, lam_labels: float) -> None:
        """The mix's one launch: ``x`` blended inside ``box``, ``kk`` classes of soft labels
        written into ``dst`` from ``lab`` (0: none)."""
        dev = images.device
        P, R, Q, y1, y2, q1, q2 = self._rows(box, h, w, c)
        if runtime.codegen_target == "cpu" and images.dtype == np.float16:
            # (Numba's CPU target has no float16 arithmetic; the cpu backend's buffers are
            # NumPy arrays: mixed with NumPy, as the cpu backend casts float16 batches; the
            # kernel then does the labels only)
            self._blend_host(np.asarray(x).reshape(images.shape), lam, box)
            y1 = y2 = q1 = q2 = 0
            x = runtime.constant(("mix-no-images", np.float32), np.zeros(1, np.float32), dev)
        if n and (y2 > y1 or kk):
            args = (x, dst, lab, n, P, R, Q, kk, lam, y1, y2, q1, q2, lam_labels)
            if runtime.codegen_target == "cpu":
                # (blocks x threads: their values size the cpu's parts)
                runtime.launch_blocks(_kernel(), max(P * (y2 - y1), 1),
                                      max(n * (q2 - q1), n * kk, 1), dev, *args)
            elif y2 > y1:
                _launch_box(_kernel(), dev, (P, y2 - y1, q2 - q1), args)
            else:  # the labels only: a grid of their size
                _launch_box(_kernel(), dev, (1, 1, n * kk), args)


_F32 = np.dtype(np.float32)


def _no_labels(device: int) -> tuple[Any, Any, int]:
    """(labels, dst, k) of a mix without class-index labels: one-element arrays, k 0."""
    return (runtime.constant(("mix-no-labels", np.int64), np.zeros(1, np.int64), device),
            runtime.constant(("mix-no-labels", np.float32), np.zeros(1, np.float32), device),
            0)


def check_batches_mix(mix: Any, layout: str, with_labels: bool, with_targets: bool) -> None:
    """``Generator.batches(mix=)``'s checks: ArgumentError naming what does not fit."""
    if not isinstance(mix, (BatchMix, MixChoice)):
        raise ArgumentError(f"batches mix must be a MixUp, CutMix or a RandomChoice of them, "
                            f"got {type(mix).__name__}")
    if not with_labels:
        raise ArgumentError("batches mix= mixes the labels too: give with_labels=True")
    if with_targets:
        raise ArgumentError("batches mix= mixes classification batches: not with "
                            "with_targets=True")
    if mix.layout != layout:
        raise ArgumentError(f"batches mix: the mixer's layout is {mix.layout!r}, the "
                            f"batches' {layout!r}")
    if any(m.num_classes is None for m in _mixers(mix)):
        raise ArgumentError("batches mix= needs the mixer's num_classes (the batches' labels "
                            "are class indices)")


def check_mix_labels(mix: Any, labels: np.ndarray) -> None:
    """ArgumentError unless the class indices ``labels`` lie in ``mix``'s classes (the
    batches' mix checks them on the host before they go to the device)."""
    for m in _mixers(mix):
        _check_range(labels, m.num_classes)


def _mixers(mix: Any) -> tuple:
    """The batch mixers ``mix`` may call: a RandomChoice's, or itself."""
    return tuple(mix.mixers) if isinstance(mix, MixChoice) else (mix,)


def _launch_box(kernel: Any, device: int, extent: tuple[int, int, int], args: tuple) -> None:
    """A GPU launch over (planes, rows, columns) of the box: x = columns, y = rows, z =
    planes (the kernels stride over what the grid does not cover). Straight through the
    kernel's driver template where the backend has one for it (``batch_launch.launch_grid``:
    a batch worker's mixes, ~30 us of host time less a call than the general path)."""
    grid, block = _grid_of(extent)
    launch = _LAUNCH_GRID
    if not launch:  # (imported once: a batch worker launches every batch)
        from ..graph.exec import batch_launch

        launch.append(batch_launch.launch_grid)
    launch[0](kernel, grid, block, device, args)


_LAUNCH_GRID: list = []  # ``batch_launch.launch_grid``, once imported

#: keep a backend's general kept launch (``base.Bound2D``) too: tests, where the simulator's
#: launches through it as a GPU's driver template would be (no host time saved)
GENERIC_BOUND = False


def _grid_of(extent: tuple[int, int, int]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block) of a GPU launch over (planes, rows, columns)."""
    p, r, q = extent
    block = (min(32, q), min(8, r), 1) if runtime.simulated else (128, 2, 1)
    return (min(-(-q // block[0]), 65535), min(-(-r // block[1]), 1024), min(p, 65535)), block


def _soft(labels: np.ndarray, soft: bool, k: int, lam: float) -> np.ndarray:
    """torchvision's ``_mixup_label``: one-hot (float) blended with itself rolled by one."""
    if soft:
        lab = labels.astype(np.float64)
    else:
        if labels.dtype.kind not in "iu":
            raise ArgumentError(f"labels must be integers, got {labels.dtype}")
        _check_range(labels, k)
        lab = np.eye(k)[labels]
    return (lam * lab + (1.0 - lam) * np.roll(lab, 1, axis=0)).astype(np.float32)


def _check_range(labels: np.ndarray, k: int) -> None:
    if not len(labels):
        return
    # (int64 class indices, a batch worker's: one pass, a negative one seen as unsigned is
    # 2**63 or more, past any class count)
    if labels.dtype == np.int64 and labels.ndim == 1:
        bad = int(labels.view(np.uint64).max()) >= k
    else:
        bad = labels.min() < 0 or labels.max() >= k
    if bad:
        raise ArgumentError(f"labels must lie in 0..{k - 1} (num_classes {k}), got "
                            f"{int(labels.min())}..{int(labels.max())}")


class MixUp(BatchMix):
    """torchvision v2's ``MixUp``: ``lam * x[b] + (1 - lam) * x[b - 1]``, labels likewise,
    ``lam ~ Beta(alpha, alpha)`` per batch (see :class:`BatchMix`)."""

    _stream = _MIXUP

    def _params(self, us: list[np.ndarray], lams: np.ndarray, h: int,
                w: int) -> list[tuple[float, tuple[int, int, int, int], float]]:
        box = (0, 0, w, h)
        return [(lam, box, lam) for lam in lams.tolist()]


class CutMix(BatchMix):
    """torchvision v2's ``CutMix``: a box of sample ``b - 1`` pasted into sample ``b``: centre
    uniform over the image, sides ``sqrt(1 - lam)`` of the image's (clipped to it); the labels
    blended by the pasted area (``lam_adjusted``) (see :class:`BatchMix`)."""

    _stream = _CUTMIX

    def _params(self, us: list[np.ndarray], lams: np.ndarray, h: int,
                w: int) -> list[tuple[float, tuple[int, int, int, int], float]]:
        # (each step's float64 products truncated as int() truncates them, sqrt correctly
        # rounded as math.sqrt, the area's int quotient as Python's true division: exact
        # integers below 2**53 divided once)
        r_x = np.minimum((us[1] * w).astype(np.int64), w - 1)  # torch.randint(W)
        r_y = np.minimum((us[2] * h).astype(np.int64), h - 1)
        r = 0.5 * np.sqrt(1.0 - lams)
        r_w_half, r_h_half = (r * w).astype(np.int64), (r * h).astype(np.int64)
        x1, y1 = np.maximum(r_x - r_w_half, 0), np.maximum(r_y - r_h_half, 0)
        x2, y2 = np.minimum(r_x + r_w_half, w), np.minimum(r_y + r_h_half, h)
        lam_adjusted = 1.0 - (x2 - x1) * (y2 - y1) / (w * h)
        boxes = zip(x1.tolist(), y1.tolist(), x2.tolist(), y2.tolist(), strict=True)
        return [(0.0, box, lam) for box, lam in zip(boxes, lam_adjusted.tolist(), strict=True)]


class MixChoice:
    """torchvision's ``RandomChoice([CutMix(...), MixUp(...)], p)`` of batch mixers: one of
    them per batch, drawn from (seed, step); ``p`` their weights (equal by default)."""

    def __init__(self, mixers: list, p: Any = None, seed: int | None = None) -> None:
        if not mixers or not all(isinstance(m, BatchMix) for m in mixers):
            raise ArgumentError("MixChoice needs a list of MixUp / CutMix")
        from ..compose import weights_of

        self.mixers = list(mixers)
        w = weights_of(p, len(self.mixers), "RandomChoice", "p")
        self._cum = np.cumsum(w)
        self._cum[-1] = 1.0
        self.seed = mprandom.global_seed() if seed is None else mprandom.as_seed(seed)
        self._lock = threading.Lock()
        self._calls = 0

    @property
    def layout(self) -> str:
        """The mixers' layout (one for all of them)."""
        layouts = {m.layout for m in self.mixers}
        if len(layouts) != 1:
            raise ArgumentError(f"MixChoice mixers have different layouts: {sorted(layouts)}")
        return layouts.pop()

    def _choose(self, step: Any) -> tuple[BatchMix, int]:
        if step is None:
            with self._lock:
                step = self._calls
                self._calls += 1
        step = mprandom.as_seed(step, "step")
        u = mprandom.uniform01(self.seed, step, _CHOICE, 0)
        return self.mixers[min(int(np.searchsorted(self._cum, u, side="right")),
                               len(self.mixers) - 1)], step

    def __call__(self, images: Any, labels: Any, step: Any = None) -> tuple[Any, Any]:
        """One mixer's call, chosen for this batch (its own draws at the same ``step``)."""
        mixer, step = self._choose(step)
        return mixer(images, labels, step=step)

    def queue(self, images: gpuarray, labels: Any, step: Any) -> tuple[Any, Any]:
        """One mixer's :meth:`BatchMix.queue`, chosen for this batch."""
        mixer, step = self._choose(step)
        return mixer.queue(images, labels, step=step)

    def queue_classes(self, images: gpuarray, classes: Any, step: int) -> gpuarray:
        """One mixer's :meth:`BatchMix.queue_classes`, chosen for this batch."""
        mixer, step = self._choose(step)
        return mixer.queue_classes(images, classes, step)
