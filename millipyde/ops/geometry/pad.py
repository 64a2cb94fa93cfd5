"""``pad``: a constant border (``np.pad`` of the two spatial axes)."""

from ...kernels.registry import index_map
from ..base import ImageKind, define, image_value, integer


def _pad_shape(h, w, top, bottom, left, right, value):
    return h + top + bottom, w + left + right


@index_map(nparams=5, shape=_pad_shape, fills=True, name="pad")
def pad_border(y, x, h, w, top, bottom, left, right, value):
    """``np.pad`` with a constant: pixels outside the input read ``value`` (every channel)."""
    return y - top, x - left


PAD = define("pad", "geometry", [pad_border], reference="numpy.pad(mode='constant')")


@PAD.form()
def pad(kind: ImageKind, top: int, bottom: int, left: int, right: int,
        value: float = 0) -> tuple:
    """``np.pad`` of H and W with the constant ``value`` (image units; alpha too)."""
    sides = tuple(integer(v, n, 0) for v, n in ((top, "top"), (bottom, "bottom"),
                                                (left, "left"), (right, "right")))
    return (*sides, image_value(kind, value, "value"))
