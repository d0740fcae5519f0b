"""Domain files (``mmtoolkit.records.read_domain`` / ``parse_domain``) under hostile input.

Each example writes a domain document — attributes declared by a size, ``{"size": n}``,
``{"values": [...]}`` or ``{"bins": [...]}``, with wrong types, empty and huge sizes,
unicode and control characters in names and labels, a key given twice, ``NaN`` /
``Infinity`` constants, a byte-order mark, a byte that is not UTF-8, trailing garbage or a
truncated file — and reads it. The property: the file is read into a domain that says what
the document declares, or refused with a ``ValueError`` naming the file; never another
exception, never a changed file. A document that is not strict JSON (a duplicate key, a
non-standard constant) must be refused: read leniently, the last duplicate wins silently.
"""

from __future__ import annotations

import json
import math
import tempfile
from decimal import Decimal
from pathlib import Path

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st
from property_support import NotStrictJSON, outcome, profile, snapshot, strict_json

from mmtoolkit import records

# ------------------------------------------------------------------------ strategies
#: Every character UTF-8 and JSON can carry: control characters, NUL, a byte-order mark,
#: combining marks, right-to-left text, astral planes (no lone surrogates).
CHARS = st.characters(codec="utf-8")
TEXT = st.text(CHARS, max_size=6)
#: Labels are mostly plain, sometimes hostile.
LABELS = st.one_of(st.text("abcxyz019 ,.-", min_size=1, max_size=4), TEXT)
HUGE = st.sampled_from([0, -1, 2**31, 2**53 + 1, 2**63, 10**30])
FLOATS = st.floats(allow_nan=True, allow_infinity=True)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 8), HUGE, FLOATS, TEXT)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=6,
)
SIZES = st.one_of(st.integers(-1, 6), HUGE, SCALARS)
VALUES = st.one_of(
    st.lists(LABELS, max_size=5, unique=True),
    st.lists(st.one_of(LABELS, st.integers(-2, 12), SCALARS), max_size=5),
    SCALARS,
)
BINS = st.one_of(
    st.lists(st.integers(-50, 50), min_size=2, max_size=5, unique=True).map(sorted),
    st.lists(st.one_of(st.integers(-50, 50), FLOATS, SCALARS), max_size=5),
    SCALARS,
)


@st.composite
def _well_formed(draw):
    """A declaration the reader should accept (barring a label that strips to a duplicate
    or to nothing): a size, ``{"size": n}``, categories or bin edges."""
    form = draw(st.sampled_from(["size", "mapping", "values", "bins"]))
    if form == "size":
        return draw(st.integers(1, 6))
    if form == "mapping":
        out = {"size": draw(st.integers(1, 6))}
    elif form == "values":
        values = draw(st.lists(LABELS, min_size=1, max_size=5, unique=True))
        out = {"values": values}
        if draw(st.booleans()):
            out["other"] = draw(st.sampled_from(values))
    else:
        edges = draw(st.lists(st.integers(-50, 50), min_size=2, max_size=5, unique=True))
        out = {"bins": sorted(edges)}
    if draw(st.booleans()):
        out["numeric"] = draw(st.booleans())
    return out


DECLARATIONS = st.one_of(
    _well_formed(),
    _well_formed(),
    _well_formed(),
    SIZES,
    st.fixed_dictionaries(
        {},
        optional={
            "size": SIZES,
            "values": VALUES,
            "bins": BINS,
            "numeric": st.one_of(st.booleans(), SCALARS),
            "other": st.one_of(LABELS, SCALARS),
            "colour": SCALARS,
        },
    ),
    JSON,
)
NAMES = st.one_of(st.sampled_from(["age", "sex", "a", "b", "c"]), TEXT)
#: Byte-level damage applied to the rendered document.
DAMAGE = st.sampled_from(["none"] * 5 + ["bom", "garbage", "truncate", "bad byte"])


def _render(pairs, ensure_ascii: bool) -> str:
    """A JSON object with these (key, value) pairs in order, a key possibly twice, and
    ``NaN`` / ``Infinity`` where a value is not finite (Python's lenient JSON)."""

    def dump(v):
        return json.dumps(v, allow_nan=True, ensure_ascii=ensure_ascii)

    return "{" + ", ".join(f"{dump(k)}: {dump(v)}" for k, v in pairs) + "}"


@st.composite
def domain_documents(draw) -> bytes:
    """The bytes of a domain file."""
    if draw(st.integers(0, 9)) == 0:  # not an object at all
        text = json.dumps(draw(JSON), allow_nan=True)
    else:
        pairs = draw(st.lists(st.tuples(NAMES, DECLARATIONS), min_size=1, max_size=4))
        text = _render(pairs, draw(st.booleans()))
    data = text.encode("utf-8")
    damage = draw(DAMAGE)
    if damage == "bom":
        data = b"\xef\xbb\xbf" + data
    elif damage == "garbage":
        data += draw(st.sampled_from([b" x", b"}", b",", b"\x00", b"{}"]))
    elif damage == "truncate":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif damage == "bad byte":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\x80"])) + data[at:]
    return data


