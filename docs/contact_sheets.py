"""Draw docs/ops/<family>.png: one contact sheet per op family, every op on the sample photos.

    MILLIPYDE_BACKEND=cpu python docs/contact_sheets.py [--out docs/ops] [--size 64]

Each sheet has a row per op (its first form, with the arguments of :data:`EXAMPLES`; random
forms drawn with seed 0) over three of scikit-image's sample photographs, each a centre
square resized to ``size`` pixels. The first row is the photographs as they are. The op list
is the op definitions' (``millipyde.ops.OPS``): an op without an example here is an error, so
a new op gets its picture.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import millipyde as mp  # noqa: E402
from millipyde.ops import FAMILIES, OPS  # noqa: E402

PHOTOS = ("astronaut", "chelsea", "coffee")

#: per op: the method and its arguments drawn on the sheet (sizes in the thumbnail's pixels,
#: ``{s}`` being the thumbnail's side)
EXAMPLES: dict[str, tuple[str, tuple, dict]] = {
    "adjust_contrast": ("adjust_contrast", (1.8,), {}),
    "adjust_hue": ("adjust_hue", (0.25,), {}),
    "adjust_saturation": ("adjust_saturation", (2.0,), {}),
    "channel_dropout": ("drop_channels", ((1,),), {}),
    "colorize": ("colorize", (1.4, 0.9, 0.6), {}),
    "grayscale": ("grayscale", (3,), {}),
    "permute_channels": ("permute_channels", ((2, 0, 1),), {}),
    "rgb2grey": ("rgb2grey", (), {}),
    "rgb_shift": ("rgb_shift", (60, -20, -40), {}),
    "fancy_pca": ("fancy_pca", ((1.0, 6.0, 0.0),), {}),
    "to_sepia": ("to_sepia", (), {}),
    "hsv_shift": ("hsv_shift", (30, 40, -20), {}),
    "planckian_jitter": ("planckian_jitter", (2,), {}),
    "snow": ("snow", (0.3, 2.0), {}),
    "adjust_brightness": ("adjust_brightness", (1.6,), {}),
    "adjust_gamma": ("adjust_gamma", (0.5,), {}),
    "autocontrast": ("autocontrast", (), {}),
    "adjust_log": ("adjust_log", (1.0, True), {}),
    "adjust_sigmoid": ("adjust_sigmoid", (0.5, 8), {}),
    "rescale_intensity": ("rescale_intensity", ((60, 200),), {}),
    "brightness": ("brightness", (-0.3,), {}),
    "brightness_contrast": ("brightness_contrast", (1.5, -0.15), {}),
    "corner_illumination": ("corner_illumination", (0.4,), {}),
    "gaussian_illumination": ("gaussian_illumination", (0.5, (0.3, 0.6), 0.3), {}),
    "linear_illumination": ("linear_illumination", (-0.4,), {}),
    "equalize": ("equalize", (), {}),
    "invert": ("invert", (), {}),
    "posterize": ("posterize", (2,), {}),
    "solarize": ("solarize", (128,), {}),
    "solarize_add": ("solarize_add", (110,), {}),
    "tone_curve": ("tone_curve", (0.05, 0.95), {}),
    "center_crop": ("center_crop", ("{h}", "{w}"), {}),
    "crop": ("crop", (8, 16, "{h}", "{w}"), {}),
    "fliplr": ("fliplr", (), {}),
    "elastic_grid": ("random_elastic_grid", (0.35,), {}),
    "pad": ("pad", (8, 8, 8, 8, 255), {}),
    "random_crop": ("random_crop", ("{s}", "{s}", 12), {}),
    "random_resized_crop": ("random_resized_crop", ("{s}", "{s}"), {}),
    "resize": ("resize", ("{h}", "{s}"), {}),
    "rotate": ("rotate", (30,), {"expand": True}),
    "rot90": ("rot90", (1,), {}),
    "translate": ("random_translate", (0.2, 0.2), {}),
    "shear": ("random_shear", (25,), {}),
    "perspective": ("random_perspective", (0.6, 1.0), {}),
    "pad_to": ("pad_to", (80, 96, "top_left", 128), {}),
    "zoom_out": ("random_zoom_out", (128, (1.5, 2.5), 1.0), {}),
    "transpose": ("transpose", (), {}),
    "vflip": ("vflip", (), {}),
    "warp_affine": ("random_affine", (25, (0.1, 0.1), (0.8, 1.1), 10), {}),
    "erase": ("random_erasing", (), {}),
    "gaussian_noise": ("gaussian_noise", (0.12,), {}),
    "iso_noise": ("iso_noise", (0.1, 1.0), {}),
    "multiplicative_noise": ("multiplicative_noise", ((0.5, 1.5), True, True), {}),
    "pixel_dropout": ("pixel_dropout", (0.1,), {}),
    "grid_dropout": ("grid_dropout", (16, 0.4, (4, 4)), {}),
    "salt_and_pepper": ("salt_and_pepper", (0.08,), {}),
    "gaussian": ("gaussian", (2.0,), {}),
    "gaussian_blur": ("gaussian_blur", (9, 3.0), {}),
    "box_blur": ("box_blur", (7,), {}),
    "downscale": ("downscale", (0.2,), {}),
    "median_blur": ("median_blur", (7,), {}),
    "motion_blur": ("motion_blur", (11, 30, 0.0), {}),
    "jpeg": ("jpeg", (8,), {}),
    "adjust_sharpness": ("adjust_sharpness", (4.0,), {}),
    "sharpen": ("sharpen", (0.8, 0.5), {}),
}


def _args(args: tuple, kwargs: dict, side: int) -> tuple[tuple, dict]:
    sizes = {"{s}": side, "{h}": side * 3 // 4, "{w}": side * 3 // 4}
    return tuple(sizes.get(a, a) if isinstance(a, str) else a for a in args), kwargs


def thumbnails(side: int) -> list[np.ndarray]:
    """The photographs' centre squares, ``side`` pixels (skimage's resize, anti-aliased)."""
    from skimage import data, transform

    out = []
    for name in PHOTOS:
        img = getattr(data, name)()
        h, w = img.shape[:2]
        s = min(h, w)
        sq = img[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
        small = transform.resize(sq, (side, side), anti_aliasing=True, preserve_range=True)
        out.append(np.clip(np.rint(small), 0, 255).astype(np.uint8))
    return out


def _as_rgb(img: np.ndarray) -> np.ndarray:
    if img.ndim == 2:
        grey = img if img.dtype == np.uint8 else np.clip(np.rint(img * 255), 0, 255)
        return np.repeat(grey.astype(np.uint8)[..., None], 3, axis=2)
    return img[..., :3]


def sheet(family: str, photos: list[np.ndarray], side: int) -> Any:
    """The family's contact sheet (a PIL image)."""
    from PIL import Image, ImageDraw

    ops = sorted(o.name for o in OPS.values() if o.family == family)
    missing = [o for o in ops if o not in EXAMPLES]
    if missing:
        raise KeyError(f"docs/contact_sheets.py has no example of {missing}: add them to EXAMPLES")
    label_w, pad = 150, 4
    cell = side + pad
    canvas = Image.new("RGB", (label_w + cell * len(photos), cell * (len(ops) + 1) + pad),
                       "white")
    draw = ImageDraw.Draw(canvas)
    rows = [("(photographs)", None)] + [(o, EXAMPLES[o]) for o in ops]
    for r, (label, example) in enumerate(rows):
        y = pad + r * cell
        text = label if example is None else f"{example[0]}"
        draw.text((4, y + side // 2 - 6), text, fill="black")
        for c, photo in enumerate(photos):
            out = photo
            if example is not None:
                method, args, kwargs = example
                args, kwargs = _args(args, kwargs, side)
                mp.seed(c)
                g = mp.gpuimage(photo)
                getattr(g, method)(*args, **kwargs)
                out = _as_rgb(np.asarray(g))
            tile = Image.fromarray(np.ascontiguousarray(out))
            tile.thumbnail((side, side))  # expanded rotations shrink to the cell
            x = label_w + c * cell
            canvas.paste(tile, (x + (side - tile.width) // 2, y + (side - tile.height) // 2))
    return canvas


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "ops")
    ap.add_argument("--size", type=int, default=64)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    photos = thumbnails(args.size)
    for family in FAMILIES:
        path = args.out / f"{family}.png"
        # a 128-colour palette keeps each sheet near 100 KiB (thumbnails, not references)
        img = sheet(family, photos, args.size).quantize(colors=128, method=2)
        img.save(path, optimize=True)
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
