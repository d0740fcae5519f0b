"""The mmtoolkit command: run, list, exit codes."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from mmtoolkit import evaluate, workloads
from mmtoolkit.cli import main
from mmtoolkit.domain import Domain
from mmtoolkit.linalg import Identity
from mmtoolkit.privacy import PureDP
from mmtoolkit.selectors.base import _REGISTRY, Selector, register

REPO = Path(__file__).resolve().parents[1]

CONFIG = {
    "paper": "toy",
    "table": "cli",
    "metric": "rmse",
    "privacy": {"kind": "pure", "epsilon": 1.0},
    "tolerance": {"rel": 0.01},
    "columns": [
        {"name": "Identity", "selector": "identity"},
        {"name": "LM", "selector": "laplace"},
    ],
    "rows": [
        {
            "name": "1-way",
            "workload": {"kind": "marginals", "domain": {"sizes": [2, 3]}, "k": 1},
            "paper": {"Identity": 1.0},
        },
        {"name": "prefix", "workload": {"kind": "prefix", "n": 8}},
    ],
}


def write(tmp_path, data, name="cli.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return {(r["row"], r["column"]): r for r in csv.DictReader(f)}


def test_run_writes_results_equal_to_evaluator(tmp_path, capsys):
    cfg = write(tmp_path, CONFIG)
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--results", str(out)]) == 0
    captured = capsys.readouterr()
    assert "[1/4] 1-way × Identity: " in captured.err
    assert "toy/cli.csv" in captured.out
    rows = read_csv(out / "toy" / "cli.csv")
    privacy = PureDP(1.0)
    Ws = {"1-way": workloads.marginals(Domain.from_sizes([2, 3]), 1), "prefix": workloads.prefix(8)}
    for name, W in Ws.items():
        assert float(rows[(name, "Identity")]["ours"]) == pytest.approx(
            evaluate.rmse(W, Identity(W.shape[1]), privacy), rel=1e-12
        )
        # LM under ε-DP: RMSE = sqrt(2) · sens₁(W) / ε, sens₁ = max column L1 norm
        l1 = np.abs(W.dense()).sum(axis=0).max()
        assert float(rows[(name, "LM")]["ours"]) == pytest.approx(math.sqrt(2) * l1)
    # Identity under ε-DP on the 1-way marginals: Err = 2·||W||_F² = 24 over 5 queries
    assert float(rows[("1-way", "Identity")]["ours"]) == pytest.approx(math.sqrt(24 / 5))
    assert rows[("1-way", "Identity")]["within_tol"] == "false"
    md = (out / "toy" / "cli.md").read_text(encoding="utf-8")
    assert "Identity ours" in md and "Identity paper" in md


def test_config_error_exits_2_with_one_line(tmp_path, capsys):
    bad = dict(CONFIG, columns=[{"name": "X", "selector": "no_such_selector"}])
    path = write(tmp_path, bad, "bad.yaml")
    good = write(tmp_path, CONFIG, "good.yaml")
    assert main(["run", str(good), str(path), "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "bad.yaml: columns[0].selector: unknown selector 'no_such_selector'" in err
    assert "Traceback" not in err
    assert not (tmp_path / "r").exists()  # nothing runs when any config is malformed


def test_missing_config_exits_2(tmp_path, capsys):
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


class _Broken(Selector):
    name = "_test_cli_broken"
    method = "test-only selector"
    paper = "none"

    def _select(self, workload, privacy, objective):
        raise ValueError("unsupported workload")


def test_failed_cell_exits_1(tmp_path, capsys):
    added = _Broken.name not in _REGISTRY
    if added:
        register(_Broken)
    try:
        data = dict(CONFIG, columns=CONFIG["columns"] + [{"name": "B", "selector": _Broken.name}])
        assert main(["run", str(write(tmp_path, data)), "--results", str(tmp_path)]) == 1
    finally:
        if added:
            _REGISTRY.pop(_Broken.name, None)
    rows = read_csv(tmp_path / "toy" / "cli.csv")
    assert "ValueError: unsupported workload" in rows[("prefix", "B")]["note"]
    assert rows[("prefix", "LM")]["ours"] != ""
    assert "2 failed" in capsys.readouterr().out


def test_list_selectors(capsys):
    assert main(["list", "selectors"]) == 0
    names = capsys.readouterr().out.split()
    assert "identity" in names and "laplace" in names


def test_list_datasets_workloads_configs(capsys, tmp_path):
    assert main(["list", "datasets"]) == 0
    assert "adult" in capsys.readouterr().out.split()
    assert main(["list", "workloads"]) == 0
    assert "marginals" in capsys.readouterr().out.split()
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "t.yaml").write_text("x: 1\n")
    (tmp_path / "p" / "readme.txt").write_text("x\n")
    assert main(["list", "configs", "--configs-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "p" / "t.yaml")]


def test_list_configs_default_finds_repo_configs(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(["list", "configs"]) == 0
    assert "configs/residual_planner/table4.yaml" in capsys.readouterr().out


def test_list_everything(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for heading in ("selectors:", "datasets:", "workloads:", "configs:"):
        assert heading in out


def test_python_dash_m(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "mmtoolkit", "list", "selectors"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "identity" in proc.stdout.split()


def test_bad_usage_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2


def test_run_options_resume_fresh_jobs_quick(tmp_path, capsys):
    cfg = write(tmp_path, CONFIG)
    out = tmp_path / "out"
    assert main(["run", str(cfg), "--results", str(out), "-j", "2"]) == 0
    first = read_csv(out / "toy" / "cli.csv")
    err = capsys.readouterr().err
    assert "[4/4] " in err and "ETA" in err
    # a second run resumes everything from the job store; --fresh recomputes
    assert main(["run", str(cfg), "--results", str(out)]) == 0
    err = capsys.readouterr().err
    assert "resuming: 4 of 4 jobs already in" in err and "[1/" not in err
    assert main(["run", str(cfg), "--results", str(out), "--fresh"]) == 0
    assert "[4/4] " in capsys.readouterr().err
    for key, row in read_csv(out / "toy" / "cli.csv").items():
        assert row["ours"] == first[key]["ours"]
    # --quick: the first row only, into quick/toy/cli.quick.csv
    assert main(["run", str(cfg), "--results", str(out), "--quick"]) == 0
    quick = read_csv(out / "quick" / "toy" / "cli.quick.csv")
    assert sorted(quick) == [("1-way", "Identity"), ("1-way", "LM")]
    assert quick[("1-way", "LM")]["ours"] == first[("1-way", "LM")]["ours"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["-j", "0"], "jobs: must be >= 1, got 0"),
        (["--executor", "dask"], "needs --scheduler"),
    ],
)
def test_bad_run_options_exit_2(tmp_path, capsys, args, message):
    cfg = write(tmp_path, CONFIG)
    assert main(["run", str(cfg), "--results", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


class _Interrupt(Selector):
    name = "_test_cli_interrupt"
    method = "test-only selector"
    paper = "none"

    def _select(self, workload, privacy, objective):
        raise KeyboardInterrupt


def test_interrupted_run_exits_130_and_keeps_finished_jobs(tmp_path, capsys):
    register(_Interrupt)
    try:
        data = dict(
            CONFIG, columns=CONFIG["columns"] + [{"name": "X", "selector": _Interrupt.name}]
        )
        cfg = write(tmp_path, data)
        assert main(["run", str(cfg), "--results", str(tmp_path)]) == 130
    finally:
        _REGISTRY.pop(_Interrupt.name, None)
    assert "interrupted; finished jobs are kept" in capsys.readouterr().err
    store = (tmp_path / "toy" / ".jobs" / "cli.jsonl").read_text().splitlines()
    assert len(store) == 2  # 1-way × Identity and 1-way × LM finished before the interrupt


@pytest.mark.parametrize("buffered", [True, False])
def test_a_closed_stdout_ends_every_subcommand_quietly(tmp_path, buffered):
    """``mmtoolkit ledger show L | head -3`` used to print "[Errno 32] Broken pipe" (ledger)
    or a BrokenPipeError traceback (list), or fail in the interpreter's last flush: each
    subcommand now exits with 141 and says nothing, whether Python's stdout is buffered (the
    error shows in the last flush) or not (it shows in print)."""
    import os

    ledger = tmp_path / "l.json"
    assert main(["ledger", "init", str(ledger), "--rho", "1"]) == 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(REPO)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    commands = [
        ["list", "selectors"],
        ["ledger", "show", str(ledger)],
        ["release", "--workload", "marginals:1", "--selector", "identity", "--rho", "1",
         "--records", "20", "--seed", "0", "--out", str(tmp_path / "a.csv")],
    ]  # fmt: skip
    for argv in commands:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mmtoolkit", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
        )
        proc.stdout.close()  # the reader is gone before anything is printed
        err = proc.stderr.read().decode()
        proc.stderr.close()
        assert proc.wait(timeout=300) == 141 and err == "", (argv, err)
    # started with standard output closed (sys.stdout is None): nothing to report
    done = subprocess.run(
        f"{sys.executable} -m mmtoolkit list workloads >&-",
        shell=True, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
