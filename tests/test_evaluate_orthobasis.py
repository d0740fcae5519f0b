"""The evaluator's OrthoBasis route (Eigen-Design strategies) against the dense route and an
independent numpy computation of tr(WᵀW (AᵀA)⁺) and diag(W (AᵀA)⁺ Wᵀ)."""

import numpy as np
import pytest

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.evaluate import UnsupportedWorkloadError
from mmtoolkit.linalg import AllRange, Dense, OrthoBasis, TooLargeError
from mmtoolkit.linalg import base as linalg_base
from mmtoolkit.linalg.orthobasis import OrthoBasisRoute
from mmtoolkit.privacy import ApproxDP, PureDP

PR = ApproxDP(0.5, 1e-4, calibration="eigen_design")


def case(seed, n, k, completion, zero_weight=False):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.normal(size=(n, n)))[0][:k]
    w = rng.uniform(0.3, 2.0, size=k)
    if zero_weight:
        w[1] = 0.0
    d = None
    if completion:
        d = rng.uniform(0.0, 1.0, size=n)
        d[: n // 2] = 0.0
    return OrthoBasis(Q, w, d)


def supported_workload(A, m, seed):
    """m random queries inside rowspace(A) (projected by numpy's pinv)."""
    D = A.dense()
    W = np.random.default_rng(seed).normal(size=(m, A.shape[1]))
    return W @ (np.linalg.pinv(D) @ D)


@pytest.mark.parametrize(
    "k,completion,zero_weight",
    [
        (10, False, False),
        (6, False, False),
        (10, True, False),
        (6, True, False),
        (10, False, True),
        (4, True, True),
    ],
)
@pytest.mark.parametrize("privacy", [PR, PureDP(1.0)])
def test_matches_dense(k, completion, zero_weight, privacy):
    A = case(k, 10, k, completion, zero_weight)
    W = supported_workload(A, 15, k + 1)
    assert isinstance(A.error_route(Dense(W)), OrthoBasisRoute)
    D = A.dense()
    pinv_gram = np.linalg.pinv(D.T @ D)
    assert evaluate.trace_term(W, A) == pytest.approx(np.trace(W.T @ W @ pinv_gram), rel=1e-9)
    # the same strategy as a plain dense array goes through the dense route
    assert evaluate.expected_error(W, A, privacy) == pytest.approx(
        evaluate.expected_error(W, Dense(D), privacy), rel=1e-9
    )
    np.testing.assert_allclose(
        evaluate.per_query_variance(W, A, privacy),
        evaluate.per_query_variance(W, Dense(D), privacy),
        rtol=1e-9,
    )
    assert evaluate.max_variance(W, A, privacy) == pytest.approx(
        evaluate.max_variance(W, Dense(D), privacy), rel=1e-9
    )


@pytest.mark.parametrize("completion", [False, True])
def test_unsupported_query_is_an_error(completion):
    A = case(5, 10, 4 if completion else 6, completion)
    D = A.dense()
    assert np.linalg.matrix_rank(D) < 10
    W = supported_workload(A, 8, 1)
    assert evaluate.supports(W, A)
    # one query leaving rowspace(A) by a relative 1e-6 in squared norm (> SUPPORT_RTOL)
    null = np.linalg.svd(D)[2][-1]
    W[3] += 1e-3 * np.linalg.norm(W[3]) * null
    assert not evaluate.supports(W, A)
    with pytest.raises(UnsupportedWorkloadError, match="outside the row space"):
        evaluate.expected_error(W, A, PR)


def test_structured_workload_and_selector():
    W = workloads.all_range(48)
    st = selectors.get("eigen_design", tol=1e-9).select(W, PR)
    assert isinstance(st.matrix, OrthoBasis) and st.matrix.cells.size > 0
    ours = evaluate.expected_error(W, st, PR)
    assert ours == pytest.approx(evaluate.expected_error(W, Dense(st.matrix.dense()), PR), rel=1e-9)
    low_rank = workloads.marginals(__import__("mmtoolkit").Domain.from_sizes([4, 3, 4]), 1)
    st = selectors.get("eigen_design").select(low_rank, PR)
    assert st.matrix.Q.shape[0] < 48  # zero eigenvalues dropped: rank-deficient basis
    assert evaluate.expected_error(low_rank, st, PR) == pytest.approx(
        evaluate.expected_error(low_rank, Dense(st.matrix.dense()), PR), rel=1e-9
    )


def test_route_scores_beyond_the_dense_guard(monkeypatch):
    # shrink the dense guard so the dense route refuses n = 64; the OrthoBasis route still
    # scores exactly (full column rank: no per-query arrays needed)
    W = AllRange(64)
    st = selectors.get("eigen_design", tol=1e-9).select(W, PR)
    expected = evaluate.trace_term(W, Dense(st.matrix.dense()))
    monkeypatch.setattr(linalg_base, "MAX_DENSE_ENTRIES", 1000)
    with pytest.raises(TooLargeError):
        evaluate.trace_term(W, Dense(np.eye(64)) @ Dense(st.matrix.dense()).T.T)
    assert evaluate.trace_term(W, st.matrix) == pytest.approx(expected, rel=1e-9)
