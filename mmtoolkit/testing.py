"""The conformance kits: :func:`check_selector` checks a selector the way the project checks
its own (in the spirit of scikit-learn's ``check_estimator``; the checks :data:`CHECKS`);
:func:`check_strategy_kind` checks a strategy kind (a ``linalg.Matrix`` subclass) on a small
instance (:data:`KIND_CHECKS`) against the dense oracle (:func:`check_against_dense`, also
used by the linalg tests), the evaluator and the mechanism (HDMM Def. 7, Li et al. 2010
Prop. 4.4). A failure raises a :class:`CheckError` naming every failed check; success
returns a :class:`CheckReport`.

A Monte-Carlo miss is re-run on fresh streams with 4x and then 16x the releases
(:data:`CONFIRM`) and fails only when all three runs miss: a first run misses a correct
value about 1% of the time (24 of 2320 first runs over 40 seeds and the 18 quicker
registered selectors, every one agreeing on the second), so a correct selector fails about
once in 10⁶ comparisons, while a noise scale off by 25% misses every run.

User guide: docs/guide/testing-kit.md.
"""

from __future__ import annotations

import copy
import inspect
import math
import traceback
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse.linalg import LinearOperator

from . import evaluate, mechanism, workloads
from .domain import Domain
from .linalg import SUPPORT_RTOL, Dense, Matrix, Product, UnsupportedWorkloadError, peel
from .privacy import ZCDP, ApproxDP, Privacy, PureDP
from .release_handlers import ReleaseHandler, handler
from .selectors import REFUSALS, Selector, check_registrable, get, get_class
from .selectors.base import ALL_PRIVACY
from .strategy import Strategy

