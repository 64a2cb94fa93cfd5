"""Issue 17, classes 1-4 at the public API: every image method on every dtype and on degenerate
shapes, with argument extremes, against scikit-image / NumPy; invalid arguments refused with a
ValueError when the method is called (never later, at materialization).

Integer results are compared within 1 (scikit-image's own casts truncate where millipyde rounds
half to even, as documented in README), float results to API.md's 4 decimals.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
import reference as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import ndimage
from skimage import filters, transform

import millipyde as mp

GREY_DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
               np.float64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
SHAPES = [(0, 0), (0, 3), (3, 0), (1, 1), (1, 5), (5, 1), (4, 6)]
PEAK_CONSTANT = 2 * 1024 * 1024

# scikit-image's gaussian allocates 2 * int(8 sigma + .5) + 1 taps; beyond this it is no
# reference (sigma 1e8 asks for 12 GB): the taps are then written out below
_SKIMAGE_MAX_SIGMA = 300.0


# --------------------------------------------------------------------------- data and references
def _values(dtype: type, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Test data covering the dtype's range (negative values for signed types)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.random(shape)
    info = np.iinfo(dt)
    # 64-bit types: values float64 holds exactly, as the float64 arithmetic of both sides needs
    lo, hi = (max(int(info.min), -2**40), min(int(info.max), 2**40))
    return rng.integers(lo, hi, shape, endpoint=True).astype(dt)


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A float result in the image dtype: rint then clip to the type's range (README)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.asarray(values, dtype=dtype)
    info = np.iinfo(dtype)
    return np.clip(np.rint(values), float(info.min), float(info.max)).astype(dtype)


def _gaussian_2d(img: np.ndarray, sigma: float) -> np.ndarray:
    """scipy's separable Gaussian with the taps the image can see, normalised by the
    Gaussian's integral (what the full 2 * int(8 sigma + .5) + 1 taps sum to, to 1e-15, for
    sigma > 8), zero padding."""
    reach = max(img.shape[:2]) - 1
    x = np.arange(-reach, reach + 1, dtype=np.float64)
    taps = np.exp(-0.5 * (x / sigma) ** 2) / (sigma * math.sqrt(2.0 * math.pi))
    out = img.astype(np.float64)
    for axis in (0, 1):
        out = ndimage.correlate1d(out, taps, axis=axis, mode="constant", cval=0.0)
    return out


def _gaussian_ref(img: np.ndarray, sigma: float) -> np.ndarray:
    colour = img.ndim == 3
    plane = img[..., :3] if colour else img
    if sigma <= _SKIMAGE_MAX_SIGMA:
        blurred = filters.gaussian(plane, sigma=sigma, mode="constant", cval=0, truncate=8,
                                   preserve_range=True, channel_axis=-1 if colour else None)
    else:
        blurred = _gaussian_2d(plane, sigma)
    out = img.copy()
    if colour:
        out[..., :3] = _cast(blurred, img.dtype)
        return out
    return _cast(blurred, img.dtype)


def _rotate_ref(img: np.ndarray, angle: float) -> np.ndarray:
    out = transform.rotate(img, angle, order=1, mode="constant", cval=0, preserve_range=True)
    return _cast(out, img.dtype)


def _brightness_ref(img: np.ndarray, delta: float) -> np.ndarray:
    if img.dtype.kind == "f":
        return np.clip(img + delta, 0.0, 1.0)
    full = float(np.iinfo(img.dtype).max)
    if img.ndim == 3:
        out = img.copy()
        out[..., :3] = _cast(img[..., :3].astype(np.float64) + delta * full, img.dtype)
        return out
    return _cast(img.astype(np.float64) + delta * full, img.dtype)


def _gamma_ref(img: np.ndarray, gamma: float, gain: float) -> np.ndarray:
    if img.dtype == np.uint8 or img.dtype.kind == "f":
        return ref.adjust_gamma(img, gamma, gain)
    full = float(np.iinfo(img.dtype).max)
    return _cast(full * gain * (img / full) ** gamma, img.dtype)


REFERENCES = {
    "transpose": ref.transpose,
    "fliplr": ref.fliplr,
    "rgb2grey": ref.rgb2grey,
    "rotate": _rotate_ref,
    "gaussian": _gaussian_ref,
    "brightness": _brightness_ref,
    "adjust_gamma": _gamma_ref,
    "colorize": ref.colorize,
}


def _reference(method: str, host: np.ndarray, args: tuple) -> np.ndarray:
    # the references overflow to inf (and cast it) at the argument extremes, as expected
    with np.errstate(all="ignore"):
        return REFERENCES[method](host, *args)


def _assert_close(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if actual.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=ref.SKIMAGE_ATOL,
                                   equal_nan=True, err_msg=what)
    else:
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        assert diff.size == 0 or diff.max() <= 1, (
            f"{what}: max |diff| {diff.max()} at {np.unravel_index(diff.argmax(), diff.shape)}"
        )


def _image(host: np.ndarray) -> mp.gpuimage:
    img = mp.gpuimage(host)
    np.testing.assert_array_equal(np.asarray(img), host)  # round trip, dtype kept
    return img


def _check(host: np.ndarray, method: str, args: tuple, reference_args: tuple | None = None
           ) -> None:
    """Run ``method`` on a gpuimage of ``host``; compare with the reference; read twice."""
    img = _image(host)
    assert getattr(img, method)(*args) is None
    out = np.asarray(img)
    expected = _reference(method, host, args if reference_args is None else reference_args)
    _assert_close(out, expected, f"{method}{args} on {host.dtype} {host.shape}")
    np.testing.assert_array_equal(np.asarray(img), out)  # the image stays readable


# --------------------------------------------------------------------------- class 1: signed ints
@pytest.mark.parametrize("dtype", SIGNED)
@pytest.mark.parametrize("op", [("rotate", (0.0001,)), ("rotate", (33.0,)),
                                ("gaussian", (1.5,)), ("brightness", (0.0,)),
                                ("brightness", (-0.25,)), ("transpose", ()), ("fliplr", ())])
def test_signed_greyscale_keeps_negative_values(dtype, op):
    """The issue's reproduction, per op and signed type: -50 everywhere must not become 0."""
    name, args = op
    _check(np.full((20, 20), -50, dtype), name, args)
    _check(_values(dtype, (17, 23), 1), name, args)


