"""Evaluate the readings of GreedyH's node criterion (HDMM digest §15: "error restricted to
the node's columns, computed from WᵀW … rank-one update, decay factor 1/b^{depth/2}")
against HDMM Table 4(a) GreedyH/Identity at n = 128 and 1024.

A self-contained dense recursion (independent of
``mmtoolkit.selectors.baselines.greedy_h``): the criterion Gram ``G`` is ``WᵀW`` or
``(WᵀW)²``; the damping ``β = 2^{-depth/2}`` multiplies the node query's squared weight
("alpha"), the cross-child term ("cross"), both or neither; the value passed to the parent
is the damped criterion ("crit") or the exact node error ("exact"). Each strategy is scored
exactly (dense MM formula). Run (≈ 1 min):
``OMP_NUM_THREADS=1 python experiments/baselines/greedy_h_readings.py``.
"""

import itertools

import numpy as np

from mmtoolkit import workloads

PAPER = {  # Table 4(a): printed GreedyH/HDMM ÷ printed Identity/HDMM
    ("all_range", 128): 1.16 / 1.38,
    ("prefix", 128): 1.20 / 1.80,
    ("all_range", 1024): 1.33 / 2.36,
    ("prefix", 1024): 1.49 / 3.34,
}


def split(lo, hi):
    n = hi - lo
    if n <= 2:
        return [(lo + k, lo + k + 1) for k in range(n)]
    h = n // 2
    return [(lo, lo + h), (lo + h, hi)]


def greedy(G, damp_alpha, damp_cross, propagate, grid=100):
    """Rows (lo, hi, weight) of the greedy strategy; the root is not measured."""

    def rec(lo, hi, depth):
        if hi - lo == 1:
            return G[lo, lo], np.ones(1), [(lo, hi, 1.0)]
        kids = [rec(a, b, depth + 1) for a, b in split(lo, hi)]
        t = sum(k[0] for k in kids)
        u = np.concatenate([k[1] for k in kids])
        s = u.sum()
        q = u @ G[lo:hi, lo:hi] @ u
        q1 = sum(k[1] @ G[a:b, a:b] @ k[1] for k, (a, b) in zip(kids, split(lo, hi)))
        rows = [r for k in kids for r in k[2]]
        if depth == 0:
            return t, u, rows
        beta = 2.0 ** (-depth / 2)
        p = np.arange(grid, 0, -1) / grid
        a2 = (1 - p) ** 2
        a2c = a2 * beta if damp_alpha else a2
        qe = q1 + beta * (q - q1) if damp_cross else q
        E = (t - qe * a2c / (p**2 + a2c * s)) / p**2
        j = int(np.argmin(E))
        P, A2 = p[j], a2[j]
        err = E[j] if propagate == "crit" else (t - q * A2 / (P**2 + A2 * s)) / P**2
        rows = [(lo, hi, 1 - P)] + [(a, b, P * w) for a, b, w in rows]
        return err, u / (P**2 + A2 * s), rows

    return rec(0, G.shape[0], 0)[2]


def ratio_to_identity(K, rows):
    A = np.zeros((len(rows), K.shape[0]))
    for i, (lo, hi, w) in enumerate(rows):
        A[i, lo:hi] = w
    sens = np.abs(A).sum(0).max()
    return np.sqrt(np.trace(K @ np.linalg.pinv(A.T @ A)) * sens**2 / np.trace(K))


def main():
    grams = {key: getattr(workloads, key[0])(key[1]).gram().dense() for key in PAPER}
    head = " | ".join(f"{k[0]} {k[1]}" for k in PAPER)
    print(f"| G | damp alpha | damp cross | passed up | {head} |")
    print("|---|---|---|---|" + "---:|" * len(PAPER))
    print("| paper | | | | " + " | ".join(f"{v:.4f}" for v in PAPER.values()) + " |")
    for g, da, dc, prop in itertools.product(
        ["WᵀW", "(WᵀW)²"], [False, True], [False, True], ["crit", "exact"]
    ):
        if not (da or dc) and prop == "exact":
            continue  # identical to "crit" without damping
        cells = []
        for K in grams.values():
            G = K if g == "WᵀW" else K @ K
            cells.append(f"{ratio_to_identity(K, greedy(G, da, dc, prop)):.4f}")
        print(f"| {g} | {da} | {dc} | {prop} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
