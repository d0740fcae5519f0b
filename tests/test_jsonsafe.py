"""Strict JSON in and out (mmtoolkit.jsonsafe.loads / dumps): duplicate keys, NaN, Infinity
and out-of-range numbers are refused on reading, non-finite numbers on writing, each with a
message naming the file and the field, as the caller's error type."""

from __future__ import annotations

import json
import math

import pytest

from mmtoolkit import jsonsafe


class OwnError(ValueError):
    """Stands for a caller's documented error type (LedgerError, RecordsError, ...)."""


@pytest.mark.parametrize(
    "text, field, problem",
    [
        ('{"age": 3, "sex": 2, "age": 5}', "age", "the key 'age' is given twice"),
        ('{"e": [{"charge": {"rho": NaN}}]}', r"e\[0\]\.charge\.rho", "NaN is not JSON"),
        ('{"total": {"rho": Infinity}}', r"total\.rho", "Infinity is not JSON"),
        ('{"x": [0, -Infinity]}', r"x\[1\]", "-Infinity is not JSON"),
        ('{"x": 1e400}', "x", "the number 1e400 is beyond a double's range"),
        ('{"x": -1e400}', "x", "the number -1e400 is beyond a double's range"),
        ('{"x": 1' + "0" * 5000 + "}", "x", "an integer of 5001 digits is too long"),
        ('{"a b": {"k": 1, "k": 1}}', r"\['a b'\]\.k", "the key 'k' is given twice"),
        ("NaN", "the value", "NaN is not JSON"),
    ],
)
def test_loads_refuses_what_strict_json_does_not_have(text, field, problem):
    with pytest.raises(OwnError, match=rf"^f\.json: not strict JSON: {field}: {problem}"):
        jsonsafe.loads(text, "f.json", OwnError)


def test_loads_reads_strict_json_and_names_syntax_errors():
    text = '{"a": [1, 2.5, -1e-300, 1e308], "b": {"c": null, "d": "NaN"}}'
    assert jsonsafe.loads(text, "f.json") == json.loads(text)
    with pytest.raises(jsonsafe.JSONError, match=r"f\.json: not valid JSON \(line 2, column 1"):
        jsonsafe.loads('{"a": 1,\n}', "f.json")
    with pytest.raises(OwnError, match=r"f\.json: JSON nested too deeply"):
        jsonsafe.loads("[" * 100_000 + "]" * 100_000, "f.json", OwnError)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_dumps_refuses_non_finite_numbers_naming_the_field(bad):
    data = {"spent": {"rho": 0.5, "epsilon": bad}, "ok": [1, 2]}
    with pytest.raises(OwnError, match=r"cannot write s\.json: spent\.epsilon is .*nothing"):
        jsonsafe.dumps(data, "s.json", OwnError, indent=2)
    text = jsonsafe.dumps({"spent": {"rho": 0.5}}, "s.json", OwnError, indent=2)
    assert json.loads(text) == {"spent": {"rho": 0.5}}
