"""The scoreboard (mmtoolkit report): counts against the config, stale CSVs, other results,
deterministic output, the README block and the command line."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from pathlib import Path

import pytest
import yaml

from mmtoolkit.cli import main
from mmtoolkit.runner import load_config, run_config
from mmtoolkit.runner.report import (
    BEGIN,
    END,
    ReportError,
    collect,
    render_results_readme,
    render_status_block,
    replace_block,
    table_status,
    write_report,
)

PREFIX4_RMSE = math.sqrt((1 + 2 + 3 + 4) / 4)  # identity strategy on prefix(4), variance 1

TOY = {
    "paper": "toy",
    "table": "t1",
    "title": "Toy table",
    "metric": "rmse",
    "privacy": {"kind": "zcdp", "rho": 0.5},
    "tolerance": {"abs": 0.001},
    "columns": [
        {"name": "Identity", "selector": "identity"},
        {"name": "LM", "selector": "laplace"},
    ],
    "rows": [
        {
            "name": "identity 4",
            "workload": {"kind": "identity", "n": 4},
            "paper": {"Identity": 1.0, "LM": 1.2},  # agrees / outside tolerance
            "notes": {"LM": "the paper used another calibration"},
        },
        {
            "name": "prefix 4",
            "workload": {"kind": "prefix", "n": 4},
            "paper": {"Identity": 2.0},  # outside tolerance, no note
        },
    ],
}


def write_config(root: Path, data: dict, name: str | None = None) -> Path:
    path = root / "configs" / data["paper"] / (name or f"{data['table']}.yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


@pytest.fixture
def tree(tmp_path):
    """configs/toy/t1.yaml run into results/, plus a config never run."""
    cfg = write_config(tmp_path, TOY)
    run_config(load_config(cfg), tmp_path / "results", progress=open("/dev/null", "w"))
    never = dict(TOY, table="t2", title="Never run")
    write_config(tmp_path, never)
    return tmp_path


def rewrite_csv(path: Path, edit) -> None:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    fields = list(rows[0])
    rows = [r for r in (edit(dict(r)) for r in rows) if r is not None]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def test_counts_against_the_config(tree):
    board = collect(tree / "results", tree / "configs")
    t1, t2 = board.tables
    assert (t1.table, t2.table) == ("t1", "t2")
    assert t1.cells == 4 and t1.published == 3 and t1.computed == 4
    assert t1.agree == 1
    assert t1.explained == [("identity 4", "LM")]
    assert len(t1.unexplained) == 1
    row, col, ours, paper = t1.unexplained[0]
    assert (row, col, paper) == ("prefix 4", "Identity", 2.0)
    assert ours == pytest.approx(PREFIX4_RMSE, rel=1e-9)
    assert t1.stale == [] and t1.not_computed == 0
    # never run: every cell is missing, nothing agrees
    assert t2.csv is None and t2.cells == 4 and t2.not_computed == 4 and t2.agree == 0
    assert t2.published == 3


def test_missing_and_failed_cells_are_not_computed(tree):
    csv_path = tree / "results" / "toy" / "t1.csv"

    def edit(r):
        if r["row"] == "prefix 4" and r["column"] == "LM":
            return None  # never written
        if r["row"] == "prefix 4" and r["column"] == "Identity":
            r.update(ours="", rel_diff="", within_tol="", note="failed: timeout after 1 s")
        return r

    rewrite_csv(csv_path, edit)
    st = table_status(load_config(tree / "configs/toy/t1.yaml"), tree / "results")
    assert st.computed == 2 and st.not_computed == 2
    assert st.unexplained == [] and st.agree == 1 and st.stale == []


@pytest.mark.parametrize(
    "edit, fragment",
    [
        (lambda r: {**r, "paper": "3.5"} if r["column"] == "Identity" else r, "paper value"),
        (lambda r: {**r, "within_tol": "true"} if r["row"] == "prefix 4" else r, "within_tol"),
        (lambda r: {**r, "note": ""} if r["column"] == "LM" else r, "note"),
        (lambda r: {**r, "row": "renamed"} if r["row"] == "prefix 4" else r, "not in the config"),
    ],
)
def test_csv_disagreeing_with_config_is_stale(tree, edit, fragment):
    rewrite_csv(tree / "results" / "toy" / "t1.csv", edit)
    st = table_status(load_config(tree / "configs/toy/t1.yaml"), tree / "results")
    assert st.stale and any(fragment in s for s in st.stale), st.stale
    text = render_results_readme(collect(tree / "results", tree / "configs"))
    assert "⚠ stale" in text and "disagrees with the config" in text
    if fragment != "not in the config":  # (that case drops the unexplained cell's row)
        assert "toy/t1: prefix 4 × Identity (ours 1.58114, paper 2) — stale table" in text


def test_tolerance_is_recomputed_from_the_config(tree):
    """Widening the config's tolerance turns a ✗ into agreement, and flags the old CSV."""
    cfg = dict(TOY, tolerance={"abs": 0.5})
    path = write_config(tree, cfg)
    st = table_status(load_config(path), tree / "results")
    assert st.agree == 3 and st.unexplained == [] and st.explained == []
    assert sum("within_tol" in s for s in st.stale) == 2


