"""Tests of mmtoolkit.mechanism: structured reconstruction vs dense least squares, and
Monte-Carlo error vs the evaluator's analytic expected error."""

from __future__ import annotations

import numpy as np
import pytest

from mmtoolkit import evaluate, mechanism, workloads
from mmtoolkit.linalg import Identity, Kronecker, Marginals, PIdentity, Prefix, VStack, Weighted
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.strategy import Strategy

RNG = np.random.default_rng(0)
KRON = Kronecker([PIdentity(RNG.random((2, 6))), PIdentity(RNG.random((1, 4)))])
MARG = Marginals([3, 4, 2], {0: 0.2, 1: 0.3, 6: 0.5})  # not full rank
UNION = VStack(
    [
        Weighted(0.4, Kronecker([Prefix(6), Identity(4)])),
        Weighted(0.6, Kronecker([Identity(6), Prefix(4)])),
    ]
)


@pytest.mark.parametrize(
    "A", [KRON, MARG, UNION, Weighted(2.0, KRON), PIdentity(RNG.random((3, 24)))]
)
def test_reconstruct_is_least_squares(A):
    y = np.random.default_rng(1).normal(size=A.shape[0])
    xhat = mechanism.reconstruct(A, y)
    ref = np.linalg.lstsq(A.dense(), y, rcond=None)[0]  # minimum-norm least squares
    np.testing.assert_allclose(xhat, ref, atol=1e-7 * max(1, np.abs(ref).max()))


@pytest.mark.parametrize(
    "W, A, privacy",
    [
        (workloads.kron([workloads.all_range(6), workloads.prefix(4)]), KRON, PureDP(1.0)),
        (workloads.marginals([3, 4, 2], 1), MARG, ZCDP(0.5)),
        (workloads.kron([workloads.prefix(6), workloads.total(4)]), UNION, PureDP(2.0)),
    ],
)
def test_monte_carlo_error_matches_evaluator(W, A, privacy):
    x = np.random.default_rng(2).integers(0, 50, size=A.shape[1]).astype(float)
    truth = W @ x
    rng = np.random.default_rng(3)
    trials = 1000
    errs = [
        np.sum(
            (
                mechanism.answer(W, mechanism.reconstruct(A, mechanism.measure(A, x, privacy, rng)))
                - truth
            )
            ** 2
        )
        for _ in range(trials)
    ]
    expected = evaluate.expected_error(W, A, privacy)
    # standard error of the mean of a squared-error sum is about 3% at 1000 trials
    assert np.mean(errs) == pytest.approx(expected, rel=0.1)


def test_exact_without_noise_and_seeded():
    x = np.arange(24.0)
    y = KRON @ x
    np.testing.assert_allclose(mechanism.reconstruct(KRON, y), x, atol=1e-9)
    a = mechanism.measure(KRON, x, PureDP(1.0), np.random.default_rng(5))
    b = mechanism.measure(KRON, x, PureDP(1.0), np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)


def test_bad_input():
    with pytest.raises(ValueError, match="defined on 24"):
        mechanism.measure(KRON, np.zeros(23), PureDP(1.0), np.random.default_rng(0))
    with pytest.raises(ValueError, match="Generator"):
        mechanism.measure(KRON, np.zeros(24), PureDP(1.0), 0)
    with pytest.raises(ValueError, match="rows"):
        mechanism.reconstruct(KRON, np.zeros(3))
    lm = Strategy(matrix=Prefix(4), selector="laplace", inference="none")
    with pytest.raises(ValueError, match="nothing to reconstruct"):
        mechanism.reconstruct(lm, np.zeros(4))
    with pytest.raises(ValueError, match="defined on 4"):
        mechanism.answer(Prefix(4), np.zeros(5))