__all__ = [
    "CHECKS",
    "KIND_CHECKS",
    "CheckError",
    "CheckReport",
    "KindCheckError",
    "SelectorCheckError",
    "check_against_dense",
    "check_selector",
    "check_strategy_kind",
    "close",
    "default_privacies",
    "default_workloads",
    "kind_workloads",
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


class CheckError(AssertionError):
    """A conformance kit found a problem; the message names every failed check and why.

    Parameters
    ----------
    subject : str
        What was checked: the selector's or the strategy kind's name.
    failures : dict of str to str
        Each failed check's name (an entry of :data:`CHECKS` or :data:`KIND_CHECKS`) and
        why it failed; kept (copied) as ``failures``.
    report : CheckReport
        The report of the whole run, kept as ``report``.
    """

    def __init__(self, subject: str, failures: dict[str, str], report: CheckReport):
        self.subject = subject
        self.failures = dict(failures)
        self.report = report
        lines = [f"{report.kit}({subject}): {len(failures)} check(s) failed"]
        lines += [f"  check {name!r} failed: {why}" for name, why in failures.items()]
        super().__init__("\n".join(lines))


class SelectorCheckError(CheckError):
    """``check_selector`` found a problem (``subject``, also ``selector``: its name; the
    parameters: :class:`CheckError`'s)."""

    @property
    def selector(self) -> str:
        """The name of the selector checked (``subject``)."""
        return self.subject


class KindCheckError(CheckError):
    """``check_strategy_kind`` found a problem (``subject``: the kind's name; the parameters:
    :class:`CheckError`'s)."""


@dataclass
class CheckReport:
    """What a kit did; its ``str`` is one line per check (``ok   name`` or ``FAIL name:
    why``), then the notes.

    Parameters
    ----------
    selector : str
        The name of the selector (or strategy kind) checked.
    passed : list of str, optional
        The names of the checks that passed, in the order they ran.
    failed : dict of str to str, optional
        ``{name: why}`` of the checks that failed.
    notes : list of str, optional
        What the checks noted: refused workloads, skipped parts, Monte-Carlo re-runs.
    selections : list of tuple of (str, str, float), optional
        For :func:`check_selector`, the selections it checked as ``(workload label,
        privacy kind, seconds)``.
    kit : str, optional
        Which kit ran: ``"check_selector"`` or ``"check_strategy_kind"``.
    checks : tuple of str, optional
        The kit's checks in order (:data:`CHECKS` or :data:`KIND_CHECKS`).
    """

    selector: str
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    selections: list[tuple[str, str, float]] = field(default_factory=list)
    kit: str = "check_selector"
    checks: tuple[str, ...] = CHECKS

    def __str__(self) -> str:
        lines = [f"{self.kit}({self.selector}):"]
        for name in self.checks:
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
    binary attributes.

    Returns
    -------
    dict of str to Matrix
        ``{label: workload}``: ``all_range(8)`` (36 x 8), ``prefix(4) x identity(4)``
        (16 x 16) and ``marginals(2x2x2x2, k=2)`` (33 x 16: every marginal on at most two
        of the attributes).
    """
    return {
        "all_range(8)": workloads.all_range(8),
        "prefix(4) x identity(4)": workloads.kron([workloads.prefix(4), workloads.identity(4)]),
        "marginals(2x2x2x2, k=2)": workloads.marginals(
            Domain.from_sizes([2, 2, 2, 2]), 2, lower=True
        ),
    }


def default_privacies() -> tuple[Privacy, ...]:
    """One privacy of each kind, the ones :func:`check_selector` selects under.

    Returns
    -------
    tuple of Privacy
        ``(PureDP(1), ApproxDP(1, 1e-5), ZCDP(1/2))``.
    """
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
    """Run the conformance checks (:data:`CHECKS`, described in the user guide) on a selector.

    Parameters
    ----------
    selector_or_class : type[Selector] or Selector
        A :class:`~mmtoolkit.selectors.Selector` subclass (constructed with ``params``, and
        ``seed`` when ``__init__`` takes one that ``params`` does not set) or an instance
        (copied, never changed).
    params : dict or None, optional
        The constructor's keyword arguments (with a class only).
    workloads : dict or list or None, optional
        A ``{label: Matrix}`` mapping or a list of :class:`~mmtoolkit.linalg.Matrix`
        (default :func:`default_workloads`); the selector must succeed on one.
    seed : int, optional
        The selector's seed (as above) and the seed of the checks' random streams and data.
    quick : bool, optional
        True: each workload under one privacy kind of :func:`default_privacies`, the kinds
        cycling over the workloads; False: every workload under every kind.
    releases : int, optional
        Monte-Carlo releases per selection (a miss is re-run with 4x and 16x as many,
        :data:`CONFIRM`).
    objective : str or None, optional
        The objective selected for; None: every one in the selector's ``objectives()``.

    Returns
    -------
    CheckReport
        The checks that passed, the notes and the selections made.

    Raises
    ------
    SelectorCheckError
        Some check failed; the message names each and why, ``report`` holds the run.
    TypeError
        ``selector_or_class`` is not a Selector subclass or instance, ``params`` are given
        with an instance, or a workload is not a ``linalg.Matrix``.
    ValueError
        ``workloads`` is empty.

    References
    ----------
    The ``monte_carlo`` check compares the empirical error with the expected total squared
    error of McKenna et al. 2018, HDMM, Section 3.6 (Definition 7), and Li et al. 2010,
    Matrix Mechanism, Section 4.1 (Proposition 4.4).
    """
    cls, make, kwargs = _factory(selector_or_class, params, seed)
    label = getattr(cls, "name", cls.__name__)
    report = CheckReport(selector=label)
    wls = _workloads(workloads)
    objectives = (objective,) if objective is not None else tuple(cls.objectives())
    kit = _Kit(cls, make, kwargs, wls, report, quick, releases, objectives, int(seed))
    return _run(
        kit,
        SelectorCheckError,
        # nothing to select with, or nothing selected: later checks cannot run
        lambda name: (
            (name == "parameters" and kit.selector is None)
            or (name == "select" and not kit.selections)
        ),
    )


def _run(kit, error: type[CheckError], stop=lambda name: False) -> CheckReport:
    """Run ``kit.report.checks`` (one method of ``kit`` each), recording what passed and
    why the others failed; ``stop(name)`` true ends the run after that check. Return the
    report, or raise ``error`` naming every failed check."""
    report = kit.report
    for name in report.checks:
        try:
            getattr(kit, name)()
        except (_Failed, AssertionError) as exc:  # AssertionError: the dense oracle's
            report.failed[name] = str(exc).strip()
        except Exception as exc:  # noqa: BLE001 - a crash inside a check is its failure
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            report.failed[name] = f"raised {_short(exc)} ({tb.filename}:{tb.lineno})"
        else:
            report.passed.append(name)
        if stop(name):
            break
    if report.failed:
        raise error(report.selector, report.failed, report)
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


class _Checks:
    """What both kits share: notes, and the Monte-Carlo comparison with its re-runs."""

    report: CheckReport
    releases: int
    seed: int

    def note(self, text: str) -> None:
        self.report.notes.append(text)

    def _confirm(self, s: _Selection, x, k: int, path: str, run) -> None:
        """``run`` with ``releases``; a miss is re-run on fresh streams with 4x, then 16x
        the releases, and fails only if every run misses (:data:`CONFIRM`)."""
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


class _Kit(_Checks):
    """The checks; each method raises :class:`_Failed` with the reason."""

    def __init__(self, cls, make, kwargs, wls, report, quick, releases, objectives, seed):
        self.cls, self.make, self.kwargs, self.wls, self.report = cls, make, kwargs, wls, report
        self.quick, self.releases, self.objectives, self.seed = quick, releases, objectives, seed
        self.selector: Selector | None = None
        self.selections: list[_Selection] = []  # the supported ones after ``support``
        self.first: _Selection | None = None  # the first selection made
        self.refused: list[tuple[str, Matrix, Privacy, str, str]] = []  # (..., obj, reason)

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
        selector = self.selector
        assert selector is not None  # made by ``parameters``; the run stops there without one
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
                strategy = selector.select(W, priv, objective)
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


# ============================================================================ the dense oracle
# Every operation of an implicit matrix against plain numpy on a reference array. Tolerances
# follow from the conditioning of what is compared: each entry of a product of an m x n matrix
# with X errs by at most γ_k (|A| |X|) with γ_k ≈ k·eps for k-term sums (Higham, "Accuracy
# and Stability of Numerical Algorithms", §3.5); a structured kind takes a few passes of such
# sums (Kronecker factors, recursions, transforms), allowed for by SAFETY. A pseudo-inverse
# computed two ways differs by about κ(A) times that (Wedin's perturbation bound), (AᵀA)⁺ by
# κ(A)². Sums of |a|^p (norms, traces of Grams) have no cancellation: their own magnitude.
#: Passes of a structured kind's algorithm allowed for in the γ_k bounds above.
SAFETY = 2.0**10
#: A pseudo-inverse is compared when κ(A) (over the nonzero singular values) is below this.
MAX_COND = 1e4
#: Default of :func:`close`: SAFETY · γ_k for every k ≤ 4000 (1024 · 4000 · eps < 1e-9).
CLOSE_RTOL = 1e-9


def _rtol(ref: np.ndarray, cond: float = 1.0) -> float:
    """SAFETY · γ_k for sums over ``ref``'s larger dimension, times the condition ``cond``."""
    return SAFETY * max(ref.shape) * np.finfo(float).eps * cond


def close(actual, expected, rtol: float = CLOSE_RTOL, what: str = "", scale=None) -> None:
    """Assert ``|actual − expected| ≤ rtol · (|expected| + max(scale))`` entrywise (a NaN
    never passes).

    Parameters
    ----------
    actual, expected : array_like
        The values compared (as float arrays; their shapes must match).
    rtol : float, optional
        The relative tolerance.
    what : str, optional
        What is compared, named by the error.
    scale : array_like or None, optional
        Bounds the magnitudes that were summed (``|A| |X|`` for a product); its maximum (at
        least 1) is added to ``|expected|``. None: ``|expected|``.

    Raises
    ------
    AssertionError
        Naming ``what``: the shapes differ, or how many entries differ and the first one.
    """
    expected = np.asarray(expected, dtype=float)
    actual = np.asarray(actual, dtype=float)
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {actual.shape} != {expected.shape}")
    # normwise: a structured kind sums in another order, so a structural zero of numpy's
    # result may carry the rounding of the whole row
    scale = float(np.max(np.abs(expected) if scale is None else scale, initial=1.0))
    bad = ~(np.abs(actual - expected) <= rtol * (np.abs(expected) + scale))  # NaN is bad
    if np.any(bad):
        i = np.unravel_index(int(np.argmax(bad)), bad.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} entries differ from numpy beyond rtol "
            f"{rtol:.3g}, e.g. at {tuple(int(k) for k in i)}: {float(actual[i])!r} vs "
            f"{float(expected[i])!r}"
        )


