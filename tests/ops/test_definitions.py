"""Each op is defined once (``millipyde/ops/``), and everything else reads that definition."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

import millipyde as mp
from millipyde.kernels import REGISTRY
from millipyde.ops import FORMS, OPS, Emit, catalog
from millipyde.ops.base import kind_for
from millipyde.training import batch_ops

PACKAGE = Path(mp.__file__).resolve().parent
README = PACKAGE.parent / "README.md"
#: modules that use ops without defining them (a recipe names the ops it strings together; a
#: torchvision-named transform the op it stands for)
# modules that use ops by name (recipes, the CLI, torchvision's names, the policies' tables)
USERS = {PACKAGE / "training" / "recipes.py", PACKAGE / "cli.py", PACKAGE / "policies.py",
         *(PACKAGE / "transforms").glob("*.py")}


#: string literals that are an op's name but mean something else there: the file format "jpeg"
#: (a codec's name, a file extension) where the data sources decode files
NOT_OP_NAMES = {(PACKAGE / "data" / "decode.py", "jpeg"), (PACKAGE / "data" / "shards.py", "jpeg")}


def _own_module(name: str) -> Path:
    return Path(inspect.getsourcefile(FORMS[name].parse)).resolve()


def _literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def test_each_op_name_stands_in_its_own_module_only():
    names = set(FORMS)
    assert {"adjust_gamma", "random_resized_crop", "rgb2gray"} <= names  # the search is real
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if path in USERS:
            continue
        for name in _literals(path) & names:
            if _own_module(name) != path.resolve() and (path, name) not in NOT_OP_NAMES:
                found.setdefault(name, []).append(str(path.relative_to(PACKAGE)))
    assert found == {}, f"op names listed outside their op module: {found}"


def test_the_search_finds_a_name_listed_elsewhere(tmp_path):
    # the check above would pass vacuously if _literals saw nothing
    f = tmp_path / "m.py"
    f.write_text("ROUTE = {'fliplr': 1}\n")
    assert "fliplr" in _literals(f) & set(FORMS)


def test_every_form_is_a_gpuimage_method_with_its_signature():
    for name, form in FORMS.items():
        method = getattr(mp.gpuimage, name)
        want = list(inspect.signature(form.parse).parameters)[1:]
        got = list(inspect.signature(method).parameters)
        assert got == ["self", *want], name
        assert method.__doc__ == form.parse.__doc__


def test_every_kernel_of_an_op_is_registered_and_every_form_has_an_op():
    for op in OPS.values():
        assert op.kernels and all(k in REGISTRY for k in op.kernels)
        for form in op.forms.values():
            assert form.op is op and form.kernel in op.kernels
    assert {f.op.name for f in FORMS.values()} == set(OPS)


def test_random_forms_draw_and_deterministic_ones_mostly_do_not():
    for form in FORMS.values():
        if form.random:
            assert form.draws, form.name


@pytest.mark.parametrize("name", sorted(n for n, f in FORMS.items() if f.random))
def test_a_method_call_is_its_form_sampled_over_one_image(name):
    # the batch path (n images at once, batch_ops.Ctx) and the method (one image) give the
    # same parameters: draw them for 64 outputs at once and one by one
    args = _ARGS[name]
    img = mp.gpuimage(np.zeros((37, 53, 3), dtype=np.uint8))
    form = FORMS[name]
    kind = kind_for(3, np.uint8)
    parsed = form.parse(kind, *args)
    ks = np.arange(64, dtype=np.int64)
    hw = np.tile([37, 53], (64, 1))
    batch = form.emits(parsed, batch_ops.Ctx(5, ks, 3), hw, kind)
    for k in (0, 17, 63):
        from millipyde import random as mprandom

        y = img.clone()
        before = y._node
        with mprandom.operation_stream(5, k, 3):
            getattr(y, name)(*args)
        nodes = []
        n = y._node
        while n is not before:
            nodes.append(n)
            n = n.inputs[0]
        nodes.reverse()
        want = [(e.kernel, e.params[k].tolist()) for e in batch
                if isinstance(e, Emit) and (e.skip is None or not e.skip[k])]
        assert [(n.op.name, [float(v) for v in n.params]) for n in nodes] == want, k


_ARGS = {
    "random_colorize": ((0.5, 1.5), (0.2, 1.0), (1.0, 2.0)),
    "random_contrast": (0.2, 1.8),
    "random_saturation": (0.2, 1.8),
    "random_hue": (-0.3, 0.3),
    "random_brightness": (-0.4, 0.4),
    "random_adjust_gamma": ((0.5, 2.0), (0.8, 1.2)),
    "random_rotate": (-90, 90),
    "random_affine": (30, (0.2, 0.1), (0.8, 1.2), (-10, 10, -5, 5)),
    "random_resized_crop": (16, 24),
    "random_erasing": (),
    "random_gaussian_noise": (0.0, 0.2),
    "random_gaussian": (0.0, 3.0),
    "random_autocontrast": (0.5,),
    "random_equalize": (0.5,),
    "random_gaussian_blur": (5, (0.3, 2.0)),
    "random_adjust_sharpness": (1.8, 0.5),
    "random_invert": (0.5,),
    "random_vflip": (0.5,),
    "random_grayscale": (0.5,),
    "random_solarize": (100, 0.5),
    "random_posterize": (3, 0.5),
    "random_adjust_brightness": (0.5, 1.5),
    "channel_shuffle": (),
    "random_crop": (20, 30, (4, 2), True, 9),
    # geometry: rot90, translate, shear and their kin
    "random_rot90": (0.75,),
    "random_translate": ((-0.2, 0.3), 0.1),
    "random_shear": ((-10, 20, 5, 30),),
    "random_perspective": (0.6, 0.7),
    "random_pad_to": (50, 60, 9),
    "random_zoom_out": (4, (1.0, 2.5), 0.8),
    "random_rgb_shift": (30, (-10, 40), 5),
    "random_sepia": (0.5,),
    "channel_dropout": ((1, 2), 7),
    "random_solarize_add": (0, 110),
    "random_brightness_contrast": (0.2, (-0.3, 0.1)),
    "random_tone_curve": (0.2, True),
    "random_salt_and_pepper": ((0.05, 0.2), (0.3, 0.7)),
    "multiplicative_noise": ((0.8, 1.2), True),
    "random_sharpen": ((0.2, 0.6), (0.5, 1.0)),
    "random_hsv_shift": (20, (-30, 10), 15),
    "random_linear_illumination": ((0.1, 0.3), (-1, 1)),
    "random_corner_illumination": ((0.1, 0.3), (-1, 1)),
    "random_gaussian_illumination": ((0.1, 0.3), (0.2, 0.8), (0.3, 0.9)),
    "random_adjust_log": ((0.6, 1.0), True),
    "random_adjust_sigmoid": ((0.3, 0.7), (4, 12)),
    "random_planckian_jitter": ("CIED", [1, 4, 9]),
    "random_grid_dropout": ((4, 9), 0.4, True, 17),
    "random_downscale": ((0.3, 0.7), "linear"),
    "random_snow": ((0.1, 0.5), 2.0),
    "random_fancy_pca": (0.3,),
    "random_iso_noise": ((0.02, 0.1), (0.2, 0.9)),
    "random_motion_blur": ((3, 9), 60, (-0.5, 1.0), "reflect"),
    "random_elastic_grid": (0.4,),
    "random_jpeg": ((20, 80),),
}


def test_every_random_form_has_test_arguments():
    assert set(_ARGS) == {n for n, f in FORMS.items() if f.random}


def test_readme_op_table_is_the_generated_one():
    text = README.read_text()
    assert catalog.replace_in(text) == text, (
        "README's op table is stale: run python -m millipyde.ops.catalog --write README.md")


def test_every_op_has_a_contact_sheet_example():
    # docs/contact_sheets.py draws every op of a family (docs/ops/<family>.png)
    import importlib.util

    path = PACKAGE.parent / "docs" / "contact_sheets.py"
    spec = importlib.util.spec_from_file_location("contact_sheets", path)
    sheets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sheets)
    assert set(OPS) <= set(sheets.EXAMPLES), set(OPS) - set(sheets.EXAMPLES)
    for name, (method, _, _) in sheets.EXAMPLES.items():
        assert FORMS[method].op.name == name, name
    assert all((PACKAGE.parent / "docs" / "ops" / f"{f}.png").is_file() for f in sheets.FAMILIES)
