"""svd_bound on all ≤3-way marginals of Synth-10^d, never materialising the workload.

The marginals closed form enumerates the subsets of each workload marginal, so the cost is
O(Σ_a 2^|a|) — about 1.3·10^6 terms at d = 100 — independent of the 10^d domain size. (At
d = 200 the workload's 1.3·10^6 marginals are more than ``workloads.marginals`` builds: it
raises ``TooLargeError``.)
"""

import argparse

from _util import Run, add_json_option, median_seconds, peak_rss_mb

from mmtoolkit import datasets, evaluate, workloads
from mmtoolkit.privacy import ZCDP


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dims", type=int, nargs="+", default=[10, 20, 50, 100])
    parser.add_argument("--repeats", type=int, default=3)
    args = add_json_option(parser).parse_args()
    run = Run(__file__)
    table = run.table(
        f"svd_bound_rmse, all ≤3-way marginals of [10]^d, zCDP ρ = 1/2 (median of {args.repeats})",
        ["d", "marginals", "queries", "seconds", "RMSE bound", "peak MB"],
        ["d", ",", ",", ".3f", ".4f", ".0f"],
    )
    for d in args.dims:
        W = workloads.marginals(datasets.domain("synth", n=10, d=d), 3, lower=True)
        seconds, value = median_seconds(
            lambda W=W: evaluate.svd_bound_rmse(W, ZCDP(0.5)), args.repeats
        )
        table.add(d, len(W.weights), int(W.shape[0]), seconds, value, peak_rss_mb())
    run.write(args.json)


if __name__ == "__main__":
    main()
