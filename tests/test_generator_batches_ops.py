"""``Generator.batches`` of the issue-15 ops and the ImageNet recipe, recorded as arena gathers
(``batch_arena``): samples equal the per-output Generator's outputs converted the same way,
bit for bit on cpu and cudasim (within one uint8 level on real GPUs: ``_assert_same``);
kernels and host syncs per batch counted."""

from __future__ import annotations

import numpy as np
import pytest
from generator_reference import batch_spec, eager_outputs
from tiers import cpu_backend, exhaustive_on_cpu, tiered

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.training import batch_arena, batches, recipes
from millipyde.training.batches import convert_reference

pytestmark = pytest.mark.cudasim_ok

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _mixed(seed=0, shapes=((20, 26, 3), (24, 18, 3), (17, 17, 3))):
    rng = np.random.default_rng(seed)
    return [mp.gpuimage(rng.integers(0, 256, s, dtype=np.uint8)) for s in shapes]


def _assert_same(got, ref, spec, k) -> None:
    """Bit for bit on cpu and cudasim. On a real GPU the arena gather and the per-image kernel
    are different kernels, and the compiler may fuse a multiply-add in one and not the other
    (README "Guarantees"): a uint8 value on a rounding tie may then land one level apart, so
    there a sample may differ by one uint8 level (scaled by ``std``) in a few values."""
    if mp.backend() not in ("cuda", "hip"):
        assert np.array_equal(got, ref), f"output {k} differs"
        return
    level = 1.0 / 255.0 / float(np.min(spec.std))
    rounding = 2 * float(np.finfo(got.dtype).eps) * max(1.0, float(np.abs(ref).max()))
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    assert diff.max() <= level + rounding, f"output {k} differs by {diff.max()}"
    assert (diff > 0).mean() < 0.01, f"output {k}: {(diff > 0).mean():.2%} of values differ"


def _check(imgs, ops, outputs, size, seed=5, arena=True, **kw):
    want = eager_outputs(imgs, ops, outputs, seed)
    spec = batch_spec(size, **kw)
    gen = mp.Generator(imgs, ops, outputs=outputs, seed=seed)
    with gen.batches(size, **kw) as bs:
        got = [np.asarray(b) for b in bs]
    assert (batches.arena_recorder(gen._state) is not None) == arena
    k = 0
    for arr in got:
        for i in range(arr.shape[0]):
            ref = convert_reference(want[k], spec)
            assert arr[i].shape == ref.shape
            _assert_same(arr[i], ref, spec, k)
            k += 1
    assert k == outputs
    return gen


def test_imagenet_recipe_mixed_sizes_equal_outputs() -> None:
    ops = recipes.operations("imagenet", size=12)
    _check(_mixed(), ops, 12, 6, mean=MEAN, std=STD)


def test_imagenet_recipe_nhwc_float16() -> None:
    ops = recipes.operations("imagenet", size=8)
    _check(_mixed(1), ops, 6, 3, layout="NHWC", dtype="float16")


@mp.pixelwise
def _swap(r, g, b, k):
    """A user pixelwise op: channels rotated, scaled by ``k``."""
    return g * k, b, r


def _squeeze_shape(h, w, f):
    return h - 3, w


@mp.index_map(shape=_squeeze_shape)
def _squeeze(row, col, height, width, f):
    """A user map: rows stretched by ``f``, columns mirrored."""
    return row * f, width - 1 - col


