"""Records (``mmtoolkit.records.read_csv`` / ``from_frame``) against a declared domain, under
hostile input.

Each example declares a small domain — integer codes, categories (``values``, sometimes
with an ``other``) and numeric ``bins``, names and labels sometimes unicode or holding
commas, quotes and line breaks — and writes records for it: declared values, other
notations of numbers, values outside the domain, empty fields, NUL and control characters;
a header with a column missing, an extra or a repeated one; rows one field short or long;
blank lines and lines of spaces; quoting, CRLF line ends, a byte-order mark, a byte that is
not UTF-8.

The oracle classifies every field as *exact* (its code is known: a declared label as
written, an integer code, a number inside a bin), *bad* (empty, not a number where one is
needed, a code or number outside the domain, an undeclared category) or *unclear* (other
notations docs/guide/records.md lets either way). A file with a structural fault or a bad
field must be refused with a ``RecordsError`` naming the file; a file of exact fields must
be read to exactly the expected codes (a header without records with a ``RecordsWarning``);
any file read gives codes inside the domain. ``from_frame`` of the frame that
``pd.read_csv(path, dtype=str, keep_default_na=False, index_col=False)`` makes of a
well-formed file gives what ``read_csv`` gives (the equivalence docs/guide/records.md
promises), and a missing value anywhere in a typed frame is refused naming the row.
"""

from __future__ import annotations

import bisect
import csv
import io
import re
import tempfile
import warnings
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import assume, given
from hypothesis import strategies as st
from property_support import check_refusal, outcome, profile, snapshot

from mmtoolkit import records

#: A number "in ASCII decimal notation" (docs/guide/records.md's matching rule).
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)

_PLAIN = "abcxyz019_"
#: Names and labels: mostly plain, sometimes with separators, quotes, line breaks, unicode.
_TEXT = st.one_of(
    st.text(_PLAIN, min_size=1, max_size=4),
    st.sampled_from(["1", "01", "1.0", "2", "-3", "1e2", "100", "0"]),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00\ufeff"), min_size=1, max_size=5),
    st.text(_PLAIN + ',"\n\r\t é\u00a0\u2028', min_size=1, max_size=5),
).filter(lambda t: t == t.strip() and t != "")


@st.composite
def attributes(draw, name: str) -> dict:
    """One attribute: ``{"name", "kind" (codes | values | bins), "n", "labels", "edges",
    "other", "declaration"}``."""
    kind = draw(st.sampled_from(["codes", "values", "bins"]))
    a = {"name": name, "kind": kind, "labels": None, "edges": None, "other": None}
    if kind == "codes":
        a["n"] = draw(st.integers(1, 4))
        a["declaration"] = a["n"] if draw(st.booleans()) else {"size": a["n"]}
    elif kind == "values":
        labels = draw(st.lists(_TEXT, min_size=1, max_size=4, unique=True))
        a["labels"], a["n"] = labels, len(labels)
        a["declaration"] = {"values": labels}
        if draw(st.integers(0, 3)) == 0:
            a["other"] = draw(st.sampled_from(labels))
            a["declaration"]["other"] = a["other"]
    else:
        edges = sorted(draw(st.lists(st.integers(-20, 40), min_size=2, max_size=4, unique=True)))
        a["edges"], a["n"] = edges, len(edges) - 1
        a["declaration"] = {"bins": edges}
    return a


@st.composite
def domains(draw) -> list[dict]:
    names = draw(
        st.lists(_TEXT.filter(lambda t: t[0] != "\ufeff"), min_size=1, max_size=3, unique=True)
    )
    return [draw(attributes(n)) for n in names]


def _number(text: str) -> Decimal | None:
    """The number a text is under docs/guide/records.md's rule (ASCII decimal notation), or
    None; exponents of more than five digits (where the rule's limit lies) are left out by
    the generators, so every number here is exact in ``Decimal``."""
    t = text.strip()
    return Decimal(t) if _NUMBER.fullmatch(t) else None


