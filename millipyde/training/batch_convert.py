"""What a training batch is and how a sample is written into it (``Generator.batches``).

:class:`BatchSpec` validates ``batches``' arguments; :func:`write_sample` runs the generated
batch writer (``graph.codegen.convert``) over stored images; :func:`convert_reference` is the
NumPy statement of the same conversion (tests compare them bit for bit).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..array import ArgumentError
from ..backend import ACTIVE as runtime  # the active backend
from ..graph.codegen import batch_writer
from ..graph.codegen import convert as codegen_convert

_DTYPES = {"float32": np.float32, "float16": np.float16}


def _per_channel(value: Any, name: str, channels: int, default: float) -> np.ndarray:
    if value is None:
        return np.full(channels, default, dtype=np.float64)
    try:
        arr = np.array(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ArgumentError(f"batches {name} must be a float or {channels} floats, "
                            f"got {value!r}") from None
    if arr.size == 1:
        arr = np.full(channels, arr[0])
    if arr.size != channels or not np.all(np.isfinite(arr)):
        raise ArgumentError(f"batches {name} must be a finite float or {channels} finite "
                            f"floats, got {value!r}")
    return arr


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ArgumentError(f"batches {name} must be an int >= 1, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class BatchSpec:
    """What a batch is: its size, sample shape, layout, dtype and conversion."""

    size: int
    shape: tuple[int, int] | None
    layout: str
    dtype: np.dtype
    mean: np.ndarray
    std: np.ndarray
    channels: int
    drop_last: bool
    with_indices: bool

    @classmethod
    def check(cls, size: Any, shape: Any, layout: Any, dtype: Any, mean: Any, std: Any,
              channels: Any, drop_last: Any, with_indices: Any) -> BatchSpec:
        """The validated spec; ``ValueError`` naming the first bad argument."""
        size = _positive_int(size, "size")
        if shape is not None:
            if not isinstance(shape, Sequence) or isinstance(shape, str) or len(shape) != 2:
                raise ArgumentError(f"batches shape must be (height, width), got {shape!r}")
            shape = (_positive_int(shape[0], "shape height"),
                     _positive_int(shape[1], "shape width"))
        if layout not in ("NCHW", "NHWC"):
            raise ArgumentError(f"batches layout must be 'NCHW' or 'NHWC', got {layout!r}")
        key = np.dtype(dtype).name if isinstance(dtype, (type, np.dtype)) else dtype
        if not isinstance(key, str) or key not in _DTYPES:
            raise ArgumentError(f"batches dtype must be 'float32' or 'float16', got {dtype!r}")
        if (isinstance(channels, (bool, np.bool_)) or not isinstance(channels, (int, np.integer))
                or channels not in (1, 3)):
            raise ArgumentError(f"batches channels must be the int 1 or 3, got {channels!r}")
        m = _per_channel(mean, "mean", channels, 0.0)
        s = _per_channel(std, "std", channels, 1.0)
        if np.any(s == 0):
            raise ArgumentError(f"batches std must be nonzero, got {std!r}")
        # values in [0, 1] converted: (x - mean) / std must fit the batch's dtype (else inf)
        with np.errstate(over="ignore"):  # (an overflow here is the refusal below)
            top = float(np.max(np.maximum(np.abs(m), np.abs(1.0 - m)) / np.abs(s)))
        largest = float(np.finfo(_DTYPES[key]).max)
        if not top <= largest:
            raise ArgumentError(f"batches mean and std: (x - mean) / std reaches {top:.3g} for "
                                f"x in [0, 1], beyond {key}'s largest {largest:.6g} (a std "
                                f"that small overflows); got mean={mean!r}, std={std!r}")
        for v, name in ((drop_last, "drop_last"), (with_indices, "with_indices")):
            if not isinstance(v, (bool, np.bool_)):
                raise ArgumentError(f"batches {name} must be a bool, got {type(v).__name__}")
        return cls(size, shape, layout, np.dtype(_DTYPES[key]), m, s, int(channels),
                   bool(drop_last), bool(with_indices))

    def check_fits(self, samples: int, hw: tuple[int, int], memory: int | None,
                   device: int) -> None:
        """``ValueError`` naming ``size`` (or ``shape``) when a batch of ``samples`` samples
        of ``hw`` pixels needs more bytes than ``device`` has (``memory``; None: unknown),
        before anything is allocated: memory follows the data, not the argument."""
        need = samples * self.channels * int(hw[0]) * int(hw[1]) * self.dtype.itemsize
        if memory is not None and need > memory:
            what = f"size {self.size}" if self.shape is None else \
                f"size {self.size} and shape {self.shape}"
            raise ArgumentError(
                f"batches {what}: a batch of {samples} samples of {self.channels} x "
                f"{hw[0]} x {hw[1]} {self.dtype.name} needs {need} bytes, more than device "
                f"{device} has ({memory} bytes)")

    def batch_shape(self, n: int, hw: tuple[int, int]) -> tuple[int, int, int, int]:
        """Shape of a batch of ``n`` samples of ``hw`` pixels."""
        h, w = hw
        c = self.channels
        return (n, c, h, w) if self.layout == "NCHW" else (n, h, w, c)


def sample_channels(shape: tuple[int, ...], channels: int, k: int) -> int:
    """Channels of an output of ``shape`` (1: grey); ValueError where ``channels`` refuses it."""
    cin = 1 if len(shape) == 2 else int(shape[2])
    if channels == 1 and cin != 1:
        raise ValueError(f"batches(channels=1) takes grey outputs only; output {k} has "
                         f"shape {tuple(shape)}")
    return cin


def convert_reference(value: np.ndarray, spec: BatchSpec) -> np.ndarray:
    """NumPy reference of one sample's conversion (what the batch kernel computes).

    The value is (h, w) or (h, w, c) as a Generator output; the result is (C, H, W) or
    (H, W, C) in ``spec.dtype``. The arithmetic is ``kernels.convert``'s, in float64.
    """
    from ..graph.plan.schedule import full_range
    from ..kernels import convert as cv

    v = value if value.ndim == 3 else value[:, :, None]
    h, w, cin = v.shape
    full = full_range(v.dtype)
    H, W = spec.shape or (h, w)
    src = v[:, :, [0 if cin == 1 else c for c in range(spec.channels)]].astype(np.float64)
    if spec.shape is not None:
        fy = cv.grid_coordinate(np.arange(H, dtype=np.float64), h / H)
        fx = cv.grid_coordinate(np.arange(W, dtype=np.float64), w / W)
        y0, x0 = np.floor(fy), np.floor(fx)
        ty, tx = (fy - y0)[:, None, None], (fx - x0)[None, :, None]
        ya, yb = np.clip(y0, 0, h - 1).astype(int), np.clip(y0 + 1, 0, h - 1).astype(int)
        xa, xb = np.clip(x0, 0, w - 1).astype(int), np.clip(x0 + 1, 0, w - 1).astype(int)
        src = cv.lerp2(src[ya][:, xa], src[ya][:, xb], src[yb][:, xa], src[yb][:, xb], ty, tx)
    out = cv.normalize(src, full, spec.mean, spec.std).astype(np.float32)
    if spec.layout == "NCHW":
        out = out.transpose(2, 0, 1)
    return np.ascontiguousarray(out.astype(spec.dtype))


@functools.cache
def _convert_fn(cin: int, channels: int, layout: str, resize: bool) -> Any:
    return codegen_convert.convert_kernel(cin, channels, layout, resize,
                                          runtime.codegen_target, runtime.simulated)


def write_sample(out: Any, pos: Any, src: Any, spec: BatchSpec, consts: tuple[Any, Any],
                 hw: tuple[int, int], device: int) -> None:
    """Convert the stored images ``src`` (nb, h, w, cin) into samples ``pos`` of ``out``."""
    from ..graph.exec.batch import launch
    from ..graph.plan.schedule import full_range

    nb, h, w, cin = src.shape
    if pos.shape[0] != nb:  # the kernel checks no bounds
        raise ValueError(f"write_sample: {nb} images for {pos.shape[0]} positions")
    H, W = hw
    if H * W == 0:
        return  # empty samples: nothing to write (nor scale factors to divide by)
    resize = (H, W) != (h, w)
    if resize and h * w == 0:
        # an empty sample has no edge to repeat: every position reads the zero outside it
        # (as ``resize`` does), here from a one-pixel zero image
        src = runtime.from_host(np.zeros((nb, 1, 1, cin), dtype=np.dtype(src.dtype)), device)
        h = w = 1
    fn = _convert_fn(int(cin), spec.channels, spec.layout, resize)
    launch(fn, nb, H, W, device, src, pos, out, consts[0], consts[1],
           full_range(src.dtype), h / H, w / W)


@functools.cache
def fused_writer(sig: Any, gated: bool, channels: int, layout: str, wide: bool = False,
                 u8: bool | None = None, words: bool = False) -> Any:
    """The compiled gather of ``sig`` that writes the batch (``batch_writer``; ``u8``:
    whether its source is uint8, None if not known; ``words``: it takes the source's uint64
    view last and reads its taps as words), cached."""
    return batch_writer.gather_writer_kernel(sig, runtime.codegen_target, runtime.simulated,
                                             gated, channels, layout, wide, u8, words)


def cast_batch(out: Any, dtype: np.dtype, device: int) -> Any:
    """``out`` (float32) rounded into ``dtype`` (float16), or ``out`` itself."""
    if np.dtype(dtype) == np.float32:
        return out
    if not runtime.caps.device_memory:
        return out.astype(dtype)
    dst = runtime.empty(tuple(out.shape), dtype, device)
    n = int(math.prod(out.shape))
    from numba.core.errors import NumbaError

    try:
        runtime.launch_1d(_cast_fn(), n, device, out.reshape(n), dst.reshape(n))
    except NumbaError:  # pragma: no cover - a numba-cuda that cannot compile float16 stores
        runtime.synchronize(device)
        return runtime.from_host(runtime.to_host(out).astype(dtype), device)
    return dst


@functools.cache
def _cast_fn() -> Any:
    return codegen_convert.cast_kernel(runtime.simulated)
