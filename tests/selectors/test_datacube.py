"""The datacube selector (I, Q, Q+, F, F+, C, C+) and the fourier selector (Cormode et al. 2013)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mmtoolkit import datasets, evaluate, selectors, workloads
from mmtoolkit.binary_encoding import BinaryEncoding, workload_attribute_sets
from mmtoolkit.linalg import Fourier, Identity, Marginals
from mmtoolkit.privacy import ZCDP, ApproxDP, PureDP
from mmtoolkit.selectors.datacube import FourierEstimate


def all_kway(d, k):
    return Marginals((2,) * d, {a: 1.0 for a in range(1 << d) if bin(a).count("1") == k})


def lemma_42_per_cell(d, k, gaussian=False):
    """Lemma 4.2 (digest §6.3): per-cell variance of F+ on all k-way marginals, ε = 1."""
    if gaussian:  # × σ² per unit: 2^{-2k} (Σ_j √(C(k,j) C(d,j)))²
        return (
            2.0 ** (-2 * k)
            * sum(math.sqrt(math.comb(k, j) * math.comb(d, j)) for j in range(k + 1)) ** 2
        )
    s = sum(math.comb(k, j) ** (1 / 3) * math.comb(d, j) ** (2 / 3) for j in range(k + 1))
    return 2 * 2.0 ** (-2 * k) * s**3


@pytest.mark.parametrize("d,k", [(4, 2), (8, 2), (16, 2), (16, 3)])
def test_fourier_plus_matches_lemma_42(d, k):
    W = all_kway(d, k)
    Fp = selectors.get("datacube", strategy="F", budget="optimal").select(W, PureDP(1.0))
    F = selectors.get("datacube", strategy="F", budget="uniform").select(W, PureDP(1.0))
    m = W.shape[0]
    assert evaluate.expected_error(W, Fp, PureDP(1.0)) / m == pytest.approx(
        lemma_42_per_cell(d, k), rel=1e-9
    )
    # uniform: 2|F|² 2^{-k} per cell (Theorem B.1's variance)
    nF = sum(math.comb(d, j) for j in range(k + 1))
    assert evaluate.expected_error(W, F, PureDP(1.0)) / m == pytest.approx(
        2 * nF**2 / 2**k, rel=1e-9
    )
    if (d, k) == (4, 2):  # E6 totals
        assert evaluate.expected_error(W, Fp, PureDP(1.0)) == pytest.approx(1253.8807, abs=1e-4)
        assert evaluate.expected_error(W, F, PureDP(1.0)) == pytest.approx(1452.0, rel=1e-12)
    if (d, k) == (16, 2):  # E7
        assert evaluate.expected_error(W, Fp, PureDP(1.0)) == pytest.approx(2.22132e6, rel=1e-5)
        assert evaluate.expected_error(W, F, PureDP(1.0)) == pytest.approx(4.50456e6, rel=1e-5)


def test_fourier_plus_gaussian_lemma_42():
    d, k = 8, 2
    W = all_kway(d, k)
    priv = ApproxDP(0.5, 1e-6, calibration="eigen_design")
    Fp = selectors.get("datacube", strategy="F", budget="optimal").select(W, priv)
    per_cell = evaluate.expected_error(W, Fp, priv) / W.shape[0] / priv.noise_variance(1.0)
    assert per_cell == pytest.approx(lemma_42_per_cell(d, k, gaussian=True), rel=1e-9)
    assert Fp.matrix.sensitivity(2) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("privacy", [PureDP(1.0), ZCDP(0.5)])
def test_evaluator_matches_fourier_domain_gls(privacy):
    """Per-cell variances from the evaluator = the GLS variances of FourierEstimate."""
    d = 6
    sets = workload_attribute_sets(d, 1, "Q2", seed=3)
    W = BinaryEncoding(datasets.domain("nltcs") if d == 16 else _binary(d)).marginals(sets)
    v = privacy.noise_variance(1.0)
    for strat in ("Q", "C"):
        S = selectors.get("datacube", strategy=strat, budget="optimal").select(W, privacy)
        assert S.matrix.sensitivity(privacy.norm) == pytest.approx(1.0, rel=1e-12)
        est = FourierEstimate(d)
        for key, lam in S.matrix.weights.items():
            est.add_marginal(key, np.zeros(1 << bin(key).count("1")), v / lam**2)
        pq = evaluate.per_query_variance(W, S, privacy)
        expect = np.concatenate(
            [np.full(1 << bin(k).count("1"), est.cell_variance(k)) for k in sorted(W.weights)]
        )
        np.testing.assert_allclose(pq, expect, rtol=1e-9)


def _binary(d):
    from mmtoolkit.domain import Domain

    return Domain.from_sizes([2] * d)


def test_q_plus_budgets_and_degeneracy_E9():
    W = Marginals((2,) * 5, {0b00011: 1.0, 0b11100: 1.0, 0b00001: 1.0})
    S = selectors.get("datacube", strategy="Q", budget="optimal").select(W, PureDP(1.0))
    lam = S.matrix.weights
    z = sum(2 ** (bin(k).count("1") / 3) for k in lam)
    for k, v in lam.items():
        assert v == pytest.approx(2 ** (bin(k).count("1") / 3) / z, rel=1e-12)
    # equal-size marginals: Q+ budgets = 1/m exactly
    W2 = all_kway(6, 2)
    S2 = selectors.get("datacube", strategy="Q", budget="optimal").select(W2, PureDP(1.0))
    np.testing.assert_allclose(list(S2.matrix.weights.values()), 1 / 15, rtol=1e-12)


def test_identity_and_fourier_selector():
    W = all_kway(5, 2)
    S = selectors.get("datacube", strategy="I").select(W, PureDP(1.0))
    assert isinstance(S.matrix, Identity)
    F1 = selectors.get("fourier").select(W, PureDP(1.0))
    F2 = selectors.get("datacube", strategy="F", budget="uniform").select(W, PureDP(1.0))
    assert isinstance(F1.matrix, Fourier)
    np.testing.assert_allclose(F1.matrix.dense(), F2.matrix.dense())
    assert F1.matrix.shape[0] == 1 + 5 + 10  # unneeded coefficients dropped


def test_budgeted_never_worse_on_nltcs_panels():
    """Optimal ≤ uniform for F (GLS = the initial R, so guaranteed) on the NLTCS workloads."""
    dom = datasets.domain("nltcs")
    enc = BinaryEncoding(dom)
    for variant in ("Q1", "Q2", "Q3"):
        W = enc.marginals(workload_attribute_sets(16, 1, variant, seed=0, fixed=0))
        for priv in (PureDP(1.0), ZCDP(0.5)):
            e = {}
            for budget in ("uniform", "optimal"):
                S = selectors.get("datacube", strategy="F", budget=budget).select(W, priv)
                e[budget] = evaluate.expected_error(W, S, priv)
            assert e["optimal"] <= e["uniform"] * (1 + 1e-12)


def test_bad_input():
    W = workloads.marginals(datasets.domain("adult_datacube"), 1)
    with pytest.raises(ValueError, match="binary attributes.*workclass|attribute 0 has 9 values"):
        selectors.get("datacube", strategy="Q").select(W, PureDP(1.0))
    with pytest.raises(ValueError, match="strategy"):
        selectors.get("datacube", strategy="X")
    with pytest.raises(ValueError, match="budget"):
        selectors.get("datacube", budget="half")
    with pytest.raises(ValueError, match="not a set of marginals"):
        selectors.get("datacube").select(workloads.prefix(8), PureDP(1.0))
    with pytest.raises(ValueError, match="epsilon"):
        selectors.get("datacube").select(all_kway(3, 1), PureDP(0.0))


def test_first_cell_workload_gives_every_cells_variance():
    """experiments/datacube/figures.py scores one cell per marginal: on binary attributes every
    cell of a marginal has the same variance, checked here against the full workload."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "experiments" / "datacube" / "figures.py"
    spec = importlib.util.spec_from_file_location("dc_figures", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    W = BinaryEncoding(_binary(8)).marginals(workload_attribute_sets(8, 2, "Q3", fixed=0))
    W1 = mod.first_cells(W)
    for strat in "IQFC":
        S = selectors.get("datacube", strategy=strat).select(W, PureDP(1.0))
        full = evaluate.per_query_variance(W, S, PureDP(1.0))
        one = evaluate.per_query_variance(W1, S, PureDP(1.0))
        off = 0
        for i, key in enumerate(sorted(W.weights)):
            n = 1 << bin(key).count("1")
            np.testing.assert_allclose(full[off : off + n], one[i], rtol=1e-9)
            off += n