#: Texts that are not numbers: words pandas would convert, unicode digits, NUL, ...
NOT_NUMBERS = [
    "x",
    "nan",
    "NaN",
    "inf",
    "-Infinity",
    "None",
    "NA",
    "true",
    "²",
    "١",
    "1_0",
    "0x1",
    "1e",
    "--1",
    "1-2",
    ".",
    "x\x00",
    "\x00",
    "\x07",
    "é",
    '"',
    ",",
]


@st.composite
def notations(draw, value: int) -> str:
    """``value`` written in one of the ways a number may be written: sign, leading zeros
    (past the 18 digits of a fast path), a fraction of zeros, an exponent."""
    sign = "-" if value < 0 else draw(st.sampled_from(["", "", "+"]))
    digits = str(abs(value))
    form = draw(st.integers(0, 6))
    if form == 1:
        return sign + "0" * draw(st.integers(1, 25)) + digits
    if form == 2:
        return sign + digits + "." + "0" * draw(st.integers(0, 20))
    if form == 3:
        return sign + digits + draw(st.sampled_from(["e0", "E+00", "e-0"]))
    if form == 4:
        return sign + digits + "0" * 3 + "e-3"
    if form == 5 and len(digits) == 1:
        return sign + "0." + digits + "e1"
    return sign + digits


@st.composite
def fields(draw, a: dict, clean: bool = False) -> tuple[str, int | None, str]:
    """``(text, code, class)``: a field for attribute ``a``, with its code when
    docs/guide/records.md fixes it — class ``exact`` — or ``bad`` when it must be refused,
    ``unclear`` otherwise. Numbers are judged in ``Decimal`` / ``float`` (the rule's "the
    same number" and "the nearest double"), not by the reader's own code. ``clean``: only
    values of the first kind (declared labels, numbers in or near the domain)."""
    pad = draw(st.sampled_from(["", "", "", " ", "  ", "\t"]))  # values are stripped
    choice = draw(st.integers(0, 4 if clean else 9))
    if a["kind"] == "values" and choice <= 4:  # a declared label as declared
        text = a["labels"][draw(st.integers(0, a["n"] - 1))]
    elif a["kind"] == "codes" and choice <= 5:  # a whole number, in or near the domain
        text = draw(notations(draw(st.integers(-2, a["n"] + 1))))
    elif a["kind"] == "bins" and choice <= 5:  # a number in or near the bins
        lo, hi = a["edges"][0], a["edges"][-1]
        v = draw(st.integers(lo - 2, hi + 1))
        half = draw(st.sampled_from(["", ".5", ".25", ".999999999999999999999"]))
        text = draw(notations(v)) if not half else str(v) + half
    elif choice == 6:  # empty or blank: always refused
        return draw(st.sampled_from(["", " ", "\t", "  "])), None, "bad"
    else:
        text = draw(
            st.one_of(
                st.sampled_from(NOT_NUMBERS),
                st.sampled_from(["1.5", "-0", "9" * 30, "1" + "0" * 20, "1e5", "2.5e1"]),
                st.text(st.characters(codec="utf-8"), min_size=1, max_size=4),
            )
        )
    text = pad + text + pad
    stripped, number = text.strip(), _number(text)
    if not stripped:
        return text, None, "bad"
    if a["kind"] == "codes":
        if number is None or number != number.to_integral_value():
            return text, None, "bad"
        return (text, int(number), "exact") if 0 <= number < a["n"] else (text, None, "bad")
    if a["kind"] == "bins":
        if number is None:
            return text, None, "bad"
        x, edges = float(stripped), a["edges"]
        if not edges[0] <= x < edges[-1]:
            return text, None, "bad"
        return text, bisect.bisect_right(edges, x) - 1, "exact"
    labels = a["labels"]
    if stripped in labels:  # the same text
        return text, labels.index(stripped), "exact"
    same = [] if number is None else [k for k, v in enumerate(labels) if _number(v) == number]
    if len(same) == 1:  # the same number
        return text, same[0], "exact"
    if len(same) > 1:  # equal to several declared values: refused rather than guessed
        return text, None, "bad" if a["other"] is None else "unclear"
    if a["other"] is not None:
        return text, labels.index(a["other"]), "exact"
    return text, None, "bad"


