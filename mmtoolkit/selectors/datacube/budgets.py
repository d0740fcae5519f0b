"""Non-uniform noise budgeting, GLS recovery and Fourier consistency.

Cormode, Procopiuc, Srivastava & Yaroslavtsev, "Accurate and Efficient Private Release of
Datacubes and Contingency Tables" (ICDE 2013), the three-step framework of its Fig. 3:

1. a strategy ``S`` (r × n) and an initial recovery ``R`` with ``R S = Q``;
2. per-row budgets (§3.1, Prop. 3.1): row ``i`` is answered with noise of variance
   ``v / λ_i²``, where ``v = privacy.noise_variance(1)`` and the *budget fractions* ``λ``
   satisfy the per-column privacy constraint ``Σ_i λ_i |S_ij| ≤ 1`` (L1, Laplace) or
   ``Σ_i λ_i² S_ij² ≤ 1`` (L2, Gaussian) for every column ``j``. Under ``PureDP(ε)`` row ``i``
   gets ``ε_i = ε λ_i``; under ``ApproxDP(ε, δ)`` likewise (Gaussian, App. A); under
   ``ZCDP(ρ)`` row ``i`` gets ``ρ_i = ρ λ_i²``. The objective (eq. 1) is the weighted total
   variance of ``R y``: ``v Σ_i b_i / λ_i²`` with ``b_i = Σ_q w_q R_qi²``.
   With a *grouping* (Def. 3.1: rows of a group have disjoint supports and one magnitude
   ``C_k``, and every column meets each group) the problem has the closed forms of
   Cor. 3.3 (``λ_k ∝ (b_k/C_k)^{1/3}``) and App. A (``λ_k² ∝ √b_k / C_k``); otherwise the
   convex program (1)–(3) is solved with cvxpy;
3. the GLS recovery ``R* = Q (Sᵀ V⁻¹ S)⁺ Sᵀ V⁻¹`` (§3.2, eq. 7). For marginal and Fourier
   strategies on binary attributes it is diagonal in the parity basis: every noisy marginal
   ``κ`` gives, after a ``2^{|κ|}``-point Walsh–Hadamard transform, independent estimates of
   the coefficients ``θ_β`` (``β ≼ κ``) with variance ``2^{|κ|} v_κ``; GLS is the per-β
   inverse-variance average (:class:`FourierEstimate`).

The consistency step of §3.3/§4.3 (:func:`fourier_consistency`) projects noisy marginals
onto consistent ones through the Fourier coefficients (least squares, or LP for p = 1, ∞).

A budgeted strategy is returned as a row-weighted Matrix (``diag(λ) S``: a VStack of
Weighted blocks, or the structured kinds ``Marginals`` / ``Fourier`` with weights ``λ``),
whose sensitivity is 1, so :mod:`mmtoolkit.evaluate` scores it — with the GLS recovery,
which is what least-squares inference on ``diag(λ) S`` is — like any other strategy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ...linalg import Dense, Marginals, Matrix, VStack, Weighted, check_dense_size
from ...linalg.fourier import fwht, local_index, submasks
from ...privacy import ZCDP, ApproxDP, Privacy, PureDP

__all__ = [
    "FourierEstimate",
    "Grouping",
    "budget_objective",
    "budgets_for_privacy",
    "column_weights",
    "fourier_consistency",
    "gls_recovery",
    "greedy_grouping",
    "group_totals",
    "optimal_budgets",
    "privacy_spent",
    "row_weighted",
    "solve_budgets",
    "uniform_budgets",
]


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


# ============================================================================ grouping
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
    nonzero magnitude; otherwise it opens a new group. Not minimal in general, but any
    grouping gives feasible budgets; ``exact`` is True when the result has the grouping
    property, so the closed form is optimal (Thm 3.4, given an R consistent with it).
    """
    S = np.asarray(S.dense() if isinstance(S, Matrix) else S, dtype=float)
    if S.ndim != 2 or S.shape[0] == 0:
        raise ValueError("greedy_grouping needs a non-empty 2-D strategy matrix")
    A = np.abs(S)
    labels = np.empty(S.shape[0], dtype=np.int64)
    supports: list[np.ndarray] = []
    mags: list[float] = []
    uniform_rows = True
    for i, row in enumerate(A):
        nz = row > atol
        if not nz.any():
            raise ValueError(f"row {i} of the strategy is zero; drop it before budgeting")
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
            mags.append(mag if same else float(mag))
    exact = uniform_rows and all(sup.all() for sup in supports)
    return Grouping(labels, np.array(mags), bool(exact))


