"""Figure specs: what a config's ``figures:`` and a figure sheet ``*.plot.yaml`` draw.

:func:`parse_figures` validates a config's ``figures:`` list into :class:`FigureSpec`;
:func:`load_sheet` reads a figure sheet (a CSV that no config writes) into a
:class:`FigureSheet`. Validation errors are :class:`ConfigError` naming the file and the
field; drawing is :mod:`.plots`.

User guide: docs/guide/configs.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any

from ..checks import check_choice
from .schema import Fields, read_yaml
from .specs import METRICS

__all__ = [
    "SHEET_SUFFIXES",
    "FigureSheet",
    "FigureSpec",
    "SeriesSpec",
    "SheetFigure",
    "is_sheet",
    "load_sheet",
    "parse_figures",
    "resolve_param",
]

SHEET_SUFFIXES = (".plot.yaml", ".plot.yml")
_KINDS = ("line", "bar")
_ERRORBARS = ("minmax", "std")
_COMMON_KEYS = {"name", "kind", "x", "y", "paper", "logx", "logy", "title", "xlabel", "ylabel"}
_FIG_KEYS = _COMMON_KEYS | {"rows", "columns"}
_SHEET_FIG_KEYS = _COMMON_KEYS | {"series", "where"}


# ----------------------------------------------------------------------------- specs
@dataclass(frozen=True)
class SeriesSpec:
    """One plotted series: one column, or a group of trial columns (mean + error bars)."""

    label: str
    columns: tuple[str, ...]
    errorbars: str = "minmax"


@dataclass(frozen=True)
class FigureSpec:
    """A figure of a config's table (docs/guide/configs.md, "Figures")."""

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
    """A figure of a figure sheet: CSV columns ``x``, ``y`` (``paper``, ``series``)."""

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
    """A figure sheet: figures drawn from ``<results>/<paper>/<data>``."""

    path: Path
    paper: str
    data: str
    title: str
    figures: tuple[SheetFigure, ...]


# ----------------------------------------------------------------------------- validation
def _name(f: Fields, where: str, v, seen: set) -> str:
    name = f.text(v, where)
    if not all(ch.isalnum() or ch in "_-." for ch in name):
        raise f.error(where, f"{name!r} must be letters, digits, '_', '-' or '.' (a file name)")
    if name in seen:
        raise f.error(where, f"duplicate figure name {name!r}")
    seen.add(name)
    return name


def _kind(f: Fields, where: str, m) -> str:
    return f.check(check_choice, m.get("kind", "line"), where, _KINDS, what="kind")


