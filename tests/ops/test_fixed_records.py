"""A form that draws nothing keeps its one-image records per (arguments, shape, dtype): the
method records what a fresh sample records, and tells apart what it must."""

from __future__ import annotations

import numpy as np
import pytest

import millipyde as mp
from millipyde import image as image_mod
from millipyde.ops import FORMS

#: plain arguments of forms with a sample that draw nothing (the kept path)
_FIXED = {
    "gaussian": (2.0,),
    "rotate": (45.0,),
    "rot90": (3,),
    "translate": (4.0, -3.0),
    "shear": (10.0, -5.0),
    "crop": (2, 3, 20, 30),
    "center_crop": (20, 30),
    "pad_to": (50, 70),
    "resize": (24, 40),
    "resize_shorter": (24,),
    "downscale": (0.5,),
    "linear_illumination": (0.2, 1),
    "grid_dropout": ((8, 8), 0.5),
    "grayscale": (3,),
    "rescale_intensity": (),
}


@pytest.fixture(autouse=True)
def _no_kept_calls():
    # (a call kept whole, ``KEPT_CALLS``, would not reach the records these tests count)
    for kept in image_mod.KEPT_CALLS.values():
        kept.clear()


def _params(img: mp.gpuimage, before: object) -> list:
    out, n = [], img._node
    while n is not before:
        out.append((n.op.name, tuple(float(v) for v in n.params)))
        n = n.inputs[0]
    return out[::-1]


def _recorded(img: mp.gpuimage, name: str, args: tuple) -> list:
    image_mod.KEPT_CALLS.get(name, {}).clear()  # (the records kept per call come first)
    y = img.clone()
    before = y._node
    getattr(y, name)(*args)
    return _params(y, before)


def test_the_table_covers_every_form_with_a_sample_that_draws_nothing():
    forms = {n for n, f in FORMS.items() if f.sample is not None and not f.draws}
    assert set(_FIXED) <= forms
    assert forms - set(_FIXED) <= {"fancy_pca", "corner_illumination",
                                   "gaussian_illumination"}


@pytest.mark.parametrize("name", sorted(_FIXED))
def test_a_kept_entry_records_what_a_fresh_sample_records(name):
    img = mp.gpuimage(np.zeros((37, 53, 3), dtype=np.uint8))
    image_mod.FIXED_RECORDS.get(name, {}).clear()
    fresh = _recorded(img, name, _FIXED[name])
    assert len(image_mod.FIXED_RECORDS[name]) == 1
    kept = _recorded(img, name, _FIXED[name])
    assert kept == fresh and fresh
    # another size: another entry, and its own parameters where they depend on the size
    other = mp.gpuimage(np.zeros((41, 61, 3), dtype=np.uint8))
    image_mod.FIXED_RECORDS[name].clear()
    want = _recorded(other, name, _FIXED[name])
    _recorded(img, name, _FIXED[name])
    assert _recorded(other, name, _FIXED[name]) == want
    assert len(image_mod.FIXED_RECORDS[name]) == 2


def test_values_equal_under_equality_but_not_repr_are_kept_apart():
    img = mp.gpuimage(np.zeros((16, 16, 3), dtype=np.uint8))
    kept = image_mod.FIXED_RECORDS.setdefault("rotate", {})
    kept.clear()
    for angle in (30, 30.0, 0.0, -0.0):  # (the parse makes 30 a float: one entry)
        img.clone().rotate(angle)
    assert sorted(k[0] for k in kept) == ["(-0.0, None)", "(0.0, None)", "(30.0, None)"]
    assert image_mod._plain((1, (2.0, None, "a", True)))
    assert not image_mod._plain((np.float64(1.0),))
    assert not image_mod._plain(([1, 2],))


def test_a_refusal_is_raised_on_every_call_and_outputs_equal_a_fresh_samples():
    small = mp.gpuimage(np.zeros((10, 10, 3), dtype=np.uint8))
    image_mod.FIXED_RECORDS.get("crop", {}).clear()
    for _ in range(2):
        with pytest.raises(ValueError, match="crop top \\+ height"):
            small.clone().crop(2, 3, 20, 5)
    assert not image_mod.FIXED_RECORDS["crop"]  # (a refusal keeps nothing)
    # an output past the side limit is refused on every call; one large enough that its
    # check asks the device for its memory is checked on every call (kept: neither)
    image_mod.FIXED_RECORDS.get("resize", {}).clear()
    for _ in range(2):
        with pytest.raises(ValueError, match="resize"):
            small.clone().resize(2**31, 4)
    try:
        small.clone().resize(10**9, 4)  # (12 GB: refused where the device holds less)
    except ValueError:
        pass
    assert not image_mod.FIXED_RECORDS["resize"]
    small.clone().resize(20, 30)
    assert len(image_mod.FIXED_RECORDS["resize"]) == 1
    rng = np.random.default_rng(3)
    host = rng.integers(0, 256, (33, 47, 3), dtype=np.uint8)
    outs = []
    for keep in (False, True, True):
        if not keep:
            image_mod.FIXED_RECORDS.get("gaussian", {}).clear()
        y = mp.gpuimage(host)
        y.gaussian(1.5)
        y.rotate(20.0)
        outs.append(np.asarray(y))
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])


def test_the_kept_entries_are_bounded():
    kept = image_mod.FIXED_RECORDS.setdefault("translate", {})
    kept.clear()
    img = mp.gpuimage(np.zeros((8, 8, 3), dtype=np.uint8))
    for k in range(image_mod._FIXED_KEPT + 10):
        img.clone().translate(float(k), 0.0)
    assert len(kept) == image_mod._FIXED_KEPT
