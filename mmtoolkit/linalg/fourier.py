"""Parity (Walsh–Hadamard / Fourier) coefficients on d binary attributes.

Barak, Chaudhuri, Dwork, Kale, McSherry & Talwar (PODS 2007) and Cormode, Procopiuc,
Srivastava & Yaroslavtsev (ICDE 2013, §4.1, Thm 4.1). :class:`Fourier` has rows ``w_β χ_β``
for chosen coefficients (int bitmasks, the marginals' key convention), each product one fast
Walsh–Hadamard transform (:func:`fwht`); its Gram is a :class:`MarginalsGram` on ``(2,)*d``.
:func:`downset` gives the coefficients a set of marginals needs.

User guide: docs/algorithms/implicit-algebra.md ("Fourier (parity) coefficients").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from ..checks import check_int
from .base import Matrix, check_dense_size, check_p
from .marginals import MarginalsGram, check_dim

__all__ = ["Fourier", "fwht", "downset", "bit_reverse", "local_index"]


def fwht(X: np.ndarray) -> np.ndarray:
    """Unnormalised Walsh–Hadamard transform ``H_d X`` along axis 0 (Sylvester order,
    ``H_d[j, η] = (-1)^{popcount(j & η)}``), a new array; ``X`` has ``2^d`` rows (1-D or 2-D)."""
    Y = np.array(X, dtype=float)
    vec = Y.ndim == 1
    if vec:
        Y = Y[:, None]
    n = Y.shape[0]
    if n < 1 or n & (n - 1):
        raise ValueError(f"fwht needs a power-of-two number of rows, got {n}")
    k = Y.shape[1]
    h = 1
    while h < n:
        V = Y.reshape(-1, 2, h, k)
        a = V[:, 0].copy()
        V[:, 0] += V[:, 1]
        V[:, 1] = a - V[:, 1]
        h *= 2
    return Y[:, 0] if vec else Y


def bit_reverse(keys, d: int) -> np.ndarray:
    """Map bitmasks (bit ``i`` ⇔ attribute ``i``) to C-order positions (bit ``d-1-i``)."""
    return local_index(keys, (1 << d) - 1)


def local_index(betas, key: int) -> np.ndarray:
    """Position of each ``β ≼ key`` in the ``2^{|key|}``-cell marginal on ``key`` (C order
    over its kept attributes): ``θ_β`` is entry ``local_index(β)`` of the marginal's WHT."""
    betas = np.asarray(betas, dtype=np.int64)
    bits = [i for i in range(key.bit_length()) if (key >> i) & 1]
    m = len(bits)
    out = np.zeros_like(betas)
    for t, b in enumerate(bits):
        out |= ((betas >> b) & 1) << (m - 1 - t)
    return out


def submasks(key: int) -> np.ndarray:
    """All ``β ≼ key`` (bit subsets of ``key``), ascending, as int64."""
    bits = [i for i in range(key.bit_length()) if (key >> i) & 1]
    idx = np.arange(1 << len(bits), dtype=np.int64)
    out = np.zeros_like(idx)
    for t, b in enumerate(bits):
        out |= ((idx >> t) & 1) << b
    return np.sort(out)


def downset(keys) -> np.ndarray:
    """``∪_α {β : β ≼ α}``: the coefficients the marginals ``keys`` need (Cormode et al. §4.1)."""
    keys = [int(k) for k in keys]
    if not keys:
        raise ValueError("downset needs at least one marginal key")
    if any(k < 0 for k in keys):
        raise ValueError(f"marginal keys must be non-negative bitmasks, got {keys}")
    return np.unique(np.concatenate([submasks(k) for k in keys]))


def _parity(v: np.ndarray) -> np.ndarray:
    """popcount(v) mod 2 for int64 arrays."""
    v = v.copy()
    out = np.zeros(v.shape, dtype=np.int64)
    while np.any(v):
        out ^= v & 1
        v >>= 1
    return out