def column_weights(R, query_weights=None) -> np.ndarray:
    """``b_i = Σ_q w_q R_qi²`` (§3.2): the weighted squared column norms of a dense ``R``."""
    R = np.asarray(R.dense() if isinstance(R, Matrix) else R, dtype=float)
    if R.ndim != 2:
        raise ValueError("R must be a 2-D recovery matrix")
    if query_weights is None:
        return np.sum(R * R, axis=0)
    w = np.asarray(query_weights, dtype=float).ravel()
    if w.size != R.shape[0] or np.any(w < 0):
        raise ValueError(f"need {R.shape[0]} non-negative query weights, got {w.size}")
    return w @ (R * R)


def group_totals(b, grouping: Grouping) -> np.ndarray:
    """``b_k = Σ_{i ∈ G_k} b_i``."""
    b = _check_b(b)
    if b.size != grouping.labels.size:
        raise ValueError(f"b has {b.size} entries for {grouping.labels.size} rows")
    return np.bincount(grouping.labels, weights=b, minlength=grouping.size)


# ============================================================================ budgets
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


def privacy_spent(S, lam, norm: int) -> float:
    """``max_j Σ_i λ_i |S_ij|`` (L1) or ``max_j √(Σ_i λ_i² S_ij²)`` (L2): must be ≤ 1 (E11)."""
    norm = _check_norm(norm)
    S = np.asarray(S.dense() if isinstance(S, Matrix) else S, dtype=float)
    lam = np.asarray(lam, dtype=float).ravel()
    if norm == 1:
        return float(np.max(np.abs(S).T @ np.abs(lam)))
    return math.sqrt(float(np.max((S * S).T @ (lam * lam))))


def solve_budgets(S, b, norm: int, solver: str = "CLARABEL") -> tuple[np.ndarray, float]:
    """The general convex program (1)–(3) for any ``S``, with cvxpy (§3.2).

    L1: minimise ``Σ b_i λ_i^{-2}`` s.t. ``|S|ᵀ λ ≤ 1``, ``λ ≥ 0``. L2: in ``u = λ²``,
    minimise ``Σ b_i / u_i`` s.t. ``(S∘S)ᵀ u ≤ 1``, ``u ≥ 0``. Rows with ``b_i = 0`` get
    ``λ_i = 0``. Returns ``(λ, objective)``; one constraint per column, so only for small n.
    """
    import cvxpy as cp

    norm = _check_norm(norm)
    S = np.asarray(S.dense() if isinstance(S, Matrix) else S, dtype=float)
    b = _check_b(b)
    if b.size != S.shape[0]:
        raise ValueError(f"b has {b.size} entries for {S.shape[0]} strategy rows")
    check_dense_size(*S.shape, "solve_budgets")
    used = b > 0
    if not used.any():
        raise ValueError("every b_i is zero: the recovery uses no strategy row")
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
    if problem.status not in ("optimal", "optimal_inaccurate") or x.value is None:
        raise RuntimeError(f"budget program did not solve: status {problem.status}")
    lam = np.zeros(b.size)
    val = np.maximum(np.asarray(x.value, dtype=float), 0.0)
    lam[used] = val if norm == 1 else np.sqrt(val)
    # scale onto the constraint boundary (the solver's tolerance may leave it slightly off)
    lam /= privacy_spent(S, lam, norm)
    return lam, budget_objective(b, lam)


