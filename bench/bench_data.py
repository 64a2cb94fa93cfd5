"""Datasets: streaming from disk, decoding on the GPU, epochs (issue 30), measured in one run.

GPU machine (one call: the dataset is made here, then every row runs on it)::

    source bench/gpu_env.sh && python3 bench/bench_data.py gpu --baseline baseline/

CPU machine (the cpu backend against torchvision v2 + DataLoader(2 workers))::

    MILLIPYDE_BACKEND=cpu python3 bench/bench_data.py cpu

The dataset: ImageNet-like JPEGs, 500 x 375 (a quarter of them 375 x 500), quality 90, cut
from the scikit-image photographs (a random window of a randomly scaled, flipped and tinted
photograph per file), in ``--classes`` class folders; the same samples as WebDataset tar shards
(1000 samples per shard); and a flat folder of the first 1000 files for ``millipyde augment``.
It is made by a process pool over every core.

``host`` (any machine): the read-ahead alone over the files, samples a second and CPU time per
sample, each file read by Python or a run of files read in one call without the GIL
(``--read-paths``), with a thread timing GIL hand-overs beside the readers, and (``--model``)
the decode worker's loop with a stand-in for the decode call; against another commit's
``readahead.py`` (``--readahead FILE``).

Rows (``gpu``):

- ``decode``: nvImageCodec's full decode of the same bytes (read from the page cache into
  memory first, not timed) in batches of 256 on GPU 0: the decoder alone.
- ``folder``: ``Generator(folder, imagenet recipe, shuffle=True)`` -> ``batches(256,
  with_labels=True, mean, std)`` float32 NCHW, each batch and its labels taken by torch
  (``torch.as_tensor``) and reduced; img/s over ``--batches`` batches after a warm-up that
  compiles the kernels, and that rate as a share of ``decode``; host RSS and device memory
  (``torch.cuda.mem_get_info``) at the start and end of the timed window.
- ``shards``: the same from the tar shards.
- ``rank1`` / ``ranks4``: one process per GPU (``CUDA_VISIBLE_DEVICES``, 16 cores each),
  ``Generator(rank=r, world_size=N)``, their timed windows started together; the summed rate.
- ``coco``: ``data.Coco`` over the first 2000 files with 1-3 synthetic boxes and polygon
  masks each, through detection-style method Operations (random affine always, flip p = 0.5,
  random saturation always: two coin patterns to compile), batches of 64 resized to 384 x 384
  with their targets (boxes, labels, masks): the per-output path that targets take.
- ``augment``: ``millipyde augment DIR -n 1000 --recipe imagenet`` (PNG) over the 1000-file
  folder, this tree against ``--baseline`` (a checkout of 7c57e62), each after a warm-up run of
  64 outputs that compiles its kernels; the rate each prints, and the command's wall time.

The recipe is ``millipyde.training.recipes.operations("imagenet")``: random resized crop 224, flip
p = 0.5, brightness/contrast/saturation factors in [0.6, 1.4] and hue in [-0.1, 0.1], each
p = 0.8, then ``normalize`` (ImageNet mean and std) in the batch conversion.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field",
          "immunohistochemistry", "retina")
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f} s] {msg}", flush=True)


# ---------------------------------------------------------------------------- the dataset

_photos: list = []


def _load_photos() -> None:
    import skimage.data
    from PIL import Image

    for name in PHOTOS:
        try:
            a = getattr(skimage.data, name)()
        except Exception:  # one that needs a download
            continue
        if a.ndim == 3 and a.shape[2] == 3:
            img = Image.fromarray(a)
            # at most ~1.3x the largest cut, so cutting a window costs little
            f = min(img.width, img.height) / 650
            if f > 1:
                img = img.resize((round(img.width / f), round(img.height / f)), Image.BILINEAR)
            _photos.append(img)


def _make_files(args: tuple) -> int:
    """Write files ``lo .. hi-1``; their bytes in all."""
    root, lo, hi, classes = args
    from PIL import Image

    if not _photos:
        _load_photos()
    total = 0
    for i in range(lo, hi):
        rng = np.random.default_rng(i)
        photo = _photos[i % len(_photos)]
        w, h = (500, 375) if rng.random() < 0.75 else (375, 500)
        # a window of the photograph (at most all of it, at least ~1/2 of each side) scaled
        # to w x h: every file another cut
        f = min(photo.width / w, photo.height / h) * rng.uniform(0.55, 1.0)
        cw, chh = w * f, h * f
        x0 = rng.uniform(0, photo.width - cw)
        y0 = rng.uniform(0, photo.height - chh)
        img = photo.resize((w, h), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + chh))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        gains = rng.uniform(0.8, 1.2, 3)  # a tint: per-channel gains through one table
        lut = np.concatenate([np.clip(np.arange(256) * g, 0, 255) for g in gains])
        img = img.point(lut.astype(np.uint8).tolist())
        d = Path(root) / f"n{i % classes:05d}"
        d.mkdir(exist_ok=True)
        p = d / f"{i:07d}.JPEG"
        img.save(p, "JPEG", quality=90)
        total += p.stat().st_size
    return total


def _make_shard(args: tuple) -> int:
    """Tar shard of the files ``members`` (``key.jpg`` + ``key.cls``)."""
    path, members = args
    with tarfile.open(path, "w") as tf:
        for f, label in members:
            key = Path(f).stem
            tf.add(f, arcname=f"{key}.jpg")
            data = f"{label}\n".encode()
            ti = tarfile.TarInfo(f"{key}.cls")
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return len(members)


def make_dataset(work: Path, files: int, classes: int, per_shard: int = 1000) -> dict:
    """The folder, the shards and the 1000-file folder under ``work`` (made once)."""
    folder, shards, small = work / "folder", work / "shards", work / "aug1000"
    done = work / "done.json"
    if done.exists():
        return json.loads(done.read_text())
    shutil.rmtree(work, ignore_errors=True)
    folder.mkdir(parents=True)
    shards.mkdir()
    small.mkdir()
    cores = os.cpu_count() or 1
    t = time.perf_counter()
    step = max(1, files // (cores * 8))
    jobs = [(str(folder), lo, min(files, lo + step), classes) for lo in range(0, files, step)]
    with ProcessPoolExecutor(cores) as pool:
        nbytes = sum(pool.map(_make_files, jobs))
    t_files = time.perf_counter() - t
    import millipyde.data as mdata

    src = mdata.Folder(folder)
    t = time.perf_counter()
    order = np.random.default_rng(0).permutation(len(src))  # shards hold shuffled samples
    members = [(str(src.paths[i]), int(src.labels[i])) for i in order]
    jobs = [(str(shards / f"train-{s:05d}.tar"), members[s * per_shard:(s + 1) * per_shard])
            for s in range(-(-len(members) // per_shard))]
    with ProcessPoolExecutor(cores) as pool:
        list(pool.map(_make_shard, jobs))
    t_shards = time.perf_counter() - t
    for i in range(min(1000, len(src))):
        os.link(src.paths[i], small / f"{i:04d}.JPEG")
    info = {"files": len(src), "classes": len(src.classes), "bytes": nbytes,
            "mean_kb": nbytes / len(src) / 1024, "shards": len(jobs),
            "seconds_files": t_files, "seconds_shards": t_shards, "folder": str(folder),
            "shards_glob": str(shards / "train-*.tar"), "aug1000": str(small)}
    done.write_text(json.dumps(info))
    return info


# ---------------------------------------------------------------------------- measurements


def rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def device_used_mb() -> float:
    import torch

    if not torch.cuda.is_available():
        return float("nan")
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**20


def _blobs(src: Any, n: int) -> list[bytes]:
    """``n`` samples' bytes of ``src`` in a fixed shuffled order, its files cycled where ``n``
    exceeds them (each read once)."""
    pick = np.random.default_rng(1).permutation(len(src))[:n]
    blobs = [src.read(int(i)) for i in pick]
    return [blobs[k % len(blobs)] for k in range(n)]


def decode_alone(folder: str, batches: int, size: int = 256, on_stream: bool | str = False,
                 readers: int = 0, busy: float = 0.0, switch: float | None = None) -> dict:
    """nvImageCodec's decode of bytes in memory, batches of ``size`` (GPU 0).

    ``on_stream``: onto a stream of its own (``cuda_stream=``, as the loader decodes: its
    images then come from ``cudaMallocAsync`` on it) instead of the legacy default one: True
    a torch stream (non-blocking), ``"blocking"`` numba-cuda's kind (the loader's default).
    ``readers``: meanwhile that many read-ahead threads read the folder's files, their bytes
    taken and dropped by another thread (the Python beside the decode call in the pipeline).
    ``busy``: meanwhile a thread runs Python (holding the GIL but for the interpreter's
    switches) that share of the time, in 18 ms turns (the batch worker's ~19 ms a batch).
    ``switch``: the interpreter's switch interval during the timed batches (the loader's
    0.2 ms; else CPython's, 5 ms).
    """
    import itertools
    import threading

    import torch
    from nvidia import nvimgcodec

    import millipyde.data as mdata
    from millipyde.data.decode import decode_threads
    from millipyde.data.readahead import ReadAhead

    src = mdata.Folder(folder)
    blobs = _blobs(src, (batches + 2) * size)
    dec = nvimgcodec.Decoder(device_id=0, max_num_cpu_threads=decode_threads())
    params = nvimgcodec.DecodeParams(apply_exif_orientation=True,
                                     color_spec=nvimgcodec.ColorSpec.SRGB)
    if on_stream == "blocking":  # the loader's kind: numba-cuda's, ordered with stream 0
        from millipyde.backend import ACTIVE as runtime
        from millipyde.backend.pool import stream_handle

        nstream = runtime.new_stream(0)
        handle = stream_handle(nstream)
    else:  # torch's streams do not wait for the legacy default stream
        stream = torch.cuda.Stream() if on_stream else None
        handle = stream.cuda_stream if stream is not None else 0

    def run(b: int) -> list:
        part = blobs[b * size:(b + 1) * size]
        return dec.decode([nvimgcodec.CodeStream(d) for d in part], params=params,
                          cuda_stream=handle)

    for b in range(2):
        got = run(b)
    torch.cuda.synchronize()
    assert all(g is not None for g in got), "nvImageCodec failed on a JPEG of the dataset"
    stop = threading.Event()
    taker = None
    if readers:
        plan = itertools.cycle(np.random.default_rng(2).permutation(len(src)).tolist())
        ra = ReadAhead(src, plan, threads=readers)

        def take() -> None:
            while not stop.is_set():
                ra.take_many(256)

        taker = threading.Thread(target=take, daemon=True)
        taker.start()
        time.sleep(0.2)
    spinner = busy_thread(busy, stop) if busy else None
    saved_switch = sys.getswitchinterval()
    if switch is not None:
        sys.setswitchinterval(switch)
    t = time.perf_counter()
    for b in range(2, batches + 2):
        got = run(b)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t
    sys.setswitchinterval(saved_switch)
    stop.set()
    if spinner is not None:
        spinner.join(5)
    if taker is not None:
        taker.join(5)
        ra.close()
    del got
    return {"rate": batches * size / dt, "batches": batches, "size": size,
            "on_stream": on_stream, "readers": readers, "busy": busy, "switch": switch,
            "mean_kb": sum(map(len, blobs)) / len(blobs) / 1024}


def decode_alone_lanes(folder: str, batches: int, lanes: int, size: int = 256,
                       region: bool = False, segments: bool = True) -> dict:
    """The C-API decoder (``decode.NvImageCodecCDecoder``, the compiled loop) decoding bytes
    in memory, batches of ``size`` on GPU 0, in ``lanes`` threads, each with its own decoder
    and stream, lane ``j`` decoding batches ``j``, ``j + lanes``, ... (the Loader's decode
    lanes without the read-ahead): what the decoder can do with one lane or several.
    ``region``: each sample decoded only in the ImageNet recipe's window of output ``k``
    (sample ``k`` of the folder, seed 0: ``data.region``), as the Loader asks for it; the
    share of pixels decoded reported. ``segments``: each timed call's segments
    (``data.laps``, as a Loader's lane calls are timed) summed in ``segments``. A batch laid
    out in one allocation (``decode.LazyImages``) is counted from its layout, its images not
    made (the Loader's batch engine reads the layout so)."""
    import threading

    import millipyde.data as mdata
    from millipyde.backend import ACTIVE as runtime
    from millipyde.data.decode import NvImageCodecCDecoder, PillowDecoder, decode_threads
    from millipyde.data.laps import Laps
    from millipyde.training.recipes import operations
    from millipyde.training.region_plan import plan_of

    src = mdata.Folder(folder)
    blobs = _blobs(src, (batches + 2 * lanes) * size)
    decs = [NvImageCodecCDecoder(0, PillowDecoder(0, decode_threads())) for _ in range(lanes)]
    streams = [runtime.take_stream(0) for _ in range(lanes)]
    bad: list = []
    plan = plan_of(operations("imagenet"), 0) if region else None
    px = np.zeros((lanes, 2), np.int64)  # per lane: pixels decoded, pixels of the samples
    seg: dict = {}  # the timed calls' segments (Laps.into)
    seg_lock = threading.Lock()

    def run(j: int, bs: range, timed: bool = True) -> None:
        with runtime.on_device(0), runtime.using_stream(streams[j]):
            for b in bs:
                kw: dict = {}
                if plan is not None:
                    ks = np.arange(b * size, (b + 1) * size, dtype=np.int64)
                    regions = np.full((size, 4), -1, np.int64)
                    kw = {"boxes": plan.rows(ks),
                          "regions": regions}
                laps = Laps() if segments and timed else None
                if laps is not None:
                    kw["laps"] = laps
                got = decs[j].decode(blobs[b * size:(b + 1) * size], lambda r: f"#{r}",
                                     streams[j], **kw)
                if laps is not None:
                    with seg_lock:
                        laps.into(seg)
                lay = getattr(got, "layout", None)
                if lay is not None:  # every row decoded: sizes from the layout, no image made
                    d = lay[2][:, 0] * lay[2][:, 1]
                    px[j, 0] += int(d.sum())
                    px[j, 1] += int(np.where(regions[:, 0] >= 0, regions[:, 2] * regions[:, 3],
                                             d).sum() if kw else d.sum())
                    continue
                bad.extend(g for g in got if isinstance(g, BaseException))
                for r, g in enumerate(got):
                    if isinstance(g, BaseException):
                        continue
                    h, w = g.shape[:2]
                    px[j, 0] += h * w
                    px[j, 1] += int(regions[r, 2] * regions[r, 3]) if kw and \
                        regions[r, 0] >= 0 else h * w
            runtime.synchronize(0)

    for j in range(lanes):  # each decoder's first batch starts its machinery
        run(j, range(batches + j, batches + j + 1), timed=False)
    t = time.perf_counter()
    threads = [threading.Thread(target=run, args=(j, range(j, batches, lanes)))
               for j in range(lanes)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    dt = time.perf_counter() - t
    for d in decs:
        d.close()
    for st in streams:
        runtime.give_stream(st)
    if bad:
        raise RuntimeError(f"{len(bad)} images failed: {bad[0]!r}")
    share = float(px[:, 0].sum() / max(1, px[:, 1].sum()))
    return {"rate": batches * size / dt, "batches": batches, "size": size, "lanes": lanes,
            "region": bool(region), "region_share": share if region else None,
            "segments": seg}


def busy_thread(busy: float, stop: Any, turn: float = 0.018, gaps: list | None = None,
                gap_s: float = 2e-5) -> Any:
    """A started daemon thread that runs Python (holding the GIL but for the interpreter's
    switches) ``busy`` of the time, in ``turn``-second turns (the batch worker's ~19 ms a
    batch), until ``stop`` (a ``threading.Event``) is set: the Python beside a decode call in
    the pipeline. ``gaps``: a one-item list counting the stalls of over ``gap_s`` inside its
    turns (each a time another thread took the GIL from it: a GIL hand-over)."""
    import threading

    def spin() -> None:
        stalls = 0
        while not stop.is_set():
            now = time.perf_counter()
            end = now + turn
            while now < end:
                last, now = now, time.perf_counter()
                if now - last > gap_s:
                    stalls += 1
            if gaps is not None:
                gaps[0] = stalls
            time.sleep(turn * (1 - busy) / busy)

    t = threading.Thread(target=spin, daemon=True, name="busy-half")
    t.start()
    return t


def stream_rate(source: str, batches: int, warmup: int, size: int = 256, rank: int = 0,
                world: int = 1, barrier: str | None = None,
                read_threads: int | None = None, decode_process: bool | None = None,
                nogil_reads: bool | None = None, hold_readers: bool | None = None,
                switch: float | None = None, nvimgcodec_api: str | None = None,
                parse_in_readers: bool | None = None,
                capi_compiled: bool | None = None, lanes: int | None = None,
                in_place: bool | None = None, region_on: bool | None = None) -> dict:
    """img/s of the recipe's float32 NCHW batches from ``source`` taken by torch
    (``read_threads``: the read-ahead's threads, else the default; ``decode_process``: read
    and decode in a worker process, or in this one, else the default; ``nogil_reads``: a
    folder's files read a run at a time without the GIL, or by Python per file;
    ``hold_readers``: the readers held back during the decode call; ``switch``: the
    loading process's switch interval (``loader.SWITCH_INTERVAL``); ``nvimgcodec_api``:
    ``"python"`` or ``"c"`` (``decode.NVIMGCODEC_API``); ``parse_in_readers``:
    ``loader.PARSE_IN_READERS``; ``capi_compiled``: the C API's compiled loop or its ctypes
    loop (``decode.CAPI_COMPILED``); ``lanes``: ``loader.DECODE_LANES``; ``in_place``: a
    decoded batch's allocation as its arena (``batch_stream.ARENA_IN_PLACE``); ``region_on``:
    region decoding (``training.region_plan.ENABLED``); else the
    defaults, ``millipyde.data.fileread.ENABLED``, ``loader``'s and ``decode``'s, restored
    after the row)."""
    from millipyde.data import decode as dmod
    from millipyde.data import fileread
    from millipyde.data import loader as lmod
    from millipyde.training import batch_stream
    from millipyde.training import region_plan as region

    # (module, setting, value asked for): each set where given, all restored after the row
    settings = [(fileread, "ENABLED", nogil_reads), (lmod, "HOLD_READERS", hold_readers),
                (lmod, "SWITCH_INTERVAL", switch), (dmod, "NVIMGCODEC_API", nvimgcodec_api),
                (lmod, "PARSE_IN_READERS", parse_in_readers),
                (dmod, "CAPI_COMPILED", capi_compiled), (lmod, "DECODE_LANES", lanes),
                (batch_stream, "ARENA_IN_PLACE", in_place), (region, "ENABLED", region_on)]
    saved = [(mod, name, getattr(mod, name)) for mod, name, _ in settings]
    try:
        for mod, name, value in settings:
            if value is not None:
                setattr(mod, name, value)
        out = _stream_rate(source, batches, warmup, size, rank, world, barrier, read_threads,
                           decode_process)
        out["nogil_reads"], out["hold_readers"] = fileread.ENABLED, lmod.HOLD_READERS
        out["switch_interval"] = lmod.SWITCH_INTERVAL
        out["nvimgcodec_api"] = dmod.nvimgcodec_api()
        out["parse_in_readers"] = lmod.PARSE_IN_READERS
        out["capi_compiled"] = dmod.CAPI_COMPILED
        out["decode_lanes"] = lmod.DECODE_LANES
        out["arena_in_place"] = batch_stream.ARENA_IN_PLACE
        out["region"] = region.ENABLED
        px = out["loader"].get("px_whole") or 0
        out["region_share"] = out["loader"].get("px_regions", 0) / px if px else None
    finally:
        for mod, name, value in saved:
            setattr(mod, name, value)
    return out


def _stream_rate(source: str, batches: int, warmup: int, size: int, rank: int, world: int,
                 barrier: str | None, read_threads: int | None,
                 decode_process: bool | None) -> dict:
    import torch

    import millipyde as mp
    from millipyde.torch import to_tensor
    from millipyde.training.recipes import operations

    t = time.perf_counter()
    gen = mp.Generator(source, operations("imagenet"), shuffle=True, seed=0,
                       decode_process=decode_process,
                       **({"rank": rank, "world_size": world} if world > 1 else {}))
    t_open = time.perf_counter() - t
    if read_threads is not None:
        gen._stream.read_threads = read_threads
    cuda = torch.cuda.is_available()
    acc = torch.zeros((), device="cuda" if cuda else "cpu")
    with gen.batches(size, with_labels=True, mean=MEAN, std=STD) as bs:
        t = time.perf_counter()
        for _ in range(warmup):
            x, y = next(bs)
            acc += to_tensor(x).mean() + to_tensor(y).sum()
        if cuda:
            torch.cuda.synchronize()
        t_warm = time.perf_counter() - t
        if barrier is not None:
            _barrier(barrier, rank, world)
        warm = dict(bs._loader.stats)  # the timed batches' lane calls: the rest (segments)
        rss0, dev0 = rss_mb(), device_used_mb()
        proc = getattr(bs._loader, "_proc", None)  # a decode worker process: its memory too
        wrss0 = rss_mb(proc.pid) if proc is not None else None
        start = time.time()
        t = time.perf_counter()
        for _ in range(batches):
            x, y = next(bs)
            acc += to_tensor(x).mean() + to_tensor(y).sum()
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t
        rss1, dev1 = rss_mb(), device_used_mb()
        wrss = None if proc is None else [wrss0, rss_mb(proc.pid)]
        dec = bs._loader.decoder
        counts = bs._loader.decoded() if hasattr(bs._loader, "decoded") else \
            (getattr(dec, "on_gpu", None), getattr(dec, "on_host", None))
        # where the time of the whole run went (warm-up included): the decode thread's waits
        # for bytes, its decode calls and the rest; the batch worker's time on streamed
        # batches; the consumer's waits
        load, made = dict(bs._loader.stats), dict(bs.stats)
        timed = {k: v - warm.get(k, 0) for k, v in load.items() if isinstance(v, int | float)}
        out = {"rate": batches * size / dt, "batches": batches, "size": size,
               "open_s": t_open, "warmup_s": t_warm, "warmup_batches": warmup,
               "rss_mb": [rss0, rss1], "device_mb": [dev0, dev1],
               "rss_growth_mb": rss1 - rss0, "device_growth_mb": dev1 - dev0,
               "decoder": dec.name, "on_gpu": counts[0], "on_host": counts[1],
               "read_peak_mb": bs._loader.reader.peak / 2**20,
               "reader_nogil_reads": getattr(bs._loader.reader, "nogil_reads", None),
               "bad": len(gen.bad_samples), "start": start, "end": start + dt,
               "samples": len(gen.source), "check": float(acc), "loader": load,
               "loader_timed": timed,
               "batches_stats": made, "decode_process": gen._stream.decode_process,
               "worker_rss_mb": wrss}
    gen.close()
    return out


def coco_rate(folder: str, work: Path, images: int, batches: int, size: int = 64) -> dict:
    """The COCO source (synthetic boxes and polygon masks on the dataset's first files)
    through the detection recipe's method Operations, batches with targets."""
    import millipyde as mp
    import millipyde.data as mdata

    src = mdata.Folder(folder)
    rng = np.random.default_rng(2)
    doc: dict = {"images": [], "annotations": [],
                 "categories": [{"id": c, "name": f"c{c}"} for c in range(1, 81)]}
    for i in range(min(images, len(src))):
        rel = os.path.relpath(src.paths[i], folder)
        h, w = (375, 500) if i % 4 else (500, 375)
        doc["images"].append({"id": i, "file_name": rel, "height": h, "width": w})
        for _ in range(int(rng.integers(1, 4))):
            x0, y0 = rng.uniform(0, w - 60), rng.uniform(0, h - 60)
            bw, bh = rng.uniform(30, min(200, w - x0)), rng.uniform(30, min(200, h - y0))
            poly = [x0, y0, x0 + bw, y0, x0 + bw, y0 + bh, x0, y0 + bh]
            doc["annotations"].append({"image_id": i, "bbox": [x0, y0, bw, bh],
                                       "category_id": int(rng.integers(1, 81)),
                                       "segmentation": [poly]})
    ann = work / "coco.json"
    ann.write_text(json.dumps(doc))
    # every op but the flip always on: two coin patterns, so two chains compile (on
    # 2026-11-28 the run ended in this row without a Python traceback: not measured)
    ops = [mp.Operation("random_affine", 10, (0.1, 0.1), (0.9, 1.1)),
           mp.Operation("fliplr", probability=0.5),
           mp.Operation("random_saturation", 0.6, 1.4)]
    gen = mp.Generator(mdata.Coco(folder, ann), ops, shuffle=True, seed=0)
    with gen.batches(size, with_targets=True, shape=(384, 384), mean=MEAN, std=STD) as bs:
        t = time.perf_counter()
        x, targets = next(bs)
        t_first = time.perf_counter() - t
        t = time.perf_counter()
        boxes = masks = 0
        for _ in range(batches):
            x, targets = next(bs)
            boxes += sum(len(tg.boxes) for tg in targets)
            masks += sum(tg.mask is not None and tg.mask.shape == (384, 384) for tg in targets)
        dt = time.perf_counter() - t
    gen.close()
    return {"rate": batches * size / dt, "first_s": t_first, "batches": batches, "size": size,
            "boxes": boxes, "masks": masks, "shape": list(x.shape)}


def _barrier(directory: str, rank: int, world: int) -> None:
    Path(directory, f"ready{rank}").touch()
    deadline = time.monotonic() + 300
    while sum(Path(directory, f"ready{r}").exists() for r in range(world)) < world:
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: the other ranks never got ready")
        time.sleep(0.001)


def run_ranks(source: str, n: int, batches: int, warmup: int, cores_each: int) -> list[dict]:
    """``n`` rank processes, one GPU and ``cores_each`` cores each, timed together."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        procs = []
        for r in range(n):
            cores = ",".join(str(c) for c in range(r * cores_each, (r + 1) * cores_each))
            cmd = [sys.executable, __file__, "child", source, str(r), str(n), str(batches),
                   str(warmup), d, cores]
            procs.append(subprocess.Popen(cmd, env={**os.environ, "CUDA_VISIBLE_DEVICES": str(r)},
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        got = []
        for r, p in enumerate(procs):
            out, err = p.communicate(timeout=400)
            lines = [x for x in out.strip().splitlines() if x.startswith("{")]
            if not lines:  # (its numbers, where it printed them, count: see child's exit)
                raise RuntimeError(f"rank {r} of {n} failed (exit {p.returncode}): "
                                   f"{err[-1500:]}")
            one = json.loads(lines[-1])
            one["exit"] = p.returncode
            got.append(one)
    return got


def run_augment(tree: Path, folder: str, out: Path, n: int, cache: Path | None,
                env: dict) -> dict:
    """``millipyde augment`` of the tree ``tree`` (``cache``: its own kernel cache, else this
    process's), wall time and the rate it prints."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "millipyde", "augment", folder, "-o", str(out), "-n", str(n),
           "--recipe", "imagenet", "-q"]
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(tree), "/tmp/site"])}
    if cache is not None:
        full["MILLIPYDE_CACHE_DIR"] = str(cache)
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=tree, env=full, capture_output=True, text=True, timeout=400)
    wall = time.perf_counter() - t
    if r.returncode:
        raise RuntimeError(f"augment in {tree} exited {r.returncode}: {r.stderr[-1500:]}")
    line = [x for x in r.stdout.splitlines() if "images/s" in x][-1]
    rate = float(line.rsplit(",", 1)[1].split()[0])
    written = len(list(out.glob("aug_*")))
    return {"rate": rate, "wall_s": wall, "written": written, "line": line}


