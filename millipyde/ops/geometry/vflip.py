"""``vflip`` / ``random_vflip``: mirror top to bottom."""

from ...kernels.registry import index_map
from ..base import ALWAYS, ImageKind, Ranges, coin, define


@index_map(nparams=2, name="vflip")
def mirror_rows(y, x, h, w, u, p):
    """Mirror top to bottom where the image's coin ``u`` is below ``p`` (the map stays affine:
    the branch reads only parameters)."""
    if u < p:
        return h - 1 - y, x
    return y, x


VFLIP = define("vflip", "geometry", [mirror_rows],
               reference="numpy.flipud (torchvision.transforms.v2.functional.vertical_flip)")


@VFLIP.form(template=True)
def vflip(kind: ImageKind) -> tuple:
    """Mirror top to bottom (``np.flipud``, torchvision ``vertical_flip``)."""
    return ALWAYS


# not a template form: the same-size recorder takes an index map's matrix from its template
# (fixed maps only); the arena recorder composes each member's own
@VFLIP.form(random=True)
def random_vflip(kind: ImageKind, p: float = 0.5) -> Ranges:
    """torchvision ``RandomVerticalFlip``: ``vflip`` with probability ``p``."""
    return Ranges(coin(p))
