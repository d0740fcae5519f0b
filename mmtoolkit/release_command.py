"""``mmtoolkit release``, ``mmtoolkit select`` and ``mmtoolkit ledger``: the command lines.

:func:`run` does a release from parsed arguments: records read against a declared domain
(:mod:`mmtoolkit.records`), the workload built from a SPEC (:mod:`mmtoolkit.workload_specs`),
a strategy selected (or loaded from ``--plan``), the ledger charged, the noisy answers
released (:func:`mmtoolkit.releasing.release`) and the answers CSV (or one CSV per marginal)
and a JSON summary written atomically; ``--from-summary`` replays a release. :func:`main`,
:func:`select_main` and :func:`ledger_main` are the entry points (exit 0, or 2 with one line
naming the problem and nothing written).

User guide: docs/guide/release.md.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import os
import sys
import time
import warnings
from pathlib import Path

from . import evaluate, jsonsafe, mechanism, records, selectors
from .atomic import same_file, write_files_atomic
from .intervals import SIMULTANEOUS
from .ledger import Ledger, LedgerError
from .plan import NoisePlan
from .privacy import Privacy, add_budget_arguments, from_budget, from_spec
from .release_handlers import handler
from .releasing import release, select_plan, workload_matrix, workload_tables
from .saved_plans import load_plan, save_plan

__all__ = ["add_parser", "add_ledger_parser", "add_select_parser", "main", "ledger_main",
           "select_main", "DEMO_DOMAIN", "run"]  # fmt: skip

#: The domain of the built-in synthetic demo (used when neither --data nor --domain is given).
DEMO_DOMAIN = {"age": 10, "sex": 2, "education": 6, "region": 5, "income": 4, "hours": 8}
#: Answer-file columns that a domain attribute may not be named.
RESERVED_COLUMNS = ("query", "marginal", "answer", "lower", "upper", "stderr")
#: The post-processing flags, in the order applied, and the :mod:`mmtoolkit.mechanism`
#: function (named as the summary's ``postprocessing`` lists it) each applies.
POSTPROCESSING = (("nonnegative", "clip_nonnegative"), ("round", "round_to_integers"))


class ReleaseError(ValueError):
    """Bad command-line input for ``mmtoolkit release``."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``release`` sub-command on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "release",
        help="release noisy workload answers from a records CSV",
        description=(
            "Select a strategy for a workload, then release noisy answers from records. "
            "Writes the labelled answers (CSV) and a summary (JSON) atomically."
        ),
        epilog=(
            "workload SPEC: KIND or KIND:key=value,... (KIND from `mmtoolkit list workloads`, "
            "values parsed as YAML), e.g. marginals:k=2, marginals:k=3,lower=true, "
            "all_range:n=64, or a YAML mapping {kind: ..., ...}; shorthands marginals:K, "
            "marginals:K:lower, range_marginals:K, prefix_marginals:K, marginal:A,B, "
            "kron:prefix,identity. "
            "Example: mmtoolkit release --data people.csv --domain people-domain.json "
            "--workload marginals:2 --selector hdmm --param restarts=5 --epsilon 1 --out a.csv"
        ),
    )
    p.add_argument("--data", metavar="FILE.csv", help="records CSV (default: synthetic data)")
    p.add_argument("--domain", metavar="DOMAIN.json",
                   help="domain file: values, bins or size per attribute")
    p.add_argument("--records", type=int, default=None, help="synthetic records (default 1000)")
    p.add_argument("--data-seed", type=int, default=None, help="seed of the synthetic data")
    _selection_arguments(p)
    p.add_argument("--plan", metavar="PLAN.npz", help="release the plan `mmtoolkit select` saved")
    p.add_argument("--releases", type=int, default=None, help="independent releases (default 1)")
    p.add_argument("--nonnegative", action="store_true", help="post-process: clip at 0")
    p.add_argument("--round", action="store_true", help="post-process: round to integers")
    p.add_argument("--out", metavar="ANSWERS.csv", help="tidy answers CSV to write")
    p.add_argument("--out-dir", metavar="DIR", help="write one CSV per marginal into DIR")
    p.add_argument("--summary", metavar="SUMMARY.json", help="summary JSON (default OUT.json)")
    p.add_argument("--ledger", metavar="LEDGER.json", help="privacy ledger to charge")
    p.add_argument("--from-summary", metavar="SUMMARY.json",
                   help="repeat the release a summary describes")
    return p


