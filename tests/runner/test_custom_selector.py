"""The "prototyping new selectors" example (experiments/custom_selector) runs through the
runner, and its selector matches its closed form and an independent dense computation."""

from __future__ import annotations

import importlib
import io
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.domain import Domain
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.runner import load_config, run_config
from mmtoolkit.testing import CHECKS, check_selector

EXAMPLE = Path(__file__).resolve().parents[2] / "experiments" / "custom_selector"


def _example_module(name: str):
    sys.path.insert(0, str(EXAMPLE))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(EXAMPLE))


@pytest.fixture(scope="module")
def example():
    yield from _example_module("budgeted_marginals")


def dense_marginal(sizes, attrs) -> np.ndarray:
    out = np.ones((1, 1))
    for i, n in enumerate(sizes):
        out = np.kron(out, np.eye(n) if i in attrs else np.ones((1, n)))
    return out


@pytest.mark.parametrize("privacy, p", [(ZCDP(0.5), 2), (PureDP(1.0), 1)])
def test_weights_are_the_optimal_budget_split(example, privacy, p):
    sizes = [2, 3, 5]
    dom = Domain.from_sizes(sizes)
    W = workloads.marginals(dom, 2)  # {0,1}: 6 cells, {0,2}: 10, {1,2}: 15
    s = example.BudgetedMarginals().select(W, privacy)
    sets = s.metadata["marginals"]
    assert sets == [[0, 1], [0, 2], [1, 2]]
    n = np.array([6.0, 10.0, 15.0])
    w = np.array(s.metadata["weights"])

    # the closed form minimises Err_direct(w) = ||w||_p² · Σ n_S / w_S² (numerical check)
    def direct(x):
        x = np.abs(x)
        return np.linalg.norm(x, p) ** 2 * np.sum(n / x**2)

    best = minimize(direct, np.ones(3), method="Nelder-Mead", options={"xatol": 1e-10})
    np.testing.assert_allclose(w / w.max(), np.abs(best.x) / np.abs(best.x).max(), rtol=1e-4)
    closed = np.sum(n ** (1 / 2)) ** 2 if p == 2 else np.sum(n ** (1 / 3)) ** 3
    assert direct(w) == pytest.approx(closed, rel=1e-12)

    # the evaluator (least squares) against a dense computation, and never above Err_direct
    A = np.vstack([wt * dense_marginal(sizes, a) for wt, a in zip(w, sets)])
    Wd = W.dense()
    sens = np.linalg.norm(A, ord=p, axis=0).max()
    v = privacy.noise_variance(1.0)
    dense_err = v * sens**2 * np.trace(Wd.T @ Wd @ np.linalg.pinv(A.T @ A))
    assert evaluate.expected_error(W, s, privacy) == pytest.approx(dense_err, rel=1e-9)
    assert dense_err <= v * closed * (1 + 1e-12)
    uniform = example.BudgetedMarginals(split="uniform").select(W, privacy)
    assert evaluate.expected_error(W, uniform, privacy) > dense_err


def test_bad_input(example):
    with pytest.raises(ValueError, match="split must be 'optimal' or 'uniform'"):
        example.BudgetedMarginals(split="half")
    with pytest.raises(ValueError, match="needs a union of marginals.*Prefix"):
        example.BudgetedMarginals().select(workloads.prefix(8), ZCDP(0.5))


def test_compare_config_runs_through_the_runner(tmp_path):
    cfg = load_config(EXAMPLE / "compare.yaml")
    assert cfg.column("Budgeted").selector == "budgeted_marginals:BudgetedMarginals"
    result = run_config(cfg, tmp_path, progress=io.StringIO(), quick=True)
    assert (
        result.ok
        and result.csv_path == tmp_path / "quick" / "examples" / "custom_selector.quick.csv"
    )
    row = "Adult 1-way"
    values = {c.column: c.ours for c in result.cells}
    # the published ResidualPlanner / SVD-bound values (ResidualPlanner Table 4)
    assert result.cell(row, "ResPlan").within_tol and result.cell(row, "SVDB").within_tol
    # the custom selector's cell is the evaluator's RMSE of its strategy
    mod = sys.modules.get("budgeted_marginals") or importlib.import_module("budgeted_marginals")
    W = load_config(EXAMPLE / "compare.yaml").rows[0].workload.build()
    s = mod.BudgetedMarginals().select(W, ZCDP(0.5))
    assert values["Budgeted"] == pytest.approx(evaluate.rmse(W, s, ZCDP(0.5)), rel=1e-12)
    # ordering: the bound <= every method; the optimal split beats the uniform one
    assert all(values["SVDB"] <= v * (1 + 1e-9) for v in values.values())
    assert values["Budgeted"] < values["Uniform"]
    assert math.isfinite(values["HDMM"])
    assert result.cell(row, "Budgeted").metadata["norm"] == 2
    # the example selector is not registered in the package
    assert "budgeted_marginals" not in selectors.available()


