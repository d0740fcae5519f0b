"""The Selector base class, the registry and the two baselines."""

import pytest

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.linalg import Identity
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors import Selector, UnknownSelectorError
from mmtoolkit.selectors.base import _REGISTRY
from mmtoolkit.strategy import Strategy


class PureOnly(Selector):
    """Test-only selector restricted to PureDP, with one parameter."""

    name = "test_pure_only"
    method = "test-only selector"
    paper = "none"
    privacy = frozenset({PureDP})

    def __init__(self, scale=1.0, seed=None):
        self.params = {"scale": scale, "seed": seed}

    def _select(self, workload, privacy, objective):
        return Strategy(matrix=self.params["scale"] * Identity(workload.shape[1]), selector="x")


@pytest.fixture
def pure_only():
    selectors.register(PureOnly)
    yield
    _REGISTRY.pop(PureOnly.name)


def test_available_lists_the_baselines():
    names = selectors.available()
    assert names == sorted(names)
    assert {"identity", "laplace"} <= set(names)


def test_unknown_selector_names_the_choices():
    with pytest.raises(UnknownSelectorError, match="unknown selector 'hdmmm'.*identity"):
        selectors.get("hdmmm")


def test_unexpected_parameter_is_rejected():
    with pytest.raises(TypeError, match="identity"):
        selectors.get("identity", restarts=3)


def test_select_records_provenance(pure_only):
    W = workloads.prefix(8)
    s = selectors.get("test_pure_only", scale=2.0, seed=7).select(W, PureDP(1.0))
    assert s.selector == "test_pure_only"
    assert s.params == {"scale": 2.0, "seed": 7} and s.seed == 7
    assert s.seconds >= 0.0
    # a scaled Identity has the Identity's error: sensitivity and profile cancel
    assert evaluate.expected_error(W, s, PureDP(1.0)) == pytest.approx(
        evaluate.expected_error(W, Identity(8), PureDP(1.0)), rel=1e-12
    )


def test_unsupported_privacy_is_rejected(pure_only):
    with pytest.raises(ValueError, match="does not support ZCDP"):
        selectors.get("test_pure_only").select(workloads.prefix(4), ZCDP(0.5))


def test_bad_arguments_to_select():
    sel = selectors.get("identity")
    with pytest.raises(TypeError, match="workload"):
        sel.select([[1, 0], [0, 1]], PureDP(1.0))
    with pytest.raises(TypeError, match="privacy"):
        sel.select(workloads.prefix(4), 1.0)
    with pytest.raises(ValueError, match="objective"):
        sel.select(workloads.prefix(4), PureDP(1.0), objective="max")


def test_register_rejects_non_selectors_and_name_clashes():
    with pytest.raises(TypeError):
        selectors.register(int)

    class Clash(PureOnly):
        name = "identity"

    with pytest.raises(ValueError, match="already registered"):
        selectors.register(Clash)


def test_strategy_validates_its_fields():
    with pytest.raises(TypeError, match="Matrix"):
        Strategy(matrix=[[1.0]], selector="x")
    with pytest.raises(ValueError, match="inference"):
        Strategy(matrix=Identity(2), selector="x", inference="magic")
