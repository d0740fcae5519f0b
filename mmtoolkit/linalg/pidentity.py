"""p-Identity strategies ``A(Θ) = [I_n; Θ] D`` (HDMM §5.2, Def. 9; Thm 4 and App. A.3).

:class:`PIdentity` (columns normalised in the L1 or L2 norm), its Gram, and by Woodbury (HDMM
Thm 4) its inverse Gram (:class:`LowRankUpdate`) and pseudo-inverse (:class:`PIdentityPinv`),
``O(np)`` per vector; nothing ``n x n``.

User guide: docs/algorithms/implicit-algebra.md ("p-Identity strategies").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import cho_factor, cho_solve

from . import kernels
from .base import Matrix, Symmetric, check_dense_size, check_p


def _column_major(X) -> bool:
    """Whether a column of the 2-D ``X`` is packed closer than a row (products then on ``X.T``)."""
    return X.shape[1] > 1 and abs(X.strides[0]) < abs(X.strides[1])


def _theta_array(theta, norm: int) -> np.ndarray:
    T = np.array(theta, dtype=float)
    if T.ndim != 2 or T.shape[0] < 1 or T.shape[1] < 1:
        raise ValueError(
            f"PIdentity needs a 2-D p x n array Θ with p >= 1 and n >= 1, got shape {T.shape}"
        )
    if not np.all(np.isfinite(T)):
        raise ValueError("PIdentity: Θ must be finite")
    if norm == 1 and np.any(T < 0):
        raise ValueError("PIdentity with norm=1 (L1, HDMM Def. 9) needs Θ >= 0 entrywise")
    return T


def padded_rows(M: np.ndarray) -> np.ndarray:
    """``M`` (``p x n``) with zero rows appended up to a multiple of 4 rows, C-ordered (the
    compiled kernels work on rows four at a time; a zero row adds exact zeros)."""
    p, n = M.shape
    out = np.zeros((-(-p // 4) * 4, n))
    out[:p] = M
    return out


def pidentity_scale(theta: np.ndarray, norm: int) -> np.ndarray:
    """``s`` with ``D = diag(1/s)``: ``1 + Σ_k Θ_kj`` (norm 1) or ``sqrt(1 + Σ_k Θ_kj²)``."""
    if norm == 1:
        return 1.0 + theta.sum(axis=0)
    return np.sqrt(1.0 + np.einsum("kj,kj->j", theta, theta))


def woodbury_core(theta: np.ndarray) -> np.ndarray:
    """``M = (I_p + ΘΘᵀ)⁻¹`` by Cholesky (the ``p x p`` core of HDMM Thm 4)."""
    p = theta.shape[0]
    P = theta @ theta.T
    P[np.diag_indices(p)] += 1.0
    return cho_solve(cho_factor(P, lower=True), np.eye(p))


class PIdentity(Matrix):
    """``A(Θ) = [I_n; Θ] D`` (HDMM Def. 9), columns normalised in the ``norm`` (1 or 2).

    Shape ``(n + p, n)``: the ``n`` scaled identity rows, then the ``p`` rows of ``ΘD``, with
    ``D = diag(1/s)``: ``s_j = 1 + Σ_k Θ_kj`` for ``norm=1`` (every column sums to 1) and
    ``s_j = sqrt(1 + Σ_k Θ_kj²)`` for ``norm=2`` (every column has unit L2 norm), so the
    sensitivity in that norm is 1. Full column rank: it supports every workload. Gram,
    inverse Gram and pseudo-inverse cost ``O(np)`` per vector (Woodbury).

    Parameters
    ----------
    theta : array_like
        ``Θ``, a finite ``p x n`` array with ``p ≥ 1`` and ``n ≥ 1`` (copied as float64);
        non-negative for ``norm=1``.
    norm : int, default 1
        The column normalisation: 1 (L1, HDMM's, for Laplace noise) or 2 (L2, for Gaussian
        noise).

    Raises
    ------
    ValueError
        When ``norm`` is not 1 or 2, ``theta`` is not a non-empty 2-D array, has an entry
        that is not finite, or (``norm=1``) a negative entry.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 5.2 (Definition 9, p-Identity strategies; Theorem 4)
    and Appendix A.3 (the analysis of OPT_0: the Woodbury forms).
    """

    def __init__(self, theta: ArrayLike, norm: int = 1):
        check_p(norm)
        self.norm = int(norm)
        self.theta = _theta_array(theta, self.norm)
        self.p, self.n = self.theta.shape
        self.s = pidentity_scale(self.theta, self.norm)
        self.d = 1.0 / self.s  # D's diagonal
        self.shape = (self.n + self.p, self.n)
        self._core: np.ndarray | None = None
        self._padded = None  # ΘD for the compiled kernel (kernels.compiled)

    @property
    def core(self) -> np.ndarray:
        """``M = (I_p + ΘΘᵀ)⁻¹`` (cached).

        Returns
        -------
        numpy.ndarray
            The ``p x p`` Woodbury core, by Cholesky.
        """
        if self._core is None:
            self._core = woodbury_core(self.theta)
        return self._core

    def _matmat(self, X):
        # written once into the result, in X's memory order (a block of a Kronecker
        # product's kmatvec is a transposed C-ordered block)
        n = self.n
        if _column_major(X):
            out = np.empty((X.shape[1], n + self.p))
            DX = np.divide(X.T, self.s, out=out[:, :n])
            out[:, n:] = DX @ self.theta.T
            return out.T
        out = np.empty((n + self.p, X.shape[1]))
        DX = np.divide(X, self.s[:, None], out=out[:n])
        np.matmul(self.theta, DX, out=out[n:])
        return out

    def _rmatmat(self, Y):
        n = self.n
        return (Y[:n] + self.theta.T @ Y[n:]) / self.s[:, None]

    def apply_along(self, X, out):
        # compiled (mmtoolkit.linalg.kernels); else the scaled copy written in place (D's
        # entries, as in dense()), then one (batched) GEMM of Θ against it
        fast = kernels.compiled()
        views = None if fast is None else kernels.along_views(X, out)
        if views is not None:
            if self._padded is None:
                self._padded = padded_rows(self.theta * self.d)
            bx, gx, bo, go, inplace = views
            fast.pidentity_along(bx, gx, bo, go, X.shape[0], self.n, X.shape[2], self.d,
                                 self._padded, self.p, inplace)  # fmt: skip
            return
        n = self.n
        if X.shape[2] == 1:  # the last axis: rows of X are the vectors
            top = out[:, :n, 0]
            np.multiply(X[:, :, 0], self.d, out=top)
            np.matmul(top, self.theta.T, out=out[:, n:, 0])
        else:
            top = out[:, :n]
            np.multiply(X, self.d[:, None], out=top)
            np.matmul(self.theta, top, out=out[:, n:])

    def gram(self):
        return PIdentityGram(self)

    def pinv(self):
        return PIdentityPinv(self)

    def pinv_operator(self):
        return self.pinv()

    def colnorm_p(self, p):
        check_p(p)
        T = np.abs(self.theta)
        if p == 1:
            c = (1.0 + T.sum(axis=0)) / self.s
        else:
            c = (1.0 + np.einsum("kj,kj->j", T, T)) / self.s**2
        if p == self.norm:
            return 1.0  # exact by construction (up to rounding in c)
        return c

    def rownorm_p(self, p):
        check_p(p)
        d = 1.0 / self.s
        return np.concatenate([d**p, ((np.abs(self.theta) * d) ** p).sum(axis=1)])

    def dense(self):
        check_dense_size(*self.shape, "dense() of PIdentity")
        return np.vstack([np.diag(1.0 / self.s), self.theta / self.s])

    def __repr__(self):
        return f"PIdentity(p={self.p}, n={self.n}, norm={self.norm})"


class PIdentityGram(Symmetric):
    """``AᵀA = D (I + ΘᵀΘ) D``; ``pinv`` = ``inverse`` = a :class:`LowRankUpdate` (HDMM Thm 4).

    ``(AᵀA)⁻¹ = D⁻¹ (I − Θᵀ M Θ) D⁻¹`` with ``M = (I_p + ΘΘᵀ)⁻¹`` (Woodbury); ``n x n``,
    never formed.

    Parameters
    ----------
    A : PIdentity
        The strategy whose Gram this is.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 5.2 (Theorem 4) and Appendix A.3.
    """

    def __init__(self, A: PIdentity):
        self.A = A
        self.shape = (A.n, A.n)

    def _matmat(self, X):
        A = self.A
        DX = X / A.s[:, None]
        return (DX + A.theta.T @ (A.theta @ DX)) / A.s[:, None]

    def pinv(self):
        A = self.A
        U = A.theta.T * A.s[:, None]  # D⁻¹Θᵀ
        return LowRankUpdate(A.s**2, U, U @ A.core)

    inverse = pinv

    def diag(self):
        A = self.A
        return (1.0 + np.einsum("kj,kj->j", A.theta, A.theta)) / A.s**2

    def dense(self):
        check_dense_size(*self.shape, "dense() of PIdentityGram")
        A = self.A
        G = A.theta.T @ A.theta
        G[np.diag_indices(A.n)] += 1.0
        return G / np.outer(A.s, A.s)


class LowRankUpdate(Matrix):
    """``diag(a) − U Vᵀ`` in O(nr) per vector (a p-Identity's inverse Gram; ``low_rank_form``).

    Parameters
    ----------
    a : array_like
        The ``n`` diagonal entries.
    U, V : array_like
        Two ``n x r`` arrays.

    Raises
    ------
    ValueError
        When ``U`` and ``V`` are not both 2-D arrays of shape ``n x r``.
    """

    def __init__(self, a: ArrayLike, U: ArrayLike, V: ArrayLike):
        self.a = np.asarray(a, dtype=float)
        self.U = np.asarray(U, dtype=float)
        self.V = np.asarray(V, dtype=float)
        n = self.a.size
        if self.U.shape != self.V.shape or self.U.ndim != 2 or self.U.shape[0] != n:
            raise ValueError(
                f"LowRankUpdate: U {self.U.shape} and V {self.V.shape} must both be {n} x r"
            )
        self.shape = (n, n)

    def low_rank_form(self):
        """The parts ``(a, U, V)`` of ``diag(a) − U Vᵀ``.

        ``tr(Y · self) = Σ_j a_j Y_jj − Σ (Y U) ∘ V`` then needs only ``r`` products with
        ``Y`` (OPT_0 and the evaluator's structured route use it).

        Returns
        -------
        tuple of numpy.ndarray
            ``a`` (length ``n``), ``U`` and ``V`` (``n x r`` each), the arrays held.
        """
        return self.a, self.U, self.V

    def _matmat(self, X):
        return self.a[:, None] * X - self.U @ (self.V.T @ X)

    def _rmatmat(self, Y):
        return self.a[:, None] * Y - self.V @ (self.U.T @ Y)

    def diag(self):
        return self.a - np.einsum("jr,jr->j", self.U, self.V)

    def dense(self):
        check_dense_size(*self.shape, "dense() of LowRankUpdate")
        return np.diag(self.a) - self.U @ self.V.T


class PIdentityPinv(Matrix):
    """``A⁺ = (AᵀA)⁻¹Aᵀ`` of a p-Identity strategy (HDMM §7.2 / App. A.3), O(np) per vector.

    Applied as ``A⁺z = s ∘ z_I + (sΘᵀ) M (z_Θ − Θ z_I)``, ``z_I`` the first ``n`` entries of
    ``z`` and ``z_Θ`` the last ``p``; shape ``(n, n + p)``.

    Parameters
    ----------
    A : PIdentity
        The strategy whose pseudo-inverse this is.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 7.2 (RECONSTRUCT) and Appendix A.3.
    """

    def __init__(self, A: PIdentity):
        self.A = A
        self.shape = (A.n, A.n + A.p)
        self._sTM: np.ndarray | None = None
        self._padded = None  # Θ and (sΘᵀM)ᵀ for the compiled kernel (kernels.compiled)

    @property
    def sTM(self) -> np.ndarray:
        """``(sΘᵀ)M`` (``n x p``, cached).

        Returns
        -------
        numpy.ndarray
            The ``n x p`` array ``diag(s) Θᵀ M``.
        """
        if self._sTM is None:
            A = self.A
            self._sTM = (A.theta.T * A.s[:, None]) @ A.core
        return self._sTM

    def _matmat(self, Z):
        A = self.A
        n = A.n
        if _column_major(Z):  # rows of R = Zᵀ are the vectors
            R = Z.T
            t = R[:, n:] - R[:, :n] @ A.theta.T
            out = np.multiply(R[:, :n], A.s)
            out += t @ self.sTM.T
            return out.T
        t = Z[n:] - A.theta @ Z[:n]
        out = np.multiply(Z[:n], A.s[:, None])
        out += self.sTM @ t
        return out

    def apply_along(self, X, out):
        # compiled (mmtoolkit.linalg.kernels); else the products of _matmat batched over the
        # axis, t first, so out may alias X
        A = self.A
        n = A.n
        fast = kernels.compiled()
        views = None if fast is None else kernels.along_views(X, out)
        if views is not None:
            if self._padded is None:
                self._padded = (padded_rows(A.theta), padded_rows(self.sTM.T))
            bx, gx, bo, go, inplace = views
            fast.pidentity_pinv_along(bx, gx, bo, go, X.shape[0], n, X.shape[2], A.s,
                                      *self._padded, A.p, inplace)  # fmt: skip
            return
        if X.shape[2] == 1:  # the last axis: rows of X are the vectors
            Z, O = X[:, :, 0], out[:, :, 0]
            t = Z[:, n:] - Z[:, :n] @ A.theta.T
            np.multiply(Z[:, :n], A.s, out=O)
            O += t @ self.sTM.T
        else:
            t = X[:, n:] - np.matmul(A.theta, X[:, :n])
            np.multiply(X[:, :n], A.s[:, None], out=out)
            out += np.matmul(self.sTM, t)

    def _rmatmat(self, Y):
        A = self.A
        SY = A.s[:, None] * Y
        KY = SY - A.theta.T @ (A.core @ (A.theta @ SY))  # K = I − ΘᵀMΘ
        return np.vstack([KY, A.theta @ KY])

    def pinv(self):
        return self.A

    def dense(self):
        check_dense_size(*self.shape, "dense() of PIdentityPinv")
        return self._matmat(np.eye(self.shape[1]))
