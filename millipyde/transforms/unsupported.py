"""torchvision v2 classes this namespace does not have yet: each raises ``NotImplementedError``
naming what it needs, so a recipe that uses one fails where it is written."""

from __future__ import annotations

from typing import Any

#: class name -> what it waits for
PENDING = {
    "GaussianBlur": "a blur with a kernel size and a reflected border (millipyde's gaussian "
                    "pads with zeros, as scikit-image)",
    "GaussianNoise": "noise on float images (use mp.Operation('random_gaussian_noise', ...))",
    "ElasticTransform": "a per-pixel smoothed displacement field (a gather holds per-image "
                        "parameters, not a field; mp.Operation('random_elastic_grid', "
                        "magnitude) is a smooth warp on a coarse 5 x 5 grid)",
    "RandomEqualize": "per-image histograms",
    "RandomAutocontrast": "per-image minima and maxima",
    "RandomAdjustSharpness": "a 3 x 3 stencil with an unblurred border",
    "RandomIoUCrop": "box-aware crops",
    "ScaleJitter": "per-sample resize targets",
    "RandomShortestSize": "per-sample resize targets",
    "RandomResize": "per-sample resize targets",
    "FiveCrop": "several outputs per input",
    "TenCrop": "several outputs per input",
    "LinearTransformation": "whole-image linear maps",
    "SanitizeBoundingBoxes": "detection targets in transforms",
    "ClampBoundingBoxes": "detection targets in transforms",
    "ConvertBoundingBoxFormat": "detection targets in transforms",
}


def _pending(name: str, need: str) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"millipyde.transforms.{name} is not supported yet: it needs {need}. Supported: "
            "see millipyde.transforms.__all__")

    return type(name, (), {"__init__": __init__, "__doc__": f"Not supported yet: {need}."})


globals().update({name: _pending(name, need) for name, need in PENDING.items()})
__all__ = sorted(PENDING)
