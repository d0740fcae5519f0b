"""The ``Selector`` interface and the registry every method plugs into
(ARCHITECTURE.md, "Where to add things")."""

from __future__ import annotations

import inspect
import time
from abc import ABC, abstractmethod
from typing import ClassVar

from ..linalg import Matrix
from ..privacy import ZCDP, ApproxDP, Privacy, PureDP
from ..strategy import Strategy

ALL_PRIVACY = frozenset({PureDP, ApproxDP, ZCDP})

_REGISTRY: dict[str, type[Selector]] = {}


class UnknownSelectorError(KeyError):
    """``selectors.get`` was given a name that is not registered."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


class Selector(ABC):
    """A strategy-selection method.

    Subclasses set ``name`` (the registry key used by configs) and ``privacy`` (the
    privacy kinds they optimise for), take plain keyword parameters in ``__init__`` and
    implement :meth:`_select`. They never compute error for reporting: ``mmtoolkit.evaluate``
    does, so every method is scored by the same code.
    """

    name: ClassVar[str]
    privacy: ClassVar[frozenset] = ALL_PRIVACY

    def __init__(self, **params):
        if params:
            raise TypeError(f"selector {self.name!r} takes no parameter {sorted(params)}")
        self.params: dict = {}

    def select(self, workload: Matrix, privacy: Privacy, objective: str = "sum") -> Strategy:
        """Choose a strategy for ``workload`` under ``privacy``; returns a :class:`Strategy`."""
        if not isinstance(workload, Matrix):
            raise TypeError(f"workload must be a linalg.Matrix, got {type(workload).__name__}")
        if not isinstance(privacy, Privacy):
            raise TypeError(f"privacy must be a PureDP, ApproxDP or ZCDP, got {privacy!r}")
        if type(privacy) not in self.privacy:
            kinds = ", ".join(sorted(k.__name__ for k in self.privacy))
            raise ValueError(
                f"selector {self.name!r} does not support {type(privacy).__name__} "
                f"(supported: {kinds})"
            )
        if objective not in self.objectives():
            raise ValueError(
                f"selector {self.name!r} does not support objective {objective!r} "
                f"(supported: {', '.join(self.objectives())})"
            )
        start = time.perf_counter()
        strategy = self._select(workload, privacy, objective)
        strategy.seconds = time.perf_counter() - start
        strategy.selector = self.name
        strategy.params = dict(self.params)
        strategy.seed = self.params.get("seed")
        return strategy

    @abstractmethod
    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        """Method-specific selection; ``select`` has validated the arguments."""

    @classmethod
    def objectives(cls) -> tuple[str, ...]:
        """The objectives this selector optimises ("sum" = total squared error)."""
        return ("sum",)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"


def register(cls: type[Selector]) -> type[Selector]:
    """Class decorator adding a Selector subclass to the registry under ``cls.name``."""
    if not (inspect.isclass(cls) and issubclass(cls, Selector)):
        raise TypeError(f"only Selector subclasses can be registered, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__} must define a non-empty string class attribute 'name'")
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"a selector named {name!r} is already registered ({_REGISTRY[name]})")
    _REGISTRY[name] = cls
    return cls


def available() -> list[str]:
    """The registered selector names, sorted."""
    return sorted(_REGISTRY)


def get_class(name: str) -> type[Selector]:
    """The Selector class registered as ``name`` (UnknownSelectorError naming the valid ones)."""
    if name not in _REGISTRY:
        raise UnknownSelectorError(
            f"unknown selector {name!r}; available: {', '.join(available())}"
        )
    return _REGISTRY[name]


def get(name: str, **params) -> Selector:
    """Instantiate the selector registered as ``name`` with keyword ``params``."""
    return get_class(name)(**params)
