"""Privacy definitions: calibrations, conversions, sampling and validation."""

import math
import re

import numpy as np
import pytest
from noise_draws import one_draw
from scipy.stats import norm

from mmtoolkit import privacy
from mmtoolkit.privacy import ZCDP, ApproxDP, Privacy, PureDP, from_spec


def gaussian_delta_reference(sigma, epsilon, sensitivity=1.0):
    """Balle & Wang 2018 Thm 8, written directly with scipy.stats.norm (independent check)."""
    a = sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
    b = -sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
    return norm.cdf(a) - math.exp(epsilon) * norm.cdf(b)


# ------------------------------------------------------------------ PureDP
def test_pure_dp_laplace_scale_and_variance():
    p = PureDP(0.5)
    assert p.norm == 1
    assert p.noise_scale(1.0) == pytest.approx(2.0)
    assert p.noise_scale(3.0) == pytest.approx(6.0)
    assert p.noise_variance() == pytest.approx(2 / 0.25)  # 2Δ²/ε² = 8
    assert p.noise_variance(3.0) == pytest.approx(2 * 9 / 0.25)  # 72
    assert PureDP(1).noise_variance() == pytest.approx(2.0)
    assert PureDP(math.sqrt(2)).noise_variance() == pytest.approx(1.0)  # HDMM Table 6 ε = √2


def test_pure_dp_to_zcdp():
    assert PureDP(2.0).to_zcdp() == ZCDP(2.0)  # ε²/2


# ------------------------------------------------------------------ ApproxDP
def test_classic_sigma_formula():
    p = ApproxDP(0.5, 1e-4, calibration="classic")
    assert p.norm == 2
    sigma = math.sqrt(2 * math.log(1.25 / 1e-4)) / 0.5
    assert sigma == pytest.approx(8.6872, abs=1e-4)
    assert p.noise_scale() == pytest.approx(sigma, rel=1e-14)
    assert p.noise_scale(2.0) == pytest.approx(2 * sigma, rel=1e-14)
    assert p.noise_variance(2.0) == pytest.approx(4 * sigma**2, rel=1e-14)


def test_eigen_design_sigma_formula():
    p = ApproxDP(0.5, 1e-4, calibration="eigen_design")
    # Li & Miklau 2012 Prop. 4: P(ε, δ) = 2 ln(2/δ)/ε² is the variance per unit L2 sensitivity
    assert p.noise_variance() == pytest.approx(2 * math.log(2 / 1e-4) / 0.25, rel=1e-14)
    assert p.noise_variance() == pytest.approx(79.2279, abs=1e-4)


def test_analytic_sigma_known_value():
    p = ApproxDP(1.0, 1e-5, calibration="analytic")
    sigma = p.noise_scale()
    assert sigma == pytest.approx(3.7306, abs=1e-4)
    # plugged back in, σ sits exactly on the δ boundary; a hair less violates it
    assert gaussian_delta_reference(sigma, 1.0) <= 1e-5 * (1 + 1e-9)
    assert gaussian_delta_reference(sigma, 1.0) == pytest.approx(1e-5, rel=1e-7)
    assert gaussian_delta_reference(sigma * (1 - 1e-6), 1.0) > 1e-5


@pytest.mark.parametrize(
    "epsilon, delta",
    [(0.1, 1e-6), (0.5, 1e-4), (1.0, 1e-10), (3.0, 1e-3), (8.0, 1e-9), (0.01, 0.3), (50.0, 1e-5)],
)
def test_analytic_sigma_is_the_boundary(epsilon, delta):
    p = ApproxDP(epsilon, delta, calibration="analytic")
    sigma = p.noise_scale()
    assert gaussian_delta_reference(sigma, epsilon) == pytest.approx(delta, rel=1e-6)
    assert gaussian_delta_reference(sigma * (1 - 1e-5), epsilon) > delta
    # scale-invariance in Δ: σ(Δ) = Δ σ(1), and the boundary condition holds at Δ = 7
    assert p.noise_scale(7.0) == pytest.approx(7 * sigma, rel=1e-12)
    assert gaussian_delta_reference(7 * sigma, epsilon, 7.0) == pytest.approx(delta, rel=1e-6)


