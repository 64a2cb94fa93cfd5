"""millipyde benchmarks: ``python -m bench ops|pipeline|augment`` (see PERFORMANCE.md)."""
