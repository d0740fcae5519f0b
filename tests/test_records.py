"""Records → data (mmtoolkit.records): CSV/DataFrame reading, domain files, histograms and
marginal tables, and clear errors naming line and column."""

from __future__ import annotations

import csv
import json
import re
from decimal import Decimal, InvalidOperation

import numpy as np
import pytest

import mmtoolkit as mm
from mmtoolkit import records
from mmtoolkit.records import RecordsError

DOMAIN = {"a": 3, "b": 2, "c": 4}


@pytest.fixture
def files(tmp_path):
    def write(csv_text, domain=DOMAIN):
        d = tmp_path / "domain.json"
        d.write_text(json.dumps(domain))
        f = tmp_path / "data.csv"
        f.write_text(csv_text)
        return f, d

    return write


def test_read_csv_histogram_and_marginals(files):
    f, d = files("a,b,c\n0,1,3\n2,0,0\n0,1,3\n1,1,2\n")
    R = records.read_csv(f, d)
    assert len(R) == 4 and R.domain == mm.Domain(["a", "b", "c"], [3, 2, 4])
    x = R.vector()
    assert x.sum() == 4 and x[0 * 8 + 1 * 4 + 3] == 2  # C order: (0, 1, 3) twice
    # a marginal table equals the histogram summed over the other attributes
    np.testing.assert_array_equal(R.marginal(["a", "c"]), x.reshape(3, 2, 4).sum(axis=1))
    np.testing.assert_array_equal(R.marginal([2, 0]), x.reshape(3, 2, 4).sum(axis=1))
    assert R.marginal([]) == 4
    np.testing.assert_array_equal(R.marginal_fn()((1,)), [1, 3])


def test_column_order_blank_lines_whitespace(files):
    f, d = files("c, b ,a\n3, 1 ,0\n\n0,0,2\n")
    R = records.read_csv(f, d)
    np.testing.assert_array_equal(R.codes, [[0, 1, 3], [2, 0, 0]])


def test_bins_and_numeric_flags(files):
    dom = {"age": {"size": 3, "bins": [0, 18, 65, 120]}, "sex": 2}
    f, d = files("age,sex\n17,0\n18,1\n64.5,1\n119,0\n", dom)
    R = records.read_csv(f, d)
    np.testing.assert_array_equal(R.codes[:, 0], [0, 1, 1, 2])
    assert R.domain.numeric == (True, False)
    f, d = files("age,sex\n120,0\n", dom)
    with pytest.raises(RecordsError, match=r"line 2, column 'age': value 120 is outside the bins"):
        records.read_csv(f, d)


@pytest.mark.parametrize(
    "text, message",
    [
        ("a,b,c\n0,1,3\n3,0,0\n", r"data.csv, line 3, column 'a': value 3 is outside .* 0..2"),
        ("a,b,c\n0,1,3\n0,-1,0\n", r"line 3, column 'b': value -1 is outside"),
        ("a,b,c\n0,99999999999999999999,0\n", r"line 2, column 'b': value 9+ is outside"),
        ("a,b\n0,1\n", r"column\(s\) 'c' of the domain are missing from the data"),
        ("a,b,c,d\n0,1,3,0\n", r"the domain does not declare column\(s\) 'd'"),
        ("a,b,c\n0,x,3\n", r"line 2, column 'b': a non-numeric value 'x'"),
        ("a,b,c\n0,1,3\n0,,3\n", r"line 3, column 'b': an empty value"),
        ("a,b,c\n0,1.5,3\n", r"line 2, column 'b': a non-integer value '1.5'"),
        ("a,b,c\n0,1\n", r"line 2: 2 fields, the header has 3"),
        ("a,a,c\n0,1,3\n", r"column 'a' appears twice"),
        ("", r"the file is empty"),
    ],
)
def test_bad_csv(files, text, message):
    f, d = files(text)
    with pytest.raises(RecordsError, match=message):
        records.read_csv(f, d)


@pytest.mark.parametrize(
    "domain, message",
    [
        ({"a": 0}, r"size of attribute 'a': must be >= 1, got 0"),
        ({"a": "3"}, r"size of attribute 'a': expected an integer, got str '3'"),
        ([3, 2], r"must be a non-empty JSON object"),
        ({"a": {"size": 3, "bins": [0, 1]}}, r"has size 3 but 2 bin edges"),
        ({"a": {"bins": [0, 2, 1]}}, r"strictly increasing"),
        ({"a": {"size": 3, "kind": "x"}}, r"unknown field\(s\) \['kind'\]"),
    ],
)
def test_bad_domain(files, domain, message):
    f, d = files("a\n0\n", domain)
    with pytest.raises(RecordsError, match=message):
        records.read_csv(f, d)


