"""Config loading and validation: every malformed config is one ConfigError naming file + field."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from mmtoolkit import workloads
from mmtoolkit.domain import Domain
from mmtoolkit.privacy import ZCDP
from mmtoolkit.runner import ConfigError, load_config
from mmtoolkit.workload_specs import DomainSpec, WorkloadSpec, workload_kinds

REPO = Path(__file__).resolve().parents[2]

BASE = {
    "paper": "toy",
    "table": "t1",
    "title": "A toy table",
    "source": "nobody, Table 1",
    "metric": "rmse",
    "privacy": {"kind": "zcdp", "rho": 0.5},
    "tolerance": {"abs": 0.001},
    "seed": 3,
    "columns": [
        {"name": "SVDB", "svd_bound": True},
        {"name": "Identity", "selector": "identity"},
        {"name": "LM", "selector": "laplace", "params": {}},
    ],
    "rows": [
        {
            "name": "tiny 1-way",
            "workload": {"kind": "marginals", "domain": {"sizes": [2, 3]}, "k": 1},
            "paper": {"SVDB": 1.0},
            "notes": {"SVDB": "a note"},
        },
        {"name": "prefix 8", "workload": {"kind": "prefix", "n": 8}},
    ],
}


def write(tmp_path: Path, data, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    text = data if isinstance(data, str) else yaml.safe_dump(data, allow_unicode=True)
    path.write_text(text, encoding="utf-8")
    return path


def mutated(fn):
    data = copy.deepcopy(BASE)
    fn(data)
    return data


def test_valid_config_loads(tmp_path):
    cfg = load_config(write(tmp_path, BASE))
    assert (cfg.paper, cfg.table, cfg.title, cfg.seed) == ("toy", "t1", "A toy table", 3)
    assert cfg.metric.kind == "rmse" and cfg.metric.ratio_to is None
    assert cfg.privacy == ZCDP(0.5)
    assert cfg.privacy_spec == {"kind": "zcdp", "rho": 0.5}
    assert cfg.tolerance.abs == 0.001 and cfg.tolerance.rel == 0.0
    assert [c.name for c in cfg.columns] == ["SVDB", "Identity", "LM"]
    assert cfg.columns[0].svd_bound and cfg.columns[0].selector is None
    assert cfg.columns[1].selector == "identity" and cfg.columns[1].params == {}
    assert [r.name for r in cfg.rows] == ["tiny 1-way", "prefix 8"]
    assert cfg.rows[0].paper == {"SVDB": 1.0}
    assert cfg.rows[0].notes == {"SVDB": "a note"}
    assert cfg.rows[1].paper == {}
    spec = cfg.rows[0].workload
    assert isinstance(spec, WorkloadSpec) and spec.kind == "marginals"
    assert isinstance(spec.args["domain"], DomainSpec)
    assert spec.args["domain"].build() == Domain.from_sizes([2, 3])


def test_defaults_and_ratio_metric(tmp_path):
    data = mutated(lambda d: d.update(metric={"ratio_to": "Identity"}))
    for k in ("title", "source", "seed"):
        data.pop(k)
    data["columns"] = data["columns"][1:]
    data["rows"][0].pop("paper")
    data["rows"][0].pop("notes")
    data.pop("tolerance")  # allowed: no paper values
    cfg = load_config(write(tmp_path, data))
    assert cfg.metric.kind == "ratio" and cfg.metric.ratio_to == "Identity"
    assert cfg.title == "toy t1" and cfg.source == "" and cfg.seed is None
    assert cfg.tolerance is None


def test_tolerance_semantics(tmp_path):
    cfg = load_config(write(tmp_path, mutated(lambda d: d.update(tolerance={"rel": 0.02}))))
    assert cfg.tolerance.within(1.019, 1.0) and not cfg.tolerance.within(1.021, 1.0)
    cfg = load_config(write(tmp_path, BASE))  # abs 0.001
    assert cfg.tolerance.within(3.0474, 3.047) and not cfg.tolerance.within(3.0485, 3.047)


def test_nested_workload_specs_build_the_same_matrix(tmp_path):
    data = copy.deepcopy(BASE)
    data["rows"] = [
        {
            "name": "permuted",
            "workload": {"kind": "permuted", "workload": {"kind": "all_range", "n": 8}, "seed": 0},
        },
        {
            "name": "kron",
            "workload": {
                "kind": "kron",
                "factors": [{"kind": "prefix", "n": 4}, {"kind": "identity", "n": 3}],
            },
        },
        {
            "name": "union",
            "workload": {
                "kind": "union",
                "workloads": [{"kind": "total", "n": 5}, {"kind": "identity", "n": 5}],
                "weights": [1.0, 2.0],
            },
        },
        {
            "name": "preset",
            "workload": {
                "kind": "marginals",
                "domain": {"preset": "synth", "n": 3, "d": 2},
                "k": 2,
            },
        },
    ]
    data["rows"][0]["paper"] = {"SVDB": 1.0}
    cfg = load_config(write(tmp_path, data))
    by = {r.name: r.workload.build() for r in cfg.rows}
    expected = {
        "permuted": workloads.permuted(workloads.all_range(8), 0),
        "kron": workloads.kron([workloads.prefix(4), workloads.identity(3)]),
        "union": workloads.union([workloads.total(5), workloads.identity(5)], weights=[1.0, 2.0]),
        "preset": workloads.marginals(Domain.from_sizes([3, 3]), 2),
    }
    for name, W in expected.items():
        np.testing.assert_allclose(by[name].dense(), W.dense(), err_msg=name)


def test_workload_kinds_are_public_builders():
    kinds = workload_kinds()
    for k in (
        "identity",
        "total",
        "prefix",
        "all_range",
        "width_range",
        "permuted",
        "kron",
        "union",
        "marginal",
        "marginals",
        "marginals_list",
        "range_marginals",
        "prefix_marginals",
    ):
        assert k in kinds
    assert "num_queries" not in kinds and "domain_size" not in kinds


def test_shipped_table4_config_is_valid():
    cfg = load_config(REPO / "configs" / "residual_planner" / "table4.yaml")
    assert (cfg.paper, cfg.table) == ("residual_planner", "table4")
    assert len(cfg.rows) == 12 and {"SVDB", "Identity", "LM"} <= {c.name for c in cfg.columns}
    assert cfg.privacy == ZCDP(0.5)
    svdb = [r.paper["SVDB"] for r in cfg.rows]
    assert svdb == [
        3.047,
        6.359,
        10.515,
        10.665,
        1.744,
        2.035,
        2.048,
        2.276,
        2.875,
        5.634,
        8.702,
        8.876,
    ]
    lower = [r.workload.args.get("lower", False) for r in cfg.rows]
    assert lower == [False, False, False, True] * 3


# ----------------------------------------------------------------------------- errors
def _del(*keys):
    def f(d):
        target = d
        for k in keys[:-1]:
            target = target[k]
        del target[keys[-1]]

    return f


def _set(value, *keys):
    def f(d):
        target = d
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value

    return f


BAD = {
    "unknown top-level field": (_set(1, "colums"), "colums: unknown field"),
    "missing paper": (_del("paper"), "paper: missing required field"),
    "missing rows": (_del("rows"), "rows: missing required field"),
    "missing workload": (_del("rows", 1, "workload"), "rows[1].workload: missing required"),
    "missing column name": (_del("columns", 1, "name"), "columns[1].name: missing required"),
    "columns not a list": (_set({"a": 1}, "columns"), "columns: expected a list"),
    "empty rows": (_set([], "rows"), "rows: must not be empty"),
    "row name not a string": (_set(5, "rows", 1, "name"), "rows[1].name: expected a string"),
    "paper value not a number": (
        _set("big", "rows", 0, "paper", "SVDB"),
        "rows[0].paper.SVDB: expected a number",
    ),
    "seed not an int": (_set(1.5, "seed"), "seed: expected an integer"),
    "seed negative": (_set(-1, "seed"), "seed: must be >= 0"),
    "svd_bound not bool": (_set("yes", "columns", 0, "svd_bound"), "columns[0].svd_bound"),
    "params not a mapping": (_set([1], "columns", 2, "params"), "columns[2].params"),
    "bad selector params": (_set({"nope": 1}, "columns", 1, "params"), "columns[1].params"),
    "unknown column field": (_set(1, "columns", 1, "selecter"), "columns[1].selecter"),
    "unknown row field": (_set(1, "rows", 0, "workloads"), "rows[0].workloads: unknown field"),
    "column without selector": (_del("columns", 1, "selector"), "columns[1].selector"),
    "selector with svd_bound": (
        _set("identity", "columns", 0, "selector"),
        "columns[0].selector: not allowed",
    ),
    "unknown selector": (
        _set("hdmmm", "columns", 2, "selector"),
        "columns[2].selector: unknown selector 'hdmmm'",
    ),
    "unknown workload kind": (
        _set("marginalz", "rows", 0, "workload", "kind"),
        "rows[0].workload.kind: unknown workload kind 'marginalz'",
    ),
    "not a builder": (
        _set("num_queries", "rows", 1, "workload", "kind"),
        "rows[1].workload.kind: unknown workload kind",
    ),
    "bad builder argument": (_set(3, "rows", 1, "workload", "m"), "rows[1].workload: prefix()"),
    "missing builder argument": (_del("rows", 1, "workload", "n"), "rows[1].workload: prefix()"),
    "k too large": (_set(3, "rows", 0, "workload", "k"), "rows[0].workload: marginals()"),
    "unknown attribute": (
        _set(
            {"kind": "marginal", "domain": {"sizes": [2, 3]}, "attrs": ["nope"]},
            "rows",
            0,
            "workload",
        ),
        "rows[0].workload: marginal()",
    ),
    "unknown dataset": (
        _set("adultt", "rows", 0, "workload", "domain"),
        "rows[0].workload.domain: unknown dataset 'adultt'",
    ),
    "bad domain sizes": (
        _set({"sizes": [2, 0]}, "rows", 0, "workload", "domain"),
        "rows[0].workload.domain.sizes[1]",
    ),
    "domain names length": (
        _set({"sizes": [2, 3], "names": ["a"]}, "rows", 0, "workload", "domain"),
        "rows[0].workload.domain.names",
    ),
    "bad preset params": (
        _set({"preset": "synth", "n": 3, "q": 1}, "rows", 0, "workload", "domain"),
        "rows[0].workload.domain",
    ),
    "bad nested kind": (
        _set(
            {"kind": "kron", "factors": [{"kind": "prefix", "n": 2}, {"kind": "nope"}]},
            "rows",
            1,
            "workload",
        ),
        "rows[1].workload.factors[1].kind: unknown workload kind 'nope'",
    ),
    "duplicate row": (
        _set("tiny 1-way", "rows", 1, "name"),
        "rows[1].name: duplicate row name 'tiny 1-way'",
    ),
    "duplicate column": (
        _set("SVDB", "columns", 2, "name"),
        "columns[2].name: duplicate column name 'SVDB'",
    ),
    "paper for missing column": (
        _set({"Nope": 1.0}, "rows", 0, "paper"),
        "rows[0].paper.Nope: no column named 'Nope'",
    ),
    "note for missing column": (
        _set({"Nope": "x"}, "rows", 0, "notes"),
        "rows[0].notes.Nope: no column named",
    ),
    "ratio_to missing column": (
        _set({"ratio_to": "HDMM"}, "metric"),
        "metric.ratio_to: no column named 'HDMM'",
    ),
    "ratio_to unknown column": (_set({"ratio_to": "SVD"}, "metric"), "metric.ratio_to: no col"),
    "negative timeout": (_set(-5, "timeout"), "timeout: must be a number of seconds > 0"),
    "zero column timeout": (_set(0, "columns", 1, "timeout"), "columns[1].timeout: must be"),
    "timeout string": (_set("1h", "timeout"), "timeout: expected a number"),
    "bad memory unit": (_set("4 parsecs", "memory"), "memory: unknown size unit"),
    "negative memory": (_set(-1, "columns", 2, "memory"), "columns[2].memory: a memory limit"),
    "unsupported objective": (
        _set("max", "columns", 1, "objective"),
        "columns[1].objective: identity does not support objective 'max'",
    ),
    "objective on svd column": (_set("sum", "columns", 0, "objective"), "columns[0].objective"),
    "custom selector bad module": (
        _set("no_such_module_xyz:Sel", "columns", 1, "selector"),
        "columns[1].selector: cannot import module 'no_such_module_xyz'",
    ),
    "custom selector missing class": (
        _set("mmtoolkit.selectors.baselines:Nope", "columns", 1, "selector"),
        "columns[1].selector: module 'mmtoolkit.selectors.baselines' has no attribute 'Nope'",
    ),
    "custom selector not a Selector": (
        _set("mmtoolkit.linalg:Dense", "columns", 1, "selector"),
        "columns[1].selector: 'mmtoolkit.linalg:Dense' is not a mmtoolkit.selectors.Selector",
    ),
    "custom selector malformed": (
        _set(":Dense", "columns", 1, "selector"),
        "columns[1].selector: ':Dense' is not of the form",
    ),
    "quick unknown row": (_set({"rows": ["nope"]}, "quick"), "quick.rows[0]: no row named"),
    "quick unknown column": (_set({"columns": ["X"]}, "quick"), "quick.columns[0]: no column"),
    "quick unknown field": (_set({"restarts": 1}, "quick"), "quick.restarts: unknown field"),
    "quick bad params": (
        _set({"params": {"LM": {"nope": 1}}}, "quick"),
        "quick.params.LM: laplace:",
    ),
    "quick params of missing column": (
        _set({"params": {"X": {}}}, "quick"),
        "quick.params.X: no column named",
    ),
    "matrix without data": (
        _set({"kind": "matrix"}, "rows", 1, "workload"),
        "rows[1].workload: matrix: give exactly one of 'file' or 'rows'",
    ),
    "matrix ragged rows": (
        _set({"kind": "matrix", "rows": [[1, 0], [1]]}, "rows", 1, "workload"),
        "rows[1].workload.rows: matrix: all rows must have the same length",
    ),
    "matrix non-numeric": (
        _set({"kind": "matrix", "rows": [["a", "b"]]}, "rows", 1, "workload"),
        "rows[1].workload.rows: matrix: expected real numbers",
    ),
    "matrix missing file": (
        _set({"kind": "matrix", "file": "nope.npy"}, "rows", 1, "workload"),
        "rows[1].workload.file: no such file",
    ),
    "matrix unknown field": (
        _set({"kind": "matrix", "rows": [[1]], "n": 2}, "rows", 1, "workload"),
        "rows[1].workload.n: unknown field",
    ),
    "unknown metric": (_set("mse", "metric"), "metric: unknown metric 'mse'"),
    "svd_bound with max_variance": (
        _set("max_variance", "metric"),
        "columns[0].svd_bound: the SVD bound",
    ),
    "negative tolerance": (_set({"abs": -0.1}, "tolerance"), "tolerance.abs: must be"),
    "negative rel tolerance": (_set({"rel": -1}, "tolerance"), "tolerance.rel: must be"),
    "unknown tolerance key": (_set({"absolute": 1}, "tolerance"), "tolerance.absolute"),
    "tolerance string": (_set({"rel": "tight"}, "tolerance"), "tolerance.rel: expected a number"),
    "no tolerance with paper values": (_del("tolerance"), "tolerance: missing required"),
    "bad privacy kind": (_set({"kind": "renyi"}, "privacy"), "privacy: "),
    "bad privacy value": (_set({"kind": "zcdp", "rho": -1}, "privacy"), "privacy: "),
    "unsafe table name": (_set("../x", "table"), "table: "),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_config_raises_config_error(tmp_path, case):
    fn, expected = BAD[case]
    path = write(tmp_path, mutated(fn), name="bad_config.yaml")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert msg.startswith(f"{path}: "), msg
    assert expected in msg, msg


def test_yaml_syntax_error(tmp_path):
    path = write(tmp_path, "paper: toy\nrows: [1, 2\n", name="broken.yaml")
    with pytest.raises(ConfigError, match="broken.yaml: line .*YAML syntax error"):
        load_config(path)


def test_duplicate_yaml_key(tmp_path):
    text = yaml.safe_dump(BASE, allow_unicode=True) + "paper: again\n"
    path = write(tmp_path, text, name="dup.yaml")
    with pytest.raises(ConfigError, match=r"dup.yaml: line \d+.*duplicate key 'paper'"):
        load_config(path)


@pytest.mark.parametrize("text", ["", "- 1\n- 2\n", "just a string\n"])
def test_not_a_mapping(tmp_path, text):
    path = write(tmp_path, text, name="weird.yaml")
    with pytest.raises(ConfigError, match="weird.yaml"):
        load_config(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="nothere.yaml: cannot read config"):
        load_config(tmp_path / "nothere.yaml")


def test_exponent_floats_are_numbers(tmp_path):
    # PyYAML alone (YAML 1.1) would read 1e-6 as the string "1e-6"
    text = (
        "paper: p\ntable: t\nmetric: rmse\n"
        "privacy: {kind: approx, epsilon: 0.5, delta: 1e-6, calibration: classic}\n"
        "columns: [{name: I, selector: identity}]\n"
        "rows: [{name: r, workload: {kind: prefix, n: 4}}]\n"
    )
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    assert load_config(path).privacy.delta == 1e-6
