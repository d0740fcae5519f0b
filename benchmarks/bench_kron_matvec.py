"""Kronecker mat-vec by the reshape trick on domains up to 10^8 cells (HDMM App. A.5).

Prints the median time of A @ x and Aᵀ @ y for A = ⊗ of d dense p×n factors, and the
process's peak memory relative to the data vector, for growing N = n^d. Then the L1 and L2
sensitivity of HDMM's SF1+ workload (a stack of 33 Kronecker products on N = 25,524,480
cells), maximised over the attributes' column-norm classes without an N-length vector.
"""

import argparse

import numpy as np
from _util import median_seconds, peak_rss_mb

from mmtoolkit import census
from mmtoolkit.linalg import Dense, Kronecker


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-d", type=int, default=4, help="largest number of factors of 100")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'N':>12} {'factors':>12} {'A@x s':>9} {'A.T@y s':>9} {'x MB':>8} {'peak RSS MB':>12}")
    for d in range(1, args.max_d + 1):
        n = 100
        A = Kronecker([Dense(rng.random((n, n))) for _ in range(d)])
        x = rng.random(n**d)
        t_fwd, y = median_seconds(lambda A=A, x=x: A @ x, args.repeats)
        t_bwd, _ = median_seconds(lambda A=A, y=y: A.rmatvec(y), args.repeats)
        print(
            f"{n**d:>12,} {f'{d} x {n}x{n}':>12} {t_fwd:>9.3f} {t_bwd:>9.3f} "
            f"{x.nbytes / 2**20:>8.0f} {peak_rss_mb():>12.0f}"
        )

    W = census.sf1_plus()
    for p in (1, 2):
        t, s = median_seconds(lambda p=p: W.sensitivity(p), args.repeats)
        print(f"SF1+ (N = {W.shape[1]:,}, {len(W.blocks)} products) sensitivity({p}) = {s:.6g}: "
              f"{t:.4f} s, peak RSS {peak_rss_mb():.0f} MB (paper: no figure)")  # fmt: skip


if __name__ == "__main__":
    main()
