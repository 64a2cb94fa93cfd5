"""A Generator with one callable Operation among recording methods (``generator_callables``):
the methods recorded as one batch, the callable per output, the per-output values bit for bit;
callables that read the value or record more fall back to the per-output path."""

import numpy as np
import pytest
from multidevice import assert_same, crops

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.pipeline import PipelineError
from millipyde.training import batches, generator_callables, recipes

SIM = runtime.simulated
N = 8 if SIM else 40


@pytest.fixture
def captured(monkeypatch):
    """Per recorded batch: (outputs, outputs left to the per-output path)."""
    seen = []
    groups = generator_callables.CallableRecorder.groups

    def spy(self, ks, *args, **kwargs):
        got = groups(self, ks, *args, **kwargs)
        # (a compiling-ahead twin, on a GPU, records its outputs with launches skipped
        # before the real ones: not a batch of the run)
        if not runtime.is_recording():
            seen.append((len(ks), len(got[1])))
        return got

    monkeypatch.setattr(generator_callables.CallableRecorder, "groups", spy)
    return seen


def _hosts(n=4):
    return crops(n, 6, 6) if SIM else crops(n, 10, 10)


def _outputs(monkeypatch, ops, recorded, n=N, size=None, seed=21, **kwargs):
    monkeypatch.setattr(batches, "RECORD_AT_ONCE", recorded)
    gen = mp.Generator([mp.gpuimage(h) for h in _hosts()], ops, outputs=n, seed=seed,
                       **kwargs)
    if size is not None:
        return np.concatenate([np.asarray(b) for b in gen.batches(size)])
    return [np.asarray(x) for x in gen]


@pytest.mark.parametrize("per", [None, pytest.param(4, marks=pytest.mark.cudasim_ok)])
def test_figure_5_1_recipe_equals_the_per_output_path(monkeypatch, captured, per):
    ops = recipes.figure_5_1_operations()
    want = _outputs(monkeypatch, ops, False, size=per)
    assert not captured
    got = _outputs(monkeypatch, ops, True, size=per)
    assert sum(n for n, _ in captured) == N and all(left == 0 for _, left in captured)
    if per is not None:
        assert_same(got, want)
        return
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert_same(a, b, err_msg=f"output {k}")


def _reads(img):
    if float(np.asarray(img).mean()) > 0:  # reads the value: the per-output path
        img.brightness(0.1)


def _two(img):
    img.brightness(0.05)
    img.adjust_gamma(1.2)


def _returns(img):
    out = img.clone()
    out.fliplr()
    return out


@pytest.mark.parametrize("fn", [_reads, _two, _returns])
def test_callables_the_capture_does_not_take_run_per_output(monkeypatch, captured, fn):
    ops = [mp.Operation("random_rotate", -20, 20), mp.Operation(fn, probability=0.5),
           mp.Operation("fliplr", probability=0.5)]
    want = _outputs(monkeypatch, ops, False)
    got = _outputs(monkeypatch, ops, True)
    assert captured and sum(left for _, left in captured) > 0
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert_same(a, b, err_msg=f"output {k}")


def _brightness_or_colorize(img):
    from millipyde import random as mprandom

    # two different ops across outputs: a batch takes the more frequent, the rest per output
    if mprandom.current_key().sample % 3 == 0:
        img.brightness(0.1)
    else:
        img.colorize(1.1, 0.9, 1.0)


def test_outputs_recording_another_op_than_the_batch_run_per_output(monkeypatch, captured):
    ops = [mp.Operation("transpose", probability=0.5), mp.Operation(_brightness_or_colorize),
           mp.Operation("random_rotate", -20, 20)]
    want = _outputs(monkeypatch, ops, False)
    got = _outputs(monkeypatch, ops, True)
    assert sum(left for _, left in captured) > 0 and sum(n - left for n, left in captured) > 0
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert_same(a, b, err_msg=f"output {k}")