OPS = {
    "resize": [mp.Operation("resize", 9, 11, probability=0.5)],
    "crop": [mp.Operation("crop", 2, 3, 10, 9, probability=0.5)],
    "warp_affine": [mp.Operation("warp_affine", [[0.9, 0.1, 1.5], [-0.1, 0.95, 0.5]],
                                 probability=0.5)],
    "random_affine": [mp.Operation("random_affine", 20, (0.1, 0.1), (0.8, 1.2), 5,
                                   probability=0.5)],
    "random_resized_crop": [mp.Operation("random_resized_crop", 10, 8, probability=0.5)],
    "adjust_contrast": [mp.Operation("adjust_contrast", 1.5, probability=0.5)],
    "random_contrast": [mp.Operation("fliplr"),
                        mp.Operation("random_contrast", 0.5, 1.5, probability=0.5)],
    "saturation": [mp.Operation("adjust_saturation", 0.5, probability=0.5),
                   mp.Operation("random_saturation", 0.2, 1.8, probability=0.5)],
    "hue": [mp.Operation("adjust_hue", 0.2, probability=0.5),
            mp.Operation("random_hue", -0.3, 0.3, probability=0.5)],
    "noise": [mp.Operation("gaussian_noise", 0.1, probability=0.5),
              mp.Operation("random_gaussian_noise", 0.0, 0.2, probability=0.5)],
    "erase": [mp.Operation("erase", 2, 3, 5, 6, 40, probability=0.5),
              mp.Operation("random_erasing", probability=0.5)],
    "pad": [mp.Operation("pad", 1, 2, 3, 0, 17, probability=0.5),
            mp.Operation("random_brightness", -0.2, 0.2, probability=0.5)],
    "user": [mp.Operation(recipes.scale_brightness, (0.5, 1.5), probability=0.5),
             mp.Operation(_swap, 0.5, probability=0.5)],
    "user_map": [mp.Operation(_squeeze, (1.0, 1.2), probability=0.5),
                 mp.Operation("fliplr", probability=0.5)],
}


# (cpu backend, CI tier: per-pixel draws, a user index map and a pad through a gated table op)
@pytest.mark.parametrize("name", tiered(sorted(OPS), lambda name: not cpu_backend()
                                        or name in ("noise", "user_map", "pad")))
def test_new_op_alone_with_gates_equal_outputs(name) -> None:
    # same-size inputs (ops that keep the size leave mixed-size batches of mixed shapes)
    imgs = _mixed(2, ((16, 16, 3), (16, 16, 3)))
    _check(imgs, OPS[name], 8, 4, shape=(13, 13) if name in (
        "resize", "crop", "pad", "random_resized_crop", "user_map") else None)


@exhaustive_on_cpu
def test_grey_and_rgba_inputs_split_by_kind() -> None:
    rng = np.random.default_rng(4)
    imgs = [mp.gpuimage(rng.integers(0, 256, (14, 15), dtype=np.uint8)),
            mp.gpuimage(rng.integers(0, 256, (16, 12, 4), dtype=np.uint8)),
            mp.gpuimage(rng.integers(0, 256, (13, 13, 3), dtype=np.uint8))]
    ops = [mp.Operation("random_resized_crop", 9, 9), mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_contrast", 0.5, 1.5, probability=0.8),
           mp.Operation("random_hue", -0.1, 0.1, probability=0.8)]
    _check(imgs, ops, 6, 6)


def test_mixed_output_shapes_name_the_output() -> None:
    imgs = _mixed(3)
    gen = mp.Generator(imgs, [mp.Operation("fliplr", probability=0.5)], outputs=4, seed=0)
    with pytest.raises(ValueError, match=r"output 1 has shape"):
        with gen.batches(4) as bs:
            next(bs)


def test_unhandled_op_keeps_the_other_paths() -> None:
    imgs = _mixed(5, ((12, 12, 3),) * 2)
    ops = [mp.Operation("random_resized_crop", 8, 8), mp.Operation("gaussian", 1.0)]
    _check(imgs, ops, 4, 4, arena=False)


def test_two_statistics_in_one_gather(monkeypatch) -> None:
    # each statistic op its own reduction (the second measures the first's output), one gather
    imgs = _mixed(5, ((12, 12, 3),) * 2)
    two = [mp.Operation("adjust_contrast", 1.5), mp.Operation("random_contrast", 0.5, 1.5)]
    _check(imgs, two, 4, 4)
    _, calls, n, launches = _one_batch(imgs, two, 4, monkeypatch)
    assert len(launches) == 1 and n == 3, calls


class _Count:
    """Counts kernel launches and device-to-host copies of the active backend."""

    NAMES = ("launch_2d", "launch_grid", "launch_1d", "launch_blocks", "to_host",
             "synchronize")

    def __init__(self, monkeypatch) -> None:
        self.calls: dict[str, int] = dict.fromkeys(self.NAMES, 0)
        for name in self.NAMES:
            orig = getattr(runtime, name)

            def wrapped(*a, _orig=orig, _name=name, **kw):
                self.calls[_name] += 1
                return _orig(*a, **kw)

            monkeypatch.setattr(runtime, name, wrapped)

    @property
    def launches(self) -> int:
        return sum(self.calls[n] for n in self.NAMES[:4])


