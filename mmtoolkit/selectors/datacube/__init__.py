"""The Datacube family: budgeted datacube strategies, Fourier, and Ding et al.'s BMAX.

Cormode, Procopiuc, Srivastava & Yaroslavtsev, "Accurate and Efficient Private Release of
Datacubes and Contingency Tables" (ICDE 2013, Fig. 3: strategy, noise budgets, GLS
recovery) and Ding, Winslett, Han & Li, "Differentially Private Data Cubes: Optimizing Noise
Sources and Consistency" (SIGMOD 2011; its BMAX as described by the HDMM and datacube papers),
one module per piece:

* :mod:`.budgets` — optimal noise budgets for a grouped strategy (§3.1, Cor. 3.3, App. A);
* :mod:`.recovery` — :class:`FourierEstimate`, the GLS recovery of marginals in the parity
  basis (§3.2, §4, Thm 4.1);
* :mod:`.cuboids` — a marginals workload read as weighted cuboids (attribute bitmasks);
* :mod:`.strategies` — the ``datacube`` selector: strategies I, Q, F, C and their "+"
  budgets (§3–§5);
* :mod:`.fourier` — the ``fourier`` selector: the parity coefficients a workload needs
  (§4.1; the Fourier baseline of Li & Miklau 2012, §5);
* :mod:`.bmax` — Ding et al.'s BMAX cuboid selection and the ``ding_datacube`` selector.

The binary encoding of a domain that these selectors expect is not specific to them:
:class:`mmtoolkit.binary_encoding.BinaryEncoding`. Importing this package registers the
``datacube``, ``fourier`` and ``ding_datacube`` selectors.
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
