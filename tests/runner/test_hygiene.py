"""Runner hygiene: a rerun with unchanged code rewrites no committed byte (no timings, no
memory addresses, no path spellings in the tables and figures), quick runs stay under the
ignored ``results/quick/``, and the README's main job leaves a fresh clone clean."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from mmtoolkit.cli import main
from mmtoolkit.jsonsafe import jsonable, stable_text
from mmtoolkit.linalg import Identity
from mmtoolkit.runner import run_config
from mmtoolkit.runner.jobs import split_timings
from mmtoolkit.runner.plots import plot_file
from mmtoolkit.runner.report import reproduce, write_report
from mmtoolkit.runner.store import read_timings, timings_path
from mmtoolkit.selectors.base import _REGISTRY, Selector, register
from mmtoolkit.strategy import Strategy

REPO = Path(__file__).resolve().parents[2]


class _Plan:
    """An object with the default repr (``<... _Plan object at 0x...>``)."""


class _Timed(Selector):
    """Identity strategy whose metadata holds what real selectors put there: an object, a
    timing, a nested timing next to a deterministic count."""

    name = "_test_timed"
    method = "identity strategy with volatile metadata (test)"
    paper = "none (test fixture)"

    def __init__(self):
        self.params = {}

    def _select(self, workload, privacy, objective):
        start = time.perf_counter()
        n = workload.shape[1]
        meta = {
            "plan": _Plan(),
            "cells": n,
            "parse_seconds": time.perf_counter() - start,
            "solver": {"iterations": 3, "solve_time": time.perf_counter()},
        }
        return Strategy(Identity(n), self.name, metadata=meta)


@pytest.fixture
def timed_selector():
    added = _Timed.name not in _REGISTRY
    if added:
        register(_Timed)
    yield
    if added:
        _REGISTRY.pop(_Timed.name, None)


CONFIG = {
    "paper": "toy",
    "table": "hyg",
    "title": "Hygiene toy table",
    "metric": "rmse",
    "privacy": {"kind": "zcdp", "rho": 0.5},
    "tolerance": {"abs": 0.0005},
    "seed": 3,
    "columns": [
        {"name": "Timed", "selector": "_test_timed"},
        {"name": "SVDB", "svd_bound": True},
        {"name": "LM", "selector": "laplace"},
    ],
    "rows": [
        {"name": "prefix 8", "workload": {"kind": "prefix", "n": 8}, "paper": {"LM": 2.828}},
        {"name": "prefix 16", "workload": {"kind": "prefix", "n": 16}},
    ],
    "figures": [{"name": "rmse", "kind": "bar", "columns": ["Timed", "LM"]}],
    "quick": {"columns": ["Timed", "SVDB"]},
}


def _tree(root: Path) -> tuple[Path, Path]:
    """A repository-like tree: configs/toy/hyg.yaml and an empty results/."""
    (root / "configs" / "toy").mkdir(parents=True)
    (root / "results").mkdir()
    path = root / "configs" / "toy" / "hyg.yaml"
    path.write_text(yaml.safe_dump(CONFIG, allow_unicode=True, sort_keys=False), "utf-8")
    return path, root / "results"


def _snapshot(results: Path) -> dict[str, bytes]:
    """Every file under ``results`` except the git-ignored ones (job stores, quick runs)."""
    return {
        p.relative_to(results).as_posix(): p.read_bytes()
        for p in sorted(results.rglob("*"))
        if p.is_file()
        and ".jobs" not in p.relative_to(results).parts
        and p.relative_to(results).parts[0] != "quick"
    }


def test_stable_text_drops_memory_addresses():
    assert stable_text("<mmtoolkit.residual.plan.ResidualPlan object at 0x7ff80a2a9690>") == (
        "<ResidualPlan>"
    )
    assert stable_text("[<a.B object at 0xDEADbeef>, <c.D object at 0x1>]") == "[<B>, <D>]"
    assert stable_text("<function f at 0x7f00>") == "<function f>"
    assert stable_text("Plan(k=3)") == "Plan(k=3)"  # nothing to drop
    # two distinct objects of one class read the same in every process
    a, b = jsonable({"p": _Plan()}), jsonable({"p": _Plan()})
    assert a == b == {"p": "<_Plan>"}


def test_split_timings_separates_timings_at_any_depth():
    meta = {
        "parse_seconds": 0.25,
        "seconds_eigen": 1.5,
        "plan": "<x.Plan object at 0xabc>",
        "solver_info": {"time": 2.0, "gap": 1e-9, "inner": {"wall_time": 3.0}},
        "timeout_hits": 1,  # "timeout" is not the word "time": kept
        "sizes": [8, 16],
    }
    kept, timings = split_timings(meta)
    assert kept == {
        "plan": "<Plan>",
        "solver_info": {"gap": 1e-9, "inner": {}},
        "timeout_hits": 1,
        "sizes": [8, 16],
    }
    assert timings == {
        "parse_seconds": 0.25,
        "seconds_eigen": 1.5,
        "solver_info.time": 2.0,
        "solver_info.inner.wall_time": 3.0,
    }


def test_rerun_writes_identical_bytes(tmp_path, timed_selector, monkeypatch):
    path, results = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    # first run: the config named by a relative path, results by a relative path
    first = run_config(Path("configs/toy/hyg.yaml"), "results", progress=io.StringIO())
    before = _snapshot(results)
    assert set(before) == {"toy/hyg.csv", "toy/hyg.md", "toy/hyg_rmse.png"}
    # second run recomputes everything (--fresh), naming both by absolute paths
    second = run_config(path.resolve(), results.resolve(), progress=io.StringIO(), fresh=True)
    assert _snapshot(results) == before
    assert [c.seconds for c in first.cells] != [c.seconds for c in second.cells]

    text = before["toy/hyg.csv"].decode()
    assert "0x" not in text and "seconds" not in text and "time" not in text
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(text))}
    meta = json.loads(rows[("prefix 8", "Timed")]["metadata"])
    assert meta == {"cells": 8, "plan": "<_Plan>", "solver": {"iterations": 3}}
    assert "- **Config:** `configs/toy/hyg.yaml`" in before["toy/hyg.md"].decode()

    # the timings went to the git-ignored sidecar beside the job store
    sidecar = timings_path(results, "toy", "hyg")
    assert sidecar.parent == results / "toy" / ".jobs"
    with open(sidecar, newline="", encoding="utf-8") as f:
        lines = {(r["row"], r["column"]): r for r in csv.DictReader(f)}
    assert set(lines) == set(rows)
    for c in second.cells:
        assert float(lines[(c.row, c.column)]["seconds"]) == c.seconds
    timed = json.loads(lines[("prefix 8", "Timed")]["timings"])
    assert set(timed) == {"parse_seconds", "solver.solve_time"}
    assert read_timings(sidecar) == {(c.row, c.column): c.seconds for c in second.cells}

    # re-rendering the figure from the committed CSV gives the same bytes
    plot_file(path, results)
    assert _snapshot(results) == before


def test_seconds_figure_reads_the_sidecar(tmp_path, timed_selector):
    path, results = _tree(tmp_path)
    data = dict(CONFIG, figures=[{"name": "t", "kind": "bar", "y": "seconds"}])
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), "utf-8")
    run_config(path, results, progress=io.StringIO())
    png = results / "toy" / "hyg_t.png"
    drawn = png.read_bytes()
    # other timings in the sidecar draw another figure: the plot reads them from there
    sidecar = timings_path(results, "toy", "hyg")
    with open(sidecar, newline="", encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    for i, line in enumerate(lines):
        line["seconds"] = str(10.0 + i)
    with open(sidecar, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(lines[0]))
        w.writeheader()
        w.writerows(lines)
    plot_file(path, results)
    assert png.read_bytes() != drawn
    sidecar.write_text("row,column\nprefix 8,Timed\n")
    with pytest.raises(ValueError, match="not a timings sidecar"):
        plot_file(path, results)


def test_quick_runs_stay_under_the_ignored_quick_folder(tmp_path, timed_selector, capsys):
    path, results = _tree(tmp_path)
    configs = tmp_path / "configs"
    readme = tmp_path / "README.md"
    readme.write_text(
        "# toy\n\n<!-- status:begin (generated by `mmtoolkit report --readme README.md`; "
        "do not edit) -->\n<!-- status:end -->\n",
        "utf-8",
    )
    reproduce((), results, configs, readme, progress=io.StringIO())
    assert write_report(results, configs, readme, check=True) == []
    before = _snapshot(results)
    readme_before = readme.read_bytes()

    runs, pngs = reproduce((), results, configs, readme, quick=True, progress=io.StringIO())
    assert pngs == [] and [r.csv_path for r in runs] == [
        results / "quick" / "toy" / "hyg.quick.csv"
    ]
    assert [(c.row, c.column) for c in runs[0].cells] == [
        ("prefix 8", "Timed"),
        ("prefix 8", "SVDB"),
    ]
    assert _snapshot(results) == before and readme.read_bytes() == readme_before
    # `mmtoolkit run --quick` too; the scoreboard does not see quick tables
    args = ["run", str(path), "--results", str(results), "--quick", "-q"]
    assert main(args) == 0
    assert _snapshot(results) == before
    capsys.readouterr()
    args = ["report", "--results", str(results), "--configs", str(configs)]
    assert main([*args, "--readme", str(readme), "--check"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("checked 1 tables (1 from configs, 0 from scripts) with 6 cells:")
    assert "1 / 1 published cells agree" in out[0] and "1 config figures" in out[0]
    assert out[1:] == [
        f"{results / 'README.md'} (scoreboard): up to date",
        f"{readme} (status block): up to date",
    ]


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def test_main_job_leaves_a_fresh_clone_clean(tmp_path):
    """README's main job in a clone of the committed HEAD: the committed table is the
    first run, so the run (and a second, resumed one) must leave `git status` empty."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    head = _git("rev-parse", "HEAD", cwd=REPO).strip()
    clone = tmp_path / "clone"
    _git("clone", "-q", "--no-checkout", str(REPO), str(clone), cwd=tmp_path)
    _git("checkout", "-q", head, cwd=clone)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, "-m", "mmtoolkit", "run", "configs/residual_planner/table4.yaml"]
    for _ in range(2):  # computed, then re-rendered from the job store
        done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "24/24 agree with the paper" in done.stdout
        assert _git("status", "--porcelain", cwd=clone) == ""
    assert (clone / "results" / "residual_planner" / ".jobs" / "table4.jsonl").is_file()
