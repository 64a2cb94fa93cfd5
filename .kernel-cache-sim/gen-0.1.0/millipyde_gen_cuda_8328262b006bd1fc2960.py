# millipyde generated batched gather kernel: GatherSig(cin=3, mode='lut', is_int=True, sampler=False, grey=False, pre=(), post=(), grey_ops=(), packed=False, lut_stages=(True, False), clip=False)
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
def kernel(src, sidx, dst, lut, p):
    nb = dst.shape[0]
    h = dst.shape[1]
    w = dst.shape[2]
    x0, y0, b0 = cuda.grid(3)
    sx_, sy_, sb_ = cuda.gridsize(3)
    b = b0
    while b < nb:
        s = sidx[b]
        full = p[b, 14]
        clip_lo = p[b, 15]
        q0 = int(math.floor(p[b, 0] + 0.5))
        q1 = int(math.floor(p[b, 1] + 0.5))
        q2 = int(math.floor(p[b, 2] + 0.5))
        q3 = int(math.floor(p[b, 3] + 0.5))
        q4 = int(math.floor(p[b, 4] + 0.5))
        q5 = int(math.floor(p[b, 5] + 0.5))
        mh = int(p[b, 12])
        mw = int(p[b, 13])
        y = y0
        while y < h:
            x = x0
            while x < w:
                sy = q0 * y + q1 * x + q2
                sx = q3 * y + q4 * x + q5
                dst[b, y, x, 0] = lut[b, 0, 0, src[s, _u(sy), _u(sx), 0]]
                dst[b, y, x, 1] = lut[b, 0, 1, src[s, _u(sy), _u(sx), 1]]
                dst[b, y, x, 2] = lut[b, 0, 2, src[s, _u(sy), _u(sx), 2]]
                x += sx_
            y += sy_
        b += sb_
