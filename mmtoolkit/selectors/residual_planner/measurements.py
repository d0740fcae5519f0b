"""Measurement and reconstruction for ResidualPlanner(+) (He et al. §4.2-4.3, §5, §7.3-7.4).

* :func:`measure` — Algorithm 1 / 5: for every closure set ``A``, from the true marginal
  ``v = Q_A x`` only (never an N-cell vector), ``ω_A = (⊗_{i∈A} Sub_i) v + σ_A (⊗_{i∈A} Γ_i) z``
  with ``z ~ N(0, I)`` (one entry per column of ``⊗Γ_i``: per cell for marginal attributes).
  Noise scales are the plan's σ²_A calibrated to the privacy definition.
* :func:`measure_discrete` — Algorithm 3 (§5): the numerically secure version for marginal
  attributes, with integer arithmetic and exact discrete Gaussian noise
  (:mod:`mmtoolkit.noise`); ``σ_A`` is rounded *up* to a rational ``s/t`` (Eq. 4).
* :func:`reconstruct` — Algorithm 2 / 6: ``q = Σ_{A'⊆Ã} U_{Ã←A'} ω_{A'}`` with
  ``U = ⊗ (Sub_i† if i∈A', 1_{n_i}/n_i if i∈Ã\\A')``, then the answers ``(⊗_{i∈Ã} W_i) q``;
  the unique linear unbiased estimate (Thm 4.4, Thm 7.2).
* :func:`variances` / :func:`covariance` — Thm 4.4 / Thm 7.2:
  ``Cov = Σ_{A'⊆Ã} σ²_{A'} ⊗_{i∈Ã} K_i`` with ``K_i = W_i H_i W_iᵀ`` for ``i ∈ A'`` and
  ``W_i 11ᵀ W_iᵀ / n_i²`` otherwise (``H_i = Sub_i†Γ_iΓ_iᵀSub_i†ᵀ``).

Data are given as records (an int array, one row per record, one column per attribute),
as a dense data vector (small domains only), or as a callable ``attrs -> marginal``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ...linalg import check_dense_size
from ...noise import discrete_gaussian, discrete_gaussian_rho, rational_ceil_sqrt
from ...privacy import Privacy
from .plan import ResidualPlan
from .route import product_variances


# ============================================================================ data access
class MarginalSource:
    """True marginals ``Q_A x`` (row-major over the attributes of A, in attribute order)."""

    def __init__(self, data, sizes):
        self.sizes = tuple(int(n) for n in sizes)
        self._cache: dict = {}
        if callable(data):
            self._fn = data
            self._records = None
            self._x = None
            return
        arr = np.asarray(data)
        self._fn = None
        if arr.ndim == 2 and arr.shape[1] == len(self.sizes):
            if not np.issubdtype(arr.dtype, np.integer):
                raise ValueError("records must be an integer array (one column per attribute)")
            if arr.size and (np.any(arr < 0) or np.any(arr >= np.array(self.sizes))):
                raise ValueError("a record has a value outside its attribute's range 0..n-1")
            self._records = arr.astype(np.int64)
            self._x = None
        elif arr.ndim == 1:
            N = math.prod(self.sizes)
            if arr.size != N:
                raise ValueError(f"data vector has {arr.size} cells, the domain has {N}")
            self._x = arr.reshape(self.sizes)
            self._records = None
        else:
            raise ValueError(
                "data must be records (an int array of shape (r, d)), a data vector of the "
                "domain's size, or a callable attrs -> marginal"
            )

    def __call__(self, attrs: tuple[int, ...]) -> np.ndarray:
        attrs = tuple(attrs)
        if attrs not in self._cache:
            shape = tuple(self.sizes[i] for i in attrs)
            if self._fn is not None:
                v = np.asarray(self._fn(attrs), dtype=float).reshape(shape)
            elif self._records is not None:
                if attrs:
                    idx = np.ravel_multi_index(tuple(self._records[:, i] for i in attrs), shape)
                    v = np.bincount(idx, minlength=math.prod(shape)).reshape(shape)
                else:
                    v = np.array(len(self._records))
            else:
                drop = tuple(i for i in range(len(self.sizes)) if i not in attrs)
                v = self._x.sum(axis=drop)
            self._cache[attrs] = v
        return self._cache[attrs]


def _apply(T: np.ndarray, mats) -> np.ndarray:
    """``(⊗_j mats[j]) vec(T)`` for a tensor ``T`` with one axis per factor (C order)."""
    for ax, M in enumerate(mats):
        if M is None:
            continue
        T = np.moveaxis(np.tensordot(M, T, axes=(1, ax)), 0, ax)
    return T


# ============================================================================ measurement
@dataclass
class Measurements:
    """Noisy residual answers ``ω_A`` by closure set, and the σ²_A they were drawn with."""

    plan: ResidualPlan
    omega: dict
    sigma2: np.ndarray
    rho: float | Fraction | None = None
    extra: dict = field(default_factory=dict)


def measure(plan: ResidualPlan, data, privacy: Privacy, rng) -> Measurements:
    """Algorithm 1 (marginal attributes) / Algorithm 5 (general attributes) for every closure
    set; σ²_A = the plan's, calibrated to ``privacy`` (pcost = 2ρ)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    src = data if isinstance(data, MarginalSource) else MarginalSource(data, plan.sizes)
    sigma2 = plan.scaled_sigma2(privacy)
    bases = plan.bases
    omega = {}
    for A, s2 in zip(plan.closure_sets(), sigma2, strict=True):
        v = np.asarray(src(A), dtype=float)
        mean = _apply(v, [bases[i].sub for i in A])
        zshape = tuple(bases[i].gamma.shape[1] for i in A)
        z = rng.standard_normal(zshape) if zshape else np.array(rng.standard_normal())
        noise = _apply(z, [bases[i].gamma for i in A])
        omega[A] = (mean + math.sqrt(s2) * noise).ravel()
    rho = privacy.rho if hasattr(privacy, "rho") else None
    return Measurements(plan, omega, sigma2, rho)


