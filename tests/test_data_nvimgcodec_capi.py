"""nvImageCodec's C API through ctypes (``millipyde.data.nvimgcodec_capi``) and the decoder
over it (``decode.NvImageCodecCDecoder``), on the CPU: libjpeg-turbo (the wheel's extension,
statically linked) into host buffers. The same code decodes on a GPU into device memory
(bench/probes/decode_capi.py). Skipped where the ``nvidia-nvimgcodec-cu13`` wheel is not
installed (CI does not install it)."""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from ctypes import byref, sizeof
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from skimage import data

from millipyde import config
from millipyde import io as mio
from millipyde.backend import ACTIVE
from millipyde.data import decode as dmod
from millipyde.data import nvimgcodec_capi as capi

LIB = capi.api()
needs_lib = pytest.mark.skipif(LIB is None, reason="the nvidia-nvimgcodec-cu13 wheel is not "
                               "installed (its C library is what is tested)")


def _jpeg(a: np.ndarray, **kw) -> bytes:
    out = io.BytesIO()
    Image.fromarray(a).save(out, "JPEG", quality=90, **kw)
    return out.getvalue()


def _oriented(a: np.ndarray, orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _jpeg(a, exif=exif)


def _cpu_decoder(threads: int = 2) -> capi.Decoder:
    return capi.Decoder(capi.instance(), capi.DEVICE_CPU_ONLY, threads,
                        [capi.BACKEND_KIND_CPU_ONLY], host=True)


def _decode(dec: capi.Decoder, blobs: list) -> list:
    """Each blob decoded by the binding alone in one batch: its (H, W, 3) array, None where
    it does not parse, False where the decode fails it."""
    parsed = [dec.parse(b) for b in blobs]
    keep = [p for p in parsed if p is not None]
    bufs = [np.full((p.height, p.width, 3), 7, np.uint8) for p in keep]
    done = dec.decode(keep, [b.ctypes.data for b in bufs])
    assert done is not None
    it = iter(zip(bufs, done, strict=True))
    out = []
    for p in parsed:
        if p is None:
            out.append(None)
            continue
        buf, ok = next(it)
        out.append(buf if ok else False)
    return out


def _cases(step: int = 1) -> dict:
    """Samples of every kind the C decoder meets: scikit-image's photographs (every
    ``step``-th pixel a side) at q90 (4:2:0), 4:4:4, progressive, the eight EXIF
    orientations, grey, CMYK, PNG, a truncated JPEG, zero bytes, junk."""
    photos = [data.astronaut(), data.chelsea(), data.coffee(), data.rocket()]
    cases = {f"photo{i}": _jpeg(p[::step, ::step]) for i, p in enumerate(photos)}
    cases["444"] = _jpeg(data.coffee()[::step, ::step], subsampling=0)
    cases["progressive"] = _jpeg(data.chelsea()[::step, ::step], progressive=True)
    small = data.astronaut()[100:164, 150:198]
    for o in range(1, 9):
        cases[f"exif{o}"] = _oriented(small, o)
    cases["grey"] = _jpeg(data.camera()[::step, ::step])
    cmyk = io.BytesIO()
    Image.fromarray(small).convert("CMYK").save(cmyk, "JPEG", quality=90)
    cases["cmyk"] = cmyk.getvalue()
    png = io.BytesIO()
    Image.fromarray(small).save(png, "PNG")
    cases["png"] = png.getvalue()
    cases["truncated"] = _jpeg(data.chelsea())[:4000]
    cases["zero"] = b""
    cases["junk"] = b"not an image at all"
    return cases


@pytest.fixture(params=["compiled", "ctypes"])
def loop_kind(request, monkeypatch) -> str:
    """The C decoder's per-batch loop: compiled (``decode.CAPI_COMPILED``, Numba, the GIL
    released a pass) or the ctypes loop."""
    compiled = request.param == "compiled"
    monkeypatch.setattr(dmod, "CAPI_COMPILED", compiled)
    if compiled:
        assert capi.loop() is not None, "the compiled loop did not load"
    return request.param


@needs_lib
def test_structures_match_the_header_compiled_by_a_c_compiler(tmp_path) -> None:
    """Every ctypes structure's size and every field's offset equal the C compiler's, from
    the wheel's own nvimgcodec.h (cudaStream_t stubbed as a pointer)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    inc = os.path.join(LIB.directory, "include")
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "cuda_runtime_api.h").write_text("typedef void* cudaStream_t;\n")
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "nvimgcodec.h"',
             "int main(void) {"]
    expect = {}
    for name, (cls, _) in capi.STRUCTS.items():
        lines.append(f'printf("{name} %zu\\n", sizeof({name}));')
        expect[name] = sizeof(cls)
        for field, *_ in cls._fields_:
            lines.append(f'printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
            expect[f"{name}.{field}"] = getattr(cls, field).offset
    lines.append("return 0; }")
    (tmp_path / "sizes.c").write_text("\n".join(lines))
    subprocess.run([cc, f"-I{stub}", f"-I{inc}", str(tmp_path / "sizes.c"), "-o",
                    str(tmp_path / "sizes")], check=True, capture_output=True)
    got = dict(line.rsplit(" ", 1) for line in subprocess.run(
        [str(tmp_path / "sizes")], check=True, capture_output=True, text=True).stdout.split("\n")
        if line)
    assert {k: int(v) for k, v in got.items()} == expect


@needs_lib
def test_structure_types_statuses_and_version_match_the_header() -> None:
    text = Path(LIB.directory, "include", "nvimgcodec.h").read_text()
    body = re.search(r"typedef enum\s*\{(.*?)\}\s*nvimgcodecStructureType_t;", text, re.S)[1]
    names = re.findall(r"NVIMGCODEC_STRUCTURE_TYPE_(\w+)", body)
    value = {n: i for i, n in enumerate(names)}  # implicit values from 0 (UNKNOWN = 0)
    for attr in dir(capi):
        if attr.startswith("STRUCTURE_TYPE_"):
            assert getattr(capi, attr) == value[attr[len("STRUCTURE_TYPE_"):]], attr

    ver = Path(LIB.directory, "include", "nvimgcodec_version.h").read_text()
    major, minor, patch = (int(re.search(rf"NVIMGCODEC_VER_{k}\s+(\d+)", ver)[1])
                           for k in ("MAJOR", "MINOR", "PATCH"))
    assert capi.version(LIB) == major * 1000 + minor * 100 + patch  # the header's library

    def defined(c_name: str) -> int:
        return int(re.search(rf"\b{c_name}\s*=\s*(0x[0-9a-fA-F]+|-?\d+)", text)[1], 0)

    for attr, c_name in [("STATUS_SUCCESS", "NVIMGCODEC_STATUS_SUCCESS"),
                         ("SAMPLE_DATA_TYPE_UINT8", "NVIMGCODEC_SAMPLE_DATA_TYPE_UINT8"),
                         ("SAMPLEFORMAT_I_RGB", "NVIMGCODEC_SAMPLEFORMAT_I_RGB"),
                         ("COLORSPEC_SRGB", "NVIMGCODEC_COLORSPEC_SRGB"),
                         ("COLORSPEC_SYCC", "NVIMGCODEC_COLORSPEC_SYCC"),
                         ("IMAGE_BUFFER_KIND_STRIDED_DEVICE",
                          "NVIMGCODEC_IMAGE_BUFFER_KIND_STRIDED_DEVICE"),
                         ("IMAGE_BUFFER_KIND_STRIDED_HOST",
                          "NVIMGCODEC_IMAGE_BUFFER_KIND_STRIDED_HOST"),
                         ("BACKEND_KIND_CPU_ONLY", "NVIMGCODEC_BACKEND_KIND_CPU_ONLY"),
                         ("PROCESSING_STATUS_SUCCESS", "NVIMGCODEC_PROCESSING_STATUS_SUCCESS"),
                         ("LOAD_HINT_POLICY_FIXED", "NVIMGCODEC_LOAD_HINT_POLICY_FIXED")]:
        assert getattr(capi, attr) == defined(c_name), attr


@needs_lib
def test_the_library_takes_each_structure_at_its_size_and_refuses_another() -> None:
    """The library checks ``struct_size``: each structure it checks is taken at the ctypes
    size and refused 8 bytes smaller or larger."""
    inst = capi.instance()
    jpeg = _jpeg(np.zeros((8, 8, 3), np.uint8))
    dec = _cpu_decoder(1)
    cs = dec.parse(jpeg)

    def instance_info(delta: int) -> int:
        info = capi.make(capi.InstanceCreateInfo)
        info.struct_size += delta
        h = capi._H()
        st = LIB.InstanceCreate(byref(h), byref(info))
        if st == capi.STATUS_SUCCESS:
            LIB.InstanceDestroy(h)
        return st

    def execution(delta: int, part: str = "") -> int:
        be = (capi.Backend * 1)()
        be[0] = capi.make(capi.Backend, kind=capi.BACKEND_KIND_CPU_ONLY,
                          params=capi.make(capi.BackendParams, load_hint=1.0,
                                           load_hint_policy=capi.LOAD_HINT_POLICY_FIXED))
        ep = capi.make(capi.ExecutionParams, device_id=capi.DEVICE_CPU_ONLY, num_backends=1,
                       backends=be)
        {"": ep, "backend": be[0], "params": be[0].params}[part].struct_size += delta
        h = capi._H()
        st = LIB.DecoderCreate(inst.handle, byref(h), byref(ep), None)
        if st == capi.STATUS_SUCCESS:
            LIB.DecoderDestroy(h)
        return st

    def image_info(delta: int) -> int:
        info = capi.make(capi.ImageInfo)
        info.struct_size += delta
        return LIB.CodeStreamGetImageInfo(cs.handle, byref(info))

    def stream_info(delta: int) -> int:
        info = capi.make(capi.CodeStreamInfo)
        info.struct_size += delta
        return LIB.CodeStreamGetCodeStreamInfo(cs.handle, byref(info))

    def decode_params(delta: int, which: str = "params") -> bool:
        struct = {"params": dec._params, "out": dec._out}[which]
        struct.struct_size = sizeof(type(struct)) + delta
        try:
            buf = np.zeros((8, 8, 3), np.uint8)
            return dec.decode([cs], [buf.ctypes.data]) == [True]
        finally:
            struct.struct_size = sizeof(type(struct))

    checks = {"InstanceCreateInfo": instance_info, "ExecutionParams": execution,
              "Backend": lambda d: execution(d, "backend"),
              "BackendParams": lambda d: execution(d, "params"),
              "ImageInfo (code stream)": image_info, "CodeStreamInfo": stream_info}
    for name, call in checks.items():
        assert call(0) == capi.STATUS_SUCCESS, name
        assert call(-8) != capi.STATUS_SUCCESS and call(8) != capi.STATUS_SUCCESS, name
    for which in ("params", "out"):  # DecodeParams; ImageInfo of an output image
        assert decode_params(0, which) and not decode_params(-8, which) and \
            not decode_params(8, which), which
    dec.close()


@needs_lib
def test_cpu_decode_equals_pillow_exactly() -> None:
    """libjpeg-turbo through nvImageCodec against Pillow (libjpeg-turbo too): scikit-image's
    photographs at q90 (4:2:0), 4:4:4, progressive, every EXIF orientation, grey, CMYK
    and PNG made RGB: the same bytes (max difference 0). A truncated JPEG fails its
    processing status; a zero-byte one does not parse."""
    cases = _cases()
    dec = _cpu_decoder()
    got = dict(zip(cases, _decode(dec, list(cases.values())), strict=True))
    assert got["zero"] is None and got["junk"] is None
    assert got["truncated"] is False
    for name, blob in cases.items():
        if name in ("zero", "junk", "truncated"):
            continue
        ref = _pillow_rgb(blob)
        assert got[name].shape == ref.shape, name
        assert np.array_equal(got[name], ref), (name, np.abs(got[name] - ref.astype(int)).max())
    dec.close()


def _pillow_rgb(blob: bytes) -> np.ndarray:
    from PIL import ImageOps

    with Image.open(io.BytesIO(blob)) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


@needs_lib
def test_one_batch_is_two_gil_releases_and_shares_one_allocation(loop_kind) -> None:
    """The C decoder on the cpu backend's host buffers: colour JPEGs in one call (the GIL
    released twice a batch: the decode and its wait, or the compiled loop's two passes),
    every image a view of one allocation; grey, PNG and CMYK by Pillow (io.py's modes), a
    truncated JPEG and a zero-byte file errors naming the sample, a decompression bomb
    refused."""
    dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
    rgb = data.astronaut()[:40, :56]
    grey = _jpeg(data.camera()[:24, :32])
    png = io.BytesIO()
    Image.fromarray(rgb).save(png, "PNG")
    cmyk = io.BytesIO()
    Image.fromarray(rgb).convert("CMYK").save(cmyk, "JPEG")
    colour = [_jpeg(rgb), np.frombuffer(_oriented(rgb, 6), np.uint8), _jpeg(rgb[:20])]
    datas = colour + [grey, png.getvalue(), cmyk.getvalue(), _jpeg(data.chelsea())[:3000],
                      b""]
    names = ["a.jpg", "r.jpg", "h.jpg", "g.jpg", "p.png", "c.jpg", "t.jpg", "z.jpg"]
    before = LIB.releases
    got = dec.decode(datas, names.__getitem__)
    # one call for the four colour JPEGs (the truncated one parses, fails its status, and
    # goes to Pillow): the GIL released twice
    assert LIB.releases - before == 2
    assert got[0].shape == (40, 56, 3) and np.array_equal(got[0], _pillow_rgb(colour[0]))
    assert got[1].shape == (56, 40, 3) and np.array_equal(got[1], np.rot90(got[0], -1))
    assert got[2].shape == (20, 56, 3)
    assert got[0].base is got[1].base is got[2].base  # one allocation for the batch
    assert got[3].shape == (24, 32) and got[3].dtype == np.uint8  # grey by Pillow: 2-D
    assert np.array_equal(got[4], rgb) and got[5].shape == (40, 56, 3)
    for r in (6, 7):
        assert isinstance(got[r], ValueError) and names[r] in str(got[r]), got[r]
    assert (dec.on_gpu, dec.on_host) == (3, 5)
    before = LIB.releases
    again = dec.decode(colour * 4, str)
    assert LIB.releases - before == 2 and all(a.shape[2] == 3 for a in again)
    assert np.array_equal(again[4], got[1]) and np.array_equal(again[9], got[0])
    limit = mio.pixel_limit
    try:
        mio.pixel_limit = lambda: 1000
        bomb = dec.decode([_jpeg(rgb)], lambda r: "big.jpg")[0]
    finally:
        mio.pixel_limit = limit
    assert isinstance(bomb, ValueError) and "decompression bomb" in str(bomb) and \
        "big.jpg" in str(bomb)
    dec.close()


@needs_lib
def test_a_proc_fd_path_reused_while_its_code_stream_lives_is_the_older_file(tmp_path) -> None:
    """Why ``decode.NATIVE_FILES`` is off: nvImageCodec keys the files it opens by path, so
    ``/proc/self/fd/N`` parsed again for another file (descriptor N reused) while the first
    code stream lives gives the first file's stream; by the real path each is its own."""
    dec = _cpu_decoder(1)
    rgb = data.chelsea()[:48, :64]
    (tmp_path / "c.jpg").write_bytes(_jpeg(rgb))
    (tmp_path / "g.jpg").write_bytes(_jpeg(np.ascontiguousarray(rgb[..., 0])))
    alive = []
    for name in ("c.jpg", "g.jpg"):
        fd = os.open(tmp_path / name, os.O_RDONLY)
        try:
            alive.append((fd, dec.parse_file(f"/proc/self/fd/{fd}")))
        finally:
            os.close(fd)
    (fd0, colour), (fd1, grey) = alive
    assert colour.channels == 3
    if fd0 == fd1:  # the descriptor was reused: the grey file reads as the colour one
        assert grey.channels == 3
    by_path = [dec.parse_file(str(tmp_path / n)) for n in ("c.jpg", "g.jpg")]
    assert [p.channels for p in by_path] == [3, 1]
    dec.close()


@needs_lib
def test_readers_parse_samples_for_the_c_decoder(tmp_path, loop_kind) -> None:
    """``reader()``: the read-ahead's threads read and parse each sample (two colour JPEGs
    and a grey one in turn: each its own file); the decode thread gets code streams and
    decodes them in one call, equal to Pillow."""
    from millipyde.data import Paths

    dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
    rgb = data.chelsea()[:48, :64]
    (tmp_path / "c.jpg").write_bytes(_jpeg(rgb))
    (tmp_path / "g.jpg").write_bytes(_jpeg(rgb[..., 0]))
    (tmp_path / "j.jpg").write_bytes(b"junk")
    (tmp_path / "d.jpg").write_bytes(_jpeg(rgb[::-1]))
    names = ["c.jpg", "g.jpg", "j.jpg", "d.jpg", "gone.jpg"]
    src = Paths([tmp_path / n for n in names])
    read = dec.reader(src)
    got = [read(i) for i in range(4)]
    assert type(got[0]) is dmod.Coded and len(got[0]) == (tmp_path / "c.jpg").stat().st_size
    assert type(got[3]) is dmod.Coded
    assert got[1] == (tmp_path / "g.jpg").read_bytes() and got[2] == b"junk"
    with pytest.raises(OSError, match="gone.jpg"):
        read(4)
    before = LIB.releases
    out = dec.decode(got, names.__getitem__)
    assert LIB.releases - before == 2
    assert np.array_equal(out[0], _pillow_rgb(_jpeg(rgb))) and out[1].ndim == 2
    assert np.array_equal(out[3], _pillow_rgb(_jpeg(rgb[::-1])))
    assert isinstance(out[2], ValueError) and "j.jpg" in str(out[2])
    dec.close()


@needs_lib
@pytest.mark.parametrize("parse_in_readers,segments", [(False, False), (True, False),
                                                       (False, True)])
def test_a_loader_over_a_folder_decodes_as_pillow(tmp_path, monkeypatch, parse_in_readers,
                                                  segments, loop_kind) -> None:
    """The Loader (read-ahead, decode thread, refills) with the C decoder: the batches of a
    folder equal the Pillow decoder's, a corrupt file refilled, its code streams made in the
    decode thread or in the read-ahead's threads; with the lane calls timed by segment
    (``loader.SEGMENTS``) alike, the decoder's segments in the stats."""
    from millipyde.data import Folder
    from millipyde.data import loader as lmod
    from millipyde.data.loader import BadSamples, Loader
    from millipyde.data.sampler import EpochSampler

    monkeypatch.setattr(lmod, "PARSE_IN_READERS", parse_in_readers)
    monkeypatch.setattr(lmod, "SEGMENTS", segments)
    photos = [data.astronaut(), data.chelsea(), data.coffee(), data.rocket()]
    for i in range(13):
        p = photos[i % 4][i * 7:i * 7 + 40 + i, i * 5:i * 5 + 52]
        if i == 3:
            Image.fromarray(p).save(tmp_path / "03.png")
        else:
            (tmp_path / f"{i:02d}.jpg").write_bytes(_jpeg(p) if i != 5 else b"broken")
    src = Folder(tmp_path)
    plan = lambda b: np.arange(b * 6, b * 6 + 6) if b < 2 else None  # noqa: E731
    got = {}
    for name in ("pillow", "c"):
        dec = dmod.PillowDecoder(0, threads=1) if name == "pillow" else \
            dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
        bad = BadSamples()
        loader = Loader(src, EpochSampler(len(src)), plan, dec, 0, bad, threads=2)
        try:
            got[name] = [loader.get(b) for b in range(2)]
            assert loader.get(2) is None
        finally:
            loader.close()
        assert list(bad.names) == [str(tmp_path / "05.jpg")]
        if name == "c":  # the JPEGs and the refill (12.jpg) by nvImageCodec (one decoder
            # per decode lane); the PNG and the broken file by Pillow
            assert loader.lanes == lmod.DECODE_LANES
            assert loader.decoded() == (11, 2)
            st = loader.stats
            if not segments:
                assert not any(k.startswith("seg_") for k in st)
            elif dmod.CAPI_COMPILED:  # two GIL-free passes a batch, their ends stamped
                assert st["seg_regains"] == 2 * st["batches"]
                assert 0 <= st["seg_regain_s"] < 1.0
                for seg in ("take", "prep", "parse", "alloc", "decode", "views", "fallback"):
                    assert st[f"seg_{seg}_s"] > 0, seg
                # the decode pass's stages, stamped inside it, within its segment
                parts = [st[f"part_decode.{k}_s"] for k in ("setup", "submit", "wait", "end")]
                assert min(parts) >= 0 and 0 < sum(parts) <= st["seg_decode_s"]
            else:
                assert st["seg_decode_s"] > 0 and st["seg_regains"] == 0
    for a, b in zip(got["pillow"], got["c"], strict=True):
        assert list(a.samples) == list(b.samples)
        for x, y in zip(a.arrays, b.arrays, strict=True):
            assert np.array_equal(x, y)


@needs_lib
@pytest.mark.skipif(not ACTIVE.caps.nvidia_codecs, reason="the C API's device path decodes on "
                    "an NVIDIA GPU (the cuda backend)")
def test_gpu_decode_agrees_with_the_binding_in_one_allocation(loop_kind) -> None:
    """On a GPU: the C decoder's images are DeviceImages at aligned offsets of one
    allocation, and agree with the binding's (the same nvImageCodec decoders: within a few
    levels should the two calls split a batch between its backends differently); grey by
    Pillow in both."""
    if dmod.import_nvimgcodec() is None:
        pytest.skip("the binding is compared with")
    blobs = [_jpeg(p) for p in (data.astronaut(), data.chelsea(), data.coffee())]
    blobs += [_oriented(data.rocket(), 6), _jpeg(data.camera())]
    stream = ACTIVE.take_stream(0)
    try:
        with ACTIVE.on_device(0), ACTIVE.using_stream(stream):
            cdec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=2))
            bdec = dmod.NvImageCodecDecoder(0, dmod.PillowDecoder(0, threads=2))
            before = LIB.releases
            c = cdec.decode(blobs, str, stream)
            assert LIB.releases - before == 2
            b = bdec.decode(blobs, str, stream)
        stream.synchronize()
        assert all(type(x) is dmod.DeviceImage for x in c[:4])
        at = c[0].device_ptr
        for x in c[:4]:
            assert x.device_ptr == at and x.device_ptr % dmod.ALIGN == 0
            at += -(-x.size // dmod.ALIGN) * dmod.ALIGN
        assert c[3].shape == (data.rocket().shape[1], data.rocket().shape[0], 3)
        for x, y in zip(c, b, strict=True):
            hx = dmod.as_buffer(x).copy_to_host()
            hy = dmod.as_buffer(y).copy_to_host()
            assert hx.shape == hy.shape
            assert np.abs(hx.astype(int) - hy).max() <= 8
        cdec.close()
        bdec.close()
    finally:
        ACTIVE.give_stream(stream)


@needs_lib
def test_the_compiled_loop_gives_the_ctypes_loops_results_exactly(tmp_path,
                                                                  monkeypatch) -> None:
    """The compiled loop against the ctypes loop over every kind of sample, given as bytes,
    NumPy arrays (a strided one), bytearrays, memoryviews, code streams a reader thread made
    and read errors: the same arrays (colour JPEGs equal to Pillow's, EXIF orientations
    applied), the same errors naming the same samples, the same split between nvImageCodec
    and Pillow; samples that are all views of one buffer (a read-ahead run's: their
    addresses read from the array objects, ``decode._ARRAY_AT``) as their bytes."""
    from millipyde.data import Paths

    cases = _cases(4)
    names = list(cases)
    for n in names:
        (tmp_path / f"{n}.jpg").write_bytes(cases[n])
    src = Paths([tmp_path / f"{n}.jpg" for n in names])
    datas: list = []
    for i, n in enumerate(names):
        b = cases[n]
        datas.append([b, np.frombuffer(b, np.uint8), bytearray(b), memoryview(b)][i % 4])
    wide = np.zeros((len(cases["photo1"]), 2), np.uint8)
    wide[:, 0] = np.frombuffer(cases["photo1"], np.uint8)
    datas.append(wide[:, 0])  # not contiguous: copied for the call
    names.append("strided")
    datas.append(OSError("cannot read 'gone.jpg'"))
    names.append("gone")
    run = np.frombuffer(b"#" + b"".join(cases.values()), np.uint8)
    ends = np.cumsum([len(b) for b in cases.values()]) + 1
    views = [run[e - len(b):e] for e, b in zip(ends.tolist(), cases.values(), strict=True)]
    got = {}
    for compiled in (True, False):
        monkeypatch.setattr(dmod, "CAPI_COMPILED", compiled)
        dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
        read = dec.reader(src)
        # samples a reader thread parsed (code streams handed over) among the bytes
        mixed = [read(i) if i % 3 == 0 else d for i, d in enumerate(datas[:len(cases)])] + \
            datas[len(cases):]
        assert sum(type(d) is dmod.Coded for d in mixed) == 5
        got[compiled] = (dec.decode(datas, names.__getitem__),
                         dec.decode(mixed, names.__getitem__), dec.on_gpu, dec.on_host,
                         dec.decode(views, names.__getitem__))
        dec.close()
    (plain, mixed, on_gpu, on_host, viewed), ref = got[True], got[False]
    assert (on_gpu, on_host) == ref[2:4] == (2 * 15, 2 * 7)
    assert dmod._ARRAY_AT is not None  # CPython's layout: the views' fast path taken
    for out, other in ((plain, ref[0]), (mixed, ref[1]), (viewed, plain[:len(cases)]),
                       (ref[4], plain[:len(cases)])):
        for name, a, b in zip(names[:len(out)], out, other, strict=True):
            if isinstance(b, BaseException):
                assert type(a) is type(b) and str(a) == str(b), name
                continue
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), name
            if name in cases and name not in ("grey", "cmyk", "png"):
                assert np.array_equal(a, _pillow_rgb(cases[name])), name
    assert np.array_equal(plain[names.index("strided")], _pillow_rgb(cases["photo1"]))
    for name in ("truncated", "zero", "junk", "gone"):
        assert isinstance(plain[names.index(name)], (ValueError, OSError)), name


