"""Every built-in op, defined once: one module per op (with its random form), by family.

Importing this package registers every op's kernels with ``millipyde.kernels`` and its forms
(the public methods) in :data:`FORMS`; ``millipyde.image`` makes them gpuimage methods, and
``millipyde.training.batch_ops`` records them for whole batches. See ``base`` for what an op holds.
"""

from . import colour, filters, geometry, intensity, noise  # noqa: F401  (definitions)
from .base import FAMILIES, FORMS, OPS, Draws, Emit, Form, ImageKind, OpDef, Ranges, Reject

__all__ = ["FAMILIES", "FORMS", "OPS", "Draws", "Emit", "Form", "ImageKind", "OpDef", "Ranges",
           "Reject"]
