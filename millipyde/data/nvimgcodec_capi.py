"""nvImageCodec's C API through ctypes: a batch decoded with one GIL release for the call.

nvImageCodec's Python binding (``Decoder.decode(list of CodeStreams)``) gives the GIL up and
takes it back about twice an image inside its batched call (it builds a Python ``Image`` per
image, among others). Alone that costs little; beside one other thread that runs Python half
the time (the batch worker), each take-back waits for that thread, and a decode of 256 JPEGs
went from ~8-12 ms to 34.6 ms on an H200 (bench/RESULTS.md, "the decode call inside the
pipeline"). This module calls ``libnvimgcodec.so.0`` (the wheel's) directly:

- the cheap per-image calls (a code stream over host memory or a file, its image info, an
  output image over a buffer the caller owns) go through function pointers loaded with
  :class:`ctypes.PyDLL`, which keep the GIL: a release and take-back per call is exactly the
  hand-over that waits up to a switch interval when another thread holds the GIL;
- the decode call and the wait for its future go through :class:`ctypes.CDLL` pointers, which
  release the GIL for the call: two releases a batch, whatever its size
  (:data:`GIL_RELEASING`; :attr:`Api.releases` counts them).

:func:`loop` loads the same per-batch work compiled (``capi_loop``, Numba, ``nogil``):
the per-image calls, the decode and its wait in two passes (:meth:`Decoder.parse_many`,
:meth:`Decoder.decode_many`), each one GIL release, or with regions in one
(:meth:`Decoder.parse_decode_many`, into an allocation made before the parse: the default
``decode.ONE_PASS``), calling the library by the addresses of
these same functions (:attr:`Api.addresses`) and reading the structures at these classes'
offsets (:func:`layout`).

The library never calls back into Python (no allocator, executor or debug callbacks are
given), so its own threads never need the GIL while the decode thread holds it.

Structures are transcribed from the wheel's ``include/nvimgcodec.h`` (0.9.0): each begins with
``struct_type``, ``struct_size`` and ``struct_next``, and the library refuses a structure whose
``struct_size`` does not match its own (``tests/test_data_nvimgcodec_capi.py`` checks every
size and offset against the header compiled by a C compiler, and that the library takes each).

Handles are destroyed in dependency order: images and code streams before the decoder, the
decoder before the instance (:class:`Decoder.close`; the instance outlives every decoder of
the process and is left to the process's end, as the binding leaves its default instance).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
import time
from ctypes import (
    POINTER,
    Structure,
    Union,
    byref,
    c_char,
    c_char_p,
    c_float,
    c_int,
    c_size_t,
    c_uint8,
    c_uint32,
    c_void_p,
    sizeof,
)
from typing import Any

import numpy as np

# -- constants of nvimgcodec.h ------------------------------------------------------------------
MAX_CODEC_NAME_SIZE = 256
MAX_NUM_DIM = 5
MAX_ROI_FILL_CHANNELS = 5
MAX_NUM_PLANES = 32
DEVICE_CURRENT = -1
DEVICE_CPU_ONLY = -99999

# nvimgcodecStructureType_t
STRUCTURE_TYPE_PROPERTIES = 1
STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 2
STRUCTURE_TYPE_DECODE_PARAMS = 5
STRUCTURE_TYPE_ORIENTATION = 7
STRUCTURE_TYPE_REGION = 8
STRUCTURE_TYPE_CODE_STREAM_VIEW = 9
STRUCTURE_TYPE_CODE_STREAM_INFO = 10
STRUCTURE_TYPE_IMAGE_INFO = 11
STRUCTURE_TYPE_IMAGE_PLANE_INFO = 12
STRUCTURE_TYPE_BACKEND = 17
STRUCTURE_TYPE_BACKEND_PARAMS = 29
STRUCTURE_TYPE_EXECUTION_PARAMS = 30

# nvimgcodecStatus_t
STATUS_SUCCESS = 0
STATUS_INVALID_PARAMETER = 2

# nvimgcodecSampleDataType_t
SAMPLE_DATA_TYPE_UINT8 = 0x0802
# nvimgcodecChromaSubsampling_t
SAMPLING_NONE = 0
# nvimgcodecSampleFormat_t
SAMPLEFORMAT_I_RGB = 8
# nvimgcodecColorSpec_t
COLORSPEC_UNKNOWN = 0
COLORSPEC_SRGB = 1
COLORSPEC_GRAY = 2
COLORSPEC_SYCC = 3
# nvimgcodecImageBufferKind_t
IMAGE_BUFFER_KIND_STRIDED_DEVICE = 1
IMAGE_BUFFER_KIND_STRIDED_HOST = 2
# nvimgcodecBackendKind_t
BACKEND_KIND_CPU_ONLY = 1
BACKEND_KIND_GPU_ONLY = 2
BACKEND_KIND_HYBRID_CPU_GPU = 3
BACKEND_KIND_HW_GPU_ONLY = 4
# nvimgcodecLoadHintPolicy_t
LOAD_HINT_POLICY_FIXED = 2
# nvimgcodecProcessingStatus
PROCESSING_STATUS_SUCCESS = 0x1
# nvimgcodecDebugMessageSeverity_t / Category_t
DEBUG_MESSAGE_SEVERITY_ERROR = 0x00010000
DEBUG_MESSAGE_SEVERITY_FATAL = 0x00100000
DEBUG_MESSAGE_CATEGORY_ALL = 0x0FFFFFFF

#: the library functions called with the GIL released (the rest keep it)
GIL_RELEASING = ("nvimgcodecDecoderDecode", "nvimgcodecFutureWaitForAll")


# -- structures of nvimgcodec.h -----------------------------------------------------------------
def _head() -> list[tuple[str, Any]]:
    """The three fields every structure starts with (written into each one's own fields:
    a ctypes subclass would not lay them out as one flat C structure)."""
    return [("struct_type", c_int), ("struct_size", c_size_t), ("struct_next", c_void_p)]


class Properties(Structure):
    """``nvimgcodecProperties_t``."""

    _fields_ = _head() + [("version", c_uint32), ("cudart_version", c_uint32)]


class Orientation(Structure):
    """``nvimgcodecOrientation_t``."""

    _fields_ = _head() + [("rotated", c_int), ("flip_x", c_int), ("flip_y", c_int)]


class ImagePlaneInfo(Structure):
    """``nvimgcodecImagePlaneInfo_t``."""

    _fields_ = _head() + [("width", c_uint32), ("height", c_uint32), ("row_stride", c_size_t),
                          ("num_channels", c_uint32), ("sample_type", c_int),
                          ("precision", c_uint8)]


class _SampleValue(Union):
    _fields_ = [("as_uint", c_uint32), ("as_int", ctypes.c_int32), ("as_float", c_float)]


class OutOfBoundsSample(Structure):
    """``nvimgcodecOutOfBoundsSample_t``."""

    _fields_ = [("value", _SampleValue), ("type", c_int)]


class Region(Structure):
    """``nvimgcodecRegion_t``."""

    _fields_ = _head() + [("ndim", c_int), ("start", c_int * MAX_NUM_DIM),
                          ("end", c_int * MAX_NUM_DIM), ("out_of_bounds_policy", c_int),
                          ("out_of_bounds_samples", OutOfBoundsSample * MAX_ROI_FILL_CHANNELS)]


class ImageInfo(Structure):
    """``nvimgcodecImageInfo_t``."""

    _fields_ = _head() + [("codec_name", c_char * MAX_CODEC_NAME_SIZE), ("color_spec", c_int),
                          ("chroma_subsampling", c_int), ("sample_format", c_int),
                          ("orientation", Orientation), ("num_planes", c_uint32),
                          ("plane_info", ImagePlaneInfo * MAX_NUM_PLANES), ("buffer", c_void_p),
                          ("buffer_kind", c_int), ("cuda_stream", c_void_p)]


class CodeStreamView(Structure):
    """``nvimgcodecCodeStreamView_t``."""

    _fields_ = _head() + [("image_idx", c_size_t), ("region", Region),
                          ("bitstream_offset", c_size_t)]


class CodeStreamInfo(Structure):
    """``nvimgcodecCodeStreamInfo_t``."""

    _fields_ = _head() + [("code_stream_view", POINTER(CodeStreamView)),
                          ("codec_name", c_char * MAX_CODEC_NAME_SIZE),
                          ("num_images", c_size_t), ("size", c_size_t)]


class BackendParams(Structure):
    """``nvimgcodecBackendParams_t``."""

    _fields_ = _head() + [("load_hint", c_float), ("load_hint_policy", c_int)]


class Backend(Structure):
    """``nvimgcodecBackend_t``."""

    _fields_ = _head() + [("kind", c_int), ("params", BackendParams)]


class ExecutionParams(Structure):
    """``nvimgcodecExecutionParams_t`` (allocators and executor left NULL: the library's)."""

    _fields_ = _head() + [("device_allocator", c_void_p), ("pinned_allocator", c_void_p),
                          ("max_num_cpu_threads", c_int), ("executor", c_void_p),
                          ("device_id", c_int), ("pre_init", c_int), ("skip_pre_sync", c_int),
                          ("num_backends", c_int), ("backends", POINTER(Backend))]


class DecodeParams(Structure):
    """``nvimgcodecDecodeParams_t``."""

    _fields_ = _head() + [("apply_exif_orientation", c_int)]


class InstanceCreateInfo(Structure):
    """``nvimgcodecInstanceCreateInfo_t``."""

    _fields_ = _head() + [("load_builtin_modules", c_int), ("load_extension_modules", c_int),
                          ("extension_modules_path", c_char_p),
                          ("create_debug_messenger", c_int),
                          ("debug_messenger_desc", c_void_p), ("message_severity", c_uint32),
                          ("message_category", c_uint32)]


#: every structure above with its structure type (the size check of the tests walks it)
STRUCTS: dict[str, tuple[type, int | None]] = {
    "nvimgcodecProperties_t": (Properties, STRUCTURE_TYPE_PROPERTIES),
    "nvimgcodecOrientation_t": (Orientation, STRUCTURE_TYPE_ORIENTATION),
    "nvimgcodecImagePlaneInfo_t": (ImagePlaneInfo, STRUCTURE_TYPE_IMAGE_PLANE_INFO),
    "nvimgcodecOutOfBoundsSample_t": (OutOfBoundsSample, None),
    "nvimgcodecRegion_t": (Region, STRUCTURE_TYPE_REGION),
    "nvimgcodecImageInfo_t": (ImageInfo, STRUCTURE_TYPE_IMAGE_INFO),
    "nvimgcodecCodeStreamView_t": (CodeStreamView, STRUCTURE_TYPE_CODE_STREAM_VIEW),
    "nvimgcodecCodeStreamInfo_t": (CodeStreamInfo, STRUCTURE_TYPE_CODE_STREAM_INFO),
    "nvimgcodecBackendParams_t": (BackendParams, STRUCTURE_TYPE_BACKEND_PARAMS),
    "nvimgcodecBackend_t": (Backend, STRUCTURE_TYPE_BACKEND),
    "nvimgcodecExecutionParams_t": (ExecutionParams, STRUCTURE_TYPE_EXECUTION_PARAMS),
    "nvimgcodecDecodeParams_t": (DecodeParams, STRUCTURE_TYPE_DECODE_PARAMS),
    "nvimgcodecInstanceCreateInfo_t": (InstanceCreateInfo,
                                       STRUCTURE_TYPE_INSTANCE_CREATE_INFO),
}


def make(cls: type, **fields: Any) -> Any:
    """A structure of ``cls`` with its ``struct_type`` and ``struct_size`` set (the library
    checks both), other fields from ``fields``."""
    obj = cls(**fields)
    stype = _TYPE_OF.get(cls)
    if stype is not None:
        obj.struct_type = stype
        obj.struct_size = sizeof(cls)
    return obj


_TYPE_OF = {c: t for c, t in STRUCTS.values()}


class NvImageCodecError(RuntimeError):
    """A call of the nvImageCodec library returned an error status; the message names the
    call and the status."""


# -- the library --------------------------------------------------------------------------------
def package_dir() -> str | None:
    """The installed ``nvidia/nvimgcodec`` folder of the wheel (the library, its extensions and
    header), or None where the wheel is not installed. Found without importing the Python
    binding."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        d = os.path.join(root, "nvimgcodec")
        if os.path.isfile(os.path.join(d, "libnvimgcodec.so.0")):
            return d
    return None


_H = c_void_p  # every handle (instance, decoder, code stream, image, future) is a pointer

# name -> (argument types); every function returns nvimgcodecStatus_t (an int)
_SIGNATURES: dict[str, list[Any]] = {
    "nvimgcodecGetProperties": [POINTER(Properties)],
    "nvimgcodecInstanceCreate": [POINTER(_H), POINTER(InstanceCreateInfo)],
    "nvimgcodecInstanceDestroy": [_H],
    "nvimgcodecDecoderCreate": [_H, POINTER(_H), POINTER(ExecutionParams), c_char_p],
    "nvimgcodecDecoderDestroy": [_H],
    "nvimgcodecCodeStreamCreateFromHostMem": [_H, c_void_p, c_void_p, c_size_t, c_void_p],
    "nvimgcodecCodeStreamCreateFromFile": [_H, c_void_p, c_char_p, c_void_p],
    "nvimgcodecCodeStreamDestroy": [_H],
    "nvimgcodecCodeStreamGetImageInfo": [_H, POINTER(ImageInfo)],
    "nvimgcodecCodeStreamGetCodeStreamInfo": [_H, POINTER(CodeStreamInfo)],
    "nvimgcodecImageCreate": [_H, c_void_p, POINTER(ImageInfo)],
    "nvimgcodecImageDestroy": [_H],
    "nvimgcodecImageGetImageInfo": [_H, POINTER(ImageInfo)],
    "nvimgcodecDecoderDecode": [_H, c_void_p, c_void_p, c_int, POINTER(DecodeParams),
                                POINTER(_H)],
    "nvimgcodecFutureWaitForAll": [_H],
    "nvimgcodecFutureGetProcessingStatus": [_H, POINTER(c_uint32), POINTER(c_size_t)],
    "nvimgcodecFutureDestroy": [_H],
    "nvimgcodecCodeStreamGetSubCodeStream": [_H, POINTER(_H), POINTER(CodeStreamView)],
}
#: functions a library may lack (an attribute None there): region decoding goes without them
_OPTIONAL = ("nvimgcodecCodeStreamGetSubCodeStream",)

#: the functions the compiled loop calls, in the order of ``capi_loop.FN_*``
_LOOP_FUNCTIONS = ("CodeStreamCreateFromHostMem", "CodeStreamGetImageInfo",
                   "CodeStreamDestroy", "ImageCreate", "DecoderDecode", "FutureWaitForAll",
                   "FutureGetProcessingStatus", "FutureDestroy")


class Api:
    """``libnvimgcodec.so.0`` loaded twice over: each function of :data:`GIL_RELEASING`
    through :class:`ctypes.CDLL` (the GIL released for the call), every other one through
    :class:`ctypes.PyDLL` (the GIL kept). Attributes are the functions by their C names
    without the ``nvimgcodec`` prefix (``api.DecoderDecode``).

    Parameters
    ----------
    directory : str
        The wheel's ``nvidia/nvimgcodec`` folder (:func:`package_dir`).

    Attributes
    ----------
    releases : int
        Calls made through a GIL-releasing function so far, and calls of the compiled loop
        (:func:`loop`: one release each); tests count them per batch.
    free_s : float
        Seconds spent in those calls (the GIL released): the probe reads the decode
        thread's GIL-held time as a decode's time less this.
    addresses : numpy.ndarray
        The functions the compiled loop calls, by address (int64, ``capi_loop.FN_*``).
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        path = os.path.join(directory, "libnvimgcodec.so.0")
        keep = ctypes.PyDLL(path, mode=ctypes.RTLD_GLOBAL)
        free = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        self.releases = 0
        self.free_s = 0.0
        for name, args in _SIGNATURES.items():
            try:
                fn = getattr(free if name in GIL_RELEASING else keep, name)
            except AttributeError:
                if name not in _OPTIONAL:
                    raise
                setattr(self, name[len("nvimgcodec"):], None)
                continue
            fn.argtypes = args
            fn.restype = c_int
            setattr(self, name[len("nvimgcodec"):], fn)
        self._decode, self._wait = self.DecoderDecode, self.FutureWaitForAll
        #: ``nvimgcodecCodeStreamGetSubCodeStream``'s address (the compiled region pass
        #: calls it), 0 where the library lacks it
        self.sub_address = 0 if self.CodeStreamGetSubCodeStream is None else \
            ctypes.cast(keep.nvimgcodecCodeStreamGetSubCodeStream, c_void_p).value
        self.addresses = np.array(
            [ctypes.cast(getattr(keep, "nvimgcodec" + name), c_void_p).value
             for name in _LOOP_FUNCTIONS], np.int64)

    def check(self, status: int, call: str) -> None:
        """Raise :class:`NvImageCodecError` where ``status`` is not SUCCESS."""
        if status != STATUS_SUCCESS:
            raise NvImageCodecError(f"nvimgcodec{call} failed with status {status}")

    def decode(self, decoder: int, streams: Any, images: Any, n: int,
               params: DecodeParams) -> int:
        """``nvimgcodecDecoderDecode`` (GIL released): the future's handle."""
        future = _H()
        self.releases += 1
        t = time.perf_counter()
        st = self._decode(decoder, streams, images, n, byref(params), byref(future))
        self.free_s += time.perf_counter() - t
        self.check(st, "DecoderDecode")
        return future.value

    def wait(self, future: int) -> None:
        """``nvimgcodecFutureWaitForAll`` (GIL released)."""
        self.releases += 1
        t = time.perf_counter()
        st = self._wait(future)
        self.free_s += time.perf_counter() - t
        self.check(st, "FutureWaitForAll")


_api: list[Any] = []
_api_lock = threading.Lock()


def api() -> Api | None:
    """The library of the installed wheel (loaded once), or None where the wheel is not
    installed or the library does not load."""
    with _api_lock:
        if not _api:
            d = package_dir()
            try:
                _api.append(Api(d) if d is not None else None)
            except OSError:
                _api.append(None)
        return _api[0]


def version(lib: Api) -> int:
    """The library's version (``major * 1000 + minor * 100 + patch``)."""
    props = make(Properties)
    lib.check(lib.GetProperties(byref(props)), "GetProperties")
    return int(props.version)


class Instance:
    """An nvImageCodec instance with the wheel's extensions loaded (libjpeg-turbo on the CPU,
    nvJPEG where the nvJPEG wheel and a GPU are there, ...). One per process
    (:func:`instance`): the library's instance is never destroyed before the process ends,
    so no decoder or image of it can outlive it."""

    def __init__(self, lib: Api, quiet: bool = True) -> None:
        self.lib = lib
        self._path = os.path.join(lib.directory, "extensions").encode()
        info = make(InstanceCreateInfo, load_builtin_modules=1, load_extension_modules=1,
                    extension_modules_path=self._path, create_debug_messenger=1,
                    message_severity=DEBUG_MESSAGE_SEVERITY_FATAL if quiet else
                    DEBUG_MESSAGE_SEVERITY_ERROR | DEBUG_MESSAGE_SEVERITY_FATAL,
                    message_category=DEBUG_MESSAGE_CATEGORY_ALL)
        handle = _H()
        lib.check(lib.InstanceCreate(byref(handle), byref(info)), "InstanceCreate")
        self.handle = handle.value


_instance: list[Instance] = []


def instance() -> Instance | None:
    """This process's :class:`Instance` (made once; never destroyed), or None without the
    library."""
    lib = api()
    if lib is None:
        return None
    with _api_lock:
        if not _instance:
            _instance.append(Instance(lib))
        return _instance[0]


def _address(data: Any) -> tuple[Any, int, Any]:
    """``(pointer argument, bytes, what keeps the memory alive)`` of encoded bytes: a
    ``bytes`` object is passed as itself (ctypes hands its buffer over without a copy), a
    NumPy array (a read-ahead run's view) by its address, anything else through a NumPy
    view of its buffer."""
    if type(data) is bytes:
        return data, len(data), data
    a = data if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a.ctypes.data, a.nbytes, a


class CodeStream:
    """One encoded sample parsed by nvImageCodec (its code stream and image info), made with
    the GIL held (:class:`ctypes.PyDLL` calls; see the module doc). It keeps the memory it
    reads (host bytes) and destroys its handle when it goes.

    Attributes
    ----------
    codec : str
        ``"jpeg"``, ``"png"``, ... (nvImageCodec's codec name).
    channels : int
        Channels of all planes together (3 for a colour JPEG, 1 for grey, 4 for CMYK).
    color_spec : int
        ``nvimgcodecColorSpec_t`` of the code stream (``COLORSPEC_SYCC`` for a YCbCr JPEG).
    height, width : int
        The decoded image's size with its EXIF orientation applied (a rotation by 90 or 270
        degrees swaps them).
    """

    __slots__ = ("handle", "keep", "codec", "channels", "color_spec", "height", "width",
                 "orientation", "dims", "__weakref__")

    def __init__(self, handle: int, keep: Any, info: ImageInfo) -> None:
        self.handle, self.keep = handle, keep
        self.codec = info.codec_name.decode("ascii", "replace")
        planes = info.plane_info
        first = planes[0]
        channels = first.num_channels
        for p in range(1, min(info.num_planes, MAX_NUM_PLANES)):
            channels += planes[p].num_channels
        self.channels = channels
        self.color_spec = info.color_spec
        h, w = first.height, first.width
        turn = info.orientation
        #: (rotated, flip_x, flip_y) of the EXIF orientation: the output image is described
        #: with it, which is what makes the decoder apply it
        rotated = turn.rotated
        self.orientation = (rotated, turn.flip_x, turn.flip_y)
        if rotated % 180 == 90:
            h, w = w, h
        self.height, self.width = h, w
        #: (height, width, rotated, flip_x, flip_y): a row of the compiled loop's dims
        self.dims = (h, w) + self.orientation

    def close(self) -> None:
        """Destroy the handle now (else when the object goes)."""
        handle, self.handle = self.handle, None
        if handle and _api and _api[0] is not None and not _exiting[0]:
            _api[0].CodeStreamDestroy(handle)

    def __del__(self) -> None:
        self.close()


class Decoder:
    """An nvImageCodec decoder that decodes batches of :class:`CodeStream` into memory the
    caller owns, contiguous interleaved RGB uint8 (H, W, 3) at given addresses, with EXIF
    orientation applied and sRGB colour. (The output image is described with its code
    stream's orientation, as the binding does: that is what makes the decoder turn it;
    ``apply_exif_orientation`` alone leaves the pixels as coded.)

    Per batch the GIL is released twice (``nvimgcodecDecoderDecode``, then
    ``nvimgcodecFutureWaitForAll``); the per-image calls (an output image over each address:
    ``nvimgcodecImageCreate`` reusing the decoder's image handles) keep it.

    Parameters
    ----------
    inst : Instance
    device_id : int
        The GPU, or :data:`DEVICE_CPU_ONLY`.
    threads : int
        CPU threads of nvImageCodec's executor (parsing; Huffman decoding where no hardware
        decoder takes an image; the whole decode on the CPU backend).
    backends : sequence of int, optional
        ``BACKEND_KIND_*`` allowed (None: every backend, nvImageCodec picks).
    host : bool
        Output buffers in host memory (``STRIDED_HOST``) instead of device memory.
    """

    def __init__(self, inst: Instance, device_id: int, threads: int,
                 backends: Any = None, host: bool = False) -> None:
        lib = self.lib = inst.lib
        self.inst = inst  # never destroyed before this decoder (see Instance)
        self.host = bool(host)
        self._lock = threading.Lock()
        self._local = threading.local()
        kinds = list(backends or [])
        self._backends = (Backend * max(1, len(kinds)))()
        for i, k in enumerate(kinds):
            self._backends[i] = make(Backend, kind=int(k),
                                     params=make(BackendParams, load_hint=1.0,
                                                 load_hint_policy=LOAD_HINT_POLICY_FIXED))
        params = make(ExecutionParams, max_num_cpu_threads=int(threads),
                      device_id=int(device_id), num_backends=len(kinds),
                      backends=self._backends if kinds else None)
        handle = _H()
        lib.check(lib.DecoderCreate(inst.handle, byref(handle), byref(params), None),
                  "DecoderCreate")
        self.handle = handle.value
        self._params = make(DecodeParams, apply_exif_orientation=1)
        # the output images' description: one structure, its size and address rewritten per
        # image (nvimgcodecImageCreate copies it into the image)
        out = self._out = make(ImageInfo, color_spec=COLORSPEC_SRGB,
                               chroma_subsampling=SAMPLING_NONE,
                               sample_format=SAMPLEFORMAT_I_RGB, num_planes=1,
                               buffer_kind=IMAGE_BUFFER_KIND_STRIDED_HOST if host else
                               IMAGE_BUFFER_KIND_STRIDED_DEVICE)
        out.orientation = make(Orientation)
        plane = out.plane_info[0]
        plane.struct_type, plane.struct_size = STRUCTURE_TYPE_IMAGE_PLANE_INFO, \
            sizeof(ImagePlaneInfo)
        plane.num_channels, plane.sample_type = 3, SAMPLE_DATA_TYPE_UINT8
        self._plane = plane
        self._turn = out.orientation
        #: image handles the library reuses batch after batch (grown as needed; int64 words:
        #: the compiled loop writes them too)
        self._images = np.zeros(0, np.int64)
        #: the compiled loop's copies of the output description and of a code stream's
        #: image info (words: it writes and reads their fields at ctypes' offsets)
        self._out_words = _words_of(out)
        self._info_words = _words_of(make(ImageInfo))
        #: the compiled passes' stamps (``capi_loop._stamp_at``: clock_gettime's address,
        #: then seconds and nanoseconds of each stamp) and, after each pass, the nanoseconds
        #: its thread then waited to take the GIL back (``regain_ns``; -1 where the clock
        #: cannot be called); after a decode pass, its stages (:attr:`stages_ns`)
        self.clock = np.zeros(9, np.int64)
        self.clock[0] = CLOCK_GETTIME
        self.regain_ns = -1
        #: the last decode pass's stages in nanoseconds, where stamped: ``setup`` (regions
        #: and output images made), ``submit`` (``nvimgcodecDecoderDecode``), ``wait``
        #: (``nvimgcodecFutureWaitForAll`` and the statuses), ``end`` (the code streams
        #: destroyed)
        self.stages_ns: dict[str, int] = {}

    # -- parsing (GIL kept) ----------------------------------------------------------------
    def parse(self, data: Any) -> CodeStream | None:
        """A code stream over encoded bytes in host memory (``bytes`` or a uint8 array;
        kept by the result), or None where nvImageCodec does not parse them."""
        ptr, n, keep = _address(data)
        return self._parsed(self.lib.CodeStreamCreateFromHostMem, ptr, n, keep)

    def parse_file(self, path: str) -> CodeStream | None:
        """A code stream over a file nvImageCodec opens and maps itself, or None where it
        does not parse it."""
        return self._parsed(self.lib.CodeStreamCreateFromFile, os.fsencode(path), None, None)

    def _parsed(self, create: Any, src: Any, n: int | None, keep: Any) -> CodeStream | None:
        lib = self.lib
        handle = _H()
        args = (self.inst.handle, byref(handle), src) + ((n,) if n is not None else ()) + \
            (None,)
        if create(*args) != STATUS_SUCCESS or not handle.value:
            if handle.value:
                lib.CodeStreamDestroy(handle.value)
            return None
        info = getattr(self._local, "info", None)
        if info is None:  # one per thread: parsing runs in the read-ahead threads too
            info = self._local.info = make(ImageInfo)
        if lib.CodeStreamGetImageInfo(handle.value, byref(info)) != STATUS_SUCCESS or \
                info.num_planes < 1:
            lib.CodeStreamDestroy(handle.value)
            return None
        return CodeStream(handle.value, keep, info)

    def sub_streams_many(self, handle: np.ndarray, state: np.ndarray, dims: np.ndarray,
                         box: np.ndarray, region: np.ndarray, parents: np.ndarray) -> int:
        """``capi_loop.regions`` (see there) with the GIL released for the whole batch:
        after :meth:`parse_many`, a code stream of its ``box`` for each taken sample that
        has one and no EXIF orientation (``nvimgcodecCodeStreamGetSubCodeStream`` with an
        ``nvimgcodecRegion_t``), its dims and ``region`` row set; the whole code streams
        :meth:`parse_many` made for them in ``parents``, for :meth:`destroy_many` after the
        decode. Returns how many; 0 where the library has no such call. The compiled loop
        must be loaded (:func:`loop`)."""
        mod, lib = _loop[0], self.lib
        if lib.CodeStreamGetSubCodeStream is None:
            parents[:] = 0
            return 0
        view = self._view_words()
        at = CodeStreamView.region.offset
        lib.releases += 1
        made = mod.regions(lib.sub_address, lib.addresses[mod.FN_STREAM_DESTROY], view,
                           at + Region.start.offset, at + Region.end.offset, handle, state,
                           dims, box, region, parents, self.clock)
        self._regained()
        return int(made)

    def _view_words(self) -> np.ndarray:
        """This thread's code stream view with a 2-D region (words), made once a thread."""
        view = getattr(self._local, "view", None)
        if view is None:  # one per thread, as the image info
            v = make(CodeStreamView)
            v.region = make(Region, ndim=2)
            view = self._local.view = _words_of(v)
        return view

    @property
    def decodes_regions(self) -> bool:
        """Whether the library makes code streams of regions (nvImageCodec 0.9's
        ``nvimgcodecCodeStreamGetSubCodeStream``)."""
        return self.lib.CodeStreamGetSubCodeStream is not None

    def _stages(self, start: int) -> None:
        """:attr:`stages_ns` of the decode pass begun at ``start`` (``time.monotonic_ns``)."""
        c = self.clock
        at = [start] + [int(c[1 + 2 * k]) * 1_000_000_000 + int(c[2 + 2 * k])
                        if c[1 + 2 * k] or c[2 + 2 * k] else 0 for k in (1, 2, 3, 0)]
        self.stages_ns = {}
        if not c[0] or not all(at):
            return
        for name, a, b in zip(("setup", "submit", "wait", "end"), at, at[1:], strict=False):
            self.stages_ns[name] = b - a

    def _regained(self) -> None:
        """:attr:`regain_ns` of the compiled pass that just returned (its end stamp against
        now: the wait for the GIL after it)."""
        now = time.monotonic_ns()
        c = self.clock
        self.regain_ns = now - (int(c[1]) * 1_000_000_000 + int(c[2])) if c[0] else -1

    def destroy_many(self, handles: np.ndarray) -> None:
        """Destroy the code streams ``handles`` (nonzero ones) in one compiled call."""
        _loop[0].destroy(self.lib.addresses[_loop[0].FN_STREAM_DESTROY], handles)

    # -- the batched decode --------------------------------------------------------------
    def decode(self, streams: list[CodeStream], addresses: list[int],
               cuda_stream: int = 0) -> list[bool] | None:
        """Decode ``streams[i]`` into (H, W, 3) uint8 at ``addresses[i]`` (``height`` x
        ``width`` of the code stream, rows of ``width * 3`` bytes; device memory of the
        decoder's GPU unless ``host``), ordered on ``cuda_stream`` (a raw handle; 0: the
        legacy default stream). Returns per stream whether it decoded, or None where the
        library refused the whole call. When it returns, the host's work is done; on a GPU
        the images are complete on ``cuda_stream``."""
        n = len(streams)
        if n == 0:
            return []
        lib = self.lib
        with self._lock:
            if self.handle is None:
                raise NvImageCodecError("the decoder was closed")
            images = self._grown(n)
            out, plane, turn = self._out, self._plane, self._turn
            out.cuda_stream = cuda_stream or None
            inst = self.inst.handle
            create = lib.ImageCreate
            for i, (cs, addr) in enumerate(zip(streams, addresses, strict=True)):
                plane.height, plane.width = cs.height, cs.width
                plane.row_stride = cs.width * 3
                turn.rotated, turn.flip_x, turn.flip_y = cs.orientation
                out.buffer = addr
                if create(inst, images + i * sizeof(_H), byref(out)) != STATUS_SUCCESS:
                    return None
            handles = (_H * n)(*[cs.handle for cs in streams])
            try:
                future = lib.decode(self.handle, handles, images, n, self._params)
            except NvImageCodecError:
                return None
            try:
                lib.wait(future)
                statuses = (c_uint32 * n)()
                size = c_size_t(n)
                lib.check(lib.FutureGetProcessingStatus(future, statuses, byref(size)),
                          "FutureGetProcessingStatus")
            except NvImageCodecError:
                return None
            finally:
                lib.FutureDestroy(future)
            got = int(size.value)
            return [i < got and statuses[i] == PROCESSING_STATUS_SUCCESS for i in range(n)]

    def _grown(self, n: int) -> int:
        """The address of the image handles, at least ``n`` of them (the caller holds the
        lock; handles already made are kept)."""
        if len(self._images) < n:
            grown = np.zeros(max(n, 2 * len(self._images)), np.int64)
            grown[:len(self._images)] = self._images
            self._images = grown
        return int(self._images.ctypes.data)

    # -- the compiled loop (GIL released once a pass) ----------------------------------------
    def parse_many(self, address: np.ndarray, size: np.ndarray, handle: np.ndarray,
                   state: np.ndarray, dims: np.ndarray, offsets: np.ndarray,
                   limit: int, regions: tuple | None = None) -> int:
        """``capi_loop.parse`` (see there) with the GIL released for the whole batch: code
        streams over the bytes at ``address``/``size`` of the samples of state ``ST_PARSE``
        (the caller keeps those bytes alive until :meth:`decode_many` returns), their
        headers checked, the taken ones' offsets in one allocation. Returns the
        allocation's bytes. The compiled loop must be loaded (:func:`loop`).

        ``regions``: ``(boxes, box, slots)``, the region boxes laid out in the same pass
        (``boxes.parse_decode``: ``training.region_plan.RowBoxes``): ``box`` each sample's
        rectangle, ``slots`` each taken sample's bytes, ``offsets`` laid out for them, the
        allocation's bytes for them returned."""
        mod, lib = _loop[0], self.lib
        if regions is not None:  # the one pass's function, which decodes nothing here
            n = len(state)
            total, _ = self.parse_decode_many(
                address, size, handle, state, dims, offsets, limit,
                (*regions, np.zeros((n, 4), np.int64), np.zeros(n, np.int64)), 0, 0, 0,
                np.zeros(n, np.uint8))
            return pool_bytes(total) if total else 0
        lib.releases += 1
        t = time.perf_counter()
        total = mod.parse(lib.addresses, _layout[0], self.inst.handle, self._info_words,
                          address, size, handle, state, dims, offsets, int(limit), self.clock)
        self._regained()
        lib.free_s += time.perf_counter() - t
        return int(total)

    def parse_decode_many(self, address: np.ndarray, size: np.ndarray, handle: np.ndarray,
                          state: np.ndarray, dims: np.ndarray, offsets: np.ndarray, limit: int,
                          regions: tuple, base: int, capacity: int, cuda_stream: int,
                          done: np.ndarray) -> tuple[int, int | None]:
        """:meth:`parse_many` with its ``regions`` (``(boxes, box, slots)``) and
        :meth:`decode_many` with its (``(box, region, parents, slots)``) in one pass, one GIL
        release a batch, into an allocation made before the parse (``capacity`` bytes at
        ``base``): ``(bytes, rc)``, the bytes the parse laid out (0: nothing taken) and the
        decode's result (``capi_loop.OK`` or a ``FAILED_*``), or None where the regions did
        not fit the allocation (nothing decoded, the code streams kept: the caller
        allocates and calls :meth:`decode_many`, as after :meth:`parse_many`)."""
        mod, lib = _loop[0], self.lib
        boxes, box, slots = regions[0], regions[1], regions[2]
        region, parents = regions[3], regions[4]
        n = len(state)
        with self._lock:
            if self.handle is None:
                raise NvImageCodecError("the decoder was closed")
            self._grown(n)
            work = np.empty(n + 2, np.int64)
            statuses = np.empty(max(1, n), np.uint32)
            parse = (lib.addresses, _layout[0], self.inst.handle, self._info_words, address,
                     size, handle, state, dims, offsets, int(limit), self.clock)
            at = CodeStreamView.region.offset
            dec = (self.handle, self._out_words, ctypes.addressof(self._params), self._images,
                   work, statuses, int(base), int(cuda_stream or 0), done, lib.sub_address,
                   self._view_words(), at + Region.start.offset, at + Region.end.offset,
                   region, parents)
            got = np.zeros(2, np.int64)
            lib.releases += 1
            t = time.perf_counter()
            self.clock[1:] = 0
            start = time.monotonic_ns()
            rc = boxes.parse_decode(mod, parse, (mod.ST_TAKEN, mod.ST_GIVEN), ALIGN, box,
                                    slots, int(capacity), dec, got)
            self._regained()
            self._stages(start)
            lib.free_s += time.perf_counter() - t
        return int(got[0]), (int(rc) if got[1] else None)

    def decode_many(self, base: int, cuda_stream: int, handle: np.ndarray,
                    state: np.ndarray, dims: np.ndarray, offsets: np.ndarray,
                    done: np.ndarray, regions: tuple | None = None) -> bool:
        """``capi_loop.decode`` (see there) with the GIL released for the whole batch: the
        samples :meth:`parse_many` took (and those of state ``ST_GIVEN``: code streams made
        elsewhere, their handles and dims given) decoded into ``base + offsets``, ``done``
        set per sample. Returns False where the library refused the whole call (no sample
        decoded). The code streams :meth:`parse_many` made are destroyed in every case.

        ``regions``: ``(box, region, parents, slots)``, :meth:`sub_streams_many` in the same
        pass (``capi_loop.regions_decode``: one GIL release for both), the allocation laid
        out by the caller for the boxes (``slots[r]`` bytes at ``offsets[r]``); a sample whose
        region the library refuses and whose whole image does not fit its slot is not
        decoded (``done`` 0); the regions' whole code streams (``parents``) are destroyed at
        the pass's end and zeroed. The library must make regions (:attr:`decodes_regions`)."""
        mod, lib = _loop[0], self.lib
        taken = int(np.count_nonzero((state == mod.ST_TAKEN) | (state == mod.ST_GIVEN)))
        with self._lock:
            if self.handle is None:
                mod.release(lib.addresses, handle, state)
                raise NvImageCodecError("the decoder was closed")
            self._grown(taken)
            work = np.empty(taken + 2, np.int64)
            statuses = np.empty(max(1, taken), np.uint32)
            args = (lib.addresses, _layout[0], self.inst.handle, self.handle,
                    self._out_words, ctypes.addressof(self._params), self._images, work,
                    statuses, int(base), int(cuda_stream or 0), handle, state, dims, offsets,
                    done)
            if regions is not None:
                at = CodeStreamView.region.offset
                args += (lib.sub_address, self._view_words(), at + Region.start.offset,
                         at + Region.end.offset, *regions)
            lib.releases += 1
            t = time.perf_counter()
            self.clock[1:] = 0
            start = time.monotonic_ns()
            rc = (mod.decode if regions is None else mod.regions_decode)(*args, self.clock)
            self._regained()
            self._stages(start)
            lib.free_s += time.perf_counter() - t
        return rc == mod.OK

    def release_many(self, handle: np.ndarray, state: np.ndarray) -> None:
        """Destroy the code streams :meth:`parse_many` made, where :meth:`decode_many` is not
        called after it (the batch's allocation failed, say)."""
        _loop[0].release(self.lib.addresses, handle, state)

    def close(self) -> None:
        """Destroy the decoder's images, then the decoder (no decode runs past
        :meth:`decode`'s return, so nothing is in flight)."""
        with self._lock:
            handle, self.handle = self.handle, None
            if handle is None or _exiting[0]:
                return
            lib = self.lib
            for i in range(len(self._images)):
                if self._images[i]:
                    lib.ImageDestroy(int(self._images[i]))
                    self._images[i] = 0
            lib.DecoderDestroy(handle)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # an interpreter tearing down: the process's end frees it all
            pass


def _clock_gettime() -> int:
    """The address of the C library's ``clock_gettime`` (the compiled passes stamp their end
    with CLOCK_MONOTONIC, Python's ``time.monotonic_ns`` clock), 0 where it is not found
    (not Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return int(ctypes.cast(ctypes.CDLL(None).clock_gettime, c_void_p).value or 0)
    except (OSError, AttributeError):
        return 0


CLOCK_GETTIME = _clock_gettime()


def _words_of(struct: Any) -> np.ndarray:
    """A structure's bytes as int64 words (a copy)."""
    words = np.zeros(-(-sizeof(struct) // 8), np.int64)
    ctypes.memmove(words.ctypes.data, byref(struct), sizeof(struct))
    return words


_loop: list[Any] = []
_layout: list[np.ndarray] = []
_loop_lock = threading.Lock()
#: seconds the compiled loop took to load in this process (compiled, or read from the disk
#: cache; None: not loaded)
LOOP_LOAD_S: list[float] = []


def loop() -> Any:
    """The compiled per-batch loop (``capi_loop``, imported from the kernel cache directory
    and its two passes compiled or loaded from Numba's disk cache), or None where it cannot
    be had (no Numba host compiler, say): the ctypes loop decodes then. Loaded once a
    process, by the first decoder that asks."""
    with _loop_lock:
        if not _loop:
            t = time.perf_counter()
            try:
                _loop.append(_load_loop())
                LOOP_LOAD_S.append(time.perf_counter() - t)
            except Exception:  # noqa: BLE001 - no compiled loop: the ctypes one decodes
                _loop.append(None)
        return _loop[0]


def _load_loop() -> Any:
    import hashlib
    from pathlib import Path

    from ..source_cache import import_source

    text = (Path(__file__).parent / "capi_loop.py").read_text()
    mod = import_source("millipyde_capi_loop_" + hashlib.sha1(text.encode()).hexdigest()[:20],
                        text)
    _layout.append(layout(mod))
    _compile(mod)
    return mod


def layout(mod: Any) -> np.ndarray:
    """The layout array of ``capi_loop`` (``mod``): the byte offsets of
    ``nvimgcodecImageInfo_t``'s fields it reads and writes (from the ctypes structures, which
    the tests check against the header), and the constants it compares with."""
    plane = ImageInfo.plane_info.offset
    turn = ImageInfo.orientation.offset
    lay = np.zeros(mod.LAYOUT, np.int64)
    for index, value in [
            (mod.LAY_WORDS, -(-sizeof(ImageInfo) // 8)), (mod.LAY_HEAD, 3),
            (mod.LAY_CODEC, ImageInfo.codec_name.offset),
            (mod.LAY_COLOR, ImageInfo.color_spec.offset),
            (mod.LAY_ROTATED, turn + Orientation.rotated.offset),
            (mod.LAY_FLIP_X, turn + Orientation.flip_x.offset),
            (mod.LAY_FLIP_Y, turn + Orientation.flip_y.offset),
            (mod.LAY_PLANES, ImageInfo.num_planes.offset), (mod.LAY_PLANE, plane),
            (mod.LAY_PLANE_SIZE, sizeof(ImagePlaneInfo)),
            (mod.LAY_WIDTH, ImagePlaneInfo.width.offset),
            (mod.LAY_HEIGHT, ImagePlaneInfo.height.offset),
            (mod.LAY_STRIDE, ImagePlaneInfo.row_stride.offset),
            (mod.LAY_CHANNELS, ImagePlaneInfo.num_channels.offset),
            (mod.LAY_BUFFER, ImageInfo.buffer.offset),
            (mod.LAY_STREAM, ImageInfo.cuda_stream.offset),
            (mod.LAY_MAX_PLANES, MAX_NUM_PLANES), (mod.LAY_SYCC, COLORSPEC_SYCC),
            (mod.LAY_SRGB, COLORSPEC_SRGB), (mod.LAY_UNKNOWN, COLORSPEC_UNKNOWN),
            (mod.LAY_SUCCESS, PROCESSING_STATUS_SUCCESS), (mod.LAY_ALIGN, ALIGN),
            (mod.LAY_STEP, POOL_STEP)]:
        lay[index] = value
    # the loop reads 4-byte fields as 32-bit words and 8-byte ones as 64-bit words
    for index, size in [(mod.LAY_COLOR, 4), (mod.LAY_ROTATED, 4), (mod.LAY_FLIP_X, 4),
                        (mod.LAY_FLIP_Y, 4), (mod.LAY_PLANES, 4), (mod.LAY_PLANE, 8),
                        (mod.LAY_PLANE_SIZE, 8), (mod.LAY_WIDTH, 4), (mod.LAY_HEIGHT, 4),
                        (mod.LAY_STRIDE, 8), (mod.LAY_CHANNELS, 4), (mod.LAY_BUFFER, 8),
                        (mod.LAY_STREAM, 8)]:
        if lay[index] % size:
            raise ValueError(f"capi_loop layout entry {index} ({lay[index]}) is not aligned "
                             f"to {size} bytes")
    return lay


def _compile(mod: Any) -> None:
    """Both passes and the release compiled (or loaded from the disk cache) for the types
    :class:`Decoder` calls them with: an empty batch, which calls no library function."""
    z64 = np.zeros(0, np.int64)
    dims = np.zeros((0, 5), np.int64)
    state = np.zeros(0, np.int32)
    words = np.zeros(1, np.int64)
    addresses = np.zeros(mod.FUNCTIONS, np.int64)
    clock = np.zeros(3, np.int64)
    mod.parse(addresses, _layout[0], 0, words, z64, z64, z64, state, dims, z64, 0, clock)
    mod.decode(addresses, _layout[0], 0, 0, words, 0, z64, words, np.zeros(1, np.uint32), 0,
               0, z64, state, dims, z64, np.zeros(0, np.uint8), clock)
    mod.release(addresses, z64, state)
    mod.regions(0, 0, words, 0, 0, z64, state, dims, np.zeros((0, 4), np.int64),
                np.zeros((0, 4), np.int64), z64, clock)
    mod.regions_decode(addresses, _layout[0], 0, 0, words, 0, z64, words,
                       np.zeros(1, np.uint32), 0, 0, z64, state, dims, z64,
                       np.zeros(0, np.uint8), 0, words, 0, 0, np.zeros((0, 4), np.int64),
                       np.zeros((0, 4), np.int64), z64, z64, clock)
    mod.destroy(0, z64)
    mod.words_at(z64, 0, z64)


#: alignment of each image in a batch's allocation (bytes)
ALIGN = 256
#: a batch's allocation is a whole number of these (bytes)
POOL_STEP = 1 << 20


def pool_bytes(nbytes: int) -> int:
    """A batch's allocation for ``nbytes`` of images: rounded up to a whole number of
    :data:`POOL_STEP` and to one of eight sizes an octave (at most 1/8 more). Batches of
    regions vary in size from batch to batch; CuPy's pool keeps a block of each size it has
    handed out, so without the coarse classes its memory grows with the sizes seen."""
    n = max(int(nbytes), 1)
    step = max(POOL_STEP, 1 << max(0, n.bit_length() - 4))
    return -(-n // step) * step


#: set at the interpreter's exit: native objects still alive then are left to the process's
#: end (the CUDA contexts and libraries they would be torn down through may be gone already)
_exiting = [False]


def _at_exit() -> None:
    _exiting[0] = True


atexit.register(_at_exit)
