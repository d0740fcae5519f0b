"""Noise budgeting and GLS recovery (Cormode et al. 2013, §3–§4).

Worked examples from the datacube digest §10 (E1–E11) and independent computations (cvxpy
vs closed form, dense GLS vs the Fourier-domain GLS, Monte Carlo vs analytic variance); the
dense references (grouping, convex program, dense GLS) are in tests/datacube_reference.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from datacube_reference import (
    Grouping,
    column_weights,
    gls_recovery,
    greedy_grouping,
    group_totals,
    privacy_spent,
    solve_budgets,
)

from mmtoolkit import evaluate
from mmtoolkit.linalg import Marginals
from mmtoolkit.linalg.fourier import fwht
from mmtoolkit.privacy import PureDP
from mmtoolkit.selectors import datacube as dc

# Fig. 1(b): marginal on A stacked on the marginal on AB, 3 binary attributes (A, B, C)
Q = np.array(
    [
        [1, 1, 1, 1, 0, 0, 0, 0],
        [0, 0, 0, 0, 1, 1, 1, 1],
        [1, 1, 0, 0, 0, 0, 0, 0],
        [0, 0, 1, 1, 0, 0, 0, 0],
        [0, 0, 0, 0, 1, 1, 0, 0],
        [0, 0, 0, 0, 0, 0, 1, 1],
    ],
    dtype=float,
)
X = np.array([1, 2, 0, 1, 0, 0, 1, 0], dtype=float)
CBRT2 = 2 ** (1 / 3)


def marginal_dense(d: int, key: int) -> np.ndarray:
    """Explicit marginal on bit-set ``key`` (bit i = attribute i, attribute 0 most significant)."""
    out = np.ones((1, 1))
    for i in range(d):
        out = np.kron(out, np.eye(2) if (key >> i) & 1 else np.ones((1, 2)))
    return out


# ------------------------------------------------------------------ E1: the introduction
def test_intro_example_marginals_and_grouping():
    np.testing.assert_array_equal(Q @ X, [4, 1, 3, 1, 0, 1])
    W = Marginals((2, 2, 2), {0b001: 1.0, 0b011: 1.0})  # A; AB
    np.testing.assert_array_equal(W.dense(), Q)
    g = greedy_grouping(Q)
    assert g.exact and g.size == 2
    np.testing.assert_array_equal(g.labels, [0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(g.C, [1, 1])


def test_intro_example_budgets_and_recoveries():
    g = greedy_grouping(Q)
    b = column_weights(np.eye(6))  # R = I
    bk = group_totals(b, g)
    np.testing.assert_array_equal(bk, [2, 4])
    # uniform: Δ1(Q) = 2, every answer has variance 8/ε², total 48
    uni = dc.uniform_budgets(g.C, 1)
    assert 2 * dc.budget_objective(b, uni[g.labels]) == pytest.approx(48.0, rel=1e-12)
    lam, obj = dc.optimal_budgets(bk, g.C, 1)
    np.testing.assert_allclose(lam, [1 / (1 + CBRT2), CBRT2 / (1 + CBRT2)], rtol=1e-12)
    np.testing.assert_allclose(lam, [0.442493, 0.557507], atol=1e-6)
    assert 2 * obj == pytest.approx(4 * (1 + CBRT2) ** 3, rel=1e-12)
    assert 2 * obj == pytest.approx(46.16787, abs=1e-5)
    rows = lam[g.labels]
    assert privacy_spent(Q, rows, 1) == pytest.approx(1.0, rel=1e-12)
    # the "half" recovery: q1 = (y1 + y3 + y4)/2, q3 = (y1 + y3 - y4)/2, ...
    R_half = 0.5 * np.array(
        [
            [1, 0, 1, 1, 0, 0],
            [0, 1, 0, 0, 1, 1],
            [1, 0, 1, -1, 0, 0],
            [1, 0, -1, 1, 0, 0],
            [0, 1, 0, 0, 1, -1],
            [0, 1, 0, 0, -1, 1],
        ]
    )
    np.testing.assert_allclose(R_half @ Q, Q, atol=1e-15)
    half = 2 * dc.budget_objective(column_weights(R_half), rows)
    assert half == pytest.approx(3 * (1 + CBRT2) ** 3, rel=1e-12)
    assert half == pytest.approx(34.62590, abs=1e-5)
    assert 1 - half / 48 == pytest.approx(0.2786, abs=1e-4)  # the paper's "28%"
    # GLS R* with the same budgets: dense, and the shared evaluator on diag(λ) S
    var = 2 / rows**2
    R = gls_recovery(Q, Q, var)
    np.testing.assert_allclose(R @ Q, Q, atol=1e-10)
    cov = R @ np.diag(var) @ R.T
    np.testing.assert_allclose(np.diag(cov), [5.69464, 5.69464] + [4.64102] * 4, atol=1e-5)
    assert np.trace(cov) == pytest.approx(29.95338, abs=1e-5)
    W = Marginals((2, 2, 2), {0b001: 1.0, 0b011: 1.0})
    S = Marginals((2, 2, 2), {0b001: lam[0], 0b011: lam[1]})
    assert evaluate.expected_error(W, S, PureDP(1.0)) == pytest.approx(np.trace(cov), rel=1e-10)
    # Fig. 1(c): the single AB marginal
    AB = Marginals((2, 2, 2), {0b011: 1.0})
    assert evaluate.expected_error(W, AB, PureDP(1.0)) == pytest.approx(16.0, rel=1e-12)


def test_intro_example_gaussian():
    g = greedy_grouping(Q)
    bk = group_totals(np.ones(6), g)
    lam, obj = dc.optimal_budgets(bk, g.C, 2)
    assert obj == pytest.approx((math.sqrt(2) + 2) ** 2, rel=1e-12)  # 11.65685
    assert privacy_spent(Q, lam[g.labels], 2) == pytest.approx(1.0, rel=1e-12)
    uni = dc.uniform_budgets(g.C, 2)  # Δ2 = √2: every row gets λ = 1/√2
    assert dc.budget_objective(np.ones(6), uni[g.labels]) == pytest.approx(12.0, rel=1e-12)


# ------------------------------------------------------------------------ E3: groupings
def test_grouping_numbers():
    assert greedy_grouping(np.eye(8)).size == 1
    d = 4
    H = fwht(np.eye(1 << d)) / 2 ** (d / 2)
    g = greedy_grouping(H)
    assert g.size == 16 and g.exact
    np.testing.assert_allclose(g.C, 2 ** (-d / 2))
    # complete binary tree over 8 leaves, rows level by level: log2(8) + 1 groups
    tree = [np.ones(8)]
    for size in (4, 2, 1):
        for s in range(0, 8, size):
            r = np.zeros(8)
            r[s : s + size] = 1
            tree.append(r)
    g = greedy_grouping(np.array(tree))
    assert g.size == 4 and g.exact
    # a row with two magnitudes breaks the grouping property
    assert not greedy_grouping(np.array([[1.0, 2.0], [1.0, 1.0]])).exact


# ---------------------------------------------- Thm 3.4: closed form = the convex program
def random_grouped(rng, d=4, groups=4):
    """Rows: c_k × (the rows of a random marginal); b constant within a group."""
    keys = rng.choice(np.arange(1, 1 << d), size=groups, replace=False)
    blocks, labels, C, b = [], [], [], []
    for k, key in enumerate(keys):
        c = rng.uniform(0.3, 3.0)
        M = c * marginal_dense(d, int(key))
        blocks.append(M)
        labels += [k] * M.shape[0]
        C.append(c)
        b += [rng.uniform(0.1, 5.0)] * M.shape[0]
    return np.vstack(blocks), np.array(labels), np.array(C), np.array(b)


@pytest.mark.parametrize("norm", [1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_form_equals_cvxpy(norm, seed):
    rng = np.random.default_rng(seed)
    S, labels, C, b = random_grouped(rng)
    g = greedy_grouping(S)
    assert g.exact
    grouping = Grouping(labels, C, True)
    lam, obj = dc.optimal_budgets(group_totals(b, grouping), C, norm)
    lam_cvx, obj_cvx = solve_budgets(S, b, norm)
    assert obj == pytest.approx(obj_cvx, rel=1e-6)
    # the optimum is unique (strictly convex objective), so the budgets agree too; near the
    # optimum the objective is flat (error ~ δ²), so the solver's budgets are only ~1e-4 exact
    np.testing.assert_allclose(lam_cvx, lam[labels], rtol=1e-3)
    assert dc.budget_objective(b, lam[labels]) == pytest.approx(obj, rel=1e-12)
    assert privacy_spent(S, lam[labels], norm) == pytest.approx(1.0, rel=1e-12)
    # optimal never worse than uniform
    uni = dc.uniform_budgets(C, norm)
    assert obj <= dc.budget_objective(b, uni[labels]) * (1 + 1e-12)


@pytest.mark.parametrize("norm", [1, 2])
def test_closed_form_only_feasible_when_b_not_consistent(norm):
    rng = np.random.default_rng(5)
    S, labels, C, _ = random_grouped(rng)
    b = rng.uniform(0.1, 5.0, size=S.shape[0])  # R not consistent with the grouping
    grouping = Grouping(labels, C, True)
    lam, _ = dc.optimal_budgets(group_totals(b, grouping), C, norm)
    grouped = dc.budget_objective(b, lam[labels])
    _, best = solve_budgets(S, b, norm)
    assert privacy_spent(S, lam[labels], norm) <= 1 + 1e-12
    assert grouped >= best * (1 - 1e-6)


def test_fourier_intro_d4_all_2way_E6():
    # F+ on all 2-way marginals, d = 4: 2 (Σ_β a_β^{1/3})³ = 1253.8807, F uniform 1452
    keys = {a: 1.0 for a in range(16) if bin(a).count("1") == 2}
    F, b = dc.fourier_b(keys)
    assert F.size == 11
    lam, obj = dc.optimal_budgets(b, np.ones(F.size), 1)
    # b is per unit of R in unnormalised form; total variance over all cells:
    assert 2 * obj == pytest.approx(1253.8807, abs=1e-4)
    uni = dc.uniform_budgets(np.ones(F.size), 1)
    assert 2 * dc.budget_objective(b, uni) == pytest.approx(1452.0, rel=1e-12)


def test_scale_invariance_E8():
    g = greedy_grouping(Q)
    b = np.ones(6)
    _, base = dc.optimal_budgets(group_totals(b, g), g.C, 1)
    c = 3.7  # scale group 2's rows of S by c and R's columns by 1/c
    C2 = g.C * np.array([1.0, c])
    b2 = b / np.where(g.labels == 1, c * c, 1.0)
    _, scaled = dc.optimal_budgets(group_totals(b2, g), C2, 1)
    assert scaled == pytest.approx(base, rel=1e-12)


# ------------------------------------------------------------------------- GLS recovery
def test_fourier_gls_equals_dense_gls_and_monte_carlo():
    rng = np.random.default_rng(3)
    d = 4
    raw = {0b0011: 0.5, 0b0110: 0.3, 0b1100: 0.2, 0b0001: 0.7}
    strat = {k: v / sum(raw.values()) for k, v in raw.items()}  # fractions: Σ λ = 1
    S = np.vstack([marginal_dense(d, k) for k in strat])
    var = np.concatenate(
        [np.full(1 << bin(k).count("1"), 2.0 / lam**2) for k, lam in strat.items()]
    )
    work = [0b0001, 0b0010, 0b0011, 0b0100]
    Qw = np.vstack([marginal_dense(d, k) for k in work])
    R = gls_recovery(Qw, S, var)
    x = rng.integers(0, 5, size=1 << d).astype(float)
    noise = rng.normal(size=(S.shape[0], 2)) * np.sqrt(var)[:, None]
    y = S @ x[:, None] + noise
    est = dc.FourierEstimate(d)
    off = 0
    for k, lam in strat.items():
        n = 1 << bin(k).count("1")
        est.add_marginal(k, y[off : off + n], 2.0 / lam**2)
        off += n
    dense_out = R @ y
    cov = R @ np.diag(var) @ R.T
    off = 0
    for k in work:
        n = 1 << bin(k).count("1")
        np.testing.assert_allclose(est.marginal(k), dense_out[off : off + n], rtol=1e-10)
        np.testing.assert_allclose(est.cell_variance(k), np.diag(cov)[off : off + n], rtol=1e-10)
        off += n
    # the shared evaluator on diag(λ) S agrees
    W = Marginals((2,) * d, {k: 1.0 for k in work})
    pq = evaluate.per_query_variance(W, Marginals((2,) * d, strat), PureDP(1.0))
    order = sorted(work)
    expect = np.concatenate([np.full(1 << bin(k).count("1"), est.cell_variance(k)) for k in order])
    np.testing.assert_allclose(pq, expect, rtol=1e-9)
    # Monte Carlo: 20000 draws of the GLS estimate of marginal 0b0011
    draws = rng.normal(size=(S.shape[0], 20000)) * np.sqrt(var)[:, None]
    mc = dc.FourierEstimate(d)
    off = 0
    for k, lam in strat.items():
        n = 1 << bin(k).count("1")
        mc.add_marginal(k, draws[off : off + n], 2.0 / lam**2)
        off += n
    emp = mc.marginal(0b0011).var(axis=1)
    np.testing.assert_allclose(emp, est.cell_variance(0b0011), rtol=0.05)


def test_fourier_estimate_rejects_unsupported_marginal():
    est = dc.FourierEstimate(3)
    est.add_marginal(0b011, np.ones(4), 1.0)
    with pytest.raises(ValueError, match="do not support marginal"):
        est.marginal(0b101)


# -------------------------------------------------------------------------- consistency
def _unit_variance_estimate(d, noisy):
    """The least-squares consistency step (§3.3/§4.3, p = 2): GLS with unit variances."""
    est = dc.FourierEstimate(d)
    for k, y in noisy.items():
        est.add_marginal(k, y, 1.0)
    return {k: est.marginal(k) for k in noisy}


def test_least_squares_consistency_matches_dense():
    rng = np.random.default_rng(7)
    d = 4
    keys = [0b0011, 0b0110, 0b0101, 0b0001]
    x = rng.integers(0, 10, size=1 << d).astype(float)
    noisy = {k: marginal_dense(d, k) @ x + rng.laplace(size=1 << bin(k).count("1")) for k in keys}
    out = _unit_variance_estimate(d, noisy)
    # dense reference: project the stacked noisy answers onto the column space of Q
    Qs = np.vstack([marginal_dense(d, k) for k in keys])
    q = np.concatenate([noisy[k] for k in keys])
    ref = Qs @ np.linalg.lstsq(Qs, q, rcond=None)[0]
    np.testing.assert_allclose(np.concatenate([out[k] for k in keys]), ref, atol=1e-10)
    # consistent: all from one x'
    xp = np.linalg.lstsq(Qs, np.concatenate([out[k] for k in keys]), rcond=None)[0]
    np.testing.assert_allclose(Qs @ xp, np.concatenate([out[k] for k in keys]), atol=1e-9)


def test_consistency_error_at_most_doubles_E10():
    rng = np.random.default_rng(11)
    d = 3
    keys = [0b001, 0b011, 0b110]
    x = rng.integers(0, 10, size=1 << d).astype(float)
    true = {k: marginal_dense(d, k) @ x for k in keys}
    noisy = {k: true[k] + rng.laplace(scale=2.0, size=true[k].size) for k in keys}
    out = _unit_variance_estimate(d, noisy)

    def err(ans):
        return np.linalg.norm(np.concatenate([ans[k] - true[k] for k in keys]), 2)

    assert err(out) <= 2 * err(noisy) + 1e-6


# ------------------------------------------------------------------------- bad input
def test_bad_input():
    with pytest.raises(ValueError, match="norm"):
        dc.optimal_budgets([1.0], [1.0], 3)
    with pytest.raises(ValueError, match="non-negative"):
        dc.optimal_budgets([-1.0], [1.0], 1)
    with pytest.raises(ValueError, match="C_k"):
        dc.optimal_budgets([1.0], [0.0], 1)
    for norm in (1, 2):  # no group: nothing to divide the budget among
        with pytest.raises(ValueError, match="at least one group"):
            dc.uniform_budgets([], norm)
    with pytest.raises(ValueError, match="outside the domain"):
        dc.FourierEstimate(3).add_marginal(8, np.ones(2), 1.0)
    with pytest.raises(ValueError, match="variance: must be a number > 0"):
        dc.FourierEstimate(3).add_marginal(1, np.ones(2), 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        PureDP(0.0)
    with pytest.raises(ValueError, match="epsilon"):
        PureDP(-1.0)
