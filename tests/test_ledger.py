"""The privacy ledger (mmtoolkit.ledger): composition per kind, the zCDP → (ε, δ) conversion,
refusal before any noise, atomic writes that survive a kill, and the command line."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mmtoolkit as mm
from mmtoolkit import records
from mmtoolkit.cli import main as cli_main
from mmtoolkit.ledger import Ledger, LedgerError
from mmtoolkit.plan import NoisePlan
from mmtoolkit.privacy import ZCDP, ApproxDP, PureDP
from mmtoolkit.release_handlers import handler

REPO = Path(__file__).resolve().parents[1]


def test_two_quarter_rho_releases_are_half_rho_with_its_epsilon_delta(tmp_path):
    """Done-when: two releases of ρ = 0.25 are recorded as ρ = 0.5, with the (ε, δ) it
    implies by both conversions (Canonne, Kamath & Steinke 2020 Cor. 13, and Bun & Steinke
    2016 Prop. 1.3: ε = ρ + 2√(ρ ln 1/δ)); a third is refused."""
    path = tmp_path / "adult.ledger"
    Ledger.create(path, rho=0.6, conversion_delta=1e-6, dataset="adult")
    R = records.synthetic({"a": 3, "b": 2}, 40, seed=0)
    for seed in (1, 2):
        result = mm.release(R, "marginals:2", ZCDP(0.25), "identity", seed=seed, ledger=path)
        assert result.ledger_entry == seed
    ledger = Ledger(path)
    assert ledger.usage() == {"rho": 0.5} and ledger.spent().rho == 0.5
    assert [e["status"] for e in ledger.entries] == ["committed", "committed"]
    eps = 0.5 + 2 * math.sqrt(0.5 * math.log(1e6))
    assert ZCDP(0.5).to_approx_dp(1e-6) == pytest.approx(eps)
    tight = ZCDP(0.5).to_approx_dp_tight(1e-6)
    assert ledger.zcdp_as_approx_dp() == {"rho": 0.5, "delta": 1e-6, "epsilon": tight,
                                          "epsilon_prop_1_3": pytest.approx(eps)}  # fmt: skip
    report = ledger.report()
    assert "rho = 0.5" in report and f"epsilon = {tight:.6g} at delta = 1e-06" in report
    assert f"Prop. 1.3: epsilon = {eps:.6g}" in report
    before = path.read_bytes()
    with pytest.raises(LedgerError, match=r"would bring rho to 0.75, over the ledger's total 0.6"):
        mm.release(R, "marginals:2", ZCDP(0.25), "identity", seed=3, ledger=path)
    assert path.read_bytes() == before  # nothing written


def test_refusal_happens_before_noise(tmp_path, monkeypatch):
    path = tmp_path / "l.json"
    Ledger.create(path, rho=0.1)
    from mmtoolkit import mechanism

    def boom(*args, **kwargs):
        raise AssertionError("noise drawn for a refused release")

    monkeypatch.setattr(mechanism, "release_planned", boom)
    R = records.synthetic({"a": 3}, 10, seed=0)
    with pytest.raises(LedgerError, match="refused"):
        mm.release(R, "marginals:1", ZCDP(0.2), "identity", seed=0, ledger=path)
    assert Ledger(path).entries == []


def test_composition_per_kind(tmp_path):
    # a ρ total: pure ε counts ε²/2 (Prop. 1.4), an (ε, δ) Gaussian release 1/(2σ²) (Prop. 1.6)
    rho = Ledger.create(tmp_path / "rho.json", rho=1.0)
    rho.charge(PureDP(0.5))
    approx = ApproxDP(1.0, 1e-6)
    rho.charge(approx, releases=2)
    sigma = approx.noise_scale(1.0)
    assert rho.usage()["rho"] == pytest.approx(0.125 + 2 / (2 * sigma**2))
    # a pure ε total: ε adds; a zCDP release cannot be charged to it
    pure = Ledger.create(tmp_path / "pure.json", epsilon=1.0)
    pure.charge(PureDP(0.4), releases=2)
    assert pure.usage() == {"epsilon": pytest.approx(0.8)}
    with pytest.raises(LedgerError, match="pure ε-DP total; a ZCDP release is not ε-DP"):
        pure.charge(ZCDP(0.01))
    with pytest.raises(LedgerError, match="would bring epsilon to 1.2"):
        pure.charge(PureDP(0.4))
    # an (ε, δ) total: basic composition, the zCDP part converted once with δ_c
    ed = Ledger.create(tmp_path / "ed.json", epsilon=10.0, delta=1e-5)
    assert ed.conversion_delta == 5e-6
    ed.charge(PureDP(1.0))
    ed.charge(ApproxDP(2.0, 1e-6))
    ed.charge(ZCDP(0.1))
    ed.charge(ZCDP(0.1))
    used = ed.usage()
    assert used["epsilon"] == pytest.approx(3.0 + ZCDP(0.2).to_approx_dp_tight(5e-6))
    assert used["delta"] == pytest.approx(1e-6 + 5e-6)
    with pytest.raises(LedgerError, match="already exists"):
        Ledger.create(tmp_path / "ed.json", rho=1)


def test_an_epsilon_delta_total_admits_what_only_prop_1_3_refused(tmp_path):
    """Total (ε, δ) = (1, 1e-5), δ_c = 5e-6: a release of ρ = 0.02 is, by Bun & Steinke's
    Prop. 1.3, ε = 0.02 + 2√(0.02 ln 2e5) = 1.008 > 1 (it was refused), and by Canonne,
    Kamath & Steinke 2020 Cor. 13 ε = 0.827 ≤ 1: admitted, and charged at 0.827."""
    path = tmp_path / "l.json"
    Ledger.create(path, epsilon=1.0, delta=1e-5)
    prop_1_3 = 0.02 + 2 * math.sqrt(0.02 * math.log(1 / 5e-6))
    assert prop_1_3 == pytest.approx(1.00817, abs=1e-5) and prop_1_3 > 1.0
    R = records.synthetic({"a": 3, "b": 2}, 40, seed=0)
    mm.release(R, "marginals:1", ZCDP(0.02), "identity", seed=0, ledger=path)
    ledger = Ledger(path)
    assert ledger.usage() == {"epsilon": ZCDP(0.02).to_approx_dp_tight(5e-6), "delta": 5e-6}
    assert ledger.usage()["epsilon"] == pytest.approx(0.82742, abs=1e-5)
    z = ledger.zcdp_as_approx_dp()
    assert z["epsilon_prop_1_3"] == pytest.approx(prop_1_3) and z["epsilon"] < 1 < prop_1_3
    assert "epsilon used 0.827419, left 0.172581" in ledger.report()
    with pytest.raises(LedgerError, match=r"would bring epsilon to 1\.03018, over"):
        ledger.charge(ZCDP(0.01))  # ρ = 0.03 in all: ε = 1.030 by CKS (1.222 by Prop. 1.3)


def _discrete_gaussian_delta(sigma, epsilon):
    """Exact δ(ε) of the discrete Gaussian N_Z(0, σ²) against its shift by 1 (CKS 2020 §2):
    Σ_y max(0, p(y) − e^ε p(y − 1)), by summation over |y| ≤ 40σ + 50 (the mass beyond is
    below e^-800)."""
    import numpy as np

    y = np.arange(-int(40 * sigma + 50), int(40 * sigma + 50) + 1, dtype=float)
    log_norm = np.logaddexp.reduce(-(y**2) / (2 * sigma**2))
    p = np.exp(-(y**2) / (2 * sigma**2) - log_norm)
    q = np.exp(-((y - 1) ** 2) / (2 * sigma**2) - log_norm)
    return float(np.maximum(p - math.exp(epsilon) * q, 0.0).sum())


@pytest.mark.parametrize("sigma, delta", [(1.0, 1e-5), (1.5, 1e-5), (2.0, 1e-6)])
def test_the_ledger_does_not_use_the_continuous_gaussians_exact_curve(sigma, delta):
    """Why the ledger converts by CKS Cor. 13 (any ρ-zCDP mechanism) and not by the
    continuous Gaussian's exact curve (Balle & Wang 2018): an entry does not record its noise,
    and the discrete Gaussian of the same ρ = 1/(2σ²) has a larger δ at the continuous
    Gaussian's exact ε (here by 17-65 %) — that ε would understate what a discrete release
    spent. CKS's ε holds for both. (Summation error ~1e-16, far below the margins.)"""
    from scipy.optimize import brentq
    from scipy.stats import norm

    rho = 1 / (2 * sigma**2)

    def continuous(e):  # Balle & Wang 2018 Thm 8, μ = 1/σ
        return norm.cdf(1 / (2 * sigma) - e * sigma) - math.exp(e) * norm.cdf(
            -1 / (2 * sigma) - e * sigma
        )

    exact = brentq(lambda e: continuous(e) - delta, 1e-9, 50.0, xtol=1e-13)
    assert _discrete_gaussian_delta(sigma, exact) > delta * (1 + 1e-3)
    tight = ZCDP(rho).to_approx_dp_tight(delta)
    assert _discrete_gaussian_delta(sigma, tight) <= delta and continuous(tight) <= delta


