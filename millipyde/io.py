"""Safe loading of image files into gpuimages.

Two public entry points, both re-exported from :mod:`millipyde`:

* :func:`image_from_path` -- one file -> one :class:`~millipyde.image.gpuimage`;
* :func:`images_from_path` -- every image file of one directory, in sorted file-name order.

Two helpers serve the rest of the package (the Generator reads directories lazily):

* :func:`load_array` -- the same safe loading, returning the host :class:`numpy.ndarray`;
* :func:`iter_image_files` -- the sorted, filtered list of image files of a directory,
  without decoding any of them.

Safety rules, whatever the caller has done to Pillow's global state:

* Pillow's decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``) is never disabled
  or raised; an image above it -- even between 1x and 2x the limit, where Pillow only
  warns -- is refused with a :class:`ValueError` naming the file.
* ``PIL.ImageFile.LOAD_TRUNCATED_IMAGES`` is held ``False`` while a file is decoded, and
  every file is fully decoded before it is returned, so a truncated or corrupt file fails
  here with a :class:`ValueError` naming it, never later and never as silent zeros.

Pixel modes map to arrays as follows:

========================================  ============================================
Pillow mode                               array
========================================  ============================================
``L``                                     ``(H, W)`` uint8
``1``                                     ``(H, W)`` uint8, values 0 and 255
``I;16``, ``I;16B``, ``I;16L``, ...       ``(H, W)`` uint16 (native byte order)
``I``                                     ``(H, W)`` uint16 when every value fits in
                                          0..65535, else ``(H, W)`` int32
``F``                                     ``(H, W)`` float32
``RGB``                                   ``(H, W, 3)`` uint8
``RGBA``                                  ``(H, W, 4)`` uint8
anything else (``P``, ``PA``, ``LA``,     ``(H, W, 4)`` uint8 (RGBA) when the image has
``CMYK``, ``YCbCr``, ``RGBX``, ...)       transparency (an alpha band or a
                                          ``transparency`` entry), else ``(H, W, 3)``
                                          uint8 (RGB)
========================================  ============================================

Multi-frame files (GIF, APNG, multi-page TIFF) yield their first frame. Returned arrays are
C-contiguous, writable and own their memory.
"""

from __future__ import annotations

import errno
import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Union

import numpy as np
from PIL import Image, ImageFile, UnidentifiedImageError

if TYPE_CHECKING:
    from .image import gpuimage

__all__ = [
    "IMAGE_EXTENSIONS",
    "image_from_path",
    "images_from_path",
    "iter_image_files",
    "load_array",
]

PathType = Union[str, "os.PathLike[str]"]

#: File-name suffixes (lower case) that claim to be images. In a directory, a file with one
#: of these suffixes that cannot be decoded is an error rather than a skipped non-image.
IMAGE_EXTENSIONS: frozenset[str] = frozenset(
    {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp"}
)

# Pillow's switches are process globals and ``warnings.catch_warnings`` is not thread-safe
# (Python < 3.14): open + decode + convert run under one lock, so concurrent loads from the
# Generator's worker threads cannot undo each other's settings.
_LOAD_LOCK = threading.Lock()


class _PathArgumentError(ValueError, TypeError):
    """A path argument of the wrong type (both ValueError and TypeError, see API.md)."""


def _as_path(path: object, what: str) -> Path:
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        raise _PathArgumentError(f"{what} must be a str or os.PathLike, got {type(path).__name__}")
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if text == "":
        raise _PathArgumentError(f"{what} must not be empty")
    if "\x00" in text:
        raise _PathArgumentError(f"{what} contains a NUL character: {text!r}")
    return Path(text)


def _missing(path: Path) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))


_ALPHA_MODES = frozenset({"LA", "La", "PA", "RGBA", "RGBa"})


def _has_transparency(img: Image.Image) -> bool:
    # not ``"A" in getbands()``: LAB's bands are L, A, B and carry no alpha
    return img.mode in _ALPHA_MODES or "transparency" in img.info


