"""Li & Miklau 2012, Figure 4: error and time of the §4.2 workload reductions on 8192 cells.

For each workload (all 1-D ranges on 8192 cells; all marginals on an 8192-cell domain) the
eigen-queries are computed once, then Program 1 is solved three ways on them — in full
(the optimum; certified dual method), by eigen-query separation (group size 16) and by
principal vectors (6% of the eigen-queries) — and every strategy is scored by the shared
evaluator (its exact OrthoBasis route), against the full optimum and the SVD lower bound.

Settings the paper does not give, and how they are read:

* The marginal domain. On a product domain the all-marginals Gram ``Σ_S ⊗_a (I or J)`` has
  one eigenspace per attribute subset T, eigenvalue ``Π_{a∉T}(d_a + 1)`` and dimension
  ``Π_{a∈T}(d_a − 1)``; Program 1 reaches the SVD bound with one common weight per
  eigenspace (∝ eigenvalue^¼: every eigenspace projector has a constant diagonal).
  Principal vectors (6% of the eigen-queries individually weighted, one common weight for
  the rest) is therefore exactly optimal — the paper's "the same as the optimal on all
  marginal" — when the rest lies in the smallest eigenspace (T = every attribute), i.e.
  ``Π(d_a − 1) ≥ n − ⌈0.06 n⌉``. Among power-of-2 shapes of 8192 cells this holds only for
  one attribute (the total and the identity: trivial) and for two attributes of at least 32
  values each (32 x 256: 7905 ≥ 7700; 64 x 128: 8001) and fails
  for every shape of three or more attributes (best 16 x 16 x 32: 6975) — so the paper's
  claim implies a two-attribute domain; we use 128 x 64 (``DOMAINS``). ``--domain`` runs
  any other shape (8 x 16 x 16 x 4, the census domain times a 4-valued attribute, was our
  earlier reading).
* The basis inside repeated eigenvalues. Eigen-query separation's result depends on it (the
  full optimum and principal vectors do not): ``--basis eigensolver`` (default; the
  eigen_design selector's own ``eigen_queries``, a dense symmetric eigensolver, as the
  paper's algorithm computes them, with the canonical basis inside each repeated eigenvalue
  of :mod:`mmtoolkit.linalg.spectral`, so the same on every machine), ``haar`` (Kronecker
  products of per-attribute normalised Haar bases — an exact eigenbasis, verified; localised
  vectors) or ``rotated`` (the eigensolver's basis turned by a seeded random orthogonal
  matrix inside each eigenspace — a generic basis).

Error is reported two ways: ``A'`` (the weighted eigen-queries only: the Program 1 value,
cheap) and, with ``--complete``, the full Program 2 strategy with its column-completion
rows (exact but O(n³) per strategy). Percentages are RMSE ratios (sqrt of total squared
error ratios), the paper's "workload error".

Run (each run writes results/eigen_design/fig4_<workload>[_<n>][_<domain>_<basis>].json;
--table merges them):
    python experiments/eigen_design/fig4_approximations.py all_range --cache /tmp/ed_fig4
    python experiments/eigen_design/fig4_approximations.py all_marginals
    python experiments/eigen_design/fig4_approximations.py all_marginals --basis haar
    python experiments/eigen_design/fig4_approximations.py all_marginals --basis rotated --seed 0
    python experiments/eigen_design/fig4_approximations.py all_marginals --domain 8x16x16x4
    python experiments/eigen_design/fig4_approximations.py --table
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from mmtoolkit import Domain, evaluate, workloads
from mmtoolkit.linalg import Haar
from mmtoolkit.privacy import ApproxDP
from mmtoolkit.selectors.eigen_design.design import (
    eigen_query_separation,
    principal_vectors,
    solve_weighting,
    weighted_strategy,
)
from mmtoolkit.selectors.eigen_design.gram import eigen_queries, workload_gram

RESULTS = Path(__file__).resolve().parents[2] / "results" / "eigen_design"
PR = ApproxDP(0.5, 1e-4, calibration="eigen_design")
#: Default all-marginals domain per n: two attributes (see the module docstring).
DOMAINS = {8192: [128, 64], 2048: [64, 32], 512: [32, 16], 128: [16, 8]}
BASES = ("eigensolver", "haar", "rotated")
METHODS = ("full", "separation (16)", "principal (6%)")
#: The paper's error increase over the optimum (Fig. 4 prose, §5.2), for the default
#: reading (n = 8192, default domain, eigensolver basis).
PAPER = {
    ("all_range", "separation (16)"): 5.0,
    ("all_marginals", "separation (16)"): 11.0,
    ("all_range", "principal (6%)"): 10.0,
    ("all_marginals", "principal (6%)"): 0.0,
}
#: Why a cell differs from the paper (or how it was read), for the compared rows.
NOTES = {
    ("all_range", "separation (16)"): (
        "ours +0.14% over the full optimum (+0.18% at 2048 cells, +0.05% with the completion "
        "rows), the paper +5%: each group's Program 1 and the merge over group factors (digest "
        "§7.2 rebuild of the prose) are solved to a certified gap. Attempts on the merge and "
        "grouping the prose leaves open (Program 1 values on the same 2048-cell eigen-queries, "
        "% over the full optimum): equal group factors (no merge step) +263%; groups of 16 "
        "interleaved by eigenvalue rank +0.10%; random groups of 16 (seed 0) +0.96%; 16 groups "
        "of 128 +0.11% (unmerged +108%): no merged reading comes near +5%. Reading the "
        "percentages against the lower bound instead (the paper estimates, not runs, the full "
        "Eigen-Design at 8192 cells, Fig. 4's baselines are the lower bound, and its prose says "
        "both reductions stay 'less than 12% over the lower bound'): ours over the SVD bound "
        "(÷ LB column) is separation +2.7%, principal +11.7%, the full optimum itself +2.6% "
        "(paper +5% / +10%); that reading fits the prose's 12% but not the 5%. Cause not "
        "established"
    ),
    ("all_marginals", "separation (16)"): (
        "within the paper's +11% (A' bounds the completed strategy's error from above: at "
        "2048 cells completion lowers +0.39% to +0.11%); separation depends on the basis "
        "chosen inside the repeated eigenvalues, which the paper does not state: ours is the "
        "canonical one (Gram-Schmidt on each eigenspace projector's columns, lowest cell "
        "first: localised vectors, the same on every machine), a seeded random rotation of "
        "it gives +3.1% and the Kronecker Haar basis +14.0% on the same workload; LAPACK's "
        "own basis, which moves with the BLAS thread count, gave +5.4% in one run"
    ),
    ("all_marginals", "principal (6%)"): (
        "exactly optimal, as the paper says: on the two-attribute domain the 94% of "
        "eigen-queries sharing one weight all lie in the smallest eigenspace (see the "
        "8x16x16x4 rows for a domain where they do not)"
    ),
}


def parse_domain(text: str) -> list[int]:
    try:
        sizes = [int(t) for t in text.lower().split("x")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 2:
        raise SystemExit(f"--domain must look like 128x64 (sizes >= 2), got {text!r}")
    return sizes


def build_workload(name: str, n: int, sizes: list[int] | None):
    if name == "all_range":
        return workloads.all_range(n)
    if math.prod(sizes) != n:
        raise SystemExit(f"domain {sizes} has {math.prod(sizes)} cells, not n = {n}")
    return workloads.marginals(Domain.from_sizes(sizes), k=len(sizes), lower=True)


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


def rotate_within_eigenspaces(sigma, Q, seed: int, rtol: float = 1e-9):
    """``Q`` with each block of equal eigenvalues (within ``rtol`` of the largest) turned by
    a seeded random orthogonal matrix: another exact eigenbasis, generic inside each
    eigenspace."""
    rng = np.random.default_rng(seed)
    Q = Q.copy()
    edges = np.flatnonzero(np.abs(np.diff(sigma)) > rtol * sigma[0]) + 1
    for lo, hi in zip(np.r_[0, edges], np.r_[edges, sigma.size]):
        if hi - lo > 1:
            R, _ = np.linalg.qr(rng.standard_normal((hi - lo, hi - lo)))
            Q[lo:hi] = R @ Q[lo:hi]
    return Q


def eigen_step(name, n, W, sizes, basis, seed, cache):
    """(σ, Q, seconds, how) — all_range at 8192 from the cache directory when present."""
    if cache and name == "all_range" and n == 8192:
        meta, qfile = Path(cache) / f"{name}_meta.npz", Path(cache) / f"{name}_Q.npy"
        if meta.exists() and qfile.exists():
            m = np.load(meta)
            secs = float(m["gram_s"] + m["eig_s"])
            how = f"cached eigh (load {float(m['load0'][0]):.1f} → {float(m['load'][0]):.1f})"
            return m["sigma"], np.load(qfile), secs, how
    t = time.perf_counter()
    if basis == "haar":
        sigma, Q = kron_haar_eigenbasis(W, sizes)
        how = "Kronecker Haar eigenbasis"
    else:
        sigma, Q = eigen_queries(workload_gram(W))
        how = "dense eigh of WᵀW"
        if basis == "rotated":
            Q = rotate_within_eigenspaces(sigma, Q, seed)
            how += f", rotated inside each eigenspace (seed {seed})"
    return sigma, Q, time.perf_counter() - t, how


def result_path(name, n, sizes, basis, seed) -> Path:
    stem = f"fig4_{name}" + ("" if n == 8192 else f"_{n}")
    if name != "all_range":
        stem += "_" + "x".join(map(str, sizes)) + "_" + basis
        if basis == "rotated":
            stem += str(seed)
    return RESULTS / f"{stem}.json"


def run(name, n, sizes, basis, seed, cache, tol, complete, skip_full):
    load0 = os.getloadavg()[0]
    W = build_workload(name, n, sizes)
    sigma, Q, t_eig, how = eigen_step(name, n, W, sizes, basis, seed, cache)
    print(f"{name} n={n}: eigen-queries {sigma.size} in {t_eig:.1f}s ({how})", flush=True)
    lower = float(np.sum(np.sqrt(sigma)) ** 2 / n)  # Thm 2, from the same eigenvalues
    P = Q * Q
    methods = {}
    if not skip_full:
        methods["full"] = lambda: solve_weighting(sigma, P, 1, "dual", tol)
    methods["separation (16)"] = lambda: eigen_query_separation(
        sigma, P, 1, 16, "dual", tol, 200_000
    )
    methods["principal (6%)"] = lambda: principal_vectors(sigma, P, 1, 0.06, "dual", tol, 200_000)
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
        out.update(domain=sizes, basis=basis, lower_bound_evaluator=evaluate.svd_bound(W))
        if basis == "rotated":
            out["seed"] = seed
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
    result_path(name, n, sizes, basis, seed).write_text(json.dumps(out, indent=1))
    return out


def row_tag(d) -> str:
    tag = f"{d['workload']} n={d['n']}"
    if "domain" in d:
        tag += " " + "x".join(map(str, d["domain"])) + " " + d["basis"]
        if d["basis"] == "rotated":
            tag += f" (seed {d['seed']})"
    return tag


def is_compared(d) -> bool:
    """The rows set beside the paper's numbers: n = 8192, default domain and basis."""
    return d["n"] == 8192 and (
        d["workload"] == "all_range"
        or (d["domain"] == DOMAINS[8192] and d["basis"] == "eigensolver")
    )


