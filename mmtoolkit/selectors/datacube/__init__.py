"""The Datacube family: budgeted datacube strategies, Fourier, and Ding et al.'s BMAX.

Importing this package registers the ``datacube``, ``fourier`` and ``ding_datacube``
selectors.
"""

from . import bmax, budgets, strategies  # noqa: F401  (registration imports)
