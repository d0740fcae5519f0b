"""The datacube paper's strategies I, Q, F, C with uniform or optimal noise budgets: the
``datacube`` selector (Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013, §3-§5; Q+,
F+, C+ by Cor. 3.3 / App. A), on marginals over binary attributes.
User guide: docs/algorithms/datacube.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...checks import check_option
from ...linalg import Fourier, Identity, Marginals, Matrix
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, refusal, register
from .bmax import CANDIDATES, bmax
from .budgets import BUDGETS, budget_objective, optimal_budgets, uniform_budgets
from .cuboids import binary_workload
from .fourier import fourier_b

__all__ = ["STRATEGIES", "DataCube", "plan"]

STRATEGIES = ("I", "Q", "F", "C")


def plan(d: int, keys: dict[int, float], strategy: str, budget: str, norm: int, **ding):
    """The budget plan for one strategy: ``(groups, b, C, λ, metadata)`` (groups: marginal
    keys for Q/C, coefficients for F, ``[None]`` for I)."""
    if strategy == "I":
        b = np.array([float(sum(w * w for w in keys.values()) * 2**d)])
        return [None], b, np.ones(1), np.ones(1), {}
    meta: dict[str, Any]
    if strategy == "Q":
        groups = sorted(keys)
        b = np.array([keys[k] ** 2 * 2.0 ** bin(k).count("1") for k in groups])
        meta = {}
    elif strategy == "F":
        F, b = fourier_b(keys)
        groups = [int(x) for x in F]
        meta = {"coefficients": len(groups)}
    else:  # C
        res = bmax(
            list(keys),
            (2,) * d,
            p=ding.get("p") or norm,
            candidates=ding.get("candidates", "lattice"),
            weights=list(keys.values()),
        )
        groups = list(dict.fromkeys(res.centroids))
        b = np.zeros(len(groups))
        for c, kappa in res.assignment.items():
            b[groups.index(kappa)] += keys[c] ** 2 * 2.0 ** bin(kappa).count("1")
        meta = {"assignment": res.assignment, "theta": res.theta, "candidates": res.candidates}
    C = np.ones(len(groups))
    lam = uniform_budgets(C, norm) if budget == "uniform" else optimal_budgets(b, C, norm)[0]
    return groups, b, C, lam, meta


@register
class DataCube(Selector):
    """Datacube strategies (Cormode et al. 2013) on a workload of marginals over binary
    attributes (encode other domains with ``BinaryEncoding`` first).

    The strategy's row groups (I: the cells; Q: the workload's marginals; F: the parity
    coefficients they need; C: the cuboids BMAX picks) get uniform or optimal budget
    fractions as row weights (sensitivity 1); ``Strategy.loss`` is the budget objective
    ``Σ_k b_k / λ_k²`` of the initial recovery (:func:`budget_objective`).

    Parameters
    ----------
    strategy : {"I", "Q", "F", "C"}, default "F"
        Base counts, the workload marginals, the Fourier coefficients, or BMAX's cuboids.
    budget : {"uniform", "optimal"}, default "optimal"
        ``"uniform"``: the paper's I, Q, F, C; ``"optimal"``: the closed-form budgets
        (Q+, F+, C+; :func:`optimal_budgets`). For I both are the same.
    candidates : {"workload", "lattice"}, default "lattice"
        For C: BMAX's candidate cuboids (:func:`bmax`).
    p : {1, 2} or None, default None
        For C: BMAX's exponent; None: the privacy's sensitivity norm (1 for PureDP, else 2).

    Raises
    ------
    ValueError
        When a parameter is not one of its options.

    References
    ----------
    Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Figure 3 and
    Sections 3-5 (budgets: Corollary 3.3 and Appendix A).
    """

    name = "datacube"
    method = "Datacube strategies I / Q / F / C with optimal budgets and GLS recovery"
    paper = "Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013, §3-§4"

    def __init__(
        self,
        strategy: str = "F",
        budget: str = "optimal",
        candidates: str = "lattice",
        p: int | None = None,
    ):
        check_option(strategy, "strategy", STRATEGIES)
        check_option(budget, "budget", BUDGETS)
        check_option(candidates, "candidates", CANDIDATES)
        if p is not None and (isinstance(p, bool) or p not in (1, 2)):
            raise ValueError(f"p must be 1, 2 or None, got {p!r}")
        self.params = {"strategy": strategy, "budget": budget, "candidates": candidates, "p": p}

    @classmethod
    def applicability(
        cls, workload: Matrix, privacy: Privacy, objective: str = "sum"
    ) -> str | None:
        """Also: a marginals workload on binary attributes (what ``_select`` reads first).

        Parameters
        ----------
        workload : Matrix
            The workload ``W``.
        privacy : Privacy
            The privacy definition.
        objective : str, default "sum"
            The objective (only ``"sum"``).

        Returns
        -------
        str or None
            The reason (the base class's, or why :func:`binary_workload` refuses the
            workload), or None.
        """
        reason = super().applicability(workload, privacy, objective)
        return refusal(binary_workload, workload) if reason is None else reason

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        d, keys = binary_workload(workload)
        prm = self.params
        s, budget = prm["strategy"], prm["budget"]
        groups, b, C, lam, meta = plan(
            d, keys, s, budget, privacy.norm, p=prm["p"], candidates=prm["candidates"]
        )
        budgets = dict(zip(groups, lam.tolist()))
        matrix: Matrix
        if s == "I":
            matrix = Identity(1 << d)
        elif s == "F":
            matrix = Fourier(d, budgets)
        else:
            matrix = Marginals((2,) * d, budgets)
        meta.update(
            strategy=s + ("+" if budget == "optimal" and s != "I" else ""),
            groups=len(groups),
            budgets=budgets if s != "F" else None,
        )
        return Strategy(
            matrix=matrix, selector=self.name, metadata=meta, loss=budget_objective(b, lam)
        )
