"""``elastic_grid`` / ``random_elastic_grid``: a smooth random warp, the coarse-grid
approximation of torchvision's ``ElasticTransform`` (and the kin of albumentations'
``GridDistortion``): a 5 x 5 grid of displacements spread evenly over the image (corners
included), interpolated between the four nearest control points with smoothstep weights
(``3 t^2 - 2 t^3``: a C1 field, no overshoot), each output pixel reading its input at its own
position plus the field, sampled bilinearly with zero outside.

How it differs from torchvision's ``ElasticTransform(alpha, sigma)``: there, the field is
uniform noise per pixel smoothed by a Gaussian of ``sigma`` pixels, so its wiggles are about
``sigma`` wide whatever the image's size; a gather computes each pixel's position from per-image
parameters with no side buffer, which holds a field of 25 control points, not one value per
pixel. Here the wiggles are a quarter of the image wide (the grid's cells) and their size is
``magnitude`` cells. ``torchvision``'s class stays unsupported in ``millipyde.transforms`` (its
message names this op).

The map is not affine: it runs as the gather's map (the ``user_map`` kind, as ``@mp.index_map``
ops), one kernel with its neighbours, and boxes, masks and keypoints cannot follow it (their
inverse map is unknown): an image with targets refuses it, naming the op, and is unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...kernels.registry import OpSpec, register
from ..base import Draws, Emit, ImageKind, between, columns, define, number

#: control points per axis (the kernel's 2 * GRID**2 parameters: every dy, then every dx; its
#: blend is written out for 5)
GRID = 5


def elastic_grid_map(y, x, h, w, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14,
                     a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, b0, b1, b2, b3, b4, b5, b6,
                     b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22,
                     b23, b24):
    """Where output pixel ``(y, x)`` reads: ``(y + dy * cy, x + dx * cx)``, ``dy``, ``dx`` the
    control displacements (in cells: ``cy = (h - 1) / (GRID - 1)`` pixels) of the cell around
    it blended with smoothstep weights; control point ``(i, j)`` (row-major, ``a`` its dy,
    ``b`` its dx) sits at pixel ``(i cy, j cx)``.

    The blend is written as a weighted sum over every control point, the weights zero outside
    the pixel's cell: straight-line arithmetic, where picking four of 50 parameters by a
    computed index would be a tuple in a GPU thread's local memory or a chain of branches.
    Zero weights add exact zeros, so the value is the four-point blend's, bit for bit."""
    cy = (h - 1.0) / (GRID - 1.0) if h > 1 else 1.0
    cx = (w - 1.0) / (GRID - 1.0) if w > 1 else 1.0
    gy = min(max(y / cy, 0.0), GRID - 1.0)
    gx = min(max(x / cx, 0.0), GRID - 1.0)
    iy = min(int(gy), GRID - 2)
    ix = min(int(gx), GRID - 2)
    ty = gy - iy
    tx = gx - ix
    sy = ty * ty * (3.0 - 2.0 * ty)
    sx = tx * tx * (3.0 - 2.0 * tx)
    # each row's and column's weight: 1 - s and s on the cell's two, zero elsewhere
    wy0 = (1.0 - sy) * (iy == 0)
    wy1 = (1.0 - sy) * (iy == 1) + sy * (iy == 0)
    wy2 = (1.0 - sy) * (iy == 2) + sy * (iy == 1)
    wy3 = (1.0 - sy) * (iy == 3) + sy * (iy == 2)
    wy4 = sy * (iy == 3)
    wx0 = (1.0 - sx) * (ix == 0)
    wx1 = (1.0 - sx) * (ix == 1) + sx * (ix == 0)
    wx2 = (1.0 - sx) * (ix == 2) + sx * (ix == 1)
    wx3 = (1.0 - sx) * (ix == 3) + sx * (ix == 2)
    wx4 = sx * (ix == 3)
    dy = (
        wy0 * (wx0 * a0 + wx1 * a1 + wx2 * a2 + wx3 * a3 + wx4 * a4)
        + wy1 * (wx0 * a5 + wx1 * a6 + wx2 * a7 + wx3 * a8 + wx4 * a9)
        + wy2 * (wx0 * a10 + wx1 * a11 + wx2 * a12 + wx3 * a13 + wx4 * a14)
        + wy3 * (wx0 * a15 + wx1 * a16 + wx2 * a17 + wx3 * a18 + wx4 * a19)
        + wy4 * (wx0 * a20 + wx1 * a21 + wx2 * a22 + wx3 * a23 + wx4 * a24)
    )
    dx = (
        wy0 * (wx0 * b0 + wx1 * b1 + wx2 * b2 + wx3 * b3 + wx4 * b4)
        + wy1 * (wx0 * b5 + wx1 * b6 + wx2 * b7 + wx3 * b8 + wx4 * b9)
        + wy2 * (wx0 * b10 + wx1 * b11 + wx2 * b12 + wx3 * b13 + wx4 * b14)
        + wy3 * (wx0 * b15 + wx1 * b16 + wx2 * b17 + wx3 * b18 + wx4 * b19)
        + wy4 * (wx0 * b20 + wx1 * b21 + wx2 * b22 + wx3 * b23 + wx4 * b24)
    )
    return y + dy * cy, x + dx * cx


register(OpSpec("elastic_grid", "user_map", elastic_grid_map, 2 * GRID * GRID))

ELASTIC_GRID = define("elastic_grid", "geometry", ["elastic_grid"],
                      reference="torchvision ElasticTransform, approximated on a 5 x 5 grid "
                                "(albumentations GridDistortion's kin)")


@ELASTIC_GRID.form()
def elastic_grid(kind: ImageKind, displacement: Any) -> tuple:
    """Warp the image by the smooth field of ``displacement`` (2, 5, 5): the (dy, dx) of each
    point of a 5 x 5 grid spread evenly over the image, corners included, in cells (a quarter
    of the image's height, width), blended between grid points with smoothstep weights; each
    pixel reads its position plus the field, bilinearly, zero outside. Boxes, masks and
    keypoints cannot follow it (refused)."""
    try:
        d = np.asarray(displacement, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"displacement must be a (2, {GRID}, {GRID}) array of numbers, got "
                         f"{displacement!r}") from None
    if d.shape != (2, GRID, GRID) or not np.isfinite(d).all():
        raise ValueError(f"displacement must be a (2, {GRID}, {GRID}) array of finite numbers, "
                         f"got shape {d.shape}")
    return tuple(d.ravel().tolist())


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (m,) = args
    cols = [between(-m, m, d.u(t)) for t in range(2 * GRID * GRID)]
    return [Emit(ELASTIC_GRID.kernels[0], columns(*cols, n=len(hw)))]


@ELASTIC_GRID.form(random=True, sample=_sample_random)
def random_elastic_grid(kind: ImageKind, magnitude: float = 0.3) -> tuple:
    """A smooth random warp (torchvision's ``ElasticTransform`` on a coarse grid: see
    ``elastic_grid``): each of the 5 x 5 control points displaced by uniform draws in
    [-``magnitude``, ``magnitude``] cells (quarters of the image) along y and x, per image.
    ``magnitude`` in [0, 1]."""
    m = number(magnitude, "magnitude")
    if not 0.0 <= m <= 1.0:
        raise ValueError(f"magnitude must lie in [0, 1] (cells of the grid), got {m}")
    return (m,)
