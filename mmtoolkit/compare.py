"""Compare selectors on one workload: ``mmtoolkit.compare(W, privacy=...)``.

:func:`compare` scores every registered selector that applies to a workload (or the listed
ones, with parameters; :func:`parse_selectors`), the SVD lower bound (Li & Miklau 2012
Thm 2) and, when small enough, the exact L2 optimum of Program 5.2 (Li et al. 2010) with the
shared evaluator (the matrix mechanism's error, Li et al. 2010 Prop. 4.4, HDMM Def. 7), and
returns a pandas DataFrame with one row per selector, sorted by error; a selector that does
not apply is listed with its reason. :func:`format_table`, :func:`to_csv` and
:func:`plot_ratios` render it.

User guide: docs/guide/compare.md.
"""

from __future__ import annotations

import inspect
import io
import json
import math
import os
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import yaml
from numpy.typing import ArrayLike

from . import evaluate, mechanism
from .checks import check_int, check_positive
from .domain import Domain
from .jsonsafe import jsonable
from .linalg import Matrix, as_matrix
from .privacy import Privacy, check_privacy
from .runner.executors import run_jobs
from .runner.jobs import JobSpec, describe_error
from .selectors.base import REFUSALS, Selector, accepts_seed, available, get_class
from .selectors.eigen_design.optimum import solve_program_5_2
from .workload_specs import SpecError, WorkloadSpec, build_spec, parse_workload, split_top_level

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COLUMNS",
    "STATUSES",
    "BOUND",
    "compare",
    "format_table",
    "parse_selectors",
    "plot_ratios",
    "to_csv",
]

#: The DataFrame's columns, in order.
COLUMNS = (
    "selector",
    "params",
    "status",
    "rmse",
    "total_error",
    "max_variance",
    "ratio_to_bound",
    "ratio_to_optimum",
    "select_seconds",
    "reason",
    "strategy",
)

#: Row statuses, in the order rows are sorted.
STATUSES = ("ok", "timeout", "failed", "not applicable")

#: The ``selector`` value of the SVD-bound row.
BOUND = "svd_bound"
#: The ``selector`` value of the L2-optimum row (Program 5.2, solved exactly).
OPTIMUM = "l2_optimum"
#: Largest domain whose L2 optimum :func:`compare` computes (n = 1024: seconds, well within
#: the default time limit; ``benchmarks/bench_mm_sdp.py``).
OPTIMUM_MAX_N = 1024

#: Default time limit per selector (seconds; selection and scoring).
DEFAULT_TIMEOUT = 60.0

#: A strategy larger than this (pickled) is not sent back from a worker.
MAX_STRATEGY_BYTES = 1 << 28


class CompareError(ValueError):
    """Bad arguments for :func:`compare` (an unknown selector, a bad parameter, ...)."""


# --------------------------------------------------------------------------- selector lists
def parse_selectors(text: str) -> list[tuple[str, dict]]:
    """The selectors of a selector list (docs/guide/compare.md, "Selector lists").

    Parameters
    ----------
    text : str
        ``NAME[:key=value,...],...``: selector names, each with its parameters (values
        read as YAML, e.g. ``hdmm:restarts=5,identity``).

    Returns
    -------
    list of tuple
        ``[(name, params), ...]`` in the list's order, ``params`` a dict (the names are not
        checked against the registry here).

    Raises
    ------
    CompareError
        An empty list or item, a parameter before any name, a malformed name or
        ``key=value``, a key given twice, a value YAML cannot parse.
    """
    if not isinstance(text, str) or not text.strip():
        raise CompareError("the selector list is empty; give NAME[:key=value,...],...")
    out: list[tuple[str, dict]] = []
    for raw in split_top_level(text):
        item = raw.strip()
        if not item:
            raise CompareError(f"empty item in the selector list {text!r}")
        name, colon, first = item.partition(":")
        name = name.strip()
        if "=" in name:  # key=value continuing the previous selector's parameters
            if not out:
                raise CompareError(
                    f"{item!r} in {text!r}: a parameter before any selector name; "
                    "write NAME:key=value,..."
                )
            _add_param(out[-1], item, text)
            continue
        if not name.isidentifier():
            raise CompareError(f"{name!r} in {text!r} is not a selector name")
        out.append((name, {}))
        if colon:
            if "=" not in first:
                raise CompareError(f"{item!r} in {text!r}: expected NAME:key=value")
            _add_param(out[-1], first, text)
    return out


