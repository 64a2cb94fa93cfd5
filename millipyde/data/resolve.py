"""What ``mp.Generator`` accepts, turned into a source of :mod:`millipyde.data`."""

from __future__ import annotations

from typing import Any

from .shards import Shards
from .sources import Folder, Paths, Source, is_pathlike, is_tar


def as_source(obj: Any, labels: Any = None) -> Source | None:
    """The source ``obj`` names for ``mp.Generator``, or None for in-memory inputs (a list of
    gpuarrays is kept as the Generator's inputs).

    - a :class:`Source`: itself;
    - a folder: :class:`Folder`;
    - a ``.tar`` path, a glob of them, or a list of ``.tar`` paths: :class:`Shards`;
    - a list of other paths: :class:`Paths` (with `labels`).

    Raises
    ------
    ValueError
        `labels` with a source that has its own, a missing path, or a mixed list.
    """
    if isinstance(obj, Source):
        if labels is not None:
            raise ValueError("Generator labels= goes with a list of paths or in-memory inputs; "
                             f"{type(obj).__name__} has its own")
        return obj
    if is_pathlike(obj):
        if is_tar(obj):
            if labels is not None:
                raise ValueError("Generator labels= cannot label tar shards (their members "
                                 "carry .cls / .json labels)")
            return Shards(obj)
        if labels is not None:
            raise ValueError("Generator labels= cannot label a folder (its class subfolders "
                             "do)")
        return Folder(obj)
    if isinstance(obj, (list, tuple)) and obj and all(is_pathlike(x) for x in obj):
        if all(is_tar(x) for x in obj):
            return Shards(list(obj))
        return Paths(obj, labels)
    return None
