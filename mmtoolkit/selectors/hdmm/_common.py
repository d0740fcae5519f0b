"""Shared helpers of the HDMM selectors (McKenna et al., PVLDB 2018): workload terms,
parameter checks, seeds and Gram operators."""

from __future__ import annotations

import numpy as np

from ...checks import check_int, check_probability
from ...linalg import (
    Dense,
    Identity,
    Kronecker,
    MarginalsGram,
    Matrix,
    Ones,
    PermutedGram,
    Sum,
    SymTridiagonal,
    Weighted,
    check_dense_size,
    normal_form,
)
from ...linalg.ranges import SymmetricFormula
from ...linalg.route import common_sizes
from ...privacy import Privacy, PureDP
from ..base import NotApplicableError


def norm_of(privacy: Privacy) -> int:
    """1 (L1 / Laplace) for PureDP, 2 (L2 / Gaussian) for ApproxDP and ZCDP."""
    return 1 if isinstance(privacy, PureDP) else 2


# ------------------------------------------------------------------ parameter checks
def check_p_param(p):
    """``p``: None (HDMM's rule), an int >= 1, or a list of ints >= 1 (one per attribute)."""
    if p is None:
        return None
    if isinstance(p, (list, tuple)):
        if not p:
            raise ValueError("p must not be an empty list")
        return [check_int(v, f"p[{i}]", minimum=1) for i, v in enumerate(p)]
    return check_int(p, "p", minimum=1)


def seed_sequences(seed, count: int) -> list[np.random.SeedSequence]:
    """``count`` independent child seeds of ``SeedSequence(seed)`` (one per restart)."""
    return np.random.SeedSequence(seed).spawn(count)


# ------------------------------------------------------------------ workload terms
def term_sizes(terms) -> list[int]:
    """The common attribute sizes of all product terms (:class:`NotApplicableError` if they
    disagree: HDMM's OPT_⊗ / OPT_M / OPT_+ are defined on one factorisation)."""
    sizes = common_sizes(terms)
    if sizes is None:
        raise NotApplicableError(
            "the workload's products do not share one factorisation of the domain: attribute "
            f"sizes {sorted({tuple(f.shape[1] for f in fs) for _, fs in terms})}"
        )
    return sizes


def _rows_in_total_identity(f: Matrix) -> bool:
    """Every row of ``f`` is a (scaled) singleton indicator or all-ones row: read from its normal
    form's term kinds, else from the entries of each term that is not one."""
    for t in normal_form(f).terms:
        if len(t.kinds) == 1 and t.kinds[0] in ("identity", "total", "ones"):
            continue
        block = t.factors[0] if len(t.factors) == 1 else Kronecker(list(t.factors))
        if not _dense_rows_in_total_identity(block):
            return False
    return True


def _dense_rows_in_total_identity(f: Matrix) -> bool:
    m, n = f.shape
    if m * n > 4_000_000:
        return False
    D = f.dense()
    nnz = np.count_nonzero(D, axis=1)
    singleton = nnz <= 1
    flat = (nnz == n) & np.all(D == D[:, :1], axis=1)
    return bool(np.all(singleton | flat))


