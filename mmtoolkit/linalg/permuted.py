"""Column-permuted matrices (HDMM §8.1: the "Permuted Range" workload, ranges
on a randomly permuted domain): ``Permuted(A, perm)`` is ``A P`` with ``P = I[:, perm]``, and
:class:`PermutedGram` its Gram ``Pᵀ (AᵀA) P``.

User guide: docs/algorithms/implicit-algebra.md ("Column-permuted matrices").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .base import Matrix, as_matrix, check_dense_size, check_p


def _check_perm(perm, n: int) -> np.ndarray:
    p = np.asarray(perm)
    if p.ndim != 1 or p.shape[0] != n:
        raise ValueError(f"perm must be a permutation of range({n}), got shape {p.shape}")
    if p.size and not np.issubdtype(p.dtype, np.integer):
        raise ValueError(f"perm must contain integers, got dtype {p.dtype}")
    p = p.astype(np.int64, copy=True)
    if not np.array_equal(np.sort(p), np.arange(n)):
        raise ValueError(f"perm must be a permutation of range({n}) (each index exactly once)")
    return p


def _permute_norms(c, perm):
    return c if np.isscalar(c) else np.asarray(c)[perm]


class Permuted(Matrix):
    """``A P``: the columns of ``A`` permuted, dense form ``A.dense()[:, perm]``.

    ``P = I[:, perm]``, so column ``j`` of ``A P`` is column ``perm[j]`` of ``A``. Its Gram is
    a :class:`PermutedGram`, its pseudo-inverse ``Pᵀ A⁺``; row norms and sensitivity are the
    base's.

    Parameters
    ----------
    base : Matrix or array_like
        ``A`` (an array is wrapped by :func:`as_matrix`).
    perm : array_like of int
        A permutation of ``range(n)``, ``n`` the base's number of columns (copied as int64).

    Raises
    ------
    ValueError
        When ``perm`` is not a 1-D integer array of length ``n`` holding each index once,
        or ``base`` is an array :func:`as_matrix` refuses.
    TypeError
        When ``base`` is a string (see :func:`as_matrix`).

    References
    ----------
    McKenna et al. 2018, HDMM, Section 8.1 (the "Permuted Range" workload).
    """

    def __init__(self, base: Matrix | ArrayLike, perm: ArrayLike):
        self.base = as_matrix(base)
        self.perm = _check_perm(perm, self.base.shape[1])
        self.inv = np.argsort(self.perm)
        self.shape = self.base.shape

    def _matmat(self, X):
        return self.base._matmat(X[self.inv])

    def _rmatmat(self, Y):
        return self.base._rmatmat(Y)[self.perm]

    def gram(self):
        return PermutedGram(self.base.gram(), self.perm)

    def pinv(self):
        # Pᵀ A⁺ = (A⁺ᵀ P)ᵀ
        return Permuted(self.base.pinv().T, self.perm).T

    def rownorm_p(self, p):
        return self.base.rownorm_p(p)  # a column permutation keeps every row's norm

    def colnorm_p(self, p):
        check_p(p)
        return _permute_norms(self.base.colnorm_p(p), self.perm)

    def sensitivity(self, p=1):
        return self.base.sensitivity(p)

    def dense(self):
        check_dense_size(*self.shape, "dense() of Permuted")
        return self.base.dense()[:, self.perm]

    def __repr__(self):
        return f"Permuted({self.base!r}, n={self.shape[1]})"


class PermutedGram(Matrix):
    """``Pᵀ G P`` for a square ``G``: entries ``G[perm[i], perm[j]]``.

    ``P`` is orthogonal, so the transpose, Gram, pseudo-inverse, trace and diagonal are the
    base's, conjugated.

    Parameters
    ----------
    base : Matrix or array_like
        The square ``G`` (an array is wrapped by :func:`as_matrix`).
    perm : array_like of int
        A permutation of ``range(n)``, ``n`` the size of ``G`` (copied as int64).

    Raises
    ------
    ValueError
        When ``G`` is not square, or ``perm`` is not a 1-D integer array of length ``n``
        holding each index once.
    """

    def __init__(self, base: Matrix | ArrayLike, perm: ArrayLike):
        base = as_matrix(base)
        base._require_square("PermutedGram")
        self.base = base
        self.perm = _check_perm(perm, base.shape[0])
        self.inv = np.argsort(self.perm)
        self.shape = base.shape

    def _matmat(self, X):
        return self.base._matmat(X[self.inv])[self.perm]

    def _rmatmat(self, Y):
        return self.base._rmatmat(Y[self.inv])[self.perm]

    @property
    def T(self):
        return PermutedGram(self.base.T, self.perm)

    def gram(self):
        # (PᵀGP)ᵀ(PᵀGP) = Pᵀ (GᵀG) P
        return PermutedGram(self.base.gram(), self.perm)

    def pinv(self):
        return PermutedGram(self.base.pinv(), self.perm)

    def colnorm_p(self, p):
        # rows permuted (norms unchanged), columns permuted
        check_p(p)
        return _permute_norms(self.base.colnorm_p(p), self.perm)

    def sensitivity(self, p=1):
        return self.base.sensitivity(p)

    def trace(self):
        return self.base.trace()

    def diag(self):
        return np.asarray(self.base.diag())[self.perm]

    def dense(self):
        check_dense_size(*self.shape, "dense() of PermutedGram")
        return self.base.dense()[np.ix_(self.perm, self.perm)]

    def __repr__(self):
        return f"PermutedGram({self.base!r}, n={self.shape[1]})"
