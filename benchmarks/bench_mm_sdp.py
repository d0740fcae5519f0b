"""Program 5.2 (mm_sdp, Li et al. 2010) on all 1-D ranges: solve time vs n, per SDP solver.

The SDP has one n x n PSD variable and a 2n x 2n Schur block (matrix_frac); interior-point
cost grows like n^6. Use the table to set mm_sdp.MAX_SDP_N (the largest n solved within
``--budget`` seconds). Each size runs once (the solves are long); sizes stop growing for a
solver once one exceeds the budget. Every row records the 1-minute load average before and
after it (the machine is shared); ``--out FILE`` also writes the table as Markdown.
"""

import argparse
import os
import sys
import time

from _util import peak_rss_mb

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.privacy import ApproxDP


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64, 96, 128, 192])
    parser.add_argument("--solvers", nargs="+", default=["clarabel", "scs"])
    parser.add_argument("--budget", type=float, default=600.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    pr = ApproxDP(0.5, 1e-4, calibration="eigen_design")
    head = ("solver", "n", "seconds", "err/bound", "peak MB", "load")
    print("{:>9} {:>5} {:>9} {:>12} {:>8} {:>11}".format(*head))
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for solver in args.solvers:
        for n in args.sizes:
            load0 = os.getloadavg()[0]
            W = workloads.all_range(n)
            sel = selectors.get("mm_sdp", solver=solver, max_n=max(args.sizes))
            start = time.perf_counter()
            st = sel.select(W, pr)
            seconds = time.perf_counter() - start
            ratio = evaluate.expected_error(W, st, pr) / evaluate.svd_bound_error(W, pr)
            load = f"{load0:.1f}/{os.getloadavg()[0]:.1f}"
            row = (solver, n, f"{seconds:.2f}", f"{ratio:.5f}", f"{peak_rss_mb():.0f}", load)
            print("{:>9} {:>5} {:>9} {:>12} {:>8} {:>11}".format(*row), flush=True)
            lines.append("| " + " | ".join(str(c) for c in row) + " |")
            if seconds > args.budget:
                break
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(
                "# mm_sdp (Program 5.2) on all 1-D ranges: solve time vs n\n\n"
                f"`python benchmarks/bench_mm_sdp.py {' '.join(sys.argv[1:])}` — one run per "
                "size, OMP_NUM_THREADS=1, 2 cores shared with other jobs; load = 1-min load "
                "average before/after the row.\n\n" + "\n".join(lines) + "\n"
            )


if __name__ == "__main__":
    main()
