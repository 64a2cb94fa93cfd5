"""Sources: where a Generator's samples come from, read as encoded bytes when needed.

Every source numbers its samples ``0 .. len-1`` and says, per sample, its name (for warnings),
its label where it has one, and its encoded bytes (:meth:`Source.read`), read only when asked:
nothing is decoded or kept here, so memory does not grow with the dataset.

- :class:`Folder`: the image files under a folder, recursively; class subfolders give labels
  and ``classes`` as torchvision's ``ImageFolder`` does.
- :class:`Paths`: a list of image files, with optional labels.
- :class:`Shards`: tar files in the WebDataset layout (``shards.py``).
- :class:`Coco`: images and one COCO-style annotations file (``coco.py``).
- :class:`Arrays`: decoded images in memory (gpuimages or arrays): resident, nothing to read.

``resolve.as_source`` turns what ``mp.Generator`` accepts into one of these.
"""

from __future__ import annotations

import glob
import os
import stat
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import io as mio
from . import fileread

#: Largest encoded sample read (bytes); a larger file is a bad sample (named in a warning).
MAX_SAMPLE_BYTES = 256 << 20

_table_lock = threading.Lock()


class Source:
    """Samples a Generator streams (see the module doc). Subclasses fill in the methods.

    Attributes
    ----------
    labels : numpy.ndarray or None
        One int64 label per sample (-1: none), or None where the source has no labels.
    classes : list of str or None
        Class names, ``classes[label]`` (folders of classes), or None.
    resident : bool
        The samples are decoded images in memory (:class:`Arrays`): nothing is read.
    """

    labels: np.ndarray | None = None
    classes: list[str] | None = None
    resident: bool = False
    #: the source's samples may carry detection targets (:meth:`targets`)
    has_targets: bool = False

    def __len__(self) -> int:
        raise NotImplementedError

    def name(self, i: int) -> str:
        """What warnings and errors call sample ``i`` (its path, or ``shard.tar:member``)."""
        raise NotImplementedError

    def read(self, i: int) -> bytes:
        """The encoded bytes of sample ``i``.

        Raises
        ------
        OSError or ValueError
            It cannot be read (the message names it).
        """
        raise NotImplementedError

    def size(self, i: int) -> int | None:
        """Bytes :meth:`read` returns for sample ``i`` where known without reading, else None."""
        return None

    def targets(self, i: int) -> dict | None:
        """Detection targets of sample ``i`` (``Coco``): ``boxes``, ``labels``, ``mask``."""
        return None

    def files(self) -> list[Path]:
        """The files on disk the samples are read from (none for samples in memory): what an
        output must never overwrite."""
        return []

    def groups(self) -> list[list[int]]:
        """The samples in groups read together (a shard each; one group for files): how the
        cluster path spreads work over its workers."""
        return [list(range(len(self)))]

    def __repr__(self) -> str:
        lab = "" if self.classes is None else f", {len(self.classes)} classes"
        return f"<{type(self).__name__}: {len(self)} samples{lab}>"


class FileSource(Source):
    """Samples that are files: ``paths[i]`` read with io.py's safe opening rules."""

    def __init__(self, paths: list[Path], max_bytes: int) -> None:
        self.paths = paths
        self.max_bytes = int(max_bytes)

    def __len__(self) -> int:
        return len(self.paths)

    def name(self, i: int) -> str:
        return str(self.paths[i])

    def read(self, i: int) -> bytes:
        return mio.read_regular(self.paths[i], self.max_bytes)

    def read_run(self, indices: Sequence[int]) -> list[Any]:
        """Samples ``indices`` read in one call that holds no GIL (``fileread.read_run``;
        only where ``fileread.available()``).

        Returns
        -------
        list
            Per index its bytes (a read-only uint8 NumPy array), or None where the file was
            not read whole: :meth:`read` then reads it, and raises its usual error.
        """
        table = self._table
        if table is None:
            with _table_lock:
                if self._table is None:  # built once per listing, by the first reader
                    self._table = fileread.PathTable(self.paths)
                table = self._table
        return fileread.read_run(table, indices, self.max_bytes)

    @property
    def reads_runs(self) -> bool:
        """Whether :meth:`read_run` reads what :meth:`read` reads: not where a subclass
        reads its own way (its ``read`` is then called per sample, as before)."""
        return type(self).read is FileSource.read

    #: the paths packed for ``fileread`` (built on the first ``read_run``; not pickled)
    _table: fileread.PathTable | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_table", None)  # a process that reads runs packs its own
        return state

    def files(self) -> list[Path]:
        return list(self.paths)


class Folder(FileSource):
    """The image files under a folder, recursively, as torchvision's ``ImageFolder``.

    Parameters
    ----------
    root : str or os.PathLike
        The folder. Its subfolders are classes: ``classes`` are their names, sorted, and the
        label of a file is the index of the top subfolder it lies under (at any depth). A
        folder without subfolders of images is one unlabelled set of images (``labels`` None).
    max_bytes : int, optional
        Largest file read (bytes); a larger one is a bad sample.

    Notes
    -----
    Files are listed once, here, in sorted order (class by class, then path), without
    decoding: the rules of :func:`millipyde.io.iter_image_files` in every folder (only regular
    files; FIFOs, sockets, devices, dangling links, loops and links leaving the folder are
    skipped, nothing blocks). Subfolders reached twice (links) are listed once. Where there are
    class subfolders, image files directly in ``root`` belong to no class and are left out,
    with one warning.

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        `root` is missing or not a folder.
    ValueError
        No image file under `root` (naming it).
    """

    def __init__(self, root: Any, *, max_bytes: int = MAX_SAMPLE_BYTES) -> None:
        top = Path(os.fspath(root))
        top_files = mio.iter_image_files(top, allow_empty=True)  # checks root exists, is a dir
        real = Path(os.path.realpath(top))
        seen = {_dir_key(top)}
        classes, paths, labels = [], [], []
        for sub in _subfolders(top, real, seen):
            files = _walk(sub, real, seen)
            if files:
                labels += [len(classes)] * len(files)
                classes.append(sub.name)
                paths += files
        if classes:
            if top_files:
                warnings.warn(f"{len(top_files)} image file(s) directly in {str(top)!r} are in "
                              "no class folder: left out", UserWarning, stacklevel=2)
            self.classes = classes
            self.labels = np.asarray(labels, dtype=np.int64)
        else:
            paths = top_files
        if not paths:
            raise ValueError(f"no image files found in directory {str(top)!r}")
        super().__init__(paths, max_bytes)
        self.root = top


