"""GreedyH: the greedy choices against brute-force dense searches, budgets, collapsing."""

import numpy as np
import pytest

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.linalg import Dense
from mmtoolkit.privacy import ZCDP, PureDP

EPS = PureDP(1.0)
GRID = np.arange(100, 0, -1) / 100


def _node_error(K, A):
    return float(np.trace(K @ np.linalg.inv(A.T @ A)))


def _best_pair_fraction(K2, l1=True):
    """Brute force on a 2-cell node: A = [α 1ᵀ; p I], first minimum over p = 1, .99, ..."""
    errs = []
    for p in GRID:
        a = 1 - p if l1 else np.sqrt(1 - p * p)
        errs.append(_node_error(K2, np.array([[a, a], [p, 0], [0, p]])))
    return GRID[int(np.argmin(errs))]


@pytest.mark.parametrize("privacy", [EPS, ZCDP(0.5)])
def test_choices_match_a_dense_brute_force_on_4_cells(privacy):
    W = workloads.all_range(4)
    K = W.gram().dense()
    l1 = isinstance(privacy, PureDP)
    s = selectors.get("greedy_h").select(W, privacy)
    p1 = _best_pair_fraction(K[:2, :2], l1)
    p2 = _best_pair_fraction(K[2:, 2:], l1)
    a = (lambda p: 1 - p) if l1 else (lambda p: np.sqrt(1 - p * p))
    expected = np.array(
        [[a(p1), a(p1), 0, 0], [0, 0, a(p2), a(p2)]]
        + [[p1, 0, 0, 0], [0, p1, 0, 0], [0, 0, p2, 0], [0, 0, 0, p2]]
    )
    assert s.metadata["fractions"][1] == [p1, p2]
    A = s.matrix.dense()  # a level whose weights are all 0 is dropped
    assert np.allclose(A, expected[np.abs(expected).sum(1) > 0])
    assert s.matrix.sensitivity(privacy.norm) == pytest.approx(1.0)


def test_loss_is_the_evaluators_trace_and_columns_have_unit_norm():
    W = workloads.prefix(37)
    s = selectors.get("greedy_h").select(W, EPS)
    A = s.matrix.dense()
    Wd = W.dense()
    dense = np.trace(Wd.T @ Wd @ np.linalg.inv(A.T @ A))
    assert s.loss == pytest.approx(dense, rel=1e-9)
    assert evaluate.trace_term(W, s.matrix) == pytest.approx(dense, rel=1e-9)
    assert np.allclose(np.abs(A).sum(0), 1.0)


def test_identical_columns_are_collapsed_into_one_query():
    rng = np.random.default_rng(0)
    cols = rng.normal(size=(5, 4))
    # cells 0-1 and 4-7 have identical columns (aligned with tree nodes), 2 and 3 differ
    W = Dense(cols[:, [0, 0, 1, 2, 3, 3, 3, 3]])
    s = selectors.get("greedy_h").select(W, EPS)
    assert s.metadata["collapsed_leaves"] == 2
    assert s.matrix.levels[-1][0].tolist() == [0, 2, 3, 4]
    A = s.matrix.dense()
    Wd = W.dense()
    dense = np.trace(Wd.T @ Wd @ np.linalg.pinv(A.T @ A))
    assert evaluate.trace_term(W, s.matrix) == pytest.approx(dense, rel=1e-9)
    plain = selectors.get("greedy_h", collapse=False).select(W, EPS)
    assert plain.matrix.levels[-1][0].tolist() == list(range(8))


def test_bad_input():
    W2 = workloads.kron([workloads.prefix(4), workloads.prefix(4)])
    with pytest.raises(ValueError, match="1-D method"):
        selectors.get("greedy_h").select(W2, EPS)
    s = selectors.get("greedy_h", dims=[16]).select(W2, EPS)
    assert s.matrix.shape[1] == 16
    with pytest.raises(ValueError, match="granularity"):
        selectors.get("greedy_h", granularity=0)
