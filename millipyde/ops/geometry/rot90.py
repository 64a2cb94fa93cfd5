"""``rot90`` / ``random_rot90``: quarter turns (``np.rot90``; albumentations ``RandomRotate90``)
as an integer index map, which fuses into the gather of its neighbours."""

import numpy as np

from ...kernels.registry import index_map
from ..base import Draws, Emit, ImageKind, chance, columns, define, integer


def _turned_shape(h, w, k):
    # arithmetic, not a branch: a batch passes arrays of sizes and turns
    odd = k % 2
    return h + (w - h) * odd, w + (h - w) * odd


@index_map(nparams=1, shape=_turned_shape, name="rot90")
def quarter_turns(y, x, h, w, k):
    """``np.rot90(img, k)``: ``k`` (0..3) counter-clockwise quarter turns; ``h`` and ``w`` are
    the input's (the map stays affine: the branches read only the parameter)."""
    if k == 1.0:
        return x, w - 1 - y
    if k == 2.0:
        return h - 1 - y, w - 1 - x
    if k == 3.0:
        return h - 1 - x, y
    return y, x


ROT90 = define("rot90", "geometry", [quarter_turns],
               reference="numpy.rot90 (albumentations RandomRotate90)")


def _sample_fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    return [Emit("rot90", columns(args[0], n=len(hw)))]


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    # albumentations' randint(0, 3) inclusive: int(u * 4), each quarter turn 1/4; with the
    # op's own coin p (u1 < p turns, else k = 0, the identity)
    k = np.minimum((d.u(0) * 4).astype(np.int64), 3)
    k = np.where(d.u(1) < args[0], k, 0)
    return [Emit("rot90", columns(k.astype(np.float64), n=len(hw)))]


@ROT90.form(sample=_sample_fixed)
def rot90(kind: ImageKind, k: int = 1) -> tuple:
    """``np.rot90(img, k)``: ``k`` counter-clockwise quarter turns (any integer; negative turns
    clockwise); odd ``k`` swaps the height and width."""
    return (integer(k, "k") % 4,)


@ROT90.form(random=True, sample=_sample_random)
def random_rot90(kind: ImageKind, p: float = 1.0) -> tuple:
    """albumentations ``RandomRotate90``: with probability ``p``, ``k`` uniform in 0..3
    quarter turns (``np.rot90``)."""
    return (chance(p, "p"),)
