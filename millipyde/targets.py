"""Targets that follow an image through geometric ops: boxes, labels, keypoints and a mask.

In the style of torchvision's tv_tensors and albumentations' targets, kept small: attach them to
a gpuimage with :meth:`gpuimage.set_targets`, apply methods, Operations, Pipelines or a
Generator as usual, and read them back (``img.boxes``, ``img.labels``, ``img.keypoints``,
``img.keypoints_visible``, ``img.mask``, or ``img.targets``). They live on the host (a few
numbers per image; the mask is resampled with NumPy) and move when an op is recorded, with the
op's own parameters, so random ops move image and targets alike.

Conventions: boxes are ``(N, 4)`` ``xyxy`` in pixel edges (a box over columns 2..5 is
``x0 = 2, x1 = 6``); through an op a box becomes the tight axis-aligned box of its four moved
corners, clipped to the image, and boxes left with less than ``min_area`` square pixels are
dropped with their labels. Keypoints are ``(K, 2)`` ``(x, y)`` pixel positions (centres at whole
numbers); those that leave the image stay in the list, marked invisible. The mask is an
integer ``H x W`` array resampled nearest-neighbour (0 outside), untouched by colour ops.

Targets are kept per recorded value (a weak map from graph node to targets): a clone shares
them, which is how a Generator's outputs inherit their input's targets. So their arrays are
read-only (each is the library's own copy): writing ``out.boxes[:] = 0`` raises instead of
changing the input's boxes and every later output's; set new targets with ``set_targets``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .checks import number
from .kernels import OpSpec
from .kernels.registry import matrix_of

_BY_NODE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: the mapping under ``_BY_NODE`` (weak references to targets): empty while no node has
#: targets, which the per-op path checks without a call (``gpuimage._record``)
ANY = _BY_NODE.data


@dataclass(frozen=True)
class Targets:
    """Boxes (with labels), keypoints (with visibility) and a mask of one image."""

    boxes: np.ndarray
    labels: np.ndarray
    keypoints: np.ndarray
    visible: np.ndarray
    mask: np.ndarray | None
    min_area: float = 1.0

    def __post_init__(self) -> None:
        # shared by clones and Generator outputs (module doc): never written in place
        for a in (self.boxes, self.labels, self.keypoints, self.visible, self.mask):
            if a is not None:
                a.flags.writeable = False

    def moved(self, spec: OpSpec, params: tuple, shape: tuple[int, ...],
              out_shape: tuple[int, ...]) -> Targets:
        """These targets after geometric op ``spec`` from ``shape`` to ``out_shape``."""
        if spec.kind == "user_map":
            what = "a user index map" if spec.user is not None else "a non-affine map"
            raise ValueError(f"{spec.name}: targets cannot follow {what} (its inverse is "
                             "unknown); set them after it")
        h, w = shape[0], shape[1]
        oh, ow = out_shape[0], out_shape[1]
        # (a homography's third row is not (0, 0, 1): positions are divided by it)
        m = matrix_of(spec, h, w, tuple(float(p) for p in params[:spec.nparams]))
        try:
            fwd = np.linalg.inv(m)  # input (y, x) -> output (y, x), pixel centres
        except np.linalg.LinAlgError:
            raise ValueError(f"{spec.name}: targets cannot follow a map that is not "
                             f"invertible (it sends the image to a line or a point); "
                             f"parameters {list(params)}") from None
        boxes, labels = _boxes(self.boxes, self.labels, fwd, oh, ow, self.min_area)
        kp = self.keypoints
        if len(kp):
            yx = fwd @ np.vstack([kp[:, ::-1].T, np.ones(len(kp))])
            kp = (yx[:2] / yx[2])[::-1].T.copy()
        visible = self.visible & _inside(kp, oh, ow)
        mask = None
        if self.mask is not None:
            mask = _nearest(self.mask, m, oh, ow, edge=spec.mode == "edge"
                            and spec.kind == "sampler", fill=0)
        return replace(self, boxes=boxes, labels=labels, keypoints=kp, visible=visible,
                       mask=mask)


def _inside(kp: np.ndarray, h: int, w: int) -> np.ndarray:
    if not len(kp):
        return np.zeros(0, bool)
    return (kp[:, 0] >= -0.5) & (kp[:, 0] < w - 0.5) & (kp[:, 1] >= -0.5) & (kp[:, 1] < h - 0.5)


def _boxes(boxes: np.ndarray, labels: np.ndarray, fwd: np.ndarray, h: int, w: int,
           min_area: float) -> tuple[np.ndarray, np.ndarray]:
    if not len(boxes):
        return boxes, labels
    x0, y0, x1, y1 = boxes.T
    # corners of the covered pixels' squares, in pixel-centre coordinates
    cy = np.stack([y0, y0, y1, y1], 1) - 0.5
    cx = np.stack([x0, x1, x0, x1], 1) - 0.5
    # (a homography divides by its third row; an affine map's is 1: the same numbers)
    tz = fwd[2, 0] * cy + fwd[2, 1] * cx + fwd[2, 2]
    ty = (fwd[0, 0] * cy + fwd[0, 1] * cx + fwd[0, 2]) / tz + 0.5
    tx = (fwd[1, 0] * cy + fwd[1, 1] * cx + fwd[1, 2]) / tz + 0.5
    out = np.stack([np.clip(tx.min(1), 0, w), np.clip(ty.min(1), 0, h),
                    np.clip(tx.max(1), 0, w), np.clip(ty.max(1), 0, h)], 1)
    keep = (out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1]) >= min_area
    return out[keep], labels[keep]


def _nearest(mask: np.ndarray, m: np.ndarray, oh: int, ow: int, edge: bool,
             fill: int) -> np.ndarray:
    """``mask`` resampled at ``m @ (y, x, 1)`` per output pixel, nearest neighbour."""
    h, w = mask.shape
    yy, xx = np.mgrid[0:oh, 0:ow].astype(np.float64)
    with np.errstate(all="ignore"):
        sz = m[2, 0] * yy + m[2, 1] * xx + m[2, 2]
        fy = (m[0, 0] * yy + m[0, 1] * xx + m[0, 2]) / sz + 0.5
        fx = (m[1, 0] * yy + m[1, 1] * xx + m[1, 2]) / sz + 0.5
    # a homography's far positions (or its line at infinity) read outside
    far = ~(np.isfinite(fy) & np.isfinite(fx) & (np.abs(fy) < 2.0 ** 40)
            & (np.abs(fx) < 2.0 ** 40))
    sy = np.floor(np.where(far, -2.0, fy)).astype(np.int64)
    sx = np.floor(np.where(far, -2.0, fx)).astype(np.int64)
    if edge:
        return mask[np.clip(sy, 0, h - 1), np.clip(sx, 0, w - 1)]
    ok = (sy >= 0) & (sy < h) & (sx >= 0) & (sx < w)
    out = np.full((oh, ow), fill, dtype=mask.dtype)
    out[ok] = mask[sy[ok], sx[ok]]
    return out


def make(shape: tuple[int, ...], boxes: Any = None, labels: Any = None, keypoints: Any = None,
         mask: Any = None, min_area: float = 1.0) -> Targets:
    """Checked :class:`Targets` for an image of ``shape`` (ValueError naming the argument)."""
    b = np.zeros((0, 4)) if boxes is None else _floats(boxes, "boxes", "(N, 4) xyxy")
    if b.size == 0:
        b = np.zeros((0, 4))
    if b.ndim != 2 or b.shape[1] != 4 or not np.isfinite(b).all():
        raise ValueError(f"boxes must be an (N, 4) array of finite xyxy values, got shape "
                         f"{b.shape}")
    if (b[:, 2] < b[:, 0]).any() or (b[:, 3] < b[:, 1]).any():
        raise ValueError("boxes must be xyxy with x0 <= x1 and y0 <= y1")
    # copies: the caller's arrays stay theirs (and writable), these become read-only
    try:
        lab = np.arange(len(b)) if labels is None else np.array(labels).reshape(-1)
    except (TypeError, ValueError) as err:
        raise ValueError(f"labels must be an array of one label per box: {err}") from None
    if len(lab) != len(b):
        raise ValueError(f"labels must have one entry per box: {len(lab)} for {len(b)} boxes")
    k = np.zeros((0, 2)) if keypoints is None else _floats(keypoints, "keypoints",
                                                            "(K, 2) (x, y)")
    if k.size == 0:
        k = np.zeros((0, 2))
    if k.ndim != 2 or k.shape[1] != 2 or not np.isfinite(k).all():
        raise ValueError(f"keypoints must be an (K, 2) array of finite (x, y), got shape "
                         f"{k.shape}")
    mk = None
    if mask is not None:
        try:
            mk = np.array(mask)
        except (TypeError, ValueError) as err:
            raise ValueError(f"mask must be an integer array: {err}") from None
        if mk.shape != tuple(shape[:2]) or mk.dtype.kind not in "iub":
            raise ValueError(f"mask must be an integer array of the image's height x width "
                             f"{tuple(shape[:2])}, got {mk.dtype} {mk.shape}")
    area = number(min_area, "min_area")
    if not area >= 0:
        raise ValueError(f"min_area must be >= 0, got {area}")
    return Targets(b, lab, k, _inside(k, shape[0], shape[1]), mk, area)


def _floats(value: Any, name: str, form: str) -> np.ndarray:
    """``value`` as a 2-D float64 array (a copy); ``ValueError`` naming ``name`` when it is
    not numbers (strings, objects, ragged lists, complex numbers)."""
    try:
        raw = np.array(value, ndmin=2)
        if raw.dtype.kind not in "biuf":
            raise TypeError(f"of {raw.dtype}")
        return raw.astype(np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be an {form} array of real numbers, got "
                         f"{type(value).__name__} ({err})") from None


def attach(node: Any, targets: Targets) -> None:
    """Make ``targets`` the targets of the value ``node``."""
    _BY_NODE[node] = (targets, targets)


def of(node: Any) -> Targets | None:
    """The targets of value ``node`` (None: none attached upstream)."""
    entry = _BY_NODE.get(node)
    if entry is None:
        return None
    # a node a batched Generator recorded gated off (its coin said skip) left its input as is
    return entry[1] if node.gated_off else entry[0]


def following(old: Any, spec: OpSpec, params: tuple, out_shape: tuple[int, ...]
              ) -> tuple[Targets, Targets] | None:
    """The targets entry of ``spec`` applied to the value ``old`` (giving ``out_shape``), or
    None when ``old`` has none; computed before the op is recorded, so an op the targets
    cannot follow (``ValueError``) leaves the image as it was."""
    t = of(old)
    if t is None:
        return None
    if spec.kind in ("index_map", "sampler", "user_map"):
        return t.moved(spec, params, old.shape, out_shape), t
    return t, t


def store(new: Any, entry: tuple[Targets, Targets]) -> None:
    """Make ``entry`` (from :func:`following`) the targets of the recorded value ``new``."""
    _BY_NODE[new] = entry