def _add_param(entry: tuple[str, dict], item: str, text: str) -> None:
    name, params = entry
    key, _, value = item.partition("=")
    key = key.strip()
    if not key.isidentifier():
        raise CompareError(f"{item!r} in {text!r}: expected key=value")
    if key in params:
        raise CompareError(f"{name}: parameter {key!r} is given twice in {text!r}")
    try:
        params[key] = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError:
        raise CompareError(f"{name}: cannot parse the value of {key!r}: {value!r}") from None


@dataclass
class _Entry:
    label: str
    selector: Selector | None  # None for a reference row: the SVD bound, the L2 optimum
    params: dict


def _label(cls) -> str:
    name = getattr(cls, "name", None)
    return name if isinstance(name, str) and name else cls.__name__


def _instantiate(cls, params: dict, seed) -> _Entry:
    params = dict(params)
    if seed is not None and "seed" not in params and accepts_seed(cls):
        params["seed"] = seed
    try:
        sel = cls(**params)
    except (TypeError, ValueError) as exc:
        raise CompareError(f"selector {_label(cls)!r}: {exc}") from None
    return _Entry(_label(cls), sel, params)


def _entries(selectors, seed) -> list[_Entry]:
    if selectors is None:
        items: list = available()
    elif isinstance(selectors, str):
        items = parse_selectors(selectors)
    else:
        items = list(selectors)
    if not items:
        raise CompareError("no selector to compare")
    out = []
    for item in items:
        if isinstance(item, str):
            parsed = parse_selectors(item)
            if len(parsed) != 1:
                raise CompareError(f"{item!r} names {len(parsed)} selectors: give one per item")
            item = parsed[0]
        if isinstance(item, Selector):
            out.append(_Entry(_label(type(item)), item, dict(item.params)))
        elif inspect.isclass(item) and issubclass(item, Selector):
            out.append(_instantiate(item, {}, seed))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], dict):
            name, params = item
            if inspect.isclass(name) and issubclass(name, Selector):
                cls = name
            else:
                try:
                    cls = get_class(name)
                except KeyError as exc:
                    raise CompareError(str(exc)) from None
            out.append(_instantiate(cls, params, seed))
        else:
            raise CompareError(
                f"cannot compare {item!r}: give a selector name ('hdmm:restarts=5'), a "
                "(name, params) pair, a Selector class or a Selector instance"
            )
    return out


# --------------------------------------------------------------------------- workload
def _workload(
    W: Matrix | ArrayLike | WorkloadSpec, domain: Domain | None
) -> tuple[Matrix, float]:
    """``(matrix, seconds)``: ``W`` as a Matrix — a SPEC string or a parsed
    :class:`~mmtoolkit.workload_specs.WorkloadSpec` built (on ``domain``), an array wrapped —
    checked finite, and the seconds that took. A bad SPEC is a :class:`CompareError` naming
    the problem (the spec grammar's message)."""
    start = time.perf_counter()
    if domain is not None and not isinstance(domain, Domain):
        raise CompareError(f"domain must be a mmtoolkit.Domain, got {type(domain).__name__}")
    try:
        if isinstance(W, str):
            W = parse_workload(W, "workload", domain=domain, domain_source="compare's domain")
        if isinstance(W, WorkloadSpec):
            W = build_spec(W, "workload")
        elif domain is not None:
            raise CompareError("domain applies to a workload SPEC, not to a built workload")
        W = as_matrix(W)  # an array with a NaN is refused here (Dense)
        mechanism.check_finite(W)  # a Matrix of another kind: one product W·1
    except (SpecError, ValueError) as exc:
        raise CompareError(str(exc)) from None
    return W, time.perf_counter() - start