def test_a_release_summary_and_its_output_show_both_conversions(tmp_path, capsys):
    """`mmtoolkit release --ledger` writes the ledger's zCDP total as (ε, δ) by CKS 2020 and
    by Prop. 1.3 into the summary's `ledger` field and prints both."""
    (tmp_path / "data.csv").write_text("a,b\n0,1\n2,0\n1,1\n")
    (tmp_path / "domain.json").write_text(json.dumps({"a": 3, "b": 2}))
    ledger = tmp_path / "d.ledger"
    Ledger.create(ledger, rho=1.0, conversion_delta=1e-6)
    argv = ["release", "--data", str(tmp_path / "data.csv"), "--domain",
            str(tmp_path / "domain.json"), "--workload", "marginals:1", "--selector",
            "identity", "--rho", "0.25", "--seed", "3", "--ledger", str(ledger), "--out",
            str(tmp_path / "a.csv")]  # fmt: skip
    assert cli_main(argv) == 0
    z = json.loads((tmp_path / "a.csv.json").read_text())["ledger"]["zcdp_spent"]
    tight, loose = ZCDP(0.25).to_approx_dp_tight(1e-6), ZCDP(0.25).to_approx_dp(1e-6)
    assert z == {"rho": 0.25, "delta": 1e-6, "epsilon": tight,
                 "epsilon_prop_1_3": pytest.approx(loose)}  # fmt: skip
    out = capsys.readouterr().out
    assert f"rho = 0.25, as (epsilon, delta): epsilon = {tight:.6g} at delta = 1e-06" in out
    assert f"Prop. 1.3: {loose:.6g})" in out


