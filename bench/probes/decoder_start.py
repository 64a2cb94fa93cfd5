"""What the first batch of a streamed run pays for nvImageCodec, step by step, in a fresh process.

    source bench/gpu_env.sh
    python3 bench/probes/decoder_start.py [--folder DIR] [--sampler]

Times, one after another: ``import millipyde`` and a CUDA context on device 0; ``from nvidia
import nvimgcodec``; a first ``Decoder``; its first decode of one small JPEG (made here with
Pillow); a second ``Decoder`` and its first decode (is the first call's cost per decoder or
per process?); a batch of 256 files of ``--folder`` (default: the 1000-file set of
``bench_data.make_dataset``) parsed and decoded by the first decoder, twice. With
``--sampler`` a thread beside the import counts how often it got the GIL (every 1 ms): an
import that holds the GIL for its whole length shows about none.
"""

from __future__ import annotations

import argparse
import io
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", default=None)
    ap.add_argument("--sampler", action="store_true")
    args = ap.parse_args(argv)
    rows: list[tuple[str, float]] = []

    def step(name: str, fn):
        t = time.perf_counter()
        out = fn()
        rows.append((name, time.perf_counter() - t))
        print(f"{name:46s} {1e3 * rows[-1][1]:9.1f} ms", flush=True)
        return out

    ticks = [0]
    halt = threading.Event()

    def tick() -> None:
        while not halt.wait(0.001):
            ticks[0] += 1

    def imp():
        import millipyde as mp

        mp.gpuimage(__import__("numpy").zeros((2, 2, 3), "uint8"))._materialize()
        return mp

    step("import millipyde, a first gpuimage", imp)
    if args.sampler:
        threading.Thread(target=tick, daemon=True).start()
    t0 = time.perf_counter()
    nv = step("from nvidia import nvimgcodec", lambda: __import__("nvidia.nvimgcodec",
                                                                    fromlist=["x"]))
    if args.sampler:
        took = time.perf_counter() - t0
        print(f"  a thread beside the import got the GIL {ticks[0]} times in {took:.2f} s "
              f"(~{int(took * 1000)} if never held)")
        halt.set()
    import numpy as np
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((32, 48, 3), 128, np.uint8)).save(buf, "JPEG", quality=90)
    small = buf.getvalue()
    d1 = step("Decoder() #1", lambda: nv.Decoder(device_id=0))
    step("decoder #1, first decode (one 48x32 JPEG)", lambda: d1.decode(nv.CodeStream(small)))
    step("decoder #1, second decode", lambda: d1.decode(nv.CodeStream(small)))
    d2 = step("Decoder() #2", lambda: nv.Decoder(device_id=0))
    step("decoder #2, first decode", lambda: d2.decode(nv.CodeStream(small)))
    folder = args.folder
    if folder is None:
        sys.path.insert(0, str(HERE.parent))
        from bench_data import make_dataset

        folder = make_dataset(Path("/tmp/mpdata"), 2000, 20)["aug1000"]
    files = sorted(p for p in Path(folder).rglob("*")
                   if p.suffix.lower() in (".jpg", ".jpeg"))[:256]
    datas = [p.read_bytes() for p in files]
    d3 = step("Decoder() #3", lambda: nv.Decoder(device_id=0))
    for k in range(3):
        step(f"decoder #3: 256 files parsed and decoded, #{k + 1}",
             lambda: d3.decode([nv.CodeStream(b) for b in datas]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
