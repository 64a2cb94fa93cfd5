"""``Generator.batches`` of the geometric ops (rot90, translate, shear,
pad_to, zoom_out, perspective): recorded for whole batches from their definitions, each sample
equal to the Generator's own output (``next()``)."""

from __future__ import annotations

import pytest
from test_generator_batches_tv import SAME, _check, _imgs

import millipyde as mp

OPS = {
    "rot90": [mp.Operation("random_rot90"), mp.Operation("random_invert")],
    "translate": [mp.Operation("random_translate", 0.2, 0.1, p=0.7),
                  mp.Operation("vflip", p=0.5), mp.Operation("random_invert")],
    "shear": [mp.Operation("random_rot90"), mp.Operation("random_shear", 20)],
    "perspective": [mp.Operation("vflip", p=0.5), mp.Operation("random_perspective", 0.5, 0.8),
                    mp.Operation("random_rot90"), mp.Operation("invert", p=0.5)],
    "pad_to": [mp.Operation("random_pad_to", 20, 18, 30), mp.Operation("vflip", p=0.5),
               mp.Operation("random_invert")],
    "zoom_out": [mp.Operation("random_zoom_out", 60, (1.0, 2.0), 0.7),
                 mp.Operation("resize", 12, 12), mp.Operation("random_invert")],
}
ROUTE = {"rot90": "arena", "translate": "arena", "shear": "arena", "perspective": "arena",
         "pad_to": "arena", "zoom_out": "arena"}
SHAPE = {"rot90": None}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.cudasim_ok)
                                  if n == "perspective" else n for n in sorted(OPS)])
def test_same_size_batches_equal_outputs(name):
    _check(_imgs(1, SAME), OPS[name], 8, 4, ROUTE[name], shape=SHAPE.get(name))
