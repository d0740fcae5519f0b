"""The workload-spec grammar shared by experiment configs and the command line.

A workload spec names a public builder of :mod:`mmtoolkit.workloads` (``mmtoolkit list
workloads``) and its keyword arguments, as a mapping ``{kind: KIND, key: value, ...}`` or a
string ``KIND:key=value,...`` (or a shorthand, :data:`SHORTHANDS`), both giving the same
:class:`WorkloadSpec`. :func:`parse_workload` checks a spec against the builder's signature
(on the caller's domain, if given), :func:`build_workload` builds it; errors are
:class:`SpecError` naming the field.

User guide: docs/guide/workloads.md.
"""

from __future__ import annotations

import inspect
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from . import datasets, workloads
from .checks import check_int, check_keys, check_mapping, check_str, subfield, type_name
from .domain import Domain
from .linalg import Dense, Matrix

__all__ = [
    "MATRIX_KIND",
    "SHORTHANDS",
    "DomainSpec",
    "SpecError",
    "WorkloadSpec",
    "build_spec",
    "build_workload",
    "builder",
    "builder_parameters",
    "parse_workload",
    "spec_files",
    "spec_mapping",
    "split_top_level",
    "workload_kinds",
]

#: The explicit-matrix workload kind (not a builder of mmtoolkit.workloads).
MATRIX_KIND = "matrix"

#: The positional shorthands of the string form (docs/guide/workloads.md).
SHORTHANDS = (
    "marginals:K",
    "marginals:K:lower",
    "range_marginals:K[:lower]",
    "prefix_marginals:K[:lower]",
    "marginal:A,B,...",
    "kron:KIND,KIND,...",
)

#: Public functions of mmtoolkit.workloads that are not workload builders (functions
#: annotated to return ``int`` are excluded as well).
_NOT_BUILDERS = frozenset({"num_queries", "domain_size"})

#: Builder arguments that hold one nested workload / a list of nested workloads.
_ONE_WORKLOAD_ARGS = frozenset({"W", "workload"})
_MANY_WORKLOAD_ARGS = frozenset({"factors", "workloads"})

#: Kinds with the ``KIND:K`` / ``KIND:K:lower`` shorthand.
_ORDER_SHORTHAND_KINDS = ("marginals", "range_marginals", "prefix_marginals")

_FORMS = "KIND, KIND:key=value,... or a mapping {kind: KIND, ...}"


class SpecError(ValueError):
    """A bad workload spec: ``where`` is the field path (``""``: none) and ``problem`` the
    message; ``str()`` is ``"where: problem"``."""

    def __init__(self, where: str, problem: str):
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}" if where else problem)


# --------------------------------------------------------------------------- specs
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
        sizes = self.sizes
        if sizes is None:  # neither a preset nor sizes
            raise TypeError("a DomainSpec needs a preset or sizes")
        if self.names is None:
            return Domain.from_sizes(list(sizes), self.numeric)
        return Domain(list(self.names), list(sizes), numeric=self.numeric)

    def describe(self) -> str:
        """Short text for error messages: ``synth(n=3)`` or ``sizes=[2, 3]``."""
        if self.preset is not None:
            extra = ", ".join(f"{k}={v}" for k, v in self.params.items())
            return f"{self.preset}({extra})" if extra else self.preset
        return f"sizes={self.sizes}"


@dataclass
class WorkloadSpec:
    """``getattr(mmtoolkit.workloads, kind)(**args)``; args may hold nested specs, domain
    specs, or a caller's :class:`~mmtoolkit.domain.Domain`."""

    kind: str
    args: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Matrix:
        """Build the workload Matrix (nested specs and domains first)."""
        if self.kind == MATRIX_KIND:
            return _matrix_workload(**self.args)
        return builder(self.kind)(**{k: _build_value(v) for k, v in self.args.items()})


def spec_files(spec: WorkloadSpec) -> list[str]:
    """The files a parsed spec reads: the ``file`` of each ``matrix`` kind in it, nested
    specs included (absolute paths, as :func:`parse_workload` resolved them)."""
    if spec.kind == MATRIX_KIND:
        return [spec.args["file"]] if "file" in spec.args else []
    out: list[str] = []
    for v in spec.args.values():
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, WorkloadSpec):
                out += spec_files(item)
    return out


def _build_value(value):
    if isinstance(value, (WorkloadSpec, DomainSpec)):
        return value.build()
    if isinstance(value, list) and value and all(isinstance(v, WorkloadSpec) for v in value):
        return [v.build() for v in value]
    return value


