"""``perspective`` / ``random_perspective``: torchvision's ``perspective(startpoints,
endpoints)`` and ``RandomPerspective(distortion_scale, p)``, a homography sampled bilinearly
with zeros outside: one projective sampler, which composes with its neighbours' maps into one
gather (the gather divides by the map's third row)."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import sampler
from ..base import Draws, Emit, ImageKind, chance, columns, define, number


@sampler(nparams=8, name="perspective", warp_clip=False, projective=True)
def homography_map(y, x, h, w, c0, c1, c2, c3, c4, c5, c6, c7):
    """torchvision's ``_perspective_grid``: the output pixel centre ``(x + 1/2, y + 1/2)``
    reads input ``((c0 X + c1 Y + c2) / Z, (c3 X + c4 Y + c5) / Z)`` with ``Z = c6 X + c7 Y
    + 1`` (pixel-edge coordinates, then back to centres): returned as homogeneous
    coordinates (sy, sx, sz), sampled at ``(sy / sz, sx / sz)``."""
    xc = x + 0.5
    yc = y + 0.5
    z = c6 * xc + c7 * yc + 1.0
    return (c3 * xc + c4 * yc + c5) - 0.5 * z, (c0 * xc + c1 * yc + c2) - 0.5 * z, z


PERSPECTIVE = define("perspective", "geometry", [homography_map],
                     reference="torchvision.transforms.v2.functional.perspective (bilinear, "
                               "fill=None)")

#: the coefficients of the identity (an image whose coin says no)
IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)


def coefficients(startpoints: Any, endpoints: Any) -> tuple[float, ...]:
    """torchvision's ``_get_perspective_coeffs``: the eight coefficients of the homography
    taking ``endpoints`` to ``startpoints`` (solved in float64, rounded to float32 as
    torchvision rounds them). ``ValueError`` where the four points do not fix one."""
    a = np.zeros((8, 8))
    for i, (p1, p2) in enumerate(zip(endpoints, startpoints, strict=True)):
        a[2 * i] = [p1[0], p1[1], 1, 0, 0, 0, -p2[0] * p1[0], -p2[0] * p1[1]]
        a[2 * i + 1] = [0, 0, 0, p1[0], p1[1], 1, -p2[1] * p1[0], -p2[1] * p1[1]]
    b = np.asarray(startpoints, dtype=np.float64).reshape(8)
    try:
        res = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise ValueError("perspective startpoints and endpoints must each be four points no "
                         "three of which are on one line (they fix no homography)") from None
    coeffs = res.astype(np.float32).astype(np.float64)
    if not np.isfinite(coeffs).all():
        raise ValueError("perspective startpoints and endpoints give a homography beyond "
                         "float32 (points nearly on one line)")
    return tuple(float(v) for v in coeffs)


def _points(value: Any, name: str) -> list[tuple[float, float]]:
    """Four (x, y) points."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)) \
            or len(value) != 4:
        raise ValueError(f"{name} must be four [x, y] points, got {value!r}")
    out = []
    for i, pt in enumerate(value):
        if isinstance(pt, (str, bytes)) or not isinstance(pt, (Sequence, np.ndarray)) \
                or len(pt) != 2:
            raise ValueError(f"{name}[{i}] must be an [x, y] point, got {pt!r}")
        out.append((number(pt[0], f"{name}[{i}][0]"), number(pt[1], f"{name}[{i}][1]")))
    return out


@PERSPECTIVE.form()
def perspective(kind: ImageKind, startpoints: Any, endpoints: Any) -> tuple:
    """torchvision ``perspective(img, startpoints, endpoints)``: the homography moving the
    four (x, y) ``startpoints`` (top-left, top-right, bottom-right, bottom-left) to
    ``endpoints``, bilinear with zeros outside (torchvision's ``fill=None``)."""
    return coefficients(_points(startpoints, "startpoints"), _points(endpoints, "endpoints"))


def random_corners(hw: np.ndarray, scale: float, u: list[np.ndarray]) -> np.ndarray:
    """torchvision ``RandomPerspective``'s end points ((n, 4, 2) x, y: top-left, top-right,
    bottom-right, bottom-left), ``torch.randint(lo, hi)`` as ``lo + int(u * (hi - lo))``."""
    h, w = hw[:, 0], hw[:, 1]
    bh = (scale * (h // 2)).astype(np.int64) + 1
    bw = (scale * (w // 2)).astype(np.int64) + 1

    def randint(lo: np.ndarray, hi: np.ndarray, t: int) -> np.ndarray:
        return lo + np.minimum((u[t] * (hi - lo)).astype(np.int64), hi - lo - 1)

    zero = np.zeros_like(h)
    return np.stack([
        np.stack([randint(zero, bw, 0), randint(zero, bh, 1)], 1),
        np.stack([randint(w - bw, w, 2), randint(zero, bh, 3)], 1),
        np.stack([randint(w - bw, w, 4), randint(h - bh, h, 5)], 1),
        np.stack([randint(zero, bw, 6), randint(h - bh, h, 7)], 1)], 1)


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    scale, p = args
    n = len(hw)
    ends = random_corners(hw, scale, [d.u(t) for t in range(8)])
    on = d.u(8) < p
    rows = []
    for i, (h, w) in enumerate(hw.tolist()):
        if not on[i]:
            rows.append(IDENTITY)
            continue
        starts = [(0, 0), (w - 1, 0), (w - 1, h - 1), (0, h - 1)]
        try:
            rows.append(coefficients(starts, ends[i].tolist()))
        except ValueError:  # a one-pixel side: the four points fix no homography
            rows.append(IDENTITY)
    return [Emit("perspective", columns(*np.array(rows, dtype=np.float64).reshape(n, 8).T,
                                        n=n))]


@PERSPECTIVE.form(random=True, sample=_sample_random)
def random_perspective(kind: ImageKind, distortion_scale: float = 0.5, p: float = 0.5
                       ) -> tuple:
    """torchvision ``RandomPerspective``: with probability ``p``, each corner moved inwards
    by a uniform whole number of pixels up to ``distortion_scale`` times half the side, then
    ``perspective`` (zeros outside: torchvision's ``fill=0`` also darkens the pixels that
    straddle the border, blending with a mask of what was inside)."""
    return chance(distortion_scale, "distortion_scale"), chance(p, "p")
