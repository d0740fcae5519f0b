"""The exact samplers' law at many scales, on both paths (compiled kernel and numpy).

Each test bins fixed-seed samples and runs a G-test against the exact pmf (bins of equal
probability under the matching continuous law, their probabilities summed exactly from the
discrete pmf or its closed-form cdf; adjacent bins pooled until each expects ≥ 5 samples).
False-alarm rate: ``ALPHA`` = 1e-4 per test for a correct sampler and a fresh seed, so about
3e-3 over the ~30 tests of this file; with the seeds fixed the outcome is deterministic. The
same statistic is required to reject a law whose variance is 1% off at the large scales (the
test's power, checked on the same samples).
"""

import math

import numpy as np
import pytest
from scipy import stats

from mmtoolkit import noise
from mmtoolkit.linalg import kernels

ALPHA = 1e-4
BINS = 30


@pytest.fixture(params=["numpy", "compiled"])
def path(request, monkeypatch):
    """The sampler path under test (``MMTOOLKIT_NUMBA`` 0 or 1); compiled needs numba."""
    if request.param == "compiled":
        pytest.importorskip("numba")
    monkeypatch.setenv(kernels.ENV, "0" if request.param == "numpy" else "1")
    return request.param


class Words:
    """A generator that records what it is asked for (``calls``: ``(low, high, dtype)``)."""

    def __init__(self, seed: int):
        self.g = np.random.default_rng(seed)
        self.calls: list = []

    def integers(self, low, high, size=None, dtype=np.int64):
        self.calls.append((low, high, dtype))
        return self.g.integers(low, high, size=size, dtype=dtype)


def _edges(ppf):
    """Integer bin edges at the continuous law's quantiles (``ppf``), far tails included."""
    q = np.linspace(0, 1, BINS + 1)[1:-1]
    q = np.concatenate([[1e-7, 1e-5, 1e-3], q, [1 - 1e-3, 1 - 1e-5, 1 - 1e-7]])
    return np.unique(np.round(ppf(q)).astype(np.int64))


def g_test(samples, edges, cdf):
    """The G-test p-value of ``samples`` against the law of cdf ``cdf(x) = P(X ≤ x)`` on the
    bins ``(-inf, e0), [e0, e1), …, [ek, inf)`` (adjacent bins pooled to expect ≥ 5)."""
    n = samples.size
    counts = np.bincount(np.searchsorted(edges, samples, side="right"), minlength=edges.size + 1)
    below = np.concatenate([[0.0], cdf(edges - 1), [1.0]])
    probs = np.diff(below)
    obs, exp = [], []
    o = e = 0.0
    for c, p in zip(counts, probs):
        o, e = o + c, e + p * n
        if e >= 5:
            obs.append(o)
            exp.append(e)
            o = e = 0.0
    if e > 0:  # the last, sparse bins join the previous one
        obs[-1] += o
        exp[-1] += e
    obs, exp = np.array(obs), np.array(exp)
    nz = obs > 0
    g = 2 * np.sum(obs[nz] * np.log(obs[nz] / exp[nz])) - 2 * np.sum(obs - exp)
    return stats.chi2.sf(g, obs.size - 1)


def gaussian_cdf(sigma2):
    """The exact cdf of N_Z(0, σ²) on integers (the pmf summed over ±(14σ + 3): the mass
    beyond, below exp(-98), is far under the float resolution of the sums)."""
    span = int(14 * math.sqrt(sigma2)) + 3
    xs = np.arange(-span, span + 1)
    pmf = np.exp(-(xs.astype(float) ** 2) / (2 * float(sigma2)))
    cum = np.cumsum(pmf / pmf.sum())

    def cdf(x):
        return cum[np.clip(np.asarray(x) + span, -1, 2 * span)] * (np.asarray(x) >= -span)

    return cdf


def laplace_cdf(s, t):
    """The exact cdf of Lap_Z(t/s): P(X ≤ -m) = q^m / (1 + q), q = exp(-s/t) (closed form)."""
    r = s / t
    q = math.exp(-r)

    def cdf(x):
        x = np.asarray(x, dtype=float)
        low = np.exp(r * np.minimum(x, 0)) / (1 + q)  # x < 0: q^{-x} / (1 + q)
        high = 1 - np.exp(-r * (np.maximum(x, 0) + 1)) / (1 + q)
        return np.where(x < 0, low, high)

    return cdf


