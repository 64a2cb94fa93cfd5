"""nvImageCodec's decode of a batch through its Python binding against its C API (ctypes), alone
and beside one thread that runs Python half the time.

    source bench/gpu_env.sh; export MILLIPYDE_BACKEND=cuda
    python3 bench/probes/decode_capi.py [--files 4096] [--batches 20] [--rounds 2]
    MILLIPYDE_BACKEND=cpu python3 bench/probes/decode_capi.py --cpu   # any machine

The bench's dataset (``bench_data.make_dataset``: 500x375 JPEGs of ~38 KB, quality 90), bytes
in memory, decoded in batches of ``--size`` (256) by each decoder's ``decode`` as the Loader
calls it (``decode.NvImageCodecDecoder`` over the binding, ``decode.NvImageCodecCDecoder``
over the C API: per sample a code stream and its header check, then the batched call; the C
API's images in one allocation of the backend), on a stream of its own (``take_stream``, as
the Loader's decode thread). Per row: images a second over ``--batches`` batches after two
(the stream synchronised at the end), the decode call's median milliseconds a batch, and for
the C API the GIL releases a batch (``nvimgcodec_capi.Api.releases``). "beside" rows run
``bench_data.busy_thread`` meanwhile (Python holding the GIL ``--busy`` of the time in 18 ms
turns: the batch worker's share in the pipeline) at the loader's switch interval, and count
its stalls of over 20 us a batch: each a time the decoding thread took the GIL back from it
(a hand-over the decode call waited for; the busy thread's turns cover ``--busy`` of the
time, so about that share of the call's take-backs are seen).

``--cpu``: libjpeg-turbo on the CPU into host buffers (the cpu backend): the binding through a
CPU-only ``Decoder`` (its own per-sample ``CodeStream`` then ``decode``, as
``NvImageCodecDecoder`` does on a GPU), the C API through ``NvImageCodecCDecoder(host=True)``.
"C API, parsed ahead": the C API's call on code streams made before the timed batches (as the
read-ahead threads make them with ``loader.PARSE_IN_READERS``).

The C API's rows come twice: its ctypes loop (per image a code stream, its header and an
output image made with the GIL held, then the decode and its wait with it released) and its
compiled loop (``decode.CAPI_COMPILED``: all of it in two Numba passes with the GIL released).
For each the rows say the GIL's releases a batch and the median time a batch the decoding
thread spent outside them ("held": its Python and its library calls that keep the GIL, and
any wait for the GIL between them).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _time_rows(run: Any, blobs: list, size: int, batches: int, sync: Any,
               start: Any = None, lib: Any = None) -> tuple[float, float, float | None]:
    """(images a second, median seconds of a call, median seconds of a call spent outside
    the library's GIL-releasing calls: with ``lib``, ``nvimgcodec_capi.Api``) of
    ``batches`` batches after two (``start()`` called where the timed batches start)."""
    calls: list[float] = []
    held: list[float] = []
    keep = None
    for b in range(batches + 2):
        if b == 2:
            sync()
            calls.clear()
            held.clear()
            if start is not None:
                start()
            t0 = time.perf_counter()
        part = blobs[b * size:(b + 1) * size]
        free = lib.free_s if lib is not None else 0.0
        keep = None  # the previous batch freed here, outside the timed call
        t = time.perf_counter()
        keep = run(part)
        calls.append(time.perf_counter() - t)
        if lib is not None:
            held.append(calls[-1] - (lib.free_s - free))
        assert all(not isinstance(k, BaseException) for k in keep), keep
    sync()
    dt = time.perf_counter() - t0
    del keep
    return batches * size / dt, statistics.median(calls), \
        statistics.median(held) if held else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4096)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds of the binding's and the C API's rows, in turn")
    ap.add_argument("--busy", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=0,
                    help="nvImageCodec's CPU threads (0: the Pillow fallback's count)")
    ap.add_argument("--cpu", action="store_true",
                    help="libjpeg-turbo on the CPU into host buffers (the cpu backend)")
    ap.add_argument("--work", default="/tmp/decode_capi")
    ap.add_argument("--rows", default="binding,loop,loop+parsed,compiled,compiled+parsed",
                    help="which decodes, in this order (each alone and beside the busy "
                         "thread): binding, loop (the C API's ctypes loop), compiled (its "
                         "compiled loop, decode.CAPI_COMPILED), +parsed after either: on "
                         "code streams made beforehand")
    ap.add_argument("--shrink", type=int, default=1,
                    help="each JPEG re-encoded 1/N the size a side (q90): N = 8 makes the "
                         "decode itself cheap on a CPU, so that the call's GIL waits show")
    ap.add_argument("--views", action="store_true",
                    help="the samples given as NumPy views of one buffer a run of 32, as the "
                         "read-ahead hands a folder's files over (fileread), not as bytes")
    args = ap.parse_args()
    import numpy as np

    import millipyde.data as mdata
    from bench.bench_data import busy_thread, make_dataset
    from millipyde.backend import ACTIVE as runtime
    from millipyde.data import decode as dmod
    from millipyde.data import loader as lmod
    from millipyde.data import nvimgcodec_capi as capi

    if args.cpu == runtime.caps.device_memory:
        raise SystemExit(f"--cpu needs MILLIPYDE_BACKEND=cpu, the GPU rows the cuda backend "
                         f"(this is {runtime.name})")
    info = make_dataset(Path(args.work), args.files, args.classes)
    src = mdata.Folder(info["folder"])
    need = (args.batches + 2) * args.size
    pick = np.random.default_rng(1).permutation(max(need, len(src)))[:need] % len(src)
    blobs = [src.read(int(i)) for i in pick]
    if args.shrink > 1:
        import io

        from PIL import Image

        def shrunk(b: bytes) -> bytes:
            out = io.BytesIO()
            Image.open(io.BytesIO(b)).reduce(args.shrink).save(out, "JPEG", quality=90)
            return out.getvalue()

        blobs = [shrunk(b) for b in blobs]
    if args.views:
        runs = []
        for r in range(0, len(blobs), 32):
            run = blobs[r:r + 32]
            buf = np.frombuffer(b"".join(run), np.uint8)
            ends = np.cumsum([len(b) for b in run]).tolist()
            runs += [buf[e - len(b):e] for e, b in zip(ends, run, strict=True)]
        blobs = runs
    print(f"{len(blobs)} JPEGs, mean {sum(map(len, blobs)) / len(blobs) / 1024:.1f} KB, "
          f"backend {runtime.name}{', views of runs of 32' if args.views else ''}",
          flush=True)
    pillow = dmod.PillowDecoder(0, threads=args.threads or None)
    stream = runtime.take_stream(0) if runtime.caps.launches_on_streams else None

    def sync() -> None:
        if stream is not None:
            stream.synchronize()

    lib = capi.api()
    if lib is None:
        raise SystemExit("nvImageCodec's C library did not load (pip install "
                         "nvidia-nvimgcodec-cu13)")
    cdec = dmod.NvImageCodecCDecoder(0, pillow, host=args.cpu)
    if args.cpu:
        nv = dmod.import_nvimgcodec()
        bdec = nv.Decoder(device_id=capi.DEVICE_CPU_ONLY, max_num_cpu_threads=pillow.threads,
                          backends=[nv.Backend(nv.BackendKind.CPU_ONLY)])
        params = nv.DecodeParams(apply_exif_orientation=True, color_spec=nv.ColorSpec.SRGB)

        def binding(part: list) -> list:
            return bdec.decode([nv.CodeStream(d) for d in part], params=params)
    else:
        with runtime.on_device(0):
            pdec = dmod.NvImageCodecDecoder(0, pillow)

        def binding(part: list) -> list:
            return pdec.decode(part, str, stream)

    def c_api(part: list) -> list:
        return cdec.decode(part, str, stream)

    if any(k.startswith("compiled") for k in args.rows.split(",")) and capi.loop() is None:
        raise SystemExit("the compiled loop did not load (nvimgcodec_capi.loop())")
    print(f"the compiled loop loaded in {capi.LOOP_LOAD_S[0] if capi.LOOP_LOAD_S else 0:.2f} s "
          f"(compiled, or read from the disk cache)", flush=True)

    # the same batches' code streams made beforehand (as the read-ahead threads make them
    # with loader.PARSE_IN_READERS): the decode thread's call without the parse
    coded = {id(b): dmod.Coded(cdec._parse(b)[0], len(b), None, i)
             for i, b in enumerate(blobs)}

    def c_api_parsed(part: list) -> list:
        return cdec.decode([coded[id(b)] for b in part], str, stream)

    saved = sys.getswitchinterval()
    # the busy thread's stalls with nothing else running (the OS's preemptions, not the GIL):
    # what the rows' counts are read against
    stop, gaps = threading.Event(), [0]
    sys.setswitchinterval(lmod.SWITCH_INTERVAL)
    spinner = busy_thread(args.busy, stop, gaps=gaps)
    time.sleep(2.0)
    stop.set()
    spinner.join(5)
    sys.setswitchinterval(saved)
    print(f"the busy thread alone: {gaps[0] / 2.0:.0f} stalls a second", flush=True)
    rows: list[tuple[str, float, float, float | None, float | None]] = []
    # (label, decode, decode.CAPI_COMPILED for it); --rows picks by key
    every = {"binding": ("binding", binding, None),
             "loop": ("C API, ctypes loop", c_api, False),
             "loop+parsed": ("C API, ctypes loop, parsed ahead", c_api_parsed, False),
             "compiled": ("C API, compiled loop", c_api, True),
             "compiled+parsed": ("C API, compiled loop, parsed ahead", c_api_parsed, True)}
    picked = args.rows.split(",")
    if set(picked) - set(every):
        raise SystemExit(f"--rows: unknown rows {sorted(set(picked) - set(every))}; "
                         f"known: {', '.join(every)}")
    with runtime.on_device(0), runtime.using_stream(stream) if stream is not None else \
            contextlib.nullcontext():
        for rnd in range(args.rounds):
            kinds = [every[k] for k in picked]
            for name, run, compiled in kinds if rnd % 2 == 0 else kinds[::-1]:
                if compiled is not None:
                    dmod.CAPI_COMPILED = compiled
                for beside in (False, True):
                    stop = threading.Event()
                    gaps = [0]
                    spinner = busy_thread(args.busy, stop, gaps=gaps) if beside else None
                    sys.setswitchinterval(lmod.SWITCH_INTERVAL)
                    r0 = lib.releases
                    try:
                        g0 = [0]

                        def mark(g0: list = g0, gaps: list = gaps) -> None:
                            g0[0] = gaps[0]

                        rate, call, held = _time_rows(
                            run, blobs, args.size, args.batches, sync, mark,
                            lib if compiled is not None else None)
                        stalls = (gaps[0] - g0[0]) / args.batches
                    finally:
                        sys.setswitchinterval(saved)
                        stop.set()
                        if spinner is not None:
                            spinner.join(5)
                    rel = (lib.releases - r0) / (args.batches + 2) \
                        if compiled is not None else None
                    label = f"{name}, {'beside a half-busy thread' if beside else 'alone'}"
                    rows.append((label, rate, call, rel, held))
                    extra = "" if rel is None else \
                        f"  GIL releases a batch {rel:.1f}, held {held * 1e3:.2f} ms"
                    if beside:
                        extra += f"  the busy thread stalled {stalls:.0f} times a batch"
                    print(f"round {rnd + 1}  {label:50s} {rate:9.0f} img/s  call median "
                          f"{call * 1e3:7.2f} ms a batch of {args.size}{extra}", flush=True)
    for label in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == label]
        held = "" if mine[0][4] is None else \
            f"  GIL held {statistics.median(r[4] for r in mine) * 1e3:6.2f} ms"
        print(f"median of {len(mine)}  {label:50s} "
              f"{statistics.median(r[1] for r in mine):9.0f} img/s  call "
              f"{statistics.median(r[2] for r in mine) * 1e3:7.2f} ms{held}", flush=True)
    cdec.close()
    if stream is not None:
        runtime.give_stream(stream)


if __name__ == "__main__":
    main()
