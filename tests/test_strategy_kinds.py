"""``mmtoolkit.testing.check_strategy_kind`` over every strategy kind the package defines
(every ``linalg.Matrix`` subclass in ``mmtoolkit``, found by walking the subclasses after
importing every module; examples in tests/strategy_kind_examples.py) and over the strategy
every registered selector selects (tests/selector_cases.py); and the kit can fail."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
from selector_cases import PRIVACIES, selector_case
from strategy_kind_examples import EXAMPLES, OWN_ANSWERS, WORKLOADS

import mmtoolkit
from mmtoolkit import selectors
from mmtoolkit.linalg import Dense, Identity, Matrix, peel
from mmtoolkit.testing import KIND_CHECKS, KindCheckError, check_strategy_kind


def package_kinds() -> list[type]:
    """Every concrete ``Matrix`` subclass defined in ``mmtoolkit`` (all modules imported)."""
    for info in pkgutil.walk_packages(mmtoolkit.__path__, "mmtoolkit."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    kinds, todo = [], [Matrix]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in kinds:
                kinds.append(sub)
                todo.append(sub)
    return [k for k in kinds if k.__module__.startswith("mmtoolkit.") and not inspect.isabstract(k)]


KINDS = package_kinds()


def _name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def test_every_kind_has_an_example():
    missing = [_name(k) for k in KINDS if k not in EXAMPLES]
    assert not missing, (
        f"strategy kinds without an example: {', '.join(missing)}; add a small instance of "
        "each to EXAMPLES in tests/strategy_kind_examples.py"
    )


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_every_kind_passes_the_kit(kind):
    example = EXAMPLES[kind]()
    assert type(example) is kind, f"the example of {_name(kind)} is a {type(example).__name__}"
    W = WORKLOADS.get(kind)
    report = check_strategy_kind(
        example, workloads=None if W is None else [W], own_answers=kind in OWN_ANSWERS
    )
    assert report.passed == list(KIND_CHECKS)


@pytest.mark.parametrize("name", selectors.available())
def test_every_selectors_strategy_passes_the_kit(name):
    for privacy in PRIVACIES:
        case = selector_case(name, privacy)
        if case is None:
            continue
        W, strategy = case
        if strategy.inference == "none":
            continue  # the workload itself, answered directly: no strategy kind
        report = check_strategy_kind(peel(strategy.matrix)[1], workloads={"selected on": W},
                                     privacy=privacy)  # fmt: skip
        assert report.passed == list(KIND_CHECKS)


class _HalfSensitivity(Dense):
    def colnorm_p(self, p):
        return 0.5 * super().colnorm_p(p)


class _WrongGram(Dense):
    def gram(self):
        return Identity(self.shape[1])


class _WrongPinv(Dense):
    def pinv_operator(self):
        return Dense(np.eye(self.shape[0]))


class _SharedBuffer(Dense):
    """``apply_overwrite`` writes into a buffer of its own and returns it: the result of one
    call changes with the next."""

    def apply_overwrite(self, y):
        self._buffer = getattr(self, "_buffer", np.empty(self.shape[0]))
        self._buffer[:] = self @ y
        return self._buffer


class _UnsquaredWeight(Dense):
    """``kron_terms`` with the weight itself, not its square (the documented ``c_t``)."""

    def kron_terms(self):
        return [(2.0, [Dense(self.array / 2.0)])]


@pytest.mark.parametrize(
    "kind, failed",
    [
        (_SharedBuffer, {"pinv"}),
        (_UnsquaredWeight, {"kron_terms"}),
        (_HalfSensitivity, {"reductions", "evaluator"}),
        (_WrongGram, {"gram", "reductions", "error_route", "evaluator", "monte_carlo"}),
        (_WrongPinv, {"pinv", "reconstruction", "monte_carlo", "release"}),
    ],
)
def test_the_kit_names_the_broken_operations(kind, failed):
    with pytest.raises(KindCheckError) as info:
        check_strategy_kind(kind(2.0 * np.tril(np.ones((6, 6)))))
    assert set(info.value.failures) == failed
    assert f"check_strategy_kind({kind.__name__}): {len(failed)} check(s) failed" in str(info.value)


def test_bad_arguments():
    with pytest.raises(TypeError, match="linalg.Matrix subclass or instance"):
        check_strategy_kind(np.eye(3))
    with pytest.raises(ValueError, match="at most 65536 entries"):
        check_strategy_kind(Identity(300))
    with pytest.raises(TypeError, match="params with a strategy kind class"):
        check_strategy_kind(Identity(3), params={"n": 3})
    assert check_strategy_kind(Identity, params={"n": 3}).passed == list(KIND_CHECKS)
