"""The ``millipyde`` command: ``augment`` (the main job), ``warmup``, ``info`` and ``bench``."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .recipes import colorize_if_colour, figure_5_1_operations  # noqa: F401  (public here too)

SAMPLES = ("astronaut", "chelsea", "coffee", "rocket", "logo", "camera")


def sample_images() -> list:
    """The scikit-image sample photographs (shipped inside scikit-image) as gpuimages."""
    import skimage.data

    import millipyde as mp

    return [mp.gpuimage(getattr(skimage.data, name)()) for name in SAMPLES]


def contact_sheet(paths: list[Path], out: Path, thumb: int = 160, columns: int = 8,
                  boxes: list | None = None) -> Path:
    """Write a grid of thumbnails of ``paths`` to ``out`` (PNG) and return ``out``; ``boxes``
    (one (N, 4) xyxy array or None per path) are drawn on their thumbnails."""
    from PIL import Image, ImageDraw

    rows = max(1, math.ceil(len(paths) / columns))
    cols = min(columns, max(1, len(paths)))
    label_h = 14
    sheet = Image.new("RGB", (cols * thumb, rows * (thumb + label_h)), "white")
    draw = ImageDraw.Draw(sheet)
    for i, p in enumerate(paths):
        with Image.open(p) as im:
            width0 = im.width
            im = im.convert("RGBA")
            im.thumbnail((thumb, thumb))
            scale = im.width / width0
            x = (i % cols) * thumb + (thumb - im.width) // 2
            y = (i // cols) * (thumb + label_h)
            sheet.paste(im, (x, y + (thumb - im.height) // 2), im)
            for b in [] if boxes is None or boxes[i] is None else boxes[i]:
                x0, y0, x1, y1 = (float(v) * scale for v in b)
                top = y + (thumb - im.height) // 2
                draw.rectangle((x + x0, top + y0, x + x1, top + y1), outline="red")
            draw.text(((i % cols) * thumb + 4, y + thumb), p.stem, fill="black")
    sheet.save(out)
    return out


def augment(args: argparse.Namespace) -> int:
    """Augment a folder of images (scikit-image samples by default) through a Generator."""
    from PIL import Image
    from tqdm import tqdm

    import millipyde as mp

    from .io import check_outputs_apart, iter_image_files, to_uint8

    if args.n < 1:
        raise SystemExit("millipyde augment: -n must be at least 1")
    if args.cluster is not None:
        return augment_on_cluster(args)
    width = len(str(args.n - 1))
    names = [f"aug_{i:0{width}d}.png" for i in range(args.n)] + ["contact_sheet.png"]
    try:
        # before anything is read, written or deleted: no output may land on an input
        sources = [] if args.input is None else iter_image_files(args.input)
        check_outputs_apart(sources, args.output, names, "millipyde augment",
                            folder=args.input)
    except (ValueError, OSError) as err:
        msg = str(err)
        raise SystemExit(msg if msg.startswith("millipyde augment:") else
                         f"millipyde augment: {msg}") from err
    from .recipes import DETECTION_SAMPLES, detection_samples, operations

    if args.input is None and args.recipe == "detection":
        inputs = detection_samples()
        source = "detection samples with boxes (" + ", ".join(DETECTION_SAMPLES) + ")"
    elif args.input is None:
        inputs = sample_images()
        source = "scikit-image samples (" + ", ".join(SAMPLES) + ")"
    else:
        inputs = mp.images_from_path(args.input)
        source = str(args.input)
    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    # outputs stay gpuimages when they carry targets (boxes are read from them)
    with_targets = any(x.targets is not None for x in inputs)
    gen = mp.Generator(inputs, operations(args.recipe), outputs=args.n,
                       return_to_host=not with_targets, seed=args.seed)
    paths: list[Path] = []
    boxes: list = []
    start = time.perf_counter()
    try:
        for i, img in enumerate(tqdm(gen, total=args.n, desc="augment", unit="img",
                                     disable=args.quiet)):
            path = out_dir / f"aug_{i:0{width}d}.png"
            boxes.append(img.boxes if with_targets else None)
            Image.fromarray(to_uint8(np.asarray(img))).save(path)
            paths.append(path)
    finally:
        gen.close()
    elapsed = time.perf_counter() - start
    sheet = contact_sheet(paths, out_dir / "contact_sheet.png", boxes=boxes)
    names = ", ".join(d.name for d in mp.devices.DEVICES)
    print(f"inputs: {len(inputs)} from {source}; recipe {args.recipe}; outputs in {out_dir}; "
          f"contact sheet {sheet}")
    print(
        f"backend {mp.backend()}, device(s) {names}: {len(paths)} images in {elapsed:.2f} s, "
        f"{len(paths) / elapsed:.1f} images/s"
    )
    return 0


def augment_on_cluster(args: argparse.Namespace) -> int:
    """``augment --cluster``: the same images, made and written by Dask workers.

    Outputs are named as ``millipyde.distributed.process`` names them (``{k:06d}.png``).
    """
    import millipyde as mp
    from millipyde.distributed import cluster_client, run_files

    from .recipes import operations

    if args.input is None:
        raise SystemExit("millipyde augment --cluster needs an input folder (workers read it)")
    start = time.perf_counter()
    try:
        with cluster_client(args.cluster) as client:
            paths, _ = run_files(args.input, operations(args.recipe), args.output,
                                 outputs=args.n, seed=args.seed, client=client, fmt="png",
                                 to_uint8=True)
            workers = len(client.nthreads())
    except ValueError as err:
        raise SystemExit(f"millipyde augment: {err}") from err
    elapsed = time.perf_counter() - start
    sheet = contact_sheet(paths, Path(args.output) / "contact_sheet.png")
    print(f"inputs from {args.input}; outputs in {args.output}; contact sheet {sheet}")
    print(f"backend {mp.backend()}, cluster {args.cluster} ({workers} workers): {len(paths)} "
          f"images in {elapsed:.2f} s, {len(paths) / elapsed:.1f} images/s")
    return 0


def info(args: argparse.Namespace) -> int:
    """Print backend, devices and versions."""
    import networkx
    import numba
    import skimage

    import millipyde as mp

    from .graph.codegen import loader

    print(f"millipyde {mp.__version__}")
    from .backend import selection

    reason = selection.why(mp.backend(), os.environ, selection.gpu_missing)
    print(f"backend: {mp.backend()} ({reason})")
    for d in mp.devices.DEVICES:
        mark = " (recommended)" if d.index == mp.devices.RECOMMENDED else ""
        print(f"device {d.index}: {d.name}, {d.multiprocessors} multiprocessors, "
              f"clock {d.clock_khz} kHz{mark}")
    versions = {"python": sys.version.split()[0], "numpy": np.__version__,
                "numba": numba.__version__, "scikit-image": skimage.__version__,
                "networkx": networkx.__version__}
    try:
        from importlib.metadata import version

        versions["numba-cuda"] = version("numba-cuda")
    except Exception:
        versions["numba-cuda"] = "not installed"
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print(f"kernel cache: {loader.cache_dir()}")
    return 0


def bench(args: argparse.Namespace) -> int:
    """Run ``python -m bench`` of the source checkout in the current folder.

    The benchmarks are not part of the installed package (they need cuCIM, kornia, torch...), so
    this only works from a checkout of the repository.
    """
    if not (Path.cwd() / "bench" / "__main__.py").is_file():
        print("millipyde bench runs the benchmarks of a source checkout: run it from the "
              "repository's root (no ./bench/__main__.py here)", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, "-m", "bench", *args.rest], cwd=Path.cwd())


def parse_shape(text: str) -> tuple[int, ...]:
    """``HxW`` or ``HxWxC`` (C 3 or 4) as a tuple of ints; ``SystemExit`` naming ``--shape``
    when it is not one."""
    parts = text.lower().split("x")
    try:
        shape = tuple(int(v) for v in parts)
    except ValueError:
        shape = ()
    if len(shape) not in (2, 3) or any(v < 0 for v in shape) or (
            len(shape) == 3 and shape[2] not in (3, 4)):
        raise SystemExit(f"millipyde warmup: --shape must be HxW or HxWxC (C 3 or 4), whole "
                         f"numbers >= 0, like 512x512x3; got {text!r}")
    return shape


def warmup(args: argparse.Namespace) -> int:
    """``millipyde warmup``: compile the figure-5.1 kernels ahead (``millipyde.warmup``)."""
    import millipyde as mp
    from millipyde import warmup as wu

    shape = parse_shape(args.shape)
    recipes = [figure_5_1_operations()]
    # its twin with the method form (colour inputs): the batches recorded at once
    recipes.append([mp.Operation("random_colorize", *op.args, probability=op.probability)
                    if op.function is colorize_if_colour else op for op in recipes[0]])
    for ops in recipes:
        got = wu.warmup(ops, shape, size=args.size, channels=args.channels,
                        layout=args.layout, processes=args.processes)
        print(f"warmup: {got['patterns']} outputs (coin patterns, clipped rotations), "
              f"{got['compiled']} kernels compiled "
              f"in {got['processes']} process(es), {got['seconds']:.1f} s")
    from millipyde.graph.codegen.loader import cache_dir

    print(f"backend {mp.backend()}, kernel cache {cache_dir()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``millipyde`` command."""
    parser = argparse.ArgumentParser(prog="millipyde", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("augment", help="augment a folder of images (--recipe)")
    a.add_argument("input", nargs="?", default=None,
                   help="folder of images (default: scikit-image's sample photographs)")
    a.add_argument("-o", "--output", default="augmented", help="output folder")
    a.add_argument("-n", type=int, default=48, help="number of outputs (default 48)")
    a.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    a.add_argument("--recipe", choices=("imagenet", "thesis", "detection"), default="imagenet",
                   help="augmentation recipe (default imagenet: what a classifier trains on; "
                        "thesis: figure 5.1)")
    a.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    a.add_argument("--cluster", default=None, metavar="local[:WORKERS]|tcp://HOST:PORT",
                   help="make and write the outputs on a Dask cluster (the dask extra)")
    a.set_defaults(func=augment)
    i = sub.add_parser("info", help="backend, devices and versions")
    i.set_defaults(func=info)
    b = sub.add_parser("bench", help="run bench/ (from a checkout)")
    b.add_argument("rest", nargs=argparse.REMAINDER)
    b.set_defaults(func=bench)
    w = sub.add_parser("warmup", help="compile the figure-5.1 kernels ahead of training")
    w.add_argument("--shape", default="512x512x3", help="input shape HxW[xC] (512x512x3)")
    w.add_argument("--size", type=int, default=256, help="Generator.batches size (256)")
    w.add_argument("--channels", type=int, default=3, choices=(1, 3))
    w.add_argument("--layout", default="NCHW", choices=("NCHW", "NHWC"))
    w.add_argument("--processes", type=int, default=None, help="worker processes")
    w.set_defaults(func=warmup)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
