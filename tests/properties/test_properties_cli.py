"""``mmtoolkit release`` and ``mmtoolkit compare`` under random argument combinations.

Each example lays out tiny inputs in a fresh directory — records (``people.csv``) and their
domain file, a records file with a bad value, a domain file with a key given twice, a
ledger, a damaged ledger, a release summary and a damaged one — and calls
``mmtoolkit.cli.main`` in process with a random choice of flags and values: valid ones,
missing files, inputs given as outputs, ``-``, directories, budgets of every sign and size
(``nan``, ``inf``, ``1e-300``), bad selectors and parameters, ...

The property: the exit code is 0 or 2. On 2, stderr ends with exactly one line
``mmtoolkit <command>: error: <message>`` (argparse's usage lines may come before it, as
they do for a flag it cannot parse) and, for ``release``, nothing was written
(docs/guide/release.md: all files are written atomically). On 0, no non-finite number is
printed, the summary is strict JSON with finite numbers and the answers are finite. Never a
traceback (another exception escaping ``main``), never a changed input file.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st
from property_support import (
    captured,
    changed,
    finite_numbers,
    guarded,
    non_finite_words,
    profile,
    snapshot,
    strict_json,
)

from mmtoolkit import Ledger, records
from mmtoolkit.cli import main
from mmtoolkit.privacy import ZCDP

DOMAIN = {
    "age": {"bins": [0, 20, 40, 60, 100]},
    "sex": {"values": ["F", "M"]},
    "region": 3,
}


def _template() -> dict:
    """``{file name: bytes}`` of the inputs; the summary is that of a real release."""
    files = {}
    spec = records.parse_domain(DOMAIN)
    data = records.synthetic(spec, records=40, seed=3)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(spec.domain.names)
    labels = [spec.domain.labels[i] for i in range(len(spec.domain))]
    edges = DOMAIN["age"]["bins"]
    for row in data.codes:
        age = edges[row[0]] + 1  # a raw age inside its bin
        writer.writerow([age, labels[1][row[1]], int(row[2])])
    files["people.csv"] = buf.getvalue().encode()
    files["bad.csv"] = files["people.csv"] + b"200,F,1\n"  # an age outside the bins
    files["people-domain.json"] = json.dumps(DOMAIN).encode()
    files["duplicate-domain.json"] = b'{"age": 5, "sex": 2, "region": 3, "age": 1}'
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            for name in ("people.csv", "people-domain.json"):
                Path(name).write_bytes(files[name])
            ledger = Ledger.create("L.json", rho=1.0)
            ledger.commit(ledger.charge(ZCDP(0.1), description="an earlier release"))
            files["L.json"] = Path("L.json").read_bytes()
            doc = json.loads(files["L.json"])
            doc["entries"][0]["charge"]["rho"] = -5.0  # a negative charge
            files["bad-ledger.json"] = json.dumps(doc).encode()
            release = (
                "release --data people.csv --domain people-domain.json --workload marginals:1 "
                "--selector identity --rho 0.5 --seed 1 --out answers.csv --summary summary.json"
            )
            with captured():
                rc = main(release.split())
            assert rc == 0, "the template release failed"
            summary = json.loads(Path("summary.json").read_text(encoding="utf-8"))
        finally:
            os.chdir(cwd)
    summary["data_file"], summary["domain_file"] = "people.csv", "people-domain.json"
    files["summary.json"] = json.dumps(summary).encode()
    summary["privacy_spec"] = {"kind": "zcdp", "rho": float("nan")}
    files["bad-summary.json"] = json.dumps(summary, allow_nan=True).encode()
    return files


TEMPLATE = _template()

_VALUES = ["1", "0.5", "2", "1e-6", "0", "-1", "-1e-6", "1e-300", "1e300", "nan", "inf", "abc"]
#: Budget flags (a group: the base's ρ, or ε, or ε and δ, or several, or none).
BUDGETS = [
    ("--rho", "0.5"),
    ("--epsilon", "1"),
    ("--epsilon", "1", "--delta", "1e-6"),
    (),
    ("--rho", "0.5", "--epsilon", "1"),
    ("--rho", "0.5", "--delta", "1e-6"),
    *[("--rho", v) for v in _VALUES],
    *[("--epsilon", v) for v in _VALUES],
    *[("--epsilon", "1", "--delta", v) for v in _VALUES],
]
#: The absence of a flag.
ABSENT = None

#: ``{flag: values}`` for release: the first value of a flag is its value in the valid base
#: command (``ABSENT``: not given); the others are what a mutation may put instead.
RELEASE_FLAGS = {
    "--data": ["people.csv", ABSENT, "missing.csv", "bad.csv", "people-domain.json", "."],
    "--domain": [
        "people-domain.json",
        ABSENT,
        "missing.json",
        "duplicate-domain.json",
        "people.csv",
    ],
    "--workload": [
        "marginals:1",
        "marginals:2",
        "identity",
        "prefix_marginals:k=1",
        "marginal:age,sex",
        "all_range:n=24",
        "nope",
        "marginals:k=9",
        "binary_marginals:k=1",
        "{kind: marginals, k: 1, lower: true}",
        ABSENT,
    ],
    "--selector": ["identity", "residual_planner", "hierarchical", "opt_marginals", "nope", ABSENT],
    "--param": [
        ABSENT,
        "restarts=1",
        "seed=2",
        "solver=nope",
        "branching=3",
        "nope=1",
        "=",
        "x=[",
        "maxiter=-1",
    ],
    "budget": BUDGETS,
    "--noise": [ABSENT, "continuous", "discrete", "bogus"],
    "--seed": ["1", "0", "-1", str(2**80), "x", ABSENT],
    "--releases": [ABSENT, "1", "2", "0", "-1"],
    "--nonnegative": [ABSENT, True],
    "--round": [ABSENT, True],
    "--out": [
        "out.csv",
        "sub/out.csv",
        "people.csv",
        "people-domain.json",
        "L.json",
        "-",
        ".",
        "summary.json",
        ABSENT,
    ],
    "--out-dir": [ABSENT, "tables", "people.csv", ".", "new"],
    "--summary": [ABSENT, "s.json", "out.csv", "people.csv", "L.json", "summary.json"],
    "--ledger": [ABSENT, "L.json", "missing-ledger.json", "people.csv", "bad-ledger.json"],
    "--records": [ABSENT, "10", "0", "-1"],
    "--data-seed": [ABSENT, "1", "-1"],
    "--from-summary": [ABSENT, "summary.json", "bad-summary.json", "people.csv", "missing.json"],
    "--select-for": [ABSENT, "marginals:1", "identity", "nope"],
}
COMPARE_FLAGS = {
    "--domain": [
        "2,3",
        "people-domain.json",
        "0,3",
        "x",
        "missing.json",
        "duplicate-domain.json",
        "people.csv",
        ABSENT,
    ],
    "--workload": [
        "marginals:1",
        "marginals:2",
        "all_range:n=8",
        "identity",
        "prefix:n=4",
        "nope",
        "{kind: matrix, rows: [[1, 0], [1, 1]]}",
        "{kind: matrix, rows: [[1, .nan]]}",
        ABSENT,
    ],
    "budget": BUDGETS,
    # every registered selector (no --selectors) is correct but slow: not drawn
    "--selectors": [
        "identity",
        "identity,laplace",
        "hierarchical:branching=2",
        "identity:colour=1",
        "nope",
        "opt0:p=2,restarts=1",
        "residual_planner",
        "hierarchical:branching=nan",
        "identity,",
    ],
    "--objective": [ABSENT, "sum", "max", "bogus"],
    "--timeout": ["0", "20", "-1", "nan", "inf", "1e300", "abc", ABSENT],
    "--seed": [ABSENT, "0", "-1", "x"],
    "-j": [ABSENT, "1", "2", "0", "-1"],
    "--out": [ABSENT, "cmp.csv", "people-domain.json", "-", "sub/x.csv", "."],
    "--plot": [ABSENT, "cmp.png", "cmp.csv", "people.csv"],
    "-q": [True, ABSENT],
}


@st.composite
def command_lines(draw, command: str, flags: dict) -> list[str]:
    """``[command, flags...]``: the valid base command of ``flags`` with up to three
    mutations (a flag set to another of its values, or removed; ``budget`` is a group of
    flags); ``--flag=value`` or ``--flag value`` at random."""
    chosen = {flag: values[0] for flag, values in flags.items()}
    for _ in range(draw(st.integers(0, 3))):
        flag = draw(st.sampled_from(sorted(flags)))
        chosen[flag] = draw(st.sampled_from(flags[flag]))
    args = [command]
    for flag, value in chosen.items():
        pairs = list(zip(value[::2], value[1::2])) if flag == "budget" else [(flag, value)]
        for name, v in pairs:
            if v is ABSENT:
                continue
            if v is True:
                args.append(name)
            elif name.startswith("--") and draw(st.integers(0, 3)) == 0:
                args.append(f"{name}={v}")
            else:
                args += [name, v]
    return args


def run_cli(args: list[str]) -> None:
    """The property (module docstring) for one command line, in a fresh directory."""
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            for name, data in TEMPLATE.items():
                Path(name).write_bytes(data)
            Path("tables").mkdir()
            before = snapshot(Path("."))
            with captured() as (out, err), guarded():
                try:
                    rc = main(list(args))
                except SystemExit as exc:  # argparse: usage lines, then the error line
                    rc = exc.code
                except Exception as exc:  # noqa: BLE001
                    raise AssertionError(
                        f"{type(exc).__name__} escaped main ({exc!r}); stderr: {err.getvalue()}"
                    ) from exc
            after = snapshot(Path("."))
            check_run(args, rc, out.getvalue(), err.getvalue(), before, after)
        finally:
            os.chdir(cwd)


def _values(args: list[str], flag: str) -> list[str]:
    """The values given to ``flag`` (``--flag value`` or ``--flag=value``), in order."""
    out = [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]
    return out + [a.split("=", 1)[1] for a in args if a.startswith(flag + "=")]


def _inputs(args: list[str]) -> set[str]:
    """The files the command line reads (a summary's data and domain files included)."""
    used = {v for flag in ("--data", "--domain", "--from-summary") for v in _values(args, flag)}
    if used & {"summary.json", "bad-summary.json"}:
        used |= {"people.csv", "people-domain.json"}
    return used & set(TEMPLATE)


def _release_outputs(args: list[str], written: list[str]) -> tuple[list[str], list[str]]:
    """``(summaries, answer files)`` a successful release wrote (docs/guide/release.md:
    the summary is ``--summary``, else ``OUT.json``, else
    ``DIR/summary.json``)."""
    out, out_dir, summary = (_values(args, f) for f in ("--out", "--out-dir", "--summary"))
    if summary:
        summaries = [summary[-1]]
    elif out:
        summaries = [out[-1] + ".json"]
    else:
        summaries = [str(Path(out_dir[-1]) / "summary.json")]
    return summaries, [f for f in written if f.endswith(".csv")]


#: The number columns of compare's CSV (empty where a row has no value).
NUMBER_COLUMNS = ("rmse", "total_error", "max_variance", "ratio_to_bound", "select_seconds")


def check_run(args, rc, stdout: str, stderr: str, before: dict, after: dict) -> None:
    command = args[0]
    diff = changed(before, after)
    touched_inputs = sorted(set(diff) & _inputs(args))
    assert not touched_inputs, f"input file(s) changed: {touched_inputs}"
    assert rc in (0, 2), f"exit code {rc!r}; stderr: {stderr!r}"
    if rc == 2:
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert lines, "exit code 2 without a message"
        last = lines[-1]
        prefix = f"mmtoolkit {command}: error: "
        assert last.startswith(prefix) and last[len(prefix) :].strip(), (
            f"the last line of stderr is not '{prefix}<message>': {stderr!r}"
        )
        assert sum("error:" in line for line in lines) == 1, f"several errors: {stderr!r}"
        if len(lines) > 1:  # only argparse prints its usage before the error
            assert lines[0].startswith("usage: "), f"more than one line: {stderr!r}"
        if command == "release":
            assert not diff, f"a failed release wrote or changed files: {sorted(diff)}"
        return
    words = non_finite_words(stdout) + non_finite_words(stderr)
    assert not words, f"non-finite numbers printed: {stdout!r} {stderr!r}"
    if command == "release":
        for line in stderr.splitlines():
            assert line.startswith("mmtoolkit release: warning: "), stderr
        summaries, answers = _release_outputs(args, [n for n in diff if after.get(n)])
        for path in summaries:
            finite_numbers(strict_json(Path(path).read_text(encoding="utf-8")))
        for name in answers:
            with open(name, newline="", encoding="utf-8") as f:
                for row in csv.DictReader(f):
                    for key, value in row.items():
                        if key == "stderr" or key.startswith("answer"):
                            assert not non_finite_words(value), (name, key, value)
    else:
        for line in stderr.splitlines():
            assert not line.startswith("mmtoolkit compare: error"), stderr
        for name in _values(args, "--out")[-1:]:
            with open(name, newline="", encoding="utf-8") as f:
                for row in csv.DictReader(f):
                    for key in NUMBER_COLUMNS:
                        assert not non_finite_words(row[key]), (name, key, row[key])
                    strict_json(row["params"])


#: Known-bad command lines: an ε whose noise variance overflows (inf printed and written), an
#: output that is the --from-summary input, a --timeout that overflows, a compare --out
#: that is its --domain input, a compare whose RMSE overflows (inf in an "ok" row).
EPSILON_1E300 = (
    "release --data people.csv --domain people-domain.json --workload marginals:1 "
    "--selector identity --epsilon 1e-300 --seed 1 --out out.csv"
)
SUMMARY_OVERWRITTEN = "release --from-summary summary.json --out summary.json"
COMPARE = (
    "compare --domain people-domain.json --workload marginals:1 --rho 0.5 --selectors identity"
)


@profile(30)
@given(command_lines("release", RELEASE_FLAGS))
@example(EPSILON_1E300.split())
@example(SUMMARY_OVERWRITTEN.split())
def test_release_exits_0_or_2_with_one_error_line_and_finite_outputs(args):
    run_cli(args)


@profile(20)
@given(command_lines("compare", COMPARE_FLAGS))
@example(f"{COMPARE} --timeout inf".split())
@example(f"{COMPARE} --out people-domain.json".split())
@example("compare --workload all_range:n=8 --epsilon 1e-300 --selectors identity".split())
def test_compare_exits_0_or_2_with_one_error_line_and_finite_outputs(args):
    run_cli(args)
