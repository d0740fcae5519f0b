"""Selecting the noise scales σ²_A of the base mechanisms (ResidualPlanner §4.4, §6.1, §7.5;
Thm 4.2-4.4, 7.1-7.2): :class:`ResidualPlan` (at pcost = 1), :func:`select_sum` (closed
form), :func:`select_max` (a convex program) and :func:`select_convex` (a user's loss).
User guide: docs/algorithms/residual-planner.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...checks import check_option
from ...linalg import TooLargeError
from ...privacy import ZCDP, ApproxDP, Privacy
from .workload import ResidualWorkload

#: Default solver: "auto" (:func:`select_max`; CLARABEL for user losses, digest pitfall 9).
DEFAULT_SOLVER = "auto"
#: Relative duality gap below which a max-variance solution is accepted (certified).
DUAL_GAP_RTOL = 1e-7
#: Largest number of per-row variance constraints built for a max-variance program.
MAX_CONSTRAINT_ROWS = 5_000_000
#: Weightings of the sum objective (§6.1): importance of a set relative to its total variance.
WEIGHTINGS = ("total", "equal", "sqrt")


class InfeasibleError(ValueError):
    """The convex selection program is infeasible or unbounded."""


class ResidualPlan:
    """A workload, its closure and the σ²_A of every base mechanism (at pcost = 1 unless
    stated): the selected ResidualPlanner(+) mechanism."""

    def __init__(self, workload: ResidualWorkload, sigma2, objective: str = "", value=None):
        self.workload = workload
        self.table = workload.table
        s = np.asarray(sigma2, dtype=float).ravel()
        if s.shape != (self.table.num_closure,):
            raise ValueError(
                f"sigma2 needs one value per closure set ({self.table.num_closure}), got {s.size}"
            )
        if not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ValueError("every σ²_A must be positive and finite")
        self.sigma2 = s
        self.objective = objective
        self.value = value
        self.info: dict = {}
        self._rows = None  # row_constraints(workload), built on first use
        # measurements' index (a measurements._Layout; that module imports this one), on first use
        self._measurement_layout: Any = None

    @property
    def bases(self):
        return self.workload.bases

    @property
    def sizes(self):
        return self.workload.sizes

    def closure_sets(self) -> list[tuple[int, ...]]:
        return self.table.closure_sets()

    def p(self) -> np.ndarray:
        """``p_A = Π_{i∈A} β_i`` (Thm 4.3 / 7.1)."""
        return self.table.closure_product([b.beta for b in self.bases])

    def dims(self) -> np.ndarray:
        """Number of rows of ``R_A``: ``Π_{i∈A}(n_i - 1)``."""
        return self.table.closure_product([b.n - 1 for b in self.bases])

    def noisy_numbers(self) -> int:
        """``Σ_A Π_{i∈A}(n_i - 1)``: the minimum number of noisy answers (Thm 4.2)."""
        return int(round(float(np.sum(self.dims()))))

    def pcost(self) -> float:
        """``Σ_A p_A / σ²_A`` (Thm 4.3; for general attributes the Thm 7.1 composition bound)."""
        return float(np.sum(self.p() / self.sigma2))

    def scaled_sigma2(self, privacy: Privacy) -> np.ndarray:
        """σ²_A calibrated to ``privacy`` (ZCDP(ρ): pcost = 2ρ; ApproxDP: the analytic
        Gaussian, exact since the mechanism is μ-GDP with μ = sqrt(pcost); §2.1)."""
        if not isinstance(privacy, (ZCDP, ApproxDP)):
            raise ValueError(
                f"ResidualPlanner adds Gaussian noise: privacy must be ZCDP or ApproxDP, "
                f"got {privacy!r}"
            )
        return self.sigma2_at(privacy.noise_variance(1.0))

    def sigma2_at(self, unit_variance: float) -> np.ndarray:
        """σ²_A of Gaussian noise of variance ``unit_variance`` at sensitivity 1."""
        return self.sigma2 / self.pcost() * unit_variance

    def normalized(self) -> ResidualPlan:
        """The same plan rescaled to pcost = 1."""
        out = ResidualPlan(self.workload, self.sigma2 / self.pcost(), self.objective, self.value)
        out.info = dict(self.info)
        out._rows = self._rows
        return out

    def set_sum_variance(self, sigma2=None) -> np.ndarray:
        """Sum of the variances of every set's queries (Thm 7.2 "SoV"), unweighted."""
        s = self.sigma2 if sigma2 is None else sigma2
        b = self.bases
        return self.table.per_set([x.var_res for x in b], [x.var_sum for x in b], s)

    def set_mean_variance(self, sigma2=None) -> np.ndarray:
        """Average query variance of every set (the common cell variance for marginals,
        Thm 4.4)."""
        return self.set_sum_variance(sigma2) / self.workload.set_rows()

    def total_error(self, sigma2=None) -> float:
        """Weighted total variance ``Σ_Ã θ²_Ã SoV(Ã)`` (the evaluator's expected error)."""
        return float(np.dot(self.workload.weights, self.set_sum_variance(sigma2)))

    def rmse(self, sigma2=None) -> float:
        return math.sqrt(self.total_error(sigma2) / self.workload.num_queries())

    def max_variance(self, sigma2=None) -> float:
        """Largest weighted query variance ``max θ²_Ã Var(q)`` over every workload query."""
        s = self.sigma2 if sigma2 is None else sigma2
        if self._rows is None:
            self._rows = row_constraints(self.workload)
        return float(np.max(self._rows @ s))


