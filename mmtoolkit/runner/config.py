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
                                   #   | {ratio_to: <column>}: sqrt(Err(col) / Err(<column>))
                                   #     (a selector column, or an svd_bound column: the
                                   #     ratio to the SVD lower bound)
    privacy: {kind: zcdp, rho: 0.5}   # required; given to mmtoolkit.privacy.from_spec
    tolerance: {abs: 0.0005}       # {abs: a}, {rel: r} or both; required when any row has
                                   # paper values. A cell agrees when
                                   # |ours - paper| <= abs + rel * |paper|
    seed: 0                        # optional int >= 0; every selector whose __init__
                                   # declares a `seed` parameter gets, per cell, the seed
                                   # runner.jobs.derive_seed(seed, row, column) (unless the
                                   # column's params set one)
    timeout: 3600                  # optional: seconds per job; a job over it is recorded
                                   # as a "timeout" cell and the run continues
    memory: 8GB                    # optional: address-space limit per job (B, KB, MB, GB,
                                   # TB, KiB, ..., or bytes) -> an "out of memory" cell
    columns:                       # required, non-empty, unique names
      - {name: SVDB, svd_bound: true}  # the SVD lower bound (rmse, total_error, ratio_to)
      - {name: LM, selector: laplace, params: {}}   # selectors.get("laplace", **params)
      - {name: HDMM, selector: hdmm, params: {restarts: 5}, notes: "free text",
         timeout: 600, memory: 4GB}                 # per-column limits override the above
      - {name: RP max, selector: residual_planner, objective: max}
                                   # objective: given to select(W, privacy, objective); one
                                   # of the selector's objectives() (default "sum")
      - {name: Mine, selector: "mypackage.module:MySelector"}
                                   # a Selector subclass outside the package, imported from
                                   # the config's directory, the cwd or sys.path
    rows:                          # required, non-empty, unique names
      - name: Adult 1-way
        workload: {kind: marginals, domain: adult, k: 1}
        paper: {SVDB: 3.047}       # optional: published value per column name (null = none)
        notes: {SVDB: "..."}       # optional: explanation per column name
    figures:                       # optional: PNGs <results>/<paper>/<table>_<name>.png,
      - {name: rmse_vs_d, kind: line, x: {param: domain.d}, logy: true}
                                   # drawn after the table is written, the paper's values
                                   # beside ours (format: mmtoolkit/runner/plots.py)
    quick:                         # optional: the variant run by `mmtoolkit run --quick`
      rows: [Adult 1-way]          #   rows kept (default: the first row)
      columns: [SVDB, HDMM]        #   columns kept (default: all)
      params: {HDMM: {restarts: 2}}   # parameter overrides; a selector with a `restarts`
                                   #   parameter not overridden here runs with restarts: 1
      timeout: 60                  #   per-job timeout of the quick run
                                   # results go to <table>.quick.{csv,md} (quick_config)

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

The runner's own kind ``matrix`` is an explicit workload matrix: ``{kind: matrix, file:
W.npy}`` (``.npy``, or ``.csv``/``.txt`` numbers; relative to the config file) or
``{kind: matrix, rows: [[1, 0], [1, 1]]}`` for small cases; usable wherever a workload is
(e.g. a ``kron`` factor).

Each row's workload is built once while loading, so a bad argument value (``k`` larger
than the number of attributes, an unknown attribute name, ...) is a ConfigError too.

