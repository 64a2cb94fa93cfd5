"""Tests for millipyde/io.py: image_from_path, images_from_path and the safe-loading rules."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile
from skimage import data

import millipyde as mp
from millipyde import io as mio

H, W = 32, 40


@pytest.fixture(scope="module")
def rgb() -> np.ndarray:
    return np.ascontiguousarray(data.astronaut()[100 : 100 + H, 180 : 180 + W])


@pytest.fixture(scope="module")
def rgb2() -> np.ndarray:
    return np.ascontiguousarray(data.chelsea()[60 : 60 + H, 150 : 150 + W])


@pytest.fixture(scope="module")
def rgba(rgb: np.ndarray) -> np.ndarray:
    alpha = np.arange(H * W, dtype=np.uint8).reshape(H, W, 1)
    return np.ascontiguousarray(np.concatenate([rgb, alpha], axis=2))


@pytest.fixture(scope="module")
def grey(rgb2: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rgb2[..., 1])


def _save(arr: np.ndarray, path: Path, **kw) -> Path:
    Image.fromarray(arr).save(path, **kw)
    return path


def _truncate(path: Path) -> Path:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    return path


def _names(excinfo: pytest.ExceptionInfo, path: Path) -> bool:
    return str(path) in str(excinfo.value)


def _host(img) -> np.ndarray:
    return np.asarray(img)


# --------------------------------------------------------------------------- single files


@pytest.mark.parametrize("ext", ["png", "tiff", "bmp"])
def test_rgb_lossless_round_trip(tmp_path, rgb, ext):
    p = _save(rgb, tmp_path / f"a.{ext}")
    out = _host(mp.image_from_path(p))
    assert out.shape == (H, W, 3)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, rgb)


@pytest.mark.parametrize("ext", ["png", "tiff"])
def test_rgba_round_trip(tmp_path, rgba, ext):
    p = _save(rgba, tmp_path / f"a.{ext}")
    out = _host(mp.image_from_path(p))
    assert out.shape == (H, W, 4)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, rgba)


@pytest.mark.parametrize("ext", ["png", "tiff", "bmp"])
def test_grey_round_trip_is_2d(tmp_path, grey, ext):
    p = _save(grey, tmp_path / f"g.{ext}")
    out = _host(mp.image_from_path(p))
    assert out.shape == (H, W)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, grey)


def test_jpeg_loads_close(tmp_path, rgb):
    p = _save(rgb, tmp_path / "a.jpg", quality=95)
    out = _host(mp.image_from_path(p))
    assert out.shape == (H, W, 3)
    assert out.dtype == np.uint8
    assert np.abs(out.astype(np.int16) - rgb.astype(np.int16)).mean() < 6


def test_jpeg_extension_jpeg_and_str_path(tmp_path, rgb):
    p = _save(rgb, tmp_path / "a.jpeg", quality=95)
    out = _host(mp.image_from_path(str(p)))
    assert out.shape == (H, W, 3)


def test_load_array_matches_and_owns_memory(tmp_path, rgb):
    p = _save(rgb, tmp_path / "a.png")
    arr = mio.load_array(p)
    assert isinstance(arr, np.ndarray)
    assert arr.flags.c_contiguous and arr.flags.writeable and arr.flags.owndata
    np.testing.assert_array_equal(arr, rgb)


def test_mode_1_becomes_0_255_grey(tmp_path, grey):
    p = tmp_path / "bw.png"
    Image.fromarray(grey).convert("1").save(p)
    out = _host(mp.image_from_path(p))
    assert out.shape == (H, W)
    assert out.dtype == np.uint8
    assert set(np.unique(out)) <= {0, 255}


def test_16_bit_grey_png_is_uint16(tmp_path, grey):
    arr16 = grey.astype(np.uint16) * 257
    p = tmp_path / "g16.png"
    Image.fromarray(arr16).save(p)
    out = mio.load_array(p)
    assert out.shape == (H, W)
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out, arr16)


def test_palette_without_transparency_is_rgb(tmp_path, rgb):
    p = tmp_path / "p.png"
    pal = Image.fromarray(rgb).quantize(64)
    pal.save(p)
    out = _host(mp.image_from_path(p))
    assert out.shape == (H, W, 3)
    np.testing.assert_array_equal(out, np.asarray(pal.convert("RGB")))


def test_palette_with_transparency_is_rgba(tmp_path, rgb):
    p = tmp_path / "p.gif"
    pal = Image.fromarray(rgb).quantize(64)
    pal.info["transparency"] = 0
    pal.save(p, transparency=0)
    out = _host(mp.image_from_path(p))
    assert out.shape == (H, W, 4)
    assert out.dtype == np.uint8


def test_la_is_rgba(tmp_path, grey):
    p = tmp_path / "la.png"
    Image.fromarray(grey).convert("LA").save(p)
    out = _host(mp.image_from_path(p))
    assert out.shape == (H, W, 4)
    np.testing.assert_array_equal(out[..., 0], grey)
    np.testing.assert_array_equal(out[..., 3], 255)


def test_cmyk_is_rgb(tmp_path, rgb):
    p = tmp_path / "c.tiff"
    Image.fromarray(rgb).convert("CMYK").save(p)
    out = _host(mp.image_from_path(p))
    assert out.shape == (H, W, 3)
    assert out.dtype == np.uint8


def test_multi_frame_gives_first_frame(tmp_path, rgb, rgb2):
    p = tmp_path / "multi.tiff"
    Image.fromarray(rgb).save(p, save_all=True, append_images=[Image.fromarray(rgb2)])
    with Image.open(p) as check:
        assert check.n_frames == 2
    np.testing.assert_array_equal(_host(mp.image_from_path(p)), rgb)


def test_missing_file(tmp_path):
    p = tmp_path / "nope.png"
    with pytest.raises(FileNotFoundError) as excinfo:
        mp.image_from_path(p)
    assert _names(excinfo, p)


def test_text_file_named_png(tmp_path):
    p = tmp_path / "x.png"
    p.write_text("this is not an image\n")
    with pytest.raises(ValueError) as excinfo:
        mp.image_from_path(p)
    assert _names(excinfo, p)


def test_zero_byte_file(tmp_path):
    p = tmp_path / "empty.png"
    p.write_bytes(b"")
    with pytest.raises(ValueError) as excinfo:
        mp.image_from_path(p)
    assert _names(excinfo, p)


def test_directory_is_not_an_image(tmp_path):
    with pytest.raises(ValueError) as excinfo:
        mp.image_from_path(tmp_path)
    assert _names(excinfo, tmp_path)


@pytest.mark.parametrize("ext", ["png", "jpg"])
def test_truncated_file(tmp_path, rgb, ext):
    p = _truncate(_save(rgb, tmp_path / f"cut.{ext}"))
    with pytest.raises(ValueError) as excinfo:
        mp.image_from_path(p)
    assert _names(excinfo, p)


@pytest.mark.parametrize("ext", ["png", "jpg"])
def test_truncated_file_refused_even_if_caller_allows_truncation(tmp_path, rgb, ext, monkeypatch):
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    p = _truncate(_save(rgb, tmp_path / f"cut.{ext}"))
    with pytest.raises(ValueError) as excinfo:
        mp.image_from_path(p)
    assert _names(excinfo, p)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True  # the caller's setting is restored


def test_corrupt_png_body(tmp_path, rgb):
    p = _save(rgb, tmp_path / "bad.png")
    raw = bytearray(p.read_bytes())
    for i in range(60, len(raw) - 20):  # scribble over the compressed data, keep the header
        raw[i] ^= 0x5A
    p.write_bytes(bytes(raw))
    with pytest.raises(ValueError) as excinfo:
        mp.image_from_path(p)
    assert _names(excinfo, p)


@pytest.mark.parametrize("limit", [100, 3000])  # 64x64 = 4096 px: above 2x (error) / 1x (warning)
def test_decompression_bomb_refused(tmp_path, monkeypatch, limit):
    p = _save(np.zeros((64, 64, 3), np.uint8), tmp_path / "bomb.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", limit)
    # the caller ignores warnings: the library must still turn Pillow's bomb warning into an error
    with warnings.catch_warnings(), pytest.raises(ValueError) as excinfo:
        warnings.simplefilter("ignore")
        mp.image_from_path(p)
    assert _names(excinfo, p)
    assert "bomb" in str(excinfo.value)
    assert Image.MAX_IMAGE_PIXELS == limit


def test_decompression_bomb_in_directory(tmp_path, monkeypatch, rgb):
    _save(rgb[:8, :8], tmp_path / "a.png")
    p = _save(np.zeros((64, 64, 3), np.uint8), tmp_path / "b.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    with pytest.raises(ValueError) as excinfo:
        mp.images_from_path(tmp_path)
    assert _names(excinfo, p)


def test_pillow_guards_held_during_decode(tmp_path, rgb, monkeypatch):
    """Spy on the decoder: the bomb limit is untouched and truncation is refused while loading."""
    seen = []
    real_load = ImageFile.ImageFile.load

    def spy(self):
        seen.append((Image.MAX_IMAGE_PIXELS, ImageFile.LOAD_TRUNCATED_IMAGES))
        return real_load(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", spy)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10_000)
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    p = _save(rgb, tmp_path / "a.png")
    mp.image_from_path(p)
    assert seen
    assert all(limit == 10_000 and truncated is False for limit, truncated in seen)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True


def test_library_never_assigns_pillow_limit():
    pkg = Path(mp.__file__).parent
    pattern = re.compile(r"MAX_IMAGE_PIXELS\s*=(?!=)|setattr\([^)]*MAX_IMAGE_PIXELS")
    for src in pkg.rglob("*.py"):
        assert not pattern.search(src.read_text()), f"{src} assigns MAX_IMAGE_PIXELS"


@pytest.mark.parametrize("bad", [None, 123, 1.5, ["a.png"], ""])
def test_bad_path_argument(bad):
    with pytest.raises(ValueError):
        mp.image_from_path(bad)
    with pytest.raises(TypeError):
        mp.image_from_path(bad)


# --------------------------------------------------------------------------- directories


def _first_pixel(img) -> tuple:
    return tuple(_host(img)[0, 0].tolist())


@pytest.fixture
def folder(tmp_path, rgb, rgb2, grey) -> Path:
    d = tmp_path / "imgs"
    d.mkdir()
    # written out of order: b, a, c -> loaded a, b, c
    _save(rgb2, d / "b.png")
    _save(rgb, d / "a.png")
    _save(grey, d / "c.png")
    (d / "README.txt").write_text("not an image\n")
    (d / "notes").write_bytes(b"\x00\x01\x02 binary junk")
    return d


def _check_abc(images, rgb, rgb2, grey):
    assert len(images) == 3
    np.testing.assert_array_equal(_host(images[0]), rgb)
    np.testing.assert_array_equal(_host(images[1]), rgb2)
    np.testing.assert_array_equal(_host(images[2]), grey)


def test_directory_sorted_and_non_images_skipped(folder, rgb, rgb2, grey):
    _check_abc(mp.images_from_path(folder), rgb, rgb2, grey)


@pytest.mark.parametrize("form", ["path", "str", "str_slash"])
def test_directory_path_forms(folder, rgb, rgb2, grey, form):
    arg = {"path": folder, "str": str(folder), "str_slash": str(folder) + os.sep}[form]
    _check_abc(mp.images_from_path(arg), rgb, rgb2, grey)


def test_iter_image_files(folder):
    files = mio.iter_image_files(folder)
    assert [f.name for f in files] == ["a.png", "b.png", "c.png"]
    assert all(isinstance(f, Path) for f in files)


def test_iter_image_files_does_not_decode(folder, monkeypatch):
    def boom(self):
        raise AssertionError("decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", boom)
    assert len(mio.iter_image_files(folder)) == 3


def test_image_identified_by_content_without_suffix(folder, rgb2):
    _save(rgb2, folder / "zz_noext", format="PNG")
    files = mio.iter_image_files(folder)
    assert [f.name for f in files] == ["a.png", "b.png", "c.png", "zz_noext"]
    np.testing.assert_array_equal(_host(mp.images_from_path(folder)[3]), rgb2)


def test_upper_case_suffix(tmp_path, rgb):
    _save(rgb, tmp_path / "A.PNG")
    (tmp_path / "B.JPG").write_text("not a jpeg")
    with pytest.raises(ValueError) as excinfo:
        mp.images_from_path(tmp_path)
    assert _names(excinfo, tmp_path / "B.JPG")


def test_directory_corrupt_png_named(folder):
    bad = folder / "bb.png"
    bad.write_text("garbage")
    with pytest.raises(ValueError) as excinfo:
        mp.images_from_path(folder)
    assert _names(excinfo, bad)


def test_directory_zero_byte_png_named(folder):
    bad = folder / "bb.png"
    bad.write_bytes(b"")
    with pytest.raises(ValueError) as excinfo:
        mp.images_from_path(folder)
    assert _names(excinfo, bad)


@pytest.mark.parametrize("ext", ["png", "jpg"])
def test_directory_truncated_image_named(folder, rgb, ext):
    bad = _truncate(_save(rgb, folder / f"bb.{ext}"))
    with pytest.raises(ValueError) as excinfo:
        mp.images_from_path(folder)
    assert _names(excinfo, bad)


def test_directory_truncated_image_without_suffix_named(folder, rgb):
    bad = _truncate(_save(rgb, folder / "bb_data", format="PNG"))
    with pytest.raises(ValueError) as excinfo:
        mp.images_from_path(folder)
    assert _names(excinfo, bad)


def test_symlink_leaving_directory_not_followed(tmp_path, folder, rgb, rgb2, grey):
    outside = _save(rgb2, tmp_path / "outside.png")
    os.symlink(outside, folder / "ab_link_abs.png")
    os.symlink(Path("..") / "outside.png", folder / "ab_link_rel.png")
    outside_dir = tmp_path / "elsewhere"
    outside_dir.mkdir()
    _save(rgb, outside_dir / "x.png")
    os.symlink(outside_dir, folder / "ab_dir_link")
    _check_abc(mp.images_from_path(folder), rgb, rgb2, grey)
    assert [f.name for f in mio.iter_image_files(folder)] == ["a.png", "b.png", "c.png"]


def test_symlink_inside_directory_followed(folder, rgb, rgb2, grey):
    os.symlink("a.png", folder / "d_link.png")
    images = mp.images_from_path(folder)
    assert len(images) == 4
    _check_abc(images[:3], rgb, rgb2, grey)
    np.testing.assert_array_equal(_host(images[3]), rgb)


def test_broken_symlink_skipped(folder, rgb, rgb2, grey):
    os.symlink("missing.png", folder / "d_broken.png")
    _check_abc(mp.images_from_path(folder), rgb, rgb2, grey)


def test_subdirectory_skipped(folder, rgb, rgb2, grey):
    sub = folder / "aa_sub"
    sub.mkdir()
    _save(rgb2, sub / "0.png")
    (folder / "d_dir.png").mkdir()
    _check_abc(mp.images_from_path(folder), rgb, rgb2, grey)


def test_empty_directory(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    with pytest.raises(ValueError) as excinfo:
        mp.images_from_path(d)
    assert _names(excinfo, d)
    assert mio.iter_image_files(d, allow_empty=True) == []


def test_directory_without_images(tmp_path):
    (tmp_path / "README.txt").write_text("hello")
    (tmp_path / "sub").mkdir()
    with pytest.raises(ValueError) as excinfo:
        mp.images_from_path(tmp_path)
    assert _names(excinfo, tmp_path)


def test_missing_directory(tmp_path):
    d = tmp_path / "nope"
    with pytest.raises(FileNotFoundError) as excinfo:
        mp.images_from_path(d)
    assert _names(excinfo, d)


def test_file_given_as_directory(tmp_path, rgb):
    p = _save(rgb, tmp_path / "a.png")
    with pytest.raises(NotADirectoryError) as excinfo:
        mp.images_from_path(p)
    assert _names(excinfo, p)


def test_input_files_untouched(folder):
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    mp.images_from_path(folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_concurrent_loads(tmp_path, rgb, rgb2, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    good = [_save(rgb if i % 2 else rgb2, tmp_path / f"{i:02d}.png") for i in range(16)]
    bad = [_truncate(_save(rgb, tmp_path / f"cut{i:02d}.png")) for i in range(8)]

    def load(p):
        try:
            return mio.load_array(p)
        except ValueError as exc:
            return exc

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(load, good + bad))
    for i, arr in enumerate(results[:16]):
        np.testing.assert_array_equal(arr, rgb if i % 2 else rgb2)
    for p, exc in zip(bad, results[16:], strict=True):
        assert isinstance(exc, ValueError) and str(p) in str(exc)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True


# --------------------------------------------------------------------------- non-regular entries
# Issue 17, class 5: every kind of entry that is not a regular image file. In a folder it is
# skipped (images_from_path, Generator(dir)); asked for directly it is a ValueError naming the
# path; nothing ever blocks (a FIFO is never opened for a blocking read).


def _run_with_deadline(fn, seconds: float = 20.0):
    """``fn()``'s result or exception, failing the test if it blocks."""
    import threading

    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            box["error"] = err

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn} blocked for {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _unblock_fifo(path: Path) -> None:
    # a reader blocked on the FIFO (on code without the fix) gets EOF and its thread ends
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


@pytest.fixture
def specials(rgb):
    """A short-named folder (AF_UNIX paths are limited to ~100 bytes) holding one image and one
    entry of every non-regular kind, each with an image suffix; name -> path."""
    import shutil
    import socket
    import stat
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="mpio", dir="/tmp"))
    _save(rgb, d / "a.png")
    made = {"image": d / "a.png"}
    os.symlink("loop2.png", d / "loop1.png")
    os.symlink("loop1.png", d / "loop2.png")
    made["symlink loop"] = d / "loop1.png"
    os.symlink("self.png", d / "self.png")
    made["self loop"] = d / "self.png"
    os.symlink("missing.png", d / "dangling.png")
    made["dangling link"] = d / "dangling.png"
    (d / "dir.png").mkdir()
    made["directory"] = d / "dir.png"
    os.mkfifo(d / "fifo.png")
    made["fifo"] = d / "fifo.png"
    os.symlink("fifo.png", d / "fifo_link.png")
    made["link to fifo"] = d / "fifo_link.png"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(d / "sock.png"))
    made["socket"] = d / "sock.png"
    try:
        os.mknod(d / "dev.png", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        made["device"] = d / "dev.png"
    except OSError:  # no CAP_MKNOD: the device case runs on /dev/null, outside the folder
        pass
    yield made
    _unblock_fifo(d / "fifo.png")
    sock.close()
    shutil.rmtree(d)


NON_REGULAR = ["symlink loop", "self loop", "dangling link", "directory", "fifo",
               "link to fifo", "socket", "device"]


def test_folder_skips_every_non_regular_entry(specials, rgb):
    folder = specials["image"].parent
    names = _run_with_deadline(lambda: [p.name for p in mio.iter_image_files(folder)])
    assert names == ["a.png"]
    images = _run_with_deadline(lambda: mp.images_from_path(folder))
    assert len(images) == 1
    np.testing.assert_array_equal(_host(images[0]), rgb)


def test_generator_over_folder_skips_every_non_regular_entry(specials, rgb):
    folder = specials["image"].parent

    def outputs():
        gen = mp.Generator(str(folder), [mp.Operation("fliplr")], outputs=3,
                           return_to_host=True)
        return list(gen)

    outs = _run_with_deadline(outputs)
    assert len(outs) == 3
    for out in outs:
        np.testing.assert_array_equal(out, np.fliplr(rgb))


@pytest.mark.parametrize("kind", NON_REGULAR)
def test_non_regular_entry_asked_for_directly(specials, kind):
    path = specials.get(kind, Path("/dev/null") if kind == "device" else None)
    with pytest.raises(ValueError) as excinfo:
        _run_with_deadline(lambda: mp.image_from_path(path))
    assert _names(excinfo, path)


def test_dangling_link_is_also_file_not_found(specials):
    # API.md: a missing file is FileNotFoundError; a dangling link is both
    with pytest.raises(FileNotFoundError):
        mp.image_from_path(specials["dangling link"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_file(tmp_path, rgb):
    p = _save(rgb, tmp_path / "secret.png")
    q = _save(rgb, tmp_path / "secret_data")
    p.chmod(0)
    q.chmod(0)
    try:
        with pytest.raises(PermissionError) as excinfo:
            mp.image_from_path(p)
        assert _names(excinfo, p)
        with pytest.raises(PermissionError):  # kept by its suffix: loading it says why not
            mp.images_from_path(tmp_path)
        p.unlink()
        with pytest.raises(PermissionError):  # no suffix: kept too, not silently dropped
            mp.images_from_path(tmp_path)
    finally:
        for f in (p, q):
            if f.exists():
                f.chmod(0o600)


# --------------------------------------------------------------------------- decompression bombs
# Issue 17, class 7: a caller disabling Pillow's limit (None) must not disable millipyde's.

@pytest.fixture(scope="module")
def big_png(tmp_path_factory) -> Path:
    """A 1-bit 10000 x 9000 PNG (90,000,000 pixels, just above Pillow's default limit of
    89,478,485) that compresses to a few kB."""
    p = tmp_path_factory.mktemp("bomb") / "big.png"
    Image.new("1", (10000, 9000)).save(p)
    return p


def test_bomb_refused_when_caller_disabled_pillows_limit(big_png, monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    with pytest.raises(ValueError, match="bomb") as excinfo:
        mp.image_from_path(big_png)
    assert _names(excinfo, big_png)
    assert Image.MAX_IMAGE_PIXELS is None  # the caller's setting is left alone


def test_set_max_image_pixels_lowers_and_restores(tmp_path, rgb, monkeypatch):
    p = _save(rgb, tmp_path / "a.png")  # 32 x 40 = 1280 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    try:
        mp.set_max_image_pixels(1000)
        assert mp.max_image_pixels() == 1000
        with pytest.raises(ValueError, match="bomb"):
            mp.image_from_path(p)
        mp.set_max_image_pixels(1280)
        np.testing.assert_array_equal(_host(mp.image_from_path(p)), rgb)
    finally:
        mp.set_max_image_pixels(None)
    assert mp.max_image_pixels() == 89_478_485  # Pillow's default


def test_max_image_pixels_from_environment(tmp_path, rgb, monkeypatch):
    p = _save(rgb, tmp_path / "a.png")
    monkeypatch.setenv("MILLIPYDE_MAX_IMAGE_PIXELS", "1000")
    with pytest.raises(ValueError, match="bomb"):
        mp.image_from_path(p)
    monkeypatch.setenv("MILLIPYDE_MAX_IMAGE_PIXELS", "lots")
    with pytest.raises(ValueError, match="MILLIPYDE_MAX_IMAGE_PIXELS"):
        mp.image_from_path(p)


def test_raised_limit_allows_a_big_image_when_pillow_allows_it(big_png, monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    try:
        mp.set_max_image_pixels(90_000_000)
        img = mp.image_from_path(big_png)
        assert img.shape == (9000, 10000)
    finally:
        mp.set_max_image_pixels(None)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "10"])
def test_set_max_image_pixels_refuses_bad_values(bad):
    with pytest.raises(ValueError, match="pixels"):
        mp.set_max_image_pixels(bad)