def _dir_key(d: Path) -> tuple[int, int]:
    st = os.stat(d)
    return st.st_dev, st.st_ino


def _subfolders(d: Path, real_root: Path, seen: set) -> list[Path]:
    """The subfolders of ``d`` to descend into, sorted by name: real folders, or links to
    folders inside the root; each folder once (a link loop ends here)."""
    out = []
    try:
        with os.scandir(d) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return out
    for e in entries:
        p = d / e.name
        try:
            if not stat.S_ISDIR(os.stat(p).st_mode):
                continue
            if e.is_symlink() and not Path(os.path.realpath(p)).is_relative_to(real_root):
                continue
            key = _dir_key(p)
        except OSError:  # dangling, loop, gone
            continue
        if key in seen:
            continue
        seen.add(key)
        out.append(p)
    return out


def _walk(d: Path, real_root: Path, seen: set) -> list[Path]:
    """Image files under ``d``: its own (sorted), then each subfolder's, depth first."""
    files = mio.iter_image_files(d, allow_empty=True)
    for sub in _subfolders(d, real_root, seen):
        files += _walk(sub, real_root, seen)
    return files


class Paths(FileSource):
    """A list of image files, with optional labels.

    Parameters
    ----------
    paths : sequence of str or os.PathLike
        The files, in this order. They are opened only when read (a missing or bad one is a
        bad sample then).
    labels : sequence of int, optional
        One label per path.
    max_bytes : int, optional
        Largest file read (bytes).
    """

    def __init__(self, paths: Sequence[Any], labels: Sequence[int] | None = None, *,
                 max_bytes: int = MAX_SAMPLE_BYTES) -> None:
        ps = []
        for i, p in enumerate(paths):
            if isinstance(p, bytes):
                p = os.fsdecode(p)
            if not isinstance(p, (str, os.PathLike)) or not os.fspath(p):
                raise ValueError(f"Paths: path {i} must be a non-empty str or os.PathLike, "
                                 f"got {p!r}")
            ps.append(Path(os.fspath(p)))
        if not ps:
            raise ValueError("Paths needs at least one path")
        super().__init__(ps, max_bytes)
        if labels is not None:
            self.labels = check_labels(labels, len(ps), "Paths")


class Arrays(Source):
    """Decoded images in memory: gpuimages, gpuarrays or NumPy arrays (resident).

    Parameters
    ----------
    items : sequence
        The images (arrays are made gpuimages by the Generator).
    labels : sequence of int, optional
        One label per image.
    """

    resident = True

    def __init__(self, items: Sequence[Any], labels: Sequence[int] | None = None) -> None:
        self.items = list(items)
        if labels is not None:
            self.labels = check_labels(labels, len(self.items), "Arrays")

    def __len__(self) -> int:
        return len(self.items)

    def name(self, i: int) -> str:
        return f"input {i}"

    def read(self, i: int) -> bytes:
        raise TypeError("Arrays samples are decoded already: nothing to read")


def check_labels(labels: Any, n: int, owner: str) -> np.ndarray:
    """``labels`` as an int64 array of ``n`` integers, else ValueError naming ``owner``."""
    try:
        arr = np.asarray(labels)
    except Exception as err:
        raise ValueError(f"{owner} labels must be a sequence of integers: {err}") from None
    if arr.ndim != 1 or len(arr) != n:
        raise ValueError(f"{owner} labels: one integer per sample ({n}), got shape "
                         f"{arr.shape}")
    if n and arr.dtype.kind not in "iu":
        raise ValueError(f"{owner} labels must be integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def is_pathlike(x: Any) -> bool:
    """Whether ``x`` names a file or folder (str, bytes, os.PathLike)."""
    return isinstance(x, (str, bytes, os.PathLike))


def is_tar(x: Any) -> bool:
    """Whether path ``x`` names tar shards: a ``.tar`` file, or a glob."""
    text = os.fsdecode(os.fspath(x))
    return text.endswith(".tar") or any(c in text for c in "*?[")


def expand_shards(urls: Any) -> list[Path]:
    """The tar files ``urls`` names: a path, a glob, or a list of them (sorted per glob).

    Raises
    ------
    FileNotFoundError
        A path or glob that names no file.
    """
    items = [urls] if is_pathlike(urls) else list(urls)
    out: list[Path] = []
    for u in items:
        text = os.fsdecode(os.fspath(u))
        if any(c in text for c in "*?["):
            hits = sorted(glob.glob(text))
            if not hits:
                raise FileNotFoundError(f"no tar shard matches {text!r}")
            out += [Path(h) for h in hits]
        else:
            if not os.path.exists(text):
                raise FileNotFoundError(f"tar shard {text!r} does not exist")
            out.append(Path(text))
    if not out:
        raise ValueError("Shards needs at least one tar file")
    return out
