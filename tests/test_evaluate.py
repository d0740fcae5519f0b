"""The shared evaluator against paper fixtures and independent dense computations."""

import math

import numpy as np
import pytest
from paper_fixtures import H4, Y4

from mmtoolkit import datasets, evaluate, selectors, workloads
from mmtoolkit.domain import Domain
from mmtoolkit.evaluate import UnsupportedWorkloadError
from mmtoolkit.evaluate.bound import _joint_eigenvalues
from mmtoolkit.linalg import (
    AllRange,
    Dense,
    Haar,
    Identity,
    Kronecker,
    Marginals,
    Prefix,
    TooLargeError,
    Total,
    VStack,
    Weighted,
    kron_terms,
)
from mmtoolkit.privacy import ZCDP, ApproxDP, PureDP

# 2/ε² = 1: errors are in the "units" of Li et al. 2010 (Δ² · profile term).
UNIT_LAPLACE = PureDP(math.sqrt(2.0))

I4 = np.eye(4)


def hierarchical(n: int) -> np.ndarray:
    """Binary hierarchical strategy H_n (Li et al. 2010 §6), built explicitly for the tests."""
    if n == 1:
        return np.ones((1, 1))
    h = hierarchical(n // 2)
    z = np.zeros_like(h)
    return np.vstack([np.ones((1, n)), np.block([[h, z], [z, h]])])


def dense_error(Wd, Ad, p):
    """Independent computation: sens_p(A)² · tr(WᵀW (AᵀA)⁺) with numpy only."""
    sens = np.abs(Ad).sum(0).max() if p == 1 else np.sqrt((Ad**2).sum(0).max())
    return sens**2 * np.trace(Wd.T @ Wd @ np.linalg.pinv(Ad.T @ Ad))


# ------------------------------------------------------------- Li et al. 2010, §8 fixtures
class TestMatrixMechanismFixtures:
    QUERIES = np.array(
        [
            [1, 0, 0, 0],
            [1, 1, 0, 0],
            [1, 1, 1, 0],
            [1, 1, 1, 1],
            [0, 1, 1, 0],
            [1, 0, 1, 0],
            [1, -1, 0, 0],
        ],
        dtype=float,
    )

    def test_sensitivities(self):
        assert Dense(I4).sensitivity(1) == 1
        assert Dense(H4).sensitivity(1) == 3 and Dense(Y4).sensitivity(1) == 3
        assert Dense(H4).sensitivity(2) == pytest.approx(math.sqrt(3))
        assert Haar(4).sensitivity(1) == 3 and Haar(4).sensitivity(2) == pytest.approx(math.sqrt(3))

    def test_error_profiles(self):
        MH = np.array([[13, -8, -1, -1], [-8, 13, -1, -1], [-1, -1, 13, -8], [-1, -1, -8, 13]]) / 21
        MY = np.array([[3, -1, 0, 0], [-1, 3, 0, 0], [0, 0, 3, -1], [0, 0, -1, 3]]) / 8
        np.testing.assert_allclose(Dense(H4).gram().pinv().dense(), MH, atol=1e-12)
        np.testing.assert_allclose(Haar(4).gram().pinv().dense(), MY, atol=1e-12)

    @pytest.mark.parametrize(
        "A, expected",
        [
            (Identity(4), [1, 2, 3, 4, 2, 2, 2]),
            (Dense(H4), [39 / 7, 30 / 7, 57 / 7, 36 / 7, 72 / 7, 72 / 7, 18]),
            (Haar(4), [27 / 8, 4.5, 7.875, 9, 6.75, 6.75, 9]),
        ],
    )
    def test_per_query_errors(self, A, expected):
        W = Dense(self.QUERIES)
        got = evaluate.per_query_variance(W, A, UNIT_LAPLACE)
        np.testing.assert_allclose(got, expected, rtol=1e-12)

    @pytest.mark.parametrize("A, total", [(Identity(4), 20), (Dense(H4), 438 / 7), (Haar(4), 54)])
    def test_all_range_totals_n4(self, A, total):
        assert evaluate.expected_error(AllRange(4), A, UNIT_LAPLACE) == pytest.approx(total, 1e-12)

    @pytest.mark.parametrize(
        "n, ident, hier, haar",
        [
            (8, 120, 469.333, 374),
            (16, 816, 3288.049, 2570.312),
            (64, 45760, 132336.076, 106336.891),
            (512, 22500864, 23665081.443, 20089636.133),
        ],
    )
    def test_all_range_totals_table(self, n, ident, hier, haar):
        W = AllRange(n)
        assert evaluate.expected_error(W, Identity(n), UNIT_LAPLACE) == pytest.approx(ident, 1e-12)
        assert evaluate.expected_error(W, Dense(hierarchical(n)), UNIT_LAPLACE) == pytest.approx(
            hier, abs=1e-3
        )
        assert evaluate.expected_error(W, Haar(n), UNIT_LAPLACE) == pytest.approx(haar, abs=1e-3)

    def test_laplace_error_scales_with_epsilon(self):
        W = AllRange(4)
        e1 = evaluate.expected_error(W, Dense(H4), PureDP(1.0))
        assert e1 == pytest.approx(2 * 438 / 7, 1e-12)
        assert evaluate.expected_error(W, Dense(H4), PureDP(0.5)) == pytest.approx(4 * e1, 1e-12)


FIG1 = workloads.eigen_design_figure1().dense()  # Li & Miklau 2012, Fig. 1(b)


class TestEigenDesignExample4:
    privacy = ApproxDP(0.5, 1e-4, calibration="eigen_design")

    def units(self, A):
        return evaluate.expected_error(Dense(FIG1), A, self.privacy) / self.privacy.noise_variance()

    def test_units(self):
        W = Dense(FIG1)
        assert W.sensitivity(2) == pytest.approx(math.sqrt(5))
        assert self.units(Identity(8)) == pytest.approx(36, 1e-12)
        assert self.units(Haar(8)) == pytest.approx(21, 1e-12)
        direct = selectors.get("laplace").select(W, self.privacy)
        assert self.units(direct) == pytest.approx(40, 1e-12)
        assert evaluate.svd_bound(W) == pytest.approx(14.9330, abs=1e-4)

    def test_printed_ratios(self):
        # paper: W directly 47.78, identity 45.36, wavelet 34.62, lower bound 29.18
        W = Dense(FIG1)
        ident = evaluate.rmse(W, Identity(8), self.privacy)
        wave = evaluate.rmse(W, Haar(8), self.privacy)
        direct = evaluate.rmse(W, selectors.get("laplace").select(W, self.privacy), self.privacy)
        bound = evaluate.svd_bound_rmse(W, self.privacy)
        assert ident / wave == pytest.approx(45.36 / 34.62, rel=3e-3)
        assert ident / bound == pytest.approx(45.36 / 29.18, rel=3e-3)
        assert direct / ident == pytest.approx(47.78 / 45.36, rel=3e-3)
        assert evaluate.error_ratio(W, Identity(8), Haar(8), self.privacy) == pytest.approx(
            ident / wave, 1e-12
        )


# ------------------------------------------------------- dense vs implicit, random inputs
def random_kron_union(rng, sizes, terms):
    blocks = []
    for _ in range(terms):
        factors = [Dense(rng.normal(size=(rng.integers(1, 4), n))) for n in sizes]
        blocks.append(Weighted(rng.uniform(0.5, 2.0), Kronecker(factors)))
    return VStack(blocks)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("p, privacy", [(1, UNIT_LAPLACE), (2, ZCDP(0.5))])
def test_kronecker_strategy_matches_dense(seed, p, privacy):
    rng = np.random.default_rng(seed)
    sizes = [2, 3, 2]
    W = random_kron_union(rng, sizes, terms=3)
    A = Weighted(0.7, Kronecker([Dense(rng.normal(size=(n + 1, n))) for n in sizes]))
    got = evaluate.expected_error(W, A, privacy)
    want = dense_error(W.dense(), A.dense(), p) * privacy.noise_variance()
    assert got == pytest.approx(want, rel=1e-8)
    np.testing.assert_allclose(
        evaluate.per_query_variance(W, A, privacy),
        privacy.noise_variance()
        * (A.sensitivity(p) ** 2)
        * np.einsum("ij,jk,ik->i", W.dense(), np.linalg.pinv(A.dense().T @ A.dense()), W.dense()),
        rtol=1e-8,
    )


@pytest.mark.parametrize("seed", range(4))
def test_coarser_kronecker_strategy_matches_dense(seed):
    rng = np.random.default_rng(seed)
    W = random_kron_union(rng, [2, 3, 2], terms=2)
    A = Kronecker([Dense(rng.normal(size=(7, 6))), Dense(rng.normal(size=(3, 2)))])
    got = evaluate.expected_error(W, A, ZCDP(1.0))
    want = dense_error(W.dense(), A.dense(), 2) * ZCDP(1.0).noise_variance()
    assert got == pytest.approx(want, rel=1e-8)


@pytest.mark.parametrize("seed", range(6))
def test_marginals_strategy_matches_dense(seed):
    rng = np.random.default_rng(seed)
    sizes = [2, 3, 2]
    theta = {a: rng.uniform(0.1, 1.0) for a in range(8) if rng.random() < 0.7 or a == 7}
    A = Marginals(sizes, theta)
    for W in (
        random_kron_union(rng, sizes, terms=2),
        workloads.marginals(Domain.from_sizes(sizes), 2, lower=True),
    ):
        for p, privacy in ((1, UNIT_LAPLACE), (2, ZCDP(0.25))):
            got = evaluate.expected_error(W, A, privacy)
            want = dense_error(W.dense(), A.dense(), p) * privacy.noise_variance()
            assert got == pytest.approx(want, rel=1e-8)
    W = workloads.marginals(Domain.from_sizes(sizes), 2, lower=True)
    Wd, P = W.dense(), np.linalg.pinv(A.dense().T @ A.dense())
    want = np.einsum("ij,jk,ik->i", Wd, P, Wd) * A.sensitivity(2) ** 2 * 2.0
    np.testing.assert_allclose(evaluate.per_query_variance(W, A, ZCDP(0.25)), want, rtol=1e-8)
    assert evaluate.max_variance(W, A, ZCDP(0.25)) == pytest.approx(want.max(), rel=1e-8)


def test_rank_deficient_marginals_strategy_supports_its_marginals():
    sizes = [3, 2, 2]
    A = Marginals(sizes, {0b011: 1.0, 0b110: 0.5})
    W = workloads.marginals_list(Domain.from_sizes(sizes), [(0, 1), (1,), (1, 2), ()])
    want = dense_error(W.dense(), A.dense(), 2)
    assert evaluate.expected_error(W, A, ZCDP(0.5)) == pytest.approx(want, rel=1e-8)
    assert evaluate.supports(W, A)
    full = workloads.marginals(Domain.from_sizes(sizes), 3)
    assert not evaluate.supports(full, A)
    with pytest.raises(UnsupportedWorkloadError, match="does not support"):
        evaluate.expected_error(full, A, ZCDP(0.5))


def test_unsupported_dense_strategy_raises():
    W = AllRange(4)
    A = Dense(Y4[:3])  # drops a Haar row: rank 3
    assert not evaluate.supports(W, A)
    with pytest.raises(UnsupportedWorkloadError, match="outside"):
        evaluate.expected_error(W, A, UNIT_LAPLACE)
    with pytest.raises(UnsupportedWorkloadError):
        W2 = Kronecker([Prefix(3), Identity(2)])
        evaluate.rmse(W2, Kronecker([Dense(np.eye(3)[:2]), Identity(2)]), ZCDP(1))


def test_rank_deficient_workload_with_supporting_strategy():
    W = Dense(FIG1)  # rank 4 of 8
    A = Dense(FIG1[[0, 1, 3, 5]])  # q1, q2, q4, q6 span rowspace(W)
    want = dense_error(FIG1, FIG1[[0, 1, 3, 5]], 2)
    assert evaluate.expected_error(W, A, ZCDP(0.5)) == pytest.approx(want, rel=1e-8)


def test_identity_on_huge_marginals_is_implicit():
    dom = datasets.domain("synth", n=10, d=100)
    W = workloads.marginals(dom, 3, lower=True)
    got = evaluate.expected_error(W, Identity(W.shape[1]), ZCDP(0.5))
    keys = 1 + 100 + math.comb(100, 2) + math.comb(100, 3)
    assert got == pytest.approx(keys * 1e100, rel=1e-12)


def test_laplace_baseline_formula():
    W = workloads.union([Prefix(8), AllRange(8)], weights=[1.0, 0.5])
    s = selectors.get("laplace").select(W, UNIT_LAPLACE)
    Wd = W.dense()
    want = Wd.shape[0] * np.abs(Wd).sum(0).max() ** 2
    assert evaluate.expected_error(W, s, UNIT_LAPLACE) == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="different workload"):
        evaluate.expected_error(Prefix(8), s, UNIT_LAPLACE)