#: Samples of the large scales: enough that the G-test sees a 1% error in the variance
#: (non-centrality ≈ n δ² Var(score) ≥ 80 for δ = 0.5% in the scale, against a critical
#: value ≈ 60 of χ²(30) at ALPHA).
POWER_N = 4_000_000
# σ², sample count
GAUSSIAN_CASES = [(0.5, 200_000), (3, 200_000), (100, POWER_N), (10**4, POWER_N),
                  (10**8, POWER_N)]  # fmt: skip


@pytest.mark.parametrize("sigma2, n", GAUSSIAN_CASES)
def test_discrete_gaussian_law(path, sigma2, n):
    if path == "numpy" and sigma2 == 10**8:
        # 2 a b t² exceeds the vectorised form's int64 bound: Python integers, element by
        # element (~5,000 samples/s), so a small sample and no power check here
        n = 10_000
    x = noise.discrete_gaussian(sigma2, n, np.random.default_rng(11))
    assert x.dtype == np.int64 and x.shape == (n,)
    edges = _edges(lambda q: stats.norm.ppf(q) * math.sqrt(sigma2))
    assert g_test(x, edges, gaussian_cdf(sigma2)) > ALPHA
    if sigma2 >= 100 and n == POWER_N:  # the test has the power to see a 1% variance error
        for wrong in (sigma2 * 1.01, sigma2 / 1.01):
            assert g_test(x, edges, gaussian_cdf(wrong)) < ALPHA


LAPLACE_CASES = [(1, 1, 200_000), (3, 7, 200_000), (1, 100, POWER_N), (1, 10**6, POWER_N)]


@pytest.mark.parametrize("s, t, n", LAPLACE_CASES)
def test_discrete_laplace_law(path, s, t, n):
    x = noise.discrete_laplace(s, t, np.random.default_rng(12), size=n)
    assert x.dtype == np.int64 and x.shape == (n,)
    edges = _edges(lambda q: stats.laplace.ppf(q, scale=t / s))
    assert g_test(x, edges, laplace_cdf(s, t)) > ALPHA
    if t / s >= 100:  # a 1% error in the variance is a ~0.5% error in the scale
        for wrong in (1.005, 1 / 1.005):
            assert g_test(x, edges, laplace_cdf(s * wrong, t)) < ALPHA


def test_compiled_samples_do_not_depend_on_the_buffer(monkeypatch):
    """The compiled path reads the generator's words as one bit stream: a buffer of 3 words
    (a refill inside almost every sample) gives the same values as the default one, for
    counts larger than one default buffer (several refills)."""
    pytest.importorskip("numba")
    monkeypatch.setenv(kernels.ENV, "1")
    n = 300_000  # > _WORDS words' worth: the default buffer is refilled too
    big_g = noise.discrete_gaussian(10**4, n, np.random.default_rng(5))
    big_l = noise.discrete_laplace(3, 700, np.random.default_rng(6), size=n)
    monkeypatch.setattr(noise, "_WORDS", 3)
    small_g = noise.discrete_gaussian(10**4, n, np.random.default_rng(5))
    small_l = noise.discrete_laplace(3, 700, np.random.default_rng(6), size=n)
    assert np.array_equal(big_g, small_g) and np.array_equal(big_l, small_l)
    # and the law across the refills
    edges = _edges(lambda q: stats.norm.ppf(q) * 100)
    assert g_test(small_g, edges, gaussian_cdf(10**4)) > ALPHA


@pytest.mark.parametrize("c_limit", [1, 40])
def test_compiled_far_tail_decided_exactly(monkeypatch, c_limit):
    """The candidates the kernel hands back (``| |y| t b - a | ≥ _C_LIMIT``, the far tail at
    the default limit) are decided with Python integers from the same bit stream: with a
    small limit most of them are, and the law is unchanged; a tiny word buffer gives the
    same values (the Python decisions read the stream the kernel does)."""
    pytest.importorskip("numba")
    monkeypatch.setenv(kernels.ENV, "1")
    monkeypatch.setattr(noise, "_C_LIMIT", c_limit)
    monkeypatch.setattr(noise, "_GAUSS_SPAN", 0)  # no acceptance table: every |y| is checked
    sigma2 = 30
    x = noise.discrete_gaussian(sigma2, 40_000, np.random.default_rng(7))
    edges = _edges(lambda q: stats.norm.ppf(q) * math.sqrt(sigma2))
    assert g_test(x, edges, gaussian_cdf(sigma2)) > ALPHA
    monkeypatch.setattr(noise, "_WORDS", 2)
    assert np.array_equal(x, noise.discrete_gaussian(sigma2, 40_000, np.random.default_rng(7)))


