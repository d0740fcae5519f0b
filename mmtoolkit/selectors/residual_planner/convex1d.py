"""Per-attribute strategy optimiser for ResidualPlanner+ (§7.5, §9; digest §3.5): HDMM's 1-D
convex template ``min tr(X⁻¹V) s.t. diag X = 1`` on ``[1ᵀ; W_i Π]``, solved exactly
(:func:`unit_diagonal_opt`) or by the paper's procedure (:func:`hdmm_convex_opt`), and the
max-variance form (:func:`max_variance_opt`).
User guide: docs/algorithms/residual-planner.md.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve, sqrtm
from scipy.optimize import minimize

from ...checks import check_int
from ...linalg import Matrix, as_matrix, check_dense_size


def centered_gram(W) -> np.ndarray:
    """``V = W'ᵀW'`` with ``W' = [1ᵀ; W Π]`` (digest §3.5, pitfall 11)."""
    W = as_matrix(W)
    n = W.shape[1]
    check_dense_size(W.shape[0], n, "the basic matrix of an attribute")
    Wd = W.dense()
    WP = Wd - Wd.mean(axis=1, keepdims=True)
    return WP.T @ WP + np.ones((n, n))


def _square_symmetric(V) -> np.ndarray:
    V = np.asarray(V, dtype=float)
    n = V.shape[0]
    if V.shape != (n, n) or not np.allclose(V, V.T, atol=1e-10 * max(1.0, np.abs(V).max())):
        raise ValueError("V must be a symmetric square matrix")
    return V


def _rows(theta, n: int):
    """``(L, row norms of L)`` for the lower-triangular ``L`` with entries ``theta`` (the
    unit-row parametrisation ``X = L̃L̃ᵀ``, ``L̃ = L / norms``)."""
    L = np.zeros((n, n))
    L[np.tril_indices(n)] = theta
    return L, np.sqrt(np.einsum("ij,ij->i", L, L))


def _unit_diagonal(theta, n: int) -> np.ndarray:
    """``X = L̃L̃ᵀ`` of :func:`_rows`, its diagonal set to exactly 1."""
    L, norms = _rows(theta, n)
    Lt = L / norms[:, None]
    X = Lt @ Lt.T
    X[np.diag_indices(n)] = 1.0
    return X


def unit_diagonal_opt(V, *, tol: float = 1e-12, maxiter: int = 20000) -> tuple[np.ndarray, float]:
    """``argmin tr(X⁻¹V)`` over ``diag X = 1``, ``X ≻ 0``; returns ``(X, objective)``."""
    V = _square_symmetric(V)
    n = V.shape[0]
    if n == 1:
        return np.ones((1, 1)), float(V[0, 0])
    R = np.real(sqrtm(V))
    R = 0.5 * (R + R.T) / np.max(np.diag(R))
    R[np.diag_indices(n)] = 1.0
    lo = np.tril_indices(n)
    L0 = np.linalg.cholesky(R)

    def fun(theta):
        L, norms = _rows(theta, n)
        if np.any(norms == 0.0):
            return np.inf, np.zeros_like(theta)
        Lt = L / norms[:, None]  # unit rows: X = Lt Ltᵀ has unit diagonal
        try:
            XiV = cho_solve((Lt, True), V, check_finite=False)
        except (np.linalg.LinAlgError, ValueError):
            return np.inf, np.zeros_like(theta)
        f = float(np.trace(XiV))
        if not np.isfinite(f):
            return np.inf, np.zeros_like(theta)
        Z = cho_solve((Lt, True), XiV.T, check_finite=False)  # X⁻¹ V X⁻¹
        G = -2.0 * (0.5 * (Z + Z.T)) @ Lt  # d f / d Lt
        G = (G - np.einsum("ij,ij->i", G, Lt)[:, None] * Lt) / norms[:, None]
        return f, G[lo]

    res = minimize(
        fun,
        L0[lo],
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": maxiter, "ftol": tol, "gtol": 1e-12, "maxcor": 30},
    )
    return _unit_diagonal(res.x, n), float(res.fun)