def test_unreadable_files(tmp_path, files):
    f, d = files("a,b,c\n0,1,3\n")
    with pytest.raises(RecordsError, match="cannot read the data file"):
        records.read_csv(tmp_path / "missing.csv", d)
    with pytest.raises(RecordsError, match="cannot read the domain file"):
        records.read_csv(f, tmp_path / "missing.json")
    d.write_text("{not json")
    with pytest.raises(RecordsError, match="not valid JSON"):
        records.read_csv(f, d)


@pytest.mark.parametrize(
    "text, message",
    [
        # the last "a" used to win silently: a 5-value attribute read as declared twice
        ('{"a": 3, "b": 2, "a": 5, "c": 4}', r"a: the key 'a' is given twice"),
        ('{"a": {"values": ["x", "y"], "values": ["z"]}, "b": 2, "c": 4}',
         r"a\.values: the key 'values' is given twice"),
        ('{"a": NaN, "b": 2, "c": 4}', r"a: NaN is not JSON"),
        ('{"a": {"bins": [0, 1, Infinity]}, "b": 2, "c": 4}', r"a\.bins\[2\]: Infinity is"),
    ],
)  # fmt: skip
def test_a_domain_file_must_be_strict_json(files, text, message):
    f, d = files("a,b,c\n0,1,3\n")
    d.write_text(text)
    with pytest.raises(RecordsError, match=rf"domain\.json: not strict JSON: {message}"):
        records.read_csv(f, d)


def test_a_drafted_domain_never_writes_a_non_finite_number(tmp_path, capsys):
    """Equal-width bins over ±1e308 overflow to inf: writing the draft is refused, naming the
    field, and nothing is written (the file used to hold the non-JSON ``Infinity``)."""
    sample = tmp_path / "sample.csv"
    sample.write_text("x\n1e308\n-1e308\n" + "".join(f"{k}\n" for k in range(60)))
    out = tmp_path / "draft.json"
    with pytest.raises(RecordsError, match=r"cannot write .*draft\.json: x\.bins\[1\] is inf"):
        records.draft_domain(sample, out=out)
    assert not out.exists()


class FakeFrame:
    """A minimal frame-like object: from_frame needs only ``.columns`` and ``frame[col]``."""

    def __init__(self, cols, index=None):
        self._cols = cols
        self.columns = list(cols)
        self.index = index if index is not None else range(len(next(iter(cols.values()))))

    def __getitem__(self, name):
        return np.asarray(self._cols[name])


def test_from_frame_and_codes():
    frame = FakeFrame({"b": [1, 0], "a": [0.0, 2.0], "c": [3, 0]})
    R = records.from_frame(frame, DOMAIN)
    np.testing.assert_array_equal(R.codes, [[0, 1, 3], [2, 0, 0]])
    bad = FakeFrame({"a": [0, 1], "b": [0, 5], "c": [0, 0]}, index=["r1", "r2"])
    with pytest.raises(RecordsError, match=r"DataFrame, row 'r2', column 'b': value 5"):
        records.from_frame(bad, DOMAIN)
    nan = FakeFrame({"a": [0, np.nan], "b": [0, 1], "c": [0, 0]})
    with pytest.raises(RecordsError, match=r"row 1, column 'a': an empty value"):
        records.from_frame(nan, DOMAIN)
    R2 = records.from_codes(R.codes, DOMAIN)
    np.testing.assert_array_equal(R2.vector(), R.vector())
    with pytest.raises(RecordsError, match=r"record 0, column 'c': value 4 is outside"):
        records.from_codes([[0, 0, 4]], DOMAIN)


def test_large_domain_gives_marginals_not_a_vector():
    dom = mm.Domain.from_sizes([100] * 6)  # 10^12 cells
    R = records.synthetic(dom, 500, seed=1)
    with pytest.raises(ValueError, match="too large for a dense data vector"):
        R.vector()
    t = R.marginal(["a0", "a3"])
    assert t.shape == (100, 100) and t.sum() == 500


def test_synthetic_is_seeded_and_in_range():
    dom = mm.Domain.from_sizes([4, 3, 5])
    a = records.synthetic(dom, 2000, seed=3)
    b = records.synthetic(dom, 2000, seed=3)
    c = records.synthetic(dom, 2000, seed=4)
    assert np.array_equal(a.codes, b.codes) and not np.array_equal(a.codes, c.codes)
    assert a.codes.min() == 0 and np.all(a.codes.max(axis=0) < np.array([4, 3, 5]))
    # correlated attributes: the 2-way table is far from the product of its margins
    t = a.marginal([0, 1]) / 2000
    assert np.abs(t - np.outer(t.sum(1), t.sum(0))).max() > 0.02
    with pytest.raises(ValueError, match="records: must be >= 0, got -1"):
        records.synthetic(dom, -1)


