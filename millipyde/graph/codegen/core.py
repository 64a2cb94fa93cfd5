"""Turn kernel plans into Numba source for one target, write it to the cache and import it.

One body text serves every target: only the loop header differs (``prange`` rows on the CPU,
a grid-stride 2-D loop under ``@cuda.jit`` for CUDA, HIP and the simulator). Generated files are
named by the SHA-1 of their text and compiled with ``cache=True``, so a second process pays no
compile.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ... import config
from ...kernels import REGISTRY, OpSpec, color, filters, geometry, intensity, noise
from ...version import __version__

TARGETS = ("cpu", "cuda")

_lock = threading.RLock()
_modules: dict[str, ModuleType] = {}


def cache_dir() -> Path:
    """Where generated kernel sources live (``MILLIPYDE_CACHE_DIR`` or the user cache)."""
    return config.cache_dir() / f"gen-{__version__}"


def _kernel_sources_digest() -> str:
    # Generated files embed calls to the scalar kernels: their text is part of the cache key.
    h = hashlib.sha1()
    for mod in (color, filters, geometry, intensity, noise):
        h.update(inspect.getsource(mod).encode())
    return h.hexdigest()[:12]


_KERNEL_DIGEST = _kernel_sources_digest()


# --------------------------------------------------------------------------- headers per target

# ``_b2f(b)``: an unsigned integer below 2**32 (a uint8 value, a table entry) as float64. On a
# GPU, a 64-bit conversion runs at a quarter of the FMA rate; writing b into the low word of
# 2**52's bit pattern and subtracting 2**52 is a register move and one add, and exact. The
# simulator has no libdevice, so there it is the plain conversion.
B2F_HIGH_WORD = 0x43300000  # 2**52's high word: its low word is then the integer itself
TWO52 = 4503599627370496.0
_B2F_CUDA = (
    "from numba import config as _config\n"
    "from numba.cuda import libdevice as _ld\n"
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

_HEADER = {
    "cpu": (
        "import math\n"
        "import numpy as np\n"
        "from numba import njit, prange\n"
        "from numba import uint32 as _u32\n"
        "from numba import uint64 as _u\n"
        "from millipyde.kernels import REGISTRY as _R\n"
        "_dev = njit(cache=False)\n"
        "\n@_dev\ndef _b2f(b):\n    return float(b)\n"
    ),
    "cuda": (
        "import math\n"
        "from numba import cuda\n"
        "from numba import uint32 as _u32\n"
        "from numba import uint64 as _u\n"
        "from millipyde.kernels import REGISTRY as _R\n"
        "_dev = cuda.jit(device=True, inline=True)\n"
        + _B2F_CUDA
    ),
}


def _decorator(target: str, sim: bool) -> str:
    if target == "cpu":
        return "@njit(parallel=True, nogil=True, cache=True)"
    return "@cuda.jit" if sim else "@cuda.jit(cache=True)"


def _loop_2d(target: str, h: str, w: str, body: str, step: str = "sx_") -> str:
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


def _loop_2d_items(target: str, h: str, w: str, load: str, body: str, n: int) -> str:
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
    return _loop_2d(target, h, w, "\n".join(lines), f"{n} * sx_")


# --------------------------------------------------------------------------- module loading


def load(source: str, target: str) -> ModuleType:
    """Write ``source`` to the cache dir (once) and import it; thread-safe, one compile."""
    digest = hashlib.sha1((source + _KERNEL_DIGEST + target).encode()).hexdigest()
    name = f"millipyde_gen_{target}_{digest[:20]}"
    with _lock:
        mod = _modules.get(name)
        if mod is not None:
            return mod
        d = cache_dir()
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{name}.py"
        if not path.exists() or path.read_text() != source:
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(source)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import generated kernel module {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        _modules[name] = mod
        return mod


# --------------------------------------------------------------------------- gather kernels


@dataclass(frozen=True)
class GatherSig:
    """Compile-time shape of a fused gather kernel (parameter values travel at run time).

    ``mode`` is ``"lut"`` (uint8: per-channel 256-entry tables) or ``"chain"`` (the chained
    ops inlined: other dtypes, and uint8 kernels with ops no table can stand for, which mix
    channels or know their pixel). ``pre``/``post`` are the chain ops before/after the
    sampler, ``grey_ops`` the ops after a colour-to-grey conversion.
    """

    cin: int
    mode: str
    is_int: bool
    sampler: bool
    grey: bool
    pre: tuple[str, ...] = ()
    post: tuple[str, ...] = ()
    grey_ops: tuple[str, ...] = ()
    # uint8 RGBA source read as one uint32 per pixel: ``src`` is then the flat uint32 view and
    # ``dst`` flat too, indexed with 32-bit offsets, so callers keep both under 2**31 elements
    # (``execute._packable``); the source width and output height and width follow the
    # parameters (``PACKED_DIMS``)
    packed: bool = False
    # "lut" mode: which of the two table stages (before / after the sampler) hold any op; an
    # identity stage is not read at all
    lut_stages: tuple[bool, bool] = (True, True)
    # scikit-image's warp clip may apply: the blend is clamped below at ``clip_lo``
    clip: bool = True
    # a pad is fused: source positions outside the source read per-channel fill values
    bounded: bool = False
    # the sampler repeats the edge outside its input (resize) instead of reading zero
    edge: bool = False
    # the sampler is this user map (``@mp.index_map``), called per output pixel
    umap: str = ""

    @property
    def cout(self) -> int:
        """Channels written."""
        return 1 if self.grey else self.cin

    @property
    def plain(self) -> bool:
        """Only the features the hand-tuned and batched kernels know (no pad, edge sampler,
        user map, or ops other than elementwise ones)."""
        ops = self.pre + self.post + self.grey_ops
        return (not self.bounded and not self.edge and not self.umap
                and (self.mode == "lut" or self.cin == 1)
                and all(REGISTRY[n].kind == "elementwise" and not REGISTRY[n].stat
                        for n in ops))


# Parameter layout in the float64 array ``p``: P (src <- mid or src <- out), A (mid <- out),
# mid_h, mid_w, full, clip_lo and clip_hi (scikit-image's warp clip; -inf / +inf when a bound
# does not apply), then each chained op's slots (``OpSpec.slots``, three or more), then the
# extras: source height and width and four fill values when ``bounded``, the user map's
# parameters when ``umap``.
P_OFF, A_OFF, MID_OFF, FULL_OFF, CLIP_OFF, CLIP_HI_OFF, OPS_OFF = 0, 6, 12, 14, 15, 16, 17


def op_offsets(ops: tuple[str, ...]) -> list[int]:
    """Offset in ``p`` of each chained op of ``ops`` (in order), and the end as last entry."""
    out = [OPS_OFF]
    for name in ops:
        out.append(out[-1] + REGISTRY[name].slots)
    return out


def _chained(sig: GatherSig) -> tuple[str, ...]:
    return sig.pre + sig.post + sig.grey_ops


def extras_offset(sig: GatherSig) -> int:
    """Where the extras (bounds, fills, user map parameters) start in ``p``."""
    return op_offsets(_chained(sig))[-1]


def _nextras(sig: GatherSig) -> int:
    n = 6 if sig.bounded else 0
    return n + (REGISTRY[sig.umap].nparams if sig.umap else 0)


def _op_call(name: str, o: int, vars_: list[str], full: str, chan: int | None) -> list[str]:
    """One chained op on the values ``vars_`` (one channel, or r, g, b for pixelwise)."""
    spec = REGISTRY[name]
    if spec.kind == "pixelwise":
        args = ", ".join(f"p[{o + j}]" for j in range(3))
        return [f"{vars_[0]}, {vars_[1]}, {vars_[2]} = _f_{name}({vars_[0]}, {vars_[1]}, "
                f"{vars_[2]}, {full}, {args})"]
    (v,) = vars_
    if spec.kind == "positional":
        lines = []
        if spec.draws:
            # the pixel's counter: (output pixel, channel, draw); keys are the op's first slots
            n = f"((y * w + x) * 4 + {chan}) * 2"
            lines += [f"u1_ = _u01(p[{o}], p[{o + 1}], {n})",
                      f"u2_ = _u01(p[{o}], p[{o + 1}], {n} + 1)"]
        else:
            lines += ["u1_ = 0.5", "u2_ = 0.5"]
        args = ", ".join(f"p[{o + j}]" for j in range(spec.nparams))
        return lines + [f"{v} = _f_{name}({v}, {chan}, {full}, y, x, u1_, u2_, {args})"]
    return [f"{v} = _f_{name}({v}, {chan}, {full}, p[{o}], p[{o + 1}], p[{o + 2}])"]


def _chain_all(ops: tuple[str, ...], vars_: list[str], full: str, first: int,
               offsets: list[int], cast: bool, gates: bool = False) -> str:
    """Chained ops ``ops`` (global indices from ``first``) on a pixel's values ``vars_``.

    Elementwise and positional ops run per channel (alpha, the fourth, only for ops that
    say so), pixelwise ops on the first three; integer values are rounded after each op.
    """
    lines: list[str] = []
    for i, name in enumerate(ops):
        spec = REGISTRY[name]
        o = offsets[first + i]
        if spec.kind == "pixelwise":
            step = _op_call(name, o, vars_[:3], full, None)
            touched = vars_[:3]
        else:
            keep = 4 if spec.kind == "positional" and spec.alpha else 3
            touched = vars_[:keep] if len(vars_) > 1 else vars_
            step = []
            for c, v in enumerate(touched):
                step += _op_call(name, o, [v], full, c)
        if cast:
            step += [f"{v} = _rint_clip({v}, {full})" for v in touched]
        if gates:
            # an op gated off for this image is not called at all (not an identity call,
            # whose arithmetic could move a value)
            step = [f"if g{first + i}_ == 0.0:"] + ["    " + line for line in step]
        lines += step
    return "\n".join(lines)


def _chain(ops: tuple[str, ...], var: str, chan: int, full: str, first: int, cast: bool,
           gates: bool = False) -> str:
    lines = []
    for i, name in enumerate(ops):
        o = OPS_OFF + 3 * (first + i)
        step = [f"{var} = _f_{name}({var}, {chan}, {full}, p[{o}], p[{o + 1}], p[{o + 2}])"]
        if cast:
            step.append(f"{var} = _rint_clip({var}, {full})")
        if gates:
            # an op gated off for this image is not called at all (not an identity call,
            # whose arithmetic could move a value)
            step = [f"if g{first + i}_ == 0.0:"] + ["    " + line for line in step]
        lines += step
    return "\n".join(lines)


def gate_prologue(sig: GatherSig) -> str:
    """Per-image reads of the gate flags that follow ``sig``'s parameters (batched kernels).

    ``g<i>_`` is nonzero when chained op ``i`` is gated off for the image, ``gs_`` when the
    sampler is (it then reads one tap and blends nothing).
    """
    base = gather_nparams(sig)
    n = len(sig.pre) + len(sig.post) + len(sig.grey_ops)
    return "\n".join([f"g{i}_ = p[{base + i}]" for i in range(n)] + [f"gs_ = p[{base + n}]"])


def gather_ngates(sig: GatherSig) -> int:
    """Gate flags after the parameters of ``sig``: one per chained op, one for the sampler."""
    return len(sig.pre) + len(sig.post) + len(sig.grey_ops) + 1


def _blend(c: int, sig: GatherSig, rounds: bool, gates: bool) -> list[str]:
    """Lines giving ``v{c}`` from the four taps ``t{c}_0..3`` (skimage's bilinear_interpolation:
    rows blended last), clipped as skimage's warp clips, rounded where the output is integer."""
    mix = (f"(1.0 - dr) * ((1.0 - dc) * t{c}_0 + dc * t{c}_1) + "
           f"dr * ((1.0 - dc) * t{c}_2 + dc * t{c}_3)")
    # the upper bound binds only for images whose values are all negative
    blend = [f"v{c} = min(max({mix}, clip_lo), clip_hi)"] if sig.clip else [f"v{c} = {mix}"]
    if rounds:
        blend.append(f"v{c} = _rint_clip(v{c}, full)")
    if gates:
        # a gated-off sampler has an identity map: its one tap is the value, exactly as with
        # no sampler (blending in zero weights would turn -0.0 into +0.0)
        blend = ["if gs_ != 0.0:", f"    v{c} = t{c}_0", "else:", *("    " + ln for ln in blend)]
    return blend


