"""The singular-value-bound strategy A = D_W^{1/2} Q_W (Li et al. 2010, Thm 5.25)."""

import numpy as np
import pytest

from mmtoolkit import evaluate, selectors
from mmtoolkit.linalg import AllRange, Dense
from mmtoolkit.privacy import ApproxDP, PureDP

EPS_DELTA = ApproxDP(0.5, 1e-4, calibration="eigen_design")


@pytest.mark.parametrize("seed", range(3))
def test_attains_the_sv_approximation_optimum(seed):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(9, 6))
    A = selectors.get("svd_strategy").select(Dense(W), EPS_DELTA).matrix.dense()
    s = np.linalg.svd(W, compute_uv=False)
    value = np.trace(A.T @ A) * np.trace(W.T @ W @ np.linalg.inv(A.T @ A))
    assert value == pytest.approx(s.sum() ** 2, rel=1e-9)  # Thm 5.25: (Σ singular values)²
    d2 = np.linalg.svd(A, compute_uv=False) ** 2  # d_i² ∝ λ_i (scaled to unit sensitivity)
    np.testing.assert_allclose(d2 / d2[0], s / s[0], rtol=1e-9)
    for _ in range(10):  # and any other A has a larger SV-approximation objective
        B = rng.normal(size=(6, 6))
        assert np.trace(B.T @ B) * np.trace(W.T @ W @ np.linalg.inv(B.T @ B)) >= value


def test_rank_deficient_workload_and_bound_ratio():
    W = AllRange(16)
    st = selectors.get("svd_strategy").select(W, EPS_DELTA)
    e = evaluate.expected_error(W, st, EPS_DELTA) / EPS_DELTA.noise_variance()
    bound = evaluate.svd_bound(W)
    sigma = np.linalg.eigvalsh(W.gram().dense())
    assert bound <= e <= 16 * np.sqrt(sigma.max()) * np.sqrt(sigma.clip(0)).sum() / 16 + 1e-6
    completed = selectors.get("svd_strategy", complete=True).select(W, EPS_DELTA)
    assert evaluate.expected_error(W, completed, EPS_DELTA) <= evaluate.expected_error(
        W, st, EPS_DELTA
    )
    pure = PureDP(1.0)
    assert evaluate.expected_error(W, selectors.get("svd_strategy").select(W, pure), pure) > 0


def test_bad_input():
    with pytest.raises(ValueError, match="all zero"):
        selectors.get("svd_strategy").select(Dense(np.zeros((2, 3))), EPS_DELTA)
    with pytest.raises(ValueError):
        selectors.get("svd_strategy", complete="yes")