def _selection_arguments(p) -> None:
    """The arguments that define a selection (shared by ``release`` and ``select``)."""
    p.add_argument("--workload", metavar="SPEC", help="workload (see below)")
    p.add_argument("--selector", metavar="NAME", help="registered selector")
    p.add_argument("--select-for", metavar="SPEC",
                   help="select the strategy for this workload, answer --workload with it "
                   "(default: --workload; e.g. a workload too large to answer)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="selector parameter (repeatable; VALUE parsed as YAML)")
    add_budget_arguments(p)
    p.add_argument("--noise", choices=("continuous", "discrete"), default=None,
                   help="noise kind (default: discrete, exact integer noise, in a private "
                   "release; continuous with --seed)")
    p.add_argument("--seed", type=int, default=None,
                   help="the one seed of a reproducible experiment: selection and noise; "
                   "whoever holds it can remove the noise (default: none, a private release "
                   "from a cryptographic generator, nothing of it written)")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="the answers' intervals are (1 - alpha) intervals (default 0.05)")
    p.add_argument("--simultaneous", choices=SIMULTANEOUS, default="none",
                   help="what each (1 - alpha) statement covers: each answer (none, the "
                   "default), each table jointly, or the whole workload jointly (Bonferroni)")


def add_select_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``select`` sub-command: select once, save the plan (``release --plan``)."""
    p = subparsers.add_parser(
        "select",
        help="select a strategy and save it as a plan for `mmtoolkit release --plan`",
        description="Select a strategy for a workload on a declared domain (no data is read) "
        "as `mmtoolkit release` would for the same arguments and seed, and save it with its "
        "privacy and noise settings (mmtoolkit/saved_plans.py).",
    )
    p.add_argument("--domain", metavar="DOMAIN.json", help="domain file (required)")
    _selection_arguments(p)
    p.add_argument("--save", metavar="PLAN.npz", help="the plan file to write (required)")
    return p


def select_main(args) -> int:
    """Entry point of ``mmtoolkit select``; returns the exit code."""
    try:
        need = ("workload", "domain", "selector", "save")
        missing = [f"--{k}" for k in need if not getattr(args, k)]
        if missing:
            raise ReleaseError(f"{', '.join(missing)} required")
        if args.save == "-" or Path(args.save).is_dir():
            raise ReleaseError(f"--save {args.save}: give a file name")
        if same_file(args.save, args.domain):
            raise ReleaseError(f"--save {args.save} is the --domain file: it would be overwritten")
        privacy = from_budget(args.epsilon, args.delta, args.rho)
        plan = select_plan(args.workload, privacy, args.selector,
                           domain=records.read_domain(args.domain), params=_params(args.param),
                           seed=args.seed, noise=args.noise,
                           select_for=args.select_for)  # fmt: skip
        W = workload_matrix(plan.workload, plan.domain.domain)
        rmse = evaluate.rmse(W, plan.strategy, privacy)
        sha = save_plan(args.save, plan)
    except (ValueError, KeyError, TypeError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"mmtoolkit select: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2
    print(
        f"selected {type(plan.strategy.matrix).__name__} by {plan.strategy.selector} for "
        f"{args.workload}; {privacy}, {plan.noise or 'default'} noise; expected RMSE {rmse:.6g} "
        f"-> {args.save} (sha256 {sha[:16]})"
    )
    return 0


def add_ledger_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``ledger`` sub-command (``init`` and ``show``)."""
    p = subparsers.add_parser("ledger", help="create or show a privacy ledger")
    sub = p.add_subparsers(dest="ledger_command", metavar="ACTION")
    sub.required = True
    init = sub.add_parser("init", help="create a ledger with a declared total budget")
    init.add_argument("file", metavar="FILE")
    init.add_argument("--rho", type=float, help="total ρ (zCDP)")
    init.add_argument("--epsilon", type=float, help="total ε (pure DP, or (ε, δ) with --delta)")
    init.add_argument("--delta", type=float,
                      help="total δ with --epsilon; with --rho, the δ at which ρ is shown "
                      "as (ε, δ)")
    init.add_argument("--dataset", default="", help="the dataset's name (for the report)")
    show = sub.add_parser("show", help="print the budget spent and the entries")
    show.add_argument("file", metavar="FILE")
    return p


