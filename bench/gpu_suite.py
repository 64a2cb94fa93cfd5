"""The whole test suite on a GPU machine, in shards that each fit one device call.

On two H200s the CI tier of the suite (~6,450 tests) took longer than one device call may run
(600 s): a run killed by the call's limit prints no report, so its failures come back without
their tracebacks. This script runs one shard of the suite's test files with a deadline
(``MILLIPYDE_TEST_DEADLINE``, read by ``tests/conftest.py``): past it no test starts and the
ones left are reported as skipped ("not run"), so the run ends with its report and its
durations inside the call. Run every shard (each in its own call, or several in one) and add
up the summaries::

    source bench/gpu_env.sh && export MILLIPYDE_BACKEND=cuda
    python3 bench/gpu_suite.py --shard 1/2 --budget 420 --out $OUT
    python3 bench/gpu_suite.py --shard 2/2 --budget 420 --out $OUT

The files are dealt to shards by size (a stand-in for their time), largest first, each to the
lightest shard so far: the same split on every machine for one tree. Tests are handed to the
workers one by one as each finishes (``--dist worksteal``): on a GPU the kernel cache, not one
worker per module group, avoids compiling a kernel twice. On a machine of several GPUs each
worker's device 0 is another GPU (``MILLIPYDE_TEST_GPUS``, read by ``tests/conftest.py``), so
the one-device tests do not all share GPU 0. ``--out`` gets the run's log, its
JUnit XML and a summary (counts; each failure's first lines; skips by reason; the files not
reached); then each failed test runs again alone, in a process of its own
(``--rerun-budget``), and the summary says whether it fails alone too or only beside the
others. Exit status: the first run's pytest's.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_files(root: Path = ROOT) -> list[Path]:
    """Every test module under ``tests/``, sorted."""
    return sorted(p.relative_to(root) for p in (root / "tests").rglob("test_*.py"))


def gpu_count() -> int:
    """The machine's NVIDIA GPUs (``nvidia-smi -L``; 0 where there is none)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def shard(files: list[Path], k: int, n: int, root: Path = ROOT) -> list[Path]:
    """The files of shard ``k`` (1-based) of ``n``: largest first, each to the lightest."""
    if not 1 <= k <= n:
        raise ValueError(f"--shard {k}/{n}: k must be in 1..{n}")
    loads = [0] * n
    parts: list[list[Path]] = [[] for _ in range(n)]
    for f in sorted(files, key=lambda f: (-(root / f).stat().st_size, str(f))):
        i = loads.index(min(loads))
        parts[i].append(f)
        loads[i] += (root / f).stat().st_size
    return sorted(parts[k - 1])


NOT_RUN = "not run: the run's deadline"  # (the start of tests/conftest.py's NOT_RUN)


def outcomes(xml_path: Path, files: list[Path]) -> list[tuple[str, str | None, str, str]]:
    """Per test case of the JUnit XML: (node id, its file or None, outcome, message); the
    outcome is passed, failed, error, skipped or "not run" (the deadline's skips)."""
    modules = {".".join(f.with_suffix("").parts): str(f) for f in files}
    out = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        dotted = case.get("classname", "")
        while dotted and dotted not in modules:  # (a test class's name after its module's)
            dotted = dotted.rpartition(".")[0]
        module = modules.get(dotted)
        classes = case.get("classname", "")[len(dotted) + 1:] if module else ""
        node = "::".join([module or case.get("classname", ""),
                          *([classes.replace(".", "::")] if classes else []),
                          case.get("name", "")])
        outcome, message = "passed", ""
        for child in case:
            message = child.get("message") or ""
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
            elif child.tag == "skipped":
                outcome = "not run" if message.startswith(NOT_RUN) else "skipped"
        out.append((node, module, outcome, message))
    return out


