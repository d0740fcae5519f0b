"""Saved plans (mmtoolkit.saved_plans): select once, release later from the file — the same
strategy, expected error and answers as selecting again with the same seed, for every
registered selector; altered, incompatible or foreign files refused; a plan applied to data
on another domain refused before the ledger is charged; the CLI's select --save and
release --plan."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from mmtoolkit import Ledger, evaluate, records, selectors, workloads
from mmtoolkit.cli import main as cli_main
from mmtoolkit.domain import Domain
from mmtoolkit.linalg import Dense, Matrix
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.releasing import release, select_plan
from mmtoolkit.saved_plans import PlanError, SavedPlan, _digest, load_plan, save_plan

REPO = Path(__file__).resolve().parents[1]
#: Small workloads with the domains they are on (records are drawn on these).
CASES = {
    "all_range(8)": ({"a": 8}, workloads.all_range(8)),
    "prefix(4) x identity(4)": (
        {"a": 4, "b": 4},
        workloads.kron([workloads.prefix(4), workloads.identity(4)]),
    ),
    "marginals(2x2x2x2, k<=2)": (
        {f"a{i}": 2 for i in range(4)},
        workloads.marginals(Domain.from_sizes([2, 2, 2, 2]), 2, lower=True),
    ),
}
#: Parameters that make a registered selector return another strategy kind.
VARIANTS = [("opt_union", {"answering": "separate"}), ("opt_kron", {})]


def _first_plan(name: str, params: dict):
    """``(case, privacy, plan)``: the plan of the first small workload (and privacy) that the
    selector applies to — by its applicability, then by not refusing (REFUSALS); opt_kron is
    taken on the 2-D product, where it returns a Kronecker product."""
    cls = selectors.get_class(name)
    order = list(CASES)[1:] if name == "opt_kron" else list(CASES)
    for case in order:
        dom, W = CASES[case]
        for privacy in (ZCDP(0.5), PureDP(1.0)):
            if cls.applicability(W, privacy) is None:
                try:
                    with warnings.catch_warnings():  # e.g. SCS's accuracy note for mm_sdp
                        warnings.simplefilter("ignore")
                        plan = select_plan(W, privacy, name, domain=dom, params=params, seed=11)
                except selectors.REFUSALS:
                    continue
                return case, privacy, plan
    pytest.fail(f"no small workload for {name}")


@pytest.mark.parametrize(
    "name, params",
    [(n, {}) for n in selectors.available() if n != "opt_kron"] + VARIANTS,
    ids=lambda v: v if isinstance(v, str) else ",".join(f"{k}={x}" for k, x in v.items()),
)
def test_round_trip_of_every_selector(tmp_path, name, params):
    case, privacy, plan = _first_plan(name, params)
    dom, W = CASES[case]
    path = tmp_path / "plan.npz"
    save_plan(path, plan)
    loaded = load_plan(path)
    A, B = plan.strategy, loaded.strategy
    assert type(B.matrix) is type(A.matrix)
    assert (B.selector, B.params, B.inference) == (A.selector, A.params, A.inference)
    # The loaded matrix holds the same bytes and the evaluator runs the same code on it; the
    # results differ at most as a sum reordered by a threaded BLAS would, by about
    # κ(AᵀA on its row space)·N·ε relative (N cells) — below 1e-12 on these small strategies.
    sv = np.linalg.svd(A.matrix.dense(), compute_uv=False)
    sv = sv[sv > sv[0] * 1e-10]
    rel = (sv[0] / sv[-1]) ** 2 * W.shape[1] * np.finfo(float).eps
    e0, e1 = (evaluate.expected_error(W, x, privacy) for x in (A, B))
    assert rel < 1e-12 and e1 == pytest.approx(e0, rel=rel)
    data = records.synthetic(dom, 300, seed=5)
    direct = release(data, W, privacy, name, params=params, seed=11)
    planned = release(data, plan=loaded, seed=11)
    assert np.array_equal(planned.answers, direct.answers)  # the same release key and noise
    for key in ("selector", "params", "strategy", "expected_rmse", "selection_seed"):
        assert planned.summary[key] == direct.summary[key]
    assert planned.summary["plan"] == {"source": str(path), "sha256": plan.sha256}
    assert loaded.sha256 == plan.sha256 and len(plan.sha256) == 64


def test_a_plan_selected_for_another_workload(tmp_path):
    dom = {"a": 3, "b": 4, "c": 2}
    args = ("marginals:1", PureDP(1.0), "opt_kron")
    plan = select_plan(*args, domain=dom, seed=2, select_for="marginals:2:lower")
    save_plan(tmp_path / "plan.npz", plan)
    data = records.synthetic(dom, 100, seed=3)
    direct = release(data, *args, seed=2, select_for="marginals:2:lower")
    planned = release(data, plan=tmp_path / "plan.npz", seed=2)
    assert np.array_equal(planned.answers, direct.answers)
    assert planned.summary["selected_for"] == direct.summary["selected_for"]


def _saved(tmp_path, noise="continuous"):
    dom = {"age": {"bins": [0, 30, 60, 120]}, "sex": {"values": ["F", "M"]}}
    plan = select_plan(
        "marginals:2:lower", ZCDP(0.5), "opt0", domain=dom, seed=3, noise=noise
    )
    path = tmp_path / "plan.npz"
    save_plan(path, plan)
    return path, plan, dom


def _members(path):
    """``(header, arrays)`` of a plan file, as it holds them."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(arrays.pop("header").tobytes()), arrays


