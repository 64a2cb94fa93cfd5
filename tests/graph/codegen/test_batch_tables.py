"""Per-block chain tables of the batched gathers (``codegen.batch_tables``): where they apply,
and batches through them equal to the per-output Generator, bit for bit."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from generator_reference import batch_spec, eager_outputs

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.codegen import batch_tables, batch_writer, loader
from millipyde.graph.codegen.gather_sig import GatherSig
from millipyde.training.batches import convert_reference

cudasim_ok = pytest.mark.cudasim_ok
WRITER = GatherSig(3, "chain", True, True, "", pre=("colorize",),
                   lut_stages=(False, False), clip=False)


def test_writers_choose_the_table_per_member() -> None:
    assert batch_tables.chain_tables(WRITER, "cuda")
    assert not batch_tables.chain_tables(WRITER, "cpu")
    assert not batch_tables.chain_tables(dataclasses.replace(WRITER, cin=4), "cuda")
    assert not batch_tables.chain_tables(dataclasses.replace(WRITER, pre=()), "cuda")
    text = batch_writer.gather_writer_source(WRITER, "cuda", False, True, 3, "NCHW")
    # the chain once per table entry, once per tap of the inline body (4 taps, 3 channels)
    # and once per channel of the inline body of members whose rotation is gated off
    assert text.count("_f_colorize(") == 3 + 12 + 3
    assert "cton_ = full == 255.0" in text and "if cton_ and gs_ == 0.0:" in text
    # the other writers are unchanged
    lut = dataclasses.replace(WRITER, mode="lut", pre=(), lut_stages=(True, False))
    assert "ct_" not in batch_writer.gather_writer_source(lut, "cuda", False, True, 3, "NCHW")


def test_writers_without_a_sampler_store_the_table_values() -> None:
    # no sampler: the table body stores its lookups directly; the writer runs the member's
    # pixels through the table loop or the inline loop, chosen once per member
    sig = dataclasses.replace(WRITER, sampler=False, pre=("brightness",))
    text = batch_writer.gather_writer_source(sig, "cuda", False, True, 3, "NCHW")
    loops = text.rsplit("\n        if cton_:\n", 1)[1]
    fast, slow = loops.split("\n        else:\n", 1)
    assert fast.count("_ = ct_[_u32(") == 3 and "_f_brightness(" not in fast
    assert "ct_[" not in slow and slow.count("_f_brightness(") == 3
    assert fast.count("while x < w:") == slow.count("while x < w:") == 1


# brightness alone first (a flat gather before the stencil), colorize before the rotation (the
# writer's taps), every op gated by a coin; and a chain whose writer has no sampler
CHAINS = {
    "sampler": [mp.Operation("transpose", probability=0.3),
                mp.Operation("fliplr", probability=0.5),
                mp.Operation("random_brightness", -0.3, 0.6, probability=0.8),
                mp.Operation("random_gaussian", 0, 1, probability=0.5),
                mp.Operation("random_colorize", [0.5, 1.5], [0.5, 1.5], [0.5, 1.5],
                             probability=0.6),
                mp.Operation("random_rotate", 0, 120, probability=0.7)],
    "no sampler": [mp.Operation("fliplr", probability=0.5),
                   mp.Operation("random_brightness", -0.2, 0.2)],
}


@cudasim_ok
@pytest.mark.skipif(not runtime.caps.grid_launches, reason="GPU kernels: cuda, hip or cudasim")
@pytest.mark.parametrize("chain", list(CHAINS))
def test_batches_through_chain_tables_equal_outputs(chain: str) -> None:
    ops = CHAINS[chain]
    rng = np.random.default_rng(3)
    imgs = [mp.gpuimage(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)) for _ in range(3)]
    outputs, seed = 12, 11
    want = eager_outputs(imgs, ops, outputs, seed)
    spec = batch_spec(6)
    gen = mp.Generator(imgs, ops, outputs=outputs, seed=seed)
    with gen.batches(6, with_indices=True) as bs:
        for batch, outs, _ in bs:
            arr = np.asarray(batch)
            for i, k in enumerate(outs.tolist()):
                assert np.array_equal(arr[i], convert_reference(want[k], spec)), k
    heads = [inspect.getsource(m).splitlines()[0] for m in list(loader.LOADED.values())]
    sampler = f"sampler={chain == 'sampler'}"
    assert any("chain-tables" in h and sampler in h for h in heads), \
        f"no writer with {sampler} ran through chain tables"
    if chain == "sampler":
        assert any("gather rows=" in h and " tabled" in h for h in heads)
