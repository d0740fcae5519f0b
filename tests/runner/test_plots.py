"""Figures from configs and figure sheets: validation, the plotted data, PNGs, re-rendering
from the CSV without recomputing, and `mmtoolkit reproduce` on temp copies of small configs."""

from __future__ import annotations

import csv
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from mmtoolkit import evaluate
from mmtoolkit.cli import main
from mmtoolkit.runner import ConfigError, load_config, run_config
from mmtoolkit.runner.figures import load_sheet
from mmtoolkit.runner.plots import figure_data, plot_file, render_sheet, sheet_figure_data

REPO = Path(__file__).resolve().parents[2]

BASE = {
    "paper": "toy",
    "table": "fig",
    "title": "Toy figure table",
    "metric": "rmse",
    "privacy": {"kind": "zcdp", "rho": 0.5},
    "tolerance": {"rel": 0.01},
    "columns": [
        {"name": "Identity", "selector": "identity"},
        {"name": "LM", "selector": "laplace"},
        {"name": "SVDB", "svd_bound": True},
    ],
    "rows": [
        {
            "name": "d=2",
            "workload": {
                "kind": "marginals",
                "domain": {"preset": "synth", "n": 3, "d": 2},
                "k": 1,
            },
            "paper": {"Identity": 1.5},
        },
        {
            "name": "d=3",
            "workload": {
                "kind": "marginals",
                "domain": {"preset": "synth", "n": 3, "d": 3},
                "k": 1,
            },
            "paper": {"Identity": 2.0, "SVDB": 1.0},
        },
    ],
}