class _ModeError(Exception):
    """A decoded image whose pixel mode cannot be converted to L, RGB or RGBA."""


def _to_array(img: Image.Image) -> np.ndarray:
    """Convert a fully loaded Pillow image to an owned, native-order, C-contiguous array."""
    mode = img.mode
    try:
        if mode == "1":
            img = img.convert("L")
        elif mode not in ("L", "RGB", "RGBA", "I", "F") and not mode.startswith("I;16"):
            img = img.convert("RGBA" if _has_transparency(img) else "RGB")
    except (ValueError, OSError) as exc:
        raise _ModeError(f"unsupported pixel mode {mode!r} ({exc})") from exc
    arr = np.array(img)  # a copy: owns its memory, writable
    if mode == "I" and arr.size and arr.min() >= 0 and arr.max() <= np.iinfo(np.uint16).max:
        arr = arr.astype(np.uint16)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return np.ascontiguousarray(arr)


def load_array(path: PathType) -> np.ndarray:
    """Load an image file into a host NumPy array, safely.

    Parameters
    ----------
    path : str or os.PathLike
        The image file (PNG, JPEG, TIFF, BMP, or any other format Pillow decodes).

    Returns
    -------
    numpy.ndarray
        ``(H, W)`` for grey images, ``(H, W, 3)`` for RGB, ``(H, W, 4)`` for RGBA; see the
        module docstring for the mode -> dtype table. The first frame of multi-frame files.

    Raises
    ------
    FileNotFoundError
        `path` does not exist (the message names it).
    ValueError
        `path` is a directory, is not an image, is truncated or corrupt, is a 0-byte file,
        or exceeds Pillow's decompression-bomb limit ``PIL.Image.MAX_IMAGE_PIXELS``. The
        message names the file; the underlying error is chained as ``__cause__``.
        Wrong argument types raise an error deriving from both ValueError and TypeError.
    PermissionError
        The file exists but cannot be read.
    """
    p = _as_path(path, "path")
    if not p.exists():
        raise _missing(p)
    if p.is_dir():
        raise ValueError(f"cannot load image {str(p)!r}: it is a directory, not a file")
    try:
        with _LOAD_LOCK, warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            saved_truncated = ImageFile.LOAD_TRUNCATED_IMAGES
            ImageFile.LOAD_TRUNCATED_IMAGES = False
            try:
                with Image.open(p) as img:
                    limit = Image.MAX_IMAGE_PIXELS
                    width, height = img.size
                    if limit is not None and width * height > limit:
                        raise Image.DecompressionBombError(
                            f"Image size ({width * height} pixels) exceeds limit of "
                            f"{limit} pixels, could be decompression bomb DOS attack."
                        )
                    img.load()  # full decode: truncated / corrupt data fails here
                    return _to_array(img)
            finally:
                ImageFile.LOAD_TRUNCATED_IMAGES = saved_truncated
    except (FileNotFoundError, PermissionError, MemoryError):
        raise
    except _ModeError as exc:
        raise ValueError(f"cannot load image {str(p)!r}: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise ValueError(f"cannot load image {str(p)!r}: not an image file") from exc
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValueError(
            f"cannot load image {str(p)!r}: refused as a possible decompression bomb ({exc})"
        ) from exc
    except Exception as exc:  # Pillow raises many kinds on corrupt data
        raise ValueError(
            f"cannot load image {str(p)!r}: truncated or corrupt ({type(exc).__name__}: {exc})"
        ) from exc


def image_from_path(path: PathType) -> gpuimage:
    """Load one image file as a :class:`~millipyde.image.gpuimage`.

    Parameters
    ----------
    path : str or os.PathLike
        The image file (PNG, JPEG, TIFF or BMP; other formats Pillow decodes also work).

    Returns
    -------
    gpuimage
        The image; grey files give a 2-D image, RGB files ``(H, W, 3)``, RGBA ``(H, W, 4)``.

    Raises
    ------
    FileNotFoundError
        `path` does not exist.
    ValueError
        Not an image, truncated, corrupt, 0-byte, a directory, or a decompression bomb; the
        message names the file. See :func:`load_array`.

    Examples
    --------
    >>> import millipyde as mp
    >>> img = mp.image_from_path("astronaut.png")  # doctest: +SKIP
    """
    from .image import gpuimage

    return gpuimage(load_array(path))


def _is_identified_image(path: Path) -> bool:
    """Whether Pillow recognises `path` as an image from its header (no decoding)."""
    try:
        with _LOAD_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path):
                return True
    except UnidentifiedImageError:
        return False
    except Exception:
        # Recognised but unreadable in some way (bomb, broken header, ...): keep it so that
        # loading it reports a ValueError naming the file instead of silently dropping it.
        return True


