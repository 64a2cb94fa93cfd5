"""A NumPy / SciPy transcription of the JPEG round trip ``jpeg`` computes on the device: libjpeg's
(libjpeg-turbo's, as Pillow bundles) integer colour conversion, 4:2:0 downsampling with its
edge padding and 1, 2 bias, the IJG tables scaled by quality (``jpeg_quality_scaling``),
then an orthonormal float 8x8 DCT (``scipy.fft.dctn``), quantisation rounding half away from
zero, dequantisation, the inverse DCT rounded half to even and clipped to 0..255, h2v2 "fancy"
upsampling and the decoder's integer colour conversion. The DCT is float where libjpeg's is
an integer one: against Pillow only a tolerance holds (``tests/kernels/test_jpeg.py``)."""

from __future__ import annotations

import numpy as np
from scipy.fft import dctn, idctn

#: the IJG tables of the JPEG standard's Annex K (natural, row-major order)
LUMA = np.array([
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99])
CHROMA = np.array([
    17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99,
    24, 26, 56, 99, 99, 99, 99, 99, 47, 66, 99, 99, 99, 99, 99, 99,
    *([99] * 32)])


def tables(quality: int) -> np.ndarray:
    """jcparam.c: ``scale = 5000 / q`` below 50, ``200 - 2 q`` from 50; ``(base * scale + 50)
    // 100`` within [1, 255] (baseline)."""
    q = min(max(int(quality), 1), 100)
    scale = 5000 // q if q < 50 else 200 - 2 * q
    return np.stack([np.clip((t * scale + 50) // 100, 1, 255) for t in (LUMA, CHROMA)])


def _fix(x: float) -> int:
    return int(x * 65536 + 0.5)


def rgb_to_ycc(rgb: np.ndarray) -> np.ndarray:
    """jccolor.c ``rgb_ycc_convert``: 16-bit fixed point, Y rounded, Cb and Cr offset by 128
    with ``ONE_HALF - 1`` (halves round down)."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    half, off = 1 << 15, 128 << 16
    y = (_fix(0.299) * r + _fix(0.587) * g + _fix(0.114) * b + half) >> 16
    cb = (-_fix(0.16874) * r - _fix(0.33126) * g + _fix(0.5) * b + off + half - 1) >> 16
    cr = (_fix(0.5) * r - _fix(0.41869) * g - _fix(0.08131) * b + off + half - 1) >> 16
    return np.stack([y, cb, cr], axis=-1)


def ycc_to_rgb(y: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> np.ndarray:
    """jdcolor.c ``ycc_rgb_convert`` (its tables' arithmetic), clipped to 0..255."""
    half = 1 << 15
    cb, cr = cb.astype(np.int64) - 128, cr.astype(np.int64) - 128
    r = y + ((_fix(1.402) * cr + half) >> 16)
    g = y + ((-_fix(0.34414) * cb - _fix(0.71414) * cr + half) >> 16)
    b = y + ((_fix(1.772) * cb + half) >> 16)
    return np.clip(np.stack([r, g, b], axis=-1), 0, 255)


def downsample(plane: np.ndarray) -> np.ndarray:
    """jcsample.c ``h2v2_downsample`` with jcprepct.c's padding, to whole 8x8 blocks: the input
    edge-extended to an even size, 2x2 sums plus 1, 2, 1, 2... along a row, shifted by 2; rows
    past the last real one repeat it, columns past it average the repeated last column."""
    h, w = plane.shape
    ch, cw = -(-h // 2), -(-w // 2)
    bh, bw = -(-ch // 8) * 8, -(-cw // 8) * 8
    rows = np.minimum(np.arange(2 * ch), h - 1)
    cols = np.minimum(np.arange(2 * bw), w - 1)
    p = plane[rows][:, cols].astype(np.int64)
    s = p[0::2, 0::2] + p[0::2, 1::2] + p[1::2, 0::2] + p[1::2, 1::2]
    bias = 1 + (np.arange(bw) & 1)
    d = (s + bias) >> 2
    return d[np.minimum(np.arange(bh), ch - 1)]


def pad_blocks(plane: np.ndarray) -> np.ndarray:
    """A full-size plane padded to whole blocks by repeating its last row and column."""
    h, w = plane.shape
    return plane[np.minimum(np.arange(-(-h // 8) * 8), h - 1)][
        :, np.minimum(np.arange(-(-w // 8) * 8), w - 1)]


def round_trip_blocks(plane: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The quantised DCT round trip of a padded plane: float DCT, ``sign(F) floor(|F| / q +
    0.5)`` times ``q``, inverse DCT, + 128, rounded half to even, clipped to 0..255."""
    h, w = plane.shape
    blocks = plane.reshape(h // 8, 8, w // 8, 8).transpose(0, 2, 1, 3).astype(np.float64) - 128
    f = dctn(blocks, axes=(2, 3), norm="ortho")
    qq = q.reshape(8, 8).astype(np.float64)
    deq = np.sign(f) * np.floor(np.abs(f) / qq + 0.5) * qq
    back = idctn(deq, axes=(2, 3), norm="ortho") + 128
    out = np.clip(np.rint(back), 0, 255)
    return out.transpose(0, 2, 1, 3).reshape(h, w)


def upsample(plane: np.ndarray, h: int, w: int) -> np.ndarray:
    """jdsample.c ``h2v2_fancy_upsample`` of the real ``ceil(h/2)`` x ``ceil(w/2)`` samples:
    3/4 of the nearer and 1/4 of the further row, then of the column, biases 8 and 7, edges
    repeated."""
    ch, cw = -(-h // 2), -(-w // 2)
    s = plane[:ch, :cw].astype(np.int64)
    y = np.arange(h)
    near = y // 2
    far = np.clip(np.where(y % 2 == 0, near - 1, near + 1), 0, ch - 1)
    colsum = 3 * s[near] + s[far]
    x = np.arange(w)
    nx = x // 2
    fx = np.clip(np.where(x % 2 == 0, nx - 1, nx + 1), 0, cw - 1)
    bias = np.where(x % 2 == 0, 8, 7)
    return (3 * colsum[:, nx] + colsum[:, fx] + bias) >> 4


def jpeg(img: np.ndarray, quality: int) -> np.ndarray:
    """The round trip of a uint8 image (grey, RGB or RGBA: alpha kept) at ``quality``."""
    q = tables(quality)
    if img.ndim == 2 or img.shape[2] == 1:
        grey = img.reshape(img.shape[:2])
        h, w = grey.shape
        out = round_trip_blocks(pad_blocks(grey), q[0])[:h, :w]
        return out.astype(np.uint8).reshape(img.shape)
    h, w = img.shape[:2]
    ycc = rgb_to_ycc(img[..., :3])
    y = round_trip_blocks(pad_blocks(ycc[..., 0]), q[0])[:h, :w].astype(np.int64)
    cb, cr = (upsample(round_trip_blocks(downsample(ycc[..., i]), q[1]), h, w) for i in (1, 2))
    out = img.copy()
    out[..., :3] = ycc_to_rgb(y, cb, cr)
    return out
