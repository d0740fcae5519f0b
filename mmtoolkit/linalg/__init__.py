"""Implicit matrices: the algebra every selector, workload and the evaluator is written in."""

from .base import (
    MAX_DENSE_ENTRIES,
    Dense,
    Identity,
    Matrix,
    Product,
    Sum,
    TooLargeError,
    Transposed,
    VStack,
    Weighted,
    as_matrix,
    check_dense_size,
)
from .kronecker import Kronecker

__all__ = [
    "MAX_DENSE_ENTRIES",
    "Dense",
    "Identity",
    "Kronecker",
    "Matrix",
    "Product",
    "Sum",
    "TooLargeError",
    "Transposed",
    "VStack",
    "Weighted",
    "as_matrix",
    "check_dense_size",
]