def _rewrite(path, edit, rehash: bool):
    header, arrays = _members(path)
    edit(header, arrays)
    if rehash:  # as a deliberate forger would
        header["sha256"] = _digest(header, arrays)
    text = json.dumps(header).encode()
    np.savez(path, header=np.frombuffer(text, np.uint8), **arrays)


def test_an_altered_array_byte_is_refused(tmp_path):
    path, _, _ = _saved(tmp_path)

    def flip(header, arrays):
        name = sorted(arrays)[0]
        raw = bytearray(arrays[name].tobytes())
        raw[0] ^= 1
        arrays[name] = np.frombuffer(bytes(raw), arrays[name].dtype).reshape(arrays[name].shape)

    _rewrite(path, flip, rehash=False)
    with pytest.raises(PlanError, match=rf"{path}: the content does not match its sha256"):
        load_plan(path)


def test_an_edited_header_field_is_refused(tmp_path):
    path, _, _ = _saved(tmp_path)
    _rewrite(path, lambda h, a: h["plan"]["privacy"].update(rho=5.0), rehash=False)
    with pytest.raises(PlanError, match="does not match its sha256"):
        load_plan(path)


@pytest.mark.parametrize(
    "key, value", [("format_version", 2), ("package_version", "0.0.1"), ("format_version", True)]
)
def test_another_version_is_refused(tmp_path, key, value):
    path, _, _ = _saved(tmp_path)
    _rewrite(path, lambda h, a: h.update({key: value}), rehash=True)
    with pytest.raises(PlanError, match=rf"{key} is {value!r}.*select again"):
        load_plan(path)


def _strategy_state(header):
    return header["plan"]["strategy"]["object"][1]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda h: _strategy_state(h)["matrix"]["object"].__setitem__(0, "os:system"),
         "plan.strategy.matrix: unknown class 'os:system'"),
        (lambda h: _strategy_state(h)["matrix"]["object"].__setitem__(0, "builtins:dict"),
         "unknown class 'builtins:dict'"),
        (lambda h: h["plan"].update(noise=3), "plan: noise: unknown 3"),
        (lambda h: _strategy_state(h).update(params=[1]), "plan.strategy: params: expected a map"),
        (lambda h: _strategy_state(h).update(selector=None), "plan.strategy: selector: expected"),
        (lambda h: _strategy_state(h).update(inference="magic"), "plan.strategy: inference"),
        (lambda h: h["plan"].update(workload=7), "plan.workload must be a str or Matrix, got int"),
        (lambda h: h["plan"]["privacy"].update(rho=-1), "plan.privacy: .*rho"),
        (lambda h: h["plan"]["domain"]["sex"].update(values=[]), "plan.domain: .*sex"),
        (lambda h: h["plan"].update(strategy={"array": "a99"}), "plan.strategy: not a value"),
    ],
)  # fmt: skip
def test_a_forged_file_is_still_checked(tmp_path, edit, message):
    """A recomputed hash gets past the integrity check, not past the class allow-list or the
    field checks."""
    path, _, _ = _saved(tmp_path)
    _rewrite(path, lambda h, a: edit(h), rehash=True)
    with pytest.raises(PlanError, match=f"^{re.escape(str(path))}: .*{message}"):
        load_plan(path)


