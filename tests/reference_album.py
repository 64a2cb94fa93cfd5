"""NumPy transcriptions of albumentations', kornia's and AutoAugment's value, colour, noise and
filter formulas (CI has none of those libraries), for the ops of those families that
torchvision lacks: RGBShift, ToSepia, ChannelDropout, SolarizeAdd, RandomBrightnessContrast,
RandomToneCurve, MultiplicativeNoise, PixelDropout, Sharpen (albumentations, which computes
uint8 images through float32 tables and OpenCV) and RandomSaltAndPepperNoise (kornia); then
kornia's RandomPlanckianJitter and albumentations' GridDropout, Downscale (OpenCV's nearest
and linear resize maps) and RandomSnow "bleach" (OpenCV's uint8 HLS in float32; the resizes
and the HLS round trip were checked against OpenCV 5.0's ``cv2`` when written).

The noise references take the pixel draws of millipyde's counter-based streams
(:func:`pixel_draws`): the libraries' own generators are not reproducible across devices, so
the formulas are checked given the draws, and the draws' distributions separately.
"""

from __future__ import annotations

import numpy as np
import reference as ref

from millipyde import random as mprandom

_F = np.float32


def _full(img: np.ndarray) -> float:
    return 255.0 if img.dtype == np.uint8 else 1.0


def _store(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float results back to the image's dtype (uint8: rounded and saturated, as OpenCV's
    ``saturate_cast`` and albucore's clipped tables)."""
    return ref._to_dtype(values, dtype)


def _colour(img: np.ndarray, fn) -> np.ndarray:
    """``fn`` on the (h, w, 3) float32 R, G, B of a colour image; alpha kept."""
    out = np.array(img, copy=True)
    out[..., :3] = _store(fn(img[..., :3].astype(_F)), img.dtype)
    return out


def _values(img: np.ndarray, fn) -> np.ndarray:
    """``fn`` on every colour value (grey images whole), through albumentations' uint8 table
    (``fn`` of 0..255 in float32, clipped, then looked up) or directly on float images."""
    out = np.array(img, copy=True)
    sl = (Ellipsis, slice(0, 3)) if img.ndim == 3 else (Ellipsis,)
    if img.dtype == np.uint8:
        chans = img.shape[2] if img.ndim == 3 else 1
        for c in range(min(chans, 3)):
            lut = _store(np.clip(fn(np.arange(256, dtype=_F), c), 0, 255), np.uint8)
            if img.ndim == 3:
                out[..., c] = lut[img[..., c]]
            else:
                out[...] = lut[img]
        return out
    out[sl] = np.clip(fn(img[sl], 0), 0.0, 1.0)
    return out


def rgb_shift(img, r, g, b):
    shifts = np.array([r, g, b], dtype=_F)
    return _colour(img, lambda x: np.clip(x + shifts, 0, _full(img)))


SEPIA = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]],
                 dtype=_F)


def to_sepia(img):
    return _colour(img, lambda x: np.clip(x @ SEPIA.T, 0, _full(img)))


def drop_channels(img, channels, fill=0):
    out = np.array(img, copy=True)
    out[..., list(channels)] = fill
    return out


def solarize_add(img, addition, threshold=128):
    """AutoAugment (tensorflow/tpu): ``where(image < threshold, clip(image + addition), image)``
    (integer addition on uint8)."""
    def fn(x, c):
        return np.where(x < threshold, np.clip(x + _F(addition), 0, _full(img)), x)
    return _values(img, fn)


def brightness_contrast(img, alpha, beta):
    """albumentations ``brightness_contrast_adjust`` with ``beta_by_max`` (its uint8 table is
    cast by truncation)."""
    if img.dtype == np.uint8:
        out = np.array(img, copy=True)
        lut = np.clip(np.arange(256, dtype=_F) * _F(alpha) + _F(beta) * 255, 0, 255)
        lut = lut.astype(np.uint8)
        sl = (Ellipsis, slice(0, 3)) if img.ndim == 3 else (Ellipsis,)
        out[sl] = lut[img[sl]]
        return out
    return _values(img, lambda x, c: x * alpha + beta)


