"""OPT_M: weighted marginals strategies 𝕄(θ) = [θ_a Q_a]_a (HDMM §6.3, Problem 4, App. A.4): the
projection :func:`project_workload`, the exact objective :class:`MarginalsProblem`, the
searches :func:`optimize_marginals` and the ``opt_marginals`` selector.
User guide: docs/algorithms/hdmm.md.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from scipy.optimize import minimize

from ...checks import check_choice, check_int
from ...linalg import Marginals, Matrix, kron_terms
from ...linalg.marginals import (
    check_dim,
    complement_products,
    projected_traces,
    subset_sum,
    superset_sum,
)
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register
from ._common import term_sizes
from .opt0 import best_of_restarts

#: Weights below ZERO_RTOL · max θ are dropped from the final strategy (if it still supports
#: the workload), as in the authors' code (digest §7.3).
ZERO_RTOL = 1e-7
#: Relative threshold under which t_B counts as zero (a query with no weight on S_B).
SUPPORT_RTOL = 1e-12
#: The searches of ``optimize_marginals``.
FORMS = ("bounded", "squared")


def project_workload(W: Matrix) -> tuple[tuple[int, ...], np.ndarray]:
    """``(sizes, t)``, ``t_B = tr(P_B 𝕎ᵀ𝕎)`` for every attribute subset ``B`` (bit i ⇔
    attribute i): the workload's projection onto the marginals algebra (HDMM App. A.4)."""
    terms = kron_terms(W)
    sizes = tuple(term_sizes(terms))
    check_dim(len(sizes), "OPT_M")
    t = np.zeros(1 << len(sizes))
    cache: dict[int, tuple[float, float]] = {}
    for c, factors in terms:
        if c == 0.0:
            continue
        traces, sums = [], []
        for f in factors:
            if id(f) not in cache:
                rn = f.rownorm_p(2)
                # cast: np.isscalar's stub narrows to any numpy scalar, complex or str; a norm
                tr = float(cast(float, rn)) * f.shape[0] if np.isscalar(rn) else float(np.sum(rn))
                r = f.matvec(np.ones(f.shape[1]))
                cache[id(f)] = (tr, float(r @ r))
            traces.append(cache[id(f)][0])
            sums.append(cache[id(f)][1])
        t += c * projected_traces(sizes, traces, sums)
    t[t < SUPPORT_RTOL * t.max()] = 0.0
    return sizes, t


class MarginalsProblem:
    """OPT_M's objective ``F(θ) = sens(θ)² · Σ_B t_B / μ_B(θ²)`` and its gradient."""

    def __init__(self, sizes, t):
        self.sizes = tuple(sizes)
        self.d = len(self.sizes)
        self.t = np.asarray(t, dtype=float)
        self.c = complement_products(self.sizes)
        self.live = self.t > 0

    def trace_term(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """``(L, ∂L/∂u)`` at ``u = θ²``; ``L = inf`` if the strategy does not support 𝕎."""
        u = theta * theta
        mu = superset_sum(u * self.c, self.d)
        mul = mu[self.live]
        if np.any(mul <= 0.0):
            return np.inf, np.zeros_like(theta)
        L = float(np.sum(self.t[self.live] / mul))
        r = np.zeros_like(mu)
        r[self.live] = -self.t[self.live] / (mul * mul)
        return L, self.c * subset_sum(r, self.d)

    def objective(self, theta: np.ndarray, norm: int) -> tuple[float, np.ndarray]:
        """``(F(θ), ∇F)`` (Problem 4 with the L1 or the L2 sensitivity)."""
        L, dL_du = self.trace_term(theta)
        if not np.isfinite(L):
            return np.inf, np.zeros_like(theta)
        if norm == 1:
            S = float(np.sum(theta))
            return S * S * L, 2.0 * S * L + S * S * 2.0 * theta * dL_du
        S2 = float(np.sum(theta * theta))
        return S2 * L, 2.0 * theta * L + S2 * 2.0 * theta * dL_du


def optimize_marginals(
    problem: MarginalsProblem, norm: int, rng=None, theta0=None, maxiter: int = 15000,
    form: str = "bounded",
) -> tuple[np.ndarray, float]:  # fmt: skip
    """OPT_M's search (``form`` ``"bounded"`` or ``"squared"``, guide page; digest §7.3).
    Returns ``(θ normalised to sensitivity 1, F(θ))``."""
    if theta0 is None:
        theta0 = rng.random(1 << problem.d)
        theta0 /= theta0.sum()
    theta0 = np.asarray(theta0, dtype=float)
    F0, _ = problem.objective(theta0, norm)
    scale = F0 if np.isfinite(F0) and F0 > 0 else 1.0

    squared = form == "squared"

    def fun(x):
        F, g = problem.objective(x * x if squared else x, norm)
        return F / scale, (2.0 * x * g if squared else g) / scale

    res = minimize(
        fun,
        np.sqrt(theta0) if squared else theta0,
        jac=True,
        method="L-BFGS-B",
        bounds=None if squared else [(0.0, None)] * theta0.size,
        options={"gtol": 0.0, "maxiter": maxiter},
    )
    theta = res.x * res.x if squared else np.maximum(res.x, 0.0)
    F, _ = problem.objective(theta, norm)
    if not np.isfinite(F):  # the optimiser ended outside the support region
        theta, F = theta0, F0
    trimmed = np.where(theta < ZERO_RTOL * theta.max(), 0.0, theta)
    Ft, _ = problem.objective(trimmed, norm)
    if np.isfinite(Ft) and Ft <= F * (1 + 1e-9):
        theta, F = trimmed, Ft
    sens = theta.sum() if norm == 1 else np.sqrt(np.sum(theta * theta))
    return theta / sens, float(F)


def marginals_strategy(sizes, theta) -> Marginals:
    return Marginals(sizes, {int(a): float(v) for a, v in enumerate(theta) if v > 0})


@register
class OptMarginalsSelector(Selector):
    """OPT_M (HDMM §6.3): the best weighted-marginals strategy for a union of products.
    Parameters: ``restarts``, ``seed``, ``maxiter``, ``form`` (``"bounded"`` or ``"squared"``)."""

    name = "opt_marginals"
    method = "OPT_M (weighted marginals)"
    paper = "McKenna et al., PVLDB 2018 (HDMM), §6.3"

    def __init__(self, restarts=1, seed=None, maxiter=15000, form="bounded"):
        self.params = {
            "restarts": check_int(restarts, "restarts", minimum=1),
            "seed": None if seed is None else check_int(seed, "seed", minimum=0),
            "maxiter": check_int(maxiter, "maxiter", minimum=1),
            "form": check_choice(form, "form", FORMS),
        }

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        sizes, t = project_workload(workload)
        problem = MarginalsProblem(sizes, t)
        norm = privacy.norm
        prm = self.params
        kw = {"maxiter": prm["maxiter"], "form": prm["form"]}
        best = best_of_restarts(
            prm["seed"], prm["restarts"], lambda rng: optimize_marginals(problem, norm, rng, **kw)
        )
        return Strategy(
            matrix=marginals_strategy(sizes, best[0]),
            selector=self.name,
            loss=best[1],
            metadata={"operator": "OPT_M", "norm": norm},
        )
