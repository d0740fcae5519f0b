"""The error half of the strategy-kind protocol: what an *error route* is, and its shared parts.

:class:`ErrorRoute` gives ``tr(WᵀW (AᵀA)⁺)``, ``diag(W (AᵀA)⁺ Wᵀ)`` and support of ``W`` under
``A`` (Li et al. 2010, Prop. 4.4; HDMM Def. 7; ResidualPlanner §4.1) for the evaluator.

User guide: docs/algorithms/implicit-algebra.md ("Error routes").
"""

from __future__ import annotations

from typing import Protocol, cast

import numpy as np

#: A query w is supported when ||w (I − A⁺A)||² ≤ SUPPORT_RTOL · ||w||².
SUPPORT_RTOL = 1e-8

#: Gram eigenvalues below RANK_RTOL · n · eps · λ_max count as zero (numpy's rule, x 10).
RANK_RTOL = 10.0


class UnsupportedWorkloadError(ValueError):
    """The strategy does not support the workload: some query is outside rowspace(A).

    A query ``w`` is supported when ``||w (I − A⁺A)||² ≤ SUPPORT_RTOL · ||w||²``
    (:data:`SUPPORT_RTOL`); the error's message gives the worst relative component found.
    """


class ErrorRoute(Protocol):
    """What ``A.error_route(W)`` returns: ``W``'s error under ``A`` (no privacy factor, weight).

    A :class:`typing.Protocol`, not instantiated: a kind's route is any object with these four
    methods, built by the kind's ``error_route`` (or its Gram's ``gram_route``) for one
    workload ``W`` and one strategy ``A``. The evaluator applies the privacy factor and the
    strategy's sensitivity.

    References
    ----------
    Li et al. 2010, the matrix mechanism, Proposition 4.4 (error under a strategy) and
    Definition 4.6 (error profile); McKenna et al. 2018, HDMM, Definition 7; Xiao et al.
    2023 and He et al., ResidualPlanner(+), Section 4.1 (sum and maximum of variances).
    """

    def check_support(self) -> None:
        """Raise :class:`UnsupportedWorkloadError` unless every query of W is in rowspace(A).

        Raises
        ------
        UnsupportedWorkloadError
            When some query of ``W`` has a relative component above :data:`SUPPORT_RTOL`
            outside the row space of ``A``.
        """

    def trace(self) -> float:
        """``tr(WᵀW (AᵀA)⁺)``.

        Returns
        -------
        float
            The total variance of ``W``'s answers, summed over its queries, for unit noise.
        """

    def profile(self) -> np.ndarray:
        """``diag(W (AᵀA)⁺ Wᵀ)``, one value per query in W's row order.

        Returns
        -------
        numpy.ndarray
            The ``m_W`` per-query variances for unit noise.

        Raises
        ------
        TooLargeError
            When the per-query vector (or a route's intermediate) exceeds the dense limits.
        """

    def max_profile(self) -> float:
        """``max diag(W (AᵀA)⁺ Wᵀ)``, without the per-query vector where possible.

        Returns
        -------
        float
            The largest per-query variance for unit noise.
        """


def common_sizes(terms) -> list[int] | None:
    """The factor sizes shared by every Kronecker term ``(c, factors)``, else None."""
    sizes = [f.shape[1] for f in terms[0][1]]
    for _, factors in terms[1:]:
        if [f.shape[1] for f in factors] != sizes:
            return None
    return sizes


def align(sizes_w: list[int], sizes_a: list[int]) -> list[tuple[slice, slice]]:
    """Coarsest common refinement of two factorisations of N into consecutive groups."""
    groups, i, j, gi, gj, pw, pa = [], 0, 0, 0, 0, 1, 1
    while i < len(sizes_w) or j < len(sizes_a):
        if j >= len(sizes_a) or (i < len(sizes_w) and pw <= pa):
            pw *= sizes_w[i]
            i += 1
        else:
            pa *= sizes_a[j]
            j += 1
        if pw == pa and i > gi and j > gj:
            groups.append((slice(gi, i), slice(gj, j)))
            gi, gj, pw, pa = i, j, 1, 1
    if gi < len(sizes_w) or gj < len(sizes_a):  # trailing size-1 factors
        last_w, last_a = groups.pop()
        groups.append((slice(last_w.start, len(sizes_w)), slice(last_a.start, len(sizes_a))))
    return groups


def as_vector(r, m: int) -> np.ndarray:
    """A per-row value that may be a scalar (all rows equal) as a length-``m`` vector."""
    # cast: np.isscalar's stub narrows to any numpy scalar, complex or str; r is a real number
    return np.full(m, float(cast(float, r))) if np.isscalar(r) else np.asarray(r, dtype=float)
