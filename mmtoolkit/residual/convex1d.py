"""Per-attribute strategy optimiser for ResidualPlanner+ (§7.5, §9; digest §3.5).

The strategy replacement ``S_i`` of a non-identity attribute is chosen by HDMM's 1-D convex
template ("McKennaConvex", McKenna et al. 2018 and Yuan et al.): with ``X = S_iᵀS_i``,

    minimise  tr(X⁻¹ V)   subject to  diag(X) = 1,  X ≻ 0,

i.e. the total squared error ``tr(V (SᵀS)⁻¹)`` of a unit-sensitivity strategy for the Gram
``V = W'ᵀW'``. ResidualPlanner+ applies it to ``W' = [1ᵀ; W_i Π]`` (the workload with the 1
direction projected out and the total query prepended; ``Π = I - 11ᵀ/n``) and takes
``S_i = chol(X)ᵀ`` (unit column norms). The problem is convex in ``X``. To stay inside the
positive-definite cone we write ``X = L̃L̃ᵀ`` with ``L̃`` a lower-triangular matrix whose rows
are normalised to unit length (so ``diag X = 1`` holds by construction) and run scipy's
L-BFGS-B on the entries of ``L``, starting from the Cholesky factor of ``V^{1/2}`` scaled to a
maximum diagonal of 1 (unit diagonal); gradient ``∂f/∂L̃ = -2 X⁻¹VX⁻¹ L̃`` projected through
the row normalisation. (A direct parametrisation of the off-diagonal of ``X`` stalls at the
cone boundary; tests compare the optimum with an SDP solve.) Written from the papers; a
local implementation (the HDMM issue ships its own OPT_0).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_solve, sqrtm
from scipy.optimize import minimize

from ..linalg import Matrix, as_matrix, check_dense_size


def centered_gram(W) -> np.ndarray:
    """``V = W'ᵀW'`` with ``W' = [1ᵀ; W Π]`` (digest §3.5, pitfall 11)."""
    W = as_matrix(W)
    n = W.shape[1]
    check_dense_size(W.shape[0], n, "the basic matrix of an attribute")
    Wd = W.dense()
    WP = Wd - Wd.mean(axis=1, keepdims=True)
    return WP.T @ WP + np.ones((n, n))


def unit_diagonal_opt(V, *, tol: float = 1e-12, maxiter: int = 20000) -> tuple[np.ndarray, float]:
    """``argmin tr(X⁻¹V)`` over ``diag X = 1``, ``X ≻ 0``; returns ``(X, objective)``."""
    V = np.asarray(V, dtype=float)
    n = V.shape[0]
    if V.shape != (n, n) or not np.allclose(V, V.T, atol=1e-10 * max(1.0, np.abs(V).max())):
        raise ValueError("V must be a symmetric square matrix")
    if n == 1:
        return np.ones((1, 1)), float(V[0, 0])
    R = np.real(sqrtm(V))
    R = 0.5 * (R + R.T) / np.max(np.diag(R))
    R[np.diag_indices(n)] = 1.0
    lo = np.tril_indices(n)
    L0 = np.linalg.cholesky(R)

    def build(theta):
        L = np.zeros((n, n))
        L[lo] = theta
        norms = np.sqrt(np.einsum("ij,ij->i", L, L))
        return L, norms

    def fun(theta):
        L, norms = build(theta)
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
    L, norms = build(res.x)
    Lt = L / norms[:, None]
    X = Lt @ Lt.T
    X[np.diag_indices(n)] = 1.0
    return X, float(res.fun)


def optimized_strategy(W: Matrix) -> np.ndarray:
    """ResidualPlanner+'s ``S_i = chol(X)ᵀ`` for the basic matrix ``W`` (§9, digest §3.5)."""
    X, _ = unit_diagonal_opt(centered_gram(W))
    L = np.linalg.cholesky(X)
    return L.T