def test_adult_records(adult_dir):
    R = records.read_csv(adult_dir / "adult.csv", adult_dir / "adult-domain.json")
    assert len(R) == 48842 and R.domain.sizes[:3] == (85, 9, 100)
    assert R.marginal(["sex"]).sum() == 48842


# ============================================================================ categories
CAT = {
    "age": {"bins": [0, 30, 50, 120]},
    "job": {"values": ["Private", "State-gov", "Other"], "other": "Other"},
    "sex": {"values": ["F", "M"]},
    "grade": {"values": [1, 2, 3], "numeric": True},
}


def test_values_bins_and_labels(files):
    f, d = files("age,job,sex,grade\n23,Private,F,2\n50,Never-worked,M,3\n31, State-gov ,F,1\n",
                 CAT)  # fmt: skip
    R = records.read_csv(f, d)
    np.testing.assert_array_equal(R.codes, [[0, 0, 0, 1], [2, 2, 1, 2], [1, 1, 0, 0]])
    dom = R.domain
    assert dom.sizes == (3, 3, 2, 3) and dom.numeric == (True, False, False, True)
    assert dom.value_labels("age") == ("[0, 30)", "[30, 50)", "[50, 120)")
    assert dom.value_labels("job") == ("Private", "State-gov", "Other")
    assert dom.value_labels("grade") == ("1", "2", "3")
    np.testing.assert_array_equal(R.bins["age"], [0, 30, 50, 120])
    # without "other", a value not declared is refused, naming file, line and column
    strict = {**CAT, "job": {"values": ["Private", "State-gov", "Other"]}}
    f, d = files("age,job,sex,grade\n23,Private,F,2\n50,Never-worked,M,3\n", strict)
    with pytest.raises(RecordsError, match=r"data.csv, line 3, column 'job': value "
                       r"'Never-worked' is not one of the attribute's declared values "
                       r"\('Private', 'State-gov', 'Other'\)"):  # fmt: skip
        records.read_csv(f, d)
    # ... unless asked to map it to a declared value
    R = records.read_csv(f, d, other={"job": "Other"})
    assert R.codes[1, 1] == 2
    with pytest.raises(RecordsError, match=r"other: 'Retired' is not one of the declared"):
        records.read_csv(f, d, other={"job": "Retired"})
    f, d = files("age,job,sex,grade\n23,Private,,2\n", CAT)
    with pytest.raises(RecordsError, match=r"line 2, column 'sex': an empty value"):
        records.read_csv(f, d)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"values": ["a", "a"]}, r"lists the value 'a' twice"),
        ({"values": []}, r"non-empty list of categories"),
        ({"values": ["a", 1.5]}, r"must be strings or integers, got 1.5"),
        ({"values": ["a", "b"], "size": 3}, r"has size 3 but 2 values"),
        ({"values": ["a"], "bins": [0, 1]}, r"declares both bins and values"),
        ({"values": ["a", "b"], "other": "c"}, r"other of attribute 'x' must be one of its"),
        ({"size": 2, "other": "0"}, r"other of attribute 'x' must be one of its declared"),
        ({"values": ["a"], "numeric": "yes"}, r"numeric of attribute 'x' must be true or false"),
    ],
)
def test_bad_declarations(entry, message):
    with pytest.raises(RecordsError, match=message):
        records.parse_domain({"x": entry})


def test_encoding_latin1_and_bom(files, tmp_path):
    f, d = files("a,b,c\n0,1,3\n", DOMAIN)
    f.write_bytes(b"a,b,c\n0,1,3\n0,1,\xe93\n")
    with pytest.raises(RecordsError, match=r"data.csv, line 3: byte 0xe9 \(column 5\) is not "
                       r"UTF-8; the data file must be UTF-8"):  # fmt: skip
        records.read_csv(f, d)
    f.write_bytes(b"\xef\xbb\xbfa,b,c\n0,1,3\n")  # the BOM is not part of the first column name
    assert records.read_csv(f, d).codes.tolist() == [[0, 1, 3]]
    d.write_bytes(b'\xef\xbb\xbf{"a": 3, "b": 2, "c": 4}')
    assert records.read_domain(d).domain.sizes == (3, 2, 4)


