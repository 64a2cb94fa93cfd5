"""``Generator.batches`` of the torchvision-parity ops of issue 31 (vflip, invert, solarize,
posterize, adjust_brightness, grayscale, channel_shuffle, center_crop, random_crop, rotate
with expand): recorded for whole batches from their definitions (``batch_ops.record_step``),
each sample equal to the Generator's own output (``next()``), converted the same way."""

from __future__ import annotations

import numpy as np
import pytest
from generator_reference import assert_device_same, batch_spec, eager_outputs
from tiers import simulator

import millipyde as mp
from millipyde.training import batch_arena, batches
from millipyde.training.batches import convert_reference

pytestmark = pytest.mark.cudasim_ok


def _imgs(seed, shapes):
    rng = np.random.default_rng(seed)
    return [mp.gpuimage(rng.integers(0, 256, s, dtype=np.uint8)) for s in shapes]


def _same(got, ref, k, levels=1):
    if mp.backend() not in ("cuda", "hip"):
        assert np.array_equal(got, ref), f"output {k} differs"
    else:  # uint8 levels on real GPUs (README "Guarantees"), as test_generator_batches_ops
        assert np.abs(got.astype(np.float64) - ref).max() <= levels / 255 + 1e-6, k


def _check(imgs, ops, outputs, size, route, seed=5, levels=1, **kw):
    want = eager_outputs(imgs, ops, outputs, seed)
    spec = batch_spec(size, **kw)
    gen = mp.Generator(imgs, ops, outputs=outputs, seed=seed)
    with gen.batches(size, **kw) as bs:
        got = [np.asarray(b) for b in bs]
    st = gen._state
    taken = ("template" if batches.recorder(st) is not None else
             "arena" if batches.arena_recorder(st) is not None else "per-output")
    assert taken == route, taken
    k = 0
    for arr in got:
        for i in range(arr.shape[0]):
            _same(arr[i], convert_reference(want[k], spec), k, levels)
            k += 1
    assert k == outputs
    # next() gives the same outputs as the eager per-output reference
    gen = mp.Generator(imgs, ops, outputs=outputs, seed=seed)
    for k, out in enumerate(gen):
        assert_device_same(out, want[k], f"next() output {k}", levels)


SAME = ((16, 16, 3), (16, 16, 3))
MIXED = ((20, 26, 3), (24, 18, 3), (17, 17, 3))

OPS = {
    "values": [mp.Operation("vflip", p=0.5), mp.Operation("invert", p=0.5),
               mp.Operation("random_solarize", 128), mp.Operation("random_posterize", 3),
               mp.Operation("random_adjust_brightness", 0.6, 1.4, p=0.7),
               mp.Operation("random_invert", p=0.3)],
    "colour": [mp.Operation("random_grayscale", 0.5), mp.Operation("channel_shuffle", p=0.8),
               mp.Operation("adjust_brightness", 1.3)],
    "crops": [mp.Operation("center_crop", 14, 15), mp.Operation("random_crop", 11, 12),
              mp.Operation("random_invert"), mp.Operation("random_vflip")],
    "padded": [mp.Operation("random_crop", 12, 12, padding=2, fill=40),
               mp.Operation("invert", p=0.5)],
    "edge": [mp.Operation("random_crop", 18, 18, pad_if_needed=True, padding_mode="edge"),
             mp.Operation("solarize", 100, p=0.5)],
    "rotate": [mp.Operation("random_rotate", -40, 40, expand=True),
               mp.Operation("random_invert")],
}
#: the recorder each chain takes on same-size inputs
ROUTE = {"values": "template", "colour": "arena", "crops": "arena", "padded": "arena",
         "edge": "arena", "rotate": "arena"}
SHAPE = {"crops": None, "padded": None, "edge": None, "rotate": (13, 13)}


@pytest.mark.parametrize("name", sorted(OPS))
def test_same_size_batches_equal_outputs(name):
    _check(_imgs(1, SAME), OPS[name], 8, 4, ROUTE[name], shape=SHAPE.get(name))


