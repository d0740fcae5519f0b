"""The one place error is computed (ARCHITECTURE.md: "Layers", "Privacy and error", "The
strategy-kind protocol").

The expected total squared error of the matrix mechanism (Li et al. 2010, Prop. 4.4; HDMM
Def. 7) is ``Err(W, A) = v(privacy) · sens_p(A)² · tr(WᵀW (AᵀA)⁺)``, p and v as
ARCHITECTURE.md states. ``A`` must support ``W``: every query (row) w must lie in
rowspace(A), checked row by row as ||w (I − A⁺A)||² ≤ SUPPORT_RTOL · ||w||²; otherwise
:class:`UnsupportedWorkloadError` is raised, never a number.

The evaluator knows no strategy kind: the trace, the per-query variances and their maximum
come from the strategy's own *error route* (``A.error_route(W)``: e.g. Kronecker products
factor-wise, HDMM Thm 5, 6; marginals in the spectral form, HDMM §6.3; a kind with its own
answering rule gives that rule's error), else from the generic routes here: ``stacked`` (a
union of weighted Kronecker products, HDMM OPT_+) and then ``dense`` (size-guarded by
``linalg.MAX_DENSE_ENTRIES``). ``bound`` holds the SVD lower bound.
"""

from __future__ import annotations

import math

import numpy as np

from ..linalg import (
    RANK_RTOL,
    SUPPORT_RTOL,
    Matrix,
    TooLargeError,
    UnsupportedWorkloadError,
    as_matrix,
    check_dense_size,
    peel,
)
from ..privacy import Privacy, check_privacy
from ..strategy import Strategy
from .bound import _finite, svd_bound, svd_bound_error, svd_bound_rmse
from .dense import DenseRoute
from .stacked import StackedKroneckerRoute

__all__ = ["RANK_RTOL", "SUPPORT_RTOL", "UnsupportedWorkloadError", "error_ratio", "expected_error",
           "max_variance", "per_query_variance", "rmse", "supports", "svd_bound", "svd_bound_error",
           "svd_bound_rmse", "trace_term"]


# ============================================================================ public API
def expected_error(W, A, privacy: Privacy) -> float:
    """Expected total squared error of answering ``W`` with strategy ``A`` under ``privacy``.

    ``A`` is a :class:`~mmtoolkit.strategy.Strategy` or a strategy Matrix (least-squares
    inference). A Strategy with ``inference="none"`` answers its own rows directly
    (Laplace/Gaussian mechanism on W; HDMM §15 "LM"): Err = v · m · sens_p(W)².
    """
    W, matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    if inference == "none":
        err = v * W.shape[0] * W.sensitivity(privacy.norm) ** 2
    else:
        err = v * matrix.sensitivity(privacy.norm) ** 2 * trace_term(W, matrix)
    return _finite(err, "the expected total squared error", privacy)


def rmse(W, A, privacy: Privacy) -> float:
    """Root mean squared error per query: sqrt(Err / m)."""
    W = as_matrix(W)
    return math.sqrt(expected_error(W, A, privacy) / W.shape[0])


def error_ratio(W, A, B, privacy: Privacy) -> float:
    """HDMM's Ratio(W, A) = sqrt(Err(W, A) / Err(W, B)) (HDMM §8: a ratio of RMSEs)."""
    return math.sqrt(expected_error(W, A, privacy) / expected_error(W, B, privacy))


def per_query_variance(W, A, privacy: Privacy) -> np.ndarray:
    """Variance of every workload answer, in W's row order: v · sens² · diag(W (AᵀA)⁺ Wᵀ)
    (Li et al. 2010, eq. 1)."""
    m = as_matrix(W).shape[0]
    check_dense_size(m, 1, "per_query_variance")
    out = _variance(W, A, privacy, lambda route: route.profile(), lambda v: np.full(m, v))
    _finite(float(np.max(out, initial=0.0)), "a per-query variance", privacy)
    return out


def max_variance(W, A, privacy: Privacy) -> float:
    """Largest per-query variance (the max-variance objective of ResidualPlanner §4.1),
    without materialising the per-query vector where the structure allows."""
    value = _variance(W, A, privacy, lambda route: route.max_profile(), float)
    return _finite(value, "the largest per-query variance", privacy)


def _variance(W, A, privacy, of_route, of_constant):
    """v · sens² · (the route's profile or its max); a strategy with ``inference="none"``
    has the constant variance v · sens_p(W)² (``of_constant`` shapes it)."""
    W, matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    if inference == "none":
        return of_constant(v * W.sensitivity(privacy.norm) ** 2)
    route, scale = _route(W, matrix)
    route.check_support()
    with np.errstate(over="ignore"):  # an overflow is refused by the callers (_finite)
        return v * matrix.sensitivity(privacy.norm) ** 2 * scale * of_route(route)


def supports(W, A) -> bool:
    """Whether every query of ``W`` lies in the row space of the strategy ``A``."""
    W = as_matrix(W)
    matrix = as_matrix(A.matrix if isinstance(A, Strategy) else A)
    _check_domains(W, matrix)
    try:
        _route(W, matrix)[0].check_support()
    except UnsupportedWorkloadError:
        return False
    return True


def trace_term(W, A) -> float:
    """tr(WᵀW (AᵀA)⁺) with a support check, dispatched on structure (no privacy factor)."""
    W, A = as_matrix(W), as_matrix(A)
    _check_domains(W, A)
    route, scale = _route(W, A)
    route.check_support()
    return scale * route.trace()


def _check_domains(W: Matrix, A: Matrix) -> None:
    if W.shape[1] != A.shape[1]:
        raise ValueError(
            f"workload and strategy disagree on the domain size: W has {W.shape[1]} columns, "
            f"the strategy has {A.shape[1]}"
        )


def _unpack(W, A, privacy: Privacy) -> tuple[Matrix, Matrix, str]:
    check_privacy(privacy)
    W = as_matrix(W)
    if isinstance(A, Strategy):
        matrix, inference = A.matrix, A.inference
    else:
        matrix, inference = as_matrix(A), "least_squares"
    _check_domains(W, matrix)
    if inference == "none" and matrix is not W:
        same = matrix.shape == W.shape
        if same:
            try:
                same = np.array_equal(matrix.dense(), W.dense())
            except TooLargeError as err:
                raise ValueError(
                    "a strategy with inference='none' answers its own rows, so it must be the "
                    "workload object it was selected for"
                ) from err
        if not same:
            raise ValueError(
                "a strategy with inference='none' answers its own rows; it was selected for a "
                "different workload"
            )
    return W, matrix, inference


def _route(W: Matrix, A: Matrix):
    """``(route, scale)``: the strategy's own error route (``A.error_route``, after peeling
    its weight ``c``; ``scale = 1/c²``), else the generic stacked-Kronecker route, else the
    dense one."""
    weight, A0 = peel(A)
    if weight == 0.0:
        raise UnsupportedWorkloadError("the strategy is the zero matrix; it supports no query")
    route = A0.error_route(W)
    if route is None:
        route = StackedKroneckerRoute.build(W, A0)
    if route is None:
        route = DenseRoute(W, A0)
    return route, 1.0 / weight**2