def test_files_that_are_not_plans_are_refused(tmp_path):
    csv = tmp_path / "people.csv"
    csv.write_text("age,sex\n1,F\n")
    with pytest.raises(PlanError, match=f"cannot read the plan {csv}"):
        load_plan(csv)
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros(3))
    with pytest.raises(PlanError, match=f"cannot read the plan {npy}"):
        load_plan(npy)
    with pytest.raises(PlanError, match="No such file"):
        load_plan(tmp_path / "missing.npz")
    other = tmp_path / "other.npz"
    np.savez(other, header=np.frombuffer(b'{"format": "x"}', np.uint8))
    with pytest.raises(PlanError, match="not a saved plan"):
        load_plan(other)


def test_a_plan_on_another_domain_is_refused_before_the_ledger_is_charged(tmp_path):
    path, _, dom = _saved(tmp_path)
    ledger = tmp_path / "people.ledger"
    Ledger.create(ledger, rho=1.0)
    other = dict(dom, sex={"values": ["F", "M", "X"]})
    data = records.synthetic(other, 50, seed=1)
    with pytest.raises(PlanError, match=r"the data declare \('sex', \{'size': 3"):
        release(data, plan=path, seed=1, ledger=ledger)
    assert Ledger(ledger).entries == []
    same_sizes = dict(dom, age={"bins": [0, 20, 60, 120]})  # other bins, same size
    with pytest.raises(PlanError, match=r"declare \('age', .*'bins': \[0.0, 20.0"):
        release(records.synthetic(same_sizes, 50, seed=1), plan=path, seed=1, ledger=ledger)
    assert Ledger(ledger).entries == []
    release(records.synthetic(dom, 50, seed=1), plan=path, seed=1, ledger=ledger)
    assert len(Ledger(ledger).entries) == 1


def test_release_refuses_what_the_plan_fixes(tmp_path):
    path, plan, dom = _saved(tmp_path)
    data = records.synthetic(dom, 50, seed=1)
    for given in ({"workload": "marginals:1"}, {"privacy": ZCDP(1.0)}, {"selector": "hdmm"},
                  {"noise": "discrete"}, {"params": {"restarts": 2}}):  # fmt: skip
        with pytest.raises(PlanError, match=f"{next(iter(given))}: fixed by the plan {path}"):
            release(data, plan=path, seed=1, **given)
    with pytest.raises(PlanError, match="select_for: fixed"):
        release(data, plan=plan, seed=1, select_for="marginals:1")
    assert release(data, plan=plan, seed=1, params={}).strategy is plan.strategy