def _matrix_workload(file=None, rows=None) -> Dense:
    """The explicit-matrix workload (a Dense Matrix) of ``{kind: matrix, ...}``.
    Spec: ``matrix:rows=[[1,0],[1,1]]``; caller's domain: ``matrix:file=w.npy``."""
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


def workload_kinds() -> list[str]:
    """The valid workload kinds: the public builders of mmtoolkit.workloads and ``matrix``."""
    builders = [
        n
        for n in workloads.__all__
        if n not in _NOT_BUILDERS
        and inspect.isfunction(getattr(workloads, n))
        and inspect.signature(getattr(workloads, n)).return_annotation not in (int, "int")
    ]
    return sorted([*builders, MATRIX_KIND])


def builder(kind: str):
    """The function that builds a workload kind: its builder in mmtoolkit.workloads, or the
    explicit-matrix reader for ``matrix``. Its docstring ends with the kind's example specs,
    ``Spec: ``...``; caller's domain: ``...``.`` (tests/test_workload_specs.py builds them)."""
    return _matrix_workload if kind == MATRIX_KIND else getattr(workloads, kind)


def builder_parameters(kind: str) -> str:
    """The parameters of a kind's builder as error messages list them: ``domain, k,
    lower=False`` (``file, rows`` for ``matrix``)."""
    if kind == MATRIX_KIND:
        return "file, rows"
    params = inspect.signature(getattr(workloads, kind)).parameters.values()
    return ", ".join(
        p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
        for p in params
    )


def _valid_kinds() -> str:
    return f"valid kinds: {', '.join(workload_kinds())}"


