"""The per-target pieces of generated kernel text: headers, kernel decorators, 2-D loops.

One body text serves every target: only the loop header differs (``prange`` rows on the CPU,
a grid-stride 2-D loop under ``@cuda.jit`` for CUDA, HIP and the simulator). ``_rint_clip``,
the rounding every integer output goes through, is defined here once for all generators.
"""

from __future__ import annotations

import re

# ``_b2f(b)``: an unsigned integer below 2**32 (a uint8 value, a table entry) as float64. On a
# GPU, a 64-bit conversion runs at a quarter of the FMA rate; writing b into the low word of
# 2**52's bit pattern and subtracting 2**52 is a register move and one add, and exact. The
# simulator has no libdevice, so there it is the plain conversion.
B2F_HIGH_WORD = 0x43300000  # 2**52's high word: its low word is then the integer itself
TWO52 = 4503599627370496.0
_B2F_CUDA = (
    "if _config.ENABLE_CUDASIM:\n"
    "    @_dev\n"
    "    def _b2f(b):\n"
    "        return float(b)\n"
    # the simulator runs these in Python, where numba's integer types refuse to wrap
    "    def _u(v):\n"
    "        return int(v) & 0xFFFFFFFFFFFFFFFF\n"
    "    def _u32(v):\n"
    "        return int(v) & 0xFFFFFFFF\n"
    "else:\n"
    "    @_dev\n"
    "    def _b2f(b):\n"
    f"        return _ld.hiloint2double({B2F_HIGH_WORD:#x}, b) - {TWO52!r}\n"
)

#: the CUDA device functions' decorator (``backend.cuda.CudaBackend.device_decorator``)
DEVICE_DECORATOR = "cuda.jit(device=True, forceinline=True)"

HEADER = {
    "cpu": (
        "import math\n"
        "import numpy as np\n"
        "from numba import njit, prange\n"
        "from numba import uint32 as _u32\n"
        "from numba import uint64 as _u\n"
        "import millipyde.ops  # registers the built-in kernels\n"
        "from millipyde.kernels import REGISTRY as _R\n"
        # one dispatcher per function and process, NumPy's error model as on GPUs (a
        # division by zero in a kernel, a user op's too, gives inf or NaN, never an exception)
        "from millipyde.graph.codegen import cpu_devices\n"
        "_dev = cpu_devices.device\n"
        "_dev3 = cpu_devices.inlined\n"
        "\n@_dev\ndef _b2f(b):\n    return float(b)\n"
    ),
    "cuda": (
        "import math\n"
        "from numba import cuda\n"
        "from numba import uint32 as _u32\n"
        "from numba import uint64 as _u\n"
        "import millipyde.ops  # registers the built-in kernels\n"
        "from millipyde.kernels import REGISTRY as _R\n"
        "from numba import config as _config\n"
        "from numba.cuda import libdevice as _ld\n"
        # NVVM inlines the device functions (LLVM alwaysinline): a call left in a kernel
        # would contract its multiply-adds differently from the other kernels' (per-output
        # and batched results must be bit-identical). Numba's own IR-level inlining
        # (inline=True) gave the same PTX at 2.5x the compile time. The simulator's jit
        # takes no forceinline.
        "if _config.ENABLE_CUDASIM:\n"
        "    _dev = cuda.jit(device=True)\n"
        "else:\n"
        f"    _dev = {DEVICE_DECORATOR}\n"
        "_dev3 = _dev\n"
        + _B2F_CUDA
    ),
}


def jit_decorator(target: str, sim: bool) -> str:
    if target == "cpu":
        return "@njit(parallel=True, nogil=True, cache=True, error_model='numpy')"
    return "@cuda.jit" if sim else "@cuda.jit(cache=True)"


#: Registers per thread the batch kernels may use on GPUs, by kind (``None``: as many as the
#: compiler takes): the flat batched gathers, the batch writers, the axis-map gathers
#: (``batch_perm``), the arena gathers (``arena``) and the arena statistic gathers (``stat``).
#: The writers' loads are chains (source byte, its table entry, the blend): resident warps
#: hide their latency, and at 80 registers three 256-thread blocks fit an SM where two did
#: (bench/RESULTS.md, 2026-11-23); at 64 four do, which the writers bound by their tap loads
#: (L1TEX waits, half their stalls) take over the few spills (colour writer 0.555 -> 0.523
#: ms, grey 0.21 -> 0.19 a batch; bench/RESULTS.md, 2026-11-24). A link option: the PTX, so
#: the arithmetic, is the same. Benchmarks set these to compare.
MAX_REGISTERS: dict[str, int | None] = {"gather": None, "writer": 64, "axis": None,
                                        "arena": None, "stat": None}


def capped(target: str, sim: bool, kind: str) -> str:
    """The kernel decorator, with ``MAX_REGISTERS[kind]`` on real GPUs."""
    dec, regs = jit_decorator(target, sim), MAX_REGISTERS.get(kind)
    if not regs or target == "cpu" or sim:
        return dec
    return dec[:-1] + f", max_registers={int(regs)})"


def loop_2d(target: str, h: str, w: str, body: str, step: str = "sx_") -> str:
    """Wrap ``body`` (uses y, x) in the target's loop over an ``h`` x ``w`` output.

    On GPUs ``x`` advances by ``step`` per trip (the grid's width unless a trip covers more).
    """
    ind = "            "
    body = "".join(ind + line + "\n" if line else "\n" for line in body.splitlines())
    if target == "cpu":
        return f"    for y in prange({h}):\n        for x in range({w}):\n" + body
    # grid-stride while loops: a range with a step costs a 64-bit division (its trip count)
    # each time it starts, so once per row
    return (
        "    x0, y0 = cuda.grid(2)\n"
        "    sx_, sy_ = cuda.gridsize(2)\n"
        "    y = y0\n"
        f"    while y < {h}:\n"
        "        x = x0\n"
        f"        while x < {w}:\n" + body
        + f"            x += {step}\n"
        "        y += sy_\n"
    )


