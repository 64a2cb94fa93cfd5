"""``python -m bench ops|pipeline|augment [options]``: run one benchmark family."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "ops": ("bench.bench_ops", "single ops, thesis tables 6.1-6.3, and more"),
    "pipeline": ("bench.bench_pipeline", "5-op / 20-op Pipelines, thesis tables 6.4-6.6"),
    "augment": ("bench.bench_augment", "Generator throughput, thesis figure 5.1"),
    "fusion": ("bench.bench_fusion", "thesis 5-op chain: fused vs fusion off vs cuCIM"),
    "compile": ("bench.bench_compile", "cold start of `millipyde augment` per recipe"),
}


def _usage() -> str:
    lines = ["usage: python -m bench {ops,pipeline,augment,fusion,compile} [options]", ""]
    lines += [f"  {name:<9} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "`python -m bench COMMAND --help` lists a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if argv[0] not in COMMANDS:
        print(f"unknown benchmark {argv[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name = COMMANDS[argv[0]][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        print(f"{module_name} is not written yet", file=sys.stderr)
        return 2
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