def default_p(factors_of_attribute: list[Matrix], n: int) -> int:
    """HDMM §5/§7.1 rule: p = 1 if the attribute's predicates are all in Total ∪ Identity,
    else max(1, n // 16)."""
    if all(_rows_in_total_identity(f) for f in factors_of_attribute):
        return 1
    return max(1, n // 16)


# ------------------------------------------------------------------ Gram operators
_FAST = (Identity, SymmetricFormula, SymTridiagonal, MarginalsGram, Ones)


def _is_fast(Y: Matrix) -> bool:
    if isinstance(Y, _FAST):
        return True
    if isinstance(Y, Weighted):
        return _is_fast(Y.base)
    if isinstance(Y, PermutedGram):
        return _is_fast(Y.base)
    if isinstance(Y, Sum):
        return all(_is_fast(t) for t in Y.terms)
    if isinstance(Y, Kronecker):
        return all(_is_fast(f) or isinstance(f, Dense) for f in Y.factors)
    return False


class GramOperator:
    """``Y = WᵀW`` prepared for OPT_0 (HDMM §5): ``matmat``, ``diag``, ``trace``, implicit when
    structured; ``unpermute``: ``(make, perm)`` for a permuted workload's Gram (§8), else None."""

    def __init__(self, Y):
        if isinstance(Y, np.ndarray):
            Y = Dense(Y)
        if not isinstance(Y, Matrix):
            raise TypeError(f"a Gram must be a linalg.Matrix or an array, got {type(Y).__name__}")
        if Y.shape[0] != Y.shape[1]:
            raise ValueError(f"a Gram matrix WᵀW must be square, got shape {Y.shape}")
        self.n = Y.shape[0]
        self.unpermute = None
        if isinstance(Y, PermutedGram):
            base = Y.base
            self.unpermute = (lambda: GramOperator(base), Y.perm)
        if isinstance(Y, Dense) or not _is_fast(Y):
            check_dense_size(self.n, self.n, "the workload Gram WᵀW for OPT_0")
            D = Y.dense()
            self.dense = 0.5 * (D + D.T)
            self.matmat = self.dense.__matmul__
            self.diag = np.diag(self.dense).copy()
        else:
            self.dense = None
            self.matmat = Y._matmat
            self.diag = np.asarray(Y.diag(), dtype=float)
        self.trace = float(np.sum(self.diag))

    def coarsened(self, implicit: bool = True) -> GramOperator:
        """``Rᵀ Y R``, the Gram of the workload on cells merged in pairs (``R[2c, c] =
        R[2c+1, c] = 1``; OPT_0's multilevel start). ``n`` must be even. An implicit ``Y``
        gives an implicit operator if ``implicit``, else a dense one read by column blocks."""
        n = self.n
        if n % 2:
            raise ValueError(f"only a Gram of even size can be coarsened in pairs, got n = {n}")
        h = n // 2
        if self.dense is not None:
            return GramOperator(self.dense.reshape(h, 2, h, 2).sum(axis=(1, 3)))
        if not implicit:
            check_dense_size(h, h, "the coarsened workload Gram RᵀWᵀWR for OPT_0")
        parent = self.matmat
        dense = None if implicit else np.empty((h, h))
        diag = np.empty(h)
        step = max(1, min(h, (1 << 22) // n))
        for c0 in range(0, h, step):
            cols = np.arange(c0, min(h, c0 + step))
            R = np.zeros((n, cols.size))
            R[2 * cols, cols - c0] = 1.0
            R[2 * cols + 1, cols - c0] = 1.0
            YR = parent(R)
            diag[cols] = YR[2 * cols, cols - c0] + YR[2 * cols + 1, cols - c0]
            if dense is not None:
                dense[:, cols] = YR.reshape(h, 2, cols.size).sum(axis=1)
        if dense is not None:
            return GramOperator(dense)
        out = GramOperator.__new__(GramOperator)
        out.n, out.dense, out.unpermute, out.diag = h, None, None, diag
        out.matmat = lambda X: parent(np.repeat(X, 2, axis=0)).reshape(h, 2, -1).sum(axis=1)
        out.trace = float(np.sum(diag))
        return out

    @staticmethod
    def weighted_sum(coeffs, grams: list[GramOperator]) -> GramOperator:
        """``Σ c_j Y_j`` of prepared operators (the OPT_⊗ surrogate Gram, HDMM eq. 6)."""
        out = GramOperator.__new__(GramOperator)
        out.n = grams[0].n
        coeffs = [float(c) for c in coeffs]
        if all(g.dense is not None for g in grams):
            out.dense = sum(c * g.dense for c, g in zip(coeffs, grams))
            out.matmat = out.dense.__matmul__
        else:
            out.dense = None
            pairs = list(zip(coeffs, grams))
            out.matmat = lambda X: sum(c * g.matmat(X) for c, g in pairs)
        out.diag = sum(c * g.diag for c, g in zip(coeffs, grams))
        out.trace = float(np.sum(out.diag))
        out.unpermute = None
        perms = [g.unpermute for g in grams]
        if all(u is not None and np.array_equal(u[1], perms[0][1]) for u in perms):
            out.unpermute = (
                lambda: GramOperator.weighted_sum(coeffs, [u[0]() for u in perms]),
                perms[0][1],
            )
        return out


#: Largest factor Gram (entries) whose dense content keys the deduplication of
#: :func:`distinct_grams`; bigger Grams are shared by object identity only.
CONTENT_KEY_ENTRIES = 1 << 20


def distinct_grams(factors: list[Matrix]) -> tuple[list[GramOperator], np.ndarray]:
    """The distinct Grams ``fᵀf`` of a list of factors, prepared once each, and each factor's
    index among them (matched by identity, then by content up to ``CONTENT_KEY_ENTRIES``)."""
    grams: list[GramOperator] = []
    index = np.empty(len(factors), dtype=np.intp)
    by_id: dict[int, int] = {}
    by_content: dict[tuple, int] = {}
    for j, f in enumerate(factors):
        k = by_id.get(id(f))
        if k is None:
            Y = f.gram()
            n = Y.shape[0]
            key = None
            if n * n <= CONTENT_KEY_ENTRIES:
                D = np.ascontiguousarray(Y.dense(), dtype=float)
                key = (D.shape, D.tobytes())
                k = by_content.get(key)
            if k is None:
                k = len(grams)
                grams.append(GramOperator(Y))
                if key is not None:
                    by_content[key] = k
            by_id[id(f)] = k  # f stays alive in ``factors`` while the ids are compared
        index[j] = k
    return grams, index


def check_search_params(p, restarts, seed, cycles, tol, ftol, maxiter) -> dict:
    """The validated search parameters of OPT_⊗, OPT_+ and OPT_HDMM (``p``, ``restarts``, ``seed``,
    ``cycles``, ``tol``, ``ftol``, ``maxiter``; tolerances are relative reductions in (0, 1))."""
    return {
        "p": check_p_param(p),
        "restarts": check_int(restarts, "restarts", minimum=1),
        "seed": None if seed is None else check_int(seed, "seed", minimum=0),
        "cycles": check_int(cycles, "cycles", minimum=1),
        "tol": check_probability(tol, "tol"),
        "ftol": check_probability(ftol, "ftol"),
        "maxiter": check_int(maxiter, "maxiter", minimum=1),
    }
