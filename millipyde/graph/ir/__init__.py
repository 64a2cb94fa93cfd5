"""Graph IR: nodes of recorded work and lazy NumPy arithmetic on them."""
