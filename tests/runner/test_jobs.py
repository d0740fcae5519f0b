"""Job model of the runner: keys, per-job seeds, the job store, resume after a kill,
timeouts and memory limits, the local process pool, the ratio-to-SVD-bound metric,
per-column objectives, explicit-matrix workloads and --quick."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.domain import Domain
from mmtoolkit.linalg import Dense, Identity
from mmtoolkit.privacy import ZCDP
from mmtoolkit.runner import ConfigError, load_config, run_config
from mmtoolkit.runner.config import quick_config
from mmtoolkit.runner.jobs import JobSpec, derive_seed, execute, expand_jobs
from mmtoolkit.runner.schema import parse_memory
from mmtoolkit.runner.store import JobStore, reusable, store_path
from mmtoolkit.selectors.base import _REGISTRY, Selector, register
from mmtoolkit.strategy import Strategy

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ test-only selectors
class _Counting(Selector):
    """Identity strategy; counts its calls and can raise KeyboardInterrupt (a "kill")."""

    name = "_test_counting"
    method = "test-only selector"
    paper = "none"
    calls: list[int] = []
    interrupt_at: int | None = None  # the call number that is "killed"

    def __init__(self, seed=None):
        self.params = {"seed": seed}

    def _select(self, workload, privacy, objective):
        n = workload.shape[1]
        if type(self).interrupt_at is not None and len(type(self).calls) == self.interrupt_at:
            raise KeyboardInterrupt
        type(self).calls.append(n)
        return Strategy(Identity(n), self.name, metadata={"seed": self.params["seed"]})


class _Slow(Selector):
    """Sleeps ``delay`` seconds, then returns the identity strategy."""

    name = "_test_slow"
    method = "test-only selector"
    paper = "none"

    def __init__(self, delay=30.0):
        self.params = {"delay": delay}

    def _select(self, workload, privacy, objective):
        time.sleep(self.params["delay"])
        return Strategy(Identity(workload.shape[1]), self.name)


class _Hungry(Selector):
    """Reserves ``gigabytes`` of address space (never touched), then returns Identity."""

    name = "_test_hungry"
    method = "test-only selector"
    paper = "none"

    def __init__(self, gigabytes=2.0):
        self.params = {"gigabytes": gigabytes}

    def _select(self, workload, privacy, objective):
        block = np.empty(int(self.params["gigabytes"] * 1e9 / 8))
        del block
        return Strategy(Identity(workload.shape[1]), self.name)


@pytest.fixture
def test_selectors():
    added = [c for c in (_Counting, _Slow, _Hungry) if c.name not in _REGISTRY]
    for cls in added:
        register(cls)
    _Counting.calls = []
    _Counting.interrupt_at = None
    yield
    for cls in added:
        _REGISTRY.pop(cls.name, None)


def write(tmp_path: Path, data: dict, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def comparable(path: Path) -> bytes:
    """The CSV's bytes: it holds no timings, so equal runs write identical files."""
    return path.read_bytes()


def counting_config(rows: int = 6, **extra) -> dict:
    return {
        "paper": "toy",
        "table": "resume",
        "metric": "rmse",
        "privacy": {"kind": "zcdp", "rho": 0.5},
        "seed": 11,
        "columns": [
            {"name": "SVDB", "svd_bound": True},
            {"name": "C", "selector": "_test_counting"},
        ],
        "rows": [
            {"name": f"prefix {n}", "workload": {"kind": "prefix", "n": n}}
            for n in range(2, 2 + rows)
        ],
        **extra,
    }


# ------------------------------------------------------------------ keys and seeds
def test_job_keys_depend_on_what_determines_the_value(tmp_path, test_selectors):
    data = counting_config(rows=2)
    data["rows"][0]["paper"] = {"C": 1.0}
    data["tolerance"] = {"abs": 1.0}
    data["rows"][0]["notes"] = {"C": "a note"}
    base = load_config(write(tmp_path, data))
    specs, keys = expand_jobs(base)
    assert len(specs) == 4 and len(set(keys.values())) == 4

    # paper values, notes, tolerance, title and limits do not change any key
    other = dict(data, title="x", tolerance={"rel": 0.5}, timeout=100)
    other["rows"] = [dict(r, paper={}, notes={}) for r in data["rows"]]
    assert expand_jobs(load_config(write(tmp_path, other, "o.yaml")))[1] == keys

    # the seed, the privacy and the workload do
    for change in (
        {"seed": 12},
        {"privacy": {"kind": "zcdp", "rho": 1.0}},
        {"rows": [data["rows"][0], {"name": "prefix 3", "workload": {"kind": "prefix", "n": 4}}]},
    ):
        k2 = expand_jobs(load_config(write(tmp_path, dict(data, **change), "c.yaml")))[1]
        assert k2 != keys
    # a seedless column (the SVD bound) keeps its key when the seed changes
    k2 = expand_jobs(load_config(write(tmp_path, dict(data, seed=12), "s.yaml")))[1]
    assert k2[("prefix 2", "SVDB")] == keys[("prefix 2", "SVDB")]
    assert k2[("prefix 2", "C")] != keys[("prefix 2", "C")]


