"""mmtoolkit.compare_data / `mmtoolkit compare --data`: measured error of whole pipelines on
records (selector × post-processing, and the peers AIM and MST), one job per (method, ε,
trial) in the runner's job store, bad input, the summary and the plot."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from mmtoolkit import compare_data as cd
from mmtoolkit import records
from mmtoolkit.cli import main
from mmtoolkit.compare_data import CompareDataError, compare_data, summarize
from mmtoolkit.domain import Domain
from mmtoolkit.runner.store import JobStore

DOMAIN = Domain(["a", "b", "c", "d"], [3, 4, 2, 5], [False, False, False, True])
SELECTORS = "identity,hdmm:restarts=1,residual_planner"
FAST = ("least_squares", "nonnegative")  # Private-PGM: its own test (JAX compiles per model)


@pytest.fixture(scope="module")
def recs():
    return records.synthetic(DOMAIN, 1500, seed=3)


def _run(recs, **kw):
    args = {"trials": 2, "selectors": SELECTORS, "postprocess": FAST, "peers": (),
            "timeout": None, "jobs": 1, "pgm_iters": 100, "progress": False}  # fmt: skip
    workload, eps = kw.pop("workload", "marginals:k=2"), kw.pop("eps", [0.5, 5])
    return compare_data(recs, workload, eps, **{**args, **kw})


@pytest.fixture(scope="module")
def frame(recs):
    return _run(recs)


def test_every_selector_and_postprocessing_is_a_row_per_epsilon_and_trial(frame):
    assert list(frame.columns) == list(cd.COLUMNS)
    methods = [f"{s}+{p}" for s in ("identity", "hdmm", "residual_planner") for p in FAST]
    assert list(dict.fromkeys(frame["method"])) == methods
    assert len(frame) == len(methods) * 2 * 2
    assert (frame["status"] == "ok").all(), frame[frame["status"] != "ok"]
    assert np.isfinite(frame[["l1_error", "rmse", "seconds"]].to_numpy(dtype=float)).all()
    # ρ is the one conversion of ε at δ = 1e-9 for every method
    for eps, g in frame.groupby("epsilon"):
        assert g["rho"].nunique() == 1
        assert cd.ZCDP(g["rho"].iloc[0]).to_approx_dp_tight(1e-9) <= eps


def test_clipping_never_raises_the_l1_error_of_the_same_noisy_answers(frame):
    # least squares and its clipped answers come from one noisy release per (selector, ε,
    # trial): clipping a negative estimate of a count (>= 0) towards 0 cannot move it away
    ls = frame[frame["postprocess"] == "least_squares"].set_index(["selector", "epsilon", "trial"])
    nn = frame[frame["postprocess"] == "nonnegative"].set_index(["selector", "epsilon", "trial"])
    assert (nn["l1_error"] <= ls["l1_error"] + 1e-12).all()
    assert (nn["l1_error"] < ls["l1_error"]).any()  # at ε = 0.5 some answers are negative


def test_one_seed_determines_every_number_and_another_seed_changes_them(recs, frame):
    again = _run(recs)
    cols = ["l1_error", "rmse"]
    np.testing.assert_array_equal(again[cols].to_numpy(), frame[cols].to_numpy())
    other = _run(recs, seed=1)
    assert not np.any(other[cols].to_numpy() == frame[cols].to_numpy())


def test_private_pgm_is_a_job_per_trial_with_its_own_noise(recs):
    # in forked workers (a time limit), as the command line runs it: JAX never starts in
    # this process, which later tests fork
    df = _run(recs, workload="marginals:k=1", selectors="residual_planner", postprocess="pgm",
              eps=[1.0], timeout=600)  # fmt: skip
    assert list(df["method"]) == ["residual_planner+pgm"] * 2
    assert (df["status"] == "ok").all(), df["reason"].tolist()
    assert np.isfinite(df[["l1_error", "rmse"]].to_numpy(dtype=float)).all()
    assert df["l1_error"].iloc[0] != df["l1_error"].iloc[1]  # two trials, two noise draws


_FORK_AFTER_JAX = """
import numpy as np
from mmtoolkit import pgm, records
from mmtoolkit.compare_data import CompareDataError, compare_data
from mmtoolkit.domain import Domain

recs = records.synthetic(Domain(["a", "b"], [3, 4]), 500, seed=1)
args = dict(selectors="residual_planner", postprocess=("pgm",), peers=(), trials=1,
            pgm_iters=50, progress=False)
