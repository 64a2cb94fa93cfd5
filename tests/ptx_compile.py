"""PTX compiles for the PTX tests: the GPU's form of every kernel, no device function left as
a call."""

from __future__ import annotations

from typing import Any

from millipyde.graph.codegen.ptx import CC, calls, compile_ptx


def ptx_of(pyfunc: Any, argtypes: tuple, cc: tuple[int, int] = CC) -> str:
    """The PTX of kernel ``pyfunc`` for ``argtypes`` (no driver needed), checked to call no
    Numba-compiled function: a device function NVVM did not inline would contract its
    multiply-adds apart from the kernel's (and cost a call per pixel)."""
    ptx = compile_ptx(pyfunc, argtypes, cc)
    assert calls(ptx) == [], f"device functions left as calls: {calls(ptx)}"
    return ptx
