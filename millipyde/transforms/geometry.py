"""torchvision v2's geometric transforms over millipyde's geometry ops."""

from __future__ import annotations

from typing import Any

from ..array import ArgumentError
from ..ops.base import pair
from ..ops.geometry.random_crop import padding_ltrb
from .base import InterpolationMode, Transform, antialias, interpolation, size_hw

_BILINEAR = InterpolationMode.BILINEAR
_NEAREST = InterpolationMode.NEAREST


def _number_fill(fill: Any, owner: str) -> float:
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        raise ArgumentError(f"{owner} fill must be one number (image units), got {fill!r}")
    return fill


class RandomResizedCrop(Transform):
    """torchvision ``RandomResizedCrop``: the window of ``random_resized_crop`` resized to
    ``size`` (bilinear; ``antialias=True``, torchvision's default, is not implemented: a
    warning)."""

    def __init__(self, size: Any, scale: Any = (0.08, 1.0), ratio: Any = (3 / 4, 4 / 3),
                 interpolation: Any = _BILINEAR, antialias: Any = True) -> None:
        h, w = size_hw(size, "RandomResizedCrop")
        _interp(interpolation, "RandomResizedCrop")
        _antialias(antialias, "RandomResizedCrop")
        super().__init__("random_resized_crop", h, w, tuple(scale), tuple(ratio))
        self._remember(size=size, scale=scale, ratio=ratio, interpolation=interpolation,
                       antialias=antialias)


class Resize(Transform):
    """torchvision ``Resize``: an int ``size`` sets the shorter side (``resize_shorter``,
    ``max_size`` bounding the longer), an (h, w) pair the size (``resize``); bilinear.
    ``antialias=True`` (torchvision's default) blurs each shrunk axis first with
    scikit-image's Gaussian prefilter (``resize(antialias=True)``), where torchvision
    widens its triangle filter: both remove the aliasing, their values differ."""

    def __init__(self, size: Any, interpolation: Any = _BILINEAR, max_size: Any = None,
                 antialias: Any = True) -> None:
        _interp(interpolation, "Resize")
        if antialias not in (True, False, None):
            raise ArgumentError(f"Resize antialias must be True or False, got {antialias!r}")
        smooth = bool(antialias)
        if size is None:
            raise ArgumentError("Resize size=None (max_size only) is not supported yet")
        one = isinstance(size, int) or (not isinstance(size, (str, bytes)) and
                                        hasattr(size, "__len__") and len(size) == 1)
        if one:
            s = size_hw(size, "Resize")[0]
            super().__init__("resize_shorter", s, max_size, smooth)
        else:
            if max_size is not None:
                raise ArgumentError("Resize max_size needs an int size (the shorter side), as "
                                    "torchvision's")
            super().__init__("resize", *size_hw(size, "Resize"), smooth)
        self._remember(size=size, interpolation=interpolation, max_size=max_size,
                       antialias=antialias)


class CenterCrop(Transform):
    """torchvision ``CenterCrop`` (zero padding where the crop is larger)."""

    def __init__(self, size: Any) -> None:
        super().__init__("center_crop", *size_hw(size, "CenterCrop"))
        self._remember(size=size)


class RandomCrop(Transform):
    """torchvision ``RandomCrop`` (``padding_mode`` ``"constant"`` or ``"edge"``; a reflected
    border is refused)."""

    def __init__(self, size: Any, padding: Any = None, pad_if_needed: bool = False,
                 fill: Any = 0, padding_mode: str = "constant") -> None:
        h, w = size_hw(size, "RandomCrop")
        super().__init__("random_crop", h, w, padding, pad_if_needed,
                         _number_fill(fill, "RandomCrop"), padding_mode)
        self._remember(size=size, padding=padding, pad_if_needed=pad_if_needed, fill=fill,
                       padding_mode=padding_mode)