# ---------------------------------------------------------------------------- gpu run


def _save(out: dict, args: argparse.Namespace) -> None:
    """The numbers so far, in ``--out`` (a run cut short still leaves them)."""
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"data_{args.mode}.json").write_text(json.dumps(out, indent=1))


def region_note(row: dict) -> str:
    """"regions hold 41.2% of the pixels" for a row with region decoding, else "whole"."""
    share = row.get("region_share")
    return "whole samples" if share is None else f"regions hold {100 * share:.1f}% of the pixels"


def region_ab(folder: str, size: int, rounds: int) -> list[dict]:
    """The recipe's epochs from ``folder`` with region decoding off (``whole``) and on
    (``region``), alternated ``rounds`` times (each Generator's first epoch compiles and is
    not timed): per epoch its img/s and the share of pixels its regions held."""
    import millipyde as mp
    from millipyde.training import region_plan as region
    from millipyde.training.recipes import operations

    saved = region.ENABLED
    rows = []
    try:
        for rnd in range(rounds):
            for on in ((False, True) if rnd % 2 == 0 else (True, False)):
                region.ENABLED = on
                gen = mp.Generator(folder, operations("imagenet"), shuffle=True, seed=0)
                for epoch in range(2):
                    gen.set_epoch(epoch)
                    t = time.perf_counter()
                    n, check = 0, 0.0
                    with gen.batches(size, with_labels=True, mean=MEAN, std=STD,
                                     epochs=1) as bs:
                        for x, _ in bs:
                            n += int(x.shape[0])
                            if epoch == 0:  # (untimed: the outputs of both, compared)
                                check += float(np.asarray(x, dtype=np.float64).sum())
                        st = {**bs._loader.stats, **bs.stats}
                    rate = n / (time.perf_counter() - t)
                    if epoch == 0:
                        sums = check
                if st["px_whole"]:
                    share = st["px_regions"] / st["px_whole"]
                else:
                    share = None
                row = {"round": rnd, "label": "region" if on else "whole", "rate": rate,
                       "share": share, "decode_s": st["decode_s"], "other_s": st["other_s"],
                       "make_s": st["make_s"], "wait_s": st["wait_s"],
                       "epoch0_sum": sums, "load": os.getloadavg()[0]}
                rows.append(row)
                log(f"round {rnd} {row['label']}: {rate:.1f} img/s, "
                    f"{region_note({'region_share': share})}, loader decode "
                    f"{st['decode_s']:.1f} s, rest {st['other_s']:.1f} s, batch worker "
                    f"{st['make_s']:.1f} s, consumer waited {st['wait_s']:.1f} s; epoch 0's "
                    f"sum {sums!r}; load {row['load']:.1f}")
                gen.close()
    finally:
        region.ENABLED = saved
    return rows


