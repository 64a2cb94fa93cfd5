"""Batches recorded at once (``batch_record``): equal to per-output outputs, few kernels."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from generator_reference import eager_outputs

import millipyde as mp
from millipyde.graph.exec import batch
from millipyde.kernels import REGISTRY
from millipyde.training import batch_math, batch_record, batches, precompile, template_share
from millipyde.training.batches import BatchSpec, convert_reference

cudasim_ok = pytest.mark.cudasim_ok
_MADE = batches.Batches._made


def _fig51(gauss=(0.0, 1.0)):
    return [
        mp.Operation("transpose", probability=0.2),
        mp.Operation("fliplr", probability=0.2),
        mp.Operation("random_brightness", -0.2, 1),
        mp.Operation("random_gaussian", *gauss),
        mp.Operation("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5], probability=0.3),
        mp.Operation("rgb2grey", probability=0.3),
        mp.Operation("random_rotate", 0, 120, probability=0.5),
    ]


def _images(h, w, n=3, low=0):
    """Random RGB inputs; ``low`` > 0: minima above 0, so warp clips can bind."""
    rng = np.random.default_rng(7)
    return [mp.gpuimage(rng.integers(low, 256, (h, w, 3), dtype=np.uint8)) for _ in range(n)]


def _run(imgs, ops, outputs, size, monkeypatch, seed=3, **kw):
    """Batches as arrays, and how many outputs went through the per-output path."""
    per_output = []

    def counting(self, ks, device, stream):
        per_output.extend(ks)
        return _MADE(self, ks, device, stream)

    monkeypatch.setattr(batches.Batches, "_made", counting)
    # on GPUs batches() first compiles ahead by making one output per pattern through
    # Batches too: those are not this Generator's outputs
    monkeypatch.setattr(precompile, "ENABLED", False)
    gen = mp.Generator(imgs, ops, outputs=outputs, seed=seed)
    with gen.batches(size, **kw) as bs:
        got = [np.asarray(b) for b in bs]
    return np.concatenate(got), per_output, gen


def _reference(imgs, ops, outputs, seed=3, **kw):
    spec = BatchSpec.check(1, kw.get("shape"), kw.get("layout", "NCHW"), "float32",
                           kw.get("mean"), kw.get("std"), 3, False, False)
    return np.stack([convert_reference(o, spec) for o in eager_outputs(imgs, ops, outputs, seed)])


@cudasim_ok
def test_recorded_batches_equal_per_output(monkeypatch) -> None:
    small = mp.backend() == "cudasim"
    imgs = _images(*((6, 6) if small else (24, 24)), low=40)
    n = 12 if small else 48
    ops = _fig51((0.0, 0.6) if small else (0.0, 1.0))
    got, per_output, _ = _run(imgs, ops, n, 6 if small else 16, monkeypatch,
                              mean=[0.4, 0.5, 0.6], std=0.3)
    want = _reference(imgs, ops, n, mean=[0.4, 0.5, 0.6], std=0.3)
    assert got.shape == want.shape
    for k in range(n):
        assert np.array_equal(got[k], want[k]), f"output {k}"
    # the batches were recorded at once, outputs whose rotation needs scikit-image's
    # data-dependent clip included (their bounds measured on the device)
    assert per_output == [] and _clipped(imgs, ops, n)


def _clipped(imgs, ops, n, seed=3, j=-1):
    """Outputs whose rotation (op ``j``, on a square image) runs and needs the warp clip."""
    rules = batch_record.rules_for(imgs, ops)
    coins, params = batch_record.draw(rules, seed, np.arange(n))
    h, w = imgs[0].shape[:2]
    maps = batch_math.sampler_maps(REGISTRY["rotate"], h, w, params[j])
    return np.flatnonzero(coins[:, j] & batch_math.warp_clips(maps, (h, w), (h, w))).tolist()


def test_recorded_equals_per_output_batches(monkeypatch) -> None:
    imgs = _images(20, 20)
    ops = _fig51()
    fast, per_fast, _ = _run(imgs, ops, 40, 20, monkeypatch, layout="NHWC")
    monkeypatch.setattr(batches, "RECORD_AT_ONCE", False)
    slow, per_slow, _ = _run(imgs, ops, 40, 20, monkeypatch, layout="NHWC")
    assert len(per_slow) == 40 and per_fast == [] and _clipped(imgs, ops, 40)
    assert np.array_equal(fast, slow)


def _fig51_patterns(outputs: int, seed: int = 3) -> set[bytes]:
    """The coin patterns of the first ``outputs`` outputs of ``_fig51()`` on 16x16 inputs."""
    rules = batch_record.rules_for(_images(16, 16), _fig51())
    coins, params = batch_record.draw(rules, seed, np.arange(outputs))
    return {p.tobytes() for p in batch_record.patterns(rules, coins, params)}


def _assert_templates_per_pattern(keys: list[tuple[int, bytes, int]], pats: set[bytes]) -> None:
    """A recorder's template keys (device, pattern, variant): one template per pattern, and
    one more per pattern whose outputs disagree on the warp clip (the clip splits the plan).

    Templates are per device (each is recorded there, ``Recorder.template``): a Generator
    batching on several devices records a pattern once on each device whose batches meet it
    (the first batch of each device also records those of the batches ahead), so the count
    holds per device, and the devices' patterns together are the outputs' patterns.
    """
    firsts: dict[int, set[bytes]] = defaultdict(set)
    others: dict[int, set[bytes]] = defaultdict(set)
    for device, pattern, variant in keys:
        (others if variant else firsts)[device].add(pattern)
    assert set().union(*firsts.values()) == pats and len(pats) < 64
    for device in others:
        assert others[device] <= firsts[device], device


def test_templates_per_pattern_not_per_output(monkeypatch) -> None:
    _, _, gen = _run(_images(16, 16), _fig51(), 64, 32, monkeypatch)
    rec = gen._state.recorder
    assert isinstance(rec, batch_record.Recorder)
    _assert_templates_per_pattern(list(rec.templates), _fig51_patterns(64))


TWO_DEVICES = """
import json
import numpy as np
import millipyde as mp
import test_batch_record as t
gen = mp.Generator(t._images(16, 16), t._fig51(), outputs=64, seed=3)
with gen.batches(8) as bs:
    n = sum(len(np.asarray(b)) for b in bs)