def test_bad_ledgers(tmp_path):
    with pytest.raises(LedgerError, match="does not exist; create it first"):
        Ledger(tmp_path / "none.json")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(LedgerError, match="not a privacy ledger"):
        Ledger(tmp_path / "x.json")
    with pytest.raises(LedgerError, match="needs a total budget"):
        Ledger.create(tmp_path / "y.json")
    with pytest.raises(ValueError, match=r"rho: must be a number > 0"):
        Ledger.create(tmp_path / "y.json", rho=-1)
    assert not (tmp_path / "y.json").exists()


def test_a_kill_after_the_charge_leaves_a_valid_ledger_that_counts_it(tmp_path):
    """Charge-before-release: a process killed after its charge (its noise may have been
    drawn) leaves a well-formed ledger whose pending entry counts as spent."""
    path = tmp_path / "l.json"
    Ledger.create(path, rho=0.5)
    code = (
        "import os, signal\n"
        "from mmtoolkit.ledger import Ledger\n"
        "from mmtoolkit.privacy import ZCDP\n"
        f"Ledger({str(path)!r}).charge(ZCDP(0.3), description='killed')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO)
    assert proc.returncode == -signal.SIGKILL
    ledger = Ledger(path)
    assert [(e["status"], e["description"]) for e in ledger.entries] == [("pending", "killed")]
    assert "PENDING" in ledger.report()
    with pytest.raises(LedgerError, match="would bring rho to 0.6"):
        ledger.charge(ZCDP(0.3))
    assert not list(tmp_path.glob(".l.json.*"))  # no temporary left behind
    json.loads(path.read_text())


def test_cli_init_show(tmp_path, capsys):
    path = tmp_path / "d.ledger"
    assert cli_main(["ledger", "init", str(path), "--rho", "1", "--delta", "1e-9"]) == 0
    assert Ledger(path).conversion_delta == 1e-9
    assert cli_main(["ledger", "init", str(path), "--rho", "1"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli_main(["ledger", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "total: rho = 1" in out and "entries (0)" in out
    Ledger(path).charge(ZCDP(0.5))
    assert cli_main(["ledger", "show", str(path)]) == 0
    out = capsys.readouterr().out
    tight, loose = ZCDP(0.5).to_approx_dp_tight(1e-9), ZCDP(0.5).to_approx_dp(1e-9)
    assert f"as (epsilon, delta): epsilon = {tight:.6g} at delta = 1e-09" in out, out
    assert f"Prop. 1.3: epsilon = {loose:.6g}" in out and f"{tight:.6g}" != f"{loose:.6g}"


def test_a_release_failing_before_noise_is_not_charged(tmp_path, monkeypatch):
    """The charge of a release that fails before drawing noise (here: discrete noise asked
    for an (ε, δ) guarantee) is cancelled; one failing after drawing noise stays charged."""
    path = tmp_path / "l.json"
    Ledger.create(path, epsilon=5.0, delta=1e-5)
    R = records.synthetic({"a": 3, "b": 2}, 20, seed=0)
    with pytest.raises(ValueError, match="discrete noise is available for PureDP"):
        mm.release(R, "marginals:1", ApproxDP(1, 1e-6), "identity", noise="discrete", seed=0,
                   ledger=path)  # fmt: skip
    assert Ledger(path).entries == []
    from mmtoolkit import mechanism

    real = mechanism.release_planned
    calls = []

    def crash_after_noise(*args, **kwargs):  # the second release dies after the first's noise
        if calls:
            raise RuntimeError("killed")
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(mechanism, "release_planned", crash_after_noise)
    with pytest.raises(RuntimeError, match="killed"):
        mm.release(R, "marginals:1", ApproxDP(1, 1e-6), "identity", releases=2, seed=0,
                   ledger=path)  # fmt: skip
    assert [e["status"] for e in Ledger(path).entries] == ["pending"]


# ---------------------------------------------------------------- size refusals charge nothing
def test_an_estimate_too_large_for_memory_is_refused_before_the_charge(adult_dir, tmp_path,
                                                                      capsys):  # fmt: skip
    """Adult, range marginals answered by OPT_M's weighted marginals: the answers need the
    least-squares estimate of all 6.4·10^17 cells. Refused with the size message (exit 2)
    before the ledger is charged — before, the noise was drawn, ρ stayed pending and a raw
    MemoryError followed (review finding)."""
    ledger = tmp_path / "adult.ledger"
    assert cli_main(["ledger", "init", str(ledger), "--rho", "1"]) == 0
    before = ledger.read_bytes()
    argv = ["release", "--data", str(adult_dir / "adult.csv"),
            "--domain", str(adult_dir / "adult-domain.json"), "--workload", "range_marginals:1",
            "--selector", "opt_marginals", "--rho", "0.5", "--seed", "1",
            "--ledger", str(ledger), "--out", str(tmp_path / "a.csv")]  # fmt: skip
    capsys.readouterr()
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "estimate x̂ of all 6.413e+17 cells" in err and "machine's memory" in err, err
    assert ledger.read_bytes() == before and Ledger(ledger).entries == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adult.ledger", "adult.ledger.lock"]


def test_the_estimate_counts_in_the_memory_check_of_the_python_api(tmp_path, monkeypatch):
    """With memory for the answers and the measurements but not also for x̂ (the identity
    strategy answers marginals through x̂: 48 + 4096 + 4096 floats), ``mmtoolkit.release``
    refuses before charging and ``mechanism.release_measured`` before its generator moves; a
    marginals workload on a marginals strategy needs no x̂ and is released."""
    import numpy as np

    from mmtoolkit import mechanism
    from mmtoolkit.linalg import Identity, TooLargeError, base

    R = records.synthetic({"a": 16, "b": 16, "c": 16}, 200, seed=0)
    path = tmp_path / "l.json"
    Ledger.create(path, rho=1.0)
    monkeypatch.setattr(base, "physical_memory", lambda: 8 * (48 + 4096 + 2000))
    with pytest.raises(TooLargeError, match=r"estimate x̂ of all 4096 cells"):
        mm.release(R, "marginals:1", ZCDP(0.5), "identity", seed=0, ledger=path)
    assert Ledger(path).entries == []
    res = mm.release(R, "marginals:1", ZCDP(0.5), "opt_marginals", seed=0, ledger=path)
    assert not handler(res.strategy.matrix).needs_estimate(res.strategy.matrix, res.workload)
    assert [e["status"] for e in Ledger(path).entries] == ["committed"]
    rng = np.random.default_rng(5)
    state = rng.bit_generator.state
    with pytest.raises(TooLargeError, match=r"estimate x̂"):
        mechanism.release_measured(res.workload, Identity(4096), R, ZCDP(0.5), rng)
    assert rng.bit_generator.state == state


def test_independent_pure_releases_compose_additively_on_a_rho_ledger(tmp_path):
    """R releases of ε-DP are R·ε²/2-zCDP (Prop. 1.4 each, ρ adds by Lemma 2.3), not the
    (R·ε)²/2 of one Rε-DP release: 3 x ε = 0.5 on a ρ = 1 ledger spend 0.375 (they used to
    be charged 1.125 and refused)."""
    path = tmp_path / "rho.json"
    Ledger.create(path, rho=1.0)
    R = records.synthetic({"a": 3, "b": 2}, 40, seed=0)
    res = mm.release(R, "marginals:1", PureDP(0.5), "identity", releases=3, seed=0, ledger=path)
    assert res.spent == {"epsilon": 1.5}
    ledger = Ledger(path)
    assert ledger.usage() == {"rho": pytest.approx(3 * 0.5**2 / 2)}
    assert ledger.spent().rho_pure == pytest.approx(PureDP(0.5).to_zcdp().rho * 3)
    ledger.charge(PureDP(0.5), releases=4)  # 0.375 + 0.5 = 0.875 fits
    with pytest.raises(LedgerError, match=r"would bring rho to 1.125, over the ledger's total"):
        ledger.charge(PureDP(0.5), releases=2)


def test_kept_releases_count_in_the_memory_check(tmp_path, monkeypatch):
    """``mmtoolkit.release`` keeps every release's answers and measurements: R = 3 releases
    hold three of each, so with memory for one (and the estimate) but not three it refuses
    before charging — it used to pass the check and could fail in release 2, after release
    1's noise was drawn (review finding)."""
    from mmtoolkit.linalg import TooLargeError, base

    R = records.synthetic({"a": 16, "b": 16, "c": 16}, 200, seed=0)
    path = tmp_path / "l.json"
    Ledger.create(path, rho=1.0)
    res = mm.release(R, "marginals:1", ZCDP(0.5), "identity", seed=0)
    W, S = res.workload, res.strategy
    one = 8 * (48 + 4096 + 4096)  # answers, measurements, x̂
    monkeypatch.setattr(base, "physical_memory", lambda: one + 8 * 1000)
    NoisePlan(S, ZCDP(0.5), workload=W)  # one release fits
    with pytest.raises(TooLargeError, match="3 releases kept"):
        NoisePlan(S, ZCDP(0.5), workload=W, releases=3)
    with pytest.raises(TooLargeError, match="3 releases kept"):
        mm.release(R, "marginals:1", ZCDP(0.5), "identity", releases=3, seed=0, ledger=path)
    assert Ledger(path).entries == []


def test_a_hand_edited_entry_without_positive_releases_is_refused_clearly(tmp_path):
    """An entry whose ``releases`` is 0 (or missing, or not an integer) is a LedgerError
    naming the entry, not a ZeroDivisionError in the sums."""
    path = tmp_path / "l.json"
    Ledger.create(path, rho=1.0)
    Ledger(path).charge(PureDP(0.5), releases=2)
    data = json.loads(path.read_text())
    for bad in (0, -1, "2", None, True):
        data["entries"][0]["releases"] = bad
        path.write_text(json.dumps(data))
        with pytest.raises(LedgerError, match=r"l.json: entry 1 \(id 1\): releases: "):
            Ledger(path).spent()


def test_a_histogram_too_large_for_records_is_refused_before_the_charge(tmp_path):
    """Records on 1.2·10^9 cells measured through a strategy that reads their histogram
    (the identity) are refused before the ledger is charged — it used to charge, fail in
    ``vectorize`` and cancel (review finding); a marginals strategy, which reads marginal
    tables, is not refused for it."""
    from mmtoolkit.linalg import TooLargeError

    R = records.synthetic({"a": 1000, "b": 1000, "c": 1200}, 50, seed=0)
    path = tmp_path / "l.json"
    Ledger.create(path, rho=1.0)
    with pytest.raises(TooLargeError, match="histogram of 1.2e"):
        mm.release(R, "marginal:a,b", ZCDP(0.5), "identity", seed=0, ledger=path)
    assert Ledger(path).entries == []
    W = mm.releasing.workload_matrix("marginal:a,b", R.domain)
    S = mm.selectors.get("opt_marginals").select(W, ZCDP(0.5))
    assert not handler(S.matrix).reads_histogram(S.matrix)
    NoisePlan(S, ZCDP(0.5), workload=W, data=R)


# ============================================================ one ledger, several paths
def test_a_ledger_reached_through_a_symlink_is_the_ledger_it_points_to(tmp_path):
    """A charge through a link is written to the target (the link stays a link) under the
    target's lock, so a second charge through the target sees it: ρ 0.6 + 0.6 on a total
    of 1 is refused (the link used to be replaced by a copy, and both were accepted)."""
    target = tmp_path / "L.json"
    Ledger.create(target, rho=1.0)
    (tmp_path / "sub").mkdir()
    link = tmp_path / "sub" / "link.json"
    link.symlink_to(os.path.join("..", "L.json"))  # relative, from another directory
    Ledger(link).charge(ZCDP(0.6), description="through the link")
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", "L.json")
    assert [e["description"] for e in Ledger(target).entries] == ["through the link"]
    before = target.read_bytes()
    with pytest.raises(LedgerError, match=r"would bring rho to 1.2, over the ledger's total 1"):
        Ledger(target).charge(ZCDP(0.6))
    with pytest.raises(LedgerError, match=r"would bring rho to 1.2"):
        Ledger(link).charge(ZCDP(0.6))
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.rglob("*.lock")) == ["L.json.lock"]  # one lock
    with pytest.raises(LedgerError, match="already exists"):
        Ledger.create(link, rho=5.0)
    assert target.read_bytes() == before


def _charge_in_child(path, barrier, results):
    barrier.wait()  # both processes charge at the same moment
    try:
        Ledger(path).charge(ZCDP(0.6), description=str(path))
        results.put("charged")
    except LedgerError:
        results.put("refused")


def test_concurrent_charges_through_a_link_and_the_target_share_one_lock(tmp_path):
    """Two processes charge ρ 0.6 each on a total of 1, one through a symlink, one through
    the target: exactly one succeeds, every time (before, both often did)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for round_ in range(4):
        target = tmp_path / f"L{round_}.json"
        link = tmp_path / f"link{round_}.json"
        Ledger.create(target, rho=1.0)
        link.symlink_to(target.name)
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_charge_in_child, args=(p, barrier, results))
                 for p in (link, target)]  # fmt: skip
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
            assert p.exitcode == 0
        outcomes = sorted(results.get(timeout=10) for _ in procs)
        assert outcomes == ["charged", "refused"], f"round {round_}: {outcomes}"
        assert link.is_symlink() and Ledger(target).usage() == {"rho": pytest.approx(0.6)}


# Each child runs `mmtoolkit release` (the CLI's main, in this process) once per round, its
# ledger charge held at a gate until the parent opens it for both children at once: the two
# charges race as closely as two processes can be made to. The gate only waits; the charge,
# its lock and the release are the package's own.
_RACER = """
import json, os, sys, time
from pathlib import Path
from mmtoolkit import ledger as ledger_module
from mmtoolkit.cli import main

work, who, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
real_charge = ledger_module.Ledger.charge
state = {}

def gated_charge(self, *args, **kwargs):
    k = state["round"]
    (work / f"ready{k}.{who}").touch()
    while not (work / f"go{k}").exists():
        time.sleep(0.0002)
    return real_charge(self, *args, **kwargs)

ledger_module.Ledger.charge = gated_charge
codes = []
for k in range(rounds):
    state["round"] = k
    codes.append(main(["release", "--data", str(work / "data.csv"),
                       "--domain", str(work / "domain.json"), "--workload", "marginals:2",
                       "--selector", "identity", "--rho", "0.6", "--seed", str(k),
                       "--ledger", str(work / f"L{k}.json"),
                       "--out", str(work / f"{who}{k}.csv")]))
(work / f"codes.{who}").write_text(json.dumps(codes))
"""


def test_two_processes_releasing_against_one_ledger_exactly_one_succeeds(tmp_path):
    """Two processes run the full `mmtoolkit release` against one ledger whose budget admits
    only one of them (ρ 0.6 each on a total of 1), their charges released at the same moment,
    in 10 rounds: every round, exactly one release is written and the other is refused with
    the ledger's error (exit 2); the ledger holds one committed entry of ρ 0.6. Without the
    lock, both read the ledger before either writes it, and both are charged."""
    rounds = 10
    rows = [f"{i % 3},{i % 2},{i // 7 % 2}" for i in range(30)]
    (tmp_path / "data.csv").write_text("a,b,c\n" + "\n".join(rows) + "\n")
    (tmp_path / "domain.json").write_text(json.dumps({"a": 3, "b": 2, "c": 2}))
    for k in range(rounds):
        Ledger.create(tmp_path / f"L{k}.json", rho=1.0)
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    procs = {
        who: subprocess.Popen(
            [sys.executable, "-c", _RACER, str(tmp_path), who, str(rounds)],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for who in ("x", "y")
    }
    try:
        for k in range(rounds):
            ready = [tmp_path / f"ready{k}.{who}" for who in procs]
            deadline = time.monotonic() + 120  # a racer that fails before its charge
            while not all(p.exists() for p in ready):
                assert all(p.poll() is None for p in procs.values()), "a racer stopped early"
                assert time.monotonic() < deadline, f"round {k}: a racer never reached the charge"
                time.sleep(0.001)
            (tmp_path / f"go{k}").touch()
        outputs = {who: p.communicate(timeout=300) for who, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    for who, p in procs.items():
        assert p.returncode == 0, outputs[who][1]
    codes = {who: json.loads((tmp_path / f"codes.{who}").read_text()) for who in procs}
    refusals = [line for _, err in outputs.values() for line in err.splitlines()]
    for k in range(rounds):
        got = sorted(codes[who][k] for who in procs)
        assert got == [0, 2], f"round {k}: exit codes {codes}"
        ledger = Ledger(tmp_path / f"L{k}.json")
        assert [e["status"] for e in ledger.entries] == ["committed"], f"round {k}"
        assert ledger.usage() == {"rho": pytest.approx(0.6)}
        written = [who for who in procs if (tmp_path / f"{who}{k}.csv").exists()]
        assert len(written) == 1 and codes[written[0]][k] == 0, f"round {k}: {written}"
    assert len(refusals) == rounds, refusals
    for line in refusals:
        assert re.fullmatch(
            r"mmtoolkit release: error: refused: this release \(ρ-zCDP, ρ = 0\.6 x 1\) would "
            r"bring rho to 1\.2, over the ledger's total 1 .*nothing was released or written",
            line,
        ), line


def test_the_ledger_works_where_there_is_no_fcntl(tmp_path):
    """The lock is portable: with ``fcntl`` unimportable (as on Windows) the ledger still
    charges and refuses (the ``filelock`` package picks the platform's lock); it used to fail
    on import."""
    path = tmp_path / "L.json"
    code = (
        "import sys, warnings\n"
        "sys.modules['fcntl'] = None\n"  # `import fcntl` now raises ImportError
        "warnings.simplefilter('ignore')\n"  # filelock's note that it uses its fallback lock
        "from mmtoolkit.ledger import Ledger, LedgerError\n"
        "from mmtoolkit.privacy import ZCDP\n"
        f"Ledger.create({str(path)!r}, rho=1.0).charge(ZCDP(0.6))\n"
        "try:\n"
        f"    Ledger({str(path)!r}).charge(ZCDP(0.6))\n"
        "except LedgerError as exc:\n"
        "    print(exc)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "would bring rho to 1.2, over the ledger's total 1" in proc.stdout
    assert Ledger(path).usage() == {"rho": pytest.approx(0.6)}


# ============================================================ checked on every load
def _one_entry_ledger(tmp_path, privacy=None, releases=1):
    path = tmp_path / "l.json"
    Ledger.create(path, rho=1.0)
    Ledger(path).charge(privacy or ZCDP(0.5), releases=releases, description="first")
    return path, json.loads(path.read_text())


def _set(*keys_value):
    """An edit of a ledger's data: ``_set("entries", 0, "charge", "rho", -5)``."""
    *keys, last, value = keys_value

    def edit(data):
        for k in keys:
            data = data[k]
        data[last] = value

    return edit


def _drop(*keys):
    *keys, last = keys

    def edit(data):
        for k in keys:
            data = data[k]
        del data[last]

    return edit


ENTRY = r"l\.json: entry 1 \(id 1\): "
BAD_FIELDS = [
    # a negative charge used to show "used -5, left 6" and admit a ρ 3 release
    (_set("entries", 0, "charge", "rho", -5), ENTRY + r"charge\.rho: -5 is not what its "
     r"privacy \(ρ-zCDP, ρ = 0\.5\) x 1 charges \(0\.5\)"),
    (_set("entries", 0, "charge", "rho", 0.25), ENTRY + r"charge\.rho: 0\.25 is not what"),
    (_set("entries", 0, "charge", "rho", "1"), ENTRY + r"charge\.rho: expected a number, got "
     r"str '1'"),
    (_set("entries", 0, "charge", "rho", None), ENTRY + r"charge\.rho: expected a number"),
    (_set("entries", 0, "charge", "rho", True), ENTRY + r"charge\.rho: expected a number"),
    (_set("entries", 0, "charge", {"epsilon": 1.0}), ENTRY + r"charge: has \['epsilon'\], but "
     r"a zcdp release charges \['rho'\]"),
    (_set("entries", 0, "charge", [0.5]), ENTRY + r"charge: expected a mapping, got list"),
    # a missing charge used to be a KeyError traceback in `ledger show`
    (_drop("entries", 0, "charge"), ENTRY + r"missing field\(s\) \['charge'\]"),
    (_set("entries", 0, "privacy", {"kind": "zcdp"}), ENTRY + r"privacy: privacy spec of kind "
     r"'zcdp' is missing field 'rho'"),
    (_set("entries", 0, "privacy", {"kind": "zcdp", "rho": -1}), ENTRY + r"privacy: rho: must"),
    (_set("entries", 0, "status", "done"), ENTRY + r"status: 'done' is not one of"),
    (_set("entries", 0, "description", 5), ENTRY + r"description: expected a string"),
    (_set("entries", 0, "seed_key", 5), ENTRY + r"seed_key: expected a string"),
    (_set("entries", 0, "extra", "x"), ENTRY + r"unknown field\(s\) \['extra'\]"),
    (_set("entries", 0, "id", 0), r"l\.json: entry 1 \(id 0\): id: must be >= 1"),
    (_set("entries", 0, 7), r"l\.json: entry 1: expected a mapping, got int"),
    (_set("entries", {}), r"l\.json: entries: expected a list, got dict"),
    # a string total used to be "can't multiply sequence by non-int"
    (_set("total", "rho", "1"), r"l\.json: total\.rho: expected a number, got str '1'"),
    (_set("total", "rho", 0), r"l\.json: total\.rho: must be a number > 0, got 0"),
    (_set("total", {"rho": 1, "epsilon": 1}), r"l\.json: total: .* is not a total budget"),
    (_set("conversion_delta", 2), r"l\.json: conversion_delta: must be a number strictly"),
    (_drop("conversion_delta"), r"l\.json: missing field\(s\) \['conversion_delta'\]"),
    (_set("owner", "x"), r"l\.json: unknown field\(s\) \['owner'\]"),
]  # fmt: skip


@pytest.mark.parametrize("edit, message", BAD_FIELDS)
def test_every_field_of_a_ledger_is_checked_on_every_load(tmp_path, capsys, edit, message):
    """A hand-edited ledger is a LedgerError naming the file, the entry and the field — on
    opening, on charging (nothing written) and in `ledger show` (exit 2, one line)."""
    path, data = _one_entry_ledger(tmp_path)
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(LedgerError, match=message):
        Ledger(path)
    before = path.read_bytes()
    R = records.synthetic({"a": 3}, 10, seed=0)
    with pytest.raises(LedgerError, match=message):
        mm.release(R, "marginals:1", ZCDP(0.1), "identity", seed=0, ledger=path)
    assert path.read_bytes() == before
    assert cli_main(["ledger", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmtoolkit ledger: error: ") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('"charge": {"rho": 0.5}', '"charge": {"rho": NaN}',
         r"entries\[0\]\.charge\.rho: NaN is not JSON"),
        ('"rho": 1.0', '"rho": Infinity', r"total\.rho: Infinity is not JSON"),
        ('"rho": 1.0', '"rho": 1e999', r"total\.rho: the number 1e999 is beyond"),
        ('"status": "pending"', '"status": "pending", "status": "committed"',
         r"entries\[0\]\.status: the key 'status' is given twice"),
    ],
)  # fmt: skip
def test_a_ledger_file_must_be_strict_json(tmp_path, old, new, message):
    """NaN / Infinity (which used to admit any release) and a key given twice are refused,
    naming the file and the field."""
    path, _ = _one_entry_ledger(tmp_path)
    text = json.dumps(json.loads(path.read_text()))  # one line: the replacements are exact
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    with pytest.raises(LedgerError, match=rf"ledger .*l\.json: not strict JSON: {message}"):
        Ledger(path)


def test_an_integer_total_beyond_a_double_is_refused(tmp_path):
    path, data = _one_entry_ledger(tmp_path)
    path.write_text(json.dumps(data).replace('"rho": 1.0', '"rho": 1' + "0" * 400))
    with pytest.raises(LedgerError, match=r"total\.rho: must be a finite number > 0, got inf"):
        Ledger(path)


@pytest.mark.parametrize(
    "privacy, releases", [(ZCDP(0.5), 1), (PureDP(0.3), 3), (ApproxDP(1.0, 1e-6), 2)]
)
def test_a_charge_is_checked_against_its_privacy_to_a_relative_1e_9(tmp_path, privacy, releases):
    """The recorded charge is recomputed by charge_of from the entry's privacy and releases.
    A value that went through another tool's float formatting (a relative change of 1e-12,
    well inside TOLERANCE = 1e-9, itself far above the 1e-16 rounding of recomputing the same
    expression) is accepted; a relative change of 1e-6 is an edit and is refused. Extra string
    fields seed_key / release_key are accepted."""
    path, data = _one_entry_ledger(tmp_path, privacy, releases)
    entry = data["entries"][0]
    entry.update(seed_key="k1", release_key="r1")
    for key in entry["charge"]:
        entry["charge"][key] *= 1 + 1e-12
    path.write_text(json.dumps(data))
    assert Ledger(path).entries[0]["seed_key"] == "k1"
    for key in list(entry["charge"]):
        edited = json.loads(json.dumps(data))
        edited["entries"][0]["charge"][key] *= 1 + 1e-6
        path.write_text(json.dumps(edited))
        with pytest.raises(LedgerError, match=rf"{ENTRY}charge\.{key}: .* is not what"):
            Ledger(path)


def test_a_duplicated_entry_id_is_refused(tmp_path):
    path, data = _one_entry_ledger(tmp_path)
    data["entries"].append(dict(data["entries"][0]))
    path.write_text(json.dumps(data))
    with pytest.raises(LedgerError, match=r"entry 2 \(id 1\): id: 1 is the id of an earlier"):
        Ledger(path)
