"""Li & Miklau 2012, Figure 4: error and time of the §4.2 workload reductions on 8192 cells.

For each workload (all 1-D ranges on 8192 cells; all marginals on an 8192-cell domain) the
eigen-queries are computed once, then Program 1 is solved three ways on them — in full
(the optimum; certified dual method), by eigen-query separation (group size 16) and by
principal vectors (6% of the eigen-queries) — and every strategy is scored by the shared
evaluator (its exact OrthoBasis route), against the full optimum and the SVD lower bound.

Settings the paper does not give: the marginal domain is 8 x 16 x 16 x 4 (the census
domain of §5 times a 4-valued attribute) with every marginal (all 16 attribute subsets);
its eigen-queries are the Kronecker products of per-attribute normalised Haar bases — an
exact eigenbasis of WᵀW (verified below; WᵀW is a marginals Gram, constant on the residual
subspaces), chosen instead of a dense eigensolver's arbitrary basis of the repeated
eigenvalues (Program 1's optimum depends on that choice inside an eigenspace).

Error is reported two ways: ``A'`` (the weighted eigen-queries only: the Program 1 value,
cheap) and, with ``--complete``, the full Program 2 strategy with its column-completion
rows (exact but O(n³) per strategy). Percentages are RMSE ratios (sqrt of total squared
error ratios), the paper's "workload error".

Run (each step writes results/eigen_design/fig4_<workload>.json; --table merges them):
    python experiments/eigen_design/fig4_approximations.py all_range --cache /tmp/ed_fig4
    python experiments/eigen_design/fig4_approximations.py all_marginals
    python experiments/eigen_design/fig4_approximations.py --table
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from mmtoolkit import Domain, evaluate, workloads
from mmtoolkit.linalg import Haar
from mmtoolkit.privacy import ApproxDP
from mmtoolkit.selectors.eigen_design import (
    _principal,
    _separation,
    eigen_queries,
    solve_weighting,
    weighted_strategy,
    workload_gram,
)

RESULTS = Path(__file__).resolve().parents[2] / "results" / "eigen_design"
PR = ApproxDP(0.5, 1e-4, calibration="eigen_design")
MARGINAL_SIZES = {8192: [8, 16, 16, 4], 2048: [8, 16, 16], 512: [8, 16, 4], 128: [8, 4, 4]}
#: The paper's error increase over the optimum (Fig. 4 prose, §5.3).
PAPER = {
    ("all_range", "separation (16)"): 5.0,
    ("all_marginals", "separation (16)"): 11.0,
    ("all_range", "principal (6%)"): 10.0,
    ("all_marginals", "principal (6%)"): 0.0,
    ("two_way_marginals", "separation (16)"): 11.0,
    ("two_way_marginals", "principal (6%)"): 0.0,
    ("two_way_marginals", "principal (6% of n)"): 0.0,
}


#: Why a cell differs from the paper (or how it was read), for the 8192-cell rows.
NOTES = {
    ("all_range", "separation (16)"): (
        "ours is far closer to the optimum than the paper's +5% (and +0.05% at 2048 with the "
        "completion rows): each group's Program 1 and the merge over group factors (digest "
        "§7.2 rebuild of the prose) are solved to a certified gap; the paper's merge step is "
        "described only in prose and solved with DSDP — cause not identified"
    ),
    ("all_marginals", "principal (6%)"): (
        "every marginal incl. the full table is full rank, so 94% of the eigen-queries share "
        "one weight across several distinct eigenvalues; see the two_way_marginals rows: on a "
        "low-rank marginal workload with 6% of n (492 of 587 eigen-queries) principal vectors "
        "is exactly optimal, as the paper says"
    ),
    ("two_way_marginals", "principal (6%)"): (
        "6% of the 587 non-zero eigen-queries (36); the paper's '6% of the eigenvectors' read "
        "as 6% of n is the next row"
    ),
    ("two_way_marginals", "principal (6% of n)"): (
        "492 = ceil(0.06·8192) eigen-queries weighted individually, one weight for the other "
        "95: the optimum (the paper: 'the same as optimal on all marginal')"
    ),
}


def build_workload(name: str, n: int):
    if name == "all_range":
        return workloads.all_range(n)
    sizes = MARGINAL_SIZES[n]
    k = 2 if name == "two_way_marginals" else len(sizes)
    return workloads.marginals(Domain.from_sizes(sizes), k=k, lower=True)


def kron_haar_eigenbasis(W, sizes):
    """Eigen-queries of a marginals Gram from Kronecker products of normalised Haar bases,
    sorted by eigenvalue (descending); verified to be eigenvectors of WᵀW."""
    Q = np.ones((1, 1))
    for s in sizes:
        H = Haar(s).dense()
        Q = np.kron(Q, H / np.linalg.norm(H, axis=1)[:, None])
    G = W.gram()
    sigma = np.empty(Q.shape[0])
    worst = 0.0
    for s0 in range(0, Q.shape[0], 512):
        B = Q[s0 : s0 + 512]
        GB = G.matvec(np.ascontiguousarray(B.T))  # n x b
        sigma[s0 : s0 + 512] = np.einsum("ij,ji->i", B, GB)
        worst = max(worst, float(np.abs(GB - B.T * sigma[s0 : s0 + 512]).max()))
    if worst > 1e-8 * sigma.max():
        raise RuntimeError(f"the Kronecker Haar basis is not an eigenbasis (residual {worst:.3g})")
    order = np.argsort(-sigma, kind="stable")
    sigma, Q = sigma[order], Q[order]
    keep = sigma > 1e-10 * sigma[0]
    return sigma[keep], np.ascontiguousarray(Q[keep])


def eigen_step(name, n, W, cache):
    """(σ, Q, seconds, how) — from the cache directory when present."""
    if cache:
        meta, qfile = Path(cache) / f"{name}_meta.npz", Path(cache) / f"{name}_Q.npy"
        if n == 8192 and meta.exists() and qfile.exists():
            m = np.load(meta)
            secs = float(m["gram_s"] + m["eig_s"])
            how = f"cached eigh (load {float(m['load0'][0]):.1f} → {float(m['load'][0]):.1f})"
            return m["sigma"], np.load(qfile), secs, how
    t = time.perf_counter()
    if name == "all_range":
        sigma, Q = eigen_queries(workload_gram(W))
        how = "dense eigh of WᵀW"
    else:
        sigma, Q = kron_haar_eigenbasis(W, MARGINAL_SIZES[n])
        how = "Kronecker Haar eigenbasis"
    return sigma, Q, time.perf_counter() - t, how


def run(name, n, cache, tol, complete, skip_full):
    load0 = os.getloadavg()[0]
    W = build_workload(name, n)
    sigma, Q, t_eig, how = eigen_step(name, n, W, cache)
    print(f"{name} n={n}: eigen-queries {sigma.size} in {t_eig:.1f}s ({how})", flush=True)
    lower = float(np.sum(np.sqrt(sigma)) ** 2 / n)  # Thm 2, from the same eigenvalues
    P = Q * Q
    methods = {}
    if not skip_full:
        methods["full"] = lambda: solve_weighting(sigma, P, 1, "dual", tol)
    methods["separation (16)"] = lambda: _separation(sigma, P, 1, 16, "dual", tol, 200_000)
    methods["principal (6%)"] = lambda: _principal(sigma, P, 1, 0.06, "dual", tol, 200_000)
    if sigma.size < n:  # "6% of the eigenvectors" read as 6% of n (rank-deficient W)
        frac = min(1.0, math.ceil(0.06 * n) / sigma.size)
        methods["principal (6% of n)"] = lambda: _principal(sigma, P, 1, frac, "dual", tol, 200_000)
    out = {
        "workload": name,
        "n": n,
        "rank": int(sigma.size),
        "eigen_seconds": t_eig,
        "eigen_how": how,
        "lower_bound_units": lower,
        "tol": tol,
        "methods": {},
    }
    if name != "all_range":
        out["domain"] = MARGINAL_SIZES[n]
        out["lower_bound_evaluator"] = evaluate.svd_bound(W)
    for label, fn in methods.items():
        t = time.perf_counter()
        res = fn()
        secs = time.perf_counter() - t
        x = res.x if hasattr(res, "x") else res[0]
        rec = {"seconds": secs}
        if hasattr(res, "gap"):
            rec["certified_gap"] = res.gap
            rec["program1_lower"] = res.lower
        A, value = weighted_strategy(Q, x, 1, False, sigma)
        t = time.perf_counter()
        rec["units_A'"] = evaluate.expected_error(W, A, PR) / PR.noise_variance()
        rec["program1_value"] = value
        rec["eval_seconds_A'"] = time.perf_counter() - t
        del A
        if complete:
            A, _ = weighted_strategy(Q, x, 1, True, sigma)
            t = time.perf_counter()
            rec["units_completed"] = evaluate.expected_error(W, A, PR) / PR.noise_variance()
            rec["eval_seconds_completed"] = time.perf_counter() - t
            del A
        out["methods"][label] = rec
        print(label, json.dumps(rec), flush=True)
    out["load_average"] = [load0, os.getloadavg()[0]]
    RESULTS.mkdir(parents=True, exist_ok=True)
    suffix = "" if n == 8192 else f"_{n}"
    (RESULTS / f"fig4_{name}{suffix}.json").write_text(json.dumps(out, indent=1))
    return out


def table():
    from _table import write_table

    rows = []
    for name, suffix in itertools.product(
        ("all_range", "all_marginals", "two_way_marginals"), ("", "_2048")
    ):
        path = RESULTS / f"fig4_{name}{suffix}.json"
        if not path.exists():
            continue
        d = json.loads(path.read_text())
        tag = f"{name} n={d['n']}"
        lb = d["lower_bound_units"]
        full = d["methods"].get("full")
        for label in ("full", "separation (16)", "principal (6%)", "principal (6% of n)"):
            rec = d["methods"].get(label)
            if rec is None:
                continue
            ours, paper, notes = {}, {}, {}
            for kind, key in (("A'", "units_A'"), ("completed", "units_completed")):
                if key not in rec:
                    continue
                ours[f"÷ LB ({kind})"] = math.sqrt(rec[key] / lb)
                if full and key in full:
                    ours[f"% over full ({kind})"] = 100 * (math.sqrt(rec[key] / full[key]) - 1)
            ours["weighting s"] = rec["seconds"]
            ours["eigen s"] = d["eigen_seconds"]
            if (name, label) in PAPER and d["n"] == 8192:
                col = "% over full (completed)"
                if col not in ours:
                    col = "% over full (A')"
                paper[col] = PAPER[(name, label)]
                notes[col] = NOTES.get(
                    (name, label), "paper: error increase over the optimum (Fig. 4 prose)"
                )
            if label == "full" and "certified_gap" in rec:
                gap = max(rec["certified_gap"], 0.0)  # rounding can make it -1e-14
                notes["weighting s"] = f"certified relative gap {gap:.1e}"
            rows.append((f"{tag} — {label}", ours, paper, notes))
    cols = [
        "% over full (A')",
        "% over full (completed)",
        "÷ LB (A')",
        "÷ LB (completed)",
        "weighting s",
        "eigen s",
    ]
    write_table(
        "fig4_approximations",
        "Figure 4 — separation and principal vectors on 8192 cells",
        "Li & Miklau 2012, Fig. 4 and §5.3",
        "RMSE increase over full Eigen-Design (%), RMSE ÷ SVD lower bound, seconds",
        {"kind": "approx", "epsilon": 0.5, "delta": 1.0e-4, "calibration": "eigen_design"},
        {"abs": 3.0},
        cols,
        rows,
        notes=(
            "A': the weighted eigen-queries only (Program 1 value); completed: with the "
            "column-completion rows of Program 2 step 4. Times: wall-clock seconds on 2 cores "
            "shared with other jobs (load averages in the JSON files). Marginal domain "
            "8 x 16 x 16 x 4, all 16 marginals (the paper does not give its 8192-cell domain); "
            "at 2048 cells 8 x 16 x 16, all 8 marginals (a check with the completion rows); "
            "two_way_marginals: all ≤ 2-way marginals of the same domains (low rank)."
        ),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "workload", nargs="?", choices=["all_range", "all_marginals", "two_way_marginals"]
    )
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--cache", default=None)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--complete", action="store_true")
    ap.add_argument("--skip-full", action="store_true")
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args()
    if args.workload:
        run(args.workload, args.n, args.cache, args.tol, args.complete, args.skip_full)
    if args.table:
        table()


if __name__ == "__main__":
    main()
