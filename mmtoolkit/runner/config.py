"""Experiment configs: one YAML file per reproduced table, loaded into plain dataclasses.

A config names a paper and one of its tables, the rows (a workload each), the columns (a
strategy selector each, or the SVD lower bound), the metric, the privacy definition and the
paper's published values. :func:`load_config` validates the whole file up front (each row's
workload built too) and raises one :class:`ConfigError` naming the file and the field path;
:func:`quick_config` gives the ``quick:`` variant.

User guide: docs/guide/configs.md.
"""

from __future__ import annotations

import copy
import inspect
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import privacy
from ..checks import subfield
from ..selectors import Selector
from ..workload_specs import WorkloadSpec
from .figures import parse_figures
from .schema import ConfigError, Fields, parse_memory, read_yaml
from .specs import METRICS, Metric, parse_workload, resolve_selector, search_path_for

__all__ = [
    "COMPARE_SUFFIXES",
    "METRICS",
    "Column",
    "Config",
    "ConfigError",
    "Metric",
    "Row",
    "Tolerance",
    "load_config",
    "quick_config",
]

_TOP_REQUIRED = ("paper", "table", "metric", "privacy", "columns", "rows")
_TOP_OPTIONAL: tuple[str, ...] = ("title", "source", "notes", "tolerance", "seed", "timeout")
_TOP_OPTIONAL += ("memory", "quick", "figures")
_COLUMN_KEYS: tuple[str, ...] = ("name", "selector", "params", "svd_bound", "notes", "objective")
_COLUMN_KEYS += ("timeout", "memory")
_QUICK_KEYS = ("rows", "columns", "params", "timeout")
#: File names of comparison configs (``mmtoolkit.compare_data.run_config``), which
#: ``mmtoolkit run`` hands to :mod:`mmtoolkit.compare_data` and the scoreboard leaves out.
COMPARE_SUFFIXES = (".compare.yaml", ".compare.yml")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


# --------------------------------------------------------------------------- dataclasses
@dataclass
class Tolerance:
    """A cell agrees with the paper when ``|ours - paper| <= abs + rel * |paper|``."""

    abs: float = 0.0
    rel: float = 0.0

    def within(self, ours: float, paper: float) -> bool:
        """Whether ``ours`` agrees with ``paper``."""
        if not (math.isfinite(ours) and math.isfinite(paper)):
            return False
        return abs(ours - paper) <= self.abs + self.rel * abs(paper)

    def describe(self) -> str:
        """The rule in words (the Markdown table's header)."""
        parts = []
        if self.abs or not self.rel:
            parts.append(f"{self.abs:g}")
        if self.rel:
            parts.append(f"{self.rel:g}·|paper|")
        return "|ours − paper| ≤ " + " + ".join(parts)


@dataclass
class Column:
    """A selector column (``selector`` + ``params``) or the SVD-bound column."""

    name: str
    selector: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    svd_bound: bool = False
    notes: str = ""
    objective: str = "sum"  # passed to Selector.select(W, privacy, objective)
    timeout: float | None = None  # seconds; overrides the config's
    memory: int | None = None  # bytes; overrides the config's

    def selector_class(self, search_path: Iterable[str] = ()) -> type[Selector]:
        """The Selector class of a selector column (:func:`~.specs.resolve_selector`).

        Parameters
        ----------
        search_path : iterable of str, optional
            Directories searched first for a ``module:Class`` selector.

        Returns
        -------
        type[Selector]
            The class ``selector`` names.

        Raises
        ------
        ConfigError
            The column has no selector (the SVD-bound column, or one built without it).
        """
        if self.selector is None:
            raise ConfigError(f"column {self.name!r}: no selector (an svd_bound column?)")
        return resolve_selector(self.selector, search_path)


@dataclass
class Row:
    """A table row: a workload, with the paper's values and notes per column name."""

    name: str
    workload: WorkloadSpec
    paper: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