def test_every_kind_of_value_round_trips(tmp_path):
    """The generic encoding: tuples, sets, dicts with any keys, numpy scalars and arrays of
    several dtypes, non-finite floats, Domains, nested objects — and the strict JSON header
    holds no NaN."""
    path, plan, _ = _saved(tmp_path, noise="discrete")
    meta = {
        "t": (1, "a", None), "s": {3, 4}, "f": frozenset({"x"}), "keys": {(1, 2): "a", 5: "b"},
        "np": [np.float64(0.5), np.int32(-3), np.bool_(True)], "nan": math.nan, "inf": -math.inf,
        "arrays": [np.arange(6, dtype=np.int16).reshape(2, 3), np.array([True, False]),
                   np.zeros((0, 4)), np.array(2.5)],
        "domain": Domain(["x", "y"], [2, 3], [True, False], [("lo", "hi"), None]),
        "dense": Dense(np.eye(2)),
    }  # fmt: skip
    plan.strategy.metadata = meta
    save_plan(path, plan)
    header, _ = _members(path)
    json.dumps(header, allow_nan=False)  # strict JSON: no NaN or infinity
    got = load_plan(path).strategy.metadata
    assert got.keys() == meta.keys() and got["t"] == meta["t"] and got["s"] == meta["s"]
    assert got["f"] == meta["f"] and got["keys"] == meta["keys"] and got["domain"] == meta["domain"]
    assert [(type(v), v) for v in got["np"]] == [(type(v), v) for v in meta["np"]]
    assert math.isnan(got["nan"]) and got["inf"] == -math.inf
    for a, b in zip(got["arrays"], meta["arrays"], strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    assert np.array_equal(got["dense"].array, np.eye(2))
    assert load_plan(path).noise == "discrete"


class _Outside(Matrix):
    """A strategy kind that is not the package's own."""

    def __init__(self):
        self.shape = (2, 2)

    def _matmat(self, X):
        return X

    def _rmatmat(self, Y):
        return Y


def test_what_cannot_be_saved_is_refused_and_nothing_is_written(tmp_path):
    _, plan, _ = _saved(tmp_path)
    target = tmp_path / "new.npz"
    refused = [
        (_Outside(), r"metadata\['m'\]: unknown class .*_Outside"),
        (len, r"metadata\['m'\]: a builtin_function_or_method"),
        ([np.array(["x"])], r"metadata\['m'\]\[0\]: numpy data of dtype"),
    ]
    for value, where in refused:
        plan.strategy.metadata = {"m": value}
        with pytest.raises(PlanError, match=f"cannot save plan.strategy.{where}"):
            save_plan(target, plan)
        assert not target.exists()
    loop: list = []
    loop.append(loop)
    plan.strategy.metadata = {"m": loop}
    with pytest.raises(PlanError, match="refers to itself"):
        save_plan(target, plan)
    with pytest.raises(PlanError, match="needs a SavedPlan"):
        save_plan(target, plan.strategy)
    assert isinstance(plan, SavedPlan)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda p: {"domain": p.domain.domain}, r"plan.domain must be a DomainSpec, got Domain"),
        (lambda p: {"privacy": 0.5}, r"plan.privacy must be a Privacy, got float"),
        (lambda p: {"strategy": None}, r"plan.strategy must be a Strategy, got NoneType"),
        (lambda p: {"workload": 3}, r"plan.workload must be a str or Matrix, got int"),
        (lambda p: {"noise": "exact"}, r"plan: noise: unknown 'exact'"),
    ],
)  # fmt: skip
def test_a_plan_that_would_not_load_is_not_saved(tmp_path, change, message):
    """save_plan refuses, naming the field, what load_plan would refuse to read (it wrote
    such a plan, or failed with an AttributeError on a Domain or a float privacy)."""
    _, plan, _ = _saved(tmp_path)
    target = tmp_path / "new.npz"
    bad = dataclasses.replace(plan, **change(plan))
    with pytest.raises(PlanError, match=f"^cannot save: {message}"):
        save_plan(target, bad)
    assert not target.exists()


# ============================================================================ CLI
def _people(tmp_path):
    (tmp_path / "people.csv").write_text(
        "age,sex,job\n23,F,Private\n47,M,State-gov\n35,F,Private\n61,M,Self-emp\n29,M,Retired\n"
    )
    (tmp_path / "people-domain.json").write_text(json.dumps({
        "age": {"bins": [18, 30, 50, 100]}, "sex": {"values": ["F", "M"]},
        "job": {"values": ["Private", "State-gov", "Self-emp", "Other"], "other": "Other"},
    }))  # fmt: skip
    return ["--data", str(tmp_path / "people.csv"),
            "--domain", str(tmp_path / "people-domain.json")]  # fmt: skip


