"""Compare whole pipelines on the user's own records: :func:`compare_data`.

:func:`compare_data` answers a marginals workload from records with noise, for every
method — each selector's strategy followed by least squares, least squares clipped at 0, or
Private-PGM (:mod:`mmtoolkit.pgm`), and the data-dependent peers AIM (McKenna, Mullins,
Sheldon & Miklau, VLDB 2022) and MST (McKenna, Miklau & Sheldon 2021) run by OpenDP
(:mod:`mmtoolkit.peers_worker`) — at each ε and in each trial, and measures the error
against the true marginals: the mean L1 error of the normalised marginals (as AIM reports
it) and the RMSE of the counts. Each (method, ε, trial) is a job of the runner
(:mod:`mmtoolkit.runner.executors`, under a time limit) recorded in the runner's job store
(:class:`~mmtoolkit.runner.store.JobStore`), so an interrupted comparison resumes and a
finished one is reused. :func:`summarize` gives the mean and a confidence interval over the
trials, :func:`format_summary` and :func:`plot_errors` render it, :func:`run_config` runs a
comparison written as a YAML config.

One privacy definition for all: ε (at ``delta``, default 10⁻⁹) is turned into the largest ρ
whose ρ-zCDP implies (ε, δ)-DP by Canonne, Kamath & Steinke's conversion
(:meth:`~mmtoolkit.privacy.ZCDP.for_approx_dp`, the ledger's), and every method is charged
that ρ-zCDP: our pipelines measure with Gaussian noise of variance ``Δ²/(2ρ)``, AIM and MST
are given ``ρ`` by OpenDP's ``loss_of(rho=ρ)`` with one record per individual.

User guide: docs/guide/compare.md ("Compare on your data").
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import pgm, records
from .checks import check_choice, check_int, check_positive, check_probability
from .compare import parse_selectors
from .mechanism import clip_nonnegative
from .privacy import ZCDP
from .releasing import (
    data_digest,
    matrix_digest,
    release,
    select_plan,
    workload_matrix,
    workload_tables,
)
from .runner.executors import forks, run_jobs
from .runner.jobs import JobSpec, code_fingerprint, derive_seed, describe_error, job_record
from .runner.store import JobStore, reusable
from .selectors.base import REFUSALS, available, get_class

__all__ = [
    "COLUMNS",
    "CompareDataError",
    "DEFAULT_SELECTORS",
    "PEERS",
    "PEERS_EXTRA",
    "POSTPROCESS",
    "SUMMARY_COLUMNS",
    "compare_data",
    "format_summary",
    "peers_python",
    "plot_errors",
    "summarize",
]

#: The tidy DataFrame's columns, in order (one row per job).
COLUMNS = ("method", "selector", "postprocess", "epsilon", "rho", "trial", "l1_error", "rmse",
           "seconds", "status", "reason")  # fmt: skip
#: The summary's columns (one row per method and ε).
SUMMARY_COLUMNS = ("method", "epsilon", "rho", "trials", "l1_error", "l1_low", "l1_high",
                   "rmse", "rmse_low", "rmse_high", "seconds", "status")  # fmt: skip
#: Post-processings of a selector's noisy measurements.
POSTPROCESS = ("least_squares", "nonnegative", "pgm")
#: The data-dependent peers, run by OpenDP.
PEERS = ("aim", "mst")
#: The selectors compared by default.
DEFAULT_SELECTORS = ("identity", "hdmm", "residual_planner")
#: Default δ at which ε is read.
DEFAULT_DELTA = 1e-9
#: Default time limit of one job (seconds).
DEFAULT_TIMEOUT = 1800.0
#: Version of the job keys (bump when the meaning of a stored value changes).
KEY_VERSION = 2
#: The environment variable naming the interpreter that runs the peers.
PEERS_ENV = "MMTOOLKIT_PEERS_PYTHON"
#: The message when the peers' extra is not usable.
PEERS_EXTRA = (
    "the peers AIM and MST need the optional extra 'peers' (OpenDP's mbi extra: "
    "pip install 'mmtoolkit[peers]', i.e. opendp[mbi]==0.16.*, which pins mbi 1.1 and so "
    "cannot share an environment with the 'pgm' extra's mbi 2: install it in its own "
    f"virtual environment and set {PEERS_ENV} to its python)"
)
_WORKER = Path(__file__).with_name("peers_worker.py")


class CompareDataError(ValueError):
    """Bad arguments for :func:`compare_data` (the message names the field)."""


# ============================================================================ arguments
@dataclass(frozen=True)
class Method:
    """One compared pipeline: a selector and a post-processing, or a peer."""

    name: str
    selector: str | None = None
    params: dict = field(default_factory=dict)
    postprocess: str | None = None
    peer: str | None = None


def parse_epsilons(value) -> tuple[float, ...]:
    """The privacy levels: a list of numbers or text ``"0.1,1,10"``; each a finite ε > 0."""
    items = value.split(",") if isinstance(value, str) else value
    try:
        items = list(items)
    except TypeError:
        items = [items]
    if not items:
        raise CompareDataError("epsilon: give at least one ε > 0, e.g. 0.1,1,10")
    out = []
    for item in items:
        try:
            eps = float(item.strip()) if isinstance(item, str) else item
        except ValueError:
            raise CompareDataError(f"epsilon: {item!r} is not a number") from None
        try:
            out.append(check_positive(eps, "epsilon"))
        except (TypeError, ValueError) as exc:
            raise CompareDataError(f"{exc} (each ε must be a finite number > 0)") from None
    if len(set(out)) != len(out):
        raise CompareDataError(f"epsilon: {value!r} lists an ε twice")
    return tuple(out)


def _methods(selectors, postprocess, peers) -> list[Method]:
    """The compared methods (selector × post-processing, then the peers)."""
    if selectors is None:
        selectors = list(DEFAULT_SELECTORS)
    elif selectors == "all":  # every registered selector; those that do not apply: rows
        selectors = available()
    try:
        items = parse_selectors(selectors) if isinstance(selectors, str) else [
            (s, {}) if isinstance(s, str) else tuple(s) for s in selectors
        ]  # fmt: skip
    except (TypeError, ValueError) as exc:
        raise CompareDataError(f"selectors: {exc}") from None
    posts = [postprocess] if isinstance(postprocess, str) else list(postprocess or ())
    for p in posts:
        if p not in POSTPROCESS:
            raise CompareDataError(f"postprocess: unknown {p!r} (valid: {', '.join(POSTPROCESS)})")
    peer_list = [peers] if isinstance(peers, str) else list(peers or ())
    for p in peer_list:
        if p not in PEERS:
            raise CompareDataError(f"peers: unknown {p!r} (valid: {', '.join(PEERS)})")
    out = []
    for name, params in items:
        try:
            get_class(name)
        except KeyError as exc:
            raise CompareDataError(f"selectors: {exc.args[0]}") from None
        for p in posts:
            out.append(Method(f"{name}+{p}", name, dict(params), p))
    out += [Method(p, peer=p) for p in peer_list]
    if not out:
        raise CompareDataError("nothing to compare: give selectors with a postprocess, or peers")
    if len({m.name for m in out}) != len(out):
        raise CompareDataError("a method is listed twice (give each selector once)")
    return out


# ============================================================================ peers
def peers_python() -> str:
    """The interpreter that runs AIM and MST: ``$MMTOOLKIT_PEERS_PYTHON``, else this one."""
    return os.environ.get(PEERS_ENV) or sys.executable


def _last_message(proc) -> str:
    """The last line of a child's stderr that says something (OpenDP's nested exceptions
    end with lines of closing quotes and brackets), or its exit code."""
    for line in reversed(proc.stderr.decode(errors="replace").splitlines()):
        if any(c.isalnum() for c in line):
            return line.strip()
    return f"exit code {proc.returncode}"


def check_peers() -> None:
    """Raise :class:`CompareDataError` naming the extra unless :func:`peers_python` can
    import what the peers need (OpenDP's mbi extra)."""
    python = peers_python()
    try:
        proc = subprocess.run([python, "-I", str(_WORKER), "--probe"], capture_output=True,
                              timeout=300, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise CompareDataError(f"{PEERS_EXTRA}; {python}: {describe_error(exc)}") from None
    if proc.returncode != 0:
        raise CompareDataError(f"{PEERS_EXTRA}; {python}: {_last_message(proc)}")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """The peer's interpreter is killed with the job's worker (Linux; elsewhere nothing)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the job's time limit still applies
        pass


def run_peer(peer: str, recs, cliques, rho: float, timeout: float | None) -> list[np.ndarray]:
    """The marginals on ``cliques`` (attribute-name tuples, domain order) of the peer's
    model of ``recs`` under ρ-zCDP, by :mod:`mmtoolkit.peers_worker` in
    :func:`peers_python`."""
    dom = recs.domain
    meta = {"method": peer, "rho": rho, "names": list(dom.names), "sizes": list(dom.sizes),
            "cliques": [list(c) for c in cliques]}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="mmtoolkit-peer-") as tmp:
        inp, out = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(inp, codes=recs.codes, meta=np.array(json.dumps(meta)))
        proc = subprocess.run([peers_python(), "-I", str(_WORKER), str(inp), str(out)],
                              capture_output=True, timeout=timeout, check=False,
                              preexec_fn=_die_with_parent)  # fmt: skip
        if proc.returncode != 0 or not out.is_file():
            raise RuntimeError(f"{peer} (OpenDP) failed: {_last_message(proc)}")
        with np.load(out, allow_pickle=False) as f:
            return [np.asarray(f[f"m{j}"], dtype=float) for j in range(len(cliques))]


# ============================================================================ one job
@dataclass
class _Context:
    """What every job reads (a forked worker inherits it)."""

    recs: records.Records
    W: object
    tables: list
    truth: list
    plans: dict  # (selector, ε) -> SavedPlan, or the refusal text
    rhos: dict  # ε -> ρ
    pgm_iters: int | None
    timeout: float | None


def _tables(W, dom, where: str) -> list:
    """The workload's marginal tables; a workload that is not one is refused."""
    tables = workload_tables(W, dom)
    if tables is None or any(a != "value" for t in tables for a in t.axes):
        raise CompareDataError(
            f"{where}: comparing on data needs a workload of marginals (e.g. marginals:k=2 or "
            "marginals_list:attr_sets=[[age,sex]]): the L1 error of normalised marginals and "
            "the peers are defined for marginals"
        )
    return tables


def _estimate(job: dict, ctx: _Context, seed: int) -> list[np.ndarray]:
    """The method's estimate of every workload table (counts), for one job."""
    rho = ctx.rhos[job["epsilon"]]
    if job["peer"] is not None:
        names = ctx.recs.domain.names
        cliques = [tuple(names[i] for i in t.attrs) for t in ctx.tables]
        return run_peer(job["peer"], ctx.recs, cliques, rho, _margin(ctx.timeout))
    plan = ctx.plans[(job["selector"], job["epsilon"])]
    if job["postprocess"] == "pgm":
        rng = np.random.default_rng(np.random.SeedSequence(seed))
        meas = pgm.measure(plan.strategy, ctx.recs, ZCDP(rho), rng)
        fit = pgm.estimate(meas, ctx.recs.domain, iters=ctx.pgm_iters)
        return [fit.marginal(list(t.attrs)).reshape(t.shape) for t in ctx.tables]
    res = release(ctx.recs, plan=plan, seed=seed, progress=False)
    answers = np.asarray(res.answers, dtype=float)
    if job["postprocess"] == "nonnegative":
        answers = clip_nonnegative(answers)
    return [answers[t.start : t.stop].reshape(t.shape) / t.weight for t in ctx.tables]


def _margin(timeout: float | None) -> float | None:
    """The peer's own limit: a little under the job's, so its interpreter is ended first."""
    return None if timeout is None else max(1.0, 0.97 * timeout - 1.0)


def errors(estimates, truth, records_count: int) -> tuple[float, float]:
    """``(l1_error, rmse)``: the mean over the tables of ``||est − true||₁ / N`` (the L1
    error of the normalised marginals, as AIM reports it, N the number of records) and the
    root mean squared error over all cells of the tables (counts)."""
    if len(estimates) != len(truth):
        raise ValueError(f"{len(estimates)} estimated tables for {len(truth)} workload tables")
    l1, sq, cells = [], 0.0, 0
    for est, true in zip(estimates, truth, strict=True):
        est = np.asarray(est, dtype=float)
        if est.shape != true.shape:
            raise ValueError(f"an estimated table has shape {est.shape}, expected {true.shape}")
        if not np.all(np.isfinite(est)):
            raise ValueError("an estimated table holds a non-finite value")
        diff = est - true
        l1.append(float(np.abs(diff).sum()) / max(records_count, 1))
        sq += float(np.square(diff).sum())
        cells += diff.size
    return float(np.mean(l1)), math.sqrt(sq / cells)


def _job_seed(seed: int, job: dict) -> int:
    """Trial ``t``'s seed, from the one seed and the job's identity: its selector (or peer),
    ε and trial. The post-processings of one selector share it, so least squares and its
    clipped answers come from the same noisy measurements in a trial (a paired comparison;
    Private-PGM measures through :func:`mmtoolkit.pgm.measure`, its own draw)."""
    source = job["selector"] or job["peer"]
    return derive_seed(seed, source, f"epsilon={job['epsilon']!r},trial={job['trial']}")


def _work(spec: JobSpec, job: dict, ctx: _Context, seed: int) -> dict:
    """The record of one job (never raises)."""
    start = time.perf_counter()
    rec = {**job_record(spec), **job}
    try:
        est = _estimate(job, ctx, _job_seed(seed, job))
        l1, rmse = errors(est, ctx.truth, len(ctx.recs))
        rec.update(value=l1, l1_error=l1, rmse=rmse)
    except MemoryError:
        rec.update(status="out of memory", error="out of memory")
    except REFUSALS as exc:
        rec.update(status="not applicable", error=describe_error(exc))
    except Exception as exc:  # noqa: BLE001 - recorded in the row
        rec.update(status="failed", error=describe_error(exc))
    rec["seconds"] = rec["wall"] = time.perf_counter() - start
    return rec


# ============================================================================ compare_data
def compare_data(
    data,
    workload,
    epsilons,
    *,
    domain=None,
    delta: float = DEFAULT_DELTA,
    trials: int = 5,
    selectors=None,
    postprocess=POSTPROCESS,
    peers=PEERS,
    seed: int = 0,
    timeout: float | None = DEFAULT_TIMEOUT,
    jobs: int | None = None,
    store=None,
    pgm_iters: int | None = None,
    progress=True,
):
    """Measure every method's error on ``data``'s marginals at each ε and trial; a tidy
    pandas DataFrame, one row per job (:data:`COLUMNS`; docs/guide/compare.md).

    The methods are each selector's strategy followed by each post-processing, and the
    peers; every one is charged the same ρ-zCDP at each ε (the module docstring). A job that
    is refused, fails or runs out of time is a row with its status and reason.

    Parameters
    ----------
    data : Records, str, os.PathLike or pandas.DataFrame
        The records: :class:`~mmtoolkit.records.Records`, or a CSV path / DataFrame read
        against ``domain``.
    workload : str or Matrix
        A marginals SPEC (or a Matrix of marginal-type tables) on the data's domain; a SPEC
        keeps only the columns of the attributes it uses.
    epsilons : float, list of float or str
        The ε values (a list, or text such as ``"0.1,1,10"``), each read at ``delta``.
    domain : str, os.PathLike, Mapping or Domain, optional
        The data's declared domain (a domain file, mapping or Domain); required unless
        ``data`` is Records.
    delta : float, optional
        The δ at which each ε is read, in (0, 1); default ``DEFAULT_DELTA`` (1e-9).
    trials : int, optional
        Trials per (method, ε), at least 1; default 5.
    selectors : str or list, optional
        Default :data:`DEFAULT_SELECTORS`; ``"all"`` for every registered one; or a selector
        list as :func:`mmtoolkit.compare.parse_selectors` reads it.
    postprocess : iterable of str, optional
        The post-processings of each selector's measurements, of :data:`POSTPROCESS`
        (default all).
    peers : iterable of str, optional
        The data-dependent peers, of :data:`PEERS` (default both; they need the ``peers``
        extra, :data:`PEERS_EXTRA`).
    seed : int, optional
        The one seed of the selections and the noise, ≥ 0; default 0.
    timeout : float or None, optional
        Seconds per job, default ``DEFAULT_TIMEOUT`` (1800); None: no limit.
    jobs : int, optional
        Jobs at once, at least 1; default ``min(2, CPUs)``.
    store : str or os.PathLike, optional
        A job-store path (JSON lines) that makes a rerun reuse finished jobs; default none.
    pgm_iters : int, optional
        At most this many Private-PGM optimiser steps, at least 1; default None: until the
        fit converges (:func:`mmtoolkit.pgm.estimate`).
    progress : bool or file, optional
        A line per job as it finishes: to stderr (True, default), to this file object, or
        none (False).

    Returns
    -------
    pandas.DataFrame
        One row per (method, ε, trial) with the columns :data:`COLUMNS`: ``l1_error`` (the
        mean L1 error of the normalised marginals), ``rmse`` (of the counts), both NaN for a
        job that is not ``ok``; ``df.attrs`` holds δ, the seed, the numbers of records,
        queries and tables, of jobs computed and reused, and the privacy conversion.

    Raises
    ------
    CompareDataError
        Before any job runs: a bad argument (the message names it), a workload that does
        not build on the domain or is not marginal-type, no ``domain``, peers asked for
        without a usable ``peers`` extra, or Private-PGM jobs that would run in forked
        workers (``jobs`` > 1 or a ``timeout``) of a process where JAX has already started.
    RecordsError
        Records or a domain that cannot be read.

    References
    ----------
    McKenna, Mullins, Sheldon & Miklau 2022 (AIM); McKenna, Miklau & Sheldon 2021 (MST);
    Canonne, Kamath & Steinke 2020, Corollary 13 (ε at δ as ρ-zCDP); McKenna et al. 2018,
    HDMM, and He et al., ResidualPlanner+ (the default selectors).
    """
    import pandas as pd

    eps_list = parse_epsilons(epsilons)
    try:
        delta = check_probability(delta, "delta")
        trials = check_int(trials, "trials", minimum=1)
        seed = check_int(seed, "seed", minimum=0)
        if pgm_iters is not None:
            pgm_iters = check_int(pgm_iters, "pgm_iters", minimum=1)
        if timeout is not None:
            timeout = check_positive(timeout, "timeout", what="number of seconds")
        jobs = min(2, os.cpu_count() or 1) if jobs is None else check_int(jobs, "jobs", minimum=1)
    except (TypeError, ValueError) as exc:
        raise CompareDataError(str(exc)) from None
    methods = _methods(selectors, postprocess, peers)
    recs = data if isinstance(data, records.Records) else _load(data, domain)
    try:
        W = workload_matrix(workload, recs.domain, "workload", "the data's domain")
        tables = _tables(W, recs.domain, "workload")
        used = sorted({i for t in tables for i in t.attrs})
        if isinstance(workload, str) and len(used) < len(recs.domain):
            # only the workload's attributes matter to its answers: every method gets those
            # columns (the peers would otherwise model, and spend budget on, the others)
            names = [recs.domain.names[i] for i in used]
            recs = records.Records(recs.domain.project(names), recs.codes[:, used],
                                   {k: v for k, v in recs.bins.items() if k in names})
            W = workload_matrix(workload, recs.domain, "workload", "the data's domain")
            tables = _tables(W, recs.domain, "workload")
    except ValueError as exc:
        raise CompareDataError(str(exc)) from None
    if any(m.peer for m in methods):
        check_peers()
    out = sys.stderr if progress is True else (io.StringIO() if not progress else progress)
    rhos = {e: ZCDP.for_approx_dp(e, delta).rho for e in eps_list}
    code = code_fingerprint()
    digest = data_digest(recs, seed)
    base = {"v": KEY_VERSION, "data": digest, "workload": matrix_digest(W), "delta": delta,
            "seed": seed}  # fmt: skip

    all_jobs = []
    for m in methods:
        for e in eps_list:
            for t in range(trials):
                job: dict[str, Any] = {"method": m.name, "selector": m.selector, "params": m.params,
                       "postprocess": m.postprocess, "peer": m.peer, "epsilon": e,
                       "rho": rhos[e], "trial": t}  # fmt: skip
                # the fit's settings key the Private-PGM jobs only
                fit = {"pgm_iters": pgm_iters, "pgm_tol": pgm.TOL} if m.postprocess == "pgm" else {}
                text = json.dumps({**base, **job, **fit}, sort_keys=True, default=str)
                all_jobs.append((hashlib.sha256(text.encode()).hexdigest(), job))
    job_store = None if store is None else JobStore(store)
    stored = {} if job_store is None else job_store.load()
    results: dict[str, dict] = {}
    todo = []
    for key, job in all_jobs:
        if reusable(stored.get(key), timeout, None, code):
            results[key] = stored[key]
        else:
            todo.append((key, job))
    reused = len(results)
    if results:
        print(f"resuming: {len(results)} of {len(all_jobs)} jobs already in {store}", file=out,
              flush=True)  # fmt: skip

    ctx = _Context(recs, W, tables, [recs.marginal(list(t.attrs)) for t in tables], {}, rhos,
                   pgm_iters, timeout)  # fmt: skip
    refused: dict = {}
    for _, job in todo:  # one selection per (selector, ε), shared by its jobs and trials
        sel = job["selector"]
        if sel is None or (sel, job["epsilon"]) in ctx.plans or (sel, job["epsilon"]) in refused:
            continue
        try:
            ctx.plans[(sel, job["epsilon"])] = select_plan(
                W, ZCDP(job["rho"]), sel, domain=recs.domain, params=job["params"],
                seed=derive_seed(seed, sel, "selection"),
            )  # fmt: skip
        except REFUSALS as exc:
            refused[(sel, job["epsilon"])] = ("not applicable", describe_error(exc))
        except Exception as exc:  # noqa: BLE001 - every job of the selector fails with it
            refused[(sel, job["epsilon"])] = ("failed", f"selection: {describe_error(exc)}")

    specs, by_key = [], {}
    for key, job in todo:
        spec = JobSpec(key=key, workload=None, privacy_spec=ZCDP(job["rho"]).to_spec(),
                       quantity="compare_data", selector=job["selector"], params=job["params"],
                       timeout=timeout, code=code)  # fmt: skip
        why = refused.get((job["selector"], job["epsilon"]))
        if why is not None:  # not stored: a refusal costs nothing to find again
            results[key] = {**job_record(spec, why[0], why[1]), **job}
            continue
        specs.append(spec)
        by_key[key] = job
    done = 0

    def on_result(spec: JobSpec, rec: dict) -> None:
        nonlocal done
        done += 1
        rec = {**by_key[spec.key], **rec}  # a timeout / dead worker's record lacks the job
        if job_store is not None:
            job_store.append(rec)
        results[spec.key] = rec
        shown = (f"L1 {rec['l1_error']:.4g}, RMSE {rec['rmse']:.4g}" if rec["status"] == "ok"
                 else f"{rec['status']} ({rec.get('error')})")  # fmt: skip
        print(f"[{done}/{len(specs)}] {rec['method']} ε={rec['epsilon']:g} trial "
              f"{rec['trial']}: {shown}, {rec['seconds']:.1f} s", file=out, flush=True)  # fmt: skip

    if (forks(specs, jobs) and pgm.jax_running()
            and any(by_key[s.key]["postprocess"] == "pgm" for s in specs)):  # fmt: skip
        raise CompareDataError(
            f"Private-PGM jobs would run in forked workers (jobs={jobs}, timeout={timeout}), "
            "but JAX has already started in this process (a Private-PGM fit ran here), and "
            "a fork of a process running JAX deadlocks in its first JAX call: run the "
            "comparison in a fresh Python process, or with jobs=1 and timeout=None"
        )
    run_jobs(specs, on_result, jobs=jobs,
             work=lambda spec: _work(spec, by_key[spec.key], ctx, seed))  # fmt: skip

    rows = []
    for key, job in all_jobs:
        rec = results[key]
        ok = rec.get("status") == "ok"
        rows.append({
            "method": job["method"], "selector": job["selector"],
            "postprocess": job["postprocess"] or job["peer"], "epsilon": job["epsilon"],
            "rho": job["rho"], "trial": job["trial"],
            "l1_error": rec.get("l1_error") if ok else math.nan,
            "rmse": rec.get("rmse") if ok else math.nan,
            "seconds": float(rec.get("seconds") or 0.0), "status": rec.get("status", "failed"),
            "reason": None if ok else rec.get("error"),
        })  # fmt: skip
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df.attrs.update(
        delta=delta, seed=seed, records=len(recs), queries=int(W.shape[0]), tables=len(tables),
        computed=len(specs), reused=reused,
        conversion="ρ-zCDP with ε = ZCDP(ρ).to_approx_dp_tight(δ) (Canonne, Kamath & "
        "Steinke 2020)",
    )  # fmt: skip
    return df


def _load(data, domain) -> records.Records:
    if domain is None:
        raise CompareDataError(
            "domain: give the public domain of the data (a domain file, a mapping or a Domain); "
            "it is never read from the data"
        )
    if isinstance(data, (str, Path)):
        return records.read_csv(data, domain)
    return records.from_frame(data, domain)


# ============================================================================ summary
def _interval(values: np.ndarray, level: float) -> tuple[float, float, float]:
    """Mean and the two-sided Student-t interval ``mean ± t_{(1+level)/2, n−1} s/√n``
    (NaN bounds for one value)."""
    from scipy.stats import t as student

    n = values.size
    mean = float(values.mean())
    if n < 2:
        return mean, math.nan, math.nan
    half = float(student.ppf((1 + level) / 2, n - 1) * values.std(ddof=1) / math.sqrt(n))
    return mean, mean - half, mean + half


def summarize(df, level: float = 0.95):
    """One row per (method, ε) of :func:`compare_data`'s frame: the ``ok`` trials' mean
    errors with their Student-t intervals.

    Parameters
    ----------
    df : pandas.DataFrame
        What :func:`compare_data` returned.
    level : float, optional
        The intervals' confidence level, in (0, 1); default 0.95.

    Returns
    -------
    pandas.DataFrame
        The columns :data:`SUMMARY_COLUMNS`: the number of ``ok`` trials, the mean L1 error
        and RMSE with their two-sided ``level`` intervals ``mean ± t s/√n`` (NaN bounds
        with fewer than two ``ok`` trials, NaN means with none), the mean seconds, and the
        status (``ok``, or the statuses of trials that did not finish with the first
        reason). ``attrs``: those of ``df`` and ``level``.

    Raises
    ------
    CompareDataError
        ``level`` is not a number strictly between 0 and 1.
    """
    import pandas as pd

    try:
        level = check_probability(level, "level")
    except ValueError as exc:
        raise CompareDataError(str(exc)) from None

    rows = []
    for (method, eps), g in df.groupby(["method", "epsilon"], sort=False):
        ok = g[g["status"] == "ok"]
        row = {"method": method, "epsilon": eps, "rho": float(g["rho"].iloc[0]),
               "trials": len(ok), "seconds": float(g["seconds"].mean())}  # fmt: skip
        for col, pre in (("l1_error", "l1"), ("rmse", "rmse")):
            vals = ok[col].to_numpy(dtype=float)
            mean, lo, hi = _interval(vals, level) if vals.size else (math.nan,) * 3
            row.update({col: mean, f"{pre}_low": lo, f"{pre}_high": hi})
        bad = sorted(set(g["status"]) - {"ok"})
        row["status"] = "ok" if not bad else ", ".join(bad) + (
            f": {g[g['status'] != 'ok']['reason'].iloc[0]}")  # fmt: skip
        rows.append(row)
    out = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    out.attrs.update(df.attrs, level=level)
    return out


def _num(x, fmt: str = ".4g") -> str:
    return "" if x is None or x != x else format(x, fmt)


def format_summary(summary) -> str:
    """The summary as an aligned text table (what ``mmtoolkit compare --data`` prints).

    Parameters
    ----------
    summary : pandas.DataFrame
        What :func:`summarize` returned.

    Returns
    -------
    str
        The header, a rule, one line per (method, ε) with its intervals, and a note on the
        privacy charged, ending with a newline.
    """
    level = summary.attrs.get("level", 0.95)
    header = ["method", "epsilon", "trials", "l1_error", f"{level:.0%} CI", "rmse",
              f"{level:.0%} CI", "seconds", "status"]  # fmt: skip
    lines = []
    for r in summary.itertuples(index=False):
        ci1 = f"[{_num(r.l1_low)}, {_num(r.l1_high)}]" if r.l1_low == r.l1_low else ""
        ci2 = f"[{_num(r.rmse_low)}, {_num(r.rmse_high)}]" if r.rmse_low == r.rmse_low else ""
        status = r.status if len(r.status) <= 80 else r.status[:79] + "…"
        lines.append([r.method, f"{r.epsilon:g}", str(r.trials), _num(r.l1_error), ci1,
                      _num(r.rmse), ci2, _num(r.seconds, ".1f"), status])  # fmt: skip
    widths = [max(len(h), *(len(x[j]) for x in lines)) for j, h in enumerate(header)]
    right = {1, 2, 3, 5, 7}

    def fmt(row):
        return "  ".join(c.rjust(w) if j in right else c.ljust(w)
                         for j, (c, w) in enumerate(zip(row, widths))).rstrip()  # fmt: skip

    text = [fmt(header), fmt(["-" * w for w in widths]), *(fmt(x) for x in lines)]
    a = summary.attrs
    if "delta" in a:
        text.append(f"every method charged ρ-zCDP with ε at δ = {a['delta']:g} "
                    f"({a.get('conversion', '')}); {a.get('records')} records, "
                    f"{a.get('tables')} marginals")  # fmt: skip
    return "\n".join(text) + "\n"


def to_csv(df) -> str:
    """A frame of :func:`compare_data` or :func:`summarize` as CSV (NaN: an empty field)."""
    return df.to_csv(index=False, lineterminator="\n", float_format="%.10g")


def plot_errors(summary, path, metric: str = "l1_error") -> None:
    """Error against ε (log-log), one line per method with its interval as error bars,
    written atomically to ``path`` (PNG; needs matplotlib).

    Parameters
    ----------
    summary : pandas.DataFrame
        What :func:`summarize` returned.
    path : str or os.PathLike
        The PNG file to write.
    metric : str, optional
        ``"l1_error"`` (default: the mean L1 error of the normalised marginals) or
        ``"rmse"``.

    Raises
    ------
    CompareDataError
        An unknown ``metric``.
    """
    prefixes = {"l1_error": "l1", "rmse": "rmse"}  # of the interval columns, e.g. l1_low
    try:
        check_choice(metric, "metric", prefixes)
    except ValueError as exc:
        raise CompareDataError(str(exc)) from None
    pre = prefixes[metric]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .atomic import write_png

    fig, ax = plt.subplots(figsize=(7.5, 5))
    cmap = plt.get_cmap("tab20")  # twenty distinct colours: no two methods share one
    try:
        for k, (method, g) in enumerate(summary.groupby("method", sort=False)):
            g = g[g[metric] == g[metric]].sort_values("epsilon")
            if g.empty:
                continue
            y = g[metric].to_numpy(dtype=float)
            lo = np.nan_to_num(y - g[f"{pre}_low"].to_numpy(dtype=float), nan=0.0)
            hi = np.nan_to_num(g[f"{pre}_high"].to_numpy(dtype=float) - y, nan=0.0)
            peer = "+" not in method  # the peers: dashed, square markers
            ax.errorbar(g["epsilon"], y, yerr=[lo, hi], label=method, capsize=3,
                        color=cmap(k % cmap.N), marker="s" if peer else "o",
                        linestyle="--" if peer else "-")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε (each method charged the same ρ-zCDP)")
        label = "mean L1 error of normalised marginals" if metric == "l1_error" else "RMSE"
        ax.set_ylabel(f"{label} ({summary.attrs.get('level', 0.95):.0%} CI over trials)")
        ax.legend(fontsize=8, loc="best")
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        write_png(path, fig, dpi=120)
    finally:
        plt.close(fig)


# ============================================================================ configs
#: The keys of a comparison config (docs/guide/compare.md, "As a config").
CONFIG_REQUIRED = ("paper", "table", "data", "domain", "workload", "epsilons")
CONFIG_OPTIONAL = ("title", "notes", "delta", "trials", "seed", "timeout", "selectors",
                   "postprocess", "peers", "pgm_iters", "quick")  # fmt: skip
#: What a ``quick:`` block may replace.
QUICK_KEYS = ("workload", "epsilons", "trials", "selectors", "postprocess", "peers", "timeout",
              "pgm_iters")  # fmt: skip


def load_comparison(path, quick: bool = False) -> dict:
    """The settings of a comparison config ``*.compare.yaml`` (its ``quick:`` variant when
    ``quick``), checked; ``data`` and ``domain`` resolved against the config's directory.
    Every problem is a :class:`~mmtoolkit.runner.schema.ConfigError` naming the file and
    the field."""
    from .runner.schema import Fields, read_yaml

    f = Fields(path)
    raw = f.mapping(read_yaml(path, "comparison config"), "")
    f.keys(raw, "", (*CONFIG_REQUIRED, *CONFIG_OPTIONAL), CONFIG_REQUIRED)
    cfg = dict(raw)
    if quick:
        q = f.mapping(cfg.pop("quick", None) or {}, "quick")
        f.keys(q, "quick", QUICK_KEYS)
        cfg.update(q)
    cfg.pop("quick", None)
    for key in ("paper", "table", "data", "domain", "workload"):
        f.text(cfg[key], key)
    for key in ("data", "domain"):
        p = Path(cfg[key])
        cfg[key] = str(p if p.is_absolute() else Path(path).parent / p)
    try:
        cfg["epsilons"] = parse_epsilons(cfg["epsilons"])
    except CompareDataError as exc:
        raise f.error("epsilons", str(exc)) from None
    if cfg.get("timeout") is not None:
        cfg["timeout"] = f.positive(cfg["timeout"], "timeout")
    return cfg


def run_config(path, results="results", *, quick: bool = False, jobs: int | None = None,
               fresh: bool = False, progress=True) -> list[Path]:  # fmt: skip
    """Run the comparison config at ``path``: every job not in the job store
    (``<results>/<paper>/.jobs/<table>.jsonl``, the runner's; ``fresh`` empties it), then
    ``<results>/<paper>/<table>.{csv,md,png}`` (the summary, its Markdown page and the plot
    of error against ε); ``quick``: the config's ``quick:`` variant under ``<results>/quick``.
    Returns the files written."""
    from .atomic import write_files_atomic
    from .runner.run import QUICK_DIR
    from .runner.schema import ConfigError
    from .runner.store import store_path

    cfg = load_comparison(path, quick)
    if quick:
        results = Path(results) / QUICK_DIR
        cfg["title"] = f"{cfg.get('title') or cfg['table']} (quick variant)"
    store = store_path(results, cfg["paper"], cfg["table"])
    if fresh:
        JobStore(store).rewrite([])
    kw = {k: cfg[k] for k in ("delta", "trials", "seed", "timeout", "selectors", "postprocess",
                              "peers", "pgm_iters") if k in cfg}  # fmt: skip
    try:
        df = compare_data(cfg["data"], cfg["workload"], cfg["epsilons"], domain=cfg["domain"],
                          jobs=jobs, store=store, progress=progress, **kw)  # fmt: skip
    except (CompareDataError, records.RecordsError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    summary = summarize(df)
    directory = Path(results) / cfg["paper"]
    csv_path, md_path = directory / f"{cfg['table']}.csv", directory / f"{cfg['table']}.md"
    png = directory / f"{cfg['table']}.png"
    plot_errors(summary, png)
    write_files_atomic({csv_path: to_csv(summary), md_path: _markdown(cfg, path, summary, png)})
    return [csv_path, md_path, png]


def _markdown(cfg: dict, path, summary, png: Path) -> str:
    """The Markdown page of a comparison config's summary."""
    level = summary.attrs.get("level", 0.95)
    lines = [f"# {cfg.get('title') or cfg['table']}", "",
             f"Config: `{Path(path).as_posix()}` (`mmtoolkit run`). Data `{Path(cfg['data']).name}`"
             f" ({summary.attrs['records']} records), workload `{cfg['workload']}` "
             f"({summary.attrs['tables']} marginals); every method charged ρ-zCDP with ε at "
             f"δ = {summary.attrs['delta']:g} ({summary.attrs['conversion']}); mean over the "
             f"trials with a {level:.0%} Student-t interval; seconds per job.", ""]  # fmt: skip
    if cfg.get("notes"):
        lines += [" ".join(str(cfg["notes"]).split()), ""]
    lines += ["| method | ε | ρ | trials | L1 error | interval | RMSE | interval | seconds | "
              "status |", "|---|---:|---:|---:|---:|---|---:|---|---:|---|"]  # fmt: skip
    for r in summary.itertuples(index=False):
        ci1 = f"[{_num(r.l1_low)}, {_num(r.l1_high)}]" if r.l1_low == r.l1_low else ""
        ci2 = f"[{_num(r.rmse_low)}, {_num(r.rmse_high)}]" if r.rmse_low == r.rmse_low else ""
        status = str(r.status).replace("|", "\\|")
        lines.append(f"| {r.method} | {r.epsilon:g} | {r.rho:.4g} | {r.trials} | "
                     f"{_num(r.l1_error)} | {ci1} | {_num(r.rmse)} | {ci2} | "
                     f"{_num(r.seconds, '.1f')} | {status} |")  # fmt: skip
    lines += ["", f"![L1 error against ε]({png.name})", ""]
    return "\n".join(lines)
