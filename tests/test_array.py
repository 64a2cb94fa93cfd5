"""gpuarray / gpuimage construction, conversion, attributes, clone and NumPy interop
(shared/API.md "Arrays and images"; RELIABILITY.md "bad arrays" / "bad args")."""

import zlib

import numpy as np
import pytest
import reference as ref
import skimage
from reference import assert_matches

import millipyde as mp

# ------------------------------------------------------------------ gpuarray
NUMERIC_DTYPES = [
    np.bool_,  # decision: bool counts as numeric (NumPy treats it as such) -> accepted
    np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
    np.float16, np.float32, np.float64,
    np.complex64, np.complex128,  # complex is numeric: gpuarray accepts it
]
SHAPES = [(), (5,), (3, 4), (2, 3, 4), (2, 3, 4, 5), (2, 1, 3, 2, 2)]


def _sample(shape, dtype):
    dt = np.dtype(dtype)
    rng = np.random.default_rng(zlib.crc32(f"{shape}{dt.str}".encode()))
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind == "b":
        vals = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        vals = rng.integers(max(int(info.min), -1000), min(int(info.max), 1000), n,
                            endpoint=True).astype(dt)
        extremes = np.array([info.min, info.max], dtype=dt)[:n]
        vals[: extremes.size] = extremes
    elif dt.kind == "f":
        vals = (rng.standard_normal(n) * 100).astype(dt)
    else:
        vals = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    return vals.reshape(shape)


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{len(s)}d" for s in SHAPES])
@pytest.mark.parametrize("dtype", NUMERIC_DTYPES, ids=lambda d: np.dtype(d).name)
def test_gpuarray_round_trip(dtype, shape):
    a = _sample(shape, dtype)
    x = mp.gpuarray(a)
    assert isinstance(x, mp.gpuarray)
    assert_matches(np.asarray(x), a)
    assert_matches(np.array(x), a)
    assert x.shape == a.shape and x.dtype == a.dtype and x.ndim == a.ndim
    assert x.size == a.size and x.nbytes == a.nbytes


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2)])
def test_gpuarray_zero_size(shape):
    a = np.zeros(shape, dtype=np.float32)
    x = mp.gpuarray(a)
    assert_matches(np.asarray(x), a)
    assert x.size == 0 and x.nbytes == 0 and x.shape == shape


def test_gpuarray_from_lists_and_scalars():
    assert_matches(np.asarray(mp.gpuarray([[1, 2], [3, 4]])), np.array([[1, 2], [3, 4]]))
    assert_matches(np.asarray(mp.gpuarray([1.5, 2.5])), np.array([1.5, 2.5]))
    assert_matches(np.asarray(mp.gpuarray(3.5)), np.array(3.5))
    assert_matches(np.asarray(mp.gpuarray(7)), np.array(7))


BAD_OBJECTS = {
    "None": None,
    "str": "abc",
    "str-array": np.array(["a", "b"]),
    "bytes": b"abc",
    "object-array": np.array([object(), object()], dtype=object),
    "object": object(),
    "ragged": [[1, 2], [3]],
    "ragged-deep": [[[1, 2]], [[1, 2], [3, 4]]],
    "list-of-str": ["1", "2"],
    "dict": {"a": 1},
}


@pytest.mark.parametrize("obj", list(BAD_OBJECTS.values()), ids=list(BAD_OBJECTS))
@pytest.mark.parametrize("ctor", ["gpuarray", "gpuimage"])
def test_bad_objects_raise_value_error(ctor, obj):
    with pytest.raises(ValueError):
        getattr(mp, ctor)(obj)


@pytest.mark.parametrize("ctor", ["gpuarray", "gpuimage"])
def test_no_argument_is_type_error(ctor):
    with pytest.raises(TypeError):
        getattr(mp, ctor)()


def test_attributes_like_numpy():
    a = _sample((4, 5, 6), np.float32)
    x = mp.gpuarray(a)
    assert (x.shape, x.dtype, x.ndim, x.size, x.nbytes) == (a.shape, a.dtype, a.ndim, a.size,
                                                            a.nbytes)
    assert isinstance(x.shape, tuple)
    assert isinstance(x.device, int)
    assert x.device == mp.get_current_device()


