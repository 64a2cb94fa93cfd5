"""A Pipeline chunk's outputs bound lazily, as members of the chunk's batch buffer
(``graph.ir.member``): no view and no node per input until its value is read; then the value
of the per-input path bit for bit, whatever else of the batch was read or dropped; one node
per member whichever threads read it; rollback and errors as for any other value."""

import gc
import threading
import weakref

import numpy as np
import pytest
from multidevice import assert_same, crops, reference

import millipyde as mp
from millipyde import faults
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.ir.member import Member
from millipyde.pipeline import PipelineError
from millipyde.pipeline import chunks as pipeline_chunks

THESIS = [mp.Operation("gaussian", 2), mp.Operation("adjust_gamma", 2), mp.Operation("fliplr"),
          mp.Operation("rotate", 45), mp.Operation("rgb2grey")]
SIM = runtime.simulated  # (the simulator runs every GPU thread as a Python thread: small)
N = 4 if SIM else 6


@pytest.fixture(autouse=True)
def _clean():
    faults.clear()
    yield
    faults.clear()


def _small(n: int) -> list[np.ndarray]:
    return crops(n, 6 if SIM else 8, 8 if SIM else 12)


def _member(x: mp.gpuarray) -> Member | None:
    return x.__dict__.get("_member")


def _run(hosts: list[np.ndarray], ops=THESIS, seed: int = 0) -> list[mp.gpuimage]:
    imgs = [mp.gpuimage(h) for h in hosts]
    mp.Pipeline(imgs, ops, seed=seed, device=0).run()
    return imgs


@pytest.mark.cudasim_ok
def test_outputs_are_members_until_read_then_nodes():
    hosts = _small(N)
    imgs = _run(hosts)
    for x in imgs:  # bound, nothing made
        assert "_node" not in x.__dict__ and isinstance(_member(x), Member)
        assert _member(x).made is None
    members = [_member(x) for x in imgs]
    assert len({id(m.batch) for m in members}) == 1  # one chunk, one batch buffer
    # each way of reading makes that input's node alone; its buffer alone makes no node
    got = np.asarray(imgs[0])
    buffer = imgs[1]._materialize()
    imgs[2].fliplr()  # a next op records on the member's node
    shape = imgs[3].shape
    for i, m in enumerate(members):
        assert (m.made is not None) == (i in (0, 2, 3)), i
        assert (m.held is not None) == (i < 4), i
    assert _member(imgs[1]) is members[1] and members[1].held is buffer
    assert imgs[1]._node.buffer is buffer and _member(imgs[1]) is None  # the same view
    assert imgs[0]._node is members[0].made and _member(imgs[0]) is None
    assert imgs[2]._node.inputs == (members[2].made,)
    assert shape == members[3].batch.shape == got.shape
    assert np.array_equal(runtime.to_host(buffer).reshape(shape), np.asarray(imgs[1]))
    assert_same(got, reference(hosts[0], THESIS, 0, 0))
    assert_same(np.asarray(imgs[2]), np.fliplr(reference(hosts[2], THESIS, 0, 2)))
    if runtime.caps.external_memory:  # (a GPU: the interface reads the member's view)
        assert imgs[4].__cuda_array_interface__["shape"] == members[4].batch.shape


@pytest.mark.cudasim_ok
def test_members_equal_the_per_input_path(monkeypatch):
    hosts = _small(N)
    monkeypatch.setattr(pipeline_chunks, "ENABLED", False)  # every input per input
    if SIM:
        monkeypatch.setenv("MILLIPYDE_WORKERS", "1")
    eager = _run(hosts, seed=7)
    assert all(_member(x) is None for x in eager)
    monkeypatch.setattr(pipeline_chunks, "ENABLED", True)
    lazy = _run(hosts, seed=7)
    assert all(_member(x) is not None for x in lazy)
    for i, (x, y) in enumerate(zip(lazy, eager, strict=True)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=f"input {i}")