# ============================================================ a selector with its own kind
# experiments/custom_selector/weighted_dct.py: A = diag(w) C, C the orthonormal DCT-II,
# a strategy kind the package does not know (scored and released through the protocol).


@pytest.fixture(scope="module")
def dct_example():
    yield from _example_module("weighted_dct")


def cosine_matrix(n: int) -> np.ndarray:
    """The orthonormal DCT-II from its definition (independent of scipy.fft)."""
    k = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    return np.sqrt(np.where(k == 0, 1.0, 2.0) / n) * np.cos(np.pi * k * (2 * j + 1) / (2 * n))


def dense_scores(Wd, A, privacy):
    """(expected error, per-query variances) by dense pseudo-inverses."""
    p = privacy.norm
    sens = np.linalg.norm(A, ord=p, axis=0).max()
    v = privacy.noise_variance(1.0) * sens**2
    Ginv = np.linalg.pinv(A.T @ A)
    return v * np.trace(Wd.T @ Wd @ Ginv), v * np.einsum("ij,jk,ik->i", Wd, Ginv, Wd)


def _dense(W) -> np.ndarray:
    return W if isinstance(W, np.ndarray) else W.dense()


def _weights(n, zeros=0, seed=0):
    w = np.random.default_rng(seed).uniform(0.2, 2.0, n)
    w[: 2 * zeros : 2] = 0.0
    return w


def test_cosine_matrix_is_scipys_dct():
    n = 64
    C = cosine_matrix(n)
    np.testing.assert_allclose(C @ C.T, np.eye(n), atol=1e-12)
    import scipy.fft

    np.testing.assert_allclose(scipy.fft.dct(np.eye(n), norm="ortho", axis=0), C, atol=1e-12)


@pytest.mark.parametrize("privacy", [ZCDP(0.5), PureDP(1.0)], ids=["zcdp", "puredp"])
@pytest.mark.parametrize("wname", ["prefix", "all_range", "dense_few", "dense_many"])
def test_dct_kind_error_route_against_dense(dct_example, privacy, wname):
    """Both routes of W Cᵀ (rows of W for m ≤ n, cosine blocks + Gram for m > n), a Weighted
    wrapper and zero weights (the workload kept in the span of the measured coefficients)."""
    n = 64
    rng = np.random.default_rng(1)
    C = cosine_matrix(n)
    W = {
        "prefix": workloads.prefix(n),
        "all_range": workloads.all_range(n),
        "dense_few": rng.normal(size=(20, n)),
        "dense_many": rng.normal(size=(150, n)),
    }[wname]
    for zeros, scale in ((0, 1.0), (5, 2.5)):
        w = _weights(n, zeros)
        A = w[:, None] * C
        if zeros:  # W's rows projected onto the measured coefficients (a dense workload)
            W = (_dense(W) @ C.T) * (w != 0) @ C
        Wd = _dense(W)
        strategy = scale * dct_example.WeightedDCT(w)
        total, var = dense_scores(Wd, scale * A, privacy)
        assert evaluate.expected_error(W, strategy, privacy) == pytest.approx(total, rel=1e-9)
        np.testing.assert_allclose(
            evaluate.per_query_variance(W, strategy, privacy), var, rtol=1e-9
        )
        assert evaluate.max_variance(W, strategy, privacy) == pytest.approx(var.max(), rel=1e-9)
        assert evaluate.supports(W, strategy)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 65])
