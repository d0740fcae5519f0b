"""ResidualPlanner (He et al. §4, §6.1, Appendix A): selection, evaluator integration, errors."""

import math

import cvxpy as cp
import numpy as np
import pytest

from mmtoolkit import datasets, evaluate, selectors, workloads
from mmtoolkit.evaluate.dense import DenseRoute
from mmtoolkit.linalg import Dense
from mmtoolkit.linalg.marginals import MarginalsRoute
from mmtoolkit.privacy import ZCDP, ApproxDP, PureDP
from mmtoolkit.selectors.residual_planner.basis import marginal_basis, sub_matrix, sub_pinv
from mmtoolkit.selectors.residual_planner.matrix import ResidualStrategyMatrix
from mmtoolkit.selectors.residual_planner.plan import (
    InfeasibleError,
    select_convex,
    select_max,
    select_sum,
)
from mmtoolkit.selectors.residual_planner.route import ResidualRoute
from mmtoolkit.selectors.residual_planner.workload import (
    ResidualWorkload,
    SubsetTable,
    parse_workload,
)

HALF = ZCDP(0.5)


@pytest.fixture
def appendix():
    """Appendix A: n = (2, 2, 3), workload {Att1}, {Att1, Att2}, {Att2, Att3}."""
    return ResidualWorkload([marginal_basis(n) for n in (2, 2, 3)], [(0,), (0, 1), (1, 2)])


# ------------------------------------------------------------------------ residual basis
def test_sub_and_pinv_match_the_paper():
    assert np.array_equal(sub_matrix(3), [[1, -1, 0], [1, 0, -1]])
    assert np.allclose(sub_pinv(3), np.array([[1, 1], [-2, 1], [1, -2]]) / 3)
    for n in (2, 3, 4, 7):
        S, Sp = sub_matrix(n), sub_pinv(n)
        assert np.allclose(S @ Sp, np.eye(n - 1))  # right inverse (Lemma 1)
        assert np.allclose(Sp, np.linalg.pinv(S))
        assert np.allclose(S @ S.T, np.eye(n - 1) + 1)
        b = marginal_basis(n)
        assert np.allclose(b.whiten @ b.whiten.T, np.eye(n - 1))  # (Sub Subᵀ)^{-1/2} Sub
        assert np.allclose(b.whiten.T @ b.whiten, np.eye(n) - 1.0 / n)


def test_closure_and_subset_table(appendix):
    t = appendix.table
    assert t.closure_sets() == [(), (0,), (1,), (2,), (0, 1), (1, 2)]
    assert t.num_pairs == 2 + 4 + 4
    # the integer-code path and the generic np.unique path agree
    sets = [(0, 3, 7), (1, 2), (3,), ()]
    a = SubsetTable(sets, [3] * 8)
    b = SubsetTable(sets, [3] * 8, codes=False)
    expected = {
        tuple(s[j] for j in range(len(s)) if (m >> j) & 1) for s in sets for m in range(1 << len(s))
    }
    assert a.closure_sets() == sorted(expected, key=lambda s: (len(s), s))
    assert b.closure_sets() == a.closure_sets()
    for (pa, ra, ca), (pb, rb, cb) in zip(a.blocks, b.blocks):
        assert pa == pb and np.array_equal(ra, rb) and np.array_equal(ca, cb)
    # attributes of size 1 have no residual rows: subsets containing them are dropped
    c = SubsetTable([(0, 1)], [1, 3])
    assert c.closure_sets() == [(), (1,)]


def test_appendix_a_closed_form(appendix):
    plan = select_sum(appendix)
    assert plan.value == pytest.approx(21.177878, abs=1e-6)  # T (digest §7)
    expected = [4.806573, 2.656933, 3.564650, 3.757471, 2.300971, 1.878735]
    assert np.allclose(plan.sigma2, expected, atol=1e-6)
    assert plan.pcost() == pytest.approx(1.0)
    assert np.allclose(plan.p(), [1, 1 / 2, 1 / 2, 2 / 3, 1 / 4, 1 / 3])
    assert np.allclose(plan.set_mean_variance(), [2.530110, 1.653351, 1.584042], atol=1e-6)
    assert plan.total_error() == pytest.approx(21.177878, abs=1e-6)
    assert plan.noisy_numbers() == 8  # the minimum (Thm 4.2)
    # v coefficients of the sum of variances: (11/12, 3/2, 5/6, 1, 1, 2)
    b = appendix.bases
    v = appendix.table.accumulate([x.var_res for x in b], [x.var_sum for x in b], appendix.weights)
    assert np.allclose(v, [11 / 12, 3 / 2, 5 / 6, 1, 1, 2])


