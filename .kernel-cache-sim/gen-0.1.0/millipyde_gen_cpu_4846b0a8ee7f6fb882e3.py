# millipyde generated batched affine maps of sampler rotate
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
_f = _dev(_R['rotate'].fn)


@njit(cache=True, nogil=True)
def affine_many(params, h, w, out):
    for m in range(params.shape[0]):
        oy, ox = _f(0.0, 0.0, h, w, params[m, 0])
        y1, x1 = _f(1.0, 0.0, h, w, params[m, 0])
        y2, x2 = _f(0.0, 1.0, h, w, params[m, 0])
        out[m, 0] = float(y1) - oy
        out[m, 1] = float(y2) - oy
        out[m, 2] = oy
        out[m, 3] = float(x1) - ox
        out[m, 4] = float(x2) - ox
        out[m, 5] = ox
