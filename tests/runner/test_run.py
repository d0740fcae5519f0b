"""run_config: values equal direct evaluator calls and closed forms; failures are recorded."""

from __future__ import annotations

import csv
import io
import json
import math
import zlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.domain import Domain
from mmtoolkit.linalg import Identity
from mmtoolkit.privacy import ZCDP
from mmtoolkit.runner import load_config, run_config
from mmtoolkit.runner.jobs import expand_jobs
from mmtoolkit.runner.run import CSV_COLUMNS
from mmtoolkit.runner.store import JobStore, store_path
from mmtoolkit.selectors.base import _REGISTRY, Selector, register
from mmtoolkit.strategy import Strategy
from mmtoolkit.workload_specs import DomainSpec, WorkloadSpec

RHO = 0.5  # noise variance 1 per unit L2 sensitivity

SMALL = {
    "paper": "toy",
    "table": "small",
    "title": "Small toy table",
    "source": "test suite",
    "metric": "rmse",
    "privacy": {"kind": "zcdp", "rho": RHO},
    "tolerance": {"abs": 0.0005},
    "columns": [
        {"name": "SVDB", "svd_bound": True},
        {"name": "Identity", "selector": "identity"},
        {"name": "LM", "selector": "laplace"},
    ],
    "rows": [
        {
            "name": "2x3 1-way",
            "workload": {"kind": "marginals", "domain": {"sizes": [2, 3]}, "k": 1},
            # paper values: the first agrees (SVDB), the second deliberately does not
            "paper": {"SVDB": None, "LM": 1.0},
            "notes": {"Identity": "identity note"},
        },
        {"name": "prefix 8", "workload": {"kind": "prefix", "n": 8}},
    ],
}


def dense_marginals_1way() -> np.ndarray:
    """The two 1-way marginals of a 2 x 3 domain (C order: first attribute most significant)."""
    a = np.kron(np.eye(2), np.ones((1, 3)))
    b = np.kron(np.ones((1, 2)), np.eye(3))
    return np.vstack([a, b])


def closed_forms(W: np.ndarray) -> dict[str, float]:
    """RMSEs at noise variance 1, straight from the definitions (numpy only)."""
    m, n = W.shape
    sigma = np.linalg.svd(W, compute_uv=False)
    return {
        "SVDB": math.sqrt(sigma.sum() ** 2 / n / m),  # Li & Miklau 2012, Thm 2
        "Identity": math.sqrt((W**2).sum() / m),  # tr(WᵀW)/m
        "LM": float(np.sqrt((W**2).sum(axis=0)).max()),  # sens₂(W)
    }