def test_appendix_a_max_variance(appendix):
    plan = select_max(appendix)
    assert plan.max_variance() == pytest.approx(1.894212, abs=2e-6)
    assert np.allclose(plan.set_mean_variance(), 1.894212, atol=2e-6)
    assert plan.pcost() == pytest.approx(1.0)


def test_closed_form_is_optimal_against_a_convex_solve(appendix):
    # the closed form (§6.1) against cvxpy minimising the total variance at pcost ≤ 1
    rows = appendix.set_rows()
    plan = select_convex(appendix, lambda v: cp.sum(cp.multiply(rows, v)))
    assert plan.value == pytest.approx(select_sum(appendix).value, rel=1e-5)


def test_callable_max_equals_max_objective(appendix):
    plan = select_convex(appendix, lambda v: cp.max(v))
    assert plan.value == pytest.approx(1.894212, rel=1e-5)


def test_weightings_change_the_fairness(appendix):
    eq = select_sum(appendix, "equal")
    # equal weighting minimises Σ_A avgvar(A): compare with a convex solve of that loss
    ref = select_convex(appendix, lambda v: cp.sum(v))
    assert eq.value == pytest.approx(ref.value, rel=1e-5)
    assert np.sum(eq.set_mean_variance() / eq.pcost()) == pytest.approx(eq.value, rel=1e-9)


# --------------------------------------------------------------------- the evaluator
def _routes(W, A):
    return (
        ResidualRoute.build(W, A),
        MarginalsRoute.build(W, A.gram()),
        DenseRoute(W, Dense(A.dense())),
    )


@pytest.mark.parametrize("objective", ["sum", "max"])
def test_evaluator_equals_closed_form_variances(objective):
    W = workloads.marginals_list([2, 2, 3], [[0], [0, 1], [1, 2]])
    s = selectors.get("residual_planner", objective=objective).select(W, HALF)
    plan = s.metadata["plan"]
    per_query = np.repeat(plan.set_mean_variance(), [2, 4, 6])
    assert np.allclose(evaluate.per_query_variance(W, s, HALF), per_query)
    assert evaluate.expected_error(W, s, HALF) == pytest.approx(plan.total_error())
    assert evaluate.max_variance(W, s, HALF) == pytest.approx(plan.max_variance())
    # sens₂² = pcost = 1: v = 1 under ρ = 1/2, and v = 1/(2ρ) otherwise
    assert s.matrix.sensitivity(2) == pytest.approx(1.0)
    assert evaluate.expected_error(W, s, ZCDP(2.0)) == pytest.approx(plan.total_error() / 4)


def test_routes_agree_with_the_dense_route():
    W = workloads.marginals(datasets.domain("synth", n=3, d=4), 2, lower=True)
    A = selectors.get("residual_planner").select(W, HALF).matrix
    D = A.dense()
    assert np.allclose((D * D).sum(axis=0), A.colnorm_p(2))  # constant pcost (Thm 4.3)
    routes = _routes(W, A)
    for r in routes:
        r.check_support()
    traces = [r.trace() for r in routes]
    assert np.allclose(traces, traces[0], rtol=1e-9)
    profiles = [r.profile() for r in routes]
    for p in profiles[1:]:
        assert np.allclose(p, profiles[0], rtol=1e-8)
    # the vectorised marginal path equals the per-term loop on a Kronecker-union workload
    U = workloads.union([workloads.marginal([3] * 4, s) for s in ([0, 1], [2], [])])
    Wm = workloads.marginals_list([3] * 4, [[0, 1], [2], []])
    r1, r2 = ResidualRoute.build(U, A), ResidualRoute.build(Wm, A)
    assert r1._fast() is None and r2._fast() is not None
    assert r1.trace() == pytest.approx(r2.trace())
    assert np.allclose(np.sort(r1.profile()), np.sort(r2.profile()))
    # the gram is the closed form: (AᵀA)⁺ from the plan equals the dense pseudo-inverse
    assert np.allclose(A.gram().dense(), D.T @ D)
    assert np.allclose(A.gram_pinv().dense(), np.linalg.pinv(D.T @ D), atol=1e-10)