@st.composite
def csv_files(draw, well_formed: bool = False) -> dict:
    """A records file for a drawn domain: ``{"domain" (the declaration), "attrs" (as
    :func:`attributes` draws them), "data" (the file's bytes), "expected" (per record its
    codes, None when a field is unclear), "refuse" (why the file must be refused, or None),
    "unclear" (whether any field is)}``. ``well_formed``: no structural fault (every row as
    long as the header, no line of spaces, UTF-8), the condition of the pandas
    equivalence."""
    attrs = draw(domains())
    header = [a["name"] for a in attrs]
    header = draw(st.permutations(header))
    refuse = None
    if not well_formed:
        fault = draw(st.sampled_from([None] * 6 + ["extra", "missing", "repeated"]))
        if fault == "extra":
            extra = draw(_TEXT.filter(lambda t: t not in header and t[0] != "\ufeff"))
            header.insert(draw(st.integers(0, len(header))), extra)
            refuse = "a column the domain does not declare"
        elif fault == "missing" and len(header) > 1:
            header.pop(draw(st.integers(0, len(header) - 1)))
            refuse = "a column of the domain missing"
        elif fault == "repeated":
            header.append(draw(st.sampled_from(header)))
            refuse = "a column twice"
    by_name = {a["name"]: a for a in attrs}
    clean = draw(st.booleans())  # half the files hold only values of the declared kinds
    n_rows = draw(st.integers(0, 5))
    rows, expected, unclear = [], [], False
    for _ in range(n_rows):
        row, codes, row_unclear = [], {}, False
        for col in header:
            if col in by_name:
                text, code, cls = draw(fields(by_name[col], clean))
                refuse = refuse or ("a bad value" if cls == "bad" else None)
                row_unclear |= cls == "unclear"
                codes[col] = code
            else:
                text = draw(st.text(_PLAIN, max_size=3))
            row.append(text)
        unclear |= row_unclear
        rows.append(row)
        expected.append(None if row_unclear else [codes.get(a["name"]) for a in attrs])
    if not well_formed and rows and draw(st.integers(0, 5)) == 0:
        r = draw(st.integers(0, len(rows) - 1))
        if draw(st.booleans()):
            rows[r] = rows[r] + ["x"]
        elif len(rows[r]) > 1:
            rows[r] = rows[r][:-1]
        else:
            rows[r] = rows[r] + [""]
        refuse = refuse or "a row with the wrong number of fields"

    terminator = draw(st.sampled_from(["\n", "\r\n"]))
    buf = io.StringIO()
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]))
    if well_formed and len(header) == 1:
        quoting = csv.QUOTE_ALL  # a blank value unquoted would be a line of spaces
    if any("\r" in f for f in [*header, *(f for row in rows for f in row)]):
        quoting = csv.QUOTE_ALL  # the writer quotes "\r" only when it ends its lines
    writer = csv.writer(buf, lineterminator=terminator, quoting=quoting)
    writer.writerow([draw(st.sampled_from(["", " "])) + h for h in header])
    lines = [buf.getvalue()]
    for row in rows:
        buf.seek(0)
        buf.truncate()
        writer.writerow(row)
        if draw(st.integers(0, 4)) == 0:  # blank lines are skipped
            lines.append(terminator)
        if not well_formed and draw(st.integers(0, 9)) == 0:  # a line of spaces is a record
            lines.append("   " + terminator)
            refuse = refuse or "a line of spaces"
        lines.append(buf.getvalue())
    text = "".join(lines)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # no newline at the end
    data = text.encode("utf-8")
    if draw(st.integers(0, 4)) == 0:
        data = b"\xef\xbb\xbf" + data
    if not well_formed and draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff" + data[at:]
        refuse = refuse or "a byte that is not UTF-8"
    return {
        "domain": {a["name"]: a["declaration"] for a in attrs},
        "attrs": attrs,
        "data": data,
        "expected": expected,
        "refuse": refuse,
        "unclear": unclear,
    }


def _read(case: dict, tmp: Path):
    """``read_csv`` of the case's file: ``(records, refusal, warnings)``, the file unchanged."""
    path = tmp / "people.csv"
    path.write_bytes(case["data"])
    before = snapshot(tmp)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, refused = outcome(records.read_csv, path, case["domain"], names=(path.name,))
    assert snapshot(tmp) == before, "reading records changed the file"
    return got, refused, [w for w in caught if issubclass(w.category, records.RecordsWarning)]