def test_a_config_without_a_tolerance_compares_nothing(tmp_path):
    """A Config built without a tolerance (load_config requires one beside paper values):
    the run sets no agreement flag, and the scoreboard counts none and finds nothing stale."""
    cfg = dataclasses.replace(load_config(write_config(tmp_path, TOY)), tolerance=None)
    result = run_config(cfg, tmp_path / "results", progress=io.StringIO())
    assert all(c.within_tol is None for c in result.cells)
    st = table_status(cfg, tmp_path / "results")
    assert (st.computed, st.published, st.agree, st.stale) == (4, 3, 0, [])
    assert st.explained == st.unexplained == []


def test_other_results_and_script_tables_are_listed(tree):
    d = tree / "results" / "toy"
    (d / "scalability.csv").write_text("d,seconds\n1,0.5\n")
    (d / "scalability.md").write_text("# Scalability of toy\n\n| d |\n")
    (d / "scalability_times.png").write_bytes(b"\x89PNG")
    (d / "fig1.png").write_bytes(b"\x89PNG")
    (d / "script_table.csv").write_text(
        "row,column,ours,paper,rel_diff,within_tol,seconds,note\n"
        "a,x,1.0,1.0,0.0,true,0,\n"
        "a,y,2.0,1.0,1.0,false,0,scale differs\n"
        "b,x,3.0,1.0,2.0,false,0,\n"
        "b,y,,,,,0,failed: boom\n"
    )
    board = collect(tree / "results", tree / "configs")
    script = [t for t in board.tables if t.config is None]
    assert [t.table for t in script] == ["script_table"]
    s = script[0]
    assert (s.cells, s.published, s.agree, s.computed) == (4, 3, 1, 3)
    assert s.explained == [("a", "y")] and [u[:2] for u in s.unexplained] == [("b", "x")]
    others = {o.stem: [f.name for f in o.files] for o in board.others["toy"]}
    assert others == {
        "fig1": ["fig1.png"],
        "scalability": ["scalability.csv", "scalability.md", "scalability_times.png"],
    }
    text = render_results_readme(board)
    assert "[scalability.md](toy/scalability.md)" in text
    assert "Scalability of toy" in text
    assert "[t1](toy/t1.md)" in text
    assert "[config](../configs/toy/t2.yaml) (not run)" in text
    assert "toy/t1: prefix 4 × Identity (ours 1.58114, paper 2)" in text


def test_output_is_deterministic_and_check_mode(tree):
    readme = tree / "README.md"
    readme.write_text(f"# Project\n\nintro\n\n## Status\n\n{BEGIN}\nold\n{END}\n\n## After\n")
    results, configs = tree / "results", tree / "configs"
    assert write_report(results, configs, readme, check=True) == [results / "README.md", readme]
    write_report(results, configs, readme)
    first = (results / "README.md").read_text(), readme.read_text()
    assert write_report(results, configs, readme, check=True) == []
    write_report(results, configs, readme)
    assert ((results / "README.md").read_text(), readme.read_text()) == first
    text = readme.read_text()
    assert text.startswith("# Project\n\nintro\n\n## Status\n\n" + BEGIN + "\n")
    assert text.endswith(END + "\n\n## After\n") and "old" not in text
    assert "[Toy table](results/toy/t1.md) | 1 / 3 | 0 | 1 | 1 |" in text
    assert "| **all** | 2 tables | 1 / 6 | 4 | 1 | 1 |" in text
    # a new result makes the committed files out of date
    (results / "toy" / "extra.md").write_text("# Extra\n")
    assert write_report(results, configs, readme, check=True) == [results / "README.md"]


def test_status_block_links_are_relative_to_the_readme(tree):
    board = collect(tree / "results", tree / "configs")
    block = render_status_block(board, tree / "docs")
    assert "(../results/toy/t1.md)" in block and "(../results/README.md)" in block


