"""Intervals on released answers (mmtoolkit.intervals): coverage by Monte Carlo.

Each case draws R = 10,000 releases of a small workload by the mechanism's vectorised fast
path (:func:`mmtoolkit.mechanism.release_errors`, fixed seeds) and counts how often the
(1 − α) intervals, α = 0.05, cover the true answers.

Slack: an empirical coverage over R independent releases has standard deviation
``√(p(1 − p)/R) ≤ 0.0022`` at p = 0.95, so ±1 percentage point is ≥ 4.5 standard deviations
(a two-sided tail of ≤ 7e-6 per answer, ≤ 1e-3 over the ≤ 40 answers of a case). Exact
Gaussian intervals must lie within ±1 point of 95% per answer; conservative bounds (discrete
noise, Laplace) at or above 95% per answer; simultaneous intervals (Bonferroni) at or above
95% − 1 point (their exact coverage may sit just above 95% when the answers are nearly
independent, so the Monte Carlo slack is needed there).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import mmtoolkit as mm
from mmtoolkit import intervals, mechanism, selectors
from mmtoolkit.checks import CheckTypeError
from mmtoolkit.cli import main as cli_main
from mmtoolkit.plan import NoisePlan, true_answers
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.releasing import workload_matrix, workload_tables

R = 10_000
ALPHA = 0.05
SLACK = 0.01  # 4.5 Monte Carlo standard deviations at R (module docstring)
MARGINALS = ("marginals:2:lower", mm.Domain.from_sizes([3, 4, 2]))
PREFIX = ("prefix_marginals:1", mm.Domain.from_sizes([16]))

CASES = {  # selector, parameters, workload
    "residual_planner": ("residual_planner", {}, MARGINALS),
    "hdmm_opt_m": ("hdmm", {"operators": ["marginals"], "restarts": 2, "seed": 0}, MARGINALS),
    "hierarchical": ("hierarchical", {}, PREFIX),
    "identity": ("identity", {}, MARGINALS),
}


def _coverage(name, privacy, noise):
    """Per-answer, per-table and whole-workload empirical coverage, and the method."""
    selector, params, (spec, domain) = CASES[name]
    W = workload_matrix(spec, domain)
    strategy = selectors.get(selector, **params).select(W, privacy)
    plan = NoisePlan(strategy, privacy, noise, workload=W, fits=False)
    x = np.random.default_rng(3).integers(0, 40, size=W.shape[1])
    stderr = mechanism.standard_errors(W, strategy, privacy)
    spans = [(s.start, s.stop) for s in workload_tables(W, domain)]
    widths = {
        what: intervals.half_widths(stderr, plan.distribution, ALPHA, count,
                                    plan.proxy_factor)[:, None]  # fmt: skip
        for what, count in (("answer", 1), ("table", intervals.table_counts(spans, W.shape[0])),
                            ("workload", W.shape[0]))  # fmt: skip
    }
    per_answer = np.zeros(W.shape[0])
    tables = np.zeros(len(spans))
    workload = 0
    errors = mechanism.release_errors(plan, x, true_answers(W, x), R, np.random.default_rng(5))
    for err in errors:
        per_answer += np.sum(np.abs(err) <= widths["answer"], axis=1)
        inside = np.abs(err) <= widths["table"]
        tables += [np.sum(np.all(inside[a:b], axis=0)) for a, b in spans]
        workload += np.sum(np.all(np.abs(err) <= widths["workload"], axis=0))
    return per_answer / R, tables / R, workload / R, plan.distribution


def _runnable(name, privacy):
    selector = CASES[name][0]
    if type(privacy) not in selectors.get_class(selector).privacy:
        pytest.skip(f"{selector} does not support {type(privacy).__name__}")


@pytest.mark.parametrize("privacy", [ZCDP(0.5), PureDP(1.0)], ids=["zCDP", "PureDP"])
@pytest.mark.parametrize("name", list(CASES))
def test_continuous_coverage(name, privacy):
    """Continuous noise: exact Gaussian per answer (zCDP), Chebyshev for Laplace."""
    _runnable(name, privacy)
    per_answer, tables, workload, distribution = _coverage(name, privacy, "continuous")
    if distribution == "gaussian":  # exact: within ±1 point of nominal
        assert np.all(np.abs(per_answer - (1 - ALPHA)) <= SLACK), per_answer
    else:  # conservative
        assert per_answer.min() >= 1 - ALPHA, per_answer
    assert tables.min() >= 1 - ALPHA - SLACK, tables
    assert workload >= 1 - ALPHA - SLACK, workload


@pytest.mark.parametrize("privacy", [ZCDP(0.5), PureDP(1.0)], ids=["zCDP", "PureDP"])
@pytest.mark.parametrize("name", ["hdmm_opt_m", "hierarchical", "identity"])
def test_discrete_coverage(name, privacy):
    """Exact integer noise: the subgaussian (discrete Gaussian) and Chebyshev (discrete
    Laplace) bounds cover at least the nominal 95% per answer."""
    per_answer, tables, workload, _ = _coverage(name, privacy, "discrete")
    assert per_answer.min() >= 1 - ALPHA, per_answer
    assert tables.min() >= 1 - ALPHA - SLACK, tables
    assert workload >= 1 - ALPHA - SLACK, workload


def test_residual_planner_discrete_coverage():
    """ResidualPlanner's own discrete-Gaussian mechanism (Algorithm 3, the private release's
    default) releases one at a time (no vectorised path yet), so 1,000 releases here: the
    subgaussian bound's true coverage is ≈ 0.993 (√(2 ln 40) ≈ 2.72 standard errors), 16
    Monte Carlo standard deviations (√(0.993 · 0.007 / 1000) ≈ 0.0026) above 95%."""
    releases = 1_000
    W = workload_matrix(*MARGINALS)
    strategy = selectors.get("residual_planner").select(W, ZCDP(0.5))
    plan = NoisePlan(strategy, ZCDP(0.5), "discrete", workload=W)
    x = np.random.default_rng(3).integers(0, 40, size=W.shape[1])
    stderr = mechanism.standard_errors(W, strategy, ZCDP(0.5))
    half = intervals.half_widths(stderr, plan.distribution, ALPHA, 1, plan.proxy_factor)
    truth, rng = true_answers(W, x), np.random.default_rng(5)
    covered = np.zeros(W.shape[0])
    for _ in range(releases):
        covered += np.abs(mechanism.release_planned(plan, x, rng)[0] - truth) <= half
    assert plan.distribution == "discrete gaussian"
    assert (covered / releases).min() >= 1 - ALPHA, covered / releases


def test_half_widths_by_distribution():
    """The three bounds, against their closed forms at α = 0.05 for a unit standard error."""
    se = np.array([1.0, 2.0])
    gauss = intervals.half_widths(se, "gaussian", 0.05)
    np.testing.assert_allclose(gauss, [1.959963984540054, 3.919927969080108], rtol=1e-12)
    sub = intervals.half_widths(se, "discrete gaussian", 0.05)
    np.testing.assert_allclose(sub, se * np.sqrt(2 * np.log(40)), rtol=1e-12)
    cheb = intervals.half_widths(se, "laplace", 0.05, count=2, proxy_factor=4.0)
    np.testing.assert_allclose(cheb, 2 * se / np.sqrt(0.025), rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs, field",
    [({"alpha": 1.5}, "alpha"), ({"alpha": "x"}, "alpha"), ({"count": 0}, "count"),
     ({"proxy_factor": 0.5}, "proxy_factor"), ({"distribution": "cauchy"}, "distribution"),
     ({"stderr": [np.nan]}, "stderr")],  # fmt: skip
)
def test_half_widths_refuse_bad_input(kwargs, field):
    args = {"stderr": [1.0], "distribution": "gaussian", "alpha": 0.05} | kwargs
    with pytest.raises((ValueError, CheckTypeError), match=field):
        intervals.half_widths(**args)


def test_proxy_factor_covers_rounded_discrete_parameters():
    """Discrete Gaussian σ̄ is rounded up from σ: the factor is the largest σ̄²/σ² (≥ 1,
    within the 1e-6 relative rounding step); continuous noise has factor 1."""
    W = workload_matrix(*MARGINALS)
    for selector in ("identity", "residual_planner"):
        strategy = selectors.get(selector).select(W, ZCDP(0.5))
        assert NoisePlan(strategy, ZCDP(0.5), "continuous", workload=W).proxy_factor == 1.0
        f = NoisePlan(strategy, ZCDP(0.5), "discrete", workload=W).proxy_factor
        assert 1.0 < f <= (1 + 1e-5) ** 2


# ---------------------------------------------------------------- the release path
def test_release_writes_intervals_and_states_the_method():
    """mm.release: lower / upper are the answers ± the half-widths of the release's noise
    (per answer, per table, over the workload), in table(), to_frame() and the summary."""
    recs = mm.records.synthetic({"a": 3, "b": 4, "c": 2}, 200, seed=0)
    per = {}
    for simultaneous in intervals.SIMULTANEOUS:
        r = mm.release(recs, "marginals:2", ZCDP(0.5), "identity", seed=3, alpha=0.1,
                       simultaneous=simultaneous)  # fmt: skip
        per[simultaneous] = r.upper - r.answers
        np.testing.assert_allclose(r.answers - r.lower, r.upper - r.answers)
        assert r.summary["intervals"]["alpha"] == 0.1
        assert r.summary["intervals"]["method"].startswith("exact Gaussian")
        frame = r.to_frame()
        np.testing.assert_array_equal(frame["lower"], r.lower)
        np.testing.assert_array_equal(r.table(("a", "b"))["upper"], r.upper[:12])
    m, table_size = per["none"].size, 12  # three 2-way tables of 12, 8 and 6 cells
    np.testing.assert_allclose(
        per["none"], intervals.half_widths(r.stderr, "gaussian", 0.1), rtol=1e-12)
    np.testing.assert_allclose(
        per["table"][:12], intervals.half_widths(r.stderr[:12], "gaussian", 0.1 / table_size),
        rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(
        per["workload"], intervals.half_widths(r.stderr, "gaussian", 0.1 / m), rtol=1e-12)
    assert np.all(per["none"] < per["table"]) and np.all(per["table"] < per["workload"])
    discrete = mm.release(recs, "marginals:2", ZCDP(0.5), "identity")  # private: discrete
    assert discrete.summary["intervals"]["method"].startswith("conservative subgaussian")
    assert discrete.summary["intervals"]["proxy_factor"] > 1.0


@pytest.mark.parametrize(
    "kwargs, message",
    [({"alpha": 0}, "alpha: must be a number strictly between 0 and 1"),
     ({"simultaneous": "all"}, "simultaneous"),
     ({"workload": mm.workloads.width_range(24, 2), "simultaneous": "table"},
      "simultaneous: 'table' needs a workload of marginal-type tables")],  # fmt: skip
)
def test_release_refuses_bad_interval_arguments_before_the_charge(tmp_path, kwargs, message):
    recs = mm.records.synthetic({"a": 3, "b": 4, "c": 2}, 200, seed=0)
    ledger = mm.ledger.Ledger.create(tmp_path / "l.json", rho=1.0, dataset="x")
    args = {"workload": "marginals:2"} | kwargs
    with pytest.raises(ValueError, match=message):
        mm.release(recs, args.pop("workload"), ZCDP(0.5), "identity", seed=1, ledger=ledger,
                   **args)  # fmt: skip
    assert mm.ledger.Ledger(tmp_path / "l.json").entries == []


# ---------------------------------------------------------------- the command line
def _cli(tmp_path, *extra, columns=("sex", "job")):
    (tmp_path / "p.csv").write_text(",".join(columns) + "\nF,a\nM,b\nF,b\nF,a\n")
    (tmp_path / "d.json").write_text(json.dumps({columns[0]: {"values": ["F", "M"]},
                                                 columns[1]: {"values": ["a", "b"]}}))  # fmt: skip
    argv = ["release", "--data", str(tmp_path / "p.csv"), "--domain", str(tmp_path / "d.json"),
            "--workload", "marginals:1", "--selector", "identity", "--rho", "0.5",
            "--seed", "1", "--out", str(tmp_path / "a.csv"), *extra]  # fmt: skip
    return cli_main(argv)


def test_cli_writes_intervals_and_states_alpha_and_method(tmp_path, capsys):
    assert _cli(tmp_path, "--alpha", "0.1", "--simultaneous", "table") == 0
    frame = pd.read_csv(tmp_path / "a.csv")
    assert list(frame.columns[-4:]) == ["answer", "lower", "upper", "stderr"]
    half = intervals.half_widths(frame["stderr"], "gaussian", 0.1, 2)  # two 2-cell tables
    np.testing.assert_allclose(frame["upper"] - frame["answer"], half, rtol=1e-8)
    np.testing.assert_allclose(frame["answer"] - frame["lower"], half, rtol=1e-8)
    summary = json.loads((tmp_path / "a.csv.json").read_text())
    assert summary["intervals"]["alpha"] == 0.1 and summary["intervals"]["simultaneous"] == "table"
    assert "simultaneous over each table (Bonferroni" in summary["intervals"]["method"]
    assert "intervals: 0.9 level, exact Gaussian" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, columns, message",
    [(["--alpha", "2"], ("sex", "job"), "alpha: must be a number strictly between 0 and 1"),
     ([], ("sex", "lower"), "attribute name(s) ['lower'] clash")],  # fmt: skip
)
def test_cli_refuses_bad_alpha_and_reserved_names(tmp_path, capsys, extra, columns, message):
    assert _cli(tmp_path, *extra, columns=columns) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmtoolkit release: error: ") and message in err
    assert err.count("\n") == 1 and not (tmp_path / "a.csv").exists()
