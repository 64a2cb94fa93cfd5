"""millipyde.transforms: torchvision.transforms.v2's class names and arguments over the op
library: each class is the documented Operation, a Compose is a list of
them usable wherever operations are, ToDtype / Normalize become the batches' settings, and
classes not supported yet raise naming what they need."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from generator_reference import batch_spec, eager_outputs
from tiers import simulator, tiered

import millipyde as mp
import millipyde.transforms as T
from millipyde import random as mprandom
from millipyde.training import batches
from millipyde.training.batches import convert_reference

pytestmark = pytest.mark.cudasim_ok

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _img(seed=0, shape=(20, 24, 3)):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _quiet(make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return make()


# the transform, then the Operation it stands for (the same draws: the same stream index)
SAME = [
    (lambda: T.RandomResizedCrop(12, antialias=False),
     mp.Operation("random_resized_crop", 12, 12, (0.08, 1.0), (3 / 4, 4 / 3))),
    (lambda: T.RandomResizedCrop((10, 14), scale=(0.5, 1.0), antialias=False),
     mp.Operation("random_resized_crop", 10, 14, (0.5, 1.0), (3 / 4, 4 / 3))),
    (lambda: T.Resize((9, 11), antialias=False), mp.Operation("resize", 9, 11)),
    (lambda: T.Resize(10, antialias=False), mp.Operation("resize_shorter", 10)),
    (lambda: T.Resize((9, 11)), mp.Operation("resize", 9, 11, antialias=True)),
    (lambda: T.Resize(10, max_size=13), mp.Operation("resize_shorter", 10, 13, True)),
    (lambda: T.CenterCrop(8), mp.Operation("center_crop", 8, 8)),
    (lambda: T.CenterCrop((30, 6)), mp.Operation("center_crop", 30, 6)),
    (lambda: T.RandomCrop(16, padding=4, fill=3),
     mp.Operation("random_crop", 16, 16, 4, False, 3)),
    (lambda: T.RandomCrop((25, 20), pad_if_needed=True, padding_mode="edge"),
     mp.Operation("random_crop", 25, 20, None, True, 0, "edge")),
    (lambda: T.Pad((1, 2, 3, 4), fill=9), mp.Operation("pad", 2, 4, 1, 3, 9)),
    (lambda: T.RandomHorizontalFlip(0.5), mp.Operation("fliplr", p=0.5)),
    (lambda: T.RandomVerticalFlip(0.3), mp.Operation("vflip", p=0.3)),
    (lambda: T.RandomRotation(30, expand=True), mp.Operation("random_rotate", -30, 30, True)),
    (lambda: T.RandomAffine(20, (0.1, 0.2), (0.8, 1.2), 5),
     mp.Operation("random_affine", 20, (0.1, 0.2), (0.8, 1.2), 5)),
    (lambda: T.Grayscale(3), mp.Operation("grayscale", 3)),
    (lambda: T.RandomGrayscale(0.5), mp.Operation("random_grayscale", 0.5)),
    (lambda: T.RandomInvert(0.4), mp.Operation("random_invert", 0.4)),
    (lambda: T.RandomPosterize(3, 0.6), mp.Operation("random_posterize", 3, 0.6)),
    (lambda: T.RandomSolarize(100, 0.6), mp.Operation("random_solarize", 100, 0.6)),
    (lambda: T.RandomChannelPermutation(), mp.Operation("channel_shuffle")),
    (lambda: T.RandomErasing(0.7, value=(10, 20, 30)),
     mp.Operation("random_erasing", (0.02, 0.33), (0.3, 3.3), (10, 20, 30), p=0.7)),
]


# (a mapping of names and arguments: the CI tier checks it on the cpu backend; each op's
# simulated kernels are the kernel tests')
@pytest.mark.parametrize(("make", "op"), tiered(SAME, lambda case: not simulator(), several=True),
                         ids=[repr(o) for _, o in SAME])
def test_each_transform_is_its_operation(make, op):
    t = _quiet(make)
    assert isinstance(t, mp.Operation)
    img = _img(1)
    for k in range(4):
        a, b = mp.gpuimage(img), mp.gpuimage(img)
        t.apply(a, 11, k, 2)
        op.apply(b, 11, k, 2)
        assert np.array_equal(np.asarray(a), np.asarray(b)), (t, k)


def test_resize_int_sets_the_shorter_side_as_torchvision():
    for shape, want in (((20, 24, 3), (10, 12)), ((31, 17, 3), (18, 10)), ((9, 9, 3), (10, 10))):
        g = mp.gpuimage(_img(2, shape))
        _quiet(lambda: T.Resize(10))(g)
        assert g.shape[:2] == want, shape
    g = mp.gpuimage(_img(2, (10, 40, 3)))
    _quiet(lambda: T.Resize(8, max_size=20))(g)
    assert g.shape[:2] == (5, 20)  # int(20 * 8 / 32) = 5


def test_interpolation_and_antialias_differences_warn():
    with pytest.warns(UserWarning, match="antialias"):
        T.RandomResizedCrop(8)
    with pytest.warns(UserWarning, match="bilinearly"):
        T.RandomRotation(10)  # torchvision's default: nearest
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        T.RandomRotation(10, interpolation=T.InterpolationMode.BILINEAR)
        T.RandomResizedCrop(8, antialias=False)
        T.Resize(8, interpolation="bilinear", antialias=False)
        T.Resize(8)  # anti-aliased (scikit-image's prefilter): no warning
    with pytest.raises(ValueError, match="interpolation"):
        T.Resize(8, interpolation=T.InterpolationMode.BICUBIC, antialias=False)


def test_color_jitter_draws_torchvisions_ranges_in_a_random_order():
    cj = T.ColorJitter(brightness=0.4, contrast=(0.5, 1.5), saturation=0.2, hue=0.1)
    ops = cj.operations
    assert [o.method for o in ops] == ["random_adjust_brightness", "random_contrast",
                                       "random_saturation", "random_hue"]
    assert [o.args for o in ops] == [(0.6, 1.4), (0.5, 1.5), (0.8, 1.2), (-0.1, 0.1)]
    # every order equally likely over 2400 samples (100 expected each)
    ks = np.arange(2400)
    orders = cj.order(lambda t: mprandom.uniform01_array(3, ks, 5, t), len(ks))
    _, counts = np.unique(orders, axis=0, return_counts=True)
    assert len(counts) == 24 and counts.min() > 55 and counts.max() < 150, counts
    # each child's factor: uniform in its range, from its own stream
    from millipyde.compose import child_index

    b = 0.6 + 0.8 * mprandom.uniform01_array(3, ks, child_index(5, 0), 0)
    assert b.min() >= 0.6 and b.max() < 1.4 and abs(b.mean() - 1.0) < 0.02
    assert T.ColorJitter(brightness=0).operations[0].method == "adjust_brightness"
    with pytest.raises(ValueError, match="hue"):
        T.ColorJitter(hue=0.7)


def test_compose_is_a_list_callable_on_an_image():
    recipe = T.Compose([T.CenterCrop(10), [T.RandomVerticalFlip(1.0)], T.ToImage()])
    assert isinstance(recipe, list) and len(recipe) == 3
    img = _img(3)
    g = mp.gpuimage(img)
    assert recipe(g) is g
    want = img[5:15, 7:17][::-1]
    assert np.array_equal(np.asarray(g), want)
    with pytest.raises(ValueError, match="transforms\\[1\\]"):
        T.Compose([T.CenterCrop(4), "flip"])


def test_compose_in_a_generator_sets_the_batch_conversion():
    imgs = [mp.gpuimage(_img(s, (18, 22, 3))) for s in (4, 5)]
    body = [_quiet(lambda: T.RandomResizedCrop(12)), T.RandomHorizontalFlip(),
            T.ColorJitter(0.3, 0.0, 0.3, 0.05)]
    recipe = T.Compose([*body, T.ToImage(), T.ToDtype("torch.float16", scale=True),
                        T.Normalize(MEAN, STD)])
    gen = mp.Generator(imgs, recipe, outputs=6, seed=2)
    assert len(gen.operations) == 3  # the conversions are the batches' settings
    with gen.batches(3) as bs:
        got = np.concatenate([np.asarray(b) for b in bs])
    assert got.dtype == np.float16
    assert batches.arena_recorder(gen._state) is not None  # one gather: order as gates
    want = eager_outputs(imgs, body, 6, 2)
    spec = batch_spec(3, dtype="float16", mean=MEAN, std=STD)
    for k in range(6):
        ref = convert_reference(want[k], spec)
        tol = 0 if mp.backend() not in ("cuda", "hip") else 1 / 255 / min(STD) + 1e-3
        assert np.abs(got[k].astype(np.float64) - ref).max() <= tol, k


def test_random_erasing_after_normalize_erases_to_zero_in_the_batch():
    img = _img(6, (16, 16, 3))
    recipe = T.Compose([T.ToDtype("float32", scale=True), T.Normalize(MEAN, STD),
                        T.RandomErasing(p=1.0, scale=(0.2, 0.2), ratio=(1.0, 1.0))])
    gen = mp.Generator([mp.gpuimage(img)], recipe, outputs=2, seed=1)
    (erasing,) = gen.operations
    assert erasing.value == [124, 116, 104]  # round((mean + 0 * std) * 255)
    with gen.batches(2) as bs:
        b = np.asarray(next(iter(bs)))
    # the erased 7 x 7 window: within half a uint8 level (over std) of torchvision's 0
    near = np.abs(b[0]) <= 0.5 / 255 / min(STD) + 1e-6
    assert near.all(axis=0).sum() >= 49


def test_value_ops_after_the_conversion_are_refused():
    with pytest.raises(ValueError, match="move it before"):
        mp.Generator([mp.gpuimage(_img())], T.Compose([T.Normalize(MEAN, STD),
                                                       T.RandomInvert()]))
    # geometry is unit-free: allowed anywhere
    mp.Generator([mp.gpuimage(_img())], T.Compose([T.ToDtype("float32", scale=True),
                                                   T.RandomHorizontalFlip()]))


def test_containers():
    img = _img(7)
    always = T.RandomApply([T.RandomVerticalFlip(1.0), T.CenterCrop(8)], p=1.0)
    g = mp.gpuimage(img)
    always.apply(g, 0, 0, 0)
    assert np.array_equal(np.asarray(g), img[::-1][6:14, 8:16])
    never = T.RandomApply([T.RandomVerticalFlip(1.0)], p=0.0)
    g = mp.gpuimage(img)
    never.apply(g, 0, 0, 0)
    assert np.array_equal(np.asarray(g), img)
    choice = T.RandomChoice([T.Compose([T.RandomVerticalFlip(1.0), T.RandomInvert(1.0)]),
                             T.RandomHorizontalFlip(1.0)], p=[1, 0])
    g = mp.gpuimage(img)
    choice.apply(g, 0, 3, 0)
    assert np.array_equal(np.asarray(g), 255 - img[::-1])
    order = T.RandomOrder([T.RandomInvert(1.0), T.RandomPosterize(1, 1.0)])
    outs = set()
    for k in range(12):
        g = mp.gpuimage(img)
        order.apply(g, 0, k, 0)
        outs.add(np.asarray(g).tobytes())
    assert outs == {(255 - (img & 128)).tobytes(), ((255 - img) & 128).tobytes()}


def test_transforms_pickle_by_their_arguments():
    import millipyde.distributed  # noqa: F401  (registers Operation pickling)

    recipe = T.Compose([T.RandomCrop(8, padding=2), T.ColorJitter(0.2, hue=0.1),
                        T.RandomApply([T.RandomInvert()], p=0.3), T.Normalize(MEAN, STD)])
    back = pickle.loads(pickle.dumps(recipe))
    assert [repr(t) for t in back] == [repr(t) for t in recipe]


@pytest.mark.parametrize("name", sorted(T.NOT_SUPPORTED))
def test_classes_not_supported_yet_say_so(name):
    with pytest.raises(NotImplementedError, match=f"transforms.{name} is not supported yet"):
        getattr(T, name)()


BAD = [(lambda: T.ToDtype("float32"), "scale=True"), (lambda: T.ToDtype("uint8", True), "dtype"),
       (lambda: T.Normalize(MEAN, [0, 1, 1]), "std"), (lambda: T.Pad(2, padding_mode="edge"),
                                                        "padding_mode"),
       (lambda: T.RandomErasing(value="random"), "random"),
       (lambda: T.RandomAffine(10, center=(1, 1)), "center"),
       (lambda: T.CenterCrop((1, 2, 3)), "size"), (lambda: T.RandomInvert(1.5), "p"),
       (lambda: T.Compose(T.CenterCrop(3)), "list of transforms"),
       (lambda: T.Resize((8, 8), max_size=10, antialias=False), "max_size"),
       (lambda: T.JPEG(0), "quality"), (lambda: T.JPEG((50, 20)), "min <= max")]


@pytest.mark.parametrize(("make", "match"), BAD, ids=[b[1] for b in BAD])
def test_bad_arguments_raise_naming_them(make, match):
    with pytest.raises(ValueError, match=match):
        _quiet(make)
