"""mmtoolkit: workload-adaptive linear query answering under differential privacy.

The matrix-mechanism family (Matrix Mechanism, Eigen-Design, Datacube, ResidualPlanner,
HDMM) on one implicit-matrix algebra and one evaluator; see ARCHITECTURE.md for the architecture.
"""

__version__ = "0.1.0"  # first: saved plans record it (mmtoolkit.saved_plans)

from . import datasets, domain, evaluate, linalg, privacy, selectors, strategy, workloads
from .compare import compare
from .domain import Domain
from .ledger import Ledger
from .releasing import ReleaseResult, release, select_plan
from .saved_plans import SavedPlan, load_plan, save_plan
from .strategy import Strategy

__all__ = [
    "Domain",
    "Ledger",
    "ReleaseResult",
    "release",
    "SavedPlan",
    "load_plan",
    "save_plan",
    "select_plan",
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

