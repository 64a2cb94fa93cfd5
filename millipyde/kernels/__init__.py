"""The kernel registry and the engine's own scalar math.

Ops register their kernels here from their own modules (``millipyde.ops``); the code
generators read them by name through the recorded graph nodes. ``clip`` and ``convert`` are
engine math that no op owns (scikit-image's warp clip; the training batch's conversion);
``fmath`` float helpers that ops' kernels and generated code call on every target.
"""

from .registry import REGISTRY, OpSpec, affine_of

__all__ = ["REGISTRY", "OpSpec", "affine_of"]