def _gather_body(sig: GatherSig, gates: bool = False) -> str:
    if not sig.plain:
        return _gather_body_general(sig, gates)
    c_in = sig.cin
    lut = sig.mode == "lut"
    cast = sig.is_int
    lines: list[str] = []
    chans = range(c_in)

    # Source indices are in bounds where they are read; as unsigned integers Numba does not
    # add its negative-index wraparound to every load.
    def load(c: int, sy: str, sx: str) -> str:
        raw = f"((pk >> {8 * c}) & 255)" if sig.packed else f"src[_u({sy}), _u({sx}), {c}]"
        if lut and sig.lut_stages[0]:
            return f"_b2f(lut[0, {c}, {raw}])"
        return f"_b2f({raw})" if sig.packed else f"float({raw})"

    if not sig.sampler:
        if sig.packed:
            lines.append("pk = src[_u32(_u32(y) * dy_ + _u32(x) * dx_ + c0_)]")
        else:
            lines += ["sy = q0 * y + q1 * x + q2", "sx = q3 * y + q4 * x + q5"]
        if lut and not sig.grey and not sig.packed:
            # a pure table lookup: stay in uint8, no float round trip
            def value(c: int) -> str:
                raw = f"src[_u(sy), _u(sx), {c}]"
                return f"lut[0, {c}, {raw}]" if sig.lut_stages[0] else raw

            return "\n".join(lines + [f"dst[y, x, {c}] = {value(c)}" for c in chans])
        for c in chans:
            lines.append(f"v{c} = {load(c, 'sy', 'sx')}")
            if not lut and sig.pre:
                lines.append(_chain(sig.pre, f"v{c}", c, "full", 0, cast, gates))
    else:
        lines += [
            "fy = p[6] * y + p[7] * x + p[8]",
            "fx = p[9] * y + p[10] * x + p[11]",
            "ty0 = math.floor(fy)",
            "tx0 = math.floor(fx)",
            "dr = fy - ty0",
            "dc = fx - tx0",
            "iy = int(ty0)",
            "ix = int(tx0)",
        ]
        if sig.packed:
            # the flat offset of the first tap; the others are one step away in y and/or x
            lines.append("o = _u32(_u32(iy) * dy_ + _u32(ix) * dx_ + c0_)")
        else:
            lines += ["by = q0 * iy + q1 * ix + q2", "bx = q3 * iy + q4 * ix + q5"]
        for c in chans:
            lines += [f"t{c}_{k} = 0.0" for k in range(4)]
        taps = [("iy", "ix", "", "", "o", 0),
                ("iy", "ix + 1", " + q1", " + q4", "_u32(o + dx_)", 1),
                ("iy + 1", "ix", " + q0", " + q3", "_u32(o + dy_)", 2),
                ("iy + 1", "ix + 1", " + q0 + q1", " + q3 + q4", "_u32(o + dy_ + dx_)", 3)]
        for ty, tx, dy, dx, flat, k in taps:
            # one unsigned comparison per axis also rejects negative indices
            lines.append(f"if _u({ty}) < _u(mh) and _u({tx}) < _u(mw):")
            if sig.packed:
                lines.append(f"    pk = src[{flat}]")
            else:
                lines += [f"    sy = by{dy}", f"    sx = bx{dx}"]
            for c in chans:
                lines.append(f"    t{c}_{k} = {load(c, 'sy', 'sx')}")
                if not lut and sig.pre:
                    lines.append("    " + _chain(sig.pre, f"t{c}_{k}", c, "full", 0, cast, gates)
                                 .replace("\n", "\n    "))
        for c in chans:
            lines += _blend(c, sig, cast or lut, gates)
            if lut and sig.lut_stages[1]:
                lines.append(f"v{c} = _b2f(lut[1, {c}, int(v{c})])")
            elif sig.post:
                lines.append(_chain(sig.post, f"v{c}", c, "full", len(sig.pre), cast, gates))
    return "\n".join(lines + _gather_tail(sig, gates, op_offsets(_chained(sig))))