def table():
    from _table import write_table

    records = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("fig4_*.json"))]
    records.sort(
        key=lambda d: (
            d["workload"] != "all_range",
            -d["n"],
            not is_compared(d),
            d.get("domain") != DOMAINS.get(d["n"]),
            d.get("domain", []),
            BASES.index(d.get("basis", "eigensolver")),
            d.get("seed", 0),
        )
    )
    rows = []
    for d in records:
        tag, lb, full = row_tag(d), d["lower_bound_units"], d["methods"].get("full")
        for label in METHODS:
            rec = d["methods"].get(label)
            if rec is None:
                continue
            ours, paper, notes = {}, {}, {}
            for kind, key in (("A'", "units_A'"), ("completed", "units_completed")):
                if key not in rec:
                    continue
                ours[f"÷ LB ({kind})"] = math.sqrt(rec[key] / lb)
                if full and key in full:
                    pct = 100 * (math.sqrt(rec[key] / full[key]) - 1)
                    ours[f"% over full ({kind})"] = round(pct, 6) + 0.0  # no -1e-14 / -0.0
            ours["weighting s"] = rec["seconds"]
            ours["eigen s"] = d["eigen_seconds"]
            key = (d["workload"], label)
            if key in PAPER and is_compared(d):
                col = "% over full (completed)"
                if col not in ours:
                    col = "% over full (A')"
                paper[col] = PAPER[key]
                notes[col] = NOTES.get(key, "paper: error increase over the optimum (Fig. 4 prose)")
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
        "Li & Miklau 2012, Fig. 4 and §5.2",
        "RMSE increase over full Eigen-Design (%), RMSE ÷ SVD lower bound, seconds",
        {"kind": "approx", "epsilon": 0.5, "delta": 1.0e-4, "calibration": "eigen_design"},
        {"abs": 3.0},
        cols,
        rows,
        notes=(
            "A': the weighted eigen-queries only (Program 1 value); completed: with the "
            "column-completion rows of Program 2 step 4 (they can only lower the error). "
            "Times: wall-clock seconds on 2 cores shared with other jobs (load averages in "
            "the JSON files). all_marginals: every marginal (all attribute subsets) of the "
            "domain shown. The paper does not give its 8192-cell domain: 128 x 64 is the "
            "reading its principal-vector claim implies (module docstring of "
            "experiments/eigen_design/fig4_approximations.py); 8 x 16 x 16 x 4 was our "
            "earlier reading (census 8 x 16 x 16 times a 4-valued attribute). Basis: the "
            "eigen-queries inside each repeated eigenvalue — eigensolver (the selector's "
            "eigen-queries: a dense eigh, the paper's algorithm, with the canonical basis "
            "inside each repeated eigenvalue, mmtoolkit/linalg/spectral.py), haar (Kronecker "
            "Haar), rotated (seeded random rotation of the eigensolver's basis inside each "
            "eigenspace); separation depends on it, and principal vectors where the 6% cut "
            "falls inside an eigenspace (8x16x16x4). Only the 8192 rows with the default "
            "reading are compared with the paper."
        ),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("workload", nargs="?", choices=["all_range", "all_marginals"])
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--domain", type=parse_domain, default=None, help="e.g. 128x64")
    ap.add_argument("--basis", choices=BASES, default="eigensolver")
    ap.add_argument("--seed", type=int, default=0, help="seed of --basis rotated")
    ap.add_argument("--cache", default=None)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--complete", action="store_true")
    ap.add_argument("--skip-full", action="store_true")
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args()
    if args.workload:
        sizes = args.domain
        if args.workload != "all_range" and sizes is None:
            if args.n not in DOMAINS:
                raise SystemExit(f"no default domain for n = {args.n}: give --domain")
            sizes = DOMAINS[args.n]
        if args.workload == "all_range" and args.basis == "haar":
            raise SystemExit("--basis haar is the Kronecker Haar basis of a marginals domain")
        run(
            args.workload,
            args.n,
            sizes,
            args.basis,
            args.seed,
            args.cache,
            args.tol,
            args.complete,
            args.skip_full,
        )
    if args.table:
        table()


if __name__ == "__main__":
    main()