def row_constraints(workload: ResidualWorkload):
    """Sparse ``M``, ``(M σ²)_r`` the weighted variance of query-row class ``r`` that can be a worst
    case (Thm 4.4, 7.2; :meth:`AttributeBasis.worst_profiles`): ``max(M σ²)`` is exact."""
    import scipy.sparse as sp

    table = workload.table
    bases = workload.bases
    if workload.all_marginal:
        inside = [b.beta for b in bases]  # h = 1 - 1/n on every cell
        outside = [1.0 / (b.n * b.n) for b in bases]
        return table.sparse_matrix(inside, outside, set_factor=workload.weights)
    profiles = [b.worst_profiles() for b in bases]
    count = sum(math.prod(len(profiles[i]) for i in s) for s in workload.sets)
    if count > MAX_CONSTRAINT_ROWS:
        raise TooLargeError(
            f"the per-row variance constraints would have {count} rows "
            f"(> MAX_CONSTRAINT_ROWS = {MAX_CONSTRAINT_ROWS})"
        )
    # vectorised over the sets with the same number of profiles at each position
    d, kmax = len(bases), table.kmax
    counts = np.array([len(pr) for pr in profiles] + [1])
    prof = np.ones((d + 1, int(counts.max()), 2))  # row d: padding (a factor of 1)
    for i, pr in enumerate(profiles):
        prof[i, : len(pr)] = pr
    P = table.padded
    # pidx[j, pattern]: the closure row of set j's subset keeping the pattern (-1: none)
    pidx = np.full((len(table.lens), 1 << kmax), -1, dtype=np.int64)
    for pat, sets, cidx in table.blocks:
        pidx[sets, pat] = cidx
    if kmax:
        shapes, group = np.unique(counts[P], axis=0, return_inverse=True)
    else:  # only the 0-way total
        shapes, group = np.zeros((1, 0), dtype=np.int64), np.zeros(len(P), dtype=np.int64)
    r_all, c_all, v_all = [], [], []
    row0 = 0
    for g, shape in enumerate(shapes):
        J = np.nonzero(group.ravel() == g)[0]
        combos = np.indices(tuple(int(c) for c in shape)).reshape(kmax, -1).T
        if not kmax:
            combos = np.zeros((1, 0), dtype=np.int64)
        ncombo = len(combos)
        rows = row0 + np.arange(len(J))[:, None] * ncombo + np.arange(ncombo)[None, :]
        for pat in range(1 << kmax):
            c = pidx[J, pat]
            ok = c >= 0
            if not ok.any():
                continue
            coef = np.repeat(workload.weights[J[ok], None], ncombo, axis=1)
            for pos in range(kmax):
                att = P[J[ok], pos]
                coef *= prof[att[:, None], combos[None, :, pos], 0 if (pat >> pos) & 1 else 1]
            r_all.append(rows[ok].ravel())
            c_all.append(np.repeat(c[ok], ncombo))
            v_all.append(coef.ravel())
        row0 += len(J) * ncombo
    return sp.csr_matrix(
        (np.concatenate(v_all), (np.concatenate(r_all), np.concatenate(c_all))),
        shape=(row0, table.num_closure),
    )