def measure_discrete(
    plan: ResidualPlan, data, rho, rng, *, denominator: int = 10**6
) -> Measurements:
    """Algorithm 3 (§5): exact discrete-Gaussian measurement of every closure set.

    For ``A``: ``σ̄_A = s/t ≥ σ_A`` (``t = denominator``, Eq. 4), ``H = ⊗_{i∈A}(n_i I - 11ᵀ)``
    (integers), ``γ² = σ̄² Π n_i²`` (Eq. 7), ``y = H v + z`` with ``z ~ N_Z(0, γ²)`` per cell
    (integers; ``Ξx = Hv``, Eq. 6), released as ``ω_A = (⊗ Sub_i/n_i) y`` (post-processing).
    With continuous noise this is exactly ``M_A(·; σ̄²)`` (Thm 5.1). Accounting: ``Δ₂²(H Q_A)
    = Π n_i(n_i - 1)``, so ``ρ_A = Δ²/(2γ²) = p_A/(2σ̄²)`` exactly; ``extra["rho_exact"]`` is
    ``Σ_A ρ_A`` as a Fraction (≤ ρ because σ̄ ≥ σ). ``rho`` is a float or Fraction.
    """
    if not plan.workload.all_marginal:
        raise ValueError(
            "the discrete-Gaussian mechanism (§5) is defined for marginal attributes only"
        )
    if not hasattr(rng, "integers"):
        raise ValueError("rng must be a numpy.random.Generator")
    rho_f = Fraction(rho) if not isinstance(rho, float) else Fraction(rho)
    if rho_f <= 0:
        raise ValueError(f"rho must be positive, got {rho}")
    src = data if isinstance(data, MarginalSource) else MarginalSource(data, plan.sizes)
    bases = plan.bases
    sigma2 = plan.sigma2 / plan.pcost() / (2.0 * float(rho_f))
    omega, used, total = {}, np.empty_like(sigma2), Fraction(0)
    for k, (A, s2) in enumerate(zip(plan.closure_sets(), sigma2, strict=True)):
        sbar = rational_ceil_sqrt(Fraction(s2), denominator)
        sizes = [bases[i].n for i in A]
        gamma2 = sbar * sbar * math.prod(n * n for n in sizes)
        v = np.asarray(src(A))
        if not np.all(np.equal(np.mod(v, 1), 0)):
            raise ValueError("the discrete mechanism needs integer counts")
        v = v.astype(np.int64)
        H = [n * np.eye(n, dtype=np.int64) - np.ones((n, n), dtype=np.int64) for n in sizes]
        Hv = v
        for ax, M in enumerate(H):
            Hv = np.moveaxis(np.tensordot(M, Hv, axes=(1, ax)), 0, ax)
        z = discrete_gaussian(gamma2, Hv.shape if Hv.shape else None, rng)
        y = Hv + z
        Ydag = [bases[i].sub / bases[i].n for i in A]
        omega[A] = _apply(np.asarray(y, dtype=float), Ydag).ravel()
        used[k] = float(sbar * sbar)
        total += discrete_gaussian_rho(math.prod(n * (n - 1) for n in sizes), gamma2)
    return Measurements(plan, omega, used, float(total), {"rho_exact": total})


