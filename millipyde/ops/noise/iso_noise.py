"""``iso_noise`` / ``random_iso_noise``: albumentations' ``ISONoise`` (camera sensor noise): per
pixel, in OpenCV's float HLS, the hue shifted by a normal draw and the lightness raised by a
Poisson count whose mean is the image's lightness standard deviation times the intensity.

One pixelwise kernel that draws per pixel (four uniforms of the pixel's counter, the same on
every device) and reads one per-image statistic (``lightness_moments``: the lightness's sums,
one reduction before the gather that holds the op).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...kernels.registry import pixelwise
from ..base import (
    Draws,
    Emit,
    ImageKind,
    between,
    colour_only,
    columns,
    define,
    number,
    span,
    unsigned_only,
)
from .gaussian_noise import NOISE_KEY

#: the largest ``intensity``: the Poisson mean (at most 0.5 * intensity * 255) keeps
#: ``exp(-mean)`` a normal float64, which the inversion starts from
MAX_INTENSITY = 5.0


@pixelwise(nparams=4, draws=True, stat="lightness_moments", name="iso_noise")
def iso_pixel(r, g, b, full, u1, u2, u3, u4, st, o, key_hi, key_lo, color_shift, intensity):
    """albumentations ``iso_noise`` on one pixel: OpenCV's ``RGB2HLS`` of ``(r, g, b) / full``
    (hue in degrees), hue ``+ N(0, color_shift * 360 * intensity)`` (Box-Muller of ``u2``,
    ``u3``) modulo 360, lightness ``l + k / 255 * (1 - l)`` with ``k`` Poisson of mean ``std_l *
    intensity * 255`` (the inverse of its distribution function at ``u1``; ``std_l`` the
    image's lightness standard deviation, from its statistic row), then ``HLS2RGB`` times
    ``full`` (the store rounds and clamps)."""
    n = st[o + 2]
    mean = st[o] / n
    var = st[o + 1] / n - mean * mean
    std_l = math.sqrt(max(var, 0.0)) / (2.0 * full)
    lam = std_l * intensity * 255.0
    k = 0.0
    pk = math.exp(-lam)
    cdf = pk
    while u1 >= cdf and k < 4096.0:  # (the bound: cdf may round below a u1 near 1)
        k += 1.0
        pk = pk * lam / k
        cdf += pk
    z = math.sqrt(-2.0 * math.log(1.0 - u2)) * math.cos(2.0 * math.pi * u3)
    rr = r / full
    gg = g / full
    bb = b / full
    vmax = max(rr, max(gg, bb))
    vmin = min(rr, min(gg, bb))
    diff = vmax - vmin
    light = (vmax + vmin) * 0.5
    hue = 0.0
    sat = 0.0
    if diff > 1.1920928955078125e-07:  # OpenCV's FLT_EPSILON: less is grey
        sat = diff / (vmax + vmin) if light < 0.5 else diff / (2.0 - vmax - vmin)
        d = 60.0 / diff
        if vmax == rr:
            hue = (gg - bb) * d
        elif vmax == gg:
            hue = (bb - rr) * d + 120.0
        else:
            hue = (rr - gg) * d + 240.0
        if hue < 0.0:
            hue += 360.0
    hue = (hue + z * color_shift * 360.0 * intensity) % 360.0
    light = light + k / 255.0 * (1.0 - light)
    if sat == 0.0:
        return light * full, light * full, light * full
    p2 = light * (1.0 + sat) if light <= 0.5 else light + sat - light * sat
    p1 = 2.0 * light - p2
    hh = hue / 60.0
    sector = math.floor(hh)
    f = hh - sector
    down = p1 + (p2 - p1) * (1.0 - f)
    up = p1 + (p2 - p1) * f
    if sector == 0.0:
        r2, g2, b2 = p2, up, p1
    elif sector == 1.0:
        r2, g2, b2 = down, p2, p1
    elif sector == 2.0:
        r2, g2, b2 = p1, p2, up
    elif sector == 3.0:
        r2, g2, b2 = p1, down, p2
    elif sector == 4.0:
        r2, g2, b2 = up, p1, p2
    else:
        r2, g2, b2 = p2, p1, down
    return r2 * full, g2 * full, b2 * full


ISO_NOISE = define("iso_noise", "noise", [iso_pixel],
                   reference="albumentations.ISONoise (own draws)")


def _noise(d: Draws, color_shift: Any, intensity: Any) -> list:
    k = d.key64(NOISE_KEY)
    # two exact float64 halves: the kernel rebuilds the 64-bit key from them
    return [Emit(ISO_NOISE.kernels[0],
                 columns((k >> np.uint64(32)).astype(np.float64),
                         (k & np.uint64(0xFFFFFFFF)).astype(np.float64), color_shift, intensity,
                         n=len(k)))]


def _sample_fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    return _noise(d, *args)


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    (clo, chi), (ilo, ihi) = args
    return _noise(d, between(clo, chi, d.u(0)), between(ilo, ihi, d.u(1)))


def _check(kind: ImageKind, what: str) -> None:
    colour_only(kind, what)
    unsigned_only(kind, what, "its HLS conversion reads values in [0, full]")


def _shift(value: float, name: str) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1] (a fraction of the hue circle), got "
                         f"{value}")
    return value


def _intensity(value: float, name: str) -> float:
    if not 0.0 <= value <= MAX_INTENSITY:
        raise ValueError(f"{name} must lie in [0, {MAX_INTENSITY}], got {value}")
    return value


@ISO_NOISE.form(draws=True, sample=_sample_fixed)
def iso_noise(kind: ImageKind, color_shift: float = 0.05, intensity: float = 0.5) -> tuple:
    """albumentations' ``iso_noise``: per pixel, in HLS, the hue shifted by N(0,
    ``color_shift`` * 360 * ``intensity``) degrees and the lightness ``l`` raised by ``k / 255
    * (1 - l)``, ``k`` Poisson with mean ``intensity * 255`` times the image's lightness
    standard deviation. ``color_shift`` in [0, 1], ``intensity`` in [0, 5]. RGB(A) images of
    unsigned integers (or floats); alpha untouched; same seed, same noise on every device."""
    _check(kind, "iso_noise")
    return (_shift(number(color_shift, "color_shift"), "color_shift"),
            _intensity(number(intensity, "intensity"), "intensity"))


@ISO_NOISE.form(random=True, sample=_sample_random)
def random_iso_noise(kind: ImageKind, color_shift: Any = (0.01, 0.05),
                     intensity: Any = (0.1, 0.5)) -> tuple:
    """albumentations ``ISONoise``: ``iso_noise`` with ``color_shift`` and ``intensity`` drawn
    uniformly per image from their (min, max) ranges (albumentations' defaults)."""
    _check(kind, "random_iso_noise")
    clo, chi = span(color_shift, "color_shift")
    ilo, ihi = span(intensity, "intensity")
    for v in (clo, chi):
        _shift(v, "color_shift")
    for v in (ilo, ihi):
        _intensity(v, "intensity")
    return (clo, chi), (ilo, ihi)
