"""Reference computations for the Datacube budgeting tests (test oracles, not package API).

Cormode, Procopiuc, Srivastava & Yaroslavtsev, "Accurate and Efficient Private Release of
Datacubes and Contingency Tables" (ICDE 2013), §3. The package's selectors budget only
strategies whose grouping is known by construction (I, Q, F, C: one magnitude per group, see
:mod:`mmtoolkit.selectors.datacube.budgets`). The tests check those closed forms against the
general route of the paper on explicit dense matrices, which lives here:

* :func:`greedy_grouping` — a first-fit grouping of any ``S`` (Def. 3.1, §3.3 "arbitrary S");
* :func:`column_weights`, :func:`group_totals` — ``b_i = Σ_q w_q R_qi²`` and its group sums;
* :func:`privacy_spent` — the per-column constraint of (1)–(3), must be ≤ 1;
* :func:`solve_budgets` — the convex program (1)–(3) with cvxpy (Thm 3.4: the closed form
  of Cor. 3.3 / App. A is its optimum when the grouping property holds);
* :func:`gls_recovery` — the dense GLS recovery ``R* = Q (Sᵀ V⁻¹ S)⁺ Sᵀ V⁻¹`` (§3.2, eq. 7),
  the reference for :class:`~mmtoolkit.selectors.datacube.FourierEstimate` and the evaluator.

All inputs are small dense arrays; nothing here is size-guarded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmtoolkit.selectors.datacube import budget_objective


def _dense(M) -> np.ndarray:
    return np.asarray(M.dense() if hasattr(M, "dense") else M, dtype=float)


@dataclass(frozen=True)
class Grouping:
    """A grouping of the rows of ``S`` (Def. 3.1): ``labels[i]`` = group of row ``i``,
    ``C[k]`` = the magnitude every column meets in group ``k``; ``exact`` tells whether the
    grouping property holds (disjoint supports, one magnitude, every column covered)."""

    labels: np.ndarray
    C: np.ndarray
    exact: bool

    @property
    def size(self) -> int:
        """The number of groups ``g``."""
        return int(self.C.size)


def greedy_grouping(S, atol: float = 1e-12) -> Grouping:
    """First-fit grouping of the rows of a dense ``S`` (§3.3, "arbitrary S").

    A row joins the first group whose rows have supports disjoint from it and the same
    nonzero magnitude; otherwise it opens a new group. ``exact`` is True when the result has
    the grouping property.
    """
    A = np.abs(_dense(S))
    labels = np.empty(A.shape[0], dtype=np.int64)
    supports: list[np.ndarray] = []
    mags: list[float] = []
    uniform_rows = True
    for i, row in enumerate(A):
        nz = row > atol
        assert nz.any(), f"row {i} of the strategy is zero"
        vals = row[nz]
        mag = float(vals.max())
        same = bool(np.all(np.abs(vals - mag) <= atol * max(1.0, mag)))
        uniform_rows &= same
        for k, (sup, m) in enumerate(zip(supports, mags)):
            if same and abs(m - mag) <= atol * max(1.0, mag) and not np.any(sup & nz):
                supports[k] = sup | nz
                labels[i] = k
                break
        else:
            labels[i] = len(supports)
            supports.append(nz.copy())
            mags.append(mag)
    exact = uniform_rows and all(sup.all() for sup in supports)
    return Grouping(labels, np.array(mags), bool(exact))


def column_weights(R) -> np.ndarray:
    """``b_i = Σ_q R_qi²`` (§3.2): the squared column norms of a dense recovery ``R``."""
    R = _dense(R)
    return np.sum(R * R, axis=0)


def group_totals(b, grouping: Grouping) -> np.ndarray:
    """``b_k = Σ_{i ∈ G_k} b_i``."""
    b = np.asarray(b, dtype=float).ravel()
    return np.bincount(grouping.labels, weights=b, minlength=grouping.size)


def privacy_spent(S, lam, norm: int) -> float:
    """``max_j Σ_i λ_i |S_ij|`` (L1) or ``max_j √(Σ_i λ_i² S_ij²)`` (L2): must be ≤ 1."""
    S = _dense(S)
    lam = np.asarray(lam, dtype=float).ravel()
    if norm == 1:
        return float(np.max(np.abs(S).T @ np.abs(lam)))
    return math.sqrt(float(np.max((S * S).T @ (lam * lam))))


def solve_budgets(S, b, norm: int, solver: str = "CLARABEL") -> tuple[np.ndarray, float]:
    """The convex program (1)–(3) for any ``S``, with cvxpy (§3.2).

    L1: minimise ``Σ b_i λ_i^{-2}`` s.t. ``|S|ᵀ λ ≤ 1``, ``λ ≥ 0``. L2: in ``u = λ²``,
    minimise ``Σ b_i / u_i`` s.t. ``(S∘S)ᵀ u ≤ 1``, ``u ≥ 0``. Rows with ``b_i = 0`` get
    ``λ_i = 0``. Returns ``(λ, objective)``.
    """
    import cvxpy as cp

    S = _dense(S)
    b = np.asarray(b, dtype=float).ravel()
    used = b > 0
    Su, bu = S[used], b[used]
    scale = float(np.max(bu))
    x = cp.Variable(int(used.sum()), pos=True)
    if norm == 1:
        objective = cp.sum(cp.multiply(bu / scale, cp.power(x, -2)))
        constraints = [np.abs(Su).T @ x <= 1]
    else:
        objective = cp.sum(cp.multiply(bu / scale, cp.inv_pos(x)))
        constraints = [(Su * Su).T @ x <= 1]
    problem = cp.Problem(cp.Minimize(objective), constraints)
    problem.solve(solver=solver)
    assert problem.status in ("optimal", "optimal_inaccurate"), problem.status
    lam = np.zeros(b.size)
    val = np.maximum(np.asarray(x.value, dtype=float), 0.0)
    lam[used] = val if norm == 1 else np.sqrt(val)
    # scale onto the constraint boundary (the solver's tolerance may leave it slightly off)
    lam /= privacy_spent(S, lam, norm)
    return lam, budget_objective(b, lam)


def gls_recovery(Q, S, row_variances) -> np.ndarray:
    """Dense ``R* = Q (Sᵀ V⁻¹ S)⁺ Sᵀ V⁻¹`` with ``V = diag(row_variances)`` (§3.2, eq. 7);
    asserts that ``S`` supports ``Q`` (``R* S = Q``)."""
    Q, S = _dense(Q), _dense(S)
    var = np.asarray(row_variances, dtype=float).ravel()
    Sw = S / var[:, None]
    R = Q @ np.linalg.pinv(S.T @ Sw, rcond=1e-12) @ Sw.T
    assert np.allclose(R @ S, Q, atol=1e-8 * max(1.0, np.abs(Q).max())), "R* S != Q"
    return R