def test_domain_mismatch_raises():
    with pytest.raises(ValueError, match="domain size"):
        evaluate.expected_error(Prefix(4), Identity(5), UNIT_LAPLACE)


def test_privacy_type_checked():
    with pytest.raises(TypeError, match="privacy"):
        evaluate.expected_error(Prefix(4), Identity(4), 1.0)


# ---------------------------------------------------------------------------- SVD bound
def dense_svdb(Wd):
    lam = np.linalg.eigvalsh(Wd.T @ Wd)
    lam[lam < 1e-10 * lam.max()] = 0.0  # rounding noise of the zero eigenvalues
    return np.sum(np.sqrt(lam)) ** 2 / Wd.shape[1]


@pytest.mark.parametrize(
    "W",
    [
        Prefix(16),
        Kronecker([Prefix(4), AllRange(3)]),
        Weighted(2.0, Kronecker([Prefix(4), Identity(3), AllRange(2)])),
        VStack([Kronecker([Prefix(5), Identity(4)]), Kronecker([Identity(5), Prefix(4)])]),
        VStack([Kronecker([AllRange(4), Total(3)]), Kronecker([Total(4), AllRange(3)])]),
        Dense(FIG1),
    ],
    ids=["prefix", "kron2", "kron3-weighted", "PxI+IxP", "RxT+TxR", "fig1"],
)
def test_svd_bound_matches_dense(W):
    assert evaluate.svd_bound(W) == pytest.approx(dense_svdb(W.dense()), rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_svd_bound_marginals_matches_dense(seed):
    rng = np.random.default_rng(seed)
    sizes = list(rng.integers(1, 4, size=4))
    weights = {a: rng.uniform(0.2, 2.0) for a in range(16) if rng.random() < 0.4}
    weights.setdefault(3, 1.0)
    W = Marginals(sizes, weights)
    assert evaluate.svd_bound(W) == pytest.approx(dense_svdb(W.dense()), rel=1e-9)
    U = VStack([Kronecker([Dense(np.vstack([np.ones(n), np.eye(n)])) for n in sizes]), W])
    assert evaluate.svd_bound(U) == pytest.approx(dense_svdb(U.dense()), rel=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_svd_bound_is_a_lower_bound(seed):
    rng = np.random.default_rng(seed)
    W = Dense(rng.normal(size=(10, 6)))
    bound = evaluate.svd_bound(W)
    for _ in range(5):
        A = rng.normal(size=(8, 6))
        assert dense_error(W.dense(), A, 2) >= bound * (1 - 1e-12)


@pytest.mark.parametrize("W", [AllRange(60), VStack([Prefix(60), AllRange(60)])],
                         ids=["single-factor", "dense-fallback"])
def test_svd_bound_above_the_dense_guard(W, monkeypatch):
    """Above the shared dense guard (as a 1-D workload on 8192 cells is at the default limit)
    the bound still reads the Gram, a block of columns at a time, up to MAX_EIGEN_N."""
    from mmtoolkit.linalg import base as linalg_base
    from mmtoolkit.linalg import spectral

    expected = dense_svdb(W.dense())
    monkeypatch.setattr(linalg_base, "MAX_DENSE_ENTRIES", 60 * 60 - 1)
    assert evaluate.svd_bound(W) == pytest.approx(expected, rel=1e-12)
    monkeypatch.setattr(spectral, "MAX_EIGEN_N", 59)
    monkeypatch.setattr(evaluate.bound, "MAX_EIGEN_N", 59)
    with pytest.raises(TooLargeError, match="MAX_EIGEN_N"):
        evaluate.svd_bound(W)


def test_svd_bound_refuses_unstructured_huge_workload():
    W = VStack([Kronecker([AllRange(1024), Total(1024)]), Kronecker([Total(1024), AllRange(1024)])])
    with pytest.raises(TooLargeError, match="svd_bound"):
        evaluate.svd_bound(W)


# ResidualPlanner paper Table 4, SVDB column (RMSE at ρ = 1/2, noise variance 1)
TABLE4 = {
    "adult": [3.047, 6.359, 10.515, 10.665],
    "cps": [1.744, 2.035, 2.048, 2.276],
    "loans": [2.875, 5.634, 8.702, 8.876],
}


@pytest.mark.parametrize("name", sorted(TABLE4))
def test_residual_planner_table4_svd_bound(name):
    dom = datasets.domain(name)
    specs = [(1, False), (2, False), (3, False), (3, True)]
    for (k, lower), paper in zip(specs, TABLE4[name]):
        W = workloads.marginals(dom, k, lower=lower)
        assert evaluate.svd_bound_rmse(W, ZCDP(0.5)) == pytest.approx(paper, abs=5e-4)


def test_svd_bound_synth_100_attributes_is_implicit():
    W = workloads.marginals(datasets.domain("synth", n=10, d=100), 3, lower=True)
    value = evaluate.svd_bound_rmse(W, ZCDP(0.5))
    assert math.isfinite(value) and value > 0
    # one attribute set {i}: the k = 1 bound has the closed form of a product over attributes
    W1 = workloads.marginals(datasets.domain("synth", n=10, d=3), 1)
    assert evaluate.svd_bound(W1) == pytest.approx(dense_svdb(W1.dense()), rel=1e-9)


# ------------------------------------------- regressions: per-query support and edge cases
def _unsupported_cases():
    n = 64
    one_bad_query = VStack(
        [
            Kronecker([AllRange(n), Total(2)]),
            Kronecker([Dense(np.eye(n)[:1]), Dense([[1.0, -1.0]])]),
        ]
    )
    no_attr1 = Marginals([n, 2], {0b01: 1.0})  # never measures attribute 1's contrast
    weighted = workloads.marginals_list(Domain.from_sizes([3, 3]), [[0], [1]], weights=[1e4, 1e-1])
    scaled_rows = Kronecker([Dense(np.array([[1e4, 1e4, 0.0], [1e-1, 0.0, 0.0]])), Identity(2)])
    full_rank_on_sum = Kronecker([Dense(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])), Identity(2)])
    return [
        ("marginals route", one_bad_query, no_attr1),
        ("dense route", one_bad_query, Dense(no_attr1.dense())),
        ("marginals, weighted terms", weighted, Marginals([3, 3], {0b01: 1.0})),
        ("kronecker, rows of different scale", scaled_rows, full_rank_on_sum),
    ]


