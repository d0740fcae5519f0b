"""The conformance kit for selectors: :func:`check_selector` checks a selector the way the
project checks its own (in the spirit of scikit-learn's ``check_estimator``).

A new selector's author runs ``check_selector(MySelector)`` (or on an instance, or with
``params``); the project's test suite runs it over every registered selector
(``tests/test_testing_kit.py``). The checks, in order, each with the name a failure reports:

``metadata``
    ``name``, ``method`` and ``paper`` are declared (what :func:`~mmtoolkit.selectors.register`
    requires), ``privacy`` is a non-empty set of PureDP / ApproxDP / ZCDP, ``objectives()``
    non-empty names, :meth:`~mmtoolkit.selectors.Selector.describe` works.
``registry``
    a registered name gives back the same class and ``selectors.get`` an instance of it; an
    unregistered class must be registrable without clashing with a registered name (checked
    without touching the registry).
``parameters``
    an unknown parameter is refused with an error naming it and listing every declared
    parameter; ``self.params`` only holds declared parameters (it is recorded with results).
``select``
    on small workloads (default: :func:`default_workloads`; 1-D ranges, a 2-D product, binary
    marginals), under every privacy kind the selector supports and for every objective it
    declares (``objectives()``, e.g. "sum" and "max"), ``select`` returns a
    :class:`~mmtoolkit.strategy.Strategy` on the workload's cells, or refuses: the reason
    ``applicability`` gives, or one of :data:`mmtoolkit.selectors.REFUSALS` raised by
    ``select`` (``NotApplicableError`` for a condition that depends on the parameters, or a
    documented limit). Any other exception — a ``TypeError``, numpy's broadcasting
    ``ValueError`` — fails with its message and line. Every workload is tried (in quick mode
    under one privacy kind, the kinds cycling over the workloads; pairs not tried are noted)
    and must be selected or refused; at least one selection must succeed, and one per
    privacy kind and objective when any workload takes it.
``applicability``
    where ``applicability`` names a reason, ``select`` refuses with a ``ValueError`` carrying
    that reason, and where the reason is the subclass's own condition, ``_select`` indeed
    fails (a selector never claims not to apply where it would work).
``determinism``
    on every workload selected on (its first selection there), two fresh selectors with the
    same ``seed`` (when ``__init__`` takes one) choose the same strategy: equal dense
    matrices (small) or equal products with fixed random vectors.
``support``
    every selected strategy supports the workload it was selected for
    (:func:`mmtoolkit.evaluate.supports`: every query in the strategy's row space).
``sensitivity``
    the strategy's reported sensitivity ``sens_p(A)`` — the noise scale of every release —
    equals the largest column p-norm of its dense matrix (small strategies).
``bad_privacy``
    a privacy that is not a PureDP / ApproxDP / ZCDP object is a ``TypeError``; a privacy
    kind outside ``privacy`` is refused (``applicability`` names it, ``select`` raises).
``monte_carlo``
    for every selection, the empirical mean total squared error of ``releases`` noisy
    releases on fixed data contains the shared evaluator's ``expected_error`` in its 99%
    confidence interval (:func:`mmtoolkit.mechanism.monte_carlo`, HDMM's error Def. 7 /
    Li et al. 2010 Prop. 4.4). A strategy kind with a release path of its own
    (``release_answers`` or ``workload_answers``) is also released through
    :func:`mmtoolkit.mechanism.release`, one release at a time (a fifth of the releases;
    in quick mode once per strategy kind and noise family). A miss is re-run on fresh
    streams with 4x and then 16x the releases, and the check fails only when all three
    runs miss. A first run misses a correct value about 1% of the time (measured over 40
    seeds and the 18 quicker registered selectors: 24 of 2320 first runs, every one
    agreeing on the second), so a correct selector fails about once in 10⁶ comparisons,
    while a noise scale off by 25% (error off by half) misses every run. Seeds are fixed:
    a run is reproducible.

A failure raises :class:`SelectorCheckError` (an ``AssertionError``) whose message names
every failed check and why; success returns a :class:`CheckReport`.
"""

