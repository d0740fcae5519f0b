"""Strategy selectors, found through a registry: ``selectors.get(name, **params)``.

Importing a selector module registers the selectors it defines.
"""

from . import (  # noqa: F401  (registration imports)
    baselines,
    datacube,
    eigen_design,
    hdmm,
    residual_planner,
)
from .base import (
    REFUSALS,
    NotApplicableError,
    Parameter,
    Selector,
    UnknownParameterError,
    UnknownSelectorError,
    available,
    check_registrable,
    get,
    get_class,
    register,
)

__all__ = [
    "REFUSALS",
    "NotApplicableError",
    "Parameter",
    "Selector",
    "UnknownParameterError",
    "UnknownSelectorError",
    "available",
    "check_registrable",
    "get",
    "get_class",
    "register",
]
