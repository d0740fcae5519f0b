"""Domain: validation, value semantics, projection and records → C-order count vector."""

import pickle

import numpy as np
import pytest

import mmtoolkit as mm
from mmtoolkit.domain import Domain


def test_basic_accessors():
    d = Domain(["sex", "age", "race"], [2, 5, 3], numeric=(False, True, False))
    assert d.names == ("sex", "age", "race")
    assert d.sizes == (2, 5, 3)
    assert d.shape == (2, 5, 3)
    assert d.numeric == (False, True, False)
    assert d.size == 30 and type(d.size) is int
    assert len(d) == 3
    assert list(d) == ["sex", "age", "race"]
    assert "age" in d and "income" not in d
    assert d.index("race") == 2 and d.index(1) == 1
    assert d["age"] == 5 and d[0] == 2
    assert mm.Domain is Domain


def test_from_sizes_and_defaults():
    d = Domain.from_sizes([3, 4])
    assert d.names == ("a0", "a1")
    assert d.numeric == (False, False)
    assert Domain.from_sizes((np.int64(3), 4)).sizes == (3, 4)
    assert all(type(n) is int for n in Domain.from_sizes((np.int64(3), 4)).sizes)


def test_from_dict():
    d = Domain.from_dict({"x": 3, "y": 2}, numeric=["y"])
    assert d == Domain(["x", "y"], [3, 2], [False, True])
    with pytest.raises(ValueError, match="'z'"):
        Domain.from_dict({"x": 3}, numeric=["z"])


def test_huge_domain_size_is_exact():
    d = Domain.from_sizes([10] * 100)
    assert d.size == 10**100
    assert type(d.size) is int
    assert "1.000e+100" in repr(d)


def test_equality_hash_immutability():
    a = Domain(["x", "y"], [2, 3])
    b = Domain(("x", "y"), (2, 3), (False, False))
    assert a == b and hash(a) == hash(b)
    assert a != Domain(["x", "y"], [2, 3], [True, False])
    assert a != Domain(["x", "z"], [2, 3])
    assert a != Domain(["x", "y"], [2, 4])
    assert a != (2, 3)
    with pytest.raises(AttributeError):
        a.sizes = (5, 5)
    with pytest.raises(AttributeError):
        a._sizes = (5, 5)
    assert pickle.loads(pickle.dumps(a)) == a


def test_repr():
    r = repr(Domain(["x", "y"], [2, 3], [True, False]))
    assert r == "Domain(x=2*, y=3; size=6)"


def test_project_keeps_domain_order():
    d = Domain(["a", "b", "c"], [2, 3, 4], [False, True, False])
    p = d.project(["c", "a"])
    assert p == Domain(["a", "c"], [2, 4], [False, False])
    assert d.project([1]) == Domain(["b"], [3], [True])
    assert d.project("b") == Domain(["b"], [3], [True])
    assert d.project([]).size == 1
    with pytest.raises(ValueError, match="'a'.*more than once"):
        d.project(["a", 0])
    with pytest.raises(ValueError, match="unknown attribute 'z'"):
        d.project(["z"])


@pytest.mark.parametrize(
    "args, match",
    [
        ((["x", "y"], [2]), "same length"),
        ((["x"], [2, 3]), "same length"),
        ((["x", "x"], [2, 3]), "unique.*'x'"),
        ((["x", "y"], [2, 0]), "'y'.*positive int"),
        ((["x", "y"], [2, -3]), "'y'.*positive int"),
        ((["x", "y"], [2, 2.5]), "'y'.*positive int"),
        ((["x", "y"], [2, True]), "'y'.*positive int"),
        ((["x", 3], [2, 2]), "names"),
        ((["x", ""], [2, 2]), "names"),
        (("xy", [2, 2]), "names"),
        ((["x", "y"], 5), "sizes"),
        ((["x", "y"], [2, 3], [True]), "numeric"),
        ((["x", "y"], [2, 3], [True, 1]), "numeric flag of attribute 'y'"),
    ],
)
def test_validation(args, match):
    with pytest.raises(ValueError, match=match):
        Domain(*args)


def test_index_errors():
    d = Domain.from_sizes([2, 3])
    with pytest.raises(ValueError, match="unknown attribute 'b'"):
        d.index("b")
    with pytest.raises(ValueError, match="index 2 out of range"):
        d.index(2)
    with pytest.raises(ValueError, match="index -1 out of range"):
        d.index(-1)
    with pytest.raises(ValueError, match="name .* or index"):
        d.index(1.0)