#: σ² / (s, t) of the tie tests: the Gaussian's acceptance table in use (σ² = 3: t = 2, 9
#: entries; σ² = 100: t = 11, 45), the Laplace's exp(-u/t) tables of one or two parts.
TIE_GAUSSIAN = [3, 100]
TIE_LAPLACE = [(1, 1), (3, 7), (1, 100)]


@pytest.fixture
def ties(monkeypatch):
    """The compiled path comparing 2 digits at a time (not 32): one comparison in 4 with a
    tabulated exp(-x) ties and is finished in Python; returns the list of the ties' x."""
    pytest.importorskip("numba")
    monkeypatch.setenv(kernels.ENV, "1")
    monkeypatch.setattr(noise, "_PREC", 2)
    seen = []
    real = noise._tie_bernoulli

    def spy(x, prec, rng):
        seen.append(x)
        return real(x, prec, rng)

    monkeypatch.setattr(noise, "_tie_bernoulli", spy)
    return seen


@pytest.mark.parametrize("sigma2", TIE_GAUSSIAN)
def test_compiled_gaussian_ties_decided_exactly(ties, monkeypatch, sigma2):
    """Ties of the kernel's comparisons (in exp(-u/t), in exp(-1), in the acceptance table)
    are decided from the same bit stream by further exact digits: the law is unchanged, the
    values do not depend on the buffer, and a wrong decision of the ties is detected."""
    n = 30_000  # the ties' Python path runs ~10^4 decisions a second
    x = noise.discrete_gaussian(sigma2, n, np.random.default_rng(31))
    assert len(ties) > n // 20 and {f.denominator for f in ties} != {1}
    edges = _edges(lambda q: stats.norm.ppf(q) * math.sqrt(sigma2))
    assert g_test(x, edges, gaussian_cdf(sigma2)) > ALPHA
    monkeypatch.setattr(noise, "_WORDS", 2)  # a shorter draw: the same first values
    k = 16 * (noise._GAUSS_SPAN * (math.isqrt(sigma2) + 1) + 1)  # the table still in use
    assert np.array_equal(x[:k], noise.discrete_gaussian(sigma2, k, np.random.default_rng(31)))
    # the test can fail: ties all decided "below" give another law
    monkeypatch.setattr(noise, "_tie_bernoulli", lambda x, prec, rng: True)
    wrong = noise.discrete_gaussian(sigma2, n, np.random.default_rng(31))
    assert g_test(wrong, edges, gaussian_cdf(sigma2)) < ALPHA


@pytest.mark.parametrize("s, t", TIE_LAPLACE)
def test_compiled_laplace_ties_decided_exactly(ties, monkeypatch, s, t):
    n = 50_000
    x = noise.discrete_laplace(s, t, np.random.default_rng(32), size=n)
    assert len(ties) > n // 20
    edges = _edges(lambda q: stats.laplace.ppf(q, scale=t / s))
    assert g_test(x, edges, laplace_cdf(s, t)) > ALPHA
    monkeypatch.setattr(noise, "_WORDS", 2)  # a shorter draw: the same first values
    assert np.array_equal(x[:5000], noise.discrete_laplace(s, t, np.random.default_rng(32),
                                                           size=5000))  # fmt: skip
    monkeypatch.setattr(noise, "_tie_bernoulli", lambda x, prec, rng: True)
    wrong = noise.discrete_laplace(s, t, np.random.default_rng(32), size=n)
    assert g_test(wrong, edges, laplace_cdf(s, t)) < ALPHA


def test_exp_digits_agree_with_decimal():
    """The tabulated digits ⌊2^32 e^{-x}⌋ (fixed-point intervals) and :func:`_exp_floor` agree
    with Python's decimal exp at 60 significant digits (correctly rounded), which fixes the
    floor unless 2^32 e^{-x} is within 1e-50 of an integer (checked)."""
    import decimal
    from fractions import Fraction

    ctx = decimal.Context(prec=60)

    def floor_by_decimal(x: Fraction) -> int:
        v = ctx.multiply(ctx.exp(ctx.divide(-x.numerator, x.denominator)), 2**32)
        f = int(v)
        assert v - f > decimal.Decimal("1e-50") and f + 1 - v > decimal.Decimal("1e-50")
        return f

    elo, ehi, L = noise._laplace_tables(10**6)
    for j in (1, 2, 999, 1023):
        assert elo[j] == floor_by_decimal(Fraction(j, 10**6))
        assert ehi[j] == floor_by_decimal(Fraction(j << L, 10**6))
    s2, t = Fraction(10**8), 10**4 + 1
    g = noise._gaussian_table(s2, t, 4 * t + 1)
    for y in (0, 1, 4_321, 10_000, 25_000, 4 * t):
        assert g[y] == floor_by_decimal(noise._gaussian_gamma(s2, t, y))
    for x in (Fraction(1), Fraction(7, 3), Fraction(1, 10**12)):
        assert noise._exp_floor(x, 32) == floor_by_decimal(x)
        assert noise._exp_floor(x, 100) >> 68 == floor_by_decimal(x)