def bezier(t, low, high):
    """albumentations ``move_tone_curve``'s curve."""
    s = 1 - t
    return 3 * s**2 * t * low + 3 * s * t**2 * high + t**3


def tone_curve(img, lows, highs):
    """``lows``, ``highs``: one pair per channel (albumentations' per_channel) or one pair."""
    lows, highs = np.broadcast_to(lows, (3,)), np.broadcast_to(highs, (3,))
    if img.dtype == np.uint8:
        t = np.linspace(0.0, 1.0, 256)
        return _values(img, lambda x, c: np.rint(bezier(t, lows[c], highs[c]) * 255))
    return _values(img, lambda x, c: bezier(x, lows[0], highs[0]))


def sharpen(img, alpha, lightness):
    """albumentations ``Sharpen`` (kernel method): ``cv2.filter2D`` of the blended kernel,
    border ``BORDER_REFLECT_101`` (numpy's "reflect"), saturated on uint8."""
    k = ((1 - alpha) * np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]], dtype=_F)
         + alpha * np.array([[-1, -1, -1], [-1, 8 + lightness, -1], [-1, -1, -1]], dtype=_F))
    def fn(x):
        h, w = x.shape[:2]
        pad = ((1, 1), (1, 1)) + (((0, 0),) if x.ndim == 3 else ())
        p = np.pad(x, pad, mode="reflect")
        acc = np.zeros(x.shape, dtype=np.float64)
        for dy in range(3):
            for dx in range(3):
                acc += k[dy, dx] * p[dy:dy + h, dx:dx + w]
        return np.clip(acc, 0, _full(img))
    if img.ndim == 3:
        return _colour(img, fn)
    return fn(img.astype(np.float64))


# --------------------------------------------------------------------------- per-pixel draws
def pixel_draws(key: int, h: int, w: int, shared: bool) -> tuple[np.ndarray, np.ndarray]:
    """The two uniform draws of every (pixel, channel) of an op whose per-pixel key is
    ``key`` (millipyde's counter ``((y w + x) 4 + c) 2``; ``shared``: channel 0's in every
    channel), as (h, w, 3) arrays."""
    y, x, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing="ij")
    if shared:
        c = np.zeros_like(c)
    n = (((y * w + x) * 4 + c) * 2).astype(np.uint64)
    with np.errstate(over="ignore"):
        u1, u2 = ((mprandom._mix_array(np.uint64(key) ^ m) >> np.uint64(11)).astype(np.float64)
                  * 2.0 ** -53 for m in (n, n + np.uint64(1)))
    return u1, u2


def _per_value(img, fn, u1, u2):
    """``fn(values, u1, u2)`` on the colour values (grey: channel 0's draws); alpha kept."""
    out = np.array(img, dtype=np.float64, copy=True)
    if img.ndim == 3:
        out[..., :3] = fn(out[..., :3], u1, u2)
    else:
        out = fn(out, u1[..., 0], u2[..., 0])
    return _store(out, img.dtype) if img.dtype == np.uint8 else out


def salt_and_pepper(img, amount, salt, u1, u2):
    """kornia: ``mask_noise = u < amount``, ``mask_salt = u' < salt``, repeated over the
    channels; salt is full intensity, pepper 0."""
    full = _full(img)
    return _per_value(img, lambda v, a, b: np.where(a < amount, np.where(b < salt, full, 0.0),
                                                    v), u1, u2)


def pixel_dropout(img, prob, values, u1, u2):
    vals = np.asarray(values, dtype=np.float64)[:3]
    if img.ndim == 2:
        vals = vals[0]
    return _per_value(img, lambda v, a, b: np.where(a < prob, vals, v), u1, u2)