# ============================================================================ reconstruction
def _index(plan: ResidualPlan) -> dict:
    if not hasattr(plan, "_closure_index"):
        plan._closure_index = {A: k for k, A in enumerate(plan.closure_sets())}
    return plan._closure_index


def _subsets(S: tuple[int, ...]):
    k = len(S)
    for pat in range(1 << k):
        yield pat, tuple(S[j] for j in range(k) if (pat >> j) & 1)


def _check_target(plan: ResidualPlan, attrs) -> tuple[int, ...]:
    d = len(plan.bases)
    t = tuple(sorted(int(a) for a in attrs))
    for a in t:
        if not 0 <= a < d:
            raise ValueError(f"attribute {a} is outside the domain (attributes 0..{d - 1})")
    if len(set(t)) != len(t):
        raise ValueError(f"attributes repeated in {list(attrs)}")
    idx = _index(plan)
    for _, B in _subsets(t):
        if B not in idx and all(plan.bases[i].n > 1 for i in B):
            raise ValueError(
                f"the marginal on {list(t)} cannot be reconstructed: the residual of {list(B)} "
                "was not measured (not in the closure of the workload)"
            )
    return t


def reconstruct(measurements: Measurements, attrs, *, answers: bool = True) -> np.ndarray:
    """Algorithm 2 / 6: the unbiased estimate of the (generalized) marginal on ``attrs``.

    ``answers=True`` applies ``⊗_{i∈Ã} W_i`` (the workload's queries; for marginals W = I);
    ``answers=False`` returns the estimated marginal table ``Q_Ã x`` itself (flattened).
    """
    plan = measurements.plan
    t = _check_target(plan, attrs)
    bases = plan.bases
    shape = tuple(bases[i].n for i in t)
    q = np.zeros(shape)
    idx = _index(plan)
    for pat, B in _subsets(t):
        if B not in idx:
            continue
        w = measurements.omega[B].reshape(tuple(bases[i].n - 1 for i in B))
        w = _apply(w, [bases[i].sub_pinv for i in B])
        # insert the averaged attributes Ã \ A' as broadcast axes of value 1/n
        full = w.reshape(tuple(bases[i].n if (pat >> j) & 1 else 1 for j, i in enumerate(t)))
        scale = 1.0 / math.prod(bases[i].n for j, i in enumerate(t) if not (pat >> j) & 1)
        q = q + scale * full
    if answers:
        q = _apply(q, [None if bases[i].marginal else bases[i].workload.dense() for i in t])
    return q.ravel()


def variances(plan: ResidualPlan, attrs, privacy: Privacy | None = None) -> np.ndarray:
    """Per-query variances of the reconstructed ``attrs`` answers (Thm 4.4 / Thm 7.2),
    in the answers' order; at pcost 1 (ρ = 1/2) unless ``privacy`` is given."""
    t = _check_target(plan, attrs)
    s2 = plan.sigma2 / plan.pcost() if privacy is None else plan.scaled_sigma2(privacy)
    coef = {B: s2[k] for B, k in _index(plan).items()}
    return product_variances(coef, t, [(plan.bases[i].row_h, plan.bases[i].row_s) for i in t])


def covariance(plan: ResidualPlan, attrs, privacy: Privacy | None = None) -> np.ndarray:
    """Full covariance of the reconstructed ``attrs`` answers (Thm 4.4 / 7.2; digest §2.4)."""
    t = _check_target(plan, attrs)
    s2 = plan.sigma2 / plan.pcost() if privacy is None else plan.scaled_sigma2(privacy)
    bases = plan.bases
    idx = _index(plan)
    rows = math.prod(bases[i].rows for i in t)
    check_dense_size(rows, rows, "a covariance matrix")
    K_in, K_out = [], []
    for i in t:
        Wd = bases[i].workload.dense()
        K_in.append(Wd @ bases[i].H @ Wd.T)
        w1 = Wd.sum(axis=1)
        K_out.append(np.outer(w1, w1) / bases[i].n ** 2)
    out = np.zeros((rows, rows))
    for pat, B in _subsets(t):
        if B not in idx:
            continue
        M = np.array([[s2[idx[B]]]])
        for j in range(len(t)):
            M = np.kron(M, K_in[j] if (pat >> j) & 1 else K_out[j])
        out += M
    return out


def reconstruct_workload(measurements: Measurements) -> list[np.ndarray]:
    """Answers to every set of the plan's workload, in workload order (Algorithm 2 / 6)."""
    return [reconstruct(measurements, s) for s in measurements.plan.workload.sets]


__all__ = [
    "MarginalSource",
    "Measurements",
    "covariance",
    "measure",
    "measure_discrete",
    "reconstruct",
    "reconstruct_workload",
    "variances",
]