@pytest.mark.parametrize("span", [4, 0])
def test_compiled_gaussian_with_a_huge_denominator(monkeypatch, span):
    """σ² = (s/10^6)² · 100 (ResidualPlanner's rounding of σ, §5 Eq. 4): 2 a b t² is far
    beyond int64, so the kernel draws the Laplace candidates and hands every one the
    acceptance table does not cover (all of them without the table) to the exact Python
    decision; only bulk uniform words are read, and the law is N_Z(0, σ²)."""
    pytest.importorskip("numba")
    from fractions import Fraction

    monkeypatch.setenv(kernels.ENV, "1")
    monkeypatch.setattr(noise, "_GAUSS_SPAN", span)
    sigma2 = Fraction(3_141_593, 10**6) ** 2 * 100
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    assert 2 * t * t * sigma2.numerator * sigma2.denominator > 2**62
    words = Words(41)
    x = noise.discrete_gaussian(sigma2, 20_000, words)
    assert set(words.calls) == {(0, 2**64, np.uint64)}
    edges = _edges(lambda q: stats.norm.ppf(q) * math.sqrt(sigma2))
    assert g_test(x, edges, gaussian_cdf(float(sigma2))) > ALPHA
    wrong = float(sigma2) * 1.1  # the test has the power to see a 10% variance error
    assert g_test(x, edges, gaussian_cdf(wrong)) < ALPHA


def test_compiled_path_reads_only_uniform_words(monkeypatch):
    """The compiled path asks its generator for bulk uniform 64-bit words and nothing else
    (a cryptographic generator can stand in for numpy's)."""
    pytest.importorskip("numba")
    monkeypatch.setenv(kernels.ENV, "1")
    gw, lw = Words(8), Words(8)
    x = noise.discrete_gaussian(7, 5000, gw)
    y = noise.discrete_laplace(2, 9, lw, size=5000)
    assert x.size == y.size == 5000
    calls = gw.calls + lw.calls
    assert calls and set(calls) == {(0, 2**64, np.uint64)}


def test_the_default_path_is_compiled_when_numba_imports(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.delenv(kernels.ENV, raising=False)
    assert noise._kernels() is not None
    monkeypatch.setenv(kernels.ENV, "0")
    assert noise._kernels() is None


@pytest.mark.parametrize(
    "kind, param, n_ours",
    [("gaussian", 4, 200_000), ("gaussian", 100, 200_000), ("laplace", (1, 1), 200_000),
     ("laplace", (3, 7), 200_000), ("laplace", (1, 100), 200_000)],
)  # fmt: skip
def test_same_law_as_opendp(path, kind, param, n_ours):
    """Two-sample test (chi-square homogeneity on shared bins) between our samples and
    OpenDP's discrete Gaussian / Laplace measurement on a zero vector; false-alarm rate
    ALPHA per case."""
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    m = 40_000  # OpenDP draws ~10^5 samples/s
    if kind == "gaussian":
        space = dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int)
        meas = dp.m.make_gaussian(*space, scale=math.sqrt(param))
        ours = noise.discrete_gaussian(param, n_ours, np.random.default_rng(21))
        edges = _edges(lambda q: stats.norm.ppf(q) * math.sqrt(param))
    else:
        s, t = param
        space = dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)
        meas = dp.m.make_laplace(*space, scale=t / s)
        ours = noise.discrete_laplace(s, t, np.random.default_rng(22), size=n_ours)
        edges = _edges(lambda q: stats.laplace.ppf(q, scale=t / s))
    theirs = np.asarray(meas([0] * m), dtype=np.int64)
    table = np.array([np.bincount(np.searchsorted(edges, v, side="right"),
                                  minlength=edges.size + 1) for v in (ours, theirs)])  # fmt: skip
    table = table[:, table.sum(axis=0) > 0]
    # pool the columns that expect fewer than 5 of OpenDP's samples into their neighbour
    keep, acc = [], np.zeros(2, dtype=np.int64)
    for col in table.T:
        acc = acc + col
        if acc.sum() * m / (m + n_ours) >= 5:
            keep.append(acc)
            acc = np.zeros(2, dtype=np.int64)
    if acc.any():
        keep[-1] = keep[-1] + acc
    table = np.array(keep).T
    assert stats.chi2_contingency(table)[1] > ALPHA
