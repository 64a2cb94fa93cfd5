"""Decoding encoded samples into device buffers, in batches.

- :class:`PillowDecoder`: Pillow on a pool of threads (Pillow's decoders release the GIL), with
  io.py's rules (:func:`millipyde.io.decode_array`: decompression bombs refused, every pixel
  decoded, grey / RGBA / CMYK / palette as ``load_array`` maps them) and the EXIF orientation
  applied. On the cpu backend its arrays are the device buffers; on a GPU they are uploaded.
- :class:`NvImageCodecDecoder`: nvImageCodec (nvJPEG, and the hardware JPEG decoder where the GPU
  has one) decodes a batch of colour JPEGs straight into device memory, which is wrapped as
  device buffers without a host copy; EXIF orientation applied by nvImageCodec. What it does not
  take (grey and CMYK JPEGs, PNG and the other formats, a JPEG it fails on) goes to Pillow, so
  the pixels of every format follow one set of rules. Optional: ``pip install
  nvidia-nvimgcodec-cu13`` (in millipyde's ``cuda`` extra); without it GPUs decode with Pillow,
  said once in a warning.
- :class:`NvImageCodecCDecoder`: the same decode through nvImageCodec's C API
  (``nvimgcodec_capi``, ctypes): the GIL is released a few times a batch, never per image,
  and the batch's images are decoded into one allocation of the backend; by default
  (:data:`CAPI_COMPILED`) the per-image calls run in compiled code (``capi_loop``, Numba)
  with the GIL released too: two releases a batch, one where compiled region boxes (a first
  ``random_resized_crop``) fit the allocation made before the parse (:data:`ONE_PASS`). Chosen
  where :func:`nvimgcodec_api`
  says ``"c"`` (``MILLIPYDE_NVIMGCODEC_API``, or :data:`NVIMGCODEC_API`).

:func:`make_decoder` picks one for the backend.
"""

from __future__ import annotations

import contextlib
import operator
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .. import config
from .. import io as mio
from ..backend import ACTIVE as runtime
from .laps import Laps
from .nvimgcodec_capi import ALIGN, pool_bytes

#: decoder choices of ``mp.Generator(decoder=...)``
DECODERS = ("auto", "pillow", "nvimgcodec")

_warned_missing = [False]

#: which interface of nvImageCodec decodes for ``decoder="nvimgcodec"``/``"auto"``:
#: ``"python"`` its Python binding (:class:`NvImageCodecDecoder`), ``"c"`` its C API through
#: ctypes (:class:`NvImageCodecCDecoder`); None: ``MILLIPYDE_NVIMGCODEC_API`` (default
#: ``"c"``). Read when a decoder is made; a decode worker process gets this process's
#: value. The C API takes the GIL's hand-overs out of the decode call (bench/RESULTS.md,
#: "nvImageCodec's C API through ctypes", and its H200 rows: 1.17-1.38x the binding in the
#: training process).
NVIMGCODEC_API: str | None = None

#: the C decoder parses and decodes a batch of compiled region boxes (``RowBoxes.parse_decode``)
#: in one pass, one GIL release, where the batch fits an allocation made before its parse: the
#: largest of the lane's last :data:`FIT_BATCHES` batches' (pool classes, at most 1/8 over a
#: size); a batch that does not fit is decoded in a second pass, as without (and the first
#: batch of a decoder). The cost: a batch's arena up to one size class or a few over its
#: need. False: two passes a batch (parse with the boxes, then decode). Read per batch; a
#: decode worker process gets this process's value
ONE_PASS = True
FIT_BATCHES = 4
#: with regions (``data.region``), the compiled loop lays the batch's allocation out for the
#: boxes drawn after its parse pass and makes the regions' code streams in the decode pass
#: (``capi_loop.regions_decode``): two GIL releases a batch (parse, regions and decode)
#: instead of three (parse, regions, decode), the offsets laid out once. False: the regions
#: made in a pass of their own, the allocation laid out after it. Read per batch; a decode
#: worker process gets this process's value.
REGIONS_IN_DECODE = True

#: the C API's per-batch loop compiled with Numba (``nvimgcodec_capi.loop``): every
#: per-image library call of a batch, the decode and its wait in two compiled passes with the
#: GIL released (none with it held); False: the ctypes loop (the per-image calls with the GIL
#: held, the decode and its wait released). Read per batch (the loop is compiled when a C
#: decoder is made with it on); where the compiled loop cannot load the ctypes loop decodes.
#: A decode worker process gets this process's value.
CAPI_COMPILED = True


def nvimgcodec_api() -> str:
    """``"python"`` or ``"c"``: :data:`NVIMGCODEC_API`, else ``MILLIPYDE_NVIMGCODEC_API``.

    Raises
    ------
    ValueError
        Another value (naming the setting).
    """
    if NVIMGCODEC_API is None:
        return config.nvimgcodec_api()
    if NVIMGCODEC_API not in ("python", "c"):
        raise ValueError(f"decode.NVIMGCODEC_API must be 'python' or 'c', got "
                         f"{NVIMGCODEC_API!r}")
    return NVIMGCODEC_API


def decode_threads() -> int:
    """Pillow decode threads: the cores this process may use, at most 32."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(32, n))


class PillowDecoder:
    """Pillow on a thread pool (see the module doc).

    Parameters
    ----------
    device : int
        Where the decoded buffers go (uploaded on a GPU backend).
    threads : int, optional
        Decode threads (default :func:`decode_threads`).
    """

    name = "pillow"
    #: :meth:`decode` times its segments into a ``laps`` (``data.laps``)
    takes_laps = True

    def __init__(self, device: int, threads: int | None = None) -> None:
        self.device = device
        self.threads = threads or decode_threads()
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads,
                                                thread_name_prefix="millipyde-decode")
            return self._pool

    def decode_host(self, items: list[tuple[bytes, str]]) -> list[Any]:
        """Per item ``(data, name)``: its array, or the ValueError naming it."""
        if len(items) == 1 or self.threads == 1:
            return [_decode_one(d, n) for d, n in items]
        return list(self._executor().map(lambda it: _decode_one(*it), items))

    def decode(self, datas: list[bytes], name_of: Callable[[int], str],
               stream: Any = None, laps: Laps | None = None) -> list[Any]:
        """Per encoded sample its device buffer, or its error (``name_of(r)`` names sample
        ``r`` of the list). ``laps``: its segments timed (``data.laps``)."""
        items = [(d, name_of(r)) for r, d in enumerate(datas)]
        got = self.decode_host(items)
        if laps is not None:
            laps.lap("pillow")
        if not runtime.caps.device_memory:  # the cpu backend: the arrays are the buffers
            return got
        out = [upload(a, self.device) for a in got]
        if laps is not None:
            laps.lap("upload")
        return out

    def close(self) -> None:
        """Stop the threads."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def _decode_one(data: Any, name: str) -> Any:
    if isinstance(data, BaseException):  # it could not be read
        return data
    try:
        return mio.decode_array(data, name, exif=True)
    except (ValueError, MemoryError) as err:
        return err


