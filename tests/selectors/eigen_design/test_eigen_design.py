"""Eigen-Design (Li & Miklau, PVLDB 2012): Program 1, Program 2, §3.5, §4.2 reductions."""

import numpy as np
import pytest

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.linalg import AllRange, Dense, Haar, Identity, OrthoBasis, Permuted, Prefix
from mmtoolkit.privacy import ZCDP, ApproxDP, PureDP
from mmtoolkit.selectors.eigen_design.design import (
    design_costs,
    solve_weighting,
    weighted_strategy,
)
from mmtoolkit.selectors.eigen_design.gram import eigen_queries, workload_gram

FIG1 = workloads.eigen_design_figure1().dense()  # Li & Miklau 2012, Fig. 1(b)
EPS_DELTA = ApproxDP(0.5, 1e-4, calibration="eigen_design")


def units(W, A, privacy=EPS_DELTA):
    """sens(A)² · tr(WᵀW (AᵀA)⁺) through the shared evaluator."""
    return evaluate.expected_error(W, A, privacy) / privacy.noise_variance()


def dense_units(W, A, p=2):
    """Independent dense computation of sens_p(A)² · tr(WᵀW (AᵀA)⁺)."""
    sens = np.abs(A).sum(axis=0).max() if p == 1 else np.sqrt((A * A).sum(axis=0).max())
    return sens**2 * np.trace(W.T @ W @ np.linalg.pinv(A.T @ A))


def random_workload(seed, m=12, n=8, rank=None):
    rng = np.random.default_rng(seed)
    W = rng.integers(-1, 3, size=(m, n)).astype(float)
    if rank is not None:
        W = W[:, :rank] @ rng.normal(size=(rank, n))
    return W


# --------------------------------------------------------------------- Figure 1 / Example 4
class TestFigure1:
    def test_program1_internals(self):
        # digest §10.3: σ = (17.0623, 13.1231, 4.8769, 0.9377), u = (2.7716, 2.3119, 1.8051,
        # 0.7360), Program 1 value 15.8083 (A' alone), completed strategy 15.4736
        sigma, Q = eigen_queries(workload_gram(Dense(FIG1)))
        np.testing.assert_allclose(sigma, [17.0623, 13.1231, 4.8769, 0.9377], atol=1e-4)
        w = solve_weighting(sigma, Q * Q, tol=1e-9)
        np.testing.assert_allclose(w.x, [2.7716, 2.3119, 1.8051, 0.7360], atol=2e-4)
        assert w.value == pytest.approx(15.8083, abs=1e-4)
        A, _ = weighted_strategy(Q, w.x, 1, complete=False)
        assert dense_units(FIG1, A.dense()) == pytest.approx(w.value, rel=1e-9)

    def test_completed_strategy_and_ordering(self):
        W = Dense(FIG1)
        eig = selectors.get("eigen_design", tol=1e-9).select(W, EPS_DELTA)
        sdp = selectors.get("mm_sdp").select(W, EPS_DELTA)
        e_eig, e_sdp = units(W, eig), units(W, sdp)
        e_wav, e_id = units(W, Haar(8)), units(W, Identity(8))
        bound = evaluate.svd_bound(W)
        assert e_eig == pytest.approx(15.4736, abs=2e-4)
        assert e_eig == pytest.approx(dense_units(FIG1, eig.matrix.dense()), rel=1e-9)
        assert bound <= e_sdp <= e_eig <= e_wav <= e_id
        assert e_sdp == pytest.approx(15.0180, abs=2e-4)

    def test_printed_ratios(self):
        # 45.36 : 34.62 : 29.79 : 29.18 (identity, wavelet, Eigen-Design, lower bound), RMSE
        W = Dense(FIG1)
        eig = selectors.get("eigen_design").select(W, EPS_DELTA)
        ours = np.sqrt(
            [units(W, Identity(8)), units(W, Haar(8)), units(W, eig), evaluate.svd_bound(W)]
        )
        paper = np.array([45.36, 34.62, 29.79, 29.18])
        np.testing.assert_allclose(ours / ours[0], paper / paper[0], rtol=5e-3)


