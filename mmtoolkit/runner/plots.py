"""Figures: line and bar plots of a results table, with the paper's values beside ours.

Two sources of figures:

**A config's** ``figures:`` **list** (rendered by the runner right after the table is
written, or again from the committed CSV by ``mmtoolkit plot CONFIG``)::

    figures:
      - name: rmse_vs_d            # required; PNG <results>/<paper>/<table>_<name>.png
        kind: line                 # line (default) | bar
        y: rmse                    # the config's metric (default) or seconds; a metric the
                                   # config does not compute is an error
        x: {param: domain.d}       # line only: a row workload parameter (path through
                                   # nested specs/domains), {values: [...]} one number per
                                   # plotted row, or rows (default: the rows in order)
        rows: [d=2, d=4]           # optional subset/order of the rows (default: all)
        columns:                   # optional (default: every column); a name, or a group
          - ResPlan                # of trial/restart columns drawn as one series:
          - {label: HDMM, columns: [HDMM s0, HDMM s1, HDMM s2], errorbars: minmax}
        logx: false                # log axes
        logy: true
        title: "..."               # optional; xlabel / ylabel too
        paper: true                # draw the paper's values (default true, when any)

  A group's point is the mean of its columns, with min–max (``minmax``) or ±1 standard
  deviation (``std``) error bars; a CSV that has an ``ours_std`` column gives error bars to
  single columns. Paper values are drawn dashed with hollow markers (line) or as hatched
  bars beside ours (bar), in the series' colour.

**A figure sheet** ``configs/<paper>/<name>.plot.yaml`` for a CSV that no config writes
(benchmark and scalability tables): ``mmtoolkit plot SHEET`` (and ``mmtoolkit reproduce``)
renders ``<results>/<paper>/<csv stem>_<name>.png``::

    paper: residual_planner
    data: scalability.csv          # a CSV under <results>/<paper>/
    figures:
      - name: times
        kind: line                 # line | bar (bar: x is categorical)
        x: d                       # CSV columns
        y: seconds
        paper: paper_s             # optional CSV column with the published values
        series: case               # optional CSV column: one series per value
        where: {case: [sum, max]}  # optional filter: column -> value or list of values
        logx: true
        logy: true

Validation errors are :class:`ConfigError` naming the file and the field. Rendering uses
Matplotlib's Agg canvas directly (no pyplot, no global backend change).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any

import yaml

from .config import METRICS, ConfigError, _UniqueKeyLoader

__all__ = [
    "FigureSheet",
    "FigureSpec",
    "SeriesSpec",
    "SheetFigure",
    "cells_from_csv",
    "figure_data",
    "is_sheet",
    "load_sheet",
    "parse_figures",
    "plot_file",
    "render_figures",
    "render_sheet",
    "sheet_figure_data",
]

SHEET_SUFFIXES = (".plot.yaml", ".plot.yml")
_KINDS = ("line", "bar")
_ERRORBARS = ("minmax", "std")
_FIG_KEYS = {
    "name",
    "kind",
    "y",
    "x",
    "rows",
    "columns",
    "logx",
    "logy",
    "title",
    "xlabel",
    "ylabel",
    "paper",
}
_SHEET_FIG_KEYS = {
    "name",
    "kind",
    "x",
    "y",
    "paper",
    "series",
    "where",
    "logx",
    "logy",
    "title",
    "xlabel",
    "ylabel",
}
_Y_LABELS = {
    "rmse": "RMSE",
    "total_error": "expected total squared error",
    "max_variance": "max variance",
    "ratio": "error ratio",
    "seconds": "seconds",
}


# ----------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class SeriesSpec:
    """One plotted series: one column, or a group of trial columns (mean + error bars)."""

    label: str
    columns: tuple[str, ...]
    errorbars: str = "minmax"


@dataclass(frozen=True)
class FigureSpec:
    """A figure of a config's table (see the module docstring)."""

    name: str
    kind: str
    y: str  # "value" (the config's metric) or "seconds"
    x: str  # "rows", "param" or "values"
    x_param: str | None
    x_values: tuple[float, ...] | None  # resolved, one per plotted row (param / values)
    rows: tuple[str, ...]
    series: tuple[SeriesSpec, ...]
    logx: bool = False
    logy: bool = False
    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    paper: bool = True