def laps_table(stats: dict, batches: int) -> str:
    """The lane calls' segments in ``stats`` as lines (``data.laps.table``), "" without."""
    from millipyde.data.laps import table

    return table(stats, batches)


def loop_of(row: dict) -> str:
    """" compiled loop" / " ctypes loop" for a row decoded through the C API, else ""."""
    if row.get("decoder") != "nvimgcodec-c":
        return ""
    return " compiled loop" if row.get("capi_compiled") else " ctypes loop"


def parse_rows(spec: str) -> list[tuple[str, str, bool | None, list[str]]]:
    """``--rows``: per row its name, source (folder, shards, decode), whether it decodes in a
    worker process, and its tags (``+pyread``, ``+nohold``, ``+nostock``: held readers read
    no stock ahead, ``loader.HOLD_STOCK_BATCHES`` 0; ``+sw20``: a 20 us switch
    interval where the Loader runs; ``+capi``: nvImageCodec through its C API,
    ``decode.NVIMGCODEC_API = "c"``; ``+parse``: code streams made in the read-ahead
    threads, ``loader.PARSE_IN_READERS``; ``+jit`` / ``+ctloop``: the C API's compiled loop
    or its ctypes loop, ``decode.CAPI_COMPILED``; ``+lanesN``: N decode lanes,
    ``loader.DECODE_LANES``; ``+packed``: decoded batches packed into a new arena,
    ``batch_stream.ARENA_IN_PLACE`` off; ``+region`` / ``+whole``: region decoding on / off,
    ``training.region_plan.ENABLED`` (the row reports the share of pixels its regions hold);
    ``decode+lanesN``: the C decoder alone in N lanes (``+region``: the recipe's windows),
    ``decode_alone_lanes``); ``+twopass``: with regions, their code streams made in a pass
    of their own (three GIL releases a batch), ``decode.REGIONS_IN_DECODE`` off; ``+parsepass``:
    with regions, every batch parsed in a pass before its decode pass (``decode.ONE_PASS``
    off; on, a batch that fits the allocation made before its parse takes one); ``+aheadN``:
    N decoded batches kept ready ahead of the consumer (``loader.AHEAD``); ``#k`` after
    a name tells a
    repeated row apart (``folder_worker#2``)."""
    out = []
    for name in spec.split(","):
        base, *tags = name.split("#")[0].split("+")
        counted = [t for t in tags if t[:5] in ("lanes", "ahead") and t[5:].isdigit()]
        if base == "decode":
            if set(tags) - {*counted, "region", "twopass", "parsepass"}:
                raise SystemExit(f"--rows: unknown row {name!r}")
            out.append((name, "decode", None, tags))
            continue
        src, label = base.split("_", 1)
        if src not in ("folder", "shards") or label not in ("worker", "in_process") or \
                set(tags) - {"pyread", "nohold", "nostock", "sw20", "capi", "parse", "jit",
                             "ctloop", "packed", "region", "whole", "twopass", "parsepass",
                             *counted}:
            raise SystemExit(f"--rows: unknown row {name!r}")
        out.append((name, src, label == "worker", tags))
    return out


