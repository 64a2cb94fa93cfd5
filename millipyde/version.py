"""The package version (imported by the kernel cache key as well as the package root)."""

__version__ = "0.1.0"