class Pad(Transform):
    """torchvision ``Pad`` with a constant ``fill`` (other modes are refused)."""

    def __init__(self, padding: Any, fill: Any = 0, padding_mode: str = "constant") -> None:
        if padding_mode != "constant":
            raise ArgumentError(f"Pad padding_mode {padding_mode!r} is not supported yet (only "
                                "'constant'); RandomCrop takes 'edge'")
        left, top, right, bottom = padding_ltrb(padding)
        super().__init__("pad", top, bottom, left, right, _number_fill(fill, "Pad"))
        self._remember(padding=padding, fill=fill, padding_mode=padding_mode)


class RandomHorizontalFlip(Transform):
    """torchvision ``RandomHorizontalFlip``: ``fliplr`` with probability ``p``."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__("fliplr", p=p)
        self._remember(p=p)


class RandomVerticalFlip(Transform):
    """torchvision ``RandomVerticalFlip``: ``vflip`` with probability ``p``."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__("vflip", p=p)
        self._remember(p=p)


class RandomRotation(Transform):
    """torchvision ``RandomRotation``: ``random_rotate`` (scikit-image's rotation: bilinear,
    its ``resize`` and centre conventions; ``fill`` must be 0; the default nearest
    interpolation warns and samples bilinearly)."""

    def __init__(self, degrees: Any, interpolation: Any = _NEAREST, expand: bool = False,
                 center: Any = None, fill: Any = 0) -> None:
        lo, hi = pair(degrees, "degrees", symmetric=True)
        _interp(interpolation, "RandomRotation")
        super().__init__("random_rotate", lo, hi, expand, _number_fill(fill, "RandomRotation"),
                         center)
        self._remember(degrees=degrees, interpolation=interpolation, expand=expand,
                       center=center, fill=fill)


class RandomAffine(Transform):
    """torchvision ``RandomAffine``: ``random_affine`` (its parameters about the centre,
    bilinear; ``fill`` must be 0, ``center`` is not supported; nearest warns)."""

    def __init__(self, degrees: Any, translate: Any = None, scale: Any = None,
                 shear: Any = None, interpolation: Any = _NEAREST, fill: Any = 0,
                 center: Any = None) -> None:
        _interp(interpolation, "RandomAffine")
        if _number_fill(fill, "RandomAffine") != 0:
            raise ArgumentError("RandomAffine fill must be 0 (the sampler reads 0 outside the "
                                "image)")
        if center is not None:
            raise ArgumentError("RandomAffine center is not supported yet (about the centre "
                                "only)")
        super().__init__("random_affine", degrees, translate, scale, shear)
        self._remember(degrees=degrees, translate=translate, scale=scale, shear=shear,
                       interpolation=interpolation, fill=fill, center=center)


class RandomPerspective(Transform):
    """torchvision ``RandomPerspective``: ``random_perspective`` (bilinear; ``fill`` must be
    0, and pixels straddling the border are blended with zero once, where torchvision's
    ``fill=0`` also scales them by the sampled mask; nearest warns)."""

    def __init__(self, distortion_scale: float = 0.5, p: float = 0.5,
                 interpolation: Any = _BILINEAR, fill: Any = 0) -> None:
        _interp(interpolation, "RandomPerspective")
        if _number_fill(fill, "RandomPerspective") != 0:
            raise ArgumentError("RandomPerspective fill must be 0 (the sampler reads 0 outside "
                                "the image)")
        super().__init__("random_perspective", distortion_scale, p)
        self._remember(distortion_scale=distortion_scale, p=p, interpolation=interpolation,
                       fill=fill)


class RandomZoomOut(Transform):
    """torchvision ``RandomZoomOut``: ``random_zoom_out`` (one ``fill`` for every channel)."""

    def __init__(self, fill: Any = 0, side_range: Any = (1.0, 4.0), p: float = 0.5) -> None:
        super().__init__("random_zoom_out", _number_fill(fill, "RandomZoomOut"),
                         tuple(side_range), p)
        self._remember(fill=fill, side_range=side_range, p=p)


# the module-level names, not the parameters of the same name
_interp = interpolation
_antialias = antialias
