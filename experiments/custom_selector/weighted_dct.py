"""A user-written selector WITH ITS OWN STRATEGY KIND: a weighted cosine (DCT-II) basis.

The second "prototyping" example of mmtoolkit (README.md next to this file). Nothing in the
package knows this kind: the shared evaluator scores it and the mechanism releases with it
only through the strategy-kind protocol of :class:`mmtoolkit.linalg.Matrix`
(``mmtoolkit/linalg/base.py``, section "the strategy-kind protocol";
``mmtoolkit/linalg/route.py``). Named in a config as
``selector: "weighted_dct:WeightedDCTSelector"``.

The kind
--------
``A = diag(w) C`` on a 1-D domain of ``n`` cells, ``C`` the orthonormal DCT-II
(``C_kj = sqrt(α_k/n) cos(π k (2j+1) / (2n))``, ``α_0 = 1``, ``α_k = 2``; ``CᵀC = CCᵀ = I``).
Products are fast cosine transforms (``scipy.fft.dct/idct``, ``norm="ortho"``); no ``n x n``
array is ever formed. With ``s = w²`` and ``s⁺_k = 1/s_k`` where ``s_k > 0`` (else 0):

* Gram ``AᵀA = Cᵀ diag(s) C``, so ``(AᵀA)⁺ = Cᵀ diag(s⁺) C`` and ``A⁺ = Cᵀ diag(w⁺)``;
* ``tr(WᵀW (AᵀA)⁺) = Σ_k s⁺_k d_k`` with ``d_k = ||W c_kᵀ||²`` (``c_k`` the k-th cosine
  row): the workload's energy on coefficient k;
* query i has ``diag(W (AᵀA)⁺ Wᵀ)_i = Σ_k s⁺_k (W Cᵀ)_ik²``;
* query i is in rowspace(A) iff it has no component on the unmeasured coefficients
  ``{k : w_k = 0}``: ``Σ_{k: w_k=0} (W Cᵀ)_ik² ≤ SUPPORT_RTOL · ||W_i||²``;
* squared column norms ``Σ_k s_k C_kj²`` (the L2 sensitivity is the largest) by one cosine
  transform of ``s`` (``cos² θ = (1 + cos 2θ)/2``, see :func:`dct_column_energy`).

``W Cᵀ`` (``m x n``) is produced in blocks, never whole: a workload with ``m ≤ n`` queries
has its rows read in blocks and transformed (``C Wᵀ``); one with more queries than cells is
multiplied with blocks of the cosine basis instead (``W Cᵀ[:, K]``), and its energies ``d``
come from its ``n x n`` Gram (``d_k = c_k WᵀW c_kᵀ``), which structured workloads (prefix,
all ranges) apply in O(n).

The selector
------------
For a fixed orthonormal basis the expected error is ``v · sens(A)² · Σ_k d_k / w_k²``. If
every column of ``A`` had the same norm, ``sens² = ||A||_F² / n = Σ_k w_k² / n`` and by
Cauchy–Schwarz ``(Σ_k w_k²)(Σ_k d_k / w_k²) ≥ (Σ_k sqrt(d_k))²``, with equality iff
``w_k² ∝ sqrt(d_k)``: the weighting rule Li & Miklau (2012, the eigen-design paper) use for
the eigen-queries of ``WᵀW`` (where ``d_k`` are the eigenvalues), here applied to the cosine
basis instead. The DCT's columns do NOT have equal norms once the weights are unequal
(``sens²`` is their maximum, above their mean), so for the DCT this is a heuristic: the
evaluator computes the exact error with the exact sensitivity, and the error is at least
``v · (Σ_k sqrt(d_k))² / n`` (checked in the tests). ``weighting="uniform"`` (all ``w_k = 1``)
is ``A = C`` itself, whose error equals the Identity strategy's (C is orthogonal).
"""

from __future__ import annotations

import numpy as np
import scipy.fft

from mmtoolkit.linalg import (
    SUPPORT_RTOL,
    Dense,
    Matrix,
    Symmetric,
    UnsupportedWorkloadError,
    check_dense_size,
    check_p,
    peel,
)
from mmtoolkit.privacy import ZCDP, ApproxDP
from mmtoolkit.selectors import NotApplicableError, Selector
from mmtoolkit.strategy import Strategy

#: Entries per temporary block of ``W Cᵀ`` (or of the cosine basis): 2^22 floats = 32 MB.
BLOCK_ENTRIES = 1 << 22


# ============================================================================ cosine helpers
def dct(X: np.ndarray) -> np.ndarray:
    """``C X`` (orthonormal DCT-II along axis 0)."""
    return scipy.fft.dct(X, type=2, norm="ortho", axis=0)


