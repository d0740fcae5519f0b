"""The selected ResidualPlanner(+) mechanism as a strategy kind (§4.2 Eq. 3, §7.3 Eq. 9,
Thm 4.3-4.4, 7.1-7.2): :class:`ResidualStrategyMatrix`, the whitened stack of base
mechanisms, with its error route, release (Algorithms 1-3, 5, 6) and Private-PGM measurements.
User guide: docs/algorithms/residual-planner.md.
"""

from __future__ import annotations

import math

import numpy as np

from ...linalg import (
    MAX_MARGINALS_DIM,
    Dense,
    Kronecker,
    Marginals,
    MarginalsGram,
    Matrix,
    NotSupportedByKindError,
    Ones,
    Sum,
    Total,
    Weighted,
    as_matrix,
    check_dense_size,
    check_p,
    peel,
)
from ...linalg.marginals import expand_tables, key_attrs, marginal_tables
from ...measurement import Measurement
from ...records import Records
from ...release_handlers import ReleaseHandler, register_handler
from . import measurements
from .plan import ResidualPlan
from .route import ResidualRoute


class ResidualStrategyMatrix(Matrix):
    """Whitened stacked base mechanisms of a :class:`ResidualPlan` (guide page)."""

    def __init__(self, plan: ResidualPlan):
        if not isinstance(plan, ResidualPlan):
            raise TypeError(f"expected a ResidualPlan, got {type(plan).__name__}")
        self.plan = plan.normalized()
        self.sizes = tuple(int(n) for n in plan.sizes)
        self._sets = self.plan.closure_sets()
        dims = self.plan.dims()
        self.shape = (int(round(float(np.sum(dims)))), math.prod(self.sizes))

    # ------------------------------------------------------------ structure
    def _stack(self, factors, scales) -> SetStack:
        """``[c_A ⊗_{i∈A} F_i ⊗_{i∉A} 1ᵀ]_A`` over the closure sets (:class:`SetStack`)."""
        check_dense_size(self.shape[0], 1, "a product with the residual strategy")
        return SetStack(self.sizes, self._sets, factors, scales)

    def _matmat(self, X):
        L = [b.whiten for b in self.plan.bases]
        return self._stack(L, 1.0 / np.sqrt(self.plan.sigma2))._matmat(X)

    def _rmatmat(self, Y):
        L = [b.whiten for b in self.plan.bases]
        return self._stack(L, 1.0 / np.sqrt(self.plan.sigma2))._rmatmat(Y)

    def residual_pinv_terms(self):
        """``(sizes, [H_i], closure sets, σ²)`` with
        ``(AᵀA)⁺ = Σ_A σ²_A ⊗_{i∈A} H_i ⊗_{i∉A} J/n_i²`` (for the residual error route)."""
        return self.sizes, [b.H for b in self.plan.bases], self._sets, self.plan.sigma2.copy()

    # ----------------------------------------------------- strategy-kind protocol
    def error_route(self, W):
        # a workload on another factorisation of the domain: the Gram's route, if any
        return ResidualRoute.build(W, self) or super().error_route(W)

    def pinv_operator(self):
        return self.pinv()

    def release_answers(self, W, data, noise, rng):
        """He et al. Algorithms 1/2 (5/6; discrete ``noise``: Algorithm 3, ZCDP only) from
        marginal tables of the data, never the N-cell histogram; answers in ``W``'s order."""
        targets = self._targets(W)
        src = data.codes if isinstance(data, Records) else np.asarray(data).ravel()
        if noise.discrete:
            meas = measurements.measure_discrete(self.plan, src, discrete_rho(noise), rng)
        else:
            meas = measurements.measure(self.plan, src, noise, rng)
        answers = measurements.reconstruct_sets(meas, [attrs for _, attrs in targets])
        return np.concatenate([w * a for (w, _), a in zip(targets, answers, strict=True)])

    def _targets(self, W) -> list[tuple[float, tuple[int, ...]]]:
        """``(weight, attrs)`` per product of ``W`` in row order, checked against the plan's
        per-attribute workload matrices (the residual reconstruction applies those)."""
        plan = self.plan
        d = len(plan.bases)
        w, base = peel(as_matrix(W))
        if isinstance(base, Marginals):
            return [(w * theta, key_attrs(key, d)) for key, theta in base.weights.items()]
        out = []
        for c, factors in base.kron_terms():
            if len(factors) != d:
                raise ValueError(
                    "the workload's products do not match the residual strategy's domain"
                )
            attrs = tuple(i for i, f in enumerate(factors) if not isinstance(f, Total))
            for i in attrs:
                wf, bw = factors[i], plan.bases[i].workload
                if wf.shape != bw.shape or not np.allclose(wf.dense(), bw.dense()):
                    raise ValueError(
                        f"attribute {i}: the workload's query matrix differs from the one the "
                        "residual strategy was selected for; select the strategy on this workload"
                    )
            out.append((w * math.sqrt(c), attrs))
        return out

    # ------------------------------------------------------------- algebra
    def gram(self):
        plan = self.plan
        d = len(self.sizes)
        if plan.workload.all_marginal and d <= MAX_MARGINALS_DIM:
            mu = np.zeros(1 << d)
            keys = [sum(1 << i for i in A) for A in self._sets]
            for key, A, s2 in zip(keys, self._sets, plan.sigma2, strict=True):
                out = math.prod(n for i, n in enumerate(self.sizes) if i not in set(A))
                mu[key] = out / s2
            return MarginalsGram.from_spectrum(self.sizes, mu)
        terms = []
        for A, s2 in zip(self._sets, plan.sigma2, strict=True):
            inside = set(A)
            factors = [
                Dense(b.G) if i in inside else Ones(b.n, b.n) for i, b in enumerate(plan.bases)
            ]
            terms.append(Weighted(1.0 / s2, Kronecker(factors)))
        return terms[0] if len(terms) == 1 else Sum(terms)

    def gram_pinv(self) -> Matrix:
        """``(AᵀA)⁺`` in closed form (Thm 4.4, Thm 7.2)."""
        terms = []
        for A, s2 in zip(self._sets, self.plan.sigma2, strict=True):
            inside = set(A)
            factors = [
                Dense(b.H) if i in inside else Weighted(1.0 / (b.n * b.n), Ones(b.n, b.n))
                for i, b in enumerate(self.plan.bases)
            ]
            terms.append(Weighted(s2, Kronecker(factors)))
        return terms[0] if len(terms) == 1 else Sum(terms)

    def pinv(self):
        """``A⁺ y = Σ_A σ_A (⊗_{i∈A} H_iL_iᵀ) y_A ⊗_{i∉A} 1/n_i`` (orthogonal blocks), as a
        transposed :class:`SetStack`; ``Product(gram_pinv(), A.T)`` up to rounding."""
        bases = self.plan.bases
        scales = np.sqrt(self.plan.sigma2)
        for j, A in enumerate(self._sets):
            scales[j] /= math.prod(b.n for i, b in enumerate(bases) if i not in set(A))
        return self._stack([(b.H @ b.whiten.T).T for b in bases], scales).T

    # ---------------------------------------------------------- reductions
    def pcost_bound(self) -> float:
        """``Σ_A Π_{i∈A} β_i / σ²_A`` (Thm 4.3 exact; Thm 7.1 bound for general bases)."""
        return self.plan.pcost()

    def colnorm_p(self, p):
        check_p(p)
        if p == 2 and self.plan.workload.all_marginal:
            return self.pcost_bound()
        if p == 2:
            check_dense_size(self.shape[1], 1, "the column norms of a residual strategy")
            out = np.zeros(self.shape[1])
            for A, s2 in zip(self._sets, self.plan.sigma2, strict=True):
                inside = set(A)
                vec = np.ones(1)
                for i, b in enumerate(self.plan.bases):
                    vec = np.kron(vec, np.diag(b.G) if i in inside else np.ones(b.n))
                out += vec / s2
            return out
        return super().colnorm_p(p)

    def sensitivity(self, p=1):
        if p == 2:
            return math.sqrt(self.pcost_bound())
        return super().sensitivity(p)

    # ------------------------------------------------------------ Private-PGM
    def marginal_measurements(self, data, noise, rng):
        """Private-PGM input (:func:`mmtoolkit.pgm.measure`): the base mechanisms' noisy
        residual answers (He et al. Alg. 1/5) whitened by ``⊗ (Γ_iΓ_iᵀ)^{-1/2}``, i.i.d. noise of
        standard deviation ``σ_A``; the empty set's is the noisy total."""
        src = data.codes if isinstance(data, Records) else np.asarray(data).ravel()
        meas = measurements.measure(self.plan, src, noise, rng)
        bases = self.plan.bases
        out = []
        for A, s2 in zip(self._sets, meas.sigma2, strict=True):
            if any(bases[i].sub.shape[0] == 0 for i in A):
                continue  # a size-1 attribute: the residual is empty
            whiten = [_inverse_sqrt(bases[i].gamma @ bases[i].gamma.T) for i in A]
            y = meas.omega[A].reshape(tuple(bases[i].sub.shape[0] for i in A))
            for ax, T in enumerate(whiten):
                y = np.moveaxis(np.tensordot(T, y, axes=(1, ax)), 0, ax)
            factors = tuple(T @ bases[i].sub for T, i in zip(whiten, A, strict=True))
            query = Kronecker([Dense(f) for f in factors]) if A else None  # () : the total
            out.append(Measurement("marginal", A, y.ravel(), math.sqrt(s2), "gaussian", query))
        return out

    def __repr__(self):
        kind = "marginal" if self.plan.workload.all_marginal else "generalized"
        return (
            f"ResidualStrategyMatrix({kind}, {len(self._sets)} base mechanisms, shape={self.shape})"
        )


