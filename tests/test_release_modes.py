"""The two modes of a release: without a seed a private release (a cryptographic generator
keyed by the operating system, exact integer noise by default, no seed, key or generator
state written anywhere; a strategy without exact integer noise refused before any charge
unless ``--noise continuous`` is given), with one a reproducible experiment (the same bytes
for the same inputs, and a summary saying the seed holder can remove the noise).

Sizes are small: a private release draws exact integer noise."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import mmtoolkit as mm
from mmtoolkit import records
from mmtoolkit.cli import main as cli_main
from mmtoolkit.ledger import Ledger
from mmtoolkit.linalg import NotSupportedByKindError
from mmtoolkit.privacy import ZCDP, ApproxDP

SIZES = {"a": 6, "b": 4, "c": 3}
#: Selectors whose strategies admit exact integer noise on marginals:2 (ResidualPlanner, HDMM
#: OPT_M, identity, a hierarchical strategy).
EXACT = ["residual_planner", "hdmm", "identity", "hierarchical"]
#: Words a field carrying a seed, key or generator state would be named by.
SECRET_WORDS = ("seed", "key", "state", "entropy", "digest")


@pytest.fixture
def files(tmp_path):
    """A records CSV (codes) and its domain file."""
    rng = np.random.default_rng(0)
    codes = np.stack([rng.integers(0, n, 300) for n in SIZES.values()], axis=1)
    lines = [",".join(SIZES)] + [",".join(map(str, row)) for row in codes.tolist()]
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "domain.json").write_text(json.dumps(SIZES))
    return tmp_path


def _release(files, out, *extra):
    argv = ["release", "--data", str(files / "data.csv"), "--domain",
            str(files / "domain.json"), "--workload", "marginals:2", "--rho", "0.5",
            "--out", str(files / out), *extra]  # fmt: skip
    return cli_main(argv)


def _walk(obj, path=""):
    """Every ``(path, key, value)`` of a parsed JSON document."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path, k, v
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")


def _secrets(doc) -> list:
    """What in a parsed JSON document could carry a seed, key or state: a field so named, an
    integer of 32 bits or more (a seed or a key word), a hexadecimal string of 16 digits or
    more (a key or keyed digest)."""
    found = []
    for path, k, v in _walk(doc):
        if any(w in str(k).lower() for w in SECRET_WORDS):
            found.append(f"{path}.{k}")
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2**31:
            found.append(f"{path}.{k} = {v}")
        if isinstance(v, str) and re.search(r"[0-9a-fA-F]{16,}", v):
            found.append(f"{path}.{k} = {v}")
    return found


@pytest.mark.parametrize("selector", EXACT)
def test_a_private_release_writes_no_seed_and_draws_exact_noise(files, selector):
    Ledger.create(files / "l.json", rho=10)
    assert _release(files, "a.csv", "--selector", selector, "--ledger",
                    str(files / "l.json")) == 0  # fmt: skip
    summary = json.loads((files / "a.csv.json").read_text())
    assert _secrets(summary) == []
    assert _secrets(json.loads((files / "l.json").read_text())) == []  # no seed fingerprint
    text = (files / "a.csv").read_text()
    header = text.splitlines()[0].lower()
    assert not any(w in header for w in SECRET_WORDS)
    assert not re.search(r"[0-9a-fA-F]{16,}", text)
    assert summary["mode"].startswith("private:")
    assert "cryptographic generator" in summary["mode"]
    assert summary["noise"] == "discrete"
    assert "discrete gaussian" in summary["discrete_noise"]["mechanism"].lower()


@pytest.mark.parametrize("selector", EXACT)
def test_a_private_release_from_python_measures_exact_integer_noise(selector):
    data = records.synthetic(SIZES, 300, seed=1)
    result = mm.release(data, "marginals:2", ZCDP(0.5), selector)
    assert result.seed is None and result.selection_seed is None
    assert "seed" not in result.summary and "data_digest" not in result.summary
    assert "seed" not in result.summary["params"]
    assert result.measurements[0]
    assert all(m.distribution == "discrete gaussian" for m in result.measurements[0])


def _comparable(summary: dict) -> dict:
    """A summary without what differs between two runs of the same release (timings, paths)."""
    return {k: v for k, v in summary.items() if k not in ("seconds", "outputs", "paths")}


def test_a_seeded_release_repeats_byte_for_byte_and_says_it_is_not_private(files):
    for out in ("a.csv", "b.csv"):
        assert _release(files, out, "--selector", "hdmm", "--param", "restarts=1",
                        "--seed", "7") == 0  # fmt: skip
    assert (files / "a.csv").read_bytes() == (files / "b.csv").read_bytes()
    a, b = (json.loads((files / f"{o}.csv.json").read_text()) for o in "ab")
    assert _comparable(a) == _comparable(b)
    assert a["seed"] == 7
    assert "not private against the seed holder" in a["mode"]
    assert "remove it" in a["mode"]
    assert a["noise"] == "continuous"  # a seeded release's default noise is unchanged


