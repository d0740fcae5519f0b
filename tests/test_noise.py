"""Exact discrete samplers (Canonne, Kamath, Steinke 2020) in mmtoolkit.noise."""

from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chi2

from mmtoolkit.noise import (
    bernoulli,
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_rho,
    discrete_laplace,
    rational_ceil_sqrt,
)


class IntegersOnly:
    """An rng proxy exposing only ``integers``: any float draw would raise AttributeError."""

    def __init__(self, seed):
        self._g = np.random.default_rng(seed)
        self.calls = 0

    def integers(self, low, high, size=None, dtype=np.int64):
        out = self._g.integers(low, high, size, dtype=dtype)
        assert np.issubdtype(np.asarray(out).dtype, np.integer)
        self.calls += np.size(out)
        return out


def _chi_square(samples, pmf_on, cut):
    vals = np.arange(-cut, cut + 1)
    obs = np.array([(samples == v).sum() for v in vals] + [(np.abs(samples) > cut).sum()])
    p = pmf_on(vals)
    exp = np.append(p, max(1 - p.sum(), 0.0)) * len(samples)
    keep = exp > 5
    if (~keep).any():  # pool the sparse bins
        obs = np.append(obs[keep], obs[~keep].sum())
        exp = np.append(exp[keep], exp[~keep].sum())
    stat = ((obs - exp) ** 2 / exp).sum()
    return chi2.sf(stat, len(obs) - 1)


def test_discrete_gaussian_distribution_and_integer_randomness():
    rng = IntegersOnly(1)
    s2 = Fraction(3, 2)
    x = discrete_gaussian(s2, 12000, rng)
    assert x.dtype == np.int64 and rng.calls > 0
    assert _chi_square(x, lambda v: discrete_gaussian_pmf(s2, v), 6) > 1e-3
    assert abs(x.mean()) < 4 * np.sqrt(1.5 / len(x))
    assert x.var() <= 1.5 * 1.05  # variance ≤ σ² (CKS Cor. 9)
    # a wrong variance is detected by the same test (the test can fail)
    assert _chi_square(x, lambda v: discrete_gaussian_pmf(Fraction(2), v), 6) < 1e-6


def test_discrete_gaussian_large_sigma_and_seed():
    a = discrete_gaussian(400, 3000, np.random.default_rng(3))
    b = discrete_gaussian(400, 3000, np.random.default_rng(3))
    assert np.array_equal(a, b)
    assert a.var() == pytest.approx(400, rel=0.08)
    assert isinstance(discrete_gaussian(2, None, np.random.default_rng(0)), int)


def test_discrete_laplace_distribution():
    rng = IntegersOnly(2)
    x = np.array([discrete_laplace(2, 3, rng) for _ in range(8000)])  # pmf ∝ exp(-|x| 2/3)
    q = np.exp(-2 / 3)

    def pmf(v):
        return (1 - q) / (1 + q) * q ** np.abs(v)

    assert _chi_square(x, pmf, 8) > 1e-3


def test_bernoulli_exp_frequencies():
    rng = np.random.default_rng(4)
    for gamma in (Fraction(1, 3), Fraction(5, 2)):
        hits = sum(bernoulli_exp(gamma, rng) for _ in range(20000))
        p = np.exp(-float(gamma))
        assert abs(hits / 20000 - p) < 4 * np.sqrt(p * (1 - p) / 20000)
    assert bernoulli(Fraction(0), rng) == 0 and bernoulli(Fraction(1), rng) == 1
    # huge denominators use chunked integers (exact for any size)
    big = Fraction(1, 2) + Fraction(1, 2**200)
    hits = sum(bernoulli(big, rng) for _ in range(4000))
    assert abs(hits / 4000 - 0.5) < 0.04


def test_accounting_and_rounding():
    assert rational_ceil_sqrt(2, 50) == Fraction(71, 50)  # §5 Eq. 4: √2 -> 1.42
    assert rational_ceil_sqrt(Fraction(4, 9), 3) == Fraction(2, 3)
    r = rational_ceil_sqrt(0.3, 10**6)
    assert r * r >= Fraction(0.3) and (r - Fraction(1, 10**6)) ** 2 < Fraction(0.3)
    assert discrete_gaussian_rho(12, Fraction(64, 9)) == Fraction(27, 32)  # Example 3


def test_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="sigma2 must be positive"):
        discrete_gaussian(0, 3, rng)
    with pytest.raises(ValueError, match="Generator"):
        discrete_gaussian(1, 3, None)
    with pytest.raises(ValueError, match="gamma must be non-negative"):
        bernoulli_exp(-1, rng)
    with pytest.raises(ValueError, match="probability"):
        bernoulli(Fraction(3, 2), rng)
    with pytest.raises(ValueError, match="s: must be >= 1, got 0"):
        discrete_laplace(0, 1, rng)
    with pytest.raises(ValueError, match="sigma2: must be a finite number, got nan"):
        discrete_gaussian(float("nan"), 1, rng)


def _laplace_pmf(s, t):
    q = np.exp(-s / t)
    return lambda v: (1 - q) / (1 + q) * q ** np.abs(v)


@pytest.mark.parametrize("s, t", [(2, 3), (1, 5), (7, 2)])
def test_discrete_laplace_vectorised_distribution_and_integers(s, t):
    """The array form (vectorised Alg. 2) against the exact pmf; integer randomness only."""
    rng = IntegersOnly(10 + s)
    x = discrete_laplace(s, t, rng, size=(40, 500))
    assert x.shape == (40, 500) and x.dtype == np.int64
    assert _chi_square(x.ravel(), _laplace_pmf(s, t), 10) > 1e-3
    q = np.exp(-s / t)
    assert x.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.08)
    # the test can fail: a different scale is rejected
    assert _chi_square(x.ravel(), _laplace_pmf(s, t + 1), 10) < 1e-6
    # same seed => same samples
    a = discrete_laplace(s, t, np.random.default_rng(4), size=100)
    b = discrete_laplace(s, t, np.random.default_rng(4), size=100)
    assert np.array_equal(a, b)


def test_discrete_gaussian_big_integer_path():
    """σ² with a huge denominator takes the element-by-element Python-int path: same law."""
    s2 = Fraction(3, 2) + Fraction(1, 10**17)
    rng = IntegersOnly(6)
    x = discrete_gaussian(s2, 3000, rng)
    assert x.dtype == np.int64
    assert _chi_square(x, lambda v: discrete_gaussian_pmf(s2, v), 6) > 1e-3


def test_discrete_gaussian_vectorised_moderate_sigma():
    s2 = Fraction(25, 1)
    x = discrete_gaussian(s2, 20000, IntegersOnly(8))
    assert _chi_square(x, lambda v: discrete_gaussian_pmf(s2, v), 15) > 1e-3
    assert x.var() == pytest.approx(25, rel=0.05)
