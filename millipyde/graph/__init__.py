"""The lazy operation graph, in four layers that only import downwards.

- ``ir``: nodes and the lazy NumPy arithmetic that records them;
- ``codegen``: kernel source for one target from a fused signature (no graph knowledge);
- ``plan``: partition of the pending graph into kernels, and the footprints they read;
- ``exec``: running a plan (one kernel kind at a time, batches of same-shape outputs);
- ``explain``: what materializing would launch, drawn and tabulated.
"""
