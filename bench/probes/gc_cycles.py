"""A pytest plugin listing what cyclic garbage collections found in a run, by type.

    PYTHONPATH=bench/probes python3 -m pytest -p gc_cycles -q tests/test_data_generator.py
    # the counts go to $GC_CYCLES_OUT (default gc_cycles.txt), appended per run

Every object a collection finds unreachable is kept in ``gc.garbage`` instead of freed
(``gc.DEBUG_SAVEALL``), so a destructor that crashes when the collector runs it never runs;
at the end the extension and library types among them are counted (builtins left out). Used
to find the decoded images held in cycles with their stream (bench/RESULTS.md, "The
garbage-collection segfault").
"""

from __future__ import annotations

import collections
import gc
import os
from typing import Any


def pytest_configure(config: Any) -> None:
    gc.set_debug(gc.DEBUG_SAVEALL)


def pytest_unconfigure(config: Any) -> None:
    gc.collect()
    counts: collections.Counter[str] = collections.Counter()
    for o in gc.garbage:
        t = type(o)
        module = getattr(t, "__module__", None) or "?"
        if module != "builtins":
            counts[f"{module}.{t.__qualname__}"] += 1
    with open(os.environ.get("GC_CYCLES_OUT", "gc_cycles.txt"), "a") as f:
        f.write(f"--- {len(gc.garbage)} objects in cycles\n")
        for name, n in counts.most_common(60):
            f.write(f"{n:6d} {name}\n")