def _gather_tail(sig: GatherSig, gates: bool, offsets: list[int]) -> list[str]:
    """The grey conversion, its chain and the stores (shared by both bodies)."""
    lines = []
    chans = range(sig.cin)
    if sig.grey:
        alpha = "v3" if sig.cin == 4 else "0.0"
        has_alpha = "True" if sig.cin == 4 else "False"
        lines.append(f"g = _f_rgb2grey(v0, v1, v2, {alpha}, {has_alpha})")
        first = len(sig.pre) + len(sig.post)
        if sig.grey_ops:
            lines.append(_chain_all(sig.grey_ops, ["g"], "1.0", first, offsets, False, gates))
        values = ["g"]
    else:
        values = [f"v{c}" for c in chans]
    if sig.packed:
        lines.append(f"od = _u32(_u32(y) * _u32(w) + _u32(x)) * {len(values)}")
        lines += [f"dst[_u32(od + {c})] = {v}" for c, v in enumerate(values)]
    else:
        lines += [f"dst[y, x, {c}] = {v}" for c, v in enumerate(values)]
    return lines


def _gather_body_general(sig: GatherSig, gates: bool = False) -> str:
    """The gather with pads (fills), edge-mode samplers, user maps and ops of every chained
    kind: a value chain per pixel (or per tap) over all channels at once."""
    chans = list(range(sig.cin))
    lut = sig.mode == "lut"
    cast = sig.is_int
    offsets = op_offsets(_chained(sig))
    lines: list[str] = []

    def load(c: int) -> str:
        raw = f"src[_u(sy), _u(sx), {c}]"
        return f"_b2f(lut[0, {c}, {raw}])" if lut and sig.lut_stages[0] else f"float({raw})"

    def read(vars_: list[str]) -> list[str]:
        """Set ``vars_`` from source position (sy, sx): loaded, or the fills outside."""
        out = [f"{v} = {load(c)}" for c, v in zip(chans, vars_, strict=True)]
        if sig.bounded:
            out = (["if _u(sy) < _u(srch) and _u(sx) < _u(srcw):"]
                   + ["    " + line for line in out] + ["else:"]
                   + [f"    {v} = fill{c}_" for c, v in zip(chans, vars_, strict=True)])
        if not lut and sig.pre:
            chain = _chain_all(sig.pre, vars_, "full", 0, offsets, cast, gates)
            out += chain.splitlines()
        return out

    if not sig.sampler:
        lines += ["sy = q0 * y + q1 * x + q2", "sx = q3 * y + q4 * x + q5"]
        lines += read([f"v{c}" for c in chans])
    else:
        lines += ["fy = p[6] * y + p[7] * x + p[8]", "fx = p[9] * y + p[10] * x + p[11]"]
        if sig.umap:
            e = extras_offset(sig) + (6 if sig.bounded else 0)
            args = "".join(f", p[{e + j}]" for j in range(REGISTRY[sig.umap].nparams))
            lines.append(f"fy, fx = _m_{sig.umap}(fy, fx, mh, mw{args})")
        lines += ["ty0 = math.floor(fy)", "tx0 = math.floor(fx)", "dr = fy - ty0",
                  "dc = fx - tx0", "iy = int(ty0)", "ix = int(tx0)"]
        if sig.edge:
            # scipy's "nearest" mode: each tap index clamped into the input
            lines += ["ya_ = min(max(iy, 0), mh - 1)", "yb_ = min(max(iy + 1, 0), mh - 1)",
                      "xa_ = min(max(ix, 0), mw - 1)", "xb_ = min(max(ix + 1, 0), mw - 1)"]
            taps = [("ya_", "xa_"), ("ya_", "xb_"), ("yb_", "xa_"), ("yb_", "xb_")]
        else:
            taps = [("iy", "ix"), ("iy", "ix + 1"), ("iy + 1", "ix"), ("iy + 1", "ix + 1")]
        for c in chans:
            lines += [f"t{c}_{k} = 0.0" for k in range(4)]
        for k, (ty, tx) in enumerate(taps):
            body = [f"sy = q0 * ({ty}) + q1 * ({tx}) + q2",
                    f"sx = q3 * ({ty}) + q4 * ({tx}) + q5"] + read([f"t{c}_{k}" for c in chans])
            if sig.edge:
                lines += body
            else:
                lines.append(f"if _u({ty}) < _u(mh) and _u({tx}) < _u(mw):")
                lines += ["    " + line for line in body]
        for c in chans:
            lines += _blend(c, sig, cast or lut, gates)
            if lut and sig.lut_stages[1]:
                lines.append(f"v{c} = _b2f(lut[1, {c}, int(v{c})])")
        if not lut and sig.post:
            lines += _chain_all(sig.post, [f"v{c}" for c in chans], "full", len(sig.pre),
                                offsets, cast, gates).splitlines()
    return "\n".join(lines + _gather_tail(sig, gates, offsets))


