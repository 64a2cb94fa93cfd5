"""``permute_channels`` / ``channel_shuffle``: torchvision's ``permute_channels`` and
``RandomChannelPermutation`` on the R, G and B channels (alpha stays last)."""

import itertools
from typing import Any

import numpy as np

from ...kernels.registry import pixelwise
from ..base import Draws, Emit, ImageKind, columns, define

#: the six orders of (R, G, B), numbered as the kernel's parameter
PERMUTATIONS = tuple(itertools.permutations(range(3)))


@pixelwise(nparams=1, name="permute_channels")
def pick_channels(r, g, b, full, k, _b, _d):
    """Output channel ``i`` is input channel ``PERMUTATIONS[k][i]`` (torchvision's
    ``image[permutation]``)."""
    if k == 0.0:
        return r, g, b
    if k == 1.0:
        return r, b, g
    if k == 2.0:
        return g, r, b
    if k == 3.0:
        return g, b, r
    if k == 4.0:
        return b, r, g
    return b, g, r


PERMUTE = define("permute_channels", "colour", [pick_channels],
                 reference="torchvision.transforms.v2.functional.permute_channels")


@PERMUTE.form()
def permute_channels(kind: ImageKind, permutation: Any) -> tuple | None:
    """torchvision ``permute_channels``: output channel ``i`` is input channel
    ``permutation[i]``, a permutation of (0, 1, 2); alpha stays. A no-op on grey images."""
    try:
        perm = tuple(int(v) for v in permutation)
        ok = perm in PERMUTATIONS and all(float(v) == int(v) for v in permutation)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"permutation must be a permutation of (0, 1, 2), got {permutation!r}")
    return (float(PERMUTATIONS.index(perm)),) if kind.is_colour else None


def _sample(args: tuple | None, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    # every order equally likely, as torch.randperm(3); drawn on grey images too
    k = np.minimum(np.floor(d.u(0) * 6.0), 5.0)
    return [] if args is None else [Emit("permute_channels", columns(k, n=len(hw)))]


@PERMUTE.form(random=True, sample=_sample)
def channel_shuffle(kind: ImageKind) -> tuple | None:
    """torchvision ``RandomChannelPermutation`` on R, G, B: one of the six orders, uniformly
    per image (alpha stays last). A no-op on grey images."""
    return () if kind.is_colour else None
