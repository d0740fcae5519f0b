"""Program 5.2 (mm_sdp, Li et al. 2010) on all 1-D ranges: solve time vs n, per SDP solver.

The SDP has one n x n PSD variable and a 2n x 2n Schur block (matrix_frac); interior-point
cost grows like n^6. Use the table to set mm_sdp.MAX_SDP_N (the largest n solved within
``--budget`` seconds). Each size runs once (the solves are long); sizes stop growing for a
solver once one exceeds the budget.
"""

import argparse
import time

from _util import peak_rss_mb

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.privacy import ApproxDP


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64, 96, 128, 192])
    parser.add_argument("--solvers", nargs="+", default=["clarabel", "scs"])
    parser.add_argument("--budget", type=float, default=600.0)
    args = parser.parse_args()
    pr = ApproxDP(0.5, 1e-4, calibration="eigen_design")
    print("{:>9} {:>5} {:>9} {:>12} {:>8}".format("solver", "n", "seconds", "err/bound", "peak MB"))
    for solver in args.solvers:
        for n in args.sizes:
            W = workloads.all_range(n)
            sel = selectors.get("mm_sdp", solver=solver, max_n=max(args.sizes))
            start = time.perf_counter()
            st = sel.select(W, pr)
            seconds = time.perf_counter() - start
            ratio = evaluate.expected_error(W, st, pr) / evaluate.svd_bound_error(W, pr)
            print(f"{solver:>9} {n:>5} {seconds:>9.2f} {ratio:>12.5f} {peak_rss_mb():>8.0f}")
            if seconds > args.budget:
                break


if __name__ == "__main__":
    main()