def test_residual_route_support_check():
    W = workloads.marginals_list([2, 2, 3], [[0], [0, 1], [1, 2]])
    s = selectors.get("residual_planner").select(W, HALF)
    bad = workloads.marginals_list([2, 2, 3], [[0, 2]])
    assert not evaluate.supports(bad, s)
    with pytest.raises(evaluate.UnsupportedWorkloadError, match="residual"):
        evaluate.rmse(bad, s, HALF)
    ok = workloads.marginals_list([2, 2, 3], [[1], [2], []])
    assert evaluate.supports(ok, s)


def test_large_d_is_scored_without_materialising():
    dom = datasets.domain("synth", n=10, d=40)
    W = workloads.marginals(dom, 2, lower=True)
    s = selectors.get("residual_planner").select(W, HALF)
    assert s.matrix.shape[1] == 10**40
    r = evaluate.rmse(W, s, HALF)
    assert r == pytest.approx(s.metadata["plan"].rmse(), rel=1e-12)
    assert r == pytest.approx(evaluate.svd_bound_rmse(W, HALF), rel=1e-9)  # optimal (Thm 4.2)


# ----------------------------------------------------------------- paper tables
@pytest.mark.parametrize(
    "ds, k, lower, rmse",
    [
        ("adult", 1, False, 3.047),
        ("adult", 3, True, 10.665),
        ("cps", 2, False, 2.035),
        ("cps", 3, True, 2.276),
        ("loans", 3, False, 8.702),
    ],
)
def test_table4_rmse(ds, k, lower, rmse):
    W = workloads.marginals(datasets.domain(ds), k, lower=lower)
    s = selectors.get("residual_planner").select(W, HALF)
    assert evaluate.rmse(W, s, HALF) == pytest.approx(rmse, abs=5e-4)


@pytest.mark.parametrize(
    "ds, k, lower, mv",
    [("adult", 3, True, 253.605), ("cps", 1, False, 4.346), ("loans", 2, False, 52.217)],
)
def test_table5_max_variance(ds, k, lower, mv):
    W = workloads.marginals(datasets.domain(ds), k, lower=lower)
    s = selectors.get("residual_planner", objective="max").select(W, HALF)
    assert evaluate.max_variance(W, s, HALF) == pytest.approx(mv, abs=1.5e-3)


@pytest.mark.parametrize("d, rmse", [(12, 12.3596), (50, 107.258)])
def test_table21_rmse(d, rmse):
    W = workloads.marginals(datasets.domain("synth", n=10, d=d), 3, lower=True)
    s = selectors.get("residual_planner").select(W, HALF)
    assert evaluate.rmse(W, s, HALF) == pytest.approx(rmse, abs=1e-3)


def test_table20_and_22_max_variance():
    for n, d, mv in ((1024, 5, 25.893), (10, 15, 332.769)):
        W = workloads.marginals(datasets.domain("synth", n=n, d=d), 3, lower=True)
        s = selectors.get("residual_planner", objective="max").select(W, HALF)
        assert evaluate.max_variance(W, s, HALF) == pytest.approx(mv, abs=1.5e-3)


# ----------------------------------------------------------------- privacy and params
def test_approx_dp_uses_the_analytic_gaussian():
    W = workloads.marginals_list([2, 2, 3], [[0], [0, 1], [1, 2]])
    priv = ApproxDP(1.0, 1e-6)
    s = selectors.get("residual_planner").select(W, priv)
    plan = s.metadata["plan"]
    sigma2 = plan.scaled_sigma2(priv)
    # the mechanism is μ-GDP with μ = sqrt(pcost): check δ(ε) of its pcost is δ
    pcost = float(np.sum(plan.p() / sigma2))
    assert ZCDP(pcost / 2).gaussian_delta(1.0) == pytest.approx(1e-6, rel=1e-6)
    assert s.loss == pytest.approx(evaluate.expected_error(W, s, priv))


