"""A decode lane's call by segment, alone and beside Python running in other threads.

    MILLIPYDE_BACKEND=cpu python3 bench/probes/lane_segments.py [--decoder c|pillow]
    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/lane_segments.py --decoder c --work /tmp/mpdata --files 8000

A :class:`~millipyde.data.loader.Loader` (read-ahead, ``--lanes`` decode lanes, refills) over
the bench's folder (``bench_data.make_dataset``: 500x375 JPEGs, ``--shrink`` reduces them),
each output's region drawn for the ImageNet recipe's first op (``data.region``, as a streamed
Generator asks), ``--batches`` batches of ``--size`` taken by this thread one after the other,
nothing else done with them. Each row: images a second, the Loader's decode call a batch
(``stats["decode_s"]``, in every tree) and, where the tree has ``loader.SEGMENTS``, the lane
calls by segment (``data.laps.table``: wall, the lane thread's CPU, the wall beyond it, and
the waits to take the GIL back after the compiled passes). "beside" rows run
``bench_data.busy_thread`` meanwhile (Python holding the GIL ``--busy`` of the time in 18 ms
turns: the batch worker's share in the pipeline) at the loader's switch interval.

``--decoder c``: nvImageCodec's C API (``NvImageCodecCDecoder``; on the cpu backend
libjpeg-turbo into host buffers, the wheel needed), regions decoded, each row twice: the
regions' code streams in the decode pass (``decode.REGIONS_IN_DECODE``, two GIL releases a
batch; one from a lane's second batch where the plan's boxes are compiled, the ImageNet
recipe's: ``decode.ONE_PASS``) and in a pass of their own (three); ``--decoder pillow``:
Pillow, samples whole.
``--device-views`` (cpu backend): the C decoder's batches laid out and handed on as on a GPU
(views of the allocation as DeviceImages, ``DecodedBatch.layout``), the lane's work after the
decode as a GPU's. ``--tree PATH``: millipyde imported from another checkout (an older
tree: its decode call a batch only where it has no segments).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/mpdata-cpu")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=20)
    ap.add_argument("--decoder", default="c", choices=("c", "pillow"))
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--warm", type=int, default=2,
                    help="batches taken before the timing (the lanes' first calls start "
                         "their decoders; past the read-ahead's window of 4096 samples, "
                         "the takes meet the readers' pace)")
    ap.add_argument("--lanes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--busy", type=float, default=0.5)
    ap.add_argument("--shrink", type=int, default=1,
                    help="JPEGs reduced by this factor (their own folder, made once)")
    ap.add_argument("--rows", default="alone,beside")
    ap.add_argument("--tree", default=None, help="import millipyde from this checkout")
    ap.add_argument("--device-views", action="store_true",
                    help="cpu backend, --decoder c: the batches laid out and handed on as on a "
                         "GPU (DeviceImage views of the host allocation, the batch's layout)")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from bench.bench_data import busy_thread, make_dataset

    if args.tree:
        sys.path.insert(0, str(Path(args.tree).resolve()))
        for name in [m for m in sys.modules if m == "millipyde" or
                     m.startswith("millipyde.")]:
            del sys.modules[name]
    import numpy as np

    import millipyde
    from millipyde.data import Folder
    from millipyde.data import decode as dmod
    from millipyde.data import loader as lmod
    from millipyde.data.loader import BadSamples, Loader
    from millipyde.data.sampler import EpochSampler
    from millipyde.training.recipes import operations
    from millipyde.training.region_plan import plan_of

    info = make_dataset(Path(args.work), args.files, args.classes)
    folder = Path(info["folder"])
    if args.shrink > 1:
        folder = _shrunk(folder, args.shrink)
    src = Folder(str(folder))
    has_laps = hasattr(lmod, "SEGMENTS")
    if has_laps:
        from millipyde.data.laps import table
        lmod.SEGMENTS = True
    print(f"millipyde from {Path(millipyde.__file__).parent.parent}; {len(src)} files; "
          f"segments {'on' if has_laps else 'not in this tree'}")
    region = plan_of(operations("imagenet"), 0)
    size, nb = args.size, args.batches

    def make_decoder():
        if args.decoder == "pillow":
            return dmod.PillowDecoder(0)
        if args.device_views:
            return _device_views(dmod)
        return dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0))

    variants = [(True,), (False,)] if args.decoder == "c" and \
        hasattr(dmod, "REGIONS_IN_DECODE") else [(None,)]
    warm = max(2, args.warm)
    for rnd in range(args.rounds):
        order = variants if rnd % 2 == 0 else variants[::-1]
        for row in args.rows.split(","):
            for (one,) in order:
                if one is not None:
                    dmod.REGIONS_IN_DECODE = one
                first = rnd * 2 * (nb + warm)  # each row its own samples (no cache favours)
                plan = (lambda b, f=first: np.arange((f + b) * size, (f + b + 1) * size)
                        % len(src) if b < nb + warm else None)
                stop = threading.Event()
                if row == "beside":
                    busy_thread(args.busy, stop)
                loader = Loader(src, EpochSampler(len(src)), plan, make_decoder(), 0,
                                BadSamples(), lanes=args.lanes, region=region)
                try:
                    for b in range(warm):  # the lanes' first calls start their decoders
                        loader.get(b)
                    st0 = dict(loader.stats)
                    t = time.perf_counter()
                    for b in range(warm, nb + warm):
                        loader.get(b)
                    dt = time.perf_counter() - t
                    st = dict(loader.stats)
                finally:
                    stop.set()
                    loader.close()
                calls = st["batches"] - st0["batches"]
                diff = {k: st[k] - st0.get(k, 0) for k in st if isinstance(st[k], float | int)}
                label = {True: "regions in the decode pass", False: "regions' own pass",
                         None: ""}[one]
                print(f"round {rnd} {row:<7} {label:<27} {nb * size / dt:8.0f} img/s  decode "
                      f"call {1000 * diff['decode_s'] / calls:7.2f} ms a batch, rest "
                      f"{1000 * diff['other_s'] / calls:5.2f} ms, waiting for bytes "
                      f"{1000 * diff['read_wait_s'] / calls:6.2f} ms; {_share(diff)}; load "
                      f"{_load():.1f}")
                if has_laps:
                    print(table(diff, calls))


def _device_views(dmod):
    """A host C decoder whose batches are laid out and handed on as a GPU's (its views
    DeviceImages of the host allocation), and so are its further lanes'."""
    dec = dmod.NvImageCodecCDecoder(0, dmod.PillowDecoder(0), host=True)
    dec.host = False
    dec.another = lambda: _device_views(dmod)
    return dec


def _share(diff: dict) -> str:
    """"pixels decoded 47.5%" of the regions, or "whole samples"."""
    if not diff.get("px_whole"):
        return "whole samples"
    return f"pixels decoded {100 * diff['px_regions'] / diff['px_whole']:.1f}%"


def _load() -> float:
    import os

    return os.getloadavg()[0]


def _shrunk(folder: Path, factor: int) -> Path:
    """The folder's JPEGs reduced by ``factor`` (made once, beside it)."""
    import io

    from PIL import Image

    out = folder.parent / f"folder_shrunk{factor}"
    if (out / "done").exists():
        return out
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            q = out / p.relative_to(folder)
            q.parent.mkdir(parents=True, exist_ok=True)
            buf = io.BytesIO()
            Image.open(p).reduce(factor).save(buf, "JPEG", quality=90)
            q.write_bytes(buf.getvalue())
    (out / "done").write_text("")
    return out


if __name__ == "__main__":
    main()