def multiply(img, m):
    """albumentations ``multiply``: values times ``m`` (one multiplier per channel, (3,), or
    one per value, (h, w, 3)), clipped; alpha kept."""
    out = np.array(img, dtype=np.float64, copy=True)
    full = _full(img)
    m = np.asarray(m, dtype=np.float64)
    if img.ndim == 3:
        out[..., :3] = np.clip(out[..., :3] * m, 0, full)
    else:
        out = np.clip(out * (m[..., 0] if m.ndim == 3 else m.ravel()[0]), 0, full)
    return _store(out, img.dtype) if img.dtype == np.uint8 else out


# --------------------------------------------------------------------------- HSV (OpenCV uint8)
def _cv_round(x):
    return np.rint(x)  # cvRound / saturate_cast: to the nearest, halves to even


_SDIV = np.array([0] + [_cv_round((255 << 12) / i) for i in range(1, 256)], dtype=np.int64)
_HDIV = np.array([0] + [_cv_round((180 << 12) / (6.0 * i)) for i in range(1, 256)],
                 dtype=np.int64)


def rgb2hsv_u8(rgb: np.ndarray) -> np.ndarray:
    """``cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV)`` on uint8 (OpenCV's RGB2HSV_b: fixed-point
    tables, 12 fraction bits, hue 0..179)."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    v = np.maximum(np.maximum(r, g), b)
    vmin = np.minimum(np.minimum(r, g), b)
    diff = v - vmin
    s = (diff * _SDIV[v] + (1 << 11)) >> 12
    h = np.where(v == r, g - b, np.where(v == g, b - r + 2 * diff, r - g + 4 * diff))
    h = (h * _HDIV[diff] + (1 << 11)) >> 12
    h = np.where(h < 0, h + 180, h)
    return np.stack([h, s, v], axis=-1).astype(np.uint8)


def hsv2rgb_u8(hsv: np.ndarray) -> np.ndarray:
    """``cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)`` on uint8 (HSV2RGB_b: float32 h * 6 / 180,
    s / 255, v / 255, the sector formulas, ``saturate_cast`` of x * 255)."""
    h = hsv[..., 0].astype(_F) * _F(6.0 / 180.0)
    s = hsv[..., 1].astype(_F) * _F(1 / 255)
    v = hsv[..., 2].astype(_F) * _F(1 / 255)
    sector = np.floor(h).astype(np.int64) % 6
    f = h - np.floor(h)
    tab = np.stack([v, v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))], axis=-1)
    # OpenCV's sector_data gives (b, g, r) as tab indices
    sector_data = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])
    idx = sector_data[sector]
    bgr = np.take_along_axis(tab, idx, axis=-1)
    rgb = bgr[..., ::-1]
    rgb = np.where((s == 0)[..., None], v[..., None], rgb)
    return np.clip(np.rint(rgb * 255), 0, 255).astype(np.uint8)


def hsv_shift(img, hue_shift, sat_shift, val_shift):
    """albumentations ``shift_hsv`` on uint8 RGB(A): its hue, saturation and value tables
    (``mod(h + dh, 180)``, ``clip(x + d, 0, 255)``, cast to uint8) between OpenCV's
    conversions; alpha kept."""
    hsv = rgb2hsv_u8(img[..., :3]).astype(np.float64)
    hsv[..., 0] = np.mod(hsv[..., 0] + hue_shift, 180)
    hsv[..., 1] = np.clip(hsv[..., 1] + sat_shift, 0, 255)
    hsv[..., 2] = np.clip(hsv[..., 2] + val_shift, 0, 255)
    out = np.array(img, copy=True)
    out[..., :3] = hsv2rgb_u8(hsv.astype(np.uint8))
    return out


# --------------------------------------------------------------------------- kornia illumination
def _add_gradient(img, gradient):
    """kornia: ``input.add(gradient).clamp(0, 1)`` on the image as [0, 1] floats; alpha kept."""
    full = _full(img)
    out = np.array(img, dtype=np.float64, copy=True) / full
    if img.ndim == 3:
        out[..., :3] = np.clip(out[..., :3] + gradient[..., None], 0, 1)
    else:
        out = np.clip(out + gradient, 0, 1)
    out = out * full
    return _store(out, img.dtype) if img.dtype == np.uint8 else out


def linear_illumination(img, amp, direction):
    """kornia ``RandomLinearIllumination``'s gradient (its four ramps) for a signed gain."""
    h, w = img.shape[:2]
    ry = np.linspace(0, 1, h)[:, None] * np.ones((1, w))
    rx = np.linspace(0, 1, w)[None, :] * np.ones((h, 1))
    ramps = [ry, np.linspace(1, 0, h)[:, None] * np.ones((1, w)), rx,
             np.linspace(1, 0, w)[None, :] * np.ones((h, 1))]
    return _add_gradient(img, amp * ramps[direction])


