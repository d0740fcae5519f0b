"""Strategy selectors, found through a registry: ``selectors.get(name, **params)``."""

from . import baselines, datacube, ding_datacube  # noqa: F401  (register the selectors)
from . import eigen_design, mm_sdp, svd_strategy  # noqa: F401  (register eigen_design, ...)
from . import hdmm  # noqa: F401  (registers opt0, opt_kron, opt_union, opt_marginals, hdmm)
from . import greedy_h, hierarchical, lrm, privelet  # noqa: F401  (hb, quadtree, ...)
from .base import Selector, UnknownSelectorError, available, get, register
from .residual_planner import ResidualPlanner as _RP  # noqa: F401  (registers RP, RP+)

__all__ = ["Selector", "UnknownSelectorError", "available", "get", "register"]
