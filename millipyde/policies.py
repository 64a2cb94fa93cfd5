"""Augmentation policies: ``RandAugment``, ``TrivialAugmentWide`` and ``AutoAugment``, drawn as
torchvision v2's ``_AutoAugmentBase`` subclasses draw them.

A policy is an :class:`~millipyde.operation.Operation` (usable wherever operations are:
Pipelines, Generators, ``batches()``; callable on an image). For each sample it draws, from
the counter-based stream of (seed, sample, its own index), a short sequence of *entries*: an
op of its space (torchvision's names: ``ShearX``, ``Rotate``, ``Posterize``, ...) with a
magnitude from torchvision's table (its sign drawn where torchvision draws one). Every entry
is an existing op of the library with parameters (:func:`entry_call`): the shears,
translations and rotation are ``warp_affine`` by torchvision's affine matrix, the others
``adjust_brightness``, ``adjust_saturation``, ``adjust_contrast``, ``adjust_sharpness``,
``posterize``, ``solarize``, ``autocontrast``, ``equalize`` and ``invert``.

On an image (and per output) the entries are method calls, one by one. In
``Generator.batches`` the entries are data: every op of the space is recorded for the whole
batch, gated per sample on being drawn (``batch_ops.record_policy``), so a policy records a
fixed structure whatever is drawn (two gathers' worth: with and without a geometric entry),
not one kernel per draw.

Draws (per position ``i`` of a sample, ``t`` indexing the policy's stream): ``t = 0`` the
AutoAugment sub-policy; ``t = 1 + 4 i`` the op, ``+ 1`` the magnitude bin, ``+ 2`` the sign,
``+ 3`` the sub-policy entry's coin. Each integer draw is ``floor(u * k)`` of a uniform ``u``
(torch's ``randint``), each sign negative where ``u <= 0.5`` and each coin runs where
``u <= p`` (torchvision's ``torch.rand(()) <= p``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import random as mprandom
from . import targets
from .array import ArgumentError
from .graph.exec import batch as exec_batch
from .operation import WholeImageOperation
from .ops.geometry.affine import affine_matrix

__all__ = ["AutoAugment", "AutoAugmentPolicy", "Policy", "RandAugment", "TrivialAugmentWide",
           "entry_call", "GEOMETRIC", "linspace32"]


# --------------------------------------------------------------------------- magnitude tables

def linspace32(start: float, end: float, steps: int) -> np.ndarray:
    """``torch.linspace(start, end, steps)`` in float32 (torch's CPU kernel: the first half
    counted from ``start``, the second from ``end``), as float64 values."""
    if steps == 1:
        return np.array([np.float32(start)], dtype=np.float64)
    s, e = np.float32(start), np.float32(end)
    step = np.float32((e - s) / np.float32(steps - 1))
    i = np.arange(steps)
    lo = s + step * i.astype(np.float32)
    hi = e - step * (steps - 1 - i).astype(np.float32)
    return np.where(i < steps // 2, lo, hi).astype(np.float32).astype(np.float64)


def _posterize_bits(top: int, span: int) -> Callable[[int, int, int], np.ndarray]:
    """``(top - arange(n) / ((n - 1) / span)).round().int()`` in float32 (half to even)."""

    def table(n: int, h: int, w: int) -> np.ndarray:
        d = np.float32((n - 1) / span)
        v = np.float32(top) - np.arange(n).astype(np.float32) / d
        return np.round(v).astype(np.int64).astype(np.float64)

    return table


def _lin(end: float) -> Callable[[int, int, int], np.ndarray]:
    return lambda n, h, w: linspace32(0.0, end, n)


def _none(n: int, h: int, w: int) -> None:
    return None


_SOLARIZE = (lambda n, h, w: linspace32(1.0, 0.0, n), False)
_TRANSLATE_X = (lambda n, h, w: linspace32(0.0, 150.0 / 331.0 * w, n), True)
_TRANSLATE_Y = (lambda n, h, w: linspace32(0.0, 150.0 / 331.0 * h, n), True)

#: torchvision v2 ``RandAugment._AUGMENTATION_SPACE`` (name: (magnitudes(n, h, w), signed))
RAND_AUGMENT_SPACE: dict[str, tuple[Callable, bool]] = {
    "Identity": (_none, False),
    "ShearX": (_lin(0.3), True),
    "ShearY": (_lin(0.3), True),
    "TranslateX": _TRANSLATE_X,
    "TranslateY": _TRANSLATE_Y,
    "Rotate": (_lin(30.0), True),
    "Brightness": (_lin(0.9), True),
    "Color": (_lin(0.9), True),
    "Contrast": (_lin(0.9), True),
    "Sharpness": (_lin(0.9), True),
    "Posterize": (_posterize_bits(8, 4), False),
    "Solarize": _SOLARIZE,
    "AutoContrast": (_none, False),
    "Equalize": (_none, False),
}

#: torchvision v2 ``TrivialAugmentWide._AUGMENTATION_SPACE``
TRIVIAL_AUGMENT_SPACE: dict[str, tuple[Callable, bool]] = {
    "Identity": (_none, False),
    "ShearX": (_lin(0.99), True),
    "ShearY": (_lin(0.99), True),
    "TranslateX": (_lin(32.0), True),
    "TranslateY": (_lin(32.0), True),
    "Rotate": (_lin(135.0), True),
    "Brightness": (_lin(0.99), True),
    "Color": (_lin(0.99), True),
    "Contrast": (_lin(0.99), True),
    "Sharpness": (_lin(0.99), True),
    "Posterize": (_posterize_bits(8, 6), False),
    "Solarize": _SOLARIZE,
    "AutoContrast": (_none, False),
    "Equalize": (_none, False),
}

#: torchvision v2 ``AutoAugment._AUGMENTATION_SPACE``
AUTO_AUGMENT_SPACE: dict[str, tuple[Callable, bool]] = {
    "ShearX": (_lin(0.3), True),
    "ShearY": (_lin(0.3), True),
    "TranslateX": _TRANSLATE_X,
    "TranslateY": _TRANSLATE_Y,
    "Rotate": (_lin(30.0), True),
    "Brightness": (_lin(0.9), True),
    "Color": (_lin(0.9), True),
    "Contrast": (_lin(0.9), True),
    "Sharpness": (_lin(0.9), True),
    "Posterize": (_posterize_bits(8, 4), False),
    "Solarize": _SOLARIZE,
    "AutoContrast": (_none, False),
    "Equalize": (_none, False),
    "Invert": (_none, False),
}

#: torchvision's ImageNet AutoAugment policy: 25 sub-policies of two (op, p, magnitude bin)
IMAGENET_POLICY: tuple = (
    (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
    (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
    (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
    (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
    (("Equalize", 0.4, None), ("Rotate", 0.8, 8)),
    (("Solarize", 0.6, 3), ("Equalize", 0.6, None)),
    (("Posterize", 0.8, 5), ("Equalize", 1.0, None)),
    (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)),
    (("Equalize", 0.6, None), ("Posterize", 0.4, 6)),
    (("Rotate", 0.8, 8), ("Color", 0.4, 0)),
    (("Rotate", 0.4, 9), ("Equalize", 0.6, None)),
    (("Equalize", 0.0, None), ("Equalize", 0.8, None)),
    (("Invert", 0.6, None), ("Equalize", 1.0, None)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
    (("Color", 0.8, 8), ("Solarize", 0.8, 7)),
    (("Sharpness", 0.4, 7), ("Invert", 0.6, None)),
    (("ShearX", 0.6, 5), ("Equalize", 1.0, None)),
    (("Color", 0.4, 0), ("Equalize", 0.6, None)),
    (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
    (("Invert", 0.6, None), ("Equalize", 1.0, None)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
)

#: the entries that move pixels (one ``warp_affine`` each)
GEOMETRIC = frozenset({"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"})


# --------------------------------------------------------------------------- entries as ops

def _shear_matrix(shear_deg: tuple[float, float]) -> np.ndarray:
    # torchvision's ``center=[0, 0]``: the top-left corner of the top-left pixel, (-0.5, -0.5)
    # in pixel-centre coordinates, which ``affine_matrix`` takes as the centre of a 0 x 0 image
    return affine_matrix(0, 0, 0.0, (0.0, 0.0), 1.0, shear_deg)


def entry_call(name: str, magnitude: float, h: int, w: int,
               full: float) -> tuple[str, tuple] | None:
    """The op (a gpuimage method) and arguments of entry ``name`` at ``magnitude`` on an
    ``h`` x ``w`` image whose full intensity is ``full``, as torchvision's
    ``_apply_image_or_video_transform`` calls its functionals; None for ``Identity``."""
    m = float(magnitude)
    if name == "Identity":
        return None
    if name == "ShearX":
        return "warp_affine", (_shear_matrix((math.degrees(math.atan(m)), 0.0)),)
    if name == "ShearY":
        return "warp_affine", (_shear_matrix((0.0, math.degrees(math.atan(m)))),)
    if name == "TranslateX":
        return "warp_affine", (affine_matrix(h, w, 0.0, (float(int(m)), 0.0), 1.0, (0.0, 0.0)),)
    if name == "TranslateY":
        return "warp_affine", (affine_matrix(h, w, 0.0, (0.0, float(int(m))), 1.0, (0.0, 0.0)),)
    if name == "Rotate":
        # torchvision's rotate is its affine by -angle (counter-clockwise)
        return "warp_affine", (affine_matrix(h, w, -m, (0.0, 0.0), 1.0, (0.0, 0.0)),)
    if name == "Brightness":
        return "adjust_brightness", (1.0 + m,)
    if name == "Color":
        return "adjust_saturation", (1.0 + m,)
    if name == "Contrast":
        return "adjust_contrast", (1.0 + m,)
    if name == "Sharpness":
        return "adjust_sharpness", (1.0 + m,)
    if name == "Posterize":
        return "posterize", (int(m),)
    if name == "Solarize":
        return "solarize", (full * m,)
    if name == "AutoContrast":
        return "autocontrast", ()
    if name == "Equalize":
        return "equalize", ()
    if name == "Invert":
        return "invert", ()
    raise ArgumentError(f"no policy entry named {name!r}")


#: the method every geometric entry calls (its matrix is a member's sampler slot in a batch)
GEOMETRIC_METHOD = "warp_affine"
#: the gpuimage methods ``entry_call`` may call (a batch checks no input's class overrides one)
ENTRY_METHODS = frozenset({"warp_affine", "adjust_brightness", "adjust_saturation",
                           "adjust_contrast", "adjust_sharpness", "posterize", "solarize",
                           "autocontrast", "equalize", "invert"})


class Draw:
    """One position of ``n`` samples' draws: the op index (into the policy's ``names``), its
    magnitude bin, its sign and whether it runs."""

    def __init__(self, op: np.ndarray, bin: np.ndarray, negative: np.ndarray,
                 runs: np.ndarray) -> None:
        self.op, self.bin, self.negative, self.runs = op, bin, negative, runs


def randint(u: np.ndarray, k: int) -> np.ndarray:
    """``floor(u * k)`` of uniforms ``u``, below ``k`` (torch's ``randint``)."""
    return np.minimum((u * k).astype(np.int64), k - 1)


# --------------------------------------------------------------------------- the policies

class AutoAugmentPolicy(enum.Enum):
    """torchvision's ``AutoAugmentPolicy`` names (the ImageNet policy is implemented)."""

    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"


def check_fill(fill: Any, owner: str) -> None:
    """torchvision's ``fill`` (None: 0): the sampler reads 0 outside the image."""
    if fill is None:
        return
    vals = fill.values() if isinstance(fill, dict) else [fill]
    for v in vals:
        flat = v if isinstance(v, (Sequence, np.ndarray)) and not isinstance(v, str) else [v]
        for x in flat:
            if x is not None and (isinstance(x, bool) or not isinstance(
                    x, (int, float, np.integer, np.floating)) or float(x) != 0.0):
                raise ArgumentError(f"{owner} fill must be None or 0 (the sampler reads 0 "
                                    f"outside the image; another fill is not supported yet), "
                                    f"got {fill!r}")


class ImageOperation(WholeImageOperation):
    """An Operation that draws per sample and applies to an image as a whole, with no coin of
    its own (the policies, :class:`millipyde.augmix.AugMix`)."""

    def skip(self, x: Any, seed: int, sample: int, index: int, lift: bool = False) -> None:
        """Nothing (no coin of its own)."""


class Policy(ImageOperation):
    """An augmentation policy drawn per sample (the base of :class:`RandAugment`,
    :class:`TrivialAugmentWide` and :class:`AutoAugment`; see the module doc).

    Subclasses give ``space`` (torchvision's augmentation space), ``positions`` (entries per
    sample) and :meth:`plan` (the draws). ``bins`` is the table length magnitudes are read
    from.
    """

    space: dict[str, tuple[Callable, bool]]
    positions: int
    bins: int

    def __init__(self, owner: str, interpolation: Any, fill: Any) -> None:
        from .transforms.base import interpolation as check_interpolation

        if interpolation is not None:
            check_interpolation(interpolation, owner)
        check_fill(fill, owner)
        super().__init__(self)  # a callable Operation: this object (a stable repr)
        self.names = tuple(self.space)
        self._signed = np.array([self.space[name][1] for name in self.names])
        self._tables: dict[tuple[int, int], np.ndarray] = {}  # (h, w) -> ``tables``

    # -- the draws --------------------------------------------------------------------------
    def plan(self, u: Callable[[int], np.ndarray], n: int) -> list[Draw]:
        """Per position, the draws of ``n`` samples (``u(t)``: draw ``t`` of each)."""
        raise NotImplementedError

    def geometric_count(self, u: Callable[[int], np.ndarray], n: int) -> np.ndarray:
        """(n,) how many geometric entries each sample draws: its batch structure (the
        gather's sampler slots), one of at most ``positions + 1``."""
        geo = np.array([name in GEOMETRIC for name in self.names])
        count = np.zeros(n, dtype=np.int64)
        for d in self.plan(u, n):
            count += (d.runs & geo[d.op]).astype(np.int64)
        return count

    def magnitudes(self, d: Draw, hw: np.ndarray) -> np.ndarray:
        """(n,) the magnitude of each sample's entry at one position (0 where the op has no
        table), signed as drawn; ``hw`` the (n, 2) sizes the entry sees."""
        n = len(d.op)
        out = np.zeros(n)
        if not n:
            return out
        hw = np.asarray(hw, dtype=np.int64).reshape(n, 2)
        # (the sizes a policy sees are few: one after a resized crop)
        if (hw == hw[0]).all():
            sizes, which = [tuple(hw[0].tolist())], None
        else:
            uniq, which = np.unique(hw, axis=0, return_inverse=True)
            sizes, which = [tuple(v) for v in uniq.tolist()], which.reshape(-1)
        for u, (h, w) in enumerate(sizes):
            at = slice(None) if which is None else np.flatnonzero(which == u)
            out[at] = self.tables(h, w)[d.op[at], d.bin[at]]
        # signed: negative where drawn so (a table's 0 too: -0.0, as ``np.where(neg, -m, m)``)
        return np.where(self._signed[d.op] & d.negative, -out, out)

    def tables(self, h: int, w: int) -> np.ndarray:
        """(ops, bins) every op's magnitude table for an ``h`` x ``w`` image (0 where it has
        none), made once per size: the values ``space``'s functions give."""
        got = self._tables.get((h, w))
        if got is None:
            got = np.zeros((len(self.names), self.bins))
            for k, name in enumerate(self.names):
                table = self.space[name][0](self.bins, h, w)
                if table is not None:
                    got[k] = table
            got.flags.writeable = False
            if len(self._tables) >= 256:  # (many input sizes: kept bounded)
                self._tables.clear()
            self._tables[(h, w)] = got
        return got

    def entries(self, seed: int, sample: int, index: int,
                hw: tuple[int, int]) -> list[tuple[str, float]]:
        """One sample's entries in order: (op name, signed magnitude) of those that run, for
        an image of size ``hw`` (the size does not change along a policy)."""
        plan = self.plan(lambda t: np.array([mprandom.uniform01(seed, sample, index, t)]), 1)
        sizes = np.array([hw], dtype=np.int64)
        out = []
        for d in plan:
            if d.runs[0]:
                out.append((self.names[int(d.op[0])], float(self.magnitudes(d, sizes)[0])))
        return out

    # -- Operation --------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return type(self).__name__

    def apply(self, x: Any, seed: int, sample: int, index: int, lift: bool = False) -> bool:
        """Draw this sample's entries and apply them in order, as method calls."""
        if lift:
            # the calls read x's value as the per-image path computes it (no gated-off ops;
            # the rebuilt value keeps x's targets, as ``Operation.apply``)
            kept = targets.of(x._node)
            exec_batch.drop_gated_off(x)
            if kept is not None and targets.of(x._node) is None:
                targets.attach(x._node, kept)
        h, w = x.shape[:2]
        full = float(np.iinfo(x.dtype).max) if x.dtype.kind in "ui" else 1.0
        for name, m in self.entries(seed, sample, index, (h, w)):
            call = entry_call(name, m, h, w, full)
            if call is not None:
                getattr(x, call[0])(*call[1])
        return True


    def _bound(self, instance: Any) -> Callable[[], Any]:
        # every op of the space once, at its largest magnitude: what a batch may record on
        # each input (the arena recorder's argument check runs it once per input)
        def record_all() -> None:
            h, w = instance.shape[:2]
            full = float(np.iinfo(instance.dtype).max) if instance.dtype.kind in "ui" else 1.0
            for name, (fn, _) in self.space.items():
                table = fn(self.bins, h, w)
                call = entry_call(name, 0.0 if table is None else float(table[-1]), h, w, full)
                if call is not None:
                    getattr(instance, call[0])(*call[1])

        return record_all

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._state_args().items())
        return f"{type(self).__name__}({args})"

    def __reduce__(self) -> tuple:
        # rebuilt from its arguments (an Operation's lock and call count are per process)
        return _rebuild, (type(self), self._state_args())

    def _state_args(self) -> dict:
        raise NotImplementedError