from __future__ import annotations

import copy
import inspect
import math
import traceback
from dataclasses import dataclass, field

import numpy as np

from . import evaluate, mechanism, workloads
from .domain import Domain
from .linalg import Matrix, peel
from .privacy import ZCDP, ApproxDP, Privacy, PureDP
from .release_handlers import ReleaseHandler, handler
from .selectors import REFUSALS, Selector, check_registrable, get, get_class
from .selectors.base import ALL_PRIVACY
from .strategy import Strategy

__all__ = [
    "CHECKS",
    "CheckReport",
    "SelectorCheckError",
    "check_selector",
    "default_privacies",
    "default_workloads",
]

#: The checks of :func:`check_selector`, in the order they run.
CHECKS = (
    "metadata",
    "registry",
    "parameters",
    "select",
    "applicability",
    "determinism",
    "support",
    "sensitivity",
    "bad_privacy",
    "monte_carlo",
)
#: Strategies with at most this many entries are compared and checked densely.
DENSE_ENTRIES = 1 << 16
#: Confidence level of the Monte-Carlo interval.
LEVEL = 0.99
#: Monte-Carlo runs before a miss fails: releases x 1, then x 4, then x 16 (fresh streams).
CONFIRM = (1, 4, 16)
#: Relative tolerance of the sensitivity and determinism comparisons.
RTOL = 1e-7


class SelectorCheckError(AssertionError):
    """``check_selector`` found a problem. ``failures`` maps each failed check's name to
    why; ``report`` is the :class:`CheckReport` of the whole run."""

    def __init__(self, selector: str, failures: dict[str, str], report: CheckReport):
        self.selector = selector
        self.failures = dict(failures)
        self.report = report
        lines = [f"check_selector({selector}): {len(failures)} check(s) failed"]
        lines += [f"  check {name!r} failed: {why}" for name, why in failures.items()]
        super().__init__("\n".join(lines))


