"""Figures: line and bar plots of a results table, with the paper's values beside ours.

What is drawn is specified in a config's ``figures:`` or a figure sheet (formats:
:mod:`.figures`). Rendering uses Matplotlib's Agg canvas directly (no pyplot, no global
backend change); Matplotlib is imported when the first figure is drawn.
"""

from __future__ import annotations

import csv
import math
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ..atomic import write_png
from .config import load_config
from .figures import FigureSheet, FigureSpec, SeriesSpec, is_sheet, load_sheet
from .schema import ConfigError, Fields
from .store import read_timings, timings_path

__all__ = [
    "CsvCell",
    "cells_from_csv",
    "csv_number",
    "figure_data",
    "plot_file",
    "render_figures",
    "render_sheet",
    "sheet_figure_data",
]

_Y_LABELS = {
    "rmse": "RMSE",
    "total_error": "expected total squared error",
    "max_variance": "max variance",
    "ratio": "error ratio",
    "seconds": "seconds",
}


# ----------------------------------------------------------------------------- cells
@dataclass
class CsvCell:
    """A cell read back from a runner CSV."""

    row: str
    column: str
    ours: float | None
    paper: float | None
    seconds: float | None
    ours_std: float | None = None


def csv_number(text) -> float | None:
    """The number in a CSV field; None when it is empty or not a number."""
    if text is None or str(text).strip() == "":
        return None
    try:
        return float(text)
    except ValueError:
        return None


def cells_from_csv(path: str | os.PathLike) -> list[CsvCell]:
    """The cells of a runner CSV (for re-rendering figures without recomputing)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [
            c for c in ("row", "column", "ours", "paper") if c not in (reader.fieldnames or [])
        ]
        if missing:
            raise ConfigError(f"{path}: not a runner table (missing columns: {', '.join(missing)})")
        return [
            CsvCell(
                r["row"],
                r["column"],
                csv_number(r.get("ours")),
                csv_number(r.get("paper")),
                csv_number(r.get("seconds")),
                csv_number(r.get("ours_std")),
            )
            for r in reader
        ]


# ----------------------------------------------------------------------------- drawing
@dataclass
class _Series:
    label: str
    x: list  # numbers, or category positions
    y: list[float]
    err: tuple[list[float], list[float]] | None = None
    paper_x: list | None = None
    paper_y: list[float] | None = None


def _canvas(title: str, wide: bool = False):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0 if wide else 7.0, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if title:
        ax.set_title(textwrap.fill(title, 95 if wide else 72), fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _nan(v):
    return float("nan") if v is None else float(v)


def _draw(ax, series: list[_Series], kind: str, categories: list[str] | None):
    colors = _colors(len(series))
    any_paper = False
    handles = []  # legend in drawing order (matplotlib lists error-bar series last)
    if kind == "line":
        for s, c in zip(series, colors):
            if s.err is not None:
                h = ax.errorbar(s.x, s.y, yerr=s.err, fmt="-o", color=c, capsize=3, ms=4)
            else:
                (h,) = ax.plot(s.x, s.y, "-o", color=c, ms=4)
            h.set_label(s.label)
            handles.append(h)
            if s.paper_x:
                any_paper = True
                (h,) = ax.plot(
                    s.paper_x,
                    s.paper_y,
                    "--s",
                    color=c,
                    mfc="none",
                    ms=7,
                    label=f"{s.label} (paper)",
                )
                handles.append(h)
    else:
        slots = sum(2 if s.paper_x else 1 for s in series)
        width = 0.8 / max(slots, 1)
        pos = -0.4 + width / 2
        for s, c in zip(series, colors):
            xs = [i + pos for i in s.x]  # s.x: category positions
            h = ax.bar(xs, s.y, width, color=c, label=s.label, yerr=s.err, capsize=3)
            handles.append(h)
            pos += width
            if s.paper_x:
                any_paper = True
                h = ax.bar(
                    [i + pos for i in s.paper_x],
                    s.paper_y,
                    width,
                    facecolor="none",
                    edgecolor=c,
                    hatch="///",
                    label=f"{s.label} (paper)",
                )
                handles.append(h)
                pos += width
    if categories is not None:
        ax.set_xticks(range(len(categories)))
        long = max((len(t) for t in categories), default=0) > 8 or len(categories) > 8
        ax.set_xticklabels(
            categories, rotation=30 if long else 0, ha="right" if long else "center", fontsize=8
        )
    ax.legend(handles=handles, fontsize=8, ncol=2 if len(series) > 4 or any_paper else 1)


def _log_scale(ax, axis: str) -> None:
    """Log axis with plain tick labels (0.5, 2, 100 rather than 5x10^-1)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    getattr(ax, f"set_{axis}scale")("log")
    ax.autoscale_view()
    ax_ = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = getattr(ax, f"get_{axis}lim")()
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax_.set_major_formatter(plain)
    # a short range has few decades: label the 2..9 ticks too
    short = lo > 0 and hi / lo < 100
    some = FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "235" else "")
    ax_.set_minor_formatter(some if short else NullFormatter())
    if axis == "x":  # a sweep over a few values: tick exactly those
        xs = sorted({float(v) for line in ax.get_lines() for v in line.get_xdata()})
        xs = [v for v in xs if math.isfinite(v) and v > 0]
        if 0 < len(xs) <= 10:
            ax_.set_ticks(xs)
            ax_.set_minor_formatter(NullFormatter())


