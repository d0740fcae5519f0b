"""Figures 1-3 of He et al. (§6.2, cell fairness): per-cell variance vs marginal size.

Adult (14 attributes), all 470 ≤3-way marginals, pcost = 1, the weighted-sum-of-variances
mechanism with three weightings (closed form, §6.1): equal (Imp = 1, Fig. 1), cell-count
weighted (Imp = #cells, i.e. plain total variance, Fig. 2) and sqrt (Imp = sqrt(#cells),
Fig. 3). Writes results/residual_planner/fig{1,2,3}_*.png and fairness.md (min/max beside the
paper's printed values).

    python experiments/residual_planner/fairness.py
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mmtoolkit import datasets, workloads  # noqa: E402
from mmtoolkit.selectors.residual_planner.plan import select_sum  # noqa: E402
from mmtoolkit.selectors.residual_planner.workload import parse_workload  # noqa: E402

FIGURES = [
    ("fig1_equal", "equal", "Fig. 1: equi-weighted (Imp = 1)", (147.0, 330.0)),
    ("fig2_total", "total", "Fig. 2: cell-count weighted (total variance)", (47.6, 22500.0)),
    ("fig3_sqrt", "sqrt", "Fig. 3: sqrt weighted", (105.0, 2210.0)),
]
PAPER_TEXT = {"fig1_equal": "1.47e2 / 3.30e2", "fig2_total": "4.76e1 / 2.25e4",
              "fig3_sqrt": "1.05e2 / 2.21e3"}  # fmt: skip


def main(out: Path):
    W = workloads.marginals(datasets.domain("adult"), 3, lower=True)
    wl = parse_workload(W, marginals_only=True)
    cells = wl.set_rows()
    order = np.array([len(s) for s in wl.sets])
    lines = [
        "# Cell fairness (He et al. §6.2, Figures 1-3): Adult, 470 ≤3-way marginals, pcost = 1",
        "",
        "| figure | weighting | min cell variance | max cell variance | paper (min / max) |",
        "|---|---|---:|---:|---|",
    ]
    for name, weighting, title, _ in FIGURES:
        plan = select_sum(wl, weighting).normalized()
        var = plan.set_mean_variance()
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for k, color in zip(range(4), ["black", "tab:blue", "tab:orange", "tab:green"]):
            sel = order == k
            ax.scatter(cells[sel], var[sel], s=10, color=color, label=f"{k}-way")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("number of cells in the marginal")
        ax.set_ylabel("per-cell variance")
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=120)
        plt.close(fig)
        lines.append(
            f"| {name} | {weighting} | {var.min():.3f} | {var.max():.3f} | {PAPER_TEXT[name]} |"
        )
    lines += [
        "",
        "The paper prints 3 significant digits; the digest's exact recomputation gives",
        "147.10 / 329.99, 47.556 / 22488.11 and 105.20 / 2201.14 (the authors' repository files",
        "have 147.106 / 330.176 and 105.178 / 2206.05 from a less exact solver path). The maximum",
        "of Fig. 2 is the 0-way total: total-variance weighting starves the small marginals.",
    ]
    (out / "fairness.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[2]
    dest = root / "results" / "residual_planner"
    dest.mkdir(parents=True, exist_ok=True)
    main(dest)