def _product(got, A: np.ndarray, X: np.ndarray, what: str, cond: float = 1.0) -> None:
    """``got`` is ``A @ X`` within γ_k (|A| |X|) (times SAFETY and ``cond``)."""
    close(got, A @ X, _rtol(A, cond), what, scale=np.abs(A) @ np.abs(X))


def check_colnorms(M: Matrix, ref: np.ndarray, bound: np.ndarray | None = None) -> None:
    """Assert that ``colnorm_p``, ``rownorm_p`` (p = 1, 2) and ``sensitivity`` of ``M`` equal
    those of ``ref``.

    Parameters
    ----------
    M : Matrix
        The implicit matrix checked.
    ref : numpy.ndarray
        Its dense reference.
    bound : numpy.ndarray or None, optional
        Bounds ``|ref|`` entrywise before rounding (``|A|ᵀ|A|`` for a Gram); None: ``|ref|``.

    Raises
    ------
    AssertionError
        Naming the first norm that differs, or a scalar norm that is not a float.
    """
    bound = np.abs(ref) if bound is None else bound
    rt = _rtol(ref)
    for p in (1, 2):
        for axis, got, what in ((0, M.colnorm_p(p), "colnorm_p"), (1, M.rownorm_p(p), "rownorm_p")):
            expected = np.abs(ref).sum(axis=axis) if p == 1 else (ref * ref).sum(axis=axis)
            if np.isscalar(got) and not isinstance(got, float):
                raise AssertionError(f"{what}({p}): a scalar must be a float, got {type(got)}")
            scale = (bound if p == 1 else 2 * np.abs(ref) * bound).sum(axis=axis)
            close(np.broadcast_to(got, expected.shape), expected, rt, f"{what}({p})", scale)
    cols = (ref * ref).sum(axis=0)
    close(M.sensitivity(1), np.max(np.abs(ref).sum(axis=0)), rt, "sensitivity(1)")
    close(M.sensitivity(2), np.sqrt(np.max(cols)), rt, "sensitivity(2)")


