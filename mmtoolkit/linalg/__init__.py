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
from .fourier import Fourier
from .haar import Haar, HaarGram, HaarInverse
from .kronecker import Kronecker
from .marginals import (
    MAX_MARGINALS_DIM,
    Marginal,
    Marginals,
    MarginalsGram,
    projected_traces,
)
from .orthobasis import OrthoBasis, OrthoBasisGram
from .permuted import Permuted, PermutedGram
from .pidentity import LowRankUpdate, PIdentity, PIdentityGram, PIdentityPinv
from .ranges import (
    AllRange,
    AllRangeGram,
    Difference,
    Ones,
    Prefix,
    PrefixGram,
    SymTridiagonal,
    Total,
    WidthRange,
    WidthRangeGram,
)
from .terms import kron_terms, peel
from .tree import Tree, TreeGram, TreeGramInverse

__all__ = [
    "kron_terms",
    "peel",
    "MAX_DENSE_ENTRIES",
    "MAX_MARGINALS_DIM",
    "AllRange",
    "AllRangeGram",
    "Dense",
    "Difference",
    "Fourier",
    "Haar",
    "HaarGram",
    "HaarInverse",
    "Identity",
    "Kronecker",
    "LowRankUpdate",
    "Marginal",
    "Marginals",
    "MarginalsGram",
    "Matrix",
    "Ones",
    "OrthoBasis",
    "OrthoBasisGram",
    "Permuted",
    "PermutedGram",
    "PIdentity",
    "PIdentityGram",
    "PIdentityPinv",
    "Prefix",
    "PrefixGram",
    "Product",
    "Sum",
    "SymTridiagonal",
    "TooLargeError",
    "Total",
    "Transposed",
    "Tree",
    "TreeGram",
    "TreeGramInverse",
    "VStack",
    "Weighted",
    "WidthRange",
    "WidthRangeGram",
    "as_matrix",
    "check_dense_size",
    "projected_traces",
]