def test_cli_select_then_release_plan_equals_the_direct_release(tmp_path, capsys):
    data = _people(tmp_path)
    choice = ["--workload", "marginals:2", "--selector", "hdmm", "--param", "restarts=2",
              "--rho", "0.25", "--noise", "discrete"]  # fmt: skip
    plan = tmp_path / "people.plan"
    assert cli_main(["select", *data[2:], *choice, "--seed", "7", "--save", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "by hdmm for marginals:2" in out and "expected RMSE" in out and str(plan) in out
    direct, planned = tmp_path / "direct.csv", tmp_path / "planned.csv"
    assert cli_main(["release", *data, *choice, "--seed", "7", "--out", str(direct)]) == 0
    argv = ["release", *data, "--plan", str(plan), "--seed", "7", "--out", str(planned)]
    assert cli_main(argv) == 0, capsys.readouterr().err
    assert planned.read_text() == direct.read_text()
    summary = json.loads((tmp_path / "planned.csv.json").read_text())
    assert summary["plan"]["sha256"] == load_plan(plan).sha256
    assert summary["workload"] == "marginals:2" and summary["noise"] == "discrete"


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--rho", "1"], "--rho: fixed by the plan"),
        (["--workload", "marginals:1", "--param", "restarts=1"], "--workload, --param: fixed"),
        (["--noise", "continuous"], "--noise: fixed"),
    ],
)
def test_cli_release_plan_refuses_the_flags_it_fixes(tmp_path, capsys, extra, message):
    data = _people(tmp_path)
    plan = tmp_path / "p.npz"
    base = ["select", *data[2:], "--workload", "marginals:1", "--selector", "identity"]
    assert cli_main([*base, "--epsilon", "1", "--save", str(plan)]) == 0
    capsys.readouterr()
    argv = ["release", *data, "--plan", str(plan), *extra, "--out", str(tmp_path / "a.csv")]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmtoolkit release: error: ") and message in err
    assert err.count("\n") == 1 and not (tmp_path / "a.csv").exists()


def test_cli_select_refuses_bad_outputs_and_inputs(tmp_path, capsys):
    data = _people(tmp_path)
    domain = data[3]
    base = ["select", "--domain", domain, "--workload", "marginals:1", "--selector", "identity",
            "--epsilon", "1"]  # fmt: skip
    for save, message in (("-", "--save -: give a file name"), (domain, "is the --domain file"),
                          (str(tmp_path), "give a file name")):  # fmt: skip
        assert cli_main([*base, "--save", save]) == 2
        err = capsys.readouterr().err
        assert err.startswith("mmtoolkit select: error: ") and message in err
    assert cli_main(base) == 2
    assert "--save required" in capsys.readouterr().err
    assert cli_main([*base[:-2], "--save", str(tmp_path / "p.npz")]) == 2
    assert "a privacy budget is required" in capsys.readouterr().err
    assert not (tmp_path / "p.npz").exists()
    plan = tmp_path / "p.npz"
    assert cli_main([*base, "--save", str(plan)]) == 0
    bad = tmp_path / "planned.csv"
    assert cli_main(["release", *data, "--plan", str(plan), "--out", str(plan)]) == 2
    assert "is the --plan file" in capsys.readouterr().err
    assert not bad.exists()


def test_readme_saved_plan_recipe_runs_as_printed(tmp_path):
    """README's "Release every month from a saved plan": its shell block, run line by line
    (``mmtoolkit`` as ``python -m mmtoolkit`` of this checkout) on the previous section's
    files, releases January as the direct release with the same seed does."""
    text = (REPO / "README.md").read_text()
    start = text.index("## Release from your own CSV")
    mine = text.index("## Release every month from a saved plan")
    files = dict(re.findall(r"```(\w+)\n(.*?)```", text[start:mine], flags=re.S))
    (blocks,) = re.findall(r"```sh\n(.*?)```", text[mine : text.index("\n## ", mine + 1)], re.S)
    (tmp_path / "people.csv").write_text(files["csv"])
    (tmp_path / "people-february.csv").write_text(files["csv"] + "52,F,Other\n")
    (tmp_path / "people-domain.json").write_text(files["json"])
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def run(argv):
        assert argv[0] == "mmtoolkit"
        proc = subprocess.run([sys.executable, "-m", *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True)  # fmt: skip
        assert proc.returncode == 0, (argv, proc.stderr)

    run(["mmtoolkit", "ledger", "init", "people.ledger", "--rho", "1"])
    for line in blocks.replace("\\\n", " ").strip().splitlines():
        run(shlex.split(line))
    run(["mmtoolkit", "release", "--data", "people.csv", "--domain", "people-domain.json",
         "--workload", "marginals:2", "--selector", "hdmm", "--param", "restarts=5",
         "--rho", "0.25", "--seed", "7", "--out", "direct.csv"])  # fmt: skip
    assert (tmp_path / "january.csv").read_bytes() == (tmp_path / "direct.csv").read_bytes()
    assert (tmp_path / "february.csv").exists()
    assert len(Ledger(tmp_path / "people.ledger").entries) == 2