def _pinv_reference(ref: np.ndarray, exact: bool) -> tuple[np.ndarray | None, float]:
    """``(numpy's A⁺, κ)`` when the comparison is well posed, else ``(None, κ)``; κ over the
    nonzero singular values. Full rank: when κ ≤ MAX_COND. Rank-deficient: only when
    ``exact`` (the kind handles the rank structurally, not by an SVD cut-off) and the
    singular values have a clear gap (each ≥ σ_max / MAX_COND or ≤ 1e-12 σ_max)."""
    if ref.size == 0:
        return None, 1.0
    s = np.linalg.svd(ref, compute_uv=False)
    if s[0] == 0.0:
        return np.zeros(ref.T.shape), 1.0
    rel = s / s[0]
    cond = float(1.0 / rel[rel > 1.0 / MAX_COND].min())
    if s.size == min(ref.shape) and rel[-1] > 1.0 / MAX_COND:
        return np.linalg.pinv(ref), cond
    if exact and np.all((rel > 1.0 / MAX_COND) | (rel < 1e-12)):
        return np.linalg.pinv(ref, rcond=1e-9), cond
    return None, cond


def _check_products(M: Matrix, ref: np.ndarray, rng) -> None:
    m, n = ref.shape
    if tuple(M.shape) != (m, n) or not all(isinstance(d, int) for d in M.shape):
        raise AssertionError(f"shape {M.shape!r} != {ref.shape} (two ints)")
    x, X = rng.normal(size=n), rng.normal(size=(n, 3))
    y, Y = rng.normal(size=m), rng.normal(size=(m, 2))
    close(M.dense(), ref, _rtol(ref), "dense()")
    for got, A, V, what in (
        (M.matvec(x), ref, x, "matvec 1-D"),
        (M.matvec(X), ref, X, "matvec 2-D"),
        (M @ x, ref, x, "M @ x"),
        (M @ X, ref, X, "M @ X"),
        (M.rmatvec(y), ref.T, y, "rmatvec 1-D"),
        (M.rmatvec(Y), ref.T, Y, "rmatvec 2-D"),
        (y @ M, ref.T, y, "y @ M"),
        ((Y.T @ M).T, ref.T, Y, "Y.T @ M"),
        (M.T.matvec(Y), ref.T, Y, ".T matvec"),
        (M.T.rmatvec(X), ref, X, ".T rmatvec"),
        (M.T.T.matvec(X), ref, X, ".T.T matvec"),
        ((M @ Dense(X)).dense(), ref, X, "M @ Dense"),
        ((Dense(Y.T) @ M).dense().T, ref.T, Y, "Dense @ M"),
    ):
        _product(got, A, V, what)
    if tuple(M.T.shape) != (n, m):
        raise AssertionError(f".T has shape {M.T.shape}, not {(n, m)}")
    close(M.T.dense(), ref.T, _rtol(ref), ".T dense()")
    close(Product(M.T, M).matvec(x), ref.T @ (ref @ x), _rtol(ref), "Product(M.T, M)",
          scale=np.abs(ref).T @ (np.abs(ref) @ np.abs(x)))  # fmt: skip
    op = M.as_operator()
    if not isinstance(op, LinearOperator) or op.shape != (m, n):
        raise AssertionError(f"as_operator() is not an {m} x {n} scipy LinearOperator")
    for got, A, V, what in (
        (op.matvec(x), ref, x, "as_operator().matvec"),
        (op.rmatvec(y), ref.T, y, "as_operator().rmatvec"),
        (op.matmat(X), ref, X, "as_operator().matmat"),
        (op.H @ Y, ref.T, Y, "as_operator().H @ Y"),
    ):
        _product(got, A, V, what)


