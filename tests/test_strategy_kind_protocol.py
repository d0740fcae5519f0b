"""A strategy kind defined in this file only, through the strategy-kind protocol
(ARCHITECTURE.md, "Add a strategy kind"): an orthonormal DCT-II basis on N = 2^20 cells.

Nothing in the package knows this kind. The evaluator scores it against a prefix workload of
the same size exactly (its Gram is the identity, so tr(WᵀW (AᵀA)⁺) = ||W||_F² = N(N+1)/2 and
query i has variance (i+1)·σ²), and ``mechanism.release`` answers with it. N² = 2^40 entries
is far beyond ``linalg.MAX_DENSE_ENTRIES``, so any dense fallback would raise TooLargeError.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft

from mmtoolkit import evaluate, mechanism
from mmtoolkit.linalg import Identity, Matrix, Prefix, check_p
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors import Selector
from mmtoolkit.strategy import Strategy
from mmtoolkit.testing import KIND_CHECKS, check_strategy_kind

N = 2**20


class DCTBasis(Matrix):
    """The orthonormal DCT-II matrix C (n x n): rows are cosine queries, ``CᵀC = I``."""

    def __init__(self, n: int):
        self.shape = (n, n)

    def _matmat(self, X):
        return scipy.fft.dct(X, type=2, norm="ortho", axis=0)

    def _rmatmat(self, Y):
        return scipy.fft.idct(Y, type=2, norm="ortho", axis=0)

    # ---- the protocol: the Gram (error) and the pseudo-inverse (reconstruction)
    def gram(self):
        return Identity(self.shape[1])

    def pinv_operator(self):
        return self.T  # orthonormal: C⁺ = Cᵀ, applied by the inverse DCT

    def colnorm_p(self, p):
        check_p(p)
        if p == 2:
            return 1.0  # orthonormal columns
        return super().colnorm_p(p)


class DCTSelector(Selector):
    """Always answers through the DCT basis (a selector a user would write)."""

    name = "test_dct"
    privacy = frozenset({ZCDP})

    def _select(self, workload, privacy, objective):
        return Strategy(DCTBasis(workload.shape[1]), selector=self.name)


@pytest.fixture(scope="module")
def strategy():
    return DCTSelector().select(Prefix(N), ZCDP(0.5))


def test_evaluator_scores_the_new_kind_exactly(strategy):
    W, privacy = Prefix(N), ZCDP(0.5)
    v = privacy.noise_variance(1.0)
    assert evaluate.expected_error(W, strategy, privacy) == pytest.approx(
        v * N * (N + 1) / 2, rel=1e-12
    )
    var = evaluate.per_query_variance(W, strategy, privacy)
    np.testing.assert_allclose(var, v * np.arange(1, N + 1), rtol=1e-12)
    assert evaluate.max_variance(W, strategy, privacy) == pytest.approx(v * N, rel=1e-12)
    assert evaluate.supports(W, strategy)


def test_release_answers_with_the_new_kind(strategy):
    """Answers are the true prefix sums plus W Cᵀ z: the prefix sums of i.i.d. N(0, σ²) noise,
    so successive differences of the error are i.i.d. N(0, σ²) (checked on 2^20 samples)."""
    privacy = ZCDP(0.5)
    rng = np.random.default_rng(7)
    x = rng.integers(0, 5, size=N).astype(float)
    answers = mechanism.release(Prefix(N), strategy, x, privacy, np.random.default_rng(1))
    err = answers - np.cumsum(x)
    steps = np.diff(np.concatenate([[0.0], err]))
    sigma = np.sqrt(privacy.noise_variance(1.0))
    assert abs(steps.mean()) < 5 * sigma / np.sqrt(N)
    assert steps.std() == pytest.approx(sigma, rel=0.01)
    # the same seed gives the same answers
    again = mechanism.release(Prefix(N), strategy, x, privacy, np.random.default_rng(1))
    np.testing.assert_array_equal(answers, again)


def test_reconstruction_uses_the_kinds_pseudo_inverse(strategy):
    rng = np.random.default_rng(3)
    x = rng.normal(size=N)
    y = strategy.matrix @ x
    np.testing.assert_allclose(mechanism.reconstruct(strategy, y), x, atol=1e-9)


def test_pure_dp_needs_the_l1_sensitivity_which_the_kind_does_not_give(strategy):
    """The kind gives only the L2 column norm; the L1 one would be a dense N x N read, which
    the size guard refuses with a clear error (never a MemoryError)."""
    with pytest.raises(ValueError, match="MAX_DENSE_ENTRIES"):
        evaluate.expected_error(Prefix(N), strategy, PureDP(1.0))


def test_the_kind_passes_the_conformance_kit():
    """The recipe's last step: ``check_strategy_kind`` on a small instance (the dense oracle,
    the error route, the evaluator, Monte Carlo and releases)."""
    report = check_strategy_kind(DCTBasis, params={"n": 16})
    assert report.passed == list(KIND_CHECKS) and not report.failed
