"""References for the training augmentations (issue 15): scikit-image and NumPy calls, and NumPy
transcriptions of torchvision v2's functional formulas (CI has no torchvision).

torchvision computes on uint8 images in float32 and converts back with a cast (truncation);
the transcriptions do the same, so millipyde (float64) is compared within +-1.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import reference as ref
from skimage import color, data, transform

PHOTOS = ("astronaut", "chelsea", "coffee")
KINDS = ("rgb", "rgba", "grey")


@functools.cache
def _photo(name: str) -> np.ndarray:
    img = getattr(data, name)()
    img.setflags(write=False)
    return img


def photo(name: str, kind: str, h: int, w: int) -> np.ndarray:
    """A (h, w) crop of a scikit-image photograph as uint8 RGB, RGBA or float64 grey."""
    src = _photo(name)
    h, w = min(h, src.shape[0]), min(w, src.shape[1])
    y0 = min(60, src.shape[0] - h)
    x0 = min(120, src.shape[1] - w)
    rgb = np.ascontiguousarray(src[y0:y0 + h, x0:x0 + w])
    if kind == "rgb":
        return rgb.copy()
    if kind == "grey":
        return np.ascontiguousarray(color.rgb2gray(rgb), dtype=np.float64)
    alpha = ref._chelsea_alpha()[:h, :w]
    return np.ascontiguousarray(np.dstack([rgb, alpha])).astype(np.uint8)


def assert_refused(method: str, args: tuple, name: str) -> None:
    """``gpuimage.<method>(*args)`` on a 5x6 RGB photograph raises ValueError naming ``name``
    and leaves the image as it was (the bad-argument tests of the op families)."""
    import pytest

    import millipyde as mp

    img = photo("chelsea", "rgb", 5, 6)
    g = mp.gpuimage(img)
    with pytest.raises(ValueError, match=name):
        getattr(g, method)(*args)
    ref.assert_matches(g, img)


def _back(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return ref._to_dtype(values, dtype)


# --------------------------------------------------------------------------- geometry
def resize(img, h, w):
    out = transform.resize(img, (h, w), order=1, mode="edge", anti_aliasing=False,
                           preserve_range=True)
    return _back(out, img.dtype)


def crop(img, top, left, h, w):
    return np.ascontiguousarray(img[top:top + h, left:left + w])


def pad(img, top, bottom, left, right, value=0):
    widths = ((top, bottom), (left, right)) + (((0, 0),) if img.ndim == 3 else ())
    return np.pad(img, widths, mode="constant", constant_values=value).astype(img.dtype)


def warp_affine(img, m):
    m = np.asarray(m, dtype=np.float64)
    if m.shape == (2, 3):
        m = np.vstack([m, [0.0, 0.0, 1.0]])
    out = transform.warp(img, transform.AffineTransform(matrix=m), order=1, mode="constant",
                         cval=0, preserve_range=True)
    return _back(out, img.dtype)


# --------------------------------------------------------------------------- torchvision colour
_F = np.float32


def _tv_grey(rgb: np.ndarray) -> np.ndarray:
    """``_rgb_to_grayscale_image`` on uint8 (0.2989 r + 0.587 g + 0.114 b), floored by its
    callers: the exact value (whole-number sums over 10000), as millipyde computes it.

    torch computes it in float32, where a sum that is a whole number may round either side of
    it (and its CPU ``add`` with ``alpha`` fuses a multiply-add); a factor f then moves the blend
    by |1 - f|. Checked against torchvision itself on the GPU machine (bench_recipes)."""
    r, g, b = (rgb[..., i].astype(np.float64) for i in range(3))
    return (2989.0 * r + 5870.0 * g + 1140.0 * b) / 10000.0


def _blend(img1: np.ndarray, img2, ratio: float, bound: float) -> np.ndarray:
    return np.clip(img1 * _F(ratio) + img2 * _F(1.0 - ratio), 0, bound)


def adjust_contrast(img, factor):
    if img.ndim == 2:  # a float grey image: blended with its own mean
        return np.clip(img * factor + img.mean() * (1.0 - factor), 0.0, 1.0)
    rgb = img[..., :3]
    mean = _F(np.floor(_tv_grey(rgb)).mean())
    out = img.copy()
    out[..., :3] = _blend(rgb.astype(_F), mean, factor, 255).astype(np.uint8)
    return out


def adjust_saturation(img, factor):
    if img.ndim == 2:
        return img.copy()
    rgb = img[..., :3]
    grey = np.floor(_tv_grey(rgb)).astype(_F)[..., None]
    out = img.copy()
    out[..., :3] = _blend(rgb.astype(_F), grey, factor, 255).astype(np.uint8)
    return out


def _rgb_to_hsv(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r, g = rgb[..., 0], rgb[..., 1]
    maxc, minc = rgb.max(-1), rgb.min(-1)
    eqc = maxc == minc
    rng = maxc - minc
    s = rng / np.where(eqc, _F(1), maxc)
    div = np.where(eqc, _F(1), rng)
    rc, gc, bc = ((maxc - rgb[..., i]) / div for i in range(3))
    neq_r = maxc != r
    eq_g = maxc == g
    hr = (bc - gc) * ~neq_r
    hg = (rc + _F(2) - bc) * (eq_g & neq_r)
    hb = (gc + _F(4) - rc) * (neq_r & ~eq_g)
    h = np.fmod((hr + hg + hb) * _F(1.0 / 6.0) + _F(1), _F(1))
    return h, s, maxc


def _hsv_to_rgb(h, s, v) -> np.ndarray:
    h6 = h * _F(6)
    i = np.floor(h6)
    f = h6 - i
    i = i.astype(np.int32) % 6
    sxf = s * f
    q = np.clip((_F(1) - sxf) * v, 0, 1)
    t = np.clip((sxf + (_F(1) - s)) * v, 0, 1)
    p = np.clip((_F(1) - s) * v, 0, 1)
    vpqt = np.stack([v, p, q, t], -1)
    select = np.array([[0, 2, 1, 1, 3, 0], [3, 0, 0, 2, 1, 1], [1, 1, 3, 0, 0, 2]])
    return np.stack([np.take_along_axis(vpqt, select[c][i][..., None], -1)[..., 0]
                     for c in range(3)], -1)


def adjust_hue(img, delta):
    if img.ndim == 2:
        return img.copy()
    rgb = img[..., :3].astype(_F) / _F(255)
    h, s, v = _rgb_to_hsv(rgb)
    h = np.remainder(h + _F(delta), _F(1))
    out = img.copy()
    out[..., :3] = (_hsv_to_rgb(h, s, v) * _F(255.0 + 1.0 - 1e-3)).astype(np.uint8)
    return out


# --------------------------------------------------------------------------- erasing
def erase(img, top, left, h, w, value=0):
    out = img.copy()
    out[top:top + h, left:left + w] = value
    return out


def crop_params(height, width, scale, ratio, draws):
    """torchvision RandomResizedCrop.get_params with uniform draws ``draws[k]``."""
    area = height * width
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for t in range(10):
        target = area * (scale[0] + (scale[1] - scale[0]) * draws[4 * t])
        aspect = math.exp(lr[0] + (lr[1] - lr[0]) * draws[4 * t + 1])
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return (int(draws[4 * t + 2] * (height - h + 1)),
                    int(draws[4 * t + 3] * (width - w + 1)), h, w)
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def erasing_params(height, width, scale, ratio, draws):
    """torchvision RandomErasing.get_params with uniform draws ``draws[k]``: (i, j, h, w), or
    None when ten tries find no window (torchvision then leaves the image as it is)."""
    area = height * width
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for t in range(10):
        target = area * (scale[0] + (scale[1] - scale[0]) * draws[4 * t])
        aspect = math.exp(lr[0] + (lr[1] - lr[0]) * draws[4 * t + 1])
        h = int(round(math.sqrt(target * aspect)))
        w = int(round(math.sqrt(target / aspect)))
        if not (h < height and w < width):
            continue
        return (int(draws[4 * t + 2] * (height - h + 1)),
                int(draws[4 * t + 3] * (width - w + 1)), h, w)
    return None


def tv_affine_matrix(h, w, angle, translate, scale, shear):
    """torchvision ``_get_inverse_affine_matrix(center=[0, 0], ...)`` as used by ``F.affine`` on
    tensors, moved from its centred grid (pixel centres at ``j - (w - 1) / 2``) to pixels:
    the 2x3 map from output (col, row) to input (col, row)."""
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    rss = np.array([[a, b, 0.0], [c, d, 0.0], [0.0, 0.0, 1.0]]) * [[scale], [scale], [1.0]]
    t = np.array([[1.0, 0.0, translate[0]], [0.0, 1.0, translate[1]], [0.0, 0.0, 1.0]])
    forward = t @ rss  # centred output <- centred input
    centre = np.array([[1.0, 0.0, (w - 1) / 2], [0.0, 1.0, (h - 1) / 2], [0.0, 0.0, 1.0]])
    return (centre @ np.linalg.inv(forward) @ np.linalg.inv(centre))[:2]


# --------------------------------------------------------------------------- issue 31: value ops
# torchvision v2's functional formulas on the colour channels (alpha kept, as millipyde's
# elementwise and pixelwise ops keep it; torchvision takes 1 or 3 channels for most of them)
def _rgb_only(img: np.ndarray, fn) -> np.ndarray:
    if img.ndim == 2:
        return fn(img)
    out = img.copy()
    out[..., :3] = fn(img[..., :3])
    return out


def invert(img):
    """``invert_image``: ``bitwise_not`` on uint8, ``1 - v`` on floats."""
    return _rgb_only(img, lambda v: ~v if v.dtype == np.uint8 else 1.0 - v)


def solarize(img, threshold):
    """``solarize_image``: ``where(v >= threshold, invert(v), v)``."""
    return _rgb_only(img, lambda v: np.where(v >= threshold, invert(v), v))


def posterize(img, bits):
    """``posterize_image``: ``v & mask`` on uint8; ``floor(v * 2**bits)`` clamped to
    ``2**bits - 1``, times ``1 / 2**bits``, on floats."""
    def post(v):
        if v.dtype == np.uint8:
            return v & np.uint8(((1 << bits) - 1) << (8 - bits))
        levels = 1 << bits
        return np.clip(np.floor(v * levels), 0, levels - 1) * (1.0 / levels)
    return _rgb_only(img, post)


def adjust_brightness(img, factor):
    """``adjust_brightness_image``: ``v * factor`` clamped to the range, uint8 in float32 and
    truncated back."""
    def scale(v):
        if v.dtype == np.uint8:
            return np.clip(v.astype(_F) * _F(factor), 0, 255).astype(np.uint8)
        return np.clip(v * factor, 0.0, 1.0)
    return _rgb_only(img, scale)


def _tv_grey_f32(rgb: np.ndarray) -> np.ndarray:
    """``_rgb_to_grayscale_image`` on uint8 as torch computes it: float32
    ``r * 0.2989 + g * 0.587 + b * 0.114``, truncated to uint8."""
    r, g, b = (rgb[..., i].astype(_F) for i in range(3))
    return (r * _F(0.2989) + g * _F(0.587) + b * _F(0.114)).astype(np.uint8)


def grayscale(img, channels):
    """``rgb_to_grayscale(num_output_channels=channels)`` on uint8 RGB(A): 3 channels keep the
    image's (alpha too), 1 channel is millipyde's grey form, float64 ``grey / 255``."""
    if img.ndim == 2:
        return img.copy()
    g = _tv_grey_f32(img[..., :3])
    if channels == 1:
        return g.astype(np.float64) / 255.0
    out = img.copy()
    out[..., :3] = g[..., None]
    return out


def permute_channels(img, permutation):
    """``permute_channels_image``: output channel ``i`` is input channel ``permutation[i]``
    (of R, G, B; alpha kept)."""
    if img.ndim == 2:
        return img.copy()
    return _rgb_only(img, lambda v: np.ascontiguousarray(v[..., list(permutation)]))


# --------------------------------------------------------------------------- issue 31: geometry
def vflip(img):
    """``vertical_flip``: ``np.flipud``."""
    return np.ascontiguousarray(img[::-1])


def _pad_ltrb(img, left, top, right, bottom, mode="constant", value=0):
    widths = ((top, bottom), (left, right)) + (((0, 0),) if img.ndim == 3 else ())
    if mode == "constant":
        return np.pad(img, widths, mode="constant", constant_values=value).astype(img.dtype)
    return np.pad(img, widths, mode=mode)


def center_crop(img, height, width):
    """``center_crop_image``: zero padding (left/top half rounded down) where the crop is
    larger, then the window at ``round((H - h) / 2)``, ``round((W - w) / 2)``."""
    H, W = img.shape[:2]
    if height > H or width > W:
        pad = [(width - W) // 2 if width > W else 0, (height - H) // 2 if height > H else 0,
               (width - W + 1) // 2 if width > W else 0,
               (height - H + 1) // 2 if height > H else 0]
        img = _pad_ltrb(img, *pad)
        H, W = img.shape[:2]
        if (H, W) == (height, width):
            return img
    top, left = int(round((H - height) / 2.0)), int(round((W - width) / 2.0))
    return np.ascontiguousarray(img[top:top + height, left:left + width])


def random_crop_params(height, width, size, padding, pad_if_needed, draws):
    """``RandomCrop.make_params`` with uniform draws ``draws[0]`` (top) and ``draws[1]``
    (left) for ``torch.randint``: (top, left, (left, top, right, bottom) padding), or None
    when the crop is larger than the padded image."""
    pl, pt, pr, pb = padding
    ph, pw = height + pt + pb, width + pl + pr
    h, w = size
    if pad_if_needed:
        if ph < h:
            d = h - ph
            pt, pb, ph = pt + d, pb + d, ph + 2 * d
        if pw < w:
            d = w - pw
            pl, pr, pw = pl + d, pr + d, pw + 2 * d
    if ph < h or pw < w:
        return None
    top = int(draws[0] * (ph - h + 1)) if ph > h else 0
    left = int(draws[1] * (pw - w + 1)) if pw > w else 0
    return top, left, (pl, pt, pr, pb)


def random_crop(img, size, padding, pad_if_needed, fill, mode, draws):
    """``RandomCrop``: pad (``F.pad`` with ``fill``, or edge), then crop the drawn window."""
    got = random_crop_params(img.shape[0], img.shape[1], size, padding, pad_if_needed, draws)
    top, left, pad = got
    if any(pad):
        img = _pad_ltrb(img, *pad, mode=mode, value=fill)
    return np.ascontiguousarray(img[top:top + size[0], left:left + size[1]])


def rotate(img, angle, expand=False, center=None):
    """``skimage.transform.rotate(order=1, mode="constant", cval=0, resize=expand,
    center=center)`` back in the image's dtype."""
    out = transform.rotate(img, angle, resize=expand, center=center, order=1,
                           mode="constant", cval=0, preserve_range=True)
    return _back(out, img.dtype)