def gpu(args: argparse.Namespace) -> dict:
    import torch

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    out: dict = {"date": time.strftime("%Y-%m-%d"), "gpus": gpus, "cores": os.cpu_count()}
    log(f"GPUs {out['gpus']}, {out['cores']} cores")
    if getattr(args, "segments", True):  # every lane call timed by segment (data.laps)
        from millipyde.data import loader as lmod

        lmod.SEGMENTS = True
        out["segments"] = True
    if getattr(args, "no_batched_copy", False):
        from millipyde.backend import cuda_memory as cm

        cm._BATCH[:] = [None]
        out["no_batched_copy"] = True
    work = Path(args.work)
    info = make_dataset(work, args.files, args.classes)
    out["dataset"] = info
    log(f"dataset: {info['files']} files ({info['mean_kb']:.1f} KB each), {info['classes']} "
        f"classes, {info['shards']} shards; files {info['seconds_files']:.1f} s, shards "
        f"{info['seconds_shards']:.1f} s")
    _save(out, args)
    baseline = None
    cores = out["cores"] or 1
    if args.baseline:
        # the baseline's augment runs meanwhile on the last GPU and the last cores
        bcores = list(range(max(0, cores - 8), cores))
        gpu_b = str(max(0, torch.cuda.device_count() - 1))
        script = (f"import json,sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                  f"from bench_data import run_augment; from pathlib import Path; "
                  f"w = run_augment(Path({args.baseline!r}), {info['aug1000']!r}, "
                  f"Path({str(work / 'aug_base_w')!r}), 64, Path({str(work / 'cache_base')!r}), "
                  f"{{}}); "
                  f"t = run_augment(Path({args.baseline!r}), {info['aug1000']!r}, "
                  f"Path({str(work / 'aug_base')!r}), {args.augment_n}, "
                  f"Path({str(work / 'cache_base')!r}), {{}}); "
                  f"print(json.dumps({{'warm': w, 'timed': t}}))")
        baseline = subprocess.Popen([sys.executable, "-c", script],
                                    env={**os.environ, "CUDA_VISIBLE_DEVICES": gpu_b},
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    preexec_fn=lambda: os.sched_setaffinity(0, bcores))
        os.sched_setaffinity(0, range(max(1, cores - 8)))
        log(f"baseline augment started on GPU {gpu_b}, cores {bcores}")
        _save(out, args)

    def decode_row() -> None:
        try:
            out["decode"] = decode_alone(info["folder"], args.decode_batches)
            log(f"decode alone: {out['decode']['rate']:.0f} img/s")
            _save(out, args)
        except Exception as err:
            out["decode"] = {"error": repr(err)}
            log(f"decode alone FAILED: {err!r}")
            _save(out, args)

    rows: list[tuple[str, str, int, bool | None]] = [
        ("folder", info["folder"], args.batches, None),
        ("shards", info["shards_glob"], args.shard_batches, None)]
    if args.rows:  # these rows in this order ("decode": decode alone)
        pick = {"folder": (info["folder"], args.batches),
                "shards": (info["shards_glob"], args.shard_batches)}
        rows = [(name, *pick[src][:2], worker) if src != "decode" else (name, "", 0, None)
                for name, src, worker, _ in parse_rows(args.rows)]
    else:
        decode_row()
    if args.paths == "both":  # in this process and in a worker process, alternated per round
        rows = []
        for rnd in range(args.paths_rounds):
            tag = f"_{rnd + 1}" if args.paths_rounds > 1 else ""
            pair = ((False, "in_process"), (True, "worker"))
            for worker, label in pair if rnd % 2 == 0 else pair[::-1]:
                rows += [(f"folder_{label}{tag}", info["folder"], args.batches, worker),
                         (f"shards_{label}{tag}", info["shards_glob"], args.shard_batches,
                          worker)]
    from millipyde.data import loader as lmod_rows

    stock = lmod_rows.HOLD_STOCK_BATCHES  # (the rows' default; +nostock: none)
    ahead = lmod_rows.AHEAD
    for name, src, nb, worker in rows:
        if time.perf_counter() - T0 > args.budget - 25:
            log(f"{name}: skipped (budget)")
            continue
        if name.split("#")[0] == "decode":
            decode_row()
            continue
        tags = name.split("#")[0].split("+")[1:]
        lanes = next((int(t[5:]) for t in tags if t.startswith("lanes")), None)
        from millipyde.data import decode as dmod_rows

        dmod_rows.REGIONS_IN_DECODE = "twopass" not in tags
        dmod_rows.ONE_PASS = "parsepass" not in tags
        lmod_rows.AHEAD = next((int(t[5:]) for t in tags if t.startswith("ahead")), ahead)
        lmod_rows.HOLD_STOCK_BATCHES = 0 if "nostock" in tags else stock
        if name.startswith("decode+"):
            try:
                out[name] = decode_alone_lanes(info["folder"], args.decode_batches,
                                               lanes or 1, region="region" in tags)
                log(f"{name}: C decoder alone in {lanes or 1} lane(s): "
                    f"{out[name]['rate']:.0f} img/s ({region_note(out[name])})")
                seg = out[name].get("segments")
                if seg:
                    log(f"  {name} calls by segment:\n"
                        f"{laps_table(seg, out[name]['batches'])}")
            except Exception as err:
                out[name] = {"error": repr(err)}
                log(f"{name} FAILED: {err!r}")
            _save(out, args)
            continue
        try:
            out[name] = stream_rate(src, nb, args.warmup, decode_process=worker,
                                    nogil_reads=False if "pyread" in tags else None,
                                    hold_readers=False if "nohold" in tags else None,
                                    switch=2e-5 if "sw20" in tags else None,
                                    nvimgcodec_api="c" if "capi" in tags else None,
                                    parse_in_readers=True if "parse" in tags else None,
                                    capi_compiled=True if "jit" in tags else
                                    False if "ctloop" in tags else None, lanes=lanes,
                                    in_place=False if "packed" in tags else None,
                                    region_on=True if "region" in tags else
                                    False if "whole" in tags else None)
            r = out[name]
            log(f"{name}: {r['rate']:.0f} img/s (nogil reads {r['reader_nogil_reads']}, held "
                f"{r['hold_readers']}, parsed in readers {r['parse_in_readers']}; "
                f"{r['decoder']}{loop_of(r)}: "
                f"{r['on_gpu']} on the GPU, "
                f"{r['on_host']} by Pillow; {region_note(r)}); open {r['open_s']:.1f} s, warm-up "
                f"{r['warmup_s']:.1f} s; RSS {r['rss_mb'][0]:.0f} -> {r['rss_mb'][1]:.0f} MB, "
                f"device {r['device_mb'][0]:.0f} -> {r['device_mb'][1]:.0f} MB")
            ld, bm = r["loader"], r["batches_stats"]
            log(f"  {name} time: decode thread over {ld['batches']} batches: decode "
                f"{ld['decode_s']:.2f} s, waiting for bytes {ld['read_wait_s']:.2f} s, rest "
                f"{ld['other_s']:.2f} s; batch worker {bm['make_s']:.2f} s; consumer waited "
                f"{bm['wait_s']:.2f} s")
            lt = r.get("loader_timed", {})
            seg = laps_table(lt, int(lt.get("batches", 0)))
            if seg:
                log(f"  {name} lane calls by segment, from the end of the warm-up:\n{seg}")
            _save(out, args)
        except Exception as err:
            out[name] = {"error": repr(err)}
            log(f"{name} FAILED: {err!r}")
            _save(out, args)
    lmod_rows.HOLD_STOCK_BATCHES = stock
    lmod_rows.AHEAD = ahead
    if args.variants:
        _variants(out, info, args)
    if args.readers:
        _readers_ab(out, info, args)
    if baseline is not None:
        try:
            bout, berr = baseline.communicate(timeout=max(10, args.budget - 60 -
                                                          (time.perf_counter() - T0)))
            if baseline.returncode:
                raise RuntimeError(berr[-1500:])
            out["augment_baseline"] = json.loads(bout.strip().splitlines()[-1])
            log(f"baseline augment: {out['augment_baseline']['timed']}")
            _save(out, args)
        except Exception as err:
            baseline.kill()
            out["augment_baseline"] = {"error": repr(err)}
            log(f"baseline augment FAILED: {err!r}")
            _save(out, args)
        os.sched_setaffinity(0, range(cores))
    n = min(args.ranks, max(1, torch.cuda.device_count()))
    each = max(1, cores // max(n, 1))
    if n > 1 and time.perf_counter() - T0 < args.budget - 120:
        for world in (1, n):
            try:
                got = run_ranks(info["folder"], world, args.rank_batches, args.warmup, each)
                out[f"ranks{world}"] = {"per_rank": got, "rate": sum(g["rate"] for g in got),
                                        "overlap_s": min(g["end"] for g in got) -
                                        max(g["start"] for g in got)}
                log(f"{world} rank(s): {out[f'ranks{world}']['rate']:.0f} img/s "
                    f"({[round(g['rate']) for g in got]})")
                _save(out, args)
            except Exception as err:
                out[f"ranks{world}"] = {"error": repr(err)}
                log(f"{world} rank(s) FAILED: {err!r}")
                _save(out, args)
    if args.baseline and time.perf_counter() - T0 < args.budget - 40:
        try:
            tree = Path(__file__).resolve().parent.parent
            # this tree's kernels are in this process's cache already (the rows above)
            w = run_augment(tree, info["aug1000"], work / "aug_new_w", 64, None, {})
            t = run_augment(tree, info["aug1000"], work / "aug_new", args.augment_n, None, {})
            out["augment"] = {"warm": w, "timed": t}
            log(f"augment: {t}")
            _save(out, args)
        except Exception as err:
            out["augment"] = {"error": repr(err)}
            log(f"augment FAILED: {err!r}")
            _save(out, args)
    if args.coco and time.perf_counter() - T0 < args.budget - 45:
        try:
            out["coco"] = coco_rate(info["folder"], work, 2000, args.coco)
            log(f"coco: {out['coco']}")
            _save(out, args)
        except Exception as err:
            out["coco"] = {"error": repr(err)}
            log(f"coco FAILED: {err!r}")
            _save(out, args)
    return out


def check_pack() -> dict:
    """The arena copies of a streamed batch in one driver call (``copy_addresses``) against
    the bytes copied: images of mixed sizes uploaded, packed, read back."""
    from numba.cuda.cudadrv import driver

    from millipyde.backend import ACTIVE as runtime
    from millipyde.backend import cuda_memory as cm

    before = dict(cm.COPY_BATCHES)
    rng = np.random.default_rng(3)
    imgs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            for h, w in ((375, 500), (500, 375), (7, 9), (224, 224))] * 64
    with runtime.on_device(0):
        stream = runtime.new_stream(0)
        with runtime.using_stream(stream):
            bufs = [runtime.from_host(a, 0) for a in imgs]
            sizes = np.array([a.size for a in imgs], np.uint64)
            offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.uint64)
            arena = runtime.empty((int(sizes.sum()),), np.uint8, 0)
            base = int(driver.device_pointer(arena))
            srcs = np.array([int(driver.device_pointer(b)) for b in bufs], np.uint64)
            t = time.perf_counter()
            runtime.copy_addresses(base + offs, srcs, sizes, 0)
            stream.synchronize()
            dt = time.perf_counter() - t
            got = arena.copy_to_host()
    want = np.concatenate([a.reshape(-1) for a in imgs])
    return {"equal": bool(np.array_equal(got, want)), "copies": len(imgs),
            "one_call": cm.COPY_BATCHES["one_call"] > before["one_call"], "seconds": dt}


