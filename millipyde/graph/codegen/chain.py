"""Chained ops in generated text: the calls on a pixel's values and the device functions they
call (built-in ops, user ops' adapters, the counter hash of ops that draw)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ...kernels import REGISTRY, OpSpec
from .gather_sig import OPS_OFF, GatherSig, chained


def _op_call(name: str, o: int, vars_: list[str], full: str, chan: int | None,
             stat: int | None = None) -> list[str]:
    """One chained op on the values ``vars_`` (one channel, or r, g, b for pixelwise);
    ``stat``: the offset of an op's statistic in the kernel's row ``st_``."""
    spec = REGISTRY[name]
    if spec.kind == "pixelwise":
        lines, extra = [], []
        if spec.draws:
            # the counters a positional op's channels 0 and 1 would use at this pixel
            lines = [f"u{j + 1}_ = _u01(p[{o}], p[{o + 1}], (y * w + x) * 8 + {j})"
                     for j in range(4)]
            extra = ["u1_", "u2_", "u3_", "u4_"]
        if spec.stat:
            if stat is None:
                raise RuntimeError(f"{name} reads a statistic, but no row offset was given")
            extra += ["st_", str(stat)]
        n = spec.nparams if extra else 3
        args = ", ".join(extra + [f"p[{o + j}]" for j in range(n)])
        return lines + [f"{vars_[0]}, {vars_[1]}, {vars_[2]} = _f_{name}({vars_[0]}, "
                        f"{vars_[1]}, {vars_[2]}, {full}, {args})"]
    (v,) = vars_
    if spec.kind == "positional":
        lines = []
        if spec.draws:
            # the pixel's counter: (output pixel, channel, draw); keys are the op's first slots.
            # Shared draws are channel 0's in every channel (one outcome per pixel)
            n = f"((y * w + x) * 4 + {0 if spec.shared else chan}) * 2"
            lines += [f"u1_ = _u01(p[{o}], p[{o + 1}], {n})",
                      f"u2_ = _u01(p[{o}], p[{o + 1}], {n} + 1)"]
        else:
            lines += ["u1_ = 0.5", "u2_ = 0.5"]
        args = ", ".join(f"p[{o + j}]" for j in range(spec.nparams))
        return lines + [f"{v} = _f_{name}({v}, {chan}, {full}, y, x, u1_, u2_, {args})"]
    if spec.stat:
        if stat is None:
            raise RuntimeError(f"{name} reads a statistic, but no row offset was given")
        return [f"{v} = _f_{name}({v}, {chan}, {full}, p[{o}], p[{o + 1}], st_, {stat})"]
    return [f"{v} = _f_{name}({v}, {chan}, {full}, p[{o}], p[{o + 1}], p[{o + 2}])"]


def _neighbourhood_call(name: str, o: int, vars_: list[str], full: str, j: int,
                        prefix: list[str], cast: bool) -> list[str]:
    """Neighbourhood op ``name`` (global index ``j``) on ``vars_``: off the image's border,
    ``prefix`` (the kernel's body up to the op, as a function of ``y``, ``x``, leaving the
    values in ``v0 ..``) run at each of the 3x3 positions around the pixel, summed per
    channel. Its names are made the op's own (``yy<j>_``, ``nv<j>_<c>``...), so a prefix that
    holds another neighbourhood op nests."""
    nv = [f"nv{j}_{c}" for c in range(len(vars_))]
    na = [f"na{j}_{c}" for c in range(len(vars_))]
    text = "\n".join(prefix)
    text = re.sub(r"\by\b", f"yy{j}_", re.sub(r"\bx\b", f"xx{j}_", text))
    text = re.sub(r"\bv(\d)\b", lambda m: f"nv{j}_{m[1]}", text)
    body = [f"{a} = 0.0" for a in na]
    body += [f"for dy{j}_ in range(-1, 2):", f"    for dx{j}_ in range(-1, 2):",
             f"        yy{j}_ = y + dy{j}_", f"        xx{j}_ = x + dx{j}_"]
    body += ["        " + ln for ln in text.splitlines()]
    body += [f"        {a} += {v}" for a, v in zip(na, nv, strict=True)]
    for a, v in zip(na, vars_, strict=True):
        body.append(f"{v} = _f_{name}({a}, {v}, {full}, p[{o}], p[{o + 1}])")
        if cast:
            body.append(f"{v} = _rint_clip({v}, {full})")
    return (["if y >= 1 and y < h - 1 and x >= 1 and x < w - 1:"]
            + ["    " + ln for ln in body])


def chain_all(ops: tuple[str, ...], vars_: list[str], full: str, first: int,
              offsets: list[int], cast: bool, gates: bool = False,
              stats: dict[int, tuple[int, int]] | None = None,
              local: Callable[[int], list[str]] | None = None) -> str:
    """Chained ops ``ops`` (global indices from ``first``) on a pixel's values ``vars_``.

    Elementwise and positional ops run per channel (alpha, the fourth, only for ops that
    say so), pixelwise ops on the first three; integer values are rounded after each op
    (but an op's whose values are whole and in range already: ``OpSpec.whole``).
    ``stats``: the kernel's statistic layout (``gather_sig.stat_layout``), for ops that read
    one; ``local(i)``: the body before op ``i`` (``gather_body.prefix_lines``), for
    neighbourhood ops.
    """
    lines: list[str] = []
    for i, name in enumerate(ops):
        spec = REGISTRY[name]
        o = offsets[first + i]
        so = None if not spec.stat or stats is None else stats[first + i][0]
        if spec.kind == "neighbourhood":
            if local is None:
                raise RuntimeError(f"{name} reads its neighbours: no prefix was given")
            touched = vars_[:3] if len(vars_) > 1 else vars_
            step = _neighbourhood_call(name, o, touched, full, first + i, local(first + i),
                                       cast)
            if gates:
                step = [f"if g{first + i}_ == 0.0:"] + ["    " + line for line in step]
            lines += step
            continue
        if spec.kind == "pixelwise":
            step = _op_call(name, o, vars_[:3], full, None, so)
            touched = vars_[:3]
        else:
            keep = 4 if spec.kind == "positional" and spec.alpha else 3
            touched = vars_[:keep] if len(vars_) > 1 else vars_
            step = []
            for c, v in enumerate(touched):
                step += _op_call(name, o, [v], full, c, so)
        if cast and not spec.whole:
            step += [f"{v} = _rint_clip({v}, {full})" for v in touched]
        if gates:
            # an op gated off for this image is not called at all (not an identity call,
            # whose arithmetic could move a value)
            step = [f"if g{first + i}_ == 0.0:"] + ["    " + line for line in step]
        lines += step
    return "\n".join(lines)


def chain_calls(ops: tuple[str, ...], var: str, chan: int, full: str, first: int, cast: bool,
                gates: bool = False) -> str:
    """The calls of chained ops ``ops`` on one channel's value ``var``.

    Parameters
    ----------
    ops : tuple of str
        The ops' names (none reads a statistic).
    var : str
        The variable holding the value.
    chan : int
        The channel.
    full : str
        The expression of full intensity.
    first : int
        The global index of ``ops[0]`` in the kernel's parameter row.
    cast : bool
        Round and clip to the integer type after each op.
    gates : bool, optional
        Each call under its op's gate (``g<i>_``).

    Returns
    -------
    str
        The lines, unindented.
    """
    lines = []
    for i, name in enumerate(ops):
        if REGISTRY[name].stat:
            raise RuntimeError(f"{name} reads a statistic: not a plain chain op")
        o = OPS_OFF + 3 * (first + i)
        step = [f"{var} = _f_{name}({var}, {chan}, {full}, p[{o}], p[{o + 1}], p[{o + 2}])"]
        if cast and not REGISTRY[name].whole:
            step.append(f"{var} = _rint_clip({var}, {full})")
        if gates:
            # an op gated off for this image is not called at all (not an identity call,
            # whose arithmetic could move a value)
            step = [f"if g{first + i}_ == 0.0:"] + ["    " + line for line in step]
        lines += step
    return "\n".join(lines)


_COUNTER = '''
@_dev
def _mix64(z):
    # SplitMix64's finaliser, as millipyde.random.mix: integer arithmetic, the same bits on
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


_RNE = '''
@_dev
def _rne(v):
    # to the nearest whole number, halves to even (torch's nearbyint), as _rint_clip rounds:
    # adding and subtracting 2**52 leaves no fraction bits below it
    if v >= 0.0:
        if v < 4503599627370496.0:
            return (v + 4503599627370496.0) - 4503599627370496.0
    elif v > -4503599627370496.0:
        return (v - 4503599627370496.0) + 4503599627370496.0
    return v
'''


def gather_defs(sig: GatherSig) -> str:
    """Device functions a gather of ``sig`` calls: its ops, the grey conversion, the counter
    hash when an op draws, the user map."""
    names = set(chained(sig))
    if sig.grey:
        names.add(sig.grey)
    defs = "".join(op_def(n) for n in sorted(names))
    if sig.umap:
        defs += op_def(sig.umap, "_m_")
    if any(REGISTRY[n].draws for n in names):
        defs += _COUNTER
    if sig.nearest:
        defs += _RNE
    return defs


def op_def(name: str, prefix: str = "_f_") -> str:
    """The device function of op ``name`` in generated text (user ops: their adapter)."""
    spec = REGISTRY[name]
    if spec.user is None:
        # (``_dev3``: a pixelwise op's function, three values in and three out, inlined where
        # the target would leave it a call: ``cpu_devices.inlined``)
        dev = "_dev3" if spec.kind == "pixelwise" else "_dev"
        return f"{prefix}{name} = {dev}(_R[{name!r}].fn)\n"
    return _user_adapter(spec, prefix)


# parameters a user elementwise or pixelwise op takes at most (the slots of the call below)
USER_VALUE_PARAMS = 3


def _user_adapter(spec: OpSpec, prefix: str) -> str:
    """Generated device functions of a user op: its function, and the adapter from the
    built-in calling convention (values in [0, full], fixed slots) to the user's; the values
    a ``functools.partial`` binds are module constants passed around the user's arguments."""
    name = spec.name
    user = f"_uf{prefix}{name}"
    head = (f"# {name}: user function, key {spec.digest}\n"
            f"{user} = _dev(_R[{name!r}].user)\n")
    before, after = spec.user_args
    for side, values in (("b", before), ("a", after)):
        head += "".join(f"_{side}{j}{user} = _R[{name!r}].user_args[{int(side == 'a')}][{j}]\n"
                        for j in range(len(values)))
    first = [f"_b{j}{user}" for j in range(len(before))]
    last = [f"_a{j}{user}" for j in range(len(after))]
    args = ", ".join(f"a{j}_" for j in range(spec.nparams))
    call = ", ".join(first + ["v * s_", "c"] + ([args] if args else []) + last)
    if spec.kind == "user_map":
        if not (first or last):
            return head + f"{prefix}{name} = {user}\n"
        margs = ", ".join(["row", "col", "h", "w"] + [f"a{j}_" for j in range(spec.nparams)])
        return head + (f"\n\n@_dev\ndef {prefix}{name}({margs}):\n"
                       f"    return {user}({', '.join(first + [margs] + last)})\n")
    slots = ", ".join(f"a{j}_" for j in range(USER_VALUE_PARAMS))
    # the user's result clipped to [0, full] by comparisons: NaN gives 0, never NaN in an image
    if spec.kind == "elementwise":
        return head + (
            f"\n\n@_dev\ndef {prefix}{name}(v, c, full, {slots}):\n"
            "    s_ = 1.0 / full\n"
            f"    r_ = {user}({call}) * full\n"
            "    r_ = r_ if r_ > 0.0 else 0.0\n"
            "    return r_ if r_ < full else full\n"
        )
    pix = ", ".join(first + ["r * s_", "g * s_", "b * s_"] + ([args] if args else []) + last)
    return head + (
        f"\n\n@_dev3\ndef {prefix}{name}(r, g, b, full, {slots}):\n"
        "    s_ = 1.0 / full\n"
        f"    r2_, g2_, b2_ = {user}({pix})\n"
        "    r2_ = r2_ * full if r2_ * full > 0.0 else 0.0\n"
        "    g2_ = g2_ * full if g2_ * full > 0.0 else 0.0\n"
        "    b2_ = b2_ * full if b2_ * full > 0.0 else 0.0\n"
        "    return (r2_ if r2_ < full else full, g2_ if g2_ < full else full,\n"
        "            b2_ if b2_ < full else full)\n"
    )
