"""Issue 32, the image-method classes: 4 (extreme arguments computed or refused at call time),
5 (integer images: unrepresentable values refused, signed values kept), and the method parts
of 12 (output size bounded by memory), 13 (empty images) and 14 (named refusals); then the
property-based test of the training ops, targets, user ops and ``batches()`` options.

Exact references where the result is defined by NumPy (crop, pad, erase) or by the blend's
limit (a factor near float64's largest); otherwise the contracts every valid call keeps:
the documented shape and dtype, values in the type's range, the same output for the same
seed, the image readable after; invalid calls raise ``ValueError`` when made, leaving the
image as it was.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import millipyde as mp

INT_DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]
# the dtypes whose results are computed in the explicit tests (each a kernel compile on the
# cpu backend): the and the 64-bit extremes; the property test draws every dtype
MATERIALIZED = (np.uint16, np.int16, np.int64)
SIM = mp.backend() == "cudasim"


def _values(dtype, shape, seed):
    """Data over the dtype's range (values float64 holds exactly for the 64-bit types)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.random(shape)
    info = np.iinfo(dt)
    lo, hi = max(int(info.min), -2**40), min(int(info.max), 2**40)
    return rng.integers(lo, hi, shape, endpoint=True).astype(dt)


def _tv_grey_floor(rgb):
    r, g, b = (rgb[..., i].astype(np.float64) for i in range(3))
    return np.floor((2989.0 * r + 5870.0 * g + 1140.0 * b) / 10000.0)


def _run(host, call):
    img = mp.gpuimage(host)
    call(img)
    return np.asarray(img)


# ------------------------------------------------------ class 4: extreme arguments
def test_contrast_and_saturation_at_float64s_largest_factor_are_their_limit():
    """``adjust_contrast(1e308)`` gave an all-black image (inf - inf = NaN, cast to 0); the
    blend's limit is full where a value is above the mean (the pixel's grey for saturation),
    0 below, the mean itself where equal."""
    host = ref.photo_rgb(9, 11)
    host[0, 0] = (80, 80, 80)  # a grey pixel: its saturation blend is its own grey
    rgb = host.astype(np.float64)
    mean = _tv_grey_floor(host).mean()
    want = np.where(rgb > mean, 255, np.where(rgb < mean, 0, np.floor(mean))).astype(np.uint8)
    np.testing.assert_array_equal(_run(host, lambda g: g.adjust_contrast(1e308)), want)
    grey = _tv_grey_floor(host)[..., None]
    want = np.where(rgb > grey, 255, np.where(rgb < grey, 0, grey)).astype(np.uint8)
    np.testing.assert_array_equal(_run(host, lambda g: g.adjust_saturation(1e308)), want)
    for call in (lambda g: g.random_contrast(0, 1e308), lambda g: g.random_saturation(0, 1e308)):
        mp.seed(3)
        out = _run(host, call)
        assert len(np.unique(out)) > 2 or out.std() > 0  # not one constant (all black)


@pytest.mark.parametrize("call", [
    lambda g: g.random_affine(1e308), lambda g: g.random_affine(0, shear=1e308),
    lambda g: g.random_affine(0, shear=(-1e308, 1e308, -1e308, 1e308)),
    lambda g: g.random_affine(0, scale=(1e-310, 1e-310)),
    lambda g: g.random_affine(10, scale=(1e-300, 1e308)),
    lambda g: g.random_resized_crop(4, 5, scale=(0, 1e308)),
    lambda g: g.random_resized_crop(4, 5, ratio=(1e-308, 1e308)),
    lambda g: g.random_erasing(scale=(0, 1), ratio=(1e-308, 1e308)),
    lambda g: g.warp_affine([[1e300, 0, 0], [0, 1e300, 0]]),
], ids=["degrees", "shear", "shear4", "scale-tiny", "scale-span", "rrc-scale", "rrc-ratio",
        "erasing-ratio", "warp-huge"])
