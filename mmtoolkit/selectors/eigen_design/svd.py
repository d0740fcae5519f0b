"""The singular-value-bound strategy (Li et al. 2010, Thm 5.25, Problem 5.24; Li & Miklau 2012,
§3.4), the ``svd_strategy`` selector: the eigen-queries of ``WᵀW`` weighted by ``σ_i^{1/4}``.
User guide: docs/algorithms/eigen-design.md.
"""

from __future__ import annotations

import numpy as np

from ...checks import check_bool
from ...linalg import Matrix
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register
from .design import weighted_strategy
from .gram import eigen_queries, workload_gram


@register
class SVDBoundStrategy(Selector):
    """``A = diag(σ^{1/4}) Q`` over the eigen-queries of ``WᵀW`` (Li et al. 2010, Thm 5.25);
    ``complete=True`` adds the column-completion rows of Li & Miklau Program 2 step 4."""

    name = "svd_strategy"
    method = "SVD-bound strategy: the eigen-queries of WᵀW weighted by eigenvalue^(1/4)"
    paper = (
        "Li, Hay, Rastogi, Miklau & McGregor, PODS 2010, Thm 5.25 "
        "(completion rows: Li & Miklau, PVLDB 2012, Program 2 step 4)"
    )

    def __init__(self, complete: bool = False):
        self.params = {"complete": check_bool(complete, "complete")}

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        sigma, Q = eigen_queries(workload_gram(workload))
        p = 2 if privacy.norm == 1 else 1
        # weights λ_i = σ_i^{1/4}: x = λ² for the L2 form (p = 1), x = λ for L1 (p = 2)
        x = np.sqrt(sigma) if p == 1 else sigma**0.25
        matrix, _ = weighted_strategy(Q, x, p, self.params["complete"])
        svd_value = float(np.sum(np.sqrt(sigma)) ** 2)  # tr(AᵀA)·tr(WᵀW(AᵀA)⁺), Thm 5.25
        return Strategy(
            matrix=matrix,
            selector=self.name,
            metadata={"rank": int(sigma.size), "sv_approximation_value": svd_value},
        )
