"""The generic separable stencil: a rows pass and a columns pass for every target."""

from __future__ import annotations

from .loader import load
from .target import _HEADER, _RINT_CLIP, _decorator, _loop_2d, replace_once

_STENCIL_ROWS = """
acc = 0.0
for k in range(ntaps):
    xx = xi + k - r
    if xx >= 0 and xx < w:
        acc += taps[k] * src[y, xx, c]
tmp[y, xi, c] = acc
"""

_STENCIL_COLS = """
if c < nc:
    acc = 0.0
    for k in range(ntaps):
        yy = y + k - r
        if yy >= 0 and yy < h:
            acc += taps[k] * tmp[yy, xi, c]
    if is_int:
        acc = _rint_clip(acc, full)
    dst[y, xi, c] = acc
else:
    dst[y, xi, c] = src[y, xi, c]
"""


def stencil_luts(rows: str, cols: str, pre: bool, post: bool) -> tuple[str, str]:
    """The generic passes' bodies with uint8 tables fused: ``lut[0, c]`` on each value the
    rows pass loads (an elementwise prologue), ``lut[1, c]`` on each value stored (epilogue)."""
    if pre:
        rows = replace_once(rows, "taps[k] * src[y, xx, c]",
                            "taps[k] * lut[0, c, src[y, xx, c]]")
    if post:
        cols = replace_once(cols, "    dst[y, xi, c] = acc",
                            "    dst[y, xi, c] = lut[1, c, int(acc)]")
    return rows, cols


def stencil_source(target: str, sim: bool = False, pre: bool = False,
                   post: bool = False) -> str:
    """Source of the two separable passes ``rows(src, tmp, taps, nc)`` and ``cols(src, tmp,
    dst, taps, nc, is_int, full)``; with ``pre``/``post`` both also take ``lut`` last.

    Channels are folded into the x loop (x * C + c) so one grid covers every channel.
    """
    head = "# millipyde generated separable stencil passes\n" + _HEADER[target] + _RINT_CLIP
    dec = _decorator(target, sim)
    extra = ", lut" if pre or post else ""
    body_rows, body_cols = stencil_luts(_STENCIL_ROWS, _STENCIL_COLS, pre, post)

    def wrap(text: str) -> str:
        return "c = x % nc_all\nxi = x // nc_all\n" + text.strip("\n")

    rows = (
        f"\n\n{dec}\ndef rows(src, tmp, taps, nc{extra}):\n"
        "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = nc\n"
        "    ntaps = taps.shape[0]\n    r = ntaps // 2\n"
        + _loop_2d(target, "h", "w * nc", wrap(body_rows))
    )
    cols = (
        f"\n\n{dec}\ndef cols(src, tmp, dst, taps, nc, is_int, full{extra}):\n"
        "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = src.shape[2]\n"
        "    ntaps = taps.shape[0]\n    r = ntaps // 2\n"
        + _loop_2d(target, "h", "w * nc_all", wrap(body_cols))
    )
    return head + rows + cols


def stencil_kernels(target: str, sim: bool = False, pre: bool = False, post: bool = False):
    """The (rows, cols) separable pass kernels for ``target`` (``stencil_source``)."""
    mod = load(stencil_source(target, sim, pre, post), target)
    return mod.rows, mod.cols
