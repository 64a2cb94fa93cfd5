# millipyde generated gather kernel: GatherSig(cin=3, mode='lut', is_int=True, sampler=False, grey=False, pre=(), post=(), grey_ops=(), packed=False, lut_stages=(True, False), clip=False)
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
def kernel(src, dst, lut, p_0, p_1, p_2, p_3, p_4, p_5, p_6, p_7, p_8, p_9, p_10, p_11, p_12, p_13, p_14, p_15):
    h = dst.shape[0]
    w = dst.shape[1]
    full = p_14
    clip_lo = p_15
    q0 = int(math.floor(p_0 + 0.5))
    q1 = int(math.floor(p_1 + 0.5))
    q2 = int(math.floor(p_2 + 0.5))
    q3 = int(math.floor(p_3 + 0.5))
    q4 = int(math.floor(p_4 + 0.5))
    q5 = int(math.floor(p_5 + 0.5))
    mh = int(p_12)
    mw = int(p_13)
    x0, y0 = cuda.grid(2)
    sx_, sy_ = cuda.gridsize(2)
    y = y0
    while y < h:
        x = x0
        while x < w:
            sy = q0 * y + q1 * x + q2
            sx = q3 * y + q4 * x + q5
            dst[y, x, 0] = lut[0, 0, src[_u(sy), _u(sx), 0]]
            dst[y, x, 1] = lut[0, 1, src[_u(sy), _u(sx), 1]]
            dst[y, x, 2] = lut[0, 2, src[_u(sy), _u(sx), 2]]
            x += sx_
        y += sy_