def upload(a: Any, device: int) -> Any:
    """A decoded host array as a device buffer (itself on the cpu backend); errors pass."""
    if isinstance(a, BaseException) or not runtime.caps.device_memory:
        return a
    try:
        return runtime.from_host(a, device)
    except Exception as err:  # out of device memory, say: a bad sample, not the end
        return err


def _bomb(name: str, pixels: int, limit: int) -> ValueError:
    """The error of an image refused as a decompression bomb (io.py's words)."""
    return ValueError(f"cannot load image {name!r}: refused as a possible decompression bomb "
                      f"({pixels} pixels, over the limit of {limit})")


def _route(datas: list[Any], name_of: Callable[[int], str],
           parse: Callable[[Any], Any]) -> tuple[list[Any], list[int], list[Any]]:
    """Which samples nvImageCodec decodes: ``(out, rows, code streams)``, ``out`` holding the
    decompression bombs' errors (None elsewhere), ``rows`` the samples of the code streams:
    those a reader thread parsed (:class:`Coded`) and those ``parse`` takes (it returns
    ``(code stream, pixels)``, else None or raises). The rest are left to Pillow."""
    out: list[Any] = [None] * len(datas)
    rows, streams = [], []
    limit = mio.pixel_limit()
    for r, data in enumerate(datas):
        if type(data) is Coded:  # parsed and checked by a reader thread
            rows.append(r)
            streams.append(data.stream)
            continue
        if isinstance(data, BaseException):  # not read: Pillow passes the error on
            continue
        try:
            got = parse(data)
        except Exception:  # not parsed: Pillow says why
            got = None
        if got is None:
            continue
        cs, pixels = got
        if pixels > limit:
            out[r] = _bomb(name_of(r), pixels, limit)
        else:
            rows.append(r)
            streams.append(cs)
    return out, rows, streams


def _fall_back(dec: Any, datas: list[Any], name_of: Callable[[int], str],
               out: list[Any]) -> list[Any]:
    """``out`` with every sample nvImageCodec left (None) decoded by ``dec.fallback``
    (Pillow), and ``dec``'s counts of both updated."""
    rest = [r for r in range(len(datas)) if out[r] is None]
    dec.on_gpu += len(datas) - len(rest)
    dec.on_host += len(rest)
    if rest:
        got = dec.fallback.decode([_bytes_of(datas[r]) for r in rest],
                                  lambda j: name_of(rest[j]))
        for r, v in zip(rest, got, strict=True):
            out[r] = v
    return out


class NvImageCodecDecoder:
    """nvImageCodec's batched decode into device memory (see the module doc).

    Parameters
    ----------
    device : int
        The GPU that decodes and keeps the images.
    fallback : PillowDecoder
        Decodes what nvImageCodec does not take.
    """

    name = "nvimgcodec"

    def __init__(self, device: int, fallback: PillowDecoder, module: Any = None) -> None:
        self.nv = module if module is not None else import_nvimgcodec()
        if self.nv is None:
            raise ImportError("nvImageCodec is not installed (pip install nvidia-nvimgcodec-cu13)")
        self.device = device
        self.fallback = fallback
        with runtime.on_device(device):
            # its CPU stages (parsing; Huffman decoding where no hardware decoder takes an
            # image) on this process's cores: one process per GPU shares the machine
            self._dec = self.nv.Decoder(device_id=device,
                                        max_num_cpu_threads=fallback.threads)
        self._params = self.nv.DecodeParams(apply_exif_orientation=True,
                                            color_spec=self.nv.ColorSpec.SRGB)
        #: samples decoded on the GPU and by the fallback (reports)
        self.on_gpu = 0
        self.on_host = 0

    def takes(self, cs: Any) -> bool:
        """Whether the GPU decodes this code stream: a colour (YCbCr / RGB) JPEG."""
        nv = self.nv
        return cs.codec_name == "jpeg" and cs.num_channels == 3 and \
            cs.color_spec in (nv.ColorSpec.SYCC, nv.ColorSpec.SRGB, nv.ColorSpec.UNKNOWN)

    def _parse(self, data: Any) -> tuple[Any, int] | None:
        """``(code stream, pixels)`` of a sample the GPU takes, else None."""
        cs = self.nv.CodeStream(data)
        return (cs, int(cs.width) * int(cs.height)) if self.takes(cs) else None

    def reader(self, source: Any) -> Callable[[int], Any]:
        """``read(i)`` for the read-ahead's threads (:func:`nvimgcodec_reader`)."""
        return nvimgcodec_reader(self.nv, source)

    def decode(self, datas: list[bytes], name_of: Callable[[int], str],
               stream: Any = None) -> list[Any]:
        """Per encoded sample its device buffer (a :class:`DeviceImage`), or its error
        (``name_of(r)`` names sample ``r``). The GPU's images are complete on ``stream``
        (queued behind the decode)."""
        out, gpu_rows, streams = _route(datas, name_of, self._parse)
        if gpu_rows:
            from ..backend.pool import stream_handle

            with runtime.on_device(self.device):
                handle = stream_handle(stream)
                try:
                    images = self._dec.decode(streams, params=self._params,
                                              cuda_stream=handle)
                except Exception:  # the whole batch refused: each one by Pillow below
                    images = [None] * len(gpu_rows)
                if len(images) != len(gpu_rows):
                    # nvImageCodec leaves out of its list the images it failed to decode:
                    # which ones is only known one by one (rare: a stream that parsed but
                    # did not decode)
                    images = [self._one(cs, handle) for cs in streams]
                for r, img in zip(gpu_rows, images, strict=True):
                    out[r] = None if img is None else _wrap(img, self._dec, stream)
        return _fall_back(self, datas, name_of, out)

    def _one(self, cs: Any, handle: int) -> Any:
        """One code stream decoded alone: its image, or None where nvImageCodec fails it."""
        try:
            return self._dec.decode(cs, params=self._params, cuda_stream=handle)
        except Exception:
            return None

    def close(self) -> None:
        """Stop the fallback's threads (nvImageCodec's decoder goes with its last image: the
        images decoded by it keep it)."""
        self.fallback.close()