def test_identical_cells_share_one_job(tmp_path, test_selectors):
    data = counting_config(rows=1)
    data.pop("seed")
    data["columns"].append({"name": "C2", "selector": "_test_counting"})
    data["rows"].append({"name": "again", "workload": {"kind": "prefix", "n": 2}})
    result = run_config(load_config(write(tmp_path, data)), tmp_path, progress=io.StringIO())
    assert len(_Counting.calls) == 1  # 4 cells of the same strategy, one selection
    values = {c.ours for c in result.cells if c.column != "SVDB"}
    assert values == {math.sqrt(1.5)}  # identity on prefix(2): ||W||_F² / m = 3/2


def test_derived_seeds(tmp_path, test_selectors):
    seeds = {derive_seed(5, r, c) for r in ("a", "b") for c in ("x", "y")}
    assert len(seeds) == 4 and all(0 <= s < 2**32 for s in seeds)
    assert derive_seed(5, "a", "x") == derive_seed(5, "a", "x") != derive_seed(6, "a", "x")

    data = counting_config(rows=3)
    first = run_config(load_config(write(tmp_path, data)), tmp_path / "a", progress=io.StringIO())
    got = {c.row: c.metadata["seed"] for c in first.cells if c.column == "C"}
    assert got == {r: derive_seed(11, r, "C") for r in got}
    # reordering rows changes nothing; same config + seed => same numbers
    data["rows"] = data["rows"][::-1]
    again = run_config(load_config(write(tmp_path, data)), tmp_path / "b", progress=io.StringIO())
    assert {c.row: c.metadata["seed"] for c in again.cells if c.column == "C"} == got


# ------------------------------------------------------------------ store and resume
def test_store_skips_a_line_cut_by_a_kill(tmp_path):
    store = JobStore(tmp_path / "s.jsonl")
    store.append({"key": "a", "status": "ok", "value": 1.0})
    with open(store.path, "a") as f:
        f.write('{"key": "b", "status": "o')  # killed mid-write
    assert list(store.load()) == ["a"]
    store.append({"key": "c", "status": "ok", "value": 0.1 + 0.2})
    loaded = store.load()
    assert list(loaded) == ["a", "c"] and loaded["c"]["value"] == 0.1 + 0.2  # exact round trip


def test_reuse_rules():
    ok = {"status": "ok"}
    timed_out = {"status": "timeout", "limits": {"timeout": 10, "memory": None}}
    oom = {"status": "out of memory", "limits": {"timeout": None, "memory": 100}}
    assert reusable(ok, None, None) and reusable(ok, 1, 1)
    assert reusable(timed_out, 10, None) and reusable(timed_out, 5, None)
    assert not reusable(timed_out, 20, None) and not reusable(timed_out, None, None)
    assert reusable(oom, None, 100) and not reusable(oom, None, 200)
    assert not reusable({"status": "failed"}, None, None) and not reusable(None, None, None)
    # only records of the same code are reused
    assert reusable({"status": "ok", "code": "abc"}, None, None, "abc")
    assert not reusable({"status": "ok", "code": "abc"}, None, None, "abd")


