"""cuCIM (CuPy) and torchvision v2 contenders for ``python -m bench ops``.

Inputs are uploaded (and, for torchvision, laid out CHW) before timing; the timed call is the
library's function on device-resident data; outputs come back to the host only for the check.
"""

from __future__ import annotations

import numpy as np

from bench.common import Runner
from bench.ops_spec import ANGLE, DELTA, GAIN, GAMMA, RADIUS, RGB_GAINS, SIGMA, TRUNCATE, Op


def cucim_run(op: Op, host_img: np.ndarray) -> Runner:
    import cupy as cp

    x = cp.asarray(host_img)
    state: dict = {}
    note = ""
    if op.name in ("gamma", "greyscale", "gaussian", "rotate45"):
        from cucim.skimage import color, exposure, filters, transform

        if op.name == "gamma":
            f = lambda: exposure.adjust_gamma(x, GAMMA, GAIN)
        elif op.name == "greyscale":
            f = lambda: color.rgb2gray(color.rgba2rgb(x))
        elif op.name == "gaussian":
            f = lambda: filters.gaussian(x, sigma=SIGMA, mode="constant", cval=0,
                                         truncate=TRUNCATE, preserve_range=True)
        else:
            f = lambda: cp.clip(cp.rint(transform.rotate(
                x, ANGLE, order=1, mode="constant", cval=0, preserve_range=True)), 0, 255
            ).astype(cp.uint8)
    else:
        note = "plain CuPy (cuCIM has no such op)"
        if op.name == "fliplr":
            f = lambda: cp.fliplr(x).copy()
        elif op.name == "transpose":
            f = lambda: cp.ascontiguousarray(x.transpose(1, 0, 2))
        elif op.name == "brightness":
            def f():
                out = x.copy()
                out[..., :3] = cp.clip(cp.rint(x[..., :3] + DELTA * 255.0), 0, 255)
                return out
        else:
            gains = cp.asarray(RGB_GAINS)

            def f():
                out = x.copy()
                out[..., :3] = cp.clip(cp.rint(x[..., :3] * gains), 0, 255)
                return out

    def run():
        state["out"] = f()

    return Runner(run=run, result=lambda: cp.asnumpy(state["out"]), gpu=True, note=note)


def torchvision_run(op: Op, host_img: np.ndarray) -> Runner:
    import torch
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as F

    t = torch.from_numpy(np.ascontiguousarray(host_img)).cuda()
    t = t.unsqueeze(0) if t.ndim == 2 else t.permute(2, 0, 1).contiguous()  # CHW, untimed
    state: dict = {}
    note = ""
    if op.name == "gamma":
        f = lambda: F.adjust_gamma(t, GAMMA, GAIN)
    elif op.name == "greyscale":
        f = lambda: F.rgb_to_grayscale(t[:3])
        note = "NOT the same function: BT.601 weights, no alpha blend, uint8 output"
    elif op.name == "gaussian":
        k = 2 * RADIUS + 1
        f = lambda: F.gaussian_blur(t, kernel_size=[k, k], sigma=[SIGMA, SIGMA])
        note = f"reflect padding: interior checked ({RADIUS} px border dropped)"
    elif op.name == "fliplr":
        f = lambda: F.horizontal_flip(t)
    elif op.name == "transpose":
        f = lambda: t.transpose(1, 2).contiguous()
        note = "torch transpose + contiguous"
    elif op.name == "rotate45":
        f = lambda: F.rotate(t, ANGLE, interpolation=InterpolationMode.BILINEAR, fill=0)
    else:
        raise NotImplementedError(f"torchvision has no equivalent of {op.name}")

    def run():
        state["out"] = f()

    def result():
        out = state["out"]
        out = out[0] if out.shape[0] == 1 else out.permute(1, 2, 0)
        return out.contiguous().cpu().numpy()

    return Runner(run=run, result=result, sync=None, gpu=True, note=note)
