"""benchmarks/README.md is generated from the benchmark scripts' JSON records, and a record
says when, where and how it was measured. No benchmark is run here."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


render = _load("render")
util = _load("_util")


def test_committed_readme_is_what_the_committed_records_give():
    """The page cannot drift from the data: re-rendering the committed JSON gives the
    committed page byte for byte (`python benchmarks/render.py` rewrites it)."""
    assert (BENCH / "README.md").read_text(encoding="utf-8") == render.render()
    assert render.main(["--check"]) == 0


def test_every_script_has_a_section_measured_or_saying_how_to_measure_it(tmp_path):
    """Without records every script's section says it is not measured yet and gives the
    command that measures it; no numbers, dates or history are hand-written in the page."""
    page = render.render(results=tmp_path)
    scripts = sorted(p.name for p in BENCH.glob("bench_*.py"))
    assert [line[4:-1] for line in page.splitlines() if line.startswith("## `")] == scripts
    for name in scripts:
        assert f"Not measured yet: run `{render.full_command(name)}`" in page
    assert "Measured " not in page and "| " not in page


def _record(tmp_path, rows, note=None):
    run = util.Run("bench_example.py", ["--sizes", "1 2", "--json"])
    table = run.table("an example", ["n", "seconds", "label"], ["d", ".3f", ""], note=note)
    for row in rows:
        table.add(*row)
    path = run.write(str(tmp_path / "bench_example.json"))
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_record_says_when_where_and_how(tmp_path, monkeypatch, capsys):
    for var in util.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rec = _record(tmp_path, [(8, 0.25, "a"), (16, None, "not run")])
    command = "OMP_NUM_THREADS=1 python benchmarks/bench_example.py --sizes '1 2' --json"
    assert rec["command"] == command
    assert rec["started"] <= rec["finished"] and rec["started"].endswith("Z")
    assert len(rec["load_average"]["start"]) == 3 and len(rec["load_average"]["end"]) == 3
    m = rec["machine"]
    assert m["cores"] >= 1 and m["memory_gb"] > 0 and m["cpu"]
    assert rec["package"]["version"] and rec["package"]["commit"]
    assert rec["tables"][0]["rows"] == [[8, 0.25, "a"], [16, None, "not run"]]
    # the rendered section: provenance, then the table with a dash for the value not measured
    script = tmp_path / "bench_example.py"
    script.write_text('"""An example benchmark.\n\nMore detail."""\n')
    lines = render.section(script, rec)
    assert lines[2] == "An example benchmark."
    assert f"with `{rec['command']}`" in lines[4]
    assert f"{rec['load_average']['start'][0]:.2f} at the start" in lines[4]
    assert "| 8 | 0.250 | a |" in lines and "| 16 | — | not run |" in lines
    assert "|---:|---:|---|" in lines  # numbers right-aligned, also with a dash among them


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_number_is_refused_naming_where(tmp_path, bad, capsys):
    with pytest.raises(ValueError, match=r"bench_example\.tables\[0\]\.rows\[1\]\[1\]"):
        _record(tmp_path, [(8, 0.25, "a"), (16, bad, "b")])
    assert not (tmp_path / "bench_example.json").exists()


def test_a_row_of_the_wrong_width_is_refused(capsys):
    table = util.Table("t", ["a", "b"], ["d", "d"], echo=False)
    with pytest.raises(ValueError, match="table 't': a row of 3 cells for 2 columns"):
        table.add(1, 2, 3)


def test_check_reports_a_drifted_page(tmp_path, capsys):
    readme = tmp_path / "README.md"
    assert render.main(["--readme", str(readme), "--results", str(tmp_path)]) == 0
    assert render.main(["--check", "--readme", str(readme), "--results", str(tmp_path)]) == 0
    readme.write_text(readme.read_text() + "a hand-written line\n")
    assert render.main(["--check", "--readme", str(readme), "--results", str(tmp_path)]) == 1
    assert "out of date" in capsys.readouterr().err
