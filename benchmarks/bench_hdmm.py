"""HDMM scalability (McKenna et al. 2018, Fig. 6 and Fig. 1d; App. C.5).

1. OPT_0: one objective + gradient evaluation of the p-Identity Woodbury form (p = n/16) at
   N = 1024, 4096, 8192, with the structured AllRange Gram and with a dense Gram (the
   paper: 1.5 s for one objective at N = 8192, O(pN²)).
2. OPT_M: one objective + gradient evaluation for all ≤3-way marginals of [10]^d,
   d = 8..16 (the paper: d ≤ 14, < 10 s up to d = 10; here O(d 2^d)).
3. Measure + reconstruct on big domains: a Kronecker p-Identity strategy on 10^8 cells
   (4 attributes of 100) and a marginals strategy on [10]^8; seconds and peak RSS.
4. Fig. 6 proper (whole optimisations, what the paper's Fig. 6 plots): one OPT_0 run (one
   restart, AllRange, p = n/16, default L-BFGS-B settings) vs N, and one OPT_M run (one
   restart, all ≤3-way marginals of [10]^d) vs d.
5. OPT_0 at n = 1024 (``--opt0-one 8192``: the whole run at n = 8192): one restart,
   p = n/16, seed 0, on Prefix and All Range: wall and CPU seconds,
   the RMSE under PureDP ε = √2 (``sqrt(loss / m)``; the paper: "< 10 s at N = 1024", App.
   C.5) and the Identity/OPT_0 ratio beside Table 4(a)'s.
6. OPT_⊗ on the k-way prefix-marginal unions of Synth-20^20 (ResidualPlanner Table 14,
   k = 1..7: 20 to 77,520 products) and the exact score of an OPT_+ strategy on 10^10 cells
   (Table 13, 1-way): selection and scoring seconds.

``experiments/hdmm/fig6_scalability.py`` plots these tables beside the paper's points.

Writes ``results/hdmm/bench_hdmm.md`` with ``--write`` (read by the Fig. 6 script; a cell not
measured is ``nan`` there), and its JSON record with ``--json``. A quick run:
``--opt0 1024 --optm 8 10 12 --kron 32 32 32 32 --marg-d 6 --opt0-full 256 1024
--optm-full 8 10 12 --prefix-k 1 2 3 --union-d 8``. Timings depend on the machine and
on its load. OPT_0 runs its BLAS on one thread by itself (``opt0.one_blas_thread``); for the
other cases set OMP_NUM_THREADS=1 on a shared machine.
"""

import argparse
import time
from pathlib import Path

import numpy as np
from _util import Run, add_json_option, median_seconds, peak_rss_mb

from mmtoolkit import Domain, evaluate, mechanism, selectors, workloads
from mmtoolkit.linalg import AllRange, Kronecker, Marginals, PIdentity
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.selectors.hdmm._common import GramOperator
from mmtoolkit.selectors.hdmm.opt0 import optimize_pidentity, pidentity_objective
from mmtoolkit.selectors.hdmm.opt_marginals import (
    MarginalsProblem,
    optimize_marginals,
    project_workload,
)


def bench_opt0(run, sizes, repeats, dense_max):
    t = run.table(
        "OPT_0 objective + gradient (AllRange, p = n/16)",
        ["N", "p", "structured Gram s", "dense Gram s"],
        ["d", "d", ".4f", ".4f"],
        note="Paper (HDMM Fig. 6): 1.5 s for one objective at N = 8192.",
    )
    for n in sizes:
        p = n // 16
        theta = np.random.default_rng(0).random((p, n))
        G = GramOperator(AllRange(n).gram())
        ts, _ = median_seconds(lambda G=G, t=theta: pidentity_objective(t, G, 1), repeats)
        td = None  # above --dense-max: not measured
        if n <= dense_max:
            Gd = GramOperator(AllRange(n).gram().dense())
            td, _ = median_seconds(lambda G=Gd, t=theta: pidentity_objective(t, G, 1), repeats)
        t.add(n, p, ts, td)
    return t


