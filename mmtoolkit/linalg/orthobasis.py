"""Weighted orthonormal query sets with column completion (Li & Miklau 2012, Program 2).

``OrthoBasis(Q, w, d)`` is ``A = [diag(w) Q ; D_J]``: the orthonormal rows of ``Q`` weighted,
then completion rows ``d_j e_j`` (Program 2 step 4; Li et al. 2010 Thm 5.27); its Gram
:class:`OrthoBasisGram` and the evaluator's exact route :class:`OrthoBasisRoute`.

User guide: docs/algorithms/implicit-algebra.md ("Weighted orthonormal bases").
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike

from . import base
from .base import Matrix, Symmetric, TooLargeError, check_dense_size, check_p
from .route import RANK_RTOL, SUPPORT_RTOL, UnsupportedWorkloadError, as_vector
from .spectral import MAX_EIGEN_N

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
    """``A = [diag(w) Q ; D_J]``: orthonormal rows ``Q``, ``weights``, optional ``completion``.

    The ``k`` rows ``w_i q_i``, then one row ``d_j e_j`` per cell ``j`` with ``d_j > 0``:
    shape ``(k + |J|, n)``. ``Q`` is held as the explicit array it is (the representation
    itself); its Gram is an :class:`OrthoBasisGram` and its ``error_route`` scores any
    workload exactly.

    Parameters
    ----------
    Q : array_like
        A finite ``k x n`` array with orthonormal rows (``QQᵀ = I_k``, ``1 ≤ k ≤ n``),
        checked by random probes to ``ORTHO_RTOL = 1e-8``; e.g. the eigen-queries of
        ``WᵀW``.
    weights : array_like
        ``w``: the ``k`` finite row weights (zero: a row not measured).
    completion : array_like, optional
        ``d``: ``n`` finite non-negative column-completion weights; None: no completion
        rows.

    Raises
    ------
    ValueError
        When ``Q`` is not a non-empty 2-D array, has more rows than columns, a non-finite
        entry or rows that are not orthonormal; when ``weights`` is not ``k`` finite
        numbers; when ``completion`` is not ``n`` finite non-negative numbers.

    References
    ----------
    Li & Miklau 2012, "An adaptive mechanism for accurate query answering under
    differential privacy" (Eigen-Design), Section 3.2 (Program 2); Li et al. 2010, the
    matrix mechanism, Theorem 5.27 (the completion).
    """

    def __init__(self, Q: ArrayLike, weights: ArrayLike, completion: ArrayLike | None = None):
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

    def error_route(self, W):
        return OrthoBasisRoute(W, self)

    def pinv(self):
        """``A⁺ = Qᵀ diag(1/w)`` (zero weights: zero columns) without completion, else generic.

        Returns
        -------
        Matrix
            ``A⁺`` (``n x m``): the transpose of an :class:`OrthoBasis` without completion,
            else the dense default.

        Raises
        ------
        TooLargeError
            With completion rows, when the dense ``m x n`` read exceeds
            :data:`MAX_DENSE_ENTRIES`.
        """
        if self.cells.size:
            return super().pinv()
        w = self.weights
        inv = np.zeros_like(w)
        inv[w != 0] = 1.0 / w[w != 0]
        return OrthoBasis(self.Q, inv).T

    def colnorm_p(self, p):
        check_p(p)
        w = np.abs(self.weights) ** p
        out = np.zeros(self.shape[1])
        for s in range(0, self.Q.shape[0], _BLOCK):
            B = np.abs(self.Q[s : s + _BLOCK])
            out += w[s : s + _BLOCK] @ (B * B if p == 2 else B)
        return out + self.completion**p

    def rownorm_p(self, p):
        check_p(p)
        if p == 2:
            top = self.weights**2  # orthonormal rows
        else:
            top = np.abs(self.weights) * np.abs(self.Q).sum(axis=1)
        return np.concatenate([top, self.completion[self.cells] ** p])

    def __repr__(self):
        k, n = self.Q.shape
        return f"OrthoBasis(k={k}, n={n}, completion rows={self.cells.size})"


class OrthoBasisGram(Symmetric):
    """``Qᵀ diag(s) Q + diag(t)`` (the Gram of :class:`OrthoBasis`, ``s = w²``, ``t = d²``).

    Parameters
    ----------
    Q : numpy.ndarray
        The ``k x n`` array of orthonormal rows (held, not copied nor checked).
    s : array_like
        The ``k`` row coefficients (``w²``).
    t : array_like
        The ``n`` diagonal coefficients (``d²``).
    """

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


class OrthoBasisRoute:
    """Any workload × an :class:`OrthoBasis`, exact, from the implicit Gram ``G = WᵀW`` with
    arrays no larger than ``n x n`` (docs/algorithms/implicit-algebra.md)."""

    #: Largest m · (null-space or basis dimension) for the per-query products W @ block.
    MAX_QUERY_WORK = 50 * base.MAX_DENSE_ENTRIES

    def __init__(self, W: Matrix, A: OrthoBasis):
        self.W, self.A = W, A
        k, n = A.Q.shape
        if A.cells.size == 0:  # no completion: everything in the span of the live rows
            live = A.weights != 0
            self.basis = A.Q if live.all() else A.Q[live]
            self.s = A.weights[live] ** 2
            self.completed = False
            return
        if n > MAX_EIGEN_N:
            raise TooLargeError(
                f"the completed OrthoBasis route builds {n} x {n} arrays; n exceeds "
                f"MAX_EIGEN_N = {MAX_EIGEN_N}"
            )
        self.completed = True
        if k < n:
            Qc = scipy.linalg.qr(A.Q.T, mode="full")[0]
            self.basis = np.vstack([A.Q, Qc[:, k:].T])
        else:
            self.basis = A.Q
        T, s = self.basis, np.concatenate([A.weights**2, np.zeros(n - k)])
        K = (T * A.completion**2) @ T.T
        K[np.diag_indices(n)] += s
        self.K = 0.5 * (K + K.T)
        self.L = self._cholesky_if_well_conditioned(self.K)
        if self.L is None:
            lam, V = np.linalg.eigh(self.K)
            keep = lam > RANK_RTOL * n * np.finfo(float).eps * max(lam.max(initial=0.0), 0.0)
            self.lam, self.V, self.null = lam[keep], V[:, keep], T.T @ V[:, ~keep]
        else:
            self.null = None

    @staticmethod
    def _cholesky_if_well_conditioned(K: np.ndarray):
        """Lower Cholesky factor of ``K``, or None when ``dpocon`` finds it singular."""
        lapack = scipy.linalg.lapack
        n = K.shape[0]
        c, info = lapack.dpotrf(K, lower=1, clean=1)
        if info != 0:
            return None
        rcond, info = lapack.dpocon(c, float(np.abs(K).sum(axis=0).max()), uplo="L")
        if info != 0 or rcond <= RANK_RTOL * n * np.finfo(float).eps:
            return None
        return c

    def _row_blocks(self, B: np.ndarray):
        """Yield ``W @ B[:, s:e]`` (B is n x r) in column blocks that fit the dense guard."""
        m, r = self.W.shape[0], B.shape[1]
        check_dense_size(m, 1, "a per-query vector (OrthoBasis route)")
        if m * r > self.MAX_QUERY_WORK:
            raise TooLargeError(
                f"per-query products of a {m}-query workload with {r} basis vectors exceed "
                f"{self.MAX_QUERY_WORK:.3g} entries (OrthoBasis route)"
            )
        width = max(1, min(r, base.MAX_DENSE_ENTRIES // max(m, 1)))
        for s in range(0, r, width):
            yield self.W.matvec(np.ascontiguousarray(B[:, s : s + width]))

    def _row_norms(self) -> np.ndarray:
        return as_vector(self.W.rownorm_p(2), self.W.shape[0])

    def _squared_norms(self, B: np.ndarray) -> np.ndarray:
        """``‖(W B)_i‖²`` for every query ``i`` (:meth:`_row_blocks`)."""
        out = np.zeros(self.W.shape[0])
        for Y in self._row_blocks(B):
            out += np.sum(Y * Y, axis=1)
        return out

    def check_support(self) -> None:
        n = self.A.shape[1]
        if self.completed:
            if self.null is None:
                return  # K ≻ 0: A has full column rank
            resid = self._squared_norms(self.null)
        else:
            if self.basis.shape[0] == n:
                return  # n orthonormal live rows: full column rank
            resid = self._row_norms() - self._squared_norms(self.basis.T)
        norms = self._row_norms()
        live = norms > 0
        worst = float(np.max(resid[live] / norms[live], initial=0.0))
        if worst > SUPPORT_RTOL:
            raise UnsupportedWorkloadError(
                "the strategy does not support the workload: a query has a relative component "
                f"{worst:.3g} outside the row space of the weighted orthonormal query set"
            )

    def _gram_in_basis(self, rows: np.ndarray) -> np.ndarray:
        """``rows · G · basisᵀ`` for the implicit Gram G of W, in column blocks."""
        G = self.W.gram()
        r = self.basis.shape[0]
        out = np.empty((rows.shape[0], r))
        for s in range(0, r, 512):
            out[:, s : s + 512] = rows @ G.matvec(np.ascontiguousarray(self.basis[s : s + 512].T))
        return out

    def trace(self) -> float:
        G = self.W.gram()
        if not self.completed:
            total = 0.0
            for s in range(0, self.basis.shape[0], 512):
                B = self.basis[s : s + 512]
                c = np.einsum("ij,ji->i", B, G.matvec(np.ascontiguousarray(B.T)))
                total += float(np.sum(c / self.s[s : s + 512]))
            return total
        C = self._gram_in_basis(self.basis)  # T G Tᵀ
        if self.L is not None:
            X = scipy.linalg.cho_solve((self.L, True), C)
            return float(np.trace(X))
        VC = self.V.T @ C @ self.V
        return float(np.sum(np.diag(VC) / self.lam))

    def _half(self) -> np.ndarray:
        """``H`` (n x r) with ``(AᵀA)⁺ = H Hᵀ``."""
        if not self.completed:
            return self.basis.T / np.sqrt(self.s)
        if self.L is not None:
            return scipy.linalg.solve_triangular(self.L, self.basis, lower=True).T
        return self.basis.T @ (self.V / np.sqrt(self.lam))

    def profile(self) -> np.ndarray:
        return self._squared_norms(self._half())

    def max_profile(self) -> float:
        return float(np.max(self.profile()))