def select_sum(workload: ResidualWorkload, weighting: str = "total") -> ResidualPlan:
    """Closed form for the weighted sum of variances (§6.1, Lemma 2; digest §2.6) at pcost 1;
    ``weighting``: ``"total"``, ``"equal"`` or ``"sqrt"``."""
    check_option(weighting, "weighting", WEIGHTINGS)
    table = workload.table
    rows = workload.set_rows()
    imp = workload.weights.copy()
    if weighting == "equal":
        imp = imp / rows
    elif weighting == "sqrt":
        imp = imp / np.sqrt(rows)
    b = workload.bases
    v = table.accumulate([x.var_res for x in b], [x.var_sum for x in b], set_factor=imp)
    p = table.closure_product([x.beta for x in b])
    root = np.sqrt(v * p)
    T = float(np.sum(root)) ** 2
    sigma2 = np.sqrt(T) * np.sqrt(p / v)
    return ResidualPlan(workload, sigma2, objective=f"sum:{weighting}", value=T)


def check_solver(solver, allow_dual: bool = False) -> str:
    """The solver name for ``solver``: ``"auto"``, ``"dual"`` (``allow_dual``: the max-variance
    program only) or an installed cvxpy solver (ValueError naming the valid ones otherwise)."""
    if not isinstance(solver, str):
        raise ValueError(f"solver must be a cvxpy solver name, 'auto' or 'dual', got {solver!r}")
    name = solver.upper()
    if name == "AUTO":
        return "AUTO" if allow_dual else "CLARABEL"
    if name == "DUAL":
        if not allow_dual:
            raise ValueError("solver 'dual' applies to the max-variance objective only")
        return name
    import cvxpy as cp

    installed = cp.installed_solvers()
    if name not in installed:
        raise ValueError(
            f"solver {solver!r} is not installed: give 'auto', 'dual' or an installed cvxpy "
            f"solver ({', '.join(installed)})"
        )
    return name


def _solve(problem, solver: str, what: str) -> None:
    import cvxpy as cp

    try:
        problem.solve(solver=solver)
    except cp.error.SolverError as exc:
        raise InfeasibleError(f"{what}: solver {solver} failed ({exc})") from exc
    if problem.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise InfeasibleError(f"{what} is infeasible (solver {solver}: {problem.status})")
    if problem.status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE):
        raise InfeasibleError(f"{what} is unbounded (solver {solver}: {problem.status})")
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise InfeasibleError(f"{what}: solver {solver} returned status {problem.status}")


def _dual_rounds(M, p, lam, rounds: int = 8):
    """The max-variance program by its concave dual ``g(λ)`` (scipy L-BFGS-B, λ ≥ 0; guide page),
    from ``lam``; returns ``(x, upper bound, lower bound, λ)``."""
    from scipy.optimize import Bounds, minimize

    MT = M.T.tocsr()

    def xof(lam):
        return np.sqrt(p / np.maximum(MT @ lam, 1e-300))

    def negdual(lam):
        c = np.maximum(MT @ lam, 1e-300)
        return -(2.0 * np.sum(np.sqrt(p * c)) - lam.sum()), -(M @ np.sqrt(p / c) - 1.0)

    best_x, best_P, D = None, np.inf, -np.inf
    for _ in range(rounds):
        res = minimize(
            negdual,
            lam,
            jac=True,
            method="L-BFGS-B",
            bounds=Bounds(0.0, np.inf),
            options={"maxiter": 5000, "ftol": 1e-16, "gtol": 1e-13, "maxcor": 30},
        )
        lam = res.x
        D = max(D, -float(res.fun))
        x = xof(lam)
        x = x / float(np.max(M @ x))
        P = float(np.dot(p, 1.0 / x))
        if P < best_P:
            best_x, best_P = x, P
        if (best_P - D) <= DUAL_GAP_RTOL * best_P:
            break
    return best_x, best_P, D, lam