_RINT_CLIP = '''
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


def gather_source(sig: GatherSig, target: str, sim: bool = False) -> str:
    """Source of the fused gather kernel ``kernel(src, dst, lut, p)`` for ``target``."""
    body = _gather_body(sig)
    head = (f"# millipyde generated gather kernel: {sig}\n" + _HEADER[target] + gather_defs(sig)
            + _RINT_CLIP)
    params = "p"
    if target == "cuda":
        # on GPUs the parameters travel as scalar kernel arguments: no upload per launch
        # (numba-cuda spends ~0.1 ms of host time on each small device array)
        params = ", ".join(f"p_{i}" for i in range(gather_nparams(sig)))
    if sig.packed:
        # flat arrays: a tap's 32-bit offset is one multiply-add, where a two-index subscript
        # costs 64-bit multiplies (three instructions each) per load and store. (Numba cannot
        # reshape inside a CUDA kernel, so the views and their dimensions come from the host.)
        n = gather_nparams(sig) - PACKED_DIMS
        dims = f"sw_ = int(p[{n}])\nh = int(p[{n + 1}])\nw = int(p[{n + 2}])\n"
        offsets = ("\ndy_ = _u32(q0 * sw_ + q3)\ndx_ = _u32(q1 * sw_ + q4)\n"
                   "c0_ = _u32(q2 * sw_ + q5)")
    else:
        dims, offsets = "h = dst.shape[0]\nw = dst.shape[1]\n", ""
    prologue = dims + gather_prologue() + offsets + extras_prologue(sig)
    fn = (
        f"\n\n{_decorator(target, sim)}\n"
        f"def kernel(src, dst, lut, {params}):\n"
        + "".join(f"    {line}\n" for line in prologue.splitlines())
    )
    items = gather_items(sig, target, sim)
    if items > 1:
        load, rest = body.split("\n", 1)
        if not load.startswith("pk = src["):  # pragma: no cover - guards edits of _gather_body
            raise RuntimeError(f"packed gather body does not start with its load: {load!r}")
        source = head + fn + _loop_2d_items(target, "h", "w", load, rest, items)
    else:
        source = head + fn + _loop_2d(target, "h", "w", body)
    if target == "cuda":
        source = re.sub(r"\bp\[(\d+)\]", r"p_\1", source)
    return source


def gather_prologue() -> str:
    """Per-launch setup read from the parameter array (shared with the batched kernels)."""
    # the integer map's entries are whole numbers: convert once, not per pixel
    return (f"full = p[{FULL_OFF}]\nclip_lo = p[{CLIP_OFF}]\nclip_hi = p[{CLIP_HI_OFF}]\n"
            + "".join(f"q{i} = int(math.floor(p[{P_OFF + i}] + 0.5))\n" for i in range(6))
            + f"mh = int(p[{MID_OFF}])\nmw = int(p[{MID_OFF + 1}])")


PACKED_DIMS = 3  # source width, output height, output width


# Pixels per thread and trip of a packed gather without a sampler (uint8 RGBA to grey): on an
# H200 one pixel a trip left rgb2grey at 27% of copy bandwidth, latency-bound (bench/RESULTS.md).
GATHER_ITEMS = 4
GATHER_ITEMS_SIM = 2


def gather_items(sig: GatherSig, target: str, sim: bool = False) -> int:
    """Pixels of a row each GPU thread takes per trip of ``sig``'s kernel (1 but for packed
    gathers without a sampler, whose one load per pixel is all they wait for)."""
    if target == "cpu" or not sig.packed or sig.sampler:
        return 1
    return GATHER_ITEMS_SIM if sim else GATHER_ITEMS


def gather_nparams(sig: GatherSig) -> int:
    """Length of the parameter array of ``sig``'s kernel."""
    n = extras_offset(sig) + _nextras(sig)
    return n + PACKED_DIMS if sig.packed else n


def extras_prologue(sig: GatherSig) -> str:
    """Per-launch reads of the source bounds and fill values of a bounded gather."""
    if not sig.bounded:
        return ""
    e = extras_offset(sig)
    return (f"\nsrch = int(p[{e}])\nsrcw = int(p[{e + 1}])"
            + "".join(f"\nfill{c}_ = p[{e + 2 + c}]" for c in range(sig.cin)))


_COUNTER = '''
@_dev
def _mix64(z):
    # SplitMix64's finaliser, as millipyde.random._mix: integer arithmetic, the same bits on
    # every backend
    z = _u(z + _u(0x9E3779B97F4A7C15))
    z = _u((z ^ (z >> _u(30))) * _u(0xBF58476D1CE4E5B9))
    z = _u((z ^ (z >> _u(27))) * _u(0x94D049BB133111EB))
    return z ^ (z >> _u(31))


