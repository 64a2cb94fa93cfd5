"""The suite's two tiers.

``make test`` (README's test command, what CI runs) takes every test except those marked
``exhaustive``; ``make test-full`` takes them all. A case is ``exhaustive`` when the CI tier
already drives the same code path with another case: another op through the same generated
kernel family, another dtype or layout of a writer the CI tier compiles, another seed. Each op,
each kernel kind and each public path keeps at least one case in the CI tier on each backend
(cpu, CUDASIM, PTX); the full tier adds the rest of the product (bench/RESULTS.md "CI tiers"
and "CI: PTX and batch-equality repeats to the full tier" list what moved and what it cost).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

EXHAUSTIVE = pytest.mark.exhaustive


def tiered(cases: Iterable[Any], ci: Callable[[Any], bool] | Iterable[int], *,
           several: bool = False, ids: Callable[[Any], str] | None = None) -> list[Any]:
    """``cases`` as ``pytest.param``s, those outside the CI tier marked ``exhaustive``.

    Parameters
    ----------
    cases : iterable
        The parametrisation's values (tuples for several argument names).
    ci : callable or iterable of int
        Which cases the CI tier keeps: a predicate on a case, or the cases' indices.
    several : bool
        Each case is a tuple of the values of several argument names.
    ids : callable, optional
        Test ids of the cases (``pytest.param(id=...)``).
    """
    cases = list(cases)
    indices = None if callable(ci) else frozenset(ci)
    out = []
    for i, case in enumerate(cases):
        in_ci = ci(case) if indices is None else i in indices
        values = case if several else (case,)
        out.append(pytest.param(*values, marks=() if in_ci else (EXHAUSTIVE,),
                                id=None if ids is None else ids(case)))
    return out


def cpu_backend() -> bool:
    """The suite runs on the cpu backend, where each distinct generated kernel compiles for
    seconds (CUDASIM compiles nothing: its cases cost simulated threads instead)."""
    import millipyde as mp

    return mp.backend() == "cpu"


def exhaustive_on_cpu(test: Any) -> Any:
    """Mark ``test`` exhaustive on the cpu backend only: a batch-path check whose recording
    CUDASIM runs in the CI tier at a fraction of the cost (the cpu backend compiles every
    distinct kernel it meets), while the CI tier's other cases compile the cpu forms."""
    return EXHAUSTIVE(test) if cpu_backend() else test


def simulator() -> bool:
    """The suite runs under the CUDA simulator (every simulated GPU thread a Python thread)."""
    import millipyde as mp

    return mp.backend() == "cudasim"


def exhaustive_in_simulator(test: Any) -> Any:
    """Mark ``test`` exhaustive under the CUDA simulator only: a whole-batch equality whose
    simulated threads cost tens of seconds there, while the cpu backend's CI tier runs the
    same recording and the simulator's CI tier the cheaper cases of its file."""
    return EXHAUSTIVE(test) if simulator() else test