def ledger_main(args) -> int:
    """Entry point of ``mmtoolkit ledger``; returns the exit code."""
    try:
        if args.ledger_command == "init":
            # with --rho, --delta is the δ at which ρ is shown as (ε, δ)
            delta, rho_delta = (None, args.delta) if args.rho is not None else (args.delta, None)
            ledger = Ledger.create(args.file, rho=args.rho, epsilon=args.epsilon, delta=delta,
                                   conversion_delta=rho_delta, dataset=args.dataset)
            text = f"created {ledger.path}: total " + jsonsafe.dumps(ledger.total, "stdout")
        else:
            text = Ledger(args.file).report()
    except (ValueError, OSError) as exc:
        print(f"mmtoolkit ledger: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(text)  # outside the try: a closed stdout is not a ledger error (see mmtoolkit.cli)
    return 0


# ============================================================================ pieces
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


def _discrete_summary(strategy, privacy) -> dict:
    """The exact noise parameters and the privacy they spend (≤ the budget)."""

    plan = NoisePlan(strategy.matrix, privacy, "discrete")  # = W for inference none
    own = handler(plan.A).discrete_summary(plan.A, plan.spec)
    if own is not None:
        return own
    cal = plan.calibration
    return {
        "mechanism": f"discrete {cal.kind}",
        "distinct_row_scales": len(cal.params),
        "budget": cal.budget,
        "spent": cal.spent,
    }


# ============================================================================ run
def _apply_summary(args) -> tuple[dict, Privacy | None, str | None]:
    """Fill the arguments left unset from ``--from-summary``; returns the selector params,
    the summary's privacy, rebuilt whole from its spec (an (ε, δ) calibration included), or
    None when budget flags are given beside it, and the summary's data digest when the replay
    keeps its seed (the digest is keyed by the seed), to tell whether the data changed."""
    path = Path(args.from_summary)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ReleaseError(f"--from-summary {path}: not UTF-8 text") from None
    except OSError as exc:
        raise ReleaseError(f"--from-summary: cannot read {path}: {exc.strerror}") from None
    s = jsonsafe.loads(text, f"--from-summary {path}", ReleaseError)
    private = isinstance(s, dict) and "seed" not in s and str(s.get("mode")).startswith("private")
    need = ("workload", "selector", "params", "privacy_spec") + (() if private else ("seed",))
    missing = [k for k in need if k not in s] if isinstance(s, dict) else list(need)
    if missing:
        raise ReleaseError(f"--from-summary {path}: not a release summary (no {missing})")
    kinds = {
        "workload": (str, "a workload SPEC"),
        "selector": (str, "a selector name"),
        "params": (dict, "an object of selector parameters"),
        "seed": (int, "a non-negative integer"),
        "releases": (int, "a positive integer"),
        "noise": (str, "'continuous' or 'discrete'"),
    }
    for key, (kind, what) in kinds.items():
        value = s.get(key)
        if key in s and value is not None and (
            isinstance(value, bool) or not isinstance(value, kind)
        ):
            raise ReleaseError(f"--from-summary {path}: {key} must be {what}, got {value!r}")
    if private and args.seed is None:
        raise ReleaseError(
            f"--from-summary {path}: the summary is of a private release, whose noise came "
            "from a cryptographic generator whose key was never written: it cannot be "
            "replayed. To release again with fresh noise (spending the budget again), give "
            "--workload, --selector and the budget explicitly; --seed N with --from-summary "
            "repeats its settings as a reproducible (not private) experiment"
        )
    for flag in ("data", "domain"):
        if getattr(args, flag) is None and s.get(f"{flag}_file"):
            setattr(args, flag, s[f"{flag}_file"])
    synth = (s.get("synthetic") or {}) if args.data is None else {}  # --data beside it: none
    if args.records is None:
        args.records = synth.get("records")
    if args.data_seed is None:
        args.data_seed = synth.get("data_seed")
    params = dict(s["params"])
    if s.get("selection_seed_source") == "derived from seed":
        # derived again from the seed (the same value for the same seed, a new one for a new
        # --seed), so the replay's summary says "derived" too and a replay of it follows
        params.pop("seed", None)
    for key in ("workload", "selector", "seed", "noise", "releases"):
        if getattr(args, key) is None:
            setattr(args, key, s.get(key))
    if args.select_for is None and s.get("selected_for"):
        args.select_for = s["selected_for"]["workload"]
    for flag, value, entry in (
        ("--workload", args.workload, s),
        ("--select-for", args.select_for, s.get("selected_for") or {}),
    ):
        if value == entry.get("workload") and entry.get("workload_is_spec") is False:
            raise ReleaseError(
                f"--from-summary {path}: the release was made from Python with a Matrix as "
                f"its {flag[2:]} ({value}), which cannot be rebuilt from the summary; give "
                f"{flag} SPEC"
            )
    privacy = None
    if args.rho is None and args.epsilon is None and args.delta is None:
        try:
            privacy = from_spec(s["privacy_spec"])
        except (ValueError, TypeError) as exc:
            raise ReleaseError(f"--from-summary {path}: privacy_spec: {exc}") from None
    for step in s.get("postprocessing") or []:
        for flag, name in POSTPROCESSING:
            setattr(args, flag, getattr(args, flag) | (step == name))
    return params, privacy, s.get("data_digest") if args.seed == s.get("seed") else None


def _plan(args):
    """The ``--plan`` file's plan (None without one), refusing the flags it fixes."""
    if args.plan is None:
        return None
    plan = load_plan(args.plan)
    fixed = ("workload", "selector", "param", "epsilon", "delta", "rho", "noise", "select_for",
             "from_summary")  # fmt: skip
    plan.refuse(**{f"--{k.replace('_', '-')}": getattr(args, k) for k in fixed})
    return plan


def _output_paths(args) -> tuple[Path | None, Path | None, Path]:
    """``(out, out_dir, summary)`` checked: writable places, and no output is an input
    (``--data``, ``--domain``, ``--ledger``, ``--from-summary``) or another output, symbolic
    and hard links resolved. ``--out-dir``'s own files are checked by :func:`_table_plan`."""
    if (args.out is None) == (args.out_dir is None):
        raise ReleaseError("give one of --out FILE.csv or --out-dir DIR")
    for flag in ("out", "summary", "out_dir"):
        if getattr(args, flag) == "-":
            raise ReleaseError(
                f"--{flag.replace('_', '-')} -: writing to standard output is not supported; "
                "give a file name"
            )
    out = Path(args.out) if args.out is not None else None
    out_dir = Path(args.out_dir) if args.out_dir is not None else None
    if out is not None and (out.name in ("", "..") or out.is_dir()):
        raise ReleaseError(f"--out {args.out} is a directory; give a file name")
    if args.summary:
        summary = Path(args.summary)
    elif out is not None:
        summary = out.with_name(out.name + ".json")
    else:  # --out-dir (exactly one of the two is given)
        summary = Path(args.out_dir) / "summary.json"
    if out_dir is not None and out_dir.exists() and not out_dir.is_dir():
        raise ReleaseError(f"--out-dir {out_dir} exists and is not a directory")
    outputs = [("--out", out)] if out is not None else []
    outputs.append(("--summary", summary))
    for flag, path in outputs:
        if path.is_dir():
            raise ReleaseError(f"{flag} {path} is a directory; give a file name")
        parent = path.parent
        if out_dir is not None and parent == out_dir:
            continue
        if parent.exists() and not parent.is_dir():
            raise ReleaseError(f"{flag} {path}: {parent} is not a directory")
        if not parent.is_dir():
            raise ReleaseError(f"output directory {parent} does not exist ({flag} {path})")
    inputs = [(f"--{flag.replace('_', '-')}", Path(getattr(args, flag)))
              for flag in ("data", "domain", "ledger", "from_summary", "plan")
              if getattr(args, flag) is not None]
    for k, (flag, path) in enumerate(outputs):
        for other, opath in outputs[:k]:
            if same_file(path, opath):
                raise ReleaseError(f"{other} and {flag} must be different files ({path})")
        for iflag, ipath in inputs:
            if same_file(path, ipath):
                raise ReleaseError(
                    f"{flag} {path} is the {iflag} file: writing it would overwrite the input"
                )
    if out_dir is not None:
        for iflag, ipath in inputs:
            if Path(os.path.realpath(ipath)).parent == Path(os.path.realpath(out_dir)):
                raise ReleaseError(
                    f"--out-dir {out_dir} holds the {iflag} file {ipath}: choose another "
                    "directory so that no input can be overwritten"
                )
    return out, out_dir, summary


def _load_data(args):
    """``(records, source description, warnings, synthetic-data settings or None)`` from
    ``--data``/``--domain`` or synthetic."""
    if args.data is not None:
        synthetic_only = (("--records", args.records), ("--data-seed", args.data_seed))
        given = [flag for flag, value in synthetic_only if value is not None]
        if given:
            raise ReleaseError(
                f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} only to "
                "synthetic data (without --data); "
                f"--data {args.data} gives the records"
            )
        if args.domain is None:
            raise ReleaseError(
                "--data needs --domain (the declared domain of the records; it is never "
                "inferred from the data)"
            )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", records.RecordsWarning)
            data = records.read_csv(args.data, args.domain)
        return data, str(args.data), [str(w.message) for w in caught], None
    n = 1000 if args.records is None else args.records
    seed = 0 if args.data_seed is None else args.data_seed
    if n < 0:
        raise ReleaseError(f"--records must be non-negative, got {n}")
    domain = records.read_domain(args.domain) if args.domain else DEMO_DOMAIN
    source, synth = f"synthetic(records={n}, seed={seed})", {"records": n, "data_seed": seed}
    return records.synthetic(domain, n, seed), source, [], synth