def corner_illumination(img, amp, corner):
    """kornia ``RandomLinearCornerIllumination``: its four diagonal bases, each through
    ``normalize_min_max`` (eps 1e-6)."""
    h, w = img.shape[:2]
    yg = np.linspace(0, 1, h)[:, None] * np.ones((1, w))
    xg = np.linspace(0, 1, w)[None, :] * np.ones((h, 1))
    base = [xg + yg, -xg + yg, xg - yg, 1 - (xg + yg)][corner]
    g = (base - base.min()) / (base.max() - base.min() + 1e-6)
    return _add_gradient(img, amp * g)


def _kornia_gaussian(n, sigma, mean):
    """kornia ``gaussian(n, sigma, mean=mean)``: ``exp(-x**2 / (2 sigma**2))`` of ``x =
    arange(n) - mean`` (+ 0.5 for an even ``n``), over its sum."""
    x = np.arange(n, dtype=np.float64) - mean
    if n % 2 == 0:
        x = x + 0.5
    g = np.exp(-x**2 / (2 * sigma**2))
    return g / g.sum()


def gaussian_illumination(img, amp, cfy, cfx, sfy, sfx):
    """kornia ``RandomGaussianIllumination`` given its draws: sigmas ``size * sf``, centres
    ``round(size * cf)``, the outer product min-max normalised (eps 1e-6)."""
    h, w = img.shape[:2]
    gy = _kornia_gaussian(h, h * sfy, np.rint(h * cfy))
    gx = _kornia_gaussian(w, w * sfx, np.rint(w * cfx))
    g = gy[:, None] @ gx[None, :]
    g = (g - g.min()) / (g.max() - g.min() + 1e-6)
    return _add_gradient(img, amp * g)


# ------------------------------------------- log, sigmoid, intensity rescale and their kin
def planckian_jitter(img, r_gain, b_gain):
    """kornia ``RandomPlanckianJitter.apply_transform`` on [0, 1] float32 values: R times
    ``r_gain``, B times ``b_gain``, ``clamp(max=1)``; alpha kept."""
    def fn(x):
        out = x / _F(255.0)
        out[..., 0] *= _F(r_gain)
        out[..., 2] *= _F(b_gain)
        return np.minimum(out, _F(1.0)) * _F(255.0)

    return _colour(img, fn)


