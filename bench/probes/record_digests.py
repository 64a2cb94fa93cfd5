"""Digests of the arena recorder's launch arrays for the policy recipes, to compare two commits'
host records bit for bit (no kernel runs; any backend, meant for the cpu backend).

    MILLIPYDE_BACKEND=cpu python3 bench/probes/record_digests.py --out new.json [--against old.json]

Per policy (RandAugment(2, 9), TrivialAugmentWide, AutoAugment, RandAugment(3, 20)) a Generator
over the six scikit-image photographs with ``random_resized_crop(224)``, ``fliplr(p=0.5)`` and
the policy (seed 3), ``--batches`` batches of 256; and the policy alone on the photographs at
their own sizes (seed 5, 3 batches of 64). Per batch: a SHA-1 of every launch's positions,
parameter rows, arena rows, statistic prefixes' rows and starting statistic rows (stages
included, signed zeros and all: the arrays' bytes), one of the signatures, and the outputs
left per output. Run it on two trees (``PYTHONPATH`` to the other tree's root) and pass the
first's file as ``--against``: it names the batches that differ. ``--gpu-record``: recorded
as a GPU backend records them (no gather ended before a statistic op).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import millipyde as mp  # noqa: E402
from bench.bench_recipes import _photos  # noqa: E402
from millipyde.graph.codegen import stat as codegen_stat  # noqa: E402
from millipyde.training import batches  # noqa: E402


def _digest(arrays: list) -> str:
    h = hashlib.sha1()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _launches(launches: list) -> tuple[str, str]:
    arrays, sigs = [], []
    for L in launches:
        sigs.append((repr(L.sig), L.gates, L.hw, L.cout, str(L.dtype)))
        arrays += [L.pos, L.p, L.rows, codegen_stat.stat_init(L.sig)]
        arrays += [pr.p for pr in L.prefixes]
        sigs += [(pr.stat, repr(pr.sig), pr.hw) for pr in L.prefixes]
        for st in L.stages:
            sigs.append((repr(st.sig), st.hw, st.cout))
            arrays += [st.p, codegen_stat.stat_init(st.sig)] + [pr.p for pr in st.prefixes]
            sigs += [(pr.stat, repr(pr.sig), pr.hw) for pr in st.prefixes]
    return _digest(arrays), hashlib.sha1(repr(sigs).encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--against", type=Path, default=None)
    ap.add_argument("--gpu-record", action="store_true",
                    help="record as a GPU backend does (``ArenaRecorder.stat_cut`` off)")
    args = ap.parse_args(argv)
    hosts = _photos()
    policies = {"RandAugment(2, 9)": lambda: mp.RandAugment(2, 9),
                "TrivialAugmentWide": mp.TrivialAugmentWide, "AutoAugment": mp.AutoAugment,
                "RandAugment(3, 20)": lambda: mp.RandAugment(3, 20)}
    out: dict[str, list] = {}
    for name, make in policies.items():
        ops = [mp.Operation("random_resized_crop", 224, 224), mp.Operation("fliplr", p=0.5),
               make()]
        for own, ops_, seed, n, count in ((False, ops, 3, 256, args.batches),
                                          (True, [make()], 5, 64, 3)):
            st = mp.Generator([mp.gpuimage(h) for h in hosts], ops_, seed=seed)._state
            rec = batches.arena_recorder(st)
            if rec is None:
                raise SystemExit(f"{name}: not recorded as arena batches")
            if args.gpu_record:
                rec.stat_cut = False
            for b in range(count):
                launches, left = rec.record(list(range(b * n, b * n + n)))
                key = f"{name}{' own sizes' if own else ''} batch {b}"
                out[key] = [*_launches(launches), left]
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(out)} batches' digests in {args.out}")
    if args.against is not None:
        old = json.loads(args.against.read_text())
        differ = [k for k in old if old[k] != out.get(k)] + [k for k in out if k not in old]
        print(f"against {args.against}: {len(differ)} of {len(out)} batches differ"
              + (f": {differ[:8]}" if differ else ""))
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