def _rebuild(cls: type, kwargs: dict) -> Policy:
    return cls(**kwargs)


def _int_arg(v: Any, owner: str, name: str, low: int, high: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low or \
            (high is not None and v > high):
        rng = f">= {low}" if high is None else f"in {low}..{high}"
        raise ArgumentError(f"{owner} {name} must be an int {rng}, got {v!r}")
    return int(v)


class RandAugment(Policy):
    """torchvision v2 ``RandAugment``: ``num_ops`` entries per sample, each an op drawn
    uniformly from its 14 (``Identity``, shears, translations, rotation, brightness, colour,
    contrast, sharpness, posterize, solarize, autocontrast, equalize), at bin ``magnitude`` of
    its ``num_magnitude_bins``-long table, the sign drawn with probability 1/2 where
    torchvision draws one.

    Parameters
    ----------
    num_ops : int, default 2
    magnitude : int, default 9
        The bin (0 .. ``num_magnitude_bins - 1``).
    num_magnitude_bins : int, default 31
    interpolation : InterpolationMode, optional
        millipyde samples bilinearly (an explicit NEAREST warns, as the namespace's other
        classes).
    fill : None or 0
        What the geometric ops read outside the image (0 only).

    Examples
    --------
    >>> import millipyde as mp
    >>> policy = mp.RandAugment(num_ops=2, magnitude=9)
    """

    space = RAND_AUGMENT_SPACE

    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation: Any = None, fill: Any = None) -> None:
        owner = "RandAugment"
        self.num_ops = _int_arg(num_ops, owner, "num_ops", 0)
        self.bins = _int_arg(num_magnitude_bins, owner, "num_magnitude_bins", 2)
        self.magnitude = _int_arg(magnitude, owner, "magnitude", 0, self.bins - 1)
        self.positions = self.num_ops
        self._tv = dict(num_ops=num_ops, magnitude=magnitude,
                        num_magnitude_bins=num_magnitude_bins, interpolation=interpolation,
                        fill=fill)
        super().__init__(owner, interpolation, fill)

    def plan(self, u: Callable[[int], np.ndarray], n: int) -> list[Draw]:
        """Per position (``num_ops`` of them), the draws of ``n`` samples (``u(t)``: draw
        ``t`` of each, as :meth:`Policy.plan`).

        Position ``i`` takes its op uniformly from ``names`` (draw ``1 + 4 i``), the fixed
        ``magnitude`` bin, a negative sign where draw ``3 + 4 i`` is at most 0.5, and always
        runs.

        Returns
        -------
        list of Draw
            One per position, each holding (n,) arrays.
        """
        k = len(self.names)
        return [Draw(randint(u(1 + 4 * i), k), np.full(n, self.magnitude),
                     u(3 + 4 * i) <= 0.5, np.ones(n, dtype=bool))
                for i in range(self.positions)]

    def _state_args(self) -> dict:
        return dict(self._tv)