@needs_lib
def test_the_compiled_loop_calls_the_library_only_with_the_gil_released(monkeypatch) -> None:
    """No library call of the compiled loop goes through the GIL-holding ctypes functions
    (the ctypes loop makes three an image through them), its two passes are the batch's
    two releases, and a thread running Python runs during them: they run without the GIL."""
    import threading
    import time

    blobs = [_jpeg(data.chelsea()[:200, :280])] * 96
    calls = [0]

    def counted(fn):
        def call(*args):
            calls[0] += 1
            return fn(*args)
        return call

    for name in ("CodeStreamCreateFromHostMem", "CodeStreamGetImageInfo", "CodeStreamDestroy",
                 "ImageCreate", "FutureGetProcessingStatus", "FutureDestroy"):
        monkeypatch.setattr(LIB, name, counted(getattr(LIB, name)))
    dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
    mod = capi.loop()
    windows = []

    def timed(fn):
        def call(*args):
            t = time.perf_counter()
            try:
                return fn(*args)
            finally:
                windows.append((t, time.perf_counter()))
        return call

    for name in ("parse", "decode"):
        monkeypatch.setattr(mod, name, timed(getattr(mod, name)))
    beats: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            beats.append(time.perf_counter())

    switch = sys.getswitchinterval()
    for compiled in (False, True):
        monkeypatch.setattr(dmod, "CAPI_COMPILED", compiled)
        calls[0], before = 0, LIB.releases
        if compiled:
            sys.setswitchinterval(1e-3)
            spinner = threading.Thread(target=spin, daemon=True)
            spinner.start()
        try:
            out = dec.decode(blobs, str)
        finally:
            if compiled:
                stop.set()
                sys.setswitchinterval(switch)
        assert LIB.releases - before == 2
        assert len(out) == 96 and all(a.shape == (200, 280, 3) for a in out)
        if compiled:
            spinner.join(5)
            assert calls[0] == 0 and len(windows) == 2
            # the decode pass: ~50 ms of libjpeg-turbo alone, during which the spinning thread
            # runs (~40 ms on two cores shared with the library's thread); were the GIL held,
            # it would run only at the pass's ends (5-7 ms, switch interval 1 ms)
            t0, t1 = windows[-1]
            gaps = np.diff([t0] + [b for b in beats if t0 < b < t1] + [t1])
            running = gaps[gaps < 2e-4].sum()
            assert running > 0.015, (t1 - t0, running)
        else:
            assert calls[0] >= 3 * len(blobs) and not windows
    dec.close()