class NvImageCodecCDecoder:
    """nvImageCodec's batched decode through its C API (``nvimgcodec_capi``, ctypes), the
    GIL released once for the decode call and once for its wait: its Python binding takes
    the GIL back about twice an image inside the call, and each take-back waits for any
    thread running Python meanwhile (bench/RESULTS.md, "the decode call inside the
    pipeline").

    Per batch: a code stream per sample (made in the read-ahead threads where
    ``loader.PARSE_IN_READERS`` is on, else here) and its header checked (a colour JPEG
    under the decompression-bomb limit, as :class:`NvImageCodecDecoder` checks it); ONE
    allocation of the backend (``runtime.empty`` on the decode stream: CuPy's pool on
    cuda, freed by the backend when the last image of the batch goes) holds every image,
    contiguous (H, W, 3) uint8 RGB at 256-byte aligned offsets; an output image is made over
    each offset (GIL held: a cheap call each), then one ``nvimgcodecDecoderDecode`` and one
    ``nvimgcodecFutureWaitForAll`` (GIL released). A sample the library fails (its
    processing status not SUCCESS), and what it does not take (grey, CMYK, PNG, ...), go to
    Pillow as in :class:`NvImageCodecDecoder`. EXIF orientation applied, sRGB colour.

    Where :data:`CAPI_COMPILED` is on (the default) and the compiled loop loads
    (``nvimgcodec_capi.loop``, Numba), the per-image calls run in compiled code with the GIL
    released: one pass makes the code streams and checks their headers, one makes the
    output images, decodes, waits and reads the statuses (two releases a batch, as the
    ctypes loop's decode and wait; no library call with the GIL held). With compiled region
    boxes, from a decoder's second batch the two passes are one, one release a batch, where
    the batch fits an allocation made before its parse (:data:`ONE_PASS`, the default). What
    Python does per sample is reduced to putting its address in an array and making its view
    after.

    On a GPU the images are :class:`DeviceImage` views of the batch's allocation, complete
    on the decode stream; on the cpu backend (``host``: libjpeg-turbo on the CPU, host
    buffers) NumPy views of it.

    Parameters
    ----------
    device : int
        The GPU that decodes and keeps the images (on the cpu backend: the device whose
        memory the host buffers are).
    fallback : PillowDecoder
        Decodes what nvImageCodec does not take.
    host : bool, optional
        Decode on the CPU into host buffers (default: where the backend has no device
        memory).

    Raises
    ------
    ImportError
        The nvImageCodec wheel is not installed or its library does not load.
    """

    name = "nvimgcodec-c"
    #: :meth:`decode` takes ``boxes`` and ``regions`` (``data.region``)
    decodes_regions = True
    #: :meth:`decode` times its segments into a ``laps`` (``data.laps``)
    takes_laps = True

    def __init__(self, device: int, fallback: PillowDecoder, host: bool | None = None) -> None:
        from . import nvimgcodec_capi as capi

        inst = capi.instance()
        if inst is None:
            raise ImportError("nvImageCodec's library is not installed (pip install "
                              "nvidia-nvimgcodec-cu13)")
        self.capi = capi
        self.device = device
        self.fallback = fallback
        self.host = (not runtime.caps.device_memory) if host is None else bool(host)
        if self.host:
            self._dec = capi.Decoder(inst, capi.DEVICE_CPU_ONLY, fallback.threads,
                                     [capi.BACKEND_KIND_CPU_ONLY], host=True)
        else:
            with runtime.on_device(device):
                self._dec = capi.Decoder(inst, device, fallback.threads)
        self._colour = (capi.COLORSPEC_SYCC, capi.COLORSPEC_SRGB, capi.COLORSPEC_UNKNOWN)
        #: samples decoded by nvImageCodec and by the fallback (reports)
        self.on_gpu = 0
        self.on_host = 0
        #: the allocation of the next batch of compiled regions, made before its parse (0:
        #: none: two passes), and the last batches' (``ONE_PASS``)
        self._fits = 0
        self._sizes: list[int] = []
        if CAPI_COMPILED:  # compiled (or read from the disk cache) here, not at a first batch
            capi.loop()

    def takes(self, cs: Any) -> bool:
        """Whether nvImageCodec decodes this code stream: a colour (YCbCr / RGB) JPEG."""
        return cs.codec == "jpeg" and cs.channels == 3 and cs.color_spec in self._colour

    def another(self) -> NvImageCodecCDecoder:
        """A decoder like this one (same device, CPU threads and memory), for a further
        decode lane of a :class:`~millipyde.data.loader.Loader`."""
        return NvImageCodecCDecoder(self.device, PillowDecoder(self.device,
                                                               self.fallback.threads),
                                    self.host)

    def _parse(self, data: Any) -> tuple[Any, int] | None:
        """``(code stream, pixels)`` of a sample it takes, else None (:func:`coded_reader`'s
        parse: ``data`` the sample's bytes, or a file's path where ``NATIVE_FILES``)."""
        dec = self._dec
        cs = dec.parse_file(data) if isinstance(data, str) else dec.parse(data)
        if cs is None or not self.takes(cs):
            return None
        return cs, cs.height * cs.width

    def reader(self, source: Any) -> Callable[[int], Any]:
        """``read(i)`` for the read-ahead's threads (:func:`coded_reader`)."""
        return coded_reader(source, self._parse)

    def decode(self, datas: list[Any], name_of: Callable[[int], str],
               stream: Any = None, boxes: Callable | None = None,
               regions: np.ndarray | None = None, laps: Laps | None = None) -> list[Any]:
        """Per encoded sample its decoded buffer (a :class:`DeviceImage` on a GPU, a NumPy
        array on the host), or its error (``name_of(r)`` names sample ``r``). The GPU's
        images are complete on ``stream`` (queued behind the decode).

        ``boxes(rows, hw)``: the rectangles (top, left, bottom, right) to decode of samples
        ``rows`` (int64 indices into ``datas``) whose headers give sizes ``hw``
        (``training.region_plan.RegionPlan.boxes``); each sample decoded as a region gets its
        row of ``regions`` ((n, 4): top, left, the whole image's height and width), the others
        keep theirs. Regions are decoded through the compiled loop only, and only for
        JPEGs without an EXIF orientation (nvImageCodec's region is in the coded image's
        frame); the rest is decoded whole. ``laps``: its segments timed (``data.laps``)."""
        if CAPI_COMPILED:
            loop = self.capi.loop()
            if loop is not None:
                return self._decode_compiled(loop, datas, name_of, stream, boxes, regions,
                                             laps)
        out, rows, streams = _route(datas, name_of, self._parse)
        if rows:
            for r, img in zip(rows, self._decode_batch(streams, stream), strict=True):
                out[r] = img
        if laps is not None:
            laps.lap("decode")
        got = _fall_back(self, datas, name_of, out)
        if laps is not None:
            laps.lap("fallback")
        return got

    def _allocate(self, nbytes: int) -> Any:
        """A batch's allocation (the caller is on the device and the decode stream), or
        None where it cannot be had (out of memory, say: Pillow tries each sample)."""
        try:
            if self.host and runtime.caps.device_memory:  # host buffers beside a GPU
                return np.empty((nbytes,), np.uint8)
            # the backend's memory: CuPy's pool on the decode stream on cuda
            return runtime.empty((nbytes,), np.uint8, self.device)
        except Exception:
            return None

    def _view(self, whole: Any, base: int, off: int, h: int, w: int, stream: Any) -> Any:
        """The (h, w, 3) image at offset ``off`` of a batch's allocation: a NumPy view on
        the host, a :class:`DeviceImage` on a GPU."""
        shape = (h, w, 3)
        if self.host:
            return whole[off:off + h * w * 3].reshape(shape)
        return DeviceImage(_Part(whole, base + off, shape), shape, base + off, None, stream)

    @contextlib.contextmanager
    def _on_device(self, stream: Any) -> Iterator[None]:
        """The context a batch is allocated and decoded in: its device, its stream."""
        with runtime.on_device(self.device), runtime.using_stream(stream) \
                if stream is not None else contextlib.nullcontext():
            yield

    def _decode_batch(self, streams: list[Any], stream: Any) -> list[Any]:
        """The code streams decoded into one allocation: per stream its image, or None
        where nvImageCodec failed it (or the allocation or the call failed)."""
        offsets, at = [], 0
        for cs in streams:
            offsets.append(at)
            at += -(-cs.height * cs.width * 3 // ALIGN) * ALIGN
        # coarse size classes: batches of slightly different sizes reuse the pool's blocks
        at = pool_bytes(at)
        from ..backend.pool import stream_handle

        with self._on_device(stream):
            whole = self._allocate(at)
            if whole is None:
                return [None] * len(streams)
            base = _address_of(whole)
            # host buffers: no CUDA stream to order on (the CPU decode is done at the wait)
            done = self._dec.decode(streams, [base + off for off in offsets],
                                    0 if self.host else stream_handle(stream))
        if done is None:
            return [None] * len(streams)
        return [self._view(whole, base, off, cs.height, cs.width, stream) if ok else None
                for cs, off, ok in zip(streams, offsets, done, strict=True)]

    def _sub_streams(self, loop: Any, boxes: Callable, regions: np.ndarray,
                     handles: np.ndarray, states: np.ndarray, dims: np.ndarray,
                     offsets: np.ndarray, parents: np.ndarray,
                     laps: Laps | None = None) -> int:
        """After :meth:`parse_many`: the boxes of the taken samples without an EXIF
        orientation (``boxes``, in one call), a code stream of each box that is not its
        whole image (``Decoder.sub_streams_many``: compiled, the GIL released), and the
        offsets laid out again for the regions' sizes. Returns the allocation's bytes."""
        taken = (states == loop.ST_TAKEN) | (states == loop.ST_GIVEN)
        plain = np.flatnonzero(taken & (dims[:, 2:5] == 0).all(axis=1))
        if len(plain):
            box = np.zeros((len(states), 4), np.int64)
            box[:, 2:4] = dims[:, 0:2]
            box[plain] = np.asarray(boxes(plain, dims[plain, :2]), dtype=np.int64)
            if laps is not None:
                laps.lap("boxes")
            self._dec.sub_streams_many(handles, states, dims, box, regions, parents)
            if laps is not None:
                laps.regain(self._dec.regain_ns)
                laps.lap("regions")
        rows = np.flatnonzero(taken)
        size = -(-(dims[rows, 0] * dims[rows, 1] * 3) // ALIGN) * ALIGN
        offsets[rows] = np.cumsum(size) - size
        return pool_bytes(int(size.sum()))

    def _region_layout(self, loop: Any, boxes: Callable, states: np.ndarray,
                       dims: np.ndarray, offsets: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, int]:
        """After :meth:`parse_many`, for ``Decoder.decode_many``'s ``regions``: ``(box,
        slots, bytes)``, the boxes of the taken samples without an EXIF orientation
        (``boxes``, in one call; the rest their whole image), each taken sample's bytes in
        the allocation (its box's image) and ``offsets`` laid out for them, and the
        allocation's bytes."""
        n = len(states)
        box = np.empty((n, 4), np.int64)
        slots = np.empty(n, np.int64)
        fast = getattr(boxes, "layout", None)
        if fast is not None:  # the boxes and the layout in one compiled call
            total = fast(states, dims, (loop.ST_TAKEN, loop.ST_GIVEN), ALIGN, box, slots,
                         offsets)
            return box, slots, pool_bytes(total)
        taken = (states == loop.ST_TAKEN) | (states == loop.ST_GIVEN)
        plain = np.flatnonzero(taken & (dims[:, 2:5] == 0).all(axis=1))
        box[:] = 0
        box[:, 2:4] = dims[:, 0:2]
        if len(plain):
            box[plain] = np.asarray(boxes(plain, dims[plain, :2]), dtype=np.int64)
        rows = np.flatnonzero(taken)
        slots[:] = 0
        slots[rows] = (box[rows, 2] - box[rows, 0]) * (box[rows, 3] - box[rows, 1]) * 3
        size = -(-slots[rows] // ALIGN) * ALIGN
        offsets[rows] = np.cumsum(size) - size
        return box, slots, pool_bytes(int(size.sum()))

    def _decode_compiled(self, loop: Any, datas: list[Any], name_of: Callable[[int], str],
                         stream: Any, boxes: Callable | None = None,
                         regions: np.ndarray | None = None,
                         laps: Laps | None = None) -> list[Any]:
        """:meth:`decode` through the compiled loop (``loop``: ``capi_loop``): per sample
        only its address (bytes) or code stream (:class:`Coded`) put in arrays here, and its
        view made after; every library call in two passes with the GIL released (one where
        :data:`ONE_PASS`'s allocation, made before the parse, fits the batch's regions)."""
        n = len(datas)
        out: list[Any] = [None] * n
        layout = None  # every sample decoded into the allocation: (it, offsets, shapes)
        keep: list[Any] = []  # buffers made here for the call (the rest are ``datas``')
        at = _BYTES_AT
        dims = np.zeros((n, 5), np.int64)
        kinds = set(map(type, datas))
        if at is not None and kinds == {bytes}:  # bytes read by Python
            # (one pass of C over the list each: no Python per sample)
            address = np.fromiter(map(id, datas), np.int64, n)
            address += at
            size = np.fromiter(map(len, datas), np.int64, n)
            states = np.full(n, loop.ST_PARSE, np.int32)
            handles = np.zeros(n, np.int64)
        elif _ARRAY_AT is not None and kinds == {np.ndarray} and \
                set(map(_DTYPE_STRIDES, datas)) == {_BYTE_VIEW}:  # (a pass of C)
            # the read-ahead's views of its runs (a folder's files read without the GIL):
            # their data pointers read from their objects in one compiled call
            address = np.empty(n, np.int64)
            loop.words_at(np.fromiter(map(id, datas), np.int64, n), _ARRAY_AT, address)
            size = np.fromiter(map(len, datas), np.int64, n)
            states = np.full(n, loop.ST_PARSE, np.int32)
            handles = np.zeros(n, np.int64)
        else:
            state = [loop.ST_SKIP] * n
            address, size, handle = [0] * n, [0] * n, [0] * n
            given: list[int] = []
            for r, data in enumerate(datas):
                kind = type(data)
                if kind is bytes and at is not None:
                    address[r], size[r], state[r] = id(data) + at, len(data), loop.ST_PARSE
                elif kind is Coded:  # parsed and checked by a reader thread
                    handle[r], state[r] = data.stream.handle, loop.ST_GIVEN
                    given.append(r)
                elif not isinstance(data, BaseException):  # not read: Pillow passes the error
                    try:
                        a = np.frombuffer(data, np.uint8) if kind is bytes else \
                            self.capi._address(data)[2]
                        if not isinstance(a, np.ndarray):
                            a = np.frombuffer(a, np.uint8)
                    except Exception:  # not a buffer: Pillow says why
                        continue
                    keep.append(a)
                    address[r], size[r], state[r] = a.ctypes.data, a.nbytes, loop.ST_PARSE
            states = np.array(state, np.int32)
            handles = np.array(handle, np.int64)
            if given:
                dims[given] = [datas[r].stream.dims for r in given]
        offsets = np.zeros(n, np.int64)
        limit = mio.pixel_limit()
        dec = self._dec
        if laps is not None:
            laps.lap("prep")
        # the regions made in the decode pass: their boxes laid out in the parse pass where
        # the plan's are compiled (no Python between the passes but the allocation), and the
        # two passes one where the allocation can be made before (``_fits``)
        from ..backend.pool import stream_handle

        one_pass = None  # (box, slots): regions made in the decode pass
        laid = boxes is not None and regions is not None and REGIONS_IN_DECODE and \
            dec.decodes_regions and getattr(boxes, "parse_decode", None) is not None
        if laid:
            one_pass = np.zeros((n, 4), np.int64), np.zeros(n, np.int64)
        address = np.asarray(address, np.int64)
        size = np.asarray(size, np.int64)
        passed = False  # to decode_many, which destroys the code streams parse_many made
        # whole code streams of regions, destroyed after (by the decode pass itself where
        # the regions are made in it)
        parents = np.zeros(n, np.int64)
        done = np.zeros(n, np.uint8)
        decoded = False
        whole = None
        total = None
        fits = self._fits if laid and ONE_PASS else 0
        if fits:
            with self._on_device(stream):
                whole = self._allocate(fits)
                if whole is not None:
                    base = _address_of(whole)
                    cuda_stream = 0 if self.host else stream_handle(stream)
                    if laps is not None:
                        laps.lap("alloc")
                    total, rc = dec.parse_decode_many(
                        address, size, handles, states, dims, offsets, limit,
                        (boxes, *one_pass, regions, parents), base, fits, cuda_stream, done)
                    if rc is not None:  # parsed and decoded in the one pass
                        passed = True
                        decoded = rc == loop.OK
                    else:
                        whole = None  # did not fit: allocated again below
                    if laps is not None:
                        laps.regain(dec.regain_ns)
                        for stage, ns in dec.stages_ns.items():
                            laps.part(f"decode.{stage}", ns)
                        laps.lap("decode" if passed else "parse")
                    total = pool_bytes(total) if total else 0
        if total is None:
            total = dec.parse_many(address, size, handles, states, dims, offsets, limit,
                                   (boxes, *one_pass) if laid else None)
            if laps is not None:
                laps.regain(dec.regain_ns)
                laps.lap("parse")
        if laid and total:  # the next batch's allocation, made before its parse
            self._sizes = (self._sizes + [total])[-FIT_BATCHES:]
            self._fits = max(self._sizes)
        lazy = None  # the batch laid out whole: its rows made where read (LazyImages)
        try:
            if laid:
                if not total:
                    one_pass = None  # nothing taken: nothing to decode here
                if laps is not None and not passed:
                    laps.lap("boxes")
            elif total and boxes is not None and regions is not None and REGIONS_IN_DECODE \
                    and dec.decodes_regions:
                box, slots, total = self._region_layout(loop, boxes, states, dims, offsets)
                one_pass = box, slots
                if laps is not None:
                    laps.lap("boxes")
            elif total and boxes is not None and regions is not None:
                total = self._sub_streams(loop, boxes, regions, handles, states, dims,
                                          offsets, parents, laps)
            elif total:
                # samples of other sizes (a real dataset's) vary a batch's bytes too
                total = pool_bytes(total)
            for r in np.flatnonzero(states == loop.ST_BOMB).tolist():
                out[r] = _bomb(name_of(r), int(dims[r, 0] * dims[r, 1]), limit)
            if total:
                if not passed:
                    with self._on_device(stream):
                        whole = self._allocate(total)
                        if whole is not None:
                            base = _address_of(whole)
                            cuda_stream = 0 if self.host else stream_handle(stream)
                            passed = True
                            if laps is not None:
                                laps.lap("alloc")
                            decoded = dec.decode_many(
                                base, cuda_stream, handles, states, dims, offsets, done,
                                None if one_pass is None else
                                (one_pass[0], regions, parents, one_pass[1]))
                            if laps is not None:
                                laps.regain(dec.regain_ns)
                                for stage, ns in dec.stages_ns.items():
                                    laps.part(f"decode.{stage}", ns)
                                laps.lap("decode")
                if regions is not None:  # a region not decoded goes whole to Pillow
                    regions[(done == 0) & (regions[:, 0] >= 0)] = -1
                if decoded and not self.host and n and done.all():
                    # the batch's arena as it is: its images made only where a row is read
                    # (the batch engine reads the layout; a Python object per image was
                    # ~1 ms of the lane call's GIL, bench/RESULTS.md)
                    shapes = np.stack([dims[:, 0], dims[:, 1], np.full(n, 3)], axis=1)
                    layout = (whole, offsets.copy(), shapes)
                    lazy = LazyImages(layout, base, stream)
                elif decoded:
                    hs, ws = dims[:, 0].tolist(), dims[:, 1].tolist()
                    offs = offsets.tolist()
                    view = self._view
                    for r in np.flatnonzero(done).tolist():
                        out[r] = view(whole, base, offs[r], hs[r], ws[r], stream)
                if decoded and laps is not None:
                    laps.lap("views")
        finally:
            if not passed:
                dec.release_many(handles, states)
            if parents.any():
                dec.destroy_many(parents)
        del keep  # the bytes made here outlived both passes
        if lazy is not None:  # every sample decoded: none for Pillow
            self.on_gpu += n
            got: Any = lazy
        else:
            got = Decoded(_fall_back(self, datas, name_of, out), layout)
        if laps is not None:
            laps.lap("fallback")
        return got

    def close(self) -> None:
        """Stop the fallback's threads and destroy the decoder (its images' memory is the
        backend's, kept by the images)."""
        self.fallback.close()
        self._dec.close()


def _address_of(buffer: Any) -> int:
    """The address of a buffer's first byte: a NumPy array's, or a device array's of the
    backend."""
    if isinstance(buffer, np.ndarray):
        return int(buffer.ctypes.data)
    from numba.cuda.cudadrv import driver

    return int(driver.device_pointer(buffer))


def _bytes_at() -> int | None:
    """The offset of a ``bytes`` object's first byte from its ``id`` (CPython keeps the
    bytes inside the object, at ``bytes.__basicsize__ - 1``), checked against the address
    ctypes hands a C function for it; None where the two differ (another interpreter):
    the compiled loop then takes each sample's address through NumPy."""
    import ctypes

    probe = b"millipyde"
    try:
        at = bytes.__basicsize__ - 1
        real = ctypes.cast(ctypes.c_char_p(probe), ctypes.c_void_p).value
    except Exception:
        return None
    return at if real == id(probe) + at else None


_BYTES_AT = _bytes_at()
#: an array's dtype and strides (what the compiled loop's fast path asks of each sample)
_DTYPE_STRIDES = operator.attrgetter("dtype", "strides")


def _array_data_at() -> int | None:
    """The offset of a NumPy array's data pointer from its ``id`` (CPython's NumPy array
    object holds it right after the object's head), checked against NumPy's address of a
    view; None where the two differ: the compiled loop then takes each array's address
    through NumPy (``ndarray.ctypes.data``, ~2 us a sample)."""
    import ctypes

    base = np.zeros(64, np.uint8)
    probe = base[8:40]
    try:
        at = object.__basicsize__
        real = ctypes.c_int64.from_address(id(probe) + at).value
    except Exception:
        return None
    return at if real == probe.ctypes.data else None


_ARRAY_AT = _array_data_at()
#: (dtype, strides) of a contiguous 1-D byte array (a read-ahead run's view of a file)
_BYTE_VIEW = (np.dtype(np.uint8), (1,))


class _Part:
    """One image of a batch's allocation (what :class:`DeviceImage` holds as its image); it
    keeps the allocation alive. Its ``__cuda_array_interface__`` is made when asked for (the
    per-output path's :meth:`DeviceImage.buffer`; the batch engine copies by address)."""

    __slots__ = ("whole", "ptr", "shape")

    def __init__(self, whole: Any, ptr: int, shape: tuple[int, ...]) -> None:
        self.whole, self.ptr, self.shape = whole, ptr, shape

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"data": (self.ptr, False), "shape": self.shape, "typestr": "|u1",
                "strides": None, "version": 3}


#: nvImageCodec can open a file through a descriptor this process holds (Linux)
_PROC_FD = os.path.isdir("/proc/self/fd")
#: files are mapped and parsed by nvImageCodec itself through ``/proc/self/fd/N`` (False:
#: read by Python as other sources are, then parsed; read when a reader is made). Off:
#: nvImageCodec (0.9.0, the binding and the C API alike) keys the files it opens by their
#: path, so a code stream made from ``/proc/self/fd/N`` while another made from the same
#: path (another file, whose descriptor N had been) is alive is the older file's, header and
#: pixels: the read-ahead keeps thousands of parsed samples alive and descriptors are
#: reused, so samples would decode as other files (tests/test_data_nvimgcodec_capi.py shows
#: it). The bench's ``--parse readers`` still switches it on to time it.
NATIVE_FILES = False


def nvimgcodec_reader(nv: Any, source: Any) -> Callable[[int], Any]:
    """``read(i)`` for the read-ahead's threads of ``source`` (``nv``: the nvImageCodec
    module): sample ``i`` as a :class:`Coded` (its code stream parsed, checked as one the
    GPU decodes) where nvImageCodec takes it, else its bytes (Pillow decodes them, or says
    why not).

    Every per-sample Python call before the batched decode runs here, in the reader
    threads, so the decode thread makes one call a batch. A file (``source.paths``) is
    opened as ``io.open_regular_fd`` opens it (non-blocking, a regular file, at most
    ``source.max_bytes``) and nvImageCodec maps and parses it by itself through the
    open descriptor (``/proc/self/fd``): no bytes of it pass through Python. Other
    sources' bytes (``source.read``) are wrapped without a copy.

    Raises (from ``read``)
    ----------------------
    OSError or ValueError
        The sample cannot be read, or is a decompression bomb (naming it).
    """
    colour = (nv.ColorSpec.SYCC, nv.ColorSpec.SRGB, nv.ColorSpec.UNKNOWN)

    def parse(data: Any) -> tuple[Any, int] | None:
        cs = nv.CodeStream(data)
        if cs.codec_name == "jpeg" and cs.num_channels == 3 and cs.color_spec in colour:
            return cs, int(cs.width) * int(cs.height)
        return None

    return coded_reader(source, parse)


def coded_reader(source: Any, parse: Callable[[Any], Any]) -> Callable[[int], Any]:
    """``read(i)`` of :func:`nvimgcodec_reader` with the parse given: ``parse(x)`` (``x`` a
    path of ``/proc/self/fd`` or the sample's bytes) returns ``(code stream, pixels)`` for a
    sample the decoder takes, else None (or raises where it does not parse)."""
    paths = getattr(source, "paths", None) if _PROC_FD and NATIVE_FILES else None
    max_bytes = getattr(source, "max_bytes", None)
    limit = mio.pixel_limit()

    def read(i: int) -> Any:
        data = None
        if paths is not None:
            # unreadable, not a regular file, too large: raises, naming the file
            fd, nbytes = mio.open_regular_fd(paths[i], max_bytes)
        else:
            data = source.read(i)
            nbytes = len(data)
        try:
            if data is None:
                try:
                    got = parse(f"/proc/self/fd/{fd}")
                finally:
                    os.close(fd)
            else:
                got = parse(data)
        except Exception:  # nvImageCodec does not parse it: Pillow says why
            got = None
        if got is None:
            return data if data is not None else source.read(i)
        cs, pixels = got
        if pixels > limit:
            raise _bomb(source.name(i), pixels, limit)
        return Coded(cs, nbytes, source, i)

    return read


class Coded:
    """A sample a reader thread parsed for nvImageCodec: its code stream (a colour JPEG
    under the pixel limit), the bytes it holds (``len``), and where to read it again for
    Pillow should nvImageCodec fail to decode it."""

    __slots__ = ("stream", "nbytes", "source", "index")

    def __init__(self, stream: Any, nbytes: int, source: Any, index: int) -> None:
        self.stream, self.nbytes, self.source, self.index = stream, int(nbytes), source, index

    def __len__(self) -> int:
        return self.nbytes


def _bytes_of(data: Any) -> Any:
    """Encoded bytes for Pillow: a :class:`Coded` sample is read again (or its error)."""
    if type(data) is not Coded:
        return data
    try:
        return data.source.read(data.index)
    except (OSError, ValueError) as err:
        return err


class DeviceImage:
    """A decoded nvImageCodec image on the device, described without numba-cuda: shape,
    dtype and the address of its (contiguous) memory; it keeps the image alive. The batch
    engine copies it by address (``Backend.copy_from_pointer``); :meth:`buffer` makes the
    numba device array over it for the per-output path (no copy).

    The image's memory was allocated on the stream it was decoded on (``cudaMallocAsync``)
    and is freed on that stream (``cudaFreeAsync``) when the image goes, in whichever
    thread drops it last (a garbage collection's, say). Decode streams are never destroyed
    (``Backend.take_stream``): a destroyed one left the free to a dead handle, the
    segmentation faults of streamed runs (bench/RESULTS.md, datasets). The image also keeps
    its decoder, released after it."""

    __slots__ = ("_held", "shape", "dtype", "ndim", "size", "device_ptr", "_buffer")

    def __init__(self, image: Any, shape: tuple[int, ...], ptr: int, decoder: Any = None,
                 stream: Any = None, dtype: Any = np.uint8) -> None:
        # one tuple holds all three: a tuple releases its items last to first, so the image
        # goes before its decoder and its stream (slots are released in no promised order)
        self._held = (stream, decoder, image)
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.ndim = len(shape)
        size = 1
        for d in shape:
            size *= int(d)
        self.size = size
        self.device_ptr = int(ptr)
        self._buffer = None

    @property
    def image(self) -> Any:
        """The nvImageCodec image."""
        return self._held[2]

    def buffer(self) -> Any:
        """The numba device array over the image's memory (made once)."""
        if self._buffer is None:
            from numba import cuda

            # without its stream: the array would keep nvImageCodec's stream as its default
            # one, which need not outlive the decoder; readers order themselves on events
            face = {k: v for k, v in self.image.__cuda_array_interface__.items()
                    if k != "stream"}
            self._buffer = cuda.from_cuda_array_interface(face, owner=self._held, sync=False)
        return self._buffer


class Decoded(list):
    """A decoder's samples (a list, as every decoder returns) with the batch's ``layout``:
    ``(allocation, offsets, shapes)`` as :func:`one_allocation` gives them, where the C
    decoder decoded every sample into one device allocation (None elsewhere), so that no
    pass over the samples finds it again."""

    __slots__ = ("layout",)

    def __init__(self, items: Any = (), layout: tuple | None = None) -> None:
        super().__init__(items)
        self.layout = layout


class LazyImages(Sequence):
    """A batch the C decoder decoded whole into one device allocation: its rows as
    :class:`DeviceImage` views of it (as :meth:`NvImageCodecCDecoder._view` makes them),
    each made when first read, and the batch's ``layout`` (as :class:`Decoded`'s). The batch
    engine reads the layout and a few rows; the per-output path, a worker process and
    detection targets read every row.

    Parameters
    ----------
    layout : tuple
        ``(allocation, byte offsets, (n, 3) shapes)``.
    base : int
        The allocation's address.
    stream : object
        The decode stream the images are complete on (and freed on).
    """

    __slots__ = ("layout", "_base", "_stream", "_rows")

    def __init__(self, layout: tuple, base: int, stream: Any) -> None:
        self.layout = layout
        self._base, self._stream = int(base), stream
        self._rows: list[Any] = [None] * len(layout[1])

    def __len__(self) -> int:
        return len(self._rows)

    def _row(self, r: int) -> DeviceImage:
        img = self._rows[r]
        if img is None:
            whole, offsets, shapes = self.layout
            ptr = self._base + int(offsets[r])
            shape = (int(shapes[r, 0]), int(shapes[r, 1]), int(shapes[r, 2]))
            img = self._rows[r] = DeviceImage(_Part(whole, ptr, shape), shape, ptr, None,
                                              self._stream)
        return img

    def __getitem__(self, r: Any) -> Any:
        if isinstance(r, slice):
            return [self._row(i) for i in range(*r.indices(len(self._rows)))]
        n = len(self._rows)
        i = operator.index(r)
        if not -n <= i < n:
            raise IndexError(f"row {r} of a batch of {n}")
        return self._row(i + n if i < 0 else i)

    def __iter__(self) -> Iterator[Any]:
        return (self._row(i) for i in range(len(self._rows)))


def one_allocation(arrays: list, layout: tuple | None = None
                   ) -> tuple[Any, np.ndarray, np.ndarray] | None:
    """Where every array is a :class:`DeviceImage` of one batch allocation (a batch
    :class:`NvImageCodecCDecoder` decoded whole, no sample refilled or decoded by Pillow):
    the allocation, each image's byte offset in it and the (n, 3) shapes; else None.
    ``layout``: the decoder's (``Decoded.layout``, carried by ``DecodedBatch.layout``),
    taken as it is."""
    if layout is not None:
        return layout
    if not arrays or type(arrays[0]) is not DeviceImage:
        return None
    part = arrays[0]._held[2]
    if type(part) is not _Part:
        return None
    whole = part.whole
    ptrs = np.empty(len(arrays), np.int64)
    for i, a in enumerate(arrays):
        if type(a) is not DeviceImage:
            return None
        p = a._held[2]
        if type(p) is not _Part or p.whole is not whole:
            return None
        ptrs[i] = p.ptr
    shapes = np.array([a.shape for a in arrays], dtype=np.int64)
    if shapes.ndim != 2 or shapes.shape[1] != 3:
        return None
    return whole, ptrs - _address_of(whole), shapes


def as_buffer(a: Any) -> Any:
    """A decoded sample as a device buffer of the backend (a :class:`DeviceImage`'s array)."""
    return a.buffer() if isinstance(a, DeviceImage) else a


def _wrap(img: Any, decoder: Any = None, stream: Any = None) -> Any:
    """An nvImageCodec device image (decoded on ``stream``) as a :class:`DeviceImage` (no
    copy); None where it is not a contiguous (H, W, 3) uint8 image."""
    face = img.__cuda_array_interface__
    shape = tuple(face["shape"])
    if len(shape) != 3 or shape[2] != 3 or face["typestr"] != "|u1":
        return None
    strides = face.get("strides")
    if strides is not None and tuple(strides) != (shape[1] * 3, 3, 1):
        return None
    return DeviceImage(img, shape, face["data"][0], decoder, stream)


def import_nvimgcodec() -> Any:
    """The ``nvidia.nvimgcodec`` module, or None where it is not installed or cannot load."""
    try:
        from nvidia import nvimgcodec
    except Exception:
        return None
    return nvimgcodec


def _ahead_key(device: int, threads: int | None) -> tuple:
    return ("decoder", int(device), int(threads or decode_threads()), nvimgcodec_api())


def _warmed(dec: Any) -> Any:
    """``dec`` after one small JPEG decoded (its first call starts its machinery)."""
    import io as _io

    from PIL import Image

    buf = _io.BytesIO()
    Image.fromarray(np.full((32, 48, 3), 128, np.uint8)).save(buf, "JPEG", quality=90)
    got = dec.decode([buf.getvalue()], lambda r: "a 48 x 32 warm-up JPEG")[0]
    if isinstance(got, BaseException):
        raise got
    return dec


def prepare_decoder(device: int, threads: int | None = None) -> None:
    """Start making the GPU decoder that ``make_decoder("auto", device, threads)`` would
    make, in a background thread (:mod:`~millipyde.data.decode_ahead`), and decoding one small
    JPEG with it; the next such call takes it.

    Returns at once. A short job calls it first thing, so that nvImageCodec's start (its
    Python binding's import holds the GIL ~1 s; either interface's first decode takes
    0.2-1 s) overlaps the job's own start. Where the backend has no NVIDIA codecs or
    nvImageCodec cannot load, the thread finds so and nothing is kept.

    Parameters
    ----------
    device : int
        The GPU the decoder decodes on.
    threads : int, optional
        Its CPU threads (default :func:`decode_threads`, the loader's).
    """
    from .decode_ahead import start

    start(_ahead_key(device, threads),
          lambda: _warmed(_build_decoder("nvimgcodec", device, threads)))


def make_decoder(choice: str, device: int, threads: int | None = None) -> Any:
    """The decoder for ``choice`` (:data:`DECODERS`) on this backend.

    ``"auto"``: nvImageCodec on CUDA GPUs where it is installed (else Pillow, said once in a
    warning), Pillow on the cpu backend. ``"nvimgcodec"`` where it cannot run: ValueError.
    nvImageCodec decodes through its C API or its Python binding as :func:`nvimgcodec_api`
    says. A decoder made ahead for the same device, threads and interface
    (:func:`prepare_decoder`) is taken instead of a new one.
    """
    if choice not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, got {choice!r}")
    if choice != "pillow" and runtime.caps.nvidia_codecs:
        from .decode_ahead import take

        made = take(_ahead_key(device, threads))
        if made is not None:
            return made
    return _build_decoder(choice, device, threads)


def _build_decoder(choice: str, device: int, threads: int | None) -> Any:
    if choice not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, got {choice!r}")
    pillow = PillowDecoder(device, threads)
    gpu = runtime.caps.nvidia_codecs
    if choice == "pillow" or (choice == "auto" and not gpu):
        return pillow
    if not gpu:
        raise ValueError("decoder='nvimgcodec' needs the cuda backend on an NVIDIA GPU "
                         "(mp.backend() says which backend is active)")
    if nvimgcodec_api() == "c":
        try:
            return NvImageCodecCDecoder(device, pillow)
        except ImportError as err:
            if choice == "nvimgcodec":
                raise ValueError(f"decoder='nvimgcodec' with MILLIPYDE_NVIMGCODEC_API=c: "
                                 f"{err}") from err
            nv = None
    else:
        nv = import_nvimgcodec()
    if nv is None:
        if choice == "nvimgcodec":
            raise ValueError("decoder='nvimgcodec': nvImageCodec is not installed (pip install "
                             "nvidia-nvimgcodec-cu13, or millipyde[cuda])")
        if not _warned_missing[0]:
            _warned_missing[0] = True
            warnings.warn("nvImageCodec is not installed (pip install millipyde[cuda]): "
                          "images are decoded with Pillow on the host, then uploaded",
                          UserWarning, stacklevel=3)
        return pillow
    return NvImageCodecDecoder(device, pillow, nv)