# --------------------------------------------------------------------------- scoring
def _applicability(selector: Selector, W, privacy, objective) -> dict | None:
    """The row of a selector that does not apply (or whose ``applicability`` crashed), None
    when it is to be selected."""
    try:
        reason = type(selector).applicability(W, privacy, objective)
    except REFUSALS as exc:
        reason = describe_error(exc)
    except Exception as exc:  # noqa: BLE001 - a bug in applicability: the row fails
        return {"status": "failed", "reason": f"applicability: {describe_error(exc)}"}
    return None if reason is None else {"status": "not applicable", "reason": reason}


def _optimum_skipped(W, privacy, objective) -> str | None:
    """Why :func:`compare` does not compute the L2 optimum for this comparison, or None."""
    if privacy.norm != 2:
        return "the L2 optimum is for (ε, δ) and zCDP privacy (Gaussian noise), not pure ε-DP"
    if objective != "sum":
        return "the L2 optimum minimises the total squared error (objective 'sum')"
    if W.shape[1] > OPTIMUM_MAX_N:
        return f"{W.shape[1]:,} cells > OPTIMUM_MAX_N = {OPTIMUM_MAX_N:,}"
    return None


def _reference(label: str, W, privacy) -> tuple[float, str | None]:
    """The total squared error of a reference row and its note: the SVD bound, or the L2
    optimum ``v · tr(WᵀW X⁻¹)`` (its strategy's columns have unit L2 norm at most)."""
    if label == BOUND:
        return evaluate.svd_bound_error(W, privacy), None
    sol = solve_program_5_2(W.gram().dense())
    gap = f"certified relative duality gap {sol.gap:.1e}"
    return privacy.noise_variance(1.0) * sol.value, gap


def _score(entry: _Entry, W, privacy, objective) -> dict:
    """Select with one selector (or compute a reference row) and score the strategy (never
    raises)."""
    rec: dict = {"status": "ok", "reason": None, "strategy": None, "select_seconds": 0.0}
    start = time.perf_counter()
    try:
        if entry.selector is None:
            rec["total_error"], rec["reason"] = _reference(entry.label, W, privacy)
            rec["rmse"] = math.sqrt(rec["total_error"] / W.shape[0])
        else:
            strategy = entry.selector.select(W, privacy, objective)
    except MemoryError:
        rec.update(status="failed", reason="out of memory")
    except Exception as exc:  # noqa: BLE001 - reported in the row
        if entry.selector is None:
            rec.update(status="failed", reason=describe_error(exc))
        elif isinstance(exc, REFUSALS):
            rec.update(status="not applicable", reason=describe_error(exc))
        else:
            rec.update(status="failed", reason=f"selection: {describe_error(exc)}")
    rec["select_seconds"] = time.perf_counter() - start
    if rec["status"] != "ok" or entry.selector is None:
        return rec
    rec["select_seconds"] = strategy.seconds
    rec["strategy"] = strategy
    try:
        rec["total_error"] = evaluate.expected_error(W, strategy, privacy)
        rec["rmse"] = math.sqrt(rec["total_error"] / W.shape[0])  # = evaluate.rmse
    except MemoryError:
        rec.update(status="failed", reason="scoring: out of memory")
        return rec
    except Exception as exc:  # noqa: BLE001 - e.g. the strategy does not support W
        rec.update(status="failed", reason=f"scoring: {describe_error(exc)}")
        return rec
    try:
        rec["max_variance"] = evaluate.max_variance(W, strategy, privacy)
    except Exception as exc:  # noqa: BLE001 - the objective's own metric must not fail
        if objective == "max":
            rec.update(status="failed", reason=f"max_variance: {describe_error(exc)}")
        else:
            rec["reason"] = f"max_variance not available: {describe_error(exc)}"
    return rec


