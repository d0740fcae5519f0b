"""Reading and checking the runner's YAML files (experiment configs and figure sheets).

:func:`read_yaml` parses a file with :class:`UniqueKeyLoader`; :class:`Fields` runs the
:mod:`mmtoolkit.checks` functions on its fields so that every problem is one
:class:`ConfigError` naming the file and the field path, e.g.::

    configs/x.yaml: rows[2].workload.kind: unknown workload kind 'marginalz' (valid: ...)
"""

from __future__ import annotations

import os
import re
from functools import partialmethod
from pathlib import Path

import yaml

from ..checks import (
    check_bool,
    check_float,
    check_int,
    check_keys,
    check_list,
    check_mapping,
    check_positive,
    check_str,
)

__all__ = ["ConfigError", "Fields", "UniqueKeyLoader", "parse_memory", "read_yaml"]


class ConfigError(ValueError):
    """A malformed experiment config; the message names the file and the field path."""


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one, and
    reads YAML 1.2 exponent floats (``1e-6``; a string for YAML 1.1) as numbers."""


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue  # let the default constructor report it
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


class Fields:
    """The checks of one file's fields; every failure is a :class:`ConfigError` naming the
    file and the field path. ``text``, ``integer``, ... are :meth:`check` with the
    :mod:`mmtoolkit.checks` function named beside them."""

    def __init__(self, path: str | os.PathLike[str]):
        self.file = str(path)

    def error(self, where: str, msg: str) -> ConfigError:
        """The ConfigError of field ``where`` (``""``: the whole file)."""
        return ConfigError(f"{self.file}: {where}: {msg}" if where else f"{self.file}: {msg}")

    def check(self, fn, value, where: str, *args, **kwargs):
        """``fn(value, where, *args, **kwargs)``, its TypeError / ValueError a ConfigError."""
        try:
            return fn(value, where, *args, **kwargs)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{self.file}: {exc}") from None

    text = partialmethod(check, check_str)
    integer = partialmethod(check, check_int)
    number = partialmethod(check, check_float)
    positive = partialmethod(check, check_positive)
    flag = partialmethod(check, check_bool)
    mapping = partialmethod(check, check_mapping)
    items = partialmethod(check, check_list)
    keys = partialmethod(check, check_keys)


def read_yaml(path: str | os.PathLike[str], what: str = "file"):
    """The parsed YAML of ``path`` (:class:`UniqueKeyLoader`); an unreadable file or a
    syntax error (with its line and column) is a ConfigError naming the file."""
    fields = Fields(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise fields.error("", f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise fields.error(where, f"YAML syntax error: {problem}") from None


_UNITS = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6, "G": 10**9}
_UNITS.update({"GB": 10**9, "T": 10**12, "TB": 10**12, "KIB": 2**10, "MIB": 2**20})
_UNITS.update({"GIB": 2**30, "TIB": 2**40})


def parse_memory(value) -> int:
    """Bytes from ``4GB`` / ``512MB`` / ``2GiB`` / ``1.5G`` / a plain integer of bytes."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a size like '4GB', got {value!r}")
    if not isinstance(value, str):
        n = float(value)
    else:
        text = value.strip().replace(" ", "").upper()
        i = len(text)
        while i > 0 and text[i - 1].isalpha():
            i -= 1
        if text[i:] not in _UNITS:
            raise ValueError(
                f"unknown size unit {value!r} (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
            )
        try:
            n = float(text[:i]) * _UNITS[text[i:]]
        except ValueError:
            raise ValueError(f"expected a size like '4GB', got {value!r}") from None
    if not (n > 0 and n < float("inf")):
        raise ValueError(f"a memory limit must be > 0, got {value!r}")
    return int(n)
