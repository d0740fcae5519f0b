"""The Low-Rank Mechanism (Yuan, Zhang, Winslett, Xiao, Yang & Hao, PVLDB 2012, §4; an HDMM §8
baseline): the augmented-Lagrangian decomposition ``W ≈ B L`` (:func:`lrm_decompose`) and the
``lrm`` selector, whose strategy is ``L``.
User guide: docs/algorithms/baselines.md.
"""

from __future__ import annotations

import math

import numpy as np

from ...checks import check_int, check_probability
from ...linalg import Dense, Matrix, check_dense_size
from ...linalg.spectral import canonical_eigenbasis
from ...strategy import Strategy
from ..base import ALL_PRIVACY, NotApplicableError, Selector, register

__all__ = ["LowRankSelector", "lrm_decompose", "project_columns"]

INITS = ("auto", "identity", "svd", "random")


def _project_l1(V: np.ndarray, radius: float = 1.0) -> np.ndarray:
    """Euclidean projection of every column of ``V`` onto the L1 ball (Duchi et al. 2008)."""
    A = np.abs(V)
    inside = A.sum(axis=0) <= radius
    if inside.all():
        return V
    U = -np.sort(-A[:, ~inside], axis=0)
    css = np.cumsum(U, axis=0) - radius
    k = np.arange(1, U.shape[0] + 1)[:, None]
    cond = U - css / k > 0
    rho = U.shape[0] - 1 - np.argmax(cond[::-1], axis=0)  # last index where cond holds
    theta = css[rho, np.arange(U.shape[1])] / (rho + 1)
    out = V.copy()
    out[:, ~inside] = np.sign(V[:, ~inside]) * np.maximum(A[:, ~inside] - theta, 0.0)
    return out


def _top_eigenvalue(S: np.ndarray, rng, iters: int = 50) -> float:
    """Largest eigenvalue of a PSD matrix by power iteration (inflated by 5%)."""
    v = rng.standard_normal(S.shape[0])
    lam = 0.0
    for _ in range(iters):
        w = S @ v
        lam = float(np.linalg.norm(w))
        if lam == 0.0:
            return 0.0
        v = w / lam
    return 1.05 * float(v @ (S @ v))


def project_columns(V: np.ndarray, norm: int) -> np.ndarray:
    """Project each column of ``V`` onto the unit ball of the L1 (``norm=1``) or L2 norm."""
    if norm == 1:
        return _project_l1(V)
    scale = np.maximum(np.linalg.norm(V, axis=0), 1.0)
    return V / scale