@dataclass
class Config:
    """A validated experiment config (format: docs/guide/configs.md), as
    :func:`load_config` returns it.

    Parameters
    ----------
    path : Path
        The YAML file (the Markdown table shows it; ``matrix`` workload files and
        ``module:Class`` selectors are found relative to it).
    paper : str
        The results sub-directory, ``<results>/<paper>/`` (a file name:
        ``[A-Za-z0-9_][A-Za-z0-9_.-]*``).
    table : str
        The table's name: its files are ``<table>.csv`` and ``<table>.md`` (a file name too).
    title : str
        The Markdown table's heading (YAML default ``"<paper> <table>"``).
    source : str
        Where the paper prints the table (``""``: not given).
    metric : Metric
        What each cell holds: RMSE, expected total squared error, maximum per-query
        variance or the error ratio to another column.
    privacy_spec : dict
        The ``privacy:`` mapping as written (it enters every job key).
    privacy : mmtoolkit.privacy.Privacy
        The privacy definition built from ``privacy_spec`` (``PureDP``, ``ApproxDP`` or
        ``ZCDP``).
    columns : list of Column
        The selector columns and the SVD-bound column, in order.
    rows : list of Row
        The workloads with the paper's values and notes, in order.
    tolerance : Tolerance or None, optional
        When a cell agrees with the paper; required (not None) when a row gives paper values.
    seed : int or None, optional
        The config seed from which each cell of a seeded selector gets its own
        (:func:`~.jobs.derive_seed`), unless the column's ``params`` set a seed; None: no
        derived seeds.
    notes : str, optional
        Notes printed under the table.
    timeout : float or None, optional
        Seconds per job (a column's own ``timeout`` overrides it); None: no limit.
    memory : int or None, optional
        Bytes of address space per job (a column's own ``memory`` overrides it); None: no
        limit.
    quick : dict or None, optional
        The validated ``quick:`` block (``rows``, ``columns``, ``params``, ``timeout``), if
        any; :func:`quick_config` applies it.
    search_path : tuple of str, optional
        Directories searched first for ``module:Class`` selectors (the config's directory,
        then the working directory).
    figures : tuple of FigureSpec, optional
        One :class:`~.figures.FigureSpec` per entry of ``figures:``, drawn after a run.
    """

    path: Path
    paper: str
    table: str
    title: str
    source: str
    metric: Metric
    privacy_spec: dict[str, Any]
    privacy: Any
    columns: list[Column]
    rows: list[Row]
    tolerance: Tolerance | None = None
    seed: int | None = None
    notes: str = ""
    timeout: float | None = None
    memory: int | None = None
    quick: dict[str, Any] | None = None
    search_path: tuple[str, ...] = ()
    figures: tuple = ()

    def column(self, name: str) -> Column:
        """The column called ``name``.

        Parameters
        ----------
        name : str
            The column's ``name``.

        Returns
        -------
        Column
            The first column of :attr:`columns` with that name (names are unique in a loaded
            config).

        Raises
        ------
        KeyError
            No column has that name.
        """
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


# --------------------------------------------------------------------------- parsing
def _no_column(f: Fields, where: str, name, columns) -> None:
    if name not in columns:
        raise f.error(where, f"no column named {name!r} (columns: {', '.join(columns)})")


def _parse_metric(f: Fields, value) -> Metric:
    if isinstance(value, str):
        if value not in METRICS:
            valid = f"{', '.join(METRICS)}, {{ratio_to: <column>}}"
            raise f.error("metric", f"unknown metric {value!r} (valid: {valid})")
        return Metric(value)
    if isinstance(value, Mapping):
        f.keys(f.mapping(value, "metric"), "metric", {"ratio_to"}, ("ratio_to",))
        return Metric("ratio", f.text(value["ratio_to"], "metric.ratio_to"))
    raise f.error(
        "metric", f"expected one of {', '.join(METRICS)} or {{ratio_to: <column>}}, got {value!r}"
    )


def _parse_privacy(f: Fields, value):
    spec = dict(f.mapping(value, "privacy"))
    try:
        return spec, privacy.from_spec(spec)
    except KeyError as exc:  # KeyError quotes its message
        raise f.error("privacy", str(exc.args[0]) if exc.args else "missing field") from None
    except (ValueError, TypeError) as exc:
        raise f.error("privacy", str(exc)) from None