def _finish(fig, ax, xlabel: str, ylabel: str, logx: bool, logy: bool, path: Path) -> Path:
    """Label the axes, set the log scales and write the PNG."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        _log_scale(ax, "x")
    if logy:
        _log_scale(ax, "y")
    write_png(path, fig, dpi=110)
    return path


def _series_values(spec: SeriesSpec, by_key, row: str, y: str):
    """(value, (lo, hi) error or None, paper value) of a series at a row."""
    cells = [by_key.get((row, c)) for c in spec.columns]
    field = "ours" if y == "value" else "seconds"
    # a failed cell has no value, and its seconds are not a measurement
    done = [c for c in cells if c is not None and c.ours is not None]
    vals = [getattr(c, field) for c in done if getattr(c, field) is not None]
    paper = None
    if y == "value":
        paper = next((c.paper for c in cells if c is not None and c.paper is not None), None)
    if not vals:
        return None, None, paper
    if len(spec.columns) == 1:
        std = getattr(cells[0], "ours_std", None) if y == "value" else None
        err = (std, std) if std is not None else None
        return vals[0], err, paper
    mean = sum(vals) / len(vals)
    if spec.errorbars == "std":
        sd = (
            math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
            if len(vals) > 1
            else 0.0
        )
        return mean, (sd, sd), paper
    return mean, (mean - min(vals), max(vals) - mean), paper


def figure_data(spec: FigureSpec, cells) -> tuple[list[_Series], list[str] | None]:
    """The series one figure draws (ours, error bars, paper points) and its categories."""
    by_key = {(c.row, c.column): c for c in cells}
    categories = list(spec.rows) if spec.x == "rows" else None
    if categories is not None:
        xs: list[float] = list(range(len(spec.rows)))
    else:
        assert spec.x_values is not None  # parse_figures gives them for x: param / values
        xs = list(spec.x_values)
    drawn = []
    for s in spec.series:
        ys, lo, hi, px, py, has_err = [], [], [], [], [], False
        for x, row in zip(xs, spec.rows):
            v, err, p = _series_values(s, by_key, row, spec.y)
            ys.append(_nan(v))
            lo.append(err[0] if err else 0.0)
            hi.append(err[1] if err else 0.0)
            has_err = has_err or err is not None
            if spec.paper and p is not None:
                px.append(x)
                py.append(p)
        drawn.append(_Series(s.label, xs, ys, (lo, hi) if has_err else None, px, py))
    return drawn, categories


def render_figures(config, cells, directory: str | os.PathLike) -> list[Path]:
    """Draw every figure of ``config.figures`` from ``cells`` (objects with row, column,
    ours, paper, seconds) into ``directory`` (``<results>/<paper>``); returns the PNGs."""
    out = []
    for spec in config.figures:
        drawn, categories = figure_data(spec, cells)
        title = spec.title or f"{config.title}"
        fig, ax = _canvas(title, wide=spec.kind == "bar" and len(spec.rows) > 6)
        _draw(ax, drawn, spec.kind, categories)
        ylabel = spec.ylabel or (
            "selection seconds" if spec.y == "seconds" else _Y_LABELS.get(config.metric.kind, "")
        )
        if config.metric.kind == "ratio" and spec.y == "value" and not spec.ylabel:
            ylabel = f"error ratio to {config.metric.ratio_to}"
        xlabel = spec.xlabel or (spec.x_param or ("" if spec.x == "rows" else "x"))
        path = Path(directory) / f"{config.table}_{spec.name}.png"
        out.append(_finish(fig, ax, xlabel, ylabel, spec.logx, spec.logy, path))
    return out


def _read_sheet_csv(sheet: FigureSheet, results) -> tuple[Path, list[str], list[dict]]:
    data = Path(results) / sheet.paper / sheet.data
    try:
        with open(data, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            return data, list(reader.fieldnames or []), list(reader)
    except OSError as exc:
        raise Fields(sheet.path).error(
            "data", f"cannot read {data}: {exc.strerror or exc}"
        ) from None


def sheet_figure_data(
    sheet: FigureSheet, index: int, header: list[str], rows: list[dict], data_name: str = ""
) -> tuple[list[_Series], list[str] | None]:
    """The series of the sheet's figure ``index`` drawn from the CSV ``rows``."""
    fs = sheet.figures[index]
    f, w = Fields(sheet.path), f"figures[{index}]"
    data_name = data_name or sheet.data
    for k in ("x", "y", "paper", "series"):
        col = getattr(fs, k)
        if col is not None and col not in header:
            raise f.error(
                f"{w}.{k}",
                f"{data_name} has no column {col!r} (columns: {', '.join(header)})",
            )
    for col, _ in fs.where:
        if col not in header:
            raise f.error(f"{w}.where.{col}", f"{data_name} has no column {col!r}")
    sel = [r for r in rows if all(r[c] in vals for c, vals in fs.where)]
    groups: dict[str, list[dict]] = {}
    for r in sel:
        groups.setdefault(r[fs.series] if fs.series else fs.y, []).append(r)
    categories = list(dict.fromkeys(r[fs.x] for r in sel)) if fs.kind == "bar" else None
    drawn = []
    for label, rs in groups.items():
        pts: list[tuple[float, float | None, float | None]] = []
        for r in rs:
            xv: float | None
            if categories is not None:
                xv = categories.index(r[fs.x])
                if any(p[0] == xv for p in pts):
                    raise f.error(
                        w,
                        f"series {label!r} has two rows with {fs.x} = {r[fs.x]!r}: "
                        "narrow the rows with where, or split them with series",
                    )
            else:
                xv = csv_number(r[fs.x])
                if xv is None:
                    raise f.error(f"{w}.x", f"{data_name}: {fs.x} = {r[fs.x]!r} is not a number")
            pts.append((xv, csv_number(r[fs.y]), csv_number(r[fs.paper]) if fs.paper else None))
        pts.sort(key=lambda t: t[0])
        paper = [(p[0], p[2]) for p in pts if p[2] is not None]
        drawn.append(
            _Series(
                str(label),
                [p[0] for p in pts],
                [_nan(p[1]) for p in pts],
                None,
                [p[0] for p in paper],
                [p[1] for p in paper],
            )
        )
    return drawn, categories


