"""Optimal noise budgets for a grouped strategy (Cormode et al., ICDE 2013, §3.1, Cor. 3.3, App. A).

Step 2 of the framework of Cormode, Procopiuc, Srivastava & Yaroslavtsev's Fig. 3: given a
strategy ``S`` and an initial recovery ``R`` with ``R S = Q``, row ``i`` of ``S`` is answered
with noise of variance ``v / λ_i²`` (Prop. 3.1, ``v = privacy.noise_variance(1)``), where the
*budget fractions* ``λ`` satisfy ``Σ_i λ_i |S_ij| ≤ 1`` (L1, Laplace) or ``Σ_i λ_i² S_ij² ≤ 1``
(L2, Gaussian, App. A) for every column. The objective (eq. 1) is the weighted total variance
of ``R y``: ``v Σ_i b_i / λ_i²`` with ``b_i = Σ_q w_q R_qi²``.

With a *grouping* (Def. 3.1: rows of a group have disjoint supports and one magnitude
``C_k``, and every column meets each group) the problem has the closed forms of Cor. 3.3
and App. A (:func:`optimal_budgets`). The package's strategies have their grouping by
construction (C = 1 per group), so only the closed forms are implemented; the general convex
program (1)–(3) of §3.2 is the tests' reference (tests/datacube_reference.py).

A budgeted strategy is a row-weighted Matrix (``Marginals`` / ``Fourier`` with weights
``λ``) of sensitivity 1, which :mod:`mmtoolkit.evaluate` scores with least squares: the GLS
recovery of §3.2.
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
    if C.size != g:
        raise ValueError(f"need one C_k per group: {g} groups, {C.size} values")
    if not np.all(np.isfinite(C)) or np.any(C <= 0):
        raise ValueError("C_k (group column magnitudes) must be positive and finite")
    return C


def optimal_budgets(b, C, norm: int) -> tuple[np.ndarray, float]:
    """Closed-form optimal group budget fractions and the objective ``Σ_k b_k / λ_k²``.

    L1 / Laplace (Cor. 3.3): ``λ_k = (b_k/C_k)^{1/3} / Σ_l b_l^{1/3} C_l^{2/3}``, objective
    ``(Σ_k b_k^{1/3} C_k^{2/3})³``. L2 / Gaussian (App. A): ``λ_k² = √b_k / (C_k Σ_l C_l √b_l)``,
    objective ``(Σ_k C_k √b_k)²``. Both satisfy their constraint (``Σ C_k λ_k = 1``,
    ``Σ C_k² λ_k² = 1``) with equality; groups with ``b_k = 0`` get ``λ_k = 0``. Multiply the
    objective by ``privacy.noise_variance(1)`` for the total variance.
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


def uniform_budgets(C, norm: int) -> np.ndarray:
    """The same fraction for every group: ``1/Σ C_k`` (L1) or ``1/√Σ C_k²`` (L2) — the
    standard mechanism on ``S`` (the paper's "uniform" baselines I, Q, F, C)."""
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
