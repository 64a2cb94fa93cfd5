"""Safe loading of image files into gpuimages.

Two public entry points, both re-exported from :mod:`millipyde`:

* :func:`image_from_path` -- one file -> one :class:`~millipyde.image.gpuimage`;
* :func:`images_from_path` -- every image file of one directory, in sorted file-name order.

Two helpers serve the rest of the package (the Generator reads directories lazily):

* :func:`load_array` -- the same safe loading, returning the host :class:`numpy.ndarray`;
* :func:`iter_image_files` -- the sorted, filtered list of image files of a directory,
  without decoding any of them.

Safety rules, whatever the caller has done to Pillow's global state:

* Decompression bombs are always refused: an image of more pixels than
  :func:`max_image_pixels` (Pillow's default limit, 89,478,485, unless raised with
  :func:`set_max_image_pixels` or ``MILLIPYDE_MAX_IMAGE_PIXELS``), or than
  ``PIL.Image.MAX_IMAGE_PIXELS`` when a caller set that lower, is refused with a
  :class:`ValueError` naming the file -- also between 1x and 2x the limit, where Pillow only
  warns, and also when a caller set Pillow's limit to ``None``. millipyde never
  assigns Pillow's limit; an image above Pillow's own limit needs that raised too.
* Only regular files are opened: FIFOs, sockets, device files, directories, dangling
  symlinks and symlink loops are refused with a :class:`ValueError` naming the path, checked
  on the opened descriptor (``O_NONBLOCK``, then ``fstat``), so nothing ever blocks.
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
import stat
import threading
import warnings
from io import BytesIO as _BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Union

import numpy as np
from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from . import config

if TYPE_CHECKING:
    from .image import gpuimage

__all__ = [
    "IMAGE_EXTENSIONS",
    "decode_array",
    "image_from_path",
    "images_from_path",
    "iter_image_files",
    "load_array",
    "max_image_pixels",
    "open_regular",
    "pixel_limit",
    "read_regular",
    "set_max_image_pixels",
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
    """A path argument of the wrong type (both ValueError and TypeError)."""


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


class _DanglingLinkError(FileNotFoundError, ValueError):
    """A symlink whose target is missing: not a file (FileNotFoundError) and not an image
    (ValueError), so callers catching either one are served."""


# Pillow's own default (``PIL.Image.MAX_IMAGE_PIXELS`` as Pillow ships it)
PILLOW_DEFAULT_PIXELS = int(1024 * 1024 * 1024 // 4 // 3)
_max_pixels: list[int | None] = [None]  # set_max_image_pixels's value; None: env or default


def _positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) <= 0:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def set_max_image_pixels(pixels: int | None) -> None:
    """Set the largest image (in pixels) millipyde decodes; ``None`` restores the default.

    The default is Pillow's own (89,478,485 pixels) or ``MILLIPYDE_MAX_IMAGE_PIXELS``. A
    ``PIL.Image.MAX_IMAGE_PIXELS`` set lower by the caller still wins, and Pillow itself
    refuses images above twice its limit, so to decode larger images raise that one too.
    """
    _max_pixels[0] = None if pixels is None else _positive_int(pixels, "pixels")


def max_image_pixels() -> int:
    """The decompression-bomb limit millipyde applies (see :func:`set_max_image_pixels`)."""
    if _max_pixels[0] is not None:
        return _max_pixels[0]
    env = config.max_image_pixels()
    return PILLOW_DEFAULT_PIXELS if env is None else env


def _pixel_limit() -> int:
    # a caller's lower Pillow limit is honoured; a higher one, or None, disables nothing
    pil = Image.MAX_IMAGE_PIXELS
    own = max_image_pixels()
    return own if pil is None else min(own, int(pil))


def _not_regular(p: Path, mode: int) -> ValueError:
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode)
            else "a device file" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file")
    return ValueError(f"cannot load image {str(p)!r}: it is {kind}, not a regular file")


def _stat_regular(p: Path) -> os.stat_result:
    """``os.stat(p)`` of a regular file; the errors of :func:`load_array` otherwise."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise _DanglingLinkError(errno.ENOENT, f"cannot load image {str(p)!r}: a "
                                     "dangling symlink (its target does not exist)",
                                     str(p)) from None
        raise _missing(p) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"cannot load image {str(p)!r}: a symlink loop") from exc
        if isinstance(exc, PermissionError):
            raise
        raise ValueError(f"cannot load image {str(p)!r}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(p, st.st_mode)
    return st


def _open_regular(p: Path):
    """A binary file object of ``p``, opened without blocking and checked to be a regular
    file on the descriptor itself (the path may have changed since it was listed)."""
    _stat_regular(p)
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(p, mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


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
    fh = _open_regular(p)
    with fh:
        return _decode_named(fh, str(p), exif=False, locked=True)


def _decode_open(fh: BinaryIO, exif: bool) -> np.ndarray:
    """Decode the image in ``fh`` (Pillow's errors propagate): the size refused above the
    pixel limit before any pixel is decoded, every pixel decoded, EXIF orientation applied
    where ``exif``."""
    with Image.open(fh) as img:
        limit = _pixel_limit()
        width, height = img.size
        if width * height > limit:
            raise Image.DecompressionBombError(
                f"Image size ({width * height} pixels) exceeds limit of "
                f"{limit} pixels, could be decompression bomb DOS attack."
            )
        img.load()  # full decode: truncated / corrupt data fails here
        if exif and img.getexif().get(_EXIF_ORIENTATION, 1) in range(2, 9):
            with ImageOps.exif_transpose(img) as upright:
                return _to_array(upright)
        return _to_array(img)


def _decode_named(fh: BinaryIO, name: str, exif: bool, locked: bool) -> np.ndarray:
    """:func:`_decode_open` with its errors as the ValueErrors of :func:`load_array`, naming
    ``name``. ``locked``: under the module lock, with Pillow's switches held safe (else only
    where a caller turned ``LOAD_TRUNCATED_IMAGES`` on, which the lock turns off)."""
    try:
        if locked or ImageFile.LOAD_TRUNCATED_IMAGES:
            with _LOAD_LOCK, warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                saved_truncated = ImageFile.LOAD_TRUNCATED_IMAGES
                ImageFile.LOAD_TRUNCATED_IMAGES = False
                try:
                    return _decode_open(fh, exif)
                finally:
                    ImageFile.LOAD_TRUNCATED_IMAGES = saved_truncated
        # Pillow's defaults hold: decoders release the GIL, so threads decode in parallel
        return _decode_open(fh, exif)
    except (FileNotFoundError, PermissionError, MemoryError):
        raise
    except _ModeError as exc:
        raise ValueError(f"cannot load image {name!r}: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise ValueError(f"cannot load image {name!r}: not an image file") from exc
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValueError(
            f"cannot load image {name!r}: refused as a possible decompression bomb ({exc})"
        ) from exc
    except Exception as exc:  # Pillow raises many kinds on corrupt data
        raise ValueError(
            f"cannot load image {name!r}: truncated or corrupt ({type(exc).__name__}: {exc})"
        ) from exc


#: the EXIF tag of the orientation (1 = upright; 2..8 flips and rotations)
_EXIF_ORIENTATION = 0x0112


def open_regular(path: PathType) -> BinaryIO:
    """Open a regular file for binary reading, never blocking (the rules of the module doc).

    Raises
    ------
    FileNotFoundError
        `path` does not exist (a dangling symlink is also a ValueError).
    ValueError
        `path` is a directory, FIFO, socket, device file or symlink loop (naming it).
    PermissionError
        It cannot be read.
    """
    return _open_regular(_as_path(path, "path"))


def open_regular_fd(path: PathType, max_bytes: int | None = None) -> tuple[int, int]:
    """A descriptor of a regular file and its size, opened as :func:`open_regular` opens it
    (non-blocking, so a FIFO never blocks; the descriptor checked with ``fstat``). The caller
    closes it.

    Raises
    ------
    ValueError
        As :func:`open_regular`, and for a file of more than ``max_bytes`` bytes (naming it
        and its size).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        # the checked opening says why (missing, a dangling link, a loop, permissions)
        with open_regular(path):
            pass
        fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(Path(os.fspath(path)), st.st_mode)
        size = st.st_size
        if max_bytes is not None and size > max_bytes:
            raise ValueError(f"cannot load image {os.fspath(path)!r}: {size} bytes, over the "
                             f"limit of {max_bytes} bytes for one file")
    except BaseException:
        os.close(fd)
        raise
    return fd, size


def read_regular(path: PathType, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file, opened as :func:`open_regular` opens it (non-blocking,
    the descriptor checked with ``fstat``), in few system calls: a dataset reads many.

    Raises
    ------
    ValueError
        As :func:`open_regular`, and for a file of more than ``max_bytes`` bytes (naming it
        and its size; nothing of it is read).
    """
    fd, size = open_regular_fd(path, max_bytes)
    try:
        limit = size + 1 if max_bytes is None else min(size + 1, max_bytes + 1)
        parts = []
        got = 0
        while got < limit:
            part = os.read(fd, limit - got)
            if not part:
                break
            parts.append(part)
            got += len(part)
    finally:
        os.close(fd)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if max_bytes is not None and len(data) > max_bytes:  # it grew since fstat
        raise ValueError(f"cannot load image {os.fspath(path)!r}: over the limit of "
                         f"{max_bytes} bytes for one file")
    return data


def decode_array(data: bytes | memoryview, name: str, *, exif: bool = True) -> np.ndarray:
    """Decode one encoded image (a whole file's bytes) as :func:`load_array` decodes a file.

    Parameters
    ----------
    data : bytes
        The encoded image (PNG, JPEG, TIFF, ...).
    name : str
        What error messages call it (its path, or ``shard.tar:member``).
    exif : bool, default True
        Apply the EXIF orientation (a photograph taken sideways comes out upright, as
        torchvision's and Pillow's ``exif_transpose``).

    Returns
    -------
    numpy.ndarray
        The array of :func:`load_array` (the mode table of the module doc).

    Raises
    ------
    ValueError
        Not an image, truncated, corrupt, empty, or a decompression bomb; naming `name`.

    Notes
    -----
    Unlike :func:`load_array` this does not serialize decodes: while Pillow's
    ``LOAD_TRUNCATED_IMAGES`` keeps its default (off), threads decode in parallel.
    """
    return _decode_named(_BytesIO(data), name, exif=exif, locked=False)


def pixel_limit() -> int:
    """The number of pixels above which an image is refused as a decompression bomb:
    :func:`max_image_pixels`, or Pillow's ``MAX_IMAGE_PIXELS`` where a caller set it lower."""
    return _pixel_limit()


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
    return _image_of(path, load_array(path))


def _image_of(path: PathType, host: np.ndarray) -> gpuimage:
    """``gpuimage(host)``, its refusal (a float image beyond [0, 1], say) naming the file."""
    from .image import gpuimage

    try:
        return gpuimage(host)
    except ValueError as err:
        raise ValueError(f"cannot load image {str(path)!r}: {err}") from err


def _is_identified_image(path: Path) -> bool:
    """Whether Pillow recognises `path` as an image from its header (no decoding)."""
    try:
        fh = _open_regular(path)
    except (FileNotFoundError, ValueError):
        return False  # gone, or not a regular file (any more): not listed
    except OSError:
        return True  # unreadable (permissions): kept, so loading it says why
    try:
        with fh, _LOAD_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(fh):
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
        whose suffix is in :data:`IMAGE_EXTENSIONS` (case-insensitive), and other regular
        files that Pillow identifies as images from their header. Skipped, whatever their
        name: sub-directories (no recursion), FIFOs, sockets, device files, symlinks whose
        resolved target lies outside `directory`, dangling symlinks, symlink loops, and
        files Pillow does not identify (``README.txt``, ...). Nothing is opened that is not
        a regular file, so listing never blocks. A file kept by its suffix is not decoded
        here; loading it reports a corrupt one.

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
        try:
            if not stat.S_ISREG(os.stat(p).st_mode):  # follows links: a loop raises ELOOP
                continue
            if entry.is_symlink() and not Path(os.path.realpath(p)).is_relative_to(root):
                continue
        except OSError:  # dangling link, loop, or gone since the listing
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
    return [_image_of(p, load_array(p)) for p in iter_image_files(directory)]


def to_uint8(img: np.ndarray) -> np.ndarray:
    """An output as uint8 for an 8-bit file, scaled from its type's full range as
    ``skimage.img_as_ubyte`` scales (rounded here): float greyscale in [0, 1] by 255, other
    integer types by ``255 / max`` of the type (a 16-bit PNG at 30000 -> 117, not 255),
    negative values to 0."""
    if img.dtype == np.uint8:
        return img
    if img.dtype.kind == "f":
        return np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
    if img.dtype.kind == "b":
        return img.astype(np.uint8) * np.uint8(255)
    scale = 255.0 / float(np.iinfo(img.dtype).max)
    return np.clip(np.rint(img.astype(np.float64) * scale), 0, 255).astype(np.uint8)


def check_outputs_apart(sources: list[PathType], out_dir: PathType, names: list[str],
                        what: str, folder: PathType | None = None) -> None:
    """Refuse, before anything is written or deleted, outputs that could overwrite an input.

    ``ValueError`` naming the paths when ``out_dir`` is a file, is the input ``folder`` or
    inside it, or when an output file ``out_dir / name`` (of ``names``) is one of ``sources``
    (the same path after symlinks, or the same file through a hard link).
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise _PathArgumentError(f"{what}: the output folder {str(out)!r} is a file")
    real_out = os.path.realpath(out)
    if folder is not None:
        real_in = os.path.realpath(folder)
        if real_out == real_in or real_out.startswith(real_in.rstrip(os.sep) + os.sep):
            raise _PathArgumentError(
                f"{what}: the output folder {str(out)!r} is the input folder {str(folder)!r} or "
                "inside it: outputs would be written among the inputs (and read as inputs by "
                "the next run); choose another output folder")
    by_path = {os.path.realpath(s): str(s) for s in sources}
    by_inode = {}
    for s in sources:
        try:
            st = os.stat(s)
            by_inode[(st.st_dev, st.st_ino)] = str(s)
        except OSError:
            pass
    for name in names:
        p = out / name
        hit = by_path.get(os.path.realpath(p))
        if hit is None and by_inode:
            try:
                st = os.stat(p)
                hit = by_inode.get((st.st_dev, st.st_ino))
            except OSError:
                pass
        if hit is not None:
            raise _PathArgumentError(
                f"{what}: output {str(p)!r} would overwrite the input {hit!r}; choose another "
                "output folder (inputs are never overwritten)")