def test_vectorize_against_hand_count():
    d = Domain(["x", "y", "z"], [2, 3, 2])
    records = np.array([[0, 0, 0], [1, 2, 1], [1, 2, 1], [0, 1, 1], [1, 0, 0]])
    x = d.vectorize(records)
    expected = np.zeros(12, dtype=np.int64)
    # C order: cell index = x*6 + y*2 + z
    expected[0] += 1  # (0,0,0)
    expected[11] += 2  # (1,2,1) twice
    expected[3] += 1  # (0,1,1)
    expected[6] += 1  # (1,0,0)
    np.testing.assert_array_equal(x, expected)
    assert x.dtype == np.int64
    # agrees with the C-order reshape of a 3-d histogram
    cube = np.zeros((2, 3, 2), dtype=np.int64)
    for r in records:
        cube[tuple(r)] += 1
    np.testing.assert_array_equal(x, cube.ravel())


def test_vectorize_variants():
    d1 = Domain(["v"], [4])
    np.testing.assert_array_equal(d1.vectorize([3, 3, 0]), [1, 0, 0, 2])
    np.testing.assert_array_equal(d1.vectorize(np.array([[1.0], [1.0]])), [0, 2, 0, 0])
    d2 = Domain.from_sizes([2, 2])
    np.testing.assert_array_equal(d2.vectorize(np.zeros((0, 2), dtype=int)), [0, 0, 0, 0])
    np.testing.assert_array_equal(d2.vectorize([]), [0, 0, 0, 0])


def test_vectorize_real_adult_records(adult_dir):
    import json

    base = adult_dir
    sizes = json.loads((base / "adult-domain.json").read_text())
    dom = Domain.from_dict(sizes).project(["age", "sex", "income>50K"])
    header = (base / "adult.csv").read_text().splitlines()[0].split(",")
    cols = [header.index(c) for c in dom.names]
    data = np.loadtxt(base / "adult.csv", delimiter=",", skiprows=1, dtype=np.int64)[:, cols]
    x = dom.vectorize(data)
    assert x.sum() == 48842
    # independent count of one cell: age code 30, sex 1, income 0
    assert x[30 * 4 + 1 * 2 + 0] == np.sum(
        (data[:, 0] == 30) & (data[:, 1] == 1) & (data[:, 2] == 0)
    )


def test_vectorize_errors():
    d = Domain(["sex", "age"], [2, 5])
    with pytest.raises(ValueError, match="attribute 'age' has value 5"):
        d.vectorize([[0, 1], [1, 5]])
    with pytest.raises(ValueError, match="attribute 'sex' has value -1"):
        d.vectorize([[-1, 1]])
    with pytest.raises(ValueError, match="shape"):
        d.vectorize([[0, 1, 2]])
    with pytest.raises(ValueError, match="shape"):
        d.vectorize([0, 1])
    with pytest.raises(ValueError, match="'age' has a non-integer value 1.5"):
        d.vectorize([[0, 1.5]])
    with pytest.raises(ValueError, match="integer codes"):
        d.vectorize([["a", "b"]])
    with pytest.raises(ValueError, match="too large"):
        Domain.from_sizes([10] * 10).vectorize([[0] * 10])


def test_labels_are_optional_metadata():
    d = Domain(["sex", "age"], [2, 3], [False, True], labels=[["F", "M"], None])
    assert d.labels == (("F", "M"), None)
    assert d.value_labels("sex") == ("F", "M") and d.value_labels(1) == ("0", "1", "2")
    assert d != Domain(["sex", "age"], [2, 3], [False, True])  # labels are part of the value
    assert d.project(["sex"]).labels == (("F", "M"),)
    assert pickle.loads(pickle.dumps(d)) == d and hash(d) == hash(d.with_labels(d.labels))
    assert Domain(["x"], [2], labels={"x": ["a", "b"]}).labels == (("a", "b"),)
    for labels, message in [
        ([["F"], None], r"attribute 'sex' has size 2 but 1 labels"),
        ([["F", "F"], None], r"label 'F' appears twice"),
        ([[0, 1], None], r"labels of attribute 'sex' must be strings"),
        ({"z": ["a"]}, r"labels given for unknown attribute\(s\) \['z'\]"),
        ([None], r"one entry per attribute: 1 given for 2 attributes"),
    ]:
        with pytest.raises(ValueError, match=message):
            Domain(["sex", "age"], [2, 3], labels=labels)