def summarize(xml_path: Path, files: list[Path]) -> str:
    """The run's summary from its JUnit XML."""
    counts: collections.Counter = collections.Counter()
    failures, reasons, reached = [], collections.Counter(), set()
    for node, module, outcome, message in outcomes(xml_path, files):
        counts[outcome] += 1
        if outcome in ("failed", "error"):
            first = message.splitlines()[:3]
            failures.append(f"{outcome.upper()} {node}\n    " + "\n    ".join(first))
        elif outcome == "skipped":
            reasons[message[:120]] += 1
        if outcome != "not run":
            reached.add(module)
    lines = [", ".join(f"{v} {k}" for k, v in sorted(counts.items()))]
    lines += failures
    lines += [f"skipped x{v}: {r}" for r, v in reasons.most_common()]
    unreached = [str(f) for f in files if str(f) not in reached]
    if unreached:
        lines.append("files with no test reached: " + " ".join(unreached))
    return "\n".join(lines)


def rerun_alone(ids: list[str], budget: float, out: Path, tag: str, env: dict) -> str:
    """The failed tests ``ids`` run again alone, each in a process of its own (an id pytest
    cannot find stops only its own run), none started after ``budget`` seconds: whether each
    fails alone too."""
    deadline = time.time() + budget
    env = dict(env, MILLIPYDE_TEST_DEADLINE=str(deadline))  # (not the first run's, passed)
    lines = ["re-run alone, each in its own process:"]
    with open(out / f"alone-{tag}.log", "w") as log:
        for i, node in enumerate(ids):
            if time.time() > deadline:
                lines.append(f"  not run: {node}")
                continue
            xml = out / f"alone-{tag}-{i}.xml"
            cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p",
                   "no:benchmark", "-n", "0", "--tb=short", f"--junitxml={xml}", node]
            log.write(f"== {node}\n")
            log.flush()
            subprocess.call(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            got = [o for n, _, o, _ in outcomes(xml, test_files())] if xml.exists() else []
            lines.append(f"  {got[0] if len(got) == 1 else 'not collected'}: {node}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shard", default="1/1", help="K/N: run the K-th of N shards")
    ap.add_argument("--budget", type=float, default=480.0,
                    help="seconds from now after which no test starts")
    ap.add_argument("--jobs", default=str(max(1, (os.cpu_count() or 2) - 2)),
                    help="pytest-xdist workers")
    ap.add_argument("--marks", default="not exhaustive", help="pytest -m expression")
    ap.add_argument("--rerun-budget", type=float, default=60.0,
                    help="seconds for re-running each failed test alone after the run (0: none)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the reports")
    args, extra = ap.parse_known_args()
    k, n = (int(v) for v in args.shard.split("/"))
    files = shard(test_files(), k, n)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"shard{k}of{n}"
    xml = out / f"suite-{tag}.xml"
    env = dict(os.environ, MILLIPYDE_TEST_DEADLINE=str(time.time() + args.budget),
               MILLIPYDE_TEST_GPUS=str(gpu_count()))
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:benchmark",
           "-n", args.jobs, "--dist", "worksteal", "-m", args.marks, "--tb=short", "-rfE",
           "--durations=40", f"--junitxml={xml}", *extra, *map(str, files)]
    print(f"{tag}: {len(files)} files, budget {args.budget:.0f} s, {args.jobs} workers",
          flush=True)
    t0 = time.time()
    with open(out / f"suite-{tag}.log", "w") as log:
        rc = subprocess.call(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    text = f"{tag}: pytest exit {rc} after {time.time() - t0:.0f} s\n"
    text += summarize(xml, files) if xml.exists() else "no JUnit XML (the run was killed?)"
    failed = [node for node, _, outcome, _ in (outcomes(xml, files) if xml.exists() else [])
              if outcome in ("failed", "error")]
    if failed and args.rerun_budget > 0:
        text += "\n" + rerun_alone(failed, args.rerun_budget, out, tag, env)
    (out / f"summary-{tag}.txt").write_text(text + "\n")
    print(text, flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