def test_replace_block_needs_one_marker_pair():
    with pytest.raises(ReportError, match="README.md: needs exactly one status marker pair"):
        replace_block("# no markers\n", "x")
    with pytest.raises(ReportError, match="marker pair"):
        replace_block(f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n", "x")
    assert replace_block(f"a\n{BEGIN}\nold\n{END}\nb\n", "new\n") == f"a\n{BEGIN}\nnew\n{END}\nb\n"


def test_non_runner_csv_named_like_a_table_is_an_error(tree):
    (tree / "results" / "toy" / "t1.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ReportError, match=r"t1\.csv: not a runner table \(missing columns"):
        collect(tree / "results", tree / "configs")


def test_cli_report(tree, capsys):
    results, configs = str(tree / "results"), str(tree / "configs")
    assert main(["report", "--results", results, "--configs", configs, "--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert main(["report", "--results", results, "--configs", configs]) == 0
    assert main(["report", "--results", results, "--configs", configs, "--check"]) == 0
    readme = tree / "README.md"
    readme.write_text("no markers\n")
    code = main(["report", "--results", results, "--configs", configs, "--readme", str(readme)])
    assert code == 2
    assert "needs exactly one status marker pair" in capsys.readouterr().err


def test_bad_config_is_a_config_error_naming_the_file(tree, capsys):
    bad = dict(TOY, table="t3", tolerance={"abs": -1.0})
    write_config(tree, bad)
    code = main(["report", "--results", str(tree / "results"), "--configs", str(tree / "configs")])
    assert code == 2
    err = capsys.readouterr().err
    assert "t3.yaml: tolerance.abs: must be a finite number >= 0" in err


def test_missing_configs_dir_is_an_error_naming_it(tree, capsys):
    missing = tree / "confgis"
    results = str(tree / "results")
    assert main(["report", "--results", results, "--configs", str(missing), "--check"]) == 2
    err = capsys.readouterr().err
    assert f"{missing}: the configs directory does not exist" in err
    a_file = tree / "configs.txt"
    a_file.write_text("not a directory\n")
    assert main(["report", "--results", results, "--configs", str(a_file)]) == 2
    assert f"{a_file}: the configs directory is not a directory" in capsys.readouterr().err


def test_a_config_edited_after_its_table_is_stale(tree, capsys):
    """Every cell carries its job key: editing what a cell computes (ρ here) flags the table,
    and `report --check` fails, although paper values, notes and flags still match."""
    results, configs = str(tree / "results"), str(tree / "configs")
    main(["report", "--results", results, "--configs", configs])
    assert main(["report", "--results", results, "--configs", configs, "--check"]) == 0
    write_config(tree, dict(TOY, privacy={"kind": "zcdp", "rho": 50}))
    st = table_status(load_config(tree / "configs/toy/t1.yaml"), tree / "results")
    assert len(st.stale) == 4 and all("computed by job" in s for s in st.stale), st.stale
    capsys.readouterr()
    assert main(["report", "--results", results, "--configs", configs, "--check"]) == 1
    assert "stale table toy/t1: identity 4 × Identity: computed by job" in capsys.readouterr().out


def test_committed_table_edited_config_is_stale(tmp_path, capsys):
    """A committed config and its committed CSV, copied: the keys agree until the config's ρ
    is edited from 0.5 to 50; then `report --check` fails naming the table."""
    repo = Path(__file__).resolve().parents[2]
    cfg = tmp_path / "configs" / "residual_planner" / "table10.yaml"
    out = tmp_path / "results" / "residual_planner" / "table10.csv"
    cfg.parent.mkdir(parents=True)
    out.parent.mkdir(parents=True)
    text = (repo / "configs" / "residual_planner" / "table10.yaml").read_text("utf-8")
    cfg.write_text(text, "utf-8")
    out.write_bytes((repo / "results" / "residual_planner" / "table10.csv").read_bytes())
    assert table_status(load_config(cfg, build_workloads=False), tmp_path / "results").stale == []
    assert "privacy: {kind: zcdp, rho: 0.5}" in text
    cfg.write_text(text.replace("rho: 0.5}", "rho: 50}"), "utf-8")
    args = ["report", "--results", str(tmp_path / "results"), "--configs", str(cfg.parent.parent)]
    assert main(args) == 0  # writes the scoreboard: it shows the table as stale
    assert "table10 ⚠ stale" in (tmp_path / "results" / "README.md").read_text("utf-8")
    capsys.readouterr()
    assert main([*args, "--check"]) == 1
    assert "stale table residual_planner/table10: n=2 d=3 × RP+: computed by job" in (
        capsys.readouterr().out
    )