# ------------------------------------------------------------------ gpuimage
@pytest.mark.parametrize("shape", [(5,), (2, 3, 4, 3), (2, 3, 3, 4, 1), (4, 5, 2), (4, 5, 5),
                                   (4, 5, 1), ()],
                         ids=["1d", "4d", "5d", "last2", "last5", "last1", "0d"])
def test_gpuimage_bad_shapes(shape):
    a = np.zeros(shape, dtype=np.uint8)
    with pytest.raises(ValueError):
        mp.gpuimage(a)


def test_gpuimage_is_a_gpuarray():
    img = mp.gpuimage(ref.photo_rgb(8, 9))
    assert isinstance(img, mp.gpuimage) and isinstance(img, mp.gpuarray)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16, np.int16])
@pytest.mark.parametrize("channels", [3, 4])
def test_colour_integers_in_range_become_uint8(dtype, channels):
    a = (ref.photo_rgb(13, 11) if channels == 3 else ref.photo_rgba(13, 11)).astype(dtype)
    a[0, 0] = 0
    a[0, 1] = 255
    img = mp.gpuimage(a)
    assert img.dtype == np.uint8
    assert_matches(np.asarray(img), a.astype(np.uint8))
    assert img.shape == a.shape and img.nbytes == a.size


@pytest.mark.parametrize("bad", [256, -1, 1000])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16])
def test_colour_integers_out_of_range_raise(dtype, bad):
    a = ref.photo_rgb(6, 7).astype(dtype)
    a[3, 2, 1] = bad
    with pytest.raises(ValueError):
        mp.gpuimage(a)


def test_colour_uint16_out_of_range_raises():
    a = ref.photo_rgb(6, 7).astype(np.uint16)
    a[0, 0, 0] = 300
    with pytest.raises(ValueError):
        mp.gpuimage(a)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("channels", [3, 4])
def test_colour_float_in_unit_range_scaled_like_img_as_ubyte(dtype, channels):
    base = ref.photo_rgb(13, 11) if channels == 3 else ref.photo_rgba(13, 11)
    a = (base / 255.0).astype(dtype)
    a[0, 0] = 0.0
    a[0, 1] = 1.0
    a[0, 2] = 0.5
    a[0, 3] = 1.0 / 510  # half a level: rounding matters
    img = mp.gpuimage(a)
    assert img.dtype == np.uint8
    assert_matches(np.asarray(img), skimage.img_as_ubyte(a))


@pytest.mark.parametrize("bad", [1.5, -0.1, np.nan, np.inf, -np.inf])
def test_colour_float_outside_unit_range_raises(bad):
    a = ref.photo_rgb(6, 7) / 255.0
    a[2, 3, 0] = bad
    with pytest.raises(ValueError):
        mp.gpuimage(a)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_grey_float_nan_inf_raise(bad):
    a = ref.photo_grey(6, 7)
    a[1, 1] = bad
    with pytest.raises(ValueError):
        mp.gpuimage(a)


def test_grey_float64_round_trips():
    a = ref.photo_grey(17, 23)
    img = mp.gpuimage(a)
    assert img.dtype == np.float64 and img.shape == (17, 23)
    assert_matches(np.asarray(img), a)


def test_grey_float32_becomes_float64():
    # "greyscale is float64 in [0,1]"
    a = ref.photo_grey(17, 23).astype(np.float32)
    img = mp.gpuimage(a)
    assert img.dtype == np.float64
    assert_matches(np.asarray(img), a.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.int32, np.int64])
def test_grey_integers_round_trip_unchanged(dtype):
    info = np.iinfo(dtype)
    a = np.arange(35, dtype=np.int64).reshape(5, 7) * 7
    a[0, 0] = info.min
    a[0, 1] = info.max
    a = a.astype(dtype)
    img = mp.gpuimage(a)
    out = np.array(img)
    assert out.dtype == a.dtype
    assert_matches(out, a)


