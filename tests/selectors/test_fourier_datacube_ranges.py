"""Fourier and DataCube baselines on range-marginal, full-rank and explicit workloads
(Li & Miklau 2012, §5 "Competing techniques"; Cormode et al. 2013 §4.1; Ding et al. 2011).

Every check compares the implicit selectors with an independent dense computation: the
Sylvester Hadamard matrix ``H = fwht(I)`` and ``numpy.linalg.pinv``.
"""

from __future__ import annotations

import numpy as np
import pytest

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.binary_encoding import BinaryEncoding
from mmtoolkit.domain import Domain
from mmtoolkit.linalg import Dense, Fourier, Identity, Kronecker, Marginals, Total, VStack
from mmtoolkit.linalg.fourier import bit_reverse, downset, fwht
from mmtoolkit.privacy import ApproxDP, PureDP
from mmtoolkit.selectors import NotApplicableError
from mmtoolkit.selectors.datacube import (
    binary_workload,
    bmax,
    fourier_coefficients,
    marginal_keys,
)

PRIV = ApproxDP(0.5, 1e-4, calibration="eigen_design")
DOM = Domain(["a", "b"], [4, 8], numeric=[True, True])  # 2 + 3 bits, 32 cells


def hadamard(n):
    return fwht(np.eye(n))


def dense_coefficients(W, rtol=1e-9):
    """{β: ‖W χ_β‖² / n²} for the non-zero columns of W·H (dense, independent)."""
    Wd = W.dense() if hasattr(W, "dense") else np.asarray(W)
    n = Wd.shape[1]
    d = n.bit_length() - 1
    col = np.sum((Wd @ hadamard(n)) ** 2, axis=0) / n**2  # column j: C-order index j
    beta = bit_reverse(np.arange(n), d)  # C-order position -> bitmask (bit i = attribute i)
    keep = col > rtol * col.max()
    return {int(b): float(c) for b, c in zip(beta[keep], col[keep])}


def dense_error(W, A, priv):
    """v · sens₂(A)² · tr(W (AᵀA)⁺ Wᵀ), all dense."""
    Wd, Ad = W.dense(), A.dense()
    sens = np.sqrt(np.max(np.sum(Ad * Ad, axis=0)))
    return priv.noise_variance(1.0) * sens**2 * np.trace(Wd @ np.linalg.pinv(Ad.T @ Ad) @ Wd.T)


# ------------------------------------------------------------------ encoding
def test_power_of_two_cell_order_is_the_binary_encoding():
    # H_4 ⊗ H_8 = H_32: the row-major order of 4 x 8 cells is the order of 2 + 3 bits
    assert np.array_equal(np.kron(hadamard(4), hadamard(8)), hadamard(32))
    W = workloads.marginals(DOM, 1)
    enc = BinaryEncoding(DOM)
    Wb = enc.marginals([["a"], ["b"]])
    assert np.array_equal(W.dense(), Wb.dense())  # same matrix, same rows, same cells
    d, keys = binary_workload(W, encode=True)
    assert d == 5
    assert keys == {enc.attribute_key(["a"]): 1.0, enc.attribute_key(["b"]): 1.0}
    assert keys == {0b00011: 1.0, 0b11100: 1.0}
    # the Fourier selector gives the same strategy and error on both forms
    S = selectors.get("fourier").select(W, PRIV)
    Sb = selectors.get("fourier").select(Wb, PRIV)
    assert S.matrix.coefficients == Sb.matrix.coefficients
    assert evaluate.expected_error(W, S, PRIV) == pytest.approx(dense_error(W, S.matrix, PRIV))


def test_binary_workload_encode_refuses_non_power_of_two():
    W = workloads.marginals(Domain(["a", "b"], [3, 4]), 1)
    with pytest.raises(ValueError, match="powers of two.*attribute 0 has 3"):
        binary_workload(W, encode=True)
    with pytest.raises(ValueError, match="binary attributes"):  # the strict datacube reading
        binary_workload(workloads.marginals(DOM, 1))


