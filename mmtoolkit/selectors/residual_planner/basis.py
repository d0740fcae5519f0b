"""The residual basis of ResidualPlanner(+) (He et al., "ResidualPlanner+", §4.2, Lemma 1,
Thm 4.3, §7.2, Thm 7.1-7.2): the per-attribute factors as an :class:`AttributeBasis`, built by
:func:`marginal_basis` or :func:`general_basis`.
User guide: docs/algorithms/residual-planner.md.
"""

from __future__ import annotations

import math

import numpy as np

from ...checks import check_int
from ...linalg import Identity, Matrix, TooLargeError, as_matrix, check_dense_size
from ...linalg.spectral import canonical_eigenbasis
from ..base import NotApplicableError
from .route import dominant_profiles

#: Largest attribute size for which dense per-attribute n x n factors are built.
MAX_ATTRIBUTE_SIZE = 4096


def sub_matrix(n: int) -> np.ndarray:
    """``Sub_n = [1_{n-1}, -I_{n-1}]`` ((n-1) x n; §4.2): rows ⊥ 1, rank n - 1."""
    n = _size(n)
    out = np.zeros((n - 1, n))
    out[:, 0] = 1.0
    out[:, 1:] -= np.eye(n - 1)
    return out


def sub_pinv(n: int) -> np.ndarray:
    """``Sub_n† = (1/n)[1ᵀ_{n-1}; 1 1ᵀ - n I]`` (n x (n-1); Lemma 1), a right inverse of Sub."""
    n = _size(n)
    out = np.full((n, n - 1), 1.0 / n)
    out[1:, :] -= np.eye(n - 1)
    return out


def _size(n) -> int:
    n = check_int(n, "attribute size", minimum=1)
    if n > MAX_ATTRIBUTE_SIZE:
        raise TooLargeError(
            f"attribute size {n} exceeds MAX_ATTRIBUTE_SIZE = {MAX_ATTRIBUTE_SIZE} "
            "(per-attribute factors are dense n x n)"
        )
    return n


class AttributeBasis:
    """The residual factors of one attribute (§4.2, §7.2), built by :func:`marginal_basis` or
    :func:`general_basis`."""

    def __init__(self, workload: Matrix, sub: np.ndarray, marginal: bool, strategy=None):
        self.workload = as_matrix(workload)
        self.n = n = int(self.workload.shape[1])
        self.sub = sub
        self.marginal = bool(marginal)
        self.strategy = strategy
        P = np.eye(n) - 1.0 / n
        if self.marginal:
            self.gamma = sub  # Σ_i = Sub Subᵀ (noise z has one entry per value)
            self.sub_pinv = sub_pinv(n)
            m = n - 1
            # (I_m + J_m)^{-1/2} = I + c J, c = (1/sqrt(1+m) - 1)/m (eigenvalues 1 and 1+m)
            c = (1.0 / math.sqrt(1.0 + m) - 1.0) / m if m else 0.0
            self.whiten = sub + c * sub.sum(axis=0, keepdims=True)
            self.G = P  # Subᵀ(Sub Subᵀ)⁻¹Sub = I - 11ᵀ/n (Thm 4.3 proof)
            self.H = P  # Sub†(Sub Subᵀ)Sub†ᵀ = I - 11ᵀ/n (Lemma 10)
            self.beta = (n - 1) / n
        else:
            self.gamma = np.eye(n - 1)  # Σ_i = I (§7.2, final Algorithm 4)
            self.sub_pinv = np.linalg.pinv(sub) if n > 1 else np.zeros((n, 0))
            self.whiten = sub
            self.G = sub.T @ sub
            self.H = self.sub_pinv @ self.sub_pinv.T
            self.beta = float(np.max(np.diag(self.G))) if n > 1 else 0.0
        rows = self.workload.shape[0]
        check_dense_size(rows, n, "the basic matrix of an attribute")
        if isinstance(self.workload, Identity):
            self.row_h = np.diag(self.H).copy()
            self.row_s = np.full(n, 1.0 / (n * n))
            self.row_t = np.full(n, 1.0 - 1.0 / n)
        else:
            Wd = self.workload.dense()
            self.row_h = np.einsum("ij,jk,ik->i", Wd, self.H, Wd)
            sums = Wd.sum(axis=1)
            self.row_s = sums**2 / (n * n)
            self.row_t = np.clip(np.einsum("ij,ij->i", Wd, Wd) - sums**2 / n, 0.0, None)
        self.row_h = np.clip(self.row_h, 0.0, None)

    @property
    def var_res(self) -> float:
        """``‖W_i Sub_i† Γ_i‖_F² = tr(W_i H_i W_iᵀ)`` (Thm 7.2)."""
        return float(np.sum(self.row_h))

    @property
    def var_sum(self) -> float:
        """``‖W_i 1‖² / n_i²`` (Thm 7.2)."""
        return float(np.sum(self.row_s))

    @property
    def rows(self) -> int:
        return int(self.workload.shape[0])

    def worst_profiles(self) -> np.ndarray:
        """The ``(h, s)`` row pairs that can attain a maximum variance (one per row of the
        result): the upper-right hull vertices of :func:`route.dominant_profiles`."""
        keep = dominant_profiles(self.row_h, self.row_s)
        return np.column_stack([self.row_h[keep], self.row_s[keep]])

    def __repr__(self):
        kind = "marginal" if self.marginal else "general"
        return f"AttributeBasis(n={self.n}, {kind}, W={type(self.workload).__name__})"


