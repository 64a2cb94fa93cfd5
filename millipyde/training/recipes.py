"""Augmentation recipes for ``millipyde augment --recipe``: lists of Operations.

- ``imagenet`` (the default): what an ImageNet classifier trains on (torchvision's reference
  recipe): random resized crop to 224 x 224, horizontal flip with p = 0.5, then brightness,
  contrast and saturation factors in [0.6, 1.4] and a hue shift in [-0.1, 0.1], each with
  p = 0.8. Operations run in the order given (torchvision's ColorJitter shuffles its four and
  flips one coin for all of them; here each has its own coin).
- ``thesis``: the thesis's figure 5.1 (brightness deltas up to +1 wash many outputs out).
- ``detection``: geometry mild enough for boxes to stay meaningful (small affine, flip, pad),
  and colour jitter.
"""

from __future__ import annotations

from ..decorators import UserOp

#: the recipe names :func:`operations` takes (``millipyde augment --recipe``)
RECIPES = ("imagenet", "thesis", "detection")


def scale_brightness(v, c, factor):
    """torchvision ``adjust_brightness``: multiply by ``factor`` (clipped by the adapter)."""
    return v * factor


# ``@mp.elementwise`` without the host compile that checks a user's function at decoration
# (it started Numba's CPU target at import: ~1 s of every ``millipyde augment``);
# tests/test_cold_start.py checks that it compiles
scale_brightness = UserOp(scale_brightness, "elementwise", check=False)


def colorize_if_colour(img, r_range, g_range, b_range) -> None:
    """``random_colorize`` for colour images; greyscale inputs pass unchanged.

    ``colorize`` on a greyscale image is an error by contract (README, Guarantees); a folder
    to augment may hold both kinds, so the main job applies the colour gains only where
    there is colour.
    """
    if img.is_colour:
        img.random_colorize(r_range, g_range, b_range)


def figure_5_1_operations() -> list:
    """The thesis's augmentation (figure 5.1) as a list of Operations."""
    import millipyde as mp

    return [
        mp.Operation("transpose", probability=0.2),
        mp.Operation("fliplr", probability=0.2),
        mp.Operation("random_brightness", -0.2, 1),
        mp.Operation("random_gaussian", 0, 2),
        mp.Operation(colorize_if_colour, [0.5, 1.5], [0.5, 1.5], [0.5, 1.5], probability=0.3),
        mp.Operation("rgb2grey", probability=0.3),
        mp.Operation("random_rotate", 0, 120, probability=0.5),
    ]


def _jitter(p: float = 0.8) -> list:
    from ..operation import Operation

    return [
        Operation(scale_brightness, (0.6, 1.4), probability=p),
        Operation("random_contrast", 0.6, 1.4, probability=p),
        Operation("random_saturation", 0.6, 1.4, probability=p),
        Operation("random_hue", -0.1, 0.1, probability=p),
    ]


def operations(name: str, size: int = 224) -> list:
    """The Operations of recipe ``name`` (one of :data:`RECIPES`); ``size`` is the output side
    of the ImageNet recipe's crop."""
    from ..operation import Operation

    if name == "imagenet":
        return [Operation("random_resized_crop", size, size),
                Operation("fliplr", probability=0.5), *_jitter()]
    if name == "thesis":
        return figure_5_1_operations()
    if name == "detection":
        return [Operation("random_affine", 10, (0.1, 0.1), (0.9, 1.1), probability=0.7),
                Operation("fliplr", probability=0.5), *_jitter(0.5)]
    raise ValueError(f"recipe must be one of {RECIPES}, got {name!r}")


#: the detection recipe's sample set: scikit-image photographs with boxes (xyxy) drawn by hand
DETECTION_SAMPLES: dict[str, list[tuple[tuple[int, int, int, int], int]]] = {
    "astronaut": [((165, 25, 300, 205), 1), ((360, 0, 512, 290), 2)],
    "chelsea": [((130, 20, 340, 300), 3)],
    "coffee": [((170, 15, 430, 310), 4)],
    "rocket": [((300, 115, 360, 410), 5)],
}
LABELS = {1: "face", 2: "shuttle", 3: "cat", 4: "cup", 5: "rocket"}


def detection_samples() -> list:
    """The detection sample set as gpuimages with their boxes and labels attached."""
    import numpy as np
    import skimage.data

    from ..image import gpuimage

    out = []
    for name, objects in DETECTION_SAMPLES.items():
        img = gpuimage(getattr(skimage.data, name)())
        img.set_targets(boxes=np.array([b for b, _ in objects], dtype=np.float64),
                        labels=np.array([lab for _, lab in objects]))
        out.append(img)
    return out