def test_editing_a_custom_selector_recomputes(tmp_path):
    # (a module name of its own: a module imported once stays in sys.modules)
    (tmp_path / "slowsel_edit.py").write_text(SLOW_MODULE)
    log = tmp_path / "calls.log"
    data = counting_config(rows=2)
    data["columns"] = [
        {"name": "S", "selector": "slowsel_edit:SlowIdentity", "params": {"log": str(log)}},
        {"name": "SVDB", "svd_bound": True},
    ]
    cfg = write(tmp_path, data)
    run_config(load_config(cfg), tmp_path, progress=io.StringIO())
    run_config(load_config(cfg), tmp_path, progress=io.StringIO())
    assert len(log.read_text().splitlines()) == 2  # the second run reused both
    (tmp_path / "slowsel_edit.py").write_text(SLOW_MODULE + "\n# edited\n")
    progress = io.StringIO()
    run_config(load_config(cfg), tmp_path, progress=progress, reuse_stale=True)
    assert len(log.read_text().splitlines()) == 2  # --reuse-stale: nothing recomputed ...
    assert "resuming: 4 of 4 jobs" in progress.getvalue()  # ... and it says so
    assert "2 computed by other code" in progress.getvalue()
    progress = io.StringIO()
    run_config(load_config(cfg), tmp_path, progress=progress)
    assert len(log.read_text().splitlines()) == 4  # recomputed after the edit ...
    assert "resuming: 2 of 4 jobs" in progress.getvalue()  # ... the SVD bound was not


def test_interrupted_run_resumes_without_recomputing(tmp_path, test_selectors):
    cfg = load_config(write(tmp_path, counting_config()))
    reference = run_config(cfg, tmp_path / "ref", progress=io.StringIO())
    assert len(_Counting.calls) == 6
    _Counting.calls = []

    _Counting.interrupt_at = 4  # the 5th selection is "killed"
    with pytest.raises(KeyboardInterrupt):
        run_config(cfg, tmp_path / "run", progress=io.StringIO())
    assert len(_Counting.calls) == 4
    store = JobStore(store_path(tmp_path / "run", "toy", "resume"))
    assert sum(r["selector"] == "_test_counting" for r in store.load().values()) == 4
    assert not (tmp_path / "run" / "toy" / "resume.csv").exists()

    _Counting.interrupt_at = None
    progress = io.StringIO()
    resumed = run_config(cfg, tmp_path / "run", progress=progress)
    assert len(_Counting.calls) == 6  # only the 2 missing selections ran
    assert _Counting.calls[4:] == [6, 7]  # prefix 6 and prefix 7
    assert "resuming: " in progress.getvalue()
    assert comparable(resumed.csv_path) == comparable(reference.csv_path)

    # a third run recomputes nothing; --fresh recomputes everything
    run_config(cfg, tmp_path / "run", progress=io.StringIO())
    assert len(_Counting.calls) == 6
    fresh = run_config(cfg, tmp_path / "run", progress=io.StringIO(), fresh=True)
    assert len(_Counting.calls) == 12
    assert comparable(fresh.csv_path) == comparable(reference.csv_path)
    assert len(store.path.read_text().splitlines()) == 12  # compacted: one line per job


SLOW_MODULE = """
import os, time
from mmtoolkit.linalg import Identity
from mmtoolkit.selectors import Selector
from mmtoolkit.strategy import Strategy


class SlowIdentity(Selector):
    name = "slow_identity"

    def __init__(self, delay=0.0, log=None):
        self.params = {"delay": delay, "log": log}

    def _select(self, workload, privacy, objective):
        with open(self.params["log"], "a") as f:
            f.write(f"{workload.shape[1]}\\n")
        time.sleep(self.params["delay"])
        return Strategy(Identity(workload.shape[1]), self.name)
"""


def test_sigkilled_run_resumes_without_recomputing(tmp_path):
    """A real `mmtoolkit run` killed with SIGKILL halfway, then run again."""
    (tmp_path / "slowsel.py").write_text(SLOW_MODULE)
    log = tmp_path / "calls.log"
    data = counting_config()
    data["columns"] = [
        {
            "name": "S",
            "selector": "slowsel:SlowIdentity",  # a module next to the config
            "params": {"delay": 0.4, "log": str(log)},
        }
    ]
    cfg = write(tmp_path, data)
    results = tmp_path / "results"
    store = store_path(results, "toy", "resume")
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "mmtoolkit", "run", str(cfg), "--results", str(results)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if store.exists() and len(store.read_text().splitlines()) >= 3:
                break
            if proc.poll() is not None:
                pytest.fail(f"the run ended early: {proc.stderr.read().decode()}")
            time.sleep(0.05)
        else:
            pytest.fail("the run did not finish 3 jobs in time")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = {r["key"] for r in JobStore(store).load().values()}
    assert 3 <= len(done) < 6
    calls_before = len(log.read_text().splitlines())

    result = run_config(load_config(cfg), results, progress=io.StringIO())
    calls_after = log.read_text().splitlines()[calls_before:]
    # finished jobs were not recomputed (this fails spuriously if someone edits the package
    # sources during the test: the records' code fingerprint then no longer matches)
    assert len(calls_after) == 6 - len(done), (calls_after, len(done))
    assert result.ok and [c.ours for c in result.cells] == [
        pytest.approx(math.sqrt((n + 1) / 2))
        for n in range(2, 8)  # identity on prefix(n)
    ]
    uninterrupted = run_config(load_config(cfg), tmp_path / "ref", progress=io.StringIO())
    assert comparable(result.csv_path) == comparable(uninterrupted.csv_path)