@needs_lib
def test_the_compiled_loop_holds_the_gil_a_fraction_of_the_ctypes_loops_time(
        monkeypatch) -> None:
    """The decoding thread's time outside the GIL-releasing calls (its Python and the calls
    that keep the GIL) a batch of 128 small JPEGs: the compiled loop's is under half the
    ctypes loop's (medians of batches in turn; ~4x less on the 2-core machine, where the
    ctypes loop spends 8-11 us an image)."""
    import statistics
    import time

    blobs = [_jpeg(data.coffee()[i:i + 24, i:i + 32]) for i in range(128)]
    dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
    held: dict = {True: [], False: []}
    for b in range(12):
        compiled = b % 2 == 0
        monkeypatch.setattr(dmod, "CAPI_COMPILED", compiled)
        free = LIB.free_s
        t = time.perf_counter()
        out = dec.decode(blobs, str)
        if b >= 2:
            held[compiled].append(time.perf_counter() - t - (LIB.free_s - free))
        assert len(out) == 128 and all(a.shape == (24, 32, 3) for a in out)
    dec.close()
    compiled, ctypes_loop = (statistics.median(held[k]) for k in (True, False))
    assert compiled < 0.5 * ctypes_loop, (compiled, ctypes_loop)


@needs_lib
def test_the_compiled_loop_is_cached_on_disk_and_releases_what_it_made(monkeypatch) -> None:
    """Numba's disk cache holds the compiled passes (a second process loads them, no
    compile); where the batch's allocation fails, every sample goes to Pillow and the
    decoder decodes the next batch."""
    from millipyde.source_cache import cache_dir

    mod = capi.loop()
    assert mod is not None
    for fn in ("parse", "decode", "release"):
        assert list((cache_dir() / "__pycache__").glob(f"{mod.__name__}.{fn}-*.nbi")), fn
    monkeypatch.setattr(dmod, "CAPI_COMPILED", True)
    dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
    blobs = [_jpeg(data.astronaut()[:40, :56]), _oriented(data.astronaut()[:40, :56], 8)]
    monkeypatch.setattr(dec, "_allocate", lambda nbytes: None)
    on_pillow = dec.decode(blobs, str)
    assert (dec.on_gpu, dec.on_host) == (0, 2)
    monkeypatch.undo()
    monkeypatch.setattr(dmod, "CAPI_COMPILED", True)
    again = dec.decode(blobs, str)
    assert (dec.on_gpu, dec.on_host) == (2, 2)
    for a, b, blob in zip(on_pillow, again, blobs, strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, _pillow_rgb(blob))
    dec.close()
    # one compile a function: the decoder calls them with the types they were compiled for
    assert [len(getattr(mod, f).signatures) for f in ("parse", "decode", "release")] == \
        [1, 1, 1]