class Fourier(Matrix):
    """Rows ``w_β χ_β`` (entries ``±w_β``) for the coefficients ``β`` (Cormode et al. §4.1),
    ascending; ``coefficients``: int bitmasks (weight 1) or a mapping ``{β: w_β}``.

    ``χ_β(η) = (−1)^{⟨β, η⟩}`` on the ``2^d`` cells (C order), so the shape is
    ``(k, 2^d)`` for ``k`` coefficients with nonzero weights. Every product is one fast
    Walsh–Hadamard transform; the rows are orthogonal, so the pseudo-inverse is a rescaled
    transpose, and the Gram is a :class:`MarginalsGram` on ``(2,) * d``.

    Parameters
    ----------
    d : int
        The number of binary attributes, at least 1.
    coefficients : iterable of int or mapping of int to float
        The coefficients ``β`` as bitmasks ``0 ≤ β < 2^d`` (bit ``i``: attribute ``i``),
        each of weight 1, or a mapping ``{β: w_β}`` of finite weights; zero weights are
        dropped.

    Raises
    ------
    ValueError
        When ``d`` is not an integer of at least 1, ``coefficients`` is neither an iterable
        (a string is refused) nor a mapping, a coefficient is not an integer or is outside
        ``0 ≤ β < 2^d`` or listed twice, a weight is not finite, or no weight is nonzero.

    References
    ----------
    Barak, Chaudhuri, Dwork, Kale, McSherry & Talwar, PODS 2007; Cormode, Procopiuc,
    Srivastava & Yaroslavtsev, "Accurate and efficient private release of datacubes and
    contingency tables", ICDE 2013, Section 4.1 (Theorem 4.1) and Proposition 3.1.
    """

    def __init__(self, d: int, coefficients: Iterable[int] | Mapping[int, float]):
        self.d = check_int(d, "d", minimum=1)
        if isinstance(coefficients, Mapping):
            items = list(coefficients.items())
        elif isinstance(coefficients, Iterable) and not isinstance(coefficients, (str, bytes)):
            items = [(b, 1.0) for b in coefficients]
        else:
            raise ValueError(
                "coefficients must be an iterable of bitmasks or a mapping {bitmask: weight}, "
                f"got {coefficients!r}"
            )
        top = 1 << self.d
        clean: dict[int, float] = {}
        for b, w in items:
            b = check_int(b, "coefficient")
            if not 0 <= b < top:
                raise ValueError(
                    f"coefficient {b} is outside the domain: need 0 <= β < 2^{self.d} "
                    f"(d = {self.d} binary attributes)"
                )
            w = float(w)
            if not math.isfinite(w):
                raise ValueError(f"weight of coefficient {b} must be finite, got {w!r}")
            if b in clean:
                raise ValueError(f"coefficient {b} is listed twice")
            if w != 0.0:
                clean[int(b)] = w
        if not clean:
            raise ValueError("Fourier needs at least one coefficient with a nonzero weight")
        order = sorted(clean)
        self.betas = np.array(order, dtype=np.int64)
        self.weights = np.array([clean[b] for b in order])
        self._rows = bit_reverse(self.betas, self.d)
        self.shape = (len(order), top)

    @property
    def coefficients(self) -> dict[int, float]:
        """``{β: w_β}`` in row order.

        Returns
        -------
        dict of int to float
            The coefficients with nonzero weights, ascending.
        """
        return {int(b): float(w) for b, w in zip(self.betas, self.weights)}

    def _intermediate_rows(self):
        return self.shape[1]

    def _matmat(self, X):
        return self.weights[:, None] * fwht(X)[self._rows]

    def _rmatmat(self, Y):
        Z = np.zeros((self.shape[1], Y.shape[1]))
        Z[self._rows] = self.weights[:, None] * Y
        return fwht(Z)

    def gram(self):
        # SᵀS = Σ_β w_β² χ_β χ_βᵀ = Σ_β 2^d w_β² P_β, P_β the projector onto χ_β = S_β.
        check_dim(self.d, "Fourier.gram()")
        mu = np.zeros(1 << self.d)
        mu[self.betas] = float(self.shape[1]) * self.weights**2
        return MarginalsGram.from_spectrum((2,) * self.d, mu)

    def pinv(self):
        # rows are orthogonal: S Sᵀ = 2^d diag(w²), S⁺ = Sᵀ (S Sᵀ)⁻¹ = Fourier(1/(2^d w))ᵀ
        inv = {int(b): 1.0 / (self.shape[1] * w) for b, w in zip(self.betas, self.weights)}
        return Fourier(self.d, inv).T

    def pinv_operator(self):
        return self.pinv()  # exact, one transform: never least squares for a Fourier release

    def colnorm_p(self, p):
        check_p(p)
        return float(np.sum(np.abs(self.weights) ** p))

    def rownorm_p(self, p):
        check_p(p)
        return np.abs(self.weights) ** p * float(self.shape[1])

    def dense(self):
        check_dense_size(*self.shape, "dense() of Fourier")
        eta = np.arange(self.shape[1], dtype=np.int64)
        signs = 1.0 - 2.0 * _parity(self._rows[:, None] & eta[None, :])
        return self.weights[:, None] * signs

    @classmethod
    def for_marginals(cls, d, keys, weights=None) -> Fourier:
        """The coefficients of the marginals ``keys`` (``downset``), weight 1 or ``weights[β]``.

        The marginal on ``α`` needs exactly the coefficients ``{β : β ⊆ α}``.

        Parameters
        ----------
        d : int
            The number of binary attributes, at least 1.
        keys : iterable of int
            The marginals, as bitmasks ``0 ≤ key < 2^d``; at least one.
        weights : mapping or array_like, optional
            ``weights[β]``, the weight of each needed coefficient ``β`` (e.g. a length-``2^d``
            array); None: weight 1 for all.

        Returns
        -------
        Fourier
            The strategy on the down-closure of ``keys``.

        Raises
        ------
        ValueError
            When ``d`` is not an integer of at least 1, a key is outside ``0 ≤ key < 2^d``,
            ``keys`` is empty, or a weight is refused by the constructor.

        References
        ----------
        Cormode et al. 2013, ICDE, Section 4.1 (Theorem 4.1).
        """
        d = check_int(d, "d", minimum=1)
        for k in keys:
            if not 0 <= int(k) < 1 << d:
                raise ValueError(
                    f"marginal key {k} is outside the domain of d = {d} binary attributes"
                )
        F = downset(keys)
        if weights is None:
            return cls(d, [int(b) for b in F])
        return cls(d, {int(b): weights[int(b)] for b in F})

    def __repr__(self):
        return f"Fourier(d={self.d}, {self.shape[0]} coefficients)"
