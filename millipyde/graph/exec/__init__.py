"""Execution: run planned kernels on a device, one output or a batch of outputs at a time.

``execute`` holds the driver (``materialize``) and the registry of runners; each kernel kind's
module registers its runner with it when imported, here, before any kernel runs.
"""

from . import execute, expr, gather, stencil  # noqa: F401 - each registers its kinds' runner