def _check_reductions(M: Matrix, ref: np.ndarray) -> None:
    m, n = ref.shape
    if m == n:
        close(M.trace(), np.trace(ref), _rtol(ref), "trace()", scale=np.trace(np.abs(ref)))
        close(M.diag(), np.diag(ref), _rtol(ref), "diag()")
    check_colnorms(M, ref)
    close(M.frobenius_sq(), float(np.sum(ref * ref)), _rtol(ref), "frobenius_sq()")


def _check_gram(M: Matrix, ref: np.ndarray, rng, ops: bool = True) -> None:
    n = ref.shape[1]
    X = rng.normal(size=(n, 3))
    G, Gref, bound = M.gram(), ref.T @ ref, np.abs(ref).T @ np.abs(ref)
    if tuple(G.shape) != (n, n):
        raise AssertionError(f"gram() has shape {G.shape}, not {(n, n)}")
    rt = _rtol(ref)
    close(G.dense(), Gref, rt, "gram().dense()", scale=bound)
    for got, what in ((G.matvec(X), "gram() matvec"), (G.rmatvec(X), "gram() rmatvec")):
        close(got, Gref @ X, rt, what, scale=bound @ np.abs(X))
    if ops:
        close(G.trace(), np.trace(Gref), rt, "gram().trace()")
        close(G.diag(), np.diag(Gref), rt, "gram().diag()")
        check_colnorms(G, Gref, bound)
        close(G.T.matvec(X), Gref @ X, rt, "gram().T", scale=bound @ np.abs(X))


def _check_pinv(M: Matrix, ref: np.ndarray, rng, exact: bool = True) -> None:
    expected, cond = _pinv_reference(ref, exact)
    if expected is None:
        return
    m, n = ref.shape
    Y = rng.normal(size=(m, 3))
    rt = _rtol(ref, cond)
    for name, P in (("pinv()", M.pinv()), ("pinv_operator()", M.pinv_operator())):
        if P is None:
            continue
        if tuple(P.shape) != (n, m):
            raise AssertionError(f"{name} has shape {P.shape}, not {(n, m)}")
        close(P.dense(), expected, rt, name)
        close(P @ Y[:, 0], expected @ Y[:, 0], rt, f"{name} @ vector")
        close(P @ Y, expected @ Y, rt, f"{name} @ {m} x 3")


def check_against_dense(
    M: Matrix,
    ref,
    *,
    rng: np.random.Generator | None = None,
    pinv_exact: bool = True,
    check_pinv: bool = True,
    check_gram_ops: bool = True,
) -> None:
    """Assert that every algebra operation of the implicit matrix ``M`` equals plain numpy on
    the reference array ``ref`` (the list: docs/guide/testing-kit.md, "The dense oracle").

    Tolerances follow from the conditioning of what is compared (the oracle's comment in this
    module): products within ``SAFETY · γ_k`` of the magnitudes summed, times κ(A) for
    ``A⁺`` and κ(A)² for ``(AᵀA)⁺``.

    Parameters
    ----------
    M : Matrix
        The implicit matrix checked.
    ref : array_like
        Its dense ``m x n`` reference (converted to a float array).
    rng : numpy.random.Generator or None, optional
        The stream of the random vectors it multiplies; None: ``default_rng(0)``.
    pinv_exact : bool, optional
        The kind handles a rank deficiency structurally (not by an SVD cut-off), so a
        rank-deficient ``ref`` with a clear gap in its singular values is compared too.
    check_pinv : bool, optional
        Compare ``pinv()`` and ``pinv_operator()`` with numpy's pseudo-inverse, when that is
        well posed (κ(A) below :data:`MAX_COND`).
    check_gram_ops : bool, optional
        Also the Gram's trace, diagonal and norms.

    Raises
    ------
    AssertionError
        Naming the first operation that differs (or has the wrong shape).

    References
    ----------
    Higham, "Accuracy and Stability of Numerical Algorithms", Section 3.5 (the γ_k bounds
    of the products' rounding).
    """
    rng = np.random.default_rng(0) if rng is None else rng
    ref = np.asarray(ref, dtype=float)
    _check_products(M, ref, rng)
    _check_gram(M, ref, rng, check_gram_ops)
    _check_reductions(M, ref)
    if check_pinv:
        _check_pinv(M, ref, rng, pinv_exact)


# ============================================================================ the kind kit
#: The checks of :func:`check_strategy_kind`, in the order they run.
KIND_CHECKS: tuple[str, ...] = ("products", "reductions", "gram", "pinv", "reconstruction")
KIND_CHECKS += ("kron_terms",)
KIND_CHECKS += ("error_route", "evaluator", "monte_carlo", "release", "release_handlers")


