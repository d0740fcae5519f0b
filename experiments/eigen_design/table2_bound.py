"""Li & Miklau 2012, Table 2 "Bound" column (lower bound / Eigen-Design workload error, RMSE)
on 2048 cells, plus the Fig. 3 absolute-error claims (all 1-D ranges within 1.3 of the
bound, 2-way marginals at the bound). ε = 0.5, δ = 1e-4 (ratios do not depend on them).
The improvement factors need the competitors ([baselines], [datacube]) and are not here yet.
Run: python experiments/eigen_design/table2_bound.py   (≈ 10-20 min on 2 shared cores)
"""

import sys
import time

import numpy as np
from _table import write_table

from mmtoolkit import datasets, evaluate, selectors, workloads
from mmtoolkit.linalg import Dense
from mmtoolkit.privacy import ApproxDP
from mmtoolkit.selectors.eigen_design import eigen_queries, workload_gram

SPEC = {"kind": "approx", "epsilon": 0.5, "delta": 1.0e-4, "calibration": "eigen_design"}
N = 2048


def predicate_workload(m=N, seed=0):
    """Uniformly sampled predicate queries: i.i.d. fair 0/1 coefficients (count not given in
    the paper; m = 2048, seed 0)."""
    return Dense(np.random.default_rng(seed).integers(0, 2, size=(m, N)).astype(float))


def main():
    census = datasets.domain("census_eigen")
    rows_def = [
        ("1D Range (Permuted)", lambda: workloads.permuted(workloads.all_range(N), 0), 0.99),
        ("1-Way Range Marginal", lambda: workloads.range_marginals(census, 1), 0.98),
        ("2-Way Range Marginal", lambda: workloads.range_marginals(census, 2), 0.95),
        ("1D CDF", lambda: workloads.prefix(N), 0.80),
        ("Predicate", predicate_workload, 1.00),
        ("Fig 3(a) all 1D range", lambda: workloads.all_range(N), None),
        ("Fig 3(c) 2-way marginals", lambda: workloads.marginals(census, 2), None),
    ]
    only = sys.argv[1:]
    pr = ApproxDP(0.5, 1e-4, calibration="eigen_design")
    rows = []
    for name, build, paper in rows_def:
        if only and name not in only:
            continue
        W = build()
        st = selectors.get("eigen_design", tol=1e-6).select(W, pr)
        t = time.perf_counter()
        # Scored on the Gram-equivalent n x n workload W0 = D^{1/2} Q (W0ᵀW0 = WᵀW; Li et al.
        # 2010 §5.1): the ratio depends on W only through WᵀW. (configs/eigen_design/
        # table2.yaml scores the original workloads through the evaluator's OrthoBasis route;
        # this script remains the producer of the Predicate row, an explicit random matrix.)
        sigma, Q = eigen_queries(workload_gram(W))
        W0 = Dense(np.sqrt(sigma)[:, None] * Q)
        err = evaluate.expected_error(W0, st, pr)
        lb = evaluate.svd_bound_error(W0, pr)
        err, lb = np.sqrt(err), np.sqrt(lb)
        ev = time.perf_counter() - t
        ours = {"Bound": lb / err, "Eigen / LB": err / lb, "select s": st.seconds}
        pap, notes = {}, {}
        if paper is not None:
            pap["Bound"] = paper
        if name.startswith("Fig 3(a)"):
            notes["Eigen / LB"] = "paper: workload error within 1.3 of the lower bound"
        if name.startswith("Fig 3(c)"):
            notes["Eigen / LB"] = "paper: matches the lower bound (= 1)"
        if name.startswith("Predicate"):
            notes["Bound"] = "query count not stated; m = 2048 uniform 0/1 queries, seed 0"
        if "Range Marginal" in name or "marginals" in name:
            notes.setdefault(
                "Bound", "census_eigen domain 8 x 16 x 16 (age, income ordered; occupation not)"
            )
        rows.append((name, ours, pap, notes))
        print(f"{name}: bound {lb / err:.4f}  select {st.seconds:.1f}s  eval {ev:.1f}s", flush=True)
    write_table(
        "table2_bound",
        "Table 2 (Bound column) and Fig. 3 absolute panels — 2048 cells",
        "Li & Miklau 2012, Table 2 and Fig. 3",
        "Bound = lower-bound RMSE / Eigen-Design RMSE (≤ 1; 1 = optimal)",
        SPEC,
        {"abs": 0.02},
        ["Bound", "Eigen / LB", "select s"],
        rows,
        notes="select s: selection time in seconds on 2 shared cores (under contention).",
    )


if __name__ == "__main__":
    main()
