"""HDMM Table 3, rows "CPH SF1" and "CPH SF1+" (McKenna et al., PVLDB 2018, §8.1).

Workloads from :mod:`mmtoolkit.census` (``sf1``, ``sf1_plus``). Columns Identity, LM and
HDMM (``hdmm`` selector, Algorithm 2, S restarts, seed 0), PureDP (the ratios are ε-free),
scored by the shared evaluator; Ratio = sqrt(Err(column)/Err(HDMM)) as in Table 3.

Variants (the paper's text does not pin them down, digest §12.1):

* ``relationship``: the §8.1 domain keeps Relationship (17 values, Total in every SF1
  query): N = 500,480 (SF1) / 25,524,480 (SF1+); dropping it gives 29,440 / 1,501,440.
* ``two_or_more``: "flags" (≥ 2 race flags) or "race1_complement" (see mmtoolkit.census).

Besides the ratios the table reports ``LM/Identity`` (independent of HDMM) and the winning
HDMM operator, so each disagreement can be attributed to the workload (Identity, LM) or to
the optimiser (HDMM).

Usage: ``python experiments/hdmm/sf1.py [--restarts 25]``; writes
``results/hdmm/table3_sf1.{csv,md}`` (the CSV in the runner's table format, so the
scoreboard counts these cells) and ``results/hdmm/table3_sf1_detail.csv`` (all numbers).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time
from pathlib import Path

from mmtoolkit import census, evaluate, selectors
from mmtoolkit.privacy import PureDP

OUT = Path(__file__).resolve().parents[2] / "results" / "hdmm"
PRIVACY = PureDP(1.0)
PAPER = {"SF1": {"Identity": 3.07, "LM": 9.32}, "SF1+": {"Identity": 3.16, "LM": 13.7}}
VARIANTS = [
    ("SF1", True, "flags"),
    ("SF1", False, "flags"),
    ("SF1", False, "race1_complement"),
    ("SF1+", True, "flags"),
    ("SF1+", False, "flags"),
]


def run(variants=VARIANTS, restarts: int = 25, seed: int = 0) -> list[dict]:
    rows = []
    for name, rel, two in variants:
        build = census.sf1 if name == "SF1" else census.sf1_plus
        W = build(relationship=rel, two_or_more=two)
        ident = selectors.get("identity").select(W, PRIVACY)
        lm = selectors.get("laplace").select(W, PRIVACY)
        start = time.perf_counter()
        H = selectors.get("hdmm", restarts=restarts, seed=seed).select(W, PRIVACY)
        seconds = time.perf_counter() - start
        e_h = evaluate.expected_error(W, H, PRIVACY)
        e_i = evaluate.expected_error(W, ident, PRIVACY)
        e_l = evaluate.expected_error(W, lm, PRIVACY)
        row = {"workload": name, "relationship": rel, "two_or_more": two, "N": W.shape[1],
               "queries": W.shape[0], "sensitivity": W.sensitivity(1),
               "Identity": math.sqrt(e_i / e_h), "LM": math.sqrt(e_l / e_h),
               "LM_over_Identity": math.sqrt(e_l / e_i),
               "operator": H.metadata.get("operator"), "restarts": restarts,
               "select_seconds": seconds}  # fmt: skip
        for op, loss in H.metadata.get("losses", {}).items():
            row[f"ratio_{op}"] = math.sqrt(H.metadata["losses"]["Identity"] / loss)
        rows.append(row)
        print({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()},
              flush=True)  # fmt: skip
    return rows


#: The runner's table format (mmtoolkit.runner.report), so the scoreboard counts these cells.
RUNNER_COLUMNS = ["row", "column", "ours", "paper", "rel_diff", "within_tol", "seconds", "note"]
TOLERANCE = 0.02  # Table 3 rows: 2% (the bar)
CELL_NOTES = {
    "Identity": (
        "Not reproducible: the paper does not publish its SF1 query list; ours (33 products, "
        "4151 rows, from the digest) has a ≈1.47x larger ‖W‖_F² relative to m·‖W‖₁², so "
        "LM/Identity (HDMM-independent) is {lmi:.3f} vs the paper's {plmi:.3f}{rel}."
    ),
    "LM": (
        "Our HDMM here judges OPT_+ by its separate-answering upper bound (its exact error is "
        "too costly to evaluate during selection at N = 25.5M), so OPT_⊗ wins; Relationship is "
        "Total in every query, so LM/HDMM does not depend on it in exact arithmetic, and the "
        "Relationship-free row (OPT_+ scored exactly) reproduces this cell."
    ),
}


def _row_name(r: dict) -> str:
    rel = "Relationship kept (§8.1 domain)" if r["relationship"] else "Relationship dropped"
    two = "" if r["two_or_more"] == "flags" else f", {r['two_or_more']}"
    return f"CPH {r['workload']} ({rel}{two})"


def runner_rows(rows: list[dict]) -> list[dict]:
    """One runner-format cell per (variant, column), with a note on every miss."""
    out = []
    for r in rows:
        p = PAPER[r["workload"]]
        plmi = p["LM"] / p["Identity"]
        for col, ours, paper in (("Identity", r["Identity"], p["Identity"]),
                                 ("LM", r["LM"], p["LM"]), ("HDMM", 1.0, 1.0)):  # fmt: skip
            ok = abs(ours - paper) <= TOLERANCE * abs(paper)
            note = ""
            if not ok:
                if col == "LM" and r["relationship"]:
                    note = CELL_NOTES["LM"]
                else:
                    rel = (
                        "; keeping Relationship also multiplies Identity's error by 17"
                        if r["relationship"]
                        else ""
                    )
                    note = CELL_NOTES["Identity"].format(
                        lmi=r["LM_over_Identity"], plmi=plmi, rel=rel
                    )
            out.append({"row": _row_name(r), "column": col, "ours": ours, "paper": paper,
                        "rel_diff": (ours - paper) / paper, "within_tol": str(ok).lower(),
                        "seconds": r["select_seconds"] if col == "HDMM" else "",
                        "note": note})  # fmt: skip
    return out


def write(rows: list[dict], out: Path = OUT, load: str = "") -> None:
    out.mkdir(parents=True, exist_ok=True)
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(out / "table3_sf1_detail.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    with open(out / "table3_sf1.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RUNNER_COLUMNS)
        w.writeheader()
        w.writerows(runner_rows(rows))
    lines = [
        "# HDMM Table 3 — CPH SF1 / SF1+ rows (Identity, LM, HDMM)",
        "",
        "Produced by `experiments/hdmm/sf1.py` (workloads: `mmtoolkit.census`). Ratio = "
        "sqrt(Err/Err(HDMM)), shared evaluator, PureDP; HDMM = `hdmm` selector, seed 0. "
        "Identity/OPT columns on the right: Identity's selection loss over each operator's best "
        "(OPT_+ may be the separate-answering upper bound on large domains).",
        "",
        "| workload | Relationship | two-or-more | N | m | ‖W‖₁ | Identity | paper | LM | paper | "
        "LM/Identity | paper | winner | Id/OPT_⊗ | Id/OPT_+ | Id/OPT_M | select s |",
        "|" + "---|" * 17,
    ]
    for r in rows:
        p = PAPER[r["workload"]]
        lines.append(
            f"| {r['workload']} | {'kept' if r['relationship'] else 'dropped'} | "
            f"{r['two_or_more']} | {r['N']:,} | {r['queries']:,} | {r['sensitivity']:g} | "
            f"{r['Identity']:.3f} | {p['Identity']} | {r['LM']:.3f} | {p['LM']} | "
            f"{r['LM_over_Identity']:.3f} | {p['LM'] / p['Identity']:.3f} | {r['operator']} | "
            + " | ".join(f"{r[k]:.3f}" if k in r else "–"
                         for k in ("ratio_OPT_kron", "ratio_OPT_+", "ratio_OPT_M"))
            + f" | {r['select_seconds']:.1f} |"
        )  # fmt: skip
    lines += ["", NOTES]
    if load:
        lines += ["", f"Selection times measured under contention (load average {load})."]
    (out / "table3_sf1.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


NOTES = """Cause of the differences, in one line: the paper does not publish its SF1 query
list, and ours has a ≈1.47x larger ‖W‖_F² relative to m·‖W‖₁².