def test_a_callable_that_fails_is_reported_for_its_output(monkeypatch):
    from millipyde import random as mprandom

    def boom(img):
        if mprandom.current_key().sample == 5:
            raise KeyError("boom at 5")
        img.brightness(0.1)

    monkeypatch.setattr(batches, "RECORD_AT_ONCE", True)
    gen = mp.Generator([mp.gpuimage(h) for h in _hosts()],
                       [mp.Operation("fliplr"), mp.Operation(boom)], outputs=10, seed=1)
    with pytest.raises(PipelineError, match=r"'boom'.*output 5 \(input 1\)") as info:
        list(gen)
    assert isinstance(info.value.__cause__, KeyError)


def test_user_kernels_keep_their_own_route():
    @mp.elementwise
    def halve(v, c):
        return v * 0.5

    gen = mp.Generator([mp.gpuimage(h) for h in _hosts()],
                       [mp.Operation("fliplr"), mp.Operation(halve)], outputs=2)
    assert generator_callables.make(gen._state) is None


def _kernels_held() -> tuple[int, int]:
    """Generated modules imported in this process and the kernel versions they hold (compiled
    here or loaded from the disk cache): what a run that needs another kernel adds to,
    whatever the disk cache held before."""
    from millipyde.graph.codegen import loader

    mods = list(loader.LOADED.values())
    return len(mods), sum(len(v.overloads) for m in mods for v in vars(m).values()
                          if isinstance(getattr(v, "overloads", None), dict))


def test_a_new_seed_after_warm_up_compiles_nothing_and_keeps_its_values(monkeypatch):
    """``next()`` of the figure-5.1 recipe after another seed's outputs: no kernel compiled or
    loaded (a recorded group launches the kernel of its key, not one chosen by the coin
    patterns met so far: seed 3's first outputs met only rotated ones, whose ungated gather
    seed 2's run never launched), and the values of the chain applied image by image."""
    from generator_reference import assert_device_same, eager_outputs

    from millipyde.training import warmup

    monkeypatch.setattr(batches, "RECORD_AT_ONCE", True)
    ops = recipes.figure_5_1_operations()
    hosts = _hosts()
    for x in mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=4 * N, seed=2):
        np.asarray(x)
    held, compiled = _kernels_held(), warmup.compiled_count()
    got = [np.asarray(x) for x in mp.Generator([mp.gpuimage(h) for h in hosts], ops,
                                               outputs=N, seed=3)]
    assert (_kernels_held(), warmup.compiled_count()) == (held, compiled)
    want = eager_outputs(hosts, ops, 16, 3)  # (each a plan of its own: the first few)
    for k, (a, b) in enumerate(zip(got[:16], want, strict=True)):
        # on a GPU the two kernels may contract the Gaussian's multiply-adds apart (two
        # passes of up to 17 taps at sigma 2: half an ulp of a term each, ~17 eps of the
        # result's scale), and a gamma up to 2 doubles the relative error; one H200 showed
        # 6.5 eps (2026-11-29)
        assert_device_same(a, b, f"output {k}", eps=32)


@pytest.mark.cudasim_ok
def test_a_new_seed_records_no_template_and_keeps_its_values(monkeypatch):
    """A Generator of the figure-5.1 recipe of another seed, over other handles of the same
    inputs, takes the templates (and key plans) an earlier one recorded
    (``template_share``): its batch records none (seed 2's batches met every coin pattern
    it meets), and is the batch of the same Generator recorded afresh (the store cleared)
    and of the per-output path. (``next()`` after another seed, sharing them too:
    ``test_a_new_seed_after_warm_up_compiles_nothing_and_keeps_its_values``.)"""
    from millipyde.training import batch_record, template_share

    ops = recipes.figure_5_1_operations()
    recorded = []
    plain = batch_record.record_template
    monkeypatch.setattr(batch_record, "record_template",
                        lambda *a, **k: recorded.append(a[2]) or plain(*a, **k))
    # on device 0 alone: templates are per device, and over several devices which batches
    # (so which coin patterns) a device meets depends on the timing
    _outputs(monkeypatch, ops, True, n=8 * N, size=N, seed=2, device=0)
    assert recorded
    recorded.clear()
    got = _outputs(monkeypatch, ops, True, size=N, seed=3, device=0)
    assert recorded == []
    template_share.clear()
    fresh = _outputs(monkeypatch, ops, True, size=N, seed=3, device=0)
    assert recorded  # (recorded afresh: two routes compared)
    assert_same(got, fresh)
    assert_same(got, _outputs(monkeypatch, ops, False, size=N, seed=3))


