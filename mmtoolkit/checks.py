"""Argument checks shared by the package.

Each ``check_*`` returns the (converted) value or raises :class:`CheckTypeError` (wrong
type) or ``ValueError`` (bad value) whose message starts with the field name (an empty name
gives the bare message), e.g. ``"rows[2].k: expected an integer, got str '3'"``:
``n = check_int(n, "n", minimum=1)``, ``eps = check_positive(epsilon, "epsilon")``.
``CheckTypeError`` is also a ``ValueError`` because the library's constructors have always
raised ``ValueError`` for any bad argument. A ``bool`` (also numpy's) is never accepted as a
number (``True`` is an ``int`` in Python). This module imports nothing from the package, so
every layer (``linalg`` included) may use it.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterable, Mapping
from numbers import Real

__all__ = [
    "CheckTypeError",
    "check_bool",
    "check_choice",
    "check_float",
    "check_int",
    "check_keys",
    "check_list",
    "check_mapping",
    "check_positive",
    "check_probability",
    "check_str",
    "subfield",
    "type_name",
]


def type_name(value) -> str:
    """The name of ``value``'s type as error messages show it (``null`` for None)."""
    return "null" if value is None else type(value).__name__


def subfield(name: str, key) -> str:
    """The name of field ``key`` inside ``name``: ``a.b``, or ``a['x y']`` for other keys."""
    part = f".{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", str(key)) else f"[{key!r}]"
    return (name + part) if name else part.lstrip(".")


class CheckTypeError(TypeError, ValueError):
    """An argument of the wrong type: a ``TypeError`` that is also a ``ValueError``."""


def _msg(name: str, text: str) -> str:
    return f"{name}: {text}" if name else text


def check_bool(value, name: str) -> bool:
    """``value`` if it is ``True`` or ``False``."""
    if not isinstance(value, bool):
        raise CheckTypeError(_msg(name, f"expected true or false, got {value!r}"))
    return value


def check_int(value, name: str, *, minimum: int | None = None) -> int:
    """``value`` as an ``int`` (any integer type, numpy's included, but bool), at least
    ``minimum``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = operator.index(value)  # int, numpy integers, 0-d integer arrays
    except TypeError:
        raise CheckTypeError(
            _msg(name, f"expected an integer, got {type_name(value)} {value!r}")
        ) from None
    if minimum is not None and v < minimum:
        raise ValueError(_msg(name, f"must be >= {minimum}, got {v}"))
    return int(v)


def check_float(value, name: str, *, minimum: float | None = None, finite: bool = False) -> float:
    """``value`` as a ``float`` (any real number but bool); with ``minimum``, a finite
    number at least ``minimum`` (``minimum=0``: non-negative); with ``finite``, finite."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise CheckTypeError(_msg(name, f"expected a number, got {type_name(value)} {value!r}"))
    try:
        x = float(value)
    except OverflowError:  # an int beyond a double's range (e.g. 10**400 read from JSON)
        x = math.inf if value > 0 else -math.inf
    if minimum is not None and not (x >= minimum and math.isfinite(x)):
        raise ValueError(_msg(name, f"must be a finite number >= {minimum:g}, got {x!r}"))
    if finite and not math.isfinite(x):
        raise ValueError(_msg(name, f"must be a finite number, got {x!r}"))
    return x


def check_positive(value, name: str, *, what: str = "number") -> float:
    """``value`` as a finite ``float`` > 0 (``what`` names the unit in the message)."""
    x = check_float(value, name)
    if not (x > 0 and math.isfinite(x)):
        finite = "finite " if math.isinf(x) else ""
        raise ValueError(_msg(name, f"must be a {finite}{what} > 0, got {x!r}"))
    return x


def check_probability(value, name: str) -> float:
    """``value`` as a ``float`` strictly between 0 and 1 (e.g. δ)."""
    x = check_float(value, name)
    if not 0.0 < x < 1.0:  # also rejects NaN
        raise ValueError(_msg(name, f"must be a number strictly between 0 and 1, got {x!r}"))
    return x


def check_str(value, name: str, *, nonempty: bool = True) -> str:
    """``value`` if it is a string (not blank, unless ``nonempty=False``)."""
    if not isinstance(value, str):
        raise CheckTypeError(_msg(name, f"expected a string, got {type_name(value)} {value!r}"))
    if nonempty and not value.strip():
        raise ValueError(_msg(name, "must not be empty"))
    return value


def check_choice(value, name: str, choices: Iterable, *, what: str = ""):
    """``value`` if it is one of ``choices``: ``unknown <what> 'x' (valid: a, b)`` if not."""
    choices = list(choices)
    if isinstance(value, bool) or value not in choices:
        valid = ", ".join(map(str, choices))
        raise ValueError(
            _msg(name, f"unknown {what + ' ' if what else ''}{value!r} (valid: {valid})")
        )
    return value


def check_mapping(value, name: str) -> Mapping:
    """``value`` if it is a mapping with string keys."""
    if not isinstance(value, Mapping):
        raise CheckTypeError(_msg(name, f"expected a mapping, got {type_name(value)}"))
    for k in value:
        if not isinstance(k, str):
            raise CheckTypeError(_msg(name, f"keys must be strings, got {k!r}"))
    return value


def check_list(value, name: str, *, nonempty: bool = True) -> list:
    """``value`` if it is a list (not empty, unless ``nonempty=False``)."""
    if not isinstance(value, list):
        raise CheckTypeError(_msg(name, f"expected a list, got {type_name(value)}"))
    if nonempty and not value:
        raise ValueError(_msg(name, "must not be empty"))
    return value


def check_keys(mapping: Mapping, name: str, allowed: Iterable, required: Iterable = ()) -> None:
    """Every key of ``mapping`` is in ``allowed`` and every ``required`` key is present
    (the message names the field ``name.key``)."""
    allowed = set(allowed)
    for k in mapping:
        if k not in allowed:
            valid = ", ".join(sorted(allowed))
            raise ValueError(f"{subfield(name, k)}: unknown field (valid: {valid})")
    for k in required:
        if k not in mapping:
            raise ValueError(f"{subfield(name, k)}: missing required field")