# ------------------------------------------------------------ coefficient sets
@pytest.mark.parametrize("k", [1, 2])
def test_range_marginal_needs_the_marginal_coefficients(k):
    W = workloads.range_marginals(DOM, k)
    d, coef = fourier_coefficients(W)
    assert d == 5
    ref = dense_coefficients(W)
    assert sorted(coef) == sorted(ref)
    np.testing.assert_allclose([coef[b] for b in sorted(ref)], [ref[b] for b in sorted(ref)])
    # AllRange is full rank: the same coefficients as the marginal on the same attributes
    enc = BinaryEncoding(DOM)
    sets = [["a"], ["b"]] if k == 1 else [["a", "b"]]
    assert sorted(coef) == downset([enc.attribute_key(s) for s in sets]).tolist()
    _, attr = fourier_coefficients(W, "attributes")
    assert sorted(attr) == sorted(coef)
    # row space of W ⊆ span of the chosen Hadamard rows (projection residual ~ 0) ...
    Hf = Fourier(d, sorted(coef)).dense()
    Wd = W.dense()
    resid = Wd - (Wd @ Hf.T) @ Hf / 2**d  # the χ rows are orthogonal with norm² 2^d
    assert np.abs(resid).max() < 1e-10
    # ... and no chosen row is orthogonal to it
    assert np.all(np.abs(Wd @ Hf.T).max(axis=0) > 0.5)


def test_rank_deficient_factor_drops_orthogonal_coefficients():
    # width-2 ranges on 8 values: the alternating character sums to 0 on every window
    W = Kronecker([Identity(4), workloads.width_range(8, 2)])
    _, coef = fourier_coefficients(W)
    ref = dense_coefficients(W)
    assert sorted(coef) == sorted(ref)
    assert len(coef) < 32  # genuinely dropped
    _, attr = fourier_coefficients(W, "attributes")
    assert len(attr) == 32  # the attribute reading keeps all 8 local coefficients
    _, full = fourier_coefficients(W, "all")
    assert sorted(full) == list(range(32))


def test_explicit_workloads():
    rng = np.random.default_rng(3)
    # full rank random predicates: the whole Hadamard basis, L2 error = Identity's
    Wf = Dense(rng.integers(0, 2, size=(48, 32)).astype(float))
    assert np.linalg.matrix_rank(Wf.dense()) == 32
    S = selectors.get("fourier").select(Wf, PRIV)
    assert sorted(S.matrix.coefficients) == list(range(32))
    e = evaluate.expected_error(Wf, S, PRIV)
    assert e == pytest.approx(dense_error(Wf, S.matrix, PRIV), rel=1e-9)
    assert e == pytest.approx(evaluate.expected_error(Wf, Identity(32), PRIV), rel=1e-9)
    # an explicit, rank-deficient workload keeps only the non-orthogonal coefficients:
    # dense marginals give the downset of §4.1
    M = workloads.marginals(DOM, 1)
    Wm = Dense(np.vstack([M.dense(), rng.integers(0, 2, size=(1, 4)) @ M.dense()[:4]]))
    _, coef = fourier_coefficients(Wm)
    assert sorted(coef) == downset([0b00011, 0b11100]).tolist()
    assert sorted(coef) == sorted(dense_coefficients(Wm))
    S = selectors.get("fourier").select(Wm, PRIV)
    assert evaluate.expected_error(Wm, S, PRIV) == pytest.approx(
        dense_error(Wm, S.matrix, PRIV), rel=1e-9
    )
    # a tall explicit workload goes through the (guarded) Gram
    Wt = Dense(np.vstack([Wm.dense()] * 3))
    assert sorted(fourier_coefficients(Wt)[1]) == sorted(coef)


@pytest.mark.parametrize("budget", ["uniform", "optimal"])
@pytest.mark.parametrize("make", ["range1", "range2", "predicate"])
def test_dense_vs_implicit_error(make, budget):
    if make == "predicate":
        W = Dense(np.random.default_rng(0).integers(0, 2, size=(20, 32)).astype(float))
    else:
        W = workloads.range_marginals(DOM, int(make[-1]))
    S = selectors.get("fourier", budget=budget).select(W, PRIV)
    assert isinstance(S.matrix, Fourier)
    e = evaluate.expected_error(W, S, PRIV)
    assert e == pytest.approx(dense_error(W, S.matrix, PRIV), rel=1e-9)
    # orthogonal rows spanning W's row space: GLS = the initial recovery, Err = v · loss
    assert e == pytest.approx(PRIV.noise_variance(1.0) * S.loss, rel=1e-9)
    # weighted terms: b scales with w²
    _, c1 = fourier_coefficients(W)
    _, c2 = fourier_coefficients(3.0 * W)
    assert all(c2[b] == pytest.approx(9 * c1[b]) for b in c1)


