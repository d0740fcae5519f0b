"""mmtoolkit: workload-adaptive linear query answering under differential privacy.

The matrix-mechanism family (Matrix Mechanism, Eigen-Design, Datacube, ResidualPlanner,
HDMM) on one implicit-matrix algebra and one evaluator; see ARCHITECTURE.md for the architecture.
"""

from . import datasets, domain, evaluate, linalg, privacy, selectors, strategy, workloads
from .compare import compare
from .domain import Domain
from .ledger import Ledger
from .releasing import ReleaseResult, release
from .strategy import Strategy

__all__ = [
    "Domain",
    "Ledger",
    "ReleaseResult",
    "release",
    "Strategy",
    "compare",
    "datasets",
    "domain",
    "evaluate",
    "linalg",
    "privacy",
    "selectors",
    "strategy",
    "workloads",
]

__version__ = "0.1.0"
