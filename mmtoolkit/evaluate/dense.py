"""Dense route: any workload and strategy, guarded by ``linalg.MAX_DENSE_ENTRIES``."""

from __future__ import annotations

import numpy as np

from ..linalg import SUPPORT_RTOL, Matrix, UnsupportedWorkloadError, check_dense_size
from ..linalg.kronecker import StrategyFactor
from ..linalg.route import as_vector


class DenseRoute:
    """Any workload and strategy, through dense n x n Grams (size-guarded)."""

    def __init__(self, W: Matrix, A: Matrix):
        n = W.shape[1]
        check_dense_size(n, n, f"the trace term for a {type(A).__name__} strategy (dense route)")
        self.W = W
        self.sf = StrategyFactor(A)

    def check_support(self) -> None:
        top, worst = self.sf.worst_row_residual(self.W)
        if top > 0 and worst > SUPPORT_RTOL:
            raise UnsupportedWorkloadError(
                "the strategy does not support the workload: a query has a relative component "
                f"{worst:.3g} outside rowspace(A)"
            )

    def trace(self) -> float:
        return self.sf.trace_with(self.W, {})

    def profile(self) -> np.ndarray:
        return as_vector(self.sf.row_profile(self.W), self.W.shape[0])

    def max_profile(self) -> float:
        return float(np.max(self.sf.row_profile(self.W)))