* LM/Identity = sqrt(m·‖W‖₁²/‖W‖_F²) depends only on the workload. HDMM's error and
  LM/HDMM do not depend on an attribute that is Total in every query (Relationship); only
  Identity's error does (x17).
* Our LM cells reproduce the table (SF1 9.34-9.39 vs 9.32; SF1+ 13.82 vs 13.7 without
  Relationship), while the Identity cells are 1.21-1.22x the paper's even without
  Relationship, by the same factor in both rows.
* SF1+ = SF1 ⊗ [T; I]_51 multiplies m by 52, ‖W‖₁ by 2 and ‖W‖_F² by 102 for any SF1
  list, so (LM/Identity)_SF1+ / (LM/Identity)_SF1 = sqrt(208/102) = 1.428. The paper's
  4.335/3.036 = 1.428 and ours 3.575/2.504 = 1.428 agree: the SF1+ construction is right
  and the whole difference is in the SF1 list. The paper's ‖W‖_F² / (m·‖W‖₁²) must be
  ≈1.47x smaller than that of the 33-product, 4151-row list rebuilt from the digest
  (‖W‖₁ = 41; ‖W‖_F² = 18,924,264, or 18,998,554 with the digest's race1 variant, the value
  it verified). The paper gives only the counts (4151 queries, 10 tables), not the list.
* With Relationship kept, as §8.1 states (N = 500,480), the Identity ratio is 15.5 (paper
  3.07). SF1+ with Relationship (N = 25.5M) is too large for the exact OPT_+ score during
  selection (the separate-answering bound is used), so OPT_⊗ wins and LM is 11.5.
* The HDMM winner is OPT_+ (our signature grouping; the paper does not say how g(W) forms
  its two groups)."""


def read_csv(path: Path) -> list[dict]:
    """The rows written by :func:`write` (numbers and flags parsed back)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        row = {}
        for k, v in r.items():
            if v == "":
                continue
            if k in ("workload", "two_or_more", "operator"):
                row[k] = v
            elif k == "relationship":
                row[k] = v == "True"
            elif k in ("N", "queries", "restarts"):
                row[k] = int(v)
            else:
                row[k] = float(v)
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--restarts", type=int, default=25)
    ap.add_argument("--only", choices=["SF1", "SF1+"], default=None)
    ap.add_argument("--from-csv", action="store_true", help="rewrite the .md from the .csv")
    ap.add_argument("--load", default="", help="with --from-csv: the load average of the run")
    args = ap.parse_args()
    if args.from_csv:
        write(read_csv(OUT / "table3_sf1_detail.csv"), load=args.load)
        return
    variants = [v for v in VARIANTS if args.only in (None, v[0])]
    rows = run(variants, args.restarts)
    write(rows, load=" / ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
