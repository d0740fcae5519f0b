"""The Eigen-Design selector ``eigen_design`` (Li & Miklau, PVLDB 2012, Program 2 §3.3; §3.5 for
ε-DP; §4.2 workload reductions; §3.4 relative error): a design set weighted by Program 1 (or a
§4.2 reduction), with the columns completed (:mod:`.design`).
User guide: docs/algorithms/eigen-design.md.
"""

from __future__ import annotations

import time

import numpy as np

from ...checks import check_bool, check_int, check_positive, check_probability
from ...linalg import Matrix, as_matrix
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register
from .design import (
    DESIGNS,
    SOLVERS,
    design_costs,
    design_matrix,
    eigen_query_separation,
    principal_vectors,
    solve_weighting,
    weighted_strategy,
)
from .gram import ZERO_RTOL, eigen_queries, workload_gram

REDUCTIONS = ("none", "separation", "principal")


@register
class EigenDesign(Selector):
    """Eigen-Design (Li & Miklau, PVLDB 2012, Program 2; §3.5 for ε-DP; §4.2 reductions).

    Parameters: ``design`` ("eigen", "wavelet", "fourier", "identity" or a matrix of design
    queries, §3.2), ``design_sizes`` (Kronecker design sets, §5), ``solver`` ("dual" or a cvxpy
    solver), ``reduction`` ("none", "separation" with ``group_size``, "principal" with
    ``fraction``; §4.2), ``normalize_rows`` (§3.4), ``complete`` (Program 2 step 4), ``tol`` and
    ``max_iter`` (the dual method's certified relative gap)."""

    name = "eigen_design"
    method = "Eigen-Design (Program 2)"
    paper = "Li & Miklau, PVLDB 2012, §3.3 (ε-DP: §3.5; reductions: §4.2)"

    def __init__(
        self,
        design="eigen",
        solver: str = "dual",
        design_sizes=None,
        reduction: str = "none",
        group_size: int = 16,
        fraction: float = 0.1,
        normalize_rows: bool = False,
        complete: bool = True,
        tol: float = 1e-7,
        max_iter: int = 200_000,
    ):
        if isinstance(design, str) and design not in DESIGNS:
            raise ValueError(f"unknown design {design!r} (valid: {', '.join(DESIGNS)} or a matrix)")
        if not isinstance(design, str):  # a matrix of design queries: 2-D, finite numbers
            try:
                design = as_matrix(design)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"design: expected one of {', '.join(DESIGNS)} or a matrix of design "
                    f"queries, got {type(design).__name__} {design!r} ({exc})"
                ) from None
        if solver not in SOLVERS:
            raise ValueError(f"unknown solver {solver!r} (valid: {', '.join(SOLVERS)})")
        if design_sizes is not None:
            if not (isinstance(design, str) and design != "eigen"):
                raise ValueError("design_sizes applies to design wavelet, fourier or identity")
            if not (isinstance(design_sizes, (list, tuple)) and design_sizes):
                raise ValueError(
                    f"design_sizes must be a list of positive ints, got {design_sizes!r}"
                )
            design_sizes = [
                check_int(v, f"design_sizes[{i}]", minimum=1) for i, v in enumerate(design_sizes)
            ]
        if reduction not in REDUCTIONS:
            raise ValueError(f"unknown reduction {reduction!r} (valid: {', '.join(REDUCTIONS)})")
        group_size = check_int(group_size, "group_size", minimum=1)
        if check_positive(fraction, "fraction") > 1:
            raise ValueError(f"fraction: must be <= 1, got {fraction!r}")
        check_probability(tol, "tol")  # a relative duality gap: 0 < tol < 1
        self.params = {
            "design": design if isinstance(design, str) else "matrix",
            "design_sizes": design_sizes,
            "solver": solver,
            "reduction": reduction,
            "group_size": group_size,
            "fraction": fraction,
            "normalize_rows": check_bool(normalize_rows, "normalize_rows"),
            "complete": check_bool(complete, "complete"),
            "tol": tol,
            "max_iter": check_int(max_iter, "max_iter", minimum=1),
        }
        self._design = design

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        prm = self.params
        n = workload.shape[1]
        t0 = time.perf_counter()
        G = workload_gram(workload, prm["normalize_rows"])
        if isinstance(self._design, str) and self._design == "eigen":
            c, Q = eigen_queries(G)
        else:
            Q = design_matrix(self._design, n, prm["design_sizes"])
            c = design_costs(G, Q)
            keep = c > ZERO_RTOL * c.max()
            c, Q = c[keep], Q[keep]
        t1 = time.perf_counter()
        p = 2 if privacy.norm == 1 else 1
        P = np.abs(Q) if p == 2 else Q * Q
        opts = (prm["solver"], prm["tol"], prm["max_iter"])
        if prm["reduction"] == "separation":
            x, meta = eigen_query_separation(c, P, p, prm["group_size"], *opts)
        elif prm["reduction"] == "principal":
            x, meta = principal_vectors(c, P, p, prm["fraction"], *opts)
        else:
            w = solve_weighting(c, P, p, *opts)
            x = w.x
            meta = {"program1_lower": w.lower, "gap": w.gap, "iterations": w.iterations}
        t2 = time.perf_counter()
        matrix, loss = weighted_strategy(Q, x, p, prm["complete"], c)
        meta.update(
            {
                "rank": int(c.size),
                "program1_value": loss,
                "seconds_eigen": t1 - t0,
                "seconds_weighting": t2 - t1,
                "norm": "L1" if p == 2 else "L2",
            }
        )
        return Strategy(matrix=matrix, selector=self.name, metadata=meta, loss=loss)