@_dev
def _u01(key_hi, key_lo, n):
    # a float in [0, 1) that depends only on the op's 64-bit key and the counter n
    k = (_u(key_hi) << _u(32)) | _u(key_lo)
    return float(_mix64(_u(k ^ _u(n))) >> _u(11)) * (1.0 / 9007199254740992.0)
'''


def gather_defs(sig: GatherSig) -> str:
    """Device functions a gather of ``sig`` calls: its ops, the grey conversion, the counter
    hash when an op draws, the user map."""
    names = set(_chained(sig))
    if sig.grey:
        names.add("rgb2grey")
    defs = "".join(op_def(n) for n in sorted(names))
    if sig.umap:
        defs += op_def(sig.umap, "_m_")
    if any(REGISTRY[n].kind == "positional" and REGISTRY[n].draws for n in names):
        defs += _COUNTER
    return defs


def op_def(name: str, prefix: str = "_f_") -> str:
    """The device function of op ``name`` in generated text (user ops: their adapter)."""
    spec = REGISTRY[name]
    if spec.user is None:
        return f"{prefix}{name} = _dev(_R[{name!r}].fn)\n"
    return _user_adapter(spec, prefix)


# parameters a user elementwise or pixelwise op takes at most (the slots of the call below)
USER_VALUE_PARAMS = 3


def _user_adapter(spec: OpSpec, prefix: str) -> str:
    """Generated device functions of a user op: its function, and the adapter from the
    built-in calling convention (values in [0, full], fixed slots) to the user's."""
    name = spec.name
    user = f"_uf{prefix}{name}"
    head = (f"# {name}: user function, source digest {spec.digest}\n"
            f"{user} = _dev(_R[{name!r}].user)\n")
    args = ", ".join(f"a{j}_" for j in range(spec.nparams))
    call = ", ".join(["v * s_", "c"] + ([args] if args else []))
    if spec.kind == "user_map":
        return head + f"{prefix}{name} = {user}\n"
    slots = ", ".join(f"a{j}_" for j in range(USER_VALUE_PARAMS))
    if spec.kind == "elementwise":
        return head + (
            f"\n\n@_dev\ndef {prefix}{name}(v, c, full, {slots}):\n"
            "    s_ = 1.0 / full\n"
            f"    r_ = {user}({call}) * full\n"
            "    return min(max(r_, 0.0), full)\n"
        )
    pix = ", ".join(["r * s_", "g * s_", "b * s_"] + ([args] if args else []))
    return head + (
        f"\n\n@_dev\ndef {prefix}{name}(r, g, b, full, {slots}):\n"
        "    s_ = 1.0 / full\n"
        f"    r2_, g2_, b2_ = {user}({pix})\n"
        "    return (min(max(r2_ * full, 0.0), full), min(max(g2_ * full, 0.0), full),\n"
        "            min(max(b2_ * full, 0.0), full))\n"
    )



def grey_sum_body(sig: GatherSig, gates: bool = False) -> list[str]:
    """The gather body of ``sig`` with its stores replaced by ``acc_ +=`` the grey value it
    would store (torchvision's floored grey for colour, the value for one channel): the body
    of the grey-mean gathers (per image here, per batch member in ``codegen.arena``)."""
    if sig.packed:
        raise ValueError("the grey-mean gather reads unpacked images")
    body = [line for line in _gather_body_general(sig, gates).splitlines()
            if not line.lstrip().startswith("dst[")]
    if sig.grey:
        body.append("acc_ += g")
    elif sig.cin == 1:
        body.append("acc_ += v0")
    else:
        body.append("acc_ += _f_tv_grey(v0, v1, v2, 0.0, False)")
    return body


def gather_mean_source(sig: GatherSig, target: str, sim: bool = False) -> str:
    """Source of ``kernel(src, dst, lut, p)``: the sum of the grey values of what the gather
    of ``sig`` would store (torchvision's floored grey for colour, the value for one channel).

    The output height and width follow the parameters. On the CPU ``dst`` gets one sum per
    row; on GPUs each thread adds its sum to ``dst[0]``. Colour sums are of whole numbers,
    exact in float64 whatever the order, so every backend gets the same mean.
    """
    body = grey_sum_body(sig)
    n = gather_nparams(sig)
    prologue = (f"h = int(p[{n}])\nw = int(p[{n + 1}])\n" + gather_prologue()
                + extras_prologue(sig))
    head = (f"# millipyde generated grey-mean gather: {sig}\n" + _HEADER[target]
            + gather_defs(sig) + op_def("tv_grey") + _RINT_CLIP)
    params = "p"
    if target == "cuda":
        params = ", ".join(f"p_{i}" for i in range(n + 2))
    fn = (f"\n\n{_decorator(target, sim)}\ndef kernel(src, dst, lut, {params}):\n"
          + "".join(f"    {line}\n" for line in prologue.splitlines()))
    text = "\n".join(body)
    if target == "cpu":
        loop = ("    for y in prange(h):\n        acc_ = 0.0\n        for x in range(w):\n"
                + "".join(f"            {line}\n" for line in text.splitlines())
                + "        dst[y] = acc_\n")
    else:
        loop = ("    acc_ = 0.0\n" + _loop_2d(target, "h", "w", text)
                + "    cuda.atomic.add(dst, 0, acc_)\n")
    source = head + fn + loop
    if target == "cuda":
        source = re.sub(r"\bp\[(\d+)\]", r"p_\1", source)
    return source


def gather_kernel(sig: GatherSig, target: str, sim: bool = False):
    """The compiled (lazily, by Numba) gather kernel for ``sig``."""
    return load(gather_source(sig, target, sim), target).kernel


# --------------------------------------------------------------------------- separable stencils

_STENCIL_ROWS = """
acc = 0.0
for k in range(ntaps):
    xx = xi + k - r
    if xx >= 0 and xx < w:
        acc += taps[k] * src[y, xx, c]
tmp[y, xi, c] = acc
"""

_STENCIL_COLS = """
if c < nc:
    acc = 0.0
    for k in range(ntaps):
        yy = y + k - r
        if yy >= 0 and yy < h:
            acc += taps[k] * tmp[yy, xi, c]
    if is_int:
        acc = _rint_clip(acc, full)
    dst[y, xi, c] = acc
else:
    dst[y, xi, c] = src[y, xi, c]
"""


def replace_once(text: str, old: str, new: str) -> str:
    """``text`` with its single occurrence of ``old`` replaced (a guard on generated code)."""
    if text.count(old) != 1:  # pragma: no cover - guards edits of the kernel texts
        raise RuntimeError(f"generated kernel text: expected {old!r} exactly once")
    return text.replace(old, new)


def stencil_luts(rows: str, cols: str, pre: bool, post: bool) -> tuple[str, str]:
    """The generic passes' bodies with uint8 tables fused: ``lut[0, c]`` on each value the
    rows pass loads (an elementwise prologue), ``lut[1, c]`` on each value stored (epilogue)."""
    if pre:
        rows = replace_once(rows, "taps[k] * src[y, xx, c]",
                            "taps[k] * lut[0, c, src[y, xx, c]]")
    if post:
        cols = replace_once(cols, "    dst[y, xi, c] = acc",
                            "    dst[y, xi, c] = lut[1, c, int(acc)]")
    return rows, cols


def stencil_source(target: str, sim: bool = False, pre: bool = False,
                   post: bool = False) -> str:
    """Source of the two separable passes ``rows(src, tmp, taps, nc)`` and ``cols(src, tmp,
    dst, taps, nc, is_int, full)``; with ``pre``/``post`` both also take ``lut`` last.

    Channels are folded into the x loop (x * C + c) so one grid covers every channel.
    """
    head = "# millipyde generated separable stencil passes\n" + _HEADER[target] + _RINT_CLIP
    dec = _decorator(target, sim)
    extra = ", lut" if pre or post else ""
    body_rows, body_cols = stencil_luts(_STENCIL_ROWS, _STENCIL_COLS, pre, post)

    def wrap(text: str) -> str:
        return "c = x % nc_all\nxi = x // nc_all\n" + text.strip("\n")

    rows = (
        f"\n\n{dec}\ndef rows(src, tmp, taps, nc{extra}):\n"
        "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = nc\n"
        "    ntaps = taps.shape[0]\n    r = ntaps // 2\n"
        + _loop_2d(target, "h", "w * nc", wrap(body_rows))
    )
    cols = (
        f"\n\n{dec}\ndef cols(src, tmp, dst, taps, nc, is_int, full{extra}):\n"
        "    h = src.shape[0]\n    w = src.shape[1]\n    nc_all = src.shape[2]\n"
        "    ntaps = taps.shape[0]\n    r = ntaps // 2\n"
        + _loop_2d(target, "h", "w * nc_all", wrap(body_cols))
    )
    return head + rows + cols


def stencil_kernels(target: str, sim: bool = False, pre: bool = False, post: bool = False):
    """The (rows, cols) separable pass kernels for ``target`` (``stencil_source``)."""
    mod = load(stencil_source(target, sim, pre, post), target)
    return mod.rows, mod.cols


# --------------------------------------------------------------------------- LUT builder (host)


def _lut_source() -> str:
    elementwise = [s for s in REGISTRY.values() if s.kind == "elementwise"]
    defs = "".join(op_def(s.name) for s in elementwise)
    branches = []
    for s in elementwise:
        kw = "if" if not branches else "elif"
        branches.append(
            f"                {kw} code == {s.code}:\n"
            f"                    v = _f_{s.name}(v, c, full, a, b, d)"
        )
    return (
        "# millipyde generated LUT builder: composes uint8 elementwise chains\n"
        + _HEADER["cpu"] + defs + _RINT_CLIP.replace("@_dev", "@njit(cache=True)")
        + "\n\n@njit(cache=True, nogil=True)\n"
        "def build(codes, params, channels, full, out):\n"
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


def lut_builder():
    """Host function ``build(codes, params, channels, full, out)`` filling (C, 256) uint8 LUTs."""
    return load(_lut_source(), "cpu").build