def test_extreme_training_arguments_are_computed(call):
    """Each raised ("math domain error", OverflowError, NaN to integer at first use) or read
    memory it should not. Computed now, the same for the same seed, in the type's range."""
    host = ref.photo_rgb(9, 11)
    outs = []
    for _ in range(2):
        mp.seed(5)
        outs.append(_run(host, call))
    np.testing.assert_array_equal(outs[0], outs[1])
    assert outs[0].dtype == np.uint8


def test_a_scale_whose_map_overflows_reads_nothing():
    """``scale=(1e-310, 1e-310)``: the image shrunk to nothing, every pixel outside."""
    out = _run(ref.photo_rgb(9, 11), lambda g: g.random_affine(0, scale=(1e-310, 1e-310)))
    np.testing.assert_array_equal(out, np.zeros_like(out))


# ---------------------------------------------------------- class 5: integer images
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("method", ["pad", "erase"])
def test_values_an_integer_type_cannot_hold_are_refused(dtype, method):
    """``pad`` wrapped them (uint16 -5 -> 65531, int16 40000 -> -25536) where ``erase``
    clipped; both refuse them now, naming the value and the type's range."""
    info = np.iinfo(dtype)
    # the values float64 holds exactly, for the 64-bit types (values travel as float64)
    lo, hi = max(int(info.min), -2**53), min(int(info.max), 2**53)
    host = _values(dtype, (4, 5), 1)
    args = {"pad": (1, 1, 1, 1), "erase": (1, 1, 2, 2)}[method]
    for bad in (lo - 1, hi + 1, 1.5, float(hi) * 4):
        img = mp.gpuimage(host)
        with pytest.raises(ValueError, match=r"value must be a whole number in"):
            getattr(img, method)(*args, value=bad)
        np.testing.assert_array_equal(np.asarray(img), host)
    if dtype not in MATERIALIZED:
        return  # (a kernel compile per dtype: the property test covers the others)
    for good in (lo, hi):
        out = _run(host, lambda g, v=good: getattr(g, method)(*args, value=v))
        if method == "pad":
            want = np.pad(host, 1, constant_values=good)
        else:
            want = host.copy()
            want[1:3, 1:3] = good
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.int16, np.int64])
def test_signed_grey_keeps_negative_values_through_noise_and_contrast(dtype):
    """On int16 grey, ``gaussian_noise(0)`` and ``adjust_contrast(1.0)`` turned -2000 into 0
    (clamped to [0, max]); the rule of the last sweep: the type's range, negatives kept."""
    host = np.full((4, 5), -100, dtype)
    host[0, :3] = (5, -7, 0)
    for call in (lambda g: g.gaussian_noise(0.0), lambda g: g.adjust_contrast(1.0),
                 lambda g: g.random_contrast(1.0, 1.0)):
        np.testing.assert_array_equal(_run(host, call), host)
    out = _run(host, lambda g: g.adjust_contrast(0.0))  # every pixel the floored mean
    np.testing.assert_array_equal(out, np.full_like(host, math.floor(host.mean())))


# ----------------------------------------------------------- class 12: bounded sizes
@pytest.mark.parametrize("call, name", [
    (lambda g: g.resize(10**30, 4), "resize"), (lambda g: g.pad(10**12, 0, 0, 0), "pad"),
    (lambda g: g.resize(2**31, 1), "resize"), (lambda g: g.random_resized_crop(10**9, 10**9),
                                               "resize"),
])
def test_outputs_larger_than_memory_are_refused_when_asked(call, name):
    """``resize(10**30, 4)`` and ``pad(10**12, ...)`` were accepted and left the image
    unreadable."""
    host = ref.photo_rgb(6, 7)
    img = mp.gpuimage(host)
    with pytest.raises(ValueError, match=rf"{name}\(.*\) would make a .* image"):
        call(img)
    np.testing.assert_array_equal(np.asarray(img), host)
    img.fliplr()  # usable after
    np.testing.assert_array_equal(np.asarray(img), host[:, ::-1])