def test_variance_bound_gives_the_needed_privacy_cost():
    W = workloads.marginals_list([2, 2, 3], [[0], [0, 1], [1, 2]])
    s = selectors.get("residual_planner", variance_bound=21.177878 / 2).select(W, HALF)
    assert s.metadata["pcost_needed"] == pytest.approx(2.0, rel=1e-6)
    s = selectors.get("residual_planner", objective="max", variance_bound=1.894212).select(W, HALF)
    assert s.metadata["pcost_needed"] == pytest.approx(1.0, rel=1e-5)


def test_selection_is_deterministic():
    W = workloads.marginals(datasets.domain("cps"), 2)
    a = selectors.get("residual_planner", objective="max").select(W, HALF).metadata["plan"]
    b = selectors.get("residual_planner", objective="max").select(W, HALF).metadata["plan"]
    assert np.array_equal(a.sigma2, b.sigma2)


# ----------------------------------------------------------------------- bad input
def test_bad_input_errors(appendix):
    bases = [marginal_basis(n) for n in (2, 2, 3)]
    with pytest.raises(ValueError, match="outside the domain"):
        ResidualWorkload(bases, [(0, 3)])
    with pytest.raises(ValueError, match="twice"):
        ResidualWorkload(bases, [(1, 1)])
    with pytest.raises(ValueError, match="positive"):
        ResidualWorkload(bases, [(0,)], weights=[0.0])
    with pytest.raises(ValueError, match="variance_bound: must be a number > 0"):
        selectors.get("residual_planner", variance_bound=0.0)
    with pytest.raises(ValueError, match="variance_bound: must be a number > 0"):
        selectors.get("residual_planner", variance_bound=-1.0)
    with pytest.raises(ValueError, match="not installed"):
        select_max(appendix, solver="GUROBI_NOT_HERE")
    with pytest.raises(ValueError, match="not installed"):
        W = workloads.marginals_list([2, 2, 3], [[0]])
        selectors.get("residual_planner", objective="max", solver="MOSEK_NOT_HERE").select(W, HALF)
    with pytest.raises(ValueError, match="objective must be"):
        selectors.get("residual_planner", objective="median")
    with pytest.raises(ValueError, match="weighting"):
        selectors.get("residual_planner", weighting="cubic")
    # an infeasible program: every cell variance ≤ 0.01 at pcost ≤ 1 is impossible
    with pytest.raises(InfeasibleError, match="infeasible"):
        select_convex(appendix, lambda v: (cp.sum(v), [v <= 0.01]))
    with pytest.raises(ValueError, match="not convex"):
        select_convex(appendix, lambda v: -cp.sum(cp.log(v)) * -1)
    W = workloads.marginals_list([2, 2, 3], [[0]])
    with pytest.raises(ValueError, match="does not support PureDP"):
        selectors.get("residual_planner").select(W, PureDP(1.0))
    with pytest.raises(ValueError, match="marginals only"):
        selectors.get("residual_planner").select(
            workloads.prefix_marginals(datasets.domain("synth", n=4, d=2, numeric=True), 1), HALF
        )
    dom = datasets.domain("cps")
    with pytest.raises(ValueError):  # an attribute name outside the domain
        workloads.marginals_list(dom, [["income", "height"]])


def test_table_of_strategy_shape(appendix):
    A = ResidualStrategyMatrix(select_sum(appendix))
    assert A.shape == (8, 12)
    assert math.isclose(A.pcost_bound(), 1.0)


@pytest.mark.parametrize("ds, k, lower", [("adult", 3, True), ("cps", 2, False)])
def test_dual_method_matches_clarabel(ds, k, lower):
    wl = parse_workload(workloads.marginals(datasets.domain(ds), k, lower=lower))
    dual = select_max(wl, solver="dual")
    ref = select_max(wl, solver="CLARABEL")
    assert dual.info["solver"] == "dual" and dual.info["gap"] < 1e-7
    assert ref.info["solver"] == "CLARABEL"
    assert dual.max_variance() == pytest.approx(ref.max_variance(), rel=1e-6)
    assert dual.pcost() == pytest.approx(1.0) and ref.pcost() == pytest.approx(1.0)
    auto = select_max(wl)  # "auto" keeps the certified dual solution
    assert auto.info["solver"] == "dual"
    ecos = select_max(wl, solver="ECOS")
    # the dual solution is optimal up to its certified gap
    assert ecos.max_variance() >= dual.max_variance() * (1 - dual.info["gap"] - 1e-9)
