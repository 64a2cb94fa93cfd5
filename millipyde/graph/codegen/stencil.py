"""The generic separable stencil: a rows pass and a columns pass for every target."""

from __future__ import annotations

import re

from .loader import load
from .target import HEADER, RINT_CLIP, jit_decorator, loop_2d, replace_once

#: the rows pass's body (the batched stencil reuses it)
STENCIL_ROWS = """
acc = 0.0
for k in range(ntaps):
    xx = xi + k - r
    if xx >= 0 and xx < w:
        acc += taps[k] * src[y, xx, c]
tmp[y, xi, c] = acc
"""

#: the columns pass's body (the batched stencil reuses it)
STENCIL_COLS = """
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
    head = "# millipyde generated separable stencil passes\n" + HEADER[target] + RINT_CLIP
    dec = jit_decorator(target, sim)
    extra = ", lut" if pre or post else ""
    body_rows, body_cols = stencil_luts(STENCIL_ROWS, STENCIL_COLS, pre, post)

    def wrap(text: str) -> str:
        return "c = x % nc_all\nxi = x // nc_all\n" + text.strip("\n")

    rows = (
        f"\n\n{dec}\ndef rows(src, tmp, taps, nc{extra}):\n"
        "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = nc\n"
        "    ntaps = taps.shape[0]\n    r = ntaps // 2\n"
        + loop_2d(target, "h", "w * nc", wrap(body_rows))
    )
    cols = (
        f"\n\n{dec}\ndef cols(src, tmp, dst, taps, nc, is_int, full{extra}):\n"
        "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = src.shape[2]\n"
        "    ntaps = taps.shape[0]\n    r = ntaps // 2\n"
        + loop_2d(target, "h", "w * nc_all", wrap(body_cols))
    )
    return head + rows + cols


def stencil_kernels(target: str, sim: bool = False, pre: bool = False, post: bool = False):
    """The (rows, cols) separable pass kernels for ``target`` (``stencil_source``)."""
    mod = load(stencil_source(target, sim, pre, post), target)
    return mod.rows, mod.cols


# --------------------------------------------------------------------------- window passes
#
# The generic passes of a ``Window`` stencil (``kernels.registry.Window``): taps per axis and a
# border mode, or a median window. One text for every such op; the border is a run-time
# argument (``BORDER_CODES``), the window size of a median a compile-time one (its values live
# in a local array).

#: ``Window.border`` as the passes' run-time ``mode``
BORDER_CODES = {"constant": 0, "edge": 1, "reflect": 2, "symmetric": 3}

_FOLD = '''
@_dev
def _fold(i, n, mode):
    # where index i (of an axis of n) reads: itself inside; outside, -1 for a zero (constant),
    # the nearest edge, a mirror about the edge pixel (period 2n - 2) or about the edge
    # (period 2n)
    if i >= 0 and i < n:
        return i
    if mode == 0:
        return -1
    if mode == 1:
        return 0 if i < 0 else n - 1
    if n == 1:
        return 0
    if mode == 2:
        p = 2 * n - 2
        i = i % p
        return i if i < n else p - i
    p = 2 * n
    i = i % p
    return i if i < n else p - 1 - i
'''

_WINDOW_ROWS = """
acc = 0.0
for k in range(ntx):
    xx = _fold(xi + k - rx, w, mode)
    if xx >= 0:
        acc += tx[k] * LOAD(y, xx)
tmp[y, xi, c] = acc
"""

_WINDOW_COLS = """
if c < nc:
    acc = 0.0
    for k in range(nty):
        yy = _fold(y + k - ry, h, mode)
        if yy >= 0:
            acc += ty[k] * tmp[yy, xi, c]
    if is_int:
        acc = _rint_clip(acc, full)
    STORE
else:
    dst[y, xi, c] = src[y, xi, c]
