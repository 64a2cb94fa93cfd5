# millipyde generated expression kernel: ExprSig(ndim=2, inputs=(False,), steps=(('{0}', ('a0',), ''),), reduce=('min', 'float64'))
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
from numba import float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, boolean

@_dev
def _minimum(a, b):
    # np.minimum: NaN wins
    if a != a:
        return a
    if b != b:
        return b
    return a if a < b else b


@_dev
def _maximum(a, b):
    if a != a:
        return a
    if b != b:
        return b
    return a if a > b else b


@cuda.jit
def kernel(in0, out, p, osh, st, n):
    sm = cuda.shared.array(256, float64)
    tid = cuda.threadIdx.x
    acc = float64(math.inf)
    i0 = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(i0, n, step):
        a0 = in0[i]
        t0 = a0
        v = t0
        acc = _minimum(acc, v)
    sm[tid] = acc
    cuda.syncthreads()
    s = 128
    while s > 0:
        if tid < s:
            v = sm[tid + s]
            acc = sm[tid]
            sm[tid] = _minimum(acc, v)
        cuda.syncthreads()
        s //= 2
    if tid == 0:
        out[cuda.blockIdx.x] = sm[0]