@dataclass(frozen=True)
class SheetFigure:
    name: str
    kind: str
    x: str
    y: str
    paper: str | None
    series: str | None
    where: tuple[tuple[str, tuple[str, ...]], ...]
    logx: bool = False
    logy: bool = False
    title: str = ""
    xlabel: str = ""
    ylabel: str = ""


@dataclass(frozen=True)
class FigureSheet:
    path: Path
    paper: str
    data: str
    title: str
    figures: tuple[SheetFigure, ...]


# ----------------------------------------------------------------------------- validation
def _err(file, where: str, msg: str) -> ConfigError:
    return ConfigError(f"{file}: {where}: {msg}")


def _str(file, where, v, *, nonempty=True) -> str:
    if not isinstance(v, str) or (nonempty and not v.strip()):
        raise _err(file, where, f"expected a non-empty string, got {v!r}")
    return v


def _bool(file, where, v) -> bool:
    if not isinstance(v, bool):
        raise _err(file, where, f"expected true or false, got {v!r}")
    return v


def _mapping(file, where, v) -> Mapping:
    if not isinstance(v, Mapping):
        raise _err(file, where, f"expected a mapping, got {type(v).__name__}")
    return v


def _check_keys(file, where, m, allowed, required=("name",)):
    for k in m:
        if k not in allowed:
            raise _err(file, f"{where}.{k}", f"unknown field (valid: {', '.join(sorted(allowed))})")
    for k in required:
        if k not in m:
            raise _err(file, f"{where}.{k}", "missing required field")


def _name(file, where, v, seen) -> str:
    name = _str(file, where, v)
    if not all(ch.isalnum() or ch in "_-." for ch in name):
        raise _err(file, where, f"{name!r} must be letters, digits, '_', '-' or '.' (a file name)")
    if name in seen:
        raise _err(file, where, f"duplicate figure name {name!r}")
    seen.add(name)
    return name