"""

_WINDOW_MEDIAN = """
if c < nc:
    n_ = 0
    for dy in range(KS):
        yy = _fold(y + dy - R, h, mode)
        for dx in range(KS):
            xx = _fold(xi + dx - R, w, mode)
            win[n_] = LOAD(yy, xx) if yy >= 0 and xx >= 0 else 0.0
            n_ += 1
    for i_ in range(1, KS * KS):
        t_ = win[i_]
        j_ = i_ - 1
        while j_ >= 0 and win[j_] > t_:
            win[j_ + 1] = win[j_]
            j_ -= 1
        win[j_ + 1] = t_
    acc = win[KS * KS // 2]
    if is_int:
        acc = _rint_clip(acc, full)
    STORE
else:
    dst[y, xi, c] = src[y, xi, c]
"""


_WINDOW_PLANE = """
if c < nc:
    acc = 0.0
    for dy in range(nk):
        yy = _fold(y + dy - rk, h, mode)
        if yy >= 0:
            for dx in range(nk):
                t_ = k2[dy * nk + dx]
                if t_ != 0.0:
                    xx = _fold(xi + dx - rk, w, mode)
                    if xx >= 0:
                        acc += t_ * LOAD(yy, xx)
    if is_int:
        acc = _rint_clip(acc, full)
    STORE
else:
    dst[y, xi, c] = src[y, xi, c]
"""


def window_source(target: str, sim: bool = False, pre: bool = False, post: bool = False,
                  median: int = 0, plane: bool = False) -> str:
    """Source of a window stencil's passes (see above), channels folded into x (x * C + c):

    - linear: ``rows(src, tmp, tx, nc, mode, lut)`` (each value's weighted sum along x into
      the float64 ``tmp``) and ``cols(src, tmp, dst, ty, nc, is_int, full, mode, lut)``
      (along y);
    - ``median`` (the window's side): ``median(src, dst, nc, is_int, full, mode, lut)``;
    - ``plane``: ``plane(src, dst, k2, nk, nc, is_int, full, mode, lut)``, the (nk, nk) taps
      ``k2`` (flattened, row-major) summed in one pass, zero taps skipped.

    ``lut`` (2, C, 256) uint8: with ``pre`` each value loaded goes through ``lut[0, c]`` (an
    elementwise prologue), with ``post`` each value stored through ``lut[1, c]``. Channels
    from ``nc`` on (alpha) are copied.
    """
    head = ("# millipyde generated window stencil passes\n" + HEADER[target] + RINT_CLIP
            + _FOLD)
    if median and target != "cpu":
        head += "from numba import float64 as _f64\n"
    dec = jit_decorator(target, sim)
    load_ = "float(lut[0, c, src[{0}, {1}, c]])" if pre else "float(src[{0}, {1}, c])"
    store = "dst[y, xi, c] = lut[1, c, int(acc)]" if post else "dst[y, xi, c] = acc"

    def body(text: str) -> str:
        text = re.sub(r"LOAD\((\w+), (\w+)\)", lambda m: load_.format(m[1], m[2]), text)
        text = text.replace("STORE", store)
        return "c = x % nc_all\nxi = x // nc_all\n" + text.strip("\n")

    if plane:
        loop = loop_2d(target, "h", "w * nc_all", body(_WINDOW_PLANE))
        return (head + f"\n\n{dec}\ndef plane(src, dst, k2, nk, nc, is_int, full, mode, lut):\n"
                "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = src.shape[2]\n"
                "    rk = nk // 2\n" + loop)
    if median:
        if median % 2 != 1:
            raise ValueError(f"a median window's side must be odd, got {median}")
        local = (f"win = np.empty({median * median})" if target == "cpu"
                 else f"win = cuda.local.array({median * median}, _f64)")
        text = re.sub(r"\bKS\b", str(median), body(_WINDOW_MEDIAN))
        text = re.sub(r"\bR\b", str(median // 2), text)
        # the window's values per pixel: a local array
        loop = loop_2d(target, "h", "w * nc_all", local + "\n" + text)
        return (head + f"\n\n{dec}\ndef median(src, dst, nc, is_int, full, mode, lut):\n"
                "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = src.shape[2]\n" + loop)
    rows = (f"\n\n{dec}\ndef rows(src, tmp, tx, nc, mode, lut):\n"
            "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = nc\n"
            "    ntx = tx.shape[0]\n    rx = ntx // 2\n"
            + loop_2d(target, "h", "w * nc", body(_WINDOW_ROWS)))
    cols = (f"\n\n{dec}\ndef cols(src, tmp, dst, ty, nc, is_int, full, mode, lut):\n"
            "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = src.shape[2]\n"
            "    nty = ty.shape[0]\n    ry = nty // 2\n"
            + loop_2d(target, "h", "w * nc_all", body(_WINDOW_COLS)))
    return head + rows + cols


def window_kernels(target: str, sim: bool = False, pre: bool = False, post: bool = False,
                   median: int = 0, plane: bool = False):
    """The window passes (``window_source``): ``(rows, cols)``, ``(median,)`` or
    ``(plane,)``."""
    mod = load(window_source(target, sim, pre, post, median, plane), target)
    if plane:
        return (mod.plane,)
    return (mod.median,) if median else (mod.rows, mod.cols)