@pytest.mark.parametrize("dtype", SIGNED + [np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("op", [("rotate", (-71.0,)), ("gaussian", (0.7,)),
                                ("brightness", (0.3,))])
def test_every_integer_dtype_matches_reference(dtype, op):
    name, args = op
    _check(_values(dtype, (9, 14), 2), name, args)


@pytest.mark.parametrize("dtype", SIGNED)
@pytest.mark.parametrize("method, args", [("adjust_gamma", (2.0,)),
                                          ("random_adjust_gamma", ((0.5, 2.0),))])
def test_adjust_gamma_refuses_signed_images_at_call_time(dtype, method, args):
    host = np.full((4, 5), 7, dtype)  # even non-negative values: refused by type
    img = _image(host)
    with pytest.raises(ValueError, match=r"adjust_gamma.*signed"):
        getattr(img, method)(*args)
    np.testing.assert_array_equal(np.asarray(img), host)


# ------------------------------------------------------------------- class 2: bounded resources
def test_gaussian_radius_beyond_image_equals_skimage():
    """Taps the image cannot see are dropped (the radius follows the image), the result is
    scikit-image's: sigma 20 (radius 160) and 250 (radius 2000) on a 16 x 16 image."""
    for dtype in (np.float64, np.uint8, np.int16):
        for sigma in (20.0, 250.0):
            _check(_values(dtype, (16, 16), 3), "gaussian", (sigma,))
    _check(ref.photo_rgba(16, 16), "gaussian", (250.0,))


@pytest.mark.parametrize("sigma", [1e8, 1e300, 1.7e308])
def test_gaussian_huge_sigma_memory_bounded_by_image(sigma):
    host = _values(np.float64, (16, 16), 4)
    warm = mp.gpuimage(host)
    warm.gaussian(3.0)  # compile the kernel outside the measurement
    np.asarray(warm)
    img = mp.gpuimage(host)
    tracemalloc.start()
    try:
        img.gaussian(sigma)
        out = np.asarray(img)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # 4x the image plus a constant (the bound); sigma 1e8 once asked for 12 GB
    assert peak < 4 * host.nbytes + 1_000_000, f"peak {peak} bytes for sigma {sigma}"
    _assert_close(out, _gaussian_ref(host, sigma), f"gaussian({sigma})")


# ---------------------------------------------------------------------- class 3: empty shapes
EMPTY_CALLS = [("transpose", ()), ("fliplr", ()), ("rotate", (30.0,)), ("gaussian", (2.0,)),
               ("gaussian", (1e8,)), ("brightness", (0.2,)), ("adjust_gamma", (2.0, 0.5)),
               ("rgb2grey", ()), ("random_rotate", (-10.0, 10.0)),
               ("random_gaussian", (0.5, 3.0)), ("random_brightness", (-0.1, 0.1)),
               ("random_adjust_gamma", ((0.5, 2.0),))]


@pytest.mark.parametrize("shape", [(5, 0), (0, 5), (0, 0), (0, 4, 3), (4, 0, 4)])
def test_empty_in_empty_out_every_method(shape):
    dtype = np.uint8 if len(shape) == 3 else np.float64
    calls = EMPTY_CALLS + ([("colorize", (1.0, 2.0, 0.5)),
                            ("random_colorize", ((0, 1), (1, 2), (0.5, 1)))]
                           if len(shape) == 3 else [])
    for method, args in calls:
        img = mp.gpuimage(np.zeros(shape, dtype))
        getattr(img, method)(*args)
        out = np.asarray(img)
        expect = (shape[1], shape[0]) + shape[2:] if method == "transpose" else shape
        if method == "rgb2grey" and len(shape) == 3:
            expect, dtype_out = shape[:2], np.float64
        else:
            dtype_out = dtype
        assert out.shape == expect and out.dtype == dtype_out, (method, out.shape, out.dtype)
        img.fliplr()  # the image stays usable
        assert np.asarray(img).shape == expect


# ------------------------------------------------------------ class 4: refused at call time
BAD_CALLS = [
    ("gaussian", (float("nan"),)), ("gaussian", (float("inf"),)), ("gaussian", (0.0,)),
    ("gaussian", (-1.0,)), ("gaussian", (10**400,)), ("rotate", (float("nan"),)),
    ("rotate", (float("-inf"),)), ("rotate", (10**400,)), ("brightness", (1.5,)),
    ("brightness", (float("nan"),)), ("adjust_gamma", (-1.0,)),
    ("adjust_gamma", (1.0, float("inf"))), ("random_rotate", (1.0, float("inf"))),
    ("random_rotate", (5.0, -5.0)), ("random_gaussian", (-1.0, 2.0)),
    ("random_gaussian", (float("nan"), 2.0)), ("random_brightness", (-2.0, 0.0)),
    ("random_adjust_gamma", ((0.5, float("nan")),)), ("colorize", (1.0, 1.0, 1.0)),
]


@pytest.mark.parametrize("method, args", BAD_CALLS, ids=[f"{m}{a}" for m, a in BAD_CALLS])
def test_uncomputable_arguments_refused_at_call_time(method, args):
    host = _values(np.float64, (6, 7), 5)
    img = _image(host)
    with pytest.raises(ValueError) as info:
        getattr(img, method)(*args)
    # the message names the argument or what is wrong with the image
    assert any(w in str(info.value) for w in ("sigma", "angle", "delta", "gamma", "gain",
                                               "RGB", "min_", "max_", "_range"))
    np.testing.assert_array_equal(np.asarray(img), host)  # nothing recorded, still readable


EXTREME_CALLS = [
    ("random_rotate", (-1e308, 1e308)), ("rotate", (1e20,)), ("rotate", (-1e308,)),
    ("random_gaussian", (0.0, 1e300)), ("random_gaussian", (1e300, 1.7e308)),
    ("gaussian", (1e300,)), ("random_brightness", (-1.0, 1.0)),
    ("adjust_gamma", (1e308, 1e308)), ("random_adjust_gamma", ((0.0, 1e308), (0.0, 1e308))),
]


@pytest.mark.parametrize("method, args", EXTREME_CALLS,
                         ids=[f"{m}{a}" for m, a in EXTREME_CALLS])
@pytest.mark.parametrize("kind", ["rgba", "uint16"])
def test_extreme_arguments_are_computed(method, args, kind):
    """Arguments at float64's limits are computed (or refused at call time), never a deferred
    error at materialization."""
    host = ref.photo_rgba(9, 11) if kind == "rgba" else _values(np.uint16, (9, 11), 6)
    img = _image(host)
    getattr(img, method)(*args)
    out = np.asarray(img)
    assert out.shape == host.shape and out.dtype == host.dtype
    if kind == "rgba" and "rotate" not in method:
        np.testing.assert_array_equal(out[..., 3], host[..., 3])  # alpha untouched
    if method == "rotate" and kind == "uint16":
        _assert_close(out, _rotate_ref(host, *args), f"rotate{args}")


def test_random_draw_with_overflowing_span_stays_in_range():
    """random_rotate(-1e308, 1e308): hi - lo overflows; the draw must stay finite and the
    same seed must give the same image."""
    outs = []
    for _ in range(2):
        mp.seed(11)
        img = mp.gpuimage(_values(np.float64, (8, 8), 7))
        img.random_rotate(-1e308, 1e308)
        outs.append(np.asarray(img))
    assert np.isfinite(outs[0]).all()
    np.testing.assert_array_equal(outs[0], outs[1])


# ------------------------------------------------------------------------- property-based test
def _cases() -> st.SearchStrategy:
    finite = dict(allow_nan=False, allow_infinity=False)
    angle = st.one_of(st.floats(-1e308, 1e308, **finite),
                      st.sampled_from([0.0, 1e-4, 45.5, -30.0, 90.0, 1e20]))
    sigma = st.one_of(st.floats(1e-3, 60.0, **finite), st.sampled_from([0.5, 250.0, 1e8,
                                                                          1e300]))
    mult = st.one_of(st.floats(0.0, 4.0, **finite), st.sampled_from([0.0, 1e308]))
    return st.one_of(
        st.tuples(st.just("transpose"), st.just(())),
        st.tuples(st.just("fliplr"), st.just(())),
        st.tuples(st.just("rgb2grey"), st.just(())),
        st.tuples(st.just("rotate"), st.tuples(angle)),
        st.tuples(st.just("gaussian"), st.tuples(sigma)),
        st.tuples(st.just("brightness"), st.tuples(st.floats(-1.0, 1.0, **finite))),
        st.tuples(st.just("adjust_gamma"),
                  st.tuples(st.floats(0.0, 8.0, **finite), st.floats(0.0, 4.0, **finite))),
        st.tuples(st.just("colorize"), st.tuples(mult, mult, mult)),
    )


_KINDS = ["uint8", "uint16", "int8", "int16", "int64", "float64", "rgb", "rgba"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(_KINDS), shape=st.sampled_from(SHAPES), call=_cases(),
       seed=st.integers(0, 2**16))
def test_property_every_method_dtype_shape_and_extreme(kind, shape, call, seed):
    """Valid calls (empty and 1-pixel images included) match the reference; invalid ones, and
    only those, raise ValueError at call time, leaving the image as it was."""
    method, args = call
    if kind in ("rgb", "rgba"):
        host = _values(np.uint8, shape + (3 if kind == "rgb" else 4,), seed)
    else:
        host = _values(np.dtype(kind), shape, seed)
    invalid = ((method == "colorize" and host.ndim == 2)
               or (method == "adjust_gamma" and host.dtype.kind == "i"))
    img = _image(host)
    if invalid:
        with pytest.raises(ValueError):
            getattr(img, method)(*args)
        np.testing.assert_array_equal(np.asarray(img), host)
        return
    getattr(img, method)(*args)
    out = np.asarray(img)
    # again, warm (compiled), measured: peak memory within 4x the image as float64 plus a
    # constant (planning, parameters) whatever the arguments
    again = mp.gpuimage(host)
    tracemalloc.start()
    try:
        getattr(again, method)(*args)
        np.testing.assert_array_equal(np.asarray(again), out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 4 * 8 * host.size + PEAK_CONSTANT, f"{method}{args}: peak {peak} bytes"
    if host.size == 0:
        expect = ((host.shape[1], host.shape[0]) + host.shape[2:] if method == "transpose"
                  else host.shape[:2] if method == "rgb2grey" else host.shape)
        assert out.shape == expect, (method, out.shape, expect)
        return
    _assert_close(out, _reference(method, host, args), f"{method}{args} {kind} {shape}")