def iter_image_files(directory: PathType, *, allow_empty: bool = False) -> list[Path]:
    """List the image files of a directory, in sorted file-name order, without decoding.

    Parameters
    ----------
    directory : str or os.PathLike
        The directory; a trailing slash is optional.
    allow_empty : bool, optional
        Return ``[]`` instead of raising when no image file is found. Default False.

    Returns
    -------
    list of pathlib.Path
        ``directory / name`` for each kept entry, sorted by ``name`` (plain string order).
        Kept: regular files (or symlinks resolving to a regular file inside `directory`)
        whose suffix is in :data:`IMAGE_EXTENSIONS` (case-insensitive), and other files
        that Pillow identifies as images from their header. Skipped: sub-directories (no
        recursion), symlinks whose resolved target lies outside `directory`, broken
        symlinks, and files Pillow does not identify (``README.txt``, ...). A file kept by
        its suffix is not checked here; loading it reports a corrupt one.

    Raises
    ------
    FileNotFoundError
        `directory` does not exist.
    NotADirectoryError
        `directory` exists but is not a directory.
    ValueError
        No image file was found (unless `allow_empty`); the message names the directory.
    """
    d = _as_path(directory, "directory")
    if not d.exists():
        raise _missing(d)
    if not d.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(d))
    root = d.resolve(strict=True)
    with os.scandir(d) as it:
        entries = sorted(it, key=lambda e: e.name)
    found: list[Path] = []
    for entry in entries:
        p = d / entry.name
        if entry.is_symlink():
            target = p.resolve(strict=False)
            if not target.is_relative_to(root) or not target.is_file():
                continue
        elif not entry.is_file(follow_symlinks=False):
            continue
        if p.suffix.lower() in IMAGE_EXTENSIONS or _is_identified_image(p):
            found.append(p)
    if not found and not allow_empty:
        raise ValueError(f"no image files found in directory {str(d)!r}")
    return found


def images_from_path(directory: PathType) -> list[gpuimage]:
    """Load every image file of a directory as gpuimages, in sorted file-name order.

    Parameters
    ----------
    directory : str or os.PathLike
        The directory; a trailing slash is optional. Not searched recursively.

    Returns
    -------
    list of gpuimage
        One image per file listed by :func:`iter_image_files`.

    Raises
    ------
    FileNotFoundError
        `directory` does not exist.
    NotADirectoryError
        `directory` is not a directory.
    ValueError
        No image file in `directory` (the message names the directory), or an image file
        that is truncated, corrupt, a decompression bomb, or has an image suffix but is not
        an image (the message names that file).

    Examples
    --------
    >>> import millipyde as mp
    >>> images = mp.images_from_path("examples/images/")  # doctest: +SKIP
    """
    from .image import gpuimage

    return [gpuimage(load_array(p)) for p in iter_image_files(directory)]


def to_uint8(img: np.ndarray) -> np.ndarray:
    """An output as uint8 for an 8-bit file: float greyscale in [0, 1] scaled by 255 and rounded,
    other integers clipped to 0..255."""
    if img.dtype == np.uint8:
        return img
    if img.dtype.kind == "f":
        return np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
    return np.clip(img, 0, 255).astype(np.uint8)
