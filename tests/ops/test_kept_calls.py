"""A form that draws nothing keeps each call with plain arguments whole (``image.KEPT_CALLS``,
per repr of the call's arguments, shape and dtype): a repeated call records what a fresh call
records, without its parse; what the parse refuses is refused on every call."""

from __future__ import annotations

import numpy as np
import pytest

import millipyde as mp
from millipyde import image as image_mod
from millipyde.ops import FORMS

from .test_fixed_records import _FIXED, _params

#: plain forms (no sample, no draws) and their arguments
_PLAIN = {
    "adjust_gamma": (2.0,),
    "fliplr": (),
    "vflip": (),
    "rgb2grey": (),
}


@pytest.fixture(autouse=True)
def _fresh():
    for kept in (*image_mod.KEPT_CALLS.values(), *image_mod.FIXED_RECORDS.values()):
        kept.clear()


def _recorded(img: mp.gpuimage, name: str, args: tuple, kwargs: dict | None = None) -> list:
    y = img.clone()
    before = y._node
    getattr(y, name)(*args, **(kwargs or {}))
    return _params(y, before)


@pytest.mark.cudasim_ok  # (records only: nothing runs)
def test_every_form_that_draws_nothing_keeps_its_calls():
    assert set(_PLAIN) <= {n for n, f in FORMS.items() if f.sample is None and not f.draws}
    assert {f.name for f in FORMS.values() if not f.draws} <= set(image_mod.KEPT_CALLS)


@pytest.mark.cudasim_ok  # (records only: nothing runs)
@pytest.mark.parametrize("name", sorted({**_FIXED, **_PLAIN}))
def test_a_kept_call_records_what_a_fresh_call_records(name):
    args = {**_FIXED, **_PLAIN}[name]
    img = mp.gpuimage(np.zeros((37, 53, 3), dtype=np.uint8))
    fresh = _recorded(img, name, args)
    assert len(image_mod.KEPT_CALLS[name]) == 1 and fresh
    image_mod.FIXED_RECORDS.get(name, {}).clear()  # (a hit reads neither the sample's records)
    assert _recorded(img, name, args) == fresh
    assert not image_mod.FIXED_RECORDS.get(name)
    # another size: its own entry and its own parameters
    other = mp.gpuimage(np.zeros((41, 61, 3), dtype=np.uint8))
    want = _recorded(other, name, args)
    image_mod.KEPT_CALLS[name].clear()
    assert _recorded(other, name, args) == want
    _recorded(img, name, args)
    assert len(image_mod.KEPT_CALLS[name]) == 2
    assert _recorded(other, name, args) == want and _recorded(img, name, args) == fresh


@pytest.mark.cudasim_ok  # (records only: nothing runs)
def test_arguments_equal_but_of_another_type_are_parsed_again():
    img = mp.gpuimage(np.zeros((16, 16, 3), dtype=np.uint8))
    img.clone().rot90(3)
    for bad in (3.0, True):  # (equal to 3, and hashed as it: refused by the parse each time)
        for _ in range(2):
            with pytest.raises(ValueError, match=f"k must be an int, got {type(bad).__name__}"):
                img.clone().rot90(bad)
    img.clone().crop(2, 2, 8, 8)
    with pytest.raises(ValueError, match="top must be an int, got float"):
        img.clone().crop(2.0, 2, 8, 8)
    img.clone().adjust_gamma(1)
    with pytest.raises(ValueError, match="gamma must be a real number, got bool"):
        img.clone().adjust_gamma(True)
    assert sorted(k[0] for k in image_mod.KEPT_CALLS["rot90"]) == ["(3,)"]


@pytest.mark.cudasim_ok  # (records only: nothing runs)
def test_refusals_keywords_and_arguments_not_plain():
    img = mp.gpuimage(np.zeros((10, 10, 3), dtype=np.uint8))
    for _ in range(2):
        with pytest.raises(ValueError, match="crop top \\+ height"):
            img.clone().crop(2, 3, 20, 5)
    assert not image_mod.KEPT_CALLS["crop"]
    # keywords: their own entries (expand changes the output's shape)
    plain = _recorded(img, "rotate", (30.0,))
    grown = _recorded(img, "rotate", (30.0,), {"expand": True})
    assert plain != grown and len(image_mod.KEPT_CALLS["rotate"]) == 2
    assert _recorded(img, "rotate", (30.0,), {"expand": True}) == grown
    assert _recorded(img, "rotate", (30.0,)) == plain
    with pytest.raises(ValueError, match="expand must be True or False"):
        img.clone().rotate(30.0, expand=1)
    # a NumPy scalar: parsed every call, never kept
    want = _recorded(img, "adjust_gamma", (0.5,))
    image_mod.KEPT_CALLS["adjust_gamma"].clear()
    assert _recorded(img, "adjust_gamma", (np.float64(0.5),)) == want
    assert not image_mod.KEPT_CALLS["adjust_gamma"]


def test_kept_calls_give_the_values_of_fresh_calls():
    host = np.random.default_rng(3).integers(0, 256, (33, 47, 3), dtype=np.uint8)
    outs = []
    for _ in range(3):
        y = mp.gpuimage(host)
        y.gaussian(1.5)
        y.rotate(20.0)
        y.adjust_gamma(0.7)
        y.fliplr()
        outs.append(np.asarray(y))
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_a_form_whose_calls_fill_the_kept_calls_takes_no_key_for_a_while(monkeypatch):
    monkeypatch.setattr(image_mod, "_IDLE_CALLS", 5)
    img = mp.gpuimage(np.zeros((8, 8, 3), dtype=np.uint8))
    kept = image_mod.KEPT_CALLS["adjust_gamma"]
    for k in range(image_mod._FIXED_KEPT + 1):  # (a new value each call)
        img.clone().adjust_gamma(0.5 + k / 100)
    assert len(kept) == 1  # emptied when full, the last call kept
    want = _recorded(img, "adjust_gamma", (0.25,))  # (the last call kept, so no key taken)
    for _ in range(4):
        assert _recorded(img, "adjust_gamma", (0.25,)) == want
    assert len(kept) == 1
    assert _recorded(img, "adjust_gamma", (0.25,)) == want  # keyed again
    assert len(kept) == 2 and _recorded(img, "adjust_gamma", (0.25,)) == want