def _csv(frame, integers: bool) -> str:
    """A DataFrame as CSV: floats as ``%.10g`` (integers as such after ``--round``), missing
    labels as empty fields (formatted column-wise: pandas' float formatter is slow)."""
    columns = []
    for name in frame.columns:
        col = frame[name].to_numpy()
        if col.dtype.kind == "f":
            columns.append(list(map("{:.10g}".format, col.tolist())))
        elif col.dtype.kind in "iu":
            columns.append(list(map(str, col.tolist())))
        else:
            columns.append(["" if v is None or v != v else str(v) for v in col.tolist()])
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([str(c) for c in frame.columns])
    writer.writerows(zip(*columns))
    return buf.getvalue()


def _check_reserved(domain) -> None:
    clash = [n for n in domain.names
             if n in RESERVED_COLUMNS or n.startswith(("answer_", "lower_", "upper_"))]
    if clash:
        raise ReleaseError(
            f"attribute name(s) {clash} clash with the answer file's columns "
            f"{list(RESERVED_COLUMNS)}; rename them in the data and the domain file"
        )


def _table_names(tables) -> dict:
    """The file name of each table, ``{attribute-name tuple: "age__sex.csv"}``, for the
    tables' keys in workload order (a table repeated in the workload is written once)."""
    names, used = {}, set()
    for key in tables:
        if key in names:
            continue
        stem = "__".join(key) or "total"
        stem = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in stem)
        name, k = f"{stem}.csv", 2
        while name in used:
            name, k = f"{stem}_{k}.csv", k + 1
        used.add(name)
        names[key] = name
    return names


