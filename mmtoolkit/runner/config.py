"""Experiment configs: one YAML file per reproduced table, loaded into plain dataclasses.

A config names a paper and one of its tables, the rows (a workload each), the columns
(a strategy selector each, or the SVD lower bound), the metric, the privacy definition and
the paper's published values. :func:`load_config` validates the whole file up front; any
problem raises a single :class:`ConfigError` naming the file and the field path, e.g.::

    configs/x.yaml: rows[2].workload.kind: unknown workload kind 'marginalz' (valid: ...)

Format
------
.. code-block:: yaml

    paper: residual_planner        # required; results go to <results>/<paper>/<table>.{csv,md}
    table: table4                  # required; [A-Za-z0-9_.-]+ (both are path components)
    title: "Table 4 — ..."         # optional (default "<paper> <table>")
    source: "He et al., Table 4"   # optional free text
    notes: "..."                   # optional free text printed under the Markdown table
    metric: rmse                   # required: rmse | total_error | max_variance
                                   #           | {ratio_to: <name of a selector column>}
    privacy: {kind: zcdp, rho: 0.5}   # required; given to mmtoolkit.privacy.from_spec
    tolerance: {abs: 0.0005}       # {abs: a}, {rel: r} or both; required when any row has
                                   # paper values. A cell agrees when
                                   # |ours - paper| <= abs + rel * |paper|
    seed: 0                        # optional int >= 0; given to every selector whose
                                   # __init__ declares a `seed` parameter (unless the
                                   # column's params set one)
    columns:                       # required, non-empty, unique names
      - {name: SVDB, svd_bound: true}            # the SVD lower bound (rmse/total_error only)
      - {name: LM, selector: laplace, params: {}}   # selectors.get("laplace", **params)
      - {name: HDMM, selector: hdmm, params: {restarts: 5}, notes: "free text"}
    rows:                          # required, non-empty, unique names
      - name: Adult 1-way
        workload: {kind: marginals, domain: adult, k: 1}
        paper: {SVDB: 3.047}       # optional: published value per column name (null = none)
        notes: {SVDB: "..."}       # optional: explanation per column name

Workload specs
--------------
``kind`` is a public builder of :mod:`mmtoolkit.workloads` (``mmtoolkit list workloads``);
every other key is one of its keyword arguments, checked against its signature:

* ``domain`` is a dataset preset name (``adult``), a mapping ``{preset: synth, n: 10, d: 4}``
  (extra keys go to :func:`mmtoolkit.datasets.domain`), or an explicit domain
  ``{sizes: [2, 3], names: [a, b], numeric: [...]}`` (``names``/``numeric`` optional);
* a mapping with a ``kind`` key is a nested workload, a list of them is a list of workloads
  (``kron`` ``factors``, ``union`` ``workloads``); for builders whose workload argument is
  called ``W`` (``permuted``) the key ``workload`` may be used instead:
  ``{kind: permuted, workload: {kind: all_range, n: 1024}, seed: 0}``;
* any other value is passed through as parsed from YAML.

Each row's workload is built once while loading, so a bad argument value (``k`` larger
than the number of attributes, an unknown attribute name, ...) is a ConfigError too.

Note that YAML (1.1, as read by PyYAML) reads ``1e-3`` as a string: write ``1.0e-3``.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import yaml

from mmtoolkit import datasets, privacy, selectors, workloads
from mmtoolkit.domain import Domain

__all__ = [
    "Column",
    "Config",
    "ConfigError",
    "DomainSpec",
    "METRICS",
    "Metric",
    "Row",
    "Tolerance",
    "WorkloadSpec",
    "load_config",
    "workload_kinds",
]

#: Plain metric names (the fourth kind is the mapping ``{ratio_to: column}``).
METRICS = ("rmse", "total_error", "max_variance")

#: Public functions of mmtoolkit.workloads that are not workload builders (functions
#: annotated to return ``int`` are excluded as well).
_NOT_BUILDERS = frozenset({"num_queries", "domain_size"})

#: Builder arguments that hold one nested workload / a list of nested workloads.
_ONE_WORKLOAD_ARGS = frozenset({"W", "workload"})
_MANY_WORKLOAD_ARGS = frozenset({"factors", "workloads"})

_TOP_REQUIRED = ("paper", "table", "metric", "privacy", "columns", "rows")
_TOP_OPTIONAL = ("title", "source", "notes", "tolerance", "seed")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class ConfigError(ValueError):
    """A malformed experiment config; the message names the file and the field path."""


# --------------------------------------------------------------------------- dataclasses
@dataclass
class DomainSpec:
    """A domain: a dataset preset (with parameters) or explicit sizes/names."""

    preset: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    sizes: list[int] | None = None
    names: list[str] | None = None
    numeric: Any = None

    def build(self) -> Domain:
        if self.preset is not None:
            return datasets.domain(self.preset, **self.params)
        if self.names is None and self.numeric is None:
            return Domain.from_sizes(list(self.sizes))
        names = self.names if self.names is not None else [f"a{i}" for i in range(len(self.sizes))]
        return Domain(list(names), list(self.sizes), numeric=self.numeric)

    def describe(self) -> str:
        if self.preset is not None:
            extra = ", ".join(f"{k}={v}" for k, v in self.params.items())
            return f"{self.preset}({extra})" if extra else self.preset
        return f"sizes={self.sizes}"


@dataclass
class WorkloadSpec:
    """``getattr(mmtoolkit.workloads, kind)(**args)``; args may hold nested specs."""

    kind: str
    args: dict[str, Any] = field(default_factory=dict)

    def build(self):
        """Build the workload Matrix (nested specs and domains first)."""
        builder = getattr(workloads, self.kind)
        return builder(**{k: _build_value(v) for k, v in self.args.items()})


def _build_value(value):
    if isinstance(value, (WorkloadSpec, DomainSpec)):
        return value.build()
    if isinstance(value, list) and value and all(isinstance(v, WorkloadSpec) for v in value):
        return [v.build() for v in value]
    return value


@dataclass
class Metric:
    """``kind`` is one of :data:`METRICS` or ``"ratio"`` (then ``ratio_to`` names a column)."""

    kind: str
    ratio_to: str | None = None

    def describe(self) -> str:
        if self.kind == "ratio":
            return f"error ratio sqrt(Err(column) / Err({self.ratio_to}))"
        return {
            "rmse": "RMSE = sqrt(expected total squared error / number of queries)",
            "total_error": "expected total squared error",
            "max_variance": "maximum per-query variance",
        }[self.kind]


@dataclass
class Tolerance:
    """A cell agrees with the paper when ``|ours - paper| <= abs + rel * |paper|``."""

    abs: float = 0.0
    rel: float = 0.0

    def within(self, ours: float, paper: float) -> bool:
        if not (math.isfinite(ours) and math.isfinite(paper)):
            return False
        return abs(ours - paper) <= self.abs + self.rel * abs(paper)

    def describe(self) -> str:
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


@dataclass
class Row:
    name: str
    workload: WorkloadSpec
    paper: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


@dataclass
class Config:
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

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


# --------------------------------------------------------------------------- discovery
def workload_kinds() -> list[str]:
    """The names usable as ``workload.kind``: the public builders of mmtoolkit.workloads."""
    public = getattr(workloads, "__all__", None)
    if public is None:
        public = [
            n
            for n, obj in vars(workloads).items()
            if inspect.isfunction(obj) and obj.__module__.startswith(workloads.__name__)
        ]
    return sorted(
        n
        for n in public
        if not n.startswith("_")
        and n not in _NOT_BUILDERS
        and inspect.isfunction(getattr(workloads, n, None))
        and inspect.signature(getattr(workloads, n)).return_annotation not in (int, "int")
    )


# --------------------------------------------------------------------------- YAML
class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one."""


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue  # let the default constructor report it
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
        seen[key] = True
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# YAML 1.2 floats: PyYAML (YAML 1.1) reads ``1e-6`` as a string; configs mean a number.
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