def test_header_only_csv_warns(files):
    f, d = files("a,b,c\n")
    with pytest.warns(records.RecordsWarning, match="has a header but no records"):
        R = records.read_csv(f, d)
    assert len(R) == 0 and R.marginal(["a"]).tolist() == [0, 0, 0]


def test_pandas_string_categorical_and_integer_columns():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({
        "age": [23.0, 50.5, 31.0],
        "job": pd.Categorical(["Private", "Never-worked", "State-gov"]),
        "sex": pd.array(["F", "M", "F"], dtype="string"),
        "grade": np.array([2, 3, 1]),
    })  # fmt: skip
    R = records.from_frame(frame, CAT)
    np.testing.assert_array_equal(R.codes, [[0, 0, 0, 1], [2, 2, 1, 2], [1, 1, 0, 0]])
    frame.loc[1, "sex"] = None
    with pytest.raises(RecordsError, match=r"DataFrame, row 1, column 'sex': an empty value"):
        records.from_frame(frame, CAT)
    with pytest.raises(RecordsError, match=r"expected a DataFrame .* records.from_codes"):
        records.from_frame(np.zeros((3, 4)), CAT)


def test_arrow_table_through_pandas():
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"age": [23, 64], "job": ["Private", "Other"], "sex": ["M", "F"],
                      "grade": [3, 3]})  # fmt: skip
    R = records.from_frame(table, CAT)
    np.testing.assert_array_equal(R.codes, [[0, 0, 1, 2], [2, 2, 0, 2]])


def test_draft_domain_warns_and_drafts(tmp_path, capsys):
    (tmp_path / "s.csv").write_text(
        "job,age\n" + "".join(f"{j},{a}\n" for j, a in zip("ba" * 40, range(17, 97)))
    )
    spec = records.draft_domain(tmp_path / "s.csv", bins=4, out=tmp_path / "draft.json")
    err = capsys.readouterr().err
    assert "read from the data itself" in err and "NOT protected by differential privacy" in err
    assert spec["job"] == {"values": ["a", "b"]}
    edges = spec["age"]["bins"]
    assert len(edges) == 5 and edges[0] == 17 and edges[-1] > 96
    assert json.loads((tmp_path / "draft.json").read_text()) == spec
    R = records.read_csv(tmp_path / "s.csv", tmp_path / "draft.json")  # the draft is usable
    assert len(R) == 80 and R.domain.numeric == (False, True)


# ============================================================================ matching rule
def test_numeric_categories_match_by_value_and_csv_frame_routes_agree(files):
    pd = pytest.importorskip("pandas")
    # declared "1.0": pandas reads the column as floats, the CSV keeps the text
    dom = {"a": 5, "b": {"values": ["1.0", "2.5"]}}
    f, d = files("a,b\n1,1.0\n3,2.5\n", dom)
    R = records.read_csv(f, d)
    np.testing.assert_array_equal(R.codes, [[1, 0], [3, 1]])
    np.testing.assert_array_equal(records.from_frame(pd.read_csv(f), d).codes, R.codes)
    # declared "1": any notation of the number one is that category, by either route;
    # integer codes accept any notation of a whole number
    dom = {"a": 5, "b": {"values": ["1", "2", "x"]}}
    f, d = files("a,b\n2.0,1.0\n1,01\n+0,1e0\n4,2\n0,x\n", dom)
    R = records.read_csv(f, d)
    np.testing.assert_array_equal(R.codes, [[2, 0], [1, 0], [0, 0], [4, 1], [0, 2]])
    frame = pd.DataFrame({"a": [2.0, 1.0, 0.0, 4.0, 0.0], "b": [1.0, 1, 1, 2, "x"]})
    np.testing.assert_array_equal(records.from_frame(frame, d).codes, R.codes)
    f, _ = files("a,b\n0,1.0\n0,2.0\n", dom)
    np.testing.assert_array_equal(records.from_frame(pd.read_csv(f), d).codes, [[0, 0], [0, 1]])
    np.testing.assert_array_equal(records.read_csv(f, d).codes, [[0, 0], [0, 1]])
    # the same text is always its own category; a number equal to several declared values
    # is refused rather than guessed, as is a non-number that is not declared
    dom = {"a": 5, "b": {"values": ["1", "1.0", "01", "2"]}}
    f, d = files("a,b\n0,1.0\n0,01\n0,1\n0,2.00\n", dom)
    np.testing.assert_array_equal(records.read_csv(f, d).codes[:, 1], [1, 2, 0, 3])
    f, d = files("a,b\n0,1\n0,1.00\n", dom)
    with pytest.raises(RecordsError, match=r"line 3, column 'b': value '1.00' equals several "
                       r"declared values as a number \('1', '1.0', '01'\)"):  # fmt: skip
        records.read_csv(f, d)
    f, d = files("a,b\n0,1.5\n", dom)
    with pytest.raises(RecordsError, match=r"line 2, column 'b': value '1.5' is not one of"):
        records.read_csv(f, d)
    f, d = files("a,b\n2.5,1\n", dom)
    with pytest.raises(RecordsError, match=r"line 2, column 'a': a non-integer value '2.5'"):
        records.read_csv(f, d)


