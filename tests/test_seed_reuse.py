"""One seed, one release: the noise of a seeded release is keyed by everything that defines it,
so a seed reused with another budget, strategy, workload, noise kind or data draws independent
noise (the attack below recovers nothing), and a ledger refuses the second, different release.

The attack: two releases of the same counts with the same seed and budgets ρ₁, ρ₂ whose noise
is the same vector scaled (``a = x + s₁ z``, ``b = x + s₂ z``) give the true counts from the
published files alone, ``(s₂·a − s₁·b)/(s₂ − s₁) = x`` with ``s`` their ``stderr`` columns.
With independent noise the two noise vectors are uncorrelated: over ``m`` answers their
empirical correlation is ``N(0, 1/m)`` to first order, so ``|r| ≤ 4/√m`` fails with
probability about 6e-5 for independent vectors, while the scaled-copy noise gives ``r = 1``.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import mmtoolkit as mm
from mmtoolkit import records
from mmtoolkit.cli import main as cli_main
from mmtoolkit.ledger import Ledger, LedgerError
from mmtoolkit.privacy import ZCDP, PureDP

SIZES = {"a": 40, "b": 25, "c": 100}  # 10^5 cells: identity answers are the cells
M = 40 * 25 * 100


@pytest.fixture(scope="module")
def data():
    return records.synthetic(SIZES, 3000, seed=0)


def _noise(result, R):
    """The noise of each answer: the answers minus the true ones."""
    return result.answers - result.workload @ R.vector().astype(float)


def _corr(u, v):
    return float(np.corrcoef(u, v)[0, 1])


def _independent(u, v):
    return abs(_corr(u, v)) <= 4 / np.sqrt(u.size)


def _attack_fails(a, s1, b, s2, truth):
    """The cancellation attack on answers ``a``, ``b`` with standard errors ``s₁``, ``s₂``
    misses the truth by what independent noise leaves: ``(s₂ z₁ − s₁ z₂)/(s₂ − s₁)`` has
    variance ``2 s₁² s₂² / (s₂ − s₁)²``; its RMS is at least half of that (it is ~1e-7 of it
    when the noise cancels)."""
    err = (s2 * a - s1 * b) / (s2 - s1) - truth
    expected = np.sqrt(np.mean(2 * s1**2 * s2**2 / (s2 - s1) ** 2))
    return np.sqrt(np.mean(err**2)) > 0.5 * expected


@pytest.mark.parametrize("selector", ["identity", "hdmm", "residual_planner"])
def test_a_seed_reused_with_another_budget_cancels_nothing(data, selector):
    params = {"restarts": 1} if selector == "hdmm" else None
    a = mm.release(data, "marginals:2", ZCDP(0.5), selector, params=params, seed=1)
    b = mm.release(data, "marginals:2", ZCDP(0.25), selector, params=params, seed=1)
    truth = a.workload @ data.vector().astype(float)
    assert _attack_fails(a.answers, a.stderr, b.answers, b.stderr, truth)
    assert _independent(_noise(a, data), _noise(b, data))


def test_the_same_release_repeats_and_any_change_draws_independent_noise(data):
    base = dict(workload="identity", privacy=ZCDP(0.5), selector="identity", seed=3)

    def run(R=data, **kw):
        args = {**base, **kw}
        return mm.release(R, args.pop("workload"), args.pop("privacy"), args.pop("selector"),
                          **args)  # fmt: skip

    a = run()
    assert np.array_equal(a.answers, run().answers)  # the same release: the same bytes
    za = _noise(a, data)
    # the same counts answered through another workload SPEC over the same cells
    other_workload = run(workload="marginals:3")
    assert other_workload.answers.shape == a.answers.shape
    assert _independent(za, _noise(other_workload, data))
    # another budget or privacy definition, noise kind, or selector (HDMM's strategy)
    for changed in (
        run(privacy=ZCDP(0.1)),
        run(privacy=PureDP(1.0)),
        run(noise="discrete"),
        run(selector="hdmm", params={"restarts": 1}),
    ):
        assert _independent(za, _noise(changed, data))
    # one record more: other data, other noise
    more = records.Records(data.domain, np.vstack([data.codes, data.codes[:1]]), data.bins)
    zb = _noise(run(R=more), more)
    assert _independent(za, zb)
    # the data's order does not matter (the release depends on the histogram only)
    shuffled = records.Records(data.domain, data.codes[::-1].copy(), data.bins)
    assert np.array_equal(run(R=shuffled).answers, a.answers)


def test_a_ledger_refuses_a_seed_charged_for_another_release(data, tmp_path):
    path = tmp_path / "people.ledger"
    Ledger.create(path, rho=10)
    mm.release(data, "identity", ZCDP(0.5), "identity", seed=1, ledger=path)
    mm.release(data, "identity", ZCDP(0.5), "identity", seed=1, ledger=path)  # the same one
    with pytest.raises(LedgerError, match="charged this seed for another release"):
        mm.release(data, "identity", ZCDP(0.25), "identity", seed=1, ledger=path)
    entries = Ledger(path).entries
    assert len(entries) == 2 and entries[0]["release_key"] == entries[1]["release_key"]
    assert len(entries[0]["seed_key"]) == 32  # a fingerprint of the seed's key, not the seed
    mm.release(data, "identity", ZCDP(0.25), "identity", seed=2, ledger=path)  # another seed
    mm.release(data, "identity", ZCDP(0.25), "identity", ledger=path)  # fresh entropy
    assert len(Ledger(path).entries) == 4


def _write_people(tmp_path, data):
    dom = {name: {"size": n} for name, n in SIZES.items()}
    (tmp_path / "people-domain.json").write_text(json.dumps(dom))
    with open(tmp_path / "people.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(list(SIZES))
        w.writerows(data.codes.tolist())


def _csv_answers(path):
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return tuple(np.array([float(r[k]) for r in rows]) for k in ("answer", "stderr"))


def test_the_command_line_attack_and_replay_recover_nothing(data, tmp_path, capsys):
    """The commands of the attack: two releases with one seed and two budgets, and a replay
    of the first summary with another budget; the ledger refuses the second release."""
    _write_people(tmp_path, data)
    R = ["release", "--data", str(tmp_path / "people.csv"),
         "--domain", str(tmp_path / "people-domain.json"), "--workload", "identity",
         "--selector", "identity", "--seed", "1"]  # fmt: skip
    assert cli_main([*R, "--rho", "0.5", "--out", str(tmp_path / "a.csv")]) == 0
    assert cli_main([*R, "--rho", "0.25", "--out", str(tmp_path / "b.csv")]) == 0
    assert cli_main(["release", "--from-summary", str(tmp_path / "a.csv.json"), "--rho", "5",
                     "--out", str(tmp_path / "c.csv")]) == 0  # fmt: skip
    x = records.read_csv(tmp_path / "people.csv", tmp_path / "people-domain.json").vector()
    a, sa = _csv_answers(tmp_path / "a.csv")
    for other in ("b.csv", "c.csv"):
        b, sb = _csv_answers(tmp_path / other)
        assert _attack_fails(a, sa, b, sb, x)
        assert _independent(a - x, b - x)
    # with a ledger: the second, different release of seed 1 is refused, nothing written
    led = tmp_path / "people.ledger"
    assert cli_main(["ledger", "init", str(led), "--rho", "10"]) == 0
    assert cli_main([*R, "--rho", "0.5", "--out", str(tmp_path / "l1.csv"),
                     "--ledger", str(led)]) == 0  # fmt: skip
    capsys.readouterr()
    assert cli_main([*R, "--rho", "0.25", "--out", str(tmp_path / "l2.csv"),
                     "--ledger", str(led)]) == 2  # fmt: skip
    assert "charged this seed for another release" in capsys.readouterr().err
    assert not (tmp_path / "l2.csv").exists() and len(Ledger(led).entries) == 1


def test_a_replay_on_changed_data_warns(data, tmp_path, capsys):
    _write_people(tmp_path, data)
    R = ["release", "--data", str(tmp_path / "people.csv"),
         "--domain", str(tmp_path / "people-domain.json"), "--workload", "marginals:1",
         "--selector", "identity", "--seed", "4", "--rho", "1"]  # fmt: skip
    assert cli_main([*R, "--out", str(tmp_path / "a.csv")]) == 0
    summary = json.loads((tmp_path / "a.csv.json").read_text())
    assert len(summary["data_digest"]) == 64
    replay = ["release", "--from-summary", str(tmp_path / "a.csv.json")]
    capsys.readouterr()
    assert cli_main([*replay, "--out", str(tmp_path / "same.csv")]) == 0
    assert "data differ" not in capsys.readouterr().err
    assert (tmp_path / "same.csv").read_text() == (tmp_path / "a.csv").read_text()
    with open(tmp_path / "people.csv", "a") as fh:
        fh.write("0,0,0\n")
    assert cli_main([*replay, "--out", str(tmp_path / "changed.csv")]) == 0
    assert "the data differ from those --from-summary" in capsys.readouterr().err


def test_digests_are_keyed_and_fingerprint_workloads(data):
    from mmtoolkit import workloads
    from mmtoolkit.linalg import Dense
    from mmtoolkit.releasing import data_digest, matrix_digest

    assert data_digest(data, 1) != data_digest(data, 2)  # keyed: nothing without the seed
    assert matrix_digest(workloads.prefix(8)) == matrix_digest(Dense(workloads.prefix(8).dense()))
    assert matrix_digest(workloads.prefix(8)) != matrix_digest(workloads.identity(8))
    big = workloads.kron([workloads.prefix(2000), workloads.identity(1000)])  # 2·10^12 entries
    other = workloads.kron([workloads.prefix(2000), workloads.total(1000)])
    assert matrix_digest(big) != matrix_digest(other)
