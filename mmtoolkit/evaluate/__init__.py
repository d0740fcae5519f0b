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
from numpy.typing import ArrayLike

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
from .bound import _finite, _queries, svd_bound, svd_bound_error, svd_bound_rmse
from .dense import DenseRoute
from .stacked import StackedKroneckerRoute

__all__ = ["RANK_RTOL", "SUPPORT_RTOL", "UnsupportedWorkloadError", "error_ratio", "expected_error",
           "max_variance", "per_query_variance", "rmse", "supports", "svd_bound", "svd_bound_error",
           "svd_bound_rmse", "trace_term"]


# ============================================================================ public API
def expected_error(
    W: Matrix | ArrayLike, A: Strategy | Matrix | ArrayLike, privacy: Privacy
) -> float:
    """Expected total squared error of answering ``W`` with strategy ``A`` under ``privacy``.

    ``A`` is a :class:`~mmtoolkit.strategy.Strategy` or a strategy Matrix (least-squares
    inference): Err = v · sens_p(A)² · tr(WᵀW (AᵀA)⁺), ``v`` the noise variance per unit
    sensitivity of ``privacy`` and ``p`` its sensitivity norm. A Strategy with
    ``inference="none"`` answers its own rows directly (Laplace/Gaussian mechanism on W: the
    "LM" baseline of HDMM's Table 3): Err = v · m · sens_p(W)².

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``: one linear query per row over the ``N`` cells.
    A : Strategy, Matrix or array_like
        The strategy, ``p x N``, on the same ``N`` cells.
    privacy : Privacy
        ``PureDP``, ``ApproxDP`` or ``ZCDP``: gives the noise variance per unit sensitivity
        ``v`` and the sensitivity norm ``p`` (1 for pure DP, else 2).

    Returns
    -------
    float
        The sum over the ``m`` queries of each answer's variance, in squared counts; finite.

    Raises
    ------
    TypeError
        ``privacy`` is not a Privacy, or ``W`` / ``A`` is a string.
    ValueError
        ``W`` has no rows, or another number of columns than ``A``; a Strategy with
        ``inference="none"`` was selected for another workload; the error overflows float64.
    UnsupportedWorkloadError
        ``A`` (least-squares inference) does not support ``W``: a query of ``W`` lies outside
        rowspace(A) beyond ``SUPPORT_RTOL``, or ``A`` is the zero matrix.
    TooLargeError
        No structured error route applies and the dense one would exceed
        ``linalg.MAX_DENSE_ENTRIES``.

    References
    ----------
    Li et al. 2010, the Matrix Mechanism, Section 4, Proposition 4.4; McKenna et al. 2018,
    HDMM, Section 3.6, Definition 7 (the LM baseline: Section 8, Table 3).
    """
    W, matrix, inference = _unpack(W, A, privacy)
    v = privacy.noise_variance(1.0)
    if inference == "none":
        err = v * W.shape[0] * W.sensitivity(privacy.norm) ** 2
    else:
        err = v * matrix.sensitivity(privacy.norm) ** 2 * trace_term(W, matrix)
    return _finite(err, "the expected total squared error", privacy)


def rmse(
    W: Matrix | ArrayLike, A: Strategy | Matrix | ArrayLike, privacy: Privacy
) -> float:
    """Root mean squared error per query: sqrt(Err / m), Err from :func:`expected_error`.

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``.
    A : Strategy, Matrix or array_like
        The strategy, ``p x N``.
    privacy : Privacy
        ``PureDP``, ``ApproxDP`` or ``ZCDP``.

    Returns
    -------
    float
        The root mean squared error of one answer, in counts.

    Raises
    ------
    TypeError, ValueError, UnsupportedWorkloadError, TooLargeError
        As :func:`expected_error` (a workload without rows: ValueError).
    """
    W = as_matrix(W)
    m = _queries(W)
    return math.sqrt(expected_error(W, A, privacy) / m)


def error_ratio(
    W: Matrix | ArrayLike,
    A: Strategy | Matrix | ArrayLike,
    B: Strategy | Matrix | ArrayLike,
    privacy: Privacy,
) -> float:
    """HDMM's Ratio(W, A) = sqrt(Err(W, A) / Err(W, B)) (HDMM §8: a ratio of RMSEs).

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``.
    A : Strategy, Matrix or array_like
        The strategy whose error is the numerator.
    B : Strategy, Matrix or array_like
        The reference strategy (HDMM's in the paper's tables), the denominator.
    privacy : Privacy
        ``PureDP``, ``ApproxDP`` or ``ZCDP`` (the ratio does not depend on its budget).

    Returns
    -------
    float
        The ratio of the two strategies' RMSEs on ``W`` (dimensionless; above 1: ``A`` is
        worse than ``B``).

    Raises
    ------
    ValueError
        Err(W, B) is 0 (every query of ``W`` is zero): the ratio is undefined; and as
        :func:`expected_error`.
    TypeError, UnsupportedWorkloadError, TooLargeError
        As :func:`expected_error`, for ``A`` or ``B``.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 8.1 ("Error measures").
    """
    numerator = expected_error(W, A, privacy)
    denominator = expected_error(W, B, privacy)
    if denominator == 0.0:
        raise ValueError(
            "error_ratio: Err(W, B) is 0 (every query of the workload is zero, so no strategy "
            "has any error): the ratio is undefined"
        )
    return math.sqrt(numerator / denominator)