@dataclass
class CheckReport:
    """What :func:`check_selector` did: ``passed`` check names, ``failed`` ``{name: why}``,
    ``notes`` (refused workloads, skipped parts) and the ``selections`` it checked as
    ``(workload label, privacy, seconds)``."""

    selector: str
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    selections: list[tuple[str, str, float]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"check_selector({self.selector}):"]
        for name in CHECKS:
            if name in self.failed:
                lines.append(f"  FAIL {name}: {self.failed[name]}")
            elif name in self.passed:
                lines.append(f"  ok   {name}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


class _Failed(Exception):
    """Internal: one check failed (the message says why)."""


def default_workloads() -> dict[str, Matrix]:
    """Small workloads of the three shapes selectors are written for (a few dozen cells):
    1-D all ranges, a 2-D product (prefix ⊗ identity) and all ≤2-way marginals on four
    binary attributes."""
    return {
        "all_range(8)": workloads.all_range(8),
        "prefix(4) x identity(4)": workloads.kron([workloads.prefix(4), workloads.identity(4)]),
        "marginals(2x2x2x2, k=2)": workloads.marginals(
            Domain.from_sizes([2, 2, 2, 2]), 2, lower=True
        ),
    }


def default_privacies() -> tuple[Privacy, ...]:
    """One privacy of each kind: PureDP(1), ApproxDP(1, 1e-5), ZCDP(1/2)."""
    return (PureDP(1.0), ApproxDP(1.0, 1e-5), ZCDP(0.5))


# ============================================================================ the kit
def check_selector(
    selector_or_class,
    *,
    params: dict | None = None,
    workloads: dict | list | None = None,
    seed: int = 0,
    quick: bool = True,
    releases: int = 1000,
    objective: str | None = None,
) -> CheckReport:
    """Run the conformance checks (module docstring) on a selector; return the
    :class:`CheckReport` or raise :class:`SelectorCheckError` naming the failed checks.

    ``selector_or_class``: a :class:`~mmtoolkit.selectors.Selector` subclass (constructed
    with ``params``; with ``seed`` too when ``__init__`` takes one and ``params`` does not
    set it) or an instance (copied, never changed). ``workloads``: a ``{label: Matrix}``
    mapping or a list of matrices (default :func:`default_workloads`); the selector must
    succeed on at least one. ``quick`` (default): each workload under one privacy kind, the
    kinds cycling over the workloads (a kind that selected nothing there is tried on the
    other workloads until one selects); else every workload under every kind.
    ``releases``: Monte-Carlo releases per selection (the looped release path uses a fifth of
    them). ``objective``: the objective selected for (default: every one the selector
    declares in ``objectives()``).
    """
    cls, make, kwargs = _factory(selector_or_class, params, seed)
    label = getattr(cls, "name", cls.__name__)
    report = CheckReport(selector=label)
    wls = _workloads(workloads)
    objectives = (objective,) if objective is not None else tuple(cls.objectives())
    kit = _Kit(cls, make, kwargs, wls, report, quick, releases, objectives, int(seed))
    for name in CHECKS:
        try:
            getattr(kit, name)()
        except _Failed as exc:
            report.failed[name] = str(exc)
        except Exception as exc:  # noqa: BLE001 - a crash inside a check is its failure
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            report.failed[name] = f"raised {_short(exc)} ({tb.filename}:{tb.lineno})"
        else:
            report.passed.append(name)
        if (name == "parameters" and kit.selector is None) or (
            name == "select" and not kit.selections
        ):
            break  # nothing to select with, or nothing selected: later checks cannot run
    if report.failed:
        raise SelectorCheckError(label, report.failed, report)
    return report


def _factory(selector_or_class, params, seed):
    """``(class, make, kwargs)``: ``make()`` returns a fresh selector configured as asked,
    ``kwargs`` its constructor arguments (None for a given instance)."""
    if isinstance(selector_or_class, Selector):
        if params:
            raise TypeError("give params with a selector class, not with an instance")
        inst = selector_or_class
        return type(inst), lambda: copy.deepcopy(inst), None
    if not (inspect.isclass(selector_or_class) and issubclass(selector_or_class, Selector)):
        raise TypeError(
            f"check_selector needs a Selector subclass or instance, got {selector_or_class!r}"
        )
    cls = selector_or_class
    kwargs = dict(params or {})
    if "seed" not in kwargs and any(p.name == "seed" for p in cls.parameters()):
        kwargs["seed"] = seed
    return cls, lambda: cls(**kwargs), kwargs


def _workloads(given) -> dict[str, Matrix]:
    if given is None:
        return default_workloads()
    items = (
        given.items()
        if isinstance(given, dict)
        else (
            (f"workloads[{i}] {W.shape[0]}x{W.shape[1]}" if isinstance(W, Matrix) else str(i), W)
            for i, W in enumerate(given)
        )
    )
    out = {}
    for name, W in items:
        if not isinstance(W, Matrix):
            raise TypeError(f"workloads: {name} is not a linalg.Matrix ({type(W).__name__})")
        out[str(name)] = W
    if not out:
        raise ValueError("workloads: give at least one workload")
    return out


def _kind(privacy) -> str:
    return type(privacy).__name__


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


@dataclass
class _Selection:
    label: str
    workload: Matrix
    privacy: Privacy
    objective: str
    strategy: Strategy

    def where(self) -> str:
        obj = "" if self.objective == "sum" else f", objective {self.objective!r}"
        return f"{self.label} under {_kind(self.privacy)}{obj}"


class _Kit:
    """The checks; each method raises :class:`_Failed` with the reason."""

    def __init__(self, cls, make, kwargs, wls, report, quick, releases, objectives, seed):
        self.cls, self.make, self.kwargs, self.wls, self.report = cls, make, kwargs, wls, report
        self.quick, self.releases, self.objectives, self.seed = quick, releases, objectives, seed
        self.selector: Selector | None = None
        self.selections: list[_Selection] = []  # the supported ones after ``support``
        self.first: _Selection | None = None  # the first selection made
        self.refused: list[tuple[str, Matrix, Privacy, str, str]] = []  # (..., obj, reason)

    def note(self, text: str) -> None:
        self.report.notes.append(text)

    # ------------------------------------------------------------------ metadata
    def metadata(self):
        cls = self.cls
        try:
            check_registrable(cls)
        except TypeError as exc:
            raise _Failed(str(exc)) from None
        kinds = getattr(cls, "privacy", None)
        if not isinstance(kinds, (frozenset, set)) or not kinds or not kinds <= ALL_PRIVACY:
            raise _Failed(
                f"privacy must be a non-empty set of PureDP / ApproxDP / ZCDP, got {kinds!r}"
            )
        objs = cls.objectives()
        if not isinstance(objs, tuple) or not objs or not all(isinstance(o, str) for o in objs):
            raise _Failed(f"objectives() must be a non-empty tuple of names, got {objs!r}")
        try:
            cls.describe()
        except Exception as exc:  # noqa: BLE001 - any crash is the finding
            raise _Failed(f"describe() raised {_short(exc)}") from None

    # ------------------------------------------------------------------ registry
    def registry(self):
        name = getattr(self.cls, "name", None)
        try:
            registered = get_class(name)
        except KeyError:
            registered = None
        if registered is None:
            self.note(f"{name!r} is not registered (named in configs as 'module:Class')")
            return  # check_registrable passed in metadata: register() would accept it
        if registered is not self.cls:
            raise _Failed(
                f"the name {name!r} is registered for {registered.__module__}."
                f"{registered.__qualname__}, not this class: give it its own name"
            )
        if self.kwargs is None:
            return  # an instance: its constructor arguments are not known
        try:
            inst = get(name, **self.kwargs)
        except Exception as exc:  # noqa: BLE001
            raise _Failed(f"selectors.get({name!r}, ...) raised {_short(exc)}") from None
        if type(inst) is not self.cls:
            raise _Failed(f"selectors.get({name!r}) returned a {type(inst).__name__}")

    # ------------------------------------------------------------------ parameters
    def parameters(self):
        cls = self.cls
        try:
            self.selector = self.make()
        except Exception as exc:  # noqa: BLE001
            raise _Failed(f"constructing the selector raised {_short(exc)}") from None
        declared = [p.name for p in cls.parameters()]
        bogus = "no_such_parameter_xyz"
        try:
            cls(**{bogus: 1})
        except (TypeError, ValueError) as exc:
            msg = str(exc)
            missing = [n for n in declared if n not in msg]
            if bogus not in msg or missing:
                raise _Failed(
                    f"the error for an unknown parameter should name it and list the valid "
                    f"ones ({', '.join(declared) or 'none'}); got: {msg!r}"
                ) from None
        else:
            raise _Failed(f"an unknown parameter {bogus}=1 was accepted")
        prm = getattr(self.selector, "params", None)
        if not isinstance(prm, dict):
            raise _Failed(f"self.params must be a dict, got {type(prm).__name__}")
        extra = sorted(set(prm) - set(declared))
        if extra:
            raise _Failed(
                f"self.params has keys that are not parameters of __init__: {extra} "
                f"(declared: {declared})"
            )

    # ------------------------------------------------------------------ select
    def _plan(self, objective: str, offset: int) -> list[tuple[str, Privacy, bool]]:
        """``(workload label, privacy, fallback)`` to try, in order. Quick: workload ``j``
        under kind ``j + offset`` (cycling), then for each kind the other workloads as
        fallbacks (tried only while that kind has no selection); else every pair."""
        kinds = [p for p in default_privacies() if type(p) in self.cls.privacy]
        labels = list(self.wls)
        if not self.quick:
            return [(lab, priv, False) for priv in kinds for lab in labels]
        first = [(lab, kinds[(j + offset) % len(kinds)]) for j, lab in enumerate(labels)]
        rest = [
            (labels[(i + j) % len(labels)], priv)
            for i, priv in enumerate(kinds)
            for j in range(len(labels))
        ]
        return [(lab, priv, False) for lab, priv in first] + [
            (lab, priv, True) for lab, priv in rest if (lab, priv) not in first
        ]

    def select(self):
        for offset, objective in enumerate(self.objectives):
            self._select_for(objective, offset)
        if not self.selections:
            raise _Failed(
                "select succeeded on none of the workloads "
                f"({', '.join(self.wls)}); pass workloads= the selector applies to"
            )

    def _select_for(self, objective: str, offset: int) -> None:
        done_kinds, untried = set(), []
        for lab, priv, fallback in self._plan(objective, offset):
            if fallback and _kind(priv) in done_kinds:
                untried.append(f"{lab} / {_kind(priv)}")
                continue
            W = self.wls[lab]
            obj = "" if objective == "sum" else f" / objective {objective!r}"
            reason = self.cls.applicability(W, priv, objective)
            if reason is not None:
                self.refused.append((lab, W, priv, objective, reason))
                continue
            try:
                strategy = self.selector.select(W, priv, objective)
            except REFUSALS as exc:
                self.note(f"{lab} / {_kind(priv)}{obj}: select refused ({_short(exc)})")
                continue
            except Exception as exc:  # noqa: BLE001 - a crash is not a refusal
                tb = traceback.extract_tb(exc.__traceback__)[-1]
                raise _Failed(
                    f"select on {lab} under {_kind(priv)}{obj} raised {_short(exc)} "
                    f"({tb.filename}:{tb.lineno}); a selector that does not apply says so in "
                    "applicability or raises NotApplicableError (selectors.REFUSALS)"
                ) from None
            if not isinstance(strategy, Strategy):
                raise _Failed(f"select returned {type(strategy).__name__}, not a Strategy")
            if strategy.matrix.shape[1] != W.shape[1]:
                raise _Failed(
                    f"on {lab} the strategy has {strategy.matrix.shape[1]} columns, the "
                    f"workload {W.shape[1]} cells"
                )
            self.selections.append(_Selection(lab, W, priv, objective, strategy))
            self.first = self.first or self.selections[-1]
            self.report.selections.append((lab, _kind(priv), strategy.seconds))
            done_kinds.add(_kind(priv))
        if untried:
            obj = "" if objective == "sum" else f" (objective {objective!r})"
            self.note(f"quick mode{obj}: not tried {', '.join(untried)}")

    # ------------------------------------------------------------------ applicability
    def applicability(self):
        seen = set()
        for lab, W, priv, objective, reason in self.refused:
            if (lab, _kind(priv), objective) in seen:
                continue
            seen.add((lab, _kind(priv), objective))
            obj = "" if objective == "sum" else f", objective {objective!r}"
            where = f"on {lab} under {_kind(priv)}{obj} applicability says {reason!r}"
            try:
                self.selector.select(W, priv, objective)
            except REFUSALS as exc:
                if reason not in str(exc):
                    raise _Failed(f"{where}, but select raised {_short(exc)}") from None
            else:
                raise _Failed(f"{where}, but select succeeded")
            if Selector.applicability.__func__(self.cls, W, priv, objective) is not None:
                continue  # the base conditions (privacy kind, objective): bad_privacy checks
            try:  # a subclass's own condition must not hide a selection that would work
                self.selector._select(W, priv, objective)
            except REFUSALS:
                continue
            raise _Failed(f"{where}, but _select succeeds there: do not claim it")

    # ------------------------------------------------------------------ determinism
    def determinism(self):
        firsts = {}  # the first selection on each workload and objective
        for s in self.selections:
            firsts.setdefault((s.label, s.objective), s)
        seeded = any(p.name == "seed" for p in self.cls.parameters())
        how = f"seed={self.selector.params.get('seed')!r}" if seeded else "no seed parameter"
        for s in firsts.values():
            try:
                a = self.make().select(s.workload, s.privacy, s.objective)
                b = self.make().select(s.workload, s.privacy, s.objective)
            except Exception as exc:  # noqa: BLE001
                raise _Failed(f"re-selecting on {s.where()} raised {_short(exc)}") from None
            why = _differ(a, b, self.seed)
            if why:
                raise _Failed(f"two selections on {s.where()} ({how}) differ: {why}")

    # ------------------------------------------------------------------ support
    def support(self):
        ok = [evaluate.supports(s.workload, s.strategy) for s in self.selections]
        bad = [s.where() for s, k in zip(self.selections, ok) if not k]
        # the error on an unsupported workload is undefined: later checks skip those
        self.selections = [s for s, k in zip(self.selections, ok) if k]
        if bad:
            raise _Failed(
                f"the strategy selected for {', '.join(bad)} does not support the workload "
                "(some query is outside the strategy's row space)"
            )

    # ------------------------------------------------------------------ sensitivity
    def sensitivity(self):
        checked = 0
        for s in self.selections:
            A = s.workload if s.strategy.inference == "none" else s.strategy.matrix
            m, n = A.shape
            if m * n > DENSE_ENTRIES:
                continue
            p = s.privacy.norm
            reported = float(A.sensitivity(p))
            true = float(np.max(np.linalg.norm(A.dense(), ord=p, axis=0)))
            if not math.isclose(reported, true, rel_tol=RTOL, abs_tol=1e-12):
                raise _Failed(
                    f"the strategy selected for {s.where()} reports L{p} sensitivity "
                    f"{reported:.6g} but its largest column L{p} norm is {true:.6g}: its noise "
                    f"would be scaled {reported / true:.3g}x the calibrated scale"
                )
            checked += 1
        if not checked:
            self.note(f"sensitivity: strategies above {DENSE_ENTRIES} entries, not checked")

    # ------------------------------------------------------------------ bad privacy
    def bad_privacy(self):
        s = self.first
        for bad in ("PureDP", 1.0, PureDP):
            try:
                self.selector.select(s.workload, bad, s.objective)
            except TypeError:
                continue
            except Exception as exc:  # noqa: BLE001
                raise _Failed(
                    f"privacy={bad!r} should be a TypeError, select raised {_short(exc)}"
                ) from None
            raise _Failed(f"select accepted privacy={bad!r}")
        for priv in default_privacies():
            if type(priv) in self.cls.privacy:
                continue
            reason = self.cls.applicability(s.workload, priv, s.objective)
            if reason is None or _kind(priv) not in reason:
                raise _Failed(
                    f"applicability should refuse {_kind(priv)} (not in privacy), got {reason!r}"
                )
            try:
                self.selector.select(s.workload, priv, s.objective)
            except REFUSALS as exc:
                if _kind(priv) not in str(exc):
                    raise _Failed(f"the refusal of {_kind(priv)} does not name it: {exc}") from None
                continue
            raise _Failed(f"select accepted {_kind(priv)}, which is not in its privacy kinds")

    # ------------------------------------------------------------------ Monte Carlo
    def monte_carlo(self):
        looped = set()
        for k, s in enumerate(self.selections):
            x = np.random.default_rng([self.seed, k, 1]).integers(0, 40, size=s.workload.shape[1])
            self._confirm(s, x, k, "mechanism.monte_carlo", _vectorised)
            base = peel(s.strategy.matrix)[1]
            own = [
                name
                for name in ("release_answers", "workload_answers")
                if getattr(type(handler(base)), name) is not getattr(ReleaseHandler, name)
            ]
            key = (type(base), s.privacy.norm)  # quick: once per kind and noise family
            if own and s.strategy.inference != "none" and not (self.quick and key in looped):
                looped.add(key)
                path = f"mechanism.release, {type(base).__name__}.{'/'.join(own)}"
                self._confirm(s, x, k, path, _release_loop)

    def _confirm(self, s: _Selection, x, k: int, path: str, run) -> None:
        """``run`` with ``releases``; a miss is re-run on fresh streams with 4x, then 16x
        the releases, and fails only if every run misses (module docstring)."""
        where = f"{s.where()} ({path})"
        runs = []
        for stage, factor in enumerate(CONFIRM):
            rng = np.random.default_rng([self.seed, k, 2 + stage])
            runs.append(run(s, x, factor * self.releases, rng))
            if runs[-1].within_ci:
                if stage:
                    self.note(f"monte_carlo: {where} agreed at {runs[-1].releases} releases")
                return
        last = runs[-1]
        cis = "; ".join(f"[{r.ci[0]:.6g}, {r.ci[1]:.6g}] ({r.releases})" for r in runs)
        raise _Failed(
            f"on {where} the evaluator's expected total squared error {last.expected:.6g} is "
            f"outside the {LEVEL:.0%} interval of the empirical mean in every run: {cis}; "
            f"empirical / expected = {last.mean_total / last.expected:.3g}"
        )


def _vectorised(s: _Selection, x, releases: int, rng):
    """:func:`mechanism.monte_carlo`: batches of releases (measure, then the kind's
    ``workload_answers`` or reconstruct → answer)."""
    return mechanism.monte_carlo(s.workload, s.strategy, x, s.privacy, releases, rng, level=LEVEL)


def _release_loop(s: _Selection, x, releases: int, rng) -> mechanism.MonteCarloResult:
    """A fifth of ``releases`` (at least 50) calls of :func:`mechanism.release`, one release
    each: the strategy kind's own release path, scored as :func:`mechanism.monte_carlo`."""
    releases = max(50, releases // 5)
    truth = s.workload @ np.asarray(x, dtype=float)
    totals = np.empty(releases)
    sq = np.zeros(s.workload.shape[0])
    for r in range(releases):
        err = mechanism.release(s.workload, s.strategy, x, s.privacy, rng) - truth
        totals[r] = float(err @ err)
        sq += err * err
    return mechanism.MonteCarloResult.from_totals(
        totals,
        LEVEL,
        evaluate.expected_error(s.workload, s.strategy, s.privacy),
        sq / releases,
        evaluate.per_query_variance(s.workload, s.strategy, s.privacy),
    )


def _differ(a: Strategy, b: Strategy, seed: int) -> str | None:
    """Why two strategies differ (None when they are the same)."""
    if a.inference != b.inference:
        return f"inference {a.inference!r} vs {b.inference!r}"
    A, B = a.matrix, b.matrix
    if A.shape != B.shape:
        return f"shapes {A.shape} vs {B.shape}"
    m, n = A.shape
    if m * n <= DENSE_ENTRIES:
        X, Y = A.dense(), B.dense()
    else:  # products with fixed random vectors, both ways
        g = np.random.default_rng([seed, 4])
        V, U = g.standard_normal((n, 4)), g.standard_normal((m, 4))
        X = np.concatenate([(A @ V).ravel(), (A.T @ U).ravel()])
        Y = np.concatenate([(B @ V).ravel(), (B.T @ U).ravel()])
    scale = max(float(np.max(np.abs(X), initial=0.0)), 1e-300)
    diff = float(np.max(np.abs(X - Y), initial=0.0))
    if diff > RTOL * scale:
        return f"largest entry difference {diff:.3g} (relative {diff / scale:.3g})"
    return None
