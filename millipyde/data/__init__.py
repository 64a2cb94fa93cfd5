"""Datasets for the Generator: sources streamed from disk, decoded in batches, in epochs.

``mp.Generator(source, operations, shuffle=..., rank=..., world_size=...)`` takes any of these
(or a folder, a list of paths, tar shard paths, which it turns into them):

- :class:`Folder` -- image files under a folder; class subfolders give labels and ``classes``;
- :class:`Paths` -- a list of image files with optional labels;
- :class:`Shards` -- tar shards in the WebDataset layout (``key.jpg`` + ``key.cls``/``.json``);
- :class:`Coco` -- images and a COCO-style annotations file (boxes, labels, masks);
- :class:`Arrays` -- decoded images in memory.

Nothing is decoded before it is needed: a bounded pool of threads reads encoded bytes ahead
within a window bounded in bytes (``readahead``; files and tar members a run at a time by
native calls that hold no GIL, ``fileread``), batches are decoded on the device
(nvImageCodec) or by Pillow on a thread pool (``decode``), and bad files are skipped, named and
refilled (``loader``); on a GPU this runs in a worker process of the stream's own, its
batches shared without a copy (``process``). Epochs and shuffle follow torch's
``DistributedSampler`` (``sampler``).
docs/DATA.md is the guide.
"""

from . import process
from .coco import Coco
from .decode import DECODERS
from .loader import BadSampleError, BadSamples
from .process import DecodeWorkerError
from .resolve import as_source
from .sampler import EpochSampler
from .shards import Shards
from .sources import Arrays, Folder, Paths, Source

__all__ = ["DECODERS", "Arrays", "BadSampleError", "BadSamples", "Coco", "DecodeWorkerError",
           "EpochSampler", "Folder", "Paths", "Shards", "Source", "as_source", "process"]
