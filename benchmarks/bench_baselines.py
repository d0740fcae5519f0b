"""Selection time of the low-D baselines vs domain size (HDMM Fig. 1(a)'s question: where does
each method stop being practical?), plus the evaluator's exact scoring time for the tree
strategies. Medians of wall-clock seconds; machine shared with other jobs, so read the
scaling, not the absolute numbers.

    python benchmarks/bench_baselines.py                 # 1-D Prefix, n = 2^7 .. 2^13
    python benchmarks/bench_baselines.py --lrm-max 512   # LRM stops being practical early
"""

import argparse

from _util import Run, add_json_option, median_seconds, peak_rss_mb

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.privacy import PureDP

EPS = PureDP(1.0)


COLUMNS = ["selector", "N", "select s", "score s", "peak MB"]
FORMATS = ["", ",", ".4f", ".4f", ".0f"]


def row(table, name, n, W, params=None, repeats=3, score=True):
    sel = selectors.get(name, **(params or {}))
    t_sel, s = median_seconds(lambda: sel.select(W, EPS), repeats)
    t_eval = None  # not scored
    if score:
        t_eval, _ = median_seconds(lambda: evaluate.expected_error(W, s, EPS), repeats)
    table.add(name, n, t_sel, t_eval, peak_rss_mb())


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 1024, 2048, 4096, 8192])
    ap.add_argument("--sides", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--lrm-max", type=int, default=256, help="largest n for LRM")
    ap.add_argument("--repeats", type=int, default=3)
    args = add_json_option(ap).parse_args()
    run = Run(__file__)
    reps = f"median of {args.repeats}"
    prefix = run.table(f"1-D Prefix, PureDP ε = 1 ({reps}; LRM: one run, 100 iterations)",
                       COLUMNS, FORMATS)  # fmt: skip
    for n in args.sizes:
        W = workloads.prefix(n)
        for name in ("hierarchical", "hb", "privelet", "greedy_h"):
            row(prefix, name, n, W, repeats=args.repeats)
        if n <= args.lrm_max:
            row(prefix, "lrm", n, W, {"max_iter": 100}, repeats=1)
    grid = run.table(f"2-D Prefix ⊗ Prefix, N = side² ({reps})", COLUMNS, FORMATS)
    for m in args.sides:
        W = workloads.kron([workloads.prefix(m), workloads.prefix(m)])
        for name in ("privelet", "hb", "quadtree"):
            row(grid, name, m * m, W, repeats=args.repeats)
    ranges = run.table("1-D All Range, GreedyH selection (one run, not scored)", COLUMNS, FORMATS)
    for n in args.sizes:
        row(ranges, "greedy_h", n, workloads.all_range(n), repeats=1, score=False)
    run.write(args.json)


if __name__ == "__main__":
    main()