_EXIT = """
import io, sys
import numpy as np
from PIL import Image
from millipyde.data import decode as dmod
out = io.BytesIO()
Image.fromarray(np.full((16, 24, 3), 90, np.uint8)).save(out, "JPEG")
dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
keep = dec.decode([out.getvalue()] * 3, str)
if sys.argv[1] == "closed":
    dec.close()
print("decoded", keep[0].shape)
"""


@needs_lib
@pytest.mark.parametrize("how", ["closed", "left"])
def test_the_interpreter_exits_cleanly_with_a_decoder_closed_or_left(how) -> None:
    """A decoder closed (images, then the decoder) or left alive to the interpreter's exit
    (the instance outlives both) ends the process with status 0."""
    env = {**os.environ, "MILLIPYDE_BACKEND": "cpu"}
    got = subprocess.run([sys.executable, "-c", textwrap.dedent(_EXIT), how], env=env,
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "decoded (16, 24, 3)" in got.stdout


def test_the_interface_switch_is_checked(monkeypatch) -> None:
    monkeypatch.delenv("MILLIPYDE_NVIMGCODEC_API", raising=False)
    assert config.nvimgcodec_api() == "c"
    monkeypatch.setenv("MILLIPYDE_NVIMGCODEC_API", "Python")
    assert config.nvimgcodec_api() == "python"
    monkeypatch.setenv("MILLIPYDE_NVIMGCODEC_API", "C")
    assert config.nvimgcodec_api() == "c"
    monkeypatch.setattr(dmod, "NVIMGCODEC_API", None)
    assert dmod.nvimgcodec_api() == "c"
    monkeypatch.setenv("MILLIPYDE_NVIMGCODEC_API", "rust")
    with pytest.raises(ValueError, match="MILLIPYDE_NVIMGCODEC_API"):
        config.nvimgcodec_api()
    monkeypatch.setattr(dmod, "NVIMGCODEC_API", "cython")
    with pytest.raises(ValueError, match="NVIMGCODEC_API"):
        dmod.nvimgcodec_api()
    monkeypatch.setattr(dmod, "NVIMGCODEC_API", "python")
    assert dmod.nvimgcodec_api() == "python"


def test_a_batch_image_on_the_device_is_a_view_of_its_allocation() -> None:
    """What the C decoder hands the batch engine on a GPU, built over a host stand-in for
    the allocation: a DeviceImage whose image keeps the allocation and describes the view."""
    whole = np.zeros(4 << 20, np.uint8)
    ptr = whole.ctypes.data + 3 * dmod.ALIGN
    img = dmod.DeviceImage(dmod._Part(whole, ptr, (5, 7, 3)), (5, 7, 3), ptr, None, None)
    assert (img.shape, img.size, img.ndim, img.dtype, img.device_ptr) == \
        ((5, 7, 3), 105, 3, np.uint8, ptr)
    assert img.image.whole is whole
    assert img.image.__cuda_array_interface__ == {"data": (ptr, False), "shape": (5, 7, 3),
                                                   "typestr": "|u1", "strides": None,
                                                   "version": 3}


def _in_one_allocation(shapes: list, whole: np.ndarray) -> list:
    """DeviceImages at aligned offsets of ``whole`` (a host stand-in for a batch's
    allocation), as the C decoder lays a batch out."""
    out, at = [], 0
    base = whole.ctypes.data
    for shape in shapes:
        out.append(dmod.DeviceImage(dmod._Part(whole, base + at, shape), shape, base + at))
        at += -(-int(np.prod(shape)) // dmod.ALIGN) * dmod.ALIGN
    return out


@needs_lib
def test_the_c_decoders_layout_is_one_allocations(tmp_path, monkeypatch) -> None:
    """A batch the C decoder decodes into one allocation carries its layout
    (``Decoded.layout``: the allocation, offsets, shapes), what ``one_allocation`` finds
    over its images, with regions or without; a batch with a sample left to Pillow none;
    through the Loader ``DecodedBatch.layout``, dropped where a row was refilled. (Device
    images over host memory: the CPU decoder with its views made as on a GPU.)"""
    from millipyde.data import Folder
    from millipyde.data.loader import BadSamples, Loader
    from millipyde.data.sampler import EpochSampler
    from millipyde.training.recipes import operations
    from millipyde.training.region_plan import plan_of

    photo = data.astronaut()
    blobs = [_jpeg(photo[i * 9:i * 9 + 40 + i, i * 5:i * 5 + 52 - i]) for i in range(6)]

    def made() -> dmod.NvImageCodecCDecoder:
        if ACTIVE.caps.nvidia_codecs:  # (a GPU: the device decoder itself)
            return dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1))
        dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
        dec.host = False  # DeviceImage views of the (host) allocation
        return dec

    dec = made()
    boxes = lambda rows, hw: np.stack([0 * rows, 0 * rows, hw[:, 0] // 2, hw[:, 1]], 1)  # noqa: E731
    for kw in ({}, {"boxes": boxes, "regions": np.full((6, 4), -1, np.int64)}):
        got = dec.decode(blobs, lambda r: f"#{r}", **kw)
        # the rows' images made where read, each once, at its place in the layout
        assert type(got) is dmod.LazyImages and got._rows == [None] * 6
        last = got[-1]
        assert got._rows[:5] == [None] * 5 and got[5] is last and got[1:3] == [got[1], got[2]]
        assert all(type(a) is dmod.DeviceImage for a in got)
        assert [a.device_ptr - got._base for a in got] == got.layout[1].tolist()
        assert [a.shape for a in got] == [tuple(s) for s in got.layout[2].tolist()]
        with pytest.raises(IndexError, match="row 6 of a batch of 6"):
            got[6]
        slow = dmod.one_allocation(list(got))
        lay = got.layout
        assert lay is not None and lay[0] is slow[0]
        assert lay[1].tolist() == slow[1].tolist() and lay[2].tolist() == slow[2].tolist()
        assert dmod.one_allocation(got, lay) is lay
    assert dec.decode(blobs[:2] + [b"junk"], lambda r: f"#{r}").layout is None
    dec.close()
    for i, b in enumerate(blobs + [b"broken"] + blobs):
        (tmp_path / f"{i:02d}.jpg").write_bytes(b)
    src = Folder(tmp_path)
    plan = lambda b: np.arange(b * 6, b * 6 + 6) if b < 2 else None  # noqa: E731
    loader = Loader(src, EpochSampler(len(src), shuffle=False), plan, made(), 0, BadSamples(),
                    threads=2, lanes=1, region=plan_of(operations("imagenet"), 0))
    try:
        first, second = loader.get(0), loader.get(1)
    finally:
        loader.close()
    assert first.layout is not None and first.layout[2].shape == (6, 3)
    assert second.layout is None  # 06.jpg is broken: refilled
    # the pixels handed on, counted from the layout and from the arrays alike
    assert loader.stats["px_regions"] == sum(a.shape[0] * a.shape[1] for db in (first, second)
                                             for a in db.arrays)
    assert first.regions is not None and (first.regions[:, 2:4] > 0).all()


def test_a_batchs_kinds_from_its_layout_are_those_of_its_images() -> None:
    """``batch_stream.kinds_of``: the kinds a batch's rows record by (whole shape, dtype),
    each one's first row and each row's kind, read from the C decoder's layout as from the
    images one by one; with regions, by the whole samples' sizes."""
    from millipyde.data.loader import DecodedBatch
    from millipyde.training.batch_stream import kinds_of

    whole = np.zeros(1 << 20, np.uint8)
    shapes = [(30, 40, 3), (5, 7, 3), (30, 40, 3), (9, 7, 3), (5, 7, 3), (6, 6, 3)]
    imgs = _in_one_allocation(shapes, whole)
    lay = dmod.one_allocation(imgs)
    regions = np.array([[0, 0, 50, 60], [2, 0, 9, 7], [0, 0, 30, 40], [0, 0, 9, 7],
                        [0, 1, 50, 60], [0, 0, 6, 6]], np.int64)
    for reg in (None, regions):
        made = [kinds_of(DecodedBatch(np.arange(6), np.arange(6), imgs, None, None, None, reg,
                                      layout)) for layout in (None, lay)]
        (keys, firsts, inv), (keys2, firsts2, inv2) = made
        assert keys == keys2 and firsts == firsts2 and inv.tolist() == inv2.tolist()
        if reg is None:
            assert keys == [((30, 40, 3), "|u1"), ((5, 7, 3), "|u1"), ((9, 7, 3), "|u1"),
                            ((6, 6, 3), "|u1")]
            assert firsts == [0, 1, 3, 5] and inv.tolist() == [0, 1, 0, 2, 1, 3]
        else:
            assert [k[0] for k in keys] == [(50, 60, 3), (9, 7, 3), (30, 40, 3), (6, 6, 3)]
            assert firsts == [0, 1, 2, 5] and inv.tolist() == [0, 1, 2, 1, 0, 3]


def test_a_batch_in_one_allocation_is_its_arena_laid_out_as_packed() -> None:
    """``one_allocation`` finds a batch's allocation and each image's offset; an arena
    recorder over that layout has the packed recorder's sizes and input kinds, the
    allocation's offsets and size; an image of another allocation (a refill, Pillow's) or
    none: packed as before."""
    from types import SimpleNamespace

    from millipyde.training.batch_arena import ArenaRecorder

    whole = np.zeros(1 << 20, np.uint8)
    shapes = [(375, 500, 3), (5, 7, 3), (500, 375, 3), (5, 7, 3)]
    imgs = _in_one_allocation(shapes, whole)
    got = dmod.one_allocation(imgs)
    assert got is not None and got[0] is whole
    assert got[1].tolist() == [0, 562688, 562944, 1125632]  # 256-byte aligned
    assert got[2].tolist() == [list(s) for s in shapes]
    state = SimpleNamespace(inputs=imgs, seed=0)
    laid = ArenaRecorder(state, [], (got[2], "|u1", got[1], whole.size))
    packed = ArenaRecorder(state, [])
    assert laid.hw.tolist() == packed.hw.tolist() == [list(s[:2]) for s in shapes]
    assert laid.kinds == packed.kinds == [(3, "|u1")]
    assert laid.kind.tolist() == packed.kind.tolist() == [0, 0, 0, 0]
    assert laid.offset.tolist() == got[1].tolist() and laid.arena_size == {"|u1": 1 << 20}
    assert packed.offset.tolist() == [0, 562500, 562605, 1125105]
    other = _in_one_allocation([(5, 7, 3)], np.zeros(4096, np.uint8))
    assert dmod.one_allocation(imgs[:2] + other) is None
    assert dmod.one_allocation(imgs[:2] + [np.zeros((5, 7, 3), np.uint8)]) is None
    assert dmod.one_allocation([]) is None


@needs_lib
@pytest.mark.skipif(not ACTIVE.caps.nvidia_codecs, reason="the C decoder's device path")
def test_folder_batches_with_the_arena_in_place_equal_packed_ones(tmp_path,
                                                                   monkeypatch) -> None:
    """On a GPU: a folder's ImageNet-recipe batches through the C decoder, whose batches'
    allocations are their arenas, equal the same batches packed into a new arena, bit for
    bit, labels too; a corrupt file (refilled: packed) in the folder changes nothing."""
    import millipyde as mp
    from millipyde.training import batch_stream
    from millipyde.training.recipes import operations

    _photo_folder(tmp_path)
    (tmp_path / "c1" / "bad.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    monkeypatch.setattr(dmod, "NVIMGCODEC_API", "c")
    got = {}
    for in_place in (True, False):
        monkeypatch.setattr(batch_stream, "ARENA_IN_PLACE", in_place)
        gen = mp.Generator(str(tmp_path), operations("imagenet"), shuffle=True, seed=4,
                           decoder="nvimgcodec")
        with pytest.warns(UserWarning, match="bad.jpg"), \
                gen.batches(16, with_labels=True) as bs:
            got[in_place] = [(np.asarray(x).copy(), np.asarray(y).copy())
                             for x, y in (next(bs) for _ in range(4))]
        gen.close()
    for (x1, y1), (x2, y2) in zip(got[True], got[False], strict=True):
        assert np.array_equal(y1, y2) and np.array_equal(x1, x2)


def test_without_the_wheel_the_library_is_none(monkeypatch) -> None:
    monkeypatch.setattr(capi, "_api", [])
    monkeypatch.setattr(capi, "package_dir", lambda: None)
    assert capi.api() is None and capi.instance() is None
    with pytest.raises(ImportError, match="nvimgcodec"):
        dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)


def test_structure_sizes_are_the_headers_on_x86_64() -> None:
    """The sizes the C compiler gave for the wheel's header on x86-64 Linux (the test above
    recompiles it where the wheel and a compiler are there)."""
    if sizeof(ctypes.c_void_p) != 8:
        pytest.skip("a 64-bit layout")
    assert {n: sizeof(c) for n, (c, _) in capi.STRUCTS.items()} == {
        "nvimgcodecProperties_t": 32, "nvimgcodecOrientation_t": 40,
        "nvimgcodecImagePlaneInfo_t": 56, "nvimgcodecOutOfBoundsSample_t": 8,
        "nvimgcodecRegion_t": 112, "nvimgcodecImageInfo_t": 2160,
        "nvimgcodecCodeStreamView_t": 152, "nvimgcodecCodeStreamInfo_t": 304,
        "nvimgcodecBackendParams_t": 32, "nvimgcodecBackend_t": 64,
        "nvimgcodecExecutionParams_t": 80, "nvimgcodecDecodeParams_t": 32,
        "nvimgcodecInstanceCreateInfo_t": 64}


def _host(x) -> np.ndarray:
    """A decoded image on the host."""
    if isinstance(x, np.ndarray):
        return x
    return dmod.as_buffer(x).copy_to_host()


def _photo_folder(root) -> None:
    """Two class folders of 24 JPEGs each, cut from four photographs at shifting offsets
    (several sizes)."""
    photos = [data.astronaut(), data.chelsea(), data.coffee(), data.rocket()]
    for c in range(2):
        (root / f"c{c}").mkdir()
        for i in range(24):
            a = photos[(i + c) % 4][i % 7:, (3 * i) % 11:]
            (root / f"c{c}" / f"{i}.jpg").write_bytes(_jpeg(np.ascontiguousarray(a)))


def _region_boxes(hw: np.ndarray, align: int, whole: list[bool]) -> np.ndarray:
    """Windows at the corners, the edges and inside of each image (sample ``j`` takes kind
    ``j % 4``), the whole image where ``whole[j]``, aligned as ``data.region.aligned`` aligns
    them."""
    from millipyde.data.region import aligned

    win = []
    for j, (h, w) in enumerate(hw.tolist()):
        hh, ww = max(1, h // 3), max(1, w // 2)
        win.append((0, 0, h, w) if whole[j] else
                   [(0, 0, hh, ww), (h - hh, w - ww, hh, ww), (h // 3, 5, hh, w - 5),
                    (7, w // 4 + 3, h - 7, ww)][j % 4])
    return aligned(np.array(win, np.int64), hw, align)


@needs_lib
@pytest.mark.parametrize("align", [1, 16])
def test_region_decode_equals_the_whole_decodes_rectangle(align) -> None:
    """The C decoder's region decode (sub code streams with a region, compiled loop): each
    region's pixels against the same decoder's whole decode cut to the rectangle, for
    windows at the corners, the edges and inside, unaligned and aligned to 16 (JPEG's
    MCU), 4:2:0, 4:4:4 and progressive JPEGs. Exact on the CPU (libjpeg-turbo); on a GPU
    the largest difference is printed (``-s``) and asserted for the aligned regions the
    loader decodes. Grey, CMYK, PNG and EXIF-oriented JPEGs are decoded whole (their row of
    ``regions`` left at -1) and equal the whole decode."""
    assert capi.loop() is not None, "region decoding needs the compiled loop"
    cases = _cases(step=3)
    names = [n for n in cases if n not in ("zero", "junk", "truncated")]
    blobs = [cases[n] for n in names]
    names.append("whole")  # a colour JPEG whose window is the whole image: decoded whole
    blobs.append(cases["photo0"])
    gpu = bool(ACTIVE.caps.nvidia_codecs)
    stream = ACTIVE.take_stream(0) if gpu else None
    try:
        with ACTIVE.on_device(0), (ACTIVE.using_stream(stream) if gpu else
                                   contextlib.nullcontext()):
            dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=2))
            whole = [_host(x) for x in dec.decode(blobs, str, stream)]
            hw = np.array([x.shape[:2] for x in whole], np.int64)
            box = _region_boxes(hw, align, [n == "whole" for n in names])
            regions = np.full((len(blobs), 4), -1, np.int64)
            seen = []

            def boxes(rows, dims):
                seen.append(rows.copy())
                assert np.array_equal(dims, hw[rows])
                return box[rows]

            part = dec.decode(blobs, str, stream, boxes=boxes, regions=regions)
            if gpu:
                stream.synchronize()
            part = [_host(x) for x in part]
            dec.close()
    finally:
        if gpu:
            ACTIVE.give_stream(stream)
    assert len(seen) == 1
    worst = {}
    for j, name in enumerate(names):
        t, lf, b, r = box[j].tolist()
        if regions[j, 0] < 0:  # decoded whole: its box is, or its kind has no region
            assert name == "whole" or name in ("grey", "cmyk", "png") or \
                (name.startswith("exif") and name != "exif1"), name
            assert np.array_equal(part[j], whole[j]), name
            continue
        assert regions[j].tolist() == [t, lf, *hw[j]], name
        ref = whole[j][t:b, lf:r]
        assert part[j].shape == ref.shape, name
        worst[name] = int(np.abs(part[j].astype(int) - ref).max())
    assert {n for n in worst} >= {"photo0", "photo1", "444", "progressive", "exif1"}
    assert regions[names.index("whole"), 0] < 0
    print(f"\nregion decode, align {align}, {'GPU' if gpu else 'CPU'}: largest difference "
          f"from the whole decode's rectangle per sample: {worst}")
    if not gpu or align > 1:
        assert max(worst.values()) == 0, worst


@needs_lib
@pytest.mark.skipif(not ACTIVE.caps.nvidia_codecs, reason="the C decoder's device path")
def test_folder_batches_with_regions_equal_whole_ones(tmp_path, monkeypatch) -> None:
    """On a GPU: a folder's ImageNet-recipe batches (random_resized_crop first) through the
    C decoder with region decoding on equal those with it off, bit for bit where the region
    decode gives the whole decode's pixels (the largest difference printed with ``-s``), and
    the regions hold fewer pixels than their samples."""
    import millipyde as mp
    from millipyde.training import region_plan
    from millipyde.training.recipes import operations

    _photo_folder(tmp_path)
    (tmp_path / "c0" / "turned.jpg").write_bytes(_oriented(data.rocket(), 6))
    (tmp_path / "c1" / "grey.jpg").write_bytes(_jpeg(data.camera()))
    monkeypatch.setattr(dmod, "NVIMGCODEC_API", "c")
    got, stats = {}, {}
    for on in (False, True):
        monkeypatch.setattr(region_plan, "ENABLED", on)
        gen = mp.Generator(str(tmp_path), operations("imagenet"), shuffle=True, seed=4,
                           decoder="nvimgcodec", decode_process=False)
        with gen.batches(16) as bs:
            got[on] = [np.asarray(next(bs)).copy() for _ in range(3)]
            stats[on] = dict(bs._loader.stats)
        gen.close()
    worst = max(float(np.abs(x - y).max()) for x, y in zip(got[False], got[True], strict=True))
    print(f"\nregions on against off: largest difference {worst}; pixels of the regions "
          f"{stats[True]['px_regions']} of {stats[True]['px_whole']}")
    assert 0 < stats[True]["px_regions"] < stats[True]["px_whole"]
    assert worst == 0.0


@needs_lib
def test_regions_made_in_the_decode_pass_equal_a_pass_of_their_own(monkeypatch) -> None:
    """Region decoding on the host (libjpeg-turbo): the regions' code streams made in the
    decode pass (``decode.REGIONS_IN_DECODE``, the allocation laid out for the boxes first)
    give the arrays and region rows of the three-pass loop, bit for bit, each region the
    whole decode cut to its box, over 4:2:0 / 4:4:4 / progressive JPEGs, an EXIF-rotated
    one (decoded whole), grey, PNG and broken samples, boxes at the corners, edges and
    inside; two GIL releases a batch against four (the three passes and the destroy of the
    regions' whole code streams, which the one pass does itself). A box the library refuses: the
    three-pass loop decodes the sample whole, the one pass leaves it to Pillow (the same
    pixels)."""
    from millipyde.data import region as rmod

    photo = data.astronaut()
    blobs = [_jpeg(photo[:100, :120]), _jpeg(photo[50:163, 20:97], subsampling=0),
             _jpeg(photo[200:290, 100:240], progressive=True), _oriented(photo[:40, :64], 6),
             _jpeg(photo[:64, :64, 0]), b"broken", _jpeg(photo[300:380, 300:390]),
             _jpeg(photo[10:90, 10:70])]
    png = io.BytesIO()
    Image.fromarray(photo[:30, :40]).save(png, "PNG")
    blobs.append(png.getvalue())
    wins = {0: [0, 0, 20, 30], 1: [90, 60, 23, 17], 2: [33, 47, 40, 60], 6: [0, 40, 80, 50],
            7: [5, 5, 40, 200]}

    def boxes(rows, hw):
        hw = np.asarray(hw, np.int64)
        win = np.array([wins.get(int(r), [0, 0, 1 << 20, 1 << 20]) for r in rows], np.int64)
        out = rmod.aligned(win, hw, 16)
        out[rows == 6] = [48, 48, 16, 16]  # refused (empty): decoded whole
        return out

    dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
    whole = dec.decode(blobs, lambda r: f"#{r}")
    got, regs, releases = {}, {}, {}
    destroys: list = []  # the parents destroyed in a pass of their own, per call
    destroy_many = dec._dec.destroy_many
    dec._dec.destroy_many = lambda h: (destroys.append(int(np.count_nonzero(h))),
                                       destroy_many(h))
    for one in (True, False):
        monkeypatch.setattr(dmod, "REGIONS_IN_DECODE", one)
        regs[one] = np.full((len(blobs), 4), -1, np.int64)
        before = LIB.releases
        got[one] = dec.decode(blobs, lambda r: f"#{r}", None, boxes=boxes, regions=regs[one])
        releases[one] = LIB.releases - before + len(destroys)
        destroys.clear()
    dec.close()
    # (the one pass destroys the regions' whole code streams itself: no further release)
    assert releases == {True: 2, False: 4}
    assert regs[True].tolist() == regs[False].tolist()
    assert [r for r in range(len(blobs)) if regs[True][r, 0] >= 0] == [0, 1, 2, 7]
    for r, (a, b) in enumerate(zip(got[True], got[False], strict=True)):
        if isinstance(a, BaseException):
            assert isinstance(b, ValueError) and str(a) == str(b) and r == 5
            continue
        assert np.array_equal(a, b), r
        top, left = regs[True][r, :2] if regs[True][r, 0] >= 0 else (0, 0)
        h, w = a.shape[:2]
        assert np.array_equal(a, whole[r][top:top + h, left:left + w]), r
    assert got[True][6].shape == whole[6].shape  # refused: whole


@needs_lib
def test_compiled_boxes_laid_out_in_the_parse_pass_equal_pythons(monkeypatch) -> None:
    """A plan whose boxes are compiled (``random_resized_crop``: ``RowBoxes.parse_decode``)
    lays its boxes out in the parse pass: the same regions and pixels as the same boxes
    drawn in Python between the passes, over an EXIF-rotated (whole), a grey (Pillow), a
    broken and colour JPEGs; two GIL releases a batch, one where the batch fits the
    allocation made before its parse (``decode.ONE_PASS``: from the decoder's second batch)."""
    import millipyde as mp
    from millipyde.training.region_plan import plan_of

    monkeypatch.setattr(dmod, "REGIONS_IN_DECODE", True)
    monkeypatch.setattr(dmod, "ONE_PASS", True)
    photo = data.astronaut()
    blobs = [_jpeg(photo[i * 30:i * 30 + 90 + 7 * i, i * 20:i * 20 + 150 - 9 * i])
             for i in range(6)]
    blobs[2:2] = [_oriented(photo[:40, :64], 6), _jpeg(photo[:64, :64, 0]), b"broken"]
    plan = plan_of([mp.Operation("random_resized_crop", 8, 8, scale=(0.05, 0.3))], 5)
    ks = np.arange(len(blobs), dtype=np.int64) * 7 + 3
    rows = plan.rows(ks)
    laid: list = []  # the compiled pass's calls: the parse alone (no allocation) or all
    parse_decode = rows.parse_decode
    rows.parse_decode = lambda *a: (laid.append("one" if a[6] else "parse"),
                                    parse_decode(*a))[1]
    dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0, threads=1), host=True)
    got, regs, releases = {}, {}, {}
    try:
        for name, boxes in (("compiled", rows), ("python", lambda r, hw: rows(r, hw)),
                            ("one pass", rows), ("not fitting", rows)):
            if name == "not fitting":
                dec._fits = 256  # the allocation made before the parse too small
            regs[name] = np.full((len(blobs), 4), -1, np.int64)
            before = LIB.releases
            got[name] = dec.decode(blobs, lambda r: f"#{r}", None, boxes=boxes,
                                   regions=regs[name])
            releases[name] = LIB.releases - before
    finally:
        dec.close()
    # the first batch of a decoder in two passes; a later one, fitting the allocation made
    # before its parse (the last batches'), parsed and decoded in one
    # (one not fitting it: parsed in the one pass, decoded in a second, as after a parse)
    assert releases == {"compiled": 2, "python": 2, "one pass": 1, "not fitting": 2}
    assert laid == ["parse", "one", "one"]
    for name in ("python", "one pass", "not fitting"):
        assert regs["compiled"].tolist() == regs[name].tolist()
        for a, b in zip(got[name], got["compiled"], strict=True):
            assert type(a) is type(b)
            assert isinstance(a, BaseException) or np.array_equal(a, b)
    assert (regs["compiled"][[0, 1, 5, 6, 7, 8], 0] >= 0).all()
    assert (regs["compiled"][[2, 3, 4], 0] == -1).all()
    assert [r for r, a in enumerate(got["compiled"]) if isinstance(a, BaseException)] == [4]
    assert str(got["compiled"][4]) == str(got["python"][4])


def test_the_compiled_passes_stamp_their_end_on_the_monotonic_clock() -> None:
    """Each compiled pass writes CLOCK_MONOTONIC (Python's ``time.monotonic_ns``) into its
    ``clock`` as its last step (the wait for the GIL after it is measured from there);
    nothing where the clock's address is 0."""
    mod = capi.loop()
    assert mod is not None and capi.CLOCK_GETTIME
    z64 = np.zeros(0, np.int64)
    dims = np.zeros((0, 5), np.int64)
    state = np.zeros(0, np.int32)
    words = np.zeros(1, np.int64)
    lay = capi._layout[0]
    fns = np.zeros(mod.FUNCTIONS, np.int64)
    passes = [
        lambda c: mod.parse(fns, lay, 0, words, z64, z64, z64, state, dims, z64, 0, c),
        lambda c: mod.decode(fns, lay, 0, 0, words, 0, z64, words, np.zeros(1, np.uint32), 0,
                             0, z64, state, dims, z64, np.zeros(0, np.uint8), c),
        lambda c: mod.regions(0, 0, words, 0, 0, z64, state, dims, np.zeros((0, 4), np.int64),
                              np.zeros((0, 4), np.int64), z64, c),
        lambda c: mod.regions_decode(fns, lay, 0, 0, words, 0, z64, words,
                                     np.zeros(1, np.uint32), 0, 0, z64, state, dims, z64,
                                     np.zeros(0, np.uint8), 0, words, 0, 0,
                                     np.zeros((0, 4), np.int64), np.zeros((0, 4), np.int64),
                                     z64, z64, c)]
    for run in passes:
        clock = np.array([capi.CLOCK_GETTIME, 0, 0], np.int64)
        before = time.monotonic_ns()
        run(clock)
        after = time.monotonic_ns()
        assert before <= int(clock[1]) * 1_000_000_000 + int(clock[2]) <= after
        off = np.zeros(3, np.int64)
        run(off)
        assert not off.any()


def test_the_compiled_region_pass_makes_a_code_stream_per_box() -> None:
    """``capi_loop.regions`` with stand-ins for the library's two functions (ctypes
    callbacks at their addresses): a region code stream for each taken sample without an
    EXIF orientation whose box is not its whole image, the box written into the view's
    region (start, end: rows then columns), dims and regions set, the parse pass's code
    stream kept in ``parents`` (a given one not), a refusal leaving the sample whole;
    ``destroy`` destroys the parents."""
    mod = capi.loop()
    assert mod is not None
    calls, destroyed = [], []

    def sub(handle, out, view):
        reg = capi.CodeStreamView.from_address(view).region
        calls.append((handle, reg.ndim, tuple(reg.start[:2]), tuple(reg.end[:2])))
        if handle == 13:  # refused
            return capi.STATUS_INVALID_PARAMETER
        ctypes.c_int64.from_address(out).value = 1000 + handle
        return capi.STATUS_SUCCESS

    def gone(handle):
        destroyed.append(handle)
        return capi.STATUS_SUCCESS

    fsub = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)(sub)
    fgone = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64)(gone)
    at = ctypes.cast(fsub, ctypes.c_void_p).value, ctypes.cast(fgone, ctypes.c_void_p).value
    v = capi.make(capi.CodeStreamView)
    v.region = capi.make(capi.Region, ndim=2)
    view = capi._words_of(v)
    off = capi.CodeStreamView.region.offset
    T, G, S = mod.ST_TAKEN, mod.ST_GIVEN, mod.ST_SKIP
    handle = np.array([11, 12, 14, 15, 0, 13], np.int64)
    state = np.array([T, G, T, T, S, T], np.int32)
    dims = np.array([[40, 60, 0, 0, 0], [50, 30, 0, 0, 0], [40, 60, 90, 0, 0],
                     [40, 60, 0, 0, 0], [0, 0, 0, 0, 0], [40, 60, 0, 0, 0]], np.int64)
    box = np.array([[16, 0, 40, 32], [0, 16, 48, 30], [0, 0, 16, 16], [0, 0, 40, 60],
                    [0, 0, 0, 0], [0, 0, 16, 16]], np.int64)
    region = np.full((6, 4), -1, np.int64)
    parents = np.full(6, 7, np.int64)
    made = mod.regions(at[0], at[1], view, off + capi.Region.start.offset,
                       off + capi.Region.end.offset, handle, state, dims, box, region, parents,
                       np.zeros(3, np.int64))
    assert made == 2
    assert calls == [(11, 2, (16, 0), (40, 32)), (12, 2, (0, 16), (48, 30)),
                     (13, 2, (0, 0), (16, 16))]
    assert handle.tolist() == [1011, 1012, 14, 15, 0, 13]
    assert state.tolist() == [T, T, T, T, S, T]
    assert dims[:2, :2].tolist() == [[24, 32], [48, 14]]
    assert dims[2:, :2].tolist() == [[40, 60], [40, 60], [0, 0], [40, 60]]
    assert region.tolist() == [[16, 0, 40, 60], [0, 16, 50, 30]] + [[-1] * 4] * 4
    assert parents.tolist() == [11, 0, 0, 0, 0, 0]
    mod.destroy(at[1], parents)
    assert destroyed == [11] and not parents.any()


def test_a_batchs_allocation_takes_one_of_a_few_sizes_an_octave() -> None:
    """Batches whose images vary in size (regions, a real dataset's samples) ask the pool for
    one of eight sizes an octave, each a whole number of MiB, at most 1/8 above the bytes."""
    sizes = np.random.default_rng(0).integers(60_000_000, 76_000_000, 500)
    got = [capi.pool_bytes(int(n)) for n in sizes]
    assert all(n <= g <= n + n // 8 + capi.POOL_STEP for n, g in zip(sizes, got, strict=True))
    assert all(g % capi.POOL_STEP == 0 for g in got)
    assert len(set(got)) <= 4  # 60-64 MiB in steps of 4 MiB, 64-76 MB in steps of 8
    assert capi.pool_bytes(1) == capi.POOL_STEP and capi.pool_bytes(5 << 20) == 5 << 20
