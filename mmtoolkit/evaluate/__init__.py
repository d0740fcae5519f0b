"""The one place error is computed (DESIGN.md, "Privacy and error").

Expected total squared error of answering a workload ``W`` with strategy ``A`` by the
matrix mechanism (Li et al. 2010, Prop. 4.4; HDMM Def. 7):

    Err(W, A) = v(privacy) · sens_p(A)² · tr(WᵀW (AᵀA)⁺)

with p = 1 and v = 2/ε² for PureDP (Laplace) and p = 2, v = σ² per unit L2 sensitivity for
ApproxDP / ZCDP (Gaussian). ``A`` must support ``W``: every query (row) w must lie in
rowspace(A), checked row by row as ||w (I − A⁺A)||² ≤ SUPPORT_RTOL · ||w||²; otherwise
:class:`UnsupportedWorkloadError` is raised, never a number.

The routes that compute tr(WᵀW (AᵀA)⁺), per-query variances and their maximum, one module
each (``_route`` picks one by the shapes of W and A):

* ``kronecker`` — a union of weighted Kronecker products against a Kronecker (or Identity)
  strategy, factor-wise and term by term (HDMM Thm 5, Thm 6), grouping factors when the two
  factorisations of the domain differ; two stacked Kronecker blocks; a lone p-Identity;
* ``marginals`` — against a weighted-marginals strategy, in the spectral form of the
  marginals algebra (HDMM §6.3, App. A.4): (AᵀA)⁺ is a scalar on each residual subspace;
* ``residual`` — against ResidualPlanner strategies (any number of attributes);
* ``tree`` — against a tree strategy (``gram()`` a ``TreeGram``: H_b, HB, Quadtree,
  GreedyH, Privelet), exactly by a Sherman–Morrison pass over the tree (``linalg/tree.py``);
* ``orthobasis`` — against a weighted orthonormal query set with column completion
  (``OrthoBasis``: Eigen-Design, SVD-bound strategies), exactly in that basis;
* ``dense`` — anything else, dense and guarded by ``linalg.MAX_DENSE_ENTRIES``.

``bound`` holds the SVD lower bound; ``_common`` the tolerances and shared checks.
"""

from __future__ import annotations

import math

import numpy as np

from ..linalg import (
    Identity,
    Kronecker,
    MarginalsGram,
    Matrix,
    OrthoBasis,
    TooLargeError,
    as_matrix,
    check_dense_size,
    peel,
)
from ..linalg.tree import TreeGram
from ..privacy import Privacy
from ..strategy import Strategy
from ._common import (
    RANK_RTOL,
    SUPPORT_RTOL,
    UnsupportedWorkloadError,
    _check_domains,
    _check_privacy,
    frobenius_sq,
)
from .bound import svd_bound, svd_bound_error, svd_bound_rmse
from .dense import _DenseRoute
from .kronecker import _KroneckerRoute, _StackedKroneckerRoute
from .marginals import _MarginalsRoute
from .orthobasis import _OrthoBasisRoute
from .residual import _ResidualRoute
from .tree import _TreeRoute

__all__ = [
    "RANK_RTOL",
    "SUPPORT_RTOL",
    "UnsupportedWorkloadError",
    "error_ratio",
    "expected_error",
    "frobenius_sq",
    "max_variance",
    "per_query_variance",
    "rmse",
    "supports",
    "svd_bound",
    "svd_bound_error",
    "svd_bound_rmse",
    "trace_term",
]


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
        return v * W.shape[0] * W.sensitivity(privacy.norm) ** 2
    return v * matrix.sensitivity(privacy.norm) ** 2 * trace_term(W, matrix)


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
    W, matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    m = W.shape[0]
    check_dense_size(m, 1, "per_query_variance")
    if inference == "none":
        return np.full(m, v * W.sensitivity(privacy.norm) ** 2)
    route = _route(W, matrix)
    route.check_support()
    return v * matrix.sensitivity(privacy.norm) ** 2 * route.scale * route.profile()


def max_variance(W, A, privacy: Privacy) -> float:
    """Largest per-query variance (the max-variance objective of ResidualPlanner §4.1),
    without materialising the per-query vector where the structure allows."""
    W, matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    if inference == "none":
        return v * W.sensitivity(privacy.norm) ** 2
    route = _route(W, matrix)
    route.check_support()
    return v * matrix.sensitivity(privacy.norm) ** 2 * route.scale * route.max_profile()


def supports(W, A) -> bool:
    """Whether every query of ``W`` lies in the row space of the strategy ``A``."""
    W = as_matrix(W)
    matrix = as_matrix(A.matrix if isinstance(A, Strategy) else A)
    _check_domains(W, matrix)
    try:
        _route(W, matrix).check_support()
    except UnsupportedWorkloadError:
        return False
    return True


def trace_term(W, A) -> float:
    """tr(WᵀW (AᵀA)⁺) with a support check, dispatched on structure (no privacy factor)."""
    W, A = as_matrix(W), as_matrix(A)
    _check_domains(W, A)
    route = _route(W, A)
    route.check_support()
    return route.scale * route.trace()


def _unpack(W, A, privacy: Privacy) -> tuple[Matrix, Matrix, str]:
    _check_privacy(privacy)
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
    weight, A0 = peel(A)
    if weight == 0.0:
        raise UnsupportedWorkloadError("the strategy is the zero matrix; it supports no query")
    route, gram = None, None
    if isinstance(A0, (Identity, Kronecker)):
        route = _KroneckerRoute(W, A0)
    elif isinstance(A0, OrthoBasis):  # Eigen-Design / SVD-bound strategies
        route = _OrthoBasisRoute(W, A0)
    elif hasattr(A0, "residual_pinv_terms"):  # ResidualPlanner(+) strategies, any d
        route = _ResidualRoute.build(W, A0)
    if route is None:
        try:
            gram = A0.gram()
        except TooLargeError:  # e.g. marginals beyond the dense 2^d algebra
            gram = None
        if isinstance(gram, MarginalsGram):
            route = _MarginalsRoute.build(W, gram)
        elif isinstance(gram, TreeGram):
            route = _TreeRoute.build(W, gram)
    if route is None:  # HDMM OPT_+ stacks; a lone large p-Identity
        route = _StackedKroneckerRoute.build(W, A0)
    if route is None:
        route = _DenseRoute(W, A0, gram)
    route.scale = 1.0 / weight**2
    return route
