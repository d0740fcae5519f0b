"""A full release with exact integer noise against the same release with floating-point noise:
``mechanism.release`` of the ≤3-way marginals of ``[10]^d`` from a ``10^d``-cell histogram.

Strategies: the identity and H_16 (the 16-ary hierarchy of intervals, Hay et al. 2010), which
draw one noise value per cell (1.07 per cell for H_16), HDMM's OPT_M (weighted marginals) and
ResidualPlanner (He et al. 2023), which draw far fewer; under zCDP ρ = 1/2 (discrete
Gaussian against Gaussian noise) and, for the identity and H_16, pure DP ε = 1 (discrete
Laplace against Laplace). Each release gets a fresh generator of the same kind for both noise
kinds (numpy's PCG64 by default, ``--generator chacha`` for the private mode's ChaCha20,
:func:`mmtoolkit.releasing.secure_generator`); the selection is made once, outside the
timings. Median wall-clock and CPU seconds of ``--repeats`` releases each, the noise kinds
alternating; the histogram holds counts 0..4 (float64). ``--sizes 6,7`` is a quick run.
"""

import argparse
import statistics
import time

import numpy as np
from _util import Run, add_json_option

from mmtoolkit import mechanism, selectors
from mmtoolkit import workloads as wl
from mmtoolkit.linalg import Tree, kernels
from mmtoolkit.linalg.tree import interval_tree
from mmtoolkit.privacy import ZCDP, PureDP
from mmtoolkit.releasing import secure_generator

#: (strategy, privacy) cases: the name shown and the privacy of the release.
CASES = [("identity", "zCDP"), ("identity", "pure"), ("H_16", "zCDP"), ("H_16", "pure"),
         ("HDMM OPT_M", "zCDP"), ("ResidualPlanner", "zCDP")]  # fmt: skip
PRIVACY = {"zCDP": ZCDP(0.5), "pure": PureDP(1.0)}


def strategy(name, W, privacy):
    """The strategy of a case for the workload ``W`` on ``N`` cells."""
    N = W.shape[1]
    if name == "identity":
        return selectors.get_class("identity")().select(W, privacy)
    if name == "H_16":
        return Tree(N, interval_tree(N, 16, split="near_equal"))
    if name == "HDMM OPT_M":
        return selectors.get_class("opt_marginals")(seed=0).select(W, privacy)
    return selectors.get_class("residual_planner")().select(W, privacy)


def generator(kind, seed):
    """A fresh generator of the run's kind."""
    return secure_generator() if kind == "chacha" else np.random.default_rng(seed)


def histogram(N):
    """``N`` counts uniform on 0..4 (float64), filled in chunks."""
    rng = np.random.default_rng(1)
    x = np.empty(N)
    for s in range(0, N, 1 << 24):
        x[s : s + (1 << 24)] = rng.integers(0, 5, min(1 << 24, N - s))
    return x


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="8", help="comma-separated d (N = 10^d cells)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--generator", choices=("pcg64", "chacha"), default="pcg64")
    args = add_json_option(parser).parse_args()
    run = Run(__file__)
    kernels.prepare()
    table = run.table(
        f"Release of the ≤3-way marginals of [10]^d, generator {args.generator}: seconds "
        "(median), exact integer noise over floating-point noise",
        ["cells N", "strategy", "privacy", "noise values", "float noise s", "exact noise s",
         "exact / float", "float CPU s", "exact CPU s", "CPU exact / float"],
        [".0e", "", "", ",", ".2f", ".2f", ".2f", ".2f", ".2f", ".2f"],
        "Wall-clock and CPU seconds (every thread of the process), medians. One thread of "
        "numpy (OMP_NUM_THREADS=1); the release may use the package's worker threads "
        "(mmtoolkit.threads). Compiled exact samplers (numba) when installed. On a shared "
        "machine (see the load average) the CPU seconds are the better guide.",
    )  # fmt: skip
    for d in (int(s) for s in args.sizes.split(",")):
        W = wl.marginals((10,) * d, 3, lower=True)
        x = histogram(10**d)
        for name, priv in CASES:
            privacy = PRIVACY[priv]
            S = strategy(name, W, privacy)
            times = {"continuous": [], "discrete": []}
            cpu = {"continuous": [], "discrete": []}
            for r in range(args.repeats):
                for noise in times:
                    rng = generator(args.generator, r)
                    start, c = time.perf_counter(), time.process_time()
                    out = mechanism.release(W, S, x, privacy, rng, noise=noise)
                    times[noise].append(time.perf_counter() - start)
                    cpu[noise].append(time.process_time() - c)
                    del out
            # noise values drawn: the strategy's rows; ResidualPlanner's mechanism draws one a
            # residual cell (its plan's noisy numbers)
            m = (S.metadata["plan"].noisy_numbers() if name == "ResidualPlanner"
                 else getattr(S, "matrix", S).shape[0])  # fmt: skip
            fl, ex = (statistics.median(times[k]) for k in ("continuous", "discrete"))
            cfl, cex = (statistics.median(cpu[k]) for k in ("continuous", "discrete"))
            table.add(10**d, name, priv, m, fl, ex, ex / fl, cfl, cex, cex / cfl)
    run.write(args.json)


if __name__ == "__main__":
    main()
