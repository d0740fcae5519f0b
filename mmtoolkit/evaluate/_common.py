"""Shared pieces of the evaluator routes: tolerances, the unsupported-workload error, input
checks and the alignment of two factorisations of one domain."""

from __future__ import annotations

import math

import numpy as np

from ..linalg import (
    Kronecker,
    Marginals,
    Matrix,
    VStack,
    Weighted,
    as_matrix,
)
from ..privacy import Privacy

#: A query w is supported when ||w (I − A⁺A)||² ≤ SUPPORT_RTOL · ||w||².
SUPPORT_RTOL = 1e-8


#: Gram eigenvalues below RANK_RTOL · n · eps · λ_max count as zero (numpy's rank rule).
RANK_RTOL = 10.0


class UnsupportedWorkloadError(ValueError):
    """The strategy does not support the workload: some query is outside rowspace(A)."""


# ====================================================================== input handling
def _check_privacy(privacy) -> None:
    if not isinstance(privacy, Privacy):
        raise TypeError(f"privacy must be a PureDP, ApproxDP or ZCDP instance, got {privacy!r}")


def _check_domains(W: Matrix, A: Matrix) -> None:
    if W.shape[1] != A.shape[1]:
        raise ValueError(
            f"workload and strategy disagree on the domain size: W has {W.shape[1]} columns, "
            f"the strategy has {A.shape[1]}"
        )


# ============================================================ union-of-Kronecker structure
def _common_sizes(terms) -> list[int] | None:
    sizes = [f.shape[1] for f in terms[0][1]]
    for _, factors in terms[1:]:
        if [f.shape[1] for f in factors] != sizes:
            return None
    return sizes


def _align(sizes_w: list[int], sizes_a: list[int]) -> list[tuple[slice, slice]]:
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


def _group(factors: list[Matrix]) -> Matrix:
    return factors[0] if len(factors) == 1 else Kronecker(factors)


def _as_vector(r, m: int) -> np.ndarray:
    return np.full(m, float(r)) if np.isscalar(r) else np.asarray(r, dtype=float)


def frobenius_sq(W) -> float:
    """||W||_F² = tr(WᵀW), the Identity strategy's trace term, without materialising W."""
    W = as_matrix(W)
    if isinstance(W, Weighted):
        return W.weight**2 * frobenius_sq(W.base)
    if isinstance(W, VStack):
        return float(sum(frobenius_sq(b) for b in W.blocks))
    if isinstance(W, Marginals):  # each marginal has exactly one 1 per column
        return float(sum(t * t for t in W.weights.values())) * float(W.shape[1])
    if isinstance(W, Kronecker):
        return float(math.prod(frobenius_sq(f) for f in W.factors))
    return float(W.gram().trace())
