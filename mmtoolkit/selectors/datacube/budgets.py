"""Optimal noise budgets for a grouped strategy (Cormode et al., ICDE 2013, §3.1, Prop. 3.1,
Def. 3.1, Cor. 3.3, App. A): the closed forms :func:`optimal_budgets` (L1 and L2),
:func:`uniform_budgets` and the objective :func:`budget_objective` (eq. 1).
User guide: docs/algorithms/datacube.md.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["BUDGETS", "budget_objective", "optimal_budgets", "uniform_budgets"]

#: The budget modes of the ``datacube`` and ``fourier`` selectors.
BUDGETS = ("uniform", "optimal")


def _check_norm(norm) -> int:
    if norm not in (1, 2):
        raise ValueError(f"norm must be 1 (Laplace, L1) or 2 (Gaussian, L2), got {norm!r}")
    return int(norm)


def _check_b(b) -> np.ndarray:
    b = np.asarray(b, dtype=float).ravel()
    if not np.all(np.isfinite(b)) or np.any(b < 0):
        raise ValueError("b (squared recovery column norms) must be finite and non-negative")
    return b


def _check_C(C, g: int) -> np.ndarray:
    C = np.asarray(C, dtype=float).ravel()
    if C.size == 0:
        raise ValueError("need at least one group: C (the group column magnitudes) is empty")
    if C.size != g:
        raise ValueError(f"need one C_k per group: {g} groups, {C.size} values")
    if not np.all(np.isfinite(C)) or np.any(C <= 0):
        raise ValueError("C_k (group column magnitudes) must be positive and finite")
    return C


def optimal_budgets(b: ArrayLike, C: ArrayLike, norm: int) -> tuple[np.ndarray, float]:
    """Closed-form optimal group budget fractions (L1: Cor. 3.3; L2: App. A; guide page) and the
    objective ``Σ_k b_k / λ_k²`` (times ``privacy.noise_variance(1)``: the total variance).

    Row ``i`` of group ``k`` is answered with noise of variance ``v / λ_k²`` under the
    constraint ``Σ_k C_k λ_k = 1`` (L1) or ``Σ_k C_k² λ_k² = 1`` (L2), which both solutions
    meet with equality.

    Parameters
    ----------
    b : array_like of float
        ``b_k`` per group: the weighted squared norms of the recovery columns of the group's
        rows (finite, non-negative, at least one positive).
    C : array_like of float
        ``C_k`` per group: the magnitude of the group's non-zero entries (positive, finite;
        one per ``b_k``).
    norm : int
        The sensitivity norm: 1 (Laplace noise) or 2 (Gaussian noise).

    Returns
    -------
    lam : numpy.ndarray
        The budget fractions ``λ_k``, shape ``(len(b),)``; 0 where ``b_k = 0``.
    objective : float
        ``Σ_k b_k / λ_k²`` at ``lam``: ``(Σ_k b_k^{1/3} C_k^{2/3})³`` (L1) or
        ``(Σ_k C_k √b_k)²`` (L2).

    Raises
    ------
    ValueError
        When ``norm`` is not 1 or 2, ``b`` is not finite and non-negative, ``C`` is empty,
        not of ``b``'s length or not positive and finite, or every ``b_k`` is 0.

    References
    ----------
    Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Section 3.1,
    Corollary 3.3 (L1) and Appendix A (L2).
    """
    norm = _check_norm(norm)
    b = _check_b(b)
    C = _check_C(C, b.size)
    if not np.any(b > 0):
        raise ValueError("every b_k is zero: the recovery uses no strategy row")
    if norm == 1:
        t = np.cbrt(b) * C ** (2.0 / 3.0)
        s = float(np.sum(t))
        lam = np.cbrt(b / C) / s
        return lam, s**3
    t = C * np.sqrt(b)
    s = float(np.sum(t))
    lam = np.sqrt(np.sqrt(b) / (C * s))
    return lam, s**2


def uniform_budgets(C: ArrayLike, norm: int) -> np.ndarray:
    """The same fraction for every group, ``1/Σ C_k`` (L1) or ``1/√Σ C_k²`` (L2): the paper's
    "uniform" baselines.

    Parameters
    ----------
    C : array_like of float
        ``C_k`` per group: the magnitude of the group's non-zero entries (positive, finite,
        at least one).
    norm : int
        The sensitivity norm: 1 (Laplace noise) or 2 (Gaussian noise).

    Returns
    -------
    numpy.ndarray
        The fractions, shape ``(len(C),)``, all equal.

    Raises
    ------
    ValueError
        When ``norm`` is not 1 or 2, or ``C`` is empty or not positive and finite.

    References
    ----------
    Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Section 3.1 and
    Section 5 (the strategies I, Q, F, C with uniform budgets).
    """
    norm = _check_norm(norm)
    C = np.asarray(C, dtype=float).ravel()
    C = _check_C(C, C.size)
    s = float(np.sum(C)) if norm == 1 else math.sqrt(float(np.sum(C * C)))
    return np.full(C.size, 1.0 / s)


def budget_objective(b: ArrayLike, lam: ArrayLike) -> float:
    """``Σ_i b_i / λ_i²`` (0/0 = 0, b > 0 with λ = 0 is +inf): the total variance of ``R y``
    per unit noise variance (eq. 1 without the noise constant).

    Parameters
    ----------
    b : array_like of float
        ``b_i`` per row or group: the weighted squared norms of the recovery columns (finite,
        non-negative).
    lam : array_like of float
        The budget fractions ``λ_i`` (non-negative), one per ``b_i``.

    Returns
    -------
    float
        The objective, in units of the noise variance at sensitivity 1; ``math.inf`` when
        some ``b_i > 0`` has ``λ_i = 0``.

    Raises
    ------
    ValueError
        When ``b`` is not finite and non-negative, ``lam`` is not of ``b``'s length, or a
        ``λ_i`` is negative.

    References
    ----------
    Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Section 3.1,
    objective (1).
    """
    b = _check_b(b)
    lam = np.asarray(lam, dtype=float).ravel()
    if lam.size != b.size:
        raise ValueError(f"b has {b.size} entries, lambda {lam.size}")
    if np.any(lam < 0):
        raise ValueError("budget fractions must be non-negative")
    used = b > 0
    if np.any(lam[used] == 0):
        return math.inf
    return float(np.sum(b[used] / lam[used] ** 2))