def grid_dropout(img, unit_h, unit_w, ratio, shift_y, shift_x, fill):
    """albumentations ``GridDropout.get_params_dependent_on_data`` (its holes list) and
    ``cutout`` (each hole filled); alpha kept."""
    height, width = img.shape[:2]
    hole_w = min(max(int(unit_w * ratio), 1), unit_w - 1)
    hole_h = min(max(int(unit_h * ratio), 1), unit_h - 1)
    shift_x = min(max(0, shift_x), unit_w - hole_w)
    shift_y = min(max(0, shift_y), unit_h - hole_h)
    out = np.array(img, copy=True)
    for i in range(width // unit_w + 1):
        for j in range(height // unit_h + 1):
            x1 = min(shift_x + unit_w * i, width)
            y1 = min(shift_y + unit_h * j, height)
            x2 = min(x1 + hole_w, width)
            y2 = min(y1 + hole_h, height)
            if img.ndim == 3:
                out[y1:y2, x1:x2, :3] = fill
            else:
                out[y1:y2, x1:x2] = fill
    return out


def _cv_nearest(img, out_h, out_w, ify, ifx):
    """OpenCV ``resizeNN``: source ``min(floor(x * ifx), w - 1)`` per axis."""
    h, w = img.shape[:2]
    sy = np.minimum(np.floor(np.arange(out_h) * ify).astype(int), h - 1)
    sx = np.minimum(np.floor(np.arange(out_w) * ifx).astype(int), w - 1)
    return img[sy][:, sx]


def _cv_linear_taps(n_out, n_in, scale):
    """OpenCV ``resize(INTER_LINEAR)``'s source index and weight per output position:
    ``f = (x + 0.5) * scale - 0.5``, clamped to the edges."""
    f = (np.arange(n_out) + 0.5) * scale - 0.5
    s = np.floor(f).astype(int)
    t = f - s
    low = s < 0
    s[low], t[low] = 0, 0.0
    high = s >= n_in - 1
    s[high], t[high] = n_in - 1, 0.0
    return s, np.minimum(s + 1, n_in - 1), t


def _cv_linear(img, out_h, out_w, ify, ifx):
    h, w = img.shape[:2]
    y0, y1, ty = _cv_linear_taps(out_h, h, ify)
    x0, x1, tx = _cv_linear_taps(out_w, w, ifx)
    tx = tx[None, :, None] if img.ndim == 3 else tx[None, :]
    ty = ty[:, None, None] if img.ndim == 3 else ty[:, None]
    rows = img[y0] * (1 - ty) + img[y1] * ty
    return rows[:, x0] * (1 - tx) + rows[:, x1] * tx


def downscale(img, scale, interpolation="nearest"):
    """albumentations ``downscale``: ``cv2.resize(img, None, fx=scale, fy=scale)`` (sides
    ``rint(side * scale)``, mapped with ``1 / scale``) then ``cv2.resize(small, (w, h))``;
    with linear steps uint8 images go through float32 [0, 1] (``to_float``)."""
    h, w = img.shape[:2]
    sh, sw = max(int(np.rint(h * scale)), 1), max(int(np.rint(w * scale)), 1)
    if interpolation == "nearest":
        small = _cv_nearest(img, sh, sw, 1.0 / scale, 1.0 / scale)
        return _cv_nearest(small, h, w, sh / h, sw / w)
    x = img.astype(_F) / _F(255.0) if img.dtype == np.uint8 else img
    small = _cv_linear(x, sh, sw, 1.0 / scale, 1.0 / scale)
    out = _cv_linear(small, h, w, sh / h, sw / w)
    return _store(np.clip(out, 0, 1) * 255.0, img.dtype) if img.dtype == np.uint8 else out


def _rgb2hls_u8(rgb):
    """OpenCV ``RGB2HLS`` of uint8 (``RGB2HLS_b``: float32 [0, 1] values, ``RGB2HLS_f`` with
    hue range 180, then ``saturate_cast<uchar>``) as float32 (h, l, s) planes; values times
    the float32 ``1 / 255`` (not divided: halves of L round as OpenCV's do)."""
    x = rgb.astype(_F) * _F(1.0 / 255.0)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    vmax, vmin = x.max(axis=-1), x.min(axis=-1)
    diff = vmax - vmin
    light = (vmax + vmin) * _F(0.5)
    ok = diff > np.finfo(np.float32).eps
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(light < 0.5, diff / (vmax + vmin), diff / (_F(2) - vmax - vmin))
        d = _F(60.0) / diff
        h = np.where(vmax == r, (g - b) * d,
                     np.where(vmax == g, (b - r) * d + _F(120), (r - g) * d + _F(240)))
    h = np.where(h < 0, h + _F(360), h)
    h, s = np.where(ok, h, 0).astype(_F), np.where(ok, s, 0).astype(_F)
    return (np.clip(np.rint(h * _F(0.5)), 0, 255), np.clip(np.rint(light * _F(255)), 0, 255),
            np.clip(np.rint(s * _F(255)), 0, 255))


def _hls2rgb_u8(h, light, s):
    """OpenCV ``HLS2RGB`` to uint8 (``HLS2RGB_b``: l, s over 255, ``HLS2RGB_f`` with hue
    range 180, ``saturate_cast<uchar>(x * 255)``)."""
    light, s = light.astype(_F) / _F(255), s.astype(_F) / _F(255)
    p2 = np.where(light <= 0.5, light * (1 + s), light + s - light * s).astype(_F)
    p1 = (2 * light - p2).astype(_F)
    hh = h.astype(_F) * _F(6.0 / 180.0)
    hh = np.where(hh >= 6, hh - 6, hh)
    sector = np.floor(hh).astype(int)
    f = hh - sector
    tab = np.stack([p2, p1, p1 + (p2 - p1) * (1 - f), p1 + (p2 - p1) * f], axis=-1)
    # OpenCV's sector_data, (b, g, r) entries of tab
    data = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])
    pick = data[sector]
    bgr = np.take_along_axis(tab, pick, axis=-1)
    rgb = bgr[..., ::-1]
    rgb = np.where((s == 0)[..., None], light[..., None], rgb)
    return np.clip(np.rint(rgb * _F(255)), 0, 255).astype(np.uint8)


