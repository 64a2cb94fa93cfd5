"""Generated kernels of the batch mixers (``millipyde.training.batch_mix``): MixUp's blend and
CutMix's pasted box over a whole training batch, in place, and their soft labels.

A batch of ``n`` samples is viewed as (n, P, R, Q): NCHW as (n, C, H, W), NHWC as
(n, 1, H, W * C). ``mix_batch(x, dst, labels, n, P, R, Q, k, lam, r1, r2, q1, q2, lam_l)``
replaces, inside the box
rows [r1, r2) x columns [q1, q2) of every plane, sample ``b`` by
``x[b - 1] * (1 - lam) + x[b] * lam`` in float32, as torchvision computes it on float32 batches
(the batch rolled by one, its ``roll(1, 0)``; MixUp: the box is the whole sample, CutMix:
``lam`` 0). Samples are rewritten from the last down, so ``x[b - 1]`` is still the original
when sample ``b`` reads it; the last sample's original (for sample 0) is kept first: each value
is read and written once, no second batch is allocated.

and writes ``dst`` (n, k), the soft labels ``lam_l * onehot(labels[b]) + (1 - lam_l) *
onehot(labels[b - 1])`` (``k`` 0: none), in the same launch: a mix is one launch a batch.
The arguments' order is a kept launch's (``Backend.bind_grid``): the batch and the labels'
output first, the class indices (a table per call) and what a batch's shape fixes next, the
scalars that change per batch last.
"""

from __future__ import annotations

from .loader import load
from .target import HEADER, indent_text, jit_decorator

_AT = "((({b}) * P + p) * R + r) * Q"

# CPU: a thread per (plane, row) of the box, its row of every sample from the last down, the
# last sample's row kept first (rows are contiguous: the inner loops stream, in SIMD lanes).
# Each row's iteration also writes its share of the soft labels (the kernel's one parallel
# loop is what the cpu's parts split: ``cpu_parts``); an empty box is one iteration of labels.
_BATCH_CPU = f"""\
    a = np.float32(lam)
    c = np.float32(1.0 - lam)
    rows = r2 - r1
    m = q2 - q1
    box = rows > 0 and m > 0
    T = P * rows if box else 1
    L = n * k
    for t in prange(T):
        for i in range(t * L // T, (t + 1) * L // T):
{{labels}}        if box:
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
pb = b - 1 if b > 0 else n - 1
v = 0.0
if labels[b] == j:
    v += lam_l
if labels[pb] == j:
    v += 1.0 - lam_l
dst[i] = v
"""


def _labels_gpu() -> str:
    """The soft labels' loop on GPUs: every thread of the box's grid in turn (its blocks are
    (x, y, 1))."""
    text = indent_text(_LABELS_BODY, 8)
    return ("    nt_ = cuda.blockDim.x * cuda.blockDim.y\n"
            "    i = ((cuda.blockIdx.z * cuda.gridDim.y + cuda.blockIdx.y) * cuda.gridDim.x\n"
            "         + cuda.blockIdx.x) * nt_ + cuda.threadIdx.y * cuda.blockDim.x"
            " + cuda.threadIdx.x\n"
            "    s_ = nt_ * cuda.gridDim.x * cuda.gridDim.y * cuda.gridDim.z\n"
            "    while i < n * k:\n" + text + "        i += s_\n")


def mix_batch_source(target: str, sim: bool = False) -> str:
    """Source of ``mix_batch`` (see the module doc)."""
    return ("# millipyde generated batch mixer: images in place, and soft labels\n"
            + HEADER[target]
            + ("" if target == "cpu" else "from numba import float32 as _f32\n")
            + f"\n\n{jit_decorator(target, sim)}\n"
            + "def mix_batch(x, dst, labels, n, P, R, Q, k, lam, r1, r2, q1, q2, lam_l):\n"
            + (_BATCH_CPU.format(labels=indent_text(_LABELS_BODY, 12)) if target == "cpu"
               else _labels_gpu() + _images_gpu(AHEAD)))


def mix_kernel(target: str, sim: bool = False) -> object:
    """The compiled (lazily) ``mix_batch`` kernel (``AHEAD`` as set now)."""
    return load(mix_batch_source(target, sim), target).mix_batch
