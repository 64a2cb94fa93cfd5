"""``jpeg`` / ``random_jpeg``: the device's JPEG round trip against its NumPy / SciPy
transcription (``tests/reference_jpeg.py``, bit for bit), against Pillow's encoder and decoder
within a measured tolerance, its quantisation tables against the ones Pillow writes, its
kernel and launch counts, its random form's draws, batches and argument errors."""

from __future__ import annotations

import io

import numpy as np
import pytest
import reference_aug as tv
import reference_jpeg as rj
from reference import on_gpu

import millipyde as mp
from millipyde import random as mprandom
from millipyde.ops import FORMS
from millipyde.ops.base import kind_for
from millipyde.ops.filters.jpeg import quality_tables
from millipyde.training import batch_ops

Image = pytest.importorskip("PIL.Image")



def _img(photo: str, kind: str, h: int, w: int) -> np.ndarray:
    rgb = tv.photo(photo, "rgb", h, w)
    if kind == "grey":  # uint8 grey (tv.photo's grey is float)
        return np.ascontiguousarray(rgb[..., 1])
    if kind == "rgba":
        alpha = np.arange(rgb.shape[0] * rgb.shape[1], dtype=np.uint8).reshape(rgb.shape[:2])
        return np.ascontiguousarray(np.dstack([rgb, alpha]))
    return rgb


def _pillow(img: np.ndarray, quality: int) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    return np.asarray(Image.open(buf))


# (h, w): odd sizes exercise the padding to blocks and the chroma edges; under the simulator
# one small image per kind (a Python thread per coefficient, 64 products each)
CASES = [("astronaut", "rgb", 9, 10, 75), ("coffee", "rgba", 9, 14, 20),
         ("chelsea", "grey", 11, 6, 90), ("astronaut", "rgb", 1, 1, 50),
         ("chelsea", "rgb", 2, 9, 5)]


@pytest.mark.cudasim_ok
@pytest.mark.parametrize(("photo", "kind", "h", "w", "quality"), CASES,
                         ids=[f"{c[1]}-{c[2]}x{c[3]}-q{c[4]}" for c in CASES])
def test_jpeg_is_its_float_transcription_bit_for_bit(photo, kind, h, w, quality):
    # the same integer colour steps, and a float DCT whose sums differ only in order from
    # SciPy's: no coefficient of these images lands within rounding of a quantisation
    # boundary, nor a sample of a rounding one
    img = _img(photo, kind, h, w)
    out = on_gpu(img, "jpeg", quality)
    assert out.dtype == np.uint8 and out.shape == img.shape
    want = rj.jpeg(img, quality)
    assert np.array_equal(out, want), np.abs(out.astype(int) - want).max()
    if kind == "rgba":
        assert np.array_equal(out[..., 3], img[..., 3])


def test_the_transcription_changes_the_image_as_a_jpeg_does():
    # not an identity: at quality 10 blocks flatten, at 95 little changes
    img = _img("astronaut", "rgb", 32, 32)
    err = {q: np.abs(rj.jpeg(img, q).astype(int) - img).mean() for q in (10, 95)}
    assert err[10] > 3 * err[95] > 0


@pytest.mark.parametrize("quality", [1, 10, 25, 50, 75, 90, 100])
def test_quality_tables_are_the_ones_pillow_writes(quality):
    # libjpeg's jpeg_set_quality (IJG tables scaled, baseline-clipped), read back from the file
    img = _img("coffee", "rgb", 16, 16)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    tables = Image.open(buf).quantization
    assert np.array_equal(np.array([tables[0], tables[1]], dtype=np.float64),
                          quality_tables(quality))
    assert np.array_equal(rj.tables(quality), quality_tables(quality))


# Pillow (libjpeg-turbo 3.x) against the device's round trip, measured on these crops
# (2026-11-28): mean |difference| <= 0.77 levels and PSNR >= 46.6 dB at qualities 10..95, the
# largest single difference 11 (64 x 80, quality 10). libjpeg's DCTs are integer ones (its
# islow forward and inverse transforms, scaled 13-bit fixed point): a coefficient whose float
# value lies within their error of a quantisation boundary rounds to the neighbouring level,
# which moves its whole 8x8 block (16x16 for chroma) by up to its step times the basis, hence
# the rare large values beside a small mean. The bounds leave ~2 dB and 30% of headroom.
PILLOW = [(p, k, s, q) for p in tv.PHOTOS for k in ("rgb", "grey") for s in ((17, 23), (64, 80))
          for q in (10, 50, 75, 95)]


@pytest.mark.parametrize(("photo", "kind", "hw", "quality"), PILLOW,
                         ids=[f"{p}-{k}-{s[0]}x{s[1]}-q{q}" for p, k, s, q in PILLOW])
