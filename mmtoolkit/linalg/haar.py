"""The unnormalised Haar wavelet matrix (Privelet: Xiao, Wang & Gehrke, ICDE 2010; a baseline
strategy in the HDMM experiments, §8).

:class:`Haar` (``n`` a power of two), its Gram :class:`HaarGram` and inverse
:class:`HaarInverse`, all in closed form with ``O(n k)`` products.

User guide: docs/algorithms/implicit-algebra.md ("Haar wavelets").
"""

from __future__ import annotations

import numpy as np

from ..checks import check_int
from .base import Matrix, Product, check_dense_size, check_p
from .ranges import SymmetricFormula, SymTridiagonal, _maybe_scalar


def _power_of_two(n) -> int:
    n = check_int(n, "n", minimum=1)
    if n & (n - 1):
        raise ValueError(f"Haar needs n to be a power of two, got {n}")
    return n


def _haar_forward(X: np.ndarray) -> np.ndarray:
    """``H X`` in O(n k): pairwise sums recurse, differences are the details, each level written
    into the result (rows ``[m/2, m)`` and ``[0, m/2)``) from one copy of the current sums."""
    n = X.shape[0]
    out = np.empty(X.shape, dtype=np.result_type(X.dtype, np.float32))
    if n == 1:
        out[...] = X
        return out
    h = n // 2
    np.subtract(X[0::2], X[1::2], out=out[h:n])
    np.add(X[0::2], X[1::2], out=out[:h])
    m = h
    while m > 1:
        h = m // 2
        even, odd = out[0:m:2].copy(), out[1:m:2].copy()
        np.subtract(even, odd, out=out[h:m])
        np.add(even, odd, out=out[:h])
        m = h
    return out


def _haar_adjoint(Y: np.ndarray) -> np.ndarray:
    """``Hᵀ Y`` in O(n k): inverse of the forward recursion's data flow, built in the result
    (level ``s`` expands rows ``[0, s)`` into ``[0, 2s)`` from a copy of at most ``n/2`` rows)."""
    n = Y.shape[0]
    out = np.empty(Y.shape, dtype=np.result_type(Y.dtype, np.float32))
    out[0:1] = Y[0:1]
    s = 1
    while s < n:
        cur, d = out[:s].copy(), Y[s : 2 * s]
        np.add(cur, d, out=out[0 : 2 * s : 2])
        np.subtract(cur, d, out=out[1 : 2 * s : 2])
        s *= 2
    return out


def _row_norms_sq(n: int) -> np.ndarray:
    """``||row_r||²``: ``n`` for the total, ``n/s`` for each row of the size-``s`` block."""
    out = [np.array([float(n)])]
    s = 1
    while s < n:
        out.append(np.full(s, n / s))
        s *= 2
    return np.concatenate(out)


