"""Kronecker products ``A_1 ⊗ ... ⊗ A_d`` of per-attribute matrices (HDMM §4, App. A.5).

Every operation is done factor-wise: Gram, pseudo-inverse, trace, diagonal and
sensitivity (HDMM Thm 3) are Kronecker products / products of the factors' ones, and the
mat-vec uses the reshape trick ("kmatvec"), never a dense Kronecker product.
"""

from __future__ import annotations

import math
from functools import reduce

import numpy as np

from .base import Matrix, as_matrix, check_dense_size


def _kron_vectors(vectors, what: str) -> np.ndarray:
    size = math.prod(len(v) for v in vectors)
    check_dense_size(size, 1, what)
    return reduce(np.kron, vectors)


class Kronecker(Matrix):
    """``A_1 ⊗ A_2 ⊗ ... ⊗ A_d`` (C-order: the first factor is the most significant axis)."""

    def __init__(self, factors):
        factors = [as_matrix(f) for f in factors]
        if not factors:
            raise ValueError("Kronecker needs at least one factor")
        self.factors = factors
        self.shape = (
            math.prod(f.shape[0] for f in factors),
            math.prod(f.shape[1] for f in factors),
        )

    # kmatvec (HDMM App. A.5): for i = d..1, Y <- A_i @ reshape(Y, (-1, n_i)).T ; the new
    # axis lands in front, so after d steps the axes are back in order (extra columns last).
    def _apply(self, X, mats, in_sizes, out_sizes, transpose):
        k = X.shape[1]
        Y = X.T  # (k, N): the column index is the most significant "axis"
        for A, n_i in zip(reversed(mats), reversed(in_sizes)):
            Z = Y.reshape(-1, n_i).T
            Y = A._rmatmat(Z) if transpose else A._matmat(Z)
        return Y.reshape(math.prod(out_sizes), k)

    def _matmat(self, X):
        return self._apply(
            X,
            self.factors,
            [f.shape[1] for f in self.factors],
            [f.shape[0] for f in self.factors],
            False,
        )

    def _rmatmat(self, Y):
        return self._apply(
            Y,
            self.factors,
            [f.shape[0] for f in self.factors],
            [f.shape[1] for f in self.factors],
            True,
        )

    @property
    def T(self):
        return Kronecker([f.T for f in self.factors])

    def gram(self):
        return Kronecker([f.gram() for f in self.factors])

    def pinv(self):
        return Kronecker([f.pinv() for f in self.factors])

    def colnorm_p(self, p):
        parts = [f.colnorm_p(p) for f in self.factors]
        if all(np.isscalar(c) for c in parts):
            return float(math.prod(parts))
        vecs = [
            np.full(f.shape[1], c) if np.isscalar(c) else np.asarray(c)
            for f, c in zip(self.factors, parts)
        ]
        return _kron_vectors(vecs, "column norms of a Kronecker product")

    def rownorm_p(self, p):
        parts = [f.rownorm_p(p) for f in self.factors]
        if all(np.isscalar(r) for r in parts):
            return float(math.prod(parts))
        vecs = [
            np.full(f.shape[0], r) if np.isscalar(r) else np.asarray(r)
            for f, r in zip(self.factors, parts)
        ]
        return _kron_vectors(vecs, "row norms of a Kronecker product")

    def sensitivity(self, p=1):
        # HDMM Thm 3: ||A_1 ⊗ ... ⊗ A_d|| = Π ||A_i|| for the max-column Lp norms.
        return float(math.prod(f.sensitivity(p) for f in self.factors))

    def trace(self):
        self._require_square("trace")
        if any(f.shape[0] != f.shape[1] for f in self.factors):
            return super().trace()
        return float(math.prod(f.trace() for f in self.factors))

    def diag(self):
        self._require_square("diag")
        if any(f.shape[0] != f.shape[1] for f in self.factors):
            return super().diag()
        return _kron_vectors([f.diag() for f in self.factors], "diag of a Kronecker product")

    def dense(self):
        check_dense_size(*self.shape, "dense() of Kronecker")
        return reduce(np.kron, (f.dense() for f in self.factors))