def _dual_value(M, p, lam) -> float:
    """``g(λ) = 2 Σ_A sqrt(p_A (Mᵀλ)_A) - 1ᵀλ``: for any ``λ ≥ 0`` a lower bound of
    ``min Σ p_A/x_A s.t. Mx ≤ 1`` (weak duality)."""
    lam = np.clip(np.asarray(lam, dtype=float).ravel(), 0.0, None)
    return float(2.0 * np.sum(np.sqrt(p * np.maximum(M.T @ lam, 0.0))) - lam.sum())


def _inner_dual(sub, p, lam):
    if lam is None:  # x(λ) then has max constraint value ≈ 1
        x1 = np.sqrt(p / np.maximum(np.asarray(sub.sum(axis=0)).ravel(), 1e-300))
        lam = np.full(sub.shape[0], float(np.max(sub @ x1)) ** 2)
    x, _, _, lam = _dual_rounds(sub, p, lam)
    return x, lam, {"solver": "dual"}


def _inner_cvxpy(solver):
    def inner(sub, p, lam):
        import cvxpy as cp

        x = cp.Variable(len(p), nonneg=True)
        rows = sub @ x <= 1.0
        prob = cp.Problem(cp.Minimize(p @ cp.inv_pos(x)), [rows])
        _solve(prob, solver, "the max-variance program")
        xs = np.clip(np.asarray(x.value, dtype=float), 1e-300, None)
        return xs, rows.dual_value, {"solver": solver, "status": prob.status}

    return inner


def _covering_rows(M, v) -> np.ndarray:
    """For every column of ``M`` with a non-zero, the row of largest ``v`` among its
    non-zeros (so that no variable of a restricted program is unbounded)."""
    C = M.tocsc()
    counts = np.diff(C.indptr)
    cols = np.repeat(np.arange(C.shape[1]), counts)
    order = np.lexsort((-v[C.indices], cols))
    first = C.indptr[:-1][counts > 0]
    return np.unique(C.indices[order[first]])


def _max_cuts(M, p, inner):
    """``min Σ_A p_A/x_A s.t. Mx ≤ 1`` by cutting planes (guide page), ``inner(rows, p, λ₀) -> (x,
    λ, info)`` solving each restricted program; returns ``(x, P, relative gap, info)``."""
    M = M.tocsr()
    m, k = M.shape
    batch = max(2 * k, 64)
    if m <= 2 * batch:
        active = np.arange(m)
    else:
        v = M @ np.sqrt(p / np.maximum(np.asarray(M.sum(axis=0)).ravel(), 1e-300))
        top = np.argpartition(-v, batch)[:batch]
        active = np.union1d(top, _covering_rows(M, v))
    lam = None
    best_x, best_P, D, info = None, np.inf, -np.inf, {}
    cut_rounds = 0
    while cut_rounds < 100:
        cut_rounds += 1
        sub = M[active]
        x, lam, info = inner(sub, p, lam)
        lam = np.clip(np.asarray(lam, dtype=float).ravel(), 0.0, None)
        D = max(D, _dual_value(sub, p, lam))
        v = M @ x
        top = float(np.max(v[active]))
        xs = x / float(np.max(v))
        P = float(np.dot(p, 1.0 / xs))
        if P < best_P:
            best_x, best_P = xs, P
        if (best_P - D) <= DUAL_GAP_RTOL * best_P or len(active) == m:
            break
        inside = np.zeros(m, dtype=bool)
        inside[active] = True
        cand = np.nonzero(~inside & (v > top))[0]
        if not len(cand):  # every row holds: polish the restricted program's own gap
            if inner is not _inner_dual:  # a few dual rounds warm-started at its multipliers
                x, _, d_low, lam = _dual_rounds(sub, p, np.where(lam > 0, lam, 0.0), rounds=2)
                D = max(D, d_low)
                xs = x / float(np.max(M @ x))
                P = float(np.dot(p, 1.0 / xs))
                if P < best_P:
                    best_x, best_P = xs, P
                info["polished"] = True
            break
        new = cand[np.argsort(-v[cand])[:batch]]
        merged = np.concatenate([active, new])
        order = np.argsort(merged)
        active = merged[order]
        lam = np.concatenate([lam, np.zeros(len(new))])[order]
    info = {**info, "rows": int(len(active)), "of_rows": int(m), "cut_rounds": cut_rounds}
    return best_x, best_P, (best_P - D) / best_P, info


