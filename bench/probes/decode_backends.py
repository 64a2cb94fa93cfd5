"""nvImageCodec's batched JPEG decode per backend choice: rate and host CPU an image (GPU).

    source bench/gpu_env.sh
    python3 bench/probes/decode_backends.py [--files 4096] [--batches 12] [--threads 16]

The bench's dataset (``bench_data.make_dataset``: 500x375 JPEGs of ~38 KB, quality 90), bytes in
memory, decoded in batches of 256 on GPU 0 by a ``Decoder`` made with each backend list below
(``max_num_cpu_threads`` = ``--threads``), on a stream of its own. Per configuration: images a
second and the process's CPU seconds an image (``time.process_time``: every thread, the
decoder's own included) over ``--batches`` batches after two, and the decode call's own wall
time a batch. ``default`` is the decoder millipyde makes (no backend list: nvImageCodec picks);
``hw`` the hardware JPEG decoder alone (images it refuses are left out: counted); ``hw+gpu`` the
hardware decoder with a load hint beside the CUDA decoder (nvJPEG's hybrid path); ``gpu`` the
CUDA decoder alone; ``cpu`` libjpeg-turbo on the threads.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _measure(dec: object, blobs: list, size: int, batches: int, params: object,
             stream: object) -> tuple[float, float, float, int]:
    """(images a second, CPU seconds an image, the decode call's median seconds, images not
    decoded) of ``batches`` batches after two."""
    from nvidia import nvimgcodec as nv

    calls: list[float] = []
    missing = 0
    for b in range(batches + 2):
        if b == 2:
            stream.synchronize()
            calls.clear()
            missing = 0
            c0, t0 = time.process_time(), time.perf_counter()
        part = blobs[b * size:(b + 1) * size]
        t = time.perf_counter()
        got = dec.decode([nv.CodeStream(d) for d in part], params=params,
                         cuda_stream=stream.cuda_stream)
        calls.append(time.perf_counter() - t)
        missing += sum(g is None for g in got) + len(part) - len(got)
    stream.synchronize()
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    n = batches * size
    return n / dt, dc / n, statistics.median(calls), missing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4096)
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--work", default="/tmp/decode_backends")
    ap.add_argument("--hw-loads", default="0.5,0.75,0.9")
    ap.add_argument("--beside", action="store_true",
                    help="then the default decoder beside another process making batches")
    ap.add_argument("--only-beside", action="store_true",
                    help="only that (no backend rows, no file rows)")
    args = ap.parse_args()
    import numpy as np
    import torch
    from nvidia import nvimgcodec as nv

    from bench.bench_data import make_dataset

    info = make_dataset(Path(args.work), args.files, 16)
    import millipyde.data as mdata

    src = mdata.Folder(info["folder"])
    need = (args.batches + 2) * args.size
    pick = np.random.default_rng(1).permutation(len(src))[:need] % len(src)
    blobs = [src.read(int(i)) for i in pick]
    print(f"{len(blobs)} JPEGs, mean {sum(map(len, blobs)) / len(blobs) / 1024:.1f} KB",
          flush=True)
    params = nv.DecodeParams(apply_exif_orientation=True, color_spec=nv.ColorSpec.SRGB)
    if args.only_beside:
        _beside_augment(nv, blobs, args, params)
        return
    kinds = nv.BackendKind
    configs: list[tuple[str, list | None]] = [("default", None)]
    if hasattr(kinds, "HW_GPU_ONLY"):
        configs.append(("hw", [nv.Backend(kinds.HW_GPU_ONLY)]))
        for load in (float(v) for v in args.hw_loads.split(",")):
            configs.append((f"hw{load:g}+gpu", [nv.Backend(kinds.HW_GPU_ONLY, load_hint=load),
                                                nv.Backend(kinds.GPU_ONLY)]))
    configs.append(("gpu", [nv.Backend(kinds.GPU_ONLY)]))
    if hasattr(kinds, "HYBRID_CPU_GPU"):
        configs.append(("hybrid", [nv.Backend(kinds.HYBRID_CPU_GPU)]))
    configs.append(("cpu", [nv.Backend(kinds.CPU_ONLY)]))
    stream = torch.cuda.Stream()
    for name, backends in configs:
        try:
            kw = {} if backends is None else {"backends": backends}
            dec = nv.Decoder(device_id=0, max_num_cpu_threads=args.threads, **kw)
        except Exception as err:
            print(f"{name:12s} no decoder: {type(err).__name__}: {err}", flush=True)
            continue
        try:
            rate, cpu, call, missing = _measure(dec, blobs, args.size, args.batches, params,
                                                stream)
        except Exception as err:
            print(f"{name:12s} failed: {type(err).__name__}: {err}", flush=True)
            continue
        print(f"{name:12s} {rate:9.0f} img/s  CPU {cpu * 1e6:7.1f} us an image "
              f"({cpu * rate:4.1f} cores)  decode call median {call * 1e3:6.2f} ms a batch  "
              f"not decoded {missing}", flush=True)
        del dec
    _from_files(nv, src, pick, args, params, stream)
    if args.beside:
        _beside_augment(nv, blobs, args, params)


_AUGMENT = """
import sys, time
import numpy as np
import millipyde as mp
from bench.bench_mix import _photos
from millipyde.training import recipes
gen = mp.Generator(_photos(), recipes.operations("imagenet", size=224), seed=0)
with gen.batches(256) as bs:
    for i, b in enumerate(bs):
        b._materialize()
        if i == 20:
            print("ready", flush=True)
