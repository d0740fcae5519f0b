"""``mmtoolkit.release`` and its result (mmtoolkit.releasing): labelled tables checked against
pandas ``groupby`` counts of the same records, tables of range / prefix marginals against the
dense workload rows, the measurements post-processing reads, and one seed."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest

import mmtoolkit as mm
from mmtoolkit import records, workloads
from mmtoolkit.cli import main as cli_main
from mmtoolkit.linalg import Kronecker
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.releasing import axis_labels, workload_tables

# ---------------------------------------------------------------- Adult with string categories
ADULT_COLUMNS = ["age", "workclass", "marital-status", "race", "sex", "income>50K"]
AGE_BINS = [17, 25, 35, 45, 55, 65, 102]  # age = 17 + code (Adult's codes start at 17 years)


def _adult_strings(adult_dir):
    """The Adult records as a string-category frame (categories renamed to strings, declared
    in an order other than their codes') and its domain file (age as raw years, binned)."""
    codes = pd.read_csv(adult_dir / "adult.csv", usecols=ADULT_COLUMNS)
    sizes = json.loads((adult_dir / "adult-domain.json").read_text())
    frame = pd.DataFrame({"age": codes["age"] + 17})
    domain = {"age": {"bins": AGE_BINS}}
    for name in ADULT_COLUMNS[1:]:
        labels = [f"{name[:3]}-{chr(ord('a') + k)}" for k in range(sizes[name])]
        frame[name] = [labels[k] for k in codes[name]]
        domain[name] = {"values": labels[::-1]}  # declared in reverse: codes are remapped
    return frame, domain


def _check_tables(result, frame):
    frame = frame.assign(age=pd.cut(frame["age"], AGE_BINS, right=False))
    frame["age"] = frame["age"].map(lambda iv: f"[{int(iv.left)}, {int(iv.right)})")
    tables = result.tables()
    assert len(tables) == 15
    for attrs, table in tables.items():
        truth = frame.groupby(list(attrs)).size()
        got = table["answer"]
        assert np.rint(got.sum()) == len(frame)
        joined = got.to_frame().join(truth.rename("truth"), how="left").fillna(0)
        np.testing.assert_array_equal(np.rint(joined["answer"]), joined["truth"], err_msg=attrs)
        assert (joined["truth"] > 0).sum() == len(truth)  # every observed cell has a label


@pytest.mark.parametrize(
    "selector, params", [("residual_planner", []), ("hdmm", ["--param", "restarts=2"])]
)
def test_adult_string_csv_from_the_cli_equals_groupby(adult_dir, tmp_path, capsys, selector,
                                                      params):  # fmt: skip
    """Done-when: string-category Adult CSV, all 2-way marginals from the CLI with a very large
    budget: the labelled tables equal pandas groupby counts to rounding."""
    frame, domain = _adult_strings(adult_dir)
    frame.to_csv(tmp_path / "adult-strings.csv", index=False)
    (tmp_path / "domain.json").write_text(json.dumps(domain))
    out = tmp_path / "tables"
    argv = ["release", "--data", str(tmp_path / "adult-strings.csv"),
            "--domain", str(tmp_path / "domain.json"), "--workload", "marginals:2",
            "--selector", selector, *params, "--rho", "1e12", "--seed", "5",
            "--out-dir", str(out)]  # fmt: skip
    assert cli_main(argv) == 0, capsys.readouterr().err
    assert len(list(out.glob("*.csv"))) == 15
    table = pd.read_csv(out / "age__sex.csv", dtype={"age": str, "sex": str})
    assert list(table.columns) == ["age", "sex", "answer", "lower", "upper", "stderr"]
    assert table["age"].iloc[0] == "[17, 25)" and table["sex"].iloc[0] == "sex-b"

    class Files:  # the per-marginal CSVs read back as tables, to share the check
        def tables(self):
            got = {}
            for f in out.glob("*.csv"):
                t = pd.read_csv(f, dtype=str, keep_default_na=False)
                values = ("answer", "lower", "upper", "stderr")
                names = tuple(c for c in t.columns if c not in values)
                got[names] = t.set_index(list(names))[["answer"]].astype(float)
            return got

    _check_tables(Files(), frame)


def test_adult_dataframe_through_the_python_api_equals_groupby(adult_dir):
    frame, domain = _adult_strings(adult_dir)
    frame["race"] = pd.Categorical(frame["race"])  # a Categorical column is read by its labels
    result = mm.release(frame, "marginals:2", ZCDP(1e12), "residual_planner", domain=domain,
                        seed=3)  # fmt: skip
    _check_tables(result, frame)
    t = result.table(("sex", "age"))  # any order; domain order in the index
    assert t.index.names == ["age", "sex"] and list(t.columns) == ["answer", "lower", "upper",
                                                                  "stderr"]  # fmt: skip
    assert list(t.index.levels[0]) == ["[17, 25)", "[25, 35)", "[35, 45)", "[45, 55)",
                                       "[55, 65)", "[65, 102)"]  # fmt: skip
    assert list(t.index.levels[1]) == ["sex-b", "sex-a"]  # the declared order
    tidy = result.to_frame()
    assert len(tidy) == result.workload.shape[0] and tidy["marginal"].iloc[0] == "age;workclass"
    assert "records" not in result.summary and result.summary["seed"] == 3  # N is private


# ---------------------------------------------------------------- tables of a workload
def test_range_and_prefix_tables_match_the_dense_workload():
    """Each table's rows are the Kronecker product of its axes' queries: a range label
    ``[b_i, b_j)`` / ``v_i..v_j`` covers exactly the cells its workload row sums."""
    dom = mm.Domain(["age", "sex", "job"], [4, 2, 3], [True, False, True],
                    labels=[None, ["F", "M"], ["lo", "mid", "hi"]])  # fmt: skip
    bins = {"age": np.array([0.0, 20, 40, 60, 80])}
    dom = dom.with_labels([records.bin_labels(bins["age"]), ["F", "M"], ["lo", "mid", "hi"]])
    for W in (workloads.range_marginals(dom, 2, lower=True), workloads.prefix_marginals(dom, 2)):
        tables = workload_tables(W, dom)
        D = W.dense()
        assert tables[-1].stop == D.shape[0]
        for t in tables:
            rows = D[t.start : t.stop]
            labels = [axis_labels(dom, bins, i, k) for i, k in zip(t.attrs, t.axes, strict=True)]
            for r, cell in enumerate(np.ndindex(*t.shape)):
                covered = rows[r].reshape(dom.sizes) != 0
                for a, i in enumerate(t.attrs):  # the codes of attribute i this row covers
                    axes = tuple(j for j in range(3) if j != i)
                    codes = np.flatnonzero(covered.any(axis=axes))
                    lab = labels[a][cell[a]]
                    name = dom.names[i]
                    if name in bins:
                        e = bins[name]
                        assert lab == f"[{e[codes[0]]:g}, {e[codes[-1] + 1]:g})"
                    else:
                        vals = dom.value_labels(i)
                        want = vals[codes[0]] if len(codes) == 1 else (
                            f"{vals[codes[0]]}..{vals[codes[-1]]}")  # fmt: skip
                        assert lab == want
                    assert np.array_equal(codes, np.arange(codes[0], codes[-1] + 1))
    assert workload_tables(workloads.width_range(24, 3), dom) is None
    assert workload_tables(Kronecker([workloads.prefix(4), workloads.identity(6)]), dom) is None


def test_table_weights_keep_their_sign():
    """A table's weight is the signed factor its rows scale the counts by: ``W x`` on the
    table's rows is ``weight`` times the counts (a negative workload weight included)."""
    dom = mm.Domain(["a", "b"], [3, 2])
    W = workloads.union([workloads.marginal(dom, ["a"]), workloads.marginals(dom, 2)])
    W = mm.linalg.VStack([mm.linalg.Weighted(-2.0, W), workloads.marginal(dom, ["b"])])
    x = np.arange(6.0) + 1.0
    answers = W.matvec(x)
    tables = workload_tables(W, dom)
    assert [t.weight for t in tables] == [-2.0, -2.0, 1.0]
    for t in tables:
        counts = x.reshape(dom.sizes).sum(axis=tuple(i for i in range(2) if i not in t.attrs))
        assert np.array_equal(answers[t.start : t.stop], t.weight * counts.ravel())


def test_tables_total_and_errors():
    R = records.synthetic({"a": 3, "b": 2}, 50, seed=0)
    result = mm.release(R, "marginals:1:lower", PureDP(1e9), "identity", seed=1)
    total = result.table(())
    assert list(total.index) == ["(total)"] and np.rint(total["answer"].iloc[0]) == 50
    with pytest.raises(ValueError, match=r"no table on \('a', 'b'\); it has \(\), \(a\), \(b\)"):
        result.table(("a", "b"))
    rows = mm.release(R, workloads.width_range(6, 2), PureDP(1), "identity", seed=1)
    assert rows.tables_spec is None and list(rows.to_frame().columns) == ["query", "answer",
                                                                          "lower", "upper",
                                                                          "stderr"]  # fmt: skip
    with pytest.raises(ValueError, match="not a union of marginal-type tables"):
        rows.tables()


# ---------------------------------------------------------------- measurements
def test_marginal_measurements_carry_their_noise_scale():
    """OPT_M's strategy is weighted marginals: each measurement is a noisy marginal table with
    the strategy weight divided out; its std is the calibrated σ / weight, and with a huge
    budget the tables are the true marginals."""
    R = records.synthetic({"a": 4, "b": 3, "c": 2}, 300, seed=2)
    result = mm.release(R, "marginals:2", ZCDP(1e10), "opt_marginals", seed=4)
    meas = result.measurements[0]
    assert {m.form for m in meas} == {"marginal"} and meas[0].distribution == "gaussian"
    A = result.strategy.matrix
    sigma = np.sqrt(ZCDP(1e10).noise_variance(A.sensitivity(2)))
    for m in meas:
        truth = R.marginal(list(m.attrs))
        np.testing.assert_allclose(m.values, truth, atol=1e-3)
        theta = A.weights[sum(1 << R.domain.index(n) for n in m.attrs)]
        np.testing.assert_allclose(m.std, sigma / theta)
    rp = mm.release(R, "marginals:2", ZCDP(1e10), "residual_planner", seed=4)
    rmeas = rp.measurements[0]
    assert [m.attrs for m in rmeas] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert {m.form for m in rmeas} == {"reconstructed"}
    np.testing.assert_allclose(rmeas[0].std.ravel(), rp.stderr[:12])


def test_one_seed_python_api_and_two_releases():
    R = records.synthetic({"a": 4, "b": 3}, 100, seed=0)
    a = mm.release(R, "marginals:2", ZCDP(1), "hdmm", params={"restarts": 2}, seed=9)
    b = mm.release(R, "marginals:2", ZCDP(1), "hdmm", params={"restarts": 2}, seed=9)
    assert np.array_equal(a.answers, b.answers) and a.selection_seed == b.selection_seed
    assert a.strategy.params["seed"] == a.selection_seed
    c = mm.release(R, "marginals:2", ZCDP(1), "identity", releases=3, seed=9)
    assert c.answers.shape == (12, 3) and c.spent == {"rho": 3}
    per = [[f"answer_{r}", f"lower_{r}", f"upper_{r}"] for r in (1, 2, 3)]
    assert list(c.table(("a", "b")).columns) == [*sum(per, []), "stderr"]
    one = c.table(("a", "b"), release=1)
    assert list(one.columns) == ["answer", "lower", "upper", "stderr"]
    np.testing.assert_array_equal(one["lower"], c.lower[:, 1])
    np.testing.assert_array_equal(c.table(("a", "b"), release=2)["answer"], c.answers[:, 2])
    for bad in (3, 5):  # out of range: an error naming the field, not a table of stderr only
        with pytest.raises(ValueError, match=rf"release: {bad} is out of range; there are 3 "):
            c.table(("a", "b"), release=bad)
    with pytest.raises(ValueError, match="release: 1 is out of range; there are 1 release"):
        a.table(("a", "b"), release=1)
    with pytest.raises(ValueError, match="seed: must be >= 0"):
        mm.release(R, "marginals:2", ZCDP(1), "identity", seed=-1)
    with pytest.raises(ValueError, match="never inferred from the data"):
        mm.release(pd.DataFrame({"a": [0], "b": [1]}), "marginals:1", ZCDP(1), "identity")


def test_cli_tidy_csv_labels(tmp_path):
    """The CLI's tidy CSV: one labelled row per query, empty outside the marginal."""
    (tmp_path / "p.csv").write_text("sex,job\nF,a\nM,b\n")
    (tmp_path / "d.json").write_text(json.dumps({"sex": {"values": ["F", "M"]},
                                                 "job": {"values": ["a", "b"]}}))  # fmt: skip
    out = tmp_path / "o.csv"
    argv = ["release", "--data", str(tmp_path / "p.csv"), "--domain", str(tmp_path / "d.json"),
            "--workload", "marginals:1", "--selector", "identity", "--rho", "1", "--seed", "0",
            "--out", str(out)]  # fmt: skip
    assert cli_main(argv) == 0
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["query", "marginal", "sex", "job", "answer", "lower", "upper",
                       "stderr"]  # fmt: skip
    assert [r[1:4] for r in rows[1:]] == [["sex", "F", ""], ["sex", "M", ""], ["job", "", "a"],
                                          ["job", "", "b"]]  # fmt: skip


def test_select_for_a_larger_workload(tmp_path):
    """select_for / --select-for: the strategy chosen for one workload answers another; the
    summary gives both expected RMSEs — checked against the dense formula
    sqrt(2 Δ₁²/ε² · tr(WᵀW (AᵀA)⁺) / m) (Li et al. 2010, Prop. 7; pure DP, Laplace) — and
    --from-summary repeats it."""

    def dense_rmse(W, A, eps):
        W, A = W.dense(), A.dense()
        sens = np.abs(A).sum(axis=0).max()
        trace = np.trace(W.T @ W @ np.linalg.pinv(A.T @ A))
        return np.sqrt(2 * sens**2 / eps**2 * trace / W.shape[0])

    R = records.synthetic({"a": 8, "b": 8, "c": 4}, 500, seed=1)
    big = "kron:all_range,all_range,identity"
    res = mm.release(R, "marginal:a,b", PureDP(1.0), "opt_kron", seed=3, select_for=big)
    assert res.answers.shape == (64,)
    assert res.strategy.matrix.shape[1] == 256
    W_big = workloads.kron([workloads.all_range(8), workloads.all_range(8), workloads.identity(4)])
    sel = res.summary["selected_for"]
    assert sel["workload"] == big and sel["queries"] == W_big.shape[0]
    A = res.strategy.matrix
    assert sel["expected_rmse"] == pytest.approx(dense_rmse(W_big, A, 1.0), rel=1e-8)
    W_ab = workloads.kron([workloads.identity(8), workloads.identity(8), workloads.total(4)])
    assert res.summary["expected_rmse"] == pytest.approx(dense_rmse(W_ab, A, 1.0), rel=1e-8)
    (tmp_path / "d.json").write_text(json.dumps({"a": 8, "b": 8, "c": 4}))
    out, again = tmp_path / "o.csv", tmp_path / "again.csv"
    argv = ["release", "--domain", str(tmp_path / "d.json"), "--records", "500",
            "--workload", "marginal:a,b", "--select-for", big, "--selector", "opt_kron",
            "--epsilon", "1", "--seed", "3", "--out", str(out)]  # fmt: skip
    assert cli_main(argv) == 0
    summary = json.loads((tmp_path / "o.csv.json").read_text())
    assert summary["selected_for"]["workload"] == big
    assert cli_main(["release", "--from-summary", str(tmp_path / "o.csv.json"),
                     "--out", str(again)]) == 0  # fmt: skip
    assert out.read_text() == again.read_text()


def test_many_releases_print_progress(monkeypatch, capsys):
    """R releases that take longer than PROGRESS_SECONDS say how far they are (a long run
    used to be silent for minutes); a quick one prints nothing; ``progress=False`` nothing."""
    import io

    import mmtoolkit.releasing as rel

    R = records.synthetic({"a": 3, "b": 2}, 20, seed=0)
    out = io.StringIO()
    mm.release(R, "marginals:1", ZCDP(1), "identity", releases=3, seed=1, progress=out)
    assert out.getvalue() == ""
    monkeypatch.setattr(rel, "PROGRESS_SECONDS", 0.0)
    mm.release(R, "marginals:1", ZCDP(1), "identity", releases=3, seed=1, progress=out)
    lines = out.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == ["release 1/3", "release 2/3"]
    capsys.readouterr()
    mm.release(R, "marginals:1", ZCDP(1), "identity", releases=3, seed=1)  # stderr
    assert capsys.readouterr().err.startswith("release 1/3, ")
    mm.release(R, "marginals:1", ZCDP(1), "identity", releases=3, seed=1, progress=False)
    assert capsys.readouterr().err == ""


def test_a_marginals_strategy_on_another_layout_of_the_cells_reads_the_histogram():
    # HDMM's OPT_M on the flattened cells of a 3-attribute domain (the "identity" workload
    # over 40 x 25 x 100 cells): one marginal on sizes [100000], not the records' layout; its
    # true answers come from the histogram, as a dense product would give them
    from mmtoolkit.linalg import Marginals
    from mmtoolkit.release_handlers import handler

    data = records.synthetic({"a": 4, "b": 5, "c": 3}, 200, seed=2)
    A = Marginals([60], {1: 2.0, 0: 0.5})
    want = A.dense() @ data.vector(np.float64)
    assert np.allclose(handler(A).answer_records(A, data), want, rtol=1e-12, atol=0)
