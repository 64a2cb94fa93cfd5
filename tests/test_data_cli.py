"""``millipyde augment`` over a streamed folder: formats, refusals, bad files."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from millipyde import cli


def _folder(root, n=3):
    root.mkdir()
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)).save(
            root / f"{i}.jpg")
    return root


def test_output_folder_overlapping_the_input_is_refused_first(tmp_path) -> None:
    src = _folder(tmp_path / "in")
    for out in (src, src / "sub", tmp_path):
        before = sorted(p.name for p in tmp_path.rglob("*"))
        with pytest.raises(SystemExit, match="overlaps"):
            cli.main(["augment", str(src), "-o", str(out), "-n", "2", "-q"])
        assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


def test_jpeg_output_and_a_bad_file(tmp_path, capsys) -> None:
    src = _folder(tmp_path / "in")
    (src / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    out = tmp_path / "out"
    with pytest.warns(UserWarning, match="broken.jpg"):
        assert cli.main(["augment", str(src), "-o", str(out), "-n", "5", "--format", "jpeg",
                         "--quality", "80", "-q", "--batch", "2"]) == 0
    names = sorted(p.name for p in out.glob("aug_*"))
    assert names == [f"aug_{i}.jpg" for i in range(5)]
    with Image.open(out / "aug_0.jpg") as im:
        assert im.format == "JPEG" and im.size == (224, 224)
    text = capsys.readouterr().out
    assert "skipped 1 bad file" in text and "images/s" in text
