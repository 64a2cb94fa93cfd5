"""One check on generated kernel sources, for the PTX tests that compile a variant and not the
variants it contains."""

from __future__ import annotations


def lines_within(part: str, whole: str) -> bool:
    """Whether the lines of generated source ``part`` (its header comment, which names the
    variant, left out) appear in ``whole`` in the same order.

    A PTX test may then compile ``whole`` alone: typing and lowering each of ``part``'s
    statements is done there too (one large kernel costs CI about a minute).
    """
    rest = iter(whole.splitlines()[1:])
    return all(any(line == other for other in rest) for line in part.splitlines()[1:])
