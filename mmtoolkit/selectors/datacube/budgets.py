"""Non-uniform noise budgeting and GLS recovery.

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
   Cor. 3.3 (``λ_k ∝ (b_k/C_k)^{1/3}``) and App. A (``λ_k² ∝ √b_k / C_k``). The package's
   strategies (I, Q, F, C) have their grouping by construction (C = 1 per group), so only
   the closed forms are implemented; the general route (a grouping found for an arbitrary
   ``S``, the convex program (1)–(3)) is the tests' reference (tests/datacube_reference.py);
3. the GLS recovery ``R* = Q (Sᵀ V⁻¹ S)⁺ Sᵀ V⁻¹`` (§3.2, eq. 7). For marginal and Fourier
   strategies on binary attributes it is diagonal in the parity basis: every noisy marginal
   ``κ`` gives, after a ``2^{|κ|}``-point Walsh–Hadamard transform, independent estimates of
   the coefficients ``θ_β`` (``β ≼ κ``) with variance ``2^{|κ|} v_κ``; GLS is the per-β
   inverse-variance average (:class:`FourierEstimate`).

With unit variances the GLS estimate is the least-squares consistency step of §3.3/§4.3
(one set of coefficients, so the marginals are mutually consistent).

A budgeted strategy is returned as a row-weighted Matrix (``diag(λ) S``: a VStack of
Weighted blocks, or the structured kinds ``Marginals`` / ``Fourier`` with weights ``λ``),
whose sensitivity is 1, so :mod:`mmtoolkit.evaluate` scores it — with the GLS recovery,
which is what least-squares inference on ``diag(λ) S`` is — like any other strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...linalg import Marginals, VStack, Weighted
from ...linalg.fourier import fwht, local_index, submasks

__all__ = [
    "RANGES",
    "FourierEstimate",
    "budget_objective",
    "marginal_keys",
    "optimal_budgets",
    "uniform_budgets",
    "workload_sizes",
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


# ============================================================================ recovery
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