def keep_pool(device: int = 0, nbytes: int = 4 << 30) -> int:
    """Raise the release threshold of ``device``'s default memory pool to ``nbytes`` (the
    pool ``cudaMallocAsync`` draws nvImageCodec's images from when it decodes onto a stream:
    at the default of 0 the pool gives its memory back at every synchronisation, and the
    next batch maps it again). The threshold before. A diagnostic: not the library's."""
    import ctypes

    lib = ctypes.CDLL("libcuda.so.1")
    pool = ctypes.c_void_p()
    rc = lib.cuDeviceGetDefaultMemPool(ctypes.byref(pool), ctypes.c_int(device))
    if rc:
        raise RuntimeError(f"cuDeviceGetDefaultMemPool failed with CUresult {rc}")
    attr = 4  # CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
    old = ctypes.c_uint64()
    rc = lib.cuMemPoolGetAttribute(pool, ctypes.c_int(attr), ctypes.byref(old))
    new = ctypes.c_uint64(nbytes)
    rc = rc or lib.cuMemPoolSetAttribute(pool, ctypes.c_int(attr), ctypes.byref(new))
    if rc:
        raise RuntimeError(f"cuMemPool attribute failed with CUresult {rc}")
    return int(old.value)


def _readers_ab(out: dict, info: dict, args: argparse.Namespace) -> None:
    """The folder row with each count of read-ahead threads in ``--readers``, the counts
    alternated over ``--readers-rounds`` rounds (drift of the machine shows in each count's
    spread); every rate kept."""
    counts = [int(c) for c in args.readers.split(",")]
    got: dict[int, list[float]] = {c: [] for c in counts}
    for rnd in range(args.readers_rounds):
        for c in (counts if rnd % 2 == 0 else counts[::-1]):
            if time.perf_counter() - T0 > args.budget - 10:
                break
            try:
                r = stream_rate(info["folder"], args.batches, args.warmup, read_threads=c)
                got[c].append(r["rate"])
                log(f"folder, {c} read threads, round {rnd}: {r['rate']:.0f} img/s")
            except Exception as err:
                log(f"folder, {c} read threads FAILED: {err!r}")
    out["readers_ab"] = {str(c): v for c, v in got.items()}
    _save(out, args)


def _variants(out: dict, info: dict, args: argparse.Namespace) -> None:
    """This tree only: decode alone on a (torch, non-blocking) stream, on a numba-cuda
    (blocking) stream, beside 8 and 2 read-ahead threads, and on a stream with the memory pool
    kept (:func:`keep_pool`, restored after); the folder row with 2 read-ahead threads, with
    one copy call per image into the arena, with CPython's 5 ms switch interval, with the
    decode stream non-blocking (``loader.NONBLOCKING_STREAM``), with the pool kept
    (``loader.POOL_KEEP_BYTES``), with both, with both and 2 readers; the arena copy check."""
    from millipyde.backend import cuda_memory as cm
    from millipyde.data import loader as lmod

    out["arena_copy_batches"] = dict(cm.COPY_BATCHES)
    log(f"arena copies of the rows above: {out['arena_copy_batches']}")
    try:
        out["pack_check"] = check_pack()
        log(f"arena copies in one call: {out['pack_check']}")
    except Exception as err:
        out["pack_check"] = {"error": repr(err)}
        log(f"pack check FAILED: {err!r}")
    sw = 0.0002  # the loader's switch interval
    for name, kw in (("decode_beside_8_readers", {"readers": 8, "switch": sw}),
                     ("decode_beside_2_readers", {"readers": 2, "switch": sw}),
                     ("decode_beside_busy_half", {"busy": 0.5, "switch": sw}),
                     ("decode_beside_busy_half_20us", {"busy": 0.5, "switch": 2e-5}),
                     ("decode_on_stream", {"on_stream": True}),
                     ("decode_beside_8_readers_busy_half",
                      {"readers": 8, "busy": 0.5, "switch": sw})):
        if time.perf_counter() - T0 > args.budget - 45:
            break
        try:
            out[name] = decode_alone(info["folder"], args.decode_batches, **kw)
            log(f"{name}: {out[name]['rate']:.0f} img/s")
        except Exception as err:
            out[name] = {"error": repr(err)}
            log(f"{name} FAILED: {err!r}")
        _save(out, args)
    kept = (lmod, "POOL_KEEP_BYTES", 4 << 30)
    free = (lmod, "NONBLOCKING_STREAM", True)
    fast = (lmod, "SWITCH_INTERVAL", 2e-5)
    for name, changes in (("folder_readers_not_held", ((lmod, "HOLD_READERS", False),)),
                          ("folder_2_readers", ()),
                          ("folder_switch_20us", (fast,)),
                          ("folder_nonblocking", (free,)),
                          ("folder_pool_kept", (kept,)),
                          ("folder_all_2_readers", (free, kept, fast)),
                          ("shards_all_2_readers", (free, kept, fast)),
                          ("folder_both", (free, kept)),
                          ("folder_switch_5ms", ((lmod, "SWITCH_INTERVAL", 0.005),)),
                          ("folder_copy_each", ((cm, "_BATCH", [None]),))):
        if time.perf_counter() - T0 > args.budget - 15:
            break
        saved = [(mod, attr, getattr(mod, attr)) for mod, attr, _ in changes]
        for mod, attr, value in changes:
            setattr(mod, attr, value)
        try:
            if name == "folder_pool_kept":
                # decode alone on a stream with the pool kept first (restored after)
                old = keep_pool(0)
                out["pool_threshold_before"] = old
                try:
                    out["decode_on_stream_pool_kept"] = decode_alone(
                        info["folder"], args.decode_batches, on_stream=True)
                finally:
                    keep_pool(0, old)
                log(f"decode on a stream, pool kept: "
                    f"{out['decode_on_stream_pool_kept']['rate']:.0f} img/s")
            shards = name.startswith("shards")
            out[name] = stream_rate(info["shards_glob" if shards else "folder"],
                                    args.shard_batches if shards else args.batches,
                                    args.warmup,
                                    read_threads=2 if name.endswith("_2_readers") else None)
            r, ld = out[name], out[name]["loader"]
            log(f"{name}: {r['rate']:.0f} img/s; decode {ld['decode_s']:.2f} s over "
                f"{ld['batches']} batches ({1000 * ld['decode_s'] / ld['batches']:.1f} ms "
                f"each), waiting for bytes {ld['read_wait_s']:.2f} s, worker "
                f"{r['batches_stats']['make_s']:.2f} s, consumer waited "
                f"{r['batches_stats']['wait_s']:.2f} s")
        except Exception as err:
            out[name] = {"error": repr(err)}
            log(f"{name} FAILED: {err!r}")
        finally:
            for mod, attr, value in saved:
                setattr(mod, attr, value)
        _save(out, args)