def snow_bleach(img, snow_point, coeff):
    """albumentations ``add_snow_bleach``: HLS lightness below ``snow_point * 127.5 + 85``
    times ``coeff``, clipped, cast to uint8 (truncation); alpha kept."""
    h, light, s = _rgb2hls_u8(img[..., :3])
    light = light.astype(_F)
    low = light < _F(snow_point * 127.5 + 85)
    light[low] *= _F(coeff)
    light = np.clip(light, 0, 255).astype(np.uint8)
    out = np.array(img, copy=True)
    out[..., :3] = _hls2rgb_u8(h, light, s)
    return out


# --------------------------------------------------------------------------- PCA lighting
#: ImageNet's PCA of RGB values in [0, 1] (fb.resnet.torch's ``Lighting`` constants, as the
#: PyTorch ImageNet recipes copy them): eigenvalues, eigenvectors one per column
IMAGENET_PCA = (np.array([0.2175, 0.0188, 0.0045]),
                np.array([[-0.5675, 0.7192, 0.4009],
                          [-0.5808, -0.0045, -0.8140],
                          [-0.5836, -0.6948, 0.4203]]))


def fancy_pca(img, alpha, eigvals=None, eigvecs=None):
    """AlexNet's PCA lighting: ``eigvecs @ (alpha * eigvals)`` added to every RGB pixel of
    values in [0, 1] (times 255 on uint8, as albumentations' ``FancyPCA``), clipped."""
    vals = IMAGENET_PCA[0] if eigvals is None else np.asarray(eigvals, dtype=np.float64)
    vecs = IMAGENET_PCA[1] if eigvecs is None else np.asarray(eigvecs, dtype=np.float64)
    delta = vecs @ (np.broadcast_to(np.asarray(alpha, dtype=np.float64), (3,)) * vals)
    full = _full(img)
    return _colour(img, lambda x: np.clip(x + delta * full, 0, full))


# --------------------------------------------------------------------------- ISO noise
def poisson_inverse(lam, u):
    """Poisson counts of mean ``lam`` by inverting its distribution function at ``u``: the
    smallest ``k`` whose cumulative probability exceeds ``u`` (float64, term by term)."""
    u = np.asarray(u, dtype=np.float64)
    k = np.zeros(u.shape)
    pk = np.full(u.shape, np.exp(-lam))
    cdf = pk.copy()
    more = u >= cdf
    while more.any() and k.max() < 4096:
        k[more] += 1
        pk[more] *= lam / k[more]
        cdf[more] += pk[more]
        more = u >= cdf
    return k