def _list_of_names(file, where, v, valid: list[str], what: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not v:
        raise _err(file, where, f"expected a non-empty list of {what} names")
    for i, item in enumerate(v):
        if item not in valid:
            raise _err(
                file, f"{where}[{i}]", f"no {what} named {item!r} (valid: {', '.join(valid)})"
            )
    if len(set(v)) != len(v):
        raise _err(file, where, f"a {what} is listed twice")
    return tuple(v)


def resolve_param(workload_spec, path: str) -> Any:
    """Follow ``path`` (dot-separated) through a row's WorkloadSpec / DomainSpec; KeyError
    when a part is missing."""
    obj = workload_spec
    for part in path.split("."):
        args = getattr(obj, "args", None)
        if args is not None:  # WorkloadSpec
            if part == "kind":
                obj = obj.kind
            elif part in args:
                obj = args[part]
            elif part == "workload" and "W" in args:
                obj = args["W"]
            else:
                raise KeyError(part)
        elif hasattr(obj, "preset") and hasattr(obj, "params"):  # DomainSpec
            if part in obj.params:
                obj = obj.params[part]
            elif part in ("preset", "sizes", "names") and getattr(obj, part) is not None:
                obj = getattr(obj, part)
            elif part == "d" and obj.sizes is not None:
                obj = len(obj.sizes)
            else:
                raise KeyError(part)
        elif isinstance(obj, Mapping) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            raise KeyError(part)
    return obj


def parse_figures(raw, *, file, metric, columns, rows) -> tuple[FigureSpec, ...]:
    """Validate a config's ``figures`` list (``metric``: the config's Metric; ``columns``,
    ``rows``: its Column / Row lists). Errors are ConfigErrors naming file and field."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _err(file, "figures", f"expected a list of figures, got {type(raw).__name__}")
    col_names = [c.name for c in columns]
    row_names = [r.name for r in rows]
    by_row = {r.name: r for r in rows}
    computed = metric.kind
    seen: set[str] = set()
    out = []
    for i, f in enumerate(raw):
        w = f"figures[{i}]"
        m = _mapping(file, w, f)
        _check_keys(file, w, m, _FIG_KEYS)
        name = _name(file, f"{w}.name", m["name"], seen)
        kind = m.get("kind", "line")
        if kind not in _KINDS:
            raise _err(file, f"{w}.kind", f"unknown kind {kind!r} (valid: {', '.join(_KINDS)})")
        y = m.get("y", computed)
        if y in ("value", "ours", computed):
            y = "value"
        elif y != "seconds":
            known = (*METRICS, "ratio")
            what = "is not computed by this config" if y in known else "is not a metric"
            raise _err(
                file,
                f"{w}.y",
                f"{y!r} {what} (the config computes {computed}; valid: {computed}, seconds)",
            )
        sel_rows = (
            _list_of_names(file, f"{w}.rows", m["rows"], row_names, "row")
            if "rows" in m
            else tuple(row_names)
        )
        series = _parse_series(file, f"{w}.columns", m.get("columns"), col_names)
        x_raw = m.get("x", "rows")
        x, x_param, x_values = "rows", None, None
        if x_raw != "rows":
            if kind == "bar":
                raise _err(file, f"{w}.x", "a bar figure's x axis is the rows (omit x)")
            xm = _mapping(file, f"{w}.x", x_raw) if not isinstance(x_raw, str) else None
            if xm is None:
                raise _err(
                    file,
                    f"{w}.x",
                    f"expected rows, {{param: ...}} or {{values: [...]}}, got {x_raw!r}",
                )
            _check_keys(file, f"{w}.x", xm, {"param", "values"}, ())
            if len(xm) != 1:
                raise _err(file, f"{w}.x", "give exactly one of param, values")
            if "param" in xm:
                x, x_param = "param", _str(file, f"{w}.x.param", xm["param"])
                vals = []
                for rn in sel_rows:
                    try:
                        v = resolve_param(by_row[rn].workload, x_param)
                    except KeyError as exc:
                        raise _err(
                            file,
                            f"{w}.x.param",
                            f"row {rn!r} has no workload parameter {x_param!r} "
                            f"(missing {exc.args[0]!r})",
                        ) from None
                    if isinstance(v, bool) or not isinstance(v, Real):
                        raise _err(
                            file, f"{w}.x.param", f"row {rn!r}: {x_param} = {v!r} is not a number"
                        )
                    vals.append(float(v))
            else:
                x = "values"
                vals = xm["values"]
                if not isinstance(vals, list) or len(vals) != len(sel_rows):
                    raise _err(
                        file,
                        f"{w}.x.values",
                        f"expected a list of {len(sel_rows)} numbers (one per plotted row)",
                    )
                for j, v in enumerate(vals):
                    if isinstance(v, bool) or not isinstance(v, Real):
                        raise _err(file, f"{w}.x.values[{j}]", f"expected a number, got {v!r}")
                vals = [float(v) for v in vals]
            x_values = tuple(vals)
        flags = {}
        for k in ("logx", "logy", "paper"):
            flags[k] = _bool(file, f"{w}.{k}", m.get(k, k == "paper"))
        if flags["logx"] and x == "rows":
            raise _err(file, f"{w}.logx", "a log x axis needs a numeric x (param or values)")
        if flags["logx"] and any(v <= 0 for v in x_values):
            raise _err(file, f"{w}.logx", "a log x axis needs positive x values")
        texts = {
            k: _str(file, f"{w}.{k}", m.get(k, ""), nonempty=False)
            for k in ("title", "xlabel", "ylabel")
        }
        out.append(
            FigureSpec(
                name=name,
                kind=kind,
                y=y,
                x=x,
                x_param=x_param,
                x_values=x_values,
                rows=sel_rows,
                series=series,
                **flags,
                **texts,
            )
        )
    return tuple(out)


def _parse_series(file, where, raw, col_names) -> tuple[SeriesSpec, ...]:
    if raw is None:
        return tuple(SeriesSpec(c, (c,)) for c in col_names)
    if not isinstance(raw, list) or not raw:
        raise _err(file, where, "expected a non-empty list of column names or groups")
    out, used = [], set()
    for j, item in enumerate(raw):
        wj = f"{where}[{j}]"
        if isinstance(item, str):
            cols, label, bars = (item,), item, "minmax"
        else:
            m = _mapping(file, wj, item)
            _check_keys(file, wj, m, {"label", "columns", "errorbars"}, ("label", "columns"))
            label = _str(file, f"{wj}.label", m["label"])
            cols = m["columns"]
            if not isinstance(cols, list) or not cols:
                raise _err(file, f"{wj}.columns", "expected a non-empty list of column names")
            cols = tuple(cols)
            bars = m.get("errorbars", "minmax")
            if bars not in _ERRORBARS:
                raise _err(
                    file, f"{wj}.errorbars", f"unknown {bars!r} (valid: {', '.join(_ERRORBARS)})"
                )
        for k, c in enumerate(cols):
            at = wj if isinstance(item, str) else f"{wj}.columns[{k}]"
            if c not in col_names:
                raise _err(file, at, f"no column named {c!r} (columns: {', '.join(col_names)})")
            if c in used:
                raise _err(file, at, f"column {c!r} is plotted twice")
            used.add(c)
        out.append(SeriesSpec(label, cols, bars))
    return tuple(out)


# ----------------------------------------------------------------------------- sheets
def is_sheet(path: str | os.PathLike) -> bool:
    return str(path).endswith(SHEET_SUFFIXES)


def load_sheet(path: str | os.PathLike) -> FigureSheet:
    """Read and validate a figure sheet (``*.plot.yaml``; see the module docstring)."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: YAML syntax error: {getattr(exc, 'problem', exc)}") from None
    m = _mapping(file, "(top level)", data)
    _check_keys(
        file, "(top level)", m, {"paper", "data", "title", "figures"}, ("paper", "data", "figures")
    )
    paper = _str(file, "paper", m["paper"])
    data_name = _str(file, "data", m["data"])
    if "/" in data_name or "\\" in data_name or not data_name.endswith(".csv"):
        raise _err(
            file, "data", f"expected a CSV file name under results/{paper}/, got {data_name!r}"
        )
    title = _str(file, "title", m.get("title", ""), nonempty=False)
    figs = m["figures"]
    if not isinstance(figs, list) or not figs:
        raise _err(file, "figures", "expected a non-empty list of figures")
    seen: set[str] = set()
    out = []
    for i, f in enumerate(figs):
        w = f"figures[{i}]"
        fm = _mapping(file, w, f)
        _check_keys(file, w, fm, _SHEET_FIG_KEYS, ("name", "x", "y"))
        name = _name(file, f"{w}.name", fm["name"], seen)
        kind = fm.get("kind", "line")
        if kind not in _KINDS:
            raise _err(file, f"{w}.kind", f"unknown kind {kind!r} (valid: {', '.join(_KINDS)})")
        cols = {
            k: (_str(file, f"{w}.{k}", fm[k]) if fm.get(k) is not None else None)
            for k in ("x", "y", "paper", "series")
        }
        where = []
        for col, val in _mapping(file, f"{w}.where", fm.get("where") or {}).items():
            vals = val if isinstance(val, list) else [val]
            where.append((str(col), tuple(str(v) for v in vals)))
        flags = {k: _bool(file, f"{w}.{k}", fm.get(k, False)) for k in ("logx", "logy")}
        texts = {
            k: _str(file, f"{w}.{k}", fm.get(k, ""), nonempty=False)
            for k in ("title", "xlabel", "ylabel")
        }
        out.append(SheetFigure(name=name, kind=kind, where=tuple(where), **cols, **flags, **texts))
    return FigureSheet(Path(path), paper, data_name, title, tuple(out))