def table(out: dict) -> str:
    """The run's numbers as a table."""
    rows = [("row", "img/s", "note")]
    dec = out.get("decode", {}).get("rate")
    if dec:
        rows.append(("decode alone (nvImageCodec, 256)", f"{dec:.0f}", "bytes in memory"))
    for name in ("decode_on_stream", "decode_on_blocking_stream", "decode_beside_8_readers",
                 "decode_beside_2_readers", "decode_beside_busy_half",
                 "decode_beside_busy_half_20us", "decode_beside_8_readers_busy_half",
                 "decode_on_stream_pool_kept"):
        if "rate" in out.get(name, {}):
            rows.append((name, f"{out[name]['rate']:.0f}", ""))
    paired = sorted(x for x in out if x.startswith(("folder_in_process", "folder_worker",
                                                     "shards_in_process", "shards_worker")))
    for name in ("folder", "shards", *paired, "folder_2_readers", "folder_pool_kept",
                 "folder_parsed_in_readers",
                 "folder_parsed_in_readers_python_read", "folder_copy_each",
                 "folder_switch_5ms", "folder_nonblocking", "folder_both",
                 "folder_switch_20us", "folder_all_2_readers", "shards_all_2_readers",
                 "folder_readers_not_held"):
        r = out.get(name, {})
        if "rate" in r:
            share = f"{100 * r['rate'] / dec:.0f}% of decode" if dec else ""
            ld = r.get("loader", {})
            call = f"; decode call {1000 * ld['decode_s'] / ld['batches']:.1f} ms" \
                if ld.get("batches") else ""
            if ld.get("batches", 0) > 1 and "decode_first_s" in ld:
                rest = (ld["decode_s"] - ld["decode_first_s"]) / (ld["batches"] - 1)
                call += (f" ({1000 * rest:.1f} after the first, "
                         f"{1000 * ld['decode_first_s']:.0f})")
            rows.append((f"{name} -> recipe -> torch (256)", f"{r['rate']:.0f}",
                         f"{share}{call}; RSS +{r['rss_growth_mb']:.0f} MB, device "
                         f"+{r['device_growth_mb']:.0f} MB over {r['batches']} batches"))
        elif r:
            rows.append((name, "FAILED", r.get("error", "")[:60]))
    if "rate" in out.get("shards", {}) and "rate" in out.get("folder", {}):
        rows.append(("shards / folder", f"{out['shards']['rate'] / out['folder']['rate']:.3f}",
                     ""))
    for k in sorted(x for x in out if x.startswith("ranks")):
        r = out[k]
        if "rate" in r:
            each = [round(g["rate"]) for g in r["per_rank"]]
            rows.append((k, f"{r['rate']:.0f}", f"per rank {each}"))
    if "rate" in out.get("ranks1", {}) and "rate" in out.get("ranks4", {}):
        ratio = out["ranks4"]["rate"] / out["ranks1"]["rate"]
        rows.append(("4 ranks / 1 rank", f"{ratio:.2f}x", ""))
    c = out.get("coco", {})
    if "rate" in c:
        rows.append(("coco -> detection ops, targets (64)", f"{c['rate']:.0f}",
                     f"{c['boxes']} boxes, {c['masks']} masks; first batch {c['first_s']:.1f} s"))
    a, b = out.get("augment", {}).get("timed"), out.get("augment_baseline", {}).get("timed")
    if a:
        rows.append(("augment (this tree)", f"{a['rate']:.1f}", f"wall {a['wall_s']:.1f} s"))
    if b:
        rows.append(("augment (7c57e62)", f"{b['rate']:.1f}", f"wall {b['wall_s']:.1f} s"))
    if a and b:
        rows.append(("augment speed-up", f"{a['rate'] / b['rate']:.1f}x",
                     f"wall {b['wall_s'] / a['wall_s']:.1f}x"))
    for name in ("pillow_decode", "millipyde", "torchvision"):
        r = out.get(name)
        if r:
            rows.append((f"cpu: {name}", f"{r['rate']:.1f}", r.get("note", "")))
    if out.get("millipyde") and out.get("torchvision"):
        rows.append(("cpu: millipyde / torchvision",
                     f"{out['millipyde']['rate'] / out['torchvision']['rate']:.2f}x", ""))
    m = out.get("model") or {}
    for key in [f"{pre}{k}" for pre in ("", "shards_") for k in (
            "python_held", "nogil_held", "python_not_held", "nogil_not_held")]:
        r = m.get(key)
        if r:
            rows.append((f"model: {key.replace('_', ' ', 1)}, {r['threads']} readers",
                         f"{r['rate']:.0f}", f"decode stand-in {r['call_ms']:.2f} ms a batch "
                         f"(alone {m['call_alone_ms']:.2f}); take waits {r['wait_ms']:.2f} ms"))
    al = (out.get("alone") or {}).get("median_ms")
    for key, r in out.get("host", {}).items():
        path, nt = key.rsplit("_", 1)
        ho = f"; {out['handovers']} GIL hand-overs beside them {r['handovers_ms']:.2f} ms " \
             f"(alone {al:.2f})" if "handovers_ms" in r and al else ""
        rows.append((f"host: {path} reads, {nt} readers (samples/s)", f"{r['rate']:.0f}",
                     f"median {r['rate_median']:.0f}; CPU {r['cpu_us_per_sample']:.1f} us a "
                     f"sample (median {r['cpu_us_median']:.1f}, system {r['sys_us_median']:.1f})"
                     f"; readers' user CPU (Python, the GIL held) {r['readers_user_us']:.1f} "
                     f"us a sample, system {r['readers_sys_us']:.1f}; taker "
                     f"{r['taker_cpu_ms_per_batch']:.2f} ms CPU a batch of 256{ho}"))
    w = [max(len(str(r[i])) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]}" for r in rows)


# ---------------------------------------------------------------------------- cpu run


