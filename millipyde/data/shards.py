"""Tar shards in the WebDataset layout, indexed once and read as bytes, never extracted.

A shard is a tar file whose members are grouped into samples by key: ``dir/key.jpg``,
``dir/key.cls`` and ``dir/key.json`` are one sample (the key is the member name up to the first
dot of its base name, as WebDataset splits it; members of a sample are consecutive). The image
is the first member with an image extension; the label is the integer in ``.cls``, else the
``"label"`` (or ``"cls"``) integer of ``.json``.

Each shard is indexed by one sequential pass over its headers (Python's ``tarfile``, reading
512-byte headers and seeking over the data), done once when the source is made; a sample is then
read with one positioned read of its image member (``pread``): shards are never extracted,
no member is ever written anywhere, and nothing follows a member's name. Read in order
(``shuffle=False``) the reads of a shard are sequential. The read-ahead reads a run of members
in one native call that holds no GIL (:meth:`Shards.read_run`, ``fileread.read_spans``), as it
reads a folder's files; a member that call does not read whole is read again by
:meth:`Shards.read`, which raises the usual error naming it.

Members refused, each with a ``UserWarning`` naming the shard and the member: links (symbolic
or hard), device files, FIFOs and other non-regular members; names that are absolute, empty,
hold a NUL or a ``..`` component; members larger than ``max_bytes``; a member that ends past the
end of its shard (a truncated shard: the rest of that shard is left out). A header that cannot
be parsed ends the shard's index there, with a warning.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import io as mio
from . import fileread
from .sources import MAX_SAMPLE_BYTES, Source, expand_shards

#: extensions (lower case) of a sample's image member, in order of preference
IMAGE_EXTS = ("jpg", "jpeg", "png", "ppm", "pgm", "pbm", "bmp", "tif", "tiff", "webp")
#: largest label member read (.cls / .json), bytes
LABEL_MAX = 64 << 10
#: shards kept open at once (more are opened per read)
OPEN_SHARDS = 256

_KEY = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")


class Shards(Source):
    """Samples of tar shards in the WebDataset layout (see the module doc).

    Parameters
    ----------
    urls : str, os.PathLike or list of them
        Tar files, or globs of them (``"train-*.tar"``); globs are sorted.
    max_bytes : int, optional
        Largest member read; a larger one is refused (with a warning) when indexed.

    Attributes
    ----------
    shards : list of pathlib.Path
        The tar files, in order.
    labels : numpy.ndarray or None
        Per sample its label (-1 where it has none), or None where no sample has one.

    Raises
    ------
    FileNotFoundError
        A path or glob that names no file.
    ValueError
        A shard that is not a regular file or not a tar file, or no sample at all.
    """

    def __init__(self, urls: Any, *, max_bytes: int = MAX_SAMPLE_BYTES) -> None:
        self.shards = expand_shards(urls)
        self.max_bytes = int(max_bytes)
        shard_of, offsets, sizes, labels, names = [], [], [], [], []
        self._first: list[int] = []
        for s, path in enumerate(self.shards):
            self._first.append(len(offsets))
            for name, off, size, label in index_shard(path, self.max_bytes):
                shard_of.append(s)
                offsets.append(off)
                sizes.append(size)
                labels.append(label)
                names.append(name)
        if not offsets:
            raise ValueError(f"no samples with an image member in {len(self.shards)} tar "
                             f"shard(s) ({str(self.shards[0])!r} ...)")
        self._shard = np.asarray(shard_of, dtype=np.int32)
        self._offset = np.asarray(offsets, dtype=np.int64)
        self._size = np.asarray(sizes, dtype=np.int64)
        self._names = names
        lab = np.asarray(labels, dtype=np.int64)
        self.labels = lab if (lab >= 0).any() else None
        self._fds: dict[int, int] = {}
        self._lock = threading.Lock()
        #: per shard its kept descriptor, -1 where not open (what read_run looks up)
        self._fdv = np.full(len(self.shards), -1, np.int32)

    def __len__(self) -> int:
        return len(self._offset)

    def name(self, i: int) -> str:
        return f"{self.shards[int(self._shard[i])]}:{self._names[i]}"

    def size(self, i: int) -> int:
        return int(self._size[i])

    def read(self, i: int) -> bytes:
        s = int(self._shard[i])
        size, off = int(self._size[i]), int(self._offset[i])
        fd, own = self._fd(s)
        try:
            data = os.pread(fd, size, off)
        finally:
            if own:
                os.close(fd)
        if len(data) != size:
            raise ValueError(f"cannot read {self.name(i)!r}: the shard ends {size - len(data)} "
                             "bytes early (changed since it was indexed)")
        return data

    def read_run(self, indices: Sequence[int]) -> list[Any]:
        """Samples ``indices`` read in one call that holds no GIL (``fileread.read_spans``:
        ``pread`` at the indexed offsets; only where ``fileread.available()``).

        Returns
        -------
        list
            Per index its bytes (a read-only uint8 NumPy array), or None where the member was
            not read whole: :meth:`read` then reads it, and raises its usual error.
        """
        which = np.asarray(indices, dtype=np.int64)  # (an index past the end: IndexError)
        shard = self._shard[which]
        fds = self._fdv[shard]  # the shards' kept descriptors (-1: not open yet)
        owned: list[int] = []
        try:
            if (fds < 0).any():  # a run spans one shard or a few
                for s in np.unique(shard[fds < 0]).tolist():
                    fd, own = self._fd(s)
                    fds[shard == s] = fd
                    if own:
                        owned.append(fd)
            return fileread.read_spans(fds, self._offset[which], self._size[which],
                                       check=False)
        finally:
            for fd in owned:
                os.close(fd)

    @property
    def reads_runs(self) -> bool:
        """Whether :meth:`read_run` reads what :meth:`read` reads: not where a subclass
        reads its own way (its ``read`` is then called per sample, as before)."""
        return type(self).read is Shards.read

    def _fd(self, s: int) -> tuple[int, bool]:
        """A descriptor of shard ``s``, and whether the caller closes it (past OPEN_SHARDS)."""
        with self._lock:
            fd = self._fds.get(s)
            if fd is not None:
                return fd, False
            keep = len(self._fds) < OPEN_SHARDS
        fh = mio.open_regular(self.shards[s])
        fd = os.dup(fh.fileno())
        fh.close()
        if not keep:
            return fd, True
        with self._lock:
            old = self._fds.setdefault(s, fd)
        if old != fd:
            os.close(fd)
        else:
            self._fdv[s] = fd
        return old, False

    def files(self) -> list[Path]:
        return list(self.shards)

    def groups(self) -> list[list[int]]:
        ends = [*self._first[1:], len(self)]
        return [list(range(a, b)) for a, b in zip(self._first, ends, strict=True) if b > a]

    def close(self) -> None:
        """Close the shards' descriptors (reopened when read again)."""
        with self._lock:
            fds, self._fds = list(self._fds.values()), {}
            self._fdv[:] = -1
        for fd in fds:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __getstate__(self) -> dict:  # for the cluster path: descriptors stay behind
        state = dict(self.__dict__)
        state["_fds"] = {}
        state["_fdv"] = np.full(len(self.shards), -1, np.int32)
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _refuse(shard: Path, member: str, why: str) -> None:
    warnings.warn(f"tar shard {str(shard)!r}: member {member!r} refused: {why}", UserWarning,
                  stacklevel=4)


