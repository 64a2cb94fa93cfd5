"""``to_sepia``: the sepia filter (albumentations' ``ToSepia``, kornia's ``sepia`` without
its rescale): a fixed 3x3 colour matrix."""

from ...kernels.registry import pixelwise
from ..base import ALWAYS, ImageKind, Ranges, coin, define


@pixelwise(nparams=2, name="to_sepia")
def sepia_matrix(r, g, b, full, u, p, _d):
    """The sepia matrix on (R, G, B), clamped to [0, full] (OpenCV's ``transform`` on uint8
    saturates and rounds), where the image's coin ``u`` is below ``p``; alpha untouched."""
    if u >= p:
        return r, g, b
    r2 = 0.393 * r + 0.769 * g + 0.189 * b
    g2 = 0.349 * r + 0.686 * g + 0.168 * b
    b2 = 0.272 * r + 0.534 * g + 0.131 * b
    return min(r2, full), min(g2, full), min(b2, full)


SEPIA = define("to_sepia", "colour", [sepia_matrix],
               reference="albumentations.ToSepia (kornia.color.sepia_from_rgb, rescale=False)")


@SEPIA.form()
def to_sepia(kind: ImageKind) -> tuple | None:
    """The sepia filter: ``(R, G, B)`` times the matrix ``0.393 0.769 0.189 / 0.349 0.686
    0.168 / 0.272 0.534 0.131``, clamped; alpha untouched; a no-op on grey images."""
    return ALWAYS if kind.is_colour else None


@SEPIA.form(random=True)
def random_sepia(kind: ImageKind, p: float = 0.5) -> Ranges | None:
    """``to_sepia`` with probability ``p`` (in [0, 1]; the coin is drawn on grey images too,
    where nothing is recorded)."""
    ranges = Ranges(coin(p))
    return ranges if kind.is_colour else None