# --------------------------------------------------------------------------- issue 31: batch mixes
def mixup(images, labels, lam, num_classes):
    """torchvision v2 ``MixUp._transform`` with its ``lam``: images and one-hot labels blended
    with themselves rolled by one along the batch."""
    # torch on a float32 batch: ``roll(1, 0).mul_(1.0 - lam).add_(inpt.mul(lam))``
    out = (np.roll(images, 1, 0) * _F(1.0 - lam) + images * _F(lam)).astype(images.dtype)
    return out, _mix_label(labels, lam, num_classes)


def _mix_label(labels, lam, num_classes):
    one = np.eye(num_classes)[labels]
    return (np.roll(one, 1, 0) * (1.0 - lam) + one * lam).astype(np.float32)


def cutmix_box(lam, r_x, r_y, h, w):
    """torchvision v2 ``CutMix.make_params`` given ``lam`` and the box centre: (box, lam
    adjusted to the pasted area)."""
    r = 0.5 * math.sqrt(1.0 - lam)
    r_w_half, r_h_half = int(r * w), int(r * h)
    x1, y1 = max(r_x - r_w_half, 0), max(r_y - r_h_half, 0)
    x2, y2 = min(r_x + r_w_half, w), min(r_y + r_h_half, h)
    return (x1, y1, x2, y2), float(1.0 - (x2 - x1) * (y2 - y1) / (w * h))


def cutmix(images, labels, box, lam_adjusted, num_classes):
    """torchvision v2 ``CutMix._transform`` (NCHW): the box of the rolled batch pasted."""
    x1, y1, x2, y2 = box
    out = images.copy()
    out[..., y1:y2, x1:x2] = np.roll(images, 1, 0)[..., y1:y2, x1:x2]
    return out, _mix_label(labels, lam_adjusted, num_classes)
