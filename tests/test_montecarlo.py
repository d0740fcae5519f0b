"""Monte-Carlo validation of the release path for every registered selector.

For each selector (on the small workload tests/selector_cases.py derives from its
``applicability``) and each privacy definition it
optimises for (PureDP and zCDP), 1000 releases ``measure → reconstruct → answer`` on fixed
integer data; the mean of the per-release total squared error ``Σ_i (ŷ_i − W_i x)²`` must
contain the shared evaluator's ``expected_error`` in its 99% confidence interval
``mean ± 2.576 · sd/√R`` (``sd`` the empirical standard deviation of the R totals: the
normal approximation of a mean of i.i.d. draws). Per-query empirical variances must match
``evaluate.per_query_variance`` (rtol 0.35: at R = 1000 the standard error of one variance
estimate is ≤ 8% even for Laplace noise, so a factor-of-two bug fails). Seeds are fixed.
"""

from __future__ import annotations

import numpy as np
import pytest
from selector_cases import PRIVACIES, selector_case

import mmtoolkit as mm
from mmtoolkit import evaluate, mechanism, selectors, workloads
from mmtoolkit.privacy import PureDP

RELEASES = 1000
PREFIX = workloads.prefix(16)
MARG = workloads.marginals(mm.Domain.from_sizes([3, 4, 2]), 2, lower=True)


@pytest.mark.parametrize("privacy", PRIVACIES, ids=lambda p: type(p).__name__)
@pytest.mark.parametrize("name", selectors.available())
def test_monte_carlo_matches_evaluator(name, privacy):
    """Every registered selector, on the workload tests/selector_cases.py derives for it."""
    case = selector_case(name, privacy)
    if case is None:
        pytest.skip(f"{name} does not support {type(privacy).__name__}")
    W, strategy = case
    x = np.random.default_rng(7).integers(0, 40, size=W.shape[1])
    mc = mechanism.monte_carlo(
        W, strategy, x, privacy, RELEASES, np.random.default_rng(11), level=0.99
    )
    assert mc.releases == RELEASES
    assert mc.expected == pytest.approx(evaluate.expected_error(W, strategy, privacy))
    assert mc.within_ci, (mc.mean_total, mc.ci, mc.expected)
    np.testing.assert_allclose(mc.query_var, mc.expected_var, rtol=0.35)


@pytest.mark.parametrize("privacy", PRIVACIES, ids=["PureDP", "ZCDP"])
@pytest.mark.parametrize("name", ["identity", "hierarchical", "laplace"])
def test_monte_carlo_discrete_noise(name, privacy):
    """Exact integer noise: the empirical error matches the evaluator's, scaled by the exact
    variance ratio of the discrete to the continuous distribution (< 1). The interval is at
    99.9% (z = 3.29): its false-alarm rate over these six cases is 0.6%, where 99% would
    give 6% for values of the sampler that are correct but fixed by the seed; a noise scale
    off by 20% (a variance 44% off) still falls outside it (its half-width is at most 13% of
    the mean in these cases at R = 1000)."""
    strategy = selectors.get(name).select(PREFIX, privacy)
    x = np.random.default_rng(3).integers(0, 40, size=16)
    mc = mechanism.monte_carlo(
        PREFIX, strategy, x, privacy, RELEASES, np.random.default_rng(5), level=0.999,
        noise="discrete",
    )
    ratio = mc.expected / evaluate.expected_error(PREFIX, strategy, privacy)
    assert 0.9 < ratio <= 1.0 + 1e-5  # σ̄ is rounded up by ≤ 1e-6 (relative)
    assert mc.within_ci, (mc.mean_total, mc.ci, mc.expected)


def test_monte_carlo_detects_a_wrong_noise_scale():
    """The harness can fail: noise calibrated to half the sensitivity is caught."""
    W = PREFIX
    strategy = selectors.get("identity").select(W, PureDP(1.0))
    x = np.zeros(16)
    mc = mechanism.monte_carlo(W, strategy, x, PureDP(2.0), RELEASES, np.random.default_rng(0))
    assert mc.within_ci  # consistent with its own privacy
    wrong = evaluate.expected_error(W, strategy, PureDP(1.0))
    assert not mc.ci[0] <= wrong <= mc.ci[1]


def test_monte_carlo_seeded_and_bad_input():
    s = selectors.get("identity").select(PREFIX, PureDP(1.0))
    a = mechanism.monte_carlo(PREFIX, s, np.ones(16), PureDP(1.0), 50, np.random.default_rng(1))
    b = mechanism.monte_carlo(PREFIX, s, np.ones(16), PureDP(1.0), 50, np.random.default_rng(1))
    assert a.mean_total == b.mean_total
    with pytest.raises(ValueError, match="at least 2"):
        mechanism.monte_carlo(PREFIX, s, np.ones(16), PureDP(1.0), 1, np.random.default_rng(1))
    with pytest.raises(ValueError, match="level"):
        mechanism.monte_carlo(
            PREFIX, s, np.ones(16), PureDP(1.0), 10, np.random.default_rng(1), level=1.5
        )
    with pytest.raises(ValueError, match="Generator"):
        mechanism.monte_carlo(PREFIX, s, np.ones(16), PureDP(1.0), 10, 3)
    with pytest.raises(ValueError, match="defined on 16"):
        mechanism.monte_carlo(PREFIX, s, np.ones(15), PureDP(1.0), 10, np.random.default_rng(1))


@pytest.mark.parametrize("privacy", PRIVACIES, ids=lambda p: type(p).__name__)
def test_monte_carlo_opt_union_three_groups_by_least_squares(monkeypatch, privacy):
    """OPT_+ with three groups has no closed-form pseudo-inverse: every release is
    reconstructed by the kind's preconditioned conjugate gradients (``KroneckerUnion.
    least_squares``; the dense shortcut for several releases is switched off), and the
    errors must match the evaluator as above."""
    monkeypatch.setattr(mechanism, "SMALL_DENSE_ENTRIES", 0)
    strategy = selectors.get("opt_union", seed=0, groups=3).select(MARG, privacy)
    assert len(strategy.matrix.blocks) == 3 and strategy.matrix.pinv_operator() is None
    x = np.random.default_rng(7).integers(0, 40, size=MARG.shape[1])
    mc = mechanism.monte_carlo(
        MARG, strategy, x, privacy, RELEASES, np.random.default_rng(11), level=0.99
    )
    assert mc.expected == pytest.approx(evaluate.expected_error(MARG, strategy, privacy))
    assert mc.within_ci, (mc.mean_total, mc.ci, mc.expected)
    np.testing.assert_allclose(mc.query_var, mc.expected_var, rtol=0.35)