assert not pgm.jax_running()
df = compare_data(recs, "marginals:k=1", [1.0], jobs=1, timeout=None, **args)  # in process
assert (df["status"] == "ok").all() and pgm.jax_running()
for jobs, timeout in ((1, 600.0), (2, None)):
    try:
        compare_data(recs, "marginals:k=1", [1.0], jobs=jobs, timeout=timeout, **args)
    except CompareDataError as exc:
        assert "JAX has already started in this process" in str(exc), exc
        assert f"jobs={jobs}, timeout={timeout}" in str(exc), exc
    else:
        raise AssertionError("forked Private-PGM jobs after JAX started were not refused")
print("refused")
"""


def test_forked_private_pgm_after_jax_started_here_is_refused_not_a_deadlock():
    """A fork of a process running JAX deadlocks in the child's first JAX call: after a fit in
    this process, forked Private-PGM jobs are refused at once (in a subprocess: JAX must not
    start in the test process, which later tests fork)."""
    import subprocess
    import sys

    pytest.importorskip("mbi")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _FORK_AFTER_JAX], capture_output=True,
                         text=True, timeout=300, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("refused")


def test_errors_are_the_mean_normalised_l1_and_the_rmse_of_counts(recs):
    truth = [recs.marginal(["a", "b"]), recs.marginal(["c"])]
    assert cd.errors(truth, truth, len(recs)) == (0.0, 0.0)
    shifted = [t + 1.0 for t in truth]  # every cell off by one count
    l1, rmse = cd.errors(shifted, truth, len(recs))
    assert l1 == pytest.approx(np.mean([t.size for t in truth]) / len(recs), rel=1e-12)
    assert rmse == pytest.approx(1.0, rel=1e-12)
    with pytest.raises(ValueError, match="non-finite"):
        cd.errors([truth[0] * np.nan, truth[1]], truth, len(recs))


def test_summary_mean_and_interval_over_trials(frame):
    s = summarize(frame)
    assert list(s.columns) == list(cd.SUMMARY_COLUMNS)
    assert len(s) == frame.groupby(["method", "epsilon"]).ngroups
    row = s.iloc[0]
    vals = frame[(frame["method"] == row["method"]) & (frame["epsilon"] == row["epsilon"])]
    assert row["l1_error"] == pytest.approx(vals["l1_error"].mean(), rel=1e-12)
    assert row["l1_low"] < row["l1_error"] < row["l1_high"]
    assert row["trials"] == 2
    text = cd.format_summary(s)
    assert "identity+least_squares" in text and "δ = 1e-09" in text


def test_plot_is_a_png(frame, tmp_path):
    path = tmp_path / "errors.png"
    cd.plot_errors(summarize(frame), path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # no "Software" chunk naming the matplotlib version: a committed figure is the same bytes
    # under any version
    assert b"Software" not in data and b"Matplotlib" not in data


@pytest.mark.parametrize("bad", [1.5, 0, "0.9", True])
def test_summary_level_is_checked(bad):
    """A level outside (0, 1) gave NaN intervals: a CompareDataError naming it."""
    import pandas as pd

    with pytest.raises(CompareDataError, match="^level: "):
        summarize(pd.DataFrame(columns=list(cd.COLUMNS)), level=bad)


def test_plot_metric_is_checked(tmp_path):
    """An unknown metric was a KeyError: a CompareDataError naming it, nothing written."""
    import pandas as pd

    path = tmp_path / "errors.png"
    with pytest.raises(CompareDataError, match="^metric: unknown 'l2'"):
        cd.plot_errors(summarize(pd.DataFrame(columns=list(cd.COLUMNS))), path, metric="l2")
    assert not path.exists()


def test_resume_recomputes_none_of_the_finished_jobs(recs, tmp_path, monkeypatch):
    store = tmp_path / "jobs.jsonl"
    kw = {"selectors": "residual_planner", "store": store, "eps": [1.0], "trials": 3}
    real, calls = cd._estimate, []

    def interrupted(job, ctx, seed):  # a kill after three finished jobs
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(job["method"])
        return real(job, ctx, seed)

    monkeypatch.setattr(cd, "_estimate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run(recs, **kw)
    assert len(JobStore(store).load()) == 3
    monkeypatch.setattr(cd, "_estimate", real)
    resumed = _run(recs, **kw)
    total = len(resumed)
    assert (resumed.attrs["computed"], resumed.attrs["reused"]) == (total - 3, 3)
    fresh = _run(recs, **{**kw, "store": tmp_path / "other.jsonl"})
    cols = ["l1_error", "rmse"]
    np.testing.assert_array_equal(resumed[cols].to_numpy(), fresh[cols].to_numpy())
    again = _run(recs, **kw)
    assert (again.attrs["computed"], again.attrs["reused"]) == (0, total)


def test_a_job_over_its_time_limit_is_a_timeout_row(recs, monkeypatch):
    import time

    def slow(job, ctx, seed):
        time.sleep(30)

    monkeypatch.setattr(cd, "_estimate", slow)
    df = _run(recs, selectors="identity", postprocess="least_squares", eps=[1.0], trials=1,
              timeout=1.0)  # fmt: skip
    assert list(df["status"]) == ["timeout"]
    assert math.isnan(df["l1_error"].iloc[0])


def test_a_selector_that_does_not_apply_is_a_row_with_its_reason(recs):
    df = _run(recs, workload="marginals:k=1", selectors="datacube",
              postprocess="least_squares", eps=[1.0], trials=1)  # fmt: skip
    assert list(df["status"]) == ["not applicable"]
    assert df["reason"].iloc[0]


# ----------------------------------------------------------------------------- bad input
def test_workload_attribute_not_in_the_domain_is_refused_naming_it(recs):
    with pytest.raises(CompareDataError, match="zz"):
        _run(recs, workload="marginals_list:attr_sets=[[a,zz]]")


def test_a_workload_that_is_not_marginals_is_refused(recs):
    with pytest.raises(CompareDataError, match="workload of marginals"):
        _run(recs, workload="prefix_marginals:k=1")


@pytest.mark.parametrize("eps", [[0.0], [1.0, -1.0], "1,nan", "x", []])
def test_epsilon_must_be_positive(recs, eps):
    with pytest.raises(CompareDataError, match="epsilon"):
        _run(recs, eps=eps)


def test_missing_peer_extra_is_named_before_any_job(recs, tmp_path, monkeypatch):
    broken = tmp_path / "worker.py"
    broken.write_text("import opendp_is_not_installed_here\n")  # the probe's import fails
    monkeypatch.setattr(cd, "_WORKER", broken)
    store = tmp_path / "jobs.jsonl"
    with pytest.raises(CompareDataError, match=r"mmtoolkit\[peers\]") as info:
        _run(recs, peers=("aim",), store=store)
    assert "opendp_is_not_installed_here" in str(info.value)
    assert not store.exists()


def test_all_selectors_means_every_registered_one():
    from mmtoolkit.selectors import available

    methods = cd._methods("all", ["least_squares"], ())
    assert [m.selector for m in methods] == available()


def test_unknown_method_names_are_refused(recs):
    with pytest.raises(CompareDataError, match="postprocess"):
        _run(recs, postprocess="clipped")
    with pytest.raises(CompareDataError, match="peers"):
        _run(recs, peers=("mwem",))
    with pytest.raises(CompareDataError, match="selectors"):
        _run(recs, selectors="nope")
    with pytest.raises(CompareDataError, match="selectors"):
        _run(recs, selectors="")


# ----------------------------------------------------------------------------- command line
@pytest.fixture(scope="module")
def files(tmp_path_factory, recs):
    d = tmp_path_factory.mktemp("data")
    (d / "domain.json").write_text(json.dumps(dict(zip(DOMAIN.names, DOMAIN.sizes))))
    rows = ["a,b,c,d"] + [",".join(map(str, r)) for r in recs.codes]
    (d / "data.csv").write_text("\n".join(rows) + "\n")
    return d


def test_command_line_prints_the_summary_and_writes_csv_plot_and_store(files, capsys):
    out, png = files / "out.csv", files / "out.png"
    code = main(["compare", "--data", str(files / "data.csv"), "--domain",
                 str(files / "domain.json"), "--workload", "marginals:k=2", "--epsilon",
                 "0.5,5", "--trials", "2", "--selectors", "residual_planner", "--peers", "none",
                 "--postprocess", "least_squares,nonnegative", "--timeout", "0", "-j", "1",
                 "--out", str(out), "--plot", str(png), "-q"])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    assert "residual_planner+nonnegative" in printed and "95% CI" in printed
    lines = out.read_text().splitlines()
    assert lines[0].split(",") == list(cd.COLUMNS) and len(lines) == 1 + 2 * 2 * 2
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert len(JobStore(files / "out.csv.jobs.jsonl").load()) == 8


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--epsilon", "1,-1"], "epsilon"),
        (["--epsilon", "1", "--workload", "marginals_list:attr_sets=[[a,zz]]"], "zz"),
        (["--rho", "1"], "--epsilon"),
        (["--epsilon", "1", "--trials", "0"], "trials"),
    ],
)
def test_command_line_bad_input_is_one_line_and_exit_2(files, capsys, args, needle):
    base = ["compare", "--data", str(files / "data.csv"), "--domain",
            str(files / "domain.json"), "--workload", "marginals:k=2", "--peers", "none"]
    if "--workload" in args:
        i = base.index("--workload")
        del base[i : i + 2]
    code = main(base + args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("mmtoolkit compare: error: ") and needle in err[0]


# ----------------------------------------------------------------------------- the peers
def _peers_usable() -> bool:
    if not os.environ.get(cd.PEERS_ENV):  # the extra lives in an environment of its own
        return False
    try:
        cd.check_peers()
    except CompareDataError:
        return False
    return True


@pytest.mark.skipif(not _peers_usable(), reason=f"{cd.PEERS_ENV} unset or unusable")
def test_peers_answer_every_marginal_with_the_same_rho(recs):
    # runs where MMTOOLKIT_PEERS_PYTHON (or this interpreter) has OpenDP's mbi extra
    df = _run(recs, selectors=(), postprocess=(), peers=cd.PEERS, eps=[50.0], trials=1,
              workload="marginals:k=2")  # fmt: skip
    assert list(df["method"]) == list(cd.PEERS)
    assert (df["status"] == "ok").all(), df["reason"].tolist()
    # at ε = 50 AIM measures every 2-way marginal with little noise; MST keeps a tree of
    # them, so its error includes the model's: both far below the data's own scale
    assert (df["l1_error"] < 0.5).all()


# ----------------------------------------------------------------------------- as a config
def test_a_comparison_config_runs_through_mmtoolkit_run_and_resumes(files, tmp_path, capsys):
    from mmtoolkit.runner.config import load_config
    from mmtoolkit.runner.report import config_paths

    cfg = tmp_path / "configs" / "toy" / "small.compare.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(
        f"paper: toy\ntable: small\ndata: {files / 'data.csv'}\ndomain: {files / 'domain.json'}\n"
        "workload: marginals:k=3\nepsilons: [0.5, 5]\ntrials: 3\nselectors: residual_planner\n"
        "postprocess: [least_squares]\npeers: []\ntimeout: 600\n"
        "quick:\n  workload: \"marginals_list:attr_sets=[[a,b]]\"\n  trials: 2\n"
    )
    results = tmp_path / "results"
    assert main(["run", "-q", "--results", str(results), str(cfg)]) == 0
    capsys.readouterr()
    table = results / "toy" / "small.csv"
    lines = table.read_text().splitlines()
    assert lines[0].split(",") == list(cd.SUMMARY_COLUMNS) and len(lines) == 1 + 2
    assert "residual_planner+least_squares" in (results / "toy" / "small.md").read_text()
    assert (results / "toy" / "small.png").read_bytes()[:4] == b"\x89PNG"
    store = JobStore(results / "toy" / ".jobs" / "small.jsonl")
    assert len(store.load()) == 2 * 3
    before = table.read_bytes()
    assert main(["run", "--results", str(results), str(cfg)]) == 0
    assert "resuming: 6 of 6 jobs" in capsys.readouterr().err
    assert table.read_bytes() == before  # nothing recomputed, the same table
    assert main(["run", "-q", "--quick", "--results", str(results), str(cfg)]) == 0
    assert len((results / "quick" / "toy" / "small.csv").read_text().splitlines()) == 1 + 2
    # the scoreboard and the table-config loader leave it out, saying what it is
    assert cfg not in config_paths(tmp_path / "configs")
    with pytest.raises(ValueError, match="comparison config"):
        load_config(cfg)


def test_a_comparison_config_with_a_bad_field_names_it(files, tmp_path, capsys):
    cfg = tmp_path / "bad.compare.yaml"
    cfg.write_text(f"paper: toy\ntable: t\ndata: {files / 'data.csv'}\ndomain: "
                   f"{files / 'domain.json'}\nworkload: marginals:k=1\nepsilons: [1, 0]\n")
    assert main(["run", "-q", "--results", str(tmp_path / "r"), str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "bad.compare.yaml" in err and "epsilons" in err
