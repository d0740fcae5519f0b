"""The Selector base class, the registry, selector metadata and the two baselines."""

import inspect
import re

import pytest

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.linalg import Identity
from mmtoolkit.privacy import ZCDP, ApproxDP, PureDP
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


# ============================================================================ metadata
def test_every_registered_selector_declares_its_metadata():
    for name in selectors.available():
        cls = selectors.get_class(name)
        assert cls.name == name
        assert cls.method.strip() and cls.paper.strip(), name
        assert any(ch.isdigit() for ch in cls.paper), f"{name}: the paper's year/section"
        assert cls.privacy and cls.privacy <= {PureDP, ApproxDP, ZCDP}
        # the parameters are exactly the signature's (a **kwargs forwards to the parent)
        sig = inspect.signature(cls.__init__).parameters
        declared = [p.name for p in cls.parameters()]
        named = [k for k, p in sig.items() if k != "self" and p.kind is p.POSITIONAL_OR_KEYWORD]
        assert declared[: len(named)] == named, name
        for p in cls.parameters():
            if p.name in sig:
                assert p.default == sig[p.name].default


def test_register_requires_method_and_paper():
    class Bare(Selector):
        name = "test_bare"

        def _select(self, workload, privacy, objective):
            raise AssertionError

    with pytest.raises(TypeError, match="'method'"):
        selectors.register(Bare)
    Bare.method = "m"
    with pytest.raises(TypeError, match="'paper'"):
        selectors.register(Bare)
    assert "test_bare" not in selectors.available()


def test_parameters_carry_types_and_defaults():
    params = {p.name: p for p in selectors.get_class("eigen_design").parameters()}
    assert str(params["tol"]) == "tol: float = 1e-07"
    assert params["design_sizes"].type is None and not params["design_sizes"].required
    lrm = {p.name: p for p in selectors.get_class("lrm").parameters()}
    assert lrm["seed"].type == "int" and lrm["seed"].default == 0  # type read from the default
    assert selectors.get_class("identity").parameters() == ()


def test_unknown_parameter_lists_the_valid_ones():
    with pytest.raises(selectors.UnknownParameterError) as info:
        selectors.get("opt0", seed=1, restart=3)
    msg = str(info.value)
    assert "selector 'opt0' has no parameter 'restart'" in msg
    for p in selectors.get_class("opt0").parameters():
        assert str(p) in msg
    with pytest.raises(ValueError, match="no parameters 'a', 'b'"):
        PureOnly(a=1, b=2)  # direct construction is checked too, for user classes


def test_list_selectors_prints_the_metadata(capsys):
    from mmtoolkit.cli import main

    assert main(["list", "selectors"]) == 0
    out = capsys.readouterr().out
    blocks = out.strip().split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == selectors.available()
    hdmm = blocks[selectors.available().index("hdmm")]
    assert "method:     OPT_HDMM" in hdmm and "paper:      McKenna et al., PVLDB 2018" in hdmm
    assert "privacy:    ApproxDP, PureDP, ZCDP" in hdmm and "objectives: sum" in hdmm
    assert re.search(r"\n    restarts +int +  = 25\n", hdmm), hdmm
    rp = blocks[selectors.available().index("residual_planner")]
    assert "privacy:    ApproxDP, ZCDP" in rp and "objectives: sum, max" in rp
    assert "parameters: none" in blocks[selectors.available().index("identity")]


# ------------------------------------------------------------------ parameter validation
def _built_in():
    """Every registered selector class of the package itself (tests may register others)."""
    return [
        cls
        for cls in map(selectors.get_class, selectors.available())
        if cls.__module__.startswith("mmtoolkit.selectors.")
    ]


def _hostile(p) -> list:
    """Values no parameter accepts, plus the wrong types for the kind of its default."""
    out = [float("nan"), float("inf"), "nope", {"a": 1}]
    if isinstance(p.default, bool):
        out += [1, "true", None]
    elif isinstance(p.default, int):
        out += [1.5, True, -1, None]
    elif isinstance(p.default, float):
        out += [True, -1.0, "1e-3", None]
    elif isinstance(p.default, str):
        out += [1, True]
    return out