def kind_workloads(A: Matrix, seed: int = 0) -> dict[str, Matrix]:
    """Workloads on the cells of ``A``: the identity, the prefix queries, three random dense
    queries and three random combinations of ``A``'s rows (always supported).

    Parameters
    ----------
    A : Matrix
        The strategy (``m x n``).
    seed : int, optional
        Seed of the random queries and combinations.

    Returns
    -------
    dict of str to Matrix
        ``{label: workload}`` of four workloads, each with ``n`` columns: ``identity(n)``,
        ``prefix(n)``, a dense ``3 x n`` and the ``Dense`` combinations ``G A`` with a
        random ``3 x m`` ``G``.
    """
    m, n = A.shape
    g = np.random.default_rng([seed, 3])
    return {
        f"identity({n})": workloads.identity(n),
        f"prefix({n})": workloads.prefix(n),
        f"random 3 x {n}": Dense(g.normal(size=(3, n))),
        "3 combinations of the strategy's rows": Dense(g.normal(size=(3, m)) @ _reference(A)),
    }


def _reference(A: Matrix) -> np.ndarray:
    """The kind's dense matrix from its defining products (``_matmat`` on the identity's
    columns), not from any ``dense()`` override."""
    return Matrix.dense(A)


def check_strategy_kind(
    kind_or_matrix,
    *,
    params: dict | None = None,
    workloads: dict | list | None = None,
    privacy: Privacy | None = None,
    seed: int = 0,
    releases: int = 1000,
    own_answers: bool = False,
) -> CheckReport:
    """Check a strategy kind (a :class:`~mmtoolkit.linalg.Matrix` subclass, ARCHITECTURE.md
    "The strategy-kind protocol") on a small instance against the dense oracle and through the
    evaluator and the mechanism (:data:`KIND_CHECKS`; each described in the user guide).

    The reference is the kind's own ``_matmat`` on the identity's columns; tolerances: the
    oracle's comment (products γ_n, κ(A) for ``A⁺``, κ(A)² for ``(AᵀA)⁺``).

    Parameters
    ----------
    kind_or_matrix : type[Matrix] or Matrix
        A small instance (at most :data:`DENSE_ENTRIES` entries), or the class, constructed
        with ``params``.
    params : dict or None, optional
        The constructor's keyword arguments (with a class only).
    workloads : dict or list or None, optional
        A ``{label: Matrix}`` mapping or a list on the instance's cells, tried before
        :func:`kind_workloads`.
    privacy : Privacy or None, optional
        The noise of the Monte-Carlo and release checks; None: ``ZCDP(1/2)``.
    seed : int, optional
        Seed of the kind's workloads, the data and the checks' random streams.
    releases : int, optional
        Monte-Carlo releases (a miss is re-run as :func:`check_selector`'s).
    own_answers : bool, optional
        The kind answers by a rule of its own, not ``W A⁺ y`` (HDMM's separate answering of
        a union), so its error route and the evaluator are checked against its releases and
        each other instead.

    Returns
    -------
    CheckReport
        The checks that passed and the notes (kit ``"check_strategy_kind"``).

    Raises
    ------
    KindCheckError
        Some check failed; the message names each and why, ``report`` holds the run.
    TypeError
        ``kind_or_matrix`` is not a Matrix subclass or instance, ``params`` are given with
        an instance, or a workload is not a ``linalg.Matrix``.
    ValueError
        The instance has more than :data:`DENSE_ENTRIES` entries, ``workloads`` is empty,
        or a workload's columns are not the instance's.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 3.6 (Definition 7: the expected error the
    ``error_route``, ``evaluator`` and ``monte_carlo`` checks compare) and Section 6.2
    (Definition 11: the separate answering of a union, ``own_answers``); Li et al. 2010,
    Matrix Mechanism, Section 4.1 (Proposition 4.4).
    """
    if inspect.isclass(kind_or_matrix) and issubclass(kind_or_matrix, Matrix):
        A = kind_or_matrix(**(params or {}))
    elif isinstance(kind_or_matrix, Matrix):
        if params:
            raise TypeError("give params with a strategy kind class, not with an instance")
        A = kind_or_matrix
    else:
        raise TypeError(
            f"check_strategy_kind needs a linalg.Matrix subclass or instance, got "
            f"{kind_or_matrix!r}"
        )
    m, n = A.shape
    if m * n > DENSE_ENTRIES:
        raise ValueError(
            f"check_strategy_kind: the instance of {type(A).__name__} is {m} x {n}; give a "
            f"small one (at most {DENSE_ENTRIES} entries)"
        )
    wls = {**(_workloads(workloads) if workloads is not None else {}), **kind_workloads(A, seed)}
    report = CheckReport(type(A).__name__, kit="check_strategy_kind", checks=KIND_CHECKS)
    privacy = ZCDP(0.5) if privacy is None else privacy
    kit = _KindKit(A, wls, privacy, report, int(seed), releases, bool(own_answers))
    return _run(kit, KindCheckError)