class _WorkloadPickler(pickle.Pickler):
    """Pickles a strategy with the workload ``W`` as a reference, not a copy: the parent puts
    its own ``W`` back, so a strategy that *is* the workload (``inference="none"``, e.g. the
    Laplace mechanism on W) stays the very object it was selected for."""

    def __init__(self, file, W):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.W = W

    def persistent_id(self, obj):
        return "W" if obj is self.W else None


class _WorkloadUnpickler(pickle.Unpickler):
    def __init__(self, file, W):
        super().__init__(file)
        self.W = W

    def persistent_load(self, pid):
        if pid != "W":
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        return self.W


def _pack(rec: dict, W) -> dict:
    """``rec`` as a worker sends it back: the strategy pickled with ``W`` by reference
    (``strategy_pickle``); one that cannot be pickled, or is huge, is replaced by None with a
    note in the reason."""
    strategy = rec.get("strategy")
    if strategy is None:
        return rec
    buf = io.BytesIO()
    try:
        _WorkloadPickler(buf, W).dump(strategy)
    except Exception as exc:  # noqa: BLE001 - e.g. a closure inside a custom strategy kind
        why = f"the strategy cannot be pickled ({describe_error(exc)})"
    else:
        if buf.tell() <= MAX_STRATEGY_BYTES:
            return {**rec, "strategy": None, "strategy_pickle": buf.getvalue()}
        why = f"the strategy is {buf.tell() / 2**20:.0f} MiB pickled"
    note = f"strategy not returned from the worker: {why}"
    reason = rec.get("reason")
    return {**rec, "strategy": None, "reason": f"{reason}; {note}" if reason else note}


def _unpack(rec: dict, W) -> dict:
    """The record of :func:`_pack` with its strategy unpickled (``W`` put back)."""
    data = rec.pop("strategy_pickle", None)
    if data is not None:
        rec["strategy"] = _WorkloadUnpickler(io.BytesIO(data), W).load()
    return rec


