"""The ``mmtoolkit`` command.

``mmtoolkit run CONFIG [CONFIG ...] [--results DIR]``
    run experiment configs (all are validated before any runs) and write
    ``DIR/<paper>/<table>.{csv,md}`` (default DIR: ``results``).
``mmtoolkit list [selectors|datasets|workloads|configs]``
    list registered selectors, dataset presets, workload kinds usable in configs, or the
    YAML configs under ``configs/`` (all four when no topic is given).

Exit codes: 0 success, 1 if any cell failed, 2 on a malformed config or bad usage
(a one-line message, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TOPICS = ("selectors", "datasets", "workloads", "configs")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mmtoolkit",
        description="Workload-adaptive linear query answering under differential privacy.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    run = sub.add_parser("run", help="run experiment configs and write results tables")
    run.add_argument("configs", nargs="+", metavar="CONFIG", help="YAML experiment config(s)")
    run.add_argument(
        "--results", default="results", metavar="DIR", help="results directory (default: results)"
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no per-job progress lines")

    ls = sub.add_parser("list", help="list selectors, datasets, workload kinds or configs")
    ls.add_argument("topic", nargs="?", choices=TOPICS, help="what to list (default: all)")
    ls.add_argument(
        "--configs-dir",
        default=None,
        metavar="DIR",
        help="where to look for configs (default: ./configs, else the repository's configs/)",
    )
    return p


def _configs_dir(given: str | None) -> Path:
    if given is not None:
        return Path(given)
    here = Path("configs")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parent.parent / "configs"


def _list(topic: str | None, configs_dir: str | None) -> int:
    from mmtoolkit import datasets, selectors
    from mmtoolkit.runner.config import workload_kinds

    topics = [topic] if topic else list(TOPICS)
    for t in topics:
        if topic is None:
            print(f"{t}:")
        if t == "selectors":
            items = selectors.available()
        elif t == "datasets":
            items = datasets.available()
        elif t == "workloads":
            items = workload_kinds()
        else:
            root = _configs_dir(configs_dir)
            items = (
                sorted(
                    str(f) for f in root.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file()
                )
                if root.is_dir()
                else []
            )
        indent = "  " if topic is None else ""
        for item in items:
            print(f"{indent}{item}")
    return 0


def _run(paths: list[str], results: str, quiet: bool) -> int:
    import io

    from mmtoolkit.runner import load_config, run_config

    configs = [load_config(p) for p in paths]  # validate everything before running anything
    failed = 0
    for cfg in configs:
        progress = io.StringIO() if quiet else sys.stderr
        result = run_config(cfg, results, progress=progress)
        n_fail = len(result.failed)
        failed += n_fail
        agree = [c for c in result.cells if c.within_tol is not None]
        summary = f"{cfg.path}: {len(result.cells)} cells"
        if n_fail:
            summary += f", {n_fail} failed"
        if agree:
            summary += f", {sum(c.within_tol for c in agree)}/{len(agree)} agree with the paper"
        print(f"{summary} -> {result.csv_path}, {result.md_path}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mmtoolkit`` console script; returns the exit code."""
    from mmtoolkit.runner.config import ConfigError

    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            return _list(args.topic, args.configs_dir)
        return _run(args.configs, args.results, args.quiet)
    except ConfigError as exc:
        print(f"mmtoolkit: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
