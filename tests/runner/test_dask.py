"""``--executor dask``: the same config against a Dask LocalCluster gives the local numbers."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import yaml

from mmtoolkit.cli import main
from mmtoolkit.runner import load_config, run_config
from mmtoolkit.runner.executors import ExecutorError

distributed = pytest.importorskip("distributed")

CONFIG = {
    "paper": "toy",
    "table": "dask",
    "metric": {"ratio_to": "Identity"},
    "privacy": {"kind": "zcdp", "rho": 0.5},
    "seed": 5,
    "columns": [
        {"name": "SVDB", "svd_bound": True},
        {"name": "Identity", "selector": "identity"},
        {"name": "HB", "selector": "hb"},
        {"name": "OPT0", "selector": "opt0", "params": {"restarts": 2}},  # seeded per job
        {"name": "Slow", "selector": "hb", "timeout": 60, "params": {"branching": 4}},
    ],
    "rows": [
        {"name": "all_range 16", "workload": {"kind": "all_range", "n": 16}},
        {"name": "prefix 32", "workload": {"kind": "prefix", "n": 32}},
    ],
}


def read(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))  # no timings in the CSV: equal runs read equal


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        env={"OMP_NUM_THREADS": "1"},
    ) as c:
        yield c


def test_dask_equals_local(tmp_path, cluster):
    path = tmp_path / "dask.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    cfg = load_config(path)
    local = run_config(cfg, tmp_path / "local", progress=io.StringIO())
    assert local.ok
    progress = io.StringIO()
    remote = run_config(
        cfg,
        tmp_path / "dask",
        progress=progress,
        executor="dask",
        scheduler=cluster.scheduler_address,
    )
    assert remote.ok and read(remote.csv_path) == read(local.csv_path)
    assert progress.getvalue().count("\n") == 10
    # through the command line too (the job store makes it recompute nothing)
    args = ["run", str(path), "--results", str(tmp_path / "dask"), "--executor", "dask"]
    assert main([*args, "--scheduler", cluster.scheduler_address, "-q"]) == 0
    assert read(remote.csv_path) == read(local.csv_path)


def test_unreachable_scheduler_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("mmtoolkit.runner.executors.CONNECT_TIMEOUT", "0.5s")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    with pytest.raises(ExecutorError, match="cannot connect to the Dask scheduler"):
        run_config(
            load_config(path),
            tmp_path,
            progress=io.StringIO(),
            executor="dask",
            scheduler="tcp://127.0.0.1:1",
        )
    assert main(["run", str(path), "--executor", "dask"]) == 2
    assert "needs --scheduler" in capsys.readouterr().err