# ----------------------------------------------------------------------------- cells
@dataclass
class CsvCell:
    row: str
    column: str
    ours: float | None
    paper: float | None
    seconds: float | None
    ours_std: float | None = None


def _num(text) -> float | None:
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
                _num(r.get("ours")),
                _num(r.get("paper")),
                _num(r.get("seconds")),
                _num(r.get("ours_std")),
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
        import textwrap

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
        has_paper = [bool(s.paper_x) for s in series]
        slots = sum(2 if p else 1 for p in has_paper)
        width = 0.8 / max(slots, 1)
        pos = -0.4 + width / 2
        for s, c, hp in zip(series, colors, has_paper):
            xs = [i + pos for i in s.x]  # s.x: category positions
            h = ax.bar(xs, s.y, width, color=c, label=s.label, yerr=s.err, capsize=3)
            handles.append(h)
            pos += width
            if hp:
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


def _save(fig, path: Path) -> Path:
    from ..atomic import write_atomic

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    write_atomic(path, buf.getvalue())
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
    xs = list(range(len(spec.rows))) if categories is not None else list(spec.x_values)
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
    for spec in getattr(config, "figures", ()) or ():
        drawn, categories = figure_data(spec, cells)
        title = spec.title or f"{config.title}"
        fig, ax = _canvas(title, wide=spec.kind == "bar" and len(spec.rows) > 6)
        _draw(ax, drawn, spec.kind, categories)
        ylabel = spec.ylabel or (
            "selection seconds" if spec.y == "seconds" else _Y_LABELS.get(config.metric.kind, "")
        )
        if config.metric.kind == "ratio" and spec.y == "value" and not spec.ylabel:
            ylabel = f"error ratio to {config.metric.ratio_to}"
        ax.set_ylabel(ylabel)
        ax.set_xlabel(spec.xlabel or (spec.x_param or ("" if spec.x == "rows" else "x")))
        if spec.logx:
            _log_scale(ax, "x")
        if spec.logy:
            _log_scale(ax, "y")
        out.append(_save(fig, Path(directory) / f"{config.table}_{spec.name}.png"))
    return out


