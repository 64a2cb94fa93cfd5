"""Rewriting array subscripts in generated kernel text: a subscript's top-level parts are
parsed (brackets and parentheses nested), not matched by a regular expression."""

from __future__ import annotations

from collections.abc import Callable


def _split(text: str, start: int) -> tuple[list[str], int]:
    """The top-level comma-separated parts of the subscript opening at ``text[start - 1]``
    and the index just past its closing bracket."""
    parts, depth, k, first = [], 1, start, start
    while depth:
        ch = text[k]
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 1:
            parts.append(text[first:k].strip())
            first = k + 1
        k += 1
    parts.append(text[first:k - 1].strip())
    return parts, k


def rewrite_subscripts(text: str, name: str, fn: Callable[[list[str]], str],
                       to: str | None = None) -> str:
    """``text`` with each subscript ``name[a, b, ...]`` replaced by ``to[fn([a, b, ...])]``
    (``to`` defaults to ``name``).

    >>> rewrite_subscripts("x = lut[0, 1, src[a, b]] + p[2]", "lut", lambda ps: "+".join(ps))
    'x = lut[0+1+src[a, b]] + p[2]'
    >>> rewrite_subscripts("lut[a, b] + xlut[c]", "lut", lambda ps: ps[1], to="ct_")
    'ct_[b] + xlut[c]'
    """
    to = name if to is None else to
    out, i, n = [], 0, len(name)
    while True:
        k = text.find(name + "[", i)
        if k < 0:
            out.append(text[i:])
            return "".join(out)
        if k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_."):
            out.append(text[i:k + n + 1])
            i = k + n + 1
            continue
        parts, end = _split(text, k + n + 1)
        out.append(text[i:k] + f"{to}[{fn(parts)}]")
        i = end
