"""The ``mmtoolkit`` command: ``run``, ``report``, ``plot``, ``compare``, ``reproduce``,
``release``, ``ledger``, ``select`` and ``list``.

:func:`main` parses the command line and dispatches; a malformed config or bad usage is a
one-line message and exit code 2, a closed standard output exits quietly with
:data:`EXIT_BROKEN_PIPE`.

User guide: docs/guide/cli.md.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path

from . import compare_command, compare_data, datasets, release_command, selectors
from .runner import load_config, rerender_config, run_config
from .runner.config import COMPARE_SUFFIXES, ConfigError
from .runner.executors import ExecutorError, check_executor
from .runner.plots import plot_file
from .runner.report import ReportError, check_summary, collect, reproduce, write_report
from .workload_specs import workload_kinds

TOPICS = ("selectors", "datasets", "workloads", "configs")
#: The exit code when standard output is closed early (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


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
    run.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="jobs at once in a local process pool (default: 1, in process)",
    )
    run.add_argument(
        "--executor",
        choices=("local", "dask"),
        default="local",
        help="where jobs run: local processes, or an existing Dask cluster (--scheduler)",
    )
    run.add_argument(
        "--scheduler", default=None, metavar="ADDRESS", help="Dask scheduler, e.g. tcp://h:8786"
    )
    run.add_argument(
        "--fresh", action="store_true", help="ignore the job store: recompute every job"
    )
    run.add_argument(
        "--reuse-stale",
        action="store_true",
        help="also reuse stored results computed by other package code (no recompute after "
        "edits that do not change values)",
    )
    run.add_argument(
        "--quick",
        action="store_true",
        help="smoke run of the config's quick: variant, into DIR/quick/<paper>/<table>.quick.*",
    )
    run.add_argument(
        "--render-only",
        action="store_true",
        help="compute nothing: rewrite the CSV and Markdown from the committed CSV and the "
        "config (after editing notes or paper values; refused for a cell whose job changed)",
    )

    ls = sub.add_parser("list", help="list selectors, datasets, workload kinds or configs")
    ls.add_argument("topic", nargs="?", choices=TOPICS, help="what to list (default: all)")
    ls.add_argument(
        "--configs-dir",
        default=None,
        metavar="DIR",
        help="where to look for configs (default: ./configs, else the repository's configs/)",
    )

    rep = sub.add_parser(
        "report", help="regenerate the scoreboard results/README.md (and the README status)"
    )
    rep.add_argument("--results", default="results", metavar="DIR", help="default: results")
    rep.add_argument("--configs", default=None, metavar="DIR", help="default: configs")
    rep.add_argument(
        "--readme", default=None, metavar="FILE", help="also rewrite FILE's status block"
    )
    rep.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a file is out of date or a table is stale",
    )

    plot = sub.add_parser(
        "plot", help="re-render a config's figures from its committed CSV, or a figure sheet"
    )
    plot.add_argument("files", nargs="+", metavar="FILE", help="config or *.plot.yaml sheet")
    plot.add_argument("--results", default="results", metavar="DIR", help="default: results")

    rpr = sub.add_parser(
        "reproduce", help="run every config of the given papers (default: all), then report"
    )
    rpr.add_argument("papers", nargs="*", metavar="PAPER", help="paper names (configs' paper:)")
    rpr.add_argument("--results", default="results", metavar="DIR", help="default: results")
    rpr.add_argument("--configs", default=None, metavar="DIR", help="default: configs")
    rpr.add_argument(
        "--readme", default=None, metavar="FILE", help="also rewrite FILE's status block"
    )
    rpr.add_argument("--quick", action="store_true", help="smoke run (the configs' quick:)")
    rpr.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="jobs at once")
    rpr.add_argument("-q", "--quiet", action="store_true", help="no per-job progress lines")
    compare_command.add_parser(sub)  # mmtoolkit compare: see mmtoolkit/compare_command.py
    release_command.add_parser(sub)  # mmtoolkit release: see mmtoolkit/release_command.py
    release_command.add_ledger_parser(sub)  # mmtoolkit ledger init|show (mmtoolkit/ledger.py)
    release_command.add_select_parser(sub)  # mmtoolkit select ... --save (saved plans)
    return p


def _configs_dir(given: str | None) -> Path:
    if given is not None:
        return Path(given)
    here = Path("configs")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parent.parent / "configs"


def _list(topic: str | None, configs_dir: str | None) -> int:
    topics = [topic] if topic else list(TOPICS)
    for t in topics:
        if topic is None:
            print(f"{t}:")
        if t == "selectors":  # one block per selector: method, paper, privacy, parameters
            items = [selectors.get_class(n).describe() + "\n" for n in selectors.available()]
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
            print("\n".join(f"{indent}{line}" if line else "" for line in item.split("\n")))
    return 0


def _run(args) -> int:
    check_executor(args.jobs, args.executor, args.scheduler)
    opts = {
        "jobs": args.jobs,
        "executor": args.executor,
        "scheduler": args.scheduler,
        "fresh": args.fresh,
        "reuse_stale": args.reuse_stale,
        "quick": args.quick,
    }
    if args.render_only:  # nothing is computed: the workloads are not built
        for cfg in [load_config(p, build_workloads=False) for p in args.configs]:
            result = rerender_config(cfg, args.results)
            print(
                f"{cfg.path}: {len(result.cells)} cells re-rendered -> {result.csv_path}, "
                f"{result.md_path}"
            )
        return 0
    compare_paths = [p for p in args.configs if str(p).endswith(COMPARE_SUFFIXES)]
    for p in compare_paths:  # validated before anything runs
        compare_data.load_comparison(p, args.quick)
    configs = [load_config(p) for p in args.configs if p not in compare_paths]
    for p in compare_paths:  # each (method, ε, trial) a job in the runner's job store
        try:
            written = compare_data.run_config(p, args.results, quick=args.quick, jobs=args.jobs,
                                              fresh=args.fresh, progress=not args.quiet)
        except KeyboardInterrupt:
            print(f"mmtoolkit: interrupted; finished jobs are kept: run {p} again to resume",
                  file=sys.stderr)  # fmt: skip
            return 130
        print(f"{p}: -> {', '.join(map(str, written))}")
    failed = 0
    for cfg in configs:
        progress = io.StringIO() if args.quiet else sys.stderr
        try:  # an ExecutorError (e.g. the Dask scheduler is unreachable) is bad usage: _main
            result = run_config(cfg, args.results, progress=progress, **opts)
        except KeyboardInterrupt:
            print(
                f"mmtoolkit: interrupted; finished jobs are kept: run {cfg.path} again to resume",
                file=sys.stderr,
            )
            return 130
        n_fail = len(result.failed)
        failed += n_fail
        agree = [c for c in result.cells if c.within_tol is not None]
        summary = f"{cfg.path}: {len(result.cells)} cells"
        if n_fail:
            summary += f", {n_fail} failed"
        for status in ("timeout", "out of memory"):
            n = sum(c.status == status for c in result.cells)
            if n:
                summary += f", {n} {status}"
        if agree:
            within = sum(bool(c.within_tol) for c in agree)
            summary += f", {within}/{len(agree)} agree with the paper"
        print(f"{summary} -> {result.csv_path}, {result.md_path}")
    return 1 if failed else 0


def _report(args) -> int:
    configs = _configs_dir(args.configs)
    board = collect(args.results, configs)
    paths = write_report(args.results, configs, args.readme, check=args.check, board=board)
    if args.check:
        print(check_summary(board, args.readme, paths))
        return 1 if paths or any(t.stale for t in board.tables) else 0
    for path in paths:
        print(f"wrote {path}")
    return 0


def _plot(args) -> int:
    for path in args.files:
        for png in plot_file(path, args.results):
            print(f"wrote {png}")
    return 0


def _reproduce(args) -> int:
    progress = io.StringIO() if args.quiet else sys.stderr
    runs, pngs = reproduce(
        args.papers,
        args.results,
        _configs_dir(args.configs),
        args.readme,
        quick=args.quick,
        jobs=args.jobs,
        progress=progress,
    )
    failed = sum(len(r.failed) for r in runs)
    for r in runs:
        print(f"{r.config.path}: {len(r.cells)} cells -> {r.csv_path}")
    for png in pngs:
        print(f"wrote {png}")
    if not args.quick:
        print(f"wrote {Path(args.results) / 'README.md'}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mmtoolkit`` console script; returns the exit code
    (:data:`EXIT_BROKEN_PIPE`, quietly, when standard output is closed early)."""
    try:
        try:
            return _main(argv)
        finally:
            if sys.stdout is not None:  # None: started with standard output closed
                sys.stdout.flush()  # print only buffers: a closed pipe shows here, handled
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE


def _stdout_to_devnull() -> None:
    """Point standard output at the null device, so that the interpreter's last flush of
    what could not be written does not fail again at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a captured or replaced stdout)
        sys.stdout = open(os.devnull, "w")  # kept open: it is standard output now
    finally:
        os.close(devnull)


#: The sub-commands, each run with the parsed arguments.
_COMMANDS = {
    "run": _run,
    "list": lambda args: _list(args.topic, args.configs_dir),
    "report": _report,
    "plot": _plot,
    "reproduce": _reproduce,
    "compare": compare_command.main,
    "release": release_command.main,
    "ledger": release_command.ledger_main,
    "select": release_command.select_main,
}


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except (ConfigError, ReportError, ExecutorError) as exc:
        print(f"mmtoolkit: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
