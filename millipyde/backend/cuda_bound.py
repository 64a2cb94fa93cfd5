"""The cuda backend's replay launches (``Backend.bind_2d``): one 2-D launch kept with all that
does not change between replays already worked out.

A replayed one-gather plan launches the same kernel on the same device with arrays of the same
layouts again and again; only the source's address, the new output's and the scalars change.
``RawBound2D`` keeps the kernel's driver-level template (``rawlaunch``), the flattened
argument values of the launch it was bound from, the positions of the two addresses and of the
scalars among them, the grid, and an allocator of the output's layout (``CupyPool.allocator``).
A call allocates, writes the three changing parts into a copy of the values and makes one
``cuLaunchKernel``. Instead of ``on_device`` it checks that the device's context is the
thread's current one (one driver call); whatever it does not cover (another context current,
another source layout, a recording thread, the cached path switched off, an allocation that
fails) goes through the general ``Bound2D``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import launcher, rawlaunch
from .base import Bound2D
from .pool import stream_handle
from .rawlaunch import Template


class RawBound2D:
    """A 2-D launch through the driver with a pre-flattened parameter block."""

    __slots__ = ("backend", "generic", "template", "alloc", "device", "context", "grid",
                 "block", "vals", "src_slot", "dst_slot", "first_scalar", "src_shape",
                 "src_strides")

    def __init__(self, backend: Any, generic: Bound2D, template: Template,
                 alloc: Callable[[int], Any], device: int, context: int,
                 grid: tuple[int, int, int], block: tuple[int, int, int], args: tuple,
                 src: Any, nscalars: int) -> None:
        self.backend, self.generic, self.template, self.alloc = backend, generic, template, alloc
        self.device, self.context, self.grid, self.block = device, context, grid, block
        self.vals = template.values(args)
        first = template.slots()
        # (numba-cuda's array ABI: meminfo, parent, nitems, itemsize, data, shape, strides)
        self.src_slot, self.dst_slot = first[0] + 4, first[1] + 4
        self.first_scalar = first[len(args) - nscalars] if nscalars else len(self.vals)
        self.src_shape, self.src_strides = tuple(src.shape), tuple(src.strides)

    @staticmethod
    def fits(template: Template, nargs: int, nscalars: int) -> bool:
        """Whether launches of ``template`` take two arrays first and ``nscalars`` scalars
        last (of ``nargs`` arguments): what ``RawBound2D`` rewrites per call."""
        kinds = template.kinds
        return (len(kinds) == nargs and nargs >= 2 + nscalars and kinds[0] >= 0
                and kinds[1] >= 0 and all(k < 0 for k in kinds[nargs - nscalars:]))

    def __call__(self, src: Any, params: list[float]) -> Any:
        """Launch on ``src`` with the scalar ``params``; the new output buffer."""
        b = self.backend
        if (src.shape != self.src_shape or src.strides != self.src_strides
                or not (launcher.ENABLED and launcher.DIRECT)
                or getattr(b._tls, "recording", None) is not None
                or rawlaunch.current_context() != self.context):
            return self.generic(src, params)
        stream = b.stream_on(self.device)
        if stream is None:
            return self.generic(src, params)
        handle = stream_handle(stream)
        try:
            dst = self.alloc(handle)
        except MemoryError:
            # the general path allocates again and reports a failure as the backend does
            return self.generic(src, params)
        vals = self.vals.copy()
        vals[self.src_slot] = int(src.gpu_data.device_pointer)
        vals[self.dst_slot] = int(dst.gpu_data.device_pointer)
        vals[self.first_scalar:] = params
        self.template.launch_values(vals, self.grid, self.block, 0, handle)
        return dst