def _haar_diag(n: int) -> np.ndarray:
    """``H[a, a]``: row ``a = s + r`` of block ``s`` is +1 on ``[r L, r L + L/2)`` and -1 on
    ``[r L + L/2, (r+1) L)`` with ``L = n/s``."""
    a = np.arange(n)
    out = np.zeros(n)
    out[0] = 1.0
    if n > 1:
        b = a[1:]
        s = 1 << (np.frexp(b.astype(float))[1] - 1)  # largest power of two <= b
        L = n // s
        start = (b - s) * L
        first = (b >= start) & (b < start + L // 2)
        second = (b >= start + L // 2) & (b < start + L)
        out[1:] = np.where(first, 1.0, np.where(second, -1.0, 0.0))
    return out


class Haar(Matrix):
    """The unnormalised ±1 Haar wavelet matrix, ``n`` a power of two (implicit-algebra.md).

    ``H_1 = [1]``, ``H_n = [H_{n/2} ⊗ [1 1] ; I_{n/2} ⊗ [1 −1]]``: the total, then the detail
    coefficients level by level. Its rows are orthogonal, so its inverse is
    ``Hᵀ (H Hᵀ)⁻¹`` (:class:`HaarInverse`); every column has L1 norm ``log2(n) + 1``.

    Parameters
    ----------
    n : int
        The number of cells, a power of two (1 included).

    Raises
    ------
    ValueError
        When ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``), is below
        1 or is not a power of two.

    References
    ----------
    Xiao, Wang & Gehrke, "Differential privacy via wavelet transforms" (Privelet), ICDE
    2010; Li et al. 2010, the matrix mechanism, Section 6 (the wavelet strategy).
    """

    def __init__(self, n: int):
        self.n = _power_of_two(n)
        self.levels = self.n.bit_length() - 1
        self.shape = (self.n, self.n)

    def _matmat(self, X):
        return _haar_forward(X)

    def _rmatmat(self, Y):
        return _haar_adjoint(Y)

    def gram(self):
        return HaarGram(self.n)

    def pinv(self):
        return HaarInverse(self.n)

    def pinv_operator(self):
        return self.pinv()

    inverse = pinv

    def colnorm_p(self, p):
        check_p(p)
        return float(self.levels + 1)

    def rownorm_p(self, p):
        """The row norms (entries are 0 and ±1, so L1 = squared L2): the diagonal of ``H Hᵀ``.

        Parameters
        ----------
        p : int
            1 or 2 (the same values).

        Returns
        -------
        numpy.ndarray
            ``n`` for the total's row, then ``n/s`` for each row of the size-``s`` block.

        Raises
        ------
        ValueError
            When ``p`` is not 1 or 2.
        """
        check_p(p)
        return _row_norms_sq(self.n)

    def diag(self):
        return _haar_diag(self.n)

    def __repr__(self):
        return f"Haar({self.n})"


class HaarInverse(Matrix):
    """``H⁻¹ = Hᵀ Λ⁻¹`` with ``Λ = H Hᵀ`` diagonal (Privelet reconstruction): column ``r`` is
    row ``r`` of ``H`` divided by its squared norm.

    Parameters
    ----------
    n : int
        The number of cells, a power of two (1 included).

    Raises
    ------
    ValueError
        When ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``), is below
        1 or is not a power of two.

    References
    ----------
    Xiao, Wang & Gehrke, "Differential privacy via wavelet transforms" (Privelet), ICDE
    2010; Li et al. 2010, the matrix mechanism, Section 6 (the wavelet strategy).
    """

    def __init__(self, n: int):
        self.n = _power_of_two(n)
        self.shape = (self.n, self.n)
        self._w = _row_norms_sq(self.n)

    def _matmat(self, X):
        return _haar_adjoint(X / self._w[:, None])

    def _rmatmat(self, Y):
        return _haar_forward(Y) / self._w[:, None]

    def pinv(self):
        return Haar(self.n)

    inverse = pinv

    def gram(self):
        # (Hᵀ Λ⁻¹)ᵀ (Hᵀ Λ⁻¹) = Λ⁻¹ (H Hᵀ) Λ⁻¹ = Λ⁻¹, a diagonal matrix
        return SymTridiagonal(1.0 / self._w, np.zeros(self.n - 1))

    def colnorm_p(self, p):
        check_p(p)
        return 1.0 if p == 1 else _maybe_scalar(1.0 / self._w)

    def diag(self):
        return _haar_diag(self.n) / self._w

    def __repr__(self):
        return f"HaarInverse({self.n})"


class HaarGram(SymmetricFormula):
    """``HᵀH`` for the Haar matrix (implicit-algebra.md); column sums ``n`` (``HᵀH1 = n Hᵀe_0``).

    Entry ``(a, b)``: ``L − bitlen(a XOR b) + [a = b]`` with ``L = log2 n``; its inverse is
    ``Hᵀ Λ⁻² H``.

    Parameters
    ----------
    n : int
        The number of cells, a power of two (1 included).

    Raises
    ------
    ValueError
        When ``n`` is not an integer (a ``CheckTypeError``, also a ``TypeError``), is below
        1 or is not a power of two.
    """

    def __init__(self, n: int):
        super().__init__(_power_of_two(n))
        self.levels = self.n.bit_length() - 1

    def _entries(self, i, j):
        x = np.bitwise_xor(i, j)
        bitlen = np.frexp(np.asarray(x, dtype=float))[1]
        return self.levels - bitlen + (x == 0)

    def _matmat(self, X):
        return _haar_adjoint(_haar_forward(X))

    def pinv(self):
        Hi = HaarInverse(self.n)
        return Product(Hi, Hi.T)

    inverse = pinv

    def colnorm_p(self, p):
        check_p(p)
        if p == 1:
            return float(self.n)
        # column a: one entry L+1 (b = a) and 2^(l-1) entries L-l for l = 1..L (bitlen(a^b) = l)
        L = self.levels
        return float((L + 1) ** 2 + sum(2 ** (l - 1) * (L - l) ** 2 for l in range(1, L + 1)))

    def diag(self):
        check_dense_size(self.n, 1, "diag() of HaarGram")
        return np.full(self.n, float(self.levels + 1))

    def trace(self):
        return float(self.n * (self.levels + 1))
