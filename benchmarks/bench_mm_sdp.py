"""Program 5.2 (mm_sdp, Li et al. 2010) on all 1-D ranges: solve time vs n, per SDP solver.

The SDP has one n x n PSD variable and a 2n x 2n Schur block (matrix_frac); interior-point
cost grows like n^6. Use the table to set mm_sdp.MAX_SDP_N (the largest n solved within
``--budget`` seconds). Each size runs once (the solves are long); sizes stop growing for a
solver once one exceeds the budget. Every row records the 1-minute load average before and
after it (the machine is shared). ``--sizes 8 16 32`` is the quick run. ``--out FILE`` also
writes the table as Markdown (``results/eigen_design/bench_mm_sdp.md``).
"""

import argparse
import os
import time

from _util import Run, add_json_option, peak_rss_mb

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.privacy import ApproxDP


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64, 96, 128, 192])
    parser.add_argument("--solvers", nargs="+", default=["clarabel", "scs"])
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