def write(tmp_path: Path, data: dict, name: str = "fig.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def with_figures(figures, **top) -> dict:
    return {**BASE, **top, "figures": figures}


@dataclass
class C:  # a cell as render_figures sees it
    row: str
    column: str
    ours: float | None
    paper: float | None = None
    seconds: float | None = 0.0


def test_figures_parse_into_specs(tmp_path):
    cfg = load_config(
        write(
            tmp_path,
            with_figures(
                [
                    {"name": "vs_d", "x": {"param": "domain.d"}, "logx": True, "logy": True},
                    {
                        "name": "bars",
                        "kind": "bar",
                        "y": "seconds",
                        "rows": ["d=3", "d=2"],
                        "columns": [{"label": "trials", "columns": ["Identity", "LM"]}],
                    },
                    {"name": "vals", "x": {"values": [10, 20]}, "columns": ["SVDB"]},
                ]
            ),
        )
    )
    a, b, c = cfg.figures
    assert (a.name, a.kind, a.y, a.x, a.x_param, a.x_values) == (
        "vs_d", "line", "value", "param", "domain.d", (2.0, 3.0)
    )  # fmt: skip
    assert a.logx and a.logy and a.paper
    assert [s.columns for s in a.series] == [("Identity",), ("LM",), ("SVDB",)]
    assert (b.kind, b.y, b.x, b.rows) == ("bar", "seconds", "rows", ("d=3", "d=2"))
    assert b.series[0].label == "trials" and b.series[0].columns == ("Identity", "LM")
    assert b.series[0].errorbars == "minmax"
    assert c.x_values == (10.0, 20.0) and c.series[0].columns == ("SVDB",)
    assert load_config(write(tmp_path, BASE, "plain.yaml")).figures == ()


MAXVAR = {
    **BASE,
    "metric": "max_variance",
    "columns": BASE["columns"][:2],
    "rows": [{**r, "paper": {"Identity": 1.0}} for r in BASE["rows"]],
}


@pytest.mark.parametrize(
    "data, where, message",
    [
        (
            with_figures([{"name": "f", "columns": ["Nope"]}]),
            "figures[0].columns[0]",
            "no column named 'Nope'",
        ),
        (
            {**MAXVAR, "figures": [{"name": "f", "y": "rmse"}]},
            "figures[0].y",
            "'rmse' is not computed by this config (the config computes max_variance",
        ),
        (
            with_figures([{"name": "f", "y": "accuracy"}]),
            "figures[0].y",
            "'accuracy' is not a metric",
        ),
        (
            with_figures([{"name": "f", "x": {"param": "domain.q"}}]),
            "figures[0].x.param",
            "row 'd=2' has no workload parameter 'domain.q'",
        ),
        (
            with_figures([{"name": "f", "x": {"param": "domain.preset"}}]),
            "figures[0].x.param",
            "is not a number",
        ),
        (
            with_figures([{"name": "f"}, {"name": "f"}]),
            "figures[1].name",
            "duplicate figure name 'f'",
        ),
        (with_figures([{"name": "f", "colour": "red"}]), "figures[0].colour", "unknown field"),
        (with_figures([{"kind": "line"}]), "figures[0].name", "missing required field"),
        (with_figures([{"name": "a/b"}]), "figures[0].name", "(a file name)"),
        (with_figures([{"name": "f", "kind": "pie"}]), "figures[0].kind", "unknown kind 'pie'"),
        (
            with_figures([{"name": "f", "kind": "bar", "x": {"param": "k"}}]),
            "figures[0].x",
            "a bar figure's x axis is the rows",
        ),
        (with_figures([{"name": "f", "logx": True}]), "figures[0].logx", "needs a numeric x"),
        (
            with_figures([{"name": "f", "x": {"values": [1]}}]),
            "figures[0].x.values",
            "expected a list of 2 numbers",
        ),
        (
            with_figures([{"name": "f", "x": {"values": [0, 1]}, "logx": True}]),
            "figures[0].logx",
            "positive",
        ),
        (
            with_figures([{"name": "f", "rows": ["d=9"]}]),
            "figures[0].rows[0]",
            "no row named 'd=9'",
        ),
        (
            with_figures([{"name": "f", "columns": ["LM", {"label": "g", "columns": ["LM"]}]}]),
            "figures[0].columns[1].columns[0]",
            "plotted twice",
        ),
        (
            with_figures(
                [{"name": "f", "columns": [{"label": "g", "columns": ["LM"], "errorbars": "iqr"}]}]
            ),
            "figures[0].columns[0].errorbars",
            "unknown 'iqr'",
        ),
        (with_figures([{"name": "f", "logy": "yes"}]), "figures[0].logy", "expected true or false"),
        (with_figures({"name": "f"}), "figures", "expected a list, got dict"),
    ],
)
def test_bad_figures_name_file_and_field(tmp_path, data, where, message):
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    text = str(exc.value)
    assert text.startswith(f"{path}: {where}: "), text
    assert message in text


def test_figure_data_groups_trials_and_draws_the_paper(tmp_path):
    cfg = load_config(
        write(
            tmp_path,
            with_figures(
                [
                    {
                        "name": "f",
                        "x": {"param": "domain.d"},
                        "columns": [{"label": "mm", "columns": ["Identity", "LM"]}, "SVDB"],
                    },
                    {
                        "name": "g",
                        "columns": [
                            {"label": "sd", "columns": ["Identity", "LM"], "errorbars": "std"}
                        ],
                        "y": "seconds",
                    },
                ]
            ),
        )
    )
    cells = [
        C("d=2", "Identity", 1.0, 1.5, 4.0),
        C("d=2", "LM", 3.0, None, 8.0),
        C("d=2", "SVDB", 0.5),
        C("d=3", "Identity", 2.0, 2.0, 1.0),
        C("d=3", "LM", None, None, 100.0),  # failed: no value, its seconds are not plotted
        C("d=3", "SVDB", 0.9, 1.0),
    ]
    series, cats = figure_data(cfg.figures[0], cells)
    assert cats is None
    mm, svdb = series
    assert mm.x == [2.0, 3.0] and mm.y == [2.0, 2.0]  # mean of (1, 3); only 2 at d=3
    assert mm.err == ([1.0, 0.0], [1.0, 0.0])  # min-max around the mean
    assert (mm.paper_x, mm.paper_y) == ([2.0, 3.0], [1.5, 2.0])
    assert svdb.y == [0.5, 0.9] and svdb.err is None
    assert (svdb.paper_x, svdb.paper_y) == ([3.0], [1.0])
    (sd,), cats = figure_data(cfg.figures[1], cells)
    assert cats == ["d=2", "d=3"] and sd.x == [0, 1]
    assert sd.y == [6.0, 1.0]  # seconds: mean(4, 8); the failed cell's 100 s is dropped
    s = math.sqrt(((4 - 6) ** 2 + (8 - 6) ** 2) / 1)
    assert sd.err == ([s, 0.0], [s, 0.0])
    assert sd.paper_x == [] and sd.paper_y == []  # no published seconds
    no_paper = cfg.figures[0].__class__(**{**cfg.figures[0].__dict__, "paper": False})
    assert figure_data(no_paper, cells)[0][0].paper_x == []
    failed_only = [C("d=2", "SVDB", None), C("d=3", "SVDB", None)]
    (_, svdb), _ = figure_data(cfg.figures[0], failed_only)
    assert all(math.isnan(v) for v in svdb.y)


def png_pixels(path: Path) -> np.ndarray:
    from matplotlib.image import imread

    return imread(path)


def test_run_renders_figures_and_plot_rerenders_without_recomputing(tmp_path, monkeypatch):
    cfg_path = write(
        tmp_path,
        with_figures(
            [
                {"name": "vs_d", "x": {"param": "domain.d"}, "logy": True},
                {"name": "bars", "kind": "bar"},
            ]
        ),
    )
    results = tmp_path / "results"
    run_config(load_config(cfg_path), results, progress=open("/dev/null", "w"))
    pngs = [results / "toy" / "fig_vs_d.png", results / "toy" / "fig_bars.png"]
    first = [p.read_bytes() for p in pngs]
    for p in pngs:
        img = png_pixels(p)
        assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 500
        assert img[..., :3].std() > 0.05  # not blank
    for p in pngs:
        p.unlink()

    def boom(*a, **k):
        raise AssertionError("plot must not recompute")

    monkeypatch.setattr(evaluate, "rmse", boom)
    monkeypatch.setattr(evaluate, "svd_bound_rmse", boom)
    assert plot_file(cfg_path, results) == pngs
    assert [p.read_bytes() for p in pngs] == first  # same CSV, same picture
    assert main(["plot", str(cfg_path), "--results", str(results)]) == 0


def test_plot_needs_figures_and_a_csv(tmp_path, capsys):
    plain = write(tmp_path, BASE, "plain.yaml")
    with pytest.raises(ConfigError, match=r"plain\.yaml: figures: the config declares no figures"):
        plot_file(plain, tmp_path / "results")
    figs = write(tmp_path, with_figures([{"name": "f"}]))
    with pytest.raises(ConfigError, match=r"fig\.yaml: no results table .*fig\.csv yet"):
        plot_file(figs, tmp_path / "results")
    assert main(["plot", str(figs), "--results", str(tmp_path / "results")]) == 2
    assert "run the config first" in capsys.readouterr().err


# ----------------------------------------------------------------------------- sheets
SCALING = """case,d,seconds,paper_s
sum,100,1.9,9.9
sum,50,0.5,
max,30,0.04,0.46
max,100,1.7,121
recon,20,0.2,1.0
"""


def sheet(tmp_path: Path, figures, **top) -> Path:
    path = tmp_path / "configs" / "toy" / "scaling.plot.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"paper": "toy", "data": "scaling.csv", "figures": figures, **top}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    d = tmp_path / "results" / "toy"
    d.mkdir(parents=True, exist_ok=True)
    (d / "scaling.csv").write_text(SCALING)
    return path


def test_sheet_series_paper_and_filter(tmp_path):
    path = sheet(
        tmp_path,
        [
            {"name": "t", "x": "d", "y": "seconds", "paper": "paper_s", "series": "case",
             "where": {"case": ["sum", "max"]}, "logx": True, "logy": True},
            {"name": "b", "kind": "bar", "x": "case", "y": "seconds", "where": {"d": "100"}},
        ],
    )  # fmt: skip
    sh = load_sheet(path)
    with open(tmp_path / "results/toy/scaling.csv", newline="") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames, list(reader)
    (s_sum, s_max), cats = sheet_figure_data(sh, 0, header, rows)
    assert cats is None
    assert (s_sum.label, s_sum.x, s_sum.y) == ("sum", [50.0, 100.0], [0.5, 1.9])
    assert (s_sum.paper_x, s_sum.paper_y) == ([100.0], [9.9])
    assert (s_max.x, s_max.paper_y) == ([30.0, 100.0], [0.46, 121.0])
    (bars,), cats = sheet_figure_data(sh, 1, header, rows)
    assert cats == ["sum", "max"] and bars.label == "seconds"
    assert (bars.x, bars.y, bars.paper_x) == ([0, 1], [1.9, 1.7], [])
    out = render_sheet(sh, tmp_path / "results")
    assert out == [tmp_path / "results/toy/scaling_t.png", tmp_path / "results/toy/scaling_b.png"]
    assert png_pixels(out[0])[..., :3].std() > 0.05
    assert main(["plot", str(path), "--results", str(tmp_path / "results")]) == 0


@pytest.mark.parametrize(
    "figures, top, where, message",
    [
        (
            [{"name": "t", "x": "d", "y": "secs"}],
            {},
            "figures[0].y",
            "scaling.csv has no column 'secs'",
        ),
        (
            [{"name": "t", "x": "d", "y": "seconds", "paper": "pub"}],
            {},
            "figures[0].paper",
            "no column 'pub'",
        ),
        ([{"name": "t", "x": "case", "y": "seconds"}], {}, "figures[0].x", "is not a number"),
        (
            [{"name": "t", "kind": "bar", "x": "case", "y": "seconds"}],
            {},
            "figures[0]",
            "series 'seconds' has two rows with case = 'sum'",
        ),
        (
            [{"name": "t", "x": "d", "y": "seconds", "where": {"kind": "a"}}],
            {},
            "figures[0].where.kind",
            "no column",
        ),
    ],
)
def test_sheet_errors_at_render_name_file_and_field(tmp_path, figures, top, where, message):
    path = sheet(tmp_path, figures, **top)
    with pytest.raises(ConfigError) as exc:
        render_sheet(load_sheet(path), tmp_path / "results")
    assert str(exc.value).startswith(f"{path}: {where}: ") and message in str(exc.value)


@pytest.mark.parametrize(
    "data, where, message",
    [
        (
            {"paper": "toy", "figures": [{"name": "t", "x": "d", "y": "s"}]},
            "(top level).data",
            "missing required field",
        ),
        (
            {"paper": "toy", "data": "../x.csv", "figures": [{"name": "t", "x": "d", "y": "s"}]},
            "data",
            "expected a CSV file name",
        ),
        (
            {"paper": "toy", "data": "x.csv", "figures": [{"name": "t", "y": "s"}]},
            "figures[0].x",
            "missing required field",
        ),
        (
            {"paper": "toy", "data": "x.csv", "figures": [{"name": "t", "x": None, "y": "s"}]},
            "figures[0].x",
            "expected a string",
        ),
        (
            {"paper": "toy", "data": "x.csv", "figures": [{"name": "t", "x": "d", "y": None}]},
            "figures[0].y",
            "expected a string",
        ),
        ({"paper": "toy", "data": "x.csv", "figures": []}, "figures", "must not be empty"),
        (
            {
                "paper": "toy",
                "data": "x.csv",
                "figures": [{"name": "t", "x": "d", "y": "s", "colour": 1}],
            },
            "figures[0].colour",
            "unknown field",
        ),
    ],
)
def test_bad_sheets(tmp_path, data, where, message):
    path = tmp_path / "bad.plot.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as exc:
        load_sheet(path)
    assert str(exc.value).startswith(f"{path}: {where}: ") and message in str(exc.value)


def test_committed_sheets_render(tmp_path):
    """Every committed figure sheet loads and draws from the committed results."""
    sheets = sorted((REPO / "configs").rglob("*.plot.yaml"))
    for path in sheets:
        sh = load_sheet(path)
        src = REPO / "results" / sh.paper / sh.data
        if not src.is_file():
            continue
        (tmp_path / sh.paper).mkdir(exist_ok=True)
        shutil.copy(src, tmp_path / sh.paper / sh.data)
        for png in render_sheet(sh, tmp_path):
            assert png_pixels(png)[..., :3].std() > 0.05


# ----------------------------------------------------------------------------- reproduce
def _ours(path: Path) -> dict:
    with open(path, newline="") as f:
        return {(r["row"], r["column"]): r["ours"] for r in csv.DictReader(f)}


def test_reproduce_runs_a_papers_configs_then_reports(tmp_path, capsys):
    configs, results = tmp_path / "configs", tmp_path / "results"
    for rel in ("datacube/intro_example.yaml", "residual_planner/table12.yaml"):
        (configs / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "configs" / rel, configs / rel)
    args = ["reproduce", "--results", str(results), "--configs", str(configs), "-q"]
    assert main([*args, "residual_planner"]) == 0
    assert (results / "residual_planner" / "table12.csv").is_file()
    assert not (results / "datacube").exists()  # only the named paper ran
    ours = _ours(results / "residual_planner" / "table12.csv")
    committed = _ours(REPO / "results" / "residual_planner" / "table12.csv")
    assert ours.keys() == committed.keys()
    for key, v in committed.items():
        assert float(ours[key]) == pytest.approx(float(v), rel=1e-9), key
    board = (results / "README.md").read_text()
    assert "[table12](residual_planner/table12.md)" in board and "| 5 / 5 | 5 | 0 |" in board
    assert "intro_example" in board and "(not run)" in board
    assert main([*args, "-j", "2"]) == 0  # every paper, two jobs at once
    assert (results / "datacube" / "intro_example.csv").is_file()
    assert "(not run)" not in (results / "README.md").read_text()
    capsys.readouterr()
    assert main([*args, "nonesuch"]) == 2
    err = capsys.readouterr().err
    assert "no configs for paper 'nonesuch' (papers: datacube, residual_planner)" in err


def test_running_a_sheet_is_a_clear_error(tmp_path, capsys):
    path = sheet(tmp_path, [{"name": "t", "x": "d", "y": "seconds"}])
    with pytest.raises(
        ConfigError, match=r"scaling\.plot\.yaml: a figure sheet, not an experiment"
    ):
        load_config(path)
    assert main(["run", str(path), "--results", str(tmp_path / "results")]) == 2
    assert "mmtoolkit plot" in capsys.readouterr().err


def test_x_param_follows_nested_specs_and_explicit_domains(tmp_path):
    data = {
        **BASE,
        "columns": [{"name": "Identity", "selector": "identity"}],
        "rows": [
            {
                "name": "p8",
                "workload": {
                    "kind": "permuted",
                    "workload": {"kind": "all_range", "n": 8},
                    "seed": 0,
                },
            },
            {
                "name": "p16",
                "workload": {"kind": "permuted", "W": {"kind": "all_range", "n": 16}, "seed": 1},
            },
        ],
        "figures": [
            {"name": "n", "x": {"param": "workload.n"}, "logx": True},
            {"name": "s", "x": {"param": "seed"}},
        ],
    }
    a, b = load_config(write(tmp_path, data)).figures
    assert a.x_values == (8.0, 16.0) and b.x_values == (0.0, 1.0)
    sizes = {
        **BASE,
        "rows": [
            {"name": "two", "workload": {"kind": "marginals", "domain": {"sizes": [2, 3]}, "k": 1}},
            {
                "name": "three",
                "workload": {"kind": "marginals", "domain": {"sizes": [2, 2, 2]}, "k": 1},
            },
        ],
        "figures": [{"name": "d", "x": {"param": "domain.d"}}],
    }
    (d,) = load_config(write(tmp_path, sizes, "sizes.yaml")).figures
    assert d.x_values == (2.0, 3.0)
