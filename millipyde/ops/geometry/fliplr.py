"""``fliplr``: mirror left to right."""

from ...kernels.registry import index_map
from ..base import ImageKind, define


@index_map(name="fliplr")
def mirror_columns(y, x, h, w):
    """Mirror left to right."""
    return y, w - 1 - x


FLIPLR = define("fliplr", "geometry", [mirror_columns], reference="numpy.fliplr")


@FLIPLR.form(template=True)
def fliplr(kind: ImageKind) -> tuple:
    """Mirror left to right (``np.fliplr``)."""
    return ()