def per_query_variance(
    W: Matrix | ArrayLike, A: Strategy | Matrix | ArrayLike, privacy: Privacy
) -> np.ndarray:
    """Variance of every workload answer, in W's row order: v · sens² · diag(W (AᵀA)⁺ Wᵀ)
    (v · sens_p(W)² for each query of a Strategy with ``inference="none"``).

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``.
    A : Strategy, Matrix or array_like
        The strategy, ``p x N``.
    privacy : Privacy
        ``PureDP``, ``ApproxDP`` or ``ZCDP``.

    Returns
    -------
    numpy.ndarray
        Shape ``(m,)``, float64: the variance of each answer, in squared counts; its sum is
        :func:`expected_error`.

    Raises
    ------
    TooLargeError
        ``m`` exceeds ``linalg.MAX_DENSE_ENTRIES`` (the vector is not built), or a route
        would need a dense array above it.
    TypeError, ValueError, UnsupportedWorkloadError
        As :func:`expected_error` (ValueError: a variance overflows float64).

    References
    ----------
    Li et al. 2010, the Matrix Mechanism, Section 4, Proposition 4.4, equation (1).
    """
    m = as_matrix(W).shape[0]
    check_dense_size(m, 1, "per_query_variance")
    out = _variance(W, A, privacy, lambda route: route.profile(), lambda v: np.full(m, v))
    _finite(float(np.max(out, initial=0.0)), "a per-query variance", privacy)
    return out


def max_variance(
    W: Matrix | ArrayLike, A: Strategy | Matrix | ArrayLike, privacy: Privacy
) -> float:
    """Largest per-query variance (the max-variance objective of ResidualPlanner §4.1),
    without materialising the per-query vector where the structure allows.

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``.
    A : Strategy, Matrix or array_like
        The strategy, ``p x N``.
    privacy : Privacy
        ``PureDP``, ``ApproxDP`` or ``ZCDP``.

    Returns
    -------
    float
        max over the queries of :func:`per_query_variance`, in squared counts; finite.

    Raises
    ------
    TypeError, ValueError, UnsupportedWorkloadError, TooLargeError
        As :func:`expected_error`.

    References
    ----------
    He et al., ResidualPlanner+, Section 4.1 (loss functions: the maximum variance).
    """
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


def supports(W: Matrix | ArrayLike, A: Strategy | Matrix | ArrayLike) -> bool:
    """Whether every query of ``W`` lies in the row space of the strategy ``A`` (up to
    ``SUPPORT_RTOL``): the condition for ``A``'s least-squares answers to be unbiased.

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``.
    A : Strategy, Matrix or array_like
        The strategy, ``p x N`` (a Strategy's matrix is tested, whatever its inference).

    Returns
    -------
    bool
        True when ``A`` supports ``W`` (the zero strategy supports nothing).

    Raises
    ------
    TypeError
        ``W`` or ``A`` is a string.
    ValueError
        ``W`` has no rows, or another number of columns than ``A``.
    TooLargeError
        No structured route applies and the dense one would exceed
        ``linalg.MAX_DENSE_ENTRIES``.

    References
    ----------
    Li et al. 2010, the Matrix Mechanism, Section 3.3 (a strategy supporting the workload);
    McKenna et al. 2018, HDMM, Section 3.6.
    """
    W = as_matrix(W)
    matrix = as_matrix(A.matrix if isinstance(A, Strategy) else A)
    _check_domains(W, matrix)
    try:
        _route(W, matrix)[0].check_support()
    except UnsupportedWorkloadError:
        return False
    return True


def trace_term(W: Matrix | ArrayLike, A: Matrix | ArrayLike) -> float:
    """tr(WᵀW (AᵀA)⁺) with a support check, dispatched on structure (no privacy factor).

    Parameters
    ----------
    W : Matrix or array_like
        The workload, ``m x N``.
    A : Matrix or array_like
        The strategy matrix, ``p x N`` (not a Strategy: its matrix).

    Returns
    -------
    float
        The trace term of the matrix mechanism's error: :func:`expected_error` divided by
        v · sens_p(A)².

    Raises
    ------
    TypeError
        ``W`` or ``A`` is a string.
    ValueError
        ``W`` has no rows, or another number of columns than ``A``.
    UnsupportedWorkloadError
        ``A`` does not support ``W``, or is the zero matrix.
    TooLargeError
        No structured route applies and the dense one would exceed
        ``linalg.MAX_DENSE_ENTRIES``.

    References
    ----------
    Li et al. 2010, the Matrix Mechanism, Section 4, Proposition 4.4; McKenna et al. 2018,
    HDMM, Section 3.6, Definition 7 (Theorems 5 and 6 for Kronecker products).
    """
    W, A = as_matrix(W), as_matrix(A)
    _check_domains(W, A)
    route, scale = _route(W, A)
    route.check_support()
    return scale * route.trace()


def _check_domains(W: Matrix, A: Matrix) -> None:
    """A ValueError unless the workload has queries and both are on the same cells."""
    _queries(W)
    if W.shape[1] != A.shape[1]:
        raise ValueError(
            f"workload and strategy disagree on the domain size: W has {W.shape[1]} columns, "
            f"the strategy has {A.shape[1]}"
        )


def _unpack(
    W: Matrix | ArrayLike, A: Strategy | Matrix | ArrayLike, privacy: Privacy
) -> tuple[Matrix, Matrix, str]:
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