class SetStack(Matrix):
    """``[c_A ⊗_{i∈A} F_i ⊗_{i∉A} 1ᵀ]_A`` over attribute sets ``A`` with small dense factors
    ``F_i`` (the whitened residual strategy; the transpose of its pseudo-inverse), applied
    through marginal tables (:mod:`mmtoolkit.linalg.marginals`), never one pass per set."""

    def __init__(self, sizes, sets, factors, scales):
        self.sizes = tuple(sizes)
        self.sets = [tuple(sorted(A)) for A in sets]
        self.factors = [np.asarray(F, dtype=float) for F in factors]
        self.scales = [float(c) for c in scales]
        self.keys = [sum(1 << i for i in A) for A in self.sets]
        rows = [math.prod(self.factors[i].shape[0] for i in A) for A in self.sets]
        self._offsets = np.cumsum([0] + rows)
        self.shape = (int(self._offsets[-1]), math.prod(self.sizes))

    def _kron(self, A, transpose: bool) -> Matrix:
        mats = [Dense(self.factors[i].T if transpose else self.factors[i]) for i in A]
        return Kronecker(mats)

    def _matmat(self, X):
        k = X.shape[1]
        tables = marginal_tables(self.sizes, X, self.keys)
        out = np.empty((self.shape[0], k))
        o = self._offsets
        for j, (A, key, c) in enumerate(zip(self.sets, self.keys, self.scales, strict=True)):
            if o[j + 1] == o[j]:
                continue  # a size-1 attribute: no residual rows
            table = tables.pop(key).reshape(-1, k)
            part = self._kron(A, False) @ table if A else table
            np.multiply(part, c, out=out[o[j] : o[j + 1]])
        return out

    def _rmatmat(self, Y):
        k = Y.shape[1]
        o = self._offsets
        tables = {}
        for j, (A, key, c) in enumerate(zip(self.sets, self.keys, self.scales, strict=True)):
            if o[j + 1] == o[j]:
                continue
            part = Y[o[j] : o[j + 1]]
            part = c * (self._kron(A, True) @ part if A else part)
            tables[key] = part.reshape(tuple(self.sizes[i] for i in A) + (k,))
        if not tables:
            return np.zeros((self.shape[1], k))
        return expand_tables(self.sizes, tables, consume=True).reshape(self.shape[1], k)


