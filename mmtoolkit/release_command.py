"""``mmtoolkit release``: noisy workload answers from a records CSV, end to end.

::

    mmtoolkit release --data adult.csv --domain adult-domain.json --workload marginals:2 \\
        --selector residual_planner --rho 0.5 --seed 1 --out answers.csv

reads the records against the domain file (:mod:`mmtoolkit.records`; every bad value is
reported with its line and column), builds the workload, selects a strategy with the named
selector (``--param KEY=VALUE`` passes selector parameters, values parsed as YAML), asks the
shared evaluator for the expected error and per-query standard errors, releases the noisy
answers (:func:`mmtoolkit.mechanism.release`) and writes

* ``--out`` (CSV): one line per query — ``query, marginal, cell, answer, stderr`` for
  marginals workloads (``marginal`` the attribute names and ``cell`` their values, joined by
  ``;``), ``query, answer, stderr`` otherwise; with ``--releases R > 1`` the columns
  ``answer_1 … answer_R`` hold R independent releases (each one spends the full budget: R
  releases together are R-fold composition);
* ``--summary`` (JSON, default ``OUT.json``): the privacy guarantee, selector, parameters
  and chosen strategy kind, the expected RMSE and total squared error reported by the
  evaluator, the number of queries and records, the noise kind, seeds and timings.

Both files are written atomically (to temporary files renamed at the end): on any error
nothing is written. Without ``--data`` a synthetic dataset is generated
(:func:`mmtoolkit.records.synthetic`; ``--records`` and ``--data-seed``) over ``--domain``, or
over a built-in 6-attribute demo domain when no domain is given either.

Workload SPECs follow the package's one grammar (:mod:`mmtoolkit.workload_specs`, shared
with the experiment configs): ``KIND`` or ``KIND:key=value,...`` with ``KIND`` any of
``mmtoolkit list workloads`` and values parsed as YAML — ``marginals:k=2``,
``marginals:k=3,lower=true``, ``marginal:attrs=[age,sex]``, ``prefix_marginals:k=2`` (prefixes
on the domain file's numeric attributes, identity on the others), ``all_range:n=64``,
``width_range:n=64,w=8``, ``identity`` (the full histogram; small domains) — or a YAML flow
mapping for nested workloads, ``{kind: kron, factors: [{kind: prefix, n: 8}, {kind:
identity, n: 8}]}``. Shorthands: ``marginals:K``, ``marginals:K:lower`` (all ≤K-way, with the
total), ``range_marginals:K``, ``prefix_marginals:K``, ``marginal:A,B,...``,
``kron:prefix,identity`` (one bare kind per attribute, each on that attribute's size).
Builders whose first parameter is a domain get the records' domain (a SPEC may not name
one); a top-level ``n`` left out is the domain's number of cells, and a workload must have
one column per cell of the domain (``all_range:n=64`` needs a 64-cell domain).
``binary_marginals`` (queries on the binary encoding of the domain, not on the records) is
refused, and so is any SPEC that does not parse or build (the message names the kind and
lists the valid kinds or the builder's parameters).

Privacy: ``--epsilon E`` (pure ε-DP, Laplace), ``--epsilon E --delta D`` ((ε, δ)-DP, analytic
Gaussian), or ``--rho R`` (ρ-zCDP, Gaussian). ``--noise discrete`` draws exact integer noise
(discrete Laplace / Gaussian). ``--nonnegative`` and ``--round`` are post-processing steps
applied after the release (they keep privacy but bias the answers: the reported expected
error is that of the unprocessed answers).

Exit codes: 0 success, 2 bad input (a one-line message naming the problem, nothing written).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from . import evaluate, mechanism, records, selectors
from .atomic import write_files_atomic
from .linalg import Marginal, Marginals, TooLargeError, peel
from .privacy import from_budget
from .workload_specs import SpecError
from .workload_specs import parse_workload as parse_spec

__all__ = ["add_parser", "main", "DEMO_DOMAIN", "parse_workload", "run"]

#: The domain of the built-in synthetic demo (used when neither --data nor --domain is given).
DEMO_DOMAIN = {"age": 10, "sex": 2, "education": 6, "region": 5, "income": 4, "hours": 8}


class ReleaseError(ValueError):
    """Bad command-line input for ``mmtoolkit release``."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``release`` sub-command on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "release",
        help="release noisy workload answers from a records CSV",
        description=(
            "Select a strategy for a workload, then release noisy answers from records. "
            "Writes the answers (CSV) and a summary (JSON) atomically."
        ),
        epilog=(
            "workload SPEC: KIND or KIND:key=value,... (KIND from `mmtoolkit list workloads`, "
            "values parsed as YAML), e.g. marginals:k=2, marginals:k=3,lower=true, "
            "all_range:n=64, or a YAML mapping {kind: ..., ...}; shorthands marginals:K, "
            "marginals:K:lower, range_marginals:K, prefix_marginals:K, marginal:A,B, "
            "kron:prefix,identity. "
            "Example: mmtoolkit release --data adult.csv --domain adult-domain.json "
            "--workload marginals:2 --selector hdmm --param restarts=5 --epsilon 1 --out a.csv"
        ),
    )
    p.add_argument("--data", metavar="FILE.csv", help="records CSV (default: synthetic data)")
    p.add_argument(
        "--domain", metavar="DOMAIN.json", help="domain file {attribute: size} (see records.py)"
    )
    p.add_argument("--records", type=int, default=1000, help="synthetic records (default 1000)")
    p.add_argument("--data-seed", type=int, default=0, help="seed of the synthetic data")
    p.add_argument("--workload", required=True, metavar="SPEC", help="workload (see below)")
    p.add_argument("--selector", required=True, metavar="NAME", help="registered selector")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="selector parameter (repeatable; VALUE parsed as YAML)",
    )
    p.add_argument("--epsilon", type=float, help="ε (pure DP, or (ε, δ)-DP with --delta)")
    p.add_argument("--delta", type=float, help="δ for (ε, δ)-DP (analytic Gaussian)")
    p.add_argument("--rho", type=float, help="ρ for ρ-zCDP (Gaussian)")
    p.add_argument(
        "--noise", choices=("continuous", "discrete"), default="continuous", help="noise kind"
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the noise (default: fresh)")
    p.add_argument("--releases", type=int, default=1, help="independent releases (default 1)")
    p.add_argument("--nonnegative", action="store_true", help="post-process: clip at 0")
    p.add_argument("--round", action="store_true", help="post-process: round to integers")
    p.add_argument("--out", required=True, metavar="ANSWERS.csv", help="answers CSV to write")
    p.add_argument("--summary", metavar="SUMMARY.json", help="summary JSON (default OUT.json)")
    return p


# ============================================================================ pieces
def _privacy(args):
    return from_budget(args.epsilon, args.delta, args.rho)


def _params(items) -> dict:
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ReleaseError(f"--param must look like KEY=VALUE, got {item!r}")
        if key in out:
            raise ReleaseError(f"--param {key} is given twice")
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ReleaseError(f"--param {key}: cannot parse the value {value!r}") from None
    return out


def parse_workload(spec: str, domain):
    """The workload Matrix of a ``--workload`` SPEC (module docstring) over ``domain``, the
    records' :class:`~mmtoolkit.domain.Domain`; a :class:`ReleaseError` naming the problem
    for a SPEC that does not parse, does not build, or is not on ``domain``'s cells."""

    if not isinstance(spec, str) or not spec.strip():
        raise ReleaseError("--workload needs a SPEC such as marginals:k=2")
    where = f"--workload {spec!r}"
    try:
        parsed = parse_spec(spec, "--workload", domain=domain, domain_source="--domain / --data")
    except SpecError as exc:
        raise ReleaseError(str(exc)) from None
    if parsed.kind == "binary_marginals":
        raise ReleaseError(
            f"{where}: binary_marginals asks queries on the binary encoding of the domain, "
            "not on the records' domain: release cannot answer it"
        )
    try:
        W = parsed.build()
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        raise ReleaseError(f"{where}: {parsed.kind}(): {msg}") from None
    if int(W.shape[1]) != domain.size:
        raise ReleaseError(
            f"{where}: the workload is on {W.shape[1]} cells but the domain has {domain.size} "
            f"({' x '.join(map(str, domain.sizes))}); give sizes matching the domain"
        )
    return W


def _labels(W, domain):
    """Per-query ``(marginal, cell)`` labels for a marginals workload, else None."""

    _, base = peel(W)
    if not isinstance(base, (Marginal, Marginals)) or tuple(base.sizes) != tuple(domain.sizes):
        return None
    if isinstance(base, Marginal):
        keys = [base.key]
    elif isinstance(base, Marginals):
        keys = list(base.keys)
    names, cells = [], []
    for key in keys:
        attrs = [i for i in range(len(domain)) if (key >> i) & 1]
        label = ";".join(domain.names[i] for i in attrs) or "(total)"
        shape = [domain.sizes[i] for i in attrs]
        idx = np.indices(shape).reshape(len(attrs), -1).T if attrs else np.zeros((1, 0), int)
        names.extend([label] * len(idx))
        cells.extend(";".join(map(str, row)) for row in idx)
    return names, cells


def _discrete_summary(strategy, privacy) -> dict:
    """The exact noise parameters and the privacy they spend (≤ the budget)."""

    own = peel(strategy.matrix)[1].discrete_summary(privacy)
    if own is not None:
        return own
    cal = mechanism.discrete_calibration(strategy.matrix, privacy)  # = W for inference none
    return {
        "mechanism": f"discrete {cal.kind}",
        "distinct_row_scales": len(cal.params),
        "budget": cal.budget,
        "spent": cal.spent,
    }


# ============================================================================ run
def _output_paths(args) -> tuple[Path, Path]:
    out = Path(args.out)
    summary_path = Path(args.summary) if args.summary else out.with_name(out.name + ".json")
    for path in (out, summary_path):
        if not path.parent.is_dir():
            raise ReleaseError(f"output directory {path.parent} does not exist")
    if out.resolve() == summary_path.resolve():
        raise ReleaseError("--out and --summary must be different files")
    return out, summary_path


def _load_data(args):
    """``(records, source description)`` from ``--data``/``--domain`` or synthetic records."""
    if args.data is not None:
        if args.domain is None:
            raise ReleaseError("--data needs --domain (the domain file of the records)")
        return records.read_csv(args.data, args.domain), str(args.data)
    if args.records < 0:
        raise ReleaseError(f"--records must be non-negative, got {args.records}")
    domain = records.read_domain(args.domain)[0] if args.domain else DEMO_DOMAIN
    data = records.synthetic(domain, args.records, args.data_seed)
    return data, f"synthetic(records={args.records}, seed={args.data_seed})"


def _answers_csv(W, domain, answers, stderr, integers: bool) -> str:
    """The answers CSV: ``query[, marginal, cell], answer(s)[, stderr]``."""
    m = int(W.shape[0])
    labels = _labels(W, domain)
    header = ["query"] + (["marginal", "cell"] if labels else [])
    header += ["answer"] if len(answers) == 1 else [f"answer_{r + 1}" for r in range(len(answers))]
    columns = [[str(i) for i in range(m)]]
    if labels:
        columns += [[f'"{n}"' for n in (x.replace('"', '""') for x in labels[0])], labels[1]]
    fmt = "{:d}".format if integers else "{:.10g}".format
    columns += [list(map(fmt, a.tolist())) for a in answers]
    if stderr is not None:
        header.append("stderr")
        columns.append(list(map("{:.10g}".format, stderr.tolist())))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(header)
    buf.write("\n".join(",".join(row) for row in zip(*columns)))
    buf.write("\n")
    return buf.getvalue()


def run(args) -> dict:
    """Do the release described by parsed ``args``; returns the summary (files written)."""
    t0 = time.perf_counter()
    out, summary_path = _output_paths(args)
    if args.releases < 1:
        raise ReleaseError(f"--releases must be at least 1, got {args.releases}")
    privacy = _privacy(args)
    params = _params(args.param)
    if args.selector not in selectors.available():
        raise ReleaseError(
            f"unknown selector {args.selector!r}; available: {', '.join(selectors.available())}"
        )
    data, source = _load_data(args)
    domain = data.domain
    W = parse_workload(args.workload, domain)
    t_load = time.perf_counter() - t0

    # strategy and its analytic error
    t1 = time.perf_counter()
    strategy = selectors.get(args.selector, **params).select(W, privacy)
    t_select = time.perf_counter() - t1
    t2 = time.perf_counter()
    total = evaluate.expected_error(W, strategy, privacy)
    try:
        stderr = mechanism.standard_errors(W, strategy, privacy)
    except TooLargeError:
        stderr = None
    t_eval = time.perf_counter() - t2

    # releases
    t3 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    answers = [
        mechanism.release(W, strategy, data, privacy, rng, args.noise) for _ in range(args.releases)
    ]
    post = []
    if args.nonnegative:
        answers = [mechanism.clip_nonnegative(a) for a in answers]
        post.append("clip_nonnegative")
    if args.round:
        answers = [mechanism.round_to_integers(a) for a in answers]
        post.append("round_to_integers")
    t_release = time.perf_counter() - t3

    # outputs, built in memory then written atomically
    m = int(W.shape[0])
    summary = {
        "privacy": privacy.describe(),
        "privacy_spec": privacy.to_spec(),
        "releases": len(answers),
        "composition": (
            "each release spends the full budget; together they are "
            f"{len(answers)}-fold composition"
            if len(answers) > 1
            else None
        ),
        "selector": args.selector,
        "params": json.loads(json.dumps(params, default=repr)),
        "strategy": type(strategy.matrix).__name__,
        "operator": (strategy.metadata or {}).get("operator"),
        "workload": args.workload,
        "queries": m,
        "data": source,
        "records": len(data),
        "domain_cells": str(domain.size),
        "expected_total_squared_error": total,
        "expected_rmse": math.sqrt(total / m),
        "noise": args.noise,
        "seed": args.seed,
        "postprocessing": post,
        "postprocessing_note": (
            "the expected error refers to the answers before post-processing" if post else None
        ),
        "seconds": {
            "load": t_load,
            "select": t_select,
            "evaluate": t_eval,
            "release": t_release,
        },
    }
    if args.noise == "discrete":
        summary["discrete_noise"] = _discrete_summary(strategy, privacy)
    summary["seconds"]["total"] = time.perf_counter() - t0
    write_files_atomic(
        {
            out: _answers_csv(W, domain, answers, stderr, args.round),
            summary_path: json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
        }
    )
    summary["paths"] = {"answers": str(out), "summary": str(summary_path)}
    return summary


def main(args) -> int:
    """Entry point of ``mmtoolkit release`` (parsed ``args``); returns the exit code."""
    try:
        s = run(args)
    except (ValueError, KeyError, TypeError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"mmtoolkit release: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2
    print(
        f"released {s['queries']} answers x {s['releases']} ({s['workload']}, selector "
        f"{s['selector']}, {s['strategy']}) from {s['records']} records; {s['privacy']}; "
        f"expected RMSE {s['expected_rmse']:.6g}; {s['seconds']['total']:.1f} s "
        f"-> {s['paths']['answers']}, {s['paths']['summary']}"
    )
    return 0