# --------------------------------------------------------------------------- compare
def compare(
    W: Matrix | ArrayLike | str | WorkloadSpec,
    selectors: str
    | Sequence[str | tuple[str | type[Selector], dict[str, Any]] | type[Selector] | Selector]
    | None = None,
    privacy: Privacy | None = None,
    objective: str = "sum",
    timeout: float | None = DEFAULT_TIMEOUT,
    seed: int | None = 0,
    *,
    jobs: int | None = None,
    progress: bool | TextIO = True,
    domain: Domain | None = None,
) -> pd.DataFrame:
    """Score selectors on workload ``W`` under ``privacy``; a pandas DataFrame, one row per
    selector plus the SVD bound, sorted by error (docs/guide/compare.md).

    Every strategy is scored by the shared evaluator (:mod:`mmtoolkit.evaluate`); a
    selector that does not apply, fails or runs out of time is a row with its reason, not an
    exception. Selectors run in forked worker processes where the platform can fork (in
    this process with ``jobs=1`` and no ``timeout``).

    Parameters
    ----------
    W : Matrix, array_like, str or WorkloadSpec
        The workload, ``m x N``: a Matrix or an array, or a SPEC (string or parsed), built
        on ``domain`` when it needs one.
    selectors : str or list, optional
        None (default) for every registered selector, a selector list string
        (:func:`parse_selectors`), or a list of names, ``(name, params)`` pairs, Selector
        classes or instances (used as they are).
    privacy : Privacy
        ``PureDP``, ``ApproxDP`` or ``ZCDP``; required.
    objective : str, optional
        ``"sum"`` (default: the total squared error) or ``"max"`` (the largest per-query
        variance), passed to every selector and sorted by.
    timeout : float or None, optional
        Seconds per selector (selection and scoring), default ``DEFAULT_TIMEOUT`` (60);
        None for no limit.
    seed : int or None, optional
        Given to every selector that takes one and was not given one (default 0); None
        leaves each selector's own default.
    jobs : int, optional
        How many selectors run at once, at least 1; default ``min(2, CPUs)``.
    progress : bool or file, optional
        A line per selector as it finishes: to stderr (True, default), to this file object,
        or none (False).
    domain : Domain, optional
        The domain a SPEC ``W`` is built on (only with a SPEC).

    Returns
    -------
    pandas.DataFrame
        One row per selector with the columns :data:`COLUMNS` (``rmse`` in counts,
        ``total_error`` and ``max_variance`` in squared counts, ``ratio_to_bound`` and
        ``ratio_to_optimum`` as ratios of RMSEs, ``select_seconds``), the reference rows
        first (the SVD bound, then the L2 optimum when computed), then by status
        (:data:`STATUSES`) and error. ``df.attrs`` holds the bound's and the optimum's
        RMSE, why the optimum was not computed, the privacy, objective, workload size,
        timeout, seed and the seconds building the workload took.

    Raises
    ------
    CompareError
        Before anything is selected: an unknown selector or parameter, a bad SPEC or
        workload (a NaN or infinite entry), ``domain`` with a built workload, no
        ``privacy``, or a bad ``objective``, ``timeout`` or ``jobs``.
    TypeError
        ``privacy`` is not a PureDP, ApproxDP or ZCDP.

    References
    ----------
    Li et al. 2010, the Matrix Mechanism, Proposition 4.4 (the error) and Section 5,
    Program 5.2 (the L2 optimum); Li & Miklau 2012, Eigen-Design, Section 3.4, Theorem 2
    (the SVD bound); McKenna et al. 2018, HDMM, Definition 7 and Section 8.1 (ratios).
    """
    import pandas as pd

    if privacy is None:
        raise CompareError("compare needs a privacy: PureDP(ε), ApproxDP(ε, δ) or ZCDP(ρ)")
    check_privacy(privacy)
    if objective not in ("sum", "max"):
        raise CompareError(f"objective must be 'sum' or 'max', got {objective!r}")
    if timeout is not None:
        try:
            timeout = check_positive(timeout, "timeout", what="number of seconds")
        except ValueError as exc:
            raise CompareError(f"{exc} (None: no limit)") from None
    if jobs is None:
        jobs = min(2, os.cpu_count() or 1)
    try:
        jobs = check_int(jobs, "jobs", minimum=1)
    except ValueError as exc:
        raise CompareError(str(exc)) from None
    entries = [_Entry(BOUND, None, {}), *_entries(selectors, seed)]
    W, workload_seconds = _workload(W, domain)
    skipped = _optimum_skipped(W, privacy, objective)
    if skipped is None:
        entries.insert(1, _Entry(OPTIMUM, None, {}))
    out = sys.stderr if progress is True else (io.StringIO() if not progress else progress)

    rows: list[dict] = [{} for _ in entries]
    done = 0

    def report(i: int, rec: dict) -> None:
        nonlocal done
        done += 1
        e = entries[i]
        rows[i] = {**dict.fromkeys(COLUMNS, math.nan), "reason": None, "strategy": None}
        rows[i].update(selector=e.label, params=dict(e.params), **rec)
        line = f"[{done}/{len(entries)}] {e.label}: {rec['status']}"
        if rec["status"] == "ok":
            line += f", rmse {rec['rmse']:.6g}, {rec['select_seconds']:.1f} s"
        elif rec.get("reason"):
            line += f" ({_shorten(rec['reason'], 100)})"
        print(line, file=out, flush=True)

    specs = []
    for i, e in enumerate(entries):
        row = None if e.selector is None else _applicability(e.selector, W, privacy, objective)
        if row is not None:
            report(i, {**row, "select_seconds": 0.0})
            continue
        specs.append(
            JobSpec(
                key=str(i),
                workload=None,  # the worker inherits W (a fork) or runs in this process
                privacy_spec=privacy.to_spec(),
                quantity="compare",
                selector=e.label if e.selector is not None else None,
                params=e.params,
                objective=objective,
                svd_bound=e.selector is None,
                timeout=timeout,
            )
        )
    parent = os.getpid()

    def work(spec: JobSpec) -> dict:
        rec = _score(entries[int(spec.key)], W, privacy, objective)
        return _pack(rec, W) if os.getpid() != parent else rec

    def on_result(spec: JobSpec, rec: dict) -> None:
        rec = _unpack(rec, W)
        if "select_seconds" not in rec:  # the executor's own record: timeout or a dead worker
            if rec["status"] == "timeout":
                why = f"no result within {timeout:g} s (selection and scoring)"
                rec = {"status": "timeout", "reason": why, "select_seconds": rec["wall"]}
            else:  # the worker died (a crash, the OOM killer) or could not start
                rec = {"status": "failed", "reason": rec["error"], "select_seconds": rec["wall"]}
        report(int(spec.key), rec)

    run_jobs(specs, on_result, jobs=jobs, work=work)

    df = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    bound = df.loc[0, "rmse"] if df.loc[0, "status"] == "ok" else math.nan
    df["ratio_to_bound"] = df["rmse"] / bound
    optimum = math.nan
    if skipped is None and df.loc[1, "status"] == "ok":
        optimum = df.loc[1, "rmse"]
    elif skipped is None:
        skipped = f"the solve ended '{df.loc[1, 'status']}': {df.loc[1, 'reason']}"
    df["ratio_to_optimum"] = df["rmse"] / optimum
    df.attrs.update(
        svd_bound_rmse=float(bound),
        optimum_rmse=float(optimum),
        optimum="computed" if skipped is None else f"not computed: {skipped}",
        svd_bound_error=float(df.loc[0, "total_error"]) if bound == bound else math.nan,
        privacy=privacy.describe(),
        objective=objective,
        queries=int(W.shape[0]),
        cells=int(W.shape[1]),
        timeout=timeout,
        seed=seed,
        workload_seconds=workload_seconds,
    )
    metric = "max_variance" if objective == "max" else "total_error"
    order = df["status"].map({s: i for i, s in enumerate(STATUSES)})
    order[df["selector"] == BOUND] = -2  # the reference rows first
    order[df["selector"] == OPTIMUM] = -1
    df = df.assign(_order=order, _metric=df[metric])
    df = df.sort_values(["_order", "_metric", "selector"], kind="stable", na_position="last")
    return df.drop(columns=["_order", "_metric"]).reset_index(drop=True)


