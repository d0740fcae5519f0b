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

import numpy as np
import pytest

import mmtoolkit as mm
from mmtoolkit import intervals, mechanism, selectors
from mmtoolkit.checks import CheckTypeError
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
    sizes = [s.stop - s.start for s in workload_tables(W, domain)]
    assert sum(sizes) == W.shape[0]
    widths = {
        what: intervals.half_widths(stderr, plan.distribution, ALPHA, count,
                                    plan.proxy_factor)[:, None]  # fmt: skip
        for what, count in (("answer", 1), ("table", intervals.table_counts(sizes)),
                            ("workload", W.shape[0]))  # fmt: skip
    }
    per_answer = np.zeros(W.shape[0])
    tables = np.zeros(len(sizes))
    workload = 0
    bounds = np.cumsum([0] + sizes)
    errors = mechanism.release_errors(plan, x, true_answers(W, x), R, np.random.default_rng(5))
    for err in errors:
        per_answer += np.sum(np.abs(err) <= widths["answer"], axis=1)
        inside = np.abs(err) <= widths["table"]
        tables += [np.sum(np.all(inside[a:b], axis=0)) for a, b in zip(bounds, bounds[1:])]
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
