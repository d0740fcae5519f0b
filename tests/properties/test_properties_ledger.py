"""Ledger files (``mmtoolkit.Ledger``) under hostile input.

Each example writes a valid ledger (a declared total — ρ, ε or (ε, δ) — and a few charged
releases), damages it — a field set to a negative, zero, huge, NaN or infinite number, a
string, null, a list; a field removed or added; a number scaled; a key given twice; NaN /
Infinity constants — or writes an arbitrary JSON document, and opens it: ``Ledger(path)``,
then ``report``, ``usage``, ``remaining`` and one small charge.

The property: the ledger is refused with a ``ValueError`` (``LedgerError``) naming the file,
or it is consistent — strict JSON; a total of ρ, ε or (ε, δ) that is positive and finite
(δ < 1); every entry's charge exactly what its privacy and number of releases charge
(``charge_of``, to a relative 1e-9) — and then every number it reports is finite, and a
charge is accepted only when the total admits it. Never another exception; a refused
operation leaves the file as it was.
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st
from property_support import (
    NotStrictJSON,
    non_finite_words,
    outcome,
    profile,
    snapshot,
    strict_json,
)

from mmtoolkit import Ledger
from mmtoolkit.ledger import FORMAT, TOLERANCE, charge_of
from mmtoolkit.privacy import ZCDP, ApproxDP, PureDP, from_spec

#: The three kinds of declared total, and releases each one accepts.
TOTALS = {
    "rho": ({"rho": 1.0}, [ZCDP(0.1), PureDP(0.2), ApproxDP(0.3, 1e-7)]),
    "epsilon": ({"epsilon": 2.0}, [PureDP(0.1), PureDP(0.3)]),
    "epsilon, delta": (
        {"epsilon": 3.0, "delta": 1e-5},
        [ZCDP(0.01), PureDP(0.2), ApproxDP(0.3, 1e-7)],
    ),
}
#: The small release each example tries to charge, per kind of total.
SMALL = {"rho": ZCDP(0.001), "epsilon": PureDP(0.001), "epsilon, delta": PureDP(0.001)}

HOSTILE = st.one_of(
    st.sampled_from(
        [
            -5,
            -1,
            0,
            -0.0,
            1e-300,
            1e308,
            10**30,
            math.nan,
            math.inf,
            -math.inf,
            "1",
            "0.1",
            "abc",
            "",
            None,
            True,
            False,
            [],
            {},
            [0.1],
            {"rho": 0.1},
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-3, 3),
)


def _write_valid(path: Path, kind: str, n_entries: int) -> dict:
    """A ledger file with the declared total ``kind`` and ``n_entries`` charged releases
    (the first committed, the others pending); returns its parsed document."""
    total, releases = TOTALS[kind]
    ledger = Ledger.create(path, **total)
    for i in range(n_entries):
        privacy = releases[i % len(releases)]
        entry = ledger.charge(privacy, releases=1 + i % 2, description=f"release {i}")
        if i == 0:
            ledger.commit(entry)
    return json.loads(path.read_text(encoding="utf-8"))


def _templates() -> dict:
    """``{(kind of total, number of entries): document}``: valid ledgers, written once."""
    with tempfile.TemporaryDirectory() as tmp:
        return {
            (kind, n): _write_valid(Path(tmp) / f"{kind}-{n}.json", kind, n)
            for kind in TOTALS
            for n in range(4)
        }


TEMPLATES = _templates()


def _paths(value, prefix=()):
    """Every path (a tuple of keys / indices) inside a parsed JSON document, but the root."""
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _at(doc, path):
    for key in path:
        doc = doc[key]
    return doc


@st.composite
def damaged_ledgers(draw) -> tuple[tuple, list]:
    """``((kind of total, entries), damage)``: a valid ledger (:data:`TEMPLATES`) and what
    to do to it, a list of ``(operation, path, value)`` applied in order by
    :func:`_damage` — ``set`` the field at ``path`` to ``value``, ``delete`` it, ``add`` an
    unknown field ``colour`` = ``value`` beside it, ``scale`` a number by ``value``, or
    ``duplicate`` its top-level key (given again with ``value``, which lenient JSON keeps)."""
    template = draw(st.sampled_from(sorted(TEMPLATES)))
    paths = sorted(_paths(TEMPLATES[template]), key=str)
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["set", "set", "delete", "add", "scale", "duplicate"]),
                st.sampled_from(paths),
                st.one_of(HOSTILE, st.sampled_from([0.5, 2.0, -1.0, 1e6])),
            ),
            min_size=1,
            max_size=2,
        )
    )
    return template, ops


def _damage(doc: dict, ops) -> str:
    """The text of ``doc`` after ``ops`` (see :func:`damaged_ledgers`)."""
    doc = copy.deepcopy(doc)
    duplicates = []
    for op, path, value in ops:
        try:
            parent, key = _at(doc, path[:-1]), path[-1]
            parent[key]  # noqa: B018 - still there after an earlier operation?
        except (KeyError, IndexError, TypeError):
            continue
        if op == "set":
            parent[key] = value
        elif op == "delete":
            del parent[key]
        elif op == "add":
            (parent[key] if isinstance(parent[key], dict) else parent)["colour"] = value
        elif op == "scale":
            v = parent[key]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                parent[key] = v * value if isinstance(value, (int, float)) else value
        else:
            duplicates.append((path[0], value))
    text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=True)
    for key, value in duplicates:
        text = text.rstrip().removesuffix("}") + f", {json.dumps(key)}: "
        text += json.dumps(value, allow_nan=True) + "}\n"
    return text


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_consistent(path: Path) -> None:
    """The property of a ledger file: refused naming the file, or consistent
    (docs/guide/ledger.md) with finite reports and charges only within the total."""
    text = path.read_text(encoding="utf-8", errors="replace")
    folder = path.parent
    before = snapshot(folder)
    ledger, refused = outcome(Ledger, path, names=(path.name,))
    if refused is not None:
        assert snapshot(folder) == before, "a refused ledger was changed"
        return
    try:
        doc = strict_json(text)
    except (NotStrictJSON, json.JSONDecodeError) as exc:
        raise AssertionError(f"opened a ledger that is not strict JSON: {exc}") from None
    assert isinstance(doc, dict) and doc.get("format") == FORMAT, "opened a non-ledger"
    for field in ("total", "conversion_delta", "entries"):
        assert field in doc, f"opened a ledger without {field!r}"
    total = doc["total"]
    assert isinstance(total, dict), f"total {total!r}"
    budget = {k: v for k, v in total.items() if k in ("rho", "epsilon", "delta")}
    assert sorted(budget) in (["rho"], ["epsilon"], ["delta", "epsilon"]), f"total {total!r}"
    for key, v in budget.items():
        assert _is_number(v) and math.isfinite(v) and v > 0, f"total {key} = {v!r}"
    cd = doc["conversion_delta"]
    assert _is_number(cd) and 0 < cd < min(1, budget.get("delta", 1)), f"conversion_delta {cd!r}"
    assert isinstance(doc["entries"], list), f"entries {doc['entries']!r}"
    for k, entry in enumerate(doc["entries"], start=1):
        assert isinstance(entry, dict), f"entry {k}: {entry!r}"
        missing = {"id", "time", "status", "privacy", "releases", "charge"} - set(entry)
        assert not missing, f"opened a ledger whose entry {k} has no {sorted(missing)}"
        try:
            want = charge_of(from_spec(entry["privacy"]), entry["releases"])
        except (ValueError, TypeError) as exc:
            raise AssertionError(f"entry {k}: privacy or releases not valid: {exc}") from None
        got = entry["charge"]
        assert isinstance(got, dict) and set(got) == set(want), (k, got, want)
        for key in want:
            g = got[key]
            assert _is_number(g) and math.isclose(g, want[key], rel_tol=1e-9, abs_tol=0), (
                f"entry {k} charges {key} = {g!r} but its privacy and releases charge {want[key]!r}"
            )

    # a consistent ledger: every operation works and reports finite numbers
    for method in ("report", "usage", "remaining", "spent"):
        value, refused = outcome(getattr(ledger, method), names=(path.name,))
        assert refused is None, f"{method}() refused a ledger that opened: {refused}"
        words = non_finite_words(value if isinstance(value, str) else repr(value))
        assert not words, f"{method}() reports non-finite numbers: {value!r}"
    used = ledger.usage()
    over = any(used[k] is not None and used[k] > total[k] * (1 + TOLERANCE) for k in used)
    small = SMALL[
        "rho" if "rho" in total else "epsilon" if "delta" not in total else "epsilon, delta"
    ]
    before = snapshot(folder)
    _, refused = outcome(ledger.charge, small, description="small", names=(path.name,))
    if refused is not None:
        assert snapshot(folder) == before, "a refused charge changed the ledger"
        return
    assert not over, f"charged a ledger already over its total (used {used}, total {total})"
    after = Ledger(path).usage()
    for k in after:
        assert after[k] is None or after[k] <= total[k] * (1 + TOLERANCE), (after, total)


@profile(100)
@given(damaged_ledgers())
@example((("rho", 1), [("set", ("entries", 0, "charge", "rho"), -5)]))
@example((("rho", 0), [("duplicate", ("total",), {"rho": 1000.0})]))
def test_a_damaged_ledger_is_refused_or_consistent(recipe):
    template, ops = recipe
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "people.ledger.json"
        path.write_text(_damage(TEMPLATES[template], ops), encoding="utf-8")
        check_consistent(path)


JSON = st.recursive(
    st.one_of(HOSTILE, st.text(max_size=4)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@profile(60)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "format": st.one_of(st.just(FORMAT), JSON),
            "total": st.one_of(
                st.fixed_dictionaries(
                    {}, optional={"rho": HOSTILE, "epsilon": HOSTILE, "delta": HOSTILE}
                ),
                JSON,
            ),
            "conversion_delta": st.one_of(st.just(1e-6), HOSTILE),
            "entries": st.one_of(st.just([]), st.lists(JSON, max_size=2)),
            "dataset": st.one_of(st.just("people"), JSON),
        },
    ).map(lambda d: {"format": FORMAT, **d} if "format" not in d else d)
    | JSON
)
def test_any_json_document_is_refused_or_a_consistent_ledger(document):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "people.ledger.json"
        path.write_text(json.dumps(document, allow_nan=True), encoding="utf-8")
        check_consistent(path)
