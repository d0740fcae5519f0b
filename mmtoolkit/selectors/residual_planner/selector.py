"""The ``residual_planner`` (He et al. §4) and ``residual_planner_plus`` (§7) selectors: noise
scales selected (:mod:`.plan`: "sum" §6.1, "max" §4.4, or a callable loss) for the parsed
workload (:mod:`.workload`), as a :class:`~.matrix.ResidualStrategyMatrix` at pcost 1.
User guide: docs/algorithms/residual-planner.md.
"""

from __future__ import annotations

import time

import numpy as np

from ...checks import check_positive
from ...linalg import Matrix, as_matrix
from ...privacy import ZCDP, ApproxDP, Privacy
from ...strategy import Strategy
from ..base import Selector, register
from .basis import general_basis
from .convex1d import STRATEGY_SOLVERS, max_variance_strategy, optimized_strategy
from .matrix import ResidualStrategyMatrix
from .plan import (
    DEFAULT_SOLVER,
    WEIGHTINGS,
    ResidualPlan,
    check_solver,
    select_convex,
    select_max,
    select_sum,
)
from .workload import ResidualWorkload, parse_workload

OBJECTIVES = ("sum", "max")


def _check_objective(objective):
    if objective is None or callable(objective) or objective in OBJECTIVES:
        return objective
    raise ValueError(f"objective must be 'sum', 'max' or a callable loss, got {objective!r}")


class _ResidualBase(Selector):
    privacy = frozenset({ZCDP, ApproxDP})

    def __init__(
        self,
        objective=None,
        weighting: str = "total",
        solver: str = DEFAULT_SOLVER,
        variance_bound: float | None = None,
    ):
        self.objective = _check_objective(objective)
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
        check_solver(solver, allow_dual=True)  # a cvxpy name must be installed
        if variance_bound is not None:
            variance_bound = check_positive(variance_bound, "variance_bound")
        self._callable = None
        self.params = {
            "objective": objective
            if not callable(objective)
            else getattr(objective, "__name__", "callable"),
            "weighting": weighting,
            "solver": solver,
            "variance_bound": variance_bound,
        }

    @classmethod
    def objectives(cls):
        return OBJECTIVES

    def select(self, workload: Matrix, privacy: Privacy, objective="sum") -> Strategy:
        """As :meth:`Selector.select`; ``objective`` may also be a callable loss. When called
        with the default ``"sum"``, the constructor's ``objective`` (if any) is used."""
        objective = _check_objective(objective)
        if objective == "sum" and self.objective is not None:
            objective = self.objective
        if callable(objective):
            # the base class validates objective names only: run its checks under "sum"
            self._callable = objective
            try:
                return super().select(workload, privacy, "sum")
            finally:
                self._callable = None
        return super().select(workload, privacy, objective)

    def _parse(self, workload: Matrix) -> ResidualWorkload:  # pragma: no cover - abstract
        raise NotImplementedError

    def _select(self, workload: Matrix, privacy: Privacy, objective) -> Strategy:
        prm = self.params
        start = time.perf_counter()
        self._objective_now = "callable" if self._callable is not None else objective
        wl = self._parse(workload)
        parsed = time.perf_counter() - start
        if self._callable is not None:
            plan = select_convex(wl, self._callable, prm["solver"])
            name = "callable"
        elif objective == "max":
            plan = select_max(wl, prm["solver"])
            name = "max"
        else:
            plan = select_sum(wl, prm["weighting"])
            name = "sum"
        return _strategy(self.name, plan, privacy, name, prm["variance_bound"], parsed)


def _strategy(selector, plan: ResidualPlan, privacy, objective, bound, parse_seconds) -> Strategy:
    plan = plan.normalized()
    v = privacy.noise_variance(1.0)
    if objective == "max":
        loss = plan.max_variance() * v
    elif objective == "sum":
        loss = plan.value * v
    else:
        loss = float(plan.value)
    meta = {
        "objective": objective,
        "plan": plan,
        "base_mechanisms": plan.table.num_closure,
        "noisy_numbers": plan.noisy_numbers(),
        "pcost": 1.0 / v,
        "rho": 0.5 / v,
        "parse_seconds": parse_seconds,
        "solver_info": dict(plan.info),
    }
    if bound is not None:  # Eq. 2: least pcost meeting the bound (losses scale as 1/pcost)
        unit = loss * v  # loss at pcost 1
        meta["variance_bound"] = bound
        meta["pcost_needed"] = unit / bound
        meta["rho_needed"] = unit / bound / 2.0
    return Strategy(
        matrix=ResidualStrategyMatrix(plan), selector=selector, metadata=meta, loss=loss
    )