def test_a_user_map_shape_rule_beyond_memory_is_refused():
    @mp.index_map(shape=lambda h, w: (h * 10**8, w * 10**8))
    def grow(row, col, height, width):
        return row, col

    img = mp.gpuimage(ref.photo_rgb(6, 7))
    with pytest.raises(ValueError, match=r"would make a .* image"):
        grow(img)
    assert np.asarray(img).shape == (6, 7, 3)


# ------------------------------------------------------------- class 13: empty images
@pytest.mark.parametrize("shape", [(0, 0, 3), (0, 5, 3), (5, 0), (0, 0)])
def test_random_resized_crop_of_an_empty_image_reads_nothing(shape):
    """ZeroDivisionError before; the window is the whole (empty) image, its resize zeros."""
    host = np.zeros(shape, np.uint8 if len(shape) == 3 else np.float64)
    out = _run(host, lambda g: g.random_resized_crop(3, 4))
    assert out.shape == (3, 4) + shape[2:]
    np.testing.assert_array_equal(out, np.zeros_like(out))
    for call in (lambda g: g.random_erasing(), lambda g: g.random_affine(20, (0.2, 0.2))):
        assert _run(host, call).shape == shape


# ----------------------------------------------------------- class 14: named refusals
def test_random_affine_translate_is_torchvisions_per_axis_maxima():
    """``random_affine(0, translate=(0.3, 0.1))`` was refused as a range with low > high."""
    host = np.zeros((21, 31), np.float64)
    host[10, 15] = 1.0  # one bright pixel at the centre: where it moves is the translation
    for seed in range(12):
        mp.seed(seed)
        out = _run(host, lambda g: g.random_affine(0, translate=(0.3, 0.1)))
        (y, x), = np.argwhere(out == out.max())
        assert abs(x - 15) <= round(0.3 * 31) and abs(y - 10) <= round(0.1 * 21)


def test_warp_affine_refuses_a_complex_matrix():
    img = mp.gpuimage(ref.photo_rgb(5, 6))
    for m in (np.eye(3, dtype=complex)[:2], [[1 + 1j, 0, 0], [0, 1, 0]]):
        with pytest.raises(ValueError, match="matrix must be a 2x3 or 3x3 array of real"):
            img.warp_affine(m)


@pytest.mark.parametrize("kwargs, name", [
    ({"boxes": "abc"}, "boxes"), ({"boxes": [[None, 1, 2, 3]]}, "boxes"),
    ({"boxes": [[1j, 1, 2, 3]]}, "boxes"), ({"keypoints": [["x", 1]]}, "keypoints"),
    ({"boxes": [[1, 2, 3, 4]], "min_area": "x"}, "min_area"),
    ({"boxes": [[1, 2, 3, 4]], "min_area": float("nan")}, "min_area"),
    ({"mask": [[1, 2], [3]]}, "mask"),
])
def test_set_targets_errors_name_the_argument(kwargs, name):
    img = mp.gpuimage(ref.photo_rgb(5, 6))
    with pytest.raises(ValueError, match=name):
        img.set_targets(**kwargs)
    assert img.targets is None


# ------------------------------------------------------------------ property-based tests
# (hypothesis draws the first entries of a list more often: the common cases lead)
KINDS = ["rgb", "int16", "float64", "uint8", "uint16", "int8", "rgba", "uint32", "int64"]
# small images, 1-pixel ones and empty ones
SHAPES = [(4, 6), (5, 3), (1, 5), (5, 1), (1, 1), (4, 6), (0, 3), (3, 0), (0, 0)]
FINITE = dict(allow_nan=False, allow_infinity=False)
NUMBER = st.one_of(st.floats(-4.0, 4.0, **FINITE), st.sampled_from([0.0, 1e-310, 1e308]))
# a bad argument swapped in for one of a call's own (a quarter of the calls): non-finite,
# negative, beyond float64's integers, beyond memory, not a whole number
BAD = st.sampled_from([float("nan"), float("inf"), float("-inf"), -1, -1.0, 10**12, 1.5,
                       -1e308])
