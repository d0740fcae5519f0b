"""The plain data a config is made of and a job carries: workload and domain specs, the
metric, and selector references (a registry name or ``package.module:ClassName``).

Workload specs (the ``workload:`` of a config row, parsed by :func:`parse_workload`):
``kind`` is a public builder of :mod:`mmtoolkit.workloads` (``mmtoolkit list workloads``)
and every other key one of its keyword arguments, checked against its signature:

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
"""

from __future__ import annotations

import importlib
import inspect
import io
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import datasets, workloads
from ..checks import subfield, type_name
from ..domain import Domain
from ..linalg import Dense
from ..selectors import Selector
from ..selectors.base import get_class
from .schema import Fields

__all__ = [
    "MATRIX_KIND",
    "METRICS",
    "DomainSpec",
    "Metric",
    "WorkloadSpec",
    "accepts_seed",
    "parse_workload",
    "resolve_selector",
    "search_path_for",
    "workload_kinds",
]

#: Plain metric names (the fourth kind is the mapping ``{ratio_to: column}``).
METRICS = ("rmse", "total_error", "max_variance")

#: The runner's own workload kind: an explicit matrix (see the module docstring).
MATRIX_KIND = "matrix"

#: Public functions of mmtoolkit.workloads that are not workload builders (functions
#: annotated to return ``int`` are excluded as well).
_NOT_BUILDERS = frozenset({"num_queries", "domain_size"})

#: Builder arguments that hold one nested workload / a list of nested workloads.
_ONE_WORKLOAD_ARGS = frozenset({"W", "workload"})
_MANY_WORKLOAD_ARGS = frozenset({"factors", "workloads"})


@dataclass
class Metric:
    """``kind`` is one of :data:`METRICS` or ``"ratio"`` (then ``ratio_to`` names a column)."""

    kind: str
    ratio_to: str | None = None

    def describe(self) -> str:
        """The metric in words (the Markdown table's header)."""
        if self.kind == "ratio":
            return f"error ratio sqrt(Err(column) / Err({self.ratio_to}))"
        return {
            "rmse": "RMSE = sqrt(expected total squared error / number of queries)",
            "total_error": "expected total squared error",
            "max_variance": "maximum per-query variance",
        }[self.kind]


# --------------------------------------------------------------------------- workloads
@dataclass
class DomainSpec:
    """A domain: a dataset preset (with parameters) or explicit sizes/names."""

    preset: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    sizes: list[int] | None = None
    names: list[str] | None = None
    numeric: Any = None

    def build(self) -> Domain:
        """The :class:`~mmtoolkit.domain.Domain`."""
        if self.preset is not None:
            return datasets.domain(self.preset, **self.params)
        if self.names is None and self.numeric is None:
            return Domain.from_sizes(list(self.sizes))
        names = self.names if self.names is not None else [f"a{i}" for i in range(len(self.sizes))]
        return Domain(list(names), list(self.sizes), numeric=self.numeric)

    def describe(self) -> str:
        """Short text for error messages: ``synth(n=3)`` or ``sizes=[2, 3]``."""
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


def _matrix_workload(file=None, rows=None):
    """The explicit-matrix workload (a Dense Matrix) of ``{kind: matrix, ...}``."""
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


def workload_kinds() -> list[str]:
    """The names usable as ``workload.kind``: the public builders of mmtoolkit.workloads."""
    builders = [
        n
        for n in workloads.__all__
        if n not in _NOT_BUILDERS
        and inspect.isfunction(getattr(workloads, n))
        and inspect.signature(getattr(workloads, n)).return_annotation not in (int, "int")
    ]
    return sorted([*builders, MATRIX_KIND])


# --------------------------------------------------------------------------- parsing
def parse_workload(f: Fields, where: str, value) -> WorkloadSpec:
    """The WorkloadSpec of a config's ``workload:`` mapping (see the module docstring);
    its arguments are checked against the builder's signature, its domains are built."""
    m = f.mapping(value, where)
    if "kind" not in m:
        raise f.error(subfield(where, "kind"), "missing required field")
    kinds = workload_kinds()
    kind = m["kind"]
    if not isinstance(kind, str) or kind not in kinds:
        raise f.error(
            subfield(where, "kind"), f"unknown workload kind {kind!r} (valid: {', '.join(kinds)})"
        )
    if kind == MATRIX_KIND:
        return _parse_matrix_workload(f, where, m)
    sig = inspect.signature(getattr(workloads, kind))
    raw = {k: v for k, v in m.items() if k != "kind"}
    if "workload" in raw and "W" in sig.parameters and "workload" not in sig.parameters:
        if "W" in raw:
            raise f.error(where, "give 'workload' or 'W', not both")
        raw["W"] = raw.pop("workload")
    try:
        sig.bind(**raw)
    except TypeError as exc:
        raise f.error(where, f"{kind}(): {exc}") from None

    args: dict[str, Any] = {}
    for name, v in raw.items():
        sub = subfield(where, "workload" if name == "W" and "workload" in m else name)
        if name == "domain":
            args[name] = _parse_domain(f, sub, v)
        elif name in _ONE_WORKLOAD_ARGS or _is_spec(v):
            args[name] = parse_workload(f, sub, v)
        elif name in _MANY_WORKLOAD_ARGS or (
            isinstance(v, list) and v and all(_is_spec(x) for x in v)
        ):
            if not isinstance(v, list) or not v:
                raise f.error(sub, "expected a non-empty list of workload specs")
            args[name] = [parse_workload(f, f"{sub}[{i}]", x) for i, x in enumerate(v)]
        else:
            args[name] = v
    return WorkloadSpec(kind, args)