@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (1, 1, 3), (1, 9, 4), (9, 1, 3)])
def test_degenerate_image_shapes_round_trip(shape):
    if len(shape) == 2:
        a = ref.photo_grey(*shape)
    else:
        a = ref.photo(("rgb" if shape[2] == 3 else "rgba"), *shape[:2])
    img = mp.gpuimage(a)
    assert_matches(np.asarray(img), a)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 4, 3)])
def test_zero_size_image_converts_or_raises(shape):
    # RELIABILITY.md: documented conversion or ValueError; never a crash or garbage
    a = np.zeros(shape, dtype=np.float64 if len(shape) == 2 else np.uint8)
    try:
        img = mp.gpuimage(a)
    except ValueError:
        return
    assert_matches(np.asarray(img), a)


# --------------------------------------------------- odd memory layouts
def _layouts():
    grey = ref.photo_grey(20, 30)
    rgb = ref.photo_rgb(20, 30)
    ro = rgb.copy()
    ro.setflags(write=False)
    ro_grey = grey.copy()
    ro_grey.setflags(write=False)
    return {
        "noncontig-rgb": ref.photo_rgb(40, 90)[::2, ::3],
        "noncontig-grey": ref.photo_grey(40, 90)[1::2, ::3],
        "channel-slice": ref.photo_rgba(20, 30)[..., :3],
        "negstride-rgb": rgb[::-1, ::-1],
        "negstride-channels": rgb[..., ::-1],
        "negstride-grey": grey[::-1],
        "fortran-rgb": np.asfortranarray(rgb),
        "fortran-grey": np.asfortranarray(grey),
        "readonly-rgb": ro,
        "readonly-grey": ro_grey,
        "bigendian-grey": grey.astype(">f8"),
        "bigendian-int-grey": (grey * 1000).astype(">i4"),
        "bigendian-colour-int": rgb.astype(">i2"),
    }


LAYOUTS = _layouts()


def _native(a):
    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))


@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("ctor", ["gpuarray", "gpuimage"])
def test_odd_layouts_work_and_input_untouched(ctor, name):
    a = LAYOUTS[name]
    before = a.copy(order="K")
    flags_before = (a.flags.writeable, a.flags.c_contiguous, a.flags.f_contiguous)
    x = getattr(mp, ctor)(a)
    expected = _native(a)
    if ctor == "gpuimage" and a.ndim == 3 and expected.dtype != np.uint8:
        expected = expected.astype(np.uint8)
    assert_matches(np.asarray(x), expected)
    if ctor == "gpuimage":
        x.fliplr()
        assert_matches(np.asarray(x), ref.fliplr(expected))
    np.testing.assert_array_equal(a, before)
    assert a.dtype == before.dtype
    assert (a.flags.writeable, a.flags.c_contiguous, a.flags.f_contiguous) == flags_before


def test_input_never_modified_by_methods():
    a = ref.photo_rgba(17, 23)
    before = a.copy()
    img = mp.gpuimage(a)
    for call in [("gaussian", 1), ("brightness", 0.3), ("colorize", 1.5, 0.8, 1),
                 ("adjust_gamma", 2), ("rotate", 30), ("fliplr",), ("transpose",),
                 ("rgb2grey",)]:
        getattr(img, call[0])(*call[1:])
    np.asarray(img)
    assert_matches(a, before)


# ------------------------------------------------------------ clone
def test_clone_is_deep_copy_and_gpuimage():
    a = ref.photo_rgb(17, 23)
    img = mp.gpuimage(a)
    c = img.clone()
    assert isinstance(c, mp.gpuimage)
    assert c is not img
    assert_matches(np.asarray(c), a)
    c.fliplr()
    c.brightness(0.2)
    assert_matches(np.asarray(img), a, what="mutating the clone changed the original")
    assert_matches(np.asarray(c), ref.brightness(ref.fliplr(a), 0.2))
    img.transpose()
    assert_matches(np.asarray(c), ref.brightness(ref.fliplr(a), 0.2),
                   what="mutating the original changed the clone")
    assert_matches(np.asarray(img), ref.transpose(a))