def test_a_seeded_release_records_the_exact_sampler_that_drew_its_noise(files, monkeypatch):
    """The compiled and numpy exact samplers draw other values for one seed: the summary says
    which drew the noise, and the same path repeats the release byte for byte."""
    pytest.importorskip("numba")
    args = ("--selector", "identity", "--noise", "discrete", "--seed", "7")
    for path, value in (("compiled", "1"), ("numpy", "0")):
        monkeypatch.setenv("MMTOOLKIT_NUMBA", value)
        for out in (f"{path}1.csv", f"{path}2.csv"):
            assert _release(files, out, *args) == 0
        assert (files / f"{path}1.csv").read_bytes() == (files / f"{path}2.csv").read_bytes()
        summary = json.loads((files / f"{path}1.csv.json").read_text())
        assert summary["exact_sampler"]["path"] == path
        assert "same path" in summary["exact_sampler"]["note"]
    assert (files / "compiled1.csv").read_bytes() != (files / "numpy1.csv").read_bytes()
    assert _release(files, "c.csv", "--selector", "identity", "--seed", "7") == 0
    assert json.loads((files / "c.csv.json").read_text())["exact_sampler"] is None  # float


def test_two_private_releases_differ_and_their_summaries_do_not(files):
    for out in ("a.csv", "b.csv"):
        assert _release(files, out, "--selector", "identity") == 0
    a, b = ((files / f"{o}.csv").read_text() for o in "ab")
    assert a != b  # fresh noise each time
    sa, sb = (json.loads((files / f"{o}.csv.json").read_text()) for o in "ab")
    assert _comparable(sa) == _comparable(sb)  # nothing in the summary tells them apart


def test_a_real_valued_strategy_is_refused_before_the_ledger_is_charged(files, capsys):
    Ledger.create(files / "l.json", rho=10)
    before = (files / "l.json").read_bytes()
    code = _release(files, "a.csv", "--selector", "eigen_design", "--ledger", str(files / "l.json"))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("mmtoolkit release: error: ") and err.count("\n") == 1
    assert "--noise continuous" in err and "Mironov" in err
    assert (files / "l.json").read_bytes() == before
    assert not (files / "a.csv").exists()
    # the explicit opt-in proceeds, and says the noise is floating-point
    assert _release(files, "a.csv", "--selector", "eigen_design", "--noise", "continuous",
                    "--ledger", str(files / "l.json")) == 0  # fmt: skip
    summary = json.loads((files / "a.csv.json").read_text())
    assert summary["mode"].startswith("private:") and "Mironov 2012" in summary["mode"]
    assert summary["noise"] == "continuous"
    assert _secrets(summary) == []


def test_approximate_dp_without_exact_noise_is_refused_in_a_private_release():
    data = records.synthetic(SIZES, 100, seed=1)
    with pytest.raises(NotSupportedByKindError, match="noise continuous"):
        mm.release(data, "marginals:1", ApproxDP(1.0, 1e-6), "identity")
    result = mm.release(data, "marginals:1", ApproxDP(1.0, 1e-6), "identity", noise="continuous")
    assert "Mironov 2012" in result.summary["mode"]


def test_a_private_summary_is_not_replayed(files, capsys):
    assert _release(files, "a.csv", "--selector", "identity") == 0
    replay = ["release", "--from-summary", str(files / "a.csv.json"), "--out",
              str(files / "b.csv")]  # fmt: skip
    assert cli_main(replay) == 2
    err = capsys.readouterr().err
    assert "private release" in err and "cannot be replayed" in err
    assert not (files / "b.csv").exists()
    # with a seed: its settings repeated as a reproducible experiment
    assert cli_main([*replay, "--seed", "3"]) == 0
    summary = json.loads((files / "b.csv.json").read_text())
    assert summary["seed"] == 3 and summary["noise"] == "discrete"


def test_a_plan_saved_without_a_noise_kind_releases_privately_with_exact_noise(files, capsys):
    # `select` without --noise leaves the noise to the release's mode: a private release from
    # that plan draws exact integer noise, a seeded one continuous noise (as without a plan)
    plan = files / "plan.npz"
    assert cli_main(["select", "--domain", str(files / "domain.json"), "--workload",
                     "marginals:2", "--selector", "identity", "--rho", "0.5",
                     "--save", str(plan)]) == 0  # fmt: skip
    assert mm.saved_plans.load_plan(plan).noise is None
    for out, seed, noise in (("p.csv", [], "discrete"), ("s.csv", ["--seed", "4"], "continuous")):
        argv = ["release", "--data", str(files / "data.csv"), "--domain",
                str(files / "domain.json"), "--plan", str(plan), "--out", str(files / out), *seed]
        assert cli_main(argv) == 0, capsys.readouterr().err
        summary = json.loads((files / f"{out}.json").read_text())
        assert summary["noise"] == noise
    assert "chosen explicitly" not in json.loads((files / "p.csv.json").read_text())["mode"]