def _parse_tolerance(f: Fields, value) -> Tolerance:
    m = f.mapping(value, "tolerance")
    f.keys(m, "tolerance", {"abs", "rel"})
    if not m:
        raise f.error("tolerance", "give abs, rel or both")
    return Tolerance(**{k: f.number(m[k], f"tolerance.{k}", minimum=0) for k in m})


def _parse_limits(f: Fields, where: str, m) -> tuple[float | None, int | None]:
    """``timeout`` (seconds > 0) and ``memory`` (``4GB``, ``512MB``, bytes) of a mapping."""
    timeout = memory = None
    if m.get("timeout") is not None:
        timeout = f.positive(m["timeout"], subfield(where, "timeout"), what="number of seconds")
    if m.get("memory") is not None:
        try:
            memory = parse_memory(m["memory"])
        except ValueError as exc:
            raise f.error(subfield(where, "memory"), str(exc)) from None
    return timeout, memory


def _selector_class(f: Fields, where: str, name, search_path):
    """The Selector class of a registry name or ``package.module:ClassName``."""
    if not isinstance(name, str) or not name.strip():
        raise f.error(
            where, f"expected a selector name or 'package.module:ClassName', got {name!r}"
        )
    try:
        return resolve_selector(name, search_path)
    except (ImportError, TypeError, KeyError) as exc:
        raise f.error(where, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - an import that fails for any other reason
        raise f.error(where, f"importing {name!r} failed: {type(exc).__name__}: {exc}") from None


def _parse_column(f: Fields, where: str, value, search_path=()) -> Column:
    m = f.mapping(value, where)
    f.keys(m, where, _COLUMN_KEYS, ("name",))

    def at(key: str) -> str:
        return subfield(where, key)

    name = f.text(m["name"], at("name"))
    notes = f.text(m.get("notes", ""), at("notes"), nonempty=False)
    timeout, memory = _parse_limits(f, where, m)
    if f.flag(m.get("svd_bound", False), at("svd_bound")):
        for k in ("selector", "params", "objective"):
            if k in m:
                raise f.error(at(k), "not allowed on an svd_bound column")
        return Column(name=name, svd_bound=True, notes=notes, timeout=timeout, memory=memory)
    if "selector" not in m:
        raise f.error(at("selector"), "missing required field (or svd_bound: true)")
    sel_name = m["selector"]
    cls = _selector_class(f, at("selector"), sel_name, search_path)
    params = dict(f.mapping(m.get("params") or {}, at("params")))
    try:  # constructing a selector is cheap and checks its parameters
        cls(**params)
    except (TypeError, ValueError) as exc:
        raise f.error(at("params"), f"{sel_name}: {exc}") from None
    objective = m.get("objective", "sum")
    valid_objectives = tuple(cls.objectives())
    if not isinstance(objective, str) or objective not in valid_objectives:
        raise f.error(
            at("objective"),
            f"{sel_name} does not support objective {objective!r} "
            f"(supported: {', '.join(map(str, valid_objectives))})",
        )
    return Column(
        name=name,
        selector=sel_name,
        params=params,
        notes=notes,
        objective=objective,
        timeout=timeout,
        memory=memory,
    )


def _parse_row(f: Fields, where: str, value, columns: dict[str, Column], build=True) -> Row:
    m = f.mapping(value, where)
    f.keys(m, where, {"name", "workload", "paper", "notes"}, ("name", "workload"))
    name = f.text(m["name"], subfield(where, "name"))
    wl = parse_workload(f, subfield(where, "workload"), m["workload"])
    try:  # builders are implicit and cheap; a bad argument value is a config error
        if build:
            wl.build()
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        msg = f"{wl.kind}(): {' '.join(str(exc).split())}"
        raise f.error(subfield(where, "workload"), msg) from None
    per_column: dict[str, dict] = {"paper": {}, "notes": {}}
    for key, out in per_column.items():
        pw = subfield(where, key)
        for col, v in f.mapping(m.get(key) or {}, pw).items():
            _no_column(f, subfield(pw, col), col, columns)
            if key == "notes":
                out[col] = f.text(v, subfield(pw, col))
            elif v is not None:
                out[col] = f.number(v, subfield(pw, col))
    return Row(name, wl, per_column["paper"], per_column["notes"])


def _parse(f: Fields, path: Path, data, build_workloads: bool = True) -> Config:
    if data is None:
        raise f.error("", "empty config")
    f.mapping(data, "(top level)")
    f.keys(data, "", set(_TOP_REQUIRED) | set(_TOP_OPTIONAL), _TOP_REQUIRED)

    paper = f.text(data["paper"], "paper")
    table = f.text(data["table"], "table")
    for where, v in (("paper", paper), ("table", table)):
        if not _SAFE_NAME.match(v):
            raise f.error(where, f"{v!r} must match [A-Za-z0-9_][A-Za-z0-9_.-]* (a file name)")
    title = f.text(data.get("title", f"{paper} {table}"), "title")
    source = f.text(data.get("source", ""), "source", nonempty=False)
    notes = f.text(data.get("notes", ""), "notes", nonempty=False)
    metric = _parse_metric(f, data["metric"])
    privacy_spec, privacy_obj = _parse_privacy(f, data["privacy"])
    tolerance = _parse_tolerance(f, data["tolerance"]) if "tolerance" in data else None
    seed = None if data.get("seed") is None else f.integer(data["seed"], "seed", minimum=0)
    timeout, memory = _parse_limits(f, "", data)
    search_path = search_path_for(path)

    columns: dict[str, Column] = {}
    for i, c in enumerate(f.items(data["columns"], "columns")):
        col = _parse_column(f, f"columns[{i}]", c, search_path)
        if col.name in columns:
            raise f.error(f"columns[{i}].name", f"duplicate column name {col.name!r}")
        columns[col.name] = col
    if metric.kind == "ratio":
        _no_column(f, "metric.ratio_to", metric.ratio_to, columns)
    for i, col in enumerate(columns.values()):
        if col.svd_bound and metric.kind not in ("rmse", "total_error", "ratio"):
            raise f.error(
                f"columns[{i}].svd_bound",
                f"the SVD bound is available for metric rmse, total_error or ratio_to, "
                f"not {metric.kind}",
            )

    rows: list[Row] = []
    for i, r in enumerate(f.items(data["rows"], "rows")):
        row = _parse_row(f, f"rows[{i}]", r, columns, build_workloads)
        if any(row.name == seen.name for seen in rows):
            raise f.error(f"rows[{i}].name", f"duplicate row name {row.name!r}")
        rows.append(row)
    if tolerance is None and any(r.paper for r in rows):
        raise f.error("tolerance", "missing required field (rows give paper values)")
    quick = None
    if data.get("quick") is not None:
        quick = _parse_quick(f, data["quick"], columns, rows, metric)
    columns_list = list(columns.values())
    figures = parse_figures(
        data.get("figures"), file=f.file, metric=metric, columns=columns_list, rows=rows
    )
    return Config(
        path=path,
        paper=paper,
        table=table,
        title=title,
        source=source,
        metric=metric,
        privacy_spec=privacy_spec,
        privacy=privacy_obj,
        columns=columns_list,
        rows=rows,
        tolerance=tolerance,
        seed=seed,
        notes=notes,
        timeout=timeout,
        memory=memory,
        quick=quick,
        search_path=search_path,
        figures=figures,
    )


def _parse_quick(f: Fields, value, columns: dict[str, Column], rows: list[Row], metric) -> dict:
    m = f.mapping(value, "quick")
    f.keys(m, "quick", _QUICK_KEYS)
    out: dict[str, Any] = {}
    for key, valid in (("rows", [r.name for r in rows]), ("columns", list(columns))):
        if key not in m:
            continue
        names = f.items(m[key], f"quick.{key}")
        for i, n in enumerate(names):
            if n not in valid:
                msg = f"no {key[:-1]} named {n!r} ({key}: {', '.join(valid)})"
                raise f.error(f"quick.{key}[{i}]", msg)
        out[key] = list(names)
    if metric.kind == "ratio" and "columns" in out and metric.ratio_to not in out["columns"]:
        raise f.error("quick.columns", f"must keep the ratio_to column {metric.ratio_to!r}")
    out["params"] = {}
    for col, over in f.mapping(m.get("params") or {}, "quick.params").items():
        where = subfield("quick.params", col)
        _no_column(f, where, col, columns)
        c = columns[col]
        if c.svd_bound:
            raise f.error(where, "an svd_bound column has no parameters")
        over = dict(f.mapping(over or {}, where))
        try:
            c.selector_class()(**{**c.params, **over})
        except (TypeError, ValueError) as exc:
            raise f.error(where, f"{c.selector}: {exc}") from None
        out["params"][col] = over
    if m.get("timeout") is not None:
        out["timeout"], _ = _parse_limits(f, "quick", {"timeout": m["timeout"]})
    return out


def quick_config(config: Config) -> Config:
    """The smoke-run variant of ``config`` used by ``mmtoolkit run --quick``: its ``quick:``
    rows, columns, parameter overrides (``restarts: 1`` where none is given) and timeout, as
    table ``<table>.quick`` (docs/guide/configs.md, "Quick runs").

    Parameters
    ----------
    config : Config
        The full config (not changed). Without a ``quick:`` block its first row and every
        column are kept.

    Returns
    -------
    Config
        A copy with the kept rows and columns (columns copied, with the overridden
        ``params`` and ``timeout``), table ``<table>.quick`` and title
        ``<title> (quick run)``.

    Raises
    ------
    ConfigError
        A selector column has no selector (a column built without one, not by
        :func:`load_config`).
    """
    q = config.quick or {}
    cfg = copy.copy(config)
    keep_rows = q.get("rows") or [config.rows[0].name]
    cfg.rows = [r for r in config.rows if r.name in keep_rows]
    keep_cols = q.get("columns")
    columns = [c for c in config.columns if keep_cols is None or c.name in keep_cols]
    cfg.columns = []
    for c in columns:
        c = copy.copy(c)
        if not c.svd_bound:
            over = q.get("params", {}).get(c.name, {})
            params = {**c.params, **over}
            cls = c.selector_class(config.search_path)
            if "restarts" in inspect.signature(cls.__init__).parameters and "restarts" not in over:
                params["restarts"] = 1
            c.params = params
        if q.get("timeout") is not None:
            c.timeout = q["timeout"]
        cfg.columns.append(c)
    if q.get("timeout") is not None:
        cfg.timeout = q["timeout"]
    cfg.table = f"{config.table}.quick"
    cfg.title = f"{config.title} (quick run)"
    return cfg


def load_config(path: str | os.PathLike[str], *, build_workloads: bool = True) -> Config:
    """Read and validate a YAML experiment config (format: docs/guide/configs.md).

    The whole file is checked up front: every field, each column's selector and parameters
    (the selector is constructed), and each row's workload (built).

    Parameters
    ----------
    path : str or os.PathLike
        The config's YAML file (not a figure sheet ``*.plot.yaml`` or a comparison config
        ``*.compare.yaml``).
    build_workloads : bool, optional
        False skips building each row's workload (the slow part of the validation, e.g. for
        ``mmtoolkit report``, which only needs names and paper values).

    Returns
    -------
    Config
        The validated config.

    Raises
    ------
    ConfigError
        A ``ValueError`` naming the file and the field path (``rows[2].workload: ...``):
        an unreadable file, a YAML syntax error (with its line and column), an unknown,
        missing or malformed field, an unknown selector or parameter, a workload that does
        not build, or a figure sheet or comparison config given as a table config.
    """
    f = Fields(path)
    p = Path(path)
    if p.name.endswith((".plot.yaml", ".plot.yml")):
        raise f.error("", "a figure sheet, not an experiment config (render it: mmtoolkit plot)")
    if p.name.endswith(COMPARE_SUFFIXES):
        raise f.error("", "a comparison config (mmtoolkit.compare_data.run_config; mmtoolkit run "
                      "runs it), not a table config")
    return _parse(f, p, read_yaml(p, "config"), build_workloads)