# ------------------------------------------------------------------ limits
def limit_config(**extra) -> dict:
    return {
        "paper": "toy",
        "table": "limits",
        "metric": "rmse",
        "privacy": {"kind": "zcdp", "rho": 0.5},
        "columns": [
            {"name": "Identity", "selector": "identity"},
            {"name": "Slow", "selector": "_test_slow", "timeout": 1.0},
        ],
        "rows": [
            {"name": "prefix 4", "workload": {"kind": "prefix", "n": 4}, "paper": {"Slow": 1.0}},
            {"name": "prefix 8", "workload": {"kind": "prefix", "n": 8}},
        ],
        "tolerance": {"rel": 0.1},
        **extra,
    }


def test_timeout_becomes_a_cell_and_the_run_continues(tmp_path, test_selectors):
    cfg = load_config(write(tmp_path, limit_config()))
    progress = io.StringIO()
    start = time.monotonic()
    result = run_config(cfg, tmp_path, progress=progress, jobs=2)
    assert time.monotonic() - start < 20  # 30 s sleeps were cut at 1 s
    for row, n in (("prefix 4", 4), ("prefix 8", 8)):
        slow = result.cell(row, "Slow")
        assert slow.status == "timeout" and slow.ours is None and not slow.failed
        assert "timeout (> 1 s)" in slow.note and slow.within_tol is None
        ident = result.cell(row, "Identity")
        assert ident.status == "ok" and ident.ours == pytest.approx(math.sqrt((n + 1) / 2))
    assert result.ok  # a timeout is a result, not a failure
    rows = {(r["row"], r["column"]): r for r in read_csv(result.csv_path)}
    assert rows[("prefix 4", "Slow")]["status"] == "timeout"
    assert rows[("prefix 4", "Slow")]["ours"] == ""
    assert "| timeout" in result.md_path.read_text()
    assert "TIMEOUT (> 1 s)" in progress.getvalue()

    # resuming under the same limit keeps the timeout cells (nothing recomputed) ...
    start = time.monotonic()
    again = run_config(cfg, tmp_path, progress=io.StringIO())
    assert time.monotonic() - start < 5 and again.cell("prefix 4", "Slow").status == "timeout"
    # ... a larger limit recomputes them (and they finish in time)
    data = limit_config()
    data["columns"][1].update(timeout=20.0, params={"delay": 0.05})
    done = run_config(
        load_config(write(tmp_path, data, "l2.yaml")), tmp_path, progress=io.StringIO()
    )
    assert done.cell("prefix 4", "Slow").ours == pytest.approx(math.sqrt(2.5))


def vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    pytest.skip("no /proc/self/status")


def test_memory_limit_becomes_an_out_of_memory_cell(tmp_path, test_selectors):
    limit = vm_size() + 400 * 2**20  # what this process maps now + 400 MiB
    data = limit_config()
    data["columns"] = [
        {"name": "Limited", "selector": "_test_hungry", "memory": limit},
        # the same 2 GB without a limit (another parameter value: another job)
        {"name": "Unlimited", "selector": "_test_hungry", "params": {"gigabytes": 2.001}},
    ]
    data["rows"] = [{"name": "prefix 4", "workload": {"kind": "prefix", "n": 4}}]
    result = run_config(load_config(write(tmp_path, data)), tmp_path, progress=io.StringIO())
    cell = result.cell("prefix 4", "Limited")
    assert cell.status == "out of memory" and cell.ours is None
    assert "out of memory (limit" in cell.note and "MemoryError" in cell.note
    assert result.cell("prefix 4", "Unlimited").ours == pytest.approx(math.sqrt(2.5))


def test_parse_memory():
    assert parse_memory("4GB") == 4 * 10**9 and parse_memory("2GiB") == 2 * 2**30
    assert parse_memory("512 mb") == 512 * 10**6 and parse_memory(1000) == 1000
    assert parse_memory("1.5G") == 1_500_000_000
    for bad in ("4 XB", "GB", -1, 0, True, "-2GB"):
        with pytest.raises(ValueError):
            parse_memory(bad)


