"""A compile worker process: compiles generated kernels for ``millipyde.training.precompile``.

The parent starts ``python -c COMMAND`` and sends jobs (pickled, length-prefixed) on its stdin;
each answer goes back on its stdout. A worker imports only what compiling a generated module
needs: ``COMMAND`` registers the ``millipyde`` package without running its ``__init__`` (which
imports the whole framework: the graph planner, networkx, the backends and their selection),
then imports this module, the code generator's loader and Numba. A job naming user-op modules
first completes the package (runs its ``__init__``): those modules use the public API.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
import time
from pathlib import Path
from typing import Any

#: The start of a worker's command: the ``millipyde`` package module, registered without
#: running its ``__init__``. ``_t`` is when the interpreter reached it (wall clock, reported).
BOOTSTRAP = (
    "import time; _t = time.time()\n"
    "import importlib.util, sys\n"
    "_s = importlib.util.find_spec('millipyde')\n"
    "_p = importlib.util.module_from_spec(_s)\n"
    "_p._lean_worker = True\n"
    "sys.modules['millipyde'] = _p\n"
)
#: The worker's command line (``python -c``), formatted with the codegen target to prepare
#: (``repr``, or None).
COMMAND = BOOTSTRAP + (
    "from millipyde.graph.codegen.compile_worker import serve\n"
    "serve({warm}, _t)\n"
)

_PREPARE = "@{jit}\ndef kernel(src, dst):\n{loop}        dst[i] = _b2f(src[i])\n"


def command(warm: str | None) -> str:
    """The ``python -c`` text of a worker that prepares for codegen target ``warm``."""
    return COMMAND.format(warm=repr(warm))


def complete_package() -> None:
    """Run ``millipyde/__init__`` in the lean worker's package module (once), so that user-op
    modules (``import millipyde as mp``; ``@mp.elementwise``) find the public API."""
    pkg = sys.modules.get("millipyde")
    if pkg is not None and pkg.__dict__.pop("_lean_worker", False):
        pkg.__spec__.loader.exec_module(pkg)


def compile_job(path: str, target: str, name: str, argtypes: tuple,
                modules: tuple[str, ...] = ()) -> float:
    """Compile ``name`` of the generated module at ``path`` for ``argtypes`` (numba writes it
    to the disk cache); the seconds it took. ``modules`` are imported first: they register
    the user ops (``@mp.elementwise`` ...) the generated module reads."""
    import importlib

    from . import loader

    t0 = time.perf_counter()
    if modules:
        complete_package()
    for m in modules:
        importlib.import_module(m)
    mod = loader.load(Path(path).read_text(), target)
    getattr(mod, name).compile(tuple(argtypes))
    return time.perf_counter() - t0


def prepare(target: str, times: dict[str, float] | None = None) -> None:
    """A worker's one-time costs, paid before its first job: the imports of generated code,
    the CUDA context, and Numba's first compile for ``target`` (its typing and target
    contexts; on CUDA NVVM and libdevice) on a small kernel in the generated dialect.
    ``times`` gets the wall-clock time at which each step ended."""
    import numpy as np
    from numba import typeof

    from . import loader
    from .target import HEADER

    times = {} if times is None else times
    sig = tuple(typeof(np.zeros(1, t)) for t in (np.uint8, np.float64))
    if target == "cuda":
        from numba import cuda

        times["imported"] = time.time()
        loop = "    i = cuda.grid(1)\n    if i < src.size:\n"
        mod = loader.load(HEADER[target] + "\n" + _PREPARE.format(jit="cuda.jit", loop=loop),
                          target)
        if OVERLAP_CONTEXT:
            _context_beside_compiler(cuda, mod.kernel.py_func, sig, times)
        else:
            cuda.current_context()
            times["context"] = time.time()
        mod.kernel.compile(sig)
    else:
        times["imported"] = time.time()
        loop = "    for i in range(src.size):\n"
        mod = loader.load(HEADER[target] + "\n" + _PREPARE.format(jit="njit", loop=loop),
                          target)
        mod.kernel.compile(sig)
    times["prepared"] = time.time()


#: A worker makes its CUDA context in a thread while its first compile runs to PTX beside
#: it (``_context_beside_compiler``); False: one after the other.
OVERLAP_CONTEXT = True


def _context_beside_compiler(cuda: Any, pyfunc: Any, sig: tuple,
                             times: dict[str, float]) -> None:
    """Make this worker's CUDA context in a thread while this thread compiles ``pyfunc`` to
    PTX for the device's compute capability (``ptx.compile_ptx``: no context needed), which
    starts numba-cuda's typing and target contexts and loads NVVM and libdevice; then wait
    for the context. The driver makes the contexts of a host's processes one at a time:
    with 8 workers the last waited ~0.8 s for its own, and its first compile only began
    then (H200, bench/RESULTS.md 2026-11-29). A failure of the context's thread is raised
    here."""
    import threading

    from .ptx import compile_ptx

    failed: list[BaseException] = []

    def make() -> None:
        try:
            cuda.current_context()
            times["context"] = time.time()
        except BaseException as err:  # raised in the preparing thread below
            failed.append(err)

    # the device's compute capability is an attribute of the device, read without a context
    cc = tuple(cuda.gpus[0].compute_capability)
    t = threading.Thread(target=make, name="millipyde-worker-context", daemon=True)
    t.start()
    try:
        compile_ptx(pyfunc, sig, cc)
    finally:
        t.join()
    if failed:
        raise failed[0]


def _send(out: Any, obj: Any) -> None:
    data = pickle.dumps(obj)
    out.write(struct.pack("<Q", len(data)) + data)
    out.flush()


def serve(warm: str | None = None, started: float | None = None) -> None:
    """The worker's loop: with ``warm`` (a codegen target) ``prepare`` for it; then say hello
    (its start-up steps: ``started``, the interpreter ran the command, ``imported``,
    ``context``, ``prepared``, as wall-clock times); then compile the jobs read from stdin and
    answer each on stdout, (True, seconds) or (False, error).

    The parent sends a job only to a worker that said hello: a job waits in its queue for the
    first worker ready rather than in the pipe of one still starting. At the end of stdin the
    worker leaves at once (``os._exit``): what it compiled is on disk, and the interpreter's
    and the CUDA context's teardown would only delay the parent's wait for it.
    """
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the answers
    times = {"started": started or time.time()}
    if warm:
        try:
            prepare(warm, times)
        except Exception as err:  # the jobs still run; their first one pays it
            print(f"millipyde precompile worker: preparing failed: {err!r}", file=sys.stderr)
    _send(proto, times)
    inp = sys.stdin.buffer
    while True:
        head = inp.read(8)
        if len(head) < 8:
            break
        got = pickle.loads(inp.read(struct.unpack("<Q", head)[0]))
        answer: tuple[bool, Any]
        try:
            answer = (True, compile_job(*got))
        except Exception as err:
            answer = (False, repr(err))
        _send(proto, answer)
    sys.stderr.flush()
    os._exit(0)
