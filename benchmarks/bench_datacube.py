"""Datacube budgeting (Cormode et al. 2013) and DataCube/BMAX (Ding et al. 2011) timings.

1. F+ on NLTCS all 3-way marginals (d = 16, |F| = 697 coefficients): budget selection, then
   the Fourier-domain recovery of all 560 marginals from noisy coefficients (one draw).
2. Scaling of F+ budgets + recovery on all 2-way marginals of d binary attributes.
3. BMAX on Adult (HDMM's 5-attribute domain, all 32 marginals; and the datacube paper's
   23-bit binary Adult, Q2 at k = 2, lattice over the 8 attribute blocks).
4. Clustering (C) vs the rest (I, Q, F with budgets) on NLTCS selection time.
5. Q+ on Adult's 23 binary attributes, all 2-way marginals over the bits (253 marginals):
   selection, expected error and max variance through the shared evaluator (the marginals
   route on the down-closure of the supports: 277 of the 2^23 subsets).
Medians of wall-clock seconds on a shared machine.
"""

import argparse

import numpy as np
from _util import Run, add_json_option, median_seconds, peak_rss_mb

from mmtoolkit import datasets, evaluate, selectors, workloads
from mmtoolkit.binary_encoding import BinaryEncoding, workload_attribute_sets
from mmtoolkit.privacy import PureDP
from mmtoolkit.selectors.datacube import FourierEstimate


def fourier_pipeline(W, d, rng):
    S = selectors.get("datacube", strategy="F", budget="optimal").select(W, PureDP(1.0))
    F = S.matrix
    var = 2.0 / F.weights**2
    est = FourierEstimate(d)
    est.add_coefficients(F.betas, rng.laplace(size=F.betas.size) * np.sqrt(var / 2), var)
    return [est.marginal(k) for k in W.weights]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dims", type=int, nargs="+", default=[8, 12, 16, 20, 24])
    args = add_json_option(parser).parse_args()
    run = Run(__file__)
    rng = np.random.default_rng(0)
    P = PureDP(1.0)
    reps = f"median of {args.repeats}"

    W = workloads.marginals(datasets.domain("nltcs"), 3)
    sel, _ = median_seconds(
        lambda: selectors.get("datacube", strategy="F", budget="optimal").select(W, P),
        args.repeats,
    )
    full, _ = median_seconds(lambda: fourier_pipeline(W, 16, rng), args.repeats)
    nltcs = run.table(f"[1] F+ on NLTCS, all 3-way marginals ({reps})", ["step", "seconds"],
                      ["", ".4f"])  # fmt: skip
    nltcs.add(f"F+ budgets ({len(W.weights)} marginals)", sel)
    nltcs.add("budgets + recovery of all marginals", full)

    scaling = run.table(
        f"[2] F+ budgets + recovery, all 2-way marginals of d binary attributes ({reps})",
        ["d", "marginals", "seconds", "peak MB"],
        ["d", ",", ".3f", ".0f"],
    )
    for d in args.dims:
        Wd = workloads.marginals([2] * d, 2)
        t, _ = median_seconds(lambda Wd=Wd, d=d: fourier_pipeline(Wd, d, rng), args.repeats)
        scaling.add(d, len(Wd.weights), t, peak_rss_mb())

    bmax = run.table(f"[3] BMAX selection ({reps})", ["case", "seconds", "cuboids"],
                     ["", ".4f", "d"])  # fmt: skip
    Wa = workloads.marginals(datasets.domain("adult_hdmm"), 5, lower=True)
    for mode, variant in (("workload", "bmax"), ("workload", "hdmm_table"), ("lattice", "bmax")):
        t, S = median_seconds(
            lambda mode=mode, variant=variant: selectors.get(
                "ding_datacube", p=2, candidates=mode, variant=variant
            ).select(Wa, P),
            args.repeats,
        )
        bmax.add(f"Adult (HDMM, 32 marginals), candidates={mode}, variant={variant}", t,
                 len(S.metadata["cuboids"]))  # fmt: skip
    enc = BinaryEncoding(datasets.domain("adult_datacube"))
    Wb = enc.marginals(workload_attribute_sets(8, 2, "Q2", seed=0))
    t, S = median_seconds(
        lambda: selectors.get("datacube", strategy="C", budget="optimal").select(Wb, P),
        args.repeats,
    )
    bmax.add(f"Adult binary (23 bits) Q2 k=2 ({len(Wb.weights)} marginals), C+ over the "
             "attribute lattice", t, S.metadata["groups"])  # fmt: skip

    clustering = run.table(
        f"[4] NLTCS selection seconds: clustering vs the rest ({reps})",
        ["workload", "I", "Q+", "F+", "C+", "C+ / slowest other"],
        ["", ".4f", ".4f", ".4f", ".4f", ".0f"],
    )
    enc16 = BinaryEncoding(datasets.domain("nltcs"))
    for k in (1, 2):
        for variant in ("Q1", "Q2", "Q3"):
            Wn = enc16.marginals(workload_attribute_sets(16, k, variant, seed=0, fixed=0))
            times = {}
            for name, s in (("I", "I"), ("Q+", "Q"), ("F+", "F"), ("C+", "C")):
                times[name], _ = median_seconds(
                    lambda s=s, Wn=Wn: selectors.get("datacube", strategy=s).select(Wn, P),
                    args.repeats,
                )
            rest = max(times[n] for n in ("I", "Q+", "F+"))
            clustering.add(f"{variant} k={k}", *times.values(), times["C+"] / rest)

    Wq = workloads.binary_marginals("adult_datacube", 2, over="bits")
    Q = selectors.get("datacube", strategy="Q", budget="optimal")
    t_sel, Sq = median_seconds(lambda: Q.select(Wq, P), args.repeats)
    t_err, err = median_seconds(lambda: evaluate.expected_error(Wq, Sq, P), args.repeats)
    t_max, top = median_seconds(lambda: evaluate.max_variance(Wq, Sq, P), args.repeats)
    q = run.table(
        f"[5] Q+ on Adult binary (23 bits), all 2-way marginals over the bits ({reps})",
        ["step", "seconds", "value"],
        ["", ".4f", ".6g"],
        note="Paper (Cormode et al. §8, Fig. 6): Q and F 'always less than a second, typically "
        "less than a tenth of a second'.",
    )
    q.add(f"select ({len(Wq.weights)} marginals)", t_sel, None)
    q.add("expected error", t_err, err)
    q.add("max variance", t_max, top)
    run.write(args.json)


if __name__ == "__main__":
    main()
