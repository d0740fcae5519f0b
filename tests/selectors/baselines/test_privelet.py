"""Privelet (Haar wavelet) strategy: explicit Haar, padding, the tree form of HᵀH, Table 4(a)."""

import math

import numpy as np
import pytest

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors.baselines.privelet import PriveletHaar

EPS = PureDP(1.0)


def _haar(n):
    """H_1 = [1], H_n = [H_{n/2} ⊗ [1 1]; I_{n/2} ⊗ [1 -1]] (Xiao et al.; digest §15)."""
    if n == 1:
        return np.ones((1, 1))
    return np.vstack([np.kron(_haar(n // 2), [1, 1]), np.kron(np.eye(n // 2), [1, -1])])


def test_strategy_is_the_explicit_haar_matrix_on_8_cells():
    s = selectors.get("privelet").select(workloads.all_range(8), EPS)
    assert np.array_equal(s.matrix.dense(), _haar(8))
    assert s.matrix.sensitivity(1) == 4.0
    assert s.matrix.sensitivity(2) == pytest.approx(2.0)


@pytest.mark.parametrize("n", [1, 2, 5, 6, 8, 13])
def test_padding_keeps_the_real_columns_and_the_tree_gram_is_exact(n):
    A = PriveletHaar(n)
    H = _haar(A.padded)[:, :n]
    assert np.array_equal(A.dense(), H)
    assert np.allclose(A.gram().dense(), H.T @ H)  # HᵀH as a weighted dyadic tree
    assert np.allclose(A.rownorm_p(1), np.abs(H).sum(1))
    assert np.allclose(A.pinv().dense(), np.linalg.pinv(H))
    W = workloads.all_range(n)
    Wd = W.dense()
    dense = np.trace(Wd.T @ Wd @ np.linalg.pinv(H.T @ H))
    assert evaluate.trace_term(W, A) == pytest.approx(dense, rel=1e-10)


def test_multi_d_is_the_kronecker_of_padded_haars():
    W = workloads.kron([workloads.prefix(6), workloads.all_range(4)])
    s = selectors.get("privelet").select(W, EPS)
    expected = np.kron(_haar(8)[:, :6], _haar(4))
    assert np.array_equal(s.matrix.dense(), expected)
    assert s.metadata["padded"] == [8, 4]
    Wd = W.dense()
    dense = 2 * 12.0**2 * np.trace(Wd.T @ Wd @ np.linalg.pinv(expected.T @ expected))
    assert evaluate.expected_error(W, s, EPS) == pytest.approx(dense, rel=1e-10)
    assert s.matrix.sensitivity(2) == pytest.approx(math.sqrt(4 * 3))
    assert evaluate.expected_error(W, s, ZCDP(0.5)) > 0


@pytest.mark.parametrize(
    "W, paper",
    [
        (workloads.all_range(1024), 1.83 / 2.36),  # Table 4(a): Wavelet / Identity
        (workloads.prefix(1024), 1.80 / 3.34),
        (workloads.permuted(workloads.all_range(1024), 0), 10.57 / 2.36),
    ],
)
def test_reproduces_table4a_at_1024(W, paper):
    s = selectors.get("privelet").select(W, EPS)
    ratio = evaluate.error_ratio(W, s, selectors.get("identity").select(W, EPS), EPS)
    assert ratio == pytest.approx(paper, rel=0.01)


def test_domains_it_cannot_pad_raise():
    with pytest.raises(ValueError, match="powers of two"):
        selectors.get("privelet", pad=False).select(workloads.prefix(6), EPS)
    W = workloads.marginals([10] * 9, 1)  # one 10^9-cell attribute when flattened
    with pytest.raises(ValueError, match="cannot pad"):
        selectors.get("privelet", dims=[10**9]).select(W, EPS)
    with pytest.raises(ValueError, match="pad: expected true or false"):
        selectors.get("privelet", pad="yes")
