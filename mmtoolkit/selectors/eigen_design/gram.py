"""The eigen-queries of a workload (Li & Miklau, PVLDB 2012, §3.2 Def. 6, §3.4, §4.1): the dense
Gram :func:`workload_gram` and :func:`eigen_queries`, shared by the three selectors of this
package.
User guide: docs/algorithms/eigen-design.md.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ...linalg import Matrix, TooLargeError, as_matrix
from ...linalg.spectral import MAX_EIGEN_N, canonical_eigenbasis, dense_columns, dense_for_eigen

#: Eigenvalues of WᵀW below ZERO_RTOL · σ_max are dropped (Li & Miklau §4.1).
ZERO_RTOL = 1e-10


def workload_gram(W: Matrix, normalize_rows: bool = False, max_n: int = MAX_EIGEN_N):
    """``WᵀW`` (``normalize_rows``: of ``D W``, ``D = diag(1/||w_i||)``) as a dense array.
    ValueError for an empty or all-zero workload, TooLargeError for ``n > max_n``."""
    W = as_matrix(W)
    m, n = W.shape
    if m == 0 or n == 0:
        raise ValueError(f"the workload is empty (shape {W.shape}); it needs queries and cells")
    if n > max_n:  # a size refusal (selectors.REFUSALS): compare says "not applicable"
        raise TooLargeError(
            f"Eigen-Design eigendecomposes the {n} x {n} Gram of the workload densely; "
            f"n = {n} exceeds the limit {max_n} (MAX_EIGEN_N)"
        )
    G = _normalized_gram(W) if normalize_rows else _gram(W)
    G = 0.5 * (G + G.T)
    if not np.all(np.isfinite(G)):
        raise ValueError("the workload has non-finite entries")
    if not np.any(G):
        raise ValueError("the workload is all zero: no query has a non-zero coefficient")
    return G


def _gram(W: Matrix) -> np.ndarray:
    return dense_for_eigen(W.gram(), "Eigen-Design")


def _normalized_gram(W: Matrix) -> np.ndarray:
    """``(DW)ᵀ(DW)`` with ``D = diag(1/||w_i||₂)`` (zero rows dropped), in column chunks."""
    m, n = W.shape
    r = W.rownorm_p(2)
    if np.isscalar(r):
        if r == 0:
            raise ValueError("the workload is all zero: no query has a non-zero coefficient")
        # cast: np.isscalar's stub narrows to any numpy scalar, complex or str; r is a real norm
        return _gram(W) / float(cast(float, r))
    r = np.asarray(r, dtype=float)
    inv = np.zeros(m)
    inv[r > 0] = 1.0 / r[r > 0]
    return dense_columns(lambda E: W.rmatvec(W.matvec(E) * inv[:, None]), n, m)


def eigen_queries(G: np.ndarray, rtol: float = ZERO_RTOL):
    """Eigen-queries of ``G = WᵀW`` (Li & Miklau Def. 6): ``(σ, Q)``, ``σ > rtol · σ_max``
    descending, ``Q`` the unit eigenvectors as rows (canonical within repeated eigenvalues)."""
    sigma, V = np.linalg.eigh(G)
    order = np.argsort(sigma)[::-1]
    sigma, V = sigma[order], V[:, order]
    top = sigma[0]
    if not top > 0:
        raise ValueError("the workload is all zero: WᵀW has no positive eigenvalue")
    keep = sigma > rtol * top
    sigma, V = canonical_eigenbasis(sigma[keep], V[:, keep], scale=top)
    return sigma, V.T