# ------------------------------------------------------------------------- Program 1
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("solver", ["clarabel", "scs"])
def test_dual_method_matches_cvxpy(p, solver):
    sigma, Q = eigen_queries(workload_gram(Dense(random_workload(3, n=10))))
    P = Q * Q if p == 1 else np.abs(Q)
    dual = solve_weighting(sigma, P, p, "dual", tol=1e-9)
    conic = solve_weighting(sigma, P, p, solver)
    assert dual.lower <= dual.value * (1 + 1e-12)
    assert dual.gap <= 1e-8
    assert conic.value == pytest.approx(dual.value, rel=2e-5)
    assert conic.value >= dual.lower * (1 - 1e-9)  # the dual bound certifies any solver


def test_dual_lower_bound_is_valid_for_every_feasible_point():
    sigma, Q = eigen_queries(workload_gram(AllRange(32)))
    P = Q * Q
    w = solve_weighting(sigma, P, tol=1e-3)
    rng = np.random.default_rng(0)
    for _ in range(20):
        u = rng.uniform(0.1, 1.0, sigma.size)
        u /= (P.T @ u).max()
        assert np.sum(sigma / u) >= w.lower


def test_program1_value_is_the_error_of_the_weighted_design():
    W = random_workload(5, n=8)
    sigma, Q = eigen_queries(workload_gram(Dense(W)))
    w = solve_weighting(sigma, Q * Q, tol=1e-9)
    A, value = weighted_strategy(Q, w.x, 1, complete=False, c=sigma)
    assert dense_units(W, A.dense()) == pytest.approx(value, rel=1e-8)
    # L1 form: Σ c_i / λ_i² = sens₁(A)² tr(WᵀW (AᵀA)⁺)
    w1 = solve_weighting(sigma, np.abs(Q), 2, tol=1e-9)
    A1, value1 = weighted_strategy(Q, w1.x, 2, complete=False, c=sigma)
    assert dense_units(W, A1.dense(), p=1) == pytest.approx(value1, rel=1e-8)


def test_identity_design_gives_the_identity_strategy_error():
    W = random_workload(7)
    st = selectors.get("eigen_design", design="identity").select(Dense(W), EPS_DELTA)
    assert units(Dense(W), st) == pytest.approx(np.sum(W * W), rel=1e-6)


def test_all_range_n64_matches_digest_ratio():
    # digest §10.4: Eigen-Design / lower bound (RMSE) = 1.020 on all ranges, n = 64
    W = AllRange(64)
    st = selectors.get("eigen_design").select(W, EPS_DELTA)
    ratio = np.sqrt(units(W, st) / evaluate.svd_bound(W))
    assert ratio == pytest.approx(1.020, abs=1.5e-3)


