"""Optimal noise budgets for a grouped strategy (Cormode et al., ICDE 2013, §3.1, Prop. 3.1,
Def. 3.1, Cor. 3.3, App. A): the closed forms :func:`optimal_budgets` (L1 and L2),
:func:`uniform_budgets` and the objective :func:`budget_objective` (eq. 1).
User guide: docs/algorithms/datacube.md.
"""

from __future__ import annotations

import math

import numpy as np

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


def optimal_budgets(b, C, norm: int) -> tuple[np.ndarray, float]:
    """Closed-form optimal group budget fractions (L1: Cor. 3.3; L2: App. A; guide page) and the
    objective ``Σ_k b_k / λ_k²`` (times ``privacy.noise_variance(1)``: the total variance)."""
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


def uniform_budgets(C, norm: int) -> np.ndarray:
    """The same fraction for every group, ``1/Σ C_k`` (L1) or ``1/√Σ C_k²`` (L2): the paper's
    "uniform" baselines."""
    norm = _check_norm(norm)
    C = np.asarray(C, dtype=float).ravel()
    C = _check_C(C, C.size)
    s = float(np.sum(C)) if norm == 1 else math.sqrt(float(np.sum(C * C)))
    return np.full(C.size, 1.0 / s)


def budget_objective(b, lam) -> float:
    """``Σ_i b_i / λ_i²`` (0/0 = 0, b > 0 with λ = 0 is +inf): the total variance of ``R y``
    per unit noise variance (eq. 1 without the noise constant)."""
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