# ------------------------------------------------------------------ parallel
def test_process_pool_equals_sequential(tmp_path, test_selectors):
    data = {
        "paper": "toy",
        "table": "pool",
        "metric": {"ratio_to": "Identity"},
        "privacy": {"kind": "zcdp", "rho": 0.5},
        "seed": 3,
        "columns": [
            {"name": "Identity", "selector": "identity"},
            {"name": "HB", "selector": "hb"},
            {"name": "HDMM", "selector": "opt0", "params": {"restarts": 2}},
            {"name": "C", "selector": "_test_counting"},
        ],
        "rows": [
            {"name": f"all_range {n}", "workload": {"kind": "all_range", "n": n}}
            for n in (8, 16, 32)
        ],
    }
    cfg = load_config(write(tmp_path, data))
    seq = run_config(cfg, tmp_path / "seq", progress=io.StringIO(), jobs=1)
    progress = io.StringIO()
    par = run_config(cfg, tmp_path / "par", progress=progress, jobs=2)
    assert comparable(par.csv_path) == comparable(seq.csv_path)
    assert seq.ok and all(c.ours == 1.0 for c in seq.cells if c.column == "Identity")
    lines = progress.getvalue().splitlines()
    assert len(lines) == 12 and "ETA" in lines[0] and lines[-1].startswith("[12/12] ")
    # the ratio cells are evaluate.error_ratio of the two strategies
    privacy = ZCDP(0.5)
    W = workloads.all_range(16)
    hb = selectors.get("hb").select(W, privacy)
    ident = Identity(16)
    assert seq.cell("all_range 16", "HB").ours == pytest.approx(
        evaluate.error_ratio(W, hb, ident, privacy), rel=1e-12
    )
    csv_row = next(
        r for r in read_csv(seq.csv_path) if (r["row"], r["column"]) == ("all_range 16", "HB")
    )
    assert json.loads(csv_row["metadata"]) == jsonable_meta(hb.metadata)


def jsonable_meta(meta: dict) -> dict:
    return json.loads(json.dumps({k: np.asarray(v).tolist() for k, v in meta.items()}))


# ------------------------------------------------------------------ selector-engineer requests
def test_ratio_to_the_svd_bound(tmp_path):
    data = {
        "paper": "toy",
        "table": "lb",
        "metric": {"ratio_to": "LB"},
        "privacy": {"kind": "zcdp", "rho": 0.5},
        "columns": [
            {"name": "LB", "svd_bound": True},
            {"name": "Identity", "selector": "identity"},
        ],
        "rows": [{"name": "prefix 8", "workload": {"kind": "prefix", "n": 8}}],
    }
    result = run_config(load_config(write(tmp_path, data)), tmp_path, progress=io.StringIO())
    W = np.tril(np.ones((8, 8)))
    bound = np.linalg.svd(W, compute_uv=False).sum() ** 2 / 8  # Li & Miklau 2012, Thm 2
    assert result.cell("prefix 8", "LB").ours == 1.0
    assert result.cell("prefix 8", "Identity").ours == pytest.approx(
        math.sqrt((W**2).sum() / bound), rel=1e-10
    )
    assert result.cell("prefix 8", "Identity").ours > 1


def test_objective_per_column(tmp_path):
    dom = {"sizes": [3, 4, 5]}
    data = {
        "paper": "toy",
        "table": "objective",
        "metric": "max_variance",
        "privacy": {"kind": "zcdp", "rho": 0.5},
        "columns": [
            {"name": "RP sum", "selector": "residual_planner"},
            {"name": "RP max", "selector": "residual_planner", "objective": "max"},
        ],
        "rows": [{"name": "2-way", "workload": {"kind": "marginals", "domain": dom, "k": 2}}],
    }
    result = run_config(load_config(write(tmp_path, data)), tmp_path, progress=io.StringIO())
    W = workloads.marginals(Domain.from_sizes([3, 4, 5]), 2)
    privacy = ZCDP(0.5)
    for col, objective in (("RP sum", "sum"), ("RP max", "max")):
        s = selectors.get("residual_planner").select(W, privacy, objective)
        assert result.cell("2-way", col).ours == pytest.approx(
            evaluate.max_variance(W, s, privacy), rel=1e-6
        )
    # optimising the max variance gives a smaller max variance than optimising the sum
    assert result.cell("2-way", "RP max").ours < result.cell("2-way", "RP sum").ours * (1 - 1e-3)