def _read_sheet_csv(sheet: FigureSheet, results) -> tuple[Path, list[str], list[dict]]:
    data = Path(results) / sheet.paper / sheet.data
    try:
        with open(data, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            return data, list(reader.fieldnames or []), list(reader)
    except OSError as exc:
        raise _err(sheet.path, "data", f"cannot read {data}: {exc.strerror or exc}") from None


def sheet_figure_data(
    sheet: FigureSheet, index: int, header: list[str], rows: list[dict], data_name: str = ""
) -> tuple[list[_Series], list[str] | None]:
    """The series of the sheet's figure ``index`` drawn from the CSV ``rows``."""
    fs = sheet.figures[index]
    file, w = sheet.path, f"figures[{index}]"
    data_name = data_name or sheet.data
    for k in ("x", "y", "paper", "series"):
        col = getattr(fs, k)
        if col is not None and col not in header:
            raise _err(
                file,
                f"{w}.{k}",
                f"{data_name} has no column {col!r} (columns: {', '.join(header)})",
            )
    for col, _ in fs.where:
        if col not in header:
            raise _err(file, f"{w}.where.{col}", f"{data_name} has no column {col!r}")
    sel = [r for r in rows if all(r[c] in vals for c, vals in fs.where)]
    groups: dict[str, list[dict]] = {}
    for r in sel:
        groups.setdefault(r[fs.series] if fs.series else fs.y, []).append(r)
    categories = list(dict.fromkeys(r[fs.x] for r in sel)) if fs.kind == "bar" else None
    drawn = []
    for label, rs in groups.items():
        pts = []
        for r in rs:
            if categories is not None:
                xv = categories.index(r[fs.x])
                if any(p[0] == xv for p in pts):
                    raise _err(
                        file,
                        w,
                        f"series {label!r} has two rows with {fs.x} = {r[fs.x]!r}: "
                        "narrow the rows with where, or split them with series",
                    )
            else:
                xv = _num(r[fs.x])
                if xv is None:
                    raise _err(file, f"{w}.x", f"{data_name}: {fs.x} = {r[fs.x]!r} is not a number")
            pts.append((xv, _num(r[fs.y]), _num(r[fs.paper]) if fs.paper else None))
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
        ax.set_xlabel(fs.xlabel or fs.x)
        ax.set_ylabel(fs.ylabel or fs.y)
        if fs.logx and categories is None:
            _log_scale(ax, "x")
        if fs.logy:
            _log_scale(ax, "y")
        out.append(_save(fig, data.parent / f"{Path(sheet.data).stem}_{fs.name}.png"))
    return out


def plot_file(path: str | os.PathLike, results: str | os.PathLike = "results") -> list[Path]:
    """Re-render the figures of a config (from its committed CSV, nothing is recomputed) or
    of a figure sheet; errors are ConfigErrors naming the file."""
    if is_sheet(path):
        return render_sheet(load_sheet(path), results)
    from .config import load_config

    config = load_config(path, build_workloads=False)
    if not config.figures:
        raise ConfigError(f"{path}: figures: the config declares no figures")
    table = Path(results) / config.paper / f"{config.table}.csv"
    if not table.is_file():
        raise ConfigError(f"{path}: no results table {table} yet (run the config first)")
    return render_figures(config, cells_from_csv(table), table.parent)
