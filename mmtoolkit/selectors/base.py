"""The ``Selector`` interface and the registry every method plugs into (ARCHITECTURE.md,
"Where to add things"). A selector class declares ``name`` (the registry key), ``method``,
``paper``, ``privacy`` and :meth:`~Selector.objectives`; its parameters are the keyword
arguments of its ``__init__`` (:meth:`~Selector.parameters`: types and defaults from the
signature), which ``mmtoolkit list selectors`` prints (:meth:`~Selector.describe`); an unknown
one is refused listing the valid ones (:class:`UnknownParameterError`);
:meth:`~Selector.applicability` says, without selecting, why a selector does not apply.
"""

from __future__ import annotations

import inspect
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from ..checks import CheckTypeError
from ..linalg import Matrix, TooLargeError, UnsupportedWorkloadError
from ..privacy import ZCDP, ApproxDP, Privacy, PureDP
from ..strategy import Strategy

ALL_PRIVACY = frozenset({PureDP, ApproxDP, ZCDP})

_REGISTRY: dict[str, type[Selector]] = {}


class UnknownSelectorError(KeyError):
    """``selectors.get`` was given a name that is not registered."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


class UnknownParameterError(CheckTypeError):
    """A selector was given a parameter its ``__init__`` does not take (the message lists the valid
    ones); a ``TypeError`` as Python's own, and a ``ValueError`` as other bad arguments."""


class NotApplicableError(ValueError):
    """``Selector.select`` refused: :meth:`Selector.applicability` gave the reason, or
    ``_select`` found a condition that depends on the parameters and raised it itself."""


#: What ``select`` raises when a selector does not apply, rather than fails (the one rule of
#: ``mmtoolkit.compare`` and ``mmtoolkit.testing.check_selector``); anything else is a failure.
REFUSALS = (NotApplicableError, TooLargeError, UnsupportedWorkloadError, NotImplementedError)


def refusal(check, *args, **kwargs) -> str | None:
    """The message of the ValueError ``check(*args, **kwargs)`` raises, or None: the reason of
    an :meth:`Selector.applicability` that tries what ``_select`` reads first."""
    try:
        check(*args, **kwargs)
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class Parameter:
    """One keyword parameter of a selector, read from its ``__init__`` signature: ``annotation``
    as written (or ``None``), ``default`` (or :data:`Parameter.REQUIRED`).

    :meth:`Selector.parameters` builds them; ``str()`` gives the ``name: type = default`` form
    that ``mmtoolkit list selectors`` and :class:`UnknownParameterError` messages print.

    Parameters
    ----------
    name : str
        The parameter's name in ``__init__``.
    annotation : str or None
        Its annotation as written in the source (for one that is not a string, its
        ``__name__``, else its ``str()``), or None when it has none.
    default : Any
        Its default value, or :data:`Parameter.REQUIRED` (``inspect.Parameter.empty``) when
        it has none.
    """

    REQUIRED: ClassVar[Any] = inspect.Parameter.empty

    name: str
    annotation: str | None
    default: Any

    @property
    def required(self) -> bool:
        """Whether the parameter has no default (it must be given)."""
        return self.default is self.REQUIRED

    @property
    def type(self) -> str | None:
        """The annotation, else the type of the default (``None`` when neither says)."""
        if self.annotation is not None:
            return self.annotation
        if self.required or self.default is None:
            return None
        return type(self.default).__name__

    def __str__(self) -> str:
        text = self.name if self.type is None else f"{self.name}: {self.type}"
        return text if self.required else f"{text} = {self.default!r}"


