"""Tests of the HDMM Census SF1 / SF1+ workloads (mmtoolkit.census; McKenna et al. 2018 §8.1)."""

from __future__ import annotations

import numpy as np
import pytest

from mmtoolkit import census, datasets, evaluate, selectors
from mmtoolkit.linalg import kron_terms
from mmtoolkit.privacy import PureDP


def test_sf1_counts_match_the_paper():
    W = census.sf1()
    # §2 / §8.1: 4151 queries on the 500,480-cell Person domain (the cph preset)
    assert W.shape == (census.N_QUERIES, datasets.domain("cph").size)
    sizes = [f.shape[1] for f in kron_terms(W)[0][1]]
    assert sizes == list(datasets.domain("cph").sizes)
    assert len(kron_terms(W)) == 33
    # Ex. 7: a query is stored in 2 + 2 + 64 + 17 + 115 = 200 numbers
    assert sum(sizes) == 200
    # every product has Total on Relationship
    for _, factors in kron_terms(W):
        assert factors[3].shape == (1, 17)


def test_sf1_plus_counts_match_the_paper():
    W = census.sf1_plus()
    # §8.1: 4151 + 51 x 4151 = 215,852 queries on 25,524,480 cells (the cph_state preset)
    assert W.shape == (215_852, 25_524_480)
    sizes = [f.shape[1] for f in kron_terms(W)[0][1]]
    assert sizes == list(datasets.domain("cph_state").sizes)
    # national + per-state copy of every query: the sensitivity doubles (82; on the
    # Relationship-free domain, since an N-vector of column sums at 25.5M cells is slow)
    assert census.sf1_plus(relationship=False).sensitivity(1) == 82.0


def test_sf1_norms_match_independent_matvec_count():
    # the digest's verified numbers for the authors' blocks: ||W||_1 = 41, ||W||_F² = 18,998,554
    W = census.sf1(two_or_more="race1_complement")
    assert W.sensitivity(1) == 41.0
    ident = selectors.get("identity").select(W, PureDP(1.0))
    assert evaluate.expected_error(W, ident, PureDP(1.0)) == pytest.approx(2 * 18_998_554)
    # independent count through mat-vecs (not the sensitivity/Gram closed forms): all factors
    # are 0/1, so Wᵀ1 gives the column sums and 1ᵀW1 = Σ W = ||W||_F²
    for _, factors in kron_terms(W):
        for f in factors:
            assert set(np.unique(f.dense())) <= {0.0, 1.0}
    colsum = W.T @ np.ones(W.shape[0])
    assert colsum.max() == 41.0
    assert colsum.sum() == 18_998_554


def test_blocks_are_the_sf1_predicates():
    b = census.blocks()
    race1 = b["race1"].dense()
    assert race1.shape == (7, 64)
    np.testing.assert_array_equal(np.flatnonzero(race1[:6].sum(0)), [1, 2, 4, 8, 16, 32])
    assert race1[6].sum() == 57 and race1[:, 0].sum() == 0  # ≥ 2 flags; cell 0 in no row
    assert census.blocks("race1_complement")["race1"].dense()[6].sum() == 58
    race2 = b["race2"].dense()
    assert race2.shape == (70, 64)
    np.testing.assert_array_equal(race2[63:69].sum(1), [6, 15, 20, 15, 6, 1])  # C(6, k)
    age1, age3 = b["age1"].dense(), b["age3"].dense()
    assert age1.shape == (23, 115) and age3.shape == (103, 115)
    np.testing.assert_array_equal(age1.sum(0), 1)  # the age groups partition 0..114
    np.testing.assert_array_equal(age3.sum(0), 1)
    assert age1[4].nonzero()[0].tolist() == [18, 19]  # 18-19
    assert b["adult"].dense()[0, :18].sum() == 0 and b["adult"].dense()[0, 18:].sum() == 97
    # each table's row count (digest §11.3): e.g. P12A-I = 441, PCT12A-O = 3135
    rows = {}
    for t, *names in census.PRODUCTS:
        rows[t] = rows.get(t, 0) + int(np.prod([b[k].shape[0] for k in names]))
    assert rows["P12A-I"] == 441 and rows["PCT12A-O"] == 3135 and rows["P1"] == 1
    assert sum(rows.values()) == 4151


def test_sf1_bad_input():
    with pytest.raises(ValueError, match="two_or_more"):
        census.sf1(two_or_more="maybe")
    with pytest.raises(ValueError, match="relationship: expected true or false"):
        census.sf1(relationship="no")


def test_hdmm_on_sf1_beats_identity_and_is_deterministic():
    W = census.sf1(relationship=False)
    P = PureDP(1.0)
    sel = selectors.get("hdmm", restarts=1, seed=0, operators=["kron", "marginals"])
    a, b = sel.select(W, P), sel.select(W, P)
    ident = selectors.get("identity").select(W, P)
    ratio = evaluate.error_ratio(W, ident, a, P)
    assert ratio > 2.0  # HDMM beats Identity by a wide margin on SF1 (Table 3: 3.07)
    assert evaluate.expected_error(W, a, P) == evaluate.expected_error(W, b, P)
    # the selection loss is the evaluator's error at sensitivity 1, 2/ε² = 2
    assert 2 * a.loss == pytest.approx(evaluate.expected_error(W, a, P), rel=1e-8)