def cpu(args: argparse.Namespace) -> dict:
    """The recipe on the cpu backend against torchvision v2 + DataLoader(2 workers)."""
    import millipyde as mp
    from millipyde.training.recipes import operations

    work = Path(args.work)
    info = make_dataset(work, args.files, args.classes)
    out: dict = {"dataset": info, "cores": os.cpu_count(), "backend": mp.backend()}
    log(f"dataset: {info['files']} files in {info['classes']} classes")
    if args.region_ab:
        out["region_ab"] = region_ab(info["folder"], args.size, args.region_ab)
        return out
    import torch
    size = args.size
    # the bound: Pillow's decode alone, on the threads the cpu backend decodes with
    from millipyde.data.decode import PillowDecoder, decode_threads

    src = mp.data.Folder(info["folder"])
    blobs = [src.read(i) for i in range(len(src))]
    dec = PillowDecoder(0)
    rates = []
    for _ in range(args.epochs):
        t = time.perf_counter()
        for b in range(0, len(blobs), size):
            dec.decode(blobs[b:b + size], lambda r: "sample")
        rates.append(len(blobs) / (time.perf_counter() - t))
    dec.close()
    out["pillow_decode"] = {"rate": max(rates), "runs": rates, "threads": decode_threads(),
                            "note": "Pillow decode alone, bytes in memory"}
    log(f"Pillow decode alone ({decode_threads()} threads): {rates}")
    gen = mp.Generator(info["folder"], operations("imagenet"), shuffle=True, seed=0)
    rates, cpus = [], []
    for epoch in range(args.epochs + 1):  # epoch 0 compiles
        gen.set_epoch(epoch)
        c0 = _cpu_seconds([])
        t = time.perf_counter()
        n = 0
        with gen.batches(size, with_labels=True, mean=MEAN, std=STD, epochs=1) as bs:
            for x, y in bs:
                xt = torch.from_dlpack(x)
                torch.from_dlpack(y)
                n += xt.shape[0]
            split = {**bs._loader.stats, **bs.stats}
        rates.append(n / (time.perf_counter() - t))
        cpus.append(1000 * (_cpu_seconds([]) - c0) / n)
        log(f"millipyde epoch {epoch}: {rates[-1]:.1f} img/s, {cpus[-1]:.2f} ms CPU an image; "
            f"decode thread "
            f"{split['decode_s']:.1f} s in Pillow over {split['batches']} batches, batch "
            f"worker {split['make_s']:.1f} s, consumer waited {split['wait_s']:.1f} s")
    out["millipyde_split"] = split
    out["millipyde"] = {"rate": max(rates[1:]), "epochs": rates, "cpu_ms": cpus,
                        "note": f"best of {args.epochs} warm epochs"}
    gen.close()
    from torchvision import datasets
    from torchvision.transforms import v2

    tf = v2.Compose([v2.RandomResizedCrop(224), v2.RandomHorizontalFlip(),
                     v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
                     v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True),
                     v2.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(info["folder"], transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=size, shuffle=True, num_workers=2,
                                         persistent_workers=True)
    rates, cpus = [], []
    for epoch in range(args.epochs + 1):  # epoch 0 starts the workers
        # (the workers persist: from epoch 1 on, their CPU time is counted with the process's)
        it = getattr(loader, "_iterator", None)
        pids = [w.pid for w in getattr(it, "_workers", [])]
        c0 = _cpu_seconds(pids)
        t = time.perf_counter()
        n = sum(x.shape[0] for x, _ in loader)
        rates.append(n / (time.perf_counter() - t))
        cpus.append(1000 * (_cpu_seconds(pids) - c0) / n if pids else float("nan"))
        log(f"torchvision epoch {epoch}: {rates[-1]:.1f} img/s, {cpus[-1]:.2f} ms CPU an image "
            f"(the process and its {len(pids)} workers)")
    out["torchvision"] = {"rate": max(rates[1:]), "epochs": rates, "cpu_ms": cpus,
                          "note": f"DataLoader(2 workers), best of {args.epochs} warm epochs"}
    return out


def _cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user and system, every thread) of this process and of ``pids`` (the
    DataLoader's workers, read from ``/proc``): what an image costs, which the other jobs on
    a shared machine move much less than the rate."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    total = r.ru_utime + r.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def host(args: argparse.Namespace) -> dict:
    """The read path alone over the dataset's files (page cache): samples a second, CPU
    seconds (all threads) per 1000 samples, and the taking thread's CPU and wall per batch
    (the decode thread's share before its decode call), taking batches of 256 as the decode
    thread does. ``--readahead FILE`` loads another ``readahead.py`` (an earlier commit's).

    ``--read-paths python,nogil``: rows with each file read by Python, and with runs of
    files read in one call that holds no GIL (``millipyde.data.fileread``), alternated per
    repeat, with ``--threads`` readers each; ``--pace``: the taker takes at that rate.
    Unless ``--no-gil``, each row runs twice, the second time beside a thread timing blocks
    of ``--handovers`` GIL hand-overs (as nvImageCodec's decode call makes about two an
    image), against the same blocks alone. ``--model``: :func:`_decode_model`.

    ``--parse``: what is done per sample for nvImageCodec (needs it installed; no GPU):
    ``none`` bytes only; ``taker`` bytes read by the readers, then parsed in the taking thread
    as the decode thread did up to 81bda28 (``CodeStream(bytes)`` and its properties);
    ``readers`` parsed in the reader threads, files mapped by nvImageCodec
    (``decode.nvimgcodec_reader``); ``readers-python`` the same, files read by Python."""
    import importlib.util

    import millipyde.data as mdata

    work = Path(args.work)
    info = make_dataset(work, args.files, args.classes)
    sources = {"folder": mdata.Folder(info["folder"])}
    if "shards" in args.sources.split(","):
        sources["shards"] = mdata.Shards(info["shards_glob"])
    src = sources["folder"]
    mod = None
    if args.readahead:
        spec = importlib.util.spec_from_file_location("readahead_other", args.readahead)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    else:
        from millipyde.data import readahead as mod
    read = None
    nv = None
    if args.parse != "none":
        from millipyde.data import decode as dmod

        nv = dmod.import_nvimgcodec()
        if nv is None:
            raise SystemExit("--parse needs nvImageCodec (pip install nvidia-nvimgcodec-cu13)")
        if args.parse.startswith("readers"):
            if len(sources) > 1:
                raise SystemExit("--parse readers reads the folder only (--sources folder)")
            dmod.NATIVE_FILES = args.parse == "readers"
            read = dmod.nvimgcodec_reader(nv, src)
    colour = None if nv is None else (nv.ColorSpec.SYCC, nv.ColorSpec.SRGB,
                                      nv.ColorSpec.UNKNOWN)

    from millipyde.data import fileread, loader

    n = args.samples
    paths = args.read_paths.split(",")
    threads = [int(t) for t in str(args.threads).split(",")]
    # the interval a Loader runs under: a thread taking the GIL back waits up to it
    saved_switch = sys.getswitchinterval()
    sys.setswitchinterval(loader.SWITCH_INTERVAL)
    alone = _handovers(None, args.handovers, args.handover_elems) if args.gil else None
    if alone:
        log(f"{args.handovers} GIL hand-overs alone: {alone['median_ms']:.2f} ms (median of "
            f"{alone['blocks']})")
    rows = []
    try:
        names = args.sources.split(",")
        for rep in range(args.repeat):
            order = paths if rep % 2 == 0 else paths[::-1]  # alternated: the machine drifts
            for nt in threads:
                for name, path in [(m, p) for m in (names if rep % 2 == 0 else names[::-1])
                                   for p in order]:
                    fileread.ENABLED = path == "nogil"
                    src = sources[name]
                    row = _host_row(mod, src, read, nv, colour, args, rep, nt, n)
                    row.update({"path": path, "threads": nt, "rep": rep, "source": name})
                    if args.gil:
                        pr = _host_row(mod, src, read, nv, colour, args, rep, nt, n,
                                       probe=True)
                        row["handovers"] = pr["handovers"]
                        row["rate_beside_probe"] = pr["rate"]
                    row["load"] = os.getloadavg()
                    rows.append(row)
                    ho = row.get("handovers")
                    log(f"{name} {path} (native runs {row['fast']}), {nt} readers, parse "
                        f"{args.parse}: {row['rate']:.0f} samples/s, "
                        f"{row['cpu_us_per_sample']:.1f} us CPU a sample, taker "
                        f"{row['taker_cpu_ms_per_batch']:.2f} ms CPU a batch; readers' user "
                        f"{row['readers_user_us']:.1f} us a sample"
                        + (f"; {args.handovers} hand-overs {ho['median_ms']:.2f} ms (alone "
                           f"{alone['median_ms']:.2f})" if ho else "")
                        + f"; load {row['load'][0]:.1f}")
    finally:
        fileread.ENABLED = True
        sys.setswitchinterval(saved_switch)
    if args.model:
        _decode_model(out_model := {}, mod, sources, args)
    else:
        out_model = {}
    out: dict = {"readahead": args.readahead or "this tree", "parse": args.parse,
                 "model": out_model,
                 "pace": args.pace, "handover_elems": args.handover_elems,
                 "nogil_available": fileread.available(), "why_not": fileread.why_not(),
                 "handovers": args.handovers, "alone": alone, "runs": rows, "host": {}}
    for name, path, nt in [(m, p, t) for m in args.sources.split(",") for p in paths
                           for t in threads]:
        rs = [r for r in rows if r["path"] == path and r["threads"] == nt
              and r["source"] == name]
        best = {"rate": max(r["rate"] for r in rs),
                "cpu_us_per_sample": min(r["cpu_us_per_sample"] for r in rs),
                "cpu_us_median": float(np.median([r["cpu_us_per_sample"] for r in rs])),
                "sys_us_median": float(np.median([r["sys_us_per_sample"] for r in rs])),
                "rate_median": float(np.median([r["rate"] for r in rs])),
                "readers_user_us": float(np.median([r["readers_user_us"] for r in rs])),
                "readers_sys_us": float(np.median([r["readers_sys_us"] for r in rs])),
                "taker_cpu_ms_per_batch": min(r["taker_cpu_ms_per_batch"] for r in rs)}
        if args.gil:
            best["handovers_ms"] = float(np.median([r["handovers"]["median_ms"]
                                                    for r in rs]))
        out["host"][("" if name == "folder" else f"{name}_") + f"{path}_{nt}"] = best
    return out


def _decode_model(out: dict, mod: Any, src: Any, args: argparse.Namespace) -> None:
    # ``src``: a source, or {name: source} (``--sources``: rows of each, alternated)
    """The decode worker's loop without a GPU: take 256 samples, then a stand-in for the
    decode call (``--handovers`` hand-overs: each a sleep of ``--model-sleep-us`` or a NumPy
    add of ``--model-elems`` float64, with the GIL released, then the GIL taken back), the
    readers held back from the take to the end of that call (``loader.HOLD_READERS``) or
    not; samples/s, the call's median ms and the take's mean wait, per read path, alternated
    per repeat."""
    a, b = np.zeros(args.model_elems), np.ones(args.model_elems)
    pause = args.model_sleep_us * 1e-6
    if pause:
        import ctypes

        # this thread's timer slack to 1 ns (PR_SET_TIMERSLACK): a sleep of 20 us then
        # lasts about that, not the default 50 us slack more
        ctypes.CDLL(None).prctl(29, 1, 0, 0, 0)

    def call() -> float:
        # each hand-over: the GIL released for the GPU's (or another thread's) work, then
        # taken back; with --model-sleep-us no CPU is used meanwhile, as on a GPU
        t = time.perf_counter()
        for _ in range(args.handovers):
            if pause:
                time.sleep(pause)
            else:
                np.add(a, b, out=a)
        return time.perf_counter() - t

    # --model-pin: the readers on the first core, this thread (the decode call) on the second
    # (os.sched_setaffinity(0) sets the calling thread's on Linux): the call then waits for
    # the GIL the readers hold, not for a core they use
    cores = sorted(os.sched_getaffinity(0))
    pin = args.model_pin and len(cores) >= 2
    run_reader = mod.ReadAhead._reader

    def pinned_reader(self: Any) -> None:
        os.sched_setaffinity(0, cores[:1])
        run_reader(self)

    if pin:
        os.sched_setaffinity(0, cores[1:2])
        mod.ReadAhead._reader = pinned_reader
    try:
        _model_rows(out, mod, src, args, call)
    finally:
        mod.ReadAhead._reader = run_reader
        os.sched_setaffinity(0, cores)
    out["pinned"] = pin


def _model_rows(out: dict, mod: Any, srcs: Any, args: argparse.Namespace, call: Any) -> None:
    """:func:`_decode_model`'s rows (``srcs``: a source, or {name: source}; the keys of a
    source other than ``folder`` start with its name)."""
    import contextlib

    from millipyde.data import fileread

    out["call_alone_ms"] = 1000 * float(np.median([call() for _ in range(20)]))
    out["sleep_us"], out["elems"] = args.model_sleep_us, args.model_elems
    log(f"model: the decode call alone {out['call_alone_ms']:.2f} ms")
    n, nt = args.samples, int(str(args.threads).split(",")[0])
    rows = out["runs"] = []
    srcs = srcs if isinstance(srcs, dict) else {"folder": srcs}
    names = list(srcs)
    for rep in range(args.repeat):
        paths = args.read_paths.split(",")
        for name, path, hold in [(m, p, h) for m in (names if rep % 2 == 0 else names[::-1])
                                 for p in (paths if rep % 2 == 0 else paths[::-1])
                                 for h in (True, False)]:
            src = srcs[name]
            fileread.ENABLED = path == "nogil"
            plan = iter(np.random.default_rng(rep).integers(0, len(src), n).tolist())
            ra = mod.ReadAhead(src, plan, threads=nt)
            calls, wait = [], 0.0
            t0 = time.perf_counter()
            left = n
            while left:
                k = min(256, left)
                with ra.held_back() if hold else contextlib.nullcontext():
                    tw = time.perf_counter()
                    ra.take_many(k)
                    wait += time.perf_counter() - tw
                    calls.append(call())
                left -= k
            dt = time.perf_counter() - t0
            ra.close()
            fileread.ENABLED = True
            rows.append({"source": name, "path": path, "hold": hold, "rep": rep,
                         "rate": n / dt, "nogil_reads": ra.nogil_reads,
                         "call_ms": 1000 * float(np.median(calls)),
                         "wait_ms": 1000 * wait / len(calls), "load": os.getloadavg()})
            log(f"model: {name} {path}, {nt} readers, held {hold}: {rows[-1]}")
    for name, path, hold in [(m, p, h) for m in names for p in args.read_paths.split(",")
                             for h in (True, False)]:
        rs = [r for r in rows if r["path"] == path and r["hold"] == hold
              and r["source"] == name]
        pre = "" if name == "folder" else f"{name}_"
        out[f"{pre}{path}_{'held' if hold else 'not_held'}"] = {
            "rate": float(np.median([r["rate"] for r in rs])),
            "call_ms": float(np.median([r["call_ms"] for r in rs])),
            "wait_ms": float(np.median([r["wait_ms"] for r in rs])), "threads": nt}


def _handovers(stop: Any, count: int, elems: int, blocks: int = 30) -> dict:
    """Wall time of blocks of ``count`` GIL hand-overs, as nvImageCodec's decode call makes
    about two an image: each a NumPy add over ``elems`` float64 (which releases the GIL for
    its few microseconds of work, then takes it back), or ``time.sleep(0)`` for 0 (which
    sleeps the timer slack, ~60 us on some kernels); alone, or (``stop`` an Event) in blocks
    until it is set."""
    a, b = np.zeros(max(1, elems)), np.ones(max(1, elems))

    def one() -> None:
        if elems:
            np.add(a, b, out=a)
        else:
            time.sleep(0)

    times = []
    while len(times) < blocks if stop is None else not stop.is_set():
        t = time.perf_counter()
        for _ in range(count):
            one()
        times.append(time.perf_counter() - t)
    return {"median_ms": 1000 * float(np.median(times)) if times else float("nan"),
            "p90_ms": 1000 * float(np.percentile(times, 90)) if times else float("nan"),
            "blocks": len(times)}


def _host_row(mod: Any, src: Any, read: Any, nv: Any, colour: Any, args: argparse.Namespace,
              rep: int, threads: int, n: int, probe: bool = False) -> dict:
    """One pass of ``n`` samples through a read-ahead of ``threads`` readers, taken 256 at a
    time (``probe``: a thread times GIL hand-overs meanwhile)."""
    import threading

    def parse_in_taker(datas: list) -> None:
        # the decode thread's per-image calls before its decode call, up to 81bda28
        for data in datas:
            cs = nv.CodeStream(data)
            if cs.codec_name == "jpeg" and cs.num_channels == 3 and cs.color_spec in colour:
                int(cs.width) * int(cs.height)

    import resource

    # each reader thread's own user and system CPU (getrusage of the thread, at its end):
    # its user time is Python's (the GIL held; the native reader's own user time is a loop
    # over 32 files), its system time the reads (the GIL released)
    usage: list = []
    run_reader = mod.ReadAhead._reader

    def reader(self: Any) -> None:
        try:
            run_reader(self)
        finally:
            ru = resource.getrusage(resource.RUSAGE_THREAD)
            usage.append((ru.ru_utime, ru.ru_stime))

    plan = iter(np.random.default_rng(rep).integers(0, len(src), n).tolist())
    mod.ReadAhead._reader = reader
    try:
        ra = mod.ReadAhead(src, plan, threads=threads, **({"read": read} if read else {}))
    finally:
        mod.ReadAhead._reader = run_reader
    stop, box = threading.Event(), {}
    prober = None
    if probe:
        prober = threading.Thread(target=lambda: box.update(
            h=_handovers(stop, args.handovers, args.handover_elems)))
        prober.start()
    c0, t0 = os.times(), time.perf_counter()
    taker_cpu = taker_wall = 0.0
    left = n
    while left:
        k = min(256, left)
        if args.pace:  # taken at a set rate, as a decode thread that decodes that fast
            ahead = t0 + (n - left) / args.pace - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
        tc, tw = time.thread_time(), time.perf_counter()
        if hasattr(ra, "take_many"):
            got = ra.take_many(k)
        else:
            got = [ra.take() for _ in range(k)]
        if args.parse == "taker":
            parse_in_taker([d for _, d in got])
        taker_cpu += time.thread_time() - tc
        taker_wall += time.perf_counter() - tw
        left -= k
    dt = time.perf_counter() - t0
    c1 = os.times()
    stop.set()
    if prober is not None:
        prober.join()
    ra.close()
    cpu_s = (c1.user - c0.user) + (c1.system - c0.system)
    nb = -(-n // 256)
    # the readers may read ahead past the plan's end: per sample of the window they read
    read_n = getattr(ra, "_claimed", n)
    return {"rate": n / dt, "cpu_us_per_sample": 1e6 * cpu_s / n,
            "readers_user_us": 1e6 * sum(u for u, _ in usage) / max(1, read_n),
            "readers_sys_us": 1e6 * sum(s for _, s in usage) / max(1, read_n),
            "sys_us_per_sample": 1e6 * (c1.system - c0.system) / n,
            "taker_cpu_ms_per_batch": 1000 * taker_cpu / nb,
            "taker_wall_ms_per_batch": 1000 * taker_wall / nb,
            "handovers": box.get("h"), "fast": getattr(ra, "_read_run", None) is not None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    g = sub.add_parser("gpu")
    g.add_argument("--work", default="/tmp/mpdata")
    g.add_argument("--files", type=int, default=100_000)
    g.add_argument("--classes", type=int, default=1000)
    g.add_argument("--batches", type=int, default=400)
    g.add_argument("--shard-batches", type=int, default=200)
    g.add_argument("--rank-batches", type=int, default=150)
    g.add_argument("--decode-batches", type=int, default=40)
    g.add_argument("--warmup", type=int, default=8)
    g.add_argument("--ranks", type=int, default=4)
    g.add_argument("--baseline", default=None, help="a checkout of the baseline commit")
    g.add_argument("--augment-n", type=int, default=1000)
    g.add_argument("--coco", type=int, default=10, help="COCO batches (0: no COCO row)")
    g.add_argument("--budget", type=float, default=400, help="seconds the run may take")
    g.add_argument("--no-batched-copy", action="store_true",
                   help="pack streamed batches with one copy call per image (this tree)")
    g.add_argument("--readers", default=None, metavar="N,M,...",
                   help="the folder row with each count of read-ahead threads, alternated")
    g.add_argument("--readers-rounds", type=int, default=2)
    g.add_argument("--paths", default="default", choices=("default", "both"),
                   help="both: the folder and shards rows read and decoded in this process "
                        "and in a worker process (Generator decode_process=False / True)")
    g.add_argument("--paths-rounds", type=int, default=1)
    g.add_argument("--rows", default=None, metavar="ROW,ROW,...",
                   help="only these rows, in this order: decode, folder_worker, shards_worker, "
                        "folder_in_process, shards_in_process; +pyread after a row: its "
                        "files read by Python per file (millipyde.data.fileread.ENABLED off); "
                        "+nohold: its readers not held back during the decode call "
                        "(loader.HOLD_READERS off); +nostock: held back with no stock read "
                        "ahead (loader.HOLD_STOCK_BATCHES 0); +capi: nvImageCodec through its "
                        "C API (decode.NVIMGCODEC_API = 'c'); +parse: code streams made in the "
                        "read-ahead threads (loader.PARSE_IN_READERS); +jit / +ctloop: the "
                        "C API's compiled loop / its ctypes loop (decode.CAPI_COMPILED); "
                        "+sw20: a 20 us "
                        "switch interval; e.g. folder_worker+pyread+nohold; #2 "
                        "after a name repeats a row")
    g.add_argument("--no-segments", dest="segments", action="store_false",
                   help="do not time the decode lanes' calls by segment (loader.SEGMENTS, "
                        "data.laps; on by default, printed after each folder / shards row "
                        "and each decode+lanesN row)")
    g.add_argument("--variants", action="store_true",
                   help="also the folder row with samples parsed in the readers, with one copy "
                        "call per image, with a 5 ms switch interval; the arena copy check")
    g.add_argument("--out", default=os.environ.get("OUT", "."))
    c = sub.add_parser("cpu")
    c.add_argument("--work", default="/tmp/mpdata-cpu")
    c.add_argument("--files", type=int, default=2000)
    c.add_argument("--classes", type=int, default=20)
    c.add_argument("--size", type=int, default=256)
    c.add_argument("--epochs", type=int, default=2)
    c.add_argument("--region-ab", type=int, default=0, metavar="ROUNDS",
                   help="only millipyde's epochs with region decoding off and on, alternated "
                        "ROUNDS times (data.region)")
    c.add_argument("--out", default=".")
    h = sub.add_parser("host")
    h.add_argument("--work", default="/tmp/mpdata-cpu")
    h.add_argument("--files", type=int, default=2000)
    h.add_argument("--classes", type=int, default=20)
    h.add_argument("--samples", type=int, default=20000)
    h.add_argument("--repeat", type=int, default=3)
    h.add_argument("--readahead", default=None)
    h.add_argument("--parse", default="none", choices=("none", "taker", "readers",
                                                        "readers-python"))
    h.add_argument("--read-paths", default="python,nogil",
                   help="python: each file read by Python; nogil: runs of files read in one "
                        "call without the GIL (millipyde.data.fileread); alternated per repeat")
    h.add_argument("--threads", default="2,8", help="reader threads, a row each")
    h.add_argument("--sources", default="folder", choices=("folder", "folder,shards",
                                                            "shards,folder"),
                   help="what is read: the folder's files, and the same samples from the "
                        "tar shards (alternated per repeat)"),
    h.add_argument("--handovers", type=int, default=512,
                   help="GIL hand-overs a block of the probe thread")
    h.add_argument("--handover-elems", type=int, default=20000,
                   help="float64 elements of the probe's NumPy add, which releases the GIL "
                        "for its work (0: time.sleep(0))")
    h.add_argument("--no-gil", dest="gil", action="store_false",
                   help="no GIL probe pass")
    h.add_argument("--model", action="store_true",
                   help="also the decode worker's loop with a stand-in decode call")
    h.add_argument("--model-sleep-us", type=float, default=20,
                   help="each hand-over of the stand-in decode call sleeps this long "
                        "(0: a NumPy add of --model-elems float64 instead, which uses a core)")
    h.add_argument("--model-pin", action="store_true",
                   help="the model's readers on one core, its decode call on another")
    h.add_argument("--model-elems", type=int, default=80000,
                   help="float64 elements of each of the stand-in call's NumPy adds")
    h.add_argument("--pace", type=float, default=0,
                   help="samples/s the taker takes at (0: as fast as the readers read)")
    h.add_argument("--out", default=".")
    au = sub.add_parser("augment", help="millipyde augment of a tree over a folder (64 "
                                         "outputs to warm up, then N timed), as JSON")
    au.add_argument("tree")
    au.add_argument("folder")
    au.add_argument("n", type=int)
    au.add_argument("--work", default="/tmp/mpdata")
    au.add_argument("--cache", default=None, help="the tree's own kernel cache")
    ch = sub.add_parser("child")
    for name in ("source", "rank", "world", "batches", "warmup", "barrier", "cores"):
        ch.add_argument(name)
    args = ap.parse_args(argv)
    if args.mode == "child":
        cores = [int(c) for c in args.cores.split(",") if c]
        avail = os.sched_getaffinity(0)
        if cores and set(cores) <= avail:
            os.sched_setaffinity(0, cores)
        got = stream_rate(args.source, int(args.batches), int(args.warmup), rank=int(args.rank),
                          world=int(args.world), barrier=args.barrier)
        print(json.dumps(got), flush=True)
        # the numbers are out: no native library's teardown at exit can lose them (on
        # 2026-11-28 every rank child exited non-zero after its run, without a traceback)
        os._exit(0)
    if args.mode == "augment":
        tree, work = Path(args.tree).resolve(), Path(args.work)
        cache = Path(args.cache) if args.cache else None
        got: dict = {"tree": str(tree)}
        for part, n in (("warm", 64), ("timed", args.n)):
            try:
                got[part] = run_augment(tree, args.folder, work / f"aug_{tree.name}_{part}", n,
                                        cache, {})
            except Exception as err:
                got[part] = {"error": repr(err)}
            print(json.dumps({part: got[part]}), flush=True)
        return 0
    out = {"gpu": gpu, "cpu": cpu, "host": host}[args.mode](args)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"data_{args.mode}.json").write_text(json.dumps(out, indent=1))
    print(table(out), flush=True)
    return 0


def table_of(path: str) -> int:
    """Print the table of a saved run (``data_gpu.json`` / ``data_cpu.json``)."""
    print(table(json.loads(Path(path).read_text())))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "table":
        raise SystemExit(table_of(sys.argv[2]))
    if len(sys.argv) == 2 and sys.argv[1] == "check-pack":  # alone: a crash costs no rows
        print(json.dumps(check_pack()), flush=True)
        raise SystemExit(0)
    raise SystemExit(main())