def _table_plan(W, domain, out_dir: Path, summary: Path) -> None:
    """Before anything is charged: refuse an ``--out-dir`` that holds any file this release
    would not write (another release's tables would stay beside this one's), and a
    ``--summary`` that is one of its tables."""
    specs = workload_tables(W, domain)
    if specs is None:
        raise ReleaseError(
            "--out-dir writes one CSV per marginal, but this workload is not made of "
            "marginal-type tables; use --out"
        )
    keys = [tuple(domain.names[i] for i in spec.attrs) for spec in specs]
    planned = {out_dir / name for name in _table_names(keys).values()}
    if any(same_file(summary, p) for p in planned):
        raise ReleaseError(f"--summary {summary} is one of the tables --out-dir writes")
    if not out_dir.is_dir():
        return
    own = planned | {summary}
    stray = sorted(p.name for p in out_dir.iterdir() if not any(same_file(p, q) for q in own))
    if stray:
        more = f" and {len(stray) - 1} more" if len(stray) > 1 else ""
        raise ReleaseError(
            f"--out-dir {out_dir} holds {stray[0]!r}{more}, which this release does not "
            "write: its tables would sit beside files of another release; give a new or "
            "empty directory (one holding only this release's own files is rewritten)"
        )


def _table_files(result, out_dir: Path, integers: bool) -> dict:
    tables = result.tables()
    return {
        out_dir / name: _csv(tables[key].reset_index(), integers)
        for key, name in _table_names(tables).items()
    }