"""


def _beside_augment(nv: object, blobs: list, args: argparse.Namespace,
                    params: object) -> None:
    """The default decoder alone and beside another process making the ImageNet recipe's
    batches of 256 on the same GPU without pause (the decode worker's situation, with no
    Python of its own beside the call), on a stream of normal and of high priority."""
    import subprocess

    import torch

    dec = nv.Decoder(device_id=0, max_num_cpu_threads=args.threads)
    streams = {"priority 0": torch.cuda.Stream(priority=0),
               "priority high": torch.cuda.Stream(priority=-1)}
    for beside in (False, True, False):
        proc = None
        if beside:
            proc = subprocess.Popen([sys.executable, "-c", _AUGMENT], stdout=subprocess.PIPE,
                                    text=True, cwd=str(Path(__file__).resolve().parents[2]))
            line = proc.stdout.readline()
            if "ready" not in line:
                print(f"augmenting process did not start: {line!r}", flush=True)
                proc.kill()
                return
        try:
            for name, stream in streams.items():
                rate, cpu, call, _ = _measure(dec, blobs, args.size, args.batches, params,
                                              stream)
                print(f"default, {name:13s} {'beside batches' if beside else 'alone':15s} "
                      f"{rate:9.0f} img/s  CPU {cpu * 1e6:6.1f} us an image  call median "
                      f"{call * 1e3:6.2f} ms", flush=True)
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()


def _from_files(nv: object, src: object, pick: object, args: argparse.Namespace,
                params: object, stream: object) -> None:
    """The default decoder on the files themselves (page cache): ``Decoder.read`` of a
    batch's paths (nvImageCodec opens, parses and decodes them in its own threads), against
    a ``CodeStream`` made per path in this thread then one ``decode`` call (what the
    Loader's read-ahead threads and decode thread do between them)."""
    paths = [str(src.paths[int(i)]) for i in pick]
    dec = nv.Decoder(device_id=0, max_num_cpu_threads=args.threads)
    size = args.size
    for name in ("read(paths)", "CodeStream(path) + decode"):
        calls, parse = [], []
        for b in range(args.batches + 2):
            if b == 2:
                stream.synchronize()
                calls.clear()
                parse.clear()
                c0, t0 = time.process_time(), time.perf_counter()
            part = paths[b * size:(b + 1) * size]
            t = time.perf_counter()
            if name.startswith("read"):
                got = dec.read(part, params=params, cuda_stream=stream.cuda_stream)
            else:
                css = [nv.CodeStream(p) for p in part]
                parse.append(time.perf_counter() - t)
                got = dec.decode(css, params=params, cuda_stream=stream.cuda_stream)
            calls.append(time.perf_counter() - t)
            assert len(got) == len(part) and all(g is not None for g in got), name
        stream.synchronize()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        n = args.batches * size
        extra = f", of it the CodeStreams {statistics.median(parse) * 1e3:.2f}" if parse else ""
        print(f"{name:26s} {n / dt:9.0f} img/s  CPU {dc / n * 1e6:7.1f} us an image  call "
              f"median {statistics.median(calls) * 1e3:6.2f} ms a batch{extra}", flush=True)


if __name__ == "__main__":
    main()