def _rgb2hls(x):
    """OpenCV's float ``RGB2HLS`` (float32; hue in degrees)."""
    vmax, vmin = x.max(axis=-1), x.min(axis=-1)
    diff = vmax - vmin
    light = (vmax + vmin) * _F(0.5)
    grey = ~(diff > np.finfo(_F).eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        sat = np.where(light < 0.5, diff / (vmax + vmin), diff / (_F(2) - vmax - vmin))
        d = _F(60) / diff
        r, g, b = x[..., 0], x[..., 1], x[..., 2]
        hue = np.where(vmax == r, (g - b) * d,
                       np.where(vmax == g, (b - r) * d + _F(120), (r - g) * d + _F(240)))
    hue = np.where(hue < 0, hue + _F(360), hue)
    return (np.where(grey, _F(0), hue).astype(_F), light.astype(_F),
            np.where(grey, _F(0), sat).astype(_F))


def _hls2rgb(hue, light, sat):
    """OpenCV's float ``HLS2RGB`` (hue in degrees)."""
    p2 = np.where(light <= 0.5, light * (1 + sat), light + sat - light * sat)
    p1 = 2 * light - p2
    hh = hue / _F(60)
    sector = np.floor(hh).astype(int) % 6
    f = hh - np.floor(hh)
    tab = np.stack([p2, p1, p1 + (p2 - p1) * (1 - f), p1 + (p2 - p1) * f], axis=-1)
    # OpenCV's sector_data: the table entries of (b, g, r) per sector
    order = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])
    idx = order[sector]
    b, g, r = (np.take_along_axis(tab, idx[..., j:j + 1], axis=-1)[..., 0] for j in range(3))
    rgb = np.stack([r, g, b], axis=-1)
    return np.where((sat == 0)[..., None], light[..., None], rgb)


def iso_noise(img, color_shift, intensity, u1, u2, u3):
    """albumentations 1.x ``iso_noise`` of a uint8 RGB(A) image given each pixel's uniform
    draws ``u1`` (the Poisson count), ``u2``, ``u3`` (the hue's Box-Muller normal): float32 HLS
    of ``img / 255``, ``cv2.meanStdDev``'s lightness deviation, clipped and truncated back."""
    out = np.array(img, copy=True)
    x = img[..., :3].astype(_F) * _F(1.0 / 255.0)
    hue, light, sat = _rgb2hls(x)
    std = light.astype(np.float64).std()
    k = poisson_inverse(std * intensity * 255, u1)
    noise = np.sqrt(-2 * np.log1p(-u2)) * np.cos(2 * np.pi * u3) * color_shift * 360 * intensity
    hue = np.mod(hue + noise, 360).astype(_F)
    light = (light + (k / 255) * (1 - light)).astype(_F)
    rgb = _hls2rgb(hue, light, sat) * 255
    out[..., :3] = np.clip(rgb, 0, 255).astype(np.uint8)
    return out