def _one_batch(imgs, ops, size, monkeypatch, **kw):
    gen = mp.Generator(imgs, ops, outputs=size, seed=3)
    bs = gen.batches(size, **kw)
    st = gen._state
    rec = batches.arena_recorder(st)
    assert rec is not None
    rec.arena(0)  # made once per Generator (and device), not per batch
    bs._make(0, 0, None)  # compiles outside the count
    count = _Count(monkeypatch)
    launches, left = rec.record(list(range(size)))
    assert left == []
    value, _ = bs._make(0, 0, None)
    calls = dict(count.calls)
    monkeypatch.undo()
    bs.close()
    return np.asarray(value), calls, count.launches, launches


def test_recipe_kernels_counted(monkeypatch) -> None:
    imgs = _mixed(6)
    ops = recipes.operations("imagenet", size=8)
    no_contrast = [op for op in ops if op.method != "random_contrast"]
    _, calls, n, launches = _one_batch(imgs, no_contrast, 8, monkeypatch, mean=MEAN, std=STD)
    assert len(launches) == 1 and n == 1, calls  # one launch for three input sizes
    _, calls, n, launches = _one_batch(imgs, ops, 8, monkeypatch, mean=MEAN, std=STD)
    # the grey-mean reduction, then the gather (the cpu: the crop, flip and brightness as a
    # stage first, which the reduction and the gather read)
    stages = 0 if runtime.caps.grid_launches else 1
    assert len(launches) == 1 and len(launches[0].stages) == stages, launches
    assert n == 2 + stages, calls


def test_contrast_batch_has_no_host_sync(monkeypatch) -> None:
    imgs = _mixed(7)
    ops = recipes.operations("imagenet", size=8)
    _, calls, _, _ = _one_batch(imgs, ops, 8, monkeypatch)
    assert calls["to_host"] == 0 and calls["synchronize"] == 0, calls


def test_vectorised_windows_are_torchvisions() -> None:
    # the op definitions' windows for 400 members at once, against scalar transcriptions of
    # torchvision's get_params fed each member's own draws
    import reference_aug as tv

    from millipyde import random as mprandom
    from millipyde.ops.geometry.resized_crop import central_window, random_windows
    from millipyde.training import batch_ops

    ks = np.arange(400, dtype=np.int64)
    hw = np.array([[(7 + k) % 50 + 3, (11 * k) % 61 + 2] for k in ks.tolist()])
    c = batch_ops.Ctx(9, ks, 2)
    win, pending = random_windows(hw, (0.08, 1.0), (3 / 4, 4 / 3), c, erasing=False)
    for r in pending.tolist():
        win[r] = central_window(int(hw[r, 0]), int(hw[r, 1]), (3 / 4, 4 / 3))
    ewin, epending = random_windows(hw, (0.02, 0.33), (0.3, 3.3), c, erasing=True)
    found = np.ones(len(ks), dtype=bool)
    found[epending] = False
    for m, k in enumerate(ks.tolist()):
        draws = [mprandom.uniform01(9, k, 2, t) for t in range(40)]
        assert tuple(win[m]) == tv.crop_params(int(hw[m, 0]), int(hw[m, 1]), (0.08, 1.0),
                                               (3 / 4, 4 / 3), draws)
        e = tv.erasing_params(int(hw[m, 0]), int(hw[m, 1]), (0.02, 0.33), (0.3, 3.3), draws)
        assert found[m] == (e is not None)
        if e is not None:
            assert tuple(ewin[m]) == e


class _PythonDraws:
    """A Ctx's draws without its compiled ``first_fits`` (``ops.base.first_fits`` then runs
    the try in Python on each member's own draws)."""

    def __init__(self, c: object) -> None:
        self.c = c

    def member(self, i: int) -> object:
        return self.c.member(i)