class TrivialAugmentWide(Policy):
    """torchvision v2 ``TrivialAugmentWide``: one entry per sample, its op drawn uniformly from
    its 14 and its magnitude bin uniformly from ``num_magnitude_bins`` (torchvision's wide
    tables), the sign drawn with probability 1/2 where torchvision draws one.

    Parameters
    ----------
    num_magnitude_bins : int, default 31
    interpolation, fill
        As :class:`RandAugment`.
    """

    space = TRIVIAL_AUGMENT_SPACE
    positions = 1

    def __init__(self, num_magnitude_bins: int = 31, interpolation: Any = None,
                 fill: Any = None) -> None:
        self.bins = _int_arg(num_magnitude_bins, "TrivialAugmentWide", "num_magnitude_bins", 2)
        self._tv = dict(num_magnitude_bins=num_magnitude_bins, interpolation=interpolation,
                        fill=fill)
        super().__init__("TrivialAugmentWide", interpolation, fill)

    def plan(self, u: Callable[[int], np.ndarray], n: int) -> list[Draw]:
        """The one position's draws of ``n`` samples (``u(t)``: draw ``t`` of each, as
        :meth:`Policy.plan`): an op uniform over ``names`` (draw 1),
        a magnitude bin uniform over ``num_magnitude_bins`` (draw 2), a negative sign where
        draw 3 is at most 0.5; it always runs.

        Returns
        -------
        list of Draw
            A single Draw of (n,) arrays.
        """
        return [Draw(randint(u(1), len(self.names)), randint(u(2), self.bins),
                     u(3) <= 0.5, np.ones(n, dtype=bool))]

    def _state_args(self) -> dict:
        return dict(self._tv)