# --------------------------------------------------------------------------- output
def _shorten(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _params_text(params) -> str:
    if not isinstance(params, dict) or not params:
        return ""
    return ",".join(f"{k}={json.dumps(jsonable(v))}" for k, v in params.items())


def _strategy_text(strategy) -> str:
    return "" if strategy is None else type(strategy.matrix).__name__


def _num(x, fmt: str) -> str:
    return "" if x is None or x != x else format(x, fmt)


def _note(row, width: int) -> str:
    """The last column: the strategy kind, "SVD lower bound", or the reason."""
    if row.selector == BOUND and row.status == "ok":
        return "SVD lower bound (Li & Miklau 2012)"
    if row.selector == OPTIMUM and row.status == "ok":
        return f"L2 optimum (Li et al. 2010, Program 5.2), {row.reason}"
    text = _strategy_text(row.strategy)
    reason = row.reason if isinstance(row.reason, str) else ""
    return text or _shorten(reason, width)


def format_table(df, reason_width: int = 90) -> str:
    """The comparison as an aligned text table (what ``mmtoolkit compare`` prints).

    Parameters
    ----------
    df : pandas.DataFrame
        What :func:`compare` returned.
    reason_width : int, optional
        The last column's width for a reason, in characters (longer ones are shortened with
        ``…``); default 90.

    Returns
    -------
    str
        The header, a rule, one line per row (``ratio`` = rmse / SVD-bound rmse, ``vs_opt``
        = rmse / L2-optimum rmse) and notes on the references and the workload, ending with
        a newline.
    """
    header = ["selector", "params", "status", "rmse", "ratio", "vs_opt", "max_var", "seconds",
              "strategy"]  # fmt: skip
    lines = []
    for r in df.itertuples(index=False):
        lines.append(
            [
                r.selector,
                _params_text(r.params),
                r.status,
                _num(r.rmse, ".5g"),
                _num(r.ratio_to_bound, ".4f" if r.ratio_to_bound < 1000 else ".4g"),
                _num(r.ratio_to_optimum, ".4f" if r.ratio_to_optimum < 1000 else ".4g"),
                _num(r.max_variance, ".5g"),
                _num(r.select_seconds, ".2f"),
                _note(r, reason_width),
            ]
        )
    right = {3, 4, 5, 6, 7}
    widths = [max(len(h), *(len(row[j]) for row in lines)) for j, h in enumerate(header)]

    def fmt(row):
        cells = [
            c.rjust(w) if j in right else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths))
        ]
        return "  ".join(cells).rstrip()

    out = [fmt(header), fmt(["-" * w for w in widths])] + [fmt(row) for row in lines]
    bound = df.attrs.get("svd_bound_rmse")
    if bound is not None:
        out.append(
            f"ratio = rmse / SVD-bound rmse ({_num(bound, '.5g')}); {df.attrs.get('privacy', '')}"
        )
    optimum = df.attrs.get("optimum")
    if optimum == "computed":
        out.append(f"vs_opt = rmse / L2-optimum rmse ({_num(df.attrs['optimum_rmse'], '.5g')})")
    elif optimum is not None:
        out.append(f"vs_opt: {optimum}")
    m, n, built = (df.attrs.get(k) for k in ("queries", "cells", "workload_seconds"))
    if m is not None and n is not None and built is not None:
        out.append(f"workload: {m:,} queries on {n:,} cells, built in {built:.2f} s")
    return "\n".join(out) + "\n"


