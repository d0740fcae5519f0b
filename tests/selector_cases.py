"""One small case for every registered selector, derived from the registry: the first
candidate workload the selector applies to (its own ``applicability``, then ``select``
not refusing), selected with ``FAST`` parameters and ``seed=0``. Shared by
tests/test_montecarlo.py and tests/test_strategy_kinds.py; a new selector needs no entry."""

from __future__ import annotations

import functools

from mmtoolkit import selectors, workloads
from mmtoolkit.domain import Domain
from mmtoolkit.privacy import ZCDP, PureDP

#: Candidate workloads, smallest first where a method family has a choice.
CANDIDATES = {
    "all_range(6)": workloads.all_range(6),
    "prefix(16)": workloads.prefix(16),
    "prefix(4) x identity(4)": workloads.kron([workloads.prefix(4), workloads.identity(4)]),
    "marginals(3x4x2, k<=2)": workloads.marginals(Domain.from_sizes([3, 4, 2]), 2, lower=True),
    "marginals(2x2x2x2, k<=2)": workloads.marginals(Domain.from_sizes([2] * 4), 2, lower=True),
}
PRIVACIES = (PureDP(1.0), ZCDP(0.5))
#: Parameters that keep a selector quick (HDMM's restarts); the rest run with defaults.
FAST = {"hdmm": {"restarts": 2}}


def selector_params(name: str) -> dict:
    """``FAST``'s parameters, and ``seed=0`` for a selector that takes a seed."""
    params = dict(FAST.get(name, {}))
    if any(p.name == "seed" for p in selectors.get_class(name).parameters()):
        params.setdefault("seed", 0)
    return params


def selector_case(name: str, privacy):
    """``(workload, strategy)`` of ``name`` under ``privacy`` (None: not its privacy kind)."""
    return _case(name, privacy.__class__, tuple(vars(privacy).items()), privacy)


@functools.cache
def _case(name, kind, key, privacy):
    cls = selectors.get_class(name)
    if kind not in cls.privacy:
        return None
    for W in CANDIDATES.values():
        if cls.applicability(W, privacy) is not None:
            continue
        try:
            return W, selectors.get(name, **selector_params(name)).select(W, privacy)
        except selectors.REFUSALS:
            continue
    raise AssertionError(
        f"the selector {name!r} applies to none of {', '.join(CANDIDATES)} under "
        f"{kind.__name__}: add a workload it applies to to CANDIDATES in tests/selector_cases.py"
    )
