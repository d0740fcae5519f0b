"""Canonical eigenbases: eigenvectors that do not depend on the eigensolver's choices.

For an eigenvalue of multiplicity ``k > 1`` a symmetric eigensolver returns *some*
orthonormal basis ``V`` of its eigenspace, depending on rounding (the BLAS thread count, the
LAPACK build), although the projector ``P = V Vᵀ`` is determined by the matrix. Whatever
reads the vectors themselves (Eigen-Design's Program 1, the SVD-bound and SDP strategies, a
seeded release's i-th noise draw on the i-th row) must not inherit that:
:func:`canonical_eigenbasis` replaces the solver's basis inside every cluster of
(numerically) repeated eigenvalues by one that is a function of ``P`` alone.

**Clusters.** Consecutive sorted eigenvalues ``λ_i, λ_{i+1}`` belong to one cluster when
they differ by at most ``n · eps · min(scale, GRADED · max(|λ_i|, |λ_{i+1}|))`` (``scale`` =
the largest eigenvalue magnitude, ``‖G‖₂``). The first term is the order of a
backward-stable eigensolver's error bound, so a larger difference is real. The second makes
the tolerance relative for small eigenvalues: the workload Grams here are graded (prefix and
range Grams, Kronecker products of them) and LAPACK resolves their small eigenvalues to
nearly relative accuracy; merging them would put cluster boundaries where rounding decides
them. Repeated eigenvalues come back a few ``n · eps · |λ|`` apart, distinct neighbours of
the prefix and range Grams thousands apart, hence :data:`GRADED`. Eigenvalues within
``n · eps · ‖G‖₂`` of zero are one cluster whatever their ratios: the numerical null space,
known only to that absolute accuracy. Each cluster gets the mean of its computed eigenvalues.

**The canonical basis of a cluster** is Gram–Schmidt on the columns ``P e_j`` of its
projector, taken in the pivot order of a greedy column choice: at each step the column whose
component orthogonal to the columns already taken is longest. Since ``⟨P e_i, P e_j⟩ =
(Vᵀ e_i)ᵀ (Vᵀ e_j)``, the pivots come from a column-pivoted QR of ``Vᵀ`` (``k x n``, no
``n x n`` projector is formed) and the basis is ``V Q_c`` with ``Vᵀ[:, piv] = Q_c R`` (the
first ``k`` pivots, ``R`` with positive diagonal). Replacing ``V`` by ``V U`` for any
orthogonal ``U`` leaves the column inner products, hence the pivots, and ``V Q_c`` unchanged:
the result depends on ``P`` only. Its signs are fixed too: vector ``i`` has the positive
entry ``R_ii`` at its pivot cell. Symmetric workloads have many columns of exactly equal
length, where the greedy choice would be decided by rounding; the columns are therefore
weighted by ``1 + TIE_TILT · (n − 1 − j) / (n − 1)`` before pivoting, so that of equal
columns the lowest index wins by a margin far above the rounding of the lengths. The weights
change only the order in which columns are taken, not the spans. A singleton cluster keeps
its eigenvector up to the sign rule.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = ["GRADED", "TIE_TILT", "canonical_eigenbasis", "eigenvalue_clusters"]

#: Relative tilt of the column weights that breaks ties of equal column lengths towards the
#: lowest cell index (module docstring).
TIE_TILT = 1e-3
#: Relative accuracy, in units of ``n · eps · |λ|``, assumed of a small computed eigenvalue
#: (module docstring).
GRADED = 256.0


def eigenvalue_clusters(values, n: int, scale: float, tol: float | None = None) -> list[slice]:
    """Slices of the runs of sorted ``values`` (eigenvalues of an ``n x n`` symmetric matrix
    of norm ``scale``) that are one repeated eigenvalue: consecutive differences at most
    ``n · eps · min(scale, GRADED · max(|λ_i|, |λ_{i+1}|))``, or both within
    ``n · eps · scale`` of zero (module docstring); or, given ``tol``, consecutive
    differences at most ``tol`` (a matrix known only to that accuracy)."""
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
    """``(values, vectors)`` with a basis inside each eigenspace that depends only on the
    eigenspace, not on the solver's choice of basis in it (module docstring).

    ``values``: eigenvalues (or singular values) sorted ascending or descending; ``vectors``:
    ``n x k``, orthonormal column ``i`` belonging to ``values[i]``; ``scale``: the matrix norm
    (default ``max |values|``); ``tol``: an absolute cluster tolerance instead, for a matrix
    known only to that accuracy. Returns the eigenvalues with each cluster's entries replaced
    by their mean, and the canonical orthonormal columns.
    """
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