@pytest.mark.parametrize("epsilon, delta", [(0.1, 1e-6), (0.5, 1e-5), (0.9, 1e-3)])
def test_analytic_never_worse_than_classic(epsilon, delta):
    classic = ApproxDP(epsilon, delta, "classic").noise_scale()
    analytic = ApproxDP(epsilon, delta, "analytic").noise_scale()
    assert analytic < classic
    # and the classic σ does satisfy the exact condition (Dwork & Roth Thm A.1, ε < 1)
    assert gaussian_delta_reference(classic, epsilon) < delta


@pytest.mark.parametrize("calibration", ["classic", "eigen_design"])
def test_closed_form_calibrations_refuse_epsilon_at_least_one(calibration):
    # at ε = 10, δ = 1e-5 the classic σ only achieves δ ≈ 2.3e-5: not private as claimed
    classic_sigma = math.sqrt(2 * math.log(1.25 / 1e-5)) / 10
    assert gaussian_delta_reference(classic_sigma, 10.0) > 2e-5
    with pytest.raises(ValueError, match="only for epsilon < 1.*analytic"):
        ApproxDP(10.0, 1e-5, calibration=calibration)
    with pytest.raises(ValueError, match="epsilon < 1"):
        ApproxDP(1.0, 1e-5, calibration=calibration)


def test_analytic_tiny_delta_is_finite_and_monotone():
    sigmas = [ApproxDP(1.0, d, "analytic").noise_scale() for d in (1e-5, 1e-20, 1e-100, 1e-300)]
    assert all(math.isfinite(s) for s in sigmas)
    assert sigmas == sorted(sigmas)


def test_unknown_calibration_lists_valid_ones():
    with pytest.raises(ValueError, match="classic.*analytic.*eigen_design"):
        ApproxDP(1.0, 1e-5, calibration="renyi")


# ------------------------------------------------------------------ ZCDP
def test_zcdp_variance():
    assert ZCDP(0.5).noise_variance() == pytest.approx(1.0)  # ResidualPlanner pcost = 1
    assert ZCDP(0.5).pcost == pytest.approx(1.0)
    assert ZCDP(2.0).noise_variance(3.0) == pytest.approx(9 / 4)
    assert ZCDP(2.0).noise_scale(3.0) == pytest.approx(1.5)
    assert ZCDP(0.1).norm == 2


@pytest.mark.parametrize(
    "pcost, epsilon, delta",
    [(1.0, 1.0, 0.126937), (1.0, 0.5, 0.238422), (0.5, 1.0, 0.039633)],
)
def test_gaussian_delta_residual_planner_fixtures(pcost, epsilon, delta):
    rho = pcost / 2
    assert ZCDP(rho).gaussian_delta(epsilon) == pytest.approx(delta, abs=1e-6)
    # independent: σ = 1/sqrt(pcost) for unit sensitivity
    assert gaussian_delta_reference(1 / math.sqrt(pcost), epsilon) == pytest.approx(delta, abs=1e-6)


def test_gaussian_delta_consistent_with_analytic_calibration():
    # the analytic σ for (ε, δ) has ρ = 1/(2σ²); that ρ's exact δ(ε) is δ again
    sigma = ApproxDP(0.7, 1e-6, "analytic").noise_scale()
    assert ZCDP(1 / (2 * sigma**2)).gaussian_delta(0.7) == pytest.approx(1e-6, rel=1e-6)


def test_zcdp_to_approx_dp():
    rho, delta = 0.5, 1e-6
    expected = 0.5 + 2 * math.sqrt(0.5 * math.log(1e6))
    assert ZCDP(rho).to_approx_dp(delta) == pytest.approx(expected, rel=1e-14)
    assert expected == pytest.approx(5.7565, abs=1e-4)
    # the generic conversion is looser than the Gaussian mechanism's exact curve
    assert ZCDP(rho).gaussian_delta(expected) < delta
    with pytest.raises(ValueError, match="delta"):
        ZCDP(rho).to_approx_dp(0.0)


# ------------------------------------------- zCDP as (ε, δ): Canonne, Kamath & Steinke 2020
RHOS = np.logspace(-6, 3, 19)
DELTAS = [1e-12, 1e-9, 1e-6, 1e-3, 0.1]


