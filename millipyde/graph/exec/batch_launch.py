"""The launch of a batched kernel over ``nb`` same-size images (``batch_group``,
``batch_stencil``, the batch writers)."""

from __future__ import annotations

from typing import Any

from ...backend import ACTIVE as runtime

#: Blocks a batched launch aims at: several waves of 256-thread blocks on a 132-SM GPU.
_TARGET_BLOCKS = 2048


def launch(kernel: Any, nb: int, h: int, w: int, device: int, *args: Any) -> None:
    """Run a batched kernel over ``nb`` images of ``h`` x ``w`` (grid z = images on GPUs)."""
    if nb == 0 or h == 0 or w == 0:
        return
    if not runtime.caps.grid_launches:
        # (the cpu: its kernels loop over every row of every image; the count sizes its parts)
        runtime.launch_2d(kernel, nb * h, w, device, *args)
        return
    if runtime.simulated:
        block = (min(8, w), min(4, h), 1)
    else:
        block = (32, 8, 1)
    gx, gz = min(-(-w // block[0]), 65535), min(nb, 65535)
    # Rows stride over the grid (the kernels loop): only enough blocks in y to fill the GPU,
    # so each thread runs its image's prologue (parameters, index map, gates) once for many
    # rows instead of once per pixel.
    gy = max(1, min(-(-h // block[1]), -(-_TARGET_BLOCKS // (gx * gz)), 65535))
    launch_grid(kernel, (gx, gy, gz), block, device, args)


def launch_grid(kernel: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
                device: int, args: tuple, shared: int = 0) -> None:
    """``runtime.launch_grid``, straight through the kernel's driver template where the
    backend has one for it (``launch_batched``: the batch engine's launches skip the general
    path's per-argument work)."""
    direct = getattr(runtime, "launch_batched", None) if REPLAY else None
    if direct is None or not runtime.fast_launch or \
            not direct(kernel, grid, block, device, args, shared):
        runtime.launch_grid(kernel, grid, block, device, *args, shared=shared)


#: Batched launches straight through their driver template where the backend has one
#: (``CudaPacks.launch_batched``); False: every launch through ``launch_grid`` (tests compare).
REPLAY = True
