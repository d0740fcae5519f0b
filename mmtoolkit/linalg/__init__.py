"""Implicit matrices: the algebra every selector, workload and the evaluator is written in.

``Matrix`` (``base``) defines the strategy-kind protocol the evaluator and the mechanism call;
each structured kind implements it in its own module, ``route`` says what an error route is,
and ``normal_form`` reads a workload as weighted Kronecker terms with each factor's kind. What
a release asks of a kind beyond the algebra is in :mod:`mmtoolkit.release_handlers`.

User guide: docs/algorithms/implicit-algebra.md.
"""

from .base import (
    MAX_DENSE_ENTRIES,
    CountingQueries,
    Dense,
    Matrix,
    NotSupportedByKindError,
    Product,
    Sum,
    Symmetric,
    TooLargeError,
    Transposed,
    VStack,
    Weighted,
    as_matrix,
    check_dense_size,
    check_p,
    kron_terms,
    peel,
)
from .fourier import Fourier
from .haar import Haar, HaarGram, HaarInverse
from .kronecker import Identity, Kronecker
from .marginals import (
    MAX_MARGINALS_DIM,
    Marginal,
    Marginals,
    MarginalsGram,
    projected_traces,
)
from .normal_form import FACTOR_KINDS, NormalForm, Term, normal_form
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
from .route import RANK_RTOL, SUPPORT_RTOL, ErrorRoute, UnsupportedWorkloadError
from .tree import Tree, TreeGram, TreeGramInverse
from .union import KroneckerUnion

__all__ = [
    "FACTOR_KINDS",
    "NormalForm",
    "Term",
    "kron_terms",
    "normal_form",
    "peel",
    "MAX_DENSE_ENTRIES",
    "MAX_MARGINALS_DIM",
    "RANK_RTOL",
    "SUPPORT_RTOL",
    "CountingQueries",
    "ErrorRoute",
    "UnsupportedWorkloadError",
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
    "KroneckerUnion",
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
    "Symmetric",
    "SymTridiagonal",
    "NotSupportedByKindError",
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
    "check_p",
    "projected_traces",
]
