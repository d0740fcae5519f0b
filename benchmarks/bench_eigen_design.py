"""Eigen-Design (Li & Miklau 2012) on all 1-D ranges: time vs n for Program 1's solvers.

Columns: the eigendecomposition of WᵀW, Program 1 by the dual multiplicative method (with
its certified gap) and by cvxpy/Clarabel (skipped above ``--clarabel-max``; the digest
reports Clarabel failing at n = 2048), and the separation (group 16) / principal-vector (6%)
reductions. Each size runs once; times are wall-clock seconds.
"""

import argparse
import time

from _util import peak_rss_mb

from mmtoolkit import workloads
from mmtoolkit.selectors.eigen_design import (
    _principal,
    _separation,
    eigen_queries,
    solve_weighting,
    workload_gram,
)


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192])
    parser.add_argument("--tol", type=float, default=1e-6)
    parser.add_argument("--clarabel-max", type=int, default=1024)
    args = parser.parse_args()
    head = (
        "n",
        "eig s",
        "dual s",
        "dual gap",
        "clarabel s",
        "clar/dual",
        "sep16 s",
        "pv6% s",
        "MB",
    )
    print("{:>6} {:>8} {:>8} {:>9} {:>10} {:>10} {:>8} {:>8} {:>7}".format(*head))
    for n in args.sizes:
        t_eig, (sigma, Q) = timed(lambda n=n: eigen_queries(workload_gram(workloads.all_range(n))))
        P = Q * Q
        t_dual, w = timed(solve_weighting, sigma, P, 1, "dual", args.tol)
        if n <= args.clarabel_max:
            try:
                t_cl, wc = timed(solve_weighting, sigma, P, 1, "clarabel")
                clar = f"{t_cl:>10.2f} {wc.value / w.value:>10.6f}"
            except RuntimeError as err:
                clar = f"{'failed':>10} {str(err)[:10]:>10}"
        else:
            clar = f"{'-':>10} {'-':>10}"
        t_sep, _ = timed(_separation, sigma, P, 1, 16, "dual", args.tol, 200_000)
        t_pv, _ = timed(_principal, sigma, P, 1, 0.06, "dual", args.tol, 200_000)
        print(
            f"{n:>6} {t_eig:>8.2f} {t_dual:>8.2f} {w.gap:>9.1e} {clar} {t_sep:>8.2f} "
            f"{t_pv:>8.2f} {peak_rss_mb():>7.0f}",
            flush=True,
        )
        del Q, P


if __name__ == "__main__":
    main()