def bench_optm(run, dims, repeats):
    t = run.table(
        "OPT_M objective + gradient (all ≤3-way marginals of [10]^d)",
        ["d", "2^d", "projection s", "objective+gradient s"],
        ["d", "d", ".4f", ".5f"],
        note="Paper (HDMM Fig. 6): OPT_M up to d = 14, under 10 s up to d = 10.",
    )
    for d in dims:
        W = workloads.marginals([10] * d, 3, lower=True)
        start = time.perf_counter()
        sizes, theta = project_workload(W)
        tp = time.perf_counter() - start
        prob = MarginalsProblem(sizes, theta)
        theta = np.random.default_rng(0).random(1 << d)
        te, _ = median_seconds(lambda p=prob, t=theta: p.objective(t, 1), repeats)
        t.add(d, 1 << d, tp, te)
    return t


def bench_opt0_full(run, sizes):
    """Seconds of one whole OPT_0 optimisation (HDMM Fig. 6 left)."""
    t = run.table(
        "OPT_0 whole optimisation (AllRange, p = n/16, one restart)",
        ["N", "p", "optimisation s", "loss"],
        ["d", "d", ".3f", ".6g"],
    )
    for n in sizes:
        p = max(1, n // 16)
        G = GramOperator(AllRange(n).gram())
        start = time.perf_counter()
        _, loss = optimize_pidentity(G, p, 1, np.random.default_rng(0))
        t.add(n, p, time.perf_counter() - start, loss)
    return t


#: Table 4(a)'s Identity/HDMM ratios (HDMM = OPT_0 on these 1-D workloads).
TABLE4A = {("Prefix", 1024): 3.34, ("All Range", 1024): 2.36}
TABLE4A.update({("Prefix", 8192): 6.40, ("All Range", 8192): 4.51})


def bench_opt0_one(run, n):
    """One OPT_0 restart (p = n/16, seed 0) on Prefix and All Range: seconds, RMSE and the
    Identity/OPT_0 ratio beside Table 4(a)'s (from n = opt0.LARGE_N: the large-domain path)."""
    t = run.table(
        f"OPT_0 one restart at N = {n} (Prefix, All Range)",
        [
            "workload",
            "N",
            "p",
            "wall s",
            "CPU s",
            "RMSE (ε = √2)",
            "Identity/OPT_0",
            "Identity/OPT_0, paper (Table 4(a))",
        ],
        ["", "d", "d", ".2f", ".2f", ".4f", ".3f", ".2f"],
        note="Paper (HDMM App. C.5): a whole OPT_0 run under 10 s at N = 1024.",
    )
    for name, W in (("Prefix", workloads.prefix(n)), ("All Range", workloads.all_range(n))):
        G = GramOperator(W.gram())
        start, cpu = time.perf_counter(), time.process_time()
        _, loss = optimize_pidentity(G, n // 16, 1, np.random.default_rng(0))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        rmse = np.sqrt(loss / W.shape[0])
        t.add(name, n, n // 16, wall, cpu, rmse, np.sqrt(G.trace / loss), TABLE4A.get((name, n)))
    return t


def bench_optm_full(run, dims):
    """Seconds of one whole OPT_M optimisation incl. the projection (HDMM Fig. 6 right)."""
    t = run.table(
        "OPT_M whole optimisation (all ≤3-way marginals of [10]^d, one restart)",
        ["d", "2^d", "optimisation s", "loss"],
        ["d", "d", ".3f", ".6g"],
    )
    for d in dims:
        W = workloads.marginals([10] * d, 3, lower=True)
        start = time.perf_counter()
        prob = MarginalsProblem(*project_workload(W))
        _, loss = optimize_marginals(prob, 1, np.random.default_rng(0))
        t.add(d, 1 << d, time.perf_counter() - start, loss)
    return t


def bench_mechanism(run, kron_sizes, marg_d):
    rng = np.random.default_rng(0)
    t = run.table(
        "Measure + reconstruct (zero data vector)",
        ["strategy", "N", "measure s", "reconstruct s", "peak RSS MB"],
        ["", ",", ".2f", ".2f", ".0f"],
    )
    cases = []  # an empty --kron list or --marg-d 0 skips that case
    if kron_sizes:
        factors = [PIdentity(rng.random((max(1, n // 16), n))) for n in kron_sizes]
        cases.append((f"Kronecker of {len(kron_sizes)} p-Identity", Kronecker(factors)))
    if marg_d > 0:
        cases.append((f"marginals (≤3-way, [10]^{marg_d})", None))
    for name, A in cases:
        if A is None:
            keys = {k: 1.0 for k in range(1 << marg_d) if bin(k).count("1") <= 3}
            keys[(1 << marg_d) - 1] = 1.0
            A = Marginals([10] * marg_d, keys)
        N = A.shape[1]
        x = np.zeros(N)
        start = time.perf_counter()
        y = mechanism.measure(A, x, PureDP(1.0), rng)
        tm = time.perf_counter() - start
        start = time.perf_counter()
        xhat = mechanism.reconstruct(A, y)
        tr = time.perf_counter() - start
        del y, xhat
        t.add(name, int(N), tm, tr, peak_rss_mb())
    return t


def bench_prefix_unions(run, orders, union_d):
    """OPT_⊗ on the k-way prefix-marginal unions of Synth-20^20 (ResidualPlanner Table 14:
    20 to 77,520 products; p = 20, one restart, default stopping) and the exact score of an
    OPT_+ strategy on the 1-way union of Synth-10^d (Table 13: 10^d cells). Seconds."""
    privacy = ZCDP(0.5)
    t = run.table(
        "OPT_⊗ / OPT_+ on prefix-marginal unions (ResidualPlanner Tables 13-14)",
        ["workload", "products", "selection s", "scoring s", "RMSE"],
        ["", "d", ".2f", ".2f", ".3f"],
        note="The paper gives no HDMM times for these tables.",
    )
    cases = [("opt_kron", 20, 20, k) for k in orders]
    cases += [("opt_union", 10, union_d, 1)] if union_d else []
    for name, n, d, k in cases:
        W = workloads.prefix_marginals(Domain([f"a{i}" for i in range(d)], [n] * d, [True] * d), k)
        start = time.perf_counter()
        s = selectors.get(name, p=n, seed=0).select(W, privacy)
        mid = time.perf_counter()
        rmse = evaluate.rmse(W, s, privacy)
        end = time.perf_counter()
        t.add(f"{name}, {k}-way prefix, Synth-{n}^{d}", len(W.blocks), mid - start, end - mid, rmse)
    return t


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--opt0", type=int, nargs="*", default=[1024, 4096, 8192])
    parser.add_argument("--dense-max", type=int, default=4096)
    parser.add_argument("--optm", type=int, nargs="*", default=list(range(8, 17)))
    parser.add_argument("--kron", type=int, nargs="*", default=[100, 100, 100, 100])
    parser.add_argument("--marg-d", type=int, default=8)
    parser.add_argument("--opt0-full", type=int, nargs="*", default=[256, 1024, 2048, 4096, 8192])
    parser.add_argument("--optm-full", type=int, nargs="*", default=list(range(8, 16)))
    parser.add_argument("--opt0-one", type=int, default=1024, help="0 skips the case")
    parser.add_argument("--prefix-k", type=int, nargs="*", default=list(range(1, 8)))
    parser.add_argument("--union-d", type=int, default=10, help="0 skips the OPT_+ case")
    parser.add_argument("--write", action="store_true")
    args = add_json_option(parser).parse_args()
    run = Run(__file__)
    tables = [bench_opt0(run, args.opt0, args.repeats, args.dense_max)]
    tables.append(bench_optm(run, args.optm, args.repeats))
    tables.append(bench_mechanism(run, args.kron, args.marg_d))
    tables.append(bench_opt0_full(run, args.opt0_full))
    if args.opt0_one:
        tables.append(bench_opt0_one(run, args.opt0_one))
    tables.append(bench_optm_full(run, args.optm_full))
    tables.append(bench_prefix_unions(run, args.prefix_k, args.union_d))
    if args.write:
        out = ["# HDMM benchmarks"]
        for t in tables:  # the Fig. 6 script reads "nan" for a cell not measured
            out += ["", f"## {t.title}", "", *t.markdown(missing="nan")]
        path = Path(__file__).resolve().parents[1] / "results" / "hdmm" / "bench_hdmm.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    run.write(args.json)


if __name__ == "__main__":
    main()