class _KindKit(_Checks):
    """The checks of :func:`check_strategy_kind`; each raises :class:`_Failed`."""

    def __init__(self, A, wls, privacy, report, seed, releases, own_answers):
        self.A, self.ref, self.report = A, _reference(A), report
        self.seed, self.releases, self.own_answers = seed, releases, own_answers
        self.privacy, self.strategy = privacy, Strategy(A, selector=report.selector)
        self.Ap, self.cond = _pinv_reference(self.ref, exact=True)
        n = self.ref.shape[1]
        # label -> (W, dense W, supported?): the package's rule ||w (I − A⁺A)||² ≤
        # SUPPORT_RTOL ||w||², where the answer is clear by a factor of 100 either way
        self.supported = {}
        if self.Ap is not None:
            proj = np.eye(n) - self.Ap @ self.ref
            for label, W in wls.items():
                if W.shape[1] != n:
                    raise ValueError(f"workloads: {label} has {W.shape[1]} columns, not {n}")
                Wd = _reference(W)
                rel = np.sum((Wd @ proj) ** 2, 1) / np.maximum(np.sum(Wd * Wd, 1), 1e-300)
                ok = bool(np.all(rel <= SUPPORT_RTOL / 100))
                if ok or np.any(rel >= 100 * SUPPORT_RTOL):
                    self.supported[label] = (W, Wd, ok)
        self.x = np.random.default_rng([seed, 1]).integers(0, 40, size=n)

    def rng(self, k: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, 100 + k])

    def _need_pinv(self, what: str) -> bool:
        if self.Ap is None:
            self.note(f"{what}: κ(A) = {self.cond:.3g} above {MAX_COND:g}, not compared")
        return self.Ap is not None

    def products(self):
        _check_products(self.A, self.ref, self.rng(0))

    def reductions(self):
        _check_reductions(self.A, self.ref)

    def gram(self):
        _check_gram(self.A, self.ref, self.rng(1))

    def pinv(self):
        if not self._need_pinv("pinv"):
            return
        _check_pinv(self.A, self.ref, self.rng(2))
        g = self.rng(3)
        pairs = [("A", self.A, self.ref, 1.0)]
        P = self.A.pinv_operator()
        if P is not None:
            pairs.append(("pinv_operator()", P, self.Ap, self.cond))
        for name, op, dense, cond in pairs:
            v1, v2 = g.normal(size=op.shape[1]), g.normal(size=op.shape[1])
            out1 = op.apply_overwrite(v1.copy())
            out2 = op.apply_overwrite(v2.copy())  # must write only into its own argument
            _product(out1, dense, v1, f"{name}.apply_overwrite (after a second call)", cond)
            _product(out2, dense, v2, f"{name}.apply_overwrite", cond)

    def reconstruction(self):
        if not self._need_pinv("reconstruction"):
            return
        g = self.rng(4)
        m = self.ref.shape[0]
        y = g.normal(size=m)
        want = self.Ap @ y
        # the iterative solvers stop at a relative residual tol of the normal equations,
        # which bounds the relative error by κ(A)² · tol
        tol = 1e-12
        rt = max(_rtol(self.ref, self.cond), 10 * self.cond**2 * tol)
        scale = np.abs(self.Ap) @ np.abs(y)
        own = self.A.least_squares(y.copy(), tol, 10_000)
        if own is not None:
            close(own, want, rt, "least_squares(y)", scale)
        for Y in (y, g.normal(size=(m, 3))):
            got = mechanism.reconstruct(self.strategy, Y.copy(), tol=tol)
            close(got, self.Ap @ Y, rt, "mechanism.reconstruct", np.abs(self.Ap) @ np.abs(Y))

    def kron_terms(self):
        terms, signed = self.A.kron_terms(), self.A.kron_terms(signed=True)
        if len(signed) != len(terms):
            raise _Failed(f"kron_terms(signed=True) has {len(signed)} terms, kron_terms() "
                          f"{len(terms)}")  # fmt: skip
        blocks = []
        for (c, factors), (w, _) in zip(terms, signed):
            if not c >= 0 or not math.isclose(w * w, c, rel_tol=1e-12):  # two roundings apart
                raise _Failed(f"a term's squared weight c = {c!r} and signed weight {w!r}")
            block = np.ones((1, 1))
            for f in factors:
                block = np.kron(block, _reference(f))
            blocks.append(math.copysign(math.sqrt(c), w) * block)
        what = "Σ sign_t √c_t ⊗ factors_t (kron_terms, signed and not)"
        close(np.vstack(blocks), self.ref, _rtol(self.ref), what)

    def _dense_error(self, Wd):
        """``(diag(W (AᵀA)⁺ Wᵀ), its magnitude bound)`` with ``(AᵀA)⁺ = A⁺ A⁺ᵀ``."""
        B = Wd @ self.Ap
        return np.sum(B * B, axis=1), np.sum((np.abs(Wd) @ np.abs(self.Ap)) ** 2, axis=1)

    def error_route(self):
        rt = _rtol(self.ref, self.cond**2)
        routes = 0
        for label, (W, Wd, ok) in self.supported.items():
            route = self.A.error_route(W)
            if route is None:
                continue
            routes += 1
            try:
                route.check_support()
            except UnsupportedWorkloadError as exc:
                if ok:
                    raise _Failed(f"{label}: supported, but check_support() raised {exc}") from None
                continue
            if not ok:
                raise _Failed(f"{label}: a query is outside the row space, check_support() passed")
            if self.own_answers:  # not least squares: the profile is checked by Monte Carlo
                prof = scale = np.asarray(route.profile(), dtype=float)
            else:
                prof, scale = self._dense_error(Wd)
                close(route.profile(), prof, rt, f"{label}: profile()", scale)
            close(route.trace(), prof.sum(), rt, f"{label}: trace()", scale.sum())
            close(route.max_profile(), prof.max(), rt, f"{label}: max_profile()", scale.max())
        if not routes:
            self.note("error_route: None on every workload (the evaluator's generic routes)")

    def evaluator(self):
        p = self.privacy.norm
        sens = float(np.max(np.linalg.norm(self.ref, ord=p, axis=0)))
        v = self.privacy.noise_variance(sens)
        rt = _rtol(self.ref, self.cond**2)
        for label, (W, Wd, ok) in self.supported.items():
            try:
                total = evaluate.expected_error(W, self.strategy, self.privacy)
                per = evaluate.per_query_variance(W, self.strategy, self.privacy)
            except UnsupportedWorkloadError as exc:
                if ok:
                    raise _Failed(f"{label}: supported, but the evaluator raised: {exc}") from None
                continue
            if not ok:
                raise _Failed(f"{label}: a query is outside the row space, the evaluator scored it")
            if self.own_answers:  # not least squares: the variances are checked by Monte Carlo
                prof = scale = per / v
            else:
                prof, scale = self._dense_error(Wd)
                close(per, v * prof, rt, f"{label}: per_query_variance", v * scale)
            close(total, v * prof.sum(), rt, f"{label}: expected_error", v * scale.sum())

    def _release_case(self) -> _Selection:
        for label, (W, _, ok) in self.supported.items():
            if ok:
                return _Selection(label, W, self.privacy, "sum", self.strategy)
        raise _Failed("no workload is supported (or κ(A) too large to tell)")

    def monte_carlo(self):
        s = self._release_case()
        self._confirm(s, self.x, 0, "mechanism.monte_carlo", _vectorised)

    def release(self):
        s = self._release_case()
        answers, meas = mechanism.release_measured(
            s.workload, self.strategy, self.x, self.privacy, self.rng(5)
        )
        if meas is None:  # a mechanism of its own: its measurements are not rows of A
            self._confirm(s, self.x, 1, "mechanism.release", _release_loop)
            return
        Wd = self.supported[s.label][1]
        if not self.own_answers:
            what = "release_measured answers vs W A⁺ y"
            _product(answers, Wd @ self.Ap, meas.values, what, self.cond)
        again = mechanism.release(s.workload, self.strategy, self.x, self.privacy, self.rng(5))
        what = "mechanism.release vs release_measured (one seed)"
        close(again, answers, _rtol(self.ref, self.cond), what)

    def release_handlers(self):
        """The release path, through the public ``mechanism`` functions only: the same seed
        gives the same answers, every answer finite. The checks of the kinds' release
        handlers (records, streamed measurement, discrete noise, answers without ``x̂``) are
        added here."""
        s = self._release_case()
        a, b = (
            mechanism.release(s.workload, self.strategy, self.x, self.privacy, self.rng(6))
            for _ in range(2)
        )
        if not np.all(np.isfinite(a)):
            raise _Failed(f"{s.label}: mechanism.release gave non-finite answers")
        if not np.array_equal(a, b):
            raise _Failed(f"{s.label}: mechanism.release differs for one seed")