class Selector(ABC):
    """A strategy-selection method (module docstring). Subclasses take keyword parameters in
    ``__init__`` (in ``self.params``; ``**kwargs`` forwards to the parent's, whose parameters
    then count too), implement :meth:`_select` and never compute reported error.

    A subclass declares the class attributes below, checks its parameters in ``__init__``
    (a bad value raises ``ValueError`` naming the parameter) and stores them in
    ``self.params``; :func:`register` adds it to the registry. Every construction path
    (:func:`get`, configurations, a direct call) first checks the keyword names against
    :meth:`parameters`.

    Parameters
    ----------
    **params : Any
        The selector's keyword parameters: those of the subclass's ``__init__``
        (:meth:`parameters`). ``Selector.__init__`` itself takes none.

    Attributes
    ----------
    name : str
        The registry key (``selectors.get(name)``, the ``selector:`` of a configuration).
    method : str
        The method's name, as ``mmtoolkit list selectors`` prints it.
    paper : str
        The paper (and section) the method comes from.
    privacy : frozenset of type
        The privacy definitions it supports (default: PureDP, ApproxDP and ZCDP).
    params : dict
        The parameter values the instance was built with; :meth:`select` copies them into
        ``Strategy.params``, and ``params["seed"]`` (if any) into ``Strategy.seed``.

    Raises
    ------
    UnknownParameterError
        When a keyword is not a parameter of the selector (the message lists the valid
        ones); it is both a ``TypeError`` and a ``ValueError``.
    """

    name: ClassVar[str]
    method: ClassVar[str]
    paper: ClassVar[str]
    privacy: ClassVar[frozenset] = ALL_PRIVACY

    def __new__(cls, *args, **params):
        # every construction path (selectors.get, configs, direct calls) checks the names
        names = {p.name for p in cls.parameters()} if params else set()
        unknown = [k for k in params if k not in names]
        if unknown:
            raise cls._unknown_parameters(unknown)
        return super().__new__(cls)

    def __init__(self, **params: Any):
        if params:
            raise self._unknown_parameters(sorted(params))
        self.params: dict = {}

    @classmethod
    def _unknown_parameters(cls, unknown) -> UnknownParameterError:
        label = getattr(cls, "name", cls.__name__)
        names = ", ".join(map(repr, unknown))
        s = "s" if len(unknown) > 1 else ""
        params = cls.parameters()
        valid = "; ".join(map(str, params)) if params else "none: it takes no parameters"
        return UnknownParameterError(
            f"selector {label!r} has no parameter{s} {names} (valid: {valid})"
        )

    @classmethod
    def parameters(cls) -> tuple[Parameter, ...]:
        """The keyword parameters of ``__init__`` with annotations and defaults, in order
        (a ``**kwargs`` adds the parameters of the parent class's ``__init__``).

        Returns
        -------
        tuple of Parameter
            One per keyword parameter, the subclass's own first; empty for a selector that
            takes none. Positional-only ``*args`` are not parameters.
        """
        out: dict[str, Parameter] = {}
        for klass in cls.__mro__:
            if klass is Selector:
                break
            if "__init__" not in vars(klass):
                continue
            forwards = False
            for p in list(inspect.signature(vars(klass)["__init__"]).parameters.values())[1:]:
                if p.kind is inspect.Parameter.VAR_KEYWORD:
                    forwards = True
                elif p.kind is not inspect.Parameter.VAR_POSITIONAL and p.name not in out:
                    ann = p.annotation
                    if ann is inspect.Parameter.empty:
                        ann = None
                    elif not isinstance(ann, str):
                        ann = getattr(ann, "__name__", str(ann))
                    out[p.name] = Parameter(p.name, ann, p.default)
            if not forwards:
                break
        return tuple(out.values())

    @classmethod
    def applicability(
        cls, workload: Matrix, privacy: Privacy, objective: str = "sum"
    ) -> str | None:
        """Why this selector does not apply to ``(workload, privacy, objective)``, or None, without
        selecting (:meth:`select` refuses with it): the privacy kind and objective here, cheap
        conditions for *every* parameter setting in a subclass (after ``super()``). None does not
        promise success; arguments of the wrong type raise ``TypeError``.

        Parameters
        ----------
        workload : Matrix
            The workload ``W`` (one row per query, one column per cell of the domain).
        privacy : Privacy
            The privacy definition the strategy is selected for.
        objective : str, default "sum"
            What the selection minimises: ``"sum"`` (total squared error) or another of
            :meth:`objectives`.

        Returns
        -------
        str or None
            The reason, one sentence naming what does not fit (the privacy kind, the
            objective, or in a subclass the workload's shape or structure); None when the
            selector may apply.

        Raises
        ------
        TypeError
            When ``workload`` is not a :class:`~mmtoolkit.linalg.Matrix` or ``privacy`` not a
            :class:`~mmtoolkit.privacy.Privacy`.
        """
        if not isinstance(workload, Matrix):
            raise TypeError(f"workload must be a linalg.Matrix, got {type(workload).__name__}")
        if not isinstance(privacy, Privacy):
            raise TypeError(f"privacy must be a PureDP, ApproxDP or ZCDP, got {privacy!r}")
        if type(privacy) not in cls.privacy:
            kinds = ", ".join(sorted(k.__name__ for k in cls.privacy))
            return (
                f"selector {cls.name!r} does not support {type(privacy).__name__} "
                f"(supported: {kinds})"
            )
        if objective not in cls.objectives():
            return (
                f"selector {cls.name!r} does not support objective {objective!r} "
                f"(supported: {', '.join(cls.objectives())})"
            )
        return None

    def select(self, workload: Matrix, privacy: Privacy, objective: str = "sum") -> Strategy:
        """Choose a strategy for ``workload`` under ``privacy``; returns a :class:`Strategy`.

        Checks :meth:`applicability`, runs the subclass's :meth:`_select`, then records on the
        strategy the selection time, the selector's name, its parameters and seed.

        Parameters
        ----------
        workload : Matrix
            The workload ``W``, ``m × N`` (``N`` cells of the domain).
        privacy : Privacy
            The privacy definition: it fixes the sensitivity norm (L1 for PureDP, L2 for
            ApproxDP and ZCDP) the strategy is optimised for.
        objective : str, default "sum"
            ``"sum"``: minimise the total squared error; ``"max"`` (where
            :meth:`objectives` lists it): the largest per-query variance.

        Returns
        -------
        Strategy
            The selected strategy: its ``matrix`` (``p × N``), ``loss`` (the method's own
            objective value, in its units, or None), ``metadata``, ``seconds``, ``selector``,
            ``params`` and ``seed``.

        Raises
        ------
        NotApplicableError
            When the selector does not apply: the reason of :meth:`applicability`, or a
            condition that depends on the parameters, found by :meth:`_select`.
        TooLargeError
            When the selection would need an array beyond the dense-size guard.
        UnsupportedWorkloadError
            When the strategy kind cannot support the workload's queries.
        TypeError
            When ``workload`` or ``privacy`` is of the wrong type.
        """
        reason = type(self).applicability(workload, privacy, objective)
        if reason is not None:
            raise NotApplicableError(reason)
        start = time.perf_counter()
        strategy = self._select(workload, privacy, objective)
        strategy.seconds = time.perf_counter() - start
        strategy.selector = self.name
        strategy.params = dict(self.params)
        strategy.seed = self.params.get("seed")
        return strategy

    @abstractmethod
    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        """Method-specific selection; ``select`` has validated the arguments.

        What a selector implements: read the workload, optimise, and return the strategy
        (``select`` fills in the time, name, parameters and seed).

        Parameters
        ----------
        workload : Matrix
            The workload ``W``, ``m × N``.
        privacy : Privacy
            The privacy definition (``privacy.norm``: the sensitivity norm, 1 or 2).
        objective : str
            One of :meth:`objectives`.

        Returns
        -------
        Strategy
            The selected strategy, with ``matrix`` and optionally ``loss`` and ``metadata``.

        Raises
        ------
        NotApplicableError
            When the selector does not apply for a reason that depends on its parameters
            (any error of :data:`REFUSALS` counts as a refusal, anything else as a failure).
        """

    @classmethod
    def objectives(cls) -> tuple[str, ...]:
        """The objectives this selector optimises ("sum" = total squared error).

        Returns
        -------
        tuple of str
            ``("sum",)`` unless a subclass adds others (``"max"``: the largest per-query
            variance).
        """
        return ("sum",)

    @classmethod
    def describe(cls) -> str:
        """The selector's metadata as the lines ``mmtoolkit list selectors`` prints.

        Returns
        -------
        str
            Newline-separated lines: the name, then ``method``, ``paper``, ``privacy``,
            ``objectives`` and one line per parameter (name, type, default or
            ``(required)``).
        """
        kinds = ", ".join(sorted(k.__name__ for k in cls.privacy))
        params = cls.parameters()
        width = max((len(p.name) for p in params), default=0)
        twidth = max((len(p.type or "") for p in params), default=0)
        lines = [
            getattr(cls, "name", cls.__name__),
            f"  method:     {getattr(cls, 'method', '(not declared)')}",
            f"  paper:      {getattr(cls, 'paper', '(not declared)')}",
            f"  privacy:    {kinds}",
            f"  objectives: {', '.join(cls.objectives())}",
            "  parameters:" + ("" if params else " none"),
        ]
        for p in params:
            default = "(required)" if p.required else f"= {p.default!r}"
            lines.append(f"    {p.name:<{width}}  {p.type or '':<{twidth}}  {default}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"


def check_registrable(cls) -> None:
    """Raise ``TypeError`` unless ``cls`` is a Selector subclass declaring a non-empty
    ``name``, ``method`` and ``paper`` (what :func:`register` requires).

    Parameters
    ----------
    cls : type
        The class to check.

    Raises
    ------
    TypeError
        When ``cls`` is not a subclass of :class:`Selector`, or one of ``name``, ``method``
        and ``paper`` is missing, not a string or blank (the message names it).
    """
    if not (inspect.isclass(cls) and issubclass(cls, Selector)):
        raise TypeError(f"only Selector subclasses can be registered, got {cls!r}")
    for attr in ("name", "method", "paper"):
        value = getattr(cls, attr, None)
        if not isinstance(value, str) or not value.strip():
            raise TypeError(
                f"{cls.__name__} must define a non-empty string class attribute {attr!r} "
                "(name: the registry key; method: the method's name; paper: its reference)"
            )


def register(cls: type[Selector]) -> type[Selector]:
    """Class decorator adding a Selector subclass to the registry under ``cls.name``
    (it must declare ``name``, ``method`` and ``paper``: :func:`check_registrable`).

    Parameters
    ----------
    cls : type[Selector]
        The selector class. Registering the same class twice is allowed.

    Returns
    -------
    type[Selector]
        ``cls`` itself, so that ``@register`` leaves the class unchanged.

    Raises
    ------
    TypeError
        When ``cls`` is not a registrable Selector subclass (:func:`check_registrable`).
    ValueError
        When another class is already registered under ``cls.name``.
    """
    check_registrable(cls)
    name = cls.name
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"a selector named {name!r} is already registered ({_REGISTRY[name]})")
    _REGISTRY[name] = cls
    return cls