# --------------------------------------------------------------------------- strings
def split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside brackets/braces/quotes."""
    items, depth, quote, start = [], 0, None, 0
    for i, c in enumerate(text):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items]


def _yaml_value(text: str):
    return yaml.safe_load(text) if text.strip() else None


def spec_mapping(text: str, where: str = "") -> dict:
    """The mapping form of a string spec (``KIND``, ``KIND:key=value,...``, a shorthand, or a
    YAML flow mapping ``{kind: ...}``); docs/guide/workloads.md. :class:`SpecError` when it
    does not parse (the message names the kind and lists the valid kinds)."""
    s = text.strip()
    if s.startswith("{"):
        try:
            m = yaml.safe_load(s)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            raise SpecError(where, f"cannot parse the mapping {text!r}: {problem}") from None
        if not isinstance(m, Mapping):
            raise SpecError(where, f"cannot parse the mapping {text!r}")
        return dict(m)
    kind, sep, rest = s.partition(":")
    kind = kind.strip()
    if not kind:
        raise SpecError(where, f"empty workload spec {text!r}; use {_FORMS} ({_valid_kinds()})")
    if kind not in workload_kinds():
        raise SpecError(
            where,
            f"unknown workload kind {kind!r}{'' if s == kind else f' in {text!r}'} "
            f"(valid: {', '.join(workload_kinds())})",
        )
    out: dict[str, Any] = {"kind": kind}
    if not sep:
        return out

    def bad(why: str) -> SpecError:
        hint = [f"{kind}:key=value,... with keys from ({builder_parameters(kind)})"]
        hint += [h for h in SHORTHANDS if h.split(":")[0] == kind]
        return SpecError(
            where,
            f"cannot parse workload spec {text!r} (kind {kind!r}): {why}; "
            f"use {' or '.join(hint)} ({_valid_kinds()})",
        )

    items = split_top_level(rest)
    if "=" not in items[0]:
        return _shorthand(kind, rest, bad)
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise bad(f"expected key=value, got {item!r}")
        if key in out:
            raise bad(f"{key!r} is given twice")
        try:
            out[key] = _yaml_value(value)
        except yaml.YAMLError:
            raise bad(f"cannot parse the value of {key!r}: {value!r}") from None
    return out


def _shorthand(kind: str, rest: str, bad) -> dict:
    if kind == "marginal":
        attrs = [a.strip() for a in rest.split(",")]
        if not all(attrs):
            raise bad("an empty attribute name")
        return {"kind": kind, "attrs": attrs}
    if kind in _ORDER_SHORTHAND_KINDS:
        parts = [p.strip() for p in rest.split(":")]
        if parts[0].isdigit() and (len(parts) == 1 or parts[1:] == ["lower"]):
            out = {"kind": kind, "k": int(parts[0])}
            if len(parts) == 2:
                out["lower"] = True
            return out
    if kind == "kron":
        factors = [a.strip() for a in rest.split(",")]
        if all(f.isidentifier() for f in factors):
            return {"kind": kind, "factors": factors}
    raise bad("expected key=value pairs or a shorthand")


# --------------------------------------------------------------------------- parsing
def _check(fn, value, where: str, *args, **kwargs):
    try:
        return fn(value, where, *args, **kwargs)
    except (TypeError, ValueError) as exc:
        raise SpecError("", str(exc)) from None


def parse_workload(
    value,
    where: str = "",
    *,
    domain: Domain | None = None,
    domain_source: str = "the caller",
    base_dir=None,
    _top: bool = True,
    _n: int | None = None,
) -> WorkloadSpec:
    """The :class:`WorkloadSpec` of a spec (a mapping or a string; docs/guide/workloads.md).

    Arguments are checked against the builder's signature and domains are built; the
    workload itself is not (see :func:`build_workload`). ``domain``: the caller's Domain
    given to every builder whose first parameter is ``domain`` (``domain_source`` says
    where it comes from in the error when a spec names a domain too); ``base_dir``: the
    directory a ``matrix`` ``file`` is relative to (default: the current directory).
    ``where`` is the field path errors name. Raises :class:`SpecError`.
    """
    if isinstance(value, str):
        m = spec_mapping(value, where)
    elif isinstance(value, Mapping):
        m = _check(check_mapping, value, where)
    else:
        raise SpecError(
            where,
            f"expected a workload spec (a mapping, or a string such as 'marginals:k=2'), "
            f"got {type_name(value)} {value!r}",
        )
    if "kind" not in m:
        raise SpecError(subfield(where, "kind"), "missing required field")
    kinds = workload_kinds()
    kind = m["kind"]
    if not isinstance(kind, str) or kind not in kinds:
        raise SpecError(
            subfield(where, "kind"), f"unknown workload kind {kind!r} (valid: {', '.join(kinds)})"
        )
    if kind == MATRIX_KIND:
        return _parse_matrix(where, m, base_dir)
    sig = inspect.signature(getattr(workloads, kind))
    names = list(sig.parameters)
    raw = {k: v for k, v in m.items() if k != "kind"}
    if "workload" in raw and "W" in sig.parameters and "workload" not in sig.parameters:
        if "W" in raw:
            raise SpecError(where, "give 'workload' or 'W', not both")
        raw["W"] = raw.pop("workload")
    if domain is not None and names and names[0] == "domain":
        if "domain" in raw:
            raise SpecError(
                subfield(where, "domain"),
                f"the domain is given by {domain_source}; remove 'domain' from the spec",
            )
        raw["domain"] = domain
    if _n is None and _top and domain is not None:
        _n = domain.size
    if _n is not None and "n" in sig.parameters and "n" not in raw:
        raw["n"] = _n
    open_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    unknown = [] if open_kw else [k for k in raw if k not in sig.parameters]
    try:
        if unknown:
            raise TypeError(f"unknown parameter {unknown[0]!r}")
        sig.bind(**raw)
    except TypeError as exc:
        msg = f"{kind}(): {exc} (parameters: {builder_parameters(kind)})"
        if any(n in sig.parameters for n in (*_ONE_WORKLOAD_ARGS, *_MANY_WORKLOAD_ARGS)):
            msg += "; nested workloads need the mapping form {kind: ..., ...}"
        raise SpecError(where, msg) from None

    nested = {"domain": domain, "domain_source": domain_source, "base_dir": base_dir}
    args: dict[str, Any] = {}
    for name, v in raw.items():
        sub = subfield(where, "workload" if name == "W" and "workload" in m else name)
        if name == "domain":
            args[name] = v if v is domain and domain is not None else _parse_domain(sub, v)
        elif name in _ONE_WORKLOAD_ARGS:  # permuted's W: on the same cells as the result
            args[name] = parse_workload(v, sub, _top=False, _n=_n, **nested)
        elif _is_spec(v):
            args[name] = parse_workload(v, sub, _top=False, **nested)
        elif name in _MANY_WORKLOAD_ARGS or (
            isinstance(v, list) and v and all(_is_spec(x) for x in v)
        ):
            if not isinstance(v, list) or not v:
                raise SpecError(sub, "expected a non-empty list of workload specs")
            ns = [_n] * len(v)  # union members are on the union's cells
            if kind == "kron":  # over the caller's domain, a factor's missing n is its size
                sizes = domain.sizes if domain is not None else ()
                ns = list(sizes) if len(sizes) == len(v) else [None] * len(v)
            args[name] = [
                parse_workload(x, f"{sub}[{i}]", _top=False, _n=n, **nested)
                for i, (x, n) in enumerate(zip(v, ns, strict=True))
            ]
        else:
            args[name] = v
    return WorkloadSpec(kind, args)


def build_workload(value, where: str = "", **kwargs) -> Matrix:
    """The workload Matrix of a spec: :func:`parse_workload` (same keyword arguments), then
    :meth:`WorkloadSpec.build`, a builder's error a :class:`SpecError` naming the kind."""
    return build_spec(parse_workload(value, where, **kwargs), where)


