"""``planckian_jitter`` / ``random_planckian_jitter``: kornia's ``RandomPlanckianJitter``
(the red and blue gains of a Planckian illuminant, a row of its table per image)."""

from typing import Any

import numpy as np

from ...kernels.registry import elementwise
from ..base import Draws, Emit, ImageKind, colour_only, columns, define, integer

# kornia's ``get_planckian_coeffs`` tables: (R, G, B) of the illuminants, blackbody (25 rows)
# and CIE daylight (23 rows); the op multiplies R by R / G and B by B / G (float32, as kornia)
_BLACKBODY = (
    (0.6743, 0.4029, 0.0013), (0.6281, 0.4241, 0.1665), (0.5919, 0.4372, 0.2513),
    (0.5623, 0.4457, 0.3154), (0.5376, 0.4515, 0.3672), (0.5163, 0.4555, 0.4103),
    (0.4979, 0.4584, 0.4468), (0.4816, 0.4604, 0.4782), (0.4672, 0.4619, 0.5053),
    (0.4542, 0.4630, 0.5289), (0.4426, 0.4638, 0.5497), (0.4320, 0.4644, 0.5681),
    (0.4223, 0.4648, 0.5844), (0.4135, 0.4651, 0.5990), (0.4054, 0.4653, 0.6121),
    (0.3980, 0.4654, 0.6239), (0.3911, 0.4655, 0.6346), (0.3847, 0.4656, 0.6444),
    (0.3787, 0.4656, 0.6532), (0.3732, 0.4656, 0.6613), (0.3680, 0.4655, 0.6688),
    (0.3632, 0.4655, 0.6756), (0.3586, 0.4655, 0.6820), (0.3544, 0.4654, 0.6878),
    (0.3503, 0.4653, 0.6933),
)
_CIED = (
    (0.5829, 0.4421, 0.2288), (0.5510, 0.4514, 0.2948), (0.5246, 0.4576, 0.3488),
    (0.5021, 0.4618, 0.3941), (0.4826, 0.4646, 0.4325), (0.4654, 0.4667, 0.4654),
    (0.4502, 0.4681, 0.4938), (0.4364, 0.4692, 0.5186), (0.4240, 0.4700, 0.5403),
    (0.4127, 0.4705, 0.5594), (0.4023, 0.4709, 0.5763), (0.3928, 0.4713, 0.5914),
    (0.3839, 0.4715, 0.6049), (0.3757, 0.4716, 0.6171), (0.3681, 0.4717, 0.6281),
    (0.3609, 0.4718, 0.6380), (0.3543, 0.4719, 0.6472), (0.3480, 0.4719, 0.6555),
    (0.3421, 0.4719, 0.6631), (0.3365, 0.4719, 0.6702), (0.3313, 0.4719, 0.6766),
    (0.3263, 0.4719, 0.6826), (0.3217, 0.4719, 0.6882),
)


def _gains(table: tuple) -> np.ndarray:
    t = np.array(table, dtype=np.float32)
    return np.stack([t[:, 0] / t[:, 1], t[:, 2] / t[:, 1]], axis=1).astype(np.float64)


#: per mode, the (rows, 2) red and blue gains
GAINS = {"blackbody": _gains(_BLACKBODY), "cied": _gains(_CIED)}


@elementwise(nparams=2, name="planckian_jitter")
def planckian_gains(v, c, full, r_gain, b_gain, _d):
    """kornia ``RandomPlanckianJitter``: R times ``r_gain``, B times ``b_gain``, G kept,
    clamped to ``full``; alpha untouched."""
    if c == 0:
        return min(v * r_gain, full)
    if c == 2:
        return min(v * b_gain, full)
    return v


PLANCKIAN_JITTER = define("planckian_jitter", "colour", [planckian_gains],
                          reference="kornia.augmentation.RandomPlanckianJitter")


def _table(mode: Any) -> np.ndarray:
    if not isinstance(mode, str) or mode.lower() not in GAINS:
        raise ValueError(f"mode must be 'blackbody' or 'CIED', got {mode!r}")
    return GAINS[mode.lower()]


def _rows(table: np.ndarray, select_from: Any) -> np.ndarray:
    n = len(table)
    if select_from is None:
        return np.arange(n)
    items = [select_from] if isinstance(select_from, (int, np.integer)) else select_from
    if isinstance(items, (str, bytes)) or not len(items):
        raise ValueError(f"select_from must be a row or a non-empty list of rows, "
                         f"got {select_from!r}")
    rows = [integer(r, "select_from") for r in items]
    for r in rows:
        if not 0 <= r < n:
            raise ValueError(f"select_from rows must lie in 0..{n - 1}, got {r}")
    return np.array(rows)


@PLANCKIAN_JITTER.form()
def planckian_jitter(kind: ImageKind, index: int, mode: str = "blackbody") -> tuple:
    """kornia's Planckian jitter with row ``index`` of the ``mode`` table ('blackbody',
    0..24, or 'CIED', 0..22): R and B scaled by the illuminant's R/G and B/G, clamped;
    RGB/RGBA images only."""
    colour_only(kind, "planckian_jitter")
    table = _table(mode)
    (row,) = _rows(table, integer(index, "index"))
    return tuple(float(g) for g in table[row])


def _sample(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    mode, rows = args
    table, rows = GAINS[mode], np.array(rows)
    # kornia: uniform(0, len(rows)).long(), the row of its (selected) table
    pick = rows[np.minimum((d.u(0) * len(rows)).astype(np.int64), len(rows) - 1)]
    g = table[pick]
    return [Emit("planckian_jitter", columns(g[:, 0], g[:, 1], n=len(hw)))]


@PLANCKIAN_JITTER.form(random=True, sample=_sample)
def random_planckian_jitter(kind: ImageKind, mode: str = "blackbody",
                            select_from: Any = None) -> tuple:
    """kornia ``RandomPlanckianJitter``: a row of the ``mode`` table (or of its
    ``select_from`` rows) drawn uniformly per image; RGB/RGBA images only."""
    colour_only(kind, "random_planckian_jitter")
    table = _table(mode)
    return mode.lower(), tuple(int(r) for r in _rows(table, select_from))
