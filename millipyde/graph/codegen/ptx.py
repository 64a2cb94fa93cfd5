"""PTX of generated CUDA kernels on a machine without a GPU (CI's PTX tests, the probes).

The generated CUDA modules declare their device functions ``forceinline`` (``target.py``):
numba lowers each one on its own and NVVM inlines it into the kernel. numba-cuda lowers a
device function for the compute capability of the *current device*, which it asks the CUDA
driver for, even inside ``cuda.compile_ptx(..., cc=...)``; without a driver that raises
``CudaSupportError``. :func:`compile_ptx` answers that question with the ``cc`` asked for, so
the PTX tests compile the very form the GPU runs.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

#: the GPU the PTX tests compile for (the H100/H200's sm_90)
CC = (9, 0)

# a call instruction, predicated or not, up to its ``;`` (its operands span lines)
_CALL = re.compile(r"^\s*(?:@!?%\w+\s+)?call\b[^;]*;", re.M)


class _Device:
    """What numba-cuda reads of the current device while it compiles device functions."""

    def __init__(self, cc: tuple[int, int]) -> None:
        self.compute_capability = cc


@contextlib.contextmanager
def device_compute_capability(cc: tuple[int, int]) -> Iterator[None]:
    """While inside, numba-cuda's dispatchers see a current device of compute capability ``cc``.

    Held under numba-cuda's compiler lock (every compile takes it), so no compile of another
    thread runs meanwhile. A device function numba compiles inside is kept (per argument types)
    for later compiles of this process: compile for one ``cc`` per process.
    """
    from numba.cuda import dispatcher
    from numba.cuda.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        real = dispatcher.get_current_device
        dispatcher.get_current_device = lambda: _Device(cc)
        try:
            yield
        finally:
            dispatcher.get_current_device = real


def compile_ptx(pyfunc: Any, argtypes: tuple, cc: tuple[int, int] = CC) -> str:
    """The PTX of kernel ``pyfunc`` (a generated kernel's ``py_func``) for ``argtypes`` and
    compute capability ``cc``, its device functions compiled as on a GPU; no driver needed."""
    from numba import cuda

    with device_compute_capability(cc):
        ptx, _ = cuda.compile_ptx(pyfunc, argtypes, cc=cc)
    return ptx


def calls(ptx: str) -> list[str]:
    """The Numba-compiled functions ``ptx`` calls: empty when NVVM inlined every device
    function. (libdevice's own helpers, ``__internal_accurate_pow`` of ``pow``, may stay
    calls: the same code in every kernel.)"""
    found = []
    for m in _CALL.finditer(ptx):
        # what is left without the parenthesised return value and arguments: call, its
        # modifiers (.uni), the callee
        rest = re.sub(r"\([^)]*\)", " ", m.group(0)[m.group(0).index("call") + 4:])
        found += [w for w in re.findall(r"[A-Za-z_$][\w$]*", rest) if w != "uni"][:1]
    # Numba mangles what it compiles (``_ZN`` + the qualified name)
    return [name for name in found if name.startswith("_ZN")]
