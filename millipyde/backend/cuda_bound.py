"""The cuda backend's replay launches (``Backend.bind_2d``): one 2-D launch kept with all that
does not change between replays already worked out.

A replayed one-gather plan launches the same kernel on the same device with arrays of the same
layouts again and again; only the source's address, the new output's and the scalars change.
``RawBound2D`` keeps the kernel's function handle, its own parameter block (``rawlaunch``'s
layout) packed once from the launch it was bound from, the offsets of the two addresses and of
the scalars in it, the grid, and an allocator of the output's layout (``CupyPool.allocator``).
A call allocates, packs the three changing parts over the block and makes one
``cuLaunchKernel``. Instead of ``on_device`` it checks that the device's context is the
thread's current one (one driver call); whatever it does not cover (another context current,
a recording thread, the cached path switched off, an allocation that fails) goes through the
general ``Bound2D``, and a source of another layout is refused (None) as that refuses it.

From its ``cuda_jit.AFTER``-th call a replay launch makes the context check, the block's writes
and ``cuLaunchKernelEx`` as two compiled calls (``cuda_jit``) over its own ``State``, a copy of
the block; ``RawCopy`` takes the compiled check and copy once those are loaded. Where they do
not load (a fake driver, ``cuda_jit.ENABLED`` off) the ctypes calls stay.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from . import cuda_jit, launcher, rawlaunch
from .base import Bound2D
from .pool import stream_handle
from .rawlaunch import Template


class RawBound2D:
    """A launch (2-D, or an explicit grid with dynamic shared memory) through the driver with
    its own pre-packed parameter block."""

    __slots__ = ("backend", "generic", "alloc", "device", "context", "lib", "handle", "config",
                 "shared", "block", "pointers", "lock", "src_at", "dst_at", "scalars_at",
                 "scalars", "src_shape", "src_strides", "current", "current_ref", "stream",
                 "ex", "ex_config", "ex_args", "table_at", "jit", "state", "scalars_in",
                 "size", "warm", "packed")

    def __init__(self, backend: Any, generic: Bound2D, template: Template,
                 alloc: Callable[[int], Any], device: int, context: int,
                 grid: tuple[int, int, int], block: tuple[int, int, int], args: tuple,
                 src: Any, nscalars: int, shared: int = 0) -> None:
        self.backend, self.generic, self.alloc = backend, generic, alloc
        self.device, self.context, self.shared = device, context, shared
        self.lib, self.handle, self.config = rawlaunch.libcuda(), template.handle, grid + block
        first = template.slots()
        # (numba-cuda's array ABI: meminfo, parent, nitems, itemsize, data, shape, strides)
        self.src_at, self.dst_at = 8 * (first[0] + 4), 8 * (first[1] + 4)
        # the first fixed argument's address, where it is an array (a per-call table)
        self.table_at = (8 * (first[2] + 4) if len(args) - nscalars > 2
                         and template.kinds[2] >= 0 else None)
        at = first[len(args) - nscalars] if nscalars else len(template.codes)
        self.scalars_at = 8 * at
        self.scalars = struct.Struct("<" + "".join(template.codes[at:]))
        # every slot packed once; a call rewrites the two addresses and the scalars
        self.block = ctypes.create_string_buffer(max(template.layout.size, 8))
        template.layout.pack_into(self.block, 0, *template.values(args))
        base = ctypes.addressof(self.block)
        n = max(len(template.codes), 1)
        self.pointers = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        self.lock = threading.Lock()  # the driver copies the block before cuLaunchKernel returns
        self.src_shape, self.src_strides = tuple(src.shape), tuple(src.strides)
        # the context check's out-parameter, made once (written under ``lock``)
        self.current = ctypes.c_void_p()
        self.current_ref = ctypes.byref(self.current)
        # the last stream launched on and its handle, one tuple (read and replaced at once)
        self.stream: tuple[Any, int] = (None, 0)
        # ``cuLaunchKernelEx`` where the driver has it: its configuration (the stream written
        # under ``lock`` when it changes) and its four arguments, made once
        self.ex = rawlaunch.launch_ex(self.lib)
        self.ex_config = rawlaunch.LaunchConfig(*self.config, shared, None, None, 0)
        self.ex_args = (ctypes.byref(self.ex_config), self.handle,
                        self.pointers, None)
        # the compiled call (``cuda_jit``) and its state, a copy of the block, from the
        # ``cuda_jit.AFTER``-th call on (a process's first compiled call costs ~0.3 s)
        self.jit = self.state = None
        self.scalars_in, self.size = 0, template.layout.size
        # the scalars last packed into the block (and the state: ``_attach`` copies it), where
        # they came as a tuple: a call with the same tuple (a replay launch's repeated
        # parameters, ``execute.ReplayLaunch``) finds them packed (written under ``lock``)
        self.packed: tuple | None = None
        self.warm = cuda_jit.AFTER if self.ex is not None else -1
        if self.warm == 0:
            self._attach()

    def _attach(self) -> None:
        """Take the compiled call where it loads (else keep the ctypes one for good)."""
        self.warm = -1
        got = cuda_jit.launch_state(self.lib, self.context, self.handle.value or 0,
                                    self.config, self.shared, self.size, len(self.pointers),
                                    self.src_at, self.dst_at, self.table_at)
        if got is not None:
            jit, state, at = got
            state.view(np.uint8)[at:at + self.size] = np.frombuffer(self.block, np.uint8,
                                                                     self.size)
            self.scalars_in, self.state, self.jit = at + self.scalars_at, state, jit

    def _general(self, src: Any, params: list[float], table: Any) -> Any:
        """The general launch (``Bound2D``), given the table only where there is one."""
        if table is None:
            return self.generic(src, params)
        return self.generic(src, params, table)

    @staticmethod
    def fits(template: Template, nargs: int, nscalars: int) -> bool:
        """Whether launches of ``template`` take two arrays first and ``nscalars`` scalars
        last (of ``nargs`` arguments): what ``RawBound2D`` rewrites per call."""
        kinds = template.kinds
        return (len(kinds) == nargs and nargs >= 2 + nscalars and kinds[0] >= 0
                and kinds[1] >= 0 and all(k < 0 for k in kinds[nargs - nscalars:]))

    def __call__(self, src: Any, params: list[float] | tuple[float, ...],
                 table: Any = None) -> Any:
        """Launch on ``src`` with the scalar ``params`` (and ``table`` in place of the first
        fixed argument, an array of the bound one's layout: ``Bound2D``); the new output."""
        b = self.backend
        if (src.shape != self.src_shape or src.strides != self.src_strides
                or not (launcher.ENABLED and launcher.DIRECT)
                or getattr(b._tls, "recording", None) is not None
                or (table is not None and self.table_at is None)):
            return self._general(src, params, table)
        stream = b.stream_on(self.device)
        if stream is None:
            return self._general(src, params, table)
        last = self.stream
        if last[0] is stream:
            handle = last[1]
        else:
            handle = stream_handle(stream)
            self.stream = (stream, handle)
        jit = self.jit
        if jit is None:
            if self.warm > 0:
                self.warm -= 1
                if self.warm == 0:
                    with self.lock:  # (the block copied as a launch leaves it)
                        self._attach()
            return self._ctypes_call(src, params, table, handle)
        state = self.state
        if not jit.current_is(state):
            return self._general(src, params, table)
        try:
            dst = self.alloc(handle)
        except MemoryError:
            # the general path allocates again and reports a failure as the backend does
            return self._general(src, params, table)
        with self.lock:
            if params is not self.packed:
                self.scalars.pack_into(state, self.scalars_in, *params)
                self.packed = params if type(params) is tuple else None
            rc = jit.launch(state, int(src.gpu_data.device_pointer),
                            int(dst.gpu_data.device_pointer),
                            0 if table is None else int(table.gpu_data.device_pointer), handle)
        if rc:
            _failed("cuLaunchKernelEx", rc)
        return dst

    def _ctypes_call(self, src: Any, params: list[float], table: Any, handle: int) -> Any:
        """``__call__`` through ctypes calls (no compiled functions): the same steps."""
        lock = self.lock
        with lock:
            # (``rawlaunch.current_context``, its out-parameter made once)
            other = (self.lib.cuCtxGetCurrent(self.current_ref)
                     or self.current.value != self.context)
        if other:
            return self._general(src, params, table)
        try:
            dst = self.alloc(handle)
        except MemoryError:
            # the general path allocates again and reports a failure as the backend does
            return self._general(src, params, table)
        block = self.block
        with lock:
            _ADDRESS.pack_into(block, self.src_at, int(src.gpu_data.device_pointer))
            _ADDRESS.pack_into(block, self.dst_at, int(dst.gpu_data.device_pointer))
            if table is not None:
                _ADDRESS.pack_into(block, self.table_at, int(table.gpu_data.device_pointer))
            if params is not self.packed:
                self.scalars.pack_into(block, self.scalars_at, *params)
                self.packed = params if type(params) is tuple else None
            ex = self.ex
            if ex is not None:
                config = self.ex_config
                if (config.hStream or 0) != handle:
                    config.hStream = handle
                rc = ex(*self.ex_args)
            else:
                rc = self.lib.cuLaunchKernel(self.handle, *self.config, self.shared, handle,
                                             self.pointers, None)
        if rc:
            _failed("cuLaunchKernel", rc)
        return dst


_ADDRESS = struct.Struct("<q")  # an array's data slot ("q", as ``rawlaunch._codes``)


def _failed(call: str, rc: int) -> None:
    """Raise numba-cuda's error for a driver call that returned ``rc``."""
    from numba.cuda.cudadrv.driver import CudaAPIError

    raise CudaAPIError(rc, f"{call} failed with CUresult {rc}")


class RawCopy:
    """A replayed same-device copy (``clone()`` then ``_materialize()``) through the driver:
    an output from the layout's allocator and one ``cuMemcpyDtoDAsync`` on the launches'
    stream, where the general path goes through numba-cuda's ``copy_to_device`` (its context
    lookups and checks, a Python footprint that also leaves the next op's code cold). A call
    it does not cover (another layout, another context current, the stream not known yet,
    a failed allocation) returns None: the caller takes the general path."""

    __slots__ = ("backend", "alloc", "device", "context", "lib", "shape", "strides", "dtype",
                 "nbytes", "current", "current_ref", "lock", "jit", "state", "tried")

    def __init__(self, backend: Any, alloc: Callable[[int], Any], device: int, context: int,
                 src: Any) -> None:
        self.backend, self.alloc, self.device, self.context = backend, alloc, device, context
        self.lib = rawlaunch.libcuda()
        self.shape, self.strides, self.dtype = tuple(src.shape), tuple(src.strides), src.dtype
        self.nbytes = int(src.size) * src.dtype.itemsize
        self.current = ctypes.c_void_p()
        self.current_ref = ctypes.byref(self.current)
        self.lock = threading.Lock()  # (the context check's out-parameter)
        # the compiled copy, taken once a replay launch has loaded the compiled functions
        self.jit = self.state = None
        self.tried = False

    def __call__(self, src: Any) -> Any:
        """A copy of ``src`` (the bound layout) on the device, or None (not covered)."""
        if (src.shape != self.shape or src.strides != self.strides or src.dtype != self.dtype
                or not (launcher.ENABLED and launcher.DIRECT)):
            return None
        stream = self.backend.stream_on(self.device)
        if stream is None:
            return None
        jit = self.jit
        if jit is None and not self.tried and cuda_jit.loaded():
            self.tried = True
            got = cuda_jit.copy_state(self.lib, self.context)
            if got is not None:
                jit, self.state = got
                self.jit = jit
        if jit is not None:
            other = not jit.current_is(self.state)
        else:
            with self.lock:
                other = (self.lib.cuCtxGetCurrent(self.current_ref)
                         or self.current.value != self.context)
        if other:
            return None
        handle = stream_handle(stream)
        try:
            dst = self.alloc(handle)
        except MemoryError:
            return None  # the general path allocates again and reports a failure
        dst_ptr, src_ptr = int(dst.gpu_data.device_pointer), int(src.gpu_data.device_pointer)
        if jit is not None:
            rc = jit.copy(self.state, dst_ptr, src_ptr, self.nbytes, handle)
        else:
            rc = self.lib.cuMemcpyDtoDAsync_v2(dst_ptr, src_ptr, self.nbytes, handle)
        if rc:
            _failed("cuMemcpyDtoDAsync", rc)
        return dst
