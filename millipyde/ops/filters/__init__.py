"""Filters: stencils whose taps are computed on the host."""

from . import gaussian  # noqa: F401  (definitions)
