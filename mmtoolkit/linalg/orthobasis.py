"""Weighted orthonormal query sets with column completion (Li & Miklau 2012, Program 2).

``OrthoBasis(Q, w, d)`` is the strategy ``A = [diag(w) Q ; D_J]``: the ``k`` rows ``q_i`` of
an orthonormal set ``Q`` (``QQᵀ = I_k``, ``k ≤ n``; e.g. the eigen-queries of ``WᵀW``,
Li & Miklau §3.2 Def. 6) weighted by ``w_i``, followed by the column-completion rows
``d_j e_j`` for the cells ``J = {j : d_j > 0}`` (Program 2 step 4; Li et al. 2010
Thm 5.27). Its Gram is ``Qᵀ diag(w²) Q + diag(d²)`` (:class:`OrthoBasisGram`).

``Q`` is stored once as an explicit ``k x n`` array (8192² float64 = 0.5 GB is the
representation itself, not an accidental materialisation), so this kind is exempt from
the dense guard for what it already holds; products never form anything larger than
``Q``-sized arrays. The evaluator scores it exactly through ``_OrthoBasisRoute``
(``mmtoolkit/evaluate/orthobasis.py``): without completion ``(AᵀA)⁺ = Qᵀ diag(w⁻²) Q`` on the live
rows, with completion in the completed orthonormal basis.
"""

from __future__ import annotations

import numpy as np

from .base import Matrix, Symmetric, _check_p

#: Largest n for which routes may build n x n arrays in the basis of an OrthoBasis
#: (the same scale as Q itself; Eigen-Design's MAX_EIGEN_N).
ORTHO_MAX_N = 16384
#: Rows of Q are orthonormal when ||QQᵀz − z|| ≤ ORTHO_RTOL · ||z|| for random probes z.
ORTHO_RTOL = 1e-8
#: Rows per block when reducing over Q (bounds temporaries to ~ this many rows x n).
_BLOCK = 1024


def check_orthonormal_rows(Q: np.ndarray, seed: int = 0, probes: int = 2) -> bool:
    """Whether ``QQᵀ = I`` up to :data:`ORTHO_RTOL`, by random probes (O(kn) work)."""
    k = Q.shape[0]
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((k, probes))
    R = Q @ (Q.T @ Z) - Z
    return bool(np.linalg.norm(R) <= ORTHO_RTOL * np.linalg.norm(Z) * max(1.0, np.sqrt(k)))


class OrthoBasis(Matrix):
    """``A = [diag(w) Q ; D_J]`` with orthonormal rows ``Q`` (Li & Miklau 2012, Program 2).

    Parameters
    ----------
    Q : ``k x n`` array with orthonormal rows (checked by random probes; ``k ≤ n``).
    weights : length-``k`` finite weights ``w`` (zero weights are allowed: rows not measured).
    completion : optional length-``n`` non-negative ``d``; cells with ``d_j > 0`` get a row
        ``d_j e_j`` (in increasing cell order).
    """

    def __init__(self, Q, weights, completion=None):
        Q = np.asarray(Q, dtype=float)
        if Q.ndim != 2 or Q.shape[0] == 0 or Q.shape[1] == 0:
            raise ValueError(f"OrthoBasis needs a non-empty 2-D array Q, got shape {Q.shape}")
        k, n = Q.shape
        if k > n:
            raise ValueError(f"OrthoBasis: {k} orthonormal rows cannot fit in {n} columns")
        if not np.all(np.isfinite(Q)):
            raise ValueError("OrthoBasis: Q has non-finite entries")
        if not check_orthonormal_rows(Q):
            raise ValueError("OrthoBasis: the rows of Q are not orthonormal (QQᵀ ≠ I)")
        w = np.asarray(weights, dtype=float).reshape(-1)
        if w.shape != (k,) or not np.all(np.isfinite(w)):
            raise ValueError(f"OrthoBasis: weights must be {k} finite numbers, got {w.shape}")
        if completion is None:
            d = np.zeros(n)
        else:
            d = np.asarray(completion, dtype=float).reshape(-1)
            if d.shape != (n,) or not np.all(np.isfinite(d)) or np.any(d < 0):
                raise ValueError(f"OrthoBasis: completion must be {n} finite non-negative numbers")
        self.Q, self.weights, self.completion = Q, w, d
        self.cells = np.flatnonzero(d > 0)  # J: cells with a completion row
        self.shape = (k + self.cells.size, n)

    # ------------------------------------------------------------------- products
    def _matmat(self, X):
        top = self.weights[:, None] * (self.Q @ X)
        if not self.cells.size:
            return top
        return np.vstack([top, self.completion[self.cells, None] * X[self.cells]])

    def _rmatmat(self, Y):
        k = self.Q.shape[0]
        out = self.Q.T @ (self.weights[:, None] * Y[:k])
        if self.cells.size:
            out[self.cells] += self.completion[self.cells, None] * Y[k:]
        return out

    def _intermediate_rows(self):
        return max(self.shape)

    def gram(self):
        return OrthoBasisGram(self.Q, self.weights**2, self.completion**2)

    def pinv(self):
        """``A⁺ = Qᵀ diag(1/w)`` (zero weights give zero columns) when there is no completion;
        otherwise the guarded dense fallback."""
        if self.cells.size:
            return super().pinv()
        w = self.weights
        inv = np.zeros_like(w)
        inv[w != 0] = 1.0 / w[w != 0]
        return OrthoBasis(self.Q, inv).T

    # ----------------------------------------------------------------- reductions
    def colnorm_p(self, p):
        _check_p(p)
        w = np.abs(self.weights) ** p
        out = np.zeros(self.shape[1])
        for s in range(0, self.Q.shape[0], _BLOCK):
            B = np.abs(self.Q[s : s + _BLOCK])
            out += w[s : s + _BLOCK] @ (B * B if p == 2 else B)
        return out + self.completion**p

    def rownorm_p(self, p):
        _check_p(p)
        if p == 2:
            top = self.weights**2  # orthonormal rows
        else:
            top = np.abs(self.weights) * np.abs(self.Q).sum(axis=1)
        return np.concatenate([top, self.completion[self.cells] ** p])

    def __repr__(self):
        k, n = self.Q.shape
        return f"OrthoBasis(k={k}, n={n}, completion rows={self.cells.size})"


class OrthoBasisGram(Symmetric):
    """``Qᵀ diag(s) Q + diag(t)`` (the Gram of :class:`OrthoBasis`, ``s = w²``, ``t = d²``)."""

    def __init__(self, Q: np.ndarray, s: np.ndarray, t: np.ndarray):
        self.Q, self.s, self.t = Q, np.asarray(s, dtype=float), np.asarray(t, dtype=float)
        n = Q.shape[1]
        self.shape = (n, n)

    def _matmat(self, X):
        return self.Q.T @ (self.s[:, None] * (self.Q @ X)) + self.t[:, None] * X

    def diag(self):
        out = np.array(self.t, copy=True)
        for s0 in range(0, self.Q.shape[0], _BLOCK):
            B = self.Q[s0 : s0 + _BLOCK]
            out += self.s[s0 : s0 + _BLOCK] @ (B * B)
        return out

    def trace(self):
        return float(np.sum(self.s) + np.sum(self.t))

    def __repr__(self):
        return f"OrthoBasisGram(n={self.shape[0]}, k={self.Q.shape[0]})"
