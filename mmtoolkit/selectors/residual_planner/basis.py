"""The residual basis of ResidualPlanner(+): the per-attribute factors (the subset table of
the workload's attribute sets is in :mod:`.workload`).

He, Xiao, Toksoz, Ding, Zhang, Kifer, "ResidualPlanner+" (the journal version of Xiao et al.,
NeurIPS 2023), §4.2 and §7.2. For attribute ``i`` with ``n`` values:

* ``Sub_n = [1_{n-1}, -I_{n-1}]`` (§4.2), its pseudo-inverse (Lemma 1)
  ``Sub† = (1/n)[1ᵀ; 11ᵀ - nI]`` (a right inverse), ``Sub Subᵀ = I + 11ᵀ``;
* a *marginal* attribute (basic matrix ``W_i = I``) uses ``Sub_n`` with noise covariance
  ``Σ_i = Sub Subᵀ`` (``Γ_i = Sub``): exactly ResidualPlanner;
* a *general* attribute (ResidualPlanner+ §7.2, prefix / range / user matrix ``W_i`` with a
  strategy replacement ``S_i``) uses ``Γ_i = I`` and any ``(n-1) x n`` factor of
  ``G_i = Π S_iᵀ S_i Π`` (``Π = I - 11ᵀ/n``); we take ``Sub_i = Λ^{1/2} Vᵀ`` from the
  eigendecomposition of ``G_i`` (digest §3.2: only ``G_i`` matters; this avoids Algorithm 4's
  regularised Cholesky).

Per attribute the whitened gram factor is ``G_i = Sub_iᵀ (Γ_iΓ_iᵀ)⁻¹ Sub_i`` (``= Π`` for a
marginal attribute), its pseudo-inverse ``H_i = Sub_i† Γ_iΓ_iᵀ Sub_i†ᵀ``, the privacy factor
``β_i = max diag G_i`` (Thm 4.3 / 7.1) and, for the basic matrix ``W_i``, the variance
factors ``var_res_i = ‖W_i Sub_i† Γ_i‖_F² = tr(W_i H_i W_iᵀ)`` and
``var_sum_i = ‖W_i 1‖²/n²`` (Thm 7.2), row by row ``h_i = diag(W_i H_i W_iᵀ)`` and
``s_i = (W_i 1)²/n²``.
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
    """The residual factors of one attribute (§4.2, §7.2; module docstring), built by
    :func:`marginal_basis` or :func:`general_basis`."""

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
    """ResidualPlanner+'s attribute (§7.2, Algorithm 4 final version with ``Γ_i = I``).

    ``workload`` is the basic matrix ``W_i`` (1ᵀ must lie in its row space); ``strategy`` the
    replacement ``S_i`` (default ``W_i``; must support ``W_i``: ``W_i = W_i S_i† S_i``).
    ``G_i = Π S_iᵀ S_i Π`` must have rank ``n - 1`` (Lemma 3), and ``Sub_i = Λ^{1/2} Vᵀ``
    over its non-zero eigenpairs.
    """
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
    # drop the eigenvalue of the all-ones direction (0); the rows of Sub_i are measured with
    # noise drawn in order, so inside a repeated eigenvalue they take the canonical basis
    # (linalg.spectral), not the eigensolver's, which depends on the BLAS thread count
    lam, V = canonical_eigenbasis(lam[1:], V[:, 1:])
    if lam[0] <= 1e-10 * lam[-1]:
        raise ValueError(
            "the strategy replacement S_i has rank < n on the complement of 1 "
            "(ResidualPlanner+ Lemma 3 needs G_i = Π S_iᵀ S_i Π of rank n - 1)"
        )
    sub = np.sqrt(lam)[:, None] * V.T
    return AttributeBasis(W, sub, marginal=False, strategy=S)