def _write(files: dict) -> None:
    """Write atomically; an OS error names the target file, not a temporary one."""
    try:
        write_files_atomic(files)
    except OSError as exc:
        name, name2 = str(exc.filename or ""), str(exc.filename2 or "")
        ours = [t for t in files if str(t) in (name, name2)
                or name.startswith(str(Path(t).parent / f".{Path(t).name}."))]  # its temporary
        where = str(ours[0]) if ours else ", ".join(map(str, files))
        raise ReleaseError(f"cannot write {where}: {exc.strerror or exc}") from None


def run(args) -> dict:
    """Do the release described by parsed ``args``; returns the summary (files written)."""
    t0 = time.perf_counter()
    plan = _plan(args)
    params, privacy, replayed = _apply_summary(args) if args.from_summary else ({}, None, None)
    params.update(_params(args.param))
    if plan is None and (args.workload is None or args.selector is None):
        raise ReleaseError(
            "--workload and --selector are required (or --from-summary FILE, or --plan FILE)"
        )
    out, out_dir, summary_path = _output_paths(args)
    releases = 1 if args.releases is None else args.releases
    if releases < 1:
        raise ReleaseError(f"--releases must be at least 1, got {releases}")
    if args.seed is not None and args.seed < 0:
        raise ReleaseError(f"--seed must be a non-negative integer, got {args.seed}")
    if plan is not None:
        privacy = plan.privacy
    elif privacy is None:
        privacy = from_budget(args.epsilon, args.delta, args.rho)
    if plan is None and args.selector not in selectors.available():
        raise ReleaseError(
            f"unknown selector {args.selector!r}; available: {', '.join(selectors.available())}"
        )
    ledger = Ledger(args.ledger) if args.ledger is not None else None
    data, source, notes, synth = _load_data(args)
    _check_reserved(data.domain)
    if plan is not None:
        plan.check_domain(data)  # before anything is charged, and before building a workload
    spec = plan.workload if plan is not None else args.workload
    W = workload_matrix(spec, data.domain, "--workload", "--domain / --data")
    if out_dir is not None:  # before the charge
        _table_plan(W, data.domain, out_dir, summary_path)
    noise = plan.noise if plan is not None else args.noise  # None: the mode's default
    selector = plan.strategy.selector if plan is not None else args.selector
    common = {"seed": args.seed, "releases": releases, "ledger": ledger,
              "description": f"mmtoolkit release {spec} by {selector} from {source}",
              "alpha": args.alpha, "simultaneous": args.simultaneous}  # fmt: skip
    if plan is not None:
        result = release(data, plan=plan, **common)
    else:
        result = release(data, W, privacy, selector, params=params, noise=noise,
                         select_for=args.select_for, **common)  # fmt: skip
    if replayed is not None and replayed != result.summary["data_digest"]:
        notes.append(
            f"the data differ from those --from-summary {args.from_summary} was released from "
            "(another data digest under the same seed): the answers are not the summary's"
        )
    post = [step for flag, step in POSTPROCESSING if getattr(args, flag)]
    answers = result.answers
    for step in post:
        answers = getattr(mechanism, step)(answers)
    result = dataclasses.replace(result, answers=answers)

    summary = dict(result.summary)
    if plan is None:  # release() saw the built Matrix
        summary.update({"workload": args.workload, "workload_is_spec": True})
    summary.update(
        data=source,
        data_file=str(Path(args.data).resolve()) if args.data else None,
        domain_file=str(Path(args.domain).resolve()) if args.domain else None,
        synthetic=synth,
        warnings=notes,
        postprocessing=post,
        postprocessing_note=(
            "the expected error and the intervals refer to the answers before post-processing"
            if post else None
        ),
    )
    if summary["noise"] == "discrete":
        summary["discrete_noise"] = _discrete_summary(result.strategy, privacy)
    if out_dir is not None:
        files = _table_files(result, out_dir, args.round)
    else:
        files = {out: _csv(result.to_frame(), args.round)}
    summary["outputs"] = [str(p) for p in files]
    summary["seconds"]["total"] = time.perf_counter() - t0
    text = jsonsafe.dumps(summary, str(summary_path), ReleaseError, indent=2, ensure_ascii=False)
    files[summary_path] = text + "\n"
    _write(files)
    summary["paths"] = {"answers": str(out or out_dir), "summary": str(summary_path)}
    return summary