def test_optimal_budget_beats_uniform_and_all_coefficients_costs_more():
    W = workloads.range_marginals(DOM, 1)
    e = {
        (c, b): evaluate.expected_error(
            W, selectors.get("fourier", coefficients=c, budget=b).select(W, PRIV), PRIV
        )
        for c in ("needed", "all")
        for b in ("uniform", "optimal")
    }
    assert e["needed", "optimal"] < e["needed", "uniform"] < e["all", "uniform"]
    # optimal budgets give zero weight to unneeded coefficients: "all" changes nothing
    assert e["all", "optimal"] == pytest.approx(e["needed", "optimal"], rel=1e-12)
    # every coefficient, uniform = the orthogonal Hadamard basis = Identity under L2
    assert e["all", "uniform"] == pytest.approx(
        evaluate.expected_error(W, Identity(32), PRIV), rel=1e-9
    )


def test_fourier_bad_input():
    with pytest.raises(ValueError, match="power-of-two"):
        selectors.get("fourier").select(workloads.all_range(6), PRIV)
    with pytest.raises(ValueError, match="power-of-two"):
        selectors.get("fourier").select(workloads.marginals(Domain(["a", "b"], [3, 4]), 1), PRIV)
    with pytest.raises(ValueError, match="coefficients must be one of"):
        selectors.get("fourier", coefficients="some")
    with pytest.raises(ValueError, match="budget must be one of"):
        selectors.get("fourier", budget="max")
    with pytest.raises(ValueError, match="single cell"):
        fourier_coefficients(Dense(np.ones((2, 1))))
    with pytest.raises(ValueError, match="must be a Matrix"):
        fourier_coefficients(np.ones((2, 4)))


# ------------------------------------------------------------------ DataCube
@pytest.mark.parametrize("k", [1, 2])
def test_bmax_on_range_marginals_is_bmax_on_the_marginals(k):
    dom = Domain(["a", "b", "c"], [4, 8, 4], numeric=[True, True, True])
    W = workloads.range_marginals(dom, k)
    M = workloads.marginals(dom, k)
    keys = marginal_keys(W, ranges="as_marginals")
    assert keys == marginal_keys(M)
    for p in (1, 2):
        a = bmax(list(keys), (4, 8, 4), p=p)
        b = bmax(list(marginal_keys(M)), (4, 8, 4), p=p)
        assert (a.centroids, a.assignment, a.theta) == (b.centroids, b.assignment, b.theta)
    sel = selectors.get("ding_datacube", ranges="as_marginals")
    S = sel.select(W, PRIV)
    assert (
        S.metadata["cuboids"] == selectors.get("ding_datacube").select(M, PRIV).metadata["cuboids"]
    )
    assert isinstance(S.matrix, Marginals)
    # scored against the real range-marginal workload
    assert evaluate.expected_error(W, S, PRIV) == pytest.approx(
        dense_error(W, S.matrix, PRIV), rel=1e-9
    )


def test_ranges_reading_is_opt_in():
    W = workloads.range_marginals(DOM, 1)
    with pytest.raises(ValueError, match="not a set of marginals.*AllRange"):
        marginal_keys(W)
    with pytest.raises(ValueError, match="not a set of marginals"):
        selectors.get("ding_datacube").select(W, PRIV)
    with pytest.raises(ValueError, match="not a set of marginals"):  # Cormode et al.'s C
        selectors.get("datacube", strategy="C").select(W, PureDP(1.0))
    with pytest.raises(ValueError, match="ranges must be one of"):
        marginal_keys(W, ranges="yes")
    with pytest.raises(ValueError, match="ranges must be one of"):
        selectors.get("ding_datacube", ranges=True)
    # an explicit matrix is still refused: only Kronecker terms are read as cuboids
    with pytest.raises(ValueError, match="not a set of marginals"):
        marginal_keys(Dense(W.dense()), ranges="as_marginals")
    # mixed terms: a total factor stays a total, a range factor becomes the attribute
    T = VStack([Kronecker([workloads.prefix(4), Total(8)]), Kronecker([Total(4), Identity(8)])])
    assert marginal_keys(T, ranges="as_marginals") == {0b01: 1.0, 0b10: 1.0}


def test_terms_on_two_factorisations_are_refused():
    """Marginals on two factorisations of one domain (4 x 8 and 2 x 16) are no set of
    cuboids: a clear refusal, not a failure inside BMAX."""
    W = VStack([Kronecker([Identity(4), Total(8)]), Kronecker([Total(2), Identity(16)])])
    with pytest.raises(NotApplicableError, match="do not share one factorisation"):
        marginal_keys(W)
    with pytest.raises(NotApplicableError, match="do not share one factorisation"):
        selectors.get("ding_datacube").select(W, PRIV)