def test_dct_kind_exact_sensitivity_and_gram(dct_example, n):
    w = _weights(n, zeros=1 if n > 2 else 0, seed=n)
    A = w[:, None] * cosine_matrix(n)
    kind = dct_example.WeightedDCT(w)
    np.testing.assert_allclose(kind.colnorm_p(2), (A * A).sum(axis=0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kind.colnorm_p(1), np.abs(A).sum(axis=0), rtol=1e-12)
    assert kind.sensitivity(2) == pytest.approx(np.linalg.norm(A, axis=0).max(), rel=1e-12)
    assert kind.sensitivity(1) == pytest.approx(np.abs(A).sum(axis=0).max(), rel=1e-12)
    np.testing.assert_allclose(kind.dense(), A, atol=1e-13)
    np.testing.assert_allclose(kind.gram().dense(), A.T @ A, atol=1e-13)
    np.testing.assert_allclose(kind.gram().diag(), np.diag(A.T @ A), atol=1e-13)
    assert kind.gram().trace() == pytest.approx(np.trace(A.T @ A), rel=1e-12)
    np.testing.assert_allclose(kind.rownorm_p(2), (A * A).sum(axis=1), rtol=1e-12)


def test_dct_kind_reconstruction_is_the_pseudo_inverse(dct_example):
    from mmtoolkit import mechanism

    n = 64
    w = _weights(n, zeros=4)
    A = w[:, None] * cosine_matrix(n)
    strategy = dct_example.WeightedDCT(w)
    assert strategy.pinv_operator() is not None
    rng = np.random.default_rng(2)
    y, Y = rng.normal(size=n), rng.normal(size=(n, 7))
    P = np.linalg.pinv(A)
    np.testing.assert_allclose(mechanism.reconstruct(strategy, y), P @ y, atol=1e-12)
    np.testing.assert_allclose(mechanism.reconstruct(strategy, Y), P @ Y, atol=1e-12)
    np.testing.assert_allclose(strategy.pinv_operator().dense(), P, atol=1e-12)


def test_dct_selector_monte_carlo_matches_the_evaluator(dct_example):
    from mmtoolkit import mechanism

    n, privacy = 64, ZCDP(0.5)
    W = workloads.prefix(n)
    s = dct_example.WeightedDCTSelector().select(W, privacy)
    x = np.random.default_rng(3).integers(0, 20, size=n).astype(float)
    mc = mechanism.monte_carlo(W, s, x, privacy, releases=2000, rng=np.random.default_rng(4))
    assert mc.expected == pytest.approx(evaluate.expected_error(W, s, privacy), rel=1e-12)
    assert mc.within_ci, (mc.ci, mc.expected)
    assert abs(mc.relative_error) < 0.05
    # per query: 2000 samples of a Gaussian variance estimate, sd ≈ sqrt(2/2000) ≈ 3.2 %
    np.testing.assert_allclose(mc.query_var, mc.expected_var, rtol=0.15)


def test_dct_selector_weights_and_closed_forms(dct_example):
    n, privacy = 256, ZCDP(0.5)
    v = privacy.noise_variance(1.0)
    C = cosine_matrix(n)
    for W in (workloads.prefix(n), workloads.all_range(n)):
        opt = dct_example.WeightedDCTSelector().select(W, privacy)
        uni = dct_example.WeightedDCTSelector(weighting="uniform").select(W, privacy)
        Wd = W.dense()
        d = np.sum((Wd @ C.T) ** 2, axis=0)  # energy of W on every cosine
        w = opt.matrix.weights
        np.testing.assert_allclose(w, (d / d.max()) ** 0.25, rtol=1e-10)
        assert w.max() == 1.0
        err = evaluate.expected_error(W, opt, privacy)
        # the Cauchy–Schwarz bound (attained only with equal column norms) holds strictly
        assert err >= v * np.sum(np.sqrt(d)) ** 2 / n * (1 + 1e-3)
        assert err == pytest.approx(
            v * np.sum(np.sqrt(d)) ** 2 / n * opt.metadata["sens_excess"], rel=1e-9
        )
        # the uniform DCT is orthogonal: sensitivity 1, error ||W||_F² = the identity's
        ident = selectors.get("identity").select(W, privacy)
        assert evaluate.expected_error(W, uni, privacy) == pytest.approx(
            evaluate.expected_error(W, ident, privacy), rel=1e-12
        )
        assert err < 0.2 * evaluate.expected_error(W, uni, privacy)


def test_dct_selector_gives_zero_weight_where_the_workload_has_no_energy(dct_example):
    """The total query is sqrt(n)·c_0: only coefficient 0 is measured, sens² = 1/n, and the
    total's variance is n · σ²/n = σ² (the Gaussian mechanism on the total itself)."""
    n, privacy = 64, ZCDP(0.5)
    W = workloads.total(n)
    s = dct_example.WeightedDCTSelector().select(W, privacy)
    assert s.metadata["measured"] == 1 and s.matrix.weights[0] == 1.0
    assert evaluate.supports(W, s)
    assert evaluate.expected_error(W, s, privacy) == pytest.approx(
        privacy.noise_variance(1.0), rel=1e-12
    )


@pytest.mark.parametrize("m", [10, 100])  # the row route (m ≤ n) and the column route
def test_dct_kind_zero_weights_make_queries_unsupported(dct_example, m):
    from mmtoolkit.linalg import UnsupportedWorkloadError

    n = 64
    w = _weights(n, zeros=3)
    strategy = dct_example.WeightedDCT(w)
    C = cosine_matrix(n)
    rng = np.random.default_rng(5)
    good = rng.normal(size=(m, n)) @ (C * (w != 0)[:, None])  # rows in the measured span
    assert evaluate.supports(good, strategy)
    bad = good.copy()
    bad[m // 2] += 1e-3 * np.linalg.norm(bad[m // 2]) * C[0]  # c_0 is not measured (w_0 = 0)
    assert not evaluate.supports(bad, strategy)
    with pytest.raises(UnsupportedWorkloadError, match=f"query {m // 2} .*unmeasured cosine"):
        evaluate.expected_error(bad, strategy, ZCDP(0.5))
    assert not evaluate.supports(workloads.prefix(n), strategy)


def test_dct_kind_scores_and_releases_at_n_2_16_without_a_dense_array(dct_example):
    """n = 2^16: n² = 2^32 entries is far above MAX_DENSE_ENTRIES, so any dense fallback
    would raise. Eight range queries; values checked against the cosine formula."""
    from mmtoolkit import mechanism
    from mmtoolkit.linalg import MAX_DENSE_ENTRIES, Dense

    n, privacy = 2**16, ZCDP(0.5)
    assert n * n > MAX_DENSE_ENTRIES
    rng = np.random.default_rng(6)
    ranges = [tuple(sorted(rng.integers(0, n, size=2))) for _ in range(7)] + [(100, 163)]
    Wd = np.zeros((len(ranges), n))
    for i, (a, b) in enumerate(ranges):
        Wd[i, a : b + 1] = 1.0
    Wd = Dense(Wd)  # the workload itself: 8 x n
    s = dct_example.WeightedDCTSelector().select(Wd, privacy)
    A = s.matrix
    var = evaluate.per_query_variance(Wd, s, privacy)
    assert evaluate.expected_error(Wd, s, privacy) == pytest.approx(var.sum(), rel=1e-12)
    # the short range [100, 163] against the cosine formula: (W Cᵀ)_ik = Σ_{j∈range} C_kj
    k = np.arange(n)[:, None]
    j = np.arange(100, 164)[None, :]
    Ck = np.sqrt(np.where(k == 0, 1.0, 2.0) / n) * np.cos(np.pi * k * (2 * j + 1) / (2 * n))
    coef = Ck.sum(axis=1)
    sens2 = float(np.max(A.colnorm_p(2)))
    expected = privacy.noise_variance(1.0) * sens2 * np.sum(coef**2 / A.weights**2)
    assert var[-1] == pytest.approx(expected, rel=1e-9)
    # the exact sensitivity at a few columns, from the definition
    cols = np.array([0, 1, 777, n // 2, n - 1])
    Cc = np.sqrt(np.where(k == 0, 1.0, 2.0) / n) * np.cos(
        np.pi * k * (2 * cols[None, :] + 1) / (2 * n)
    )
    np.testing.assert_allclose(
        A.colnorm_p(2)[cols], (A.weights[:, None] ** 2 * Cc**2).sum(0), rtol=1e-9
    )
    # releases: unbiased, with the evaluator's variances (200 releases, 99 % bands)
    x = rng.integers(0, 5, size=n).astype(float)
    answers = mechanism.release(Wd, s, x, privacy, np.random.default_rng(1))
    assert answers.shape == (len(ranges),) and np.all(np.isfinite(answers))
    mc = mechanism.monte_carlo(Wd, s, x, privacy, releases=200, rng=np.random.default_rng(8))
    assert mc.within_ci, (mc.ci, mc.expected)


def test_dct_bad_input(dct_example):
    from mmtoolkit.linalg import Dense

    with pytest.raises(ValueError, match="weighting must be 'optimal' or 'uniform'"):
        dct_example.WeightedDCTSelector(weighting="best")
    with pytest.raises(ValueError, match="non-empty 1-D array of weights"):
        dct_example.WeightedDCT(np.ones((2, 2)))
    with pytest.raises(ValueError, match="non-empty 1-D array of weights"):
        dct_example.WeightedDCT([])
    with pytest.raises(ValueError, match="must be finite"):
        dct_example.WeightedDCT([1.0, np.nan])
    W2 = workloads.marginals(Domain.from_sizes([4, 8]), 2)
    with pytest.raises(ValueError, match="1-D strategy.*one attribute.*sizes \\[4, 8\\]"):
        dct_example.WeightedDCTSelector().select(W2, ZCDP(0.5))
    with pytest.raises(ValueError, match="does not support PureDP"):
        dct_example.WeightedDCTSelector().select(workloads.prefix(8), PureDP(1.0))
    with pytest.raises(ValueError, match="the workload is zero"):
        dct_example.WeightedDCTSelector().select(Dense(np.zeros((2, 8))), ZCDP(0.5))
    with pytest.raises(ValueError, match="disagree on the domain size"):
        evaluate.expected_error(workloads.prefix(8), dct_example.WeightedDCT(np.ones(9)), ZCDP(0.5))


def test_dct_config_runs_through_the_runner(tmp_path):
    cfg = load_config(EXAMPLE / "dct.yaml")
    assert cfg.column("DCT (optimal)").selector == "weighted_dct:WeightedDCTSelector"
    result = run_config(cfg, tmp_path, progress=io.StringIO(), quick=True)
    assert (
        result.ok and result.csv_path == tmp_path / "quick" / "examples" / "weighted_dct.quick.csv"
    )
    values = {c.column: c.ours for c in result.cells}
    assert set(values) == {"SVDB", "HDMM", "RP+", "Identity", "DCT (optimal)", "DCT (uniform)"}
    assert all(math.isfinite(v) for v in values.values())
    mod = sys.modules.get("weighted_dct") or importlib.import_module("weighted_dct")
    W = cfg.rows[0].workload.build()
    s = mod.WeightedDCTSelector().select(W, ZCDP(0.5))
    assert values["DCT (optimal)"] == pytest.approx(evaluate.rmse(W, s, ZCDP(0.5)), rel=1e-12)
    assert values["DCT (uniform)"] == pytest.approx(values["Identity"], rel=1e-12)
    assert all(values["SVDB"] <= v * (1 + 1e-9) for v in values.values())
    assert values["DCT (optimal)"] < values["Identity"]
    assert result.cell(cfg.rows[0].name, "DCT (optimal)").metadata["weighting"] == "optimal"
    assert "weighted_dct" not in selectors.available()


# ============================================================ the conformance kit on both
@pytest.mark.parametrize("params", [{}, {"split": "uniform"}])
def test_budgeted_marginals_passes_check_selector(example, params):
    report = check_selector(example.BudgetedMarginals, params=params)
    assert report.passed == list(CHECKS)
    assert {k for _, k, _ in report.selections} == {"PureDP", "ApproxDP", "ZCDP"}


@pytest.mark.parametrize("params", [{}, {"weighting": "uniform"}])
def test_weighted_dct_passes_check_selector(dct_example, params):
    report = check_selector(dct_example.WeightedDCTSelector, params=params)
    assert report.passed == list(CHECKS)
    assert {k for _, k, _ in report.selections} == {"ApproxDP", "ZCDP"}