@pytest.mark.parametrize("name", ["values", "colour", "crops", "padded"])
def test_mixed_size_batches_are_arena_gathers(name):
    # (next() over mixed sizes runs several worker threads: under the CUDA simulator their
    # launches take turns, backend.sim)
    _check(_imgs(2, MIXED), OPS[name], 9, 3, "arena",
           shape=None if name in ("crops", "padded") else (12, 12))


def test_grayscale_one_channel_batches():
    # a grey stage (a pixel kernel, not a template form, which the arena gather does not
    # take) makes its batches per output, replicated to three channels
    imgs = _imgs(3, SAME)
    ops = [mp.Operation("vflip", p=0.5), mp.Operation("grayscale", 1),
           mp.Operation("invert", p=0.5)]
    _check(imgs, ops, 6, 3, "per-output")


def test_value_chain_is_one_launch_per_batch(monkeypatch):
    from test_generator_batches_ops import _one_batch

    imgs = _imgs(4, MIXED)
    ops = OPS["values"] + OPS["colour"] + [mp.Operation("center_crop", 14, 15)]
    _, calls, n, launches = _one_batch(imgs, ops, 6, monkeypatch)
    assert len(launches) == 1 and n == 1, calls


def test_arena_takes_the_new_ops():
    gen = mp.Generator(_imgs(5, MIXED), OPS["values"] + OPS["colour"] + OPS["crops"],
                       outputs=4, seed=0)
    assert batch_arena.make(gen._state) is not None


def test_pad_fill_through_a_gated_off_table_op():
    # a batch of outputs whose coins differ on an elementwise op after a pad: each member's
    # fill goes through its own table (the ops that ran), not its batch template's
    imgs = _imgs(6, SAME)
    ops = [mp.Operation("pad", 2, 2, 2, 2, 40), mp.Operation("adjust_gamma", 2.0, p=0.5)]
    want = eager_outputs(imgs, ops, 8, 5)
    assert {int(w[0, 0, 0]) for w in want} == {40, 6}  # both coins
    gen = mp.Generator(imgs, ops, outputs=8, seed=5)
    for k, out in enumerate(gen):
        assert np.array_equal(np.asarray(out), want[k]), f"output {k}"


# (its subprocess runs the cpu backend whichever part of ``make test`` starts it: under the
# simulator it repeated the cpu part's run, 10 CPU-s and 40 s of a worker)
@pytest.mark.skipif(simulator(), reason="the subprocess runs the cpu backend: the cpu part "
                                        "runs this test")
def test_the_same_batches_on_any_device_count(tmp_path):
    # three virtual devices making the batches between them, or one making them all: the
    # same samples (every draw is a function of (seed, sample, operation))
    from multidevice import run_with_devices

    got = run_with_devices("""
        import json
        import numpy as np
        import millipyde as mp
        import millipyde.transforms as T
        rng = np.random.default_rng(0)
        imgs = [mp.gpuimage(rng.integers(0, 256, (10, 12, 3), dtype=np.uint8))
                for _ in range(3)]
        ops = [T.RandomCrop(8, padding=2), T.RandomVerticalFlip(),
               mp.OneOf([mp.Operation("invert"), mp.Operation("random_solarize", 100)]),
               T.ColorJitter(0.3, saturation=0.3), mp.Operation("channel_shuffle")]
        with mp.Generator(imgs, ops, outputs=24, seed=4).batches(4) as bs:
            every = [(b.device, np.asarray(b)) for b in bs]
        with mp.Generator(imgs, ops, outputs=24, seed=4, device=0).batches(4) as bs:
            one = [np.asarray(b) for b in bs]
        print(json.dumps({"devices": sorted({d for d, _ in every}),
                          "equal": all(np.array_equal(a, b) for (_, a), b
                                       in zip(every, one, strict=True))}))
    """, 3, tmp_path)
    assert got["devices"] == [0, 1, 2] and got["equal"]
