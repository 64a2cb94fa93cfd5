"""Generated kernels of a weighted sum of same-shape images (``millipyde.augmix``: AugMix's mix
of an image and its augmented chains).

- ``accumulate(acc, src, wt, first)``: ``acc = wt * src`` (``first``) or ``acc += wt * src``,
  float64, over every value (channels folded into x): the terms are added in the caller's
  order, as torchvision's ``mix.add_`` adds them;
- ``finish(acc, src, dst, nc, is_int, full)``: ``dst`` the sum, truncated towards zero and
  clipped to [0, full] for integer images (torchvision's ``.to(uint8)`` of a float mix whose
  weights sum to one); channels from ``nc`` on (alpha) copied from ``src``;
- ``mix(src, rows, forks, frows, wts, dst, nc, is_int, full)`` (:func:`weighted_batch_source`):
  the same sum for a whole batch in one launch: member ``b``'s original read from the flat
  ``src`` at ``rows[b]`` (offset, width: an arena's or a stage's rows), its term ``i`` from
  the flat ``forks`` at ``frows[b, i - 1]`` (its images' width the output's), weighted by
  ``wts[b, i]``, added in the same order with the same operations as ``accumulate`` and
  ``finish`` (one text for both: the values are the same bits).
"""

from __future__ import annotations

from .loader import load
from .target import HEADER, jit_decorator, loop_2d, loop_3d

#: one term's weighted value ``v`` (float64): ``wt`` times the value read
_TERM = "v = wt * float({read})"

#: the stored value ``v`` of a channel below ``nc`` from the sum ``acc_``
_STORE = """\
v = acc_
if is_int:
    v = math.floor(v) if v > 0.0 else 0.0
    if v > full:
        v = full"""


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.splitlines())


_ACCUMULATE = f"""\
c = x % nc_all
xi = x // nc_all
{_TERM.format(read="src[y, xi, c]")}
if first:
    acc[y, xi, c] = v
else:
    acc[y, xi, c] = acc[y, xi, c] + v"""

_FINISH = f"""\
c = x % nc_all
xi = x // nc_all
if c >= nc:
    dst[y, xi, c] = src[y, xi, c]
else:
    acc_ = acc[y, xi, c]
{_indent(_STORE, 4)}
    dst[y, xi, c] = v"""

# the batch: the original first, then each chain in order, then the store
_MIX = f"""\
c = x % nc_all
xi = x // nc_all
at_ = (y * w + xi) * nc_all + c
orig_ = src[so_ + (y * sw_ + xi) * nc_all + c]
wt = wts[b, 0]
{_TERM.format(read="orig_")}
acc_ = v
for i in range(k):
    wt = wts[b, i + 1]
{_indent(_TERM.format(read="forks[frows[b, i] + at_]"), 4)}
    acc_ = acc_ + v
if c >= nc:
    dst[b, y, xi, c] = orig_
else:
{_indent(_STORE, 4)}
    dst[b, y, xi, c] = v"""


def weighted_source(target: str, sim: bool = False) -> str:
    """Source of ``accumulate`` and ``finish`` (see the module doc) for ``target``."""
    dec = jit_decorator(target, sim)
    return (
        "# millipyde generated weighted sum\n" + HEADER[target]
        + f"\n\n{dec}\ndef accumulate(acc, src, wt, first):\n"
        "    nc_all = src.shape[2]\n"
        + loop_2d(target, "src.shape[0]", "src.shape[1] * nc_all", _ACCUMULATE)
        + f"\n\n{dec}\ndef finish(acc, src, dst, nc, is_int, full):\n"
        "    nc_all = src.shape[2]\n"
        + loop_2d(target, "src.shape[0]", "src.shape[1] * nc_all", _FINISH)
    )


def weighted_batch_source(target: str, sim: bool = False) -> str:
    """Source of ``mix`` (see the module doc) for ``target``: launched over (members, rows,
    columns times channels) of ``dst`` (``graph.exec.batch_launch.launch``)."""
    dec = jit_decorator(target, sim)
    return (
        "# millipyde generated batched weighted sum\n" + HEADER[target]
        + f"\n\n{dec}\ndef mix(src, rows, forks, frows, wts, dst, nc, is_int, full):\n"
        "    nb = dst.shape[0]\n    h = dst.shape[1]\n    w = dst.shape[2]\n"
        "    nc_all = dst.shape[3]\n    k = frows.shape[1]\n"
        + loop_3d(target, "nb", "h", "w * nc_all", "so_ = rows[b, 0]\nsw_ = rows[b, 1]",
                  _MIX)
    )


def weighted_kernels(target: str, sim: bool = False):
    """The (accumulate, finish) kernels for ``target`` (``weighted_source``)."""
    mod = load(weighted_source(target, sim), target)
    return mod.accumulate, mod.finish


def weighted_batch_kernel(target: str, sim: bool = False):
    """The batched ``mix`` kernel for ``target`` (``weighted_batch_source``)."""
    return load(weighted_batch_source(target, sim), target).mix