def _inverse_sqrt(G: np.ndarray) -> np.ndarray:
    """``G^{-1/2}`` of a symmetric positive definite matrix (eigendecomposition)."""
    w, V = np.linalg.eigh(G)
    return (V / np.sqrt(w)) @ V.T


class ResidualHandler(ReleaseHandler):
    """ResidualPlanner's release side (:mod:`mmtoolkit.release_handlers`): its own mechanism
    (He et al. Alg. 1-3, 5, 6) and its measurements for Private-PGM."""

    def needs_estimate(self, A, W):
        return False  # release_answers reconstructs marginal tables (He et al. Alg. 2)

    def reads_histogram(self, A):
        return False  # release_answers counts marginal tables of the records

    def release_answers(self, A, W, data, noise, rng):
        return A.release_answers(W, data, noise, rng)

    def marginal_measurements(self, A, data, noise, rng):
        return A.marginal_measurements(data, noise, rng)

    def discrete_summary(self, A, noise):
        if not A.plan.workload.all_marginal:
            raise NotSupportedByKindError(
                "discrete noise is not supported by this strategy kind (ResidualStrategyMatrix): "
                "its discrete-Gaussian mechanism (He et al. §5) is defined for marginal "
                "attributes only; use noise='continuous'"
            )
        return {
            "mechanism": "ResidualPlanner §5 (Alg. 3): discrete Gaussian, sigma rounded up "
            "to a multiple of 1e-6 (spends at most the budget)"
        }

    def discrete_proxy_factor(self, A, noise):
        self.discrete_summary(A, noise)  # refuses what Algorithm 3 does not cover
        sigma2, rounded = measurements.discrete_sigma(A.plan, discrete_rho(noise))
        return max(float(sbar * sbar) / s2 for s2, sbar in zip(sigma2, rounded, strict=True))


def discrete_rho(noise) -> float:
    """The zCDP ρ of discrete ``noise`` (Algorithm 3 is defined for zCDP only)."""
    if noise.rho is None:
        raise ValueError("ResidualPlanner's discrete mechanism (He et al. §5) needs ZCDP privacy")
    return noise.rho


register_handler(ResidualStrategyMatrix, ResidualHandler())