def cks_log_delta(rho, epsilon):
    """log of CKS 2020 Cor. 13's δ = inf_{α>1} exp((α−1)(αρ−ε))/(α−1)·(1−1/α)^α, minimised
    numerically over log(α−1) (independent of the closed form the package solves)."""
    from scipy.optimize import minimize_scalar

    def log_bound(u):
        a = 1.0 + math.exp(u)
        return (a - 1) * (a * rho - epsilon) - math.log(a - 1) + a * math.log1p(-1 / a)

    return minimize_scalar(log_bound, bounds=(-40.0, 15.0), method="bounded",
                           options={"xatol": 1e-11}).fun  # fmt: skip


@pytest.mark.parametrize("delta", DELTAS)
def test_tight_conversion_is_the_cks_bound_and_below_prop_1_3(delta):
    """On a grid of ρ and δ: ε by CKS 2020 Cor. 13 is strictly below Bun & Steinke's Prop.
    1.3, and the CKS bound evaluated at it (by numeric minimisation over α) is δ — or, where
    ε is 0, at most δ. Tolerance: the bound's log is convex in α with curvature 2ρ +
    1/(α(α−1)), so an error of 1e-11 in log(α−1) moves log δ by ~1e-20; the round-off of ε
    (1e-16 relative) moves it by (α−1)·ε·1e-16 < 1e-11 here: 1e-9 on log δ is far above both."""
    for rho in RHOS:
        z = ZCDP(rho)
        eps = z.to_approx_dp_tight(delta)
        assert 0.0 <= eps < z.to_approx_dp(delta), (rho, delta)
        if eps > 0:
            assert cks_log_delta(rho, eps) == pytest.approx(math.log(delta), abs=1e-9)
        else:
            assert cks_log_delta(rho, 0.0) <= math.log(delta)


def test_tight_conversion_is_monotone():
    """ε grows with ρ (fixed δ) and falls as δ grows (fixed ρ), strictly until it is 0 (small
    ρ and large δ: the bound at ε = 0 is already below δ)."""
    table = np.array([[ZCDP(r).to_approx_dp_tight(d) for d in DELTAS] for r in RHOS])
    up, down = np.diff(table, axis=0), np.diff(table, axis=1)
    assert np.all(up >= 0) and np.all(up[table[1:] > 0] > 0)
    assert np.all(down <= 0) and np.all(down[table[:, :-1] > 0] < 0)
    assert (table == 0).sum() > 0 and (table > 0).sum() > 80  # both cases are on the grid


@pytest.mark.parametrize("rho", [1e-3, 0.05, 0.5, 2.0, 20.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
def test_tight_conversion_holds_for_the_gaussian_and_is_closer_to_it(rho, delta):
    """The Gaussian mechanism of this ρ (σ = 1/√(2ρ), sensitivity 1) has its exact δ(ε)
    (Balle & Wang 2018 Thm 8, scipy's norm.cdf) at most δ at the CKS ε, and the CKS ε is
    nearer its exact ε than Prop. 1.3 is. The exact δ(ε) is a difference of two terms
    ≤ 1 computed to ~1e-16; the margins here are above 1e-12."""
    from scipy.optimize import brentq

    z, sigma = ZCDP(rho), 1 / math.sqrt(2 * rho)
    eps = z.to_approx_dp_tight(delta)
    assert gaussian_delta_reference(sigma, eps) <= delta
    exact = brentq(lambda e: gaussian_delta_reference(sigma, e) - delta, 1e-9, 200.0,
                   xtol=1e-13)  # fmt: skip
    assert exact < eps < z.to_approx_dp(delta)


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-6, 2.0, float("nan"), float("inf"), "1e-6", None])
def test_tight_conversion_refuses_a_bad_delta(bad):
    with pytest.raises(ValueError, match="delta"):
        ZCDP(0.5).to_approx_dp_tight(bad)


# ------------------------------------------------------------------ sampling
@pytest.mark.parametrize(
    "p", [PureDP(0.7), ApproxDP(0.5, 1e-5), ApproxDP(2.0, 1e-6, "analytic"), ZCDP(0.3)]
)
def test_sampling_reproducible_and_variance(p):
    a = one_draw(p, np.random.default_rng(42), 10, sensitivity=2.0)
    b = one_draw(p, np.random.default_rng(42), 10, sensitivity=2.0)
    c = one_draw(p, np.random.default_rng(43), 10, sensitivity=2.0)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert one_draw(p, np.random.default_rng(0), (3, 4)).shape == (3, 4)

    n = 200_000
    x = one_draw(p, np.random.default_rng(7), n, sensitivity=2.0)
    target = p.noise_variance(2.0)
    # the sample variance is within ~1.5% (Laplace kurtosis 6: sd ≈ sqrt(5/n) ≈ 0.5%);
    # a factor-2 bug (e.g. Laplace variance b² instead of 2b²) is far outside
    assert x.var() == pytest.approx(target, rel=0.03)
    assert abs(x.mean()) < 5 * math.sqrt(target / n)


