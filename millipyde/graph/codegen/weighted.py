"""Generated kernels of a weighted sum of same-shape images (``millipyde.augmix``: AugMix's mix
of an image and its augmented chains).

- ``accumulate(acc, src, wt, first)``: ``acc = wt * src`` (``first``) or ``acc += wt * src``,
  float64, over every value (channels folded into x): the terms are added in the caller's
  order, as torchvision's ``mix.add_`` adds them;
- ``finish(acc, src, dst, nc, is_int, full)``: ``dst`` the sum, truncated towards zero and
  clipped to [0, full] for integer images (torchvision's ``.to(uint8)`` of a float mix whose
  weights sum to one); channels from ``nc`` on (alpha) copied from ``src``.
"""

from __future__ import annotations

from .loader import load
from .target import HEADER, jit_decorator, loop_2d

_ACCUMULATE = """
c = x % nc_all
xi = x // nc_all
v = wt * float(src[y, xi, c])
if first:
    acc[y, xi, c] = v
else:
    acc[y, xi, c] = acc[y, xi, c] + v
"""

_FINISH = """
c = x % nc_all
xi = x // nc_all
if c >= nc:
    dst[y, xi, c] = src[y, xi, c]
else:
    v = acc[y, xi, c]
    if is_int:
        v = math.floor(v) if v > 0.0 else 0.0
        if v > full:
            v = full
    dst[y, xi, c] = v
"""


def weighted_source(target: str, sim: bool = False) -> str:
    """Source of ``accumulate`` and ``finish`` (see the module doc) for ``target``."""
    dec = jit_decorator(target, sim)
    return (
        "# millipyde generated weighted sum\n" + HEADER[target]
        + f"\n\n{dec}\ndef accumulate(acc, src, wt, first):\n"
        "    nc_all = src.shape[2]\n"
        + loop_2d(target, "src.shape[0]", "src.shape[1] * nc_all", _ACCUMULATE.strip("\n"))
        + f"\n\n{dec}\ndef finish(acc, src, dst, nc, is_int, full):\n"
        "    nc_all = src.shape[2]\n"
        + loop_2d(target, "src.shape[0]", "src.shape[1] * nc_all", _FINISH.strip("\n"))
    )


def weighted_kernels(target: str, sim: bool = False):
    """The (accumulate, finish) kernels for ``target`` (``weighted_source``)."""
    mod = load(weighted_source(target, sim), target)
    return mod.accumulate, mod.finish
