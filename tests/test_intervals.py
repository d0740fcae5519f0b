"""Intervals on released answers (mmtoolkit.intervals): coverage by Monte Carlo, and the
numerical laws against closed forms.

Each coverage case draws R = 10,000 releases of a small workload by the mechanism's
vectorised fast path (:func:`mmtoolkit.mechanism.release_errors`, fixed seeds) and counts how
often the (1 − α) intervals, α = 0.05, cover the true answers.

Slack: an empirical coverage over R independent releases has standard deviation
``√(p(1 − p)/R) ≤ 0.0022`` at p = 0.95, so ±1 percentage point is ≥ 4.5 standard deviations
(a two-sided tail of ≤ 7e-6 per answer, ≤ 1e-3 over the ≤ 40 answers of a case). Exact
intervals (continuous Gaussian and Laplace) must lie within ±1 point of 95% per answer;
exact intervals of an integer-lattice law (discrete noise, ``"lattice pmf"``) cover between
95% and 95% + the mass of the boundary atoms (computed per answer), each up to the slack;
those of a law on a fine grid (several non-commensurate discrete draws) within ±1 point
too; conservative bounds at or above 95% per answer; simultaneous intervals (Bonferroni) at
or above 95% − 1 point (their exact coverage may sit just above 95% when the answers are
nearly independent, so the Monte Carlo slack is needed there).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

import mmtoolkit as mm
from mmtoolkit import intervals, mechanism, selectors
from mmtoolkit.checks import CheckTypeError
from mmtoolkit.cli import main as cli_main
from mmtoolkit.noise import discrete_gaussian_pmf
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
    "lm": ("laplace", {}, MARGINALS),  # inference "none": each answer one draw
}


def _coverage(name, privacy, noise):
    """Per-answer, per-table and whole-workload empirical coverage, and the per-answer
    :class:`~mmtoolkit.intervals.Intervals`."""
    selector, params, (spec, domain) = CASES[name]
    W = workload_matrix(spec, domain)
    strategy = selectors.get(selector, **params).select(W, privacy)
    plan = NoisePlan(strategy, privacy, noise, workload=W, fits=False)
    x = np.random.default_rng(3).integers(0, 40, size=W.shape[1])
    stderr = mechanism.standard_errors(W, strategy, privacy)
    spans = [(s.start, s.stop) for s in workload_tables(W, domain)]
    found = {
        what: intervals.release_intervals(plan, stderr, ALPHA, count)
        for what, count in (("answer", 1), ("table", intervals.table_counts(spans, W.shape[0])),
                            ("workload", W.shape[0]))  # fmt: skip
    }
    widths = {what: f.half[:, None] for what, f in found.items()}
    per_answer = np.zeros(W.shape[0])
    tables = np.zeros(len(spans))
    workload = 0
    errors = mechanism.release_errors(plan, x, true_answers(W, x), R, np.random.default_rng(5))
    for err in errors:
        per_answer += np.sum(np.abs(err) <= widths["answer"], axis=1)
        inside = np.abs(err) <= widths["table"]
        tables += [np.sum(np.all(inside[a:b], axis=0)) for a, b in spans]
        workload += np.sum(np.all(np.abs(err) <= widths["workload"], axis=0))
    return per_answer / R, tables / R, workload / R, found["answer"]


def _runnable(name, privacy):
    selector = CASES[name][0]
    if type(privacy) not in selectors.get_class(selector).privacy:
        pytest.skip(f"{selector} does not support {type(privacy).__name__}")


@pytest.mark.parametrize("privacy", [ZCDP(0.5), PureDP(1.0)], ids=["zCDP", "PureDP"])
@pytest.mark.parametrize("name", list(CASES))
def test_continuous_coverage(name, privacy):
    """Continuous noise: exact per answer, Gaussian (zCDP) or Laplace sum (pure DP; the
    characteristic function inverted), so within ±1 point of 95% for every answer
    (Chebyshev's √(v/α) covered ≈ 99%)."""
    _runnable(name, privacy)
    per_answer, tables, workload, found = _coverage(name, privacy, "continuous")
    exact = "gaussian" if isinstance(privacy, ZCDP) else "laplace sum"
    assert set(found.methods) == {exact}
    assert np.all(np.abs(per_answer - (1 - ALPHA)) <= SLACK), per_answer
    assert tables.min() >= 1 - ALPHA - SLACK, tables
    assert workload >= 1 - ALPHA - SLACK, workload


def test_residual_planner_is_zcdp_only():
    """The pure-DP coverage case has no ResidualPlanner row: it is a zCDP method."""
    assert PureDP not in selectors.get_class("residual_planner").privacy


@pytest.mark.parametrize("privacy", [ZCDP(0.5), PureDP(1.0)], ids=["zCDP", "PureDP"])
@pytest.mark.parametrize("name", ["hdmm_opt_m", "hierarchical", "identity", "lm"])
def test_discrete_coverage(name, privacy):
    """Exact integer noise: an answer of an integer-lattice law (LM's one draw, the identity
    strategy's sums of cells) gets the exact least half-width, covering between 95% and
    95% + its boundary atoms' mass; an answer of several non-commensurate draws its law on a
    fine grid, conservative by at most ``(N + 1) δ`` = 1.01% of a standard deviation
    (``GRID_SLACK``: ≤ 0.1 point of coverage for these near-Gaussian sums, measured ≤
    95.4%), so within the Monte Carlo slack of 95% too; any other answer a bound (≥ 95%)."""
    per_answer, tables, workload, found = _coverage(name, privacy, "discrete")
    lattice = found.methods == "lattice pmf"
    grid = found.methods == "gridded pmf"
    assert per_answer[lattice].min(initial=1) >= 1 - ALPHA - SLACK, per_answer
    assert np.all(per_answer[lattice] <= 1 - ALPHA + found.atoms[lattice] + SLACK), per_answer
    assert np.all(np.abs(per_answer[grid] - (1 - ALPHA)) <= SLACK), per_answer
    assert per_answer[~(lattice | grid)].min(initial=1) >= 1 - ALPHA, per_answer
    assert np.all(lattice | grid), found.counts()  # every case here has an exact law
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
    found = intervals.release_intervals(plan, stderr, ALPHA)
    half = found.half
    truth, rng = true_answers(W, x), np.random.default_rng(5)
    covered = np.zeros(W.shape[0])
    for _ in range(releases):
        covered += np.abs(mechanism.release_planned(plan, x, rng)[0] - truth) <= half
    assert plan.distribution == "discrete gaussian" and set(found.methods) == {"subgaussian"}
    assert (covered / releases).min() >= 1 - ALPHA, covered / releases


def test_half_widths_by_distribution():
    """The bounds from standard errors alone, against their closed forms at α = 0.05: exact
    Gaussian, subgaussian, Chebyshev (discrete Laplace), and for continuous Laplace the
    Chernoff bound of one Laplace of the same variance, ``min_λ (−ln(1 − λ²v/2) +
    ln(2/α))/λ`` (minimised here by bounded scalar search, to 1e-7 relative)."""
    se = np.array([1.0, 2.0])
    gauss = intervals.half_widths(se, "gaussian", 0.05)
    np.testing.assert_allclose(gauss, [1.959963984540054, 3.919927969080108], rtol=1e-12)
    sub = intervals.half_widths(se, "discrete gaussian", 0.05)
    np.testing.assert_allclose(sub, se * np.sqrt(2 * np.log(40)), rtol=1e-12)
    cheb = intervals.half_widths(se, "discrete laplace", 0.05, count=2, proxy_factor=4.0)
    np.testing.assert_allclose(cheb, 2 * se / np.sqrt(0.025), rtol=1e-12)
    top = math.sqrt(2) / se  # λ < 1/b, b = se/√2
    for s, t, h in zip(se, top, intervals.half_widths(se, "laplace", 0.05)):
        best = optimize.minimize_scalar(
            lambda x, s=s: (-math.log(1 - x * x * s * s / 2) + math.log(40)) / x,
            bounds=(1e-9 * t, t * (1 - 1e-12)), method="bounded", options={"xatol": 1e-12 * t})
        np.testing.assert_allclose(h, best.fun, rtol=1e-7)
        assert h < s / math.sqrt(0.05)  # tighter than Chebyshev


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
    assert discrete.summary["intervals"]["method"].startswith("exact: the least half-width")
    assert discrete.summary["intervals"]["answers_by_method"] == {"lattice pmf": m}
    assert discrete.summary["intervals"]["proxy_factor"] > 1.0


def test_pure_dp_release_gets_exact_laplace_intervals():
    """A continuous pure-DP release: each answer's interval is the exact Laplace-sum
    quantile of its own draws (the identity strategy: a cell of the (a, b) table sums the 2
    cells of c, each with Laplace noise of scale b = 1/ε), and the summary says so (was
    Chebyshev's √(v/α), ≈ 2.1 times wider)."""
    recs = mm.records.synthetic({"a": 3, "b": 4, "c": 2}, 200, seed=0)
    r = mm.release(recs, "marginals:2", PureDP(2.0), "identity", seed=3)
    assert r.summary["intervals"]["method"] == intervals.METHODS["laplace sum"] + "; per answer"
    assert set(r.interval_methods) == {"laplace sum"}
    np.testing.assert_allclose(r.upper[:12] - r.answers[:12],
                               intervals.laplace_sum_half_width([0.5], 0.05, n=[2])
                               * (1 + intervals.ROUNDING_MARGIN), rtol=1e-9)  # fmt: skip


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


# ---------------------------------------------------------------- the laws, in closed form
def _equal_laplace_tail(k, h):
    """``P(L_1 + … + L_k > h)`` for ``k`` standard Laplace draws: the density is
    ``e^{−|x|} Σ_j (2k−2−j)! 2^j |x|^j / (j! (k−1−j)!) / (2^{2k−1} (k−1)!)`` (the inverse
    transform of ``(1 + t²)^{−k}``), integrated term by term
    (``∫_h^∞ x^j e^{−x} dx = j! e^{−h} Σ_{i≤j} h^i/i!``)."""
    total = 0.0
    for j in range(k):
        upper = math.factorial(j) * math.exp(-h) * sum(h**i / math.factorial(i)
                                                       for i in range(j + 1))  # fmt: skip
        total += (math.factorial(2 * k - 2 - j) * 2**j
                  / (math.factorial(j) * math.factorial(k - 1 - j)) * upper)  # fmt: skip
    return total / (2 ** (2 * k - 1) * math.factorial(k - 1))


@pytest.mark.parametrize("level", [0.9, 0.05, 1e-3, 1e-6])
def test_laplace_sum_half_width_of_one_draw_is_b_ln_one_over_alpha(level):
    """One Laplace draw of scale b: ``P(|bL| > h) = e^{−h/b}``, so ``h = b ln(1/α)``. The
    inversion's level is right to ~1e-12 relative (module docstring), so 1e-9 is loose."""
    for b in (0.3, 1.0, 7.5):
        h = intervals.laplace_sum_half_width([b], level)
        np.testing.assert_allclose(h, b * math.log(1 / level), rtol=1e-9)


@pytest.mark.parametrize("k", [2, 3, 8])
def test_laplace_sum_of_equal_draws_matches_its_closed_form(k):
    """A sum of k equal Laplaces, tail and half-width, against :func:`_equal_laplace_tail`
    (the closed form's terms are positive: no cancellation, exact to rounding)."""
    for h in (0.5, 2.0, 10.0):
        np.testing.assert_allclose(intervals.laplace_sum_tail([1.0], h, n=[k]),
                                   _equal_laplace_tail(k, h), rtol=1e-9)  # fmt: skip
    for level in (0.05, 1e-4):
        h = intervals.laplace_sum_half_width([2.0], level, n=[k])
        np.testing.assert_allclose(2 * _equal_laplace_tail(k, h / 2.0), level, rtol=1e-9)


def test_laplace_sum_of_distinct_draws_matches_partial_fractions():
    """Distinct weights: ``Π_j 1/(1 + a_j² t²) = Σ_j w_j/(1 + a_j² t²)``, ``w_j = Π_{k≠j}
    a_j²/(a_j² − a_k²)``, so ``P(e > h) = Σ_j w_j e^{−h/a_j}/2`` (weights well apart: the
    partial fractions lose no digits)."""
    a = np.array([1.0, 2.0, 3.5])
    w = [np.prod([x * x / (x * x - y * y) for y in a if y != x]) for x in a]
    for h in (1e-6, 1e-3, 0.5, 3.0, 30.0):  # small h: the integral on [0, U], not QAWF
        exact = 0.5 * sum(wj * math.exp(-h / x) for wj, x in zip(w, a))
        np.testing.assert_allclose(intervals.laplace_sum_tail(a, h), exact, rtol=1e-9)


def test_laplace_sum_half_width_by_monte_carlo():
    """Mixed weights (repeated and distinct), 10^6 draws: the empirical two-sided tail at the
    exact half-width is within 4.5 standard deviations, √(α(1−α)/10^6) · 4.5 ≤ 1e-3, of α;
    the bounds used without the exact law are above the exact half-width, Chebyshev's most."""
    a, n = np.array([0.3, 1.0, 2.5]), np.array([1, 3, 1])
    h = intervals.laplace_sum_half_width(a, ALPHA, n=n)
    draws = np.random.default_rng(11).laplace(size=(10**6, n.sum())) @ np.repeat(a, n)
    assert abs(np.mean(np.abs(draws) > h) - ALPHA) <= 1e-3
    sd = math.sqrt(2 * np.sum(n * a * a))
    chernoff = intervals._laplace_chernoff(a, n.astype(float), ALPHA)
    variance = intervals.half_widths([sd], "laplace", ALPHA)[0]
    assert h < chernoff < variance < sd / math.sqrt(ALPHA)


def _brute_tail(pmfs, k):
    """``P(|Σ_j Z_j| > k)`` for independent integer laws given as ``{value: mass}``."""
    law = {0: 1.0}
    for p in pmfs:
        new = {}
        for x, px in law.items():
            for y, py in p.items():
                new[x + y] = new.get(x + y, 0.0) + px * py
        law = new
    return sum(v for x, v in law.items() if abs(x) > k)


def test_lattice_half_width_against_direct_sums():
    """The convolved integer law against direct sums of its pmfs: one discrete Laplace
    ``Lap_Z(1)`` (``P(|Z| > k) = 2q^{k+1}/(1 + q)``, q = e^{−1}), two of them and one of
    weight 2, and discrete Gaussians; the half-width is the least k with tail ≤ α and the
    atom its boundary mass."""
    q = math.exp(-1)
    lap = {x: (1 - q) / (1 + q) * q ** abs(x) for x in range(-60, 61)}
    k, atom = intervals.lattice_half_width([1], [1], [(1.0, 1, 1)], "discrete laplace", ALPHA)
    assert 2 * q ** (k + 1) / (1 + q) <= ALPHA < 2 * q**k / (1 + q)
    np.testing.assert_allclose(atom, 2 * (1 - q) / (1 + q) * q**k, rtol=1e-12)
    double = {2 * x: p for x, p in lap.items()}
    k, atom = intervals.lattice_half_width([1, 2], [2, 1], [(1.0, 1, 1)] * 2,
                                           "discrete laplace", ALPHA)  # fmt: skip
    assert _brute_tail([lap, lap, double], k) <= ALPHA < _brute_tail([lap, lap, double], k - 1)
    np.testing.assert_allclose(atom, _brute_tail([lap, lap, double], k - 1)
                               - _brute_tail([lap, lap, double], k), rtol=1e-9)  # fmt: skip
    support = np.arange(-40, 41)
    gauss = dict(zip(support.tolist(), discrete_gaussian_pmf(2, support)))
    k, _ = intervals.lattice_half_width([1], [3], [(1.0, 2)], "discrete gaussian", ALPHA)
    assert _brute_tail([gauss] * 3, k) <= ALPHA < _brute_tail([gauss] * 3, k - 1)


def test_discrete_laplace_bounds_cover_the_exact_law():
    """Several discrete Laplace draws: the Chernoff bound of the exact moment generating
    function and the shifted Laplace sum are at or above the exact least half-width (integer
    weights, where the exact law is computable); with incommensurate weights, 10^6 draws of
    the exact sampler cover at least 1 − α (up to 4.5 Monte Carlo standard deviations)."""
    law = (1.0, 1, 3)  # Lap_Z(3): q = e^{-1/3}
    b2 = np.array([intervals._beta2(1, 3)] * 2)
    w, n = np.array([1.0, 2.0]), np.array([3.0, 1.0])
    k, _ = intervals.lattice_half_width([1, 2], [3, 1], [law, law], "discrete laplace", ALPHA)
    assert intervals._dlaplace_chernoff(w, n, b2, ALPHA) >= k
    shifted = intervals.laplace_sum_half_width(w * 3, ALPHA, n=n) + float(np.sum(n * w))
    assert shifted >= k
    w = np.array([1.0, math.sqrt(2), 0.7])
    h, found, _ = intervals.answer_half_width(w, np.ones(3), [law] * 3, "discrete laplace",
                                              ALPHA)  # fmt: skip
    assert found in ("gridded pmf", "discrete laplace chernoff", "shifted laplace sum")
    rng = np.random.default_rng(12)
    draws = np.stack([mm.noise.discrete_laplace(1, 3, rng, size=10**6) for _ in w], 1) @ w
    assert np.mean(np.abs(draws) <= h) >= 1 - ALPHA - 1e-3


@pytest.mark.parametrize("name", ["hdmm_opt_m", "hierarchical", "identity"])
def test_noise_coefficients_are_the_release_map(name):
    """The plan's coefficients ``C`` map noisy strategy answers to the released answers
    exactly as the release does (the kind's ``workload_answers``, else reconstruct →
    answer) and equal the dense ``W A⁺`` (rounding: ``C`` has entries ≤ ~10 here and the
    strategies are well conditioned, so 1e-9 absolute is ample)."""
    selector, params, (spec, domain) = CASES[name]
    W = workload_matrix(spec, domain)
    strategy = selectors.get(selector, **params).select(W, ZCDP(0.5))
    plan = NoisePlan(strategy, ZCDP(0.5), "continuous", workload=W)
    C = plan.coefficients()
    Y = np.random.default_rng(4).normal(size=(plan.A.shape[0], 3))
    released = mm.release_handlers.handler(plan.A).workload_answers(plan.A, W, Y)
    if released is None:
        released = mechanism.answer(W, mechanism.reconstruct(plan.A, Y))
    np.testing.assert_allclose(C @ Y, released, rtol=0, atol=1e-9)
    np.testing.assert_allclose(C, W.dense() @ np.linalg.pinv(plan.A.dense()), rtol=0, atol=1e-9)
    lm = selectors.get("laplace").select(W, ZCDP(0.5))  # LM, inference "none": one draw each
    eye = NoisePlan(lm, ZCDP(0.5), "continuous", workload=W).coefficients()
    np.testing.assert_array_equal(eye.toarray(), np.eye(W.shape[0]))


@pytest.mark.parametrize("noise", ["continuous", "discrete"])
def test_bounds_without_coefficients_cover(noise, monkeypatch):
    """Without the coefficients (a kind with a mechanism of its own, or ``C`` too large) a
    pure-DP answer is bounded from its variance alone: the Chernoff bound of one (discrete)
    Laplace of that variance, on the release's coarsest lattice for discrete noise. It is
    wider than the per-answer laws' intervals and still covers at least 95% (the bound's
    true coverage is ≈ 99.9%, far above the Monte Carlo slack)."""
    selector, params, (spec, domain) = CASES["hierarchical"]
    W = workload_matrix(spec, domain)
    strategy = selectors.get(selector, **params).select(W, PureDP(1.0))
    plan = NoisePlan(strategy, PureDP(1.0), noise, workload=W, fits=False)
    stderr = mechanism.standard_errors(W, strategy, PureDP(1.0))
    exact = intervals.release_intervals(plan, stderr, ALPHA)
    monkeypatch.setattr(NoisePlan, "coefficients", lambda self: None)
    bound = intervals.release_intervals(plan, stderr, ALPHA)
    assert set(bound.methods) == {("discrete " if noise == "discrete" else "")
                                  + "laplace variance chernoff"}  # fmt: skip
    assert np.all(bound.half > exact.half) and np.all(bound.half < stderr / math.sqrt(ALPHA))
    x = np.random.default_rng(3).integers(0, 40, size=W.shape[1])
    covered = np.zeros(W.shape[0])
    for err in mechanism.release_errors(plan, x, true_answers(W, x), R, np.random.default_rng(5)):
        covered += np.sum(np.abs(err) <= bound.half[:, None], axis=1)
    assert (covered / R).min() >= 1 - ALPHA, covered / R


def test_lattice_boundary_atoms_stay_inside_despite_rounding():
    """LM on rows of weights 0.1, 0.3 and 0.7: each answer is its weight times one discrete
    Laplace draw, and its boundary atom ``weight · k`` is computed by the release in floating
    point (``0.7 · (B x + z) − 0.7 · B x``), a few ulps off. The relative margin
    (:data:`~mmtoolkit.intervals.ROUNDING_MARGIN`) keeps every draw on the boundary inside
    (without it about 4% of releases of the third answer fell out: 93.9% coverage)."""
    W = mm.linalg.Dense(np.array([[0.1, 0.1, 0, 0], [0, 0.3, 0.3, 0], [0, 0, 0.7, 0.7]]))
    strategy = selectors.get("laplace").select(W, PureDP(1.0))
    plan = NoisePlan(strategy, PureDP(1.0), "discrete", workload=W, fits=False)
    found = intervals.release_intervals(plan, mechanism.standard_errors(W, strategy, PureDP(1.0)),
                                        ALPHA)  # fmt: skip
    assert set(found.methods) == {"lattice pmf"}
    x = np.array([3, 5, 7, 11])
    on_boundary = 0
    for err in mechanism.release_errors(plan, x, true_answers(W, x), R, np.random.default_rng(1)):
        h = found.half[:, None]
        edge = np.abs(np.abs(err) - h) <= 1e-6 * h  # the boundary atom's draws
        on_boundary += int(edge.sum())
        assert np.all(np.abs(err[edge]) <= np.broadcast_to(h, err.shape)[edge])
    assert on_boundary > 0


def test_grid_half_width_is_valid_and_tight():
    """The gridded law against exact ones: integer weights (an exact lattice) give a gridded
    half-width at or above the exact least one and at most ``(N + 1) δ`` above it (``N``
    draws, ``δ = GRID_SLACK · sd / N``); incommensurate discrete Gaussian weights, 10^6
    draws of the exact sampler: the interval covers at least 95%, and the one ``(N + 1) δ``
    narrower (at or below the exact least half-width) at most 95%, each up to 4.5 Monte
    Carlo standard deviations (1e-3)."""
    law = (1.0, Fraction(3, 2))
    w, n = np.array([1.0, 2.0, 3.0]), np.array([2, 1, 1])
    k, _ = intervals.lattice_half_width([1, 2, 3], [2, 1, 1], [law] * 3, "discrete gaussian",
                                        ALPHA)  # fmt: skip
    grid = intervals.grid_half_width(w, n, [law] * 3, "discrete gaussian", ALPHA)
    sd = math.sqrt(float(np.sum(n * w * w)) * 1.5)  # ≥ the discrete sd (σ̄² bounds Var)
    assert k <= grid <= k + (n.sum() + 1) * intervals.GRID_SLACK * sd / n.sum() + 1e-12
    w = np.array([1.0, math.sqrt(2), 0.7, math.pi / 2])
    h = intervals.grid_half_width(w, np.ones(4), [law] * 4, "discrete gaussian", ALPHA)
    rng = np.random.default_rng(13)
    draws = np.stack([mm.noise.discrete_gaussian(Fraction(3, 2), size=10**6, rng=rng)
                      for _ in w], 1) @ w  # fmt: skip
    narrower = h - 5 * intervals.GRID_SLACK * math.sqrt(float(np.sum(w * w)) * 1.5) / 4
    assert np.mean(np.abs(draws) <= h) >= 1 - ALPHA - 1e-3
    assert np.mean(np.abs(draws) < narrower) <= 1 - ALPHA + 1e-3


@pytest.mark.parametrize("privacy", [ZCDP(0.5), PureDP(1.0)], ids=["zCDP", "PureDP"])
def test_tiny_coefficients_stay_in_the_discrete_law(privacy, monkeypatch):
    """A coefficient 1e-14 times an answer's largest (rounding of ``W A⁺``) stays a draw of
    the answer's discrete law (grouping rounds weights relatively, never to zero; it was
    rounded to 0 and refused as a Laplace weight): the interval is finite and at least that
    of the answer without it."""
    W = mm.linalg.Dense(np.eye(3))
    strategy = selectors.get("laplace").select(W, privacy)
    plan = NoisePlan(strategy, privacy, "discrete", workload=W, fits=False)
    se = np.ones(3)
    C = np.array([[1.0, 1e-14, 0.0], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
    monkeypatch.setattr(NoisePlan, "coefficients", lambda self: C)
    with_tiny = intervals.release_intervals(plan, se, ALPHA)
    C = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
    without = intervals.release_intervals(plan, se, ALPHA)
    assert np.all(np.isfinite(with_tiny.half)) and with_tiny.half[0] >= without.half[0]