def _is_spec(v) -> bool:
    return isinstance(v, Mapping) and "kind" in v


def _parse_domain(f: Fields, where: str, value) -> DomainSpec:
    if isinstance(value, str):
        spec = DomainSpec(preset=_check_preset(f, where, value))
    elif isinstance(value, Mapping):
        m = f.mapping(value, where)
        if "preset" in m and "sizes" in m:
            raise f.error(where, "give either 'preset' or 'sizes', not both")
        if "preset" in m:
            at = subfield(where, "preset")
            name = _check_preset(f, at, f.text(m["preset"], at))
            spec = DomainSpec(preset=name, params={k: v for k, v in m.items() if k != "preset"})
        elif "sizes" in m:
            f.keys(m, where, {"sizes", "names", "numeric"})
            sizes, names = m["sizes"], m.get("names")
            if not isinstance(sizes, list) or not sizes:
                raise f.error(subfield(where, "sizes"), "expected a non-empty list of integers")
            for i, s in enumerate(sizes):
                f.integer(s, f"{subfield(where, 'sizes')}[{i}]", minimum=1)
            if names is not None:
                if not isinstance(names, list) or len(names) != len(sizes):
                    raise f.error(
                        subfield(where, "names"),
                        f"expected a list of {len(sizes)} attribute names (one per size)",
                    )
                for i, n in enumerate(names):
                    f.text(n, f"{subfield(where, 'names')}[{i}]")
            spec = DomainSpec(sizes=list(sizes), names=names, numeric=m.get("numeric"))
        else:
            raise f.error(where, "expected a preset name, {preset: ...} or {sizes: [...]}")
    else:
        raise f.error(
            where, f"expected a preset name or a mapping, got {type_name(value)} {value!r}"
        )
    try:
        spec.build()
    except (ValueError, TypeError, KeyError) as exc:
        raise f.error(where, f"invalid domain {spec.describe()}: {exc}") from None
    return spec


def _check_preset(f: Fields, where: str, name: str) -> str:
    valid = list(datasets.available())
    if name not in valid:
        raise f.error(where, f"unknown dataset {name!r} (valid: {', '.join(valid)})")
    return name


def _parse_matrix_workload(f: Fields, where: str, m) -> WorkloadSpec:
    f.keys(m, where, {"kind", "file", "rows"})
    if ("file" in m) == ("rows" in m):
        raise f.error(where, "matrix: give exactly one of 'file' or 'rows'")
    if "file" in m:
        path = Path(f.text(m["file"], subfield(where, "file")))
        if not path.is_absolute():
            path = Path(f.file).resolve().parent / path
        if not path.is_file():
            raise f.error(subfield(where, "file"), f"no such file: {str(path)!r}")
        spec, field_name = WorkloadSpec(MATRIX_KIND, {"file": str(path)}), "file"
    else:
        spec, field_name = WorkloadSpec(MATRIX_KIND, {"rows": m["rows"]}), "rows"
    try:
        spec.build()
    except (ValueError, TypeError, OSError) as exc:
        msg = f"matrix: {' '.join(str(exc).split())}"
        raise f.error(subfield(where, field_name), msg) from None
    return spec


# --------------------------------------------------------------------------- selectors
def resolve_selector(name: str, search_path=()) -> type:
    """The Selector class for a registry name or a ``"package.module:ClassName"`` path
    (the module is looked for on ``search_path`` first, then ``sys.path``).

    Raises ``ImportError`` / ``KeyError`` / ``TypeError`` with a readable message.
    """
    if ":" not in name:
        return get_class(name)
    module_name, _, attr = name.partition(":")
    if not module_name or not attr:
        raise ImportError(f"{name!r} is not of the form 'package.module:ClassName'")
    for p in reversed(tuple(search_path)):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"cannot import module {module_name!r}: {exc}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ImportError(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not (inspect.isclass(obj) and issubclass(obj, Selector)):
        raise TypeError(f"{name!r} is not a mmtoolkit.selectors.Selector subclass")
    if inspect.isabstract(obj):
        raise TypeError(f"{name!r} is abstract (implement _select)")
    return obj


def accepts_seed(cls: type) -> bool:
    """Whether the selector class's ``__init__`` takes a ``seed`` parameter."""
    try:
        return "seed" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def search_path_for(config_path) -> tuple[str, ...]:
    """Directories searched for ``module:Class`` selectors: the config's dir and the cwd."""
    out = []
    if config_path is not None:
        out.append(str(Path(config_path).resolve().parent))
    out.append(str(Path.cwd()))
    return tuple(dict.fromkeys(out))
