"""Draw docs/decode.png: where a streamed folder's rate stands against the decoder's, one H200.

    python docs/draw_decode.py [--out docs/decode.png]

The numbers are one device call's (2026-11-29 06:52 UTC, one NVIDIA H200, the bench's 8,000
JPEGs of 38 KB, batches of 256; bench/RESULTS.md, "What stretches the decode call in the
pipeline"): nvImageCodec's decode alone and beside another process keeping the GPU busy
(`bench/probes/decode_backends.py --only-beside`), and the ImageNet recipe's batches taken by
torch from the folder, decoded in the training process or in a worker process
(`bench/bench_data.py gpu --rows decode,folder_worker,folder_in_process,folder_worker#2`).
Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (label, images a second, what the bar is) of the call named in the module doc
ROWS = [
    ("decode alone, the probe\n(bytes in memory)", 29_214, "decoder"),
    ("decode beside a process\nkeeping the GPU busy", 8_371, "decoder"),
    ("decode alone, the bench's\nrow (bytes in memory)", 23_494, "decoder"),
    ("folder -> recipe -> torch,\ndecoded in a worker process", 13_008, "pipeline"),
    ("folder -> recipe -> torch,\ndecoded in the training process", 9_178, "pipeline"),
]
TARGET = 15_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "decode.png"))
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 4.2), dpi=110)
    colours = {"decoder": "#4c72b0", "pipeline": "#dd8452"}
    labels = [r[0] for r in ROWS][::-1]
    values = [r[1] for r in ROWS][::-1]
    ax.barh(labels, values, color=[colours[r[2]] for r in ROWS][::-1])
    for y, v in enumerate(values):
        ax.text(v + 250, y, f"{v:,}", va="center", fontsize=9)
    ax.axvline(TARGET, color="#444", linestyle="--", linewidth=1)
    ax.text(TARGET + 250, len(ROWS) - 0.55, "target 15k img/s", fontsize=8, color="#444")
    ax.set_xlabel("images a second (batches of 256, one H200)")
    ax.set_xlim(0, max(values) * 1.15)
    ax.set_title("A JPEG folder's rate: the decoder shares the GPU with the training process",
                 fontsize=10)
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