def main(args) -> int:
    """Entry point of ``mmtoolkit release`` (parsed ``args``); returns the exit code."""
    try:
        s = run(args)
    except (ValueError, KeyError, TypeError, OSError, LedgerError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"mmtoolkit release: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2
    for note in s["warnings"]:
        print(f"mmtoolkit release: warning: {note}", file=sys.stderr)
    print(
        f"released {s['queries']} answers x {s['releases']} ({s['workload']}, selector "
        f"{s['selector']}, {s['strategy']}) from {s['data']}; {s['privacy']}; "
        f"expected RMSE {s['expected_rmse']:.6g}; {s['seconds']['total']:.1f} s "
        f"-> {s['paths']['answers']}, {s['paths']['summary']}"
    )
    if s["intervals"] is not None:
        i = s["intervals"]
        print(f"intervals: {1 - i['alpha']:.6g} level, {i['method']}")
    if s["ledger"] is not None:
        z = s["ledger"]["zcdp_spent"]
        print(
            f"ledger {s['ledger']['path']}: entry #{s['ledger']['entry']}; zCDP spent rho = "
            f"{z['rho']:.6g}, as (epsilon, delta): epsilon = {z['epsilon']:.6g} at delta = "
            f"{z['delta']:g} (Canonne, Kamath & Steinke 2020; Bun & Steinke Prop. 1.3: "
            f"{z['epsilon_prop_1_3']:.6g})"
        )
    return 0
