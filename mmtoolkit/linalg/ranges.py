"""Range-query matrices on one ordered attribute (HDMM §3.3, predicate sets; windows: §8.1).

``Ones`` / ``Total`` (the total query), ``Prefix`` (CDF queries), ``AllRange`` (every
interval) and ``WidthRange`` (sliding windows of one width), with their Grams and
pseudo-inverses in closed form; products by prefix sums, never the ``m x n`` matrix.

User guide: docs/algorithms/implicit-algebra.md ("Range queries on one ordered attribute").
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_int
from .base import (
    CountingQueries,
    Dense,
    Matrix,
    Product,
    Symmetric,
    Weighted,
    check_dense_size,
    check_p,
)


def _maybe_scalar(c: np.ndarray) -> float | np.ndarray:
    """Column norms: a float when all columns agree (the contract of ``colnorm_p``)."""
    c = np.asarray(c, dtype=float)
    if c.size and np.all(c == c[0]):
        return float(c[0])
    return c


def _cumsum(X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.cumsum(X, axis=0)``, bit-identical, row by row for wide C-ordered blocks (numpy's
    running sum walks each column with a stride)."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[1] < 64 or X.shape[0] < 2 or X.dtype.kind != "f" or (
        X.strides[1] != X.itemsize  # an F-ordered block already sums contiguously
    ):
        return np.cumsum(X, axis=0, out=out)
    if out is None:
        out = np.empty(X.shape, dtype=X.dtype)
    out[0] = X[0]
    for i in range(1, X.shape[0]):
        np.add(out[i - 1], X[i], out=out[i])
    return out


def _cumsum0(X: np.ndarray) -> np.ndarray:
    """Prefix sums with a leading zero row: ``S[j] = Σ_{r<j} X[r]``."""
    S = np.zeros((X.shape[0] + 1, X.shape[1]))
    _cumsum(X, out=S[1:])
    return S


def _rev_cumsum(Y: np.ndarray) -> np.ndarray:
    """``out[j] = Σ_{r>=j} Y[r]``."""
    return _cumsum(Y[::-1])[::-1]


class SymmetricFormula(Symmetric):
    """A symmetric ``n x n`` matrix with closed-form entries: subclasses implement
    ``_entries(i, j)`` (broadcasting) and ``_matmat``; ``colnorm_p`` in row blocks (never n x n)."""

    def __init__(self, n: int):
        self.n = n
        self.shape = (n, n)

    def _entries(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def diag(self):
        i = np.arange(self.n)
        return np.asarray(self._entries(i, i), dtype=float)

    def dense(self):
        check_dense_size(self.n, self.n, f"dense() of {type(self).__name__}")
        i = np.arange(self.n)
        return np.asarray(self._entries(i[:, None], i[None, :]), dtype=float)

    def colnorm_p(self, p):
        check_p(p)
        n = self.n
        out = np.zeros(n)
        j = np.arange(n)
        step = max(1, 1_000_000 // n)
        for s in range(0, n, step):
            i = np.arange(s, min(n, s + step))
            E = np.abs(np.asarray(self._entries(i[:, None], j[None, :]), dtype=float))
            out += E.sum(axis=0) if p == 1 else (E * E).sum(axis=0)
        return _maybe_scalar(out)


class SymTridiagonal(Symmetric):
    """A symmetric tridiagonal matrix (diagonal ``d``, off-diagonal ``e``), O(n) products.

    The closed-form inverses of the prefix and range Grams, and a diagonal matrix (``e``
    zero).

    Parameters
    ----------
    d : array_like
        The ``n`` diagonal entries (flattened), ``n ≥ 1``.
    e : array_like
        The ``n - 1`` entries above (and below) the diagonal (flattened).

    Raises
    ------
    ValueError
        When ``d`` is empty, ``e`` does not have ``n - 1`` entries, or an entry is not
        finite.
    """

    def __init__(self, d: ArrayLike, e: ArrayLike):
        d = np.array(d, dtype=float).ravel()
        e = np.array(e, dtype=float).ravel()
        if d.size < 1:
            raise ValueError("SymTridiagonal needs a non-empty diagonal")
        if e.size != d.size - 1:
            raise ValueError(
                f"SymTridiagonal off-diagonal must have length {d.size - 1}, got {e.size}"
            )
        if not (np.all(np.isfinite(d)) and np.all(np.isfinite(e))):
            raise ValueError("SymTridiagonal entries must be finite")
        self.d, self.e = d, e
        self.n = d.size
        self.shape = (self.n, self.n)

    def _matmat(self, X):
        out = self.d[:, None] * X
        out[:-1] += self.e[:, None] * X[1:]
        out[1:] += self.e[:, None] * X[:-1]
        return out

    def colnorm_p(self, p):
        check_p(p)
        f = np.abs if p == 1 else np.square
        out = f(self.d)
        out[:-1] += f(self.e)
        out[1:] += f(self.e)
        return _maybe_scalar(out)

    def diag(self):
        return self.d.copy()

    def dense(self):
        check_dense_size(self.n, self.n, "dense() of SymTridiagonal")
        return np.diag(self.d) + np.diag(self.e, 1) + np.diag(self.e, -1)


class Ones(CountingQueries):
    """The all-ones ``m x n`` matrix (HDMM §3.3, predicate sets: "Total" when m = 1).

    Its ``factor_kind`` is ``"total"`` when ``m = 1``, else ``"ones"``; ``gram = m·Ones(n, n)``,
    ``pinv = Ones(n, m) / (m n)`` and every column norm is ``m``.

    Parameters
    ----------
    m : int
        The number of rows (each the total query), at least 1.
    n : int
        The number of columns (cells), at least 1.

    Raises
    ------
    ValueError
        When ``m`` or ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``)
        or is below 1.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 3.3 (the predicate sets Identity, Prefix, AllRange
    and Total).
    """

    def __init__(self, m: int, n: int):
        self.m = check_int(m, "m", minimum=1)
        self.n = check_int(n, "n", minimum=1)
        self.shape = (self.m, self.n)

    @property
    def factor_kind(self):
        return "total" if self.m == 1 else "ones"

    def _matmat(self, X):
        return np.repeat(X.sum(axis=0, keepdims=True), self.m, axis=0)

    def _rmatmat(self, Y):
        return np.repeat(Y.sum(axis=0, keepdims=True), self.n, axis=0)

    @property
    def T(self):
        return Ones(self.n, self.m)

    def gram(self):
        return Weighted(float(self.m), Ones(self.n, self.n))

    def pinv(self):
        return Weighted(1.0 / (self.m * self.n), Ones(self.n, self.m))

    def colnorm_p(self, p):
        check_p(p)
        return float(self.m)

    def trace(self):
        self._require_square("trace")
        return float(self.n)

    def diag(self):
        self._require_square("diag")
        check_dense_size(self.n, 1, "diag() of Ones")
        return np.ones(self.n)

    def dense(self):
        check_dense_size(self.m, self.n, "dense() of Ones")
        return np.ones((self.m, self.n))

    def __repr__(self):
        return f"Ones({self.m}, {self.n})"


class Total(Ones):
    """The total query ``1ᵀ`` (1 x n): ``Ones(1, n)`` (HDMM §3.3, predicate sets).

    Parameters
    ----------
    n : int
        The number of cells, at least 1.

    Raises
    ------
    ValueError
        When ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``) or is
        below 1.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 3.3 (the predicate sets Identity, Prefix, AllRange
    and Total).
    """

    def __init__(self, n: int):
        super().__init__(1, n)

    def __repr__(self):
        return f"Total({self.n})"


class Prefix(CountingQueries):
    """Prefix (CDF) queries, row ``i`` summing cells ``0..i`` (HDMM §3.3, predicate sets).

    The lower-triangular ``n x n`` ones matrix ``L``: products are running sums, its Gram a
    :class:`PrefixGram`, its inverse the :class:`Difference`; sensitivity ``n`` (L1) or
    ``√n`` (L2).

    Parameters
    ----------
    n : int
        The number of cells (and queries), at least 1.

    Raises
    ------
    ValueError
        When ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``) or is
        below 1.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 3.3 (the predicate sets Identity, Prefix, AllRange
    and Total).
    """

    factor_kind = "prefix"

    def __init__(self, n: int):
        self.n = check_int(n, "n", minimum=1)
        self.shape = (self.n, self.n)

    def _matmat(self, X):
        return _cumsum(X)

    def _rmatmat(self, Y):
        return _rev_cumsum(Y)

    def gram(self):
        return PrefixGram(self.n)

    def pinv(self):
        return Difference(self.n)

    def rownorm_p(self, p):
        check_p(p)
        return _maybe_scalar(np.arange(1.0, self.n + 1))

    def colnorm_p(self, p):
        check_p(p)
        return _maybe_scalar(self.n - np.arange(self.n))

    def sensitivity(self, p=1):
        check_p(p)
        return float(self.n) if p == 1 else float(np.sqrt(self.n))

    def trace(self):
        return float(self.n)

    def diag(self):
        return np.ones(self.n)

    def dense(self):
        check_dense_size(self.n, self.n, "dense() of Prefix")
        return np.tril(np.ones((self.n, self.n)))

    def __repr__(self):
        return f"Prefix({self.n})"


class Difference(Matrix):
    """The bidiagonal differencing matrix ``D = Prefix(n)⁻¹`` (``(Dx)_i = x_i - x_{i-1}``).

    ``D[i, i] = 1`` and ``D[i, i-1] = -1``; its inverse is :class:`Prefix`.

    Parameters
    ----------
    n : int
        The size, at least 1.

    Raises
    ------
    ValueError
        When ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``) or is
        below 1.
    """

    def __init__(self, n: int):
        self.n = check_int(n, "n", minimum=1)
        self.shape = (self.n, self.n)

    def _matmat(self, X):
        out = X.copy()
        out[1:] -= X[:-1]
        return out

    def _rmatmat(self, Y):
        out = Y.copy()
        out[:-1] -= Y[1:]
        return out

    def gram(self):
        # DᵀD: diagonal (2, ..., 2, 1), off-diagonal -1
        d = np.full(self.n, 2.0)
        d[-1] = 1.0
        return SymTridiagonal(d, -np.ones(self.n - 1))

    def pinv(self):
        return Prefix(self.n)

    def colnorm_p(self, p):
        check_p(p)
        c = np.full(self.n, 2.0)
        c[-1] = 1.0
        return _maybe_scalar(c)

    def trace(self):
        return float(self.n)

    def diag(self):
        return np.ones(self.n)

    def dense(self):
        check_dense_size(self.n, self.n, "dense() of Difference")
        return np.eye(self.n) - np.eye(self.n, k=-1)

    def __repr__(self):
        return f"Difference({self.n})"


class PrefixGram(SymmetricFormula):
    """``LᵀL`` for ``L = Prefix(n)``: entry ``n - max(i, j)``, inverse ``D Dᵀ``.

    ``pinv()`` (also ``inverse()``) is the tridiagonal ``D Dᵀ`` with diagonal
    ``(1, 2, ..., 2)`` and off-diagonal ``-1``, a :class:`SymTridiagonal`.

    Parameters
    ----------
    n : int
        The size, at least 1.

    Raises
    ------
    ValueError
        When ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``) or is
        below 1.
    """

    def __init__(self, n: int):
        super().__init__(check_int(n, "n", minimum=1))

    def _entries(self, i, j):
        return self.n - np.maximum(i, j)

    def _matmat(self, X):
        return _rev_cumsum(_cumsum(X))

    def pinv(self):
        d = np.full(self.n, 2.0)
        d[0] = 1.0
        return SymTridiagonal(d, -np.ones(self.n - 1))

    inverse = pinv

    def colnorm_p(self, p):
        check_p(p)
        j = np.arange(self.n, dtype=float)
        r = self.n - j  # n - j
        if p == 1:
            return _maybe_scalar(j * r + r * (r + 1) / 2)
        return _maybe_scalar(j * r * r + r * (r + 1) * (2 * r + 1) / 6)

    def trace(self):
        return float(self.n * (self.n + 1) // 2)


class AllRange(CountingQueries):
    """All ``n(n+1)/2`` range queries ``[i, j]`` in lexicographic order of ``(i, j)`` (HDMM §3.3,
    predicate sets; Li et al. 2010), products by prefix sums and a difference array.

    Row ``(i, j)``, ``0 ≤ i ≤ j < n``, sums cells ``i..j``; column ``j`` has ``(j+1)(n−j)``
    ones. Its Gram is an :class:`AllRangeGram`.

    Parameters
    ----------
    n : int
        The number of cells, at least 1.

    Raises
    ------
    ValueError
        When ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``) or is
        below 1.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 3.3 (the predicate sets Identity, Prefix, AllRange
    and Total).
    Li et al. 2010, the matrix mechanism, Section 6 (all range queries).
    """

    factor_kind = "all_range"

    def __init__(self, n: int):
        self.n = check_int(n, "n", minimum=1)
        self.shape = (self.n * (self.n + 1) // 2, self.n)

    def _start(self, i: int) -> int:
        """The row offset of the block of ranges starting at ``i``: ``Σ_{r<i} (n − r)``."""
        return i * self.n - i * (i - 1) // 2

    def _matmat(self, X):
        # block i (ranges [i, i..n-1]) = S[i+1:] - S[i]; O(n) slices, no index arrays
        S = _cumsum0(X)
        out = np.empty((self.shape[0], X.shape[1]))
        for i in range(self.n):
            np.subtract(S[i + 1 :], S[i], out=out[self._start(i) : self._start(i + 1)])
        return out

    def _rmatmat(self, Y):
        # (Rᵀy)_c = Σ_{i<=c<=j} y_ij: add y_ij at i, subtract it at j+1, cumulative-sum.
        D = np.zeros((self.n + 1, Y.shape[1]))
        for i in range(self.n):
            block = Y[self._start(i) : self._start(i + 1)]
            D[i] += block.sum(axis=0)
            D[i + 1 :] -= block
        return _cumsum(D[:-1])

    def gram(self):
        return AllRangeGram(self.n)

    def pinv(self):
        return Product(self.gram().pinv(), self.T)

    def rownorm_p(self, p):
        check_p(p)
        check_dense_size(self.shape[0], 1, "the row norms of AllRange")  # not a MemoryError
        I, J = np.triu_indices(self.n)  # the row order: lexicographic (i, j)
        return _maybe_scalar((J - I + 1).astype(float))

    def colnorm_p(self, p):
        check_p(p)
        j = np.arange(self.n)
        return _maybe_scalar((j + 1) * (self.n - j))

    def dense(self):
        m, n = self.shape
        check_dense_size(m, n, "dense() of AllRange")
        I, J = np.triu_indices(n)  # row-major upper triangle == lexicographic (i, j)
        c = np.arange(n)
        return ((c[None, :] >= I[:, None]) & (c[None, :] <= J[:, None])).astype(float)

    def __repr__(self):
        return f"AllRange({self.n})"


class AllRangeGram(SymmetricFormula):
    """``RᵀR`` for ``R = AllRange(n)``: O(n) products, inverse ``tridiag(−1, 2, −1)/(n+1)``.

    Entry ``(min(i, j) + 1)(n − max(i, j))``, trace ``n(n+1)(n+2)/6``.

    Parameters
    ----------
    n : int
        The size, at least 1.

    Raises
    ------
    ValueError
        When ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``) or is
        below 1.
    """

    def __init__(self, n: int):
        super().__init__(check_int(n, "n", minimum=1))

    def _entries(self, i, j):
        return (np.minimum(i, j) + 1) * (self.n - np.maximum(i, j))

    def trace(self):
        # Σ_j (j+1)(n-j) = n(n+1)(n+2)/6 (exact in integers): all ranges' ||R||_F², in O(1)
        n = self.n
        return float(n * (n + 1) * (n + 2) // 6)

    def _matmat(self, X):
        # (Gx)_a = (n-a) Σ_{b<=a} (b+1) x_b + (a+1) Σ_{b>a} (n-b) x_b
        n = self.n
        a = np.arange(n, dtype=float)[:, None]
        low = _cumsum((a + 1) * X)
        high = _rev_cumsum((n - a) * X)
        high = np.vstack([high[1:], np.zeros((1, X.shape[1]))])
        return (n - a) * low + (a + 1) * high

    def pinv(self):
        n = self.n
        return Weighted(1.0 / (n + 1), SymTridiagonal(np.full(n, 2.0), -np.ones(n - 1)))

    inverse = pinv

    def colnorm_p(self, p):
        if p == 1:
            j = np.arange(self.n, dtype=float)
            return _maybe_scalar((j + 1) * (self.n - j) * (self.n + 1) / 2)
        return super().colnorm_p(p)


class WidthRange(CountingQueries):
    """The ``n-w+1`` sliding windows of width ``w`` (HDMM §8.1, the "Width 32 Range" workload).

    Row ``s`` sums cells ``s..s+w-1``. ``W Wᵀ`` has full rank, so ``pinv()`` is
    ``Wᵀ (W Wᵀ)⁻¹`` with a dense ``(n−w+1) x (n−w+1)`` inverse (size-guarded).

    Parameters
    ----------
    n : int
        The number of cells, at least 1.
    w : int
        The window width, ``1 ≤ w ≤ n``.

    Raises
    ------
    ValueError
        When ``n`` or ``w`` is not an integer (a ``CheckTypeError``, also a ``TypeError``),
        or ``w`` is not in ``1..n``.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 8.1 (the "Width 32 Range" workload).
    """

    def __init__(self, n: int, w: int):
        self.n = check_int(n, "n", minimum=1)
        w = check_int(w, "w", minimum=1)
        if w > self.n:
            raise ValueError(f"window width w must satisfy 1 <= w <= n = {self.n}, got {w}")
        self.w = w
        self.shape = (self.n - w + 1, self.n)

    def _matmat(self, X):
        S = _cumsum0(X)
        return S[self.w :] - S[: self.n - self.w + 1]

    def _rmatmat(self, Y):
        # (Wᵀy)_c = Σ_{s = max(0, c-w+1)}^{min(c, n-w)} y_s
        P = _cumsum0(Y)
        c = np.arange(self.n)
        hi = np.minimum(c, self.n - self.w) + 1
        lo = np.maximum(0, c - self.w + 1)
        return P[hi] - P[lo]

    def gram(self):
        return WidthRangeGram(self.n, self.w)

    def _outer_gram_inverse(self) -> np.ndarray:
        m = self.shape[0]
        check_dense_size(m, m, "pinv() of WidthRange (inverse of W Wᵀ)")
        s = np.arange(m)
        WWt = np.maximum(0, self.w - np.abs(s[:, None] - s[None, :])).astype(float)
        return np.linalg.inv(WWt)

    def pinv(self):
        return Product(self.T, Dense(self._outer_gram_inverse()))

    def rownorm_p(self, p):
        check_p(p)
        return float(self.w)

    def colnorm_p(self, p):
        check_p(p)
        c = np.arange(self.n)
        return _maybe_scalar(np.minimum(c, self.n - self.w) - np.maximum(0, c - self.w + 1) + 1)

    def dense(self):
        m, n = self.shape
        check_dense_size(m, n, "dense() of WidthRange")
        s, c = np.arange(m)[:, None], np.arange(n)[None, :]
        return ((c >= s) & (c < s + self.w)).astype(float)

    def __repr__(self):
        return f"WidthRange({self.n}, {self.w})"


class WidthRangeGram(SymmetricFormula):
    """``WᵀW`` for ``W = WidthRange(n, w)``, of rank ``n-w+1``.

    Entry ``(i, j)``: the number of windows containing both cells.

    Parameters
    ----------
    n : int
        The number of cells, at least 1.
    w : int
        The window width, ``1 ≤ w ≤ n``.

    Raises
    ------
    ValueError
        As :class:`WidthRange`: ``n`` or ``w`` not an integer, or ``w`` not in ``1..n``.
    """

    def __init__(self, n: int, w: int):
        self.base = WidthRange(n, w)
        self.w = self.base.w
        super().__init__(self.base.n)

    def _entries(self, i, j):
        lo = np.maximum(0, np.maximum(i, j) - self.w + 1)
        hi = np.minimum(np.minimum(i, j), self.n - self.w)
        return np.maximum(0, hi - lo + 1)

    def _matmat(self, X):
        return self.base._rmatmat(self.base._matmat(X))

    def pinv(self):
        Wp = self.base.pinv()
        return Product(Wp, Wp.T)

    def colnorm_p(self, p):
        if p == 1:
            c = self.base.colnorm_p(1)
            return c * self.w if np.isscalar(c) else _maybe_scalar(c * self.w)
        return super().colnorm_p(p)
