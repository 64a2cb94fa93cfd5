"""Generated kernels of the batch mixers (``millipyde.training.batch_mix``): MixUp's blend and
CutMix's pasted box over a whole training batch, in place, and their soft labels.

A batch of ``n`` samples is viewed as (n, P, R, Q): NCHW as (n, C, H, W), NHWC as
(n, 1, H, W * C). ``mix_images(x, n, P, R, Q, lam, r1, r2, q1, q2)`` replaces, inside the box
rows [r1, r2) x columns [q1, q2) of every plane, sample ``b`` by
``x[b - 1] * (1 - lam) + x[b] * lam`` in float32, as torchvision computes it on float32 batches
(the batch rolled by one, its ``roll(1, 0)``; MixUp: the box is the whole sample, CutMix:
``lam`` 0). Samples are rewritten from the last down, so ``x[b - 1]`` is still the original
when sample ``b`` reads it; the last sample's original (for sample 0) is kept first: each value
is read and written once, no second batch is allocated.

``mix_labels(labels, dst, k, lam)``: ``dst`` (n, k) the soft labels
``lam * onehot(labels[b]) + (1 - lam) * onehot(labels[b - 1])``.
"""

from __future__ import annotations

from .loader import load
from .target import HEADER, jit_decorator

_AT = "((({b}) * P + p) * R + r) * Q"

# CPU: a thread per (plane, row) of the box, its row of every sample from the last down, the
# last sample's row kept first (rows are contiguous: the inner loops stream, in SIMD lanes)
_IMAGES_CPU = f"""\
    a = np.float32(lam)
    c = np.float32(1.0 - lam)
    rows = r2 - r1
    m = q2 - q1
    for t in prange(P * rows):
        p = t // rows
        r = r1 + t - p * rows
        keep = np.empty(m, np.float32)
        o = {_AT.format(b="n - 1")} + q1
        for q in range(m):
            keep[q] = x[o + q]
        for b in range(n - 1, 0, -1):
            o = {_AT.format(b="b")} + q1
            o1 = {_AT.format(b="b - 1")} + q1
            xb = x[o:o + m]
            xp = x[o1:o1 + m]
            for q in range(m):
                xb[q] = xp[q] * c + xb[q] * a
        o = {_AT.format(b="0")} + q1
        xb = x[o:o + m]
        for q in range(m):
            xb[q] = keep[q] * c + xb[q] * a
"""

# GPUs: a thread per (plane, row, column) of the box, down the samples (adjacent threads read
# adjacent values of each sample). Each original value is read once: the sample below is
# carried in a register to the next step. ``AHEAD`` samples' values are loaded before their
# stores, since the compiler cannot move a load above a store to the same array: one load in
# flight per thread would leave the mix waiting on memory latency, not bandwidth.
AHEAD = 8


def _images_gpu(ahead: int) -> str:
    loads = "".join(f"                    v{j} = _f32(x[i - {j} * step])\n"
                    for j in range(1, ahead + 1))
    stores = "".join(f"                    x[i - {j - 1} * step] = v{j} * c + "
                     f"{'cur' if j == 1 else f'v{j - 1}'} * a\n" for j in range(1, ahead + 1))
    return f"""\
    a = _f32(lam)
    c = _f32(1.0 - lam)
    step = P * R * Q
    q0, r0, p0 = cuda.grid(3)
    sq_, sr_, sp_ = cuda.gridsize(3)
    p = p0
    while p < P:
        r = r1 + r0
        while r < r2:
            q = q1 + q0
            while q < q2:
                o = (p * R + r) * Q + q
                keep = _f32(x[(n - 1) * step + o])
                cur = keep
                b = n - 1
                while b >= {ahead}:
                    i = b * step + o
{loads}{stores}                    cur = v{ahead}
                    b -= {ahead}
                while b > 0:
                    i = b * step + o
                    v1 = _f32(x[i - step])
                    x[i] = v1 * c + cur * a
                    cur = v1
                    b -= 1
                x[o] = keep * c + cur * a
                q += sq_
            r += sr_
        p += sp_
"""


_LABELS_BODY = """\
b = i // k
j = i - b * k
p = b - 1 if b > 0 else n - 1
v = 0.0
if labels[b] == j:
    v += lam
if labels[p] == j:
    v += 1.0 - lam
dst[i] = v
"""


def _flat(target: str, total: str, body: str) -> str:
    pad = " " * 8
    text = "".join(pad + line + "\n" for line in body.splitlines())
    if target == "cpu":
        return f"    for i in prange({total}):\n" + text
    return ("    i = cuda.grid(1)\n    s_ = cuda.gridsize(1)\n"
            f"    while i < {total}:\n" + text + "        i += s_\n")


def mix_images_source(target: str, sim: bool = False) -> str:
    """Source of ``mix_images`` (see the module doc)."""
    return ("# millipyde generated batch mixer: images, in place\n" + HEADER[target]
            + ("" if target == "cpu" else "from numba import float32 as _f32\n")
            + f"\n\n{jit_decorator(target, sim)}\n"
            + "def mix_images(x, n, P, R, Q, lam, r1, r2, q1, q2):\n"
            + (_IMAGES_CPU if target == "cpu" else _images_gpu(AHEAD)))


def mix_labels_source(target: str, sim: bool = False) -> str:
    """Source of ``mix_labels`` (see the module doc)."""
    return ("# millipyde generated batch mixer: soft labels\n" + HEADER[target]
            + f"\n\n{jit_decorator(target, sim)}\n"
            "def mix_labels(labels, dst, k, lam):\n"
            "    n = labels.shape[0]\n"
            + _flat(target, "dst.shape[0]", _LABELS_BODY))


def mix_kernels(target: str, sim: bool = False) -> tuple:
    """The compiled (lazily) ``mix_images`` and ``mix_labels`` kernels (``AHEAD`` as set
    now)."""
    return (load(mix_images_source(target, sim), target).mix_images,
            load(mix_labels_source(target, sim), target).mix_labels)