@pytest.mark.cudasim_ok
def test_a_member_outlives_the_others_read_or_dropped():
    hosts = _small(N)
    imgs = _run(hosts)
    batch = _member(imgs[0]).batch
    alive = weakref.ref(batch.buffer)
    want = [reference(h, THESIS, 0, i) for i, h in enumerate(hosts)]
    assert_same(np.asarray(imgs[0]), want[0])  # one read,
    for i in range(1, N - 1):  # the others dropped or bound anew, unread,
        if i % 2:
            imgs[i] = None
        else:
            imgs[i].fliplr()
    del batch
    gc.collect()
    assert alive() is not None
    assert_same(np.asarray(imgs[N - 1]), want[N - 1])  # the last still its value
    assert_same(np.asarray(imgs[0]), want[0])
    assert_same(np.asarray(imgs[2]), np.fliplr(want[2]))
    imgs.clear()
    gc.collect()
    assert alive() is None  # the batch buffer goes with its last member


@pytest.mark.cudasim_ok
def test_threads_reading_one_member_get_one_node():
    imgs = _run(_small(2))
    x = imgs[0]
    m = _member(x)
    start = threading.Barrier(6)
    got = []

    def read():
        start.wait()
        got.append(x._node)

    threads = [threading.Thread(target=read) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 6 and all(n is m.made for n in got)
    assert m.made.users == 1  # (x alone holds it)


@pytest.mark.cudasim_ok
def test_a_second_pipeline_over_unread_members():
    hosts = _small(N)
    imgs = _run(hosts, [mp.Operation("random_rotate", -20, 20)], seed=2)
    more = [mp.Operation("adjust_gamma", 2), mp.Operation("fliplr", probability=0.5)]
    mp.Pipeline(imgs, more, seed=3, device=0).run()  # reads the first run's members
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        assert _member(x) is not None
        want = reference(reference(h, [mp.Operation("random_rotate", -20, 20)], 2, i),
                         more, 3, i)
        np.testing.assert_array_equal(np.asarray(x), want, err_msg=f"input {i}")


def _count_member_nodes(monkeypatch) -> list[int]:
    """Count the nodes members make (``Member.node``: an input's read, ``gpuarray._node``)."""
    made = []
    node = Member.node

    def counted(self):
        made.append(self.index)
        return node(self)

    monkeypatch.setattr(Member, "node", counted)
    return made


@pytest.mark.cudasim_ok
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("skip", [0, 1])
def test_a_next_run_over_unread_members_makes_no_node(monkeypatch, interleaved, skip):
    """A second run over first runs' unread members (``skip``: but the first input) groups,
    checks and stacks them by the members: no node is made for them. Members a..a+n-1 of one
    batch buffer, in order, are the stack itself (the buffer or its slice, no copy); members
    of two buffers in turn are copied into one."""
    hosts = _small(N)
    first = [mp.Operation("adjust_gamma", 2)]
    if interleaved:  # two runs' members, a0 b0 a1 b1 ...
        a, b = _run(hosts[0::2], first, seed=4), _run(hosts[1::2], first, seed=4)
        imgs = [x for pair in zip(a, b, strict=True) for x in pair]
        firsts = [i // 2 for i in range(N)]  # each input's position in its first run
    else:
        imgs, firsts = _run(hosts, first, seed=4), list(range(N))
    imgs, hosts, firsts = imgs[skip:], hosts[skip:], firsts[skip:]
    before = [_member(x) for x in imgs]
    assert len({id(m.batch) for m in before}) == (2 if interleaved else 1)
    made = _count_member_nodes(monkeypatch)
    stacked = []
    stack_into = runtime.stack_into
    monkeypatch.setattr(runtime, "stack_into",
                        lambda stack, bufs, *a, **k: (stacked.append(len(bufs)),
                                                      stack_into(stack, bufs, *a, **k))[1])
    more = [mp.Operation("adjust_gamma", 0.5), mp.Operation("random_rotate", -20, 20)]
    mp.Pipeline(imgs, more, seed=5, device=0).run()
    assert made == [] and all(m.made is None for m in before)
    assert all(_member(x) is not None and _member(x) not in before for x in imgs)
    assert stacked == ([N - skip] if interleaved else [])
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        want = reference(reference(h, first, 4, firsts[i]), more, 5, i)
        np.testing.assert_array_equal(np.asarray(x), want, err_msg=f"input {i}")


def test_connected_stages_make_no_node_between_them(monkeypatch):  # (two stages)
    hosts = _small(N)
    imgs = [mp.gpuimage(h) for h in hosts]
    one, two = [mp.Operation("adjust_gamma", 2)], [mp.Operation("fliplr", probability=0.5)]
    p1 = mp.Pipeline(imgs, one, seed=1, device=0)
    p1.connect_to(mp.Pipeline([], two, seed=2, device=0))
    made = _count_member_nodes(monkeypatch)
    p1.run()
    assert made == []
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        assert _member(x) is not None
        np.testing.assert_array_equal(np.asarray(x), reference(reference(h, one, 1, i), two,
                                                               2, i), err_msg=f"input {i}")


def test_a_failed_run_restores_inputs_bound_to_members():  # (two stages: not the simulator)
    """Inputs holding a first run's members, unread: a chain over them whose second stage
    fails restores them to those members (the error names the input that failed)."""
    hosts = _small(N)
    first = [mp.Operation("adjust_gamma", 2)]
    imgs = _run(hosts, first)
    before = [_member(x) for x in imgs]
    p1 = mp.Pipeline(imgs, [mp.Operation("fliplr")], device=0)
    p2 = mp.Pipeline([], [mp.Operation("gaussian", 1.0)], device=0)
    p1.connect_to(p2)
    faults.inject("operation:gaussian", "raise", at_call=3)
    with pytest.raises(PipelineError, match=r"stage 2 of 2\): operation 0 \('gaussian'\) "
                                            r"failed on input 2 "):
        p1.run()
    for i, (x, m) in enumerate(zip(imgs, before, strict=True)):
        assert _member(x) is m and m.made is None, i  # restored, unread (the run read none)
        np.testing.assert_array_equal(np.asarray(x), reference(hosts[i], first, 0, i))
    faults.clear()
    p1.run()  # usable afterwards: each input once more, from its first-run value
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        want = reference(reference(reference(h, first, 0, i), [mp.Operation("fliplr")], 0, i),
                         [mp.Operation("gaussian", 1.0)], 0, i)
        np.testing.assert_array_equal(np.asarray(x), want, err_msg=f"input {i}")


def test_reads_while_pipelines_rebind_the_same_inputs():
    # (not under the simulator: its kernels can not run from two Pipelines' threads at once)
    """Threads reading inputs (their node, their buffer) while two Pipelines bind and rebind
    them: every read finds a value, no update is lost (four flips: the inputs as made)."""
    hosts = _small(N)
    imgs = [mp.gpuimage(h) for h in hosts]
    flip = [mp.Operation("fliplr")]
    stop = threading.Event()
    errors: list[BaseException] = []

    def read():
        while not stop.is_set():
            for x in imgs:
                try:
                    assert x._node.shape == hosts[0].shape
                    x._materialize()
                except BaseException as err:  # noqa: BLE001  (reported below)
                    errors.append(err)
                    return

    def runs():
        for _ in range(2):
            mp.Pipeline(imgs, flip, device=0).run()

    readers = [threading.Thread(target=read) for _ in range(2)]
    writers = [threading.Thread(target=runs) for _ in range(2)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors, errors
    for i, (x, h) in enumerate(zip(imgs, hosts, strict=True)):
        np.testing.assert_array_equal(np.asarray(x), h, err_msg=f"input {i}")


@pytest.mark.cudasim_ok
def test_an_array_bound_to_a_member_and_back():
    """``gpuarray``'s side alone: a member held, read, held again, replaced; an array dropped
    unread makes nothing."""
    from millipyde.graph.ir.member import Batch

    hosts = _small(2)
    buffer = runtime.from_host(np.stack(hosts), 0)
    batch = Batch(buffer, hosts[0].shape, np.uint8, 0, runtime.member_views(buffer))
    m0, m1 = batch.members(2)
    x = mp.gpuimage(hosts[1])
    first = x._value()
    x._bind_member(m0)
    assert x._value() is m0 and x._holds(m0) and not x._holds(first) and first.users == 0
    np.testing.assert_array_equal(np.asarray(x), hosts[0])  # read: its node now
    assert x._value() is m0.made and x._holds(m0) and m0.made.users == 1
    x._bind_value(m1)  # (a rollback's restore)
    assert x._holds(m1) and not x._holds(m0) and m0.made.users == 0
    np.testing.assert_array_equal(np.asarray(x), hosts[1])
    x._bind_value(first)
    assert x._value() is first and first.users == 1
    np.testing.assert_array_equal(np.asarray(x), hosts[1])
    y = mp.gpuimage(hosts[0])
    unread = batch.members(1)[0]
    y._bind_member(unread)
    del y
    gc.collect()
    assert unread.made is None and unread.held is None


@pytest.mark.cudasim_ok
def test_a_bind_while_a_read_converts_the_member():
    """A read (another thread's) that converts the member into its node right after a bind
    first looks at the array: the node's ``users`` count given back all the same."""
    from millipyde.graph.ir import member
    from millipyde.graph.ir.member import Batch

    hosts = _small(1)
    buffer = runtime.from_host(np.stack(hosts), 0)
    (m,) = Batch(buffer, hosts[0].shape, np.uint8, 0, runtime.member_views(buffer)).members(1)
    x = mp.gpuimage(hosts[0])
    other = x._value()
    x._bind_member(m)

    class Racy(dict):
        """The array's ``__dict__``: the read runs once the bind's first look is answered
        (as a thread switch there would run it), unless the bind holds the member lock."""

        fired = False

        def _read(self) -> None:
            if not self.fired and not member.LOCK.locked():
                self.fired = True
                type(x)._node.__get__(x)

        def get(self, key, default=None):
            got = dict.get(self, key, default)
            if key == "_node" and got is None:
                self._read()
            return got

        def __contains__(self, key):
            got = dict.__contains__(self, key)
            if key == "_member" and got:
                self._read()
            return got

    x.__dict__ = Racy(x.__dict__)
    x._bind(other)
    assert x.__dict__.fired and m.made is not None  # (the read ran mid-bind)
    assert x._value() is other and other.users == 1
    assert m.made.users == 0  # (nothing holds the member's node)


@pytest.mark.cudasim_ok
def test_a_move_to_the_pinned_device_and_a_commit_land_one_after_the_other():
    """``_placed``'s move (lazy arithmetic on an array pinned to another device) reads and
    binds under the array's commit lock: a Pipeline's commit landing between its read and its
    bind waits, then lands on what the move left, lost neither way (nor the array left with
    no value, as a bind racing ``_bind_member``'s could)."""
    from millipyde.graph.ir.member import Batch
    from millipyde.locks import commit_lock

    hosts = _small(2)
    buffer = runtime.from_host(np.stack(hosts[:1]), 0)
    (m,) = Batch(buffer, hosts[0].shape, np.uint8, 0, runtime.member_views(buffer)).members(1)
    x = mp.gpuimage(hosts[1])
    first = x._value()
    x._pinned = x.device + 1  # (recorded only: nothing runs)
    commit = threading.Thread(target=lambda: (commit_lock(x).acquire(), x._bind_member(m),
                                              commit_lock(x).release()))

    class Racy(dict):
        """The array's ``__dict__``: the commit starts on another thread once the move's bind
        first looks at the array, and is given that thread's time slice."""

        def __contains__(self, key):
            if key == "_member" and not commit.is_alive() and commit.ident is None:
                commit.start()
                commit.join(0.2)
            return dict.__contains__(self, key)

    x.__dict__ = Racy(x.__dict__)
    moved = x._placed()
    commit.join()
    assert moved.inputs == (first,)
    assert x._value() is m  # (the commit landed last, after the move: not lost)
    assert moved.users == 0 and first.users == 1  # (the move node alone reads ``first``)


@pytest.mark.cudasim_ok
def test_a_ufunc_written_out_waits_for_a_commit():
    """``np.add(x, 1, out=x)`` reads and writes ``x`` under its commit lock: started while a
    commit holds it, it adds to what the commit bound."""
    from millipyde.graph.ir.member import Batch
    from millipyde.locks import commit_lock

    hosts = _small(2)
    buffer = runtime.from_host(np.stack(hosts[:1]), 0)
    (m,) = Batch(buffer, hosts[0].shape, np.uint8, 0, runtime.member_views(buffer)).members(1)
    x = mp.gpuimage(hosts[1])
    with commit_lock(x):
        add = threading.Thread(target=np.add, args=(x, 1), kwargs={"out": x})
        add.start()
        add.join(0.2)
        assert add.is_alive()  # (waiting for the lock)
        x._bind_member(m)
    add.join()
    np.testing.assert_array_equal(np.asarray(x), hosts[0] + np.uint8(1))
