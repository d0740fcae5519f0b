"""The attribute sizes the per-attribute baselines (H_b, HB, Quadtree, Privelet, GreedyH: 1-D
structures, HDMM §8) are built on. User guide: docs/algorithms/baselines.md.
"""

from __future__ import annotations

import math

import numpy as np

from ...checks import check_int
from ...linalg import Matrix, kron_terms
from ...linalg.route import common_sizes
from ..base import NotApplicableError

__all__ = ["check_dims", "workload_sizes"]


def check_dims(dims) -> list[int] | None:
    """The ``dims`` parameter of a baseline: None (from the workload), or a non-empty list
    of attribute sizes >= 1 (ValueError naming ``dims`` otherwise)."""
    if dims is None:
        return None
    if not isinstance(dims, (list, tuple, np.ndarray)) or not len(dims):
        raise ValueError(
            f"dims: expected None or a non-empty list of attribute sizes, got {dims!r}"
        )
    return [check_int(s, f"dims[{i}]", minimum=1) for i, s in enumerate(dims)]


def workload_sizes(workload: Matrix, dims=None) -> list[int]:
    """The attribute sizes a baseline is built on: ``dims`` (product: the domain size), else the
    sizes shared by the workload's Kronecker terms, else one attribute of size N."""
    N = workload.shape[1]
    dims = check_dims(dims)
    if dims is not None:
        if math.prod(dims) != N:
            raise NotApplicableError(
                f"dims {dims} multiply to {math.prod(dims)}, the workload has {N} columns"
            )
        return dims
    found = common_sizes(kron_terms(workload))
    return found if found is not None else [N]
