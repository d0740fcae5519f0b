"""The Datacube family (Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013, Fig. 3,
§3-§5; Fourier; Ding, Winslett, Han & Li's BMAX, SIGMOD 2011), one module per piece;
importing this package registers ``datacube``, ``fourier`` and ``ding_datacube``.
User guide: docs/algorithms/datacube.md.
"""

from .bmax import BMaxResult, DingDataCube, bmax
from .budgets import budget_objective, optimal_budgets, uniform_budgets
from .cuboids import binary_workload, marginal_keys
from .fourier import FourierSelector, fourier_b, fourier_coefficients
from .recovery import FourierEstimate
from .strategies import DataCube

__all__ = [
    "BMaxResult",
    "DataCube",
    "DingDataCube",
    "FourierEstimate",
    "FourierSelector",
    "binary_workload",
    "bmax",
    "budget_objective",
    "fourier_b",
    "fourier_coefficients",
    "marginal_keys",
    "optimal_budgets",
    "uniform_budgets",
]
