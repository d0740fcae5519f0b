"""Table 9 of He et al. (§9.3): max variance of prefix-sum generalized marginals, RP+.

Workloads as in the paper's max-variance experiments (digest §4, §8.2): all k-way (k = 1, 2,
3) and all ≤3-way prefix-marginals (numeric attributes → prefix sums, categorical → identity)
on Adult, CPS and Loans, **dropping every set with more than 5000 queries** (the authors'
``workload_large_dataset(choice="maxvar")`` filter; ``workloads.prefix_marginals(...,
max_cells=5000)``). Per-attribute strategies from the fitness-for-use 1-D problem
(``strategy_objective="max"``), σ² from the max-variance program, pcost = 1 (ρ = 1/2). This
script exists for the second accounting below; the HDMM column is computed by the runner
(``configs/residual_planner/table9_hdmm.yaml``).

Two accountings (digest §8.2):

* **consistent** (ours, the ``residual_planner_plus`` selector scored by the shared
  evaluator): noise ``Γ_i = I`` on the residuals of numeric attributes, charged
  ``β_i = max diag(Sub_iᵀSub_i)`` (Thm 7.1);
* **paper code**: the same variances, but charged ``β_i = (n_i - 1)/n_i`` — the privacy cost of
  noise with covariance ``Sub_i Sub_iᵀ``, which the authors' ResPlanMax uses while computing the
  variances of ``Γ_i = I`` noise. These numbers are NOT a valid privacy accounting of any
  mechanism (the noise they describe costs more); they are computed here only to show that
  the paper's printed values come from this bookkeeping (plan-level closed forms, not the
  evaluator).

    python experiments/residual_planner/table9.py
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

from mmtoolkit import datasets, evaluate, selectors, workloads
from mmtoolkit.privacy import ZCDP
from mmtoolkit.selectors.residual_planner.plan import select_max

MAX_CELLS = 5000
HALF = ZCDP(0.5)
PAPER_RP = {
    "adult": (16.247, 88.718, 139.103, 165.942),
    "cps": (7.158, 24.193, 12.814, 28.526),
    "loans": (14.631, 66.074, 90.632, 124.318),
}
PAPER_HDMM = {
    "adult": (105.440, 922.546, 1958.304, 1813.099),
    "cps": (32.788, 160.173, 57.015, 81.030),
    "loans": (87.830, 631.476, 981.259, 1261.880),
}
ROWS = ("1-way", "2-way", "3-way", "≤3-way")


def paper_code_max_variance(plan) -> float:
    """Max variance under the authors' bookkeeping: β_i = (n_i-1)/n_i on every attribute."""
    wl = copy.copy(plan.workload)
    wl.bases = [copy.copy(b) for b in plan.workload.bases]
    for b in wl.bases:
        b.beta = (b.n - 1) / b.n
    wl.__dict__.pop("table", None)
    return select_max(wl).normalized().max_variance()


def main(out: Path):
    lines = [
        "# Table 9 — prefix-sum generalized marginals: RP+ max variance (ρ = 1/2)",
        "",
        "- **Source:** He et al., ResidualPlanner+, Table 9 (final version)",
        f"- **Workloads:** k-way / ≤3-way prefix-marginals, sets with > {MAX_CELLS} queries "
        "dropped (the authors' max-variance filter)",
        "- **RP+ consistent:** `residual_planner_plus(objective='max')` (max-variance 1-D "
        "strategies, Γ = I, β_i = max diag Sub_iᵀSub_i), scored by `evaluate.max_variance`",
        "- **RP+ paper code:** same strategies and variances, charged β_i = (n_i−1)/n_i "
        "(not a valid privacy accounting; reproduces the printed numbers, digest §8.2)",
        "- **Script:** `experiments/residual_planner/table9.py`",
        "",
        "| Workload | RP+ consistent (ours) | RP+ paper-code accounting | RP+ paper | "
        "paper-code vs paper | HDMM paper |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in ("adult", "cps", "loans"):
        dom = datasets.domain(name)
        for r, (k, lower) in enumerate(((1, False), (2, False), (3, False), (3, True))):
            t = time.perf_counter()
            W = workloads.prefix_marginals(dom, k, lower, max_cells=MAX_CELLS)
            s = selectors.get("residual_planner_plus", objective="max").select(W, HALF)
            ours = evaluate.max_variance(W, s, HALF)
            code = paper_code_max_variance(s.metadata["plan"])
            p = PAPER_RP[name][r]
            lines.append(
                f"| {name.capitalize()} {ROWS[r]} prefix | {ours:.3f} | {code:.3f} | {p:.3f} | "
                f"{100 * (code - p) / p:+.2f}% | {PAPER_HDMM[name][r]:.3f} |"
            )
            print(lines[-1], f"({time.perf_counter() - t:.1f} s)", flush=True)
    lines += [
        "",
        "The consistent numbers are the max variance of a mechanism whose privacy cost is "
        "exactly accounted (Thm 7.1 composition bound); they are 1.8-2.9x the printed ones "
        "because the printed ones charge the cheaper Sub·Subᵀ-noise privacy cost for Γ = I "
        "noise. Even so RP+ stays below HDMM (optimised for RMSE) on every row, CPS ≤3-way "
        "narrowly (80.45 vs 81.03). The paper-code column is 1.3-4.4% above the printed values: "
        "the per-attribute strategies differ. Ours are the optimum of the fitness-for-use 1-D "
        "problem (`max_variance_opt`, within 1e-5 of an SDP solve); the authors' come from "
        "their Newton-CG smoothed-barrier solver (TOL 1e-5) and are not the same matrices (the "
        "minimax optimum is not unique). Under the consistent accounting ours do better than "
        "the authors' strategies (digest §8.2, same accounting and filter: Adult 32.199 / "
        "202.845 / 302.172 / 369.235, CPS 13.301 / 71.926 / 26.888 / 81.857, Loans 28.074 / "
        "143.496 / 190.640 / 268.897 vs ours in the first column), under the paper's bookkeeping "
        "(not scale-invariant in Sub_i) theirs come out lower.",
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "table9.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(Path(__file__).resolve().parents[2] / "results" / "residual_planner")