def render_sheet(sheet: FigureSheet, results: str | os.PathLike = "results") -> list[Path]:
    """Draw a figure sheet's figures from ``<results>/<paper>/<data>``; returns the PNGs."""
    data, header, rows = _read_sheet_csv(sheet, results)
    out = []
    for i, fs in enumerate(sheet.figures):
        drawn, categories = sheet_figure_data(sheet, i, header, rows, data.name)
        fig, ax = _canvas(fs.title or sheet.title, wide=len(categories or []) > 6)
        _draw(ax, drawn, fs.kind, categories)
        logx = fs.logx and categories is None
        path = data.parent / f"{Path(sheet.data).stem}_{fs.name}.png"
        out.append(_finish(fig, ax, fs.xlabel or fs.x, fs.ylabel or fs.y, logx, fs.logy, path))
    return out


def plot_file(path: str | os.PathLike, results: str | os.PathLike = "results") -> list[Path]:
    """Re-render the figures of a config (from its committed CSV, nothing is recomputed) or
    of a figure sheet; errors are ConfigErrors naming the file. A config figure of
    ``y: seconds`` reads the timings from the table's sidecar (:func:`~.store.timings_path`:
    the committed CSV has none)."""
    if is_sheet(path):
        return render_sheet(load_sheet(path), results)
    config = load_config(path, build_workloads=False)
    if not config.figures:
        raise ConfigError(f"{path}: figures: the config declares no figures")
    table = Path(results) / config.paper / f"{config.table}.csv"
    if not table.is_file():
        raise ConfigError(f"{path}: no results table {table} yet (run the config first)")
    cells = cells_from_csv(table)
    if any(spec.y == "seconds" for spec in config.figures):
        timings = read_timings(timings_path(results, config.paper, config.table))
        for c in cells:
            c.seconds = timings.get((c.row, c.column), c.seconds)
    return render_figures(config, cells, table.parent)
