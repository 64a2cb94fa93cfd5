"""Region decoding, the data side: a decoded sample may be only the rectangle of it that the
first op's window reads.

The window itself is drawn upstream (``training.region_plan``: the first op's form on the
sample's header size, before the sample is decoded); here are what the decoders and the loader
need of it: the window widened to :data:`ALIGN` and kept inside its image (:func:`aligned`), and
a host array cut to its rectangle (:func:`crop_host`, where a decoder decoded the whole sample
and :data:`CUT_WHOLE` asks for the cut).
A loader is handed a plan with ``boxes(ks, hw)``: (n, 4) rectangles (top, left, bottom, right)
of outputs ``ks`` of images of sizes ``hw``.
"""

from __future__ import annotations

import numpy as np

#: cut the samples a decoder decodes whole (Pillow, the cpu backend's) to their regions too.
#: Off: a cut saves no decoding there and makes a batch of one sample size one of many sizes
#: (the ImageNet recipe on the 2-core machine: 571-608 img/s cut, 717-771 whole; 2026-11-29,
#: bench/RESULTS.md); the tests turn it on to check the region's recording on the cpu backend.
CUT_WHOLE = False
#: a region's sides are widened to multiples of this (from the image's origin), kept inside the
#: image: JPEG's largest MCU (16 x 16 pixels with 4:2:0 chroma), which a decoder decodes whole
ALIGN = 16


def aligned(win: np.ndarray, hw: np.ndarray, align: int) -> np.ndarray:
    """(n, 4) top, left, bottom, right of windows ``win`` ((n, 4) top, left, height, width)
    widened to multiples of ``align`` and cut to their images ``hw`` ((n, 2)); a window beyond
    its image (``center_crop`` of a larger size) gives what it holds of the image."""
    a = max(1, int(align))
    # on (n, 2) columns at once (top and left, then bottom and right), with minimum and
    # maximum rather than clip: a batch's boxes are drawn in its decode lane, under the GIL
    win = np.asarray(win, dtype=np.int64)
    hw = np.asarray(hw, dtype=np.int64)
    first = np.minimum(np.maximum(win[:, 0:2], 0), hw)
    end = np.minimum(np.maximum(win[:, 0:2] + win[:, 2:4], 0), hw)
    first = first // a * a
    end = np.minimum(-(-end // a) * a, hw)
    # an empty window (of an empty image) keeps one pixel where the image has one
    end = np.maximum(end, np.minimum(first + 1, hw))
    return np.concatenate((first, end), axis=1)


def crop_host(a: np.ndarray, box: np.ndarray) -> np.ndarray:
    """The rectangle ``box`` (top, left, bottom, right) of a decoded host array, contiguous."""
    t, lf, b, r = (int(v) for v in box)
    return np.ascontiguousarray(a[t:b, lf:r])