def hdmm_convex_opt(V, *, maxcor: int = 1) -> tuple[np.ndarray, float]:
    """The paper's 1-D solve (§9): ``argmin tr(X⁻¹V)`` over ``X = I + T + Tᵀ`` by L-BFGS-B
    with ``maxcor`` corrections and scipy's default tolerances; returns ``(X, objective)``."""
    V = _square_symmetric(V)
    n = V.shape[0]
    maxcor = check_int(maxcor, "maxcor", minimum=1)
    if n == 1:
        return np.ones((1, 1)), float(V[0, 0])
    lo = np.tril_indices(n, -1)
    lam, P = np.linalg.eigh(0.5 * (V + V.T))
    R = (P * np.sqrt(np.clip(lam, 0.0, None))) @ P.T
    R /= np.max(np.diag(R))

    def build(theta):
        X = np.eye(n)
        X[lo] = theta
        X.T[lo] = theta
        return X

    def loss(theta):
        try:
            c = cho_factor(build(theta), lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            return None
        XiV = cho_solve(c, V, check_finite=False)
        f = float(np.trace(XiV))
        if not np.isfinite(f) or f <= 0.0:
            return None
        Z = cho_solve(c, XiV.T, check_finite=False)  # X⁻¹ V X⁻¹
        return f, -(Z + Z.T)[lo]  # each off-diagonal parameter appears twice in X

    x0 = R[lo]
    start = loss(x0)
    if start is None:  # V^{1/2} scaled is singular after the diagonal reset: start at I
        x0 = np.zeros_like(x0)
        start = loss(x0)
    penalty = 1e6 * start[0]

    def fun(theta):
        out = loss(theta)
        return (penalty, np.zeros_like(theta)) if out is None else out

    res = minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxcor": maxcor})
    return build(res.x), float(res.fun)


#: 1-D strategy solvers of ResidualPlanner+: the exact optimum, or the paper's HDMM procedure.
STRATEGY_SOLVERS = ("exact", "hdmm")


def optimized_strategy(W: Matrix, solver: str = "exact") -> np.ndarray:
    """ResidualPlanner+'s ``S_i = chol(X)ᵀ`` for the basic matrix ``W`` (§9, digest §3.5);
    ``solver``: ``"exact"`` (:func:`unit_diagonal_opt`) or the paper's ``"hdmm"`` procedure."""
    if solver not in STRATEGY_SOLVERS:
        raise ValueError(f"strategy solver must be one of {STRATEGY_SOLVERS}, got {solver!r}")
    V = centered_gram(W)
    X, _ = unit_diagonal_opt(V) if solver == "exact" else hdmm_convex_opt(V)
    L = np.linalg.cholesky(X)
    return L.T


def centered_queries(W) -> np.ndarray:
    """``W' = [1ᵀ; W Π]`` (the index queries of the max-variance strategy, digest §3.5)."""
    W = as_matrix(W)
    n = W.shape[1]
    check_dense_size(W.shape[0] + 1, n, "the basic matrix of an attribute")
    Wd = W.dense()
    return np.vstack([np.ones((1, n)), Wd - Wd.mean(axis=1, keepdims=True)])


def max_variance_opt(
    L, *, method: str = "smooth", solver: str = "CLARABEL", rtol: float = 1e-6
) -> tuple[np.ndarray, float]:
    """``min max diag(Σ⁻¹) s.t. diag(L Σ Lᵀ) ≤ 1`` for the index queries ``L`` (§9 with Xiao
    et al. VLDB'21; digest §3.5), ``method`` ``"smooth"`` or ``"sdp"`` (guide page). Returns
    ``(X, t)``: ``X = Σ⁻¹`` scaled to a largest index variance of 1, ``t = max diag X``."""
    L = np.asarray(L, dtype=float)
    if L.ndim != 2 or not np.all(np.isfinite(L)):
        raise ValueError("L must be a finite matrix (one index query per row)")
    n = L.shape[1]
    L = L[np.abs(L).max(axis=1) > 1e-12 * max(np.abs(L).max(), 1e-300)]  # zero rows: no variance
    if L.shape[0] == 0 or np.linalg.matrix_rank(L) < n:
        raise ValueError(
            "the index queries must have full column rank (a strategy answering them is invertible)"
        )
    if method == "sdp":
        X = _max_variance_sdp(L, solver)
    elif method == "smooth":
        X = _max_variance_smooth(L, rtol)
    else:
        raise ValueError(f"method must be 'smooth' or 'sdp', got {method!r}")
    X = 0.5 * (X + X.T)
    fvar = np.einsum("ij,ij->i", L, np.linalg.solve(X, L.T).T)
    X = X * fvar.max()  # Σ / max f_var  ⇔  X * max f_var
    return X, float(np.max(np.diag(X)))


def _max_variance_sdp(L, solver):
    import cvxpy as cp

    n = L.shape[1]
    Sig = cp.Variable((n, n), symmetric=True)
    Y = cp.Variable((n, n), symmetric=True)
    t = cp.Variable()
    eye = np.eye(n)
    cons = [
        cp.bmat([[Sig, eye], [eye, Y]]) >> 0,
        cp.diag(Y) <= t,
        cp.sum(cp.multiply(L @ Sig, L), axis=1) <= 1,
    ]
    prob = cp.Problem(cp.Minimize(t), cons)
    try:
        prob.solve(solver=solver)
    except cp.error.SolverError as e:
        raise ValueError(f"the max-variance strategy program failed with {solver}: {e}") from e
    if prob.status not in ("optimal", "optimal_inaccurate") or Sig.value is None:
        raise ValueError(f"the max-variance strategy program ended with status {prob.status}")
    return np.linalg.inv(0.5 * (Sig.value + Sig.value.T))


def _smooth_max_objective(L, p):
    """``θ ↦ (log ‖v‖_p, gradient)`` with ``v_j = l_j X⁻¹ l_jᵀ`` and ``X = L̃L̃ᵀ`` (unit rows)."""
    n = L.shape[1]
    lo = np.tril_indices(n)

    def fun(theta):
        Lm, norms = _rows(theta, n)
        if np.any(norms == 0.0):
            return np.inf, np.zeros_like(theta)
        Lt = Lm / norms[:, None]
        try:
            Z = cho_solve((Lt, True), L.T, check_finite=False)  # X⁻¹ Lᵀ
        except (np.linalg.LinAlgError, ValueError):
            return np.inf, np.zeros_like(theta)
        v = np.einsum("ij,ji->i", L, Z)
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            return np.inf, np.zeros_like(theta)
        lv = np.log(v)
        top = lv.max()
        e = np.exp(p * (lv - top))
        f = top + np.log(e.sum()) / p  # log ‖v‖_p
        u = e / e.sum() / v  # ∂f/∂v_j
        G = -2.0 * ((Z * u) @ Z.T) @ Lt  # ∂f/∂L̃ (∂f/∂X = -X⁻¹Lᵀ diag(u) L X⁻¹)
        G = (G - np.einsum("ij,ij->i", G, Lt)[:, None] * Lt) / norms[:, None]
        return float(f), G[lo]

    return fun


def _max_variance_smooth(L, rtol):
    n = L.shape[1]
    lo = np.tril_indices(n)
    if n == 1:
        return np.ones((1, 1))
    # start: the sum-of-variances optimum for V = LᵀL (a good unit-diagonal point)
    X0, _ = unit_diagonal_opt(L.T @ L)
    theta = np.linalg.cholesky(X0)[lo]

    for p in 4.0 ** np.arange(1, 11):  # 4 ... 2^20: smoothing error log(m)/p < 1e-5
        res = minimize(
            _smooth_max_objective(L, p), theta, jac=True, method="L-BFGS-B",
            options={"maxiter": 5000, "ftol": rtol * 1e-3, "gtol": 1e-10, "maxcor": 30},
        )  # fmt: skip
        theta = res.x
    return _unit_diagonal(theta, n)


def max_variance_strategy(W: Matrix) -> np.ndarray:
    """ResidualPlanner+'s strategy replacement for the max-variance objective:
    ``S = chol(X)ᵀ`` from :func:`max_variance_opt` on ``[1ᵀ; WΠ]`` (§9, digest §3.5)."""
    X, _ = max_variance_opt(centered_queries(W))
    return np.linalg.cholesky(X).T