def write_config(tmp_path: Path, data: dict, name: str = "small.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def small_config(tmp_path):
    data = yaml.safe_load(yaml.safe_dump(SMALL))
    # the SVDB paper value: the true bound rounded to 3 decimals (agrees within 0.0005)
    data["rows"][0]["paper"]["SVDB"] = round(closed_forms(dense_marginals_1way())["SVDB"], 3)
    return write_config(tmp_path, data)


def test_values_match_evaluator_and_closed_forms(tmp_path, small_config):
    progress = io.StringIO()
    result = run_config(small_config, tmp_path / "results", progress=progress)
    assert result.ok and len(result.cells) == 6

    privacy = ZCDP(RHO)
    dom = Domain.from_sizes([2, 3])
    built = {"2x3 1-way": workloads.marginals(dom, 1), "prefix 8": workloads.prefix(8)}
    dense = {"2x3 1-way": dense_marginals_1way(), "prefix 8": np.tril(np.ones((8, 8)))}
    rows = {(r["row"], r["column"]): r for r in read_csv(result.csv_path)}
    assert len(rows) == 6
    for name, W in built.items():
        np.testing.assert_allclose(W.dense(), dense[name])
        direct = {
            "SVDB": evaluate.svd_bound_rmse(W, privacy),
            "Identity": evaluate.rmse(W, Identity(W.shape[1]), privacy),
            "LM": evaluate.rmse(W, selectors.get("laplace").select(W, privacy), privacy),
        }
        independent = closed_forms(dense[name])
        for col in ("SVDB", "Identity", "LM"):
            ours = float(rows[(name, col)]["ours"])
            assert ours == pytest.approx(direct[col], rel=1e-12), (name, col)
            assert ours == pytest.approx(independent[col], rel=1e-9), (name, col)
            assert result.cell(name, col).ours == ours

    # progress: one line per job, in order
    lines = progress.getvalue().splitlines()
    assert len(lines) == 6
    assert lines[0].startswith("[1/6] 2x3 1-way × SVDB: ")
    assert lines[-1].startswith("[6/6] prefix 8 × LM: ") and lines[-1].endswith(" s)")


def test_csv_columns_paper_and_agreement(tmp_path, small_config):
    result = run_config(small_config, tmp_path / "res", progress=io.StringIO())
    assert result.csv_path == tmp_path / "res" / "toy" / "small.csv"
    with open(result.csv_path, newline="", encoding="utf-8") as f:
        assert next(csv.reader(f)) == list(CSV_COLUMNS)
    rows = {(r["row"], r["column"]): r for r in read_csv(result.csv_path)}

    svdb = rows[("2x3 1-way", "SVDB")]
    assert svdb["paper"] != "" and svdb["within_tol"] == "true"
    ours, paper = float(svdb["ours"]), float(svdb["paper"])
    assert float(svdb["rel_diff"]) == pytest.approx((ours - paper) / paper)

    lm = rows[("2x3 1-way", "LM")]  # sens₂ of the 1-way marginals is sqrt(2), paper says 1
    assert float(lm["ours"]) == pytest.approx(math.sqrt(2))
    assert lm["paper"] == "1.0" and lm["within_tol"] == "false"
    assert float(lm["rel_diff"]) == pytest.approx(math.sqrt(2) - 1)

    for key in [("2x3 1-way", "Identity"), ("prefix 8", "SVDB"), ("prefix 8", "LM")]:
        assert rows[key]["paper"] == "" and rows[key]["rel_diff"] == ""
        assert rows[key]["within_tol"] == ""
    assert rows[("2x3 1-way", "Identity")]["note"] == "identity note"
    # each cell names the job that computed it: its key in the job store
    stored = JobStore(store_path(tmp_path / "res", "toy", "small")).load()
    _, keys = expand_jobs(result.config)
    for key, row in rows.items():
        assert row["job"] == keys[key] and stored[row["job"]]["status"] == "ok"
    # timings are not in the committed CSV but in the git-ignored sidecar beside the store
    assert "seconds" not in CSV_COLUMNS
    timings = read_csv(tmp_path / "res" / "toy" / ".jobs" / "small.timings.csv")
    assert [(t["row"], t["column"]) for t in timings] == [(c.row, c.column) for c in result.cells]
    for t, c in zip(timings, result.cells):
        assert float(t["seconds"]) == c.seconds >= 0 and t["status"] == "ok"


def test_markdown_shows_ours_and_paper(tmp_path, small_config):
    result = run_config(small_config, tmp_path, progress=io.StringIO())
    md = result.md_path.read_text(encoding="utf-8")
    assert md.startswith("# Small toy table")
    assert "test suite" in md and "ρ-zCDP" in md and "RMSE" in md
    header = next(line for line in md.splitlines() if line.startswith("| Workload"))
    for col in ("SVDB", "LM"):
        assert f"{col} ours" in header and f"{col} paper" in header
    # Identity has no published value in this table: no empty "paper" column for it
    assert "Identity ours" in header and "Identity paper" not in header
    row = next(line for line in md.splitlines() if line.startswith("| 2x3 1-way"))
    assert "✓" in row and "✗" in row
    assert f"{math.sqrt(2):.3f}" in row and "| 1 ✗" in row
    assert "identity note" in md
    # atomic writes leave no temporary files behind (.jobs holds the job store)
    assert sorted(p.name for p in result.md_path.parent.iterdir()) == [
        ".jobs",
        "small.csv",
        "small.md",
    ]
    jobs = sorted(p.name for p in (result.md_path.parent / ".jobs").iterdir())
    assert jobs == ["small.jsonl", "small.timings.csv"]


def test_other_metrics_use_the_evaluator(tmp_path):
    privacy = ZCDP(RHO)
    W = workloads.prefix(8)
    ident = selectors.get("identity").select(W, privacy)
    lm = selectors.get("laplace").select(W, privacy)
    base = {k: v for k, v in SMALL.items() if k not in ("rows", "tolerance")}
    base["rows"] = [{"name": "prefix", "workload": {"kind": "prefix", "n": 8}}]
    expected = {
        "total_error": {
            "SVDB": evaluate.svd_bound_error(W, privacy),
            "Identity": evaluate.expected_error(W, ident, privacy),
            "LM": evaluate.expected_error(W, lm, privacy),
        },
        "max_variance": {
            "Identity": evaluate.max_variance(W, ident, privacy),
            "LM": evaluate.max_variance(W, lm, privacy),
        },
        "ratio": {
            "Identity": 1.0,
            "LM": evaluate.error_ratio(W, lm, ident, privacy),
        },
    }
    # independent: Identity on prefix(8): Err = ||W||_F² = 36, max variance = 8; LM: sens₂² = 8
    assert expected["total_error"]["Identity"] == pytest.approx(36.0)
    assert expected["max_variance"]["Identity"] == pytest.approx(8.0)
    assert expected["ratio"]["LM"] == pytest.approx(math.sqrt(8 * 8 / 36))
    for metric, values in expected.items():
        data = dict(base, table=metric)
        data["metric"] = {"ratio_to": "Identity"} if metric == "ratio" else metric
        if metric != "total_error":
            data["columns"] = SMALL["columns"][1:]
        result = run_config(
            write_config(tmp_path, data, f"{metric}.yaml"), tmp_path, progress=io.StringIO()
        )
        assert result.ok
        for col, v in values.items():
            assert result.cell("prefix", col).ours == pytest.approx(v, rel=1e-12), (metric, col)


# ------------------------------------------------------------------- test-only selectors
class _Boom(Selector):
    name = "_test_boom"
    method = "test-only selector"
    paper = "none"

    def _select(self, workload, privacy, objective):
        raise RuntimeError("boom: cannot handle this workload")


class _Seeded(Selector):
    name = "_test_seeded"
    method = "test-only selector"
    paper = "none"

    def __init__(self, seed=None):
        self.params = {"seed": seed}

    def _select(self, workload, privacy, objective):
        return Strategy(
            matrix=Identity(workload.shape[1]),
            selector=self.name,
            metadata={"seed_seen": self.params["seed"]},
        )


@pytest.fixture
def test_selectors():
    added = [cls for cls in (_Boom, _Seeded) if cls.name not in _REGISTRY]
    for cls in added:
        register(cls)
    yield
    for cls in added:
        _REGISTRY.pop(cls.name, None)


def test_failing_cell_is_recorded_and_run_continues(tmp_path, test_selectors):
    data = yaml.safe_load(yaml.safe_dump(SMALL))
    data["columns"].insert(1, {"name": "Boom", "selector": "_test_boom"})
    data["rows"][0]["notes"]["Boom"] = "expected to fail"
    progress = io.StringIO()
    result = run_config(write_config(tmp_path, data), tmp_path, progress=progress)
    assert len(result.cells) == 8 and not result.ok
    failed = result.failed
    assert [(c.row, c.column) for c in failed] == [("2x3 1-way", "Boom"), ("prefix 8", "Boom")]
    for c in failed:
        assert c.ours is None and "RuntimeError: boom: cannot handle" in c.error
        assert "RuntimeError: boom" in c.note
    assert result.cell("2x3 1-way", "Boom").note.startswith("expected to fail; failed: ")
    # the other cells were still computed
    assert result.cell("prefix 8", "LM").ours == pytest.approx(math.sqrt(8))
    rows = {(r["row"], r["column"]): r for r in read_csv(result.csv_path)}
    assert rows[("prefix 8", "Boom")]["ours"] == ""
    assert "RuntimeError: boom" in rows[("prefix 8", "Boom")]["note"]
    assert "FAILED selection: RuntimeError: boom" in progress.getvalue()
    md = result.md_path.read_text(encoding="utf-8")
    assert "failed" in md and "RuntimeError: boom" in md


def test_ratio_against_failed_reference(tmp_path, test_selectors):
    data = {k: v for k, v in SMALL.items() if k != "tolerance"}
    data["metric"] = {"ratio_to": "Boom"}
    data["columns"] = [
        {"name": "Boom", "selector": "_test_boom"},
        {"name": "LM", "selector": "laplace"},
    ]
    data["rows"] = [{"name": "prefix", "workload": {"kind": "prefix", "n": 4}}]
    result = run_config(write_config(tmp_path, data), tmp_path, progress=io.StringIO())
    lm = result.cell("prefix", "LM")
    assert lm.failed and "reference column 'Boom'" in lm.note and "RuntimeError" in lm.note


def test_workload_failure_fails_that_row_only(tmp_path):
    # load_config rejects such a row; a programmatic Config can still carry one
    data = {k: v for k, v in SMALL.items() if k != "tolerance"}
    data["rows"] = [
        {"name": "bad", "workload": {"kind": "prefix", "n": 4}},
        {"name": "good", "workload": {"kind": "prefix", "n": 4}},
    ]
    cfg = load_config(write_config(tmp_path, data))
    cfg.rows[0].workload = WorkloadSpec(
        "marginal", {"domain": DomainSpec(sizes=[2, 3]), "attrs": ["nope"]}
    )
    result = run_config(cfg, tmp_path, progress=io.StringIO())
    assert [c.column for c in result.failed if c.row == "bad"] == ["SVDB", "Identity", "LM"]
    assert all("building the workload" in c.note for c in result.failed)
    assert not any(c.failed for c in result.cells if c.row == "good")


def test_seed_goes_to_selectors_that_accept_it(tmp_path, test_selectors):
    data = {k: v for k, v in SMALL.items() if k != "tolerance"}
    data["seed"] = 7
    data["columns"] = [
        {"name": "S", "selector": "_test_seeded"},
        {"name": "S3", "selector": "_test_seeded", "params": {"seed": 3}},
        {"name": "Identity", "selector": "identity"},  # takes no seed: must not get one
    ]
    data["rows"] = [{"name": "prefix", "workload": {"kind": "prefix", "n": 4}}]
    result = run_config(write_config(tmp_path, data), tmp_path, progress=io.StringIO())
    assert result.ok
    # the config seed is spread per job: SeedSequence(7, spawn_key=(crc32(row), crc32(col)))
    expected = int(
        np.random.SeedSequence(
            7, spawn_key=(zlib.crc32(b"prefix"), zlib.crc32(b"S"))
        ).generate_state(1, dtype=np.uint32)[0]
    )
    assert result.cell("prefix", "S").metadata == {"seed_seen": expected}
    assert result.cell("prefix", "S3").metadata == {"seed_seen": 3}
    assert json.loads(read_csv(result.csv_path)[0]["metadata"]) == {"seed_seen": expected}


def test_rerun_overwrites(tmp_path, small_config):
    first = run_config(small_config, tmp_path, progress=io.StringIO())
    first.csv_path.write_text("garbage", encoding="utf-8")
    second = run_config(load_config(small_config), tmp_path, progress=io.StringIO())
    assert second.csv_path == first.csv_path
    assert read_csv(second.csv_path)[0]["row"] == "2x3 1-way"


def test_table4_svd_bound_reproduces_the_paper(tmp_path):
    """ResidualPlanner Table 4: every SVDB cell within the paper's 3 printed decimals."""
    repo = Path(__file__).resolve().parents[2]
    result = run_config(
        repo / "configs" / "residual_planner" / "table4.yaml", tmp_path, progress=io.StringIO()
    )
    assert result.ok and len(result.cells) == 12 * len(
        load_config(repo / "configs" / "residual_planner" / "table4.yaml").columns
    )
    svdb = [c for c in result.cells if c.column == "SVDB"]
    assert len(svdb) == 12 and all(c.within_tol for c in svdb), [
        (c.row, c.ours, c.paper) for c in svdb if not c.within_tol
    ]
    # the baselines are never below the lower bound
    for c in result.cells:
        if c.column != "SVDB":
            assert c.ours >= result.cell(c.row, "SVDB").ours * (1 - 1e-12)


def test_results_path_that_is_a_file_is_a_clear_error(tmp_path, small_config, capsys):
    """``mmtoolkit run c.yaml --results file.csv`` (or a path under a file) exits 2 with a
    message naming the path before any job runs (it was a NotADirectoryError traceback)."""
    from mmtoolkit.cli import main
    from mmtoolkit.runner.schema import ConfigError

    (tmp_path / "file.csv").write_text("x\n")
    for results, message in [
        (tmp_path / "file.csv", "is not a directory;"),
        (tmp_path / "file.csv" / "sub", r"is not a directory \('"),
    ]:
        with pytest.raises(ConfigError, match=message):
            run_config(small_config, results, progress=io.StringIO())
        assert main(["run", str(small_config), "--results", str(results), "-q"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("mmtoolkit: error: results directory") and str(results) in err
    assert (tmp_path / "file.csv").read_text() == "x\n"


def test_render_only_rewrites_notes_without_computing(tmp_path, small_config, test_selectors):
    """``mmtoolkit run --render-only``: a note edited in the config reaches the CSV and the
    Markdown with every number, status and job key kept (nothing is computed: the job store
    is deleted first); a cell whose job the config changed is refused, naming the cell."""
    from mmtoolkit.cli import main
    from mmtoolkit.runner import rerender_config
    from mmtoolkit.runner.report import table_status
    from mmtoolkit.runner.schema import ConfigError

    data = yaml.safe_load(small_config.read_text(encoding="utf-8"))
    data["columns"].insert(1, {"name": "Boom", "selector": "_test_boom"})
    data["rows"][0]["notes"]["Boom"] = "expected to fail"
    path = write_config(tmp_path, data)
    results = tmp_path / "results"
    first = run_config(path, results, progress=io.StringIO())
    before = read_csv(first.csv_path)
    store_path(results, "toy", "small").unlink()  # nothing left to reuse: a run would compute

    data["rows"][0]["notes"]["LM"] = "a new note | with a bar"
    data["rows"][0]["notes"]["Identity"] = "identity note, rewritten"
    write_config(tmp_path, data)
    assert any("CSV note" in s for s in table_status(load_config(path), results).stale)
    assert main(["run", "--render-only", str(path), "--results", str(results)]) == 0
    assert not store_path(results, "toy", "small").exists()  # no job ran
    assert table_status(load_config(path), results).stale == []
    after = read_csv(first.csv_path)
    notes = {(r["row"], r["column"]): r["note"] for r in after}
    assert notes[("2x3 1-way", "LM")] == "a new note | with a bar"
    assert notes[("2x3 1-way", "Identity")] == "identity note, rewritten"
    assert notes[("2x3 1-way", "Boom")].startswith("expected to fail; failed: selection: Runtime")
    for old, new in zip(before, after, strict=True):
        assert {k: v for k, v in old.items() if k != "note"} == {
            k: v for k, v in new.items() if k != "note"
        }
    md = first.md_path.read_text(encoding="utf-8")
    assert "2x3 1-way × LM: a new note | with a bar" in md

    # a rerender of an unchanged config rewrites no byte
    csv_bytes, md_bytes = first.csv_path.read_bytes(), first.md_path.read_bytes()
    rerender_config(path, results)
    assert first.csv_path.read_bytes() == csv_bytes and first.md_path.read_bytes() == md_bytes

    # a changed job is refused before anything is written
    data["rows"][1]["workload"]["n"] = 16
    write_config(tmp_path, data)
    with pytest.raises(ConfigError, match=r"cell 'prefix 8' × 'SVDB': computed by job"):
        rerender_config(path, results)
    assert first.csv_path.read_bytes() == csv_bytes
    # the note of a cell without a number lives in the job store: refused too
    data["rows"][1]["workload"]["n"] = 8
    data["rows"][0]["notes"]["Boom"] = "another reason"
    write_config(tmp_path, data)
    with pytest.raises(ConfigError, match=r"'2x3 1-way' × 'Boom': has no number"):
        rerender_config(path, results)
    # no table yet: one line, exit 2
    missing = tmp_path / "elsewhere"
    assert main(["run", "--render-only", str(path), "--results", str(missing)]) == 2
