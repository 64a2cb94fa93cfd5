"""The host LUT builder: uint8 elementwise chains composed into per-channel 256-entry tables."""

from __future__ import annotations

from ...kernels import REGISTRY
from .chain import op_def
from .loader import load
from .target import _HEADER, _RINT_CLIP


def _lut_source(users: tuple[str, ...] = ()) -> str:
    # the built-ins, and of the user ops only those asked for: one that does not compile
    # must not break the tables of every other chain
    elementwise = [s for s in REGISTRY.values()
                   if s.kind == "elementwise" and (s.user is None or s.name in users)]
    defs = "".join(op_def(s.name) for s in elementwise)
    branches = []
    for s in elementwise:
        kw = "if" if not branches else "elif"
        # an op that reads a statistic: its row is in ``stats``, at the offset in its third slot
        call = (f"_f_{s.name}(v, c, full, a, b, stats, int(d))" if s.stat
                else f"_f_{s.name}(v, c, full, a, b, d)")
        branches.append(
            f"                {kw} code == {s.code}:\n"
            f"                    v = {call}"
        )
    return (
        "# millipyde generated LUT builder: composes uint8 elementwise chains\n"
        + _HEADER["cpu"] + defs + _RINT_CLIP.replace("@_dev", "@njit(cache=True)")
        + "\n\n@njit(cache=True, nogil=True, error_model='numpy')\n"
        "def build(codes, params, stats, channels, full, out):\n"
        "    for c in range(channels):\n"
        "        for i in range(256):\n"
        "            v = float(i)\n"
        "            for k in range(codes.shape[0]):\n"
        "                code = codes[k]\n"
        "                a = params[k, 0]\n"
        "                b = params[k, 1]\n"
        "                d = params[k, 2]\n"
        "                if c == 3:\n"
        "                    continue\n"
        + "\n".join(branches) + "\n"
        "                v = _rint_clip(v, full)\n"
        "            out[c, i] = np.uint8(v)\n"
    )


def lut_builder(users: tuple[str, ...] = ()):
    """Host function ``build(codes, params, stats, channels, full, out)`` filling (C, 256)
    uint8 LUTs of chains of built-in ops and the user ops named ``users`` (``stats``: the
    statistic rows of the ops that read one, end to end; such an op's third parameter is its
    row's offset)."""
    return load(_lut_source(users), "cpu").build