def _hostile_name(name: str) -> str | None:
    if not name or "\x00" in name:
        return "an empty name or one holding a NUL"
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", name):
        return "an absolute name"
    if ".." in re.split(r"[\\/]", name):
        return "a name with a '..' component"
    return None


def _kind(ti: tarfile.TarInfo) -> str | None:
    """Why a member that is not a regular file is refused (None: regular)."""
    if ti.isreg():
        return None
    if ti.issym():
        return f"a symbolic link (to {ti.linkname!r})"
    if ti.islnk():
        return f"a hard link (to {ti.linkname!r})"
    if ti.ischr() or ti.isblk():
        return "a device file"
    if ti.isfifo():
        return "a FIFO"
    return f"not a regular file (type {ti.type!r})"


def index_shard(path: Path, max_bytes: int) -> list[tuple[str, int, int, int]]:
    """``(image member name, data offset, size, label)`` per sample of one shard, in order
    (label -1: none); refused members warned about (see the module doc).

    Raises
    ------
    ValueError
        `path` is not a regular file (naming it) or not a tar file.
    """
    fh = mio.open_regular(path)
    with fh:
        end = os.fstat(fh.fileno()).st_size
        try:
            tf = tarfile.open(fileobj=fh, mode="r:")
        except tarfile.TarError as err:
            raise ValueError(f"{str(path)!r} is not a tar file ({err})") from err
        fd = fh.fileno()
        out: list[tuple[str, int, int, int]] = []
        key = None
        cur: dict[str, Any] = {}
        no_image = 0

        def flush() -> None:
            nonlocal no_image
            if key is None:
                return
            img = next((cur[e] for e in IMAGE_EXTS if e in cur), None)
            if img is None:
                no_image += 1
                return
            out.append((img[0], img[1], img[2], _label(fd, cur, path)))

        while True:
            try:
                ti = tf.next()
            except tarfile.TarError as err:
                warnings.warn(f"tar shard {str(path)!r}: unreadable header after "
                              f"{len(out)} samples, the rest left out ({err})", UserWarning,
                              stacklevel=3)
                break
            if ti is None:
                break
            tf.members = []  # tarfile keeps every member: drop them (memory flat)
            name = ti.name
            if ti.isdir():
                continue
            why = _hostile_name(name) or _kind(ti)
            if why is None and ti.size > max_bytes:
                why = f"{ti.size} bytes, over the limit of {max_bytes}"
            if why is None and ti.offset_data + ti.size > end:
                _refuse(path, name, f"it ends past the end of the shard ({end} bytes): a "
                        "truncated shard, the rest left out")
                break
            if why is not None:
                _refuse(path, name, why)
                continue
            m = _KEY.match(name)
            if m is None:
                continue  # no extension: not part of any sample
            k, ext = m.group(1), m.group(2).lower()
            if k != key:
                flush()
                key, cur = k, {}
            cur.setdefault(ext, (name, ti.offset_data, ti.size))
        flush()
        if no_image:
            warnings.warn(f"tar shard {str(path)!r}: {no_image} sample(s) without an image "
                          f"member ({', '.join(IMAGE_EXTS)}) left out", UserWarning,
                          stacklevel=3)
        return out


def _label(fd: int, members: dict, path: Path) -> int:
    """The sample's integer label from its ``.cls`` or ``.json`` member, -1 where none."""
    for ext in ("cls", "json"):
        got = members.get(ext)
        if got is None:
            continue
        name, off, size = got
        if size > LABEL_MAX:
            _refuse(path, name, f"a label of {size} bytes, over {LABEL_MAX}")
            continue
        text = os.pread(fd, size, off)
        try:
            if ext == "cls":
                return int(text.decode("ascii").strip())
            doc = json.loads(text)
            value = doc.get("label", doc.get("cls")) if isinstance(doc, dict) else doc
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        except (ValueError, UnicodeDecodeError):
            pass
        _refuse(path, name, "not an integer label")
    return -1