def test_sampling_family():
    x = one_draw(PureDP(1.0), np.random.default_rng(1), 200_000)
    # Laplace: E|X| = b = 1 ; Gaussian with the same variance would give sqrt(2·2/π) ≈ 1.128
    assert np.abs(x).mean() == pytest.approx(1.0, rel=0.02)
    y = one_draw(ZCDP(0.5), np.random.default_rng(1), 200_000)
    assert np.abs(y).mean() == pytest.approx(math.sqrt(2 / math.pi), rel=0.02)


def test_sampling_zero_sensitivity_and_bad_rng():
    np.testing.assert_array_equal(
        one_draw(PureDP(1.0), np.random.default_rng(0), 3, 0.0), 0.0
    )
    with pytest.raises(ValueError, match="Generator"):
        one_draw(PureDP(1.0), np.random.RandomState(0), 3)
    with pytest.raises(ValueError, match="sensitivity"):
        PureDP(1.0).noise_scale(-1.0)
    with pytest.raises(ValueError, match="sensitivity"):
        ZCDP(1.0).noise_variance(float("nan"))


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "1", None, True, [1.0]])
def test_invalid_epsilon(bad):
    with pytest.raises(
        ValueError, match=r"epsilon: (expected a number|must be a (finite )?number > 0)"
    ):
        PureDP(bad)
    with pytest.raises(ValueError, match="epsilon"):
        ApproxDP(bad, 1e-5)


def test_invalid_epsilon_message():
    with pytest.raises(ValueError, match="epsilon: must be a number > 0, got -1.0"):
        PureDP(-1)


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, float("nan"), float("inf"), "0.1", None])
def test_invalid_delta(bad):
    with pytest.raises(ValueError, match="delta"):
        ApproxDP(1.0, bad)


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), float("inf"), "0.5", None, False])
def test_invalid_rho(bad):
    with pytest.raises(
        ValueError, match=r"rho: (expected a number|must be a (finite )?number > 0)"
    ):
        ZCDP(bad)


def test_invalid_gaussian_delta_epsilon():
    with pytest.raises(ValueError, match="epsilon"):
        ZCDP(0.5).gaussian_delta(-1.0)


def test_numpy_scalars_accepted():
    assert PureDP(np.float64(0.5)) == PureDP(0.5)
    assert ZCDP(np.int64(2)) == ZCDP(2.0)


# ------------------------------------------------------------------ value semantics
def test_equality_hash_repr():
    assert PureDP(1) == PureDP(1.0)
    assert hash(PureDP(1)) == hash(PureDP(1.0))
    assert PureDP(1.0) != PureDP(2.0)
    assert PureDP(0.5) != ZCDP(0.5)
    assert ApproxDP(0.5, 1e-5, "classic") != ApproxDP(0.5, 1e-5, "analytic")
    assert ApproxDP(1, 1e-5) == ApproxDP(1, 1e-5, "analytic")  # the default
    assert ApproxDP(1, 1e-5, "analytic") == ApproxDP(1.0, 1e-5, "analytic")
    assert len({PureDP(1), PureDP(1.0), ZCDP(1), ApproxDP(1, 0.1)}) == 3
    assert repr(PureDP(1)) == "PureDP(epsilon=1.0)"
    assert repr(ZCDP(0.5)) == "ZCDP(rho=0.5)"
    assert repr(ApproxDP(1, 1e-5, "analytic")) == (
        "ApproxDP(epsilon=1.0, delta=1e-05, calibration='analytic')"
    )
    for p in (PureDP(1), ApproxDP(1, 1e-5, "analytic"), ZCDP(0.5)):
        assert eval(repr(p), {"PureDP": PureDP, "ApproxDP": ApproxDP, "ZCDP": ZCDP}) == p
        assert isinstance(p, Privacy)
    assert "Laplace" in PureDP(1).describe() and "L1" in PureDP(1).describe()
    assert "Gaussian" in ZCDP(0.5).describe() and "L2" in ZCDP(0.5).describe()
    assert "analytic" in ApproxDP(1, 1e-5, "analytic").describe()
    assert "3.73" in ApproxDP(1, 1e-5, "analytic").describe()


