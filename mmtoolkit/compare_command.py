"""``mmtoolkit compare``: score every selector on one workload, from the command line.

:func:`add_parser` registers the sub-command, :func:`main` runs :func:`mmtoolkit.compare.compare`
and prints its table (or writes ``--out`` / ``--plot``, checked before anything is built);
with ``--data`` it runs :func:`mmtoolkit.compare_data.compare_data` on the records instead
and prints the summary over trials. :func:`parse_domain` reads ``--domain``. Bad input is
one line and exit code 2.

User guide: docs/guide/compare.md.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path

from . import compare_data as cd
from . import datasets, records
from .atomic import same_file, write_atomic
from .compare import DEFAULT_TIMEOUT, compare, format_table, plot_ratios, to_csv
from .domain import Domain
from .privacy import add_budget_arguments, from_budget
from .workload_specs import parse_workload, spec_files

__all__ = ["add_parser", "main", "parse_domain"]

_SIZES = re.compile(r"^\s*\d+(\s*,\s*\d+)*\s*$")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``compare`` sub-command on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "compare",
        help="score every selector (and the SVD bound) on one workload",
        description=(
            "Score every registered selector that applies (or the listed ones) on one "
            "workload with the shared evaluator, plus the SVD lower bound; print a table "
            "sorted by error. Selectors that do not apply are listed with the reason."
        ),
        epilog=(
            "--selectors LIST: NAME[:key=value,...],NAME,... ; an item containing '=' is a "
            "parameter of the selector before it, e.g. identity,hdmm:restarts=5,seed=1,opt0:p=8 "
            "(values parsed as YAML; brackets keep commas: dims=[16,16]). "
            "Example: mmtoolkit compare --domain adult --workload marginals:k=2 --rho 0.5. "
            "On records: mmtoolkit compare --data FILE.csv --domain DOMAIN.json --workload "
            "marginals:k=2 --epsilon 0.1,1,10 --trials 5 (measured error of every selector x "
            "post-processing and of the peers AIM and MST; docs/guide/compare.md)"
        ),
    )
    p.add_argument(
        "--domain",
        metavar="SPEC",
        help="dataset preset (adult), attribute sizes (10,10,10) or a domain JSON file",
    )
    p.add_argument(
        "--workload",
        required=True,
        metavar="SPEC",
        help="workload spec, e.g. marginals:k=2, all_range:n=256 (mmtoolkit list workloads)",
    )
    add_budget_arguments(p, epsilon_list=True)
    p.add_argument(
        "--data",
        metavar="FILE.csv",
        help="records (with --domain, the public domain file): measure each method's error "
        "on them at every --epsilon instead of scoring selectors analytically",
    )
    p.add_argument("--trials", type=int, default=5, help="with --data: trials (default 5)")
    p.add_argument(
        "--postprocess",
        default=",".join(cd.POSTPROCESS),
        metavar="LIST",
        help=f"with --data: post-processings (default {','.join(cd.POSTPROCESS)})",
    )
    p.add_argument(
        "--peers",
        default=",".join(cd.PEERS),
        metavar="LIST",
        help=f"with --data: data-dependent peers (default {','.join(cd.PEERS)}; none: no peer)",
    )
    p.add_argument(
        "--pgm-iters",
        type=int,
        default=None,
        metavar="N",
        help="with --data: at most N Private-PGM optimiser steps (default: until the fit "
        "converges)",
    )
    p.add_argument(
        "--store",
        metavar="FILE.jsonl",
        help="with --data: job store, so a rerun reuses finished jobs (default: FILE.csv of "
        "--out with .jobs.jsonl appended)",
    )
    p.add_argument(
        "--selectors",
        metavar="LIST",
        help="selectors to compare (default: all registered; with --data "
        + ",".join(cd.DEFAULT_SELECTORS)
        + ")",
    )
    p.add_argument("--objective", choices=("sum", "max"), default="sum", help="default: sum")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help=f"seconds per selector, selection and scoring (default {DEFAULT_TIMEOUT:g}); with "
        f"--data per job (default {cd.DEFAULT_TIMEOUT:g}); 0: none",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed for selectors that take one (default 0)"
    )
    p.add_argument(
        "-j", "--jobs", type=int, default=None, metavar="N", help="selectors at once (default 2)"
    )
    p.add_argument(
        "--out", metavar="FILE.csv", help="write the table as CSV (with --data: one row per job)"
    )
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="bar chart of RMSE / SVD-bound RMSE; with --data error against ε per method",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    return p


def parse_domain(text: str) -> Domain:
    """The :class:`~mmtoolkit.domain.Domain` of a ``--domain`` SPEC: a domain JSON file, a
    list of sizes ``10,10,10`` or a dataset preset name; ValueError naming the choices."""
    if _SIZES.match(text):
        return Domain.from_sizes([int(s) for s in text.split(",")])
    path = Path(text)
    if path.suffix.lower() == ".json" or path.is_file():
        if not path.is_file():
            raise ValueError(f"--domain: no such domain file {text!r}")
        return records.read_domain(path)[0]
    if text in datasets.available():
        return datasets.domain(text)
    raise ValueError(
        f"--domain {text!r} is neither a domain JSON file, a list of sizes such as 10,10,10, "
        f"nor a dataset preset ({', '.join(datasets.available())})"
    )


def _check_outputs(outputs, inputs) -> None:
    """Refuse (ValueError naming both flags) an output path that is an input or another
    output, or that cannot be written; ``outputs`` and ``inputs`` are ``(flag, path)``
    pairs (path None: not given)."""
    outs = [(flag, Path(p)) for flag, p in outputs if p is not None]
    ins = [(flag, Path(p)) for flag, p in inputs if p is not None]
    for flag, path in outs:
        if str(path) == "-":
            raise ValueError(f"{flag} -: writing to standard output is not supported; give a file")
    for i, (flag, path) in enumerate(outs):
        for other, ipath in ins:
            if same_file(path, ipath):
                raise ValueError(
                    f"{flag} {str(path)!r} is the {other} input file: writing it would "
                    f"overwrite it; give another {flag}"
                )
        for other, opath in outs[:i]:
            if same_file(path, opath):
                raise ValueError(
                    f"{other} and {flag} are the same file {str(path)!r}; give two paths"
                )
        if path.is_dir():
            raise ValueError(f"{flag} {str(path)!r} is a directory, not a file")
        if not Path(os.path.realpath(path)).parent.is_dir():
            raise ValueError(f"{flag} {str(path)!r}: no such directory {str(path.parent)!r}")


def _timeout(args, default: float) -> float | None:
    """``--timeout`` in seconds (its default when not given), None for 0 (no limit)."""
    timeout = default if args.timeout is None else args.timeout
    if not (timeout >= 0 and math.isfinite(timeout)):  # NaN, inf too
        raise ValueError(
            f"--timeout must be 0 (no limit) or a finite number of seconds > 0, got {timeout}"
        )
    return timeout if timeout > 0 else None


def _list(text: str) -> list[str]:
    return [] if text.strip() == "none" else [x.strip() for x in text.split(",")]


def _main_data(args) -> int:
    """``mmtoolkit compare --data``: :func:`~mmtoolkit.compare_data.compare_data`."""
    try:
        if args.rho is not None:
            raise ValueError(
                "--data compares every method at the same ε (read at --delta, default "
                f"{cd.DEFAULT_DELTA:g}): give --epsilon, not --rho"
            )
        if args.epsilon is None:
            raise ValueError("--data needs --epsilon, e.g. --epsilon 0.1,1,10")
        if args.domain is None:
            raise ValueError("--data needs --domain, the data's public domain file")
        if args.jobs is not None and args.jobs < 1:
            raise ValueError(f"-j/--jobs must be at least 1, got {args.jobs}")
        store = args.store or (f"{args.out}.jobs.jsonl" if args.out else None)
        outputs = [("--out", args.out), ("--plot", args.plot), ("--store", store)]
        _check_outputs(outputs, [("--data", args.data), ("--domain", args.domain)])
        df = cd.compare_data(
            args.data,
            args.workload,
            args.epsilon,
            domain=args.domain,
            delta=cd.DEFAULT_DELTA if args.delta is None else args.delta,
            trials=args.trials,
            selectors=args.selectors,
            postprocess=_list(args.postprocess),
            peers=_list(args.peers),
            seed=args.seed,
            timeout=_timeout(args, cd.DEFAULT_TIMEOUT),
            jobs=args.jobs,
            store=store,
            pgm_iters=args.pgm_iters,
            progress=not args.quiet,
        )
        summary = cd.summarize(df)
    except (ValueError, KeyError, TypeError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"mmtoolkit compare: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2
    print(cd.format_summary(summary), end="")
    try:
        if args.out:
            write_atomic(args.out, cd.to_csv(df))
            print(f"wrote {args.out}")
        if args.plot:
            cd.plot_errors(summary, args.plot)
            print(f"wrote {args.plot}")
    except OSError as exc:
        print(f"mmtoolkit compare: error: {exc}", file=sys.stderr)
        return 2
    return 0


def main(args) -> int:
    """Entry point of ``mmtoolkit compare`` (parsed ``args``); returns the exit code."""
    if args.data is not None:
        return _main_data(args)
    try:
        epsilon = args.epsilon
        if epsilon is not None:
            try:
                epsilon = float(epsilon)
            except ValueError:
                raise ValueError(
                    f"--epsilon must be a number, got {epsilon!r} (a list is for --data)"
                ) from None
        privacy = from_budget(epsilon, args.delta, args.rho)
        if args.jobs is not None and args.jobs < 1:
            raise ValueError(f"-j/--jobs must be at least 1, got {args.jobs}")
        timeout = _timeout(args, DEFAULT_TIMEOUT)
        domain = parse_domain(args.domain) if args.domain else None
        spec = parse_workload(args.workload, "--workload", domain=domain, domain_source="--domain")
        domain_file = args.domain if args.domain and Path(args.domain).is_file() else None
        inputs = [("--domain", domain_file), *(("--workload", f) for f in spec_files(spec))]
        _check_outputs([("--out", args.out), ("--plot", args.plot)], inputs)
        df = compare(
            spec,
            args.selectors,
            privacy=privacy,
            objective=args.objective,
            timeout=timeout,
            seed=args.seed,
            jobs=args.jobs,
            progress=not args.quiet,
        )
    except (ValueError, KeyError, TypeError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"mmtoolkit compare: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2
    print(format_table(df), end="")
    try:
        if args.out:
            write_atomic(args.out, to_csv(df))
            print(f"wrote {args.out}")
        if args.plot:
            plot_ratios(df, args.plot)
            print(f"wrote {args.plot}")
    except OSError as exc:
        print(f"mmtoolkit compare: error: {exc}", file=sys.stderr)
        return 2
    return 0