def idct(Y: np.ndarray) -> np.ndarray:
    """``Cᵀ Y`` (the inverse of :func:`dct`)."""
    return scipy.fft.idct(Y, type=2, norm="ortho", axis=0)


def cosine_rows(n: int, k: np.ndarray) -> np.ndarray:
    """``Cᵀ[:, k]`` = the cosine rows ``c_k`` as columns (``n x len(k)``), one inverse
    transform per requested row."""
    E = np.zeros((n, len(k)))
    E[k, np.arange(len(k))] = 1.0
    return idct(E)


def dct_column_energy(s: np.ndarray) -> np.ndarray:
    """``Σ_k s_k C_kj²`` for every column j, in O(n log n) (no ``n x n`` array).

    ``C_0j² = 1/n`` and, for k ≥ 1, ``C_kj² = (2/n) cos²(π k (2j+1)/(2n)) = (1/n)(1 +
    cos(π (2k)(2j+1)/(2n)))``. So the sum is ``(S + Σ_{k≥1} s_k cos(π (2k)(2j+1)/(2n))) / n``
    with ``S = Σ_k s_k``. Frequencies ``m = 2k ≥ n`` fold back below n:
    ``cos(π (2n−m')(2j+1)/(2n)) = −cos(π m'(2j+1)/(2n))`` and ``m = n`` gives
    ``cos(π(2j+1)/2) = 0``. The folded sum is half of scipy's unnormalised DCT-III
    (``y_j = x_0 + 2 Σ_{m≥1} x_m cos(π m (2j+1)/(2n))``, here ``x_0 = 0``).
    """
    s = np.asarray(s, dtype=float)
    n = s.size
    k = np.arange(1, n)
    m = 2 * k
    x = np.zeros(n)
    low, high = m < n, m > n
    np.add.at(x, m[low], s[1:][low])
    np.add.at(x, 2 * n - m[high], -s[1:][high])
    folded = scipy.fft.dct(x, type=3) / 2.0 if n > 1 else np.zeros(n)
    return (s.sum() + folded) / n


def _inverse_squares(w: np.ndarray) -> np.ndarray:
    """``s⁺``: ``1/w_k²`` where ``w_k ≠ 0``, else 0."""
    out = np.zeros_like(w)
    live = w != 0
    out[live] = 1.0 / (w[live] * w[live])
    return out


