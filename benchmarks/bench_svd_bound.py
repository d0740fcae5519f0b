"""svd_bound on all ≤3-way marginals of Synth-10^d, never materialising the workload.

The marginals closed form enumerates the subsets of each workload marginal, so the cost is
O(Σ_a 2^|a|) — about 1.3·10^6 terms at d = 100 — independent of the 10^d domain size.
"""

import argparse

from _util import median_seconds, peak_rss_mb

from mmtoolkit import datasets, evaluate, workloads
from mmtoolkit.privacy import ZCDP


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dims", type=int, nargs="+", default=[10, 20, 50, 100, 200])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    header = ("d", "marginals", "queries", "seconds", "RMSE bound", "peak MB")
    print("{:>5} {:>10} {:>12} {:>9} {:>11} {:>8}".format(*header))
    for d in args.dims:
        W = workloads.marginals(datasets.domain("synth", n=10, d=d), 3, lower=True)
        seconds, value = median_seconds(
            lambda W=W: evaluate.svd_bound_rmse(W, ZCDP(0.5)), args.repeats
        )
        print(
            f"{d:>5} {len(W.weights):>10,} {W.shape[0]:>12,} {seconds:>9.3f} {value:>11.4f} "
            f"{peak_rss_mb():>8.0f}"
        )


if __name__ == "__main__":
    main()
