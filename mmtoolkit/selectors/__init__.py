"""Strategy selectors, found through a registry: ``selectors.get(name, **params)``."""

from . import baselines  # noqa: F401  (registers identity, laplace)
from .base import Selector, UnknownSelectorError, available, get, register

__all__ = ["Selector", "UnknownSelectorError", "available", "get", "register"]