def test_clone_sees_pending_work():
    a = ref.photo_grey(17, 23)
    img = mp.gpuimage(a)
    img.fliplr()
    img.brightness(0.1)
    c = img.clone()  # no np.asarray in between: the recorded work must be part of the copy
    assert_matches(np.asarray(c), ref.brightness(ref.fliplr(a), 0.1))
    assert c.device == mp.get_current_device()


def test_gpuarray_clone():
    a = _sample((3, 4, 5), np.int32)
    x = mp.gpuarray(a)
    c = x.clone()
    assert isinstance(c, mp.gpuarray) and c is not x
    assert_matches(np.asarray(c), a)
    assert c.shape == a.shape and c.dtype == a.dtype


# ------------------------------------------------------- host views
def test_asarray_is_never_stale():
    a = ref.photo_rgb(17, 23)
    img = mp.gpuimage(a)
    expected = a
    steps = [("fliplr", (), ref.fliplr), ("transpose", (), ref.transpose),
             ("brightness", (0.1,), ref.brightness), ("rotate", (90,), ref.rotate),
             ("rgb2grey", (), ref.rgb2grey), ("gaussian", (1,), ref.gaussian)]
    for name, args, fn in steps:
        getattr(img, name)(*args)
        expected = fn(expected, *args)
        tol = 1 if name in ("rotate", "gaussian") else 0
        assert_matches(np.asarray(img), expected, ulp_uint8=tol, atol=ref.SKIMAGE_ATOL,
                       what=f"after {name}")
        assert img.shape == expected.shape and img.dtype == expected.dtype


def test_host_copy_is_a_copy():
    a = ref.photo_rgb(5, 6)
    img = mp.gpuimage(a)
    h = np.array(img)
    h[:] = 0
    assert_matches(np.asarray(img), a)


# ------------------------------------------------------- NumPy protocols
@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_numpy_sum_and_add(dtype):
    a = _sample((6, 7, 3), dtype)
    x = mp.gpuarray(a)
    s = np.sum(x)
    assert_matches(np.asarray(s), np.asarray(np.sum(a)), atol=1e-9)
    y = np.add(x, 1)
    assert_matches(np.asarray(y), np.add(a, 1))
    assert_matches(np.asarray(x), a, what="np.add modified its input")


def test_numpy_functions_on_gpuimage():
    a = ref.photo_rgb(9, 10)
    img = mp.gpuimage(a)
    assert_matches(np.asarray(np.sum(img)), np.asarray(np.sum(a)))
    assert_matches(np.asarray(np.mean(img)), np.asarray(np.mean(a)), atol=1e-9)
    img.fliplr()
    assert_matches(np.asarray(np.max(img, axis=2)), np.max(ref.fliplr(a), axis=2))


# ------------------------------------------------------- methods return None
METHOD_CALLS = [
    ("rgb2grey",), ("rgb2gray",), ("rgba2grey",), ("rgba2gray",), ("transpose",),
    ("fliplr",), ("rotate", 10), ("gaussian", 1), ("brightness", 0.1),
    ("colorize", 1, 1, 1), ("adjust_gamma", 1), ("adjust_gamma", 1, 0.5),
    ("random_gaussian", 0.5, 1), ("random_brightness", -0.1, 0.1),
    ("random_colorize", [0.9, 1.1], [0.9, 1.1], [0.9, 1.1]), ("random_rotate", -5, 5),
    ("random_adjust_gamma", [0.9, 1.1], [0.9, 1.0]),
]


@pytest.mark.parametrize("call", METHOD_CALLS, ids=[str(c) for c in METHOD_CALLS])
def test_image_methods_return_none(call):
    img = mp.gpuimage(ref.photo_rgba(7, 9))
    assert getattr(img, call[0])(*call[1:]) is None
    assert np.asarray(img).shape[:2] in ((7, 9), (9, 7))
