"""GLS recovery of marginals in the parity basis (Cormode et al., ICDE 2013, §3.2 eq. 7, §3.3,
§4, Thm 4.1): :class:`FourierEstimate`, per-coefficient inverse-variance averages, without
any ``2^d``-cell vector.
User guide: docs/algorithms/datacube.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ...checks import check_int, check_positive
from ...linalg.fourier import fwht, local_index, submasks

__all__ = ["FourierEstimate"]


@dataclass
class _Estimates:
    betas: np.ndarray
    values: np.ndarray  # (len(betas), k) estimates
    weights: np.ndarray  # inverse variances


class FourierEstimate:
    """GLS in the parity basis on ``d`` binary attributes (§3.2 with §4; digest §4 [D]): add noisy
    marginals or coefficients, read the GLS coefficients (:meth:`solve`) and :meth:`marginal`.

    For marginal and Fourier strategies the GLS recovery is diagonal in the parity basis:
    every noisy marginal gives independent estimates of its coefficients, and GLS is the
    per-coefficient inverse-variance average. No ``2^d``-cell vector is built. Answers may
    carry extra columns (several noise draws at once).

    Parameters
    ----------
    d : int
        The number of binary attributes (at least 1).

    Raises
    ------
    ValueError
        When ``d`` is not an integer (``CheckTypeError``) or below 1.

    References
    ----------
    Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Section 3.2,
    equation (7), and Section 4, Theorem 4.1.
    """

    def __init__(self, d: int):
        self.d = check_int(d, "d", minimum=1)
        self._parts: list[_Estimates] = []
        self._solved: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _check_key(self, key) -> int:
        key = check_int(key, "marginal key")
        if not 0 <= key < 1 << self.d:
            raise ValueError(
                f"marginal {key} is outside the domain of d = {self.d} binary attributes"
            )
        return key

    def add_marginal(self, key: int, answers: ArrayLike, variance: float) -> None:
        """A noisy marginal on ``key`` (cells in C order over its attributes).

        Parameters
        ----------
        key : int
            The marginal's attribute bitmask, below ``2^d``.
        answers : array_like of float
            Its ``2^{|key|}`` noisy cells, shape ``(2^{|key|},)`` or ``(2^{|key|}, k)`` for
            ``k`` noise draws (every measurement added must have the same ``k``).
        variance : float
            The noise variance of each cell (positive).

        Raises
        ------
        ValueError
            When ``key`` is not an integer or outside the ``d`` attributes, ``answers`` has
            not ``2^{|key|}`` rows, or ``variance`` is not a positive number.
        """
        key = self._check_key(key)
        y = np.asarray(answers, dtype=float)
        y = y[:, None] if y.ndim == 1 else y
        m = bin(key).count("1")
        if y.shape[0] != 1 << m:
            raise ValueError(f"marginal {key} has {1 << m} cells, got {y.shape[0]} answers")
        variance = check_positive(variance, "variance")
        betas = submasks(key)
        theta = fwht(y)[local_index(betas, key)]
        w = np.full(betas.size, 1.0 / ((1 << m) * variance))
        self._parts.append(_Estimates(betas, theta, w))
        self._solved = None

    def add_coefficients(
        self, betas: Iterable[int], answers: ArrayLike, variances: ArrayLike
    ) -> None:
        """Noisy unnormalised coefficients ``θ̃_β`` with their variances.

        Parameters
        ----------
        betas : iterable of int
            The coefficients' bitmasks, each below ``2^d``.
        answers : array_like of float
            One noisy ``θ̃_β`` per entry of ``betas``, shape ``(len(betas),)`` or
            ``(len(betas), k)`` for ``k`` noise draws.
        variances : float or array_like of float
            The variance of each answer (positive): one value for all, or one per
            coefficient.

        Raises
        ------
        ValueError
            When a ``β`` is not an integer or outside the ``d`` attributes, or there is not
            one answer and one positive variance per coefficient.
        """
        keys = np.asarray([self._check_key(b) for b in betas], dtype=np.int64)
        y = np.asarray(answers, dtype=float)
        y = y[:, None] if y.ndim == 1 else y
        var = np.broadcast_to(np.asarray(variances, dtype=float), keys.shape)
        if y.shape[0] != keys.size or np.any(var <= 0):
            raise ValueError("need one answer and one positive variance per coefficient")
        self._parts.append(_Estimates(keys, y, 1.0 / var))
        self._solved = None

    def solve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(betas, θ̂, Var θ̂)``: the GLS coefficients (inverse-variance averages).

        Returns
        -------
        betas : numpy.ndarray
            Every coefficient estimated so far, int64 bitmasks in ascending order.
        theta : numpy.ndarray
            The GLS estimates ``θ̂_β``, shape ``(len(betas), k)``.
        variance : numpy.ndarray
            Their variances ``Var θ̂_β``, shape ``(len(betas),)``.

        Raises
        ------
        ValueError
            When no measurement has been added.
        """
        if not self._parts:
            raise ValueError("no measurement has been added")
        if self._solved is None:
            betas = np.concatenate([p.betas for p in self._parts])
            vals = np.concatenate([p.values for p in self._parts])
            wts = np.concatenate([p.weights for p in self._parts])
            uniq, inv = np.unique(betas, return_inverse=True)
            wsum = np.bincount(inv, weights=wts, minlength=uniq.size)
            num = np.zeros((uniq.size, vals.shape[1]))
            np.add.at(num, inv, wts[:, None] * vals)
            self._solved = (uniq, num / wsum[:, None], 1.0 / wsum)
        return self._solved

    def _lookup(self, key: int):
        betas, theta, var = self.solve()
        need = submasks(key)
        pos = np.searchsorted(betas, need)
        ok = (pos < betas.size) & (betas[np.minimum(pos, betas.size - 1)] == need)
        if not ok.all():
            raise ValueError(
                f"the measurements do not support marginal {key}: coefficient(s) "
                f"{need[~ok][:5].tolist()} are not estimated"
            )
        return need, theta[pos], var[pos]

    def marginal(self, key: int) -> np.ndarray:
        """The GLS estimate of marginal ``key``: ``2^{-|α|} H θ̂_local`` (Thm 4.1).

        Parameters
        ----------
        key : int
            The marginal's attribute bitmask ``α``, below ``2^d``.

        Returns
        -------
        numpy.ndarray
            Its ``2^{|α|}`` cells in C order over its attributes, shape ``(2^{|α|},)``, or
            ``(2^{|α|}, k)`` when the measurements carry ``k > 1`` noise draws.

        Raises
        ------
        ValueError
            When ``key`` is outside the ``d`` attributes, nothing has been added, or a
            coefficient ``β ≼ α`` has not been estimated (the message names them).
        """
        key = self._check_key(key)
        need, theta, _ = self._lookup(key)
        m = bin(key).count("1")
        local = np.zeros((1 << m, theta.shape[1]))
        local[local_index(need, key)] = theta
        out = fwht(local) / float(1 << m)
        return out[:, 0] if out.shape[1] == 1 else out

    def cell_variance(self, key: int) -> float:
        """Variance of every cell of the GLS marginal ``key``: ``2^{-2|α|} Σ_{β≼α} Var θ̂_β``.

        Parameters
        ----------
        key : int
            The marginal's attribute bitmask ``α``, below ``2^d``.

        Returns
        -------
        float
            The variance, in the units of the variances given with the measurements.

        Raises
        ------
        ValueError
            When ``key`` is outside the ``d`` attributes, nothing has been added, or a
            coefficient ``β ≼ α`` has not been estimated.
        """
        key = self._check_key(key)
        _, _, var = self._lookup(key)
        m = bin(key).count("1")
        return float(np.sum(var)) / float(1 << (2 * m))