# ------------------------------------------------------------------------ the oracle
def _strict_document(data: bytes):
    """The document as strict JSON, or None when it is not (bad UTF-8, not JSON, a key
    twice, NaN / Infinity). A leading byte-order mark is allowed, as the reader documents."""
    try:
        return strict_json(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, NotStrictJSON):
        return None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_domain_says(spec: records.DomainSpec, doc) -> None:
    """A domain that was read says what the document declares (names, sizes, labels, bin
    edges, "other" categories), and every number in it is finite."""
    assert isinstance(doc, dict) and doc, f"accepted a document that is not an object: {doc!r}"
    dom = spec.domain
    assert list(dom.names) == list(doc), (dom.names, list(doc))
    assert dom.size == math.prod(dom.sizes)
    for i, (name, entry) in enumerate(doc.items()):
        n, labels = dom.sizes[i], dom.labels[i]
        assert _is_int(n) and n >= 1, f"{name!r}: size {n!r}"
        if isinstance(entry, dict):
            if "size" in entry:
                assert _is_int(entry["size"]) and entry["size"] == n, (name, entry, n)
            if "values" in entry:
                declared = tuple(str(v).strip() for v in entry["values"])
                assert labels == declared, (name, labels, declared)
            elif "bins" in entry:
                edges = np.asarray(spec.bins[name], dtype=float)
                assert np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0), edges
                assert edges.tolist() == [float(e) for e in entry["bins"]], (name, edges)
                assert len(edges) == n + 1
            else:
                assert "size" in entry, f"{name!r}: accepted {entry!r}, which declares no size"
            if "other" in entry:
                assert spec.other[name] == str(entry["other"]) and spec.other[name] in labels
        else:
            assert _is_int(entry) and entry == n, f"{name!r}: accepted {entry!r} as size {n}"
            assert labels is None
        if labels is not None:
            assert len(labels) == n and len(set(labels)) == n, (name, labels)
            assert all(isinstance(x, str) and x and "\x00" not in x for x in labels), labels


# ------------------------------------------------------------------------ properties
@profile(200)
@given(domain_documents())
@example(b'{"age": 5, "sex": 2, "age": 1}')  # read leniently, "age" silently has 1 value
@example(b'{"age": {"bins": [0, NaN, 10]}, "sex": {"size": Infinity}}')
def test_read_domain_reads_what_the_file_declares_or_refuses_naming_the_file(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "domain.json"
        path.write_bytes(data)
        before = snapshot(Path(tmp))
        spec, refused = outcome(records.read_domain, path, names=(path.name,))
        assert snapshot(Path(tmp)) == before, "reading a domain file changed it"
    if refused is None:
        doc = _strict_document(data)
        assert doc is not None, (
            "accepted a domain file that is not strict JSON (a key given twice, NaN or "
            "Infinity, bad UTF-8, or not JSON at all)"
        )
        check_domain_says(spec, doc)


#: Python values a caller may put in a parsed mapping (beyond what JSON can hold).
PY_VALUES = st.one_of(
    SCALARS,
    st.sampled_from(
        [
            np.int64(3),
            np.float64(2.0),
            np.float64("nan"),
            np.bool_(True),
            Decimal("2"),
            Decimal("NaN"),
            (1, 2),
            {1, 2},
            b"ab",
            2.0,
            3 + 0j,
        ]
    ),
)


#: Numbers that could be bin edges or sizes, finite or not.
NUMBER_LISTS = st.lists(
    st.one_of(st.integers(-5, 50), st.floats(allow_nan=True, allow_infinity=True)),
    min_size=1,
    max_size=4,
)
#: Declarations in a parsed mapping: well-formed, or with Python values JSON cannot hold
#: (numpy numbers, Decimal, tuples, sets, arrays, complex numbers).
PY_DECLARATIONS = st.one_of(
    _well_formed(),
    _well_formed(),
    PY_VALUES,
    st.fixed_dictionaries(
        {},
        optional={
            "size": st.one_of(st.integers(1, 4), PY_VALUES),
            "values": st.one_of(
                st.lists(LABELS, min_size=1, max_size=3, unique=True),
                st.lists(LABELS, min_size=1, max_size=3, unique=True).map(tuple),
                st.lists(PY_VALUES, max_size=3),
            ),
            "bins": st.one_of(
                NUMBER_LISTS.map(sorted),
                NUMBER_LISTS,
                NUMBER_LISTS.map(tuple),
                NUMBER_LISTS.map(np.array),
                st.lists(PY_VALUES, max_size=4),
            ),
            "numeric": st.one_of(st.booleans(), PY_VALUES),
            "other": PY_VALUES,
        },
    ),
)


@profile(100)
@given(
    st.dictionaries(
        st.one_of(st.sampled_from(["age", "sex", "a"]), st.sampled_from([0, None, "", " "])),
        PY_DECLARATIONS,
        min_size=1,
        max_size=3,
    )
)
@example({"age": {"bins": [0.0, math.nan, 10.0]}})  # NaN compares as not decreasing
@example({"age": {"values": ("a", "b")}, "sex": np.int64(2), "a": {"size": np.float64(2.0)}})
def test_parse_domain_accepts_or_refuses_python_mappings(mapping):
    spec, refused = outcome(records.parse_domain, mapping, "the mapping", names=("the mapping",))
    if refused is None:
        dom = spec.domain
        assert list(dom.names) == list(mapping)
        assert all(_is_int(n) and n >= 1 for n in dom.sizes), dom.sizes
        for edges in spec.bins.values():
            assert np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0), edges