def test_a_new_seed_takes_the_shapes_before_the_callable_found_before(monkeypatch, captured):
    """The (shape, dtype) each output has when the callable gets it is found once per input
    kind and coin pattern, by recording the Operations before it on a copy: a Generator of
    another seed over other handles of the same inputs takes those an earlier one found
    (``template_share``), finds none anew, and keeps the per-output path's values."""
    monkeypatch.setattr(batches, "RECORD_AT_ONCE", True)
    ops = [mp.Operation("transpose", probability=0.5), mp.Operation("fliplr", probability=0.5),
           mp.Operation(recipes.colorize_if_colour, [0.5, 1.5], [0.5, 1.5], [0.5, 1.5],
                        probability=0.7), mp.Operation("random_rotate", -20, 20)]
    hosts = [h[:, :-2] for h in _hosts()]  # (not square: the transpose changes the shape)
    h, w = hosts[0].shape[:2]
    found = []
    plain = generator_callables.CallableRecorder._shape_before

    def spy(self, i, k, key):
        # (a compiling-ahead twin, on a GPU, records with launches skipped: its shapes stay
        # its own, ``template_share.chain_key``, so it finds each anew by design)
        if key not in self._shapes and not runtime.is_recording():
            found.append(key)
        return plain(self, i, k, key)

    monkeypatch.setattr(generator_callables.CallableRecorder, "_shape_before", spy)
    for x in mp.Generator([mp.gpuimage(x) for x in hosts], ops, outputs=2 * N, seed=2):
        np.asarray(x)
    # (each key found at least once; two workers may both find one before either stores it,
    # as on a GPU's workers: the same shape, found twice)
    assert {key[1] for key in found}
    assert len({key[0] for key in found}) == 1  # (one kind of input: one shape per pattern)
    found.clear()
    captured.clear()
    gen = mp.Generator([mp.gpuimage(x) for x in hosts], ops, outputs=N, seed=3)
    got = [np.asarray(x) for x in gen]
    assert found == [] and sum(n - left for n, left in captured) == N
    monkeypatch.setattr(batches, "RECORD_AT_ONCE", False)
    want = [np.asarray(x) for x in mp.Generator([mp.gpuimage(x) for x in hosts], ops,
                                                outputs=N, seed=3)]
    assert {a.shape for a in got} == {(h, w, 3), (w, h, 3)}
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert_same(a, b, err_msg=f"output {k}")


def test_a_compiling_ahead_twin_keeps_its_templates_its_own():
    """Launches recorded instead of run (compiling ahead) leave buffers unwritten, which a
    callable may read: templates recorded so are not shared (``template_share.chain_key``)."""
    from millipyde.training import template_share

    xs = [mp.gpuimage(np.zeros((8, 8, 3), np.uint8))]
    ops = [mp.Operation("fliplr", p=0.5)]
    assert template_share.chain_key(xs, ops) is not None
    with runtime.recording(lambda *a: None):
        assert template_share.chain_key(xs, ops) is None
    assert template_share.chain_key(xs, ops) is not None


