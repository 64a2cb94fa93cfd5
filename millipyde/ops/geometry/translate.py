"""``translate`` / ``random_translate``: kornia's ``RandomTranslate`` (a shift by a fraction of
the image drawn per image, sampled bilinearly with zeros outside), as one affine sampler that
fuses into the gather of its neighbours."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...kernels.registry import sampler
from ..base import Draws, Emit, ImageKind, between, define, number, span


@sampler(nparams=6, name="warp_affine_zero", warp_clip=False)
def affine_zero_map(y, x, h, w, m00, m01, m02, m10, m11, m12):
    """An affine map from output (col, row) to input (col, row), sampled bilinearly with zero
    outside and no clip (``grid_sample(padding_mode="zeros")``, kornia's ``warp_affine``)."""
    return m10 * x + m11 * y + m12, m00 * x + m01 * y + m02


def kornia_rows(forward: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """(n, 6) parameters of ``warp_affine_zero`` for kornia's ``warp_affine(src, M,
    align_corners=False)`` of the (n, 3, 3) pixel matrices ``forward`` (input (x, y) to output
    (x, y), what kornia's augmentations compute).

    kornia normalises ``M`` with ``(size - 1)`` (its pixel grid's corners) while the sampling
    grid takes pixel centres (``align_corners=False``): the output pixel ``x`` reads
    ``C^-1 M^-1 C x`` with ``C x = (x + 1/2) (w - 1) / w`` per axis (its ``eps`` where a side is
    one pixel)."""
    n = len(hw)
    h = hw[:, 0].astype(np.float64)
    w = hw[:, 1].astype(np.float64)
    sx = np.maximum(w - 1, 1e-14) / w
    sy = np.maximum(h - 1, 1e-14) / h
    c = np.zeros((n, 3, 3))
    c[:, 0, 0], c[:, 0, 2] = sx, 0.5 * sx
    c[:, 1, 1], c[:, 1, 2] = sy, 0.5 * sy
    c[:, 2, 2] = 1.0
    c_inv = np.linalg.inv(c)
    with np.errstate(all="ignore"):
        m = c_inv @ np.linalg.inv(forward) @ c
    rows = m[:, :2].reshape(n, 6)
    # a draw whose map overflows (a shear near 90 degrees): every pixel reads outside (zero)
    bad = ~np.isfinite(rows).all(axis=1)
    rows[bad] = (0.0, 0.0, -2.0, 0.0, 0.0, -2.0)
    return rows


def shift_rows(dx: np.ndarray, dy: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """``kornia_rows`` of the translations (``dx``, ``dy``) pixels (kornia's
    ``get_translation_matrix2d``)."""
    n = len(hw)
    m = np.tile(np.eye(3), (n, 1, 1))
    m[:, 0, 2], m[:, 1, 2] = dx, dy
    return kornia_rows(m, hw)


TRANSLATE = define("translate", "geometry", [affine_zero_map],
                   reference="kornia.augmentation.RandomTranslate (its warp_affine, "
                             "align_corners=False)")


def _sample_fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    n = len(hw)
    return [Emit("warp_affine_zero", shift_rows(np.full(n, args[0]), np.full(n, args[1]), hw))]


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (xlo, xhi), (ylo, yhi) = args
    # kornia: uniform_(a, b) * width, uniform_(c, d) * height
    dx = between(xlo, xhi, d.u(0)) * hw[:, 1]
    dy = between(ylo, yhi, d.u(1)) * hw[:, 0]
    return [Emit("warp_affine_zero", shift_rows(dx, dy, hw))]


def _fraction_range(value: Any, name: str) -> tuple[float, float]:
    """kornia's ``translate_x`` / ``translate_y``: None (no shift), a number ``a`` (from -a to
    a) or an (a, b) range, fractions of the side in [-1, 1]."""
    if value is None:
        return 0.0, 0.0
    if isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytes)):
        lo, hi = span(value, name)
    else:
        v = number(value, name)
        if v < 0:
            raise ValueError(f"{name} must be >= 0 when a single number, got {v}")
        lo, hi = -v, v
    if not (-1.0 <= lo and hi <= 1.0):
        raise ValueError(f"{name} must lie in [-1, 1] (fractions of the side), got "
                         f"({lo}, {hi})")
    return lo, hi


@TRANSLATE.form(sample=_sample_fixed)
def translate(kind: ImageKind, dx: float, dy: float = 0) -> tuple:
    """Shift right by ``dx`` and down by ``dy`` pixels, bilinear with zeros outside: kornia
    ``RandomTranslate``'s transform for that shift (its ``align_corners=False`` grid moves the
    content by ``dx * w / (w - 1)``)."""
    return number(dx, "dx"), number(dy, "dy")


@TRANSLATE.form(random=True, sample=_sample_random)
def random_translate(kind: ImageKind, translate_x: Any = None, translate_y: Any = None
                     ) -> tuple:
    """kornia ``RandomTranslate``: shifts drawn uniformly from ``translate_x`` times the width
    and ``translate_y`` times the height (each None, a number ``a`` for [-a, a], or a range
    within [-1, 1]); ``p`` through the Operation."""
    return (_fraction_range(translate_x, "translate_x"),
            _fraction_range(translate_y, "translate_y"))