def budgets_for_privacy(lam, privacy: Privacy) -> np.ndarray:
    """Per-row privacy parameters from budget fractions: ``ε λ`` (PureDP, ApproxDP) or
    ``ρ λ²`` (ZCDP; ρ-zCDP composes additively and the rows' ρ_i sum to ≤ ρ per column)."""
    lam = np.asarray(lam, dtype=float)
    if isinstance(privacy, (PureDP, ApproxDP)):
        return privacy.epsilon * lam
    if isinstance(privacy, ZCDP):
        return privacy.rho * lam**2
    raise TypeError(f"privacy must be PureDP, ApproxDP or ZCDP, got {privacy!r}")


def row_weighted(blocks, lam) -> Matrix:
    """``diag(λ) S`` for ``S = [S_1; …; S_g]`` with one fraction per block (group): a VStack of
    Weighted blocks (zero fractions dropped). Its sensitivity is the privacy spent."""
    blocks = list(blocks)
    lam = np.asarray(lam, dtype=float).ravel()
    if len(blocks) != lam.size:
        raise ValueError(f"{len(blocks)} blocks but {lam.size} budget fractions")
    parts = [b if w == 1.0 else Weighted(float(w), b) for b, w in zip(blocks, lam) if w != 0.0]
    if not parts:
        raise ValueError("every budget fraction is zero")
    return parts[0] if len(parts) == 1 else VStack(parts)


# ============================================================================ recovery
def gls_recovery(Q, S, row_variances) -> np.ndarray:
    """Dense ``R* = Q (Sᵀ V⁻¹ S)⁺ Sᵀ V⁻¹`` with ``V = diag(row_variances)`` (§3.2, eq. 7).

    The reference for small problems (size-guarded); structured strategies use
    :class:`FourierEstimate`. Raises if ``S`` does not support ``Q`` (``R* S ≠ Q``).
    """
    Q = np.asarray(Q.dense() if isinstance(Q, Matrix) else Q, dtype=float)
    S = np.asarray(S.dense() if isinstance(S, Matrix) else S, dtype=float)
    var = np.asarray(row_variances, dtype=float).ravel()
    if var.size != S.shape[0] or np.any(var <= 0) or not np.all(np.isfinite(var)):
        raise ValueError(f"need {S.shape[0]} positive finite row variances")
    if Q.shape[1] != S.shape[1]:
        raise ValueError(f"Q has {Q.shape[1]} columns, S has {S.shape[1]}")
    check_dense_size(S.shape[1], S.shape[1], "gls_recovery")
    Sw = S / var[:, None]
    R = Q @ np.linalg.pinv(S.T @ Sw, rcond=1e-12) @ Sw.T
    if not np.allclose(R @ S, Q, atol=1e-8 * max(1.0, np.abs(Q).max())):
        raise ValueError("the strategy does not support the workload (R* S != Q)")
    return R


@dataclass
class _Estimates:
    betas: np.ndarray
    values: np.ndarray  # (len(betas), k) estimates
    weights: np.ndarray  # inverse variances