@pytest.mark.parametrize("scale,ratio", [((0.08, 1.0), (3 / 4, 4 / 3)), ((0.5, 0.5), (1.0, 1.0)),
                                         ((0.0, 1e308), (5e-324, 1e308)),
                                         ((2.0, 50.0), (1e-5, 1e-5))])
def test_compiled_windows_are_the_python_windows(scale: tuple, ratio: tuple) -> None:
    # the one window try (``resized_crop.window_try``) compiled into ``Ctx.first_fits``' loop
    # against the same function run in Python per member, both kinds, empty and one-pixel
    # images and extreme ranges (overflowing ``exp``, no fit) included
    from millipyde.ops.geometry.resized_crop import random_windows
    from millipyde.training import batch_ops

    ks = np.arange(300, dtype=np.int64) * 7919
    hw = np.array([[(13 * k) % 97, (29 * k) % 89] for k in range(300)], dtype=np.int64)
    hw[:4] = [[0, 0], [0, 7], [1, 1], [1, 2]]
    for erasing in (False, True):
        got = random_windows(hw, scale, ratio, batch_ops.Ctx(4, ks, 1), erasing)
        want = random_windows(hw, scale, ratio, _PythonDraws(batch_ops.Ctx(4, ks, 1)), erasing)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
        assert got[0][:2].tolist() == [[0, 0, 0, 0]] * 2 and not {0, 1} & set(got[1].tolist())


def test_arena_recorder_refuses_callables() -> None:
    imgs = _mixed(8)
    gen = mp.Generator(imgs, [mp.Operation(lambda x: x.fliplr())], outputs=2, seed=0)
    assert batch_arena.make(gen._state) is None


def test_one_compiled_gather_per_chain_whatever_the_coins() -> None:
    # five coins per output (flip, four colour ops), 32 batches of 4: one gather and one
    # reduction compiled, both gated variants of every member's pattern
    batch_arena._gather_fn.cache_clear()
    batch_arena._stat_fn.cache_clear()
    imgs = _mixed(9)
    gen = mp.Generator(imgs, recipes.operations("imagenet", size=6), outputs=64, seed=1)
    with gen.batches(4) as bs:
        for _ in bs:
            pass
    from millipyde.graph.codegen.gather_sig import gather_ngates

    rec = batches.arena_recorder(gen._state)
    patterns = set()
    for b in range(16):
        for L in rec.record(list(range(4 * b, 4 * b + 4)))[0]:
            # (the cpu runs the crop and flip as a stage before the contrast: its gather
            # holds the sampler, the last one the colour ops' gates)
            head = L.stages[0] if L.stages else L
            flip = head.p[:, 6 + 4] < 0  # A's column term of x: mirrored where the flip ran
            gates = np.concatenate([st.p[:, -gather_ngates(st.sig):]
                                    for st in [*L.stages, L]], axis=1)
            patterns |= {(f, *row) for f, row in zip(flip.tolist(), gates.tolist(),
                                                     strict=True)}
    assert len(patterns) >= 8  # many gate patterns were made
    assert batch_arena._gather_fn.cache_info().currsize == (
        1 if runtime.caps.grid_launches else 2)  # (the cpu: the stage's and the last)
    assert batch_arena._stat_fn.cache_info().currsize == 1


def test_vectorised_draws_equal_the_scalar_streams() -> None:
    from millipyde import random as mprandom
    from millipyde.training import batch_ops

    ks = np.arange(-5, 300, dtype=np.int64)
    z1 = batch_ops.sample_round(7, ks)
    for j in (0, 3, 11):
        c = batch_ops.Ctx(7, ks, j, _z1=z1)
        for t in range(-1, 45):  # the block, then draws past it
            assert np.array_equal(c.u(t), [mprandom.uniform01(7, k, j, t) for k in ks.tolist()])
        rows = np.arange(0, len(ks), 7)
        assert np.array_equal(c.sub(rows).u(2), c.u(2)[rows])
        assert [int(v) for v in c.key64(-2)] == [mprandom.key64(7, k, j, -2)
                                                 for k in ks.tolist()]
        assert np.array_equal(c.coins(0.3), [mprandom.gate(7, k, j, 0.3) for k in ks.tolist()])