def test_jpeg_is_pillows_round_trip_within_its_integer_dct(photo, kind, hw, quality):
    if mp.backend() not in ("cpu", "cuda", "hip"):
        pytest.skip("the values are the transcription's (checked bit for bit above)")
    img = _img(photo, kind, *hw)
    out = on_gpu(img, "jpeg", quality).astype(np.float64)
    ref = _pillow(img, quality).astype(np.float64)
    d = np.abs(out - ref)
    psnr = 10 * np.log10(255.0 ** 2 / max((d ** 2).mean(), 1e-12))
    assert psnr >= 44.0 and d.mean() <= 1.0 and d.max() <= 16, (psnr, d.mean(), d.max())


@pytest.mark.cudasim_ok
def test_one_stencil_of_four_launches_with_tables_fused_around_it():
    # uint8 elementwise ops before and after join the codec's first and last pass as tables
    # (invert: its table is 255 - v exactly, so the reference needs no kernel of its own)
    img = _img("coffee", "rgb", 9, 11)
    g = mp.gpuimage(img)
    g.invert()
    g.jpeg(60)
    g.invert()
    plan = g.explain()
    assert [k.kind for k in plan.kernels] == ["stencil"], str(plan)
    assert plan.kernels[0].launches == 4
    assert np.array_equal(np.asarray(g), 255 - rj.jpeg(255 - img, 60))


def test_random_jpeg_draws_each_quality_alike():
    # torch.randint(lo, hi + 1): 10k draws, each of the 7 qualities within 5 sigma of 1/7
    form = FORMS["random_jpeg"]
    kind = kind_for(3, np.uint8)
    n = 10_000
    emits = form.emits(form.parse(kind, (30, 36)), batch_ops.Ctx(3, np.arange(n), 1),
                       np.tile([8, 8], (n, 1)), kind)
    q = emits[0].params[:, 0]
    assert set(np.unique(q)) == set(range(30, 37))
    counts = np.bincount(q.astype(int) - 30)
    sigma = np.sqrt(n * (1 / 7) * (6 / 7))
    assert np.abs(counts - n / 7).max() < 5 * sigma
    one = form.emits(form.parse(kind, 40), batch_ops.Ctx(3, np.arange(5), 1),
                     np.tile([8, 8], (5, 1)), kind)
    assert (one[0].params[:, 0] == 40).all()


@pytest.mark.cudasim_ok
def test_random_jpeg_is_jpeg_at_its_drawn_quality():
    img = _img("chelsea", "rgb", 8, 9)
    mp.seed(7)
    g = mp.gpuimage(img)
    key = mprandom.StreamKey(mprandom.global_seed(), g._sample, g._opcount)
    g.random_jpeg((5, 95))
    q = min(5 + int(np.floor(mprandom.uniform01(key.seed, key.sample, key.op, 0) * 91)), 95)
    assert np.array_equal(np.asarray(g), rj.jpeg(img, q))


@pytest.mark.cudasim_ok
def test_generator_batches_equal_its_outputs():
    # the codec passes run per output in a batch, equal to next()'s outputs
    from test_generator_batches_tv import _check, _imgs

    _check(_imgs(3, ((6, 7, 3), (6, 7, 3))), [mp.Operation("random_jpeg", (20, 80))],
           2, 2, "per-output")


def test_torchvision_jpeg_is_the_operation():
    # (the cpu backend only: the transform is the Operation whatever runs the kernels)
    import pickle

    import millipyde.distributed  # noqa: F401  (registers Operation pickling)
    import millipyde.transforms as T

    img = _img("coffee", "rgb", 6, 7)
    for t, op in ((T.JPEG(40), mp.Operation("jpeg", 40)),
                  (T.JPEG((20, 90)), mp.Operation("random_jpeg", (20, 90)))):
        assert isinstance(t, mp.Operation)
        assert repr(pickle.loads(pickle.dumps(t))) == repr(t)
        for k in range(2):
            a, b = mp.gpuimage(img), mp.gpuimage(img)
            t.apply(a, 11, k, 2)
            op.apply(b, 11, k, 2)
            assert np.array_equal(np.asarray(a), np.asarray(b)), (t, k)


BAD = [("jpeg", (0,), "quality"), ("jpeg", (101,), "quality"), ("jpeg", (7.5,), "quality"),
       ("random_jpeg", ((90, 80),), "min <= max"), ("random_jpeg", ((1, 2, 3),), "quality"),
       ("random_jpeg", ((0, 50),), r"quality\[0\]")]


@pytest.mark.parametrize(("method", "args", "name"), BAD,
                         ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_arguments_raise_naming_them(method, args, name):
    g = mp.gpuimage(_img("chelsea", "rgb", 5, 6))
    with pytest.raises(ValueError, match=name):
        getattr(g, method)(*args)
    grey = mp.gpuimage(_img("chelsea", "rgb", 5, 6))
    grey.rgb2gray()  # float64 grey
    with pytest.raises(ValueError, match="uint8"):
        grey.jpeg(50)