@pytest.mark.cudasim_ok
def test_claims_grow_past_the_batch_and_keep_the_values(monkeypatch, captured):
    """A ramped Generator's claims (1, 3, 12, ...) grow past its batch to
    ``generator_state.GROWN`` once its outputs' bytes are known; every output is still the
    per-output path's."""
    from millipyde.training import generator_state

    monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", "4")
    monkeypatch.setattr(generator_state, "GROWN", 8)
    ops = recipes.figure_5_1_operations()
    n = 24 if SIM else 48
    want = _outputs(monkeypatch, ops, False, n=n)
    captured.clear()
    got = _outputs(monkeypatch, ops, True, n=n)
    claims = [m for m, _ in captured]
    assert sum(claims) == n and max(claims) == 8 and sorted(claims)[:2] == [1, 3]
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert_same(a, b, err_msg=f"output {k}")


def test_grown_claims_keep_the_outputs_made_ahead_within_their_bytes(monkeypatch):
    """Claims grow only as far as ``AHEAD_BYTES`` holds ``workers + 1`` of them at the
    outputs' real bytes (here 8 outputs of 10 x 10 x 3 uint8 each)."""
    from millipyde.training import generator_state

    monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", "4")
    ops = [mp.Operation("fliplr", probability=0.5), mp.Operation(_two, probability=0.5)]
    gen = mp.Generator([mp.gpuimage(np.full((10, 10, 3), 7, np.uint8)) for _ in range(2)],
                       ops, outputs=40, seed=3)
    st = gen._state
    monkeypatch.setattr(generator_state, "AHEAD_BYTES", 300 * (st.workers + 1) * 8)
    out = [np.asarray(x) for x in gen]
    assert len(out) == 40 and (st.out_bytes, st.grown) == (300, 8)
    assert st.depth <= max(st.depth0, (st.workers + 1) * 8)


def test_grown_claims_take_a_share_of_a_large_devices_memory(monkeypatch):
    """A 512 x 512 RGB claim grows to 170 outputs within ``batch.BATCH_BYTES`` on a device of
    64 GiB or less, and to 370 where ``1 / CLAIM_MEMORY_SHARE`` of the device's memory is the
    larger bound (an H200's 139 GiB: 2.2 GiB over 8 bytes a value); the outputs' bytes bound
    the window as before."""
    big = mp.gpuimage(np.zeros((512, 512, 3), np.uint8))
    for mem, want in ((None, 170), (16 << 30, 170), (64 << 30, 170), (139 << 30, 370)):
        monkeypatch.setattr(runtime, "memory_bytes", lambda device, m=mem: m)
        gen = mp.Generator([big], recipes.figure_5_1_operations(), outputs=8, seed=0,
                           device=0)
        st = gen._state
        st._grow([(big, None)])
        assert st.grown == want, mem
        assert st.depth == max(st.depth0, (st.workers + 1) * want)
        gen.close()


