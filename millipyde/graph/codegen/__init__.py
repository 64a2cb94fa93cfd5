"""Code generation: Numba source for one target from a fused kernel signature, cached on disk."""