def test_adult_csv_and_dataframe_routes_agree(adult_dir):
    pd = pytest.importorskip("pandas")
    domain = adult_dir / "adult-domain.json"
    R = records.read_csv(adult_dir / "adult.csv", domain)
    frame = pd.read_csv(adult_dir / "adult.csv")
    np.testing.assert_array_equal(records.from_frame(frame, domain).codes, R.codes)
    # the same file with the codes written as floats ("39.0"), e.g. after a NaN round trip
    np.testing.assert_array_equal(records.from_frame(frame.astype(float), domain).codes, R.codes)
    assert R.codes[0].tolist() == frame.iloc[0].tolist()  # codes are the file's integers


def test_draft_domain_keeps_the_text_and_reads_its_own_data(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    lows = [f"{0.12345678906 + k:.11f}" for k in range(60)]  # > max_values: bins
    text = "p, code,grade,job\n" + "".join(
        f"{lo},{c},{g},{j}\n"
        for lo, c, g, j in zip(lows, ["007", "12", "007"] * 20, ["0.10", "0.20", "1.0"] * 20,
                               [" a", "b ", "c"] * 20)
    )  # fmt: skip
    (tmp_path / "s.csv").write_text(text)
    spec = records.draft_domain(tmp_path / "s.csv", out=tmp_path / "d.json")
    assert spec["code"] == {"values": ["007", "12"], "numeric": True}  # not 7
    assert spec["grade"] == {"values": ["0.10", "0.20", "1.0"], "numeric": True}  # not 0.1
    assert spec["job"] == {"values": ["a", "b", "c"]}
    assert spec["p"]["bins"][0] == float(lows[0])  # the minimum itself, not a rounding of it
    R = records.read_csv(tmp_path / "s.csv", tmp_path / "d.json")
    assert len(R) == 60 and R.marginal(["grade"]).tolist() == [20, 20, 20]
    assert R.marginal(["p"]).sum() == 60
    # an empty value is not a category: it is left out (with a note), as a release refuses it
    (tmp_path / "e.csv").write_text("x,y\n0.10,a\n0.20,\n0.10,b\n")
    capsys.readouterr()
    spec = records.draft_domain(tmp_path / "e.csv")
    assert spec == {"x": {"values": ["0.10", "0.20"], "numeric": True},
                    "y": {"values": ["a", "b"]}}  # fmt: skip
    assert "column 'y' has 1 empty or missing value" in capsys.readouterr().err
    (tmp_path / "e.csv").write_text("x,y\n0.10,a\n0.20,b\n0.10,b\n")
    assert records.read_csv(tmp_path / "e.csv", spec).codes.tolist() == [[0, 0], [1, 1], [0, 1]]
    # a DataFrame's draft reads the DataFrame: its floats are drafted as from_frame reads them
    frame = pd.DataFrame({"x": [0.1, 0.2, 0.1, np.nan], "y": ["a", "b", "b", None]})
    spec = records.draft_domain(frame)
    assert spec["x"] == {"values": ["0.1", "0.2"], "numeric": True}
    assert records.from_frame(frame.dropna(), spec).codes.tolist() == [[0, 0], [1, 1], [0, 1]]


@pytest.mark.parametrize("missing", [None, np.nan, float("nan"), "pd.NA"])
def test_missing_values_in_object_columns_are_refused(missing):
    pd = pytest.importorskip("pandas")
    if missing == "pd.NA":
        missing = pd.NA
    col = np.array(["F", missing], dtype=object)
    # a frame-like object without .isna: the value is missing, not the text "None" / "nan"
    dom = {"sex": {"values": ["F", "M", "None", "nan", "<NA>", "Other"], "other": "Other"}}
    with pytest.raises(RecordsError, match=r"DataFrame, row 1, column 'sex': an empty value"):
        records.from_frame(FakeFrame({"sex": col}), dom)
    with pytest.raises(RecordsError, match=r"DataFrame, row 1, column 'sex': an empty value"):
        records.from_frame(pd.DataFrame({"sex": col}), dom)


def test_digits_are_ascii_and_errors_name_file_line_column(files):
    dom = {"a": 5, "b": {"bins": [0, 10]}, "c": {"values": ["1", "2"]}}
    for bad, col in [("²,1,1", "a"), ("١,1,1", "a"), ("1,١,1", "b"), ("1,1,١", "c")]:
        f, d = files(f"a,b,c\n1,1,1\n{bad}\n", dom)
        what = "a non-numeric value" if col != "c" else "value"
        with pytest.raises(RecordsError, match=rf"data.csv, line 3, column '{col}': {what} '"):
            records.read_csv(f, d)


def test_frame_columns_are_looked_up_by_their_own_labels():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({0: [2, 0], 1: ["b", "a"]})
    R = records.from_frame(frame, {"0": 3, "1": {"values": ["a", "b"]}})
    np.testing.assert_array_equal(R.codes, [[2, 1], [0, 0]])
    R = records.from_frame(FakeFrame({7: [1, 0]}), {"7": 2})
    np.testing.assert_array_equal(R.codes, [[1], [0]])


def test_synthetic_route_keeps_bins_and_labels_agree_with_real_data(tmp_path, capsys):
    from mmtoolkit.cli import main

    domain = tmp_path / "d.json"
    dom = {"age": {"bins": [0, 30, 50, 120]}, "sex": {"values": ["F", "M"]}}
    domain.write_text(json.dumps(dom))
    (tmp_path / "people.csv").write_text("age,sex\n20,F\n40,M\n70,F\n")
    spec = records.read_domain(domain)
    np.testing.assert_array_equal(records.synthetic(spec, 10).bins["age"], [0, 30, 50, 120])
    labels = {}
    routes = [("syn", ["--records", "50"]), ("real", ["--data", str(tmp_path / "people.csv")])]
    for route, extra in routes:
        out = tmp_path / f"{route}.csv"
        argv = ["release", "--domain", str(domain), *extra, "--workload", "range_marginals:1",
                "--selector", "identity", "--rho", "1", "--seed", "0",
                "--out", str(out)]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
        with open(out, newline="") as fh:
            labels[route] = [(r["marginal"], r["age"], r["sex"]) for r in csv.DictReader(fh)]
    assert labels["syn"] == labels["real"]
    ages = [a for m, a, _ in labels["real"] if m == "age"]
    assert ages == ["[0, 30)", "[0, 50)", "[0, 120)", "[30, 50)", "[30, 120)", "[50, 120)"]


def test_draft_domain_refuses_a_column_named_twice(tmp_path):
    (tmp_path / "dup.csv").write_text("a, a\n1,2\n")  # the same name once stripped
    with pytest.raises(RecordsError, match=r"dup.csv: column 'a' appears twice in the header"):
        records.draft_domain(tmp_path / "dup.csv")


# ============================================================================ review fixes
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def _reference_number(text):
    """The matching rule's number, written independently: ASCII decimal notation, exact."""
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def test_whole_column_coding_agrees_with_value_by_value_rule(tmp_path):
    # random strings of number characters (and a few others): the vectorised fast paths
    # and the per-value coder together must give what the rule gives each value alone
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(7)
    alphabet = list("0123456789+-.eE") * 3 + ["x", "²", "١", "_"]
    texts = ["".join(rng.choice(alphabet, rng.integers(1, 9))) for _ in range(20000)]
    texts += ["-0", "+7", "007", "1e3", "1E+3", ".5", "5.", "2e99999999999999999999",
              "123456789012345678", "1234567890123456789", "9007199254740993", "1_000",
              "0.0", "-0e5", "1.50", "+1.5e0", "-2.0", "1000", "1e+3", "10E2", "x"]  # fmt: skip
    numbers = {t: _reference_number(t) for t in texts}

    def check(domain, expected):
        keep = [t for t in texts if t in expected]
        (tmp_path / "d.csv").write_text("v\n" + "\n".join(keep) + "\n")
        want = [expected[t] for t in keep]
        assert records.read_csv(tmp_path / "d.csv", domain).codes[:, 0].tolist() == want
        frame = pd.DataFrame({"v": np.array(keep, dtype=object)})
        assert records.from_frame(frame, domain).codes[:, 0].tolist() == want

    codes = {t: int(x) for t, x in numbers.items()
             if x is not None and x == x.to_integral_value() and 0 <= x < 1000}  # fmt: skip
    check({"v": 1000}, codes)
    edges = [-1e6, -0.5, 0, 0.25, 3, 1e6]
    bins = {t: int(np.searchsorted(edges, float(x), side="right")) - 1
            for t, x in numbers.items() if x is not None and -1e6 <= float(x) < 1e6}  # fmt: skip
    check({"v": {"bins": edges}}, bins)
    labels = ["0", "1.5", "-2", "1e3", "x", "Other"]
    declared = {_reference_number(v): j for j, v in enumerate(labels)}
    values = {t: labels.index(t) if t in labels else declared.get(numbers[t], 5) for t in texts}
    check({"v": {"values": labels, "other": "Other"}}, values)
    assert len(codes) > 500 and len(bins) > 1000 and sum(c < 5 for c in values.values()) > 50


def test_long_integers_near_the_int64_limit_and_overflowing_exponents(tmp_path):
    # 17-19-digit integers around 1e19 (past int64) go to the bin their exact value gives,
    # not a wrapped one; "59999999999E314" (inf as a float) is outside the bins without a
    # RuntimeWarning; a declared value with a NUL is refused (review of the fast paths)
    import warnings
    from decimal import Decimal

    edges = [-1e20, 0, 9.2e18, 1e19, 1e300]
    rng = np.random.default_rng(3)
    texts = [str(int(v)) for v in rng.integers(10**16, 9 * 10**18, 200)]
    texts += ["9999999999999999999", "9223372036854775807", "9223372036854775808",
              "-9223372036854775809", "10000000000000000000", "99999999999999999",
              "9200000000000000000", "-1"] + ["".join(rng.choice(list("0123456789"), 19))
                                             for _ in range(200)]  # fmt: skip
    want = [int(np.searchsorted(edges, float(Decimal(t)), side="right")) - 1 for t in texts]
    (tmp_path / "d.csv").write_text("v\n" + "\n".join(texts) + "\n")
    got = records.read_csv(tmp_path / "d.csv", {"v": {"bins": edges}}).codes[:, 0]
    assert got.tolist() == want
    (tmp_path / "o.csv").write_text("v\n1\n59999999999E314\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(records.RecordsError, match="line 3"):
            records.read_csv(tmp_path / "o.csv", {"v": {"bins": [0, 10]}})
        other = {"v": {"values": ["1", "x"], "other": "x"}}
        assert records.read_csv(tmp_path / "o.csv", other).codes[:, 0].tolist() == [0, 1]
    with pytest.raises(records.RecordsError, match="NUL"):
        records.read_csv(tmp_path / "o.csv", {"v": {"values": ["a\x00", "1"]}})


def test_plain_numbers_skip_the_per_value_coder(tmp_path, monkeypatch):
    # 5000 distinct codes, bin values and categories: coded as whole columns, the per-value
    # rule (records._number) is not consulted for a single one of them
    calls = []
    number = records._number
    monkeypatch.setattr(records, "_number", lambda t: calls.append(t) or number(t))
    n = 5000
    rows = "".join(f"{k},{k / 7:.3f},c{k % 40},{k % 997}\n" for k in range(n))
    (tmp_path / "d.csv").write_text("a,b,c,z\n" + rows)
    dom = {"a": n, "b": {"bins": [0, 100, 800]},
           "c": {"values": [f"c{k}" for k in range(40)]},
           "z": {"values": ["00001", "00002", "Other"], "other": "Other"}}  # fmt: skip
    R = records.read_csv(tmp_path / "d.csv", dom)
    assert R.codes[:, 0].tolist() == list(range(n))
    assert R.codes[:, 1].tolist() == [0 if k / 7 < 100 else 1 for k in range(n)]
    ones, twos = (sum(k % 997 == v for k in range(n)) for v in (1, 2))
    assert R.marginal(["z"]).tolist() == [ones, twos, n - ones - twos]  # 1 is "00001"
    assert len(calls) <= 6  # the labels' numbers, and 1 and 2 (equal to declared numbers)


class ListFrame(FakeFrame):
    """A frame-like object whose columns are plain lists (no dtype)."""

    def __getitem__(self, name):
        return list(self._cols[name])


def test_nan_in_a_list_column_is_missing():
    dom = {"sex": {"values": ["F", "M", "nan", "Other"], "other": "Other"}}
    for missing in [float("nan"), np.nan, None]:
        with pytest.raises(RecordsError, match=r"DataFrame, row 1, column 'sex': an empty value"):
            records.from_frame(ListFrame({"sex": ["F", missing]}), dom)
    R = records.from_frame(ListFrame({"sex": ["F", "nan", "X"], "n": [1.5, 2, 0]}),
                           {**dom, "n": {"bins": [0, 1, 3]}})  # fmt: skip
    assert R.codes.tolist() == [[0, 1], [2, 1], [3, 0]]  # the text "nan" is a value


@pytest.mark.parametrize(
    "missing",
    [np.datetime64("NaT"), np.timedelta64("NaT"), Decimal("NaN"), Decimal("sNaN"), "pd.NaT"],
)
def test_nat_and_decimal_nan_in_object_columns_are_missing(missing):
    pd = pytest.importorskip("pandas")
    missing = pd.NaT if isinstance(missing, str) else missing
    col = np.empty(2, dtype=object)
    col[:] = ["x", missing]
    dom = {"d": {"values": ["x", "NaT", "NaN", "sNaN", "o"], "other": "o"}}
    for frame in [pd.DataFrame({"d": col}), FakeFrame({"d": col}), ListFrame({"d": col})]:
        with pytest.raises(RecordsError, match=r"DataFrame, row 1, column 'd': an empty value"):
            records.from_frame(frame, dom)
    assert records.from_frame(pd.DataFrame({"d": ["NaT", "x"]}), dom).codes.tolist() == [[1], [0]]


def test_exponents_beyond_decimal_range_are_not_numbers(files):
    huge, tiny = "2e99999999999999999999", "5e-99999999999999999999"
    dom = {"b": {"values": ["1e99999999999999999999", "0", "Other"], "other": "Other"}}
    f, d = files(f"b\n{huge}\n{tiny}\n1e99999999999999999999\n0.0\n", dom)
    assert records.read_csv(f, d).codes[:, 0].tolist() == [2, 2, 0, 1]  # not inf, not 0
    for domain, text in [({"b": 3}, tiny), ({"b": {"bins": [0, 10]}}, tiny),
                         ({"b": {"bins": [0, 10]}}, f"-{huge}")]:  # fmt: skip
        f, d = files(f"b\n1\n{text}\n", domain)
        with pytest.raises(RecordsError, match=rf"line 3, column 'b': a non-numeric value '{text}"):
            records.read_csv(f, d)


def test_draft_domain_refuses_exact_duplicate_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    for text in ["a,a\n1,2\n", "\ufeffa,b,a\n1,2,3\n"]:
        (tmp_path / "dup.csv").write_text(text, encoding="utf-8")
        with pytest.raises(RecordsError, match=r"dup.csv: column 'a' appears twice"):
            records.draft_domain(tmp_path / "dup.csv")
    frame = pd.DataFrame([[1, 2]], columns=["a", " a"])
    with pytest.raises(RecordsError, match=r"DataFrame: column 'a' appears twice"):
        records.draft_domain(frame)
    (tmp_path / "ok.csv").write_text("\ufeff a ,b\n1,x\n\n2,y\n", encoding="utf-8")
    spec = records.draft_domain(tmp_path / "ok.csv")
    assert spec == {"a": {"values": ["1", "2"], "numeric": True}, "b": {"values": ["x", "y"]}}


def test_text_read_csv_gives_the_csv_routes_records(adult_dir, files):
    # the README's recommended call: pandas keeps every field's text, so both routes agree;
    # pandas' default read converts TRUE, Infinity, NA, ... and can differ
    pd = pytest.importorskip("pandas")

    def as_text(path):
        return pd.read_csv(path, dtype=str, keep_default_na=False)

    domain = adult_dir / "adult-domain.json"
    R = records.read_csv(adult_dir / "adult.csv", domain)
    assert len(R) > 30000
    frame = as_text(adult_dir / "adult.csv")
    np.testing.assert_array_equal(records.from_frame(frame, domain).codes, R.codes)
    labels = ["TRUE", "FALSE", "True", "Infinity", "inf", "NA", "N/A", "None", "NaN", "nan",
              "null", "#N/A", "1.0", "007", "Other"]  # fmt: skip
    dom = {"flag": {"values": labels, "other": "Other"}, "n": {"bins": [0, 10, 100]}}
    rows = [f"{v},{k}\n" for k, v in enumerate(labels + ["1", "7", " NA ", "-inf", "n/a"])]
    f, d = files(" flag ,n\n" + "".join(rows), dom)
    R = records.read_csv(f, d)
    assert R.codes[:, 0].tolist() == [*range(len(labels)), 12, 13, 5, 14, 14]
    np.testing.assert_array_equal(records.from_frame(as_text(f), d).codes, R.codes)
    with pytest.raises(RecordsError, match="an empty value"):  # the default read: NA → NaN
        records.from_frame(pd.read_csv(f), d)