# any number: finite, extreme, non-finite; any side: fitting, negative, beyond memory
ANY = st.one_of(NUMBER, st.sampled_from([float("nan"), float("inf"), float("-inf")]))
SIDE = st.one_of(st.integers(0, 7), st.sampled_from([-1, 10**12]))
METHODS = ["resize", "crop", "pad", "erase", "warp_affine", "random_affine",
           "random_resized_crop", "adjust_contrast", "adjust_saturation", "adjust_hue",
           "random_contrast", "gaussian_noise", "random_erasing"]


def _host(kind: str, shape: tuple, seed: int) -> np.ndarray:
    if kind in ("rgb", "rgba"):
        return _values(np.uint8, shape + (3 if kind == "rgb" else 4,), seed)
    return _values(np.dtype(kind), shape, seed)


def _fill(draw, dtype: np.dtype) -> float:
    """A value the image's type holds: its extremes (float64-exact), or one between."""
    if dtype.kind == "f":
        return draw(st.sampled_from([0.0, 1.0, 0.5]))
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -2**53), min(int(info.max), 2**53)
    return draw(st.sampled_from([lo, hi, (lo + hi) // 2]))


def _sorted_pair(draw, lo: float, hi: float, extremes: list) -> tuple:
    a, b = draw(st.floats(lo, hi, **FINITE)), draw(st.floats(lo, hi, **FINITE))
    return draw(st.sampled_from([(min(a, b), max(a, b))] * 3 + extremes))


@st.composite
def _cases(draw) -> tuple:
    """(kind, shape, method, args): the training ops with valid arguments (extremes among
    them), a quarter of them with one argument swapped for a bad one."""
    kind, shape = draw(st.sampled_from(KINDS)), draw(st.sampled_from(SHAPES))
    dtype = np.dtype(np.uint8 if kind in ("rgb", "rgba") else kind)
    h, w = shape
    side = st.integers(0, 3)
    method = draw(st.sampled_from(METHODS))
    if method == "resize":
        args = [draw(st.integers(1, 7)), draw(st.integers(1, 7))]
    elif method == "crop":
        t, lf = draw(st.integers(0, max(h - 1, 0))), draw(st.integers(0, max(w - 1, 0)))
        args = [t, lf, draw(st.integers(1, max(h - t, 1))), draw(st.integers(1, max(w - lf, 1)))]
    elif method in ("pad", "erase"):
        args = [draw(side), draw(side), draw(side), draw(side), _fill(draw, dtype)]
    elif method == "warp_affine":
        entry = st.one_of(st.floats(-2.0, 2.0, **FINITE), st.sampled_from([1e300, -1e300]))
        args = [[[draw(entry) for _ in range(3)], [draw(entry) for _ in range(3)]]]
    elif method == "random_affine":
        deg = draw(st.sampled_from([0.0, 30.0, 180.0, 1e308]))
        tr = draw(st.sampled_from([None, (0.3, 0.1), (1.0, 0.0)]))
        sc = draw(st.sampled_from([None, (0.5, 1.5), (1e-310, 1e-310), (1e-300, 1e308)]))
        args = [deg, tr, sc]
    elif method == "random_resized_crop":
        args = [draw(st.integers(1, 7)), draw(st.integers(1, 7)),
                _sorted_pair(draw, 0.0, 1.0, [(0.0, 1e308)]),
                _sorted_pair(draw, 0.1, 10.0, [(1e-308, 1e308)])]
    elif method in ("adjust_contrast", "adjust_saturation", "gaussian_noise"):
        args = [draw(st.one_of(st.floats(0.0, 4.0, **FINITE), st.sampled_from([1e308])))]
    elif method == "adjust_hue":
        args = [draw(st.floats(-0.5, 0.5, **FINITE))]
    elif method == "random_contrast":
        args = list(_sorted_pair(draw, 0.0, 4.0, [(0.0, 1e308), (1.0, 1.0)]))
    else:  # random_erasing
        args = [_sorted_pair(draw, 0.0, 1.0, []), _sorted_pair(draw, 0.1, 10.0, []),
                _fill(draw, dtype)]
    if draw(st.integers(0, 3)) == 3:  # one bad argument (the oracle says what is refused)
        flat = [i for i, a in enumerate(args) if isinstance(a, (int, float))]
        if flat:
            args[draw(st.sampled_from(flat))] = draw(BAD)
    return kind, shape, method, tuple(args)


def _finite(*vals) -> bool:
    """Whether every number in ``vals`` (tuples nested, None skipped) is finite."""
    return all(_finite(*v) if isinstance(v, tuple) else v is None or math.isfinite(v)
               for v in vals)


def _representable(value: float, dtype: np.dtype) -> bool:
    if not math.isfinite(value):
        return False
    if dtype.kind == "f":
        return 0.0 <= value <= 1.0
    info = np.iinfo(dtype)
    return value == math.floor(value) and int(info.min) <= int(value) <= int(info.max)


def _expected(method: str, args: tuple, host: np.ndarray) -> tuple[bool, tuple | None]:
    """(valid, output shape) by the API's contracts (None: the shape is the input's)."""
    h, w = host.shape[:2]
    a = args
    sides = {"resize": 2, "crop": 4, "pad": 4, "erase": 4, "random_resized_crop": 2}
    if not all(type(v) is int for v in a[:sides.get(method, 0)]):
        return False, None  # sides must be ints
    if method == "resize":
        ok = all(1 <= v <= 7 for v in a)
        return ok, (a[0], a[1]) + host.shape[2:]
    if method == "crop":
        ok = (a[0] >= 0 and a[1] >= 0 and a[2] >= 1 and a[3] >= 1 and a[0] + a[2] <= h
              and a[1] + a[3] <= w)
        return ok, (a[2], a[3]) + host.shape[2:]
    if method == "pad":
        ok = all(0 <= v <= 7 for v in a[:4]) and _representable(a[4], host.dtype)
        return ok, (h + a[0] + a[1], w + a[2] + a[3]) + host.shape[2:]
    if method == "erase":  # (a window beyond the image erases what it covers)
        return all(v >= 0 for v in a[:4]) and _representable(a[4], host.dtype), None
    if method == "warp_affine":
        return _finite(*a[0][0], *a[0][1]), None
    if method == "random_affine":
        deg, tr, sc = a
        ok = _finite(deg, tr, sc) and deg >= 0
        ok = ok and (tr is None or all(0 <= v <= 1 for v in tr))
        ok = ok and (sc is None or (sc[0] <= sc[1] and sc[0] > 0))
        return ok, None
    if method == "random_resized_crop":
        oh, ow, sc, ra = a
        ok = 1 <= oh <= 7 and 1 <= ow <= 7 and _finite(*sc, *ra)
        ok = ok and sc[0] <= sc[1] and sc[0] >= 0 and ra[0] <= ra[1] and ra[0] > 0
        return ok, (oh, ow) + host.shape[2:]
    if method in ("adjust_contrast", "adjust_saturation", "gaussian_noise"):
        return _finite(a[0]) and a[0] >= 0, None
    if method == "adjust_hue":
        return _finite(a[0]) and -0.5 <= a[0] <= 0.5, None
    if method == "random_contrast":
        return _finite(*a) and 0 <= a[0] <= a[1], None
    if method == "random_erasing":
        sc, ra, v = a
        ok = _finite(*sc, *ra) and 0 <= sc[0] <= sc[1] <= 1 and 0 < ra[0] <= ra[1]
        return ok and _representable(v, host.dtype), None
    raise AssertionError(method)


def _reference(method: str, args: tuple, host: np.ndarray) -> np.ndarray | None:
    """NumPy's result where the op is defined by NumPy (None: checked by contract only)."""
    if method == "crop":
        t, lf, hh, ww = args
        return host[t:t + hh, lf:lf + ww]
    if method == "pad":
        widths = ((args[0], args[1]), (args[2], args[3])) + ((0, 0),) * (host.ndim - 2)
        return np.pad(host, widths, constant_values=args[4])
    if method == "erase":
        out = host.copy()
        t, lf, hh, ww, v = args
        out[t:t + hh, lf:lf + ww] = v
        return out
    if method in ("adjust_contrast", "gaussian_noise") and args[0] == (
            1.0 if method == "adjust_contrast" else 0.0):
        return host  # the identity: every integer type keeps its values (negatives too)
    return None


# a new kernel per op, dtype and channel count: the cpu backend compiles each (seconds);
# CUDASIM compiles nothing, so it takes more examples there
_EXAMPLES = 60 if SIM else 25


@settings(max_examples=_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(case=_cases(), seed=st.integers(0, 2**16))
@pytest.mark.cudasim_ok
def test_property_training_ops_dtype_shape_and_extremes(case, seed):
    """Valid calls (empty and 1-pixel images, every integer dtype, arguments at float64's
    limits) keep the contracts and NumPy's result where NumPy defines it; invalid ones (NaN,
    infinities, values the type cannot hold, windows outside, sizes beyond memory) raise
    ValueError when made and leave the image as it was."""
    kind, shape, method, args = case
    host = _host(kind, shape, seed)
    valid, out_shape = _expected(method, args, host)
    img = mp.gpuimage(host)
    if not valid:
        with pytest.raises(ValueError):
            getattr(img, method)(*args)
        np.testing.assert_array_equal(np.asarray(img), host)
        return
    # draws are pure functions of (seed, sample, op index): fixed here, so a second image
    # must come out the same
    op = mp.Operation(method, *args)
    op.apply(img, seed, 0, 0)
    out = np.asarray(img)
    assert out.shape == (out_shape or host.shape) and out.dtype == host.dtype
    if out.dtype.kind == "f":
        assert np.isfinite(out).all() and (out.size == 0 or 0.0 <= out.min() <= out.max() <= 1)
    np.testing.assert_array_equal(np.asarray(img), out)  # readable again, the same
    np.testing.assert_array_equal(_run(host, lambda g: op.apply(g, seed, 0, 0)), out)
    want = _reference(method, args, host)
    if want is not None:
        np.testing.assert_array_equal(out, want)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(boxes=st.lists(st.tuples(ANY, ANY, ANY, ANY), max_size=3),
       min_area=ANY, flip=st.booleans())
def test_property_targets_valid_or_named_and_never_shared(boxes, min_area, flip):
    """Boxes with NaN, infinities or x1 < x0 and a bad ``min_area`` are refused naming the
    argument; valid ones follow a flip inside the image and are read-only everywhere."""
    host = ref.photo_rgb(6, 8)
    img = mp.gpuimage(host)
    arr = np.array(boxes, dtype=np.float64).reshape(-1, 4)
    valid = (np.isfinite(arr).all() and (arr[:, 2] >= arr[:, 0]).all()
             and (arr[:, 3] >= arr[:, 1]).all() and math.isfinite(min_area) and min_area >= 0)
    if not valid:
        with pytest.raises(ValueError, match="boxes|min_area"):
            img.set_targets(boxes=boxes, min_area=min_area)
        assert img.targets is None
        return
    img.set_targets(boxes=boxes, min_area=min_area)
    out = img.clone()
    if flip:
        out.fliplr()
    b = out.boxes
    assert ((b >= 0) & (b <= [8, 6, 8, 6])).all() if flip else np.array_equal(b, arr)
    for t in (img, out):
        with pytest.raises(ValueError, match="read-only"):
            t.boxes[...] = 0
    np.testing.assert_array_equal(img.boxes, arr)


# each capture is a new op, so a new kernel: on the cpu backend a compile (seconds) each
@settings(max_examples=10 if SIM else 4, deadline=None, derandomize=True)
@given(k=ANY, c=st.sampled_from([0.25, -3.0, 1e308]))
@pytest.mark.cudasim_ok
def test_property_user_op_captures_are_keyed(k, c):
    """A closure's captured value is part of its op's key: every decoration computes with
    its own value (the same source each time); its result is clipped to [0, 1], NaN to 0
    (never NaN in an image)."""
    def make(scale, shift):
        def f(v, ch):
            return v * scale + shift
        return mp.elementwise(f)

    host = np.linspace(0.0, 1.0, 6).reshape(2, 3)
    with np.errstate(all="ignore"):
        raw = host * k + c
    want = np.where(np.isnan(raw), 0.0, np.clip(raw, 0.0, 1.0))
    np.testing.assert_array_equal(_run(host, lambda g: make(k, c)(g)), want)


BATCH_OPTIONS = st.fixed_dictionaries({}, optional={
    "shape": st.one_of(st.none(), st.tuples(SIDE, SIDE), st.just((2.0, 3))),
    "layout": st.sampled_from(["NCHW", "NHWC", "nchw", 3]),
    "dtype": st.sampled_from(["float32", "float16", np.float32, "float64", ["float32"]]),
    "mean": st.one_of(ANY, st.lists(ANY, min_size=1, max_size=4)),
    "std": st.one_of(ANY, st.lists(ANY, min_size=1, max_size=4)),
    "channels": st.sampled_from([1, 3, 3.0, 2, True]),
    "drop_last": st.sampled_from([False, True, 1]),
})


def _batch_valid(size, o: dict, grey: bool) -> bool:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        return False
    shape = o.get("shape")
    if shape is not None and not all(type(v) is int and 1 <= v <= 7 for v in shape):
        return False
    if o.get("layout", "NCHW") not in ("NCHW", "NHWC"):
        return False
    dt = o.get("dtype", "float32")
    if not (dt in ("float32", "float16") or dt is np.float32):
        return False
    ch = o.get("channels", 3)
    if type(ch) is not int or ch not in (1, 3):
        return False
    per = {}
    for name, default in (("mean", 0.0), ("std", 1.0)):
        v = o.get(name, default)
        vals = v if isinstance(v, list) else [v]
        if len(vals) not in (1, ch) or not all(math.isfinite(x) for x in vals):
            return False
        if name == "std" and any(x == 0 for x in vals):
            return False
        per[name] = np.broadcast_to(np.array(vals, dtype=np.float64), (ch,))
    # (x - mean) / std for x in [0, 1] must fit the batch's dtype
    with np.errstate(over="ignore"):
        top = np.max(np.maximum(abs(per["mean"]), abs(1 - per["mean"])) / abs(per["std"]))
    if not top <= np.finfo(np.dtype(dt)).max:
        return False
    return type(o.get("drop_last", False)) is bool


@settings(max_examples=40, deadline=None, derandomize=True)
@given(size=st.sampled_from([1, 2, 5, 0, -1, 2.0, 10**12]), options=BATCH_OPTIONS,
       grey=st.booleans())
@pytest.mark.cudasim_ok
def test_property_batches_options_valid_or_named(size, options, grey):
    """Every ``batches()`` option: a valid set gives batches of the documented shape (one
    batch of every output when ``size`` asks for more than there are); an invalid one raises
    ValueError naming ``batches`` and the argument, when called."""
    host = np.linspace(0, 1, 20).reshape(4, 5) if grey else ref.photo_rgb(4, 5)
    gen = mp.Generator([mp.gpuimage(host)], [mp.Operation("fliplr")], outputs=3, seed=0)
    try:
        if not _batch_valid(size, options, grey):
            with pytest.raises(ValueError, match="batches"):
                gen.batches(size, **options)
            return
        if options.get("channels", 3) == 1 and not grey:
            with pytest.raises(ValueError, match=r"channels=1"):
                next(gen.batches(size, **options))
            return
        with gen.batches(size, **options) as it:
            got = [np.asarray(b) for b in it]
        if options.get("drop_last") and size > 3:
            assert got == []  # the one, smaller batch dropped
            return
        first = got[0]
        n = min(size, 3)
        hw = options.get("shape") or (4, 5)
        c = options.get("channels", 3)
        want = (n, c, *hw) if options.get("layout", "NCHW") == "NCHW" else (n, *hw, c)
        assert first.shape == want and first.dtype == np.dtype(options.get("dtype",
                                                                           "float32"))
        assert np.isfinite(first).all()
    finally:
        gen.close()
