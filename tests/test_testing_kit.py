"""``mmtoolkit.testing.check_selector``: every registered selector passes it, and deliberately
broken selectors fail it with a message naming the failed check."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest

from mmtoolkit import evaluate, measurement, selectors, workloads
from mmtoolkit.linalg import Dense, Identity
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.release_handlers import ReleaseHandler, register_handler
from mmtoolkit.selectors import Selector
from mmtoolkit.selectors.base import _REGISTRY
from mmtoolkit.strategy import Strategy
from mmtoolkit.testing import CHECKS, SelectorCheckError, check_selector, default_workloads

REPO = Path(__file__).resolve().parents[1]

#: Parameters that keep the slowest selectors within a second or two (one restart per
#: operator instead of HDMM's 25); every other selector runs with its defaults.
FAST = {"hdmm": {"restarts": 1}}


@pytest.mark.parametrize("name", selectors.available())
def test_every_registered_selector_passes(name):
    report = check_selector(selectors.get_class(name), params=FAST.get(name))
    assert report.passed == list(CHECKS) and not report.failed
    assert report.selections, "no selection was checked"
    kinds = {k for _, k, _ in report.selections}
    assert kinds == {k.__name__ for k in selectors.get_class(name).privacy}


# ============================================================================ broken selectors
class _Base(Selector):
    """Test-only: the identity strategy through a kind chosen by the subclass."""

    method = "test-only broken selector"
    paper = "none"

    def __init__(self, seed=None):
        self.params = {"seed": seed}

    def _select(self, workload, privacy, objective):
        return Strategy(matrix=self.kind(workload.shape[1]), selector=self.name)


class _UnderNoisedKind(Dense):
    """Its own release path (its release handler) adds noise at half the calibrated scale
    (the privacy promise and the evaluator's error both assume the full scale)."""

    def __init__(self, n):
        super().__init__(np.eye(n))


class _UnderNoisedHandler(ReleaseHandler):
    def release_answers(self, A, W, data, noise, rng):
        x = np.array(data, dtype=float)
        scale = 0.5 * noise.unit_scale * A.sensitivity(noise.norm)  # half the noise it needs
        measurement.NoiseStream(noise.family, scale, rng, x.size).add(x)
        return W @ x


register_handler(_UnderNoisedKind, _UnderNoisedHandler())


class WrongNoiseScale(_Base):
    name = "test_wrong_noise_scale"
    kind = _UnderNoisedKind


class _HalfSensitivityKind(Dense):
    """Reports half its true sensitivity: every release is under-noised."""

    def __init__(self, n):
        super().__init__(np.eye(n))

    def colnorm_p(self, p):
        return 0.5 * super().colnorm_p(p)


class MisreportedSensitivity(_Base):
    name = "test_misreported_sensitivity"
    kind = _HalfSensitivityKind


class _WrongGramKind(Dense):
    """``2 I`` claiming the Gram ``I`` (true: ``4 I``): the evaluator's error is 4x off."""

    def __init__(self, n):
        super().__init__(2.0 * np.eye(n))

    def gram(self):
        return Identity(self.shape[1])


class WrongErrorRoute(_Base):
    name = "test_wrong_error_route"
    kind = _WrongGramKind


class NonDeterministic(_Base):
    """Random row weights drawn from an unseeded generator: the seed is ignored."""

    name = "test_non_deterministic"

    def _select(self, workload, privacy, objective):
        n = workload.shape[1]
        w = np.random.default_rng().uniform(0.5, 1.5, size=n)
        return Strategy(matrix=Dense(np.diag(w)), selector=self.name)


class Unsupported(_Base):
    """Measures every cell but the last: a workload touching it is not supported."""

    name = "test_unsupported"

    def _select(self, workload, privacy, objective):
        n = workload.shape[1]
        return Strategy(matrix=Dense(np.eye(n)[:-1]), selector=self.name)


class OverclaimsInapplicability(_Base):
    """Says it does not apply to 2-D workloads, yet select works on them."""

    name = "test_overclaims"
    kind = Identity

    @classmethod
    def applicability(cls, workload, privacy, objective="sum"):
        reason = super().applicability(workload, privacy, objective)
        if reason is None and workload.shape[1] == 16:
            return "not for 16 cells"
        return reason


class NonDeterministicWhenLarge(_Base):
    """Unseeded random weights only above 8 cells: all_range(8), the quickest workload, is
    deterministic, the 16-cell workloads are not (determinism must be checked on each).
    The larger selections take a few ms longer, as a real selector's would, so all_range(8)
    is the quickest selection (the only one the kit used to re-check)."""

    name = "test_non_deterministic_when_large"

    def _select(self, workload, privacy, objective):
        n = workload.shape[1]
        if n > 8:
            time.sleep(0.005)
        w = np.ones(n) if n <= 8 else np.random.default_rng().uniform(0.5, 1.5, size=n)
        return Strategy(matrix=Dense(np.diag(w)), selector=self.name)


class BroadcastBug(_Base):
    """A numpy shape mismatch (a ValueError) on every workload but all_range(8): a crash,
    not a refusal."""

    name = "test_broadcast_bug"

    def _select(self, workload, privacy, objective):
        n = workload.shape[1]
        w = np.ones(8) * np.ones(n)  # ValueError: operands could not be broadcast
        return Strategy(matrix=Dense(np.diag(w)), selector=self.name)


class ZcdpUnsupportedWhenLarge(_Base):
    """ZCDP only; above 8 cells it measures only the first half of the cells (unsupported).
    With one privacy kind, quick mode must still try every workload."""

    name = "test_zcdp_unsupported_when_large"
    privacy = frozenset({ZCDP})

    def _select(self, workload, privacy, objective):
        n = workload.shape[1]
        A = np.eye(n) if n <= 8 else np.eye(n)[: n // 2]
        return Strategy(matrix=Dense(A), selector=self.name)


class BrokenForMax(_Base):
    """Declares objectives sum and max; only the "max" strategy is under-noised."""

    name = "test_broken_for_max"

    @classmethod
    def objectives(cls):
        return ("sum", "max")

    def _select(self, workload, privacy, objective):
        kind = _UnderNoisedKind if objective == "max" else Identity
        return Strategy(matrix=kind(workload.shape[1]), selector=self.name)


class NoMetadata(Selector):
    name = "test_no_metadata"

    def _select(self, workload, privacy, objective):
        return Strategy(matrix=Identity(workload.shape[1]), selector=self.name)


@pytest.mark.parametrize(
    "cls, check",
    [
        (WrongNoiseScale, "monte_carlo"),
        (MisreportedSensitivity, "sensitivity"),
        (WrongErrorRoute, "monte_carlo"),
        (NonDeterministic, "determinism"),
        (Unsupported, "support"),
        (OverclaimsInapplicability, "applicability"),
        (NoMetadata, "metadata"),
        (NonDeterministicWhenLarge, "determinism"),
        (BroadcastBug, "select"),
        (ZcdpUnsupportedWhenLarge, "support"),
        (BrokenForMax, "monte_carlo"),
    ],
)
def test_broken_selector_fails_naming_the_check(cls, check):
    with pytest.raises(SelectorCheckError, match=f"check '{check}' failed") as info:
        check_selector(cls)
    assert set(info.value.failures) == {check}, info.value
    assert info.value.report.failed == info.value.failures
    assert isinstance(info.value, AssertionError)


def test_failure_messages_say_why():
    with pytest.raises(SelectorCheckError) as info:
        check_selector(WrongNoiseScale)
    msg = str(info.value)
    assert "mechanism.release" in msg and "outside the 99% interval" in msg
    ratio = float(re.search(r"empirical / expected = ([0-9.]+)", msg).group(1))
    assert 0.2 < ratio < 0.3  # half the noise scale: a quarter of the error
    with pytest.raises(SelectorCheckError, match=r"reports L1 sensitivity 0\.5 .* norm is 1"):
        check_selector(MisreportedSensitivity)
    with pytest.raises(SelectorCheckError, match="seed=0"):
        check_selector(NonDeterministic)
    with pytest.raises(SelectorCheckError, match="could not be broadcast") as info:
        check_selector(BroadcastBug)
    assert "NotApplicableError" in info.value.failures["select"]
    with pytest.raises(SelectorCheckError, match=r"objective 'max' \(mechanism.release"):
        check_selector(BrokenForMax)


def test_every_workload_is_tried_and_objectives_checked():
    """Quick mode tries each default workload (one privacy kind cycles over them) and notes
    the pairs it did not try; every declared objective is selected for."""
    seen = []

    class Recording(_Base):
        name = "test_recording"
        privacy = frozenset({ZCDP})
        kind = Identity

        @classmethod
        def objectives(cls):
            return ("sum", "max")

        def _select(self, workload, privacy, objective):
            seen.append((workload.shape[1], objective))
            return super()._select(workload, privacy, objective)

    report = check_selector(Recording)
    sizes = {W.shape[1] for W in default_workloads().values()}
    for objective in ("sum", "max"):
        assert {n for n, o in seen if o == objective} == sizes
    assert len(report.selections) == 2 * len(default_workloads())
    assert not any("not tried" in n for n in report.notes)  # one kind: every pair tried
    assert any("not tried" in n for n in check_selector(Fine3).notes)  # three kinds
    assert {o for _, o in seen} == {"sum", "max"}
    seen.clear()
    check_selector(Recording, objective="sum")
    assert {o for _, o in seen} == {"sum"}


class Fine3(_Base):
    name = "test_fine_three_kinds"
    kind = Identity


def test_refusals_are_the_shared_rule():
    """A NotApplicableError raised while selecting is a refusal (noted); a selector that
    refuses everything fails 'select'; applicability's reason must be the one select gives."""

    class RefusesLarge(_Base):
        name = "test_refuses_large"
        kind = Identity

        def _select(self, workload, privacy, objective):
            if workload.shape[1] > 8:
                raise selectors.NotApplicableError("only up to 8 cells with these parameters")
            return super()._select(workload, privacy, objective)

    report = check_selector(RefusesLarge)
    assert any("NotApplicableError: only up to 8" in n for n in report.notes)

    class SaysOtherReason(OverclaimsInapplicability):  # applicability: "not for 16 cells"
        name = "test_says_other_reason"

        def select(self, workload, privacy, objective="sum"):
            if workload.shape[1] == 16:
                raise ValueError("something else entirely")
            return super().select(workload, privacy, objective)

        def _select(self, workload, privacy, objective):
            if workload.shape[1] == 16:  # the claim is true: only the reason is wrong
                raise ValueError("16 cells")
            return super()._select(workload, privacy, objective)

    with pytest.raises(SelectorCheckError, match="check 'applicability' failed.*something else"):
        check_selector(SaysOtherReason)


def test_unknown_parameter_is_refused_listing_the_valid_ones():
    with pytest.raises(TypeError, match=r"no parameter 'nosuch' \(valid: restarts: int = 25; seed"):
        selectors.get("hdmm", nosuch=1)
    with pytest.raises(ValueError, match="takes no parameters"):  # also a ValueError
        selectors.get("identity", restarts=3)
    # a **kwargs forwards to the parent's parameters
    names = [p.name for p in selectors.get_class("residual_planner_plus").parameters()]
    assert names[:3] == ["strategies", "strategy_solver", "strategy_objective"]
    assert {"objective", "weighting", "solver", "variance_bound"} <= set(names)


def test_instances_params_and_custom_workloads():
    W = {"prefix(16)": workloads.prefix(16)}
    report = check_selector(selectors.get("opt0", seed=3), workloads=W)
    assert {lab for lab, _, _ in report.selections} == {"prefix(16)"}
    report = check_selector(selectors.get_class("hierarchical"), params={"branching": 4})
    assert "hierarchical" == report.selector
    report = check_selector(selectors.get_class("identity"), quick=False)  # every pair
    assert len(report.selections) == 3 * len(default_workloads())
    with pytest.raises(SelectorCheckError, match="check 'select' failed: select succeeded on none"):
        check_selector(selectors.get_class("quadtree"), workloads=[workloads.prefix(8)])
    with pytest.raises(TypeError, match="Selector subclass or instance"):
        check_selector("identity")


def test_unregistered_selector_is_noted_and_a_name_clash_fails():
    class Fine(_Base):
        name = "test_fine_identity"
        kind = Identity

    report = check_selector(Fine)
    assert any("not registered" in n for n in report.notes)

    class Clash(_Base):
        name = "identity"
        kind = Identity

    with pytest.raises(SelectorCheckError, match="check 'registry' failed.*own name"):
        check_selector(Clash)


def test_bad_privacy_is_checked():
    class AcceptsAnything(_Base):
        name = "test_accepts_anything"
        kind = Identity

        def select(self, workload, privacy, objective="sum"):
            return self._select(workload, privacy, objective)

    with pytest.raises(SelectorCheckError, match="check 'bad_privacy' failed") as info:
        check_selector(AcceptsAnything, workloads={"prefix(8)": workloads.prefix(8)})
    assert "bad_privacy" in info.value.failures


def test_applicability_matches_select():
    W2 = default_workloads()["prefix(4) x identity(4)"]
    rp = selectors.get_class("residual_planner")
    assert "PureDP" in rp.applicability(W2, PureDP(1.0))
    assert "basic matrix" in rp.applicability(W2, ZCDP(0.5))
    with pytest.raises(selectors.NotApplicableError, match="basic matrix"):
        rp().select(W2, ZCDP(0.5))
    assert selectors.get_class("fourier").applicability(workloads.prefix(12), ZCDP(1)) is not None
    assert selectors.get_class("identity").applicability(W2, ZCDP(1), "max") is not None
    with pytest.raises(TypeError, match="privacy"):
        selectors.get_class("identity").applicability(W2, 0.5)


# ============================================================================ the README
def readme_selector_example() -> str:
    """The code block of the README's "Write your own selector" section, as printed."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("### Write your own selector", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_example_runs_as_printed(capsys):
    code = readme_selector_example()
    assert "check_selector(IntervalTree)" in code and "@selectors.register" in code
    before = dict(_REGISTRY)
    try:
        exec(compile(code, "README.md (Write your own selector)", "exec"), {})
        assert selectors.get_class("my_interval_tree").method == "H_b: hierarchical intervals"
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(before)
    out = capsys.readouterr().out.splitlines()
    assert all(f"ok   {name}" in "\n".join(out) for name in CHECKS)
    # the last line is the RMSE of the 4-ary tree on all ranges of 256 cells: above the SVD
    # bound, below the identity strategy's
    rmse = float(out[-1])
    W = workloads.all_range(256)
    assert evaluate.svd_bound_rmse(W, ZCDP(0.5)) < rmse
    ident = selectors.get("identity").select(W, ZCDP(0.5))
    assert rmse < evaluate.rmse(W, ident, ZCDP(0.5))
