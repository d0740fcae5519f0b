"""Kronecker mat-vec by the reshape trick on domains up to 10^8 cells (HDMM App. A.5).

Prints the median time of A @ x and Aᵀ @ y for A = ⊗ of d dense p×n factors, and the
process's peak memory relative to the data vector, for growing N = n^d. Then the L1 and L2
sensitivity of HDMM's SF1+ workload (a stack of 33 Kronecker products on N = 25,524,480
cells), maximised over the attributes' column-norm classes without an N-length vector.
"""

import argparse

import numpy as np
from _util import Run, add_json_option, median_seconds, peak_rss_mb

from mmtoolkit import census
from mmtoolkit.linalg import Dense, Kronecker


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-d", type=int, default=4, help="largest number of factors of 100")
    parser.add_argument("--repeats", type=int, default=3)
    args = add_json_option(parser).parse_args()
    run = Run(__file__)
    rng = np.random.default_rng(0)
    scaling = run.table(
        f"A @ x and Aᵀ @ y, A = ⊗ of d dense 100 x 100 factors (median of {args.repeats})",
        ["N", "factors", "A @ x s", "Aᵀ @ y s", "x MB", "peak RSS MB"],
        [",", "", ".3f", ".3f", ".0f", ".0f"],
    )
    for d in range(1, args.max_d + 1):
        n = 100
        A = Kronecker([Dense(rng.random((n, n))) for _ in range(d)])
        x = rng.random(n**d)
        t_fwd, y = median_seconds(lambda A=A, x=x: A @ x, args.repeats)
        t_bwd, _ = median_seconds(lambda A=A, y=y: A.rmatvec(y), args.repeats)
        scaling.add(n**d, f"{d} x {n}x{n}", t_fwd, t_bwd, x.nbytes / 2**20, peak_rss_mb())

    W = census.sf1_plus()
    sens = run.table(
        f"SF1+ sensitivity (N = {W.shape[1]:,}, {len(W.blocks)} Kronecker products; "
        f"median of {args.repeats})",
        ["norm", "sensitivity", "seconds", "peak RSS MB", "paper"],
        ["d", ".6g", ".4f", ".0f", ""],
    )
    for p in (1, 2):
        t, s = median_seconds(lambda p=p: W.sensitivity(p), args.repeats)
        sens.add(p, s, t, peak_rss_mb(), "no figure")
    run.write(args.json)


if __name__ == "__main__":
    main()
