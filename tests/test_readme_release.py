"""README's "Release from your own CSV" section, run as printed: its CSV and JSON blocks are
the files, its shell block runs line by line (``mmtoolkit`` as ``python -m mmtoolkit`` of
this checkout), its Python block runs in the same directory."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def _section() -> dict:
    text = (REPO / "README.md").read_text()
    start = text.index("## Release from your own CSV")
    body = text[start : text.index("\n## ", start + 1)]
    blocks = re.findall(r"```(\w+)\n(.*?)```", body, flags=re.S)
    kinds = [k for k, _ in blocks]
    assert kinds == ["csv", "json", "sh", "python"], kinds
    return dict(blocks)


def test_readme_release_section_runs_as_printed(tmp_path, monkeypatch, capsys):
    blocks = _section()
    (tmp_path / "people.csv").write_text(blocks["csv"])
    (tmp_path / "people-domain.json").write_text(blocks["json"])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    commands = blocks["sh"].replace("\\\n", " ").strip().splitlines()
    for line in commands:
        argv = shlex.split(line)
        assert argv[0] == "mmtoolkit"
        proc = subprocess.run([sys.executable, "-m", *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True)  # fmt: skip
        assert proc.returncode == 0, (line, proc.stderr)
    assert (tmp_path / "again.csv").read_bytes() == (tmp_path / "answers.csv").read_bytes()
    answers = pd.read_csv(tmp_path / "answers.csv", dtype=str, keep_default_na=False)
    assert list(answers.columns) == ["query", "marginal", "age", "sex", "job", "answer",
                                     "lower", "upper", "stderr"]  # fmt: skip
    assert answers.iloc[0][["marginal", "age", "sex", "job"]].tolist() == [
        "age;sex", "[18, 30)", "F", ""]  # fmt: skip
    assert "rho = 0.5" in proc.stdout  # ledger show: two releases of 0.25

    monkeypatch.chdir(tmp_path)
    exec(compile(blocks["python"], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "[18, 30)" in out and "rho = 0.75" in out
    ledger = json.loads((tmp_path / "people.ledger").read_text())
    assert [e["status"] for e in ledger["entries"]] == ["committed"] * 3
