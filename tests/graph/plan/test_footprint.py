"""Bounds inference: a stencil read by one fused gather computes only what that gather reads.

``footprint.spans`` is checked against a brute-force replay of the gather's reads (every tap of
every output pixel, as ``gather_body.gather_body`` computes them) on any backend. The end-to-end
tests run the one-pass GPU tile kernel with its spans (real GPUs, and CUDASIM with variants
forced on) and compare with fusion off, byte for byte.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import millipyde as mp
from millipyde.backend import ACTIVE as runtime
from millipyde.graph.exec import execute
from millipyde.graph.exec import variants as exec_variants
from millipyde.graph.plan import footprint, schedule
from millipyde.graph.plan.schedule import Gather, Stencil


def _gather_after_stencil(x: mp.gpuimage) -> tuple[Stencil, Gather]:
    kernels = schedule.plan(x._node)
    assert [k.kind for k in kernels] == ["stencil", "gather"], kernels
    return kernels[0], kernels[1]


def _reads(k: Gather) -> np.ndarray:
    """(n, 2) source (row, col) of every tap the gather kernel loads."""
    h, w = k.output.shape[:2]
    y, x = (a.ravel().astype(float) for a in np.mgrid[0:h, 0:w])
    p = np.rint(k.P)
    if k.A is None:
        taps = [(y, x)]
        mh, mw = k.source.shape[:2]
    else:
        a = k.A
        iy = np.floor(a[0, 0] * y + a[0, 1] * x + a[0, 2])
        ix = np.floor(a[1, 0] * y + a[1, 1] * x + a[1, 2])
        taps = [(iy + dy, ix + dx) for dy, dx in itertools.product((0, 1), (0, 1))]
        mh, mw = k.mid
    out = []
    for ty, tx in taps:
        ok = (ty >= 0) & (ty < mh) & (tx >= 0) & (tx < mw)
        ty, tx = ty[ok], tx[ok]
        out.append(np.stack([p[0, 0] * ty + p[0, 1] * tx + p[0, 2],
                             p[1, 0] * ty + p[1, 1] * tx + p[1, 2]], 1))
    return np.concatenate(out).astype(np.int64)


CHAINS = [
    [("rotate", 45)], [("fliplr",), ("rotate", 45)], [("rotate", 30), ("fliplr",)],
    [("transpose",), ("rotate", -70)], [("rotate", 90)], [("rotate", 5)], [("fliplr",)],
    [("transpose",)], [("rotate", 180), ("transpose",)], [("rotate", 45), ("rgb2grey",)],
]


@pytest.mark.parametrize("shape", [(40, 30), (31, 57), (1, 9), (9, 1), (64, 64)])
@pytest.mark.parametrize("ops", CHAINS, ids=lambda o: "+".join(str(v) for x in o for v in x))
@pytest.mark.parametrize("band", [1, 4, 16])
def test_spans_hold_every_read(shape: tuple[int, int], ops, band: int) -> None:
    x = mp.gpuimage(np.zeros((*shape, 4), np.uint8))
    x.gaussian(1)
    for name, *args in ops:
        getattr(x, name)(*args)
    _, g = _gather_after_stencil(x)
    spans = footprint.spans(g, band)
    reads = _reads(g)
    sh, sw = g.source.shape[:2]
    assert spans.shape == ((sh + band - 1) // band, 2)
    assert ((reads >= 0) & (reads < [sh, sw])).all()
    b = reads[:, 0] // band
    inside = (spans[b, 0] <= reads[:, 1]) & (reads[:, 1] < spans[b, 1])
    assert inside.all(), f"reads outside the spans: {reads[~inside][:5]}"


def test_spans_leave_out_what_a_rotation_never_reads() -> None:
    # 45 degrees about the centre of a tall image: the four corners of the source are unread
    x = mp.gpuimage(np.zeros((400, 300, 4), np.uint8))
    x.gaussian(1)
    x.rotate(45)
    _, g = _gather_after_stencil(x)
    spans = footprint.spans(g, 16)
    computed = int((spans[:, 1] - spans[:, 0]).sum()) * 16
    assert computed < 0.9 * 400 * 300
    assert spans[0, 0] > 0 and spans[0, 1] < 300  # the first band: only its middle


gpu = pytest.mark.skipif(not runtime.caps.grid_launches, reason="GPU tile kernel")


def _chain(img: np.ndarray, fuse: bool, angle: float, hold: bool = False) -> tuple:
    x = mp.gpuimage(img)
    x.gaussian(1.5)
    x.adjust_gamma(2)
    held = x.clone() if hold else None
    x.fliplr()
    x.rotate(angle)
    x.rgb2grey()
    kernels = schedule.plan(x._node, fuse=fuse)
    stencil_out = kernels[0].output
    with schedule.fusion(fuse):
        out = np.asarray(x)
    return out, stencil_out, held


@gpu
@pytest.mark.cudasim_ok
@pytest.mark.parametrize("angle", [45, 20, -100])
def test_partial_stencil_equals_fusion_off(angle: float, monkeypatch) -> None:
    monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: True)
    monkeypatch.setattr(execute, "FOOTPRINT_MIN_PIXELS", 0)
    calls = []
    real = footprint.spans
    monkeypatch.setattr(footprint, "spans", lambda k, band: calls.append(k) or real(k, band))
    img = np.random.default_rng(2).integers(0, 256, (29, 23, 4), dtype=np.uint8)
    fused, node, _ = _chain(img, True, angle)
    assert len(calls) == 1, "the stencil did not get its reader's spans"
    # the partial output never became the node's value
    assert not node.materialized
    off, _, _ = _chain(img, False, angle)
    np.testing.assert_array_equal(fused, off)


@gpu
@pytest.mark.cudasim_ok
def test_a_second_reader_gets_the_whole_stencil(monkeypatch) -> None:
    monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: True)
    monkeypatch.setattr(execute, "FOOTPRINT_MIN_PIXELS", 0)
    calls = []
    monkeypatch.setattr(footprint, "spans", lambda k, band: calls.append(k))
    img = np.random.default_rng(3).integers(0, 256, (21, 17, 4), dtype=np.uint8)
    _, _, held = _chain(img, True, 45, hold=True)
    assert calls == []
    want = mp.gpuimage(img)
    want.gaussian(1.5)
    want.adjust_gamma(2)
    np.testing.assert_array_equal(np.asarray(held), np.asarray(want))


@gpu
@pytest.mark.cudasim_ok
def test_small_images_compute_the_whole_stencil(monkeypatch) -> None:
    # below FOOTPRINT_MIN_PIXELS the host time of the spans would cost more than they save
    monkeypatch.setattr(exec_variants, "gpu_variants_enabled", lambda: True)
    calls = []
    monkeypatch.setattr(footprint, "spans", lambda k, band: calls.append(k))
    img = np.random.default_rng(4).integers(0, 256, (21, 17, 4), dtype=np.uint8)
    fused, node, _ = _chain(img, True, 45)
    assert calls == [] and node.materialized
