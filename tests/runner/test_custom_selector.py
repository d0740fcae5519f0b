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

EXAMPLE = Path(__file__).resolve().parents[2] / "experiments" / "custom_selector"


@pytest.fixture(scope="module")
def example():
    sys.path.insert(0, str(EXAMPLE))
    try:
        yield importlib.import_module("budgeted_marginals")
    finally:
        sys.path.remove(str(EXAMPLE))


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
    assert result.ok and result.csv_path == tmp_path / "examples" / "custom_selector.quick.csv"
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
