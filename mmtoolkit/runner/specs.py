"""The plain data a config is made of and a job carries: workload and domain specs (the
package's one grammar, :mod:`mmtoolkit.workload_specs`, its errors naming the config file and
the field), the metric, and selector references (a registry name or
``package.module:ClassName``).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import workload_specs
from ..selectors import Selector
from ..selectors.base import accepts_seed, get_class
from ..workload_specs import WorkloadSpec
from .schema import Fields

__all__ = [
    "METRICS",
    "Metric",
    "accepts_seed",
    "parse_workload",
    "resolve_selector",
    "search_path_for",
]

#: Plain metric names (the fourth kind is the mapping ``{ratio_to: column}``).
METRICS = ("rmse", "total_error", "max_variance")


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
def parse_workload(f: Fields, where: str, value) -> WorkloadSpec:
    """The WorkloadSpec of a config's ``workload:`` (a mapping or a string spec of
    :mod:`mmtoolkit.workload_specs`) at field ``where``; arguments are checked against the
    builder's signature, domains are built, a ``matrix`` file is relative to the config.
    Errors are ConfigErrors naming the file and the field."""
    try:
        return workload_specs.parse_workload(value, where, base_dir=Path(f.file).resolve().parent)
    except workload_specs.SpecError as exc:
        raise f.error(exc.where, exc.problem) from None


# --------------------------------------------------------------------------- selectors
def resolve_selector(name: str, search_path=()) -> type[Selector]:
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


def search_path_for(config_path) -> tuple[str, ...]:
    """Directories searched for ``module:Class`` selectors: the config's dir and the cwd."""
    out = []
    if config_path is not None:
        out.append(str(Path(config_path).resolve().parent))
    out.append(str(Path.cwd()))
    return tuple(dict.fromkeys(out))
