"""The block codec passes: a stencil whose taps function returns a
``kernels.registry.BlockCodec`` (``jpeg``) runs these four passes instead of taps.

JPEG's round trip as libjpeg(-turbo) does it, with a float DCT in place of its integer one:

1. ``samples``: the encoder's integer colour conversion (``jccolor.c``) and, for colour
   images, 4:2:0 chroma downsampling (``jcsample.c`` ``h2v2_downsample``, its 1, 2 bias),
   each plane padded to whole 8x8 blocks as ``jcprepct.c`` pads it (last column and row
   repeated, before downsampling across, after it down);
2. ``coefficients``: each coefficient of each block: the orthonormal 8x8 DCT of the samples
   minus 128, quantised (half away from zero, as ``jcdctmgr.c``) and dequantised;
3. ``decode``: each sample back through the inverse DCT, + 128, rounded half to even and
   clipped to 0..255 (the decoder's range limit), written over the samples;
4. ``colour``: each output value: chroma upsampled with ``jdsample.c``'s h2v2 "fancy"
   triangle filter (biases 8 and 7, edges repeated), the decoder's integer colour conversion
   (``jdcolor.c``), clipped; alpha copied.

Each pass is one output per thread with no shared memory, one text for every target; the
tables (quantisation by quality, DCT basis) are run-time arguments, so every quality runs the
same compiled passes. Every value loaded goes through ``lut[0, c]`` and every value stored
through ``lut[1, c]``: uint8 elementwise chains fused before and after the codec, or identity
tables, so one compiled set of passes serves both (each compile of the four costs seconds).
"""

from __future__ import annotations

import re

from .loader import load
from .target import HEADER, RINT_CLIP, jit_decorator, loop_2d


def _fix(x: float) -> int:
    # libjpeg's FIX(): a coefficient in 16-bit fixed point
    return int(x * 65536 + 0.5)


#: the encoder's RGB -> YCbCr (``jccolor.c``): Y rounded, Cb and Cr offset by 128 rounding
#: halves down (``ONE_HALF - 1``)
_RGB_YCC = f'''
@_dev
def _luma(r, g, b):
    return ({_fix(0.299)} * r + {_fix(0.587)} * g + {_fix(0.114)} * b + 32768) >> 16


@_dev
def _cb(r, g, b):
    return (-{_fix(0.16874)} * r - {_fix(0.33126)} * g + {_fix(0.5)} * b + 8421375) >> 16


@_dev
def _cr(r, g, b):
    return ({_fix(0.5)} * r - {_fix(0.41869)} * g - {_fix(0.08131)} * b + 8421375) >> 16
'''

_SAMPLES = """
yy = yr if yr < h else h - 1
xx = x if x < w else w - 1
if ncomp == 1:
    smp[yr, x, 0] = LOAD(yy, xx, 0)
else:
    r = int(LOAD(yy, xx, 0))
    g = int(LOAD(yy, xx, 1))
    b = int(LOAD(yy, xx, 2))
    smp[yr, x, 0] = _luma(r, g, b)
    if yr < hc and x < wc:
        # the 2x2 pixels of chroma sample (y, x): rows past the last real chroma row repeat
        # it; columns past the image repeat its last column before the sum
        cy = yr if yr < ch else ch - 1
        sb = 0
        sr = 0
        for i in range(2):
            py = 2 * cy + i
            if py >= h:
                py = h - 1
            for j in range(2):
                px = 2 * x + j
                if px >= w:
                    px = w - 1
                r = int(LOAD(py, px, 0))
                g = int(LOAD(py, px, 1))
                b = int(LOAD(py, px, 2))
                sb += _cb(r, g, b)
                sr += _cr(r, g, b)
        bias = 1 + (x & 1)
        smp[yr, x, 1] = (sb + bias) >> 2
        smp[yr, x, 2] = (sr + bias) >> 2
"""

_COEFFICIENTS = """
comp = x % ncomp
xi = x // ncomp
if comp == 0 or (yr < hc and xi < wc):
    u = yr % 8
    v = xi % 8
    y0 = yr - u
    x0 = xi - v
    acc = 0.0
    for i in range(8):
        ti = basis[i, u]
        for j in range(8):
            acc += ti * basis[j, v] * (smp[y0 + i, x0 + j, comp] - 128.0)
    qv = quant[1 if comp > 0 else 0, u * 8 + v]
    level = math.floor(abs(acc) / qv + 0.5)
    coef[yr, xi, comp] = math.copysign(level * qv, acc)
"""

_DECODE = """
comp = x % ncomp
xi = x // ncomp
if comp == 0 or (yr < hc and xi < wc):
    i = yr % 8
    j = xi % 8
    y0 = yr - i
    x0 = xi - j
    acc = 0.0
    for u in range(8):
        ti = basis[i, u]
        for v in range(8):
            acc += ti * basis[j, v] * coef[y0 + u, x0 + v, comp]
    smp[yr, xi, comp] = _rint_clip(acc + 128.0, 255.0)
"""

