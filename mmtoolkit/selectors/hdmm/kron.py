"""OPT_⊗: Kronecker products of per-attribute p-Identity strategies (HDMM §6.1-6.2, Def. 10,
Problem 3, eq. 5-6, Thm 6): :class:`KronProblem`, the block-cyclic :func:`optimize_kron` and
the ``opt_kron`` selector.
User guide: docs/algorithms/hdmm.md.
"""

from __future__ import annotations

import numpy as np

from ...linalg import Kronecker, Matrix, PIdentity, check_dense_size, kron_terms
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register
from . import opt0
from ._common import (
    GramOperator,
    check_search_params,
    default_p,
    distinct_grams,
    norm_of,
    term_sizes,
)
from .opt0 import FTOL, MAXITER, best_of_restarts, optimize_pidentity, pidentity_objective

#: Default maximum number of block-cyclic passes (the authors' code runs 10) and the
#: relative improvement below which the passes stop.
CYCLES = 10
CYCLE_TOL = 1e-4


class KronProblem:
    """The prepared OPT_⊗ problem: product terms, p and per attribute the *distinct* factor Grams
    (``grams[i]``; ``index[i, j]``: term ``j``'s): eq. 6 costs one evaluation per distinct Gram."""

    def __init__(self, W_or_terms, p=None):
        terms = kron_terms(W_or_terms) if isinstance(W_or_terms, Matrix) else W_or_terms
        terms = [(float(c), f) for c, f in terms if c != 0.0]
        if not terms:
            raise ValueError("the workload has no nonzero product term")
        self.sizes = term_sizes(terms)
        self.d = len(self.sizes)
        self.coeffs = np.array([c for c, _ in terms])
        self.grams: list[list[GramOperator]] = []  # grams[i]: distinct Grams on attribute i
        self.index = np.empty((self.d, len(terms)), dtype=np.intp)
        for i in range(self.d):
            grams, self.index[i] = distinct_grams([factors[i] for _, factors in terms])
            self.grams.append(grams)
        if p is None:
            self.ps = [
                default_p(list({id(fs[i]): fs[i] for _, fs in terms}.values()), n)
                for i, n in enumerate(self.sizes)
            ]
        elif isinstance(p, list):
            if len(p) != self.d:
                raise ValueError(
                    f"p lists {len(p)} values but the workload has {self.d} attributes"
                )
            self.ps = list(p)
        else:
            self.ps = [p] * self.d
        for i, (p_i, n_i) in enumerate(zip(self.ps, self.sizes, strict=True)):
            # Θ (p x n) and the p x p products of OPT_0's objective
            check_dense_size(p_i, max(p_i, n_i), f"OPT_⊗ on attribute {i} (p = {p_i})")
        self.terms = terms

    def factor_traces(self, i: int, theta: np.ndarray, norm: int) -> np.ndarray:
        """``C_ij`` for every term j (HDMM Thm 6), one OPT_0 trace per distinct Gram."""
        values = np.array([pidentity_objective(theta, G, norm)[0] for G in self.grams[i]])
        return values[self.index[i]]

    def objective(self, thetas, norm: int):
        """``(Σ_j c_j Π_i C_ij, [∂/∂Θ_i])``: the exact OPT_⊗ objective and its block
        gradients, each through the surrogate Gram of eq. 6."""
        C = np.array([self.factor_traces(i, t, norm) for i, t in enumerate(thetas)])
        loss = float(np.sum(self.coeffs * np.prod(C, axis=0)))
        grads = [
            pidentity_objective(t, self.surrogate(C, i), norm)[1] for i, t in enumerate(thetas)
        ]
        return loss, grads

    def surrogate(self, C: np.ndarray, i: int, normalise: bool = False) -> GramOperator:
        """The surrogate Gram of HDMM eq. 6 for attribute ``i`` (``normalise``: largest
        weight 1, which leaves the OPT_0 minimiser unchanged)."""
        others = np.prod(np.delete(C, i, axis=0), axis=0) if self.d > 1 else 1.0
        weights = np.bincount(
            self.index[i], weights=self.coeffs * others, minlength=len(self.grams[i])
        )
        if normalise:
            weights = weights / weights.max()
        return GramOperator.weighted_sum(weights, self.grams[i])


def optimize_kron(
    problem: KronProblem,
    norm: int,
    rng: np.random.Generator,
    cycles: int = CYCLES,
    tol: float = CYCLE_TOL,
    ftol: float = FTOL,
    maxiter: int = MAXITER,
) -> tuple[list[np.ndarray], float]:
    """Block-cyclic OPT_⊗ (HDMM eq. 6). Returns ``([Θ_i], objective)``."""
    thetas = [rng.random((p, n)) for p, n in zip(problem.ps, problem.sizes)]
    C = np.array([problem.factor_traces(i, t, norm) for i, t in enumerate(thetas)])
    loss = float(np.sum(problem.coeffs * np.prod(C, axis=0)))
    single = len(problem.terms) == 1
    for cycle in range(cycles):
        previous = loss
        for i in range(problem.d):
            fresh = cycle == 0 and problem.sizes[i] >= opt0.LARGE_N
            thetas[i], _ = optimize_pidentity(
                problem.surrogate(C, i, normalise=True), problem.ps[i], norm,
                rng=rng if fresh else None, theta0=None if fresh else thetas[i],
                ftol=ftol, maxiter=maxiter,
            )  # fmt: skip
            C[i] = problem.factor_traces(i, thetas[i], norm)
        loss = float(np.sum(problem.coeffs * np.prod(C, axis=0)))
        if single or previous - loss <= tol * abs(previous):
            break
    return thetas, loss


def kron_strategy(thetas, norm: int) -> Matrix:
    """``⊗_i A(Θ_i)``; a bare p-Identity for a single attribute."""
    factors = [PIdentity(t, norm=norm) for t in thetas]
    return factors[0] if len(factors) == 1 else Kronecker(factors)


@register
class OptKronSelector(Selector):
    """OPT_⊗ (HDMM §6.1-6.2): the best Kronecker product of p-Identity strategies, best of
    ``restarts`` block-cyclic runs. Parameters: ``p`` (None: HDMM's rule; an int; or one per
    attribute), ``restarts``, ``seed``, ``cycles``, ``tol``, ``ftol``, ``maxiter``."""

    name = "opt_kron"
    method = "OPT_⊗ (Kronecker products of p-Identity strategies)"
    paper = "McKenna et al., PVLDB 2018 (HDMM), §6.1-§6.2"

    def __init__(
        self, p=None, restarts=1, seed=None, cycles=CYCLES, tol=CYCLE_TOL, ftol=FTOL,
        maxiter=MAXITER,
    ):  # fmt: skip
        self.params = check_search_params(p, restarts, seed, cycles, tol, ftol, maxiter)

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        prm = self.params
        problem = KronProblem(workload, prm["p"])
        norm = norm_of(privacy)
        kw = {k: prm[k] for k in ("cycles", "tol", "ftol", "maxiter")}
        best = best_of_restarts(
            prm["seed"], prm["restarts"], lambda rng: optimize_kron(problem, norm, rng, **kw)
        )
        return Strategy(
            matrix=kron_strategy(best[0], norm),
            selector=self.name,
            loss=best[1],
            metadata={"operator": "OPT_kron", "p": problem.ps, "norm": norm},
        )
