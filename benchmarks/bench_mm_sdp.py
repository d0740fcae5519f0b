"""Program 5.2 (mm_sdp, Li et al. 2010): solve time vs n, per SDP solver, and the dual solver.

The SDP has one n x n PSD variable and a 2n x 2n Schur block (matrix_frac); interior-point
cost grows like n^6. Use the table to set mm_sdp.MAX_SDP_N (the largest n solved within
``--budget`` seconds). Each size runs once (the solves are long); sizes stop growing for a
solver once one exceeds the budget. Every row records the 1-minute load average before and
after it (the machine is shared). ``--sizes 8 16 32`` is the quick run. ``--out FILE`` also
writes the cvxpy table as Markdown (``results/eigen_design/bench_mm_sdp.md``).

The second table is the dedicated dual Newton solver (``mm_sdp.optimum``, solver "dual") on
prefixes and all ranges at ``--dual-sizes`` (default 1024 2048 4096): seconds, Newton
iterations, the certified relative duality gap reached, the optimum over the SVD bound
(Li et al. Thm 5.25 units: ``sens₂² · tr(WᵀW (AᵀA)⁺)``) and whether the Gram was split as
persymmetric. ``--dual-sizes`` with no value skips it, ``--solvers`` with none the cvxpy table.
"""

import argparse
import os
import time

from _util import Run, add_json_option, peak_rss_mb

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.privacy import ApproxDP
from mmtoolkit.selectors.eigen_design.gram import workload_gram
from mmtoolkit.selectors.eigen_design.optimum import solve_program_5_2


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64, 96, 128, 192])
    parser.add_argument("--solvers", nargs="*", default=["clarabel", "scs"])
    parser.add_argument("--dual-sizes", type=int, nargs="*", default=[1024, 2048, 4096])
    parser.add_argument("--dual-workloads", nargs="*", default=["prefix", "all_range"])
    parser.add_argument("--budget", type=float, default=600.0)
    parser.add_argument("--out", default=None)
    args = add_json_option(parser).parse_args()
    run = Run(__file__)
    pr = ApproxDP(0.5, 1e-4, calibration="eigen_design")
    table = run.table(
        "mm_sdp on all 1-D ranges, (ε, δ) = (0.5, 1e-4): one solve per size",
        ["solver", "n", "seconds", "err/bound", "peak MB", "load before", "load after"],
        ["", "d", ".2f", ".5f", ".0f", ".1f", ".1f"],
    )
    for solver in args.solvers:
        for n in args.sizes:
            load0 = os.getloadavg()[0]
            W = workloads.all_range(n)
            sel = selectors.get("mm_sdp", solver=solver, max_n=max(args.sizes))
            start = time.perf_counter()
            st = sel.select(W, pr)
            seconds = time.perf_counter() - start
            ratio = evaluate.expected_error(W, st, pr) / evaluate.svd_bound_error(W, pr)
            table.add(solver, n, seconds, ratio, peak_rss_mb(), load0, os.getloadavg()[0])
            if seconds > args.budget:
                break
    dual = run.table(
        "The dual solver of Program 5.2 (solver \"dual\"): one solve per size, progress to stderr",
        ["workload", "n", "seconds", "iterations", "gap", "opt/bound", "persymmetric",
         "peak MB", "load before", "load after"],
        ["", "d", ".1f", "d", ".1e", ".5f", "", ".0f", ".1f", ".1f"],
    )  # fmt: skip
    for n in args.dual_sizes:
        for name in args.dual_workloads:
            load0 = os.getloadavg()[0]
            W = getattr(workloads, name)(n)
            sol = solve_program_5_2(workload_gram(W), verbose=True)
            ratio = sol.value / evaluate.svd_bound(W)
            dual.add(name, n, sol.seconds, sol.iterations, sol.gap, ratio,
                     "yes" if sol.persymmetric else "no", peak_rss_mb(), load0,
                     os.getloadavg()[0])  # fmt: skip
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(
                "# mm_sdp (Program 5.2) on all 1-D ranges: solve time vs n\n\n"
                f"`{run.command}` — one run per size, 2 cores shared with other jobs; load = "
                "1-min load average before/after the row.\n\n" + "\n".join(table.markdown()) + "\n"
            )
    run.write(args.json)


if __name__ == "__main__":
    main()
