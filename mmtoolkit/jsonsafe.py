"""JSON-safe plain data of parameters and metadata, stable across processes.

Results files, job records and release summaries store selector parameters and strategy
metadata as JSON; :func:`jsonable` converts numpy scalars/arrays, tuples and sets, and
writes any other object as its ``repr`` without memory addresses (:func:`stable_text`), so
the same inputs give the same bytes in every process.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["jsonable", "stable_text"]

#: A default ``repr`` with a memory address: ``<pkg.mod.Class object at 0x7f...>``.
_OBJECT_AT = re.compile(r"<(?:[\w.]*\.)?(\w+) object at 0x[0-9a-fA-F]+>")
#: Any other address in a repr (``<function f at 0x...>``, ``<... at 0x...>``).
_AT_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable_text(text: str) -> str:
    """``text`` without memory addresses: ``<pkg.mod.Plan object at 0x7f..>`` reads
    ``<Plan>``, and `` at 0x...`` is dropped from any other repr, so the same object gives
    the same text in every process (results files must not change between runs)."""
    return _AT_ADDRESS.sub("", _OBJECT_AT.sub(r"<\1>", text))


def jsonable(obj, _depth: int = 0):
    """A JSON-safe copy of ``obj`` (numpy scalars/arrays, tuples, sets; any other object
    as its repr without memory addresses, :func:`stable_text`)."""
    if _depth > 20:
        return stable_text(repr(obj))
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        if obj.size <= 10_000:
            return jsonable(obj.tolist(), _depth + 1)
        return f"array(shape={obj.shape}, dtype={obj.dtype})"
    if isinstance(obj, dict):
        return {str(k): jsonable(v, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, _depth + 1) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((jsonable(v, _depth + 1) for v in obj), key=repr)
    return stable_text(repr(obj))