def test_next_from_two_threads_hands_out_every_output_once(monkeypatch):
    """Outputs handed out without the lock (``GeneratorState.ready``): two threads calling
    ``next()`` on one Generator get every output once between them."""
    import threading

    monkeypatch.setattr(batches, "RECORD_AT_ONCE", True)
    ops = recipes.figure_5_1_operations()
    hosts = _hosts()
    n = 3 * N
    want = sorted(np.asarray(x).tobytes() for x in
                  mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=n, seed=5))
    gen = mp.Generator([mp.gpuimage(h) for h in hosts], ops, outputs=n, seed=5)
    got: list = []

    def take():
        for x in gen:
            got.append(np.asarray(x).tobytes())

    threads = [threading.Thread(target=take) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(got) == want


def test_a_worker_claims_as_soon_as_the_ready_outputs_leave_room(monkeypatch):
    """Outputs popped from ``GeneratorState.ready`` without the lock still wake a worker
    waiting for room: with a slow consumer and a fast worker, each claim starts within two
    outputs of the first moment the window had room for it (or of the worker's previous
    claim made), not once ``ready`` is empty. Claims 1, 3, 8 (the batch, before the outputs'
    bytes are known), then 10 in a window of 20: a claim has room once the outputs before
    the window's start are handed out, while ``ready`` still holds later ones."""
    import time

    from millipyde.training import generator_state

    monkeypatch.setenv("MILLIPYDE_GENERATOR_BATCH", "8")
    monkeypatch.setenv("MILLIPYDE_WORKERS", "1")
    monkeypatch.setattr(generator_state, "GROWN", 10)
    ops = [mp.Operation("fliplr", probability=0.5), mp.Operation(_two, probability=0.5)]
    gen = mp.Generator([mp.gpuimage(h) for h in _hosts()], ops, outputs=48, seed=3)
    st = gen._state
    make = st._make_batch
    claims: list[tuple[int, int, int, int, int]] = []  # k0, n, handed out at start, at end

    def handed() -> int:
        return st.tickets - len(st.ready)

    def spy(k0, n, *args):
        start, depth = handed(), st.depth
        try:
            return make(k0, n, *args)
        finally:
            claims.append((k0, n, depth, start, handed()))

    monkeypatch.setattr(st, "_make_batch", spy)
    got = 0
    for x in gen:
        np.asarray(x)
        got += 1
        time.sleep(0.004)  # a slow consumer: the worker waits for room, not the reverse
    assert got == 48 and 10 in [n for _, n, *_ in claims]
    late = [(k0, n, start, max(0, k0 + n - depth), done)
            for (k0, n, depth, start, _), (*_, done) in zip(claims[1:], claims, strict=False)
            if start > max(k0 + n - depth, done) + 2]
    assert not late, f"claims (k0, n, started at, room at, previous made at) late: {late}"


def test_outputs_before_a_failed_one_are_handed_out_then_its_error(monkeypatch):
    """A claim whose output 5 fails: ``next()`` hands out outputs 0-4 (the per-output path's
    values), then raises output 5's error (``generator_state._Failed``), then stops."""
    from millipyde import random as mprandom

    def boom(img):
        if mprandom.current_key().sample == 5:
            raise KeyError("boom at 5")
        img.brightness(0.1)

    ops = [mp.Operation("fliplr", probability=0.5), mp.Operation(boom)]
    monkeypatch.setattr(batches, "RECORD_AT_ONCE", False)
    want = [np.asarray(x) for x in mp.Generator([mp.gpuimage(h) for h in _hosts()], ops,
                                                  outputs=5, seed=1)]
    monkeypatch.setattr(batches, "RECORD_AT_ONCE", True)
    gen = mp.Generator([mp.gpuimage(h) for h in _hosts()], ops, outputs=10, seed=1)
    for k in range(5):
        assert_same(np.asarray(next(gen)), want[k], err_msg=f"output {k}")
    with pytest.raises(PipelineError, match=r"'boom'.*output 5 \(input 1\)"):
        next(gen)
    with pytest.raises(StopIteration):
        next(gen)


def test_grown_claims_count_each_shape_and_dtype_of_interleaved_groups():
    """``_grow`` counts each (shape, dtype) of a claim once, whatever their order: a claim
    whose groups interleave still sizes the next claims by its largest output."""
    from types import SimpleNamespace

    gen = mp.Generator([mp.gpuimage(h) for h in _hosts()], recipes.figure_5_1_operations(),
                       outputs=4, seed=1)
    st = gen._state
    small, big = (4, 4, 3), (20, 20, 3)  # (the inputs: 10 x 10 x 3)

    def out(shape, dtype):
        return SimpleNamespace(_node=SimpleNamespace(shape=shape, dtype=np.dtype(dtype)))

    # (the same shape as uint8 first, then as float64: both counted)
    made = [(out(small, "u1"), None), (out(big, "u1"), None), (out(small, "u1"), None),
            (out(big, "f8"), None), (out(big, "u1"), None)]
    st._grow(made)
    assert (st.out_bytes, st.out_values) == (20 * 20 * 3 * 8, 20 * 20 * 3)
    gen.close()


def test_stored_values_share_one_lock_and_outputs_hold_no_lock_each():
    """Nodes stored with their value (a Generator's outputs, a chunk's members) share one
    lock; one stored without a value yet (computed later, under its lock) has its own."""
    from millipyde.graph.ir.node import stored

    a = stored(np.zeros(3), (3,), np.dtype("f8"), 0)
    b = stored(np.zeros(3), (3,), np.dtype("f8"), 0)
    c, d = (stored(None, (3,), np.dtype("f8"), 0) for _ in range(2))
    assert a.lock is b.lock and c.lock is not a.lock and c.lock is not d.lock
    gen = mp.Generator([mp.gpuimage(h) for h in _hosts()], recipes.figure_5_1_operations(),
                       outputs=12, seed=2)
    outs = list(gen)
    assert len({id(x._node.lock) for x in outs[2:]}) == 1  # (past the ramp's first claims)


def _own_arguments(img, r, g, b):
    img.random_colorize(r, g, b)  # (its Operation's own arguments: parsed once a claim)


def _equal_copies(img, r, g, b):
    img.random_colorize(list(r), list(g), list(b))  # (equal, not its own: parsed per output)


def _by_keyword(img, r, g, b):
    img.random_colorize(r_range=r, g_range=g, b_range=b)


def _another_form(img, r, g, b):
    img.random_brightness(r[0] - 1.0, r[1] - 1.0)  # (another form of the same stream)


@pytest.mark.parametrize("fn", [pytest.param(_own_arguments, marks=pytest.mark.cudasim_ok),
                                _equal_copies, _by_keyword, _another_form])
def test_a_callables_claim_draws_and_parses_keep_the_per_output_values(monkeypatch, captured,
                                                                      fn):
    from millipyde import image

    parses = []
    claim_parse = image._claim_parse
    monkeypatch.setattr(image, "_claim_parse",
                        lambda *a: parses.append(a[1]) or claim_parse(*a))
    ops = [mp.Operation("transpose", probability=0.5),
           mp.Operation(fn, [0.5, 1.5], [1, 2], [-0.0, -0.0], probability=0.7),
           mp.Operation("random_rotate", -20, 20)]
    want = _outputs(monkeypatch, ops, False)
    assert not parses  # (the per-output path draws and parses per output)
    got = _outputs(monkeypatch, ops, True)
    assert sum(n - left for n, left in captured) > 0 and all(left == 0 for _, left in captured)
    # at most one parse a claim (none where its coins skip the callable) where the callable
    # passes its own arguments on, else none
    assert (0 < len(parses) <= len(captured)) if fn is _own_arguments else not parses
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert_same(a, b, err_msg=f"output {k}")


def test_a_claims_parameter_rows_are_the_per_output_draws_bit_for_bit():
    from millipyde import image
    from millipyde import random as mprandom
    from millipyde.ops import FORMS

    seed, j, ks = 5, 4, np.arange(40, 90)
    block = np.array([mprandom.uniforms(seed, k, j, 9) for k in ks.tolist()])
    big = np.finfo(np.float64).max
    args = ([0.5, 1.5], [1.0, 1.0], [-0.0, -0.0])
    parse = FORMS["random_colorize"].parse
    kind = image.kind_of((4, 4, 3), np.dtype(np.uint8))
    for claim, ranges in [(mprandom.ClaimDraws(block, args), args),
                          (mprandom.ClaimDraws(block, ([0.0, big], [big, big], [1e300, big])),
                           None)]:
        a, rows = image._claim_parse(claim, parse, kind)
        assert rows is not None and len(rows) == len(ks)
        for at, row in enumerate(rows):
            want = tuple(image.between1(lo, hi, u) for (lo, hi), u in
                         zip(a, block[at].tolist(), strict=False))
            assert np.array(row).view(np.uint64).tolist() == \
                np.array(want).view(np.uint64).tolist()
        assert ranges is None or a == tuple(map(tuple, ranges))
    # integer bounds keep the per-output draws (their parameters' type): no rows
    claim = mprandom.ClaimDraws(block, (3, 7))
    assert image._claim_parse(claim, lambda kind, lo, hi: image.Ranges([(lo, hi)]),
                              kind)[1] is None
