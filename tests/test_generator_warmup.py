"""``warmup``: every kernel a chain needs, compiled ahead; then another seed compiles nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import millipyde as mp
from millipyde.training import batch_record, warmup

OPS = [mp.Operation("transpose", probability=0.3), mp.Operation("fliplr", probability=0.4),
       mp.Operation("random_brightness", -0.2, 0.2),
       mp.Operation("random_gaussian", 0, 1),
       mp.Operation("rgb2grey", probability=0.3),
       mp.Operation("random_rotate", 0, 120, probability=0.5)]


def test_representatives_cover_every_pattern() -> None:
    ks = warmup.representatives(OPS)
    rules = batch_record.rules_for([mp.gpuimage(np.zeros((4, 4, 3), np.uint8))], OPS)
    coins, params = batch_record.draw(rules, 0, np.arange(4096))
    seen = {p.tobytes() for p in batch_record.patterns(rules, coins, params)}
    coins, params = batch_record.draw(rules, 0, np.array(ks))
    mine = [p.tobytes() for p in batch_record.patterns(rules, coins, params)]
    assert len(set(mine)) == len(mine) and seen <= set(mine)


def test_after_warmup_another_seed_compiles_nothing() -> None:
    # (rotations that need the warp clip are warmed too: they are made one by one)
    got = warmup.warmup(OPS, (12, 12, 3), size=64, processes=1)
    assert got["patterns"] == len(warmup.representatives(OPS, shape=(12, 12, 3))) > \
        len(warmup.representatives(OPS))
    assert _compiled_after(OPS, 64, 3, 70) == 0


def _compiled_after(ops: list, size: int, batches: int, outputs: int) -> int:
    """Kernels compiled by a seed-12345 Generator of ``ops`` on three 12x12 RGB inputs making
    ``batches`` batches of ``size``, then ``outputs`` outputs one at a time."""
    before = warmup.compiled_count()
    rng = np.random.default_rng(1)
    imgs = [mp.gpuimage(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)) for _ in range(3)]
    gen = mp.Generator(imgs, ops, seed=12345)
    with gen.batches(size) as bs:
        for _ in range(batches):
            next(bs)
    for _ in range(outputs):
        next(gen)
    gen.close()
    return warmup.compiled_count() - before


# 5 coin patterns, not OPS's 20: each is compiled from scratch in the fresh cache. They still
# hold batched patterns and a rotation made one by one (the warp clip); the test above warms
# the whole of OPS
SHARED_OPS = [OPS[1], OPS[2], OPS[5]]

_CHILD = """
import json, millipyde as mp
from millipyde.training import warmup
from tests.test_generator_warmup import SHARED_OPS
print(json.dumps(warmup.warmup(SHARED_OPS, (10, 10, 3), size=64, processes={p})))
"""


# two fresh processes compile from an empty cache (~100 CPU-s); the CI tier's fresh processes
# sharing a disk cache are test_precompile.py's
@pytest.mark.slow
@pytest.mark.exhaustive
def test_worker_processes_share_the_disk_cache(tmp_path) -> None:
    env = {**os.environ, "MILLIPYDE_CACHE_DIR": str(tmp_path)}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def run(p: int) -> dict:
        out = subprocess.run([sys.executable, "-c", _CHILD.format(p=p)], env=env, cwd=root,
                             capture_output=True, text=True, timeout=1200, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = run(2)
    assert first["processes"] == 2 and first["compiled"] > 0
    again = run(1)  # a fresh process: everything comes from the shared disk cache
    assert again["compiled"] == 0


def test_cli_warmup(capsys) -> None:
    from millipyde import cli

    assert cli.main(["warmup", "--shape", "8x8x3", "--size", "32", "--processes", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("coin patterns") == 2 and out.count("kernels compiled") == 2
    assert "backend" in out


@pytest.mark.parametrize("outputs", [True, False])
def test_patterns_make_next_outputs_only_when_asked(outputs: bool, monkeypatch) -> None:
    # Generator.batches compiles ahead with outputs=False: the batches alone, not next()'s
    from millipyde.training import generator_state

    made = []
    real = generator_state.GeneratorState.make_many

    def counted(self, ks, *a, **kw):
        made.append(list(ks))
        return real(self, ks, *a, **kw)

    monkeypatch.setattr(generator_state.GeneratorState, "make_many", counted)
    rng = np.random.default_rng(2)
    imgs = [mp.gpuimage(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)) for _ in range(2)]
    ks = warmup.representatives(OPS)[:4]
    warmup.make_patterns(imgs, OPS, ks, 4, 3, "NCHW", outputs=outputs)
    assert (ks in made) if outputs else (made == [])


def test_whole_image_operations_reach_the_workers_as_themselves() -> None:
    # a policy, AugMix or a choice rebuilt as an Operation calling it would be warmed as a
    # plain callable (the callables' recorder, not the arena's gathers)
    import pickle

    for op in (mp.RandAugment(2, 9), mp.AugMix(severity=2), mp.TrivialAugmentWide()):
        got = warmup._operations(pickle.loads(pickle.dumps([warmup._spec(op)])))[0]
        assert type(got) is type(op) and repr(got) == repr(op)
    # (a choice does not pickle: it warms in this process, as itself)
    choice = mp.RandomChoice([mp.Operation("fliplr"), mp.Operation("transpose")])
    assert warmup._operations([warmup._spec(choice)]) == [choice]
    plain = warmup._operations([warmup._spec(OPS[1])])[0]
    assert (plain.method, plain.probability) == ("fliplr", 0.4)


def test_augmix_representatives_cover_every_set_of_chain_structures() -> None:
    # a batch forks an AugMix into one gather per structure its branches draw
    # (``batch_augmix``): the representatives hold every set of structures an output's
    # chains draw among 4096 outputs, computed by the batch's own code
    from millipyde.training import batch_augmix, batch_ops

    op = mp.AugMix(mixture_width=3)
    ops = [mp.Operation("fliplr", probability=0.5), op]

    def sets(ks: np.ndarray) -> set:
        c = batch_ops.Ctx(0, ks, 1)
        s = batch_ops.PolicyStep(op.chain).structure(batch_augmix.ChainCtx.of(
            c, op.chain, op.mixture_width)).reshape(op.mixture_width, len(ks))
        return {frozenset(col) for col in s.T.tolist()}

    reps = warmup.representatives(ops)
    assert sets(np.arange(4096)) <= sets(np.array(reps, dtype=np.int64))
    assert len(reps) <= 2 * 2 ** (op.chain.positions + 1)  # (coin x set of structures)


@pytest.mark.exhaustive
def test_after_an_augmix_warmup_another_seed_compiles_nothing() -> None:
    # (about 40 CPU-s from a cold cache on the cpu backend: the two tests above are the CI
    # tier's)
    ops = [mp.AugMix()]
    warmup.warmup(ops, (12, 12, 3), size=16, processes=1)
    assert _compiled_after(ops, 16, 4, 20) == 0


def _dies_in_a_worker(img):
    # a callable Operation that ends any spawned process running it (a compiler or driver
    # crash stands for it), and passes its image through in the test's own process
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        os._exit(3)
    return img


def test_a_worker_that_dies_is_warned_and_its_share_warmed_here() -> None:
    ops = [mp.Operation(_dies_in_a_worker)]
    with pytest.warns(RuntimeWarning, match="worker process died"):
        got = warmup.warmup(ops, (8, 8, 3), size=8, processes=2)
    assert got["processes"] == 2 and got["patterns"] >= 1