# ============================================================================ the kind
class WeightedDCT(Matrix):
    """``A = diag(w) C``: the orthonormal DCT-II basis of ``n = len(w)`` cells, row k scaled by
    ``w_k`` (``w_k = 0``: coefficient k is not measured).

    Implements the strategy-kind protocol: ``gram`` (:class:`WeightedDCTGram`),
    ``error_route`` (:class:`WeightedDCTRoute`), ``pinv_operator`` (``Cᵀ diag(w⁺)``),
    ``colnorm_p`` (exact); discrete noise refuses it (cosine rows are not counting queries).
    """

    def __init__(self, weights):
        w = np.asarray(weights, dtype=float)
        if w.ndim != 1 or w.size == 0:
            raise ValueError(
                f"WeightedDCT needs a non-empty 1-D array of weights, got shape {w.shape}"
            )
        if not np.all(np.isfinite(w)):
            raise ValueError("WeightedDCT: the weights must be finite")
        self.weights = w
        self.shape = (w.size, w.size)

    # ---- products
    def _matmat(self, X):
        return self.weights[:, None] * dct(X)

    def _rmatmat(self, Y):
        return idct(self.weights[:, None] * Y)

    # ---- the protocol
    def gram(self):
        return WeightedDCTGram(self.weights**2)

    def error_route(self, W):
        return WeightedDCTRoute(W, self)

    def pinv_operator(self):
        """``A⁺ = Cᵀ diag(w⁺)`` (exact; unmeasured coefficients reconstruct to 0)."""
        w = self.weights
        inv = np.zeros_like(w)
        inv[w != 0] = 1.0 / w[w != 0]
        return WeightedDCT(inv).T

    def pinv(self):
        return self.pinv_operator()

    # ---- reductions
    def colnorm_p(self, p):
        check_p(p)
        w = self.weights
        if p == 2:
            return dct_column_energy(w * w)
        n = self.shape[1]
        check_dense_size(n, n, "the L1 column norms of WeightedDCT (n column products)")
        out = np.empty(n)
        width = max(1, BLOCK_ENTRIES // n)
        for s in range(0, n, width):
            e = min(n, s + width)
            out[s:e] = np.abs(self._matmat(_unit_columns(n, s, e))).sum(axis=0)
        return out

    def rownorm_p(self, p):
        check_p(p)
        if p == 2:
            return self.weights**2  # orthonormal rows
        return super().rownorm_p(p)

    def frobenius_sq(self):
        return float(np.sum(self.weights**2))

    def __repr__(self):
        live = int(np.count_nonzero(self.weights))
        return f"WeightedDCT(n={self.shape[0]}, measured coefficients={live})"


class WeightedDCTGram(Symmetric):
    """``Cᵀ diag(s) C`` (the Gram of :class:`WeightedDCT`, ``s = w²``)."""

    def __init__(self, s):
        self.s = np.asarray(s, dtype=float)
        self.shape = (self.s.size, self.s.size)

    def _matmat(self, X):
        return idct(self.s[:, None] * dct(X))

    def trace(self):
        return float(np.sum(self.s))

    def diag(self):
        return dct_column_energy(self.s)

    def pinv(self):
        inv = np.zeros_like(self.s)
        inv[self.s != 0] = 1.0 / self.s[self.s != 0]
        return WeightedDCTGram(inv)


def _unit_columns(n: int, s: int, e: int) -> np.ndarray:
    E = np.zeros((n, e - s))
    E[np.arange(s, e), np.arange(e - s)] = 1.0
    return E


# ============================================================================ workload in the basis
def _workload_rows(W: Matrix, s: int, e: int) -> np.ndarray:
    """Rows ``s:e`` of ``W`` as the columns of an ``n x (e−s)`` array."""
    c, base = peel(W)
    if isinstance(base, Dense):
        return c * base.array[s:e].T
    m = W.shape[0]
    return W.rmatvec(_unit_columns(m, s, e))


def transformed_blocks(W: Matrix, coefficients=None):
    """Yield ``(rows, ks, P)`` covering ``P = (W Cᵀ)[rows][:, ks]`` block by block.

    ``coefficients``: the columns k of ``W Cᵀ`` wanted (default all). Few queries
    (``m ≤ n``): blocks of W's rows, each transformed by the DCT (``C Wᵀ``); many queries:
    ``W @ Cᵀ[:, K]`` for blocks K of cosine rows. Blocks hold about :data:`BLOCK_ENTRIES`.
    """
    m, n = W.shape
    ks = np.arange(n) if coefficients is None else np.asarray(coefficients, dtype=int)
    if m <= n:
        width = max(1, BLOCK_ENTRIES // n)
        for s in range(0, m, width):
            e = min(m, s + width)
            V = dct(_workload_rows(W, s, e))  # n x b: (W Cᵀ)[s:e]ᵀ
            yield slice(s, e), ks, V[ks].T
    else:
        check_dense_size(m, 1, "a column of W Cᵀ (WeightedDCT route)")
        width = max(1, BLOCK_ENTRIES // max(m, n))
        for s in range(0, ks.size, width):
            K = ks[s : s + width]
            yield slice(0, m), K, W.matvec(cosine_rows(n, K))


def coefficient_energy(W: Matrix) -> np.ndarray:
    """``d_k = ||W c_kᵀ||²`` for every cosine row k (the diagonal of ``C WᵀW Cᵀ``).

    ``m ≤ n``: column sums of ``(W Cᵀ)²`` over row blocks of W. ``m > n``: through the Gram,
    ``d_k = c_k (WᵀW) c_kᵀ`` for blocks of cosine rows (cheaper than the ``m x n`` W Cᵀ)."""
    m, n = W.shape
    d = np.zeros(n)
    if m <= n:
        for _, ks, P in transformed_blocks(W):
            d[ks] += np.sum(P * P, axis=0)
        return d
    G = W.gram()
    width = max(1, BLOCK_ENTRIES // n)
    for s in range(0, n, width):
        K = np.arange(s, min(n, s + width))
        B = cosine_rows(n, K)
        d[K] = np.sum(B * G.matvec(B), axis=0)
    return d


# ============================================================================ the error route
class WeightedDCTRoute:
    """The error route of :class:`WeightedDCT` (``mmtoolkit.linalg.route.ErrorRoute``):
    exact, from ``W Cᵀ`` in blocks (see the module docstring). No privacy factor, no
    strategy weight: the evaluator applies both."""

    def __init__(self, W: Matrix, A: WeightedDCT):
        if W.shape[1] != A.shape[1]:
            raise ValueError(
                f"the workload has {W.shape[1]} columns but the WeightedDCT strategy has "
                f"{A.shape[1]} cells"
            )
        self.W, self.A = W, A
        self.inv = _inverse_squares(A.weights)
        self.dead = np.flatnonzero(A.weights == 0)
        self._profile = None

    def check_support(self) -> None:
        if self.dead.size == 0:
            return  # n measured orthonormal rows: full column rank
        m, n = self.W.shape
        check_dense_size(m, 1, "a per-query vector (WeightedDCT route)")
        resid = np.zeros(m)
        norms = np.zeros(m)
        if m <= n:  # whole rows at hand: ||W_i||² = Σ_k (W Cᵀ)_ik² (C orthogonal)
            for rows, _, P in transformed_blocks(self.W):
                P2 = P * P
                norms[rows] += P2.sum(axis=1)
                resid[rows] += P2[:, self.dead].sum(axis=1)
        else:
            for rows, _, P in transformed_blocks(self.W, self.dead):
                resid[rows] += np.sum(P * P, axis=1)
            r = self.W.rownorm_p(2)
            norms[:] = r
        live = norms > 0
        worst = float(np.max(resid[live] / norms[live], initial=0.0))
        if worst > SUPPORT_RTOL:
            bad = int(np.flatnonzero(live)[np.argmax(resid[live] / norms[live])])
            raise UnsupportedWorkloadError(
                f"the WeightedDCT strategy does not support the workload: query {bad} has a "
                f"relative component {worst:.3g} on the {self.dead.size} unmeasured cosine "
                f"coefficient(s) (weight 0)"
            )

    def trace(self) -> float:
        d = coefficient_energy(self.W)
        return float(np.sum(d * self.inv))

    def profile(self) -> np.ndarray:
        if self._profile is None:
            m = self.W.shape[0]
            check_dense_size(m, 1, "a per-query vector (WeightedDCT route)")
            out = np.zeros(m)
            for rows, ks, P in transformed_blocks(self.W):
                out[rows] += (P * P) @ self.inv[ks]
            self._profile = out
        return self._profile

    def max_profile(self) -> float:
        return float(np.max(self.profile()))


# ============================================================================ the selector
WEIGHTINGS = ("optimal", "uniform")


def one_attribute(W: Matrix) -> int:
    """``n`` when ``W`` is a workload on one attribute of n cells; otherwise
    ``NotApplicableError`` (the selector's refusal)."""
    if not isinstance(W, Matrix):
        raise TypeError(f"workload must be a linalg.Matrix, got {type(W).__name__}")
    for _, factors in W.kron_terms():
        sizes = [f.shape[1] for f in factors]
        if sum(1 for n in sizes if n > 1) > 1:
            raise NotApplicableError(
                "weighted_dct is a 1-D strategy: the workload must be defined on one "
                f"attribute (W with n columns, one factor), got a product of factors of "
                f"sizes {sizes}"
            )
    return W.shape[1]


class WeightedDCTSelector(Selector):
    """The cosine basis with weights ``w_k² ∝ sqrt(d_k)``, ``d_k = ||W c_kᵀ||²``.

    This is the optimal weighting of a fixed orthonormal basis *when all columns of the
    strategy have the same norm* (Cauchy–Schwarz; Li & Miklau 2012 apply it to the
    eigen-queries of WᵀW). The DCT's weighted columns do not have equal norms, so here it is
    a heuristic; the shared evaluator computes the exact error with the exact sensitivity
    (the largest column norm, :meth:`WeightedDCT.colnorm_p`). Coefficients the workload has
    no energy on get weight 0 (not measured; the workload stays supported).

    Parameters
    ----------
    weighting : "optimal" (``w_k² ∝ sqrt(d_k)``, the default) or "uniform" (all weights 1:
        the plain orthonormal DCT, whose error equals the Identity strategy's).

    Gaussian noise only (zCDP, approximate DP): the rule is derived for the L2 sensitivity.
    """

    name = "weighted_dct"
    method = "weighted DCT-II basis, w_k² ∝ sqrt(d_k) (a heuristic: see the module docstring)"
    paper = "the Eigen-Design weighting rule of Li & Miklau, PVLDB 2012, §3.1, on the DCT basis"
    privacy = frozenset({ZCDP, ApproxDP})

    def __init__(self, weighting: str = "optimal"):
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be 'optimal' or 'uniform', got {weighting!r}")
        self.params = {"weighting": weighting}

    def _select(self, workload: Matrix, privacy, objective) -> Strategy:
        n = one_attribute(workload)
        if workload.shape[0] == 0:
            raise ValueError("weighted_dct: the workload has no query")
        if self.params["weighting"] == "uniform":
            w = np.ones(n)
        else:
            d = coefficient_energy(workload)
            if not np.any(d > 0):
                raise ValueError("weighted_dct: the workload is zero (no energy on any cosine)")
            w = d**0.25  # w_k² ∝ sqrt(d_k)
            w /= w.max()  # scale-free: largest weight 1
        A = WeightedDCT(w)
        col = A.colnorm_p(2)
        meta = {
            "weighting": self.params["weighting"],
            "n": int(n),
            "measured": int(np.count_nonzero(w)),
            # max / mean squared column norm: 1 would make the weighting optimal
            "sens_excess": float(np.max(col) / np.mean(col)),
        }
        return Strategy(matrix=A, selector=self.name, metadata=meta)