def accepts_seed(cls: type[Selector]) -> bool:
    """Whether the selector class's ``__init__`` takes a ``seed`` parameter."""
    try:
        return "seed" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def available() -> list[str]:
    """The registered selector names, sorted.

    Returns
    -------
    list of str
        The names :func:`get` accepts, in alphabetical order.
    """
    return sorted(_REGISTRY)


def get_class(name: str) -> type[Selector]:
    """The Selector class registered as ``name`` (UnknownSelectorError naming the valid ones).

    Parameters
    ----------
    name : str
        A registry key (one of :func:`available`).

    Returns
    -------
    type[Selector]
        The registered class, not an instance.

    Raises
    ------
    UnknownSelectorError
        When no selector is registered as ``name`` (the message lists the available ones);
        it is a ``KeyError``.
    """
    if name not in _REGISTRY:
        raise UnknownSelectorError(
            f"unknown selector {name!r}; available: {', '.join(available())}"
        )
    return _REGISTRY[name]


def get(name: str, **params: Any) -> Selector:
    """Instantiate the selector registered as ``name`` with keyword ``params`` (an unknown
    parameter raises :class:`UnknownParameterError` listing the valid ones).

    Parameters
    ----------
    name : str
        A registry key (one of :func:`available`).
    **params : Any
        The selector's keyword parameters (``mmtoolkit list selectors`` lists them with
        their defaults).

    Returns
    -------
    Selector
        A new instance, ready for :meth:`Selector.select`.

    Raises
    ------
    UnknownSelectorError
        When no selector is registered as ``name`` (a ``KeyError``).
    UnknownParameterError
        When a keyword is not one of the selector's parameters.
    ValueError
        When a parameter's value is invalid (the selector's ``__init__`` names it).
    """
    return get_class(name)(**params)
