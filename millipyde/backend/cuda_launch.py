"""The cuda backend's kernel launches (a part of ``CudaBackend``): the cached fast path,
first launches one at a time, shared memory past 48 KB, 1-D, 2-D and explicit grids."""

from __future__ import annotations

from typing import Any

from . import launcher, rawlaunch
from .base import Bound2D, Views
from .cuda_bound import RawBound2D, RawCopy


def _type_key(args: tuple) -> tuple:
    return tuple((a.dtype.str, a.ndim) if hasattr(a, "dtype") and hasattr(a, "ndim")
                 else type(a).__name__ for a in args)


def _same_start(view: Any, buffer: Any) -> bool:
    """Whether ``view`` starts where ``buffer`` does (a replay launch passes the buffer's
    address in the view's place)."""
    return int(view.gpu_data.device_pointer) == int(buffer.gpu_data.device_pointer)


class CudaLaunches:
    """Launches and per-block limits of ``CudaBackend``."""

    # -- launches and limits -----------------------------------------------------------
    def shared_limit(self, device: int) -> int:
        """Most dynamic shared memory one block may use on ``device`` (opting in past 48 KB)."""
        if device not in self._shared_limits:
            with self.on_device(device):
                dev = self.cuda.get_current_device()
                self._shared_limits[device] = int(dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        return self._shared_limits[device]

    def _opt_in_shared(self, kernel: Any, device: int, args: tuple) -> None:
        # the limit is an attribute of the compiled kernel on one device: compile (or load) it
        # for these argument types and raise its dynamic shared memory ceiling to the device's
        # opt-in maximum, less what the kernel declares statically
        from numba.cuda.cudadrv.driver import binding, driver

        compiled = kernel._compile_for_args(*args)
        compiled.bind()
        fn = compiled._codelibrary.get_cufunc()
        attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        driver.cuKernelSetAttribute(attr, self.shared_limit(device)
                                    - compiled.shared_mem_per_block, fn.handle, fn.device.id)

    def _launch(self, kernel: Any, device: int, args: tuple, *config: Any) -> None:
        if self._recorded(kernel, device, args):
            return
        shared = config[3] if len(config) > 3 else 0
        fast = self.fast_launch and launcher.ENABLED  # ENABLED: MILLIPYDE_FAST_LAUNCH
        if fast and launcher.launch(kernel, device, args, *config[:3], shared):
            return
        # numba-cuda compiles and loads a kernel's module on its first launch for a signature
        # and device; two threads doing that at once trip its module table ("key already in
        # dictionary"), so first launches go one at a time.
        key = (id(kernel), device, _type_key(args))  # warm per device; the lock is global
        big = shared > self.SHARED_DEFAULT
        if key in self._warm and (not big or key in self._opted_in):
            kernel[config](*args)
        else:
            with self.first_launch_lock:
                if big and key not in self._opted_in:
                    if shared > self.shared_limit(device):
                        raise ValueError(
                            f"kernel {getattr(kernel, '__name__', kernel)} asks for {shared} B "
                            f"of shared memory per block; device {device} allows "
                            f"{self.shared_limit(device)}")
                    self._opt_in_shared(kernel, device, args)
                    self._opted_in.add(key)
                kernel[config](*args)
                self._warm.add(key)
        if fast and not launcher.known(kernel, device, args):
            launcher.remember(kernel, device, args, self.shared_limit(device)
                              if key in self._opted_in else self.SHARED_DEFAULT)

    #: threads of a 2-D launch's block, (x, y)
    BLOCK_2D = (32, 8)

    def _grid_2d(self, h: int, w: int) -> tuple[tuple[int, int], tuple[int, int]]:
        bx, by = self.BLOCK_2D
        return (min((w + bx - 1) // bx, 65535), min((h + by - 1) // by, 65535)), (bx, by)

    def launch_2d(self, kernel: Any, h: int, w: int, device: int, *args: Any) -> None:
        if h == 0 or w == 0:
            return
        grid, block = self._grid_2d(h, w)
        with self.on_device(device):
            self._launch(kernel, device, args, grid, block, self.current_stream())

    def bind_2d(self, kernel: Any, h: int, w: int, device: int, src: Any, dst: Any,
                args: tuple, fixed: int, views: Views) -> Bound2D | RawBound2D | None:
        """Through the driver with a pre-packed block (``cuda_bound``) where the cached
        launch path holds a template of this launch; None until it has decided on one."""
        generic = Bound2D(self, kernel, h, w, device, src, dst, tuple(args[2:2 + fixed]), views)
        return self._raw_bound(generic, kernel, *self._grid_2d(h, w), 0, device, src, dst, args,
                               fixed)

    def bind_grid(self, kernel: Any, grid: tuple[int, ...], block: tuple[int, ...],
                  device: int, src: Any, dst: Any, args: tuple, fixed: int, views: Views,
                  shared: int = 0) -> Bound2D | RawBound2D | None:
        """``bind_2d`` of an explicit grid (``launch_grid``)."""
        generic = Bound2D(self, kernel, 0, 0, device, src, dst, tuple(args[2:2 + fixed]), views,
                          (grid, block, shared))
        return self._raw_bound(generic, kernel, grid, block, shared, device, src, dst, args,
                               fixed)

    def _raw_bound(self, generic: Bound2D, kernel: Any, grid: Any, block: Any, shared: int,
                   device: int, src: Any, dst: Any, args: tuple, fixed: int
                   ) -> Bound2D | RawBound2D | None:
        if not (self.fast_launch and launcher.ENABLED and launcher.DIRECT):
            return generic
        if not launcher.known(kernel, device, args):
            return None  # the kernel's first launch of these kinds is not kept yet
        template = launcher.template_of(kernel, device, args)
        pool = self._cupy_pool()
        nscalars = len(args) - 2 - fixed
        if (template is None or pool is None or 0 in dst.shape
                or shared > launcher.shared_max(kernel, device, args)
                or not RawBound2D.fits(template, len(args), nscalars)
                or not _same_start(args[0], src) or not _same_start(args[1], dst)):
            return generic
        context = rawlaunch.current_context()  # (the runner has the device's current)
        if context is None:
            return generic
        alloc = pool.allocator(tuple(dst.shape), dst.dtype, device, self._context)
        return RawBound2D(self, generic, template, alloc, device, context, rawlaunch.dims(grid),
                          rawlaunch.dims(block), args, src, nscalars, shared)

    def bind_copy(self, src: Any, device: int) -> RawCopy | None:
        """A replayed same-device copy of buffers laid out as ``src`` through the driver
        (``cuda_bound.RawCopy``), where the cached launch path and CuPy's pool are on and
        ``src`` is C-contiguous; else None (the general ``copy``)."""
        if not (self.fast_launch and launcher.ENABLED and launcher.DIRECT):
            return None
        pool = self._cupy_pool()
        if (pool is None or src.size == 0 or not src.is_c_contiguous()
                or rawlaunch.libcuda() is None):
            return None
        context = rawlaunch.current_context()  # (the runner has the device's current)
        if not context:
            return None
        alloc = pool.allocator(tuple(src.shape), src.dtype, device, self._context)
        return RawCopy(self, alloc, device, context, src)

    def launch_grid(self, kernel: Any, grid: tuple[int, ...], block: tuple[int, ...],
                    device: int, *args: Any, shared: int = 0) -> None:
        if 0 in grid:
            return
        with self.on_device(device):
            self._launch(kernel, device, args, grid, block, self.current_stream(), shared)

    def launch_blocks(self, kernel: Any, blocks: int, threads: int, device: int,
                      *args: Any) -> None:
        with self.on_device(device):
            self._launch(kernel, device, args, blocks, threads, self.current_stream())