Note that YAML (1.1, as read by PyYAML) reads ``1e-3`` as a string: write ``1.0e-3``.
"""

from __future__ import annotations

import inspect
import io
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
_TOP_OPTIONAL = (
    "title",
    "source",
    "notes",
    "tolerance",
    "seed",
    "timeout",
    "memory",
    "quick",
    "figures",
)
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
        if self.kind == MATRIX_KIND:
            return _matrix_workload(**self.args)
        builder = getattr(workloads, self.kind)
        return builder(**{k: _build_value(v) for k, v in self.args.items()})


#: The runner's own workload kind: an explicit matrix, ``{kind: matrix, file: W.npy}``
#: (a ``.npy`` file, or ``.csv``/``.txt`` of comma/whitespace separated numbers; a relative
#: path is relative to the config file) or ``{kind: matrix, rows: [[1, 0], [1, 1]]}``.
MATRIX_KIND = "matrix"


def _matrix_workload(file=None, rows=None):
    """The explicit-matrix workload (a Dense Matrix) of ``{kind: matrix, ...}``."""
    import numpy as np

    from mmtoolkit.linalg import Dense

    if (file is None) == (rows is None):
        raise ValueError("give exactly one of 'file' or 'rows'")
    if file is not None:
        path = Path(file)
        if path.suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        else:
            text = path.read_text(encoding="utf-8")
            arr = np.loadtxt(io.StringIO(text.replace(",", " ")), ndmin=2)
    else:
        if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
            raise ValueError("rows must be a non-empty list of lists of numbers")
        if len({len(r) for r in rows}) != 1:
            raise ValueError("all rows must have the same length")
        arr = np.array(rows)
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"expected a non-empty 2-D matrix, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"expected real numbers, got dtype {arr.dtype}")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        raise ValueError("the matrix has non-finite entries")
    return Dense(arr)


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
    objective: str = "sum"  # passed to Selector.select(W, privacy, objective)
    timeout: float | None = None  # seconds; overrides the config's
    memory: int | None = None  # bytes; overrides the config's


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
    timeout: float | None = None  # seconds per job (None: no limit)
    memory: int | None = None  # bytes per job (None: no limit)
    quick: dict[str, Any] | None = None  # the validated ``quick:`` block, if any
    search_path: tuple[str, ...] = ()  # where ``module:Class`` selectors were found
    figures: tuple = ()  # plots.FigureSpec per entry of ``figures:`` (see runner/plots.py)

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
        [
            n
            for n in public
            if not n.startswith("_")
            and n not in _NOT_BUILDERS
            and inspect.isfunction(getattr(workloads, n, None))
            and inspect.signature(getattr(workloads, n)).return_annotation not in (int, "int")
        ]
        + [MATRIX_KIND]
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
    if kind == MATRIX_KIND:
        return _parse_matrix_workload(ctx, where, m)
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


def _parse_matrix_workload(ctx, where, m) -> WorkloadSpec:
    _check_keys(ctx, where, m, {"kind", "file", "rows"})
    if ("file" in m) == ("rows" in m):
        raise ctx.error(where, "matrix: give exactly one of 'file' or 'rows'")
    if "file" in m:
        name = _expect_str(ctx, _key(where, "file"), m["file"])
        path = Path(name)
        if not path.is_absolute():
            path = Path(ctx.file).resolve().parent / path
        if not path.is_file():
            raise ctx.error(_key(where, "file"), f"no such file: {str(path)!r}")
        spec = WorkloadSpec(MATRIX_KIND, {"file": str(path)})
        field_name = "file"
    else:
        spec = WorkloadSpec(MATRIX_KIND, {"rows": m["rows"]})
        field_name = "rows"
    try:
        spec.build()
    except (ValueError, TypeError, OSError) as exc:
        raise ctx.error(_key(where, field_name), f"matrix: {' '.join(str(exc).split())}") from None
    return spec


def _parse_limits(ctx, where, m) -> tuple[float | None, int | None]:
    """``timeout`` (seconds > 0) and ``memory`` (``4GB``, ``512MB``, bytes) of a mapping."""
    from .executors import parse_memory

    timeout = memory = None
    if m.get("timeout") is not None:
        timeout = _expect_number(ctx, _key(where, "timeout"), m["timeout"])
        if not (timeout > 0 and math.isfinite(timeout)):
            raise ctx.error(
                _key(where, "timeout"), f"must be a number of seconds > 0, got {timeout!r}"
            )
    if m.get("memory") is not None:
        try:
            memory = parse_memory(m["memory"])
        except ValueError as exc:
            raise ctx.error(_key(where, "memory"), str(exc)) from None
    return timeout, memory


def _selector_class(ctx, where, name, search_path):
    """The Selector class of a registry name or ``package.module:ClassName``."""
    from .jobs import resolve_selector

    if not isinstance(name, str) or not name.strip():
        raise ctx.error(
            where, f"expected a selector name or 'package.module:ClassName', got {name!r}"
        )
    if ":" not in name:
        valid = list(selectors.available())
        if name not in valid:
            raise ctx.error(where, f"unknown selector {name!r} (valid: {', '.join(valid)})")
    try:
        return resolve_selector(name, search_path)
    except (ImportError, TypeError, KeyError) as exc:
        text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        raise ctx.error(where, text) from None
    except Exception as exc:  # noqa: BLE001 - an import that fails for any other reason
        raise ctx.error(where, f"importing {name!r} failed: {type(exc).__name__}: {exc}") from None


def _parse_column(ctx, where, value, search_path=()) -> Column:
    m = _expect_mapping(ctx, where, value)
    _check_keys(
        ctx,
        where,
        m,
        {"name", "selector", "params", "svd_bound", "notes", "objective", "timeout", "memory"},
        ("name",),
    )
    name = _expect_str(ctx, _key(where, "name"), m["name"])
    svd = m.get("svd_bound", False)
    if not isinstance(svd, bool):
        raise ctx.error(_key(where, "svd_bound"), f"expected true or false, got {svd!r}")
    notes = _expect_str(ctx, _key(where, "notes"), m.get("notes", ""), nonempty=False)
    timeout, memory = _parse_limits(ctx, where, m)
    if svd:
        for k in ("selector", "params", "objective"):
            if k in m:
                raise ctx.error(_key(where, k), "not allowed on an svd_bound column")
        return Column(name=name, svd_bound=True, notes=notes, timeout=timeout, memory=memory)
    if "selector" not in m:
        raise ctx.error(_key(where, "selector"), "missing required field (or svd_bound: true)")
    sel_name = m["selector"]
    cls = _selector_class(ctx, _key(where, "selector"), sel_name, search_path)
    params = m.get("params", {})
    if params is None:
        params = {}
    params = dict(_expect_mapping(ctx, _key(where, "params"), params))
    try:  # constructing a selector is cheap and checks its parameters
        cls(**params)
    except (TypeError, ValueError) as exc:
        raise ctx.error(_key(where, "params"), f"{sel_name}: {exc}") from None
    objective = m.get("objective", "sum")
    valid_objectives = tuple(cls.objectives())
    if not isinstance(objective, str) or objective not in valid_objectives:
        raise ctx.error(
            _key(where, "objective"),
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


def _parse_row(ctx, where, value, columns: dict[str, Column], build: bool = True) -> Row:
    m = _expect_mapping(ctx, where, value)
    _check_keys(ctx, where, m, {"name", "workload", "paper", "notes"}, ("name", "workload"))
    name = _expect_str(ctx, _key(where, "name"), m["name"])
    wl = _parse_workload(ctx, _key(where, "workload"), m["workload"])
    try:  # builders are implicit and cheap; a bad argument value is a config error
        if build:
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


def _parse(ctx: _Ctx, path: Path, data, build_workloads: bool = True) -> Config:
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

    timeout, memory = _parse_limits(ctx, "", data)
    search_path = _search_path(path)
    columns: dict[str, Column] = {}
    for i, c in enumerate(_parse_list(ctx, "columns", data["columns"])):
        col = _parse_column(ctx, f"columns[{i}]", c, search_path)
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
    for i, col in enumerate(columns.values()):
        if col.svd_bound and metric.kind not in ("rmse", "total_error", "ratio"):
            raise ctx.error(
                f"columns[{i}].svd_bound",
                f"the SVD bound is available for metric rmse, total_error or ratio_to, "
                f"not {metric.kind}",
            )

    rows: list[Row] = []
    seen: set[str] = set()
    for i, r in enumerate(_parse_list(ctx, "rows", data["rows"])):
        row = _parse_row(ctx, f"rows[{i}]", r, columns, build_workloads)
        if row.name in seen:
            raise ctx.error(f"rows[{i}].name", f"duplicate row name {row.name!r}")
        seen.add(row.name)
        rows.append(row)

    if tolerance is None and any(r.paper for r in rows):
        raise ctx.error("tolerance", "missing required field (rows give paper values)")
    quick = None
    if data.get("quick") is not None:
        quick = _parse_quick(ctx, data["quick"], columns, rows, metric)
    from .plots import parse_figures

    figures = parse_figures(
        data.get("figures"),
        file=ctx.file,
        metric=metric,
        columns=list(columns.values()),
        rows=rows,
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
        columns=list(columns.values()),
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


def _search_path(path) -> tuple[str, ...]:
    from .jobs import search_path_for

    return search_path_for(path)


_QUICK_KEYS = ("rows", "columns", "params", "timeout")


def _parse_quick(ctx, value, columns: dict[str, Column], rows: list[Row], metric) -> dict:
    m = _expect_mapping(ctx, "quick", value)
    _check_keys(ctx, "quick", m, set(_QUICK_KEYS))
    out: dict[str, Any] = {}
    row_names = [r.name for r in rows]
    for key, valid in (("rows", row_names), ("columns", list(columns))):
        if key not in m:
            continue
        names = _parse_list(ctx, f"quick.{key}", m[key])
        for i, n in enumerate(names):
            if n not in valid:
                raise ctx.error(
                    f"quick.{key}[{i}]",
                    f"no {key[:-1]} named {n!r} ({key}: {', '.join(valid)})",
                )
        out[key] = list(names)
    if metric.kind == "ratio" and "columns" in out and metric.ratio_to not in out["columns"]:
        raise ctx.error("quick.columns", f"must keep the ratio_to column {metric.ratio_to!r}")
    params = _expect_mapping(ctx, "quick.params", m.get("params") or {})
    out["params"] = {}
    for col, over in params.items():
        where = _key("quick.params", col)
        if col not in columns:
            raise ctx.error(where, f"no column named {col!r} (columns: {', '.join(columns)})")
        c = columns[col]
        if c.svd_bound:
            raise ctx.error(where, "an svd_bound column has no parameters")
        over = dict(_expect_mapping(ctx, where, over or {}))
        from .jobs import resolve_selector

        try:
            resolve_selector(c.selector, ())(**{**c.params, **over})
        except (TypeError, ValueError) as exc:
            raise ctx.error(where, f"{c.selector}: {exc}") from None
        out["params"][col] = over
    if m.get("timeout") is not None:
        out["timeout"], _ = _parse_limits(ctx, "quick", {"timeout": m["timeout"]})
    return out


def quick_config(config: Config) -> Config:
    """The smoke-run variant of ``config`` used by ``mmtoolkit run --quick``.

    Rule: keep the rows listed in the config's ``quick.rows`` (default: the first row) and
    the columns in ``quick.columns`` (default: all); apply ``quick.params`` overrides per
    column; every selector with a ``restarts`` parameter that the overrides leave unset
    runs with ``restarts: 1``; ``quick.timeout`` (if given) replaces the per-job timeout.
    Results go to table ``<table>.quick`` so a smoke run never overwrites the real table.
    """
    import copy

    from .jobs import resolve_selector

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
            params = {**c.params, **q.get("params", {}).get(c.name, {})}
            cls = resolve_selector(c.selector, config.search_path)
            sig = inspect.signature(cls.__init__).parameters
            if "restarts" in sig and "restarts" not in q.get("params", {}).get(c.name, {}):
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


def load_config(path: str | Path, *, build_workloads: bool = True) -> Config:
    """Read and validate a YAML experiment config (see the module docstring for the format).

    Raises :class:`ConfigError` (a ``ValueError``) naming the file and the field path.
    ``build_workloads=False`` skips building each row's workload (the slow part of the
    validation, e.g. for ``mmtoolkit report``, which only needs names and paper values).
    """
    ctx = _Ctx(path)
    p = Path(path)
    if p.name.endswith((".plot.yaml", ".plot.yml")):
        raise ctx.error("", "a figure sheet, not an experiment config (render it: mmtoolkit plot)")
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
    return _parse(ctx, p, data, build_workloads)