def to_csv(df) -> str:
    """The comparison as CSV text: ``params`` as JSON, ``strategy`` as the matrix kind.

    Parameters
    ----------
    df : pandas.DataFrame
        What :func:`compare` returned.

    Returns
    -------
    str
        A header of :data:`COLUMNS`, then one line per row (``\n`` line ends).
    """
    flat = df.assign(
        params=[json.dumps(jsonable(p), sort_keys=True) for p in df["params"]],
        strategy=[_strategy_text(s) for s in df["strategy"]],
    )
    return flat.to_csv(index=False, lineterminator="\n")


def plot_ratios(df, path) -> None:
    """A bar chart of each scored selector's RMSE relative to the SVD bound, written
    atomically to ``path`` (PNG; needs matplotlib). The reference rows and rows not
    ``ok`` are left out; the axis is logarithmic when the ratios span more than 100x.

    Parameters
    ----------
    df : pandas.DataFrame
        What :func:`compare` returned.
    path : str or os.PathLike
        The PNG file to write.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .atomic import write_png

    ok = df[(df["status"] == "ok") & ~df["selector"].isin((BOUND, OPTIMUM))]
    labels = [
        f"{s} ({_params_text(p)})" if _params_text(p) else s
        for s, p in zip(ok["selector"], ok["params"])
    ]
    fig, ax = plt.subplots(figsize=(8, 0.4 * max(len(ok), 3) + 1.2))
    try:
        ratios = ok["ratio_to_bound"].to_numpy(dtype=float)
        ax.barh(range(len(ok)), ratios, color="tab:blue")
        ax.set_yticks(range(len(ok)), labels)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=1, linestyle="--", label="SVD bound")
        for y, r in enumerate(ratios):
            ax.annotate(f" {r:.4g}", (r, y), va="center", fontsize=8)
        finite = ratios[ratios == ratios]
        if finite.size and finite.max() > 100 * max(finite.min(), 1e-300):
            ax.set_xscale("log")
            ax.set_xlim(left=0.8, right=finite.max() * 5)
        elif finite.size:
            ax.set_xlim(left=0, right=finite.max() * 1.15)
        ax.set_xlabel("RMSE / SVD-bound RMSE")
        m, n = df.attrs.get("queries"), df.attrs.get("cells")
        if m is not None and n is not None:
            ax.set_title(f"{m:,} queries on {n:.4g} cells; {df.attrs.get('objective')} objective")
        ax.legend(loc="best")
        fig.tight_layout()
        write_png(path, fig, dpi=120)
    finally:
        plt.close(fig)
