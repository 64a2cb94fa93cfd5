"""``AugMix``: torchvision v2's ``AugMix(severity, mixture_width, chain_depth, alpha)`` (the
AugMix paper's augmentation): per sample, ``mixture_width`` chains of 1-3 ops drawn from
AugMix's op list, mixed with Dirichlet(alpha) weights, then mixed with the original image by
Beta(alpha, alpha).

The chains' ops are the policies' entries (``policies.entry_call``: shears, translations and
rotation as ``warp_affine``; posterize, solarize, autocontrast, equalize; with ``all_ops``
brightness, colour, contrast, sharpness); the chains of a sample are one policy,
:class:`AugMixChain`, whose draws are the chains' parts of the AugMix's stream. On an image
(and per output) each entry is a method call on a copy of the image, materialised entry by
entry, and the mix is one generated weighted-sum kernel pass per term
(``graph.codegen.weighted``), on the device. In ``Generator.batches`` AugMix is a batched step
(``training.batch_augmix``): the batch's gather forks into the original and the chains of every
member, recorded as the policy's gated entries over the whole batch (a bounded set of kernels
whatever is drawn), and the weighted sum is one launch over the batch (``weighted.py``'s
``mix``): the per-output path's values, bit for bit where it is exact.

Draws, from the counter-based stream of (seed, sample, its index): ``t = 0, 1`` the two
Gamma(alpha) variables of the Beta weight, ``t = 2 .. 1 + k`` the Dirichlet's ``k`` Gammas
(each by the inverse of its CDF, ``scipy.special.gammaincinv``, at one uniform draw:
torchvision's distributions, not its bits), then per chain ``i`` from ``t = 2 + k + 10 i``: its
depth (``1 + floor(3 u)`` unless ``chain_depth > 0``), and per position ``j`` the op
(``+ 1 + 3 j``, torch's ``randint`` over the op list in torchvision's order), its magnitude bin
(``+ 2 + 3 j``, uniform in ``[0, severity)`` of 10-long tables) and its sign (``+ 3 + 3 j``,
negative where ``u <= 0.5`` for the signed ops).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import random as mprandom
from . import targets
from .array import ArgumentError
from .backend import ACTIVE as runtime
from .graph.exec import batch as exec_batch
from .policies import Draw, ImageOperation, Policy, check_fill, entry_call, linspace32, randint

__all__ = ["AugMix", "AUGMIX_SPACE", "AUGMIX_PARTIAL_SPACE"]

#: torchvision's ``AugMix._PARAMETER_MAX``: the magnitude tables' length
PARAMETER_MAX = 10
#: draws per chain in the stream: its depth, then (op, bin, sign) for up to three positions
CHAIN_DRAWS = 10
MAX_DEPTH = 3


def _lin(end: float) -> Callable[[int, int, int], np.ndarray]:
    return lambda n, h, w: linspace32(0.0, end, n)


def _posterize_bits(n: int, h: int, w: int) -> np.ndarray:
    # torchvision: (4 - arange(n) / ((n - 1) / 4)).round().int(), in float32, half to even
    d = np.float32((n - 1) / 4)
    v = np.float32(4) - np.arange(n).astype(np.float32) / d
    return np.round(v).astype(np.int64).astype(np.float64)


def _none(n: int, h: int, w: int) -> None:
    return None


#: torchvision v2 ``AugMix._PARTIAL_AUGMENTATION_SPACE`` (name: (magnitudes(n, h, w), signed))
AUGMIX_PARTIAL_SPACE: dict[str, tuple[Callable, bool]] = {
    "ShearX": (_lin(0.3), True),
    "ShearY": (_lin(0.3), True),
    "TranslateX": (lambda n, h, w: linspace32(0.0, w / 3.0, n), True),
    "TranslateY": (lambda n, h, w: linspace32(0.0, h / 3.0, n), True),
    "Rotate": (_lin(30.0), True),
    "Posterize": (_posterize_bits, False),
    "Solarize": (lambda n, h, w: linspace32(1.0, 0.0, n), False),
    "AutoContrast": (_none, False),
    "Equalize": (_none, False),
}
#: torchvision v2 ``AugMix._AUGMENTATION_SPACE`` (``all_ops=True``)
AUGMIX_SPACE: dict[str, tuple[Callable, bool]] = {
    **AUGMIX_PARTIAL_SPACE,
    "Brightness": (_lin(0.9), True),
    "Color": (_lin(0.9), True),
    "Contrast": (_lin(0.9), True),
    "Sharpness": (_lin(0.9), True),
}


@functools.cache
def _kernels(name: str) -> tuple:
    from .graph.codegen.weighted import weighted_kernels

    return weighted_kernels(runtime.codegen_target, runtime.simulated)


def normalised_rows(g: np.ndarray) -> np.ndarray:
    """Each row of ``g`` (n, m) over its sum, added left to right (one order for every path:
    a sample's weights are the same bits alone and in a batch); a row of zeros (every Gamma
    draw zero: only where all its uniforms are 0, a measure-zero event) as ``1 / m`` each."""
    s = g[:, 0].copy()
    for i in range(1, g.shape[1]):
        s = s + g[:, i]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = g / s[:, None]
    return np.where((s > 0)[:, None], out, 1.0 / g.shape[1])


class AugMixChain(Policy):
    """An :class:`AugMix`'s chains as a policy of ``MAX_DEPTH`` positions (fewer with a fixed
    ``chain_depth``), drawn from a chain's part of the AugMix's stream: draw ``t`` of
    :meth:`plan`'s ``u`` is the stream's draw ``chain_base(i) + t`` for chain ``i`` (its depth
    at 0, then per position its op, magnitude bin and sign); a position past the chain's drawn
    depth does not run. The per-output path reads a chain's entries from it; ``Generator.
    batches`` records every chain of every member as one policy's gated entries
    (``training.batch_augmix``). Not a user-facing Operation."""

    bins = PARAMETER_MAX
    _takes_serial = False  # its AugMix's, set by it

    def __init__(self, augmix: AugMix) -> None:
        self.augmix = augmix
        self.space = augmix.space
        self.positions = augmix.chain_depth if augmix.chain_depth > 0 else MAX_DEPTH
        super().__init__("AugMix", None, None)

    def chain_base(self, chain: int) -> int:
        """The stream's draw of chain ``chain``'s ``t = 0`` (the module doc)."""
        return 2 + self.augmix.mixture_width + CHAIN_DRAWS * chain

    def plan(self, u: Callable[[int], np.ndarray], n: int) -> list[Draw]:
        a = self.augmix
        if a.chain_depth > 0:
            depth = np.full(n, a.chain_depth)
        else:
            depth = 1 + randint(u(0), MAX_DEPTH)
        k = len(self.names)
        return [Draw(randint(u(1 + 3 * j), k), randint(u(2 + 3 * j), a.severity),
                     u(3 + 3 * j) <= 0.5, depth > j)
                for j in range(self.positions)]

    def _state_args(self) -> dict:
        return {}

    def __reduce__(self) -> tuple:
        return AugMixChain, (self.augmix,)


class AugMix(ImageOperation):
    """torchvision v2 ``AugMix``: per sample, ``mixture_width`` chains of ``chain_depth``
    ops (``-1``: 1 to 3, drawn per chain) from AugMix's op list at magnitude bins below
    ``severity``, mixed by Dirichlet(``alpha``) weights, then with the original image by
    Beta(``alpha``, ``alpha``); uint8 images truncated as torchvision's ``.to(uint8)``.

    Parameters
    ----------
    severity : int, default 3
        1..10: magnitude bins drawn from ``[0, severity)`` of 10-long tables.
    mixture_width : int, default 3
        Chains per sample (>= 1).
    chain_depth : int, default -1
        Ops per chain; <= 0 draws 1..3 per chain (torchvision's).
    alpha : float, default 1.0
        The Dirichlet's and Beta's concentration (> 0).
    all_ops : bool, default True
        Also brightness, colour, contrast and sharpness (torchvision's ``all_ops``).
    interpolation, fill
        As :class:`~millipyde.RandAugment` (bilinear sampling; fill 0 only).

    Notes
    -----
    On an image each sample's chains are method calls, then one weighted-sum kernel pass per
    term. In ``Generator.batches`` the chains of the whole batch are gated policy entries of
    at most four gathers (one per number of geometric entries drawn) and the mix one launch
    over the batch, equal to the per-output result (docs/OPS.md, "AugMix", says which batches
    stay per output). Boxes and masks are refused, as torchvision's AugMix refuses them.

    Examples
    --------
    >>> import millipyde as mp
    >>> augmix = mp.AugMix(severity=3, mixture_width=3)
    """

    def __init__(self, severity: int = 3, mixture_width: int = 3, chain_depth: int = -1,
                 alpha: float = 1.0, all_ops: bool = True, interpolation: Any = None,
                 fill: Any = None) -> None:
        from .transforms.base import interpolation as check_interpolation

        owner = "AugMix"
        self.severity = _int(severity, owner, "severity", 1, PARAMETER_MAX)
        self.mixture_width = _int(mixture_width, owner, "mixture_width", 1)
        self.chain_depth = _int(chain_depth, owner, "chain_depth", None, MAX_DEPTH)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer,
                                                             np.floating)) \
                or not np.isfinite(alpha) or alpha <= 0:
            raise ArgumentError(f"AugMix alpha must be a number > 0, got {alpha!r}")
        self.alpha = float(alpha)
        if not isinstance(all_ops, (bool, np.bool_)):
            raise ArgumentError(f"AugMix all_ops must be a bool, got {all_ops!r}")
        self.all_ops = bool(all_ops)
        if interpolation is not None:
            check_interpolation(interpolation, owner)
        check_fill(fill, owner)
        self.space = AUGMIX_SPACE if self.all_ops else AUGMIX_PARTIAL_SPACE
        self.names = tuple(self.space)
        #: the chains as a policy of the space's entries (drawn from this Operation's stream)
        self.chain = AugMixChain(self)
        self._tv = dict(severity=severity, mixture_width=mixture_width, chain_depth=chain_depth,
                        alpha=alpha, all_ops=all_ops, interpolation=interpolation, fill=fill)
        super().__init__(self)  # a callable Operation: this object (a stable repr)
        self.chain._serial = self._serial

    # -- the draws ------------------------------------------------------------------------
    def weights(self, u: Callable[[int], np.ndarray], n: int) -> np.ndarray:
        """(n, 1 + mixture_width) the mixing weights of ``n`` samples (``u(t)``: draw ``t`` of
        each): the original's first, then each chain's; each row sums to one."""
        # imported here: scipy.special costs ~0.25 s, and every Generator imports this module
        # (through millipyde.transforms) whether or not it mixes
        from scipy.special import gammaincinv

        k = self.mixture_width
        beta = normalised_rows(gammaincinv(self.alpha, np.stack([u(0), u(1)], axis=1)))
        mix = normalised_rows(gammaincinv(self.alpha, np.stack([u(2 + i) for i in range(k)],
                                                               axis=1)))
        return np.concatenate([beta[:, :1], mix * beta[:, 1:2]], axis=1)

    def draws(self, u: Callable[[int], float],
              hw: tuple[int, int]) -> tuple[np.ndarray, list[list[tuple[str, float]]]]:
        """One sample's mixing weights (the original's first, then each chain's: they sum to
        one) and chains (each a list of (op name, signed magnitude)); ``u(t)`` its draw ``t``
        (see the module doc), ``hw`` the image's size. The code a batch runs over all its
        members (:meth:`weights`, the chains' ``Policy.plan``), on one."""
        def one(t: int) -> np.ndarray:
            return np.array([u(t)], dtype=np.float64)

        sizes = np.array([hw], dtype=np.int64)
        pol = self.chain
        chains = []
        for i in range(self.mixture_width):
            base = pol.chain_base(i)
            plan = pol.plan(lambda t, base=base: one(base + t), 1)
            chains.append([(pol.names[int(d.op[0])], float(pol.magnitudes(d, sizes)[0]))
                           for d in plan if d.runs[0]])
        return self.weights(one, 1)[0], chains

    def sample_draws(self, seed: int, sample: int, index: int,
                     hw: tuple[int, int]) -> tuple[np.ndarray, list[list[tuple[str, float]]]]:
        """:meth:`draws` from the stream of (seed, sample, index)."""
        return self.draws(lambda t: mprandom.uniform01(seed, sample, index, t), hw)

    # -- Operation ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return "AugMix"

    def apply(self, x: Any, seed: int, sample: int, index: int, lift: bool = False) -> bool:
        """Draw this sample's weights and chains; run each chain on a copy of ``x`` and store
        the weighted sum in ``x``."""
        if lift:
            exec_batch.drop_gated_off(x)
        if targets.of(x._node) is not None:
            raise ArgumentError("AugMix does not move boxes, masks or keypoints (torchvision's "
                                "AugMix refuses them too)")
        h, w = x.shape[:2]
        full = float(np.iinfo(x.dtype).max) if x.dtype.kind in "ui" else 1.0
        weights, chains = self.sample_draws(seed, sample, index, (h, w))
        terms = [x]
        for chain in chains:
            y = x.clone()
            for name, m in chain:
                call = entry_call(name, m, h, w, full)
                if call is not None:
                    getattr(y, call[0])(*call[1])
                    # one kernel per entry: fused, every (op, op, op) chain drawn would
                    # compile a kernel of its own (13 + 13^2 + 13^3 of them); entry by entry
                    # the kernels are the ops' own, a bounded set
                    y._materialize()
            terms.append(y)
        device = x.device
        accumulate, finish = _kernels(runtime.name)
        shape3 = (h, w, x.shape[2] if x.ndim == 3 else 1)
        acc = runtime.empty(shape3, np.float64, device)
        bufs = [runtime.as_3d(t._materialize()) for t in terms]
        for i, (buf, wt) in enumerate(zip(bufs, weights, strict=True)):
            runtime.launch_2d(accumulate, h, w * shape3[2], device, acc, buf, float(wt), i == 0)
        dst = runtime.empty(tuple(x.shape), x.dtype, device)
        runtime.launch_2d(finish, h, w * shape3[2], device, acc, bufs[0], runtime.as_3d(dst),
                          min(shape3[2], 3), x.dtype.kind in "ui", full)
        x._bind(type(x).from_buffer(dst, device)._node)
        return True

    def _bound(self, instance: Any) -> Callable[[], Any]:
        # every entry of the space once, at its largest magnitude (the policies' check that a
        # batch may record them on each input), after the per-output path's refusal of targets
        record_all = self.chain._bound(instance)

        def check() -> None:
            if targets.of(instance._node) is not None:
                raise ArgumentError("AugMix does not move boxes, masks or keypoints "
                                    "(torchvision's AugMix refuses them too)")
            record_all()

        return check

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._tv.items())
        return f"AugMix({args})"

    def __reduce__(self) -> tuple:
        # rebuilt from its arguments (an Operation's lock and call count are per process)
        return _rebuild, (self._tv,)


def _rebuild(kwargs: dict) -> AugMix:
    return AugMix(**kwargs)


def _int(v: Any, owner: str, name: str, low: int | None, high: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or \
            (low is not None and v < low) or (high is not None and v > high):
        rng = (f"in {low}..{high}" if low is not None and high is not None
               else f">= {low}" if low is not None else f"<= {high}")
        raise ArgumentError(f"{owner} {name} must be an int {rng}, got {v!r}")
    return int(v)