def test_explicit_matrix_workloads(tmp_path):
    rng = np.random.default_rng(0)
    W = rng.integers(0, 2, size=(5, 4)).astype(float)
    W[0] = 1.0
    np.save(tmp_path / "w.npy", W)
    np.savetxt(tmp_path / "w.csv", W, delimiter=",")
    data = {
        "paper": "toy",
        "table": "matrix",
        "metric": "total_error",
        "privacy": {"kind": "zcdp", "rho": 0.5},
        "columns": [{"name": "Identity", "selector": "identity"}],
        "rows": [
            {"name": "npy", "workload": {"kind": "matrix", "file": "w.npy"}},
            {"name": "csv", "workload": {"kind": "matrix", "file": "w.csv"}},
            {"name": "inline", "workload": {"kind": "matrix", "rows": W.tolist()}},
            {
                "name": "kron",
                "workload": {
                    "kind": "kron",
                    "factors": [{"kind": "matrix", "rows": W.tolist()}, {"kind": "total", "n": 2}],
                },
            },
        ],
    }
    cfg = load_config(write(tmp_path, data))
    result = run_config(cfg, tmp_path, progress=io.StringIO())
    for row in ("npy", "csv", "inline"):
        assert result.cell(row, "Identity").ours == pytest.approx((W**2).sum())  # ||W||_F²
    assert result.cell("kron", "Identity").ours == pytest.approx(2 * (W**2).sum())
    keys = expand_jobs(cfg)[1]  # the same matrix gives the same job, whatever its source
    assert keys[("npy", "Identity")] == keys[("csv", "Identity")] == keys[("inline", "Identity")]
    np.testing.assert_array_equal(cfg.rows[0].workload.build().dense(), Dense(W).dense())


def test_quick_variant(tmp_path, test_selectors):
    data = counting_config(rows=3)
    data["columns"].append({"name": "HDMM", "selector": "opt0", "params": {"restarts": 5}})
    plain = load_config(write(tmp_path, data))
    q = quick_config(plain)  # default rule: first row, restarts -> 1
    assert [r.name for r in q.rows] == ["prefix 2"] and q.table == "resume.quick"
    assert q.column("HDMM").params["restarts"] == 1 and plain.column("HDMM").params["restarts"] == 5
    data["quick"] = {
        "rows": ["prefix 3", "prefix 4"],
        "columns": ["C", "HDMM"],
        "params": {"HDMM": {"restarts": 2}},
        "timeout": 30,
    }
    cfg = load_config(write(tmp_path, data))
    q = quick_config(cfg)
    assert [r.name for r in q.rows] == ["prefix 3", "prefix 4"]
    assert [c.name for c in q.columns] == ["C", "HDMM"]
    assert q.column("HDMM").params["restarts"] == 2 and q.timeout == 30
    result = run_config(cfg, tmp_path, progress=io.StringIO(), quick=True)
    assert result.csv_path.name == "resume.quick.csv" and len(result.cells) == 4
    assert not (tmp_path / "toy" / "resume.csv").exists()


def test_a_column_or_job_without_a_selector_is_a_clear_error(tmp_path, test_selectors):
    """A selector column built without its selector: its jobs and its quick variant raise a
    ConfigError naming the column; a job without a workload or a selector fails, naming it."""
    cfg = load_config(write(tmp_path, counting_config(rows=1)))
    cfg.column("C").selector = None
    for make in (expand_jobs, quick_config):
        with pytest.raises(ConfigError, match="column 'C': no selector"):
            make(cfg)
    spec = JobSpec("k", None, {"kind": "zcdp", "rho": 0.5}, "rmse", None)
    assert execute(spec)["error"] == "building the workload: ValueError: the job has no workload"
    spec.workload = cfg.rows[0].workload
    rec = execute(spec)
    assert rec["status"] == "failed" and rec["error"] == (
        "selection: ValueError: the job names no selector and is not the SVD bound"
    )


def test_bad_run_arguments(tmp_path, test_selectors):
    cfg = load_config(write(tmp_path, counting_config(rows=1)))
    from mmtoolkit.runner.executors import ExecutorError

    with pytest.raises(ExecutorError, match="jobs: must be >= 1, got 0"):
        run_config(cfg, tmp_path, jobs=0, progress=io.StringIO())
    with pytest.raises(ExecutorError, match="unknown executor 'slurm'"):
        run_config(cfg, tmp_path, executor="slurm", progress=io.StringIO())
    with pytest.raises(ExecutorError, match="needs --scheduler"):
        run_config(cfg, tmp_path, executor="dask", progress=io.StringIO())
