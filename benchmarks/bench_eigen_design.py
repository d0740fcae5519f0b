"""Eigen-Design (Li & Miklau 2012) on all 1-D ranges: time vs n for Program 1's solvers.

Columns: the eigendecomposition of WᵀW, Program 1 by the dual multiplicative method (with
its certified gap) and by cvxpy (Clarabel by default; skipped above ``--cvxpy-max``; the
digest reports Clarabel failing at n = 2048), the ratio of the two optima, the
separation (group 16) / principal-vector (6%) reductions, and the peak memory. Each size
runs once; times are wall-clock seconds, with the 1-minute load average before and after
(the machine is shared: compare only rows measured under similar load).
``--out FILE`` also writes the table as Markdown.
"""

import argparse
import os
import time

from _util import Run, add_json_option, peak_rss_mb

from mmtoolkit import workloads
from mmtoolkit.selectors.eigen_design.design import (
    eigen_query_separation,
    principal_vectors,
    solve_weighting,
)
from mmtoolkit.selectors.eigen_design.gram import eigen_queries, workload_gram

HEAD = ["n", "eig s", "dual s", "dual gap", "cvxpy s", "cvxpy/dual", "sep16 s", "pv6% s", "MB",
        "load before", "load after"]  # fmt: skip
FORMATS = ["d", ".2f", ".2f", ".1e", ".2f", ".6f", ".2f", ".2f", ".0f", ".1f", ".1f"]


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192])
    parser.add_argument("--tol", type=float, default=1e-6)
    parser.add_argument("--cvxpy", default="clarabel", choices=["clarabel", "scs", "ecos"])
    parser.add_argument("--cvxpy-max", type=int, default=1024)
    parser.add_argument("--out", default=None)
    args = add_json_option(parser).parse_args()
    run = Run(__file__)
    table = run.table(
        f"Eigen-Design on all 1-D ranges: dual method (tol {args.tol:g}) vs cvxpy/{args.cvxpy}, "
        "one run per size",
        HEAD,
        FORMATS,
    )
    for n in args.sizes:
        load0 = os.getloadavg()[0]
        t_eig, (sigma, Q) = timed(lambda n=n: eigen_queries(workload_gram(workloads.all_range(n))))
        P = Q * Q
        t_dual, w = timed(solve_weighting, sigma, P, 1, "dual", args.tol)
        cv_s, cv_r = None, None  # above --cvxpy-max: not run
        if n <= args.cvxpy_max:
            try:
                cv_s, wc = timed(solve_weighting, sigma, P, 1, args.cvxpy)
                cv_r = wc.value / w.value
            except RuntimeError as err:
                cv_s, cv_r = "failed", str(err)[:30]
        t_sep, _ = timed(eigen_query_separation, sigma, P, 1, 16, "dual", args.tol, 200_000)
        t_pv, _ = timed(principal_vectors, sigma, P, 1, 0.06, "dual", args.tol, 200_000)
        table.add(n, t_eig, t_dual, w.gap, cv_s, cv_r, t_sep, t_pv, peak_rss_mb(), load0,
                  os.getloadavg()[0])  # fmt: skip
        del Q, P
    if args.out:
        text = (
            f"# Eigen-Design on all 1-D ranges: time vs n (dual method vs cvxpy/{args.cvxpy})\n\n"
            f"`{run.command}` — wall-clock seconds, one run per size, 2 cores shared with "
            "other jobs; load = 1-min load average before/after the row.\n\n"
            + "\n".join(table.markdown())
            + "\n"
        )
        with open(args.out, "w") as fh:
            fh.write(text)
    run.write(args.json)


if __name__ == "__main__":
    main()
