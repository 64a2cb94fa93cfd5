# millipyde generated batch writer: cin=3 channels=3 NHWC resize=False math=abc24a069409
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
from millipyde.kernels import convert as _C
_norm = _dev(_C.normalize)
_grid = _dev(_C.grid_coordinate)
_edge = _dev(_C.edge)
_lerp2 = _dev(_C.lerp2)


@cuda.jit
def convert(src, pos, out, mean, std, full, scale_y, scale_x):
    nb = src.shape[0]
    h = src.shape[1]
    w = src.shape[2]
    hh = out.shape[1]
    ww = out.shape[2]
    x0, y0, b0 = cuda.grid(3)
    sx_, sy_, sb_ = cuda.gridsize(3)
    b = b0
    while b < nb:
        o = pos[b]
        y = y0
        while y < hh:
            x = x0
            while x < ww:
                out[o, y, x, 0] = _norm(float(src[b, y, x, 0]), full, mean[0], std[0])
                out[o, y, x, 1] = _norm(float(src[b, y, x, 1]), full, mean[1], std[1])
                out[o, y, x, 2] = _norm(float(src[b, y, x, 2]), full, mean[2], std[2])
                x += sx_
            y += sy_
        b += sb_