def test_every_built_in_selector_validates_its_parameters_at_construction():
    """Each parameter of each registered selector refuses a hostile value when the selector
    is built, with a ValueError naming the parameter — not later, in select (e.g.
    residual_planner's solver="nope" failed only with objective="max"; Eigen-Design's
    normalize_rows took any truthy value and its design any non-string)."""
    accepted = []
    classes = _built_in()
    assert len(classes) >= 20  # identity and laplace take no parameter; the rest do
    for cls in classes:
        for p in cls.parameters():
            for bad in _hostile(p):
                try:
                    cls(**{p.name: bad})
                except ValueError as exc:  # CheckTypeError is a ValueError too
                    assert p.name in str(exc), (cls.name, p.name, bad, str(exc))
                else:
                    accepted.append(f"{cls.name}.{p.name}={bad!r}")
    assert not accepted, accepted


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("residual_planner", {"solver": "nope"}, "not installed: give 'auto', 'dual' or an"),
        ("residual_planner_plus", {"strategies": [1, "optimize"]}, r"strategies\[0\]: expected"),
        ("residual_planner_plus", {"strategies": ["nope"]}, r"strategies\[0\]: expected None"),
        ("eigen_design", {"design": [[1.0, float("nan")]]}, "design: expected"),
        ("eigen_design", {"tol": 1.5}, "tol: must be a number strictly between 0 and 1"),
        ("opt_kron", {"ftol": 2.0}, "ftol: must be a number strictly between 0 and 1"),
        ("hdmm", {"operators": []}, "operators must be a non-empty list"),
        ("hierarchical", {"dims": "16"}, "dims: expected None or a non-empty list"),
        ("quadtree", {"dims": [4, 0]}, r"dims\[1\]: must be >= 1"),
        ("ding_datacube", {"mag_limit": float("inf")}, "mag_limit: must be a finite number"),
        ("datacube", {"p": True}, "p must be 1, 2 or None"),
        ("mm_sdp", {"rotate_iterations": -1}, "rotate_iterations: must be >= 0"),
    ],
)
def test_selector_parameter_refusals_name_the_parameter_and_valid_values(name, params, message):
    with pytest.raises(ValueError, match=message):
        selectors.get(name, **params)


def test_valid_parameter_forms_are_still_accepted():
    import numpy as np

    assert selectors.get("eigen_design", design=np.eye(4)).params["design"] == "matrix"
    assert selectors.get("residual_planner", solver="CLARABEL").params["solver"] == "CLARABEL"
    assert selectors.get("residual_planner", solver="dual").params["solver"] == "dual"
    plus = selectors.get("residual_planner_plus", strategies=[None, "workload", np.eye(3)])
    assert plus.params["strategies"] == "custom"
    assert selectors.get("hb", dims=(4, 4)).params["dims"] == [4, 4]
    assert selectors.get("ding_datacube", mag_limit="L").params["mag_limit"] == "L"
    assert selectors.get("mm_sdp", rotate_iterations=0).params["rotate_iterations"] == 0


def test_opt0_refuses_p_beyond_the_domain_size():
    """p > n extra rows of a p-Identity strategy on n cells: refused at once (p = 10000 on
    all ranges of 16 cells ran past 10 minutes); p = n is the largest useful value (with it
    the L2 family already holds every unit-diagonal Gram; HDMM App. C.1: p >= n only adds
    poor local minima)."""
    W = workloads.all_range(16)
    for p in (17, 64, 10000):
        with pytest.raises(selectors.NotApplicableError, match=rf"p = {p} exceeds .* n = 16"):
            selectors.get("opt0", p=p, seed=0, maxiter=5).select(W, PureDP(1.0))
    s = selectors.get("opt0", p=16, seed=0, maxiter=50).select(W, PureDP(1.0))
    assert s.metadata["p"] == 16


def test_option_checks_name_the_parameter_and_the_options():
    # the shared check behind the selectors' string options: one message format everywhere
    from mmtoolkit.checks import check_option

    assert check_option("kron", "multi", ("kron", "product")) == "kron"
    with pytest.raises(ValueError, match=r"^split must be one of \('a', 'b'\), got 'c'$"):
        check_option("c", "split", ("a", "b"))
    for name, params, text in [
        ("greedy_h", {"criterion": "nope"}, "criterion must be one of ('dawa', 'exact')"),
        ("datacube", {"budget": "nope"}, "budget must be one of ('uniform', 'optimal')"),
        ("fourier", {"coefficients": 1}, "coefficients must be one of ('needed', 'attributes'"),
        ("lrm", {"init": "nope"}, "init must be one of ('auto', 'identity', 'svd', 'random')"),
    ]:
        with pytest.raises(ValueError, match=re.escape(text)):
            selectors.get(name, **params)


def test_applicability_reports_what_the_selection_would_refuse():
    # the reason is the message of the parse that _select runs first
    from mmtoolkit.selectors.base import refusal

    def parse(x):
        if x < 0:
            raise ValueError(f"x must be >= 0, got {x}")

    assert refusal(parse, 1) is None
    assert refusal(parse, -1) == "x must be >= 0, got -1"
    W = workloads.prefix(6)  # 6 cells: neither binary attributes nor a power of two
    for name in ("datacube", "fourier"):
        reason = selectors.get_class(name).applicability(W, PureDP(1.0))
        assert reason is not None
        with pytest.raises(selectors.NotApplicableError, match=re.escape(reason)):
            selectors.get(name).select(W, PureDP(1.0))
    reason = selectors.get_class("residual_planner").applicability(W, ZCDP(1.0))
    assert reason is not None and "marginals" in reason
