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
import os

import numpy as np
from _util import median_seconds, peak_rss_mb

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
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    P = PureDP(1.0)
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    W = workloads.marginals(datasets.domain("nltcs"), 3)
    sel, _ = median_seconds(
        lambda: selectors.get("datacube", strategy="F", budget="optimal").select(W, P),
        args.repeats,
    )
    full, _ = median_seconds(lambda: fourier_pipeline(W, 16, rng), args.repeats)
    print(f"[1] NLTCS all 3-way (560 marginals): F+ budgets {sel:.4f} s; "
          f"budgets + recovery of all marginals {full:.3f} s")  # fmt: skip

    print("\n[2] F+ budgets + recovery, all 2-way marginals of d binary attributes")
    print("{:>4} {:>10} {:>9} {:>8}".format("d", "marginals", "seconds", "peak MB"))
    for d in args.dims:
        Wd = workloads.marginals([2] * d, 2)
        t, _ = median_seconds(lambda Wd=Wd, d=d: fourier_pipeline(Wd, d, rng), args.repeats)
        print(f"{d:>4} {len(Wd.weights):>10} {t:>9.3f} {peak_rss_mb():>8.0f}")

    print("\n[3] BMAX")
    Wa = workloads.marginals(datasets.domain("adult_hdmm"), 5, lower=True)
    for mode, variant in (("workload", "bmax"), ("workload", "hdmm_table"), ("lattice", "bmax")):
        t, S = median_seconds(
            lambda mode=mode, variant=variant: selectors.get(
                "ding_datacube", p=2, candidates=mode, variant=variant
            ).select(Wa, P),
            args.repeats,
        )
        print(f"    Adult (HDMM, 32 marginals), candidates={mode}, variant={variant}: "
              f"{t:.4f} s, {len(S.metadata['cuboids'])} cuboids")  # fmt: skip
    enc = BinaryEncoding(datasets.domain("adult_datacube"))
    Wb = enc.marginals(workload_attribute_sets(8, 2, "Q2", seed=0))
    t, S = median_seconds(
        lambda: selectors.get("datacube", strategy="C", budget="optimal").select(Wb, P),
        args.repeats,
    )
    print(f"    Adult binary (23 bits) Q2 k=2 ({len(Wb.weights)} marginals), C+ over the "
          f"attribute lattice: {t:.4f} s, {S.metadata['groups']} cuboids")  # fmt: skip

    print("\n[4] NLTCS selection time: clustering vs the rest")
    print(
        "{:>10} {:>9} {:>9} {:>9} {:>9} {:>8}".format("workload", "I", "Q+", "F+", "C+", "C/rest")
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
            print(f"{variant + ' k=' + str(k):>10} " + " ".join(f"{times[n]:>9.4f}" for n in times)
                  + f" {times['C+'] / rest:>7.0f}×")  # fmt: skip

    print("\n[5] Q+ on Adult binary (23 bits), all 2-way marginals over the bits")
    Wq = workloads.binary_marginals("adult_datacube", 2, over="bits")
    Q = selectors.get("datacube", strategy="Q", budget="optimal")
    t_sel, Sq = median_seconds(lambda: Q.select(Wq, P), args.repeats)
    t_err, err = median_seconds(lambda: evaluate.expected_error(Wq, Sq, P), args.repeats)
    t_max, top = median_seconds(lambda: evaluate.max_variance(Wq, Sq, P), args.repeats)
    print(f"    {len(Wq.weights)} marginals: select {t_sel:.4f} s; expected error {t_err:.4f} s "
          f"({err:.6g}); max variance {t_max:.4f} s ({top:.6g})")  # fmt: skip
    print("    paper (Cormode et al. §8, Fig. 6): Q and F 'always less than a second, typically "
          "less than a tenth of a second'")  # fmt: skip


if __name__ == "__main__":
    main()