# --------------------------------------------------------------------------- validation
class _Ctx:
    """Carries the file name so every error names it."""

    def __init__(self, path: Path | str):
        self.file = str(path)

    def error(self, where: str, msg: str) -> ConfigError:
        return ConfigError(f"{self.file}: {where}: {msg}" if where else f"{self.file}: {msg}")


def _key(path: str, name: str) -> str:
    """Append a mapping key to a field path (``a.b`` or ``a['x y']``)."""
    part = f".{name}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", str(name)) else f"[{name!r}]"
    return (path + part) if path else part.lstrip(".")


def _type_name(v) -> str:
    return "null" if v is None else type(v).__name__


def _expect_mapping(ctx, where, value) -> Mapping:
    if not isinstance(value, Mapping):
        raise ctx.error(where, f"expected a mapping, got {_type_name(value)}")
    for k in value:
        if not isinstance(k, str):
            raise ctx.error(where, f"keys must be strings, got {k!r}")
    return value


def _expect_str(ctx, where, value, *, nonempty=True) -> str:
    if not isinstance(value, str):
        raise ctx.error(where, f"expected a string, got {_type_name(value)} {value!r}")
    if nonempty and not value.strip():
        raise ctx.error(where, "must not be empty")
    return value


def _expect_number(ctx, where, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        hint = ""
        if isinstance(value, str):
            try:
                float(value)
                hint = " (YAML reads '1e-3' as a string: write '1.0e-3')"
            except ValueError:
                pass
        raise ctx.error(where, f"expected a number, got {_type_name(value)} {value!r}{hint}")
    return float(value)


def _expect_int(ctx, where, value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ctx.error(where, f"expected an integer, got {_type_name(value)} {value!r}")
    return int(value)


def _check_keys(ctx, where, mapping, allowed, required=()):
    unknown = [k for k in mapping if k not in allowed]
    if unknown:
        raise ctx.error(
            _key(where, unknown[0]),
            f"unknown field (valid: {', '.join(sorted(allowed))})",
        )
    for k in required:
        if k not in mapping:
            raise ctx.error(_key(where, k), "missing required field")


def _parse_metric(ctx, value) -> Metric:
    if isinstance(value, str):
        if value not in METRICS:
            raise ctx.error(
                "metric",
                f"unknown metric {value!r} (valid: {', '.join(METRICS)}, {{ratio_to: <column>}})",
            )
        return Metric(value)
    if isinstance(value, Mapping):
        _expect_mapping(ctx, "metric", value)
        _check_keys(ctx, "metric", value, {"ratio_to"}, required=("ratio_to",))
        return Metric("ratio", _expect_str(ctx, "metric.ratio_to", value["ratio_to"]))
    raise ctx.error(
        "metric",
        f"expected one of {', '.join(METRICS)} or {{ratio_to: <column>}}, got {value!r}",
    )


def _parse_privacy(ctx, value):
    spec = dict(_expect_mapping(ctx, "privacy", value))
    try:
        obj = privacy.from_spec(spec)
    except KeyError as exc:  # KeyError quotes its message
        raise ctx.error("privacy", str(exc.args[0]) if exc.args else "missing field") from None
    except (ValueError, TypeError) as exc:
        raise ctx.error("privacy", str(exc)) from None
    return spec, obj


def _parse_tolerance(ctx, value) -> Tolerance:
    m = _expect_mapping(ctx, "tolerance", value)
    _check_keys(ctx, "tolerance", m, {"abs", "rel"})
    if not m:
        raise ctx.error("tolerance", "give abs, rel or both")
    out = {}
    for k in ("abs", "rel"):
        if k in m:
            x = _expect_number(ctx, f"tolerance.{k}", m[k])
            if not (x >= 0 and math.isfinite(x)):
                raise ctx.error(f"tolerance.{k}", f"must be a finite number >= 0, got {x!r}")
            out[k] = x
    return Tolerance(**out)


def _parse_domain(ctx, where, value) -> DomainSpec:
    if isinstance(value, str):
        spec = DomainSpec(preset=value)
        _check_preset(ctx, where, value)
    elif isinstance(value, Mapping):
        m = _expect_mapping(ctx, where, value)
        if "preset" in m and "sizes" in m:
            raise ctx.error(where, "give either 'preset' or 'sizes', not both")
        if "preset" in m:
            name = _expect_str(ctx, _key(where, "preset"), m["preset"])
            _check_preset(ctx, _key(where, "preset"), name)
            spec = DomainSpec(preset=name, params={k: v for k, v in m.items() if k != "preset"})
        elif "sizes" in m:
            _check_keys(ctx, where, m, {"sizes", "names", "numeric"})
            sizes = m["sizes"]
            if not isinstance(sizes, list) or not sizes:
                raise ctx.error(_key(where, "sizes"), "expected a non-empty list of integers")
            for i, s in enumerate(sizes):
                s = _expect_int(ctx, f"{_key(where, 'sizes')}[{i}]", s)
                if s < 1:
                    raise ctx.error(f"{_key(where, 'sizes')}[{i}]", f"must be >= 1, got {s}")
            names = m.get("names")
            if names is not None:
                if not isinstance(names, list) or len(names) != len(sizes):
                    raise ctx.error(
                        _key(where, "names"),
                        f"expected a list of {len(sizes)} attribute names (one per size)",
                    )
                for i, n in enumerate(names):
                    _expect_str(ctx, f"{_key(where, 'names')}[{i}]", n)
            spec = DomainSpec(sizes=list(sizes), names=names, numeric=m.get("numeric"))
        else:
            raise ctx.error(where, "expected a preset name, {preset: ...} or {sizes: [...]}")
    else:
        raise ctx.error(
            where, f"expected a preset name or a mapping, got {_type_name(value)} {value!r}"
        )
    try:
        spec.build()
    except (ValueError, TypeError, KeyError) as exc:
        raise ctx.error(where, f"invalid domain {spec.describe()}: {exc}") from None
    return spec


def _check_preset(ctx, where, name):
    valid = list(datasets.available())
    if name not in valid:
        raise ctx.error(where, f"unknown dataset {name!r} (valid: {', '.join(valid)})")


def _is_spec(v) -> bool:
    return isinstance(v, Mapping) and "kind" in v


def _parse_workload(ctx, where, value) -> WorkloadSpec:
    m = _expect_mapping(ctx, where, value)
    if "kind" not in m:
        raise ctx.error(_key(where, "kind"), "missing required field")
    kinds = workload_kinds()
    kind = m["kind"]
    if not isinstance(kind, str) or kind not in kinds:
        raise ctx.error(
            _key(where, "kind"),
            f"unknown workload kind {kind!r} (valid: {', '.join(kinds)})",
        )
    builder = getattr(workloads, kind)
    sig = inspect.signature(builder)
    raw = {k: v for k, v in m.items() if k != "kind"}
    if "workload" in raw and "W" in sig.parameters and "workload" not in sig.parameters:
        if "W" in raw:
            raise ctx.error(where, "give 'workload' or 'W', not both")
        raw["W"] = raw.pop("workload")
    try:
        sig.bind(**raw)
    except TypeError as exc:
        raise ctx.error(where, f"{kind}(): {exc}") from None

    args: dict[str, Any] = {}
    for name, v in raw.items():
        shown = "workload" if name == "W" and "workload" in m else name
        sub = _key(where, shown)
        if name == "domain":
            args[name] = _parse_domain(ctx, sub, v)
        elif name in _ONE_WORKLOAD_ARGS or _is_spec(v):
            args[name] = _parse_workload(ctx, sub, v)
        elif name in _MANY_WORKLOAD_ARGS or (
            isinstance(v, list) and v and all(_is_spec(x) for x in v)
        ):
            if not isinstance(v, list) or not v:
                raise ctx.error(sub, "expected a non-empty list of workload specs")
            args[name] = [_parse_workload(ctx, f"{sub}[{i}]", x) for i, x in enumerate(v)]
        else:
            args[name] = v
    return WorkloadSpec(kind, args)


def _parse_column(ctx, where, value) -> Column:
    m = _expect_mapping(ctx, where, value)
    _check_keys(ctx, where, m, {"name", "selector", "params", "svd_bound", "notes"}, ("name",))
    name = _expect_str(ctx, _key(where, "name"), m["name"])
    svd = m.get("svd_bound", False)
    if not isinstance(svd, bool):
        raise ctx.error(_key(where, "svd_bound"), f"expected true or false, got {svd!r}")
    notes = _expect_str(ctx, _key(where, "notes"), m.get("notes", ""), nonempty=False)
    if svd:
        for k in ("selector", "params"):
            if k in m:
                raise ctx.error(_key(where, k), "not allowed on an svd_bound column")
        return Column(name=name, svd_bound=True, notes=notes)
    if "selector" not in m:
        raise ctx.error(_key(where, "selector"), "missing required field (or svd_bound: true)")
    sel_name = m["selector"]
    valid = list(selectors.available())
    if not isinstance(sel_name, str) or sel_name not in valid:
        raise ctx.error(
            _key(where, "selector"),
            f"unknown selector {sel_name!r} (valid: {', '.join(valid)})",
        )
    params = m.get("params", {})
    if params is None:
        params = {}
    params = dict(_expect_mapping(ctx, _key(where, "params"), params))
    try:  # constructing a selector is cheap and checks its parameters
        selectors.get(sel_name, **params)
    except (TypeError, ValueError) as exc:
        raise ctx.error(_key(where, "params"), f"{sel_name}: {exc}") from None
    return Column(name=name, selector=sel_name, params=params, notes=notes)


def _parse_row(ctx, where, value, columns: dict[str, Column]) -> Row:
    m = _expect_mapping(ctx, where, value)
    _check_keys(ctx, where, m, {"name", "workload", "paper", "notes"}, ("name", "workload"))
    name = _expect_str(ctx, _key(where, "name"), m["name"])
    wl = _parse_workload(ctx, _key(where, "workload"), m["workload"])
    try:  # builders are implicit and cheap; a bad argument value is a config error
        wl.build()
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ctx.error(
            _key(where, "workload"), f"{wl.kind}(): {' '.join(str(exc).split())}"
        ) from None
    paper: dict[str, float] = {}
    pw = _key(where, "paper")
    for col, v in _expect_mapping(ctx, pw, m.get("paper") or {}).items():
        if col not in columns:
            raise ctx.error(
                _key(pw, col), f"no column named {col!r} (columns: {', '.join(columns)})"
            )
        if v is None:
            continue
        paper[col] = _expect_number(ctx, _key(pw, col), v)
    notes: dict[str, str] = {}
    nw = _key(where, "notes")
    for col, v in _expect_mapping(ctx, nw, m.get("notes") or {}).items():
        if col not in columns:
            raise ctx.error(
                _key(nw, col), f"no column named {col!r} (columns: {', '.join(columns)})"
            )
        notes[col] = _expect_str(ctx, _key(nw, col), v)
    return Row(name=name, workload=wl, paper=paper, notes=notes)


def _parse_list(ctx, where, value) -> list:
    if not isinstance(value, list):
        raise ctx.error(where, f"expected a list, got {_type_name(value)}")
    if not value:
        raise ctx.error(where, "must not be empty")
    return value


def _parse(ctx: _Ctx, path: Path, data) -> Config:
    if data is None:
        raise ctx.error("", "empty config")
    if not isinstance(data, Mapping):
        raise ctx.error("(top level)", f"expected a mapping, got {_type_name(data)}")
    _expect_mapping(ctx, "(top level)", data)
    _check_keys(ctx, "", data, set(_TOP_REQUIRED) | set(_TOP_OPTIONAL), _TOP_REQUIRED)

    paper = _expect_str(ctx, "paper", data["paper"])
    table = _expect_str(ctx, "table", data["table"])
    for where, v in (("paper", paper), ("table", table)):
        if not _SAFE_NAME.match(v):
            raise ctx.error(where, f"{v!r} must match [A-Za-z0-9_][A-Za-z0-9_.-]* (a file name)")
    title = _expect_str(ctx, "title", data.get("title", f"{paper} {table}"))
    source = _expect_str(ctx, "source", data.get("source", ""), nonempty=False)
    notes = _expect_str(ctx, "notes", data.get("notes", ""), nonempty=False)
    metric = _parse_metric(ctx, data["metric"])
    privacy_spec, privacy_obj = _parse_privacy(ctx, data["privacy"])
    tolerance = _parse_tolerance(ctx, data["tolerance"]) if "tolerance" in data else None
    seed = None
    if data.get("seed") is not None:
        seed = _expect_int(ctx, "seed", data["seed"])
        if seed < 0:
            raise ctx.error("seed", f"must be >= 0, got {seed}")

    columns: dict[str, Column] = {}
    for i, c in enumerate(_parse_list(ctx, "columns", data["columns"])):
        col = _parse_column(ctx, f"columns[{i}]", c)
        if col.name in columns:
            raise ctx.error(f"columns[{i}].name", f"duplicate column name {col.name!r}")
        columns[col.name] = col

    if metric.kind == "ratio":
        ref = columns.get(metric.ratio_to)
        if ref is None:
            raise ctx.error(
                "metric.ratio_to",
                f"no column named {metric.ratio_to!r} (columns: {', '.join(columns)})",
            )
        if ref.svd_bound:
            raise ctx.error("metric.ratio_to", "must name a selector column, not an svd_bound one")
    for i, col in enumerate(columns.values()):
        if col.svd_bound and metric.kind not in ("rmse", "total_error"):
            raise ctx.error(
                f"columns[{i}].svd_bound",
                f"the SVD bound is available for metric rmse or total_error, not {metric.kind}",
            )

    rows: list[Row] = []
    seen: set[str] = set()
    for i, r in enumerate(_parse_list(ctx, "rows", data["rows"])):
        row = _parse_row(ctx, f"rows[{i}]", r, columns)
        if row.name in seen:
            raise ctx.error(f"rows[{i}].name", f"duplicate row name {row.name!r}")
        seen.add(row.name)
        rows.append(row)

    if tolerance is None and any(r.paper for r in rows):
        raise ctx.error("tolerance", "missing required field (rows give paper values)")

    return Config(
        path=path,
        paper=paper,
        table=table,
        title=title,
        source=source,
        metric=metric,
        privacy_spec=privacy_spec,
        privacy=privacy_obj,
        columns=list(columns.values()),
        rows=rows,
        tolerance=tolerance,
        seed=seed,
        notes=notes,
    )


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML experiment config (see the module docstring for the format).

    Raises :class:`ConfigError` (a ``ValueError``) naming the file and the field path.
    """
    ctx = _Ctx(path)
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ctx.error("", f"cannot read config: {exc.strerror or exc}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ctx.error(where, f"YAML syntax error: {problem}") from None
    return _parse(ctx, p, data)