_COLOUR = """
c = x % nc_all
xi = x // nc_all
if c >= nc:
    dst[yr, xi, c] = src[yr, xi, c]
else:
    if ncomp == 1:
        acc = smp[yr, xi, 0]
    else:
        # h2v2 fancy upsampling: 3/4 of the nearer chroma row and column, 1/4 of the further
        ny = yr // 2
        fy = ny - 1 if yr % 2 == 0 else ny + 1
        if fy < 0:
            fy = 0
        if fy > ch - 1:
            fy = ch - 1
        nx = xi // 2
        fx = nx - 1 if xi % 2 == 0 else nx + 1
        if fx < 0:
            fx = 0
        if fx > cw - 1:
            fx = cw - 1
        bias = 8 if xi % 2 == 0 else 7
        k = 1 if c == 2 else 2
        near = 3 * int(smp[ny, nx, k]) + int(smp[fy, nx, k])
        far = 3 * int(smp[ny, fx, k]) + int(smp[fy, fx, k])
        s = ((3 * near + far + bias) >> 4) - 128
        lum = int(smp[yr, xi, 0])
        if c == 0:
            acc = float(lum + ((RED * s + 32768) >> 16))
        elif c == 2:
            acc = float(lum + ((BLUE * s + 32768) >> 16))
        else:
            near = 3 * int(smp[ny, nx, 1]) + int(smp[fy, nx, 1])
            far = 3 * int(smp[ny, fx, 1]) + int(smp[fy, fx, 1])
            sb = ((3 * near + far + bias) >> 4) - 128
            acc = float(lum + ((-GCB * sb - GCR * s + 32768) >> 16))
        acc = _rint_clip(acc, 255.0)
    STORE
"""


def codec_source(target: str, sim: bool = False) -> str:
    """Source of the four passes (see the module doc):

    - ``samples(src, smp, h, w, ch, hc, wc, ncomp, lut)`` over the padded luma plane;
    - ``coefficients(smp, coef, quant, basis, hc, wc, ncomp)`` and ``decode(coef, smp, basis,
      hc, wc, ncomp)`` over every (row, column * ncomp) of the padded planes;
    - ``colour(src, smp, dst, nc, ncomp, ch, cw, lut)`` over the output.

    ``smp`` and ``coef`` are float64 (padded height, padded width, ncomp); chroma planes
    (``hc`` x ``wc`` padded, ``ch`` x ``cw`` real) live in their top-left corner. ``quant``
    (2, 64) float64 holds the luma and chroma tables, ``basis[i, u]`` the DCT's
    ``C(u) / 2 cos((2 i + 1) u pi / 16)``.
    """
    head = ("# millipyde generated block codec passes\n" + HEADER[target] + RINT_CLIP
            + _RGB_YCC)
    dec = jit_decorator(target, sim)
    # the CPU's prange row index is unsigned, and unsigned with signed integers types as a
    # float in Numba: the bodies index with a signed copy
    row = "yr = np.int64(y)\n" if target == "cpu" else "yr = y\n"
    load_ = "lut[0, {2}, src[{0}, {1}, {2}]]"

    def loads(text: str) -> str:
        return re.sub(r"LOAD\((\w+), (\w+), (\w+)\)", lambda m: load_.format(m[1], m[2], m[3]),
                      text)

    store = "dst[y, xi, c] = lut[1, c, int(acc)]"
    colour = (_COLOUR.replace("STORE", store).replace("RED", str(_fix(1.402)))
              .replace("BLUE", str(_fix(1.772))).replace("GCB", str(_fix(0.34414)))
              .replace("GCR", str(_fix(0.71414))))
    return (
        head
        + f"\n\n{dec}\ndef samples(src, smp, h, w, ch, hc, wc, ncomp, lut):\n"
        + loop_2d(target, "smp.shape[0]", "smp.shape[1]", row + loads(_SAMPLES).strip("\n"))
        + f"\n\n{dec}\ndef coefficients(smp, coef, quant, basis, hc, wc, ncomp):\n"
        + loop_2d(target, "smp.shape[0]", "smp.shape[1] * ncomp", row + _COEFFICIENTS.strip("\n"))
        + f"\n\n{dec}\ndef decode(coef, smp, basis, hc, wc, ncomp):\n"
        + loop_2d(target, "smp.shape[0]", "smp.shape[1] * ncomp", row + _DECODE.strip("\n"))
        + f"\n\n{dec}\ndef colour(src, smp, dst, nc, ncomp, ch, cw, lut):\n"
        "    nc_all = dst.shape[2]\n"
        + loop_2d(target, "dst.shape[0]", "dst.shape[1] * nc_all", row + colour.strip("\n"))
    )


def codec_kernels(target: str, sim: bool = False):
    """The (samples, coefficients, decode, colour) passes for ``target`` (``codec_source``)."""
    mod = load(codec_source(target, sim), target)
    return mod.samples, mod.coefficients, mod.decode, mod.colour