class AutoAugment(Policy):
    """torchvision v2 ``AutoAugment`` with its ImageNet policy: one of 25 sub-policies drawn
    uniformly per sample, each of its two entries run with its own probability, at its bin of
    torchvision's 10-long tables, the sign drawn with probability 1/2 where torchvision draws
    one.

    Parameters
    ----------
    policy : AutoAugmentPolicy or str, default IMAGENET
        Only the ImageNet policy is implemented (others raise ``NotImplementedError``).
    interpolation, fill
        As :class:`RandAugment`.
    """

    space = AUTO_AUGMENT_SPACE
    positions = 2
    bins = 10

    def __init__(self, policy: Any = AutoAugmentPolicy.IMAGENET, interpolation: Any = None,
                 fill: Any = None) -> None:
        value = getattr(policy, "value", policy)
        if value not in ("imagenet", "cifar10", "svhn"):
            raise ArgumentError(f"AutoAugment policy must be an AutoAugmentPolicy (or its "
                                f"name), got {policy!r}")
        if value != "imagenet":
            raise NotImplementedError(f"AutoAugment policy {value!r} is not implemented yet "
                                      "(the ImageNet policy is)")
        self.policy = AutoAugmentPolicy(value)
        self._tv = dict(policy=value, interpolation=interpolation, fill=fill)
        super().__init__("AutoAugment", interpolation, fill)
        index = {name: k for k, name in enumerate(self.names)}
        sub = IMAGENET_POLICY
        # (25, 2) op indices, probabilities and bins (-1: no table)
        self._ops = np.array([[index[e[0]] for e in s] for s in sub], dtype=np.int64)
        self._probs = np.array([[e[1] for e in s] for s in sub])
        self._bins = np.array([[-1 if e[2] is None else e[2] for e in s] for s in sub],
                              dtype=np.int64)

    def plan(self, u: Callable[[int], np.ndarray], n: int) -> list[Draw]:
        """Per position of the sub-policy drawn for each of ``n`` samples, its draws
        (``u(t)``: draw ``t`` of each, as :meth:`Policy.plan`).

        Draw 0 picks a sub-policy of the ImageNet policy per sample; its entry ``i`` gives
        the op and magnitude bin (bin 0 where the op has no magnitude), a negative sign
        where draw ``3 + 4 i`` is at most 0.5, and runs where draw ``4 + 4 i`` is at most
        the entry's probability.

        Returns
        -------
        list of Draw
            One per position, each holding (n,) arrays.
        """
        s = randint(u(0), len(self._ops))
        return [Draw(self._ops[s, i], np.maximum(self._bins[s, i], 0), u(3 + 4 * i) <= 0.5,
                     u(4 + 4 * i) <= self._probs[s, i])
                for i in range(self.positions)]

    def _state_args(self) -> dict:
        return dict(self._tv)
