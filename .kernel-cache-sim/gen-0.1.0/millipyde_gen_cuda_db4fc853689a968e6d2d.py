# millipyde generated batched separable stencil passes
import math
from numba import cuda
from numba import uint32 as _u32
from numba import uint64 as _u
from millipyde.kernels import REGISTRY as _R
_dev = cuda.jit(device=True, inline=True)
from numba import config as _config
from numba.cuda import libdevice as _ld
if _config.ENABLE_CUDASIM:
    @_dev
    def _b2f(b):
        return float(b)
    def _u(v):
        return int(v) & 0xFFFFFFFFFFFFFFFF
    def _u32(v):
        return int(v) & 0xFFFFFFFF
else:
    @_dev
    def _b2f(b):
        return _ld.hiloint2double(0x43300000, b) - 4503599627370496.0

@_dev
def _rint_clip(v, full):
    # numpy.rint then clip to the integer range, clipped first (the same: the bounds are whole
    # numbers). Below 2**52, adding 2**52 leaves no fraction bits, so the FPU's own round half
    # to even does rint: two adds instead of floors, which GPUs run at a quarter of the FMA rate.
    # Comparisons, not min/max (whose NaN rules cost GPUs ten instructions each): NaN gives 0.
    c = v if v > 0.0 else 0.0
    if c > full:
        c = full
    if c < 4503599627370496.0:
        c = (c + 4503599627370496.0) - 4503599627370496.0
    return c


@cuda.jit
def rows(src, sidx, tmp, taps, rad, nc):
    nb = tmp.shape[0]
    h = src.shape[1]
    w = src.shape[2]
    nc_all = nc
    x0, y0, b0 = cuda.grid(3)
    sx_, sy_, sb_ = cuda.gridsize(3)
    b = b0
    while b < nb:
        s = sidx[b]
        r = rad[b]
        ntaps = 2 * r + 1
        y = y0
        while y < h:
            x = x0
            while x < w * nc:
                c = x % nc_all
                xi = x // nc_all
                acc = 0.0
                for k in range(ntaps):
                    xx = xi + k - r
                    if xx >= 0 and xx < w:
                        acc += taps[b, k] * src[s, y, xx, c]
                tmp[b, y, xi, c] = acc
                x += sx_
            y += sy_
        b += sb_


@cuda.jit
def cols(src, sidx, tmp, dst, taps, rad, nc, is_int, full):
    nb = dst.shape[0]
    h = src.shape[1]
    w = src.shape[2]
    nc_all = src.shape[3]
    x0, y0, b0 = cuda.grid(3)
    sx_, sy_, sb_ = cuda.gridsize(3)
    b = b0
    while b < nb:
        s = sidx[b]
        r = rad[b]
        ntaps = 2 * r + 1
        y = y0
        while y < h:
            x = x0
            while x < w * nc_all:
                c = x % nc_all
                xi = x // nc_all
                if c < nc and r >= 0:
                    acc = 0.0
                    for k in range(ntaps):
                        yy = y + k - r
                        if yy >= 0 and yy < h:
                            acc += taps[b, k] * tmp[b, yy, xi, c]
                    if is_int:
                        acc = _rint_clip(acc, full)
                    dst[b, y, xi, c] = acc
                else:
                    dst[b, y, xi, c] = src[s, y, xi, c]
                x += sx_
            y += sy_
        b += sb_
