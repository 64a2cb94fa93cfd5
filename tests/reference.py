"""Reference implementations (NumPy / scikit-image) and the one comparison helper.

Every kernel test runs the op on millipyde and on the functions below, in the same
run, and compares with :func:`assert_matches`.  The references implement the
semantics written in shared/API.md, not whatever the package happens to do.
"""

from __future__ import annotations

import functools

import numpy as np
from skimage import color, data, exposure, filters, transform

# Tolerance for float results compared with scikit-image: API.md promises parity
# "to 4 decimals on float results".
SKIMAGE_ATOL = 5e-5

_DEFAULT_ATOL = {
    np.dtype(np.float64): 1e-10,
    np.dtype(np.float32): 1e-5,
    np.dtype(np.float16): 1e-3,
    np.dtype(np.complex128): 1e-10,
    np.dtype(np.complex64): 1e-5,
}


# --------------------------------------------------------------------------- #
# comparison helper
# --------------------------------------------------------------------------- #
def assert_matches(actual, expected, *, ulp_uint8=0, atol=None, what=""):
    """Compare ``actual`` (anything ``np.asarray`` accepts, e.g. a gpuimage) with
    the reference ndarray ``expected``.

    Shape and dtype are checked first.  Then, by dtype:

    * uint8 (and other integers / bool): exact, or ``|diff| <= ulp_uint8``
      (``ulp_uint8=1`` where API.md documents +-1 for rounding differences).
    * float64: ``atol`` (default 1e-10); float32: default 1e-5.  NaNs must be
      in the same places.

    The failure message reports the max error, the number of mismatching
    elements and the first few mismatching indices.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    prefix = f"{what}: " if what else ""
    assert actual.shape == expected.shape, (
        f"{prefix}shape mismatch: actual {actual.shape} vs expected {expected.shape}"
    )
    assert actual.dtype == expected.dtype, (
        f"{prefix}dtype mismatch: actual {actual.dtype} vs expected {expected.dtype}"
    )
    if actual.size == 0:
        return

    kind = expected.dtype.kind
    if kind in "biu":
        tol = ulp_uint8 if expected.dtype == np.uint8 else 0
        if kind == "b":
            diff = (actual != expected).astype(np.int64)
        else:
            diff = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
        bad = diff > tol
        tol_txt = f"|diff| <= {tol}"
    elif kind in "fc":
        if atol is None:
            atol = _DEFAULT_ATOL.get(expected.dtype.newbyteorder("="), 1e-10)
        tol = atol
        a_nan = np.isnan(actual)
        e_nan = np.isnan(expected)
        with np.errstate(invalid="ignore"):
            diff = np.abs(actual.astype(np.complex128 if kind == "c" else np.float64)
                          - expected.astype(np.complex128 if kind == "c" else np.float64))
        diff = np.where(a_nan & e_nan, 0.0, diff)
        diff = np.where(a_nan ^ e_nan, np.inf, diff)
        bad = ~(diff <= tol)
        tol_txt = f"atol {tol:g}"
    else:
        diff = (actual != expected).astype(np.int64)
        bad = diff > 0
        tol_txt = "exact"

    n_bad = int(np.count_nonzero(bad))
    if n_bad:
        idx = np.argwhere(bad)[:5]
        samples = ", ".join(
            f"{tuple(int(i) for i in ix)}: got {actual[tuple(ix)]!r} want {expected[tuple(ix)]!r}"
            for ix in idx
        )
        raise AssertionError(
            f"{prefix}{n_bad} of {expected.size} elements differ beyond {tol_txt} "
            f"(max error {np.max(diff)!r}; dtype {expected.dtype}, shape {expected.shape}); "
            f"first: {samples}"
        )


# --------------------------------------------------------------------------- #
# image fixtures (plain functions; callers get fresh, writable copies)
# --------------------------------------------------------------------------- #
@functools.cache
def _astronaut():
    img = data.astronaut()
    img.setflags(write=False)
    return img


@functools.cache
def _chelsea_alpha():
    """uint8 alpha plane from chelsea's grey levels, tiled (mirrored) to 512x512."""
    g = color.rgb2gray(data.chelsea())  # 300x451
    # stretch to the full range so there are fully transparent and fully opaque pixels
    grey = np.rint((g - g.min()) / (g.max() - g.min()) * 255).astype(np.uint8)
    reps = (-(-512 // grey.shape[0]), -(-512 // grey.shape[1]))
    tiled = np.tile(np.concatenate([grey, grey[::-1]], axis=0), (reps[0], reps[1]))
    out = np.ascontiguousarray(tiled[:512, :512])
    out.setflags(write=False)
    return out


def _offsets(h, w, full=512):
    if not (1 <= h <= full and 1 <= w <= full):
        raise ValueError(f"crop {h}x{w} does not fit a {full}x{full} photo")
    # start the crop near the face/flag area where there is detail, but fit it
    y0 = min(90, full - h)
    x0 = min(150, full - w)
    return y0, x0


def photo_rgb(h, w):
    """uint8 (h, w, 3) crop of skimage.data.astronaut()."""
    y0, x0 = _offsets(h, w)
    return np.array(_astronaut()[y0:y0 + h, x0:x0 + w], dtype=np.uint8, copy=True)


def photo_rgba(h, w):
    """uint8 (h, w, 4): astronaut RGB plus an alpha plane from chelsea's grey levels."""
    y0, x0 = _offsets(h, w)
    rgb = _astronaut()[y0:y0 + h, x0:x0 + w]
    alpha = _chelsea_alpha()[y0:y0 + h, x0:x0 + w]
    return np.ascontiguousarray(np.dstack([rgb, alpha])).astype(np.uint8)


def photo_grey(h, w):
    """float64 (h, w) in [0, 1]: rgb2gray of an astronaut crop."""
    out = color.rgb2gray(photo_rgb(h, w))
    return np.ascontiguousarray(out, dtype=np.float64)


def photo(kind, h, w):
    return {"rgb": photo_rgb, "rgba": photo_rgba, "grey": photo_grey}[kind](h, w)


# --------------------------------------------------------------------------- #
# reference ops
# --------------------------------------------------------------------------- #
def _to_dtype(values, dtype):
    """Cast a float result back to the input dtype (uint8: rint then clip)."""
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return np.clip(np.rint(values), 0, 255).astype(np.uint8)
    return np.asarray(values).astype(dtype)


def _is_colour(img):
    return img.ndim == 3 and img.shape[-1] in (3, 4)


def _per_rgb(img, fn):
    """Apply ``fn`` to the RGB channels of a colour image, keep alpha as is."""
    out = img.copy()
    out[..., :3] = fn(img[..., :3])
    return out


def rgb2grey(img):
    if not _is_colour(img):
        return img.copy()
    if img.shape[-1] == 4:
        return color.rgb2gray(color.rgba2rgb(img, background=(1, 1, 1)))
    return color.rgb2gray(img)


def transpose(img):
    if img.ndim == 2:
        return np.ascontiguousarray(np.transpose(img))
    return np.ascontiguousarray(np.transpose(img, (1, 0, 2)))


def fliplr(img):
    return np.ascontiguousarray(np.fliplr(img))


def rotate(img, angle):
    out = transform.rotate(img, angle, order=1, mode="constant", cval=0,
                           preserve_range=True)
    return _to_dtype(out, img.dtype)


def gaussian(img, sigma):
    if _is_colour(img):
        def blur(rgb):
            res = filters.gaussian(rgb, sigma=sigma, mode="constant", cval=0,
                                   truncate=8, preserve_range=True, channel_axis=-1)
            return _to_dtype(res, img.dtype)
        return _per_rgb(img, blur)
    res = filters.gaussian(img, sigma=sigma, mode="constant", cval=0, truncate=8,
                           preserve_range=True)
    return _to_dtype(res, img.dtype)


def brightness(img, delta):
    if img.dtype == np.uint8:
        def shift(v):
            return np.clip(np.rint(v.astype(np.float64) + delta * 255.0), 0, 255).astype(np.uint8)
        return _per_rgb(img, shift) if _is_colour(img) else shift(img)
    return np.clip(img + delta, 0.0, 1.0).astype(img.dtype)


def colorize(img, r, g, b):
    if not _is_colour(img):
        raise ValueError("colorize needs a colour image")
    m = np.array([r, g, b], dtype=np.float64)
    return _per_rgb(img, lambda v: np.clip(np.rint(v.astype(np.float64) * m), 0, 255)
                    .astype(np.uint8))


def adjust_gamma(img, gamma, gain=1):
    if _is_colour(img):
        return _per_rgb(img, lambda v: exposure.adjust_gamma(v, gamma, gain))
    return exposure.adjust_gamma(img, gamma, gain)


# --------------------------------------------------------------------------- #
# running a gpuimage method
# --------------------------------------------------------------------------- #
def on_gpu(arr, method, *args, **kwargs):
    """Build ``mp.gpuimage(arr)``, call ``method``, check it returns None and the
    input was not modified; return the result on the host."""
    import millipyde as mp

    before = np.array(arr, copy=True)
    img = mp.gpuimage(arr)
    ret = getattr(img, method)(*args, **kwargs)
    assert ret is None, f"{method} returned {ret!r}, expected None"
    out = np.asarray(img)
    assert_matches(arr, before, what=f"{method} modified its input")
    return out