def _list_of_names(f: Fields, where: str, v, valid: list[str], what: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not v:
        raise f.error(where, f"expected a non-empty list of {what} names")
    for i, item in enumerate(v):
        if item not in valid:
            raise f.error(f"{where}[{i}]", f"no {what} named {item!r} (valid: {', '.join(valid)})")
    if len(set(v)) != len(v):
        raise f.error(where, f"a {what} is listed twice")
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
    f = Fields(file)
    f.items(raw, "figures", nonempty=False)
    col_names = [c.name for c in columns]
    row_names = [r.name for r in rows]
    by_row = {r.name: r for r in rows}
    computed = metric.kind
    seen: set[str] = set()
    out = []
    for i, item in enumerate(raw):
        w = f"figures[{i}]"
        m = f.mapping(item, w)
        f.keys(m, w, _FIG_KEYS, ("name",))
        name = _name(f, f"{w}.name", m["name"], seen)
        kind = _kind(f, f"{w}.kind", m)
        y = m.get("y", computed)
        if y in ("value", "ours", computed):
            y = "value"
        elif y != "seconds":
            known = (*METRICS, "ratio")
            what = "is not computed by this config" if y in known else "is not a metric"
            raise f.error(
                f"{w}.y",
                f"{y!r} {what} (the config computes {computed}; valid: {computed}, seconds)",
            )
        sel_rows = (
            _list_of_names(f, f"{w}.rows", m["rows"], row_names, "row")
            if "rows" in m
            else tuple(row_names)
        )
        series = _parse_series(f, f"{w}.columns", m.get("columns"), col_names)
        x_raw = m.get("x", "rows")
        x, x_param, x_values = "rows", None, None
        if x_raw != "rows":
            if kind == "bar":
                raise f.error(f"{w}.x", "a bar figure's x axis is the rows (omit x)")
            if isinstance(x_raw, str):
                msg = f"expected rows, {{param: ...}} or {{values: [...]}}, got {x_raw!r}"
                raise f.error(f"{w}.x", msg)
            xm = f.mapping(x_raw, f"{w}.x")
            f.keys(xm, f"{w}.x", {"param", "values"}, ())
            if len(xm) != 1:
                raise f.error(f"{w}.x", "give exactly one of param, values")
            if "param" in xm:
                x, x_param = "param", f.text(xm["param"], f"{w}.x.param")
                vals = []
                for rn in sel_rows:
                    try:
                        v = resolve_param(by_row[rn].workload, x_param)
                    except KeyError as exc:
                        raise f.error(
                            f"{w}.x.param",
                            f"row {rn!r} has no workload parameter {x_param!r} "
                            f"(missing {exc.args[0]!r})",
                        ) from None
                    if isinstance(v, bool) or not isinstance(v, Real):
                        msg = f"row {rn!r}: {x_param} = {v!r} is not a number"
                        raise f.error(f"{w}.x.param", msg)
                    vals.append(float(v))
            else:
                x = "values"
                vals = xm["values"]
                if not isinstance(vals, list) or len(vals) != len(sel_rows):
                    raise f.error(
                        f"{w}.x.values",
                        f"expected a list of {len(sel_rows)} numbers (one per plotted row)",
                    )
                vals = [f.number(v, f"{w}.x.values[{j}]") for j, v in enumerate(vals)]
            x_values = tuple(vals)
        flags = {k: f.flag(m.get(k, k == "paper"), f"{w}.{k}") for k in ("logx", "logy", "paper")}
        if flags["logx"]:
            if x_values is None:  # x: rows
                raise f.error(f"{w}.logx", "a log x axis needs a numeric x (param or values)")
            if any(v <= 0 for v in x_values):
                raise f.error(f"{w}.logx", "a log x axis needs positive x values")
        texts = {
            k: f.text(m.get(k, ""), f"{w}.{k}", nonempty=False)
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


def _parse_series(f, where, raw, col_names) -> tuple[SeriesSpec, ...]:
    if raw is None:
        return tuple(SeriesSpec(c, (c,)) for c in col_names)
    if not isinstance(raw, list) or not raw:
        raise f.error(where, "expected a non-empty list of column names or groups")
    out, used = [], set()
    for j, item in enumerate(raw):
        wj = f"{where}[{j}]"
        if isinstance(item, str):
            cols, label, bars = (item,), item, "minmax"
        else:
            m = f.mapping(item, wj)
            f.keys(m, wj, {"label", "columns", "errorbars"}, ("label", "columns"))
            label = f.text(m["label"], f"{wj}.label")
            cols = m["columns"]
            if not isinstance(cols, list) or not cols:
                raise f.error(f"{wj}.columns", "expected a non-empty list of column names")
            cols = tuple(cols)
            bars = f.check(
                check_choice, m.get("errorbars", "minmax"), f"{wj}.errorbars", _ERRORBARS
            )
        for k, c in enumerate(cols):
            at = wj if isinstance(item, str) else f"{wj}.columns[{k}]"
            if c not in col_names:
                raise f.error(at, f"no column named {c!r} (columns: {', '.join(col_names)})")
            if c in used:
                raise f.error(at, f"column {c!r} is plotted twice")
            used.add(c)
        out.append(SeriesSpec(label, cols, bars))
    return tuple(out)


# ----------------------------------------------------------------------------- sheets
def is_sheet(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a figure sheet (``*.plot.yaml``)."""
    return str(path).endswith(SHEET_SUFFIXES)


def load_sheet(path: str | os.PathLike) -> FigureSheet:
    """Read and validate a figure sheet (``*.plot.yaml``; docs/guide/configs.md)."""
    f = Fields(path)
    m = f.mapping(read_yaml(path), "(top level)")
    f.keys(m, "(top level)", {"paper", "data", "title", "figures"}, ("paper", "data", "figures"))
    paper = f.text(m["paper"], "paper")
    data_name = f.text(m["data"], "data")
    if "/" in data_name or "\\" in data_name or not data_name.endswith(".csv"):
        msg = f"expected a CSV file name under results/{paper}/, got {data_name!r}"
        raise f.error("data", msg)
    title = f.text(m.get("title", ""), "title", nonempty=False)
    figs = f.items(m["figures"], "figures")
    seen: set[str] = set()
    out = []
    for i, item in enumerate(figs):
        w = f"figures[{i}]"
        fm = f.mapping(item, w)
        f.keys(fm, w, _SHEET_FIG_KEYS, ("name", "x", "y"))
        name = _name(f, f"{w}.name", fm["name"], seen)
        kind = _kind(f, f"{w}.kind", fm)
        x, y = (f.text(fm[k], f"{w}.{k}") for k in ("x", "y"))
        paper_col, series_col = (
            f.text(fm[k], f"{w}.{k}") if fm.get(k) is not None else None
            for k in ("paper", "series")
        )
        where = []
        for col, val in f.mapping(fm.get("where") or {}, f"{w}.where").items():
            vals = val if isinstance(val, list) else [val]
            where.append((str(col), tuple(str(v) for v in vals)))
        flags = {k: f.flag(fm.get(k, False), f"{w}.{k}") for k in ("logx", "logy")}
        texts = {
            k: f.text(fm.get(k, ""), f"{w}.{k}", nonempty=False)
            for k in ("title", "xlabel", "ylabel")
        }
        figure = SheetFigure(
            name=name, kind=kind, x=x, y=y, paper=paper_col, series=series_col,
            where=tuple(where), **flags, **texts,
        )  # fmt: skip
        out.append(figure)
    return FigureSheet(Path(path), paper, data_name, title, tuple(out))