def test_immutable():
    p = PureDP(1.0)
    with pytest.raises(AttributeError):
        p.epsilon = 2.0


# ------------------------------------------------------------------ from_spec
def test_from_spec_builds_each_kind():
    assert from_spec({"kind": "pure", "epsilon": 1}) == PureDP(1)
    assert from_spec({"kind": "approx", "epsilon": 1, "delta": 1e-6}) == ApproxDP(1, 1e-6)
    assert from_spec(
        {"kind": "approx", "epsilon": 1, "delta": 1e-6, "calibration": "analytic"}
    ) == ApproxDP(1, 1e-6, "analytic")
    assert from_spec({"kind": "zcdp", "rho": 0.5}) == ZCDP(0.5)
    for p in (PureDP(2), ApproxDP(0.5, 1e-4, "eigen_design"), ZCDP(0.1)):
        assert from_spec(p.to_spec()) == p
        assert from_spec(p) is p


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"epsilon": 1}, "kind"),
        ({"kind": "renyi", "alpha": 2}, "kind"),
        ({"kind": [], "epsilon": 1}, "kind"),  # unhashable: was a TypeError
        ({"kind": {"a": 1}}, "kind"),
        ({"kind": "pure"}, "epsilon"),
        ({"kind": "approx", "epsilon": 1}, "delta"),
        ({"kind": "zcdp"}, "rho"),
        ({"kind": "pure", "epsilon": 1, "delta": 1e-5}, "delta"),
        ({"kind": "zcdp", "rho": 1, "epsilon": 1}, "epsilon"),
        ({"kind": "approx", "epsilon": 1, "delta": 1e-5, "calibratoin": "x"}, "calibratoin"),
        ({"kind": "pure", "epsilon": -1}, "epsilon"),
        ({"kind": "approx", "epsilon": 1, "delta": 1e-5, "calibration": "x"}, "calibration"),
    ],
)
def test_from_spec_errors_name_the_field(spec, field):
    with pytest.raises(ValueError, match=field):
        from_spec(spec)


def test_from_spec_not_a_mapping():
    with pytest.raises(ValueError, match="mapping"):
        from_spec(["pure", 1])
    assert privacy.CALIBRATIONS == ("classic", "analytic", "eigen_design")


# ------------------------------------------------------------------ float64 limits
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PureDP(1e-300), r"PureDP\(epsilon=1e-300\): the noise variance .* is inf"),
        (lambda: PureDP(1e-154), r"variance for sensitivity 1 is inf"),  # 2/ε² = 2e308
        (lambda: ZCDP(5e-324), r"ZCDP\(rho=5e-324\): the noise variance .* is inf"),
        (lambda: ApproxDP(1e-160, 1e-6, "classic"), r"variance for sensitivity 1 is inf"),
        (lambda: PureDP(1e300), r"underflows to 0.0"),  # 2/ε² is below the subnormals
        (lambda: ApproxDP(1e100, 1e-6), r"analytic Gaussian calibration of epsilon=1e\+100"),
        (lambda: ApproxDP(1e300, 0.5), r"analytic Gaussian calibration of epsilon=1e\+300"),
    ],
)
def test_privacy_level_without_finite_noise_is_refused_at_construction(make, message):
    """A level whose unit noise has no positive finite float64 variance (or no analytic σ)
    is refused when it is built — before any selection, ledger charge or draw — with a
    ValueError, never an inf/NaN noise or a RuntimeError later."""
    with pytest.raises(ValueError, match=message):
        make()


def test_tiny_but_representable_levels_are_kept():
    assert PureDP(1e-150).noise_variance() == pytest.approx(2e300)
    assert ZCDP(1e-300).noise_variance() == pytest.approx(5e299)
    assert math.isfinite(ApproxDP(1e-300, 1e-6).noise_variance())  # the (0, δ) Gaussian