keys = [[d, p.hex(), v] for d, p, v in gen._state.recorder.templates]
print(json.dumps({"outputs": n, "keys": keys}))
"""


def test_templates_per_pattern_on_each_device(tmp_path) -> None:
    # the check above over two devices (two H200s: 36 first templates, 19 of the device that
    # made the first batch, all 64 outputs' patterns recorded ahead, and 17 of the other's
    # batch of outputs 32-63; one template per pattern holds on each device)
    from multidevice import run_with_devices

    got = run_with_devices(TWO_DEVICES, 2, tmp_path)
    keys = [(d, bytes.fromhex(p), v) for d, p, v in got["keys"]]
    assert got["outputs"] == 64 and {d for d, _, _ in keys} == {0, 1}  # both made batches
    _assert_templates_per_pattern(keys, _fig51_patterns(64))


def test_one_gather_kernel_per_chain_whatever_the_gates(monkeypatch) -> None:
    # four probability gates, every one with an identity form: 16 coin patterns share the
    # chain's kernels (a gated and an ungated variant at most)
    ops = [mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_brightness", -0.2, 0.2, probability=0.5),
           mp.Operation("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5], probability=0.5),
           mp.Operation("random_rotate", 10, 80, probability=0.5)]
    batch.gather_fn.cache_clear()
    _, per_output, gen = _run(_images(12, 12), ops, 96, 32, monkeypatch)
    assert len(gen._state.recorder.templates) >= 12  # most of the 16 patterns were seen
    assert batch.gather_fn.cache_info().currsize <= 2


def test_callables_fall_back_per_output(monkeypatch) -> None:
    # (a callable recording one node is replayed in the batch: ``generator_callables``; one
    # that records two keeps the per-output path, output by output)
    def double_flip(img):
        img.fliplr()
        img.fliplr()

    ops = [mp.Operation(double_flip), mp.Operation("random_brightness", -0.2, 0.2)]
    imgs = _images(8, 8)
    got, per_output, gen = _run(imgs, ops, 6, 3, monkeypatch)
    assert not isinstance(gen._state.recorder, batch_record.Recorder) and len(per_output) == 6
    assert np.array_equal(got, _reference(imgs, ops, 6))


def test_vectorised_host_math_equals_scalar() -> None:
    from millipyde.graph.plan.schedule import affine3, needs_warp_clip
    from millipyde.kernels import REGISTRY
    from millipyde.ops.filters.gaussian import gaussian_taps as gaussian

    rng = np.random.default_rng(3)
    sig = np.concatenate([rng.uniform(0, 2, 500), [1e-3, 0.0624, 0.0625, 0.5, 1.99]])
    for reach in (None, 511, 5, 0):
        taps, radius = batch_math.gaussian_taps(sig, reach)
        for i, s in enumerate(sig):
            want = gaussian(s, reach)
            assert radius[i] == len(want) // 2
            assert taps[i, :len(want)].tolist() == want.tolist(), (s, reach)
            assert not taps[i, len(want):].any()
    spec = REGISTRY["rotate"]
    angles = np.concatenate([rng.uniform(0, 120, 500), [0.0, 0.05, 90.0, 180.0, -30.0]])
    for h, w in ((512, 512), (16, 24)):
        maps = batch_math.sampler_maps(spec, h, w, angles[:, None])
        clips = batch_math.warp_clips(maps, (h, w), (h, w))
        for m, a in enumerate(angles.tolist()):
            want = affine3(spec, h, w, (a,))
            assert maps[m].tolist() == want[:2].ravel().tolist(), a
            assert clips[m] == needs_warp_clip(want, (h, w), (h, w)), a


@cudasim_ok
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_fused_writer_equals_separate_pass(layout, monkeypatch) -> None:
    small = mp.backend() == "cudasim"
    imgs = _images(*((5, 5) if small else (16, 16)))
    ops = _fig51((0.0, 0.5))
    n = 8 if small else 32
    kw = dict(layout=layout, mean=[0.3, 0.2, 0.1], std=[0.5, 0.25, 2.0])
    fused, _, _ = _run(imgs, ops, n, n // 2, monkeypatch, **kw)
    monkeypatch.setattr(batches, "FUSE", False)
    separate, _, _ = _run(imgs, ops, n, n // 2, monkeypatch, **kw)
    assert np.array_equal(fused, separate)
    assert np.array_equal(fused, _reference(imgs, ops, n, **kw))


def test_index_maps_after_the_sampler(monkeypatch) -> None:
    # maps after a sampler compose into its matrix (Gather.add): per member, exactly
    ops = [mp.Operation("random_rotate", 40, 140), mp.Operation("fliplr", probability=0.5),
           mp.Operation("transpose", probability=0.5),
           mp.Operation("random_brightness", -0.1, 0.1)]
    imgs = _images(10, 10, low=30)
    got, per_output, _ = _run(imgs, ops, 24, 12, monkeypatch)
    assert np.array_equal(got, _reference(imgs, ops, 24))
    # rotations that need the warp clip read the stacked inputs: batched as well
    assert per_output == [] and _clipped(imgs, ops, 24, j=0)


def test_next_uses_recorded_batches_with_the_same_values(monkeypatch) -> None:
    ops = _fig51()
    imgs = _images(12, 12)
    fast = [np.asarray(o) for o in mp.Generator(imgs, ops, outputs=20, seed=4)]
    monkeypatch.setattr(batches, "RECORD_AT_ONCE", False)
    slow = [np.asarray(o) for o in mp.Generator(imgs, ops, outputs=20, seed=4)]
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(fast, slow,
                                                                             strict=True))


def test_next_reports_a_recording_error() -> None:
    from millipyde.pipeline import PipelineError

    rng = np.random.default_rng(0)
    greys = [mp.gpuimage(rng.random((6, 6))) for _ in range(2)]
    ops = [mp.Operation("random_colorize", [1, 2], [1, 2], [1, 2], probability=0.5)]
    gen = mp.Generator(greys, ops, outputs=8, seed=0)
    with pytest.raises(PipelineError, match=r"operation 0 \('random_colorize'\)"):
        list(gen)


def test_first_batch_records_the_templates_of_the_batches_ahead(monkeypatch) -> None:
    # Generator.batches: every pattern (and warp-clip variant) of the next AHEAD_BATCHES
    # batches is planned on the first one, later batches within them plan none (no ~1 ms
    # template mid-stream); without ``ahead`` (per-output Generators) only the batch's own
    # patterns are recorded
    gen = mp.Generator(_images(16, 16, low=1), _fig51(), seed=3)
    st = gen._state
    rec = batches.recorder(st)
    stacks = st.stacks_on(0, None)
    size = 32
    calls = []
    plain = batch_record.record_template
    monkeypatch.setattr(batch_record, "record_template",
                        lambda *a, **k: calls.append(a[2]) or plain(*a, **k))
    rec.groups(list(range(size)), 0, stacks, ahead=True)
    assert len(calls) >= 12  # most of the chain's patterns seen ahead
    assert max(calls) >= size  # some from outputs of later batches
    first = len(calls)
    for b in range(1, rec.AHEAD_BATCHES):
        groups, left = rec.groups(list(range(b * size, (b + 1) * size)), 0, stacks,
                                  ahead=True)
        assert sum(len(g.index) for g in groups) + len(left) == size
    assert len(calls) == first
    gen.close()
    template_share.clear()  # (else the next Generator finds these templates recorded)
    gen = mp.Generator(_images(16, 16, low=1), _fig51(), seed=3)
    st = gen._state
    rec = batches.recorder(st)
    calls.clear()
    rec.groups(list(range(size)), 0, st.stacks_on(0, None))
    assert 0 < len(calls) < first and max(calls) < size
    gen.close()


def test_fixed_rules_coins_are_the_streams_without_reading_them() -> None:
    """Rules with no coin and nothing drawn (a Pipeline of fixed ops) give all-run coins with
    no draw: the coins the streams give them where another rule makes ``draw`` read them."""
    fixed = batch_record._Rule(None, None, False)
    ranged = batch_record._Rule(0.5, ((0.0, 3.0),), False)
    ks = np.arange(5, 69, dtype=np.int64)
    coins, params = batch_record.draw([fixed, fixed], 11, ks)
    assert coins.shape == (64, 2) and coins.all() and params == [None, None]
    drawn, _ = batch_record.draw([fixed, ranged, fixed], 11, ks)
    assert (drawn[:, [0, 2]] == coins).all() and not drawn[:, 1].all()
