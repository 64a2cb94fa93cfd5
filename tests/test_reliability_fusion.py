"""Issue 32, class 1: a fused plan equals materializing between ops, for every ordered pair of
image ops (and the chains the issue found: crop, then a flip, transpose or second crop, then
pad), on ``np.asarray``, ``next()`` and ``Generator.batches``.

The defect class: index maps compose into one map of the source, and a fused pad tested the
*source's* bounds, so a crop before it let the padding show pixels from outside the crop
window. Values are compared exactly (one backend: bit-identical, API.md).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import reference as ref

import millipyde as mp


@mp.index_map
def _shift_map(row, col, height, width, dy):
    return row + dy, col - 0.5 * dy


def _crop(img):
    h, w = img.shape[:2]
    img.crop(min(1, h - 1), min(2, w - 1), max(1, h - 3), max(1, w - 4))


def _pad(img):
    img.pad(1, 2, 3, 1, value=200 if img.dtype == np.uint8 else 0.75)


def _erase(img):
    img.erase(1, 2, 3, 4, value=17 if img.dtype == np.uint8 else 0.25)


#: each op as a call on the image as it is then (windows follow the shape the first op left)
OPS = {
    "transpose": lambda g: g.transpose(),
    "fliplr": lambda g: g.fliplr(),
    "crop": _crop,
    "pad": _pad,
    "rotate": lambda g: g.rotate(33.0),
    "resize": lambda g: g.resize(9, 11),
    "warp_affine": lambda g: g.warp_affine([[0.9, 0.2, 1.0], [-0.1, 1.1, -0.5]]),
    "user_index_map": lambda g: _shift_map(g, 1.5),
    "adjust_gamma": lambda g: g.adjust_gamma(1.7),
    "adjust_saturation": lambda g: g.adjust_saturation(1.6),
    "erase": _erase,
    "rgb2grey": lambda g: g.rgb2grey(),
    "gaussian": lambda g: g.gaussian(1.2),
    "adjust_contrast": lambda g: g.adjust_contrast(0.6),
}

#: ops whose maps compose with a sampler's matrix (after it: one more rounding of the map)
INDEX_MAPS = {"transpose", "fliplr", "crop", "pad"}
SAMPLERS = {"rotate", "resize", "warp_affine", "user_index_map"}
#: the index maps (the defect's class): their pairs compile two kernels on the cpu backend;
#: CUDASIM, which compiles nothing, runs every pair
CPU_OPS = sorted(INDEX_MAPS)
#: what a stencil (gaussian) fuses with: table ops (prologue, epilogue) and, through its
#: source, a copy; next to any other op the plan stores between them anyway. Its pairs with
#: these only (a simulated stencil launch costs ~0.3 s), and with two index maps
STENCIL_PAIRS = {"adjust_gamma", "adjust_contrast", "gaussian", "crop", "pad"}


def _pairs(names):
    return [(a, b) for a, b in itertools.product(names, names)
            if "gaussian" not in (a, b) or {a, b} <= STENCIL_PAIRS]


def _fused(host, first, second):
    img = mp.gpuimage(host)
    OPS[first](img)
    OPS[second](img)
    return np.asarray(img)


def _one(host, name):
    img = mp.gpuimage(host)
    OPS[name](img)
    return np.asarray(img)


@pytest.mark.cudasim_ok
def test_every_pair_of_ops_fused_equals_materialized():
    """All ordered pairs of ops on a 5x6 RGB uint8 image: the fused plan computes what
    materializing after the first op does (its stored result read back as an image).
    Exact, except where an index map after a sampler composes into the sampler's matrix
    (float arithmetic in another order: within 1, API.md). Failures are reported at once.

    Every pair runs under CUDASIM, where a kernel costs no compile; the cpu backend, where
    each new pair's kernel compiles for seconds, runs the pairs of ``CPU_OPS``."""
    names = list(OPS) if mp.backend() == "cudasim" else CPU_OPS
    host = ref.photo_rgb(5, 6)
    firsts = {name: _one(host, name) for name in names}
    wrong = []
    for first, second in _pairs(names):
        fused = _fused(host, first, second)
        stepwise = _one(firsts[first], second)
        if fused.shape != stepwise.shape:
            wrong.append(f"{first} then {second}: shape {fused.shape} != {stepwise.shape}")
            continue
        diff = np.abs(fused.astype(np.float64) - stepwise)
        tol = 1 if first in SAMPLERS and second in INDEX_MAPS else 0
        if diff.size and diff.max() > tol:
            wrong.append(f"{first} then {second}: {int((diff > tol).sum())} values differ, "
                         f"by up to {diff.max()}")
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------- the chains, on the cpu backend too
def _window_then_pad(host, between):
    """crop(2, 3, 6, 7), the ``between`` steps, then pad(1, 1, 1, 1) as NumPy does them."""
    out = host[2:8, 3:10]
    for step in between:
        out = {"fliplr": np.fliplr, "transpose": lambda a: np.swapaxes(a, 0, 1),
               "crop": lambda a: a[1:4, 1:5]}[step](out)
    fill = 9 if host.dtype == np.uint8 else 0.5
    widths = ((1, 1), (1, 1)) + ((0, 0),) * (host.ndim - 2)
    return np.pad(out, widths, constant_values=fill)


