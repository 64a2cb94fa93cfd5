"""Training-batch conversion math: an image value to a normalized float, and the bilinear
resize of ``Generator.batches(shape=...)``. Scalar Python, compiled into the batch kernels.

Conversion of a value ``v`` of an image whose full intensity is ``full`` (255 for uint8, 1 for
float images): ``(v / full - mean) / std`` in float64, rounded once to float32 when stored.

The resize is scikit-image's ``resize(order=1, mode="edge", anti_aliasing=False)``: output
index ``o`` of ``n_out`` samples the input at ``(o + 0.5) * (n_in / n_out) - 0.5`` (grid mode),
bilinearly, taps clamped to the edge.
"""


def normalize(v, full, mean, std):
    """An image value in [0, full] as a training value: ``(v / full - mean) / std``."""
    return (v / full - mean) / std


def grid_coordinate(o, scale):
    """Input coordinate sampled by output index ``o`` when resizing by ``1 / scale``."""
    return (o + 0.5) * scale - 0.5


def resize_map(y, x, h, w, height, width):
    """Where output pixel ``(y, x)`` of the resize to ``height`` x ``width`` samples an
    ``h`` x ``w`` input (what the batch kernels compute per axis with ``grid_coordinate``)."""
    return grid_coordinate(y, h / height), grid_coordinate(x, w / width)


def edge(i, n):
    """Index ``i`` clamped to ``0 .. n - 1`` (mode edge)."""
    if i < 0:
        return 0
    if i > n - 1:
        return n - 1
    return i


def lerp2(a, b, c, d, fy, fx):
    """Bilinear blend of taps a (top left), b (top right), c, d (bottom), rows last."""
    return (1.0 - fy) * ((1.0 - fx) * a + fx * b) + fy * ((1.0 - fx) * c + fx * d)