def marginal_basis(n: int) -> AttributeBasis:
    """ResidualPlanner's attribute: ``W = I``, ``Sub_n``, ``Σ = Sub Subᵀ`` (§4.2)."""
    n = _size(n)
    return AttributeBasis(Identity(n), sub_matrix(n), marginal=True)


def general_basis(workload, strategy=None) -> AttributeBasis:
    """ResidualPlanner+'s attribute (§7.2, final Algorithm 4, ``Γ_i = I``) for the basic matrix
    ``workload`` and replacement ``strategy`` (default ``W_i``); refused when §7.1-7.2 or
    Lemma 3 do not hold."""
    W = as_matrix(workload)
    n = _size(W.shape[1])
    check_dense_size(W.shape[0], n, "the basic matrix of an attribute")
    Wd = W.dense()
    S = Wd if strategy is None else np.asarray(as_matrix(strategy).dense(), dtype=float)
    if S.ndim != 2 or S.shape[1] != n:
        raise ValueError(
            f"strategy replacement must have {n} columns (the attribute size), got shape {S.shape}"
        )
    if not np.all(np.isfinite(S)):
        raise ValueError("strategy replacement has non-finite entries")
    scale = max(np.abs(Wd).max(), 1e-300)
    # 1ᵀ in rowspace(W) (§7.1) and W = W S† S (§7.2)
    for what, M, target in (
        (
            "the basic matrix W_i does not contain the total query 1ᵀ in its row space",
            Wd,
            np.ones((1, n)),
        ),
        ("the strategy replacement S_i does not support the basic matrix W_i", S, Wd),
    ):
        proj = target @ np.linalg.pinv(M) @ M
        if np.abs(proj - target).max() > 1e-8 * max(np.abs(target).max(), scale):
            raise NotApplicableError(what + " (§7.1-7.2)")
    if n == 1:
        return AttributeBasis(W, np.zeros((0, 1)), marginal=False, strategy=S)
    P = np.eye(n) - 1.0 / n
    SP = S @ P
    G = SP.T @ SP
    lam, V = np.linalg.eigh(0.5 * (G + G.T))
    # drop the all-ones direction (eigenvalue 0); the canonical basis inside a repeated
    # eigenvalue keeps the measured rows independent of the BLAS thread count (guide page)
    lam, V = canonical_eigenbasis(lam[1:], V[:, 1:])
    if lam[0] <= 1e-10 * lam[-1]:
        raise ValueError(
            "the strategy replacement S_i has rank < n on the complement of 1 "
            "(ResidualPlanner+ Lemma 3 needs G_i = Π S_iᵀ S_i Π of rank n - 1)"
        )
    sub = np.sqrt(lam)[:, None] * V.T
    return AttributeBasis(W, sub, marginal=False, strategy=S)
