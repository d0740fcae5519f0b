"""The committed results agree with the configs, and the scoreboard is up to date.

For every committed config with a committed CSV: the CSV's paper values are the config's,
its agreement flags are the config's tolerance recomputed from ours/paper, its notes are
the config's, it has no cell the config does not have, and every computed cell outside
tolerance carries an explanation (a non-empty note from the config row's ``notes``).
Tables written by scripts in the runner's format must explain their ✗ cells too.
``results/README.md`` and the README's status block must equal what ``mmtoolkit report``
generates now (regenerate with ``mmtoolkit report --readme README.md``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mmtoolkit.runner import load_config
from mmtoolkit.runner.report import (
    collect,
    config_paths,
    render_results_readme,
    render_status_block,
    replace_block,
    table_status,
)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
CONFIGS = REPO / "configs"


def _committed():
    out = []
    for path in config_paths(CONFIGS):
        cfg = load_config(path, build_workloads=False)
        if (RESULTS / cfg.paper / f"{cfg.table}.csv").is_file():
            out.append(path)
    return out


COMMITTED = _committed()


def _describe(unexplained) -> str:
    return "\n".join(
        f"  {row} × {col}: ours {ours:.6g}, paper {paper:.6g}"
        for row, col, ours, paper in unexplained
    )


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.relative_to(CONFIGS).as_posix())
def test_committed_csv_agrees_with_its_config(path):
    cfg = load_config(path, build_workloads=False)
    st = table_status(cfg, RESULTS)
    assert not st.stale, f"{st.csv} disagrees with {path} (re-run or re-render):\n" + "\n".join(
        st.stale
    )
    assert not st.unexplained, (
        f"{st.csv}: cells outside tolerance without an explanation (add a `notes` entry "
        f"to the row in {path.relative_to(REPO)}):\n" + _describe(st.unexplained)
    )


def test_script_tables_explain_their_disagreements():
    board = collect(RESULTS, CONFIGS)
    bad = {
        str(t.csv.relative_to(REPO)): _describe(t.unexplained)
        for t in board.tables
        if t.config is None and t.unexplained
    }
    assert not bad, "cells outside tolerance without a note:\n" + "\n".join(
        f"{k}:\n{v}" for k, v in bad.items()
    )


def test_scoreboard_and_readme_status_are_up_to_date():
    board = collect(RESULTS, CONFIGS)
    hint = "regenerate with `mmtoolkit report --readme README.md`"
    assert (RESULTS / "README.md").is_file(), f"results/README.md is missing: {hint}"
    committed = (RESULTS / "README.md").read_text(encoding="utf-8")
    assert committed == render_results_readme(board), f"results/README.md is out of date: {hint}"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    expected = replace_block(readme, render_status_block(board, REPO))
    assert readme == expected, f"README.md status block is out of date: {hint}"
