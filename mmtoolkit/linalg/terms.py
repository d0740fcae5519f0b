"""A workload as a union of weighted Kronecker products (HDMM §4.3, ImpVec and eq. 1).

Every structured route of the evaluator and every selector that works factor-wise reads a
workload through :func:`kron_terms`: ``W = [w_1 𝕎_1; ...; w_k 𝕎_k]`` with
``𝕎_j = W_1^(j) ⊗ ... ⊗ W_d^(j)`` becomes ``[(w_j², [W_1^(j), ..., W_d^(j)])]`` — the
weights enter the Gram squared (HDMM §16, pitfall 11).
"""

from __future__ import annotations

from .base import Matrix, VStack, Weighted
from .kronecker import Kronecker
from .marginals import Marginals


def peel(A: Matrix) -> tuple[float, Matrix]:
    """``(c, B)`` with ``A = c·B`` and ``B`` not a :class:`Weighted`."""
    weight = 1.0
    while isinstance(A, Weighted):
        weight *= A.weight
        A = A.base
    return weight, A


def kron_terms(W: Matrix) -> list[tuple[float, list[Matrix]]]:
    """``W`` as ``[(c_t, factors_t)]``, ``c_t`` the squared weight of Kronecker term t.

    Rows follow W's row order: VStack blocks in order, Marginals blocks in key order. Weights
    of factors move into ``c_t``; a matrix that is neither a union, a Kronecker product nor
    marginals is a one-factor term.
    """
    if isinstance(W, Weighted):
        return [(W.weight**2 * c, f) for c, f in kron_terms(W.base)]
    if isinstance(W, VStack):
        return [t for b in W.blocks for t in kron_terms(b)]
    if isinstance(W, Marginals):
        return [(theta**2, list(block.factors)) for theta, block in W.blocks()]
    if isinstance(W, Kronecker):
        c, factors = 1.0, []
        for f in W.factors:
            w, base = peel(f)
            c *= w * w
            factors.append(base)
        return [(c, factors)]
    return [(1.0, [W])]