def build_spec(spec: WorkloadSpec, where: str = "") -> Matrix:
    """:meth:`WorkloadSpec.build`, a builder's error a :class:`SpecError` naming ``where``
    and the kind."""
    try:
        return spec.build()
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        raise SpecError(where, f"{spec.kind}(): {' '.join(str(msg).split())}") from None


def _is_spec(v) -> bool:
    return isinstance(v, Mapping) and "kind" in v


def _parse_domain(where: str, value) -> DomainSpec:
    if isinstance(value, str):
        spec = DomainSpec(preset=_check_preset(where, value))
    elif isinstance(value, Mapping):
        m = _check(check_mapping, value, where)
        if "preset" in m and "sizes" in m:
            raise SpecError(where, "give either 'preset' or 'sizes', not both")
        if "preset" in m:
            at = subfield(where, "preset")
            name = _check_preset(at, _check(check_str, m["preset"], at))
            spec = DomainSpec(preset=name, params={k: v for k, v in m.items() if k != "preset"})
        elif "sizes" in m:
            _check(check_keys, m, where, {"sizes", "names", "numeric"})
            sizes, names = m["sizes"], m.get("names")
            at = subfield(where, "sizes")
            if not isinstance(sizes, list) or not sizes:
                raise SpecError(at, "expected a non-empty list of integers")
            for i, s in enumerate(sizes):
                _check(check_int, s, f"{at}[{i}]", minimum=1)
            if names is not None:
                if not isinstance(names, list) or len(names) != len(sizes):
                    raise SpecError(
                        subfield(where, "names"),
                        f"expected a list of {len(sizes)} attribute names (one per size)",
                    )
                for i, n in enumerate(names):
                    _check(check_str, n, f"{subfield(where, 'names')}[{i}]")
            spec = DomainSpec(sizes=list(sizes), names=names, numeric=m.get("numeric"))
        else:
            raise SpecError(where, "expected a preset name, {preset: ...} or {sizes: [...]}")
    else:
        raise SpecError(
            where, f"expected a preset name or a mapping, got {type_name(value)} {value!r}"
        )
    try:
        spec.build()
    except (ValueError, TypeError, KeyError) as exc:
        raise SpecError(where, f"invalid domain {spec.describe()}: {exc}") from None
    return spec


def _check_preset(where: str, name: str) -> str:
    valid = list(datasets.available())
    if name not in valid:
        raise SpecError(where, f"unknown dataset {name!r} (valid: {', '.join(valid)})")
    return name


def _parse_matrix(where: str, m, base_dir) -> WorkloadSpec:
    _check(check_keys, m, where, {"kind", "file", "rows"})
    if ("file" in m) == ("rows" in m):
        raise SpecError(where, "matrix: give exactly one of 'file' or 'rows'")
    if "file" in m:
        path = Path(_check(check_str, m["file"], subfield(where, "file")))
        if not path.is_absolute():
            path = Path(base_dir if base_dir is not None else Path.cwd()) / path
        if not path.is_file():
            raise SpecError(subfield(where, "file"), f"no such file: {str(path)!r}")
        spec, field_name = WorkloadSpec(MATRIX_KIND, {"file": str(path)}), "file"
    else:
        spec, field_name = WorkloadSpec(MATRIX_KIND, {"rows": m["rows"]}), "rows"
    try:
        spec.build()
    except (ValueError, TypeError, OSError) as exc:
        msg = f"matrix: {' '.join(str(exc).split())}"
        raise SpecError(subfield(where, field_name), msg) from None
    return spec
