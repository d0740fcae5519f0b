"""Low-Rank Mechanism: projection, the decomposition's guarantees, seeds and bad input."""

import numpy as np
import pytest

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.linalg import Dense, TooLargeError
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors.baselines.lrm import lrm_decompose, project_columns

EPS = PureDP(1.0)


def _project_l1_bisection(v):
    """Independent L1-ball projection: u = sign(v) max(|v| - θ, 0) with θ by bisection."""
    if np.abs(v).sum() <= 1:
        return v
    lo, hi = 0.0, np.abs(v).max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.maximum(np.abs(v) - mid, 0).sum() > 1:
            lo = mid
        else:
            hi = mid
    return np.sign(v) * np.maximum(np.abs(v) - hi, 0)


def test_l1_projection_matches_bisection_and_l2_scales():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(9, 12)) * rng.uniform(0.05, 3, size=12)
    P = project_columns(V, 1)
    for j in range(V.shape[1]):
        assert np.allclose(P[:, j], _project_l1_bisection(V[:, j]), atol=1e-10)
    Q = project_columns(V, 2)
    assert np.all(np.linalg.norm(Q, axis=0) <= 1 + 1e-12)
    inside = np.linalg.norm(V, axis=0) <= 1
    assert np.allclose(Q[:, inside], V[:, inside])


def test_identity_workload_reaches_the_optimum_n():
    # min tr(BᵀB) s.t. BL = I, ||L_j||_1 <= 1 is n (Cauchy–Schwarz; L = I attains it)
    B, L, info = lrm_decompose(np.eye(6), 8)
    assert info["residual"] < 1e-8
    assert info["trace_BtB"] == pytest.approx(6.0, rel=1e-6)


@pytest.mark.parametrize("privacy, norm", [(EPS, 1), (ZCDP(0.5), 2)])
def test_decomposition_is_feasible_and_least_squares_never_loses(privacy, norm):
    W = workloads.width_range(16, 4)
    s = selectors.get("lrm", max_iter=200).select(W, privacy)
    L = s.matrix.dense()
    assert s.metadata["norm"] == norm
    assert s.metadata["rank"] == int(np.ceil(1.2 * 13))
    assert s.metadata["residual"] <= 1e-4
    colnorm = np.abs(L).sum(0) if norm == 1 else np.linalg.norm(L, axis=0)
    assert colnorm.max() <= 1 + 1e-9
    # Gauss–Markov: least squares on L's answers is at least as good as LRM's B
    ls = evaluate.trace_term(W, s.matrix) * s.matrix.sensitivity(norm) ** 2
    assert ls <= s.metadata["trace_BtB"] * (1 + 1e-6)


def test_same_seed_same_strategy():
    rng = np.random.default_rng(1)
    W = Dense(rng.integers(0, 2, size=(5, 9)).astype(float))
    a = selectors.get("lrm", rank=7, seed=3, max_iter=30).select(W, EPS)
    b = selectors.get("lrm", rank=7, seed=3, max_iter=30).select(W, EPS)
    c = selectors.get("lrm", rank=7, seed=4, max_iter=30).select(W, EPS)
    assert np.array_equal(a.matrix.dense(), b.matrix.dense())
    assert not np.array_equal(a.matrix.dense(), c.matrix.dense())


def test_bad_input():
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="rank: (expected an integer|must be >= 1)"):
            selectors.get("lrm", rank=bad)
    with pytest.raises(ValueError, match="gamma"):
        selectors.get("lrm", gamma=0)
    with pytest.raises(TooLargeError, match="LRM"):
        selectors.get("lrm").select(workloads.permuted(workloads.all_range(1024), 0), EPS)
    with pytest.raises(ValueError, match="init='identity' needs rank"):
        lrm_decompose(np.eye(4), 2, init="identity")


def test_random_start_is_seeded_feasible_and_selectable():
    W = workloads.prefix(8)
    a = selectors.get("lrm", init="random", seed=1, max_iter=20).select(W, EPS)
    b = selectors.get("lrm", init="random", seed=1, max_iter=20).select(W, EPS)
    c = selectors.get("lrm", init="random", seed=2, max_iter=20).select(W, EPS)
    assert np.array_equal(a.matrix.dense(), b.matrix.dense())
    assert not np.array_equal(a.matrix.dense(), c.matrix.dense())
    assert np.abs(a.matrix.dense()).sum(0).max() <= 1 + 1e-9
    assert a.params["init"] == "random" and a.metadata["residual"] >= 0
    with pytest.raises(ValueError, match="init must be one of"):
        selectors.get("lrm", init="zeros")


def test_identity_start_is_a_kkt_point_for_prefix():
    """The documented reason LRM = Identity on Prefix from the identity start: every
    feasible first-order move off L = I raises tr(K (LᵀL)⁻¹) (K_ij ≤ K_jj), checked by
    finite differences along random feasible directions, and the ALM indeed stays."""
    n = 10
    K = workloads.prefix(n).gram().dense()
    assert np.all(K <= np.diag(K)[None, :] + 1e-12)
    rng = np.random.default_rng(0)
    f0 = np.trace(K)
    for _ in range(20):
        E = np.abs(rng.normal(size=(n, n))) * rng.choice([-1, 1], size=(n, n))
        np.fill_diagonal(E, 0.0)
        L = np.eye(n) + 1e-4 * E
        L[np.arange(n), np.arange(n)] = 1 - 1e-4 * np.abs(E).sum(0)  # stays on the L1 sphere
        assert np.trace(K @ np.linalg.inv(L.T @ L)) >= f0
    s = selectors.get("lrm", max_iter=50).select(workloads.prefix(n), EPS)
    err = evaluate.trace_term(workloads.prefix(n), s.matrix) * s.matrix.sensitivity(1) ** 2
    assert err == pytest.approx(f0, rel=1e-6)


def test_settle_false_stops_at_the_first_small_residual():
    """``settle=False`` (the HDMM authors' stopping rule) changes only when the iteration
    stops: its result is the settled run's iterate at that iteration, and it stops earlier."""
    W = workloads.width_range(32, 8).dense()
    settled = lrm_decompose(W, 30, init="svd", gamma=0.01)
    early = lrm_decompose(W, 30, init="svd", gamma=0.01, settle=False)
    k = early[2]["iterations"]
    assert k < settled[2]["iterations"]
    cut = lrm_decompose(W, 30, init="svd", gamma=0.01, max_iter=k)
    np.testing.assert_array_equal(early[1], cut[1])
