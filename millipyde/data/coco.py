"""A COCO-style detection source: image files and one annotations JSON.

Per image, its objects: boxes (COCO's ``[x, y, width, height]`` made ``xyxy`` in pixel edges,
millipyde's box convention), labels (the annotations' ``category_id``) and a mask. The mask is
one integer ``H x W`` array with ``0`` for background and ``i + 1`` where object ``i`` lies (a
later object drawn over an earlier one), rasterised when the sample is read from the
annotation's polygons or run-length encoding (COCO's compressed string form too); it follows
the image through geometric ops as every millipyde mask does (``millipyde.targets``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .. import io as mio
from .sources import MAX_SAMPLE_BYTES, FileSource

#: largest annotations file read (bytes)
MAX_JSON_BYTES = 4 << 30


class Coco(FileSource):
    """Images with COCO-style annotations (see the module doc).

    Parameters
    ----------
    images : str or os.PathLike
        The folder the annotations' ``file_name`` entries are relative to.
    annotations : str or os.PathLike
        The JSON file (``images``, ``annotations``, ``categories``).
    masks : bool, default True
        Rasterise a mask per image from the ``segmentation`` entries.
    max_bytes : int, optional
        Largest image file read.

    Attributes
    ----------
    categories : dict of int to str
        ``category_id`` to name.
    image_ids : list of int
        The COCO ``id`` of each sample.

    Raises
    ------
    ValueError
        An annotations file that is not COCO-shaped (naming what is missing), or a
        ``file_name`` that leaves `images` (absolute, or with ``..``).
    """

    has_targets = True

    def __init__(self, images: Any, annotations: Any, *, masks: bool = True,
                 max_bytes: int = MAX_SAMPLE_BYTES) -> None:
        root = Path(os.fspath(images))
        if not root.is_dir():
            raise NotADirectoryError(f"Coco images folder {str(root)!r} is not a folder")
        doc = json.loads(mio.read_regular(annotations, MAX_JSON_BYTES))
        where = os.fspath(annotations)
        if not isinstance(doc, dict) or not isinstance(doc.get("images"), list):
            raise ValueError(f"Coco annotations {where!r}: no 'images' list")
        self.categories = {int(c["id"]): str(c.get("name", c["id"]))
                           for c in doc.get("categories", [])}
        paths, ids, hw = [], [], []
        for entry in doc["images"]:
            name = str(entry.get("file_name", ""))
            if not name or os.path.isabs(name) or ".." in Path(name).parts:
                raise ValueError(f"Coco annotations {where!r}: image file_name {name!r} "
                                 "leaves the images folder")
            paths.append(root / name)
            ids.append(int(entry["id"]))
            hw.append((int(entry.get("height", 0)), int(entry.get("width", 0))))
        if not paths:
            raise ValueError(f"Coco annotations {where!r}: no images")
        self.image_ids = ids
        self._hw = hw
        at = {img: i for i, img in enumerate(ids)}
        self._objects: list[list[dict]] = [[] for _ in ids]
        for ann in doc.get("annotations", []):
            i = at.get(int(ann.get("image_id", -1)))
            if i is not None and len(ann.get("bbox", ())) == 4:
                self._objects[i].append({"bbox": [float(v) for v in ann["bbox"]],
                                         "category_id": int(ann.get("category_id", 0)),
                                         "segmentation": ann.get("segmentation") if masks
                                         else None})
        self.masks = bool(masks)
        super().__init__(paths, max_bytes)

    def targets(self, i: int, shape: tuple[int, int] | None = None) -> dict:
        """``boxes`` (N, 4) float64 xyxy, ``labels`` (N,) int64 and ``mask`` (H, W) int32 (or
        None without masks) of sample ``i``; ``shape`` is the decoded image's (H, W), which
        wins over the annotations' own size."""
        objs = self._objects[i]
        boxes = np.zeros((len(objs), 4), dtype=np.float64)
        for j, o in enumerate(objs):
            x, y, w, h = o["bbox"]
            boxes[j] = (x, y, x + w, y + h)
        labels = np.asarray([o["category_id"] for o in objs], dtype=np.int64)
        mask = None
        if self.masks:
            h, w = shape if shape is not None else self._hw[i]
            mask = np.zeros((h, w), dtype=np.int32)
            for j, o in enumerate(objs):
                seg = o["segmentation"]
                if seg:
                    mask[rasterize(seg, h, w)] = j + 1
        return {"boxes": boxes, "labels": labels, "mask": mask}


def rasterize(seg: Any, h: int, w: int) -> np.ndarray:
    """A COCO ``segmentation`` (polygons, or RLE with a list or string of counts) as an
    (h, w) bool mask."""
    if isinstance(seg, list):
        from PIL import Image, ImageDraw

        canvas = Image.new("1", (w, h), 0)
        draw = ImageDraw.Draw(canvas)
        for poly in seg:
            pts = [(float(poly[t]), float(poly[t + 1])) for t in range(0, len(poly) - 1, 2)]
            if len(pts) >= 3:
                draw.polygon(pts, fill=1, outline=1)
        return np.array(canvas, dtype=bool)
    if isinstance(seg, dict) and "counts" in seg:
        rh, rw = (int(v) for v in seg.get("size", (h, w)))
        counts = seg["counts"]
        if isinstance(counts, (str, bytes)):
            counts = rle_counts(counts.encode() if isinstance(counts, str) else counts)
        flat = np.zeros(rh * rw, dtype=bool)
        at, value = 0, False
        for c in counts:
            c = int(c)
            if value:
                flat[at:at + c] = True
            at += c
            value = not value
        m = flat.reshape(rw, rh).T  # COCO's run-lengths are column-major
        out = np.zeros((h, w), dtype=bool)
        out[:min(h, rh), :min(w, rw)] = m[:h, :w]
        return out
    return np.zeros((h, w), dtype=bool)


def rle_counts(s: bytes) -> list[int]:
    """COCO's compressed RLE string (pycocotools' ``rleFrString``) as run lengths."""
    counts: list[int] = []
    p = 0
    while p < len(s):
        x, k, more = 0, 0, True
        while more:
            c = s[p] - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts
