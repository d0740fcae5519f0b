"""``mmtoolkit release`` (mmtoolkit.release): end-to-end noisy answers from records, the
summary's expected RMSE against the empirical error, and bad input (nothing written)."""

from __future__ import annotations

import csv
import json
import math
import os

import numpy as np
import pytest

from mmtoolkit import records, workloads
from mmtoolkit import release_command as release
from mmtoolkit.cli import main as cli_main


def _read(path):
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def _answers(header, rows):
    cols = [j for j, h in enumerate(header) if h.startswith("answer")]
    return np.array([[float(r[j]) for j in cols] for r in rows])


def test_synthetic_default(tmp_path, capsys):
    out = tmp_path / "answers.csv"
    code = cli_main(
        ["release", "--workload", "marginals:2", "--selector", "residual_planner",
         "--rho", "0.5", "--seed", "3", "--out", str(out)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    header, rows = _read(out)
    names = list(release.DEMO_DOMAIN)
    assert header == ["query", "marginal", *names, "answer", "lower", "upper", "stderr"]
    summary = json.loads((tmp_path / "answers.csv.json").read_text())
    R = records.synthetic(release.DEMO_DOMAIN, 1000, 0)
    W = workloads.marginals(R.domain, 2)
    assert summary["queries"] == W.shape[0] == len(rows)
    assert rows[0][1:4] == ["age;sex", "0", "0"] and rows[0][4:8] == [""] * 4
    assert summary["privacy_spec"] == {"kind": "zcdp", "rho": 0.5}
    assert summary["selector"] == "residual_planner"
    assert summary["synthetic"] == {"records": 1000, "data_seed": 0}  # public: a parameter
    se = np.array([float(r[-1]) for r in rows])
    assert math.sqrt(np.mean(se**2)) == pytest.approx(summary["expected_rmse"])
    stdout = capsys.readouterr().out
    assert "expected RMSE" in stdout and "from synthetic(records=1000, seed=0);" in stdout
    # seeded: the same command gives the same answers
    out2 = tmp_path / "again.csv"
    cli_main(
        ["release", "--workload", "marginals:2", "--selector", "residual_planner",
         "--rho", "0.5", "--seed", "3", "--out", str(out2)]
    )  # fmt: skip
    assert out.read_text() == out2.read_text()


def test_discrete_noise_and_postprocessing(tmp_path):
    out = tmp_path / "a.csv"
    code = release.main(
        release_args(["--workload", "marginals:1", "--selector", "identity", "--epsilon", "1",
                      "--noise", "discrete", "--round", "--nonnegative", "--seed", "0",
                      "--records", "200", "--out", str(out)])
    )  # fmt: skip
    assert code == 0
    header, rows = _read(out)
    vals = [r[header.index("answer")] for r in rows]
    assert all(v.isdigit() for v in vals)  # integers ≥ 0
    s = json.loads((tmp_path / "a.csv.json").read_text())
    assert s["noise"] == "discrete"
    assert s["postprocessing"] == ["clip_nonnegative", "round_to_integers"]
    assert s["discrete_noise"]["mechanism"] == "discrete laplace"
    assert 0.999 < s["discrete_noise"]["spent"] / s["discrete_noise"]["budget"] <= 1


def release_args(argv):
    import argparse

    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command")
    release.add_parser(sub)
    return p.parse_args(["release", *argv])


@pytest.mark.parametrize(
    "selector, params, privacy",
    [
        ("residual_planner", [], ["--rho", "0.5"]),
        # HDMM's winner on Adult 2-way marginals is OPT_M with every operator (measured);
        # restricting to it and 2 restarts keeps the test short
        pytest.param(
            "hdmm", ["--param", "restarts=2", "--param", "seed=0",
                     "--param", "operators=[marginals]"], ["--epsilon", "1"],
            marks=pytest.mark.slow,
        ),
    ],
)  # fmt: skip
def test_adult_two_way_marginals(adult_dir, tmp_path, selector, params, privacy):
    """Done-when: all 2-way marginals of the Adult records, 20 releases: the empirical RMSE
    matches the summary's expected RMSE within 10%, in under a minute."""
    out = tmp_path / "adult.csv"
    code = release.main(
        release_args(
            ["--data", str(adult_dir / "adult.csv"),
             "--domain", str(adult_dir / "adult-domain.json"),
             "--workload", "marginals:2", "--selector", selector, *params, *privacy,
             "--seed", "1", "--releases", "20", "--out", str(out)]
        )
    )  # fmt: skip
    assert code == 0
    summary = json.loads((tmp_path / "adult.csv.json").read_text())
    with open(out) as fh:
        header = fh.readline().strip().split(",")
    cols = [j for j, h in enumerate(header) if h.startswith("answer_")]
    ans = np.loadtxt(out, delimiter=",", skiprows=1, usecols=cols, ndmin=2)
    assert ans.shape == (summary["queries"], 20)
    R = records.read_csv(adult_dir / "adult.csv", adult_dir / "adult-domain.json")
    W = workloads.marginals(R.domain, 2)
    d = len(R.domain)
    truth = np.concatenate(
        [R.marginal([i for i in range(d) if (k >> i) & 1]).ravel() for k in W.keys]
    )
    emp = math.sqrt(np.mean((ans - truth[:, None]) ** 2))
    assert emp == pytest.approx(summary["expected_rmse"], rel=0.10)
    assert summary["seconds"]["total"] < 60
    if selector == "hdmm":
        assert summary["strategy"] == "Marginals"


BAD = [
    ("a,b\n0,1\n3,0\n", {"a": 3, "b": 2}, [], r"data.csv, line 3, column 'a': value 3 is outside"),
    ("a,b\n0,1\n", {"a": 3, "b": 2, "c": 2}, [], r"column\(s\) 'c' of the domain are missing"),
    ("a,b\n0,x\n", {"a": 3, "b": 2}, [], r"line 2, column 'b': a non-numeric value 'x'"),
    ("a,b,z\n0,1,1\n", {"a": 3, "b": 2}, [], r"the domain does not declare column\(s\) 'z'"),
    ("a,b\n0,1\n", {"a": 3, "b": 2}, ["--workload", "cube:2"], r"unknown workload kind 'cube'"),
    ("a,b\n0,1\n", {"a": 3, "b": 2}, ["--selector", "nope"], r"unknown selector 'nope'"),
    ("a,b\n0,1\n", {"a": 3, "b": 2}, ["--rho", "0.5"], r"either --rho or --epsilon"),
    ("a,b\n0,1\n", {"a": 3, "b": 2}, ["--param", "x"], r"KEY=VALUE"),
    ("a,b\n0,1\n", {"a": 3, "b": 2}, ["--selector", "residual_planner"], r"does not support"),
    ("a,b\n0,1\n", {"a": 3, "b": 2}, ["--workload", "marginals:5"], r"k: must be <= 2"),
]


@pytest.mark.parametrize("text, domain, extra, message", BAD)
def test_bad_input_writes_nothing(tmp_path, capsys, text, domain, extra, message):
    (tmp_path / "data.csv").write_text(text)
    (tmp_path / "domain.json").write_text(json.dumps(domain))
    out = tmp_path / "out" / "answers.csv"
    out.parent.mkdir()
    out.write_text("previous\n")  # an earlier result is not clobbered by a failed run
    argv = ["--data", str(tmp_path / "data.csv"), "--domain", str(tmp_path / "domain.json"),
            "--workload", "marginals:1", "--selector", "identity", "--epsilon", "1",
            "--out", str(out)]  # fmt: skip
    for flag, value in zip(extra[::2], extra[1::2]):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    code = release.main(release_args(argv))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("mmtoolkit release: error:") and len(err.splitlines()) == 1
    assert __import__("re").search(message, err), err
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["answers.csv"]


def test_missing_privacy_and_output_dir(tmp_path, capsys):
    code = release.main(
        release_args(["--workload", "marginals:1", "--selector", "identity",
                      "--out", str(tmp_path / "x.csv")])
    )  # fmt: skip
    assert code == 2 and "privacy budget is required" in capsys.readouterr().err
    code = release.main(
        release_args(["--workload", "marginals:1", "--selector", "identity", "--epsilon", "1",
                      "--out", str(tmp_path / "missing" / "x.csv")])
    )  # fmt: skip
    assert code == 2 and "does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_previously_refused_kinds_end_to_end(tmp_path, capsys):
    """``all_range`` (refused before the one grammar) and ``kron:prefix,identity`` released on a
    small synthetic domain: one line per query, the expected RMSE from the evaluator."""
    (tmp_path / "one.json").write_text(json.dumps({"x": {"size": 16, "numeric": True}}))
    (tmp_path / "two.json").write_text(json.dumps({"x": 4, "y": 3}))
    cases = [
        ("one.json", "all_range:n=16", workloads.all_range(16), ["marginal", "x"]),
        ("one.json", "width_range:n=16,w=4", workloads.width_range(16, 4), []),
        ("two.json", "kron:prefix,identity", workloads.kron([workloads.prefix(4),
                                                             workloads.identity(3)]),
         ["marginal", "x", "y"]),
    ]  # fmt: skip
    for domain, spec, W, labels in cases:
        out = tmp_path / "a.csv"
        argv = ["release", "--domain", str(tmp_path / domain), "--records", "50",
                "--workload", spec, "--selector", "identity", "--rho", "1", "--seed", "0",
                "--out", str(out)]  # fmt: skip
        assert cli_main(argv) == 0, capsys.readouterr().err
        header, rows = _read(out)
        assert header == ["query", *labels, "answer", "lower", "upper", "stderr"]
        assert len(rows) == W.shape[0]
        if spec == "all_range:n=16":  # ranges keep their labels: [i, j] in lexicographic order
            assert [r[2] for r in rows[:3]] == ["0", "0..1", "0..2"] and rows[-1][2] == "15"
        if spec == "kron:prefix,identity":
            assert [r[1:4] for r in rows[:4]] == [["x;y", "0", "0"], ["x;y", "0", "1"],
                                                  ["x;y", "0", "2"], ["x;y", "0..1", "0"]]
        summary = json.loads((tmp_path / "a.csv.json").read_text())
        assert summary["workload"] == spec and summary["queries"] == W.shape[0]
        from mmtoolkit import evaluate, selectors
        from mmtoolkit.privacy import ZCDP

        S = selectors.get("identity").select(W, ZCDP(1))
        assert summary["expected_total_squared_error"] == pytest.approx(
            evaluate.expected_error(W, S, ZCDP(1))
        )


def test_key_value_marginal_spec_keeps_the_labels(tmp_path, capsys):
    out = tmp_path / "m.csv"
    argv = ["release", "--records", "20", "--workload", "marginal:attrs=[sex,region]",
            "--selector", "identity", "--epsilon", "1", "--seed", "0",
            "--out", str(out)]  # fmt: skip
    assert cli_main(argv) == 0, capsys.readouterr().err
    header, rows = _read(out)
    assert header == ["query", "marginal", *release.DEMO_DOMAIN, "answer", "lower", "upper",
                      "stderr"]  # fmt: skip
    assert len(rows) == 10
    pick = [header.index(c) for c in ("marginal", "sex", "region", "age")]
    assert [rows[0][j] for j in pick] == ["sex;region", "0", "0", ""]
    assert [rows[-1][j] for j in pick] == ["sex;region", "1", "4", ""]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("all_range:n=32", r"--workload 'all_range:n=32': the workload is on 32 cells but the "
                           r"domain has 16 \(16\); give sizes matching the domain"),
        ("binary_marginals:k=1", r"binary_marginals asks queries on the binary encoding"),
        ("permuted:seed=0", r"permuted\(\): missing a required argument: 'W'.*mapping form"),
        ("marginals:domain=adult,k=1", r"--workload.domain: the domain is given by --domain"),
        ("marginals:k=1,q=2", r"marginals\(\): unknown parameter 'q' \(parameters: domain, k"),
        ("marginals:2:upper", r"cannot parse workload spec 'marginals:2:upper' \(kind"),
    ],
)  # fmt: skip
def test_specs_release_cannot_answer_are_refused(tmp_path, capsys, spec, message):
    (tmp_path / "one.json").write_text(json.dumps({"x": 16}))
    out = tmp_path / "a.csv"
    argv = ["release", "--domain", str(tmp_path / "one.json"), "--workload", spec,
            "--selector", "identity", "--rho", "1", "--out", str(out)]  # fmt: skip
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert __import__("re").search(message, err) and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.json"]


# ============================================================================ one seed
def test_seed_gives_byte_identical_answers_for_every_selector(tmp_path, capsys):
    """Done-when: ``release ... --seed 7`` twice gives byte-identical answers for every
    registered selector that applies (3 binary attributes, so the binary and power-of-two
    methods apply too); a selector that does not apply must fail the same way twice."""
    from mmtoolkit.privacy import ZCDP
    from mmtoolkit.selectors import available
    from mmtoolkit.selectors.base import get_class

    (tmp_path / "d.json").write_text(
        json.dumps({"a": {"size": 2, "numeric": True}, "b": 2, "c": 2})
    )
    ran = []
    for name in available():
        privacy = ["--rho", "1"] if ZCDP in get_class(name).privacy else ["--epsilon", "1"]
        extra = ["--param", "restarts=2"] if name == "hdmm" else []  # the default 25 is slow
        got = []
        for k in range(2):
            out = tmp_path / f"{name}{k}.csv"
            argv = ["release", "--domain", str(tmp_path / "d.json"), "--records", "100",
                    "--workload", "marginals:2:lower", "--selector", name, *privacy, *extra,
                    "--seed", "7", "--out", str(out)]  # fmt: skip
            code = cli_main(argv)
            err = capsys.readouterr().err
            got.append((code, out.read_bytes() if code == 0 else err))
        assert got[0] == got[1], name
        if got[0][0] == 0:
            ran.append(name)
            summary = json.loads((tmp_path / f"{name}0.csv.json").read_text())
            assert summary["seed"] == 7
            if "seed" in summary["params"]:  # the derived selection seed reached the selector
                assert summary["params"]["seed"] == summary["selection_seed"] is not None
    assert {"hdmm", "opt0", "opt_kron", "opt_union", "opt_marginals", "residual_planner",
            "datacube", "lrm", "mm_sdp", "eigen_design"} <= set(ran)  # fmt: skip


def test_from_summary_repeats_the_release(tmp_path, capsys):
    (tmp_path / "d.json").write_text(json.dumps({"a": {"size": 4, "numeric": True}, "b": 3}))
    out = tmp_path / "first.csv"
    argv = ["release", "--domain", str(tmp_path / "d.json"), "--records", "80",
            "--workload", "range_marginals:1", "--selector", "opt_kron", "--rho", "0.5",
            "--seed", "5", "--out", str(out)]  # fmt: skip  (a seeded release replays)
    assert cli_main(argv) == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "first.csv.json").read_text())
    assert summary["seed"] == 5 and summary["params"]["restarts"] == 1
    again = tmp_path / "again.csv"
    code = cli_main(["release", "--from-summary", str(tmp_path / "first.csv.json"),
                     "--out", str(again)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert again.read_bytes() == out.read_bytes()
    # a flag beside --from-summary overrides the summary's value: --seed 1 derives the
    # selection seed too (the summary's was derived), and the selector uses it
    code = cli_main(["release", "--from-summary", str(tmp_path / "first.csv.json"),
                     "--seed", "1", "--out", str(tmp_path / "other.csv")])  # fmt: skip
    assert code == 0 and (tmp_path / "other.csv").read_bytes() != out.read_bytes()
    other = json.loads((tmp_path / "other.csv.json").read_text())
    derived = int(np.random.SeedSequence(1).spawn(2)[0].generate_state(1, np.uint32)[0])
    assert other["selection_seed"] == other["params"]["seed"] == derived
    assert other["selection_seed_source"] == "derived from seed"
    from mmtoolkit import evaluate, selectors
    from mmtoolkit.privacy import ZCDP
    from mmtoolkit.releasing import workload_matrix

    W = workload_matrix("range_marginals:1", records.synthetic(
        {"a": {"size": 4, "numeric": True}, "b": 3}, 1, 0).domain)  # fmt: skip
    rmse = {s: evaluate.rmse(W, selectors.get("opt_kron", seed=s).select(W, ZCDP(0.5)),
                             ZCDP(0.5))
            for s in (derived, summary["selection_seed"])}  # fmt: skip
    assert abs(rmse[derived] / rmse[summary["selection_seed"]] - 1) > 1e-9  # seeds tell apart
    assert other["expected_rmse"] == pytest.approx(rmse[derived], rel=1e-12)


def test_the_summary_reports_the_selection_seed_the_selector_used():
    """A seed given in params is the one the selector uses and the summary reports (it used
    to report the seed derived from ``seed``, which the selector never saw)."""
    import mmtoolkit as mm
    from mmtoolkit import evaluate, selectors
    from mmtoolkit.privacy import ZCDP

    R = records.synthetic({"a": {"size": 6, "numeric": True}, "b": 3}, 50, 0)
    given = mm.release(R, "range_marginals:1", ZCDP(0.5), "opt_kron", params={"seed": 5},
                       seed=2)  # fmt: skip
    assert given.selection_seed == given.summary["selection_seed"] == 5
    assert given.summary["selection_seed_source"] == "given in params"
    direct = selectors.get("opt_kron", seed=5).select(given.workload, ZCDP(0.5))
    assert given.summary["expected_rmse"] == pytest.approx(
        evaluate.rmse(given.workload, direct, ZCDP(0.5)), rel=1e-12)  # fmt: skip
    derived = mm.release(R, "range_marginals:1", ZCDP(0.5), "opt_kron", seed=2)
    want = int(np.random.SeedSequence(2).spawn(2)[0].generate_state(1, np.uint32)[0])
    assert derived.summary["selection_seed"] == derived.strategy.params["seed"] == want
    assert derived.summary["selection_seed_source"] == "derived from seed"
    plain = mm.release(R, "range_marginals:1", ZCDP(0.5), "identity", seed=2)
    assert plain.selection_seed is None and plain.summary["selection_seed_source"] is None


def test_from_summary_of_a_matrix_workload_says_it_cannot_be_replayed(tmp_path, capsys):
    """A release made from Python with a Matrix workload records its repr, which no SPEC
    parses: replaying it names the problem and the flag to give instead."""
    import pandas as pd

    from mmtoolkit import release
    from mmtoolkit.linalg import Identity, Kronecker
    from mmtoolkit.privacy import ZCDP

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.choice(["x", "y"], 50), "b": rng.choice(["p", "q", "r"], 50)})
    dom = {"a": {"values": ["x", "y"]}, "b": {"values": ["p", "q", "r"]}}
    (tmp_path / "dom.json").write_text(json.dumps(dom))
    df.to_csv(tmp_path / "data.csv", index=False)
    res = release(df, Kronecker([Identity(2), Identity(3)]), ZCDP(0.5), "identity",
                  domain=dom, seed=1)  # fmt: skip
    assert res.summary["workload_is_spec"] is False
    (tmp_path / "s.json").write_text(json.dumps(res.summary))
    argv = ["release", "--from-summary", str(tmp_path / "s.json"), "--data",
            str(tmp_path / "data.csv"), "--domain", str(tmp_path / "dom.json"),
            "--out", str(tmp_path / "o.csv")]  # fmt: skip
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "made from Python with a Matrix as its workload" in err and "give --workload" in err
    assert cli_main(argv + ["--workload", "marginals:2"]) == 0, capsys.readouterr().err


# ============================================================================ labelled output
def test_out_dir_writes_one_labelled_csv_per_marginal(tmp_path, capsys):
    (tmp_path / "data.csv").write_text(
        "age,sex,job\n23,F,Private\n47,M,Gov\n35,F,Private\n61,M,Self\n"
    )
    (tmp_path / "domain.json").write_text(json.dumps({
        "age": {"bins": [0, 30, 50, 100]}, "sex": {"values": ["F", "M"]},
        "job": {"values": ["Private", "Gov", "Self"]}}))  # fmt: skip
    out_dir = tmp_path / "tables"
    argv = ["release", "--data", str(tmp_path / "data.csv"),
            "--domain", str(tmp_path / "domain.json"), "--workload", "marginals:2",
            "--selector", "identity", "--rho", "1e12", "--seed", "0", "--round",
            "--out-dir", str(out_dir)]  # fmt: skip
    assert cli_main(argv) == 0, capsys.readouterr().err
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "age__job.csv", "age__sex.csv", "sex__job.csv", "summary.json"]  # fmt: skip
    header, rows = _read(out_dir / "age__sex.csv")
    assert header == ["age", "sex", "answer", "lower", "upper", "stderr"]
    assert [r[:3] for r in rows[:3]] == [["[0, 30)", "F", "1"], ["[0, 30)", "M", "0"],
                                         ["[30, 50)", "F", "1"]]  # fmt: skip
    header, rows = _read(out_dir / "sex__job.csv")
    assert [r[:3] for r in rows if r[2] != "0"] == [["F", "Private", "2"], ["M", "Gov", "1"],
                                                    ["M", "Self", "1"]]  # fmt: skip


# ============================================================================ bad input
def _argv(tmp_path, *extra):
    return ["release", "--data", str(tmp_path / "data.csv"),
            "--domain", str(tmp_path / "domain.json"), "--workload", "marginals:1",
            "--selector", "identity", "--epsilon", "1", *extra]  # fmt: skip


@pytest.fixture
def small(tmp_path):
    (tmp_path / "data.csv").write_text("a,b\n0,1\n2,0\n")
    (tmp_path / "domain.json").write_text(json.dumps({"a": 3, "b": 2}))
    return tmp_path


def _refused(capsys, argv, message, where):
    before = {p: p.read_bytes() for p in where.rglob("*") if p.is_file()}
    code = cli_main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1, err
    assert __import__("re").search(message, err), err
    after = {p: p.read_bytes() for p in where.rglob("*") if p.is_file()}
    assert after == before  # nothing written, nothing overwritten
    return err


def test_out_equal_to_data_is_refused(small, capsys):
    _refused(capsys, _argv(small, "--out", str(small / "data.csv")),
             r"--out .*data.csv is the --data file: writing it would overwrite", small)
    argv = _argv(small, "--out", str(small / "a.csv"), "--summary", str(small / "domain.json"))
    _refused(capsys, argv, r"--summary .* is the --domain file", small)
    _refused(capsys, _argv(small, "--out-dir", str(small)), r"holds the --data file", small)


def test_out_to_a_directory_or_unwritable_path_names_the_path(small, capsys, monkeypatch):
    _refused(capsys, _argv(small, "--out", str(small)), r"--out .* is a directory", small)
    _refused(capsys, _argv(small, "--out", str(small / "data.csv" / "x.csv")),
             r"data.csv is not a directory", small)  # fmt: skip
    # an OS refusal while writing (here: the temporary file cannot be created) names the
    # target, not the temporary file
    import mmtoolkit.atomic as atomic

    def deny(*args, dir=None, prefix="", suffix=""):
        raise PermissionError(13, "Permission denied", f"{dir}/{prefix}abc{suffix}")

    monkeypatch.setattr(atomic.tempfile, "mkstemp", deny)
    err = _refused(capsys, _argv(small, "--out", str(small / "a.csv")),
                   r"cannot write .*a.csv: Permission denied", small)  # fmt: skip
    assert ".tmp" not in err and "abc" not in err


def test_negative_seed_names_the_flag(small, capsys):
    _refused(capsys, _argv(small, "--seed", "-1", "--out", str(small / "a.csv")),
             r"--seed must be a non-negative integer, got -1", small)  # fmt: skip


def test_latin1_and_bom(small, capsys):
    (small / "data.csv").write_bytes(b"a,b\n0,1\n2,\xe9\n")
    _refused(capsys, _argv(small, "--out", str(small / "a.csv")),
             r"data.csv, line 3: byte 0xe9 \(column 3\) is not UTF-8", small)  # fmt: skip
    # a byte-order mark (Excel's "CSV UTF-8") is read as UTF-8, in the data and the domain
    (small / "data.csv").write_bytes(b"\xef\xbb\xbfa,b\n0,1\n2,0\n")
    (small / "domain.json").write_bytes(b'\xef\xbb\xbf{"a": 3, "b": 2}')
    assert cli_main(_argv(small, "--out", str(small / "a.csv"), "--seed", "0")) == 0


def test_header_only_csv_warns_and_releases(small, capsys):
    (small / "data.csv").write_text("a,b\n")
    assert cli_main(_argv(small, "--out", str(small / "a.csv"), "--seed", "0")) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "has a header but no records" in err
    assert json.loads((small / "a.csv.json").read_text())["queries"] == 5


def test_ledger_refusal_draws_nothing_and_writes_nothing(small, capsys):
    ledger = small / "data.ledger"
    assert cli_main(["ledger", "init", str(ledger), "--rho", "0.3"]) == 0
    out = small / "a.csv"
    argv = ["release", "--data", str(small / "data.csv"), "--domain", str(small / "domain.json"),
            "--workload", "marginals:1", "--selector", "identity", "--rho", "0.25",
            "--ledger", str(ledger), "--seed", "0"]  # fmt: skip
    assert cli_main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
    s = json.loads((small / "a.csv.json").read_text())
    assert s["ledger"]["entry"] == 1 and s["spent"] == {"rho": 0.25}
    _refused(capsys, [*argv, "--out", str(small / "b.csv")],
             r"refused: .* would bring rho to 0.5, over the ledger's total 0.3", small)  # fmt: skip
    capsys.readouterr()
    assert cli_main(["ledger", "show", str(ledger)]) == 0
    shown = capsys.readouterr().out
    assert "rho = 0.25" in shown and "committed" in shown


def test_hb_on_a_huge_domain_ends_with_the_size_guard(tmp_path, capsys):
    (tmp_path / "d.json").write_text(json.dumps({"x": 10**12}))
    argv = ["release", "--domain", str(tmp_path / "d.json"), "--records", "10",
            "--workload", "marginals:1", "--selector", "hb", "--epsilon", "1",
            "--out", str(tmp_path / "a.csv")]  # fmt: skip
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "interval tree over 1000000000000 cells needs" in err and "machine's memory" in err


def test_opt0_on_all_ranges_of_a_million_cells_ends_with_the_size_guard(tmp_path, capsys):
    """OPT_0 on all ranges of 10^6 cells: the size-guard error, not a MemoryError (the guard
    itself is in selectors/hdmm/opt0.py)."""
    (tmp_path / "d.json").write_text(json.dumps({"x": {"size": 10**6, "numeric": True}}))
    argv = ["release", "--domain", str(tmp_path / "d.json"), "--records", "10",
            "--workload", "all_range", "--selector", "opt0", "--epsilon", "1",
            "--out", str(tmp_path / "a.csv")]  # fmt: skip
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "MAX_DENSE_ENTRIES" in err or "too large" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json"]


def test_out_dir_of_a_workload_without_tables_is_refused_before_the_charge(small, capsys):
    """--out-dir needs marginal-type tables: the identity workload is refused before the
    ledger is charged (it used to be refused after the release, with ρ committed)."""
    ledger = small / "data.ledger"
    assert cli_main(["ledger", "init", str(ledger), "--rho", "1"]) == 0
    argv = ["release", "--data", str(small / "data.csv"), "--domain", str(small / "domain.json"),
            "--workload", "identity", "--selector", "identity", "--rho", "0.3", "--seed", "0",
            "--ledger", str(ledger), "--out-dir", str(small / "outd")]  # fmt: skip
    capsys.readouterr()
    _refused(capsys, argv, r"--out-dir writes one CSV per marginal, .* use --out", small)
    from mmtoolkit.ledger import Ledger

    assert Ledger(ledger).entries == [] and not (small / "outd").exists()


def test_the_record_count_is_neither_in_the_ledger_nor_in_the_summary(small, capsys):
    """Under add/remove-one-record neighbours the number of records is private: the ledger
    (a shared bookkeeping file), the summary and the printed line do not give it."""
    (small / "data.csv").write_text("a,b\n" + "0,1\n2,0\n1,1\n" * 139)  # 417 records
    ledger = small / "data.ledger"
    assert cli_main(["ledger", "init", str(ledger), "--rho", "1"]) == 0
    argv = ["release", "--data", str(small / "data.csv"), "--domain", str(small / "domain.json"),
            "--workload", "marginals:1", "--selector", "identity", "--rho", "0.25",
            "--seed", "0", "--ledger", str(ledger), "--out", str(small / "a.csv")]  # fmt: skip
    capsys.readouterr()
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    summary = json.loads((small / "a.csv.json").read_text())
    assert "records" not in summary and "417" not in out
    import mmtoolkit as mm
    from mmtoolkit.ledger import Ledger
    from mmtoolkit.privacy import ZCDP

    R = records.read_csv(small / "data.csv", small / "domain.json")
    res = mm.release(R, "marginals:1", ZCDP(0.25), "identity", seed=0, ledger=ledger)
    assert len(R) == 417 and "records" not in res.summary
    texts = [e["description"] for e in Ledger(ledger).entries]
    assert texts[1] == "marginals:1 by identity" and not any("417" in t for t in texts)


def test_from_summary_keeps_the_classic_calibration_of_an_approx_dp_release(small, capsys):
    """A summary of ApproxDP(0.5, 1e-6, "classic") (σ = 10.598·Δ) replays with that
    calibration — it used to be rebuilt from the budget flags, analytic (σ = 8.058·Δ) — so
    the replayed answers are the original ones, byte for byte."""
    import mmtoolkit as mm
    from mmtoolkit.privacy import ApproxDP

    privacy = ApproxDP(0.5, 1e-6, "classic")
    res = mm.release(small / "data.csv", "marginals:1", privacy, "identity",
                     domain=small / "domain.json", seed=4)  # fmt: skip
    (small / "s.json").write_text(json.dumps(res.summary))
    argv = ["release", "--from-summary", str(small / "s.json"), "--data", str(small / "data.csv"),
            "--domain", str(small / "domain.json"), "--out", str(small / "again.csv")]  # fmt: skip
    assert cli_main(argv) == 0, capsys.readouterr().err
    again = json.loads((small / "again.csv.json").read_text())
    assert again["privacy_spec"] == privacy.to_spec() and "σ = 10.5976·Δ" in again["privacy"]
    header, rows = _read(small / "again.csv")
    assert [r[header.index("answer")] for r in rows] == list(map("{:.10g}".format, res.answers))
    # budget flags beside --from-summary replace the privacy (analytic, as the flags give it)
    argv[-1] = str(small / "flags.csv")
    assert cli_main([*argv, "--epsilon", "0.5", "--delta", "1e-6"]) == 0
    flags = json.loads((small / "flags.csv.json").read_text())
    assert flags["privacy_spec"]["calibration"] == "analytic"


def test_a_replay_of_a_replay_keeps_the_derived_selection_seed(tmp_path, capsys):
    """A replay's summary says its selection seed was derived from the seed, as the
    original's did, so replaying the replay with a new --seed derives a new selection seed
    too (a replay had stored the seed as given in params, and a later --seed kept it)."""
    (tmp_path / "d.json").write_text(json.dumps({"a": {"size": 4, "numeric": True}, "b": 3}))
    base = ["release", "--domain", str(tmp_path / "d.json"), "--records", "80", "--workload",
            "range_marginals:1", "--selector", "opt_kron", "--rho", "0.5"]  # fmt: skip
    assert cli_main([*base, "--seed", "0", "--out", str(tmp_path / "a.csv")]) == 0
    assert cli_main(["release", "--from-summary", str(tmp_path / "a.csv.json"),
                     "--out", str(tmp_path / "b.csv")]) == 0  # fmt: skip
    b = json.loads((tmp_path / "b.csv.json").read_text())
    assert b["selection_seed_source"] == "derived from seed"
    assert (tmp_path / "b.csv").read_bytes() == (tmp_path / "a.csv").read_bytes()
    assert cli_main(["release", "--from-summary", str(tmp_path / "b.csv.json"), "--seed", "1",
                     "--out", str(tmp_path / "c.csv")]) == 0, capsys.readouterr().err  # fmt: skip
    c = json.loads((tmp_path / "c.csv.json").read_text())
    derived = int(np.random.SeedSequence(1).spawn(2)[0].generate_state(1, np.uint32)[0])
    assert c["selection_seed"] == c["params"]["seed"] == derived
    assert c["selection_seed_source"] == "derived from seed"


# ============================================================ outputs are never inputs
def test_from_summary_cannot_overwrite_the_summary_it_reads(small, capsys):
    """``--from-summary a.csv.json --out a.csv`` would write its summary over the file it
    reads (it used to): refused, nothing written."""
    first = small / "a.csv"
    assert cli_main(_argv(small, "--seed", "0", "--out", str(first))) == 0
    _refused(capsys, ["release", "--from-summary", str(small / "a.csv.json"), "--out",
                      str(first)], r"--summary .*a\.csv\.json is the --from-summary file",
             small)  # fmt: skip
    _refused(capsys, ["release", "--from-summary", str(small / "a.csv.json"), "--out",
                      str(small / "b.csv"), "--summary", str(small / "a.csv.json")],
             r"--summary .* is the --from-summary file", small)  # fmt: skip


def test_outputs_are_compared_with_inputs_and_each_other_through_links(small, capsys):
    """Symbolic and hard links are resolved: an output that is an input (--data, --domain,
    --ledger, --from-summary) or another output under another name is refused."""
    assert cli_main(["ledger", "init", str(small / "l.json"), "--rho", "10"]) == 0
    assert cli_main(_argv(small, "--seed", "0", "--out", str(small / "a.csv"))) == 0
    (small / "to-data.csv").symlink_to("data.csv")
    (small / "to-ledger.json").symlink_to("l.json")
    (small / "to-summary.json").symlink_to("a.csv.json")
    (small / "x.csv").symlink_to("y.csv")  # a link to a file not written yet
    os.link(small / "domain.json", small / "hard-domain.json")
    capsys.readouterr()
    ledger = ["--ledger", str(small / "l.json")]
    for extra, message in [
        (["--out", str(small / "to-data.csv")], r"--out .*to-data\.csv is the --data file"),
        (["--out", str(small / "b.csv"), "--summary", str(small / "hard-domain.json")],
         r"--summary .*hard-domain\.json is the --domain file"),
        ([*ledger, "--out", str(small / "to-ledger.json")], r"--out .* is the --ledger file"),
        (["--from-summary", str(small / "a.csv.json"), "--out", str(small / "c.csv"),
          "--summary", str(small / "to-summary.json")], r"is the --from-summary file"),
        (["--out", str(small / "y.csv"), "--summary", str(small / "x.csv")],
         r"--out and --summary must be different files"),
    ]:  # fmt: skip
        _refused(capsys, _argv(small, *extra), message, small)


@pytest.mark.parametrize("flag", ["--out", "--summary", "--out-dir"])
def test_a_dash_is_not_an_output_file(small, capsys, flag):
    """``--out -`` used to write files named ``-`` and ``-.json``."""
    extra = ["--out", str(small / "a.csv")] if flag == "--summary" else []
    _refused(capsys, _argv(small, *extra, flag, "-"),
             rf"{flag} -: writing to standard output is not supported", small)  # fmt: skip
    assert not (small / "-").exists()


def test_synthetic_data_flags_are_refused_beside_data(small, capsys):
    """--records and --data-seed used to be ignored silently beside --data."""
    _refused(capsys, _argv(small, "--records", "10", "--out", str(small / "a.csv")),
             r"--records applies only to synthetic data \(without --data\)", small)  # fmt: skip
    _refused(capsys, _argv(small, "--records", "0", "--data-seed", "3", "--out",
                           str(small / "a.csv")),
             r"--records and --data-seed apply only to synthetic data", small)  # fmt: skip
    # a synthetic release replayed on a data file: the summary's synthetic parameters do not
    # come along (they are not flags given beside --data)
    argv = ["release", "--domain", str(small / "domain.json"), "--records", "20",
            "--workload", "marginals:1", "--selector", "identity", "--epsilon", "1",
            "--seed", "0", "--out", str(small / "s.csv")]  # fmt: skip
    assert cli_main(argv) == 0
    argv = ["release", "--from-summary", str(small / "s.csv.json"), "--data",
            str(small / "data.csv"), "--out", str(small / "t.csv")]  # fmt: skip
    assert cli_main(argv) == 0, capsys.readouterr().err
    assert json.loads((small / "t.csv.json").read_text())["synthetic"] is None


