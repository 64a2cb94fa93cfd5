"""``warp_affine`` / ``random_affine``: an affine map sampled bilinearly, and torchvision's
``RandomAffine`` parameters about the centre."""

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import sampler
from ..base import Draws, Emit, ImageKind, between, between1, define, number, pair, span


@sampler(nparams=6, name="warp_affine")
def affine_map(y, x, h, w, m00, m01, m02, m10, m11, m12):
    """skimage ``warp`` by ``AffineTransform(matrix=M)``: M maps output (col, row) to input."""
    return m10 * x + m11 * y + m12, m00 * x + m01 * y + m02


def affine_matrix(h: int, w: int, angle: float, translate: tuple[float, float],
                  scale: float, shear: tuple[float, float]) -> np.ndarray:
    """torchvision's ``_get_inverse_affine_matrix`` about the image centre, in pixels.

    The 2x3 map from output (col, row) to input (col, row): rotation by ``angle`` degrees,
    ``scale``, ``shear`` degrees (x, y), then ``translate`` pixels, all about the centre
    ``((w - 1) / 2, (h - 1) / 2)`` (where torchvision's tensor grid puts it).
    """
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    cx, cy = (w - 1) * 0.5, (h - 1) * 0.5
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    m = [v / scale for v in (d, -b, 0.0, -c, a, 0.0)]
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty) + cx
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty) + cy
    return np.array([m[:3], m[3:]])


WARP = define("warp_affine", "geometry", [affine_map],
              reference="skimage.transform.warp(AffineTransform(matrix=M), order=1, cval=0)")


@WARP.form()
def warp_affine(kind: ImageKind, matrix: Any) -> tuple:
    """skimage ``warp(AffineTransform(matrix=M), order=1, cval=0)``; M (2x3 or 3x3) maps
    output (col, row) to input (col, row)."""
    try:
        raw = np.asarray(matrix)
        if raw.dtype.kind not in "biuf":  # complex (its imaginary part was dropped), objects
            raise TypeError(raw.dtype)
        m = raw.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"matrix must be a 2x3 or 3x3 array of real numbers, got "
                         f"{type(matrix).__name__}"
                         f"{'' if not hasattr(matrix, 'dtype') else ' of ' + str(matrix.dtype)}"
                         ) from None
    if m.shape not in ((2, 3), (3, 3)):
        raise ValueError(f"matrix must be 2x3 or 3x3, got shape {m.shape}")
    if not np.isfinite(m).all():
        raise ValueError("matrix must be finite")
    if m.shape == (3, 3) and not np.array_equal(m[2], [0.0, 0.0, 1.0]):
        raise ValueError(f"matrix must be affine (last row 0, 0, 1), got {m[2].tolist()}")
    return tuple(float(v) for v in m[:2].ravel())


#: how argument errors name ``random_affine``'s shear (not the bare word: that is the name of
#: the ``shear`` op, which only its own module spells)
_SHEAR_ARG = "random_affine shear"


def _shear(shear: Any) -> tuple[float, ...] | None:
    if shear is None:
        return None
    if not isinstance(shear, (Sequence, np.ndarray)) or isinstance(shear, (str, bytes)):
        return pair(shear, _SHEAR_ARG, symmetric=True)
    if len(shear) == 4:
        return span(shear[:2], _SHEAR_ARG) + span(shear[2:], _SHEAR_ARG)
    return span(shear, _SHEAR_ARG)


#: the map of a draw whose matrix overflows float64 (a scale near 0, a shear near 90 degrees
#: with one near float64's largest): every output pixel reads outside the image (zero)
OUTSIDE = (0.0, 0.0, -2.0, 0.0, 0.0, -2.0)


def _sample_affine(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    deg, tr, sc, sh = args
    # per image, in Python: cos, sin and tan as CPython computes them; every draw through
    # ``between``, whose bounds may be float64's largest (their difference overflows)
    angle = between(deg[0], deg[1], d.u(0)).tolist()
    u = [d.u(t).tolist() for t in range(1, 6)]
    rows = []
    for m, (h, w) in enumerate(hw.tolist()):
        tx = ty = 0.0
        if tr is not None:
            tx = float(round((2 * u[0][m] - 1) * tr[0] * w))
            ty = float(round((2 * u[1][m] - 1) * tr[1] * h))
        s = 1.0 if sc is None else between1(sc[0], sc[1], u[2][m])
        shx = shy = 0.0
        if sh is not None:
            shx = between1(sh[0], sh[1], u[3][m])
            if len(sh) == 4:
                shy = between1(sh[2], sh[3], u[4][m])
        with np.errstate(all="ignore"):
            try:
                row = affine_matrix(h, w, angle[m], (tx, ty), s, (shx, shy)).ravel()
            except (OverflowError, ZeroDivisionError):
                row = np.array(OUTSIDE)
        rows.append(row if np.isfinite(row).all() else np.array(OUTSIDE))
    return [Emit("warp_affine", np.array(rows).reshape(len(hw), 6))]


@WARP.form(random=True, sample=_sample_affine)
def random_affine(kind: ImageKind, degrees: Any, translate: Any = None, scale: Any = None,
                  shear: Any = None) -> tuple:
    """torchvision ``RandomAffine`` parameters about the centre, then ``warp_affine``."""
    deg = pair(degrees, "degrees", symmetric=True)
    tr = None
    if translate is not None:
        # torchvision's (a, b): the largest horizontal and vertical shifts, as fractions of the
        # width and height (each its own maximum, not a range)
        if isinstance(translate, (str, bytes)) or not isinstance(translate,
                                                                 (Sequence, np.ndarray)):
            raise ValueError(f"translate must be a pair (horizontal, vertical), got "
                             f"{translate!r}")
        if len(translate) != 2:
            raise ValueError(f"translate must be a pair (horizontal, vertical), got "
                             f"{len(translate)} values")
        tr = (number(translate[0], "translate[0]"), number(translate[1], "translate[1]"))
        if not (0 <= tr[0] <= 1 and 0 <= tr[1] <= 1):
            raise ValueError(f"translate values must lie in [0, 1], got {tr}")
    sc = None if scale is None else pair(scale, "scale")
    if sc is not None and sc[0] <= 0:
        raise ValueError(f"scale must be > 0, got {sc}")
    return deg, tr, sc, _shear(shear)
