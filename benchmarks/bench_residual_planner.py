"""ResidualPlanner scalability on Synth-10^d, all ≤3-way marginals (He et al. Tables 2, 3, 21, 22).

Cases (each run in a fresh subprocess so its peak RSS is its own):

* ``sum``    — selection for the sum of variances (closed form, §6.1) through the registered
  selector on a ``workloads.marginals`` workload (parsing the 2^d-bit keys included);
  paper: 9.9 s at d = 100, 80 s at d = 200 (12-core i7-8700);
* ``max``    — selection for the max variance (cvxpy + CLARABEL, §4.4);
  paper: 0.46 s (d = 30), 4.0 s (d = 50), 121 s (d = 100);
* ``recon``  — reconstruction of every workload marginal from the measured base mechanisms
  (Algorithm 2; measurement from 10,000 random records is timed separately; answers are
  streamed batch by batch, so the peak holds the measurements, not all answers at once);
  paper: 1.0 s (d = 20), 17 s (d = 50), 155 s (d = 100). The target at d = 100:
  measurement ≤ 5 s, reconstruction ≤ 10 s, peak ≤ 1.5 GB (the measurements alone are
  118 million numbers, 0.94 GB).

Wall seconds are printed with the process CPU seconds beside them (the machine is shared).

    python benchmarks/bench_residual_planner.py                # the paper's sizes
    python benchmarks/bench_residual_planner.py --max-d 50     # quick: d <= 50
    python benchmarks/bench_residual_planner.py --write        # also results/residual_planner/
    python benchmarks/bench_residual_planner.py --json         # also benchmarks/results/
"""

from __future__ import annotations

import time
from pathlib import Path

from _util import Run, child_cases

PAPER = {
    ("sum", 100): 9.913,
    ("sum", 200): 80.120,
    ("max", 30): 0.461,
    ("max", 50): 4.011,
    ("max", 100): 121.224,
    ("recon", 20): 1.021,
    ("recon", 50): 17.029,
    ("recon", 100): 154.538,
}
DEFAULT = [("sum", 100), ("sum", 200), ("max", 30), ("max", 50), ("max", 100),
           ("recon", 20), ("recon", 50), ("recon", 100)]  # fmt: skip


def run_case(case: str, d: int) -> dict:
    from _util import score_residual_case

    from mmtoolkit import datasets, selectors, workloads
    from mmtoolkit.privacy import ZCDP

    half = ZCDP(0.5)
    out = {"case": case, "d": d}
    start = time.perf_counter()
    W = workloads.marginals(datasets.domain("synth", n=10, d=d), 3, lower=True)
    out["build_s"] = time.perf_counter() - start
    objective = "max" if case == "max" else "sum"
    start = time.perf_counter()
    s = selectors.get("residual_planner", objective=objective).select(W, half)
    out["select_s"] = time.perf_counter() - start
    out["parse_s"] = s.metadata["parse_seconds"]
    plan = s.metadata["plan"]
    out["marginals"] = len(plan.workload.sets)
    out["closure"] = plan.table.num_closure
    return score_residual_case(out, case, d, W, s, half)


def _recon_note(r: dict) -> str:
    return (
        f" (CPU {r['recon_cpu_s']:.1f} s; measure {r['measure_s']:.1f} s, "
        f"CPU {r['measure_cpu_s']:.1f} s)"
    )


def main():
    args, results = child_cases(__file__, run_case, DEFAULT, __doc__)
    if results is None:  # child process
        return
    here = Path(__file__).resolve().parent
    run = Run(__file__)
    table = run.table(
        "Synth-10^d, all ≤3-way marginals, zCDP ρ = 1/2; seconds: selection (sum, max) or "
        "reconstruction (recon); paper: He et al., 12-core i7-8700",
        ["case", "d", "marginals", "closure", "seconds", "paper s", "CPU s", "measure s",
         "measure CPU s", "peak MB", "value"],
        ["", "d", ",", ",", ".2f", "", ".2f", ".2f", ".2f", ".0f", ".4f"],
        note="value: RMSE (sum), max variance (max), number of answers (recon).",
    )  # fmt: skip
    rows = []
    for case, d, r in results:
        if isinstance(r, str):
            table.add(case, d, *[None] * 8, f"failed: {r}")
            continue
        secs = r["recon_s"] if case == "recon" else r["select_s"]
        r["seconds"] = secs
        r["paper_s"] = PAPER[(case, d)]
        rows.append(r)
        table.add(case, d, r["marginals"], r["closure"], secs, r["paper_s"],
                  r.get("recon_cpu_s"), r.get("measure_s"), r.get("measure_cpu_s"),
                  r["peak_mb"], r["value"])  # fmt: skip
    run.write(args.json, records=rows)
    if args.write:
        dest = here.parent / "results" / "residual_planner"
        dest.mkdir(parents=True, exist_ok=True)
        keys = ["case", "d", "marginals", "closure", "seconds", "paper_s", "peak_mb", "value",
                "build_s", "parse_s", "select_s", "measure_s", "recon_s", "measure_cpu_s",
                "recon_cpu_s"]  # fmt: skip
        lines = [",".join(keys)]
        for r in rows:
            lines.append(",".join(str(r.get(k, "")) for k in keys))
        (dest / "scalability.csv").write_text("\n".join(lines) + "\n")
        md = [
            "# ResidualPlanner scalability — Synth-10^d, all ≤3-way marginals",
            "",
            "Measured by `benchmarks/bench_residual_planner.py` on a 2-core machine shared with",
            "other jobs (timings under contention); the paper used a 12-core i7-8700 (Tables 2-3,",
            "21-22). `sum`/`max` = selection (the registered selector on a `workloads.marginals`",
            "workload, key parsing included); `recon` = reconstruction of every workload marginal",
            "(Algorithm 2), measurement from 10,000 records timed separately. `value` = RMSE",
            "(sum), max variance (max) or number of reconstructed cells (recon).",
            "",
            "| case | d | marginals | closure | seconds (ours) | paper s | peak MB | value |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            extra = _recon_note(r) if r["case"] == "recon" else ""
            md.append(
                f"| {r['case']} | {r['d']} | {r['marginals']:,} | {r['closure']:,} | "
                f"{r['seconds']:.2f}{extra} | {r['paper_s']} | {r['peak_mb']:.0f} | "
                f"{r['value']:.4f} |"
            )
        (dest / "scalability.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
