"""The ``millipyde`` command: ``augment`` (the main job), ``warmup``, ``info`` and ``bench``."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SAMPLES = ("astronaut", "chelsea", "coffee", "rocket", "logo", "camera")


def __getattr__(name: str) -> Any:
    """The recipes' ``colorize_if_colour`` and ``figure_5_1_operations``, public here too,
    imported on first use (``millipyde augment`` starts its compile workers before it imports
    the framework)."""
    if name in ("colorize_if_colour", "figure_5_1_operations"):
        from .training import recipes

        return getattr(recipes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    from .encode import encode_png

    out.write_bytes(encode_png(np.asarray(sheet)))
    return out


#: outputs shown on the contact sheet
SHEET_MAX = 64


def check_output_folder(src: Path, out: Path) -> None:
    """SystemExit where the output folder is, contains or lies inside the input folder (its
    outputs would be read back as inputs, or overwrite them); checked before anything is
    written."""
    a = Path(os.path.realpath(src))
    b = Path(os.path.realpath(out))
    if a == b or b.is_relative_to(a) or a.is_relative_to(b):
        raise SystemExit(f"millipyde augment: the output folder {str(out)!r} overlaps the input "
                         f"folder {str(src)!r}: choose one outside it")


class EncoderPool:
    """Writes images through a pool of encoder threads, at most ``4 * threads`` waiting:
    memory stays flat however many outputs. PNGs are encoded by :func:`encode.encode_png`
    (outside the GIL, so the threads run side by side), JPEGs by Pillow.

    Parameters
    ----------
    fmt : {"png", "jpeg"}
    quality : int
        JPEG quality.
    threads : int
    """

    def __init__(self, fmt: str, quality: int, threads: int) -> None:
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        self.fmt, self.quality = fmt, quality
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="millipyde-encode")
        self.pending: deque = deque()
        self.limit = 4 * threads

    def submit(self, path: Path, image: np.ndarray, scaled: bool = False) -> None:
        """Write ``image`` (uint8, or float in 0..255 where ``scaled``) to ``path``."""
        while len(self.pending) >= self.limit:
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(self._write, path, image, scaled))

    def _write(self, path: Path, image: np.ndarray, scaled: bool) -> None:
        from PIL import Image

        from .encode import encode_png
        from .io import to_uint8

        arr = np.rint(image).clip(0, 255).astype(np.uint8) if scaled else to_uint8(image)
        if scaled and arr.ndim == 3 and arr.shape[2] == 3 and \
                (arr[..., 0] == arr[..., 1]).all() and (arr[..., 1] == arr[..., 2]).all():
            arr = arr[..., 0]  # a grey output (replicated in the batch) is written grey
        if arr.ndim == 3 and arr.shape[2] == 1:
            arr = arr[..., 0]
        if self.fmt == "jpeg":
            img = Image.fromarray(arr)
            if img.mode == "RGBA":
                img = img.convert("RGB")
            img.save(path, "JPEG", quality=self.quality)
        else:
            # Pillow's PNG encoder holds the GIL: encode_png's NumPy and zlib do not
            Path(path).write_bytes(encode_png(arr))

    def close(self) -> None:
        """Wait for every write (raising the first failure) and stop the threads."""
        try:
            while self.pending:
                self.pending.popleft().result()
        finally:
            self.pool.shutdown(wait=True)


def _done_marker(recipe: str) -> Path:
    """The file written after a run of ``recipe``: the kernel cache holds its kernels."""
    import millipyde as mp

    from .source_cache import cache_dir

    return cache_dir() / f"augment-{recipe}-{mp.backend()}.done"


def _compiling_notice(recipe: str) -> Path:
    """Say that kernels compile on this recipe's first run here; the marker written after a
    run (its path returned) says the cache holds them."""
    import millipyde as mp

    from .source_cache import cache_dir

    marker = _done_marker(recipe)
    if not marker.exists():
        print(f"first run of recipe {recipe!r} on {mp.backend()}: compiling its kernels (they "
              f"are cached in {cache_dir()} for the next runs)", flush=True)
    return marker


def augment(args: argparse.Namespace) -> int:
    """Augment a folder of images (scikit-image samples by default) through a Generator.

    A folder streams: its files are read and decoded in batches as they are needed (on a GPU
    by nvImageCodec where installed), augmented in batches, and written by a pool of encoder
    threads (PNG, or JPEG with ``--format jpeg``).
    """
    if args.n < 1:
        raise SystemExit("millipyde augment: -n must be at least 1")
    if args.batch < 1 or args.writers < 1 or not 1 <= args.quality <= 100:
        raise SystemExit("millipyde augment: --batch and --writers must be at least 1, "
                         "--quality in 1..100")
    if args.cluster is not None:
        return augment_on_cluster(args)
    from .training import precompile

    # first thing on a cold cache (only the backend is imported yet): the compile workers
    # start, and their seconds of start-up overlap this process's imports and input reading
    if not _done_marker(args.recipe).exists():
        precompile.start_workers()
    if args.input is not None:
        from .data.decode import prepare_decoder

        # nvImageCodec's start (its first decode) under this process's own start-up, not in
        # front of the first batch
        prepare_decoder(0)
    try:
        return _augment(args)
    finally:
        precompile.stop_workers()  # a pool no compiling ahead took (an error, nothing to do)


def _augment(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    import millipyde as mp

    from .io import check_outputs_apart, iter_image_files
    from .training.recipes import DETECTION_SAMPLES, detection_samples, operations

    out_dir = Path(args.output)
    ext = "jpg" if args.format == "jpeg" else "png"
    width = len(str(args.n - 1))
    names = [f"aug_{i:0{width}d}.{ext}" for i in range(args.n)] + ["contact_sheet.png"]
    # before anything is read, written or deleted: no output may land on an input (the
    # folders apart, the output folder not a file, no output file an input through a link)
    if args.input is not None:
        if not Path(args.input).is_dir():
            raise SystemExit(f"millipyde augment: input folder {args.input!r} is not a folder")
        check_output_folder(Path(args.input), out_dir)
    try:
        sources = [] if args.input is None else iter_image_files(args.input, allow_empty=True)
        check_outputs_apart(sources, out_dir, names, "millipyde augment")
    except (ValueError, OSError) as err:
        msg = str(err)
        raise SystemExit(msg if msg.startswith("millipyde augment:") else
                         f"millipyde augment: {msg}") from err
    if args.input is None and args.recipe == "detection":
        inputs: Any = detection_samples()
        source = "detection samples with boxes (" + ", ".join(DETECTION_SAMPLES) + ")"
    elif args.input is None:
        inputs = sample_images()
        source = "scikit-image samples (" + ", ".join(SAMPLES) + ")"
    else:
        inputs = str(args.input)
        source = str(args.input)
    # outputs stay gpuimages when they carry targets (boxes are read from them)
    with_targets = not isinstance(inputs, str) and any(x.targets is not None for x in inputs)
    marker = _compiling_notice(args.recipe)
    try:
        gen = mp.Generator(inputs, operations(args.recipe), outputs=args.n,
                           return_to_host=not with_targets, seed=args.seed)
    except ValueError as err:
        raise SystemExit(f"millipyde augment: {err}") from err
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / name for name in names[:-1]]
    boxes: list = []
    writer = EncoderPool(args.format, args.quality, args.writers)
    start = time.perf_counter()
    bar = tqdm(total=args.n, desc="augment", unit="img", disable=args.quiet)
    try:
        if args.recipe == "imagenet":
            # every output is a 224 x 224 crop: batches, converted to 0..255 floats (uint8
            # values exactly) in HWC order, encoded by the pool
            i = 0
            with gen.batches(args.batch, layout="NHWC", std=1 / 255) as bs:
                for batch in bs:
                    host = np.asarray(batch)
                    for x in host:
                        writer.submit(paths[i], x, scaled=True)
                        i += 1
                    bar.update(len(host))
        else:
            for i, img in enumerate(gen):
                boxes.append(img.boxes if with_targets else None)
                writer.submit(paths[i], np.asarray(img))
                bar.update(1)
    except BaseException:
        writer.pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        bar.close()
        gen.close()
    writer.close()
    elapsed = time.perf_counter() - start
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    shown = paths[:SHEET_MAX]
    sheet = contact_sheet(shown, out_dir / "contact_sheet.png",
                          boxes=boxes[:SHEET_MAX] if with_targets else None)
    names = ", ".join(d.name for d in mp.devices.DEVICES)
    n_in = len(gen.source)
    print(f"inputs: {n_in} from {source}; recipe {args.recipe}; outputs in {out_dir} "
          f"({args.format}); contact sheet {sheet} (first {len(shown)})")
    if gen.bad_samples is not None and len(gen.bad_samples):
        print(f"skipped {len(gen.bad_samples)} bad file(s): "
              f"{', '.join(list(gen.bad_samples.names)[:5])}")
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

    from .training.recipes import operations

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
    """``millipyde warmup``: compile the figure-5.1 kernels ahead (``training.warmup``)."""
    import millipyde as mp
    from millipyde.training import warmup as wu

    from .training.recipes import colorize_if_colour, figure_5_1_operations

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
    a.add_argument("--format", choices=("png", "jpeg"), default="png",
                   help="output format (default png)")
    a.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    a.add_argument("--batch", type=int, default=64, help="outputs per batch (default 64)")
    a.add_argument("--writers", type=int, default=min(16, os.cpu_count() or 1),
                   help="encoder threads (default: the cores, at most 16)")
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
