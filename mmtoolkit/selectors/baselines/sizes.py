"""The attribute sizes the per-attribute baselines are built on (HDMM §8: H_b, HB, Quadtree,
Privelet and GreedyH are 1-D structures, applied per attribute and combined by Kronecker
product on multi-dimensional domains; digest hdmm.md §15).

Shared by :mod:`.hierarchical`, :mod:`.privelet` and :mod:`.greedy_h`.
"""

from __future__ import annotations

import math

import numpy as np

from ...checks import check_int
from ...linalg import Kronecker, Matrix, Ones, VStack, peel

__all__ = ["workload_sizes"]


def _structure_sizes(W) -> list[int] | None:
    W = peel(W)[1]
    if isinstance(W, Kronecker):
        return [f.shape[1] for f in W.factors]
    if isinstance(W, VStack):
        found = [_structure_sizes(b) for b in W.blocks]
        if found and all(f is not None and f == found[0] for f in found):
            return found[0]
        return None
    sizes = getattr(W, "sizes", None)  # Marginals / Marginal
    if sizes is not None and not isinstance(W, Ones):
        return [int(s) for s in sizes]
    return None


def workload_sizes(workload: Matrix, dims=None) -> list[int]:
    """The attribute sizes a baseline builds its per-attribute structure on: ``dims`` when
    given (their product must be the domain size), else the factor sizes shared by every
    Kronecker term of the workload, else one attribute of size N."""
    N = workload.shape[1]
    if dims is not None:
        if isinstance(dims, (int, np.integer)):
            raise ValueError(f"dims must be a list of positive attribute sizes, got {dims!r}")
        dims = [check_int(s, f"dims[{i}]", minimum=1) for i, s in enumerate(dims)]
        if math.prod(dims) != N:
            raise ValueError(
                f"dims {dims} multiply to {math.prod(dims)}, the workload has {N} columns"
            )
        return dims
    found = _structure_sizes(workload)
    return found if found is not None else [N]