def _record_window_then_pad(img, between):
    img.crop(2, 3, 6, 7)
    for step in between:
        if step == "crop":
            img.crop(1, 1, 3, 4)
        else:
            getattr(img, step)()
    img.pad(1, 1, 1, 1, value=9 if img.dtype == np.uint8 else 0.5)


BETWEEN = [(), ("fliplr",), ("transpose",), ("crop",), ("fliplr", "transpose", "crop")]


@pytest.mark.cudasim_ok
@pytest.mark.parametrize("between", BETWEEN, ids=["-".join(b) or "none" for b in BETWEEN])
@pytest.mark.parametrize("kind", ["rgb", "grey"])
def test_crop_then_pad_shows_only_the_fill_outside_the_window(kind, between):
    """The issue's reproduction (30 pixels of a 12x14 image read from outside the crop
    window): the result must equal ``np.pad(img[crop])``, with steps between too."""
    host = ref.photo_rgb(12, 14) if kind == "rgb" else ref.photo_rgb(12, 14)[..., 0] / 255.0
    img = mp.gpuimage(host)
    _record_window_then_pad(img, between)
    np.testing.assert_array_equal(np.asarray(img), _window_then_pad(host, between))


def test_crop_then_pad_in_next_and_batches():
    """The same chain as Operations: ``next()`` and ``batches()`` (the batched arena and
    recorded paths) equal ``np.pad(img[crop])`` too."""
    host = ref.photo_rgb(12, 14)
    ops = [mp.Operation("crop", 2, 3, 6, 7), mp.Operation("fliplr"),
           mp.Operation("pad", 1, 1, 1, 1, value=9)]
    want = _window_then_pad(host, ("fliplr",))
    gen = mp.Generator([mp.gpuimage(host)], ops, outputs=3, return_to_host=True, seed=0)
    for out in gen:
        np.testing.assert_array_equal(out, want)
    gen = mp.Generator([mp.gpuimage(host), mp.gpuimage(ref.photo_rgb(13, 15))], ops,
                       outputs=4, seed=0)
    batch = np.asarray(next(gen.batches(2, dtype="float32", layout="NHWC")))
    np.testing.assert_array_equal(batch[0], want.astype(np.float32) / 255.0)


def test_stencil_then_statistic_op_reads_the_measured_mean():
    """Found by the pair test: gaussian then adjust_contrast fused the contrast into the
    Gaussian's store as a table built before its grey mean was measured (mean 0)."""
    host = ref.photo_rgb(12, 14)
    img = mp.gpuimage(host)
    img.gaussian(1.2)
    img.adjust_contrast(0.6)
    step = mp.gpuimage(host)
    step.gaussian(1.2)
    np.asarray(step)
    step.adjust_contrast(0.6)
    np.testing.assert_array_equal(np.asarray(img), np.asarray(step))