def lrm_decompose(
    W: np.ndarray,
    rank: int,
    norm: int = 1,
    gamma: float = 1e-4,
    max_iter: int = 500,
    inner: int = 10,
    beta: float | None = None,
    rho: float = 1.05,
    beta_max: float = 1e8,
    seed: int = 0,
    init: str = "auto",
    settle: bool = True,
):
    """Yuan et al.'s augmented-Lagrangian decomposition ``W ≈ B L`` (§4); returns ``(B, L, info)``,
    ``info``: ``residual`` (relative), ``trace_BtB``, ``iterations``."""
    W = np.asarray(W, dtype=float)
    m, n = W.shape
    rng = np.random.default_rng(seed)
    normW = np.linalg.norm(W)
    if normW == 0:
        raise ValueError("LRM needs a non-zero workload")
    L = np.zeros((rank, n))
    if init == "auto":
        init = "identity" if rank >= n else "svd"
    if init == "identity":
        if rank < n:
            raise NotApplicableError(f"init='identity' needs rank >= n = {n}, got rank {rank}")
        L[:n] = np.eye(n)
        k = n
    elif init == "svd":
        _, sv, Vt = np.linalg.svd(W, full_matrices=False)
        # inside repeated singular values: a basis fixed by W, not by the SVD's rounding
        _, V = canonical_eigenbasis(sv, Vt.T)
        k = min(rank, V.shape[1])
        L[:k] = V[:, :k].T
    elif init == "random":  # Gaussian, scaled into the feasible set below
        L = rng.standard_normal((rank, n))
        k = rank
    else:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    if rank > k:
        L[k:] = 1e-3 * rng.standard_normal((rank - k, n))
    # scale (not project) into the feasible set, so the start is an exact factorisation
    colnorm = np.abs(L).sum(axis=0) if norm == 1 else np.linalg.norm(L, axis=0)
    L = L / max(float(colnorm.max()), 1e-300)
    B = np.linalg.lstsq(L.T, W.T, rcond=None)[0].T
    if beta is None:  # penalty ~10x the objective at the start: keeps L from losing rank
        beta = 10.0 * float(np.sum(B * B)) / normW**2
    pi = np.zeros_like(W)
    prev, iterations = math.inf, 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 (reported below)
        # B-step: exact minimiser of ½||B||² − <π, BL> + β/2 ||W − BL||²
        G = np.eye(rank) + beta * (L @ L.T)
        B = np.linalg.solve(G, L @ (beta * W + pi).T).T
        # L-step: accelerated projected gradient on β/2 ||W + π/β − BL||²
        T = W + pi / beta
        BtB, BtT = B.T @ B, B.T @ T
        step = 1.0 / max(_top_eigenvalue(BtB, rng), 1e-12)
        Y, L_old, t = L, L, 1.0
        for _ in range(inner):
            L_new = project_columns(Y - step * (BtB @ Y - BtT), norm)
            t_new = 0.5 * (1 + math.sqrt(1 + 4 * t * t))
            Y = L_new + ((t - 1) / t_new) * (L_new - L_old)
            L_old, t = L_new, t_new
        L = L_old
        R = W - B @ L
        pi = pi + beta * R
        beta = min(rho * beta, beta_max)
        res = np.linalg.norm(R) / normW
        obj = float(np.sum(B * B))
        if res <= gamma and (not settle or abs(prev - obj) <= 1e-6 * max(obj, 1e-300)):
            break
        prev = obj
    # final B: least squares against the final L (keeps the residual as small as L allows)
    B = np.linalg.lstsq(L.T, W.T, rcond=None)[0].T
    info = {
        "residual": float(np.linalg.norm(W - B @ L) / normW),
        "trace_BtB": float(np.sum(B * B)),
        "iterations": iterations,
    }
    return B, L, info


@register
class LowRankSelector(Selector):
    """LRM: the strategy ``L`` of ``W ≈ B L`` (Yuan et al. 2012), columns in the unit L1 ball
    (PureDP) or L2 ball; needs the dense workload, as LRM itself (HDMM §8). Parameters:
    ``rank`` (default ``ceil(1.2 rank(W))``), ``gamma``, ``max_iter``, ``inner``, ``init``,
    ``seed``."""

    name = "lrm"
    method = "LRM: Low-Rank Mechanism"
    paper = "Yuan, Zhang, Winslett, Xiao, Yang & Hao, PVLDB 2012"
    privacy = ALL_PRIVACY

    def __init__(self, rank=None, gamma=1e-4, max_iter=300, inner=10, init="auto", seed=0):
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        self.params = {
            "rank": None if rank is None else check_int(rank, "rank", minimum=1),
            "gamma": check_probability(gamma, "gamma"),
            "max_iter": check_int(max_iter, "max_iter", minimum=1),
            "inner": check_int(inner, "inner", minimum=1),
            "init": init,
            "seed": check_int(seed, "seed", minimum=0),
        }

    def _select(self, workload: Matrix, privacy, objective):
        m, n = workload.shape
        check_dense_size(m, n, "LRM's explicit workload matrix")
        W = workload.dense()
        rank_w = int(np.linalg.matrix_rank(W))
        r = self.params["rank"]
        if r is None:
            r = max(1, math.ceil(1.2 * rank_w))
        elif r < rank_w:  # W = B L needs rank(L) >= rank(W): L would not support W
            raise NotApplicableError(
                f"lrm: rank = {r} is below the workload's rank {rank_w}; a strategy L of "
                "lower rank cannot answer W (give rank >= rank(W), or None for "
                "ceil(1.2 rank(W)))"
            )
        check_dense_size(r, n, "LRM's strategy L (rank x n)")
        check_dense_size(m, r, "LRM's factor B (m x rank)")
        norm = privacy.norm
        options = {k: v for k, v in self.params.items() if k != "rank"}
        B, L, info = lrm_decompose(W, r, norm=norm, **options)
        info.update({"rank": r, "norm": norm})
        return Strategy(matrix=Dense(L), selector=self.name, loss=info["trace_BtB"], metadata=info)
