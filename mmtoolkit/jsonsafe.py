"""JSON in and out: strict reading and writing (RFC 8259), and JSON-safe plain data.

:func:`loads` reads every JSON file the package reads (domain files, ledgers, release
summaries) and refuses what Python's ``json`` accepts (a key given twice, whose last value
it keeps silently; ``NaN``, ``Infinity``, a number read as infinity); :func:`dumps` writes
every JSON document the package writes (ledgers, release summaries, drafted domain files)
and refuses a non-finite number before anything is written, so no file can hold ``NaN`` or
``Infinity``. Both raise the caller's error type (``error=``, e.g. ``LedgerError`` or
``RecordsError``; default :class:`JSONError`), a ``ValueError``. :func:`jsonable` makes the
selector parameters and strategy metadata stored in results files, job records and release
summaries JSON-safe, the same bytes in every process.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from .checks import subfield

__all__ = ["JSONError", "dumps", "jsonable", "loads", "stable_text"]


class JSONError(ValueError):
    """JSON text that is not strict JSON, or data that strict JSON cannot hold."""


class _Refusal:
    """What the decoder's hooks put in place of a value strict JSON refuses (the problem)."""

    def __init__(self, problem: str):
        self.problem = problem


def _path_of(value, found, name: str = ""):
    """``(field name, leaf)`` of the first leaf of ``value`` for which ``found(leaf)`` holds,
    in document order (``entries[0].charge.rho``; ``""`` for the top level), or None."""
    if isinstance(value, dict):
        items = ((subfield(name, k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{name}[{i}]", v) for i, v in enumerate(value))
    else:
        return (name, value) if found(value) else None
    for sub, v in items:
        hit = _path_of(v, found, sub)
        if hit is not None:
            return hit
    return None


def _pairs(pairs: list) -> dict:
    out = {}
    for key, value in pairs:  # a key given twice is refused (at its first place)
        out[key] = (
            _Refusal(f"the key {key!r} is given twice in one object") if key in out else value
        )
    return out


def _constant(name: str) -> _Refusal:
    return _Refusal(f"{name} is not JSON (strict JSON has no NaN or Infinity)")


def _float(text: str) -> float | _Refusal:
    x = float(text)
    return x if math.isfinite(x) else _Refusal(f"the number {text} is beyond a double's range")


def _int(text: str) -> int | _Refusal:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        return _Refusal(f"an integer of {len(text)} digits is too long")


def loads(text: str, source: str, error: type[ValueError] = JSONError):
    """The value of the strict JSON ``text`` read from ``source`` (a file name, for the
    message). Invalid JSON (with its line and column), a key given twice in one object, the
    constants ``NaN`` / ``Infinity`` / ``-Infinity`` and numbers beyond a double's range
    raise ``error`` naming ``source`` and the field (``entries[0].charge.rho``)."""
    try:
        data = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_constant=_constant,
            parse_float=_float,
            parse_int=_int,
        )
        hit = _path_of(data, lambda v: isinstance(v, _Refusal))
    except json.JSONDecodeError as exc:
        raise error(
            f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise error(f"{source}: JSON nested too deeply to read") from None
    if hit is not None:
        field, refusal = hit
        raise error(f"{source}: not strict JSON: {field or 'the value'}: {refusal.problem}")
    return data


def dumps(data, target: str, error: type[ValueError] = JSONError, **kwargs) -> str:
    """``data`` as strict JSON text (``json.dumps`` with ``allow_nan=False``; ``kwargs``
    such as ``indent`` pass through). A non-finite number raises ``error`` naming
    ``target`` (the file it was meant for) and the field that holds it."""
    try:
        return json.dumps(data, allow_nan=False, **kwargs)
    except ValueError:
        hit = _path_of(data, lambda v: isinstance(v, float) and not math.isfinite(v))
        if hit is None:  # not a number (e.g. a circular reference): a bug, not input
            raise
        raise error(
            f"cannot write {target}: {hit[0] or 'the value'} is {hit[1]!r}, not a finite "
            "number, which JSON cannot hold; nothing was written"
        ) from None


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
