"""The ``millipyde`` command: augment (the main job) and info."""

from __future__ import annotations

from PIL import Image

from millipyde import cli


def test_augment_writes_images_a_contact_sheet_and_a_summary(tmp_path, capsys) -> None:
    src = tmp_path / "in"
    src.mkdir()
    from skimage import data

    Image.fromarray(data.astronaut()[:40, :50]).save(src / "a.png")
    Image.fromarray(data.chelsea()[:30, :30]).save(src / "b.png")
    Image.fromarray(data.camera()[:20, :24]).save(src / "c.png")  # greyscale among colour
    out = tmp_path / "out"
    # 12 outputs: names of two digits, and fewer coin patterns of the recipe (each one a
    # kernel compiled here) than 30 outputs made
    assert cli.main(["augment", str(src), "-o", str(out), "-n", "12", "--seed", "3", "-q"]) == 0
    pngs = sorted(p.name for p in out.glob("aug_*.png"))
    assert pngs == [f"aug_{i:02d}.png" for i in range(12)]
    with Image.open(out / "contact_sheet.png") as sheet:
        assert sheet.size[0] >= 5 * 100
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "backend" in last and "12 images" in last and "images/s" in last


def test_augment_is_reproducible_for_a_seed(tmp_path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    from skimage import data

    Image.fromarray(data.coffee()[:24, :32]).save(src / "c.png")
    for run in ("r1", "r2"):
        cli.main(["augment", str(src), "-o", str(tmp_path / run), "-n", "3", "--seed", "9", "-q"])
    for i in range(3):
        a = Image.open(tmp_path / "r1" / f"aug_{i}.png").tobytes()
        assert a == Image.open(tmp_path / "r2" / f"aug_{i}.png").tobytes()


def test_info_prints_backend_devices_and_versions(capsys) -> None:
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    assert "backend:" in text and "device 0:" in text and "numba" in text
    # and why that backend (backend.selection.why, tested on its own in tests/backend)
    import os

    import millipyde as mp
    from millipyde.backend import selection

    why = selection.why(mp.backend(), os.environ, selection.gpu_missing)
    assert f"backend: {mp.backend()} ({why})" in text.splitlines()


def test_augment_recipes(tmp_path) -> None:
    import numpy as np
    from skimage import data

    src = tmp_path / "in"
    src.mkdir()
    Image.fromarray(data.coffee()[:90, :120]).save(src / "c.png")
    Image.fromarray(data.camera()[:64, :80]).save(src / "g.png")
    for recipe in ("imagenet", "thesis", "detection"):
        out = tmp_path / recipe
        assert cli.main(["augment", str(src), "-o", str(out), "-n", "4", "--recipe", recipe,
                         "-q"]) == 0
        imgs = [np.asarray(Image.open(out / f"aug_{i}.png")) for i in range(4)]
        if recipe == "imagenet":
            # what a classifier trains on: 224 x 224 crops, not washed out to white
            assert all(a.shape[:2] == (224, 224) for a in imgs)
            assert all(a.mean() < 200 for a in imgs if a.ndim == 3)  # coffee is dark