def indent_text(text: str, n: int) -> str:
    pad = " " * n
    return "".join(pad + line + "\n" if line else "\n" for line in text.splitlines())


def loop_3d(target: str, nb: str, h: str, w: str, per_image: str, body: str,
             jam: bool = False) -> str:
    """Loops over images ``b`` < ``nb``, rows ``y`` < ``h`` and columns ``x`` < ``w``.

    ``per_image`` (uses ``b``) runs before the rows of image ``b``: once per image on GPUs, once
    per (image, row) on the CPU, whose single ``prange`` spans images and rows together.
    ``jam``: on the CPU, the columns two at a time (``cpu_jam``: for bodies whose pixel is a
    long chain of dependent operations).
    """
    if target == "cpu":
        if jam:
            from .cpu_jam import pixel_loop

            cols = indent_text(pixel_loop("x", w, body), 8)
        else:
            cols = f"        for x in range({w}):\n" + indent_text(body, 12)
        return (f"    for t_ in prange({nb} * {h}):\n"
                f"        b = t_ // {h}\n"
                f"        y = t_ - b * {h}\n"
                + indent_text(per_image, 8) + cols)
    # while loops: a range with a step divides for its trip count each time it starts
    return ("    x0, y0, b0 = cuda.grid(3)\n"
            "    sx_, sy_, sb_ = cuda.gridsize(3)\n"
            "    b = b0\n"
            f"    while b < {nb}:\n"
            + indent_text(per_image, 8)
            + "        y = y0\n"
            f"        while y < {h}:\n"
            "            x = x0\n"
            f"            while x < {w}:\n" + indent_text(body, 16)
            + "                x += sx_\n"
            "            y += sy_\n"
            "        b += sb_\n")


def loop_2d_items(target: str, h: str, w: str, load: str, body: str, n: int) -> str:
    """GPU grid-stride loop over an ``h`` x ``w`` output, ``n`` pixels of a row per trip.

    A trip issues the ``n`` loads (``load``, which sets ``pk`` from ``y``, ``x``) before any of
    the ``n`` ``body`` copies (which read ``pk``, ``y``, ``x``) that use them: with one pixel a
    trip, each thread had one load in flight and waited for it. The grid covers ``w / n``
    columns (:func:`gather_items`).
    """
    def own(text: str, j: int) -> str:
        return re.sub(r"\bpk\b", f"pk{j}_", re.sub(r"\bx\b", f"x{j}_", text))

    lines = []
    for j in range(n):
        lines += [f"x{j}_ = x + {j} * sx_", f"pk{j}_ = _u32(0)", f"if x{j}_ < {w}:",
                  "    " + own(load, j)]
    for j in range(n):
        lines.append(f"if x{j}_ < {w}:")
        lines += ["    " + line for line in own(body, j).splitlines()]
    return loop_2d(target, h, w, "\n".join(lines), f"{n} * sx_")


RINT_CLIP = '''
@_dev
def _rint_clip(v, full):
    # numpy.rint then clip to the integer range [lo, full], clipped first (the same: the bounds
    # are whole numbers). lo is 0 for unsigned types and -full - 1 for signed ones, whose maxima
    # (2**7-1, 2**15-1, 2**31-1, 2**63-1 as float64) are no unsigned type's: ``full`` names
    # the type. Below 2**52 in magnitude, adding (subtracting) 2**52 leaves no fraction bits, so
    # the FPU's own round half to even does rint: two adds instead of floors, which GPUs run at
    # a quarter of the FMA rate. Comparisons, not min/max (whose NaN rules cost GPUs ten
    # instructions each): NaN gives lo.
    lo = 0.0
    if (full == 127.0 or full == 32767.0 or full == 2147483647.0
            or full == 9223372036854775808.0):
        lo = -full - 1.0
    c = v if v > lo else lo
    if c > full:
        c = full
    if c >= 0.0:
        if c < 4503599627370496.0:
            c = (c + 4503599627370496.0) - 4503599627370496.0
    elif c > -4503599627370496.0:
        c = (c - 4503599627370496.0) + 4503599627370496.0
    return c
'''

#: ``_rint_clip`` on the cpu target (``loader.load`` puts it in place of :data:`RINT_CLIP`):
#: the same values, rounded by ``fmath.rintf`` (one ``roundsd``) where the adds of 2**52 cost
#: a compare and branch on the sign, two dependent adds and the branch on the magnitude (the
#: ImageNet recipe's cpu stage: 18% of its time, bench/RESULTS.md, "cpu backend: the colour
#: kernels' chains shortened"). ``+ 0.0`` makes the -0.0 that rint gives for values in
#: [-0.5, -0.0] a +0.0, as the adds give; beyond 2**52 in magnitude both leave the value.
RINT_CLIP_CPU = ("\nfrom millipyde.kernels.fmath import rintf\n"
                 + RINT_CLIP[:RINT_CLIP.index("    if c >= 0.0:")]
                 + "    return rintf(c) + 0.0\n")


def replace_once(text: str, old: str, new: str) -> str:
    """``text`` with its single occurrence of ``old`` replaced (a guard on generated code)."""
    if text.count(old) != 1:  # pragma: no cover - guards edits of the kernel texts
        raise RuntimeError(f"generated kernel text: expected {old!r} exactly once")
    return text.replace(old, new)
