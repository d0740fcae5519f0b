"""Shared by the linalg property tests: the dense oracle (``check_against_dense``, ``close``)
lives in :mod:`mmtoolkit.testing`; ``random_factor`` draws a per-attribute factor."""

from __future__ import annotations

from mmtoolkit.linalg import Dense, Identity, Matrix, Prefix, Total, VStack
from mmtoolkit.testing import check_against_dense, close

__all__ = ["check_against_dense", "close", "random_factor"]


def random_factor(rng, n: int) -> Matrix:
    """A random per-attribute factor on ``n`` cells: Identity, Total, Prefix, ``[T; I]`` or a
    small dense matrix with entries in -2..2."""
    kind = int(rng.integers(0, 5))
    if kind == 0:
        return Identity(n)
    if kind == 1:
        return Total(n)
    if kind == 2:
        return Prefix(n)
    if kind == 3:
        return VStack([Total(n), Identity(n)])
    return Dense(rng.integers(-2, 3, size=(int(rng.integers(1, 4)), n)).astype(float))
