"""What ``python -m bench ops`` measures: the ops, their parameters and their references.

Thesis tables 6.1-6.3 (gamma, greyscale, Gaussian at every width) and the single-width extras.
The reference is scikit-image (NumPy where scikit-image has no such op); the expected output
follows API.md (e.g. alpha untouched by gamma, brightness and colorize).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

WIDTHS = (500, 1000, 2000, 3000, 4000, 5000, 6000)
GAMMA, GAIN, SIGMA, TRUNCATE, ANGLE = 2.0, 1.0, 2.0, 8.0, 45.0
DELTA, RGB_GAINS = 0.2, (0.5, 1.25, 0.75)
RADIUS = int(TRUNCATE * SIGMA + 0.5)  # 16: scipy/skimage's kernel radius, 33 taps
CONTENDERS = ("skimage", "millipyde", "cucim", "torchvision")


@dataclass(frozen=True)
class Op:
    name: str
    method: str  # gpuimage method
    args: tuple
    grey_input: bool  # float64 greyscale input, else RGBA uint8
    bytes_per_px: int  # that must move: input read once + output written once
    sweep: bool  # at every width, else only at the largest
    reference: Callable[[np.ndarray], np.ndarray]  # scikit-image / NumPy, the CPU contender
    alpha_kept: bool = False  # API: alpha untouched, where skimage/cuCIM/torch change it


def reference(op: Op, host: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The API's expected output from the scikit-image/NumPy one (alpha restored if kept)."""
    if op.alpha_kept:
        out = out.copy()
        out[..., 3] = host[..., 3]
    return out


def _sk():
    from skimage import color, exposure, filters, transform

    return color, exposure, filters, transform


def _sk_gamma(x):
    return _sk()[1].adjust_gamma(x, GAMMA, GAIN)


def _sk_grey(x):
    color = _sk()[0]
    return color.rgb2gray(color.rgba2rgb(x))


def _sk_gaussian(x):
    return _sk()[2].gaussian(
        x, sigma=SIGMA, mode="constant", cval=0, truncate=TRUNCATE, preserve_range=True
    )


def _sk_rotate(x):
    out = _sk()[3].rotate(x, ANGLE, order=1, mode="constant", cval=0, preserve_range=True)
    return np.clip(np.rint(out), 0, 255).astype(x.dtype)


def _np_brightness(x):
    out = x.copy()
    out[..., :3] = np.clip(np.rint(x[..., :3] + DELTA * 255.0), 0, 255)
    return out


def _np_colorize(x):
    out = x.copy()
    out[..., :3] = np.clip(np.rint(x[..., :3] * np.asarray(RGB_GAINS)), 0, 255)
    return out


OPS = {
    op.name: op
    for op in (
        Op("gamma", "adjust_gamma", (GAMMA, GAIN), False, 8, True, _sk_gamma, alpha_kept=True),
        Op("greyscale", "rgb2grey", (), False, 4 + 8, True, _sk_grey),
        Op("gaussian", "gaussian", (SIGMA,), True, 8 + 8, True, _sk_gaussian),
        Op("fliplr", "fliplr", (), False, 8, False, lambda x: np.fliplr(x).copy()),
        Op("transpose", "transpose", (), False, 8, False,
           lambda x: np.ascontiguousarray(x.transpose(1, 0, 2))),
        Op("rotate45", "rotate", (ANGLE,), False, 8, False, _sk_rotate),
        Op("brightness", "brightness", (DELTA,), False, 8, False, _np_brightness),
        Op("colorize", "colorize", RGB_GAINS, False, 8, False, _np_colorize),
    )
}
