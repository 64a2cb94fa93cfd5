"""Generated kernels that write training batches (``Generator.batches``).

``convert(src, pos, out, mean, std, full, scale_y, scale_x)`` reads stored images ``src`` (nb,
h, w, cin) and writes each as sample ``pos[b]`` of the batch ``out`` ((N, C, H, W) or (N, H, W,
C), float32): converted by ``kernels.convert.normalize``, grey replicated to C channels, alpha
dropped, resized bilinearly (``kernels.convert``) when the compile-time ``resize`` is set. The
loops are ``codegen_batch``'s (image index on the grid's z axis on GPUs).
"""

from __future__ import annotations

import hashlib
import inspect

from ...kernels import convert as _convert_math
from .loader import load
from .target import HEADER, jit_decorator, loop_3d

# the generated text names the scalar math's digest, so editing it makes new cache files
DIGEST = hashlib.sha1(inspect.getsource(_convert_math).encode()).hexdigest()[:12]

#: the device functions of the scalar conversion math that converting kernels call
DEFS = ("from millipyde.kernels import convert as _C\n"
        "_norm = _dev(_C.normalize)\n_grid = _dev(_C.grid_coordinate)\n"
        "_edge = _dev(_C.edge)\n_lerp2 = _dev(_C.lerp2)\n")


def store(layout: str, c: int, value: str, o: str = "o", full: str = "full",
          tabled: bool = False) -> str:
    """The statement that writes channel ``c``'s ``value`` normalised into the batch ``out``.

    Parameters
    ----------
    layout : str
        ``"NCHW"`` or ``"NHWC"``.
    c : int
        The channel.
    value : str
        The value's expression.
    o : str, optional
        The output's index in the batch.
    full : str, optional
        The expression of full intensity.
    tabled : bool, optional
        Where the member's ``tb_`` is set (:data:`TABLE_MEMBER`), the value read from the
        kernel's table ``ntab_`` (:data:`TABLE`): the same float32, without the two
        divisions a value (the cpu's colour writer: 11% of its time).

    Returns
    -------
    str
        The generated text: one line, or a branch of four with ``tabled``.
    """
    index = f"{o}, {c}, y, x" if layout == "NCHW" else f"{o}, y, x, {c}"
    line = f"out[{index}] = _norm({value}, {full}, mean[{c}], std[{c}])"
    if not tabled:
        return line
    return (f"if tb_:\n    out[{index}] = ntab_[{c}, _u(int({value}))]\n"
            f"else:\n    {line}")


#: the cpu arena writers' table of normalized values (``store(..., tabled=True)``): for each
#: channel ``c`` of ``channels``, ``_norm(i, 255, mean[c], std[c])`` rounded to float32 for
#: every uint8 value ``i``, built at each call (768 values: microseconds) where ``cfull`` is
#: 255; formatted with ``channels``
TABLE = ("ntab_ = np.empty(({channels}, 256), np.float32)\n"
         "if cfull == 255.0:\n"
         "    for c_ in range({channels}):\n"
         "        for i_ in range(256):\n"
         "            ntab_[c_, i_] = _norm(float(i_), cfull, mean[c_], std[c_])\n")
#: per member: whether its values are read from ``TABLE`` (a uint8 image into a uint8 batch:
#: whole values in 0..255, so ``int(value)`` is the value, and the table's entry its
#: ``_norm`` rounded to float32, as the store rounds it)
TABLE_MEMBER = "\ntb_ = cfull == 255.0 and full == 255.0"


def convert_source(cin: int, channels: int, layout: str, resize: bool, target: str,
                   sim: bool = False) -> str:
    """Source of the batch-writing kernel for ``cin``-channel sources and ``channels`` out."""
    lines = []
    if resize:
        lines += ["fy = _grid(y, scale_y)", "fx = _grid(x, scale_x)",
                  "fy0_ = math.floor(fy)", "fx0_ = math.floor(fx)", "ty = fy - fy0_",
                  "tx = fx - fx0_", "ya = _edge(int(fy0_), h)", "yb = _edge(int(fy0_) + 1, h)",
                  "xa = _edge(int(fx0_), w)", "xb = _edge(int(fx0_) + 1, w)"]
    for c in range(channels):
        sc = 0 if cin == 1 else c
        if resize:
            taps = [f"float(src[b, {ry}, {rx}, {sc}])"
                    for ry, rx in (("ya", "xa"), ("ya", "xb"), ("yb", "xa"), ("yb", "xb"))]
            value = f"_lerp2({', '.join(taps)}, ty, tx)"
        else:
            value = f"float(src[b, y, x, {sc}])"
        lines.append(store(layout, c, value))
    hw = ("out.shape[2]", "out.shape[3]") if layout == "NCHW" else ("out.shape[1]",
                                                                   "out.shape[2]")
    fn = (f"\n\n{jit_decorator(target, sim)}\n"
          "def convert(src, pos, out, mean, std, full, scale_y, scale_x):\n"
          "    nb = src.shape[0]\n    h = src.shape[1]\n    w = src.shape[2]\n"
          f"    hh = {hw[0]}\n    ww = {hw[1]}\n")
    head = (f"# millipyde generated batch writer: cin={cin} channels={channels} {layout} "
            f"resize={resize} math={DIGEST}\n" + HEADER[target] + DEFS)
    return head + fn + loop_3d(target, "nb", "hh", "ww", "o = pos[b]", "\n".join(lines))


def convert_kernel(cin: int, channels: int, layout: str, resize: bool, target: str,
                   sim: bool = False):
    """The compiled (lazily, by Numba) batch-writing kernel (:func:`convert_source`)."""
    return load(convert_source(cin, channels, layout, resize, target, sim), target).convert


def cast_source(target: str, sim: bool = False) -> str:
    """Source of ``cast(src, dst)``: a flat float32 array rounded into float16 (GPUs)."""
    return ("# millipyde generated float32 -> float16 cast\n" + HEADER[target]
            + f"\n\n{jit_decorator(target, sim)}\ndef cast(src, dst):\n"
            "    i = cuda.grid(1)\n    n = cuda.gridsize(1)\n"
            "    while i < src.shape[0]:\n        dst[i] = src[i]\n        i += n\n")


def cast_kernel(sim: bool = False):
    """The compiled float32 -> float16 cast kernel for GPUs."""
    return load(cast_source("cuda", sim), "cuda").cast
