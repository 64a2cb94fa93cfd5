"""scikit-image's warp clip as scalar math: one definition for the host and the batched kernel.

Not a registered op: ``graph.exec.gather.warp_clip`` calls it on a measured minimum and maximum,
and ``graph.codegen.batch_bounds`` compiles its text into the batched reduction that measures
them on the device (``graph.exec.batch_group``).
"""

from __future__ import annotations

import math


def warp_clip_bounds(lo: float, hi: float) -> tuple[float, float]:
    """The (low, high) clip of a sampler from its source's minimum ``lo`` and maximum ``hi``.

    With a fill of 0, blends stay within [min(lo, 0), max(hi, 0)]: the minimum binds when
    positive, the maximum only when negative (signed images whose values are all negative);
    a bound that cannot bind is -inf / +inf. A NaN minimum (NaN wins, as ``np.min``) binds
    nothing, nor do the bounds of an empty source (``lo`` +inf, ``hi`` -inf). Callers that know
    ``lo >= 0`` may pass ``hi = lo``: the maximum is then not read.
    """
    if lo > 0.0 and hi >= lo:
        return lo, math.inf
    if lo < 0.0 and hi < 0.0:
        return -math.inf, hi
    return -math.inf, math.inf