def _check_codes(got: records.Records, case: dict) -> None:
    attrs = case["attrs"]
    assert got.codes.shape == (len(case["expected"]), len(attrs)), got.codes.shape
    for i, a in enumerate(attrs):
        col = got.codes[:, i]
        assert np.all((col >= 0) & (col < a["n"])), f"codes outside 0..{a['n'] - 1}: {col}"
    for r, want in enumerate(case["expected"]):
        if want is not None:
            assert got.codes[r].tolist() == want, (r, got.codes[r].tolist(), want)


@profile(100)
@given(csv_files())
def test_read_csv_reads_exact_files_exactly_and_refuses_bad_ones_naming_the_file(case):
    with tempfile.TemporaryDirectory() as tmp:
        got, refused, caught = _read(case, Path(tmp))
    if case["refuse"] is not None:
        assert refused is not None, f"accepted a file with {case['refuse']}"
        return
    if refused is not None:
        assert case["unclear"], f"refused a file of declared values: {refused}"
        return
    _check_codes(got, case)
    assert bool(caught) == (len(got) == 0), "a RecordsWarning is given exactly when no records"


@profile(40)
@given(csv_files(well_formed=True))
def test_from_frame_of_pandas_read_matches_read_csv(case):
    """docs/guide/records.md: ``pd.read_csv(path, dtype=str, keep_default_na=False,
    index_col=False)`` of a well-formed file and ``read_csv`` give the same records."""
    with tempfile.TemporaryDirectory() as tmp:
        got, refused, _ = _read(case, Path(tmp))
        try:
            frame = pd.read_csv(
                Path(tmp) / "people.csv", dtype=str, keep_default_na=False, index_col=False
            )
        except (pd.errors.ParserError, pd.errors.EmptyDataError):
            assume(False)  # pandas cannot read this one: nothing to compare
    via_frame, frame_refused = outcome(records.from_frame, frame, case["domain"])
    if refused is not None or frame_refused is not None:
        assert refused is not None and frame_refused is not None, (
            f"read_csv: {refused}; from_frame: {frame_refused}"
        )
        return
    assert np.array_equal(got.codes, via_frame.codes), (got.codes, via_frame.codes)


MISSING = [None, np.nan, float("nan"), pd.NA, pd.NaT, Decimal("NaN"), np.datetime64("NaT")]


@profile(40)
@given(domains(), st.integers(1, 4), st.data())
def test_from_frame_refuses_a_missing_value_anywhere_naming_the_row(attrs, n_rows, data):
    columns, expected = {}, []
    for a in attrs:
        codes = data.draw(st.lists(st.integers(0, a["n"] - 1), min_size=n_rows, max_size=n_rows))
        expected.append(codes)
        if a["kind"] == "codes":
            columns[a["name"]] = pd.Series(codes, dtype="int64")
        elif a["kind"] == "values":
            labels = [a["labels"][k] for k in codes]
            columns[a["name"]] = (
                pd.Categorical(labels, categories=a["labels"])
                if data.draw(st.booleans())
                else pd.Series(labels, dtype=object)
            )
        else:
            columns[a["name"]] = pd.Series([float(a["edges"][k]) for k in codes])
    frame = pd.DataFrame(columns)
    domain = {a["name"]: a["declaration"] for a in attrs}
    got, refused = outcome(records.from_frame, frame, domain)
    assert refused is None, f"refused a frame of declared values: {refused}"
    assert got.codes.T.tolist() == expected

    col = data.draw(st.sampled_from(list(frame.columns)))
    row = data.draw(st.integers(0, n_rows - 1))
    holey = frame.copy()
    holey[col] = holey[col].astype(object)
    holey.loc[row, col] = data.draw(st.sampled_from(MISSING))
    _, refused = outcome(records.from_frame, holey, domain)
    assert refused is not None, f"accepted a missing value in column {col!r}, row {row}"
    check_refusal(refused, "row")
