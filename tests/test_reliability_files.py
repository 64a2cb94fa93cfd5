"""Issue 32, classes 6, 7, 13 and 14 (files, the CLI and the Dask path's arguments): inputs
are never overwritten or deleted (outputs that could land on them are refused before anything
is written), 16-bit data is scaled to 8 bits, not clipped, and bad paths, shapes and clients
are refused with messages naming them. No cluster is started here: every refusal comes first
(the Dask runs are in test_distributed.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import reference as ref
from PIL import Image

import millipyde as mp
from millipyde import cli
from millipyde import distributed as md
from millipyde.io import to_uint8


def _write(d: Path, names: list[str]) -> dict[str, str]:
    """Small RGB PNGs named ``names`` in ``d``; their digests."""
    d.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        Image.fromarray(ref.photo_rgb(6 + i, 7)).save(d / name)
    return _digests(d)


def _digests(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())
            if p.is_file()}


# -------------------------------------------------- class 7: outputs never over inputs
def test_cli_refuses_its_input_folder_as_output(tmp_path):
    """``millipyde augment D -o D`` overwrote an input named ``aug_0.png`` and exited 0; an
    output file that is a link to an input would have been written through."""
    d = tmp_path / "d"
    before = _write(d, ["aug_0.png", "x.png"])
    with pytest.raises(SystemExit, match=r"millipyde augment: .* overlaps the input folder"):
        cli.main(["augment", str(d), "-o", str(d), "-n", "2", "-q"])
    assert _digests(d) == before  # nothing written, nothing deleted
    with pytest.raises(SystemExit, match="overlaps the input folder"):
        cli.main(["augment", str(d), "-o", str(d / "sub"), "-n", "2", "-q"])
    assert not (d / "sub").exists() and _digests(d) == before
    out = tmp_path / "out"
    out.mkdir()
    (out / "aug_1.png").symlink_to(d / "x.png")
    with pytest.raises(SystemExit, match=r"aug_1.png' would overwrite the input .*x.png"):
        cli.main(["augment", str(d), "-o", str(out), "-n", "2", "-q"])
    assert _digests(d) == before and sorted(p.name for p in out.iterdir()) == ["aug_1.png"]


def test_cli_output_path_that_is_a_file_is_named(tmp_path):
    """A bare FileExistsError before."""
    d = tmp_path / "d"
    _write(d, ["x.png"])
    (tmp_path / "f").write_text("not a folder")
    with pytest.raises(SystemExit,
                       match=r"^millipyde augment: the output folder '.*/f' is a file$"):
        cli.main(["augment", str(d), "-o", str(tmp_path / "f"), "-n", "1", "-q"])


@pytest.mark.parametrize("overwrite", [False, True])
def test_process_refuses_to_write_over_its_inputs(tmp_path, overwrite):
    """``process(src, ops, src, overwrite=True)`` deleted ``a.png`` and ``b.png`` before
    reading them; an input named ``000000.png`` went the same way (outputs=N)."""
    d = tmp_path / "d"
    before = _write(d, ["a.png", "b.png", "000000.png"])
    ops = [mp.Operation("fliplr")]
    with pytest.raises(ValueError, match="is the input folder"):
        md.process(d, ops, d, overwrite=overwrite)
    with pytest.raises(ValueError, match=r"000000.png' would overwrite the input"):
        md.process([d / "000000.png", d / "a.png"], ops, d, outputs=2, overwrite=overwrite)
    with pytest.raises(ValueError, match=r"a.png' would overwrite the input"):
        md.process([d / "a.png"], ops, d, overwrite=overwrite)
    link = tmp_path / "elsewhere"
    link.mkdir()
    (link / "b.png").symlink_to(d / "b.png")  # the same file under another path
    with pytest.raises(ValueError, match=r"b.png' would overwrite the input"):
        md.process([link / "b.png"], ops, d, overwrite=overwrite)
    assert _digests(d) == before
    assert not (d / md.MANIFEST).exists()


def test_process_arguments_named(tmp_path):
    d = tmp_path / "d"
    _write(d, ["a.png"])
    (tmp_path / "f").write_text("")
    ops = [mp.Operation("fliplr")]
    with pytest.raises(ValueError, match=r"process: the output folder '.*/f' is a file"):
        md.process(d, ops, tmp_path / "f")
    pytest.importorskip("distributed")
    with pytest.raises(ValueError, match=r"process client must be a distributed.Client"):
        md.process(d, ops, tmp_path / "out", client=object())
    with pytest.raises(ValueError, match=r"Generator client must be a distributed.Client"):
        mp.Generator(d, ops, client="local")
    assert not (tmp_path / "out").exists()


# -------------------------------------------------------- class 6: 16-bit data scaled
def test_to_uint8_scales_every_integer_type_from_its_full_range():
    for dtype in (np.uint16, np.uint32, np.int16, np.int32, np.int64):
        full = np.iinfo(dtype).max
        img = np.array([[0, full // 3, full]], dtype=dtype)
        np.testing.assert_array_equal(to_uint8(img), [[0, 85, 255]])
    np.testing.assert_array_equal(to_uint8(np.array([[30000]], np.uint16)), [[117]])
    np.testing.assert_array_equal(to_uint8(np.array([[-5, 5]], np.int16)), [[0, 0]])
    np.testing.assert_array_equal(to_uint8(np.array([[0.5]])), [[128]])


def test_cli_writes_16_bit_pngs_scaled_not_saturated(tmp_path):
    """A 16-bit PNG at 30000 was written as 255 everywhere."""
    d = tmp_path / "d"
    d.mkdir()
    Image.fromarray(np.full((20, 24), 30000, np.uint16)).save(d / "deep.png")
    assert mp.image_from_path(d / "deep.png").dtype == np.uint16
    out = tmp_path / "out"
    assert cli.main(["augment", str(d), "-o", str(out), "-n", "2", "--recipe", "detection",
                     "-q"]) == 0
    for i in range(2):
        got = np.asarray(Image.open(out / f"aug_{i}.png"))
        assert got.dtype == np.uint8 and 0 < got.max() < 250, (got.min(), got.max())


# ------------------------------------------------------- class 13 and 14: named refusals
def test_float_image_file_beyond_one_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "bright.tiff"
    Image.fromarray(np.full((4, 5), 2.0, np.float32), mode="F").save(path)
    with pytest.raises(ValueError, match=r"bright.tiff"):
        mp.image_from_path(path)
    with pytest.raises(ValueError, match=r"bright.tiff"):
        mp.images_from_path(tmp_path)


@pytest.mark.parametrize("shape", ["bogus", "4x", "4x5x2", "-1x4", "4x5x3x1"])
def test_warmup_shape_refused_naming_the_option(shape):
    """``--shape bogus`` raised "invalid literal for int()"."""
    with pytest.raises(SystemExit, match=r"--shape must be HxW or HxWxC"):
        cli.main(["warmup", f"--shape={shape}"])


def test_warmup_of_an_empty_shape_runs():
    """``millipyde warmup --shape 0x0x3`` raised ZeroDivisionError (empty in, empty out)."""
    assert cli.main(["warmup", "--shape", "0x0x3", "--size", "2", "--processes", "1"]) == 0
