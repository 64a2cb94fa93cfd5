"""``transpose``: swap the two spatial axes."""

from ...kernels.registry import index_map
from ..base import ImageKind, define


@index_map(swaps_axes=True, name="transpose")
def swap_axes(y, x, h, w):
    """Swap the two spatial axes."""
    return x, y


TRANSPOSE = define("transpose", "geometry", [swap_axes], reference="numpy.transpose")


@TRANSPOSE.form(template=True)
def transpose(kind: ImageKind) -> tuple:
    """Swap the two spatial axes (axes (1, 0, 2) for colour)."""
    return ()
