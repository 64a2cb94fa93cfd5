"""Graph IR: nodes of recorded work, lazy NumPy arithmetic on them, and values held as
members of a computed batch buffer (made into nodes when read)."""