# --------------------------------------------------------------------------- motion blur
def motion_kernel(k, angle, direction):
    """kornia's ``get_motion_kernel2d(k, angle, direction, mode="nearest")``: the ramp
    ``d + (1 - 2 d) i / (k - 1)`` in the middle row, then kornia's ``rotate`` (OpenCV's
    ``getRotationMatrix2D`` about the centre, ``warp_affine`` through normalised coordinates
    with ``align_corners=True``, nearest sampling halves to even, zeros outside), normalised."""
    d = (np.clip(direction, -1, 1) + 1) / 2
    src = np.zeros((k, k))
    src[k // 2] = [d + (1 - 2 * d) / (k - 1) * i for i in range(k)]
    c = (k - 1) / 2
    a, b = np.cos(np.deg2rad(angle)), np.sin(np.deg2rad(angle))
    fwd = np.array([[a, b, (1 - a) * c - b * c], [-b, a, b * c + (1 - a) * c], [0, 0, 1]])
    norm = np.array([[2 / (k - 1), 0, -1], [0, 2 / (k - 1), -1], [0, 0, 1]])
    inv = np.linalg.inv(norm @ fwd @ np.linalg.inv(norm))  # normalised dst -> src
    out = np.zeros((k, k))
    for y in range(k):
        for x in range(k):
            gx, gy, _ = inv @ [2 * x / (k - 1) - 1, 2 * y / (k - 1) - 1, 1]
            sx, sy = int(np.rint((gx + 1) / 2 * (k - 1))), int(np.rint((gy + 1) / 2 * (k - 1)))
            if 0 <= sx < k and 0 <= sy < k:
                out[y, x] = src[sy, sx]
    return out / out.sum()


def correlate(img, taps, mode="constant"):
    """kornia's ``filter2d`` (a correlation, ``behaviour="corr"``) of every colour channel with
    the (k, k) ``taps``, the border padded as ``numpy.pad``'s ``mode``; alpha kept; stored as
    the image's dtype (uint8 rounded)."""
    k = len(taps)
    r = k // 2
    x = np.asarray(img, dtype=np.float64)
    grey = x.ndim == 2
    x = x[..., None] if grey else x
    nc = min(x.shape[2], 3)
    pad = np.pad(x[..., :nc], ((r, r), (r, r), (0, 0)), mode=mode)
    h, w = x.shape[:2]
    acc = np.zeros((h, w, nc))
    for i in range(k):
        for j in range(k):
            if taps[i, j]:
                acc += taps[i, j] * pad[i:i + h, j:j + w]
    out = np.array(img, copy=True)
    vals = ref._to_dtype(acc, np.asarray(img).dtype)
    if grey:
        return vals[..., 0]
    out[..., :nc] = vals
    return out


# --------------------------------------------------------------------------- grid warp
def elastic_grid(img, disp):
    """The smooth warp of a (2, G, G) grid of displacements in cells (``elastic_grid``):
    control point (i, j) at pixel (i (h - 1) / (G - 1), j (w - 1) / (G - 1)); the field
    between them blended with smoothstep weights; each pixel reads its position plus the field
    bilinearly, each tap outside the image zero (``grid_sample``'s ``padding_mode="zeros"``)."""
    disp = np.asarray(disp, dtype=np.float64)
    g = disp.shape[1]
    x = np.asarray(img, dtype=np.float64)
    grey = x.ndim == 2
    x = x[..., None] if grey else x
    h, w = x.shape[:2]
    cy, cx = (h - 1) / (g - 1), (w - 1) / (g - 1)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    gy, gx = yy / cy, xx / cx
    iy, ix = np.minimum(gy.astype(int), g - 2), np.minimum(gx.astype(int), g - 2)
    sy, sx = (lambda t: t * t * (3 - 2 * t))(gy - iy), (lambda t: t * t * (3 - 2 * t))(gx - ix)

    def field(d):
        return ((1 - sy) * ((1 - sx) * d[iy, ix] + sx * d[iy, ix + 1])
                + sy * ((1 - sx) * d[iy + 1, ix] + sx * d[iy + 1, ix + 1]))

    fy, fx = yy + field(disp[0]) * cy, xx + field(disp[1]) * cx
    y0, x0 = np.floor(fy).astype(int), np.floor(fx).astype(int)
    dy, dx = fy - y0, fx - x0
    acc = np.zeros(x.shape)
    for oy, ox, wt in ((0, 0, (1 - dy) * (1 - dx)), (0, 1, (1 - dy) * dx),
                       (1, 0, dy * (1 - dx)), (1, 1, dy * dx)):
        ty, tx = y0 + oy, x0 + ox
        inside = (ty >= 0) & (ty < h) & (tx >= 0) & (tx < w)
        vals = x[np.clip(ty, 0, h - 1), np.clip(tx, 0, w - 1)]
        acc += np.where(inside, wt, 0.0)[..., None] * vals
    out = ref._to_dtype(acc, np.asarray(img).dtype)
    return out[..., 0] if grey else out