def select_max(workload: ResidualWorkload, solver: str = DEFAULT_SOLVER) -> ResidualPlan:
    """Minimise the max weighted query variance at pcost = 1 (§4.4; digest §2.5): ``min Σ_A p_A /
    x_A s.t. M x ≤ 1`` (:func:`row_constraints`); ``solver``: cvxpy name, ``"dual"``, ``"auto"``."""
    name = check_solver(solver, allow_dual=True)
    M = row_constraints(workload).tocsr()
    p = workload.table.closure_product([b.beta for b in workload.bases])
    k = len(p)
    cuts = M.shape[0] > 4 * max(2 * k, 64)
    first = {"AUTO": "CLARABEL" if cuts else "DUAL"}.get(name, name)
    inner = _inner_dual if first == "DUAL" else _inner_cvxpy(first)
    xs, _, gap, info = _max_cuts(M, p, inner)
    info["gap"] = gap
    if name == "AUTO" and not cuts and gap > DUAL_GAP_RTOL:
        xs, _, gap, info = _max_cuts(M, p, _inner_cvxpy("CLARABEL"))
        info["gap"] = gap
    # rescale to exact feasibility (solver tolerance) and to pcost = 1
    xs = xs / max(float(np.max(M @ xs)), 1e-300)
    sigma2 = xs * float(np.dot(p, 1.0 / xs))
    plan = ResidualPlan(workload, sigma2, objective="max")
    plan._rows = M
    plan.value = plan.max_variance()
    plan.info = info
    return plan


def select_convex(
    workload: ResidualWorkload, loss: Callable, solver: str = DEFAULT_SOLVER
) -> ResidualPlan:
    """Minimise a user's convex loss of the per-set average query variances at pcost ≤ 1 (§4.4):
    ``loss(v)`` returns a scalar cvxpy expression or ``(expression, constraints)``."""
    import cvxpy as cp

    if not callable(loss):
        raise ValueError(f"objective must be 'sum', 'max' or a callable, got {loss!r}")
    name = check_solver(solver)  # "auto" means CLARABEL here
    table = workload.table
    b = workload.bases
    rows = workload.set_rows()
    Mavg = table.sparse_matrix([x.var_res for x in b], [x.var_sum for x in b], 1.0 / rows)
    p = table.closure_product([x.beta for x in b])
    s = cp.Variable(len(p), pos=True)
    out = loss(Mavg @ s)
    constraints = []
    if isinstance(out, tuple):
        out, constraints = out[0], list(out[1])
    if not isinstance(out, cp.Expression) or out.size != 1:
        raise ValueError("the loss callable must return a scalar cvxpy expression")
    prob = cp.Problem(cp.Minimize(out), [p @ cp.inv_pos(s) <= 1.0, *constraints])
    if not prob.is_dcp():
        raise ValueError("the loss is not convex (the cvxpy problem does not follow DCP rules)")
    _solve(prob, name, "the convex selection program")
    sigma2 = np.clip(np.asarray(s.value, dtype=float), 1e-300, None)
    return ResidualPlan(workload, sigma2, objective="callable", value=float(prob.value))
