"""OrthoBasis (weighted orthonormal rows + column completion; Li & Miklau 2012, Program 2)
against an independently built dense reference."""

import numpy as np
import pytest
from linalg_oracle import check_against_dense

from mmtoolkit.linalg import OrthoBasis, OrthoBasisGram


def reference(Q, w, d):
    """[diag(w) Q ; d_j e_j for d_j > 0], built row by row."""
    n = Q.shape[1]
    rows = [w[i] * Q[i] for i in range(Q.shape[0])]
    for j in range(n):
        if d is not None and d[j] > 0:
            e = np.zeros(n)
            e[j] = d[j]
            rows.append(e)
    return np.array(rows)


def random_case(seed, k, n, completion, zero_weight=False):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.normal(size=(n, n)))[0][:k]
    w = rng.uniform(0.3, 2.0, size=k) * rng.choice([-1, 1], size=k)
    if zero_weight:
        w[0] = 0.0
    d = None
    if completion:
        d = rng.uniform(0.0, 1.0, size=n)
        d[rng.choice(n, size=n // 3, replace=False)] = 0.0
    return Q, w, d


@pytest.mark.parametrize(
    "k,completion,zero_weight",
    [(7, False, False), (4, False, False), (7, True, False), (4, True, False), (5, False, True)],
)
def test_against_dense(k, completion, zero_weight):
    Q, w, d = random_case(k + 10 * completion, k, 7, completion, zero_weight)
    A = OrthoBasis(Q, w, d)
    ref = reference(Q, w, d)
    check_against_dense(A, ref, pinv_exact=not completion)
    G = A.gram()
    assert isinstance(G, OrthoBasisGram)
    np.testing.assert_allclose(G.diag(), np.diag(ref.T @ ref), atol=1e-12)
    assert G.trace() == pytest.approx(np.trace(ref.T @ ref), rel=1e-12)


def test_pinv_without_completion_is_structured():
    Q, w, _ = random_case(3, 5, 8, False, zero_weight=True)
    A = OrthoBasis(Q, w)
    np.testing.assert_allclose(A.pinv().dense(), np.linalg.pinv(reference(Q, w, None)), atol=1e-12)


def test_bad_input():
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.normal(size=(5, 5)))[0]
    with pytest.raises(ValueError, match="not orthonormal"):
        OrthoBasis(Q * 1.01, np.ones(5))
    with pytest.raises(ValueError, match="not orthonormal"):
        OrthoBasis(rng.normal(size=(3, 5)), np.ones(3))
    with pytest.raises(ValueError, match="cannot fit"):
        OrthoBasis(np.ones((6, 5)), np.ones(6))
    with pytest.raises(ValueError, match="weights"):
        OrthoBasis(Q, np.ones(4))
    with pytest.raises(ValueError, match="weights"):
        OrthoBasis(Q, [1, 1, np.nan, 1, 1])
    with pytest.raises(ValueError, match="completion"):
        OrthoBasis(Q, np.ones(5), completion=-np.ones(5))
    with pytest.raises(ValueError, match="non-empty"):
        OrthoBasis(np.zeros((0, 5)), [])
