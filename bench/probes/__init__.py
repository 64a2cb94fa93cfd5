"""Probes: scripts that take one measurement apart (host parts, kernel breakdowns, Nsight
targets, ablations). The suite is ``python -m bench {ops,pipeline,augment,fusion}`` and the
``bench_*.py`` modules beside this folder."""
