"""The per-batch loop of nvImageCodec's C-API decode compiled with Numba (nopython,
``nogil``): every per-image call of a batch, the decode and its wait run with the GIL
released, one release a pass (``nvimgcodec_capi.Decoder.parse_many`` / ``decode_many``).

Not imported by the package: ``nvimgcodec_capi.loop()`` writes this file's text to the kernel
cache directory (``MILLIPYDE_CACHE_DIR``, ``source_cache``) and imports it from there, so its
``cache=True`` compiles land in that directory and a second process loads them from disk.

The library's functions are called through their addresses, given in an int64 array
(``FN_*`` indices; ``_call``: every argument a 64-bit integer or pointer, or a 32-bit
``int`` where the C signature has one), never as compiled-in constants: ``cache=True``
could not keep those across processes. Structures are arrays of 64-bit words read and
written at the byte offsets ctypes gives for them (``LAY_*`` indices of the layout array,
made by ``nvimgcodec_capi.layout``), so this file holds no copy of the header. Every handle,
address, size and word is an int64 (Numba makes a float of a uint64 plus an int64).

Per sample a state (``ST_*``) says what the passes do with it: ``parse`` reads what the
library makes of the bytes (a code stream, its image info) and keeps the colour JPEGs under
the pixel limit; ``decode`` makes an output image over each kept sample's offset of the
batch's allocation, decodes them in one call, waits, reads the statuses, and destroys the
code streams ``parse`` made (those made elsewhere belong to their Python objects).
Each pass ends by writing the monotonic clock into its ``clock`` array (:func:`_stamp`), so
its caller can tell how long its thread waited to take the GIL back after the pass.
Between the two, ``regions`` may replace a taken sample's code stream by one of a rectangle of
its image (region decoding, ``data.region``); ``destroy`` then destroys the whole ones.
``regions_decode`` is ``regions`` and ``decode`` in one pass (the caller lays the allocation
out for the regions beforehand).
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic

# the library's functions: indices of the address array
FN_CREATE = 0  # nvimgcodecCodeStreamCreateFromHostMem
FN_INFO = 1  # nvimgcodecCodeStreamGetImageInfo
FN_STREAM_DESTROY = 2  # nvimgcodecCodeStreamDestroy
FN_IMAGE_CREATE = 3  # nvimgcodecImageCreate
FN_DECODE = 4  # nvimgcodecDecoderDecode
FN_WAIT = 5  # nvimgcodecFutureWaitForAll
FN_STATUS = 6  # nvimgcodecFutureGetProcessingStatus
FN_FUTURE_DESTROY = 7  # nvimgcodecFutureDestroy
FUNCTIONS = 8

# the layout array: byte offsets in nvimgcodecImageInfo_t, then constants
LAY_WORDS = 0  # its size in 8-byte words
LAY_HEAD = 1  # words of the head (struct_type, struct_size, struct_next) restored per sample
LAY_CODEC = 2  # codec_name
LAY_COLOR = 3  # color_spec
LAY_ROTATED = 4  # orientation.rotated
LAY_FLIP_X = 5
LAY_FLIP_Y = 6
LAY_PLANES = 7  # num_planes
LAY_PLANE = 8  # plane_info[0]
LAY_PLANE_SIZE = 9  # sizeof(nvimgcodecImagePlaneInfo_t)
LAY_WIDTH = 10  # in a plane
LAY_HEIGHT = 11
LAY_STRIDE = 12  # row_stride
LAY_CHANNELS = 13  # num_channels
LAY_BUFFER = 14
LAY_STREAM = 15  # cuda_stream
LAY_MAX_PLANES = 16
LAY_SYCC = 17  # the colour specs taken (YCbCr, sRGB, unknown)
LAY_SRGB = 18
LAY_UNKNOWN = 19
LAY_SUCCESS = 20  # nvimgcodecProcessingStatus SUCCESS
LAY_ALIGN = 21  # each image's offset a multiple of it
LAY_STEP = 22  # the batch's allocation a multiple of it
LAYOUT = 23

# a sample's state
ST_SKIP = 0  # not for nvImageCodec (Pillow); after parse: not taken
ST_PARSE = 1  # bytes at (address, size) to parse
ST_GIVEN = 2  # a code stream parsed elsewhere: its handle and dims given, taken
ST_TAKEN = 3  # parsed here and taken (its code stream destroyed by decode / release)
ST_BOMB = 4  # parsed here, over the pixel limit (its code stream destroyed)

# dims columns
D_HEIGHT = 0  # of the decoded image (EXIF orientation applied)
D_WIDTH = 1
D_ROTATED = 2
D_FLIP_X = 3
D_FLIP_Y = 4

# a clock array's stamps (``_stamp_at``): 0 a pass's end; in ``decode`` 1 its output images
# made, 2 the decode call returned, 3 the wait and the statuses done
STAMPS = 4
CLOCK_WORDS = 1 + 2 * STAMPS

# decode's result
OK = 0
FAILED_IMAGE = -1  # an output image was refused
FAILED_DECODE = -2  # the decode call was refused
FAILED_WAIT = -3  # the wait or the statuses failed


@intrinsic
def _call(typingctx, fn, args):
    """``fn(*args)`` for a library function at address ``fn`` returning an ``int`` status:
    each argument passed at its own width (64-bit words and pointers, 32-bit ``int``)."""
    if not isinstance(args, types.BaseTuple):
        return None
    sig = types.int32(fn, args)

    def codegen(context, builder, signature, llargs):
        address, packed = llargs
        values = [builder.extract_value(packed, i) for i in range(len(signature.args[1]))]
        fnty = ir.FunctionType(ir.IntType(32), [v.type for v in values])
        return builder.call(builder.inttoptr(address, fnty.as_pointer()), values)

    return sig, codegen


@intrinsic
def _load(typingctx, address):
    """The 64-bit word at ``address``."""
    sig = types.int64(address)

    def codegen(context, builder, signature, llargs):
        ptr = builder.inttoptr(llargs[0], ir.IntType(64).as_pointer())
        return builder.load(ptr)

    return sig, codegen


@njit(cache=True)
def words_at(ids, at, out):
    """``out[r]``: the 64-bit word at ``ids[r] + at`` (the data pointers of NumPy arrays
    from their objects' addresses, ``id``: the caller checked the offset and keeps the
    arrays alive). Holds the GIL: a short call, no hand-over."""
    for r in range(ids.shape[0]):
        out[r] = _load(ids[r] + at)


@njit(cache=True, nogil=True)
def _stamp(clock):
    """``clock[1]``, ``clock[2]``: CLOCK_MONOTONIC's seconds and nanoseconds now, through
    ``clock_gettime`` at address ``clock[0]`` (nothing where it is 0). Called as a pass's
    last step: Python's ``time.monotonic_ns()`` after the return, less this, is the time
    the thread waited to take the GIL back (the pass itself ran without it)."""
    _stamp_at(clock, 0)


@njit(cache=True, nogil=True)
def _stamp_at(clock, k):
    """Stamp ``k`` of a pass (``clock[1 + 2k]``, ``clock[2 + 2k]``; 0: its end), where the
    clock has room for it (:data:`STAMPS`)."""
    if clock[0] != 0 and clock.shape[0] >= 3 + 2 * k:
        _call(clock[0], (np.int32(1), np.int64(clock.ctypes.data) + 8 + 16 * k))


@njit(cache=True, nogil=True)
def _u32(words, at):
    """The 32-bit field at byte offset ``at`` (a multiple of 4), unsigned."""
    return np.int64(words.view(np.uint32)[at // 4])


@njit(cache=True, nogil=True)
def _i32(words, at):
    """The 32-bit ``int`` field at byte offset ``at``."""
    return np.int64(words.view(np.int32)[at // 4])


@njit(cache=True, nogil=True)
def _set_u32(words, at, value):
    words.view(np.uint32)[at // 4] = np.uint32(value)


@njit(cache=True, nogil=True)
def _set_i32(words, at, value):
    words.view(np.int32)[at // 4] = np.int32(value)


@njit(cache=True, nogil=True)
def parse(fns, lay, instance, template, address, size, handle, state, dims, offsets, limit,
          clock):
    """Per sample of state ST_PARSE: a code stream over its bytes (into ``handle``), its image
    info; a colour JPEG (codec ``jpeg``, 3 channels over its planes, colour spec YCbCr / sRGB /
    unknown) under ``limit`` pixels becomes ST_TAKEN with its dims, one over the limit
    ST_BOMB (dims kept), anything else ST_SKIP; code streams not taken are destroyed.
    Offsets of every taken sample (ST_TAKEN, ST_GIVEN) in the batch's allocation, each
    aligned; returns the allocation's bytes (a whole number of steps; 0: nothing taken).
    ``template``: an image info with its head set (words), copied for the calls."""
    info = template.copy()
    head = lay[LAY_HEAD]
    planes_at = lay[LAY_PLANE]
    plane = lay[LAY_PLANE_SIZE]
    at_info = np.int64(info.ctypes.data)
    at_handle = np.int64(handle.ctypes.data)
    align = lay[LAY_ALIGN]
    total = 0
    for r in range(state.shape[0]):
        if state[r] == ST_PARSE:
            state[r] = ST_SKIP
            handle[r] = 0  # a nonzero handle would be reused by the library
            if _call(fns[FN_CREATE], (instance, at_handle + 8 * r, address[r], size[r],
                                      np.int64(0))) != 0 or handle[r] == 0:
                if handle[r] != 0:
                    _call(fns[FN_STREAM_DESTROY], (handle[r],))
                    handle[r] = 0
                continue
            for k in range(head):
                info[k] = template[k]
            ok = _call(fns[FN_INFO], (handle[r], at_info)) == 0
            nplanes = _u32(info, lay[LAY_PLANES])
            if ok and nplanes >= 1:
                c = lay[LAY_CODEC]
                name = info.view(np.uint8)
                jpeg = name[c] == 106 and name[c + 1] == 112 and name[c + 2] == 101 and \
                    name[c + 3] == 103 and name[c + 4] == 0  # b"jpeg\0"
                channels = 0
                for p in range(min(nplanes, lay[LAY_MAX_PLANES])):
                    channels += _u32(info, planes_at + p * plane + lay[LAY_CHANNELS])
                spec = _i32(info, lay[LAY_COLOR])
                colour = spec == lay[LAY_SYCC] or spec == lay[LAY_SRGB] or \
                    spec == lay[LAY_UNKNOWN]
                if jpeg and channels == 3 and colour:
                    h = _u32(info, planes_at + lay[LAY_HEIGHT])
                    w = _u32(info, planes_at + lay[LAY_WIDTH])
                    rotated = _i32(info, lay[LAY_ROTATED])
                    if rotated % 180 == 90:
                        h, w = w, h
                    dims[r, D_HEIGHT] = h
                    dims[r, D_WIDTH] = w
                    dims[r, D_ROTATED] = rotated
                    dims[r, D_FLIP_X] = _i32(info, lay[LAY_FLIP_X])
                    dims[r, D_FLIP_Y] = _i32(info, lay[LAY_FLIP_Y])
                    state[r] = ST_TAKEN if h * w <= limit else ST_BOMB
            if state[r] != ST_TAKEN:
                _call(fns[FN_STREAM_DESTROY], (handle[r],))
                handle[r] = 0
        if state[r] == ST_TAKEN or state[r] == ST_GIVEN:
            offsets[r] = total
            total += (dims[r, D_HEIGHT] * dims[r, D_WIDTH] * 3 + align - 1) // align * align
    step = lay[LAY_STEP]
    _stamp(clock)
    return (total + step - 1) // step * step


@njit(cache=True, nogil=True)
def release(fns, handle, state):
    """Destroy the code streams ``parse`` made (ST_TAKEN), their handles zeroed."""
    for r in range(state.shape[0]):
        if state[r] == ST_TAKEN and handle[r] != 0:
            _call(fns[FN_STREAM_DESTROY], (handle[r],))
            handle[r] = 0


@njit(cache=True, nogil=True)
def decode(fns, lay, instance, decoder, out, params, images, work, statuses, base,
           cuda_stream, handle, state, dims, offsets, done, clock):
    """The taken samples (ST_TAKEN, ST_GIVEN) decoded at ``base + offsets[r]``: per sample
    an output image described by ``out`` (an image info, words; its plane, orientation and
    buffer written here) into ``images`` (handles the library reuses, batch after batch);
    one decode call, its wait, the statuses: ``done[r]`` 1 where it decoded. ``work``: at
    least taken + 2 words (the code streams' handles, the future, the statuses' count);
    ``statuses``: at least taken. Returns OK or the FAILED_* of the step that failed (no
    sample decoded). The code streams ``parse`` made are destroyed in every case."""
    rc = OK
    n = state.shape[0]
    m = 0
    for r in range(n):
        done[r] = 0
        if state[r] == ST_TAKEN or state[r] == ST_GIVEN:
            work[m] = handle[r]
            m += 1
    if m > 0:
        planes_at = lay[LAY_PLANE]
        at_out = np.int64(out.ctypes.data)
        out[lay[LAY_STREAM] // 8] = cuda_stream
        at_images = np.int64(images.ctypes.data)
        j = 0
        for r in range(n):
            if state[r] != ST_TAKEN and state[r] != ST_GIVEN:
                continue
            h = dims[r, D_HEIGHT]
            w = dims[r, D_WIDTH]
            _set_u32(out, planes_at + lay[LAY_HEIGHT], h)
            _set_u32(out, planes_at + lay[LAY_WIDTH], w)
            out[(planes_at + lay[LAY_STRIDE]) // 8] = w * 3
            _set_i32(out, lay[LAY_ROTATED], dims[r, D_ROTATED])
            _set_i32(out, lay[LAY_FLIP_X], dims[r, D_FLIP_X])
            _set_i32(out, lay[LAY_FLIP_Y], dims[r, D_FLIP_Y])
            out[lay[LAY_BUFFER] // 8] = base + offsets[r]
            if _call(fns[FN_IMAGE_CREATE], (instance, at_images + 8 * j, at_out)) != 0:
                rc = FAILED_IMAGE
                break
            j += 1
        _stamp_at(clock, 1)
        if rc == OK:
            at_work = np.int64(work.ctypes.data)
            future_at = at_work + 8 * m
            work[m] = 0
            if _call(fns[FN_DECODE], (decoder, at_work, at_images, np.int32(m), params,
                                      future_at)) != 0:
                rc = FAILED_DECODE
            else:
                _stamp_at(clock, 2)
                future = work[m]
                work[m + 1] = m
                if _call(fns[FN_WAIT], (future,)) != 0 or \
                        _call(fns[FN_STATUS], (future, np.int64(statuses.ctypes.data),
                                               at_work + 8 * (m + 1))) != 0:
                    rc = FAILED_WAIT
                else:
                    _stamp_at(clock, 3)
                    got = work[m + 1]
                    j = 0
                    for r in range(n):
                        if state[r] == ST_TAKEN or state[r] == ST_GIVEN:
                            if j < got and statuses[j] == lay[LAY_SUCCESS]:
                                done[r] = 1
                            j += 1
                _call(fns[FN_FUTURE_DESTROY], (future,))
    release(fns, handle, state)
    _stamp(clock)
    return rc


@njit(cache=True, nogil=True)
def regions(fn_sub, fn_destroy, view, at_start, at_end, handle, state, dims, box, region,
            parents, clock):
    """Between the two passes: each taken sample (ST_TAKEN, ST_GIVEN) without an EXIF
    orientation whose ``box`` (top, left, bottom, right) is not its whole image gets a code
    stream of that rectangle (``fn_sub``: ``nvimgcodecCodeStreamGetSubCodeStream`` of its code
    stream, ``view`` a code stream view, words, its region's ``start`` and ``end`` at byte
    offsets ``at_start`` / ``at_end``): its handle replaces the sample's, which goes to
    ``parents[r]`` where ``parse`` made it (destroyed after the decode, :func:`destroy`; a
    given one belongs to its caller); the sample becomes ST_TAKEN (``decode`` destroys the
    new code stream), its dims the rectangle's size, its row of ``region`` (top, left, the
    whole height and width). A sample the library refuses a region keeps its whole code
    stream. Returns how many got one."""
    at_view = np.int64(view.ctypes.data)
    sub = np.zeros(1, np.int64)
    at_sub = np.int64(sub.ctypes.data)
    v32 = view.view(np.int32)
    made = 0
    for r in range(state.shape[0]):
        parents[r] = 0
        if state[r] != ST_TAKEN and state[r] != ST_GIVEN:
            continue
        if dims[r, D_ROTATED] != 0 or dims[r, D_FLIP_X] != 0 or dims[r, D_FLIP_Y] != 0:
            continue
        h = dims[r, D_HEIGHT]
        w = dims[r, D_WIDTH]
        top = box[r, 0]
        left = box[r, 1]
        bottom = box[r, 2]
        right = box[r, 3]
        if top == 0 and left == 0 and bottom == h and right == w:
            continue
        v32[at_start // 4] = top
        v32[at_start // 4 + 1] = left
        v32[at_end // 4] = bottom
        v32[at_end // 4 + 1] = right
        sub[0] = 0
        if _call(fn_sub, (handle[r], at_sub, at_view)) != 0 or sub[0] == 0:
            if sub[0] != 0:
                _call(fn_destroy, (sub[0],))
            continue
        if state[r] == ST_TAKEN:
            parents[r] = handle[r]
        handle[r] = sub[0]
        state[r] = ST_TAKEN
        dims[r, D_HEIGHT] = bottom - top
        dims[r, D_WIDTH] = right - left
        region[r, 0] = top
        region[r, 1] = left
        region[r, 2] = h
        region[r, 3] = w
        made += 1
    _stamp(clock)
    return made


@njit(cache=True, nogil=True)
def regions_decode(fns, lay, instance, decoder, out, params, images, work, statuses, base,
                   cuda_stream, handle, state, dims, offsets, done, fn_sub, view, at_start,
                   at_end, box, region, parents, slots, clock):
    """:func:`regions` then :func:`decode` in one pass (one GIL release a batch for both):
    the batch's allocation laid out by the caller for the boxes (``slots[r]``: the bytes at
    ``offsets[r]`` for sample ``r``); a sample whose region the library refused keeps its
    whole code stream and, where its whole image does not fit its slot, is not decoded
    (ST_SKIP, its code stream destroyed where ``parse`` made it; ``done`` 0: the caller's
    fallback decodes it). The whole code streams of the regions (``parents``) are destroyed
    at the pass's end, after the decode's wait, and zeroed (no further pass, and no GIL
    release, to destroy them). Returns :func:`decode`'s result."""
    none = np.zeros(3, np.int64)
    regions(fn_sub, fns[FN_STREAM_DESTROY], view, at_start, at_end, handle, state, dims, box,
            region, parents, none)
    for r in range(state.shape[0]):
        if state[r] != ST_TAKEN and state[r] != ST_GIVEN:
            continue
        if dims[r, D_HEIGHT] * dims[r, D_WIDTH] * 3 > slots[r]:
            if state[r] == ST_TAKEN and handle[r] != 0:
                _call(fns[FN_STREAM_DESTROY], (handle[r],))
            handle[r] = 0
            state[r] = ST_SKIP
    rc = decode(fns, lay, instance, decoder, out, params, images, work, statuses, base,
                cuda_stream, handle, state, dims, offsets, done, clock)
    destroy(fns[FN_STREAM_DESTROY], parents)
    _stamp(clock)  # the pass's end, after the destroys
    return rc


@njit(cache=True, nogil=True)
def destroy(fn_destroy, handles):
    """Destroy the code streams ``handles`` (nonzero ones), zeroing them."""
    for r in range(handles.shape[0]):
        if handles[r] != 0:
            _call(fn_destroy, (handles[r],))
            handles[r] = 0
