"""What a Generator's outputs and batches are compared with in the batch tests."""

from __future__ import annotations

import numpy as np

import millipyde as mp
from millipyde.batches import BatchSpec


def eager_outputs(imgs, ops, outputs, seed):
    """Output k of a Generator computed eagerly, image by image (no batch of any kind)."""
    out = []
    for k in range(outputs):
        x = mp.gpuimage(np.asarray(imgs[k % len(imgs)]))
        for j, op in enumerate(ops):
            op.apply(x, seed, k, j)
        out.append(np.asarray(x))
    return out


def batch_spec(size, **kw):
    """The checked ``BatchSpec`` of ``Generator.batches(size, **kw)``."""
    args = dict(shape=None, layout="NCHW", dtype="float32", mean=None, std=None, channels=3,
                drop_last=False, with_indices=False)
    args.update(kw)
    return BatchSpec.check(size, *args.values())