# ------------------------------------------------------------------------ properties
@pytest.mark.parametrize("seed", range(4))
def test_invariant_under_column_permutation(seed):
    W = random_workload(seed)
    perm = np.random.default_rng(100 + seed).permutation(W.shape[1])
    sel = selectors.get("eigen_design", tol=1e-9)
    e1 = units(Dense(W), sel.select(Dense(W), EPS_DELTA))
    Wp = Permuted(Dense(W), perm)
    e2 = units(Wp, sel.select(Wp, EPS_DELTA))
    assert e2 == pytest.approx(e1, rel=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_invariant_under_orthogonal_left_factor(seed):
    W = random_workload(seed, m=8)
    Qo, _ = np.linalg.qr(np.random.default_rng(200 + seed).normal(size=(8, 8)))
    sel = selectors.get("eigen_design", tol=1e-9)
    e1 = units(Dense(W), sel.select(Dense(W), EPS_DELTA))
    e2 = units(Dense(Qo @ W), sel.select(Dense(Qo @ W), EPS_DELTA))
    assert e2 == pytest.approx(e1, rel=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_error_between_svd_bound_and_theorem3_and_above_sdp(seed):
    W = random_workload(seed, rank=5 if seed % 2 else None)
    eig = selectors.get("eigen_design", tol=1e-9).select(Dense(W), EPS_DELTA)
    sdp = selectors.get("mm_sdp").select(Dense(W), EPS_DELTA)
    e, opt, bound = units(Dense(W), eig), units(Dense(W), sdp), evaluate.svd_bound(Dense(W))
    assert bound * (1 - 1e-9) <= opt <= e * (1 + 1e-6)
    sigma = np.linalg.eigvalsh(W.T @ W)
    assert np.sqrt(e / bound) <= (8 * sigma.max() / bound) ** 0.25  # Thm 3


def test_deterministic():
    W = AllRange(32)
    a = selectors.get("eigen_design").select(W, EPS_DELTA).matrix.dense()
    b = selectors.get("eigen_design").select(W, EPS_DELTA).matrix.dense()
    np.testing.assert_array_equal(a, b)


def test_zcdp_and_approx_give_the_same_strategy():
    W = Prefix(16)
    a = selectors.get("eigen_design").select(W, EPS_DELTA).matrix.dense()
    b = selectors.get("eigen_design").select(W, ZCDP(0.5)).matrix.dense()
    np.testing.assert_allclose(a, b)


# ------------------------------------------------------------------------ reductions
def test_reductions_reduce_to_the_full_program_at_their_limits():
    W = AllRange(32)
    full = units(W, selectors.get("eigen_design", tol=1e-9).select(W, EPS_DELTA))
    sep = selectors.get("eigen_design", reduction="separation", group_size=32, tol=1e-9)
    pri = selectors.get("eigen_design", reduction="principal", fraction=1.0, tol=1e-9)
    assert units(W, sep.select(W, EPS_DELTA)) == pytest.approx(full, rel=1e-6)
    assert units(W, pri.select(W, EPS_DELTA)) == pytest.approx(full, rel=1e-6)


@pytest.mark.parametrize(
    "params", [{"reduction": "separation", "group_size": 4}, {"reduction": "principal"}]
)
def test_reductions_are_feasible_approximations(params):
    W = AllRange(64)
    full = selectors.get("eigen_design", tol=1e-9).select(W, EPS_DELTA)
    red = selectors.get("eigen_design", tol=1e-9, **params).select(W, EPS_DELTA)
    assert red.loss >= full.loss * (1 - 1e-7)  # Program 1 over a restricted weighting
    assert units(W, red) >= evaluate.svd_bound(W)
    assert np.sqrt(units(W, red) / units(W, full)) < 1.15  # and still close (§4.2)


# ----------------------------------------------------------------------- design sets
@pytest.mark.parametrize("privacy", [EPS_DELTA, PureDP(1.0)])
@pytest.mark.parametrize("design,base", [("wavelet", Haar(16))])
def test_weighted_design_never_worse_than_the_design_itself(design, base, privacy):
    # Program 1's feasible set contains the unweighted design (λ = 1 rescaled)
    W = AllRange(16)
    st = selectors.get("eigen_design", design=design).select(W, privacy)
    assert evaluate.expected_error(W, st, privacy) <= evaluate.expected_error(W, base, privacy) * (
        1 + 1e-9
    )


def test_fourier_and_explicit_matrix_design():
    W = AllRange(16)
    from scipy.linalg import hadamard

    a = selectors.get("eigen_design", design="fourier").select(W, EPS_DELTA)
    b = selectors.get("eigen_design", design=hadamard(16)).select(W, EPS_DELTA)
    assert units(W, a) == pytest.approx(units(W, b), rel=1e-9)
    assert units(W, a) >= units(W, selectors.get("eigen_design").select(W, EPS_DELTA))


def test_design_costs_theorem1():
    W = random_workload(1)
    Q = Haar(8).dense()
    c = design_costs(W.T @ W, Q)
    np.testing.assert_allclose(c, (np.linalg.solve(Q.T, W.T) ** 2).sum(axis=1), rtol=1e-9)


def test_normalize_rows_uses_the_unit_norm_workload():
    W = random_workload(2)
    G = workload_gram(Dense(W), normalize_rows=True)
    Wn = W / np.linalg.norm(W, axis=1, keepdims=True)
    np.testing.assert_allclose(G, Wn.T @ Wn, atol=1e-12)
    G2 = workload_gram(AllRange(16), normalize_rows=True)
    R = AllRange(16).dense()
    Rn = R / np.linalg.norm(R, axis=1, keepdims=True)
    np.testing.assert_allclose(G2, Rn.T @ Rn, atol=1e-12)
    st = selectors.get("eigen_design", normalize_rows=True).select(AllRange(16), EPS_DELTA)
    assert units(Dense(Rn), st) <= units(Dense(Rn), Haar(16))


# ----------------------------------------------------------- strategy representation
@pytest.mark.parametrize("privacy", [EPS_DELTA, PureDP(1.0)])
@pytest.mark.parametrize("design", ["eigen", "wavelet", "fourier"])
def test_orthogonal_designs_give_an_orthobasis_scored_like_dense(design, privacy):
    # orthogonal design rows (eigen-queries; ±1 Haar and Hadamard rows, normalised) become
    # the OrthoBasis kind; its structured score equals the dense route's on the same array
    W = AllRange(16)
    st = selectors.get("eigen_design", design=design, tol=1e-9).select(W, privacy)
    assert isinstance(st.matrix, OrthoBasis)
    D = st.matrix.dense()
    ours = evaluate.expected_error(W, st, privacy)
    assert ours == pytest.approx(evaluate.expected_error(W, Dense(D), privacy), rel=1e-9)
    assert ours == pytest.approx(
        privacy.noise_variance() * dense_units(W.dense(), D, 1 if privacy is not EPS_DELTA else 2),
        rel=1e-9,
    )


def test_non_orthogonal_design_stays_dense():
    W = AllRange(8)
    Q = np.tril(np.ones((8, 8)))  # prefix rows: a basis, not orthogonal
    st = selectors.get("eigen_design", design=Q, tol=1e-9).select(W, EPS_DELTA)
    assert not isinstance(st.matrix, OrthoBasis)
    assert units(W, st) == pytest.approx(dense_units(W.dense(), st.matrix.dense()), rel=1e-9)


# ------------------------------------------------------------------------- bad input
def test_bad_input():
    sel = selectors.get("eigen_design")
    with pytest.raises(ValueError, match="all zero"):
        sel.select(Dense(np.zeros((3, 4))), EPS_DELTA)
    with pytest.raises(ValueError, match="empty"):
        sel.select(Dense(np.zeros((0, 4))), EPS_DELTA)
    with pytest.raises(ValueError, match="exceeds the limit"):
        workload_gram(AllRange(64), max_n=32)
    # a design set that does not span the workload
    Q = np.eye(4)[:3]
    with pytest.raises(ValueError, match="does not span"):
        selectors.get("eigen_design", design=Q).select(Dense(np.ones((1, 4))), EPS_DELTA)
    with pytest.raises(ValueError, match="linearly independent"):
        selectors.get("eigen_design", design=np.ones((4, 4))).select(Identity(4), EPS_DELTA)
    with pytest.raises(ValueError, match="power of 2"):
        selectors.get("eigen_design", design="fourier").select(Identity(6), EPS_DELTA)
    for bad in [
        {"solver": "mosek"},
        {"reduction": "pca"},
        {"group_size": 0},
        {"fraction": 0.0},
        {"design": "dct"},
    ]:
        with pytest.raises(ValueError):
            selectors.get("eigen_design", **bad)
    with pytest.raises(ValueError, match="positive"):
        solve_weighting([1.0, 0.0], np.ones((2, 3)))


@pytest.mark.parametrize(
    "c, P, max_iter, message",
    [
        ([1.0], [[1.0]], 0, "max_iter"),  # no iteration: there would be no weighting at all
        ([1.0], [[np.inf]], 200, "P must be finite"),
        ([1.0], [[np.nan]], 200, "P must be finite"),
        # c / (P ν) overflows float64 at the first iterate: no finite objective is ever seen
        ([1e300], [[1e-320]], 200, "no weighting with a finite objective"),
    ],
)
def test_solve_weighting_refuses_what_has_no_finite_weighting(c, P, max_iter, message):
    with np.errstate(all="ignore"), pytest.raises(ValueError, match=message):
        solve_weighting(c, np.array(P), max_iter=max_iter)