@register
class ResidualPlanner(_ResidualBase):
    """ResidualPlanner for marginal workloads (He et al. §4; guide page)."""

    name = "residual_planner"
    method = "ResidualPlanner (residual base mechanisms for marginals)"
    paper = (
        "He, Xiao, Toksoz, Ding, Zhang & Kifer, "
        "ResidualPlanner+ (journal version of Xiao et al., NeurIPS 2023), §4-§6"
    )

    @classmethod
    def applicability(cls, workload, privacy, objective="sum"):
        """Also: a workload of marginals (what ``_parse`` accepts; callable objectives are
        checked by :meth:`select` as ``"sum"``)."""
        reason = super().applicability(workload, privacy, objective)
        if reason is None:
            try:
                parse_workload(workload, marginals_only=True)
            except ValueError as exc:
                return str(exc)
        return reason

    def _parse(self, workload):
        return parse_workload(workload, marginals_only=True)


@register
class ResidualPlannerPlus(_ResidualBase):
    """ResidualPlanner+ for generalized marginals (He et al. §7; guide page)."""

    name = "residual_planner_plus"
    method = "ResidualPlanner+ (generalized marginals: prefix, range, custom bases)"
    paper = "He, Xiao, Toksoz, Ding, Zhang & Kifer, ResidualPlanner+, §7"

    def __init__(
        self, strategies="optimize", strategy_solver="exact", strategy_objective="auto", **kwargs
    ):
        super().__init__(**kwargs)
        if strategy_objective not in ("auto", "sum", "max"):
            raise ValueError(
                f"strategy_objective must be 'auto', 'sum' or 'max', got {strategy_objective!r}"
            )
        if strategy_solver not in STRATEGY_SOLVERS:
            raise ValueError(
                f"strategy_solver must be one of {STRATEGY_SOLVERS}, got {strategy_solver!r}"
            )
        if isinstance(strategies, (list, tuple)) and strategies:
            strategies = [_check_strategy(S, f"strategies[{i}]") for i, S in enumerate(strategies)]
        elif not (isinstance(strategies, str) and strategies in ("optimize", "workload")):
            raise ValueError(
                f"strategies must be 'optimize', 'workload' or a per-attribute list, "
                f"got {strategies!r}"
            )
        self.strategies = strategies
        self.params["strategy_objective"] = strategy_objective
        self.params["strategy_solver"] = strategy_solver
        self.params["strategies"] = strategies if isinstance(strategies, str) else "custom"

    def _parse(self, workload):
        cache: dict = {}

        def make(i, Wi):
            if isinstance(self.strategies, (list, tuple)):
                if len(self.strategies) <= i:
                    raise ValueError(
                        f"strategies has {len(self.strategies)} entries; attribute {i} has none"
                    )
                S = self.strategies[i]
                if S is not None and not (isinstance(S, str)):
                    return general_basis(Wi, S)
                mode = S or "optimize"
            else:
                mode = self.strategies
            target = self.params["strategy_objective"]
            if target == "auto":
                target = "max" if getattr(self, "_objective_now", "sum") == "max" else "sum"
            key = (mode, target, type(Wi).__name__, Wi.shape, _fingerprint(Wi))
            if key not in cache:
                if mode != "optimize":
                    S = None
                elif target == "max":
                    S = max_variance_strategy(Wi)
                else:
                    S = optimized_strategy(Wi, self.params["strategy_solver"])
                cache[key] = general_basis(Wi, S)
            return cache[key]

        return parse_workload(workload, strategies=make)


def _check_strategy(S, name: str):
    """One entry of ``strategies``: None (the default), ``"optimize"``, ``"workload"`` or a
    matrix (2-D, finite: the attribute's strategy)."""
    if S is None or (isinstance(S, str) and S in ("optimize", "workload")):
        return S
    if not isinstance(S, str):
        try:
            return as_matrix(S)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}: expected a matrix ({exc})") from None
    raise ValueError(
        f"{name}: expected None, 'optimize', 'workload' or a matrix, got {type(S).__name__} "
        f"{S!r}"
    )


def _fingerprint(W: Matrix):
    if type(W).__name__ in ("Prefix", "AllRange", "Identity"):
        return None
    D = np.ascontiguousarray(W.dense())
    return hash(D.tobytes())
