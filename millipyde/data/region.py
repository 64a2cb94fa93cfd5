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
    top = np.clip(win[:, 0], 0, hw[:, 0])
    left = np.clip(win[:, 1], 0, hw[:, 1])
    bottom = np.clip(win[:, 0] + win[:, 2], 0, hw[:, 0])
    right = np.clip(win[:, 1] + win[:, 3], 0, hw[:, 1])
    top, left = top // a * a, left // a * a
    bottom = np.minimum(-(-bottom // a) * a, hw[:, 0])
    right = np.minimum(-(-right // a) * a, hw[:, 1])
    # an empty window (of an empty image) keeps one pixel where the image has one
    bottom = np.maximum(bottom, np.minimum(top + 1, hw[:, 0]))
    right = np.maximum(right, np.minimum(left + 1, hw[:, 1]))
    return np.stack([top, left, bottom, right], axis=1).astype(np.int64)


def crop_host(a: np.ndarray, box: np.ndarray) -> np.ndarray:
    """The rectangle ``box`` (top, left, bottom, right) of a decoded host array, contiguous."""
    t, lf, b, r = (int(v) for v in box)
    return np.ascontiguousarray(a[t:b, lf:r])