@pytest.mark.parametrize(
    "p, sens", [(PureDP(1e-150), 1e10), (ZCDP(1e-300), 1e10), (ApproxDP(0.5, 1e-6), 1e160)]
)
def test_noise_for_a_sensitivity_that_overflows_is_refused(p, sens):
    """The scale at ``sens`` is finite, its square is not; at 1e308 the scale overflows."""
    assert math.isfinite(p.noise_scale(sens))
    message = re.escape(f"noise variance for sensitivity {sens:g} is inf")
    with pytest.raises(ValueError, match=message):
        p.noise_variance(sens)
    with pytest.raises(ValueError, match="noise scale for sensitivity 1e\\+308 is inf"):
        p.noise_scale(1e308)
    with pytest.raises(ValueError, match="noise scale for sensitivity 1e\\+308 is inf"):
        one_draw(p, np.random.default_rng(0), 3, sensitivity=1e308)


# ------------------------------------------------------------------ command-line budgets
def _budget(argv):
    import argparse

    parser = argparse.ArgumentParser()
    privacy.add_budget_arguments(parser)
    args = parser.parse_args(argv)
    return privacy.from_budget(args.epsilon, args.delta, args.rho)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--epsilon", "1", "--delta", "-1e-6"], "--delta: must be a number strictly between"),
        (["--epsilon", "1", "--delta=-1e-6"], "--delta: must be a number strictly between"),
        (["--epsilon", "-1E3"], r"--epsilon: must be a number > 0, got -1000.0"),
        (["--epsilon", "-.5"], r"--epsilon: must be a number > 0, got -0.5"),
        (["--rho", "-inf"], r"--rho: must be a finite number > 0, got -inf"),
        (["--rho", "nan"], r"--rho: must be a number > 0, got nan"),
        (["--epsilon", "1e-300"], r"PureDP\(epsilon=1e-300\): the noise variance"),
    ],
)
def test_budget_flags_negative_and_out_of_range_values_name_the_flag(argv, message):
    """``--delta -1e-6`` is read as the flag's value (argparse alone took it for an option
    and said "expected one argument") and refused naming the flag."""
    with pytest.raises(ValueError, match=message):
        _budget(argv)


def test_budget_flags_build_each_kind():
    assert _budget(["--epsilon", "2"]) == PureDP(2)
    assert _budget(["--epsilon", "1", "--delta", "1e-6"]) == ApproxDP(1, 1e-6)
    assert _budget(["--rho", "0.5"]) == ZCDP(0.5)
    with pytest.raises(ValueError, match="either --rho or --epsilon"):
        _budget(["--rho", "0.5", "--epsilon", "1"])


def test_release_refuses_an_overflowing_level_before_the_ledger(tmp_path):
    """``release`` at a level whose expected error overflows raises before its ledger
    charge and draws no noise (it used to release answers near ±1e301 with stderr inf and
    ``"expected_rmse": Infinity``); a level refused at construction never gets that far."""
    import mmtoolkit as mm
    from mmtoolkit import records
    from mmtoolkit.ledger import Ledger

    path = tmp_path / "l.json"
    Ledger.create(path, epsilon=1e9)
    R = records.synthetic({"a": 3, "b": 2}, 40, seed=0)
    with pytest.raises(ValueError, match="expected total squared error is inf"):
        mm.release(R, "marginals:2", PureDP(1.2e-154), "identity", seed=0, ledger=path)
    assert Ledger(path).entries == []
    result = mm.release(R, "marginals:2", PureDP(1e-150), "identity", seed=0, ledger=path)
    assert np.all(np.isfinite(result.answers)) and np.all(np.isfinite(result.stderr))
    assert math.isfinite(result.summary["expected_rmse"])


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-5])
def test_for_approx_dp_is_the_largest_rho_the_tight_conversion_allows(epsilon, delta):
    z = ZCDP.for_approx_dp(epsilon, delta)
    assert z.to_approx_dp_tight(delta) <= epsilon
    # the conversion's relative slope in ρ is of order 1 (ε ≈ ρ + 2 sqrt(ρ ln 1/δ)), so a
    # relative step of 1e-9 in ρ moves ε by ~1e-9 relative, far above its ~1e-15 rounding
    assert ZCDP(z.rho * (1 + 1e-9)).to_approx_dp_tight(delta) > epsilon


def test_for_approx_dp_refuses_a_non_positive_epsilon():
    with pytest.raises(ValueError, match="epsilon"):
        ZCDP.for_approx_dp(0.0, 1e-9)
    with pytest.raises(ValueError, match="delta"):
        ZCDP.for_approx_dp(1.0, 0.0)
