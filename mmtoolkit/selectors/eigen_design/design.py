"""Eigen-Design's weighting program (Li & Miklau, PVLDB 2012, Program 1 §3.1, Thm 1; §3.5; §4.2;
Program 2 step 4 §3.3): design sets and their costs, Program 1 by a certified dual
multiplicative method (derived here, not in the paper) or cvxpy (:func:`solve_weighting`), the
§4.2 reductions and the completed strategy (:func:`weighted_strategy`).
User guide: docs/algorithms/eigen-design.md.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from ...checks import check_int
from ...linalg import Dense, Haar, OrthoBasis, SymTridiagonal, VStack, as_matrix
from ...linalg.orthobasis import check_orthonormal_rows
from ..base import NotApplicableError

#: The cvxpy solvers Program 1 can be handed to.
CVXPY_SOLVERS = ("clarabel", "scs", "ecos")
SOLVERS = ("dual",) + CVXPY_SOLVERS
DESIGNS = ("eigen", "wavelet", "fourier", "identity")


# ====================================================================== design sets
def design_matrix(design, n: int, sizes=None) -> np.ndarray:
    """A design set as a dense ``n x n`` array of design queries (``wavelet``, ``fourier``,
    ``identity``; Kronecker over ``sizes``, Li & Miklau §5), or a given array or Matrix."""
    if isinstance(design, str):
        if design not in DESIGNS or design == "eigen":
            raise ValueError(
                f"unknown design set {design!r} (valid: {', '.join(DESIGNS[1:])} or a matrix)"
            )
        if sizes is None:
            return _named_design(design, n)
        if math.prod(sizes) != n:
            raise NotApplicableError(
                f"design_sizes {list(sizes)} have {math.prod(sizes)} cells, not {n}"
            )
        out = np.ones((1, 1))
        for size in sizes:
            out = np.kron(out, _named_design(design, size))
        return out
    if sizes is not None:
        raise ValueError("design_sizes applies to the named design sets, not to a given matrix")
    Q = as_matrix(design).dense()
    if Q.shape[1] != n:
        raise NotApplicableError(
            f"the design set has {Q.shape[1]} columns, the workload has {n} cells"
        )
    return Q


def _named_design(design: str, n: int) -> np.ndarray:
    if design == "wavelet":
        return Haar(n).dense()
    if design == "fourier":
        if n & (n - 1):
            raise NotApplicableError(
                f"the fourier (Hadamard) design set needs n a power of 2, got {n}"
            )
        return scipy.linalg.hadamard(n).astype(float)
    return np.eye(n)


def design_costs(G: np.ndarray, Q: np.ndarray, rtol: float = 1e-9) -> np.ndarray:
    """``c_i = diag(Q⁺ᵀ WᵀW Q⁺)`` (Li & Miklau Thm 1); ValueError unless the design rows are
    linearly independent and span every query of W."""
    k, n = Q.shape
    U, s, Vt = np.linalg.svd(Q, full_matrices=False)
    rank = int(np.sum(s > rtol * s.max() * max(k, n)))
    if k > n or rank < k:
        raise ValueError(
            f"the design set must have linearly independent rows (Program 1 / Thm 1 needs a "
            f"basis); got {k} rows of rank {rank}"
        )
    Qp = (Vt.T / s) @ U.T  # Q⁺ (n x k) from the same SVD
    if k < n:  # G restricted outside rowspace(Q), P = VᵀV the projector onto it
        GV = G @ Vt.T
        R = G - GV @ Vt - Vt.T @ (Vt @ G) + Vt.T @ ((Vt @ GV) @ Vt)
        if np.trace(R) > 1e-8 * np.trace(G) or np.abs(R).max() > 1e-8 * np.abs(G).max():
            raise ValueError(
                "the design set does not span the workload: some query has a component "
                "outside the row space of the design queries"
            )
    return np.sum(Qp * (G @ Qp), axis=0)


# ============================================================ Program 1 (the weighting)
@dataclass
class Weighting:
    """Solution of ``min Σ c_i/x_i^p s.t. P_ᵀx ≤ 1``: weights, value, certified lower bound."""

    x: np.ndarray
    value: float
    lower: float
    iterations: int = 0
    solver: str = "dual"
    seconds: float = 0.0
    info: dict = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """Relative duality gap ``(value − lower) / value``."""
        return (self.value - self.lower) / self.value if self.value > 0 else 0.0


def solve_weighting(
    c, P, p: int = 1, solver: str = "dual", tol: float = 1e-7, max_iter: int = 200_000
) -> Weighting:
    """Program 1, ``min Σ_i c_i / x_i^p`` s.t. ``Σ_i x_i P[i, j] ≤ 1``, ``x ≥ 0``, by the certified
    dual method (``tol``: relative gap) or a cvxpy ``solver``; returns a :class:`Weighting`."""
    c = np.asarray(c, dtype=float)
    P = np.asarray(P, dtype=float)
    if p not in (1, 2):
        raise ValueError(f"p must be 1 (L2, u = λ²) or 2 (L1, x = λ), got {p}")
    if c.ndim != 1 or P.ndim != 2 or P.shape[0] != c.size:
        raise ValueError(f"need c of length k and P of shape (k, n); got {c.shape}, {P.shape}")
    if c.size == 0:
        raise ValueError("Program 1 needs at least one design query with a positive cost")
    if np.any(c <= 0) or not np.all(np.isfinite(c)):
        raise ValueError("design costs c must be positive and finite (drop zero costs first)")
    if not np.all(np.isfinite(P)):
        raise ValueError("the design matrix P must be finite")
    if np.any(P < 0) or np.any(P.max(axis=1) <= 0):
        raise ValueError("every design query must touch some cell (P ≥ 0 with non-zero rows)")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r} (valid: {', '.join(SOLVERS)})")
    scale = c.max()
    cs = c / scale
    start = time.perf_counter()
    if solver == "dual":
        out = _dual_multiplicative(cs, P, p, tol, max_iter)
    else:
        out = _cvxpy_weighting(cs, P, p, solver)
    out.value *= scale
    out.lower *= scale
    out.seconds = time.perf_counter() - start
    return out


def _dual_multiplicative(c, P, p, tol, max_iter) -> Weighting:
    """Monotone ascent of the dual bound S(ν) over the simplex by adaptive multiplicative
    steps ``ν ← ν ∘ (g/S)^ρ`` (guide page)."""
    n = P.shape[1]
    b = 1.0 / (p + 1)

    def evaluate(log_nu):
        nu = np.exp(log_nu - log_nu.max())
        nu /= nu.sum()
        z = P @ nu
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            y = (c / z) ** b
            g = P.T @ y
        S = float(nu @ g)
        return nu, y, g, S

    log_nu = np.zeros(n)
    _, y, g, S = evaluate(log_nu)
    best_x, best_value, lower, rho = None, math.inf, 0.0, 1.0
    it = stalled = 0
    while it < max_iter:
        it += 1
        x = y / float(g.max())
        value = float(np.sum(c / x**p))
        progress = S ** (p + 1) > lower * (1 + 1e-14) or value < best_value * (1 - 1e-14)
        stalled = 0 if progress else stalled + 1
        lower = max(lower, S ** (p + 1))
        if value < best_value:
            best_x, best_value = x, value
        if best_value - lower <= tol * best_value:
            break
        if stalled >= 50:  # the gap has reached the floating-point floor (~1e-9)
            break
        with np.errstate(divide="ignore"):  # g_j = 0 sends ν_j to the floor below
            step = np.log(g / S)
        while True:
            trial = log_nu + rho * step
            trial = np.maximum(trial - trial.max(), -700.0)
            _, t_y, t_g, t_S = evaluate(trial)
            if math.isfinite(t_S) and t_S >= S:
                log_nu, y, g, S = trial, t_y, t_g, t_S
                rho = min(rho * 1.5, 1e8)
                break
            rho /= 4.0
            if rho < 1e-12:  # no ascent direction left at this precision
                break
        if rho < 1e-12:
            break
    if best_x is None:  # no iterate had a finite objective: S(ν) overflowed from the start
        raise ValueError(
            "the dual method found no weighting with a finite objective: the design matrix P "
            "is too small against the costs c for float64 (rescale P)"
        )
    return Weighting(
        x=best_x, value=best_value, lower=lower, iterations=it, solver="dual", info={"rho": rho}
    )


def _cvxpy_weighting(c, P, p, solver) -> Weighting:
    import cvxpy as cp

    x = cp.Variable(P.shape[0], pos=False)
    obj = (
        cp.sum(cp.multiply(c, cp.inv_pos(x))) if p == 1 else cp.sum(cp.multiply(c, cp.power(x, -2)))
    )
    prob = cp.Problem(cp.Minimize(obj), [P.T @ x <= 1, x >= 0])
    try:
        prob.solve(solver=solver.upper())
    except cp.error.SolverError as err:
        raise RuntimeError(f"Program 1: cvxpy solver {solver} failed: {err}") from err
    if prob.status not in ("optimal", "optimal_inaccurate") or x.value is None:
        raise RuntimeError(f"Program 1: cvxpy solver {solver} returned status {prob.status}")
    xv = np.maximum(np.asarray(x.value, dtype=float), 1e-300)
    xv = xv / max(float((P.T @ xv).max()), 1e-300)  # exact feasibility
    value = float(np.sum(c / xv**p))
    # certify with the dual point ν ∝ the solver's multipliers of the column constraints
    mu = np.maximum(np.asarray(prob.constraints[0].dual_value, dtype=float), 0.0)
    lower = 0.0
    if mu.sum() > 0:
        nu = mu / mu.sum()
        z = P @ nu
        if np.all(z > 0):
            lower = float(np.sum(c ** (1 / (p + 1)) * z ** (p / (p + 1)))) ** (p + 1)
    return Weighting(
        x=xv, value=value, lower=min(lower, value), solver=solver, info={"status": prob.status}
    )


# ========================================================== reductions of §4.2
def eigen_query_separation(c, P, p, group_size, solver, tol, max_iter) -> tuple[np.ndarray, dict]:
    """Eigen-query separation (Li & Miklau §4.2): Program 1 per group of ``group_size``
    consecutive (by eigenvalue) design queries, then Program 1 over the group factors."""
    k = c.size
    groups = [np.arange(s, min(s + group_size, k)) for s in range(0, k, group_size)]
    xs, errs, cols = [], [], []
    for g in groups:
        w = solve_weighting(c[g], P[g], p, solver, tol, max_iter)
        xs.append(w.x)
        errs.append(w.value)
        cols.append(P[g].T @ w.x)  # the group's column norms (squared L2 or L1)
    merge = solve_weighting(np.array(errs), np.vstack(cols), p, solver, tol, max_iter)
    x = np.empty(k)
    for g, xg, t in zip(groups, xs, merge.x):
        x[g] = t * xg
    return x, {"groups": len(groups), "group_size": group_size}


def principal_vectors(c, P, p, fraction, solver, tol, max_iter) -> tuple[np.ndarray, dict]:
    """Principal vectors (Li & Miklau §4.2): the top ``fraction`` of the design queries get
    their own weight, all the others one common weight (k_top + 1 variables)."""
    k = c.size
    top = min(k, max(1, int(math.ceil(fraction * k))))
    if top == k:
        w = solve_weighting(c, P, p, solver, tol, max_iter)
        return w.x, {"principal": k}
    c2 = np.concatenate([c[:top], [c[top:].sum()]])
    P2 = np.vstack([P[:top], P[top:].sum(axis=0)[None, :]])
    w = solve_weighting(c2, P2, p, solver, tol, max_iter)
    x = np.concatenate([w.x[:top], np.full(k - top, w.x[top])])
    return x, {"principal": top}


# ==================================================== the strategy from a weighting
def weighted_strategy(Q: np.ndarray, x: np.ndarray, p: int, complete: bool, c=None):
    """``A = [diag(λ) Q ; D']`` from Program 1's ``x`` at unit sensitivity, with Program 2 step 4's
    completion rows if ``complete``; returns ``(matrix, Program 1 value or None without c)``."""
    x = np.asarray(x, dtype=float)
    P = np.abs(Q) if p == 2 else Q * Q
    cols = P.T @ x
    x = x / cols.max()
    cols = cols / cols.max()
    lam = np.sqrt(x) if p == 1 else x
    value = None if c is None else float(np.sum(np.asarray(c) / x**p))
    d = None
    if complete:
        # a deficit within (k + 2)·eps is rounding, not a column to complete (guide page)
        deficit = 1.0 - cols
        deficit[deficit <= (Q.shape[0] + 2) * np.finfo(float).eps] = 0.0
        d = np.sqrt(deficit) if p == 1 else deficit
    # orthogonal design rows: the structured OrthoBasis kind
    r = np.sqrt(np.einsum("ij,ij->i", Q, Q))
    Qn = Q if np.allclose(r, 1.0, rtol=0.0, atol=1e-12) else Q / r[:, None]
    if check_orthonormal_rows(Qn):
        return OrthoBasis(Qn, lam * (1.0 if Qn is Q else r), d), value
    Ap = Dense(lam[:, None] * Q)
    if d is None or not d.any():
        return Ap, value
    n = Q.shape[1]
    return VStack([Ap, SymTridiagonal(d, np.zeros(n - 1))]), value
