"""``fancy_pca`` / ``random_fancy_pca``: AlexNet's PCA colour augmentation ("fancy PCA",
albumentations' ``FancyPCA``, the ``Lighting`` transform of the PyTorch and Torch ImageNet
recipes): every RGB pixel gets ``eigvecs @ (alpha * eigvals)`` added, one offset per image.

The eigen basis is a **fixed** one, ImageNet's by default (the constants AlexNet's recipe
published through fb.resnet.torch and every PyTorch ImageNet ``Lighting`` after it), or a
dataset's own (``eigvals``, ``eigvecs``): AlexNet computed its PCA once over the whole training
set. albumentations instead runs a PCA of each image (its 3x3 colour covariance); that needs a
per-image statistic with nine cross-channel sums and an eigen decomposition per image before
the offsets are known, which the statistic ops (two parameters, per-channel rows) do not hold,
so the per-image form is not here. With a fixed basis the op is a per-channel offset: it runs
as ``rgb_shift``'s kernel (one elementwise value map, a uint8 table), so it adds no kernel to
a fused chain and no kernel of its own to compile.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import Draws, Emit, ImageKind, colour_only, columns, define, number
from .rgb_shift import RGB_SHIFT

#: ImageNet's RGB eigenvalues (values in [0, 1]), largest first
IMAGENET_EIGVALS = (0.2175, 0.0188, 0.0045)
#: ImageNet's RGB eigenvectors, one per column (row ``i``: channel R, G, B)
IMAGENET_EIGVECS = ((-0.5675, 0.7192, 0.4009),
                    (-0.5808, -0.0045, -0.8140),
                    (-0.5836, -0.6948, 0.4203))

FANCY_PCA = define("fancy_pca", "colour", [RGB_SHIFT.kernels[0]],
                   reference="AlexNet PCA lighting (ImageNet basis; albumentations.FancyPCA "
                             "runs a per-image PCA)")


def _basis(eigvals: Any, eigvecs: Any) -> tuple:
    """The checked eigenvalues (3,) and eigenvectors (3, 3, one per column) as tuples of
    floats; None: ImageNet's."""
    vals = _floats(IMAGENET_EIGVALS if eigvals is None else eigvals, "eigvals")
    vecs = _floats(IMAGENET_EIGVECS if eigvecs is None else eigvecs, "eigvecs")
    if vals.shape != (3,) or not np.isfinite(vals).all() or (vals < 0).any():
        raise ValueError(f"eigvals must be three finite numbers >= 0, got {eigvals!r}")
    if vecs.shape != (3, 3) or not np.isfinite(vecs).all():
        raise ValueError(f"eigvecs must be a 3 x 3 array of finite numbers (one eigenvector "
                         f"per column), got {eigvecs!r}")
    return tuple(vals.tolist()), tuple(vecs.ravel().tolist())


def _floats(value: Any, name: str) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers, got {value!r}") from None


def offsets(alpha: np.ndarray, vals: tuple, vecs: tuple, full: float) -> list:
    """The R, G, B offsets (each (n,)) of weights ``alpha`` (n, 3): ``eigvecs @ (alpha *
    eigvals)`` in image units (times ``full``); ``vecs`` row-major. Written as sums of products
    per image so that one image and a batch give the same bits (a matrix product may not)."""
    w = [alpha[:, j] * vals[j] for j in range(3)]
    return [(vecs[3 * i] * w[0] + vecs[3 * i + 1] * w[1] + vecs[3 * i + 2] * w[2]) * full
            for i in range(3)]


def _sample_fixed(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    alpha, vals, vecs = args
    n = len(hw)
    return [Emit(FANCY_PCA.kernels[0],
                 columns(*offsets(np.tile(np.array(alpha), (n, 1)), vals, vecs, kind.full), n=n))]


@FANCY_PCA.form(sample=_sample_fixed)
def fancy_pca(kind: ImageKind, alpha: Any, eigvals: Any = None,
              eigvecs: Any = None) -> tuple:
    """Add ``eigvecs @ (alpha * eigvals)`` (values in [0, 1], so times 255 on uint8) to every
    RGB pixel and clamp: AlexNet's PCA lighting with the weights ``alpha`` given (one number
    for all three components, as albumentations' drawn ``alpha``, or one per component;
    ``random_fancy_pca`` draws them). The basis
    is ImageNet's (``IMAGENET_EIGVALS``, ``IMAGENET_EIGVECS``) unless ``eigvals`` (3,) and
    ``eigvecs`` (3, 3, one eigenvector per column) give a dataset's own. RGB(A) images only;
    alpha untouched; integer images rounded."""
    colour_only(kind, "fancy_pca")
    if isinstance(alpha, (list, tuple, np.ndarray)):
        if len(alpha) != 3:
            raise ValueError(f"alpha must be one number or three, got {len(alpha)} values")
        a = tuple(number(v, f"alpha[{i}]") for i, v in enumerate(alpha))
    else:
        a = (number(alpha, "alpha"),) * 3
    vals, vecs = _basis(eigvals, eigvecs)
    return a, vals, vecs


def normals(d: Draws) -> np.ndarray:
    """Three standard normal draws per image (n, 3), Box-Muller from its draws 0..3."""
    r0 = np.sqrt(-2.0 * np.log1p(-d.u(0)))
    r1 = np.sqrt(-2.0 * np.log1p(-d.u(2)))
    t0, t1 = 2.0 * np.pi * d.u(1), 2.0 * np.pi * d.u(3)
    return np.stack([r0 * np.cos(t0), r0 * np.sin(t0), r1 * np.cos(t1)], axis=1)


def _sample_random(args: tuple, d: Draws, hw: np.ndarray, kind: ImageKind) -> list:
    std, vals, vecs = args
    n = len(hw)
    return [Emit(FANCY_PCA.kernels[0],
                 columns(*offsets(std * normals(d), vals, vecs, kind.full), n=n))]


@FANCY_PCA.form(random=True, sample=_sample_random)
def random_fancy_pca(kind: ImageKind, alpha_std: float = 0.1, eigvals: Any = None,
                     eigvecs: Any = None) -> tuple:
    """AlexNet's PCA lighting ("fancy PCA"): ``fancy_pca`` with the three weights drawn per
    image from N(0, ``alpha_std``) (AlexNet's and the ``Lighting`` recipes' one draw per
    component; albumentations draws one for all three). ImageNet's basis unless
    ``eigvals``/``eigvecs`` give a dataset's own. RGB(A) images only."""
    colour_only(kind, "random_fancy_pca")
    s = number(alpha_std, "alpha_std")
    if s < 0:
        raise ValueError(f"alpha_std must be >= 0, got {s}")
    vals, vecs = _basis(eigvals, eigvecs)
    return s, vals, vecs