class FourierEstimate:
    """GLS in the parity basis on ``d`` binary attributes (§3.2 with §4; digest §4 [D]).

    Add measurements — noisy marginals (:meth:`add_marginal`, i.i.d. noise of variance
    ``v`` per cell) or noisy coefficients (:meth:`add_coefficients`) — then read the
    inverse-variance-weighted coefficients (:meth:`solve`) and the consistent GLS marginals
    (:meth:`marginal`). Each noisy marginal ``κ`` yields ``WHT(ỹ_κ)``: independent estimates of
    ``θ_β``, ``β ≼ κ``, each of variance ``2^{|κ|} v``. Answers may carry extra columns
    (several noise draws at once).
    """

    def __init__(self, d: int):
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be a positive int, got {d!r}")
        self.d = d
        self._parts: list[_Estimates] = []
        self._solved = None

    def _check_key(self, key) -> int:
        if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
            raise ValueError(f"marginal key must be an int bitmask, got {key!r}")
        key = int(key)
        if not 0 <= key < 1 << self.d:
            raise ValueError(
                f"marginal {key} is outside the domain of d = {self.d} binary attributes"
            )
        return key

    def add_marginal(self, key: int, answers, variance: float) -> None:
        """A noisy marginal on ``key`` (cells in C order over its attributes)."""
        key = self._check_key(key)
        y = np.asarray(answers, dtype=float)
        y = y[:, None] if y.ndim == 1 else y
        m = bin(key).count("1")
        if y.shape[0] != 1 << m:
            raise ValueError(f"marginal {key} has {1 << m} cells, got {y.shape[0]} answers")
        if not variance > 0:
            raise ValueError(f"noise variance must be positive, got {variance!r}")
        betas = submasks(key)
        theta = fwht(y)[local_index(betas, key)]
        w = np.full(betas.size, 1.0 / ((1 << m) * float(variance)))
        self._parts.append(_Estimates(betas, theta, w))
        self._solved = None

    def add_coefficients(self, betas, answers, variances) -> None:
        """Noisy unnormalised coefficients ``θ̃_β`` with their variances."""
        betas = np.asarray([self._check_key(b) for b in betas], dtype=np.int64)
        y = np.asarray(answers, dtype=float)
        y = y[:, None] if y.ndim == 1 else y
        var = np.broadcast_to(np.asarray(variances, dtype=float), betas.shape)
        if y.shape[0] != betas.size or np.any(var <= 0):
            raise ValueError("need one answer and one positive variance per coefficient")
        self._parts.append(_Estimates(betas, y, 1.0 / var))
        self._solved = None

    def solve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(betas, θ̂, Var θ̂)``: the GLS coefficients (inverse-variance averages)."""
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
        """The GLS estimate of marginal ``key``: ``2^{-|α|} H θ̂_local`` (Thm 4.1)."""
        key = self._check_key(key)
        need, theta, _ = self._lookup(key)
        m = bin(key).count("1")
        local = np.zeros((1 << m, theta.shape[1]))
        local[local_index(need, key)] = theta
        out = fwht(local) / float(1 << m)
        return out[:, 0] if out.shape[1] == 1 else out

    def cell_variance(self, key: int) -> float:
        """Variance of every cell of the GLS marginal ``key``: ``2^{-2|α|} Σ_{β≼α} Var θ̂_β``."""
        key = self._check_key(key)
        _, _, var = self._lookup(key)
        m = bin(key).count("1")
        return float(np.sum(var)) / float(1 << (2 * m))


def fourier_consistency(d: int, noisy: Mapping, weights: Mapping | None = None, p=2):
    """Consistent marginals from noisy ones through the Fourier coefficients (§4.3).

    ``noisy``: ``{key: cells}``. ``p = 2``: least squares ``min_θ Σ_α w_α ‖R_α θ − q̃_α‖²``
    (``w_α = 1`` by default, the paper's step; ``w_α = 1/v_α`` makes it GLS). Since
    ``R_αᵀ R_α = 2^{-|α|} I``, ``θ̂_β = Σ_{α∋β} w_α 2^{-|α|} WHT(q̃_α)_β / Σ_{α∋β} w_α 2^{-|α|}``.
    ``p = 1`` or ``inf``: the LP ``min_θ ‖R_F θ − q̃‖_p`` (cvxpy). Returns ``{key: cells}``.
    The output is consistent (all from one θ) and ``‖q̂ − Qx‖_p ≤ 2 ‖q̃ − Qx‖_p`` (§3.3).
    """
    if not isinstance(noisy, Mapping) or not noisy:
        raise ValueError("noisy must be a non-empty mapping {marginal key: noisy cells}")
    if p == 2:
        est = FourierEstimate(d)
        for key, y in noisy.items():
            w = 1.0 if weights is None else float(weights[key])
            est.add_marginal(key, y, 1.0 / w)
        return {key: est.marginal(key) for key in noisy}
    if p not in (1, math.inf, "inf"):
        raise ValueError(f"p must be 1, 2 or inf, got {p!r}")
    import cvxpy as cp

    keys = [int(k) for k in noisy]
    est = FourierEstimate(d)
    for k in keys:
        est.add_marginal(k, noisy[k], 1.0)
    betas, _, _ = est.solve()
    index = {int(b): i for i, b in enumerate(betas)}
    blocks, targets = [], []
    for k in keys:
        m = bin(k).count("1")
        need = submasks(k)
        H = fwht(np.eye(1 << m))  # symmetric
        M = np.zeros((1 << m, betas.size))
        M[:, [index[int(b)] for b in need]] = H[:, local_index(need, k)] / float(1 << m)
        blocks.append(M)
        targets.append(np.asarray(noisy[k], dtype=float).ravel())
    M = np.vstack(blocks)
    check_dense_size(*M.shape, "LP consistency")
    q = np.concatenate(targets)
    theta = cp.Variable(betas.size)
    norm = 1 if p == 1 else "inf"
    cp.Problem(cp.Minimize(cp.norm(M @ theta - q, norm))).solve()
    fitted = M @ theta.value
    out, off = {}, 0
    for k in keys:
        n = 1 << bin(k).count("1")
        out[k] = fitted[off : off + n]
        off += n
    return out


RANGES = ("refuse", "as_marginals")


def marginal_keys(W, ranges: str = "refuse") -> dict[int, float]:
    """``{key: weight}`` of a workload that is a set of (weighted) marginals: a Marginals,
    a Marginal, or a VStack/Weighted of them on one domain. Raises otherwise.

    ``ranges="as_marginals"`` also accepts Kronecker terms whose factors are not all
    Identity or 1-row totals (range-marginals: AllRange, Prefix, WidthRange, … on some
    attributes) and reads each as the cuboid on the attributes whose factor is not a 1-row
    total: the marginal a DataCube answers it from by summing cells (Ding et al. 2011;
    Li & Miklau 2012 §5). The default ``"refuse"`` keeps the strict reading for selectors
    that need the workload to BE marginals.
    """
    from ...linalg import Identity, Kronecker, Marginal, Ones

    if ranges not in RANGES:
        raise ValueError(f"ranges must be one of {RANGES}, got {ranges!r}")

    out: dict[int, float] = {}

    def add(key, w):
        if key in out:
            out[key] = math.sqrt(out[key] ** 2 + w * w)  # duplicates add up in WᵀW
        else:
            out[key] = w

    def walk(M, w):
        if isinstance(M, Weighted):
            walk(M.base, w * M.weight)
        elif isinstance(M, Marginals):
            for k, t in M.weights.items():
                add(k, abs(w * t))
        elif isinstance(M, Marginal):
            add(M.key, abs(w))
        elif isinstance(M, VStack):
            for blk in M.blocks:
                walk(blk, w)
        elif isinstance(M, Kronecker):
            key = 0
            for i, f in enumerate(M.factors):
                if isinstance(f, Identity):
                    key |= 1 << i
                elif not (isinstance(f, Ones) and f.shape[0] == 1):
                    if ranges == "as_marginals":
                        key |= 1 << i
                        continue
                    raise ValueError(
                        "the workload is not a set of marginals (a Kronecker factor is "
                        f"{type(f).__name__}, not Identity or Total)"
                    )
            add(key, abs(w))
        else:
            raise ValueError(
                f"the workload is not a set of marginals ({type(M).__name__}); build it with "
                "workloads.marginals / marginals_list or BinaryEncoding.marginals"
            )

    walk(W, 1.0)
    return out


def workload_sizes(W) -> tuple[int, ...]:
    """The attribute sizes of a marginals workload (from its first marginal block)."""
    from ...linalg import Kronecker

    M = W
    while True:
        if isinstance(M, Weighted):
            M = M.base
        elif isinstance(M, VStack):
            M = M.blocks[0]
        else:
            break
    if isinstance(M, Marginals):
        return tuple(M.sizes)
    if isinstance(M, Kronecker):
        return tuple(f.shape[1] for f in M.factors)
    raise ValueError(
        f"the workload is not a set of marginals ({type(M).__name__}): cannot read its "
        "attribute sizes"
    )


def dense_budgeted(S, lam) -> Dense:
    """``diag(λ) S`` for a dense ``S`` (rows with ``λ_i = 0`` dropped)."""
    S = np.asarray(S.dense() if isinstance(S, Matrix) else S, dtype=float)
    lam = np.asarray(lam, dtype=float).ravel()
    keep = lam != 0
    return Dense(lam[keep, None] * S[keep])


def _iterable(x) -> bool:
    return isinstance(x, Iterable) and not isinstance(x, (str, bytes))
