"""The dual Newton solver of Program 5.2 (Li et al. 2010) and mm_sdp's use of it."""

import numpy as np
import pytest

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.linalg import Dense
from mmtoolkit.privacy import ApproxDP, PureDP
from mmtoolkit.selectors.base import NotApplicableError
from mmtoolkit.selectors.eigen_design import optimum
from mmtoolkit.selectors.eigen_design.gram import eigen_queries, workload_gram
from mmtoolkit.selectors.eigen_design.mm_sdp import MAX_DUAL_N, program_5_2

EPS_DELTA = ApproxDP(0.5, 1e-4, calibration="eigen_design")
# the solver stops at a certified relative gap ≤ GAP_TOL (1e-9); Clarabel at its default
# relative optimality / feasibility tolerances (1e-8): 1e-6 leaves a factor 10 for both
AGREE = 1e-6


def units(W, A):
    """sens₂(A)² · tr(WᵀW (AᵀA)⁺) through the shared evaluator."""
    return evaluate.expected_error(W, A, EPS_DELTA) / EPS_DELTA.noise_variance()


def _workloads(n):
    rng = np.random.default_rng(n)
    return {
        "prefix": workloads.prefix(n),
        "all range": workloads.all_range(n),
        "width range": workloads.width_range(n, n // 4),  # rank n - n/4 + 1 < n
        "random dense": Dense(rng.normal(size=(n // 2, n))),  # rank n/2
    }


def _agree_with_cvxpy(n):
    for name, W in _workloads(n).items():
        G = workload_gram(W)
        sol = optimum.solve_program_5_2(G)
        sigma, Q = eigen_queries(G)
        _, value = program_5_2(np.sqrt(sigma)[:, None] * Q, "clarabel")
        assert sol.value == pytest.approx(value, rel=AGREE), name
        assert sol.dual <= sol.value and sol.gap <= optimum.GAP_TOL, name


def test_agrees_with_the_cvxpy_route_n16():
    _agree_with_cvxpy(16)


@pytest.mark.slow
@pytest.mark.parametrize("n", [32])  # n = 64: Clarabel takes ~8 min a workload
def test_agrees_with_the_cvxpy_route_large(n):
    _agree_with_cvxpy(n)


def test_reaches_a_gap_below_the_rounding_level_of_the_dual():
    # near the optimum the dual's ascent (~gap²) is below its rounding (~1e-13 relative) while
    # the gap (~the gradient) is not: steps are then accepted on the gradient
    G = workload_gram(workloads.all_range(256))
    assert optimum.solve_program_5_2(G, tol=1e-10).gap <= 1e-10


def test_identity_workload_closed_form():
    # W = I: tr(X⁻¹) with X_jj ≤ 1 has the optimum X = I, value n, dual d = 1
    sol = optimum.solve_program_5_2(np.eye(6))
    assert sol.value == pytest.approx(6.0, rel=1e-12)
    np.testing.assert_allclose(sol.X, np.eye(6), atol=1e-12)
    np.testing.assert_allclose(sol.d, 1.0, rtol=1e-12)


def test_dual_derivatives_match_finite_differences():
    rng = np.random.default_rng(3)
    G = workload_gram(workloads.all_range(10))
    d, v = rng.uniform(0.5, 2.0, 10), rng.normal(size=10)
    point = optimum._Dual(G, d, False, 10)
    h = 1e-6  # central differences: error O(h²·g''') ≈ 1e-12, rounding O(ε/h) ≈ 1e-10
    plus, minus = optimum._Dual(G, d + h * v, False, 10), optimum._Dual(G, d - h * v, False, 10)
    scale = np.abs(point.hess_vec(v)).max()
    assert (plus.value - minus.value) / (2 * h) == pytest.approx(point.grad @ v, rel=1e-7)
    np.testing.assert_allclose((plus.grad - minus.grad) / (2 * h), point.hess_vec(v),
                               atol=1e-7 * scale)  # fmt: skip
    H = np.array([point.hess_vec(e) for e in np.eye(10)])
    np.testing.assert_allclose(point.hess_diag(), np.diag(H), atol=1e-12 * scale)


@pytest.mark.parametrize("n", [7, 8])
def test_persymmetric_eigendecomposition(n):
    B = np.random.default_rng(n).normal(size=(n, n))
    M = B + B.T
    M = M + M[::-1, ::-1]
    lam, U = optimum._eigh(M, True)
    # backward-stable eigh: residuals O(n ε ||M||)
    np.testing.assert_allclose(U.T @ U, np.eye(n), atol=1e-13 * n)
    np.testing.assert_allclose((U * lam) @ U.T, M, atol=1e-13 * n * np.abs(M).max())


def test_unqueried_cells_and_rank_deficiency():
    rng = np.random.default_rng(5)
    W = np.zeros((4, 9))
    W[:, :8] = rng.normal(size=(4, 8))  # rank 4, cell 8 never queried
    sol = optimum.solve_program_5_2(W.T @ W)
    assert sol.gap <= optimum.GAP_TOL
    X = sol.X
    assert X[8, 8] == 1.0 and not X[8, :8].any()
    assert np.diag(X).max() <= 1 + 1e-12
    # the value is tr(G X⁺), computed independently
    assert np.trace(W.T @ W @ np.linalg.pinv(X)) == pytest.approx(sol.value, rel=1e-8)


@pytest.mark.parametrize(
    "workload",
    [workloads.all_range(128), workloads.prefix(128), workloads.width_range(128, 32)],
    ids=["all range", "prefix", "width range"],
)
def test_mm_sdp_optimum_between_the_bound_and_every_selector(workload):
    st = selectors.get("mm_sdp", solver="dual").select(workload, EPS_DELTA)
    meta = st.metadata
    opt = units(workload, st)
    # the evaluator's error is that of the completed strategy: between the certified dual
    # and the solver's objective (completion rows only help)
    assert meta["dual_value"] * (1 - 1e-9) <= opt <= meta["program_value"] * (1 + 1e-9)
    assert meta["duality_gap"] <= optimum.GAP_TOL
    assert opt >= evaluate.svd_bound(workload) * (1 - 1e-9)
    others = ["identity", "hb", "privelet", "greedy_h", "eigen_design", "svd_strategy", "opt0"]
    for name in others:
        other = selectors.get(name).select(workload, EPS_DELTA)
        assert opt <= units(workload, other) * (1 + 1e-9), name


def test_mm_sdp_uses_the_dual_solver_above_the_cvxpy_size():
    W = workloads.all_range(96)
    st = selectors.get("mm_sdp").select(W, EPS_DELTA)  # default max_n = 64 (cvxpy)
    assert st.metadata["solver"] == "dual"
    assert st.metadata["duality_gap"] <= optimum.GAP_TOL
    with pytest.raises(NotApplicableError, match="exceeds the SDP size limit max_n = 64"):
        selectors.get("mm_sdp").select(W, PureDP(1.0))  # the L1 rotation is a cvxpy program
    with pytest.raises(NotApplicableError, match="exceeds the SDP size limit max_n = 32"):
        selectors.get("mm_sdp", solver="dual", max_n=32).select(W, EPS_DELTA)
    assert selectors.get("mm_sdp", solver="dual").params["max_n"] == MAX_DUAL_N
    with pytest.raises(NotApplicableError, match="its rotation .Program 5.3. is a cvxpy program"):
        selectors.get("mm_sdp", solver="dual").select(W, PureDP(1.0))


def _permuted_cases():
    inner = workloads.permuted(workloads.width_range(40, 8), 1)
    return {
        "permuted all range": (workloads.all_range(48), workloads.permuted(
            workloads.all_range(48), 0, legacy=True)),
        "twice permuted width range": (workloads.width_range(40, 8), workloads.permuted(
            inner, 2)),
    }  # fmt: skip


@pytest.mark.parametrize("case", ["permuted all range", "twice permuted width range"])
def test_mm_sdp_solves_a_permuted_workload_on_its_base(case):
    base, W = _permuted_cases()[case]
    st = selectors.get("mm_sdp", solver="dual").select(W, EPS_DELTA)
    meta = st.metadata
    assert meta["solved_unpermuted"] is True and meta["duality_gap"] <= optimum.GAP_TOL
    # the same strategy as the base's, its columns permuted (W = base P, X' = Pᵀ X* P): the
    # same rows, the completion rows in another order
    st_base = selectors.get("mm_sdp", solver="dual").select(base, EPS_DELTA)
    perm = np.array([np.flatnonzero((W.dense()[:, j:j + 1] == base.dense()).all(axis=0))[0]
                     for j in range(W.shape[1])])  # fmt: skip
    rows, rows_base = st.matrix.dense(), st_base.matrix.dense()[:, perm]
    assert rows.shape == rows_base.shape
    np.testing.assert_array_equal(np.unique(rows, axis=0), np.unique(rows_base, axis=0))
    # the direct solve on the permuted Gram: the same optimum, each certified to its gap
    direct = optimum.solve_program_5_2(workload_gram(W))
    assert not direct.persymmetric and optimum.solve_program_5_2(workload_gram(base)).persymmetric
    assert meta["program_value"] == pytest.approx(direct.value, rel=2 * optimum.GAP_TOL)
    # the evaluator's error of the returned strategy: between the certified dual and the
    # objective (completion rows only help), up to the gap
    opt = units(W, st)
    assert meta["dual_value"] * (1 - 1e-9) <= opt <= meta["program_value"] * (1 + 1e-9)
    assert opt == pytest.approx(direct.value, rel=2 * optimum.GAP_TOL)


@pytest.mark.parametrize(
    "workload,split",
    [(workloads.width_range(64, 32), True), (workloads.all_range(64), True),
     (workloads.prefix(64), False)],
    ids=["width-32 range", "all range", "prefix"],
)  # fmt: skip
def test_which_range_grams_get_the_persymmetric_split(workload, split):
    # ranges of one width are closed under the reversal of the domain: J G J = G
    assert optimum.solve_program_5_2(workload_gram(workload)).persymmetric is split


@pytest.mark.parametrize(
    "workload",
    [workloads.all_range(24), workloads.width_range(24, 6),
     workloads.permuted(workloads.prefix(24), 0, legacy=True)],
    ids=["all range", "width range", "permuted prefix"],
)  # fmt: skip
def test_mm_sdp_above_the_dense_guard_returns_the_eigenbasis_form(workload, monkeypatch):
    from mmtoolkit.linalg import OrthoBasis
    from mmtoolkit.linalg import base as linalg_base

    n = workload.shape[1]
    dense = selectors.get("mm_sdp", solver="dual").select(workload, EPS_DELTA)
    reference = units(workload, dense)
    # n x n above the guard (as n = 8192 is at the default limit): the dense route refuses
    monkeypatch.setattr(linalg_base, "MAX_DENSE_ENTRIES", n * n - 1)
    st = selectors.get("mm_sdp", solver="dual").select(workload, EPS_DELTA)
    assert isinstance(st.matrix, OrthoBasis)
    error = units(workload, st)  # the structured route, where the dense one refuses
    monkeypatch.undo()
    # same Gram AᵀA up to the rounding of an n x n eigendecomposition (n ε ||X||, ||X|| ≤ n
    # as X_jj ≤ 1; a safety factor 10)
    X = dense.matrix.gram().dense()
    np.testing.assert_allclose(st.matrix.gram().dense(), X, rtol=0, atol=10 * n * n * 2.2e-16)
    # so the same error: the two routes' traces agree to the rounding of tr(G (AᵀA)⁺),
    # relative n ε κ(AᵀA) on the range of G (a safety factor 100)
    lam = np.linalg.eigvalsh(X)
    lam = lam[lam > 1e-12 * lam.max()]
    assert error == pytest.approx(reference, rel=100 * n * 2.2e-16 * lam.max() / lam.min())


def test_progress_lines(capsys):
    optimum.solve_program_5_2(workload_gram(workloads.all_range(16)), verbose=True, every=0.0)
    err = capsys.readouterr().err
    assert err.startswith("program 5.2 (n = 16): iteration 1, gap ")
    optimum.solve_program_5_2(workload_gram(workloads.all_range(16)))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "G,kw,match",
    [
        (np.ones((2, 3)), {}, "G: expected a non-empty square matrix"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), {}, "G: has non-finite entries"),
        (np.zeros((3, 3)), {}, "G: the workload is all zero"),
        (np.eye(2), {"tol": -1.0}, "tol"),
        (np.eye(2), {"max_iter": 0}, "max_iter"),
    ],
)
def test_bad_input(G, kw, match):
    with pytest.raises(ValueError, match=match):
        optimum.solve_program_5_2(G, **kw)


def test_committed_ratio_to_optimum_table_is_ordered():
    """results/matrix_mechanism/optimum_ratio.csv: no selector below the optimum, the SVD
    bound not above it (n = 128, 1024 and 8192)."""
    import csv
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "results/matrix_mechanism/optimum_ratio.csv"
    with open(path, newline="") as fh:
        cells = [c for c in csv.DictReader(fh) if c["status"] == "ok"]
    assert len(cells) == 96
    gaps = {c["row"]: json.loads(c["metadata"])["duality_gap"] for c in cells
            if c["column"] == "Optimum"}  # fmt: skip
    assert len(gaps) == 12 and max(gaps.values()) <= optimum.GAP_TOL
    for c in cells:
        # an RMSE ratio: the optimum's error is certified within (1 + gap) of the true one,
        # so its RMSE within (1 + gap/2); 1e-12 for the rounding of the ratio itself
        slack = gaps[c["row"]] / 2 + 1e-12
        ratio = float(c["ours"])
        if c["column"] == "Bound":
            assert ratio <= 1 + slack, c
        else:
            assert ratio >= 1 - slack, c
