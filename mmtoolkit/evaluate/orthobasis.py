"""OrthoBasis route: weighted orthonormal query sets with column completion (Eigen-Design,
SVD-bound strategies; Li & Miklau 2012), exactly in that basis."""

from __future__ import annotations

import numpy as np

from ..linalg import (
    Matrix,
    OrthoBasis,
    TooLargeError,
    check_dense_size,
)
from ..linalg import base as _linalg_base
from ._common import RANK_RTOL, SUPPORT_RTOL, UnsupportedWorkloadError, _as_vector


# ========================================================== orthonormal-basis route
class _OrthoBasisRoute:
    """Any workload × ``A = [diag(w) Q; D_J]`` (:class:`~mmtoolkit.linalg.OrthoBasis`, rows
    of Q orthonormal; Li & Miklau 2012 Program 2), exact, using only the implicit Gram
    ``G = WᵀW`` and arrays no larger than Q's own ``n x n`` scale.

    No completion: ``(AᵀA)⁺ = Q₊ᵀ diag(w₊⁻²) Q₊`` over the rows with ``w ≠ 0``, so
    ``tr(G (AᵀA)⁺) = Σ_i q_i G q_iᵀ / w_i²`` and query ``x`` has variance
    ``||diag(1/w₊) Q₊ x||²``. With completion: ``T = [Q; N]`` (N an orthonormal basis of
    null(Q)) gives ``AᵀA = Tᵀ K T``, ``K = diag(w², 0) + T D² Tᵀ``, so
    ``(AᵀA)⁺ = Tᵀ K⁺ T`` and ``tr = tr(K⁺ T G Tᵀ)`` (Cholesky when ``K ≻ 0``, else eigh).
    Support: every query ``x`` must satisfy ``||x − Πx||² ≤ SUPPORT_RTOL · ||x||²``, Π the
    projector on rowspace(A), checked query by query unless A has full column rank.
    """

    #: Largest m · (null-space or basis dimension) for the per-query products W @ block.
    MAX_QUERY_WORK = 50 * _linalg_base.MAX_DENSE_ENTRIES

    def __init__(self, W: Matrix, A: OrthoBasis):
        from ..linalg.orthobasis import ORTHO_MAX_N

        self.W, self.A = W, A
        k, n = A.Q.shape
        if A.cells.size == 0:  # no completion: everything in the span of the live rows
            live = A.weights != 0
            self.basis = A.Q if live.all() else A.Q[live]
            self.s = A.weights[live] ** 2
            self.completed = False
            return
        if n > ORTHO_MAX_N:
            raise TooLargeError(
                f"the completed OrthoBasis route builds {n} x {n} arrays; n exceeds "
                f"ORTHO_MAX_N = {ORTHO_MAX_N}"
            )
        self.completed = True
        if k < n:
            import scipy.linalg

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
        """Lower Cholesky factor of ``K``, or None when K is singular to working precision
        — not only when the factorisation fails: completion rows of size ~1e-8 (solver
        round-off) leave K positive definite with eigenvalues ~1e-16 · λ_max, and solving
        with it would amplify rounding in the workload's (nil) component along them. The
        LAPACK condition estimate (``dpocon``, 1-norm) is compared with the same rank rule
        as the eigh branch; None sends the caller to the pseudo-inverse."""
        from scipy.linalg import lapack

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
        width = max(1, min(r, _linalg_base.MAX_DENSE_ENTRIES // max(m, 1)))
        for s in range(0, r, width):
            yield self.W.matvec(np.ascontiguousarray(B[:, s : s + width]))

    def _row_norms(self) -> np.ndarray:
        return _as_vector(self.W.rownorm_p(2), self.W.shape[0])

    def check_support(self) -> None:
        n = self.A.shape[1]
        if self.completed:
            if self.null is None:
                return  # K ≻ 0: A has full column rank
            resid = np.zeros(self.W.shape[0])
            for Y in self._row_blocks(self.null):
                resid += np.sum(Y * Y, axis=1)
        else:
            if self.basis.shape[0] == n:
                return  # n orthonormal live rows: full column rank
            proj = np.zeros(self.W.shape[0])
            for Y in self._row_blocks(self.basis.T):
                proj += np.sum(Y * Y, axis=1)
            resid = self._row_norms() - proj
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
            import scipy.linalg

            X = scipy.linalg.cho_solve((self.L, True), C)
            return float(np.trace(X))
        VC = self.V.T @ C @ self.V
        return float(np.sum(np.diag(VC) / self.lam))

    def _half(self) -> np.ndarray:
        """``H`` (n x r) with ``(AᵀA)⁺ = H Hᵀ``."""
        if not self.completed:
            return self.basis.T / np.sqrt(self.s)
        if self.L is not None:
            import scipy.linalg

            return scipy.linalg.solve_triangular(self.L, self.basis, lower=True).T
        return self.basis.T @ (self.V / np.sqrt(self.lam))

    def profile(self) -> np.ndarray:
        out = np.zeros(self.W.shape[0])
        for Y in self._row_blocks(self._half()):
            out += np.sum(Y * Y, axis=1)
        return out

    def max_profile(self) -> float:
        return float(np.max(self.profile()))
