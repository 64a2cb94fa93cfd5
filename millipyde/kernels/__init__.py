"""Built-in kernels, declared once as scalar Python and registered by kind.

Importing this package registers every built-in op in :data:`REGISTRY`.
"""

from . import color, filters, geometry, intensity, noise  # noqa: F401  (registration side effects)
from .registry import REGISTRY, OpSpec, affine_of

__all__ = ["REGISTRY", "OpSpec", "affine_of"]