@pytest.mark.parametrize(
    "name, W, A", _unsupported_cases(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_one_unsupported_query_among_many_raises(name, W, A):
    # each case has exactly one query outside rowspace(A), tiny next to the rest of W
    assert not evaluate.supports(W, A)
    for fn in (evaluate.expected_error, evaluate.per_query_variance, evaluate.max_variance):
        with pytest.raises(UnsupportedWorkloadError):
            fn(W, A, ZCDP(0.5))


def test_zero_weight_term_is_ignored_by_every_route():
    W = VStack(
        [Kronecker([Identity(3), Total(2)]), Weighted(0.0, Kronecker([Identity(3), Identity(2)]))]
    )
    A = Kronecker([Identity(3), Total(2)])
    want = dense_error(W.dense(), A.dense(), 2)
    assert evaluate.expected_error(W, A, ZCDP(0.5)) == pytest.approx(want, rel=1e-12)
    assert evaluate.expected_error(W, Dense(A.dense()), ZCDP(0.5)) == pytest.approx(want, rel=1e-12)
    zero_factor = Kronecker([Identity(3), Weighted(0.0, Identity(2))])
    assert evaluate.supports(VStack([Kronecker([Identity(3), Total(2)]), zero_factor]), A)


def test_ill_conditioned_invertible_strategy_is_supported():
    assert evaluate.trace_term(Identity(2), Dense(np.diag([1.0, 1e-6]))) == pytest.approx(1 + 1e12)


def test_weighted_kronecker_sensitivity_stays_implicit():
    K = Kronecker([Prefix(10**4), Prefix(10**4)])
    assert Weighted(2.0, K).sensitivity(1) == pytest.approx(2e8)
    assert Weighted(-0.5, K).sensitivity(2) == pytest.approx(0.5 * 1e4)


def test_trailing_size_one_factor_is_grouped():
    W = Kronecker([Identity(3), Dense([[3.0]])])
    A = Kronecker([Dense(np.array([[1.0, 1, 0], [0, 1, 1], [1, 0, 1]]))])
    want = dense_error(W.dense(), A.dense(), 2)
    assert evaluate.expected_error(W, A, ZCDP(0.5)) == pytest.approx(want, rel=1e-12)


def test_laplace_baseline_per_query_uses_the_privacy_norm():
    W = workloads.prefix(6)
    s = selectors.get("laplace").select(W, ZCDP(0.5))
    np.testing.assert_allclose(evaluate.per_query_variance(W, s, ZCDP(0.5)), np.full(6, 6.0))
    assert evaluate.max_variance(W, s, UNIT_LAPLACE) == pytest.approx(36.0)


def test_identity_on_weighted_workload():
    W = VStack([Weighted(2.0, Prefix(5)), Weighted(-3.0, Kronecker([Dense(np.ones((1, 5)))]))])
    assert evaluate.expected_error(W, Identity(5), ZCDP(0.5)) == pytest.approx(
        np.sum(W.dense() ** 2), rel=1e-12
    )


def test_rank_deficient_marginals_strategy_with_general_workload_terms():
    sizes = [3, 2, 2]
    A = Marginals(sizes, {0b001: 1.0, 0b110: 0.7, 0: 0.2})  # no full table
    W = VStack(
        [
            Kronecker([Prefix(3), Total(2), Total(2)]),
            Weighted(1.5, Kronecker([Total(3), Dense(np.array([[1.0, 2.0]])), Identity(2)])),
            workloads.marginals_list(Domain.from_sizes(sizes), [(0,), (1, 2)]),
        ]
    )
    Wd, Ad = W.dense(), A.dense()
    want = dense_error(Wd, Ad, 2) * 2.0
    assert evaluate.expected_error(W, A, ZCDP(0.25)) == pytest.approx(want, rel=1e-9)
    P = np.linalg.pinv(Ad.T @ Ad)
    profile = np.einsum("ij,jk,ik->i", Wd, P, Wd) * A.sensitivity(2) ** 2 * 2.0
    np.testing.assert_allclose(evaluate.per_query_variance(W, A, ZCDP(0.25)), profile, rtol=1e-9)
    assert evaluate.max_variance(W, A, ZCDP(0.25)) == pytest.approx(profile.max(), rel=1e-9)
    bad = Kronecker([Prefix(3), Dense(np.array([[1.0, -1.0]])), Identity(2)])
    assert not evaluate.supports(bad, A)


def test_max_variance_of_a_huge_kronecker_workload_is_implicit():
    W = Kronecker([AllRange(2048), AllRange(2048)])  # 4.4e12 queries
    assert evaluate.max_variance(W, Identity(2048**2), ZCDP(0.5)) == pytest.approx(2048.0**2)


def test_svd_bound_joint_eigenbasis_route():
    G = Prefix(4).gram().dense()
    W = VStack([Kronecker([Prefix(4), Prefix(3)]), Kronecker([Dense(G), Identity(3)])])
    assert evaluate.svd_bound(W) == pytest.approx(dense_svdb(W.dense()), rel=1e-9)
    # commuting Grams whose generic combination is degenerate on distinct eigenspaces
    rng = np.random.default_rng(12345)
    r1, r2 = rng.uniform(1, 2), rng.uniform(1, 2)
    th = 0.4
    b = (r2 - r1) / (r1 * np.sin(th) ** 2 / np.cos(th) ** 2 + r2)
    Q = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
    W2 = VStack([Dense(np.array([[1.0, 0.0]]) @ Q.T), Dense(np.diag([np.sqrt(b), 1.0]) @ Q.T)])
    assert evaluate.svd_bound(W2) == pytest.approx(dense_svdb(W2.dense()), rel=1e-9)


def test_svd_bound_synth_100_closed_form():
    d = 100
    W = workloads.marginals(datasets.domain("synth", n=10, d=d), 3, lower=True)
    total = sum(
        math.comb(d, j)
        * 9**j
        * math.sqrt(sum(math.comb(d - j, t - j) * 10.0**-t for t in range(j, 4)))
        for j in range(4)
    )
    assert evaluate.svd_bound(W) == pytest.approx(total**2, rel=1e-10)


def test_arrays_are_accepted_as_matrices():
    W = np.array([[1.0, 1.0], [1.0, -1.0]])
    assert evaluate.svd_bound(W) == pytest.approx(dense_svdb(W), rel=1e-12)
    assert evaluate.supports(W, np.eye(2))
    assert evaluate.expected_error(W, np.eye(2), UNIT_LAPLACE) == pytest.approx(4.0)


def test_support_tolerance_is_tight():
    # the second query leaves rowspace(A) by a relative 2.5e-7: more than SUPPORT_RTOL = 1e-8
    A = Dense(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    W = Dense(np.array([[1.0, 1.0, 1.0], [1.0, 1.0 + 1e-3, 0.0]]))
    assert evaluate.SUPPORT_RTOL == 1e-8
    assert not evaluate.supports(W, A)
    assert evaluate.supports(Dense(np.array([[1.0, 1.0 + 1e-9, 0.0]])), A)


def test_joint_eigenbasis_route_is_taken():
    G = Prefix(4).gram().dense()
    W = VStack([Kronecker([Prefix(4), Prefix(3)]), Kronecker([Dense(G), Identity(3)])])
    terms = kron_terms(W)
    lam = _joint_eigenvalues(terms, [4, 3])
    assert lam is not None
    np.testing.assert_allclose(
        np.sort(lam), np.sort(np.linalg.eigvalsh(W.dense().T @ W.dense())), atol=1e-9
    )


def test_zero_queries_are_supported_by_a_rank_deficient_marginals_strategy():
    A = Marginals([3, 2], {0b01: 1.0})
    W = VStack([Kronecker([Identity(3), Total(2)]), Kronecker([Identity(3), Dense([[0.0, 0.0]])])])
    assert evaluate.supports(W, A)
    want = dense_error(W.dense(), A.dense(), 2)
    assert evaluate.expected_error(W, A, ZCDP(0.5)) == pytest.approx(want, rel=1e-12)


def test_any_strategy_with_a_marginals_gram_takes_the_marginals_route():
    from mmtoolkit.linalg import MarginalsGram

    class GramOnly(Dense):
        """A dense strategy that announces its Gram in the marginals algebra."""

        def __init__(self, marg):
            super().__init__(marg.dense())
            self._gram = marg.gram()

        def gram(self):
            return self._gram

    sizes = [3, 2]
    A = GramOnly(Marginals(sizes, {0b01: 1.0, 0b10: 0.5}))
    assert isinstance(A.gram(), MarginalsGram)
    W = workloads.marginals(Domain.from_sizes(sizes), 1)
    from mmtoolkit.linalg.marginals import MarginalsRoute

    assert isinstance(A.error_route(W), MarginalsRoute)
    want = dense_error(W.dense(), A.dense(), 2)
    assert evaluate.expected_error(W, A, ZCDP(0.5)) == pytest.approx(want, rel=1e-10)


# --------------------------------------------------------------------------- finiteness
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_entries_are_refused_when_a_workload_is_built(bad):
    """A NaN / infinite entry is refused where the matrix is built (it made rmse NaN, the
    SVD bound 0.0 and HDMM select Identity); weights and stacks of them too."""
    rows = [[1.0, bad], [0.0, 1.0]]
    with pytest.raises(ValueError, match=r"Dense: entry \[0, 1\] is .*must be finite"):
        Dense(rows)
    with pytest.raises(ValueError, match="must be finite"):
        evaluate.rmse(np.array(rows), Identity(2), ZCDP(0.5))  # arrays become Dense
    with pytest.raises(ValueError, match="must be finite"):
        VStack([Identity(2), np.array(rows)])
    with pytest.raises(ValueError, match="weight must be finite"):
        Weighted(bad, Identity(2))
    with pytest.raises(ValueError, match="weight .*must be a (finite )?number > 0"):
        workloads.union([Identity(2), Total(2)], weights=[1.0, bad])


def test_an_error_that_overflows_is_refused_not_returned_as_inf():
    """ε = 1.2e-154 has a finite unit variance 2/ε² ≈ 1.39e308, so the privacy object is
    valid, but any error term above 1.3 overflows: the evaluator raises a ValueError naming
    the quantity, never returns inf (nor the NaN of inf · 0)."""
    tiny = PureDP(1.2e-154)
    W = workloads.all_range(8)
    for f in (evaluate.expected_error, evaluate.rmse, evaluate.max_variance):
        with pytest.raises(ValueError, match="is inf, not a finite number, under pure"):
            f(W, Identity(8), tiny)
    with pytest.raises(ValueError, match="a per-query variance is inf"):
        evaluate.per_query_variance(W, Identity(8), tiny)
    with pytest.raises(ValueError, match="the SVD lower bound is inf"):
        evaluate.svd_bound_rmse(W, tiny)
    # one unit-variance query is finite: the check refuses overflow only
    assert evaluate.expected_error(Total(1), Identity(1), tiny) == tiny.noise_variance()


def test_a_workload_without_queries_is_refused():
    """A workload of 0 rows has no error to evaluate: every function says so (the dense route
    failed inside numpy, the Kronecker route returned 0 and rmse divided by zero)."""
    empty = np.zeros((0, 4))
    for A in (I4, Identity(4)):
        for f in (evaluate.expected_error, evaluate.rmse, evaluate.max_variance,
                  evaluate.per_query_variance):  # fmt: skip
            with pytest.raises(ValueError, match=r"no queries \(0 rows, 4 cells\)"):
                f(empty, A, ZCDP(0.5))
        for f in (evaluate.supports, evaluate.trace_term):
            with pytest.raises(ValueError, match="no queries"):
                f(empty, A)
    with pytest.raises(ValueError, match="no queries"):
        evaluate.svd_bound_rmse(empty, ZCDP(0.5))


def test_error_ratio_against_a_zero_error_is_refused():
    """Every query zero: Err(W, B) = 0 and the ratio 0/0 is a ValueError, not a
    ZeroDivisionError."""
    W = np.zeros((2, 4))
    assert evaluate.expected_error(W, Identity(4), ZCDP(0.5)) == 0.0
    with pytest.raises(ValueError, match="Err\\(W, B\\) is 0 .* the ratio is undefined"):
        evaluate.error_ratio(W, I4, Identity(4), ZCDP(0.5))
