"""Selection time of the low-D baselines vs domain size (HDMM Fig. 1(a)'s question: where does
each method stop being practical?), plus the evaluator's exact scoring time for the tree
strategies. Medians of wall-clock seconds; machine shared with other jobs, so read the
scaling, not the absolute numbers.

    python benchmarks/bench_baselines.py                 # 1-D Prefix, n = 2^7 .. 2^13
    python benchmarks/bench_baselines.py --lrm-max 512   # LRM stops being practical early
"""

import argparse
import os

from _util import median_seconds, peak_rss_mb

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.privacy import PureDP

EPS = PureDP(1.0)


def row(name, n, W, params=None, repeats=3, score=True):
    sel = selectors.get(name, **(params or {}))
    t_sel, s = median_seconds(lambda: sel.select(W, EPS), repeats)
    t_eval = float("nan")
    if score:
        t_eval, _ = median_seconds(lambda: evaluate.expected_error(W, s, EPS), repeats)
    print(f"{name:>12} {n:>9} {t_sel:>11.4f} {t_eval:>11.4f} {peak_rss_mb():>8.0f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 1024, 2048, 4096, 8192])
    ap.add_argument("--sides", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--lrm-max", type=int, default=256, help="largest n for LRM")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(f"{'selector':>12} {'N':>9} {'select s':>11} {'score s':>11} {'peak MB':>8}")
    print("-- 1-D Prefix")
    for n in args.sizes:
        W = workloads.prefix(n)
        for name in ("hierarchical", "hb", "privelet", "greedy_h"):
            row(name, n, W, repeats=args.repeats)
        if n <= args.lrm_max:
            row("lrm", n, W, {"max_iter": 100}, repeats=1)
    print("-- 2-D Prefix ⊗ Prefix (N = side²)")
    for m in args.sides:
        W = workloads.kron([workloads.prefix(m), workloads.prefix(m)])
        for name in ("privelet", "hb", "quadtree"):
            row(name, m * m, W, repeats=args.repeats)
    print("-- 1-D All Range (GreedyH's structured (WᵀW)² products)")
    for n in args.sizes:
        row("greedy_h", n, workloads.all_range(n), repeats=1, score=False)
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
