"""OPT_HDMM (HDMM §7.1, Algorithm 2): the best of Identity, OPT_⊗, OPT_+ and OPT_M over S
random restarts; the ``hdmm`` selector (:class:`HDMMSelector`).
User guide: docs/algorithms/hdmm.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import evaluate
from ...checks import check_choice
from ...linalg import Identity, KroneckerUnion, Matrix, TooLargeError, kron_terms
from ...linalg.marginals import MAX_MARGINALS_DIM
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register
from ._common import check_search_params
from .kron import CYCLE_TOL, CYCLES, KronProblem, kron_strategy, optimize_kron
from .opt0 import FTOL, MAXITER
from .opt_marginals import (
    FORMS,
    MarginalsProblem,
    marginals_strategy,
    optimize_marginals,
    project_workload,
)
from .separate import SeparateUnion
from .union import ANSWERING, UnionProblem, check_groups, optimize_union, union_size_refusal

OPERATORS = ("kron", "union", "marginals")
#: The exact OPT_+ loss costs (number of products) x N operations; above this budget the
#: selection uses the separate-answering bound instead.
EXACT_UNION_BUDGET = 5e7


def identity_loss(W: Matrix) -> float:
    """``||W||_F² = Σ_j c_j Π_i ||W_i^(j)||_F²`` (the Identity incumbent's selection loss)."""
    total = 0.0
    for c, factors in kron_terms(W):
        value = c
        for f in factors:
            rn = f.rownorm_p(2)
            value *= float(np.sum(rn)) if isinstance(rn, np.ndarray) else float(rn) * f.shape[0]
        total += value
    return total


def union_loss(W: Matrix, matrix: KroneckerUnion, bound: float, norm: int) -> tuple[float, str]:
    """OPT_+'s selection loss and its kind: exact where the evaluator has a structured route
    (two blocks; a SeparateUnion always), else the separate-answering bound (digest §16.10)."""
    if isinstance(matrix, SeparateUnion):
        return matrix.sensitivity(norm) ** 2 * evaluate.trace_term(W, matrix), "exact"
    if len(matrix.blocks) > 2 or len(kron_terms(W)) * W.shape[1] > EXACT_UNION_BUDGET:
        return bound, "separate-answering bound"
    try:
        return matrix.sensitivity(norm) ** 2 * evaluate.trace_term(W, matrix), "exact"
    except TooLargeError:
        return bound, "separate-answering bound"


@register
class HDMMSelector(Selector):
    """OPT_HDMM (HDMM Algorithm 2): ``selectors.get("hdmm", restarts=25, seed=0)``. Parameters:
    ``restarts`` S (default 25, §8.1), ``seed``, ``operators`` (subset of ``["kron", "union",
    "marginals"]``), those of ``opt_kron`` and ``opt_union``, ``marginals_form`` (OPT_M's form)."""

    name = "hdmm"
    method = "OPT_HDMM (best of OPT_⊗, OPT_+, OPT_M)"
    paper = "McKenna et al., PVLDB 2018 (HDMM), §7.1, Algorithm 2"

    def __init__(
        self, restarts=25, seed=None, operators=OPERATORS, p=None, groups=2,
        answering="least_squares", cycles=CYCLES, tol=CYCLE_TOL, ftol=FTOL, maxiter=MAXITER,
        marginals_form="bounded",
    ):  # fmt: skip
        if not (
            isinstance(operators, (list, tuple))
            and operators
            and all(isinstance(o, str) and o in OPERATORS for o in operators)
        ):
            raise ValueError(
                f"operators must be a non-empty list drawn from {list(OPERATORS)}, "
                f"got {operators!r}"
            )
        self.params = {
            "operators": list(operators),
            "groups": check_groups(groups),
            "answering": check_choice(answering, "answering", ANSWERING),
            "marginals_form": check_choice(marginals_form, "marginals_form", FORMS),
            **check_search_params(p, restarts, seed, cycles, tol, ftol, maxiter),
        }

    def _prepare(self, workload):
        prm, ops = self.params, {}
        if "kron" in prm["operators"] or "union" in prm["operators"]:
            try:
                kp = KronProblem(workload, prm["p"])
            except ValueError:
                kp = None  # products on different factorisations: no product strategy
            if kp is not None and "kron" in prm["operators"]:
                ops["kron"] = kp
            scorable = union_size_refusal(workload, prm["answering"]) is None
            if kp is not None and "union" in prm["operators"] and scorable:
                up = UnionProblem(workload, prm["p"], prm["groups"])
                if up.applicable:
                    ops["union"] = up
        if "marginals" in prm["operators"]:
            try:
                sizes, t = project_workload(workload)
            except ValueError:
                sizes = None
            if sizes is not None and len(sizes) <= MAX_MARGINALS_DIM:
                ops["marginals"] = (sizes, MarginalsProblem(sizes, t))
        return ops

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        prm = self.params
        norm = privacy.norm
        kw = {k: prm[k] for k in ("cycles", "tol", "ftol", "maxiter")}
        ops = self._prepare(workload)
        best: tuple[Matrix, float, dict[str, Any]] = (
            Identity(workload.shape[1]), identity_loss(workload), {"operator": "Identity"}
        )
        losses = {"Identity": best[1]}
        for ss in np.random.SeedSequence(prm["seed"]).spawn(prm["restarts"]):
            children = dict(zip(OPERATORS, ss.spawn(len(OPERATORS))))
            for op, problem in ops.items():
                rng = np.random.default_rng(children[op])
                # (build the strategy, loss, metadata): only the best is built
                cand: tuple[Callable[..., Matrix], float, dict[str, Any]]
                meta: dict[str, Any]
                if op == "kron":
                    thetas, loss = optimize_kron(problem, norm, rng, **kw)
                    meta = {"operator": "OPT_kron", "p": problem.ps}
                    cand = (lambda t=thetas: kron_strategy(t, norm), loss, meta)
                elif op == "union":
                    matrix, loss, meta = optimize_union(
                        problem, norm, rng, prm["answering"], **kw
                    )  # fmt: skip
                    loss, meta["loss_kind"] = union_loss(workload, matrix, loss, norm)
                    cand = (lambda m=matrix: m, loss, meta)
                else:
                    sizes, mp = problem
                    theta, loss = optimize_marginals(mp, norm, rng, form=prm["marginals_form"])
                    meta = {"operator": "OPT_M"}
                    cand = (lambda s=sizes, t=theta: marginals_strategy(s, t), loss, meta)
                name = cand[2]["operator"]
                losses[name] = min(losses.get(name, math.inf), cand[1])
                if cand[1] < best[1]:
                    best = (cand[0](), cand[1], cand[2])
        meta = dict(best[2], losses=losses, norm=norm)
        return Strategy(matrix=best[0], selector=self.name, loss=best[1], metadata=meta)
