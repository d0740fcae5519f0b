"""Canonical eigenbases: eigenvectors that do not depend on the eigensolver's choices.

:func:`canonical_eigenbasis` replaces a symmetric eigensolver's basis inside every cluster of
numerically repeated eigenvalues (:func:`eigenvalue_clusters`) by Gram–Schmidt on the cluster's
projector columns in a greedy pivot order: a function of the projector alone, so whatever reads
the vectors (Eigen-Design's Program 1, the SVD-bound and SDP strategies, a seeded release's
noise) does not inherit rounding. :func:`dense_for_eigen` forms an ``n x n`` operator (a
Gram) for a dense eigensolver up to :data:`MAX_EIGEN_N`, above the shared dense guard when it
must.

User guide: docs/algorithms/implicit-algebra.md ("Canonical eigenbases").
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from . import base
from .base import TooLargeError

__all__ = ["GRADED", "MAX_EIGEN_N", "TIE_TILT", "canonical_eigenbasis", "dense_columns",
           "dense_for_eigen", "eigenvalue_clusters"]

#: Largest n for which an n x n symmetric matrix is formed for a dense eigensolver (2 GB of
#: float64 at the limit): above :data:`base.MAX_DENSE_ENTRIES`, which guards general dense
#: fallbacks, because an O(n³) eigendecomposition is the only exact route some spectra have.
MAX_EIGEN_N = 16384

#: Relative tilt of the column weights that breaks ties of equal lengths towards low indices.
TIE_TILT = 1e-3
#: Relative accuracy, in units of ``n · eps · |λ|``, assumed of a small computed eigenvalue.
GRADED = 256.0


def dense_columns(apply, n: int, rows: int) -> np.ndarray:
    """The ``n x n`` result of ``apply`` on the identity, a block of columns at a time (blocks
    of ``rows`` x columns within :data:`base.MAX_DENSE_ENTRIES`)."""
    out = np.empty((n, n))
    step = max(1, min(n, base.MAX_DENSE_ENTRIES // max(rows, 1)))
    for s in range(0, n, step):
        E = np.zeros((n, min(step, n - s)))
        E[np.arange(s, s + E.shape[1]), np.arange(E.shape[1])] = 1.0
        out[:, s : s + E.shape[1]] = apply(E)
    return out


def dense_for_eigen(G, what: str, max_n: int | None = None) -> np.ndarray:
    """The ``n x n`` operator ``G`` (a :class:`~mmtoolkit.linalg.Matrix`, e.g. a Gram) as a
    dense array for an eigensolver, for ``n ≤ max_n`` (default :data:`MAX_EIGEN_N`):
    ``G.dense()`` within the shared dense guard, else ``G``'s columns a block at a time.
    TooLargeError naming ``what`` above ``max_n``."""
    n = G.shape[0]
    max_n = MAX_EIGEN_N if max_n is None else max_n
    if n > max_n:
        raise TooLargeError(
            f"{what} forms the {n} x {n} matrix for a dense eigendecomposition; n = {n} "
            f"exceeds the limit {max_n} (MAX_EIGEN_N)"
        )
    try:
        return G.dense()
    except TooLargeError:  # above the shared dense guard but within max_n
        return dense_columns(G.matvec, n, n)


def eigenvalue_clusters(values, n: int, scale: float, tol: float | None = None) -> list[slice]:
    """Slices of the runs of sorted ``values`` (eigenvalues of an ``n x n`` symmetric matrix of
    norm ``scale``) that are one repeated eigenvalue; ``tol``: an absolute tolerance instead."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return []
    gaps = np.abs(np.diff(values))
    if tol is not None:
        apart = gaps > tol
    else:
        unit = n * np.finfo(float).eps
        mag = np.maximum(np.abs(values[:-1]), np.abs(values[1:]))
        apart = (gaps > unit * np.minimum(float(scale), GRADED * mag)) & (mag > unit * scale)
    bounds = np.concatenate([[0], np.flatnonzero(apart) + 1, [values.size]])
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def canonical_eigenbasis(values, vectors, scale: float | None = None, tol: float | None = None):
    """``(values, vectors)`` with a basis in each eigenspace that depends on the eigenspace alone.
    ``values``: sorted (either way); ``vectors``: ``n x k`` orthonormal; ``scale``: the norm
    (default ``max |values|``); ``tol``: an absolute cluster tolerance. Returns cluster means
    and the canonical columns."""
    values = np.asarray(values, dtype=float)
    V = np.asarray(vectors, dtype=float)
    if values.ndim != 1 or V.ndim != 2 or V.shape[1] != values.size:
        raise ValueError(
            f"need k values and an n x k array of vectors; got {values.shape}, {V.shape}"
        )
    if values.size > 1:
        d = np.diff(values)
        if not (np.all(d >= 0) or np.all(d <= 0)):
            raise ValueError("the values must be sorted (ascending or descending)")
    n = V.shape[0]
    if scale is None:
        scale = float(np.abs(values).max(initial=0.0))
    tilt = 1.0 + TIE_TILT * (n - 1 - np.arange(n)) / max(n - 1, 1)
    out_values = values.copy()
    out = np.empty_like(V)
    for sl in eigenvalue_clusters(values, n, scale, tol):
        out_values[sl] = values[sl].mean()
        out[:, sl] = _canonical_cluster(V[:, sl], tilt)
    return out_values, out


def _canonical_cluster(V: np.ndarray, tilt: np.ndarray) -> np.ndarray:
    """Gram–Schmidt on the projector ``V Vᵀ``'s columns in (tilted) greedy pivot order."""
    k = V.shape[1]
    if k == 1:
        piv = [int(np.argmax(tilt * np.abs(V[:, 0])))]
    else:
        piv = scipy.linalg.qr(V.T * tilt, mode="r", pivoting=True)[1][:k]
    Qc, R = np.linalg.qr(V[piv, :].T)
    signs = np.sign(np.diag(R))
    signs[signs == 0] = 1.0
    return V @ (Qc * signs)