def test_an_out_dir_holding_another_release_is_refused_before_the_charge(small, capsys):
    """A reused --out-dir used to keep the previous release's tables beside the new ones
    under a summary describing only the new one. The same command again rewrites its own
    files; a directory holding any file it would not write is refused before the ledger is
    charged."""
    (small / "data.csv").write_text("a,b,c\n0,1,0\n2,0,1\n")
    (small / "domain.json").write_text(json.dumps({"a": 3, "b": 2, "c": 2}))
    ledger = small / "l.json"
    assert cli_main(["ledger", "init", str(ledger), "--rho", "10"]) == 0
    out_dir = small / "tables"

    def argv(workload, seed):
        return ["release", "--data", str(small / "data.csv"), "--domain",
                str(small / "domain.json"), "--workload", workload, "--selector", "identity",
                "--rho", "1", "--seed", str(seed), "--ledger", str(ledger),
                "--out-dir", str(out_dir)]  # fmt: skip

    assert cli_main(argv("marginals:2", 0)) == 0
    first = sorted(p.name for p in out_dir.iterdir())
    assert first == ["a__b.csv", "a__c.csv", "b__c.csv", "summary.json"]
    assert cli_main(argv("marginals:2", 1)) == 0  # the same tables: rewritten
    assert sorted(p.name for p in out_dir.iterdir()) == first
    from mmtoolkit.ledger import Ledger

    assert len(Ledger(ledger).entries) == 2
    capsys.readouterr()
    _refused(capsys, argv("marginals:1", 2),
             r"--out-dir .*tables holds 'a__b\.csv' and 2 more, which this release does not "
             r"write", small)  # fmt: skip
    assert len(Ledger(ledger).entries) == 2  # nothing charged
    for p in out_dir.iterdir():
        p.unlink()
    (out_dir / "notes.txt").write_text("mine")
    _refused(capsys, argv("marginals:2", 3), r"holds 'notes\.txt', which", small)
    (out_dir / "notes.txt").unlink()
    assert cli_main(argv("marginals:1", 4)) == 0  # an empty directory is fine
    _refused(capsys, [*argv("marginals:2", 5), "--summary", str(out_dir / "a__b.csv")],
             r"--summary .*a__b\.csv is one of the tables --out-dir writes", small)  # fmt: skip


def test_a_summary_is_read_as_strict_json(small, capsys):
    assert cli_main(_argv(small, "--seed", "0", "--out", str(small / "a.csv"))) == 0
    text = (small / "a.csv.json").read_text()
    assert text.count('"seed": 0,') == 1
    (small / "a.csv.json").write_text(text.replace('"seed": 0,', '"seed": 0, "seed": 7,'))
    _refused(capsys, ["release", "--from-summary", str(small / "a.csv.json"),
                      "--out", str(small / "b.csv")],
             r"--from-summary .*a\.csv\.json: not strict JSON: seed: the key 'seed' is given "
             r"twice", small)  # fmt: skip


def test_no_summary_is_written_with_a_non_finite_number(small, capsys):
    """ρ = 1e-320 makes the noise variance overflow: the release is refused with a one-line
    error and nothing is written (the summary used to hold the non-JSON ``Infinity``)."""
    argv = ["release", "--data", str(small / "data.csv"), "--domain", str(small / "domain.json"),
            "--workload", "marginals:1", "--selector", "identity", "--rho", "1e-320",
            "--seed", "0", "--out", str(small / "a.csv")]  # fmt: skip
    _refused(capsys, argv, r"^mmtoolkit release: error: ", small)


def test_an_output_path_in_a_symlink_loop_is_no_traceback(small, capsys):
    """Comparing an output with the inputs resolves links; a loop (loop1 -> loop2 -> loop1)
    used to raise RuntimeError out of the command. Written atomically, the output replaces
    the link itself."""
    (small / "loop1").symlink_to("loop2")
    (small / "loop2").symlink_to("loop1")
    assert cli_main(_argv(small, "--seed", "0", "--out", str(small / "loop1"))) == 0
    assert not (small / "loop1").is_symlink() and (small / "loop1.json").is_file()


def test_a_directory_as_out_and_mistyped_summary_fields_are_clear_errors(small, capsys):
    """``--out .`` said "PosixPath('.') has an empty name"; a summary whose seed is text or
    whose params are a list reached ``'<' not supported`` / a dict() TypeError."""
    _refused(capsys, _argv(small, "--out", "."), r"--out \. is a directory", small)
    _refused(capsys, _argv(small, "--out", str(small)), r"is a directory; give a file name", small)
    good = {"workload": "marginals:1", "selector": "identity", "params": {},
            "privacy_spec": {"kind": "pure", "epsilon": 1.0}, "seed": 1,
            "data_file": str(small / "data.csv"),
            "domain_file": str(small / "domain.json")}  # fmt: skip
    for key, value, what in (
        ("seed", "x", "a non-negative integer"),
        ("seed", True, "a non-negative integer"),
        ("params", [1], "an object of selector parameters"),
        ("releases", 2.5, "a positive integer"),
        ("selector", 3, "a selector name"),
    ):
        (small / "s.json").write_text(json.dumps({**good, key: value}))
        argv = ["release", "--from-summary", str(small / "s.json"), "--out", str(small / "o.csv")]
        _refused(capsys, argv, rf"--from-summary .*s.json: {key} must be {what}", small)


def test_synthetic_records_beyond_memory_are_refused_before_any_array():
    from mmtoolkit.linalg import TooLargeError

    with pytest.raises(TooLargeError, match="synthetic records .* more than this machine"):
        records.synthetic({"a": 10, "b": 3}, 10**12)
    # drawn in blocks of rows, the same records as one block (the block is an implementation
    # detail: a smaller one must not change a single code)
    import mmtoolkit.records as rec

    whole = records.synthetic({"a": 7, "b": 50, "c": 3}, 3000, seed=5).codes
    old, rec.SYNTHETIC_BLOCK = rec.SYNTHETIC_BLOCK, 64
    try:
        assert np.array_equal(records.synthetic({"a": 7, "b": 50, "c": 3}, 3000, seed=5).codes,
                              whole)  # fmt: skip
    finally:
        rec.SYNTHETIC_BLOCK = old
