# millipyde generated LUT builder: composes uint8 elementwise chains
import math
import numpy as np
from numba import njit, prange
from numba import uint32 as _u32
from numba import uint64 as _u
from millipyde.kernels import REGISTRY as _R
_dev = njit(inline='always', cache=False)

@_dev
def _b2f(b):
    return float(b)
_f_colorize = _dev(_R['colorize'].fn)
_f_brightness = _dev(_R['brightness'].fn)
_f_adjust_gamma = _dev(_R['adjust_gamma'].fn)

@njit(cache=True)
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


@njit(cache=True, nogil=True)
def build(codes, params, channels, full, out):
    for c in range(channels):
        for i in range(256):
            v = float(i)
            for k in range(codes.shape[0]):
                code = codes[k]
                a = params[k, 0]
                b = params[k, 1]
                d = params[k, 2]
                if c == 3:
                    continue
                if code == 0:
                    v = _f_colorize(v, c, full, a, b, d)
                elif code == 1:
                    v = _f_brightness(v, c, full, a, b, d)
                elif code == 2:
                    v = _f_adjust_gamma(v, c, full, a, b, d)
                v = _rint_clip(v, full)
            out[c, i] = np.uint8(v)


@njit(cache=True, nogil=True)
def build_many(codes, params, channels, full, out):
    for m in range(params.shape[0]):
        build(codes, params[m], channels, full, out[m])
