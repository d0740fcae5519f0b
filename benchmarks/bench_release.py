"""Measure and reconstruct at scale: time, peak RSS and the same-run floor.

Three strategy kinds on N = 10^6 ... 10^8 cells (10^9 with ``--huge``, not run by default):

* ``kron`` — a Kronecker product of 4 p-Identity factors (HDMM Def. 9), ``n = N^(1/4)`` cells
  each (100 at 10^8), ``p = 4`` rows of a seeded random ``Θ ≥ 0`` per factor;
* ``marg`` — the ≤3-way marginals of ``[10]^d``, ``d = log10 N`` (93 tables at 10^8), all
  weights 1;
* ``tree`` — H_16, the 16-ary hierarchy of intervals on ``N`` cells (Hay et al. 2010; 1.07 N
  rows), weights 1; near-equal splits up to 10^8 cells, padded to ``16^h`` at 10^9 (every
  level regular).

Not run by default (``--kinds``): ``rp`` — ResidualPlanner's strategy for the ≤3-way
marginals of ``[10]^d`` (He et al. §4; measured under zCDP ρ = 1/2, Gaussian noise);
``union`` — an OPT_+ stack of two weighted Kronecker products of 4 p-Identity factors
(HDMM Def. 11, :class:`~mmtoolkit.linalg.KroneckerUnion`, ``w = 1/√2`` each); ``sep`` — the
same two products as a :class:`SeparateUnion`; ``union3`` — three products, which
reconstruct iteratively (preconditioned CG: 1.1 s at 10^6 cells, 17 s at 10^7; with the
heaviest product alone as preconditioner 9.2 s and 223 s).

Each case runs in a fresh subprocess (so its peak RSS, ``getrusage(RUSAGE_SELF).ru_maxrss``,
is its own; the table shows it and, in N-vectors of 8N bytes, its growth over the RSS after
the imports, the compiled kernels (:func:`mmtoolkit.linalg.kernels.prepare`, when numba is
installed) and the strategy were built — the data vector counts as one — and the RSS the
built strategy holds): it times
``mechanism.measure`` (PureDP, ε = 1) and ``mechanism.reconstruct`` with ``overwrite=True``
(``x̂`` built in ``y``'s memory, as ``mechanism.release`` does; median of ``--repeats``), and
the floor on the same ``N``-vector in the same process: ``x.sum()``, ``x *= 2`` and drawing
``N`` Laplace variates into a new array — with the mechanism's own sampler
(``measurement.continuous_stream``) and, for reference, with numpy's ``rng.laplace``
(about 4x slower).
Ratios printed, with the mechanism's draw (and numpy's):

* kron: (measure + reconstruct) / (draw + 4 passes ``x *= 2``; one pass per factor);
* marg and tree: (measure + reconstruct) / (draw + 1 pass ``x.sum()`` + 1 pass ``x *= 2``);
* rp: the same with the draw of the strategy's ``m`` rows (``m ≪ N``) instead of ``N``;
* union, union3, sep: (measure + reconstruct) / (draw of ``m`` values + 4 passes ``x *= 2``
  per product).

The floor's draw and the release are timed under one rule: each repeat drops everything
the last one held, then times the draw, then measure and reconstruct; the draw writes a
freshly allocated array (allocated zeroed, ``np.zeros``, so its pages are first
touched by the draw) exactly as ``measure`` writes a fresh ``y``, so both pay the first
touch of their pages inside their timed region. On the VM this is measured on that costs
about 0.1 s per GB for pages freed just before and up to ten times more for memory freed
long ago (the hypervisor takes it back): ``y`` (1.17 N values for kron) is larger than the
draw's N values, so after a repeat's draw it would take its last pages from memory freed
long ago. So before the draw and before the measure, an array as large as the larger of
the two (and 1/16 more, for temporaries) is touched and freed (untimed): both then take their
pages from memory just backed, and pay alike. The table prints, in brackets, the system
seconds (median) of the draw and of the measure: almost all of them are that first touch.

The floor runs on one thread (the noise is one stream of one generator). A release may use
``mmtoolkit.threads.worker_threads()`` threads (a Kronecker product's noise drawn ahead on a
second one, its pseudo-inverse's slabs on both, marginal tables in pieces on both): the
table prints their number, whether the compiled kernels ran (``numba``; else ``numpy``, e.g.
``MMTOOLKIT_NUMBA=0``) and, beside the wall-clock ratio, the CPU seconds of measure +
reconstruct (every thread, user and system) over the floor — the work, which a second core
does not shrink.

``--huge`` adds the N = 10^9 rows (about 17 GB: run it under ``flock
/tmp/mmtk-bigmem.lock``) and five releases at 10^9 cells, each printing its time, peak RSS
and the expected RMSE the evaluator reports beside the empirical RMSE of that release on a
synthetic data vector (exact answers known; ``--releases`` picks some): x̂ from H_16
padded (``mechanism.release``), ``mechanism.release`` on ``[1000]^3`` with the
OPT_⊗ strategy for all ranges ⊗ all ranges ⊗ identity (2.5·10^14 queries, never formed:
the release is ``x̂``, the workload identity, and the all-range error ``eᵀ(G₁⊗G₂⊗I)e``,
``e = x̂ − x``, is computed through the factors' O(n) Grams), ``mechanism.release`` of the
≤3-way marginals of ``[10]^9`` with OPT_M (answered from the noisy marginals, no ``x̂``),
and the same two through ``mmtoolkit release`` on 10^6 synthetic records (the first with
``--select-for``, answering the (a, b) marginal).

Cases run with one BLAS thread (:data:`BLAS_THREADS`, unless set by the caller).
``--releases-only`` runs only the releases. ``--root DIR`` imports the package from ``DIR``
(default: this checkout), e.g. another worktree to compare before/after in one run.
``--json [FILE]`` writes the run's record (default ``benchmarks/results/bench_release.json``:
the tables printed and every case's raw measurements, floors included, under ``records``),
from which ``benchmarks/render.py`` writes the script's section of ``benchmarks/README.md``.
``--sizes 1e6,1e7`` is the quick run.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # _util, also when this file is loaded by path
from _util import Run, Table, add_json_option  # noqa: E402

#: Each case runs with one BLAS thread unless these are set: on this 2-core machine shared
#: with other jobs two threads make the many small products (p-Identity blocks, OPT_0)
#: several times slower (OPT_⊗ selection on [1000]^3: 147 s with two, about 5 s with one).
BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
RELEASES = ("rel-kron", "rel-marg", "cli-kron", "cli-marg", "rel-tree")


def _kron_strategy(N):
    import numpy as np

    from mmtoolkit.linalg import Kronecker, PIdentity

    n = round(N**0.25)
    rng = np.random.default_rng(0)
    return Kronecker([PIdentity(rng.random((4, n))) for _ in range(4)]), n**4


def _marg_strategy(N):
    from itertools import combinations

    from mmtoolkit.linalg import Marginals

    d = round(__import__("math").log10(N))
    keys = [sum(1 << i for i in c) for k in range(4) for c in combinations(range(d), k)]
    return Marginals((10,) * d, dict.fromkeys(keys, 1.0)), 10**d


def _tree_strategy(N):
    from mmtoolkit.linalg import Tree
    from mmtoolkit.linalg.tree import interval_tree

    # past 10^8 the near-equal tree's level above the cells has N/3.7 irregular nodes (its
    # starts and the solver's node-grid arrays would not fit beside x and y): pad to 16^h
    return Tree(N, interval_tree(N, 16, split=tree_split(N))), N


def tree_split(N):
    """The ``tree`` kind's split: near-equal (HB's rule) up to 10^8 cells, padded beyond."""
    return "near_equal" if N <= 10**8 else "pad"


def _rp_strategy(N):
    from mmtoolkit import selectors
    from mmtoolkit import workloads as wl
    from mmtoolkit.privacy import ZCDP

    d = round(__import__("math").log10(N))
    W = wl.marginals((10,) * d, 3, lower=True)
    return selectors.get_class("residual_planner")().select(W, ZCDP(0.5)).matrix, 10**d


def _union_blocks(N, k):
    """``k`` weighted Kronecker products of 4 p-Identity factors (p = 4, seeded Θ ≥ 0), the
    weights those of OPT_+'s L2 budget split for equal errors (``Σ w² = 1``)."""
    import numpy as np

    from mmtoolkit.linalg import Kronecker, PIdentity, Weighted

    n = round(N**0.25)
    rng = np.random.default_rng(0)
    blocks = [Kronecker([PIdentity(rng.random((4, n))) for _ in range(4)]) for _ in range(k)]
    return [Weighted(k**-0.5, b) for b in blocks], n**4


def _union_strategy(N, k=2):
    from mmtoolkit import linalg

    blocks, N = _union_blocks(N, k)
    # KroneckerUnion: OPT_+'s kind (a checkout from before it, --root: a plain VStack)
    return getattr(linalg, "KroneckerUnion", linalg.VStack)(blocks), N


def _separate_strategy(N):
    from mmtoolkit.selectors.hdmm.separate import SeparateUnion

    blocks, N = _union_blocks(N, 2)
    return SeparateUnion(blocks), N


STRATEGIES = {
    "kron": _kron_strategy,
    "marg": _marg_strategy,
    "tree": _tree_strategy,
    "rp": _rp_strategy,
    "union": _union_strategy,
    "union3": lambda N: _union_strategy(N, 3),
    "sep": _separate_strategy,
}
#: Blocks of the union kinds (for their floor).
UNION_BLOCKS = {"union": 2, "union3": 3, "sep": 2}
#: Kinds measured under zCDP (Gaussian noise; ResidualPlanner is defined for L2 privacy);
#: the others under PureDP(1).
ZCDP_KINDS = ("rp",)


def run_case(kind, N, repeats):
    """One case in this process: a dict of seconds and the peak RSS (MB)."""
    import numpy as np

    from mmtoolkit import measurement, mechanism
    from mmtoolkit.privacy import ZCDP, PureDP

    _prepare_kernels()  # compiled (or loaded) before the RSS baseline and the timings
    before_mb = _rss_mb()
    A, N = STRATEGIES[kind](N)
    strategy_mb = _rss_mb() - before_mb  # what the built strategy holds
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # imports, strategy
    rng = np.random.default_rng(1)
    x = rng.integers(0, 5, N).astype(float)

    def timed(fn):
        times, out = [], None
        for _ in range(repeats):
            out = None  # drop the previous result before the next run
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times), out

    privacy = ZCDP(0.5) if kind in ZCDP_KINDS else PureDP(1.0)
    floor = {"sum": timed(lambda: x.sum())[0], "scale": timed(lambda: x.__imul__(2.0))[0]}
    x /= 2.0**repeats  # undo the scaling (exact: powers of two)
    # x̂ is built in y's memory, as release() does (an older checkout given as --root may
    # have no overwrite)
    inplace = "overwrite" in __import__("inspect").signature(mechanism.reconstruct).parameters
    m_times, r_times, cpu_times, m_sys = [], [], [], []
    d_times, d_sys, np_times = [], [], []
    # entries of the largest array a timed part allocates, and 1/16 more for its temporaries
    # (the noise stream's buffers, ΘD x, scratch: tens of MB at 10^8)
    warm = max(N, int(A.shape[0])) * 17 // 16
    for _ in range(repeats):
        # each repeat starts from the same state: nothing of the last one held, and the
        # floor's draw, like measure's y, writes a fresh array first touched in its timed
        # region; before each, as many pages as the larger of the two were just touched and
        # freed (_warm), so both pay the same first touch (see the module docstring)
        xhat = y = None
        _warm(warm)
        c_sys = resource.getrusage(resource.RUSAGE_SELF).ru_stime
        t = time.perf_counter()
        z = np.zeros(N)  # calloc: pages first touched by the draw
        measurement.continuous_stream(privacy.family, privacy.noise_scale(1.0), rng, N).add(z)
        d_times.append(time.perf_counter() - t)
        d_sys.append(resource.getrusage(resource.RUSAGE_SELF).ru_stime - c_sys)
        del z
        t = time.perf_counter()
        z = rng.laplace(0.0, 1.0, N)  # numpy's draw, for reference
        np_times.append(time.perf_counter() - t)
        del z
        _warm(warm)
        c, c_sys = _cpu_seconds(), resource.getrusage(resource.RUSAGE_SELF).ru_stime
        t = time.perf_counter()
        y = mechanism.measure(A, x, privacy, np.random.default_rng(2))
        m_times.append(time.perf_counter() - t)
        m_sys.append(resource.getrusage(resource.RUSAGE_SELF).ru_stime - c_sys)
        t = time.perf_counter()
        xhat = (
            mechanism.reconstruct(A, y, overwrite=True) if inplace else mechanism.reconstruct(A, y)
        )
        r_times.append(time.perf_counter() - t)
        cpu_times.append(_cpu_seconds() - c)
    measure_s, recon_s = statistics.median(m_times), statistics.median(r_times)
    try:
        from mmtoolkit.threads import worker_threads
    except ImportError:  # a checkout from before the threads (--root)
        threads = 1
    else:
        threads = worker_threads()
    return {
        "kind": kind,
        "N": N,
        "rows": int(A.shape[0]),
        "measure": measure_s,
        "measure_sys": statistics.median(m_sys),
        "reconstruct": recon_s,
        "cpu": statistics.median(cpu_times),
        "threads": threads,
        "compiled": _prepare_kernels(),
        **floor,
        "draw": statistics.median(d_times),
        "draw_sys": statistics.median(d_sys),
        "np_laplace": statistics.median(np_times),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "base_mb": base_mb,
        "strategy_mb": strategy_mb,
        "vector_mb": N * 8 / 2**20,
        "check": float(xhat[: min(N, 1000)].sum()),
    }


def _warm(entries: int) -> None:
    """Touch and free an array of ``entries`` float64 values: the next allocation of at
    most that size reuses pages the machine has just backed (on this VM, memory freed long
    ago costs up to ten times more to touch again, so an array larger than the last one
    freed would otherwise pay more than its size says)."""
    import numpy as np

    np.empty(entries).fill(0.0)


def _prepare_kernels() -> bool:
    """Compile the package's compiled kernels now (numba, the ``fast`` extra), if it has
    them and they are in use: whether they are (False for a checkout without them)."""
    try:
        from mmtoolkit.linalg import kernels
    except ImportError:
        return False
    return kernels.prepare()


def _cpu_seconds():
    """CPU seconds of this process so far, every thread, user and system."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _fill_counts(N, seed):
    """A synthetic data vector: ``N`` counts uniform on 0..4 (float64), filled in chunks."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = np.empty(N)
    for s in range(0, N, 1 << 24):
        x[s : s + (1 << 24)] = rng.integers(0, 5, min(1 << 24, N - s))
    return x


def _rss_mb():
    """The resident set size now (MB; Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb(who=None):
    import resource as r

    return r.getrusage(r.RUSAGE_SELF if who is None else who).ru_maxrss / 1024


def kron_sampling_sd(W, A, privacy):
    """Relative standard deviation of the empirical total squared error ``eᵀ WᵀW e`` of one
    release (``e = x̂ − x``, covariance ``Σ = v (AᵀA)⁻¹``) for Gaussian noise:
    ``sqrt(2 tr(K²)) / tr(K)``, ``K = WᵀW Σ`` a Kronecker product of per-attribute factors
    (dense ``n x n``); for Laplace noise it is a little larger (fourth moments)."""
    import numpy as np

    num, den = 1.0, 1.0
    for wf, af in zip(W.factors, A.factors):
        K = wf.gram().dense() @ af.gram().pinv().dense()
        num *= float(np.sum(K * K.T))
        den *= float(np.trace(K))
    return float(np.sqrt(2.0 * num) / den)


def run_release(kind, N):
    """A release at N cells (10^9 in the table) through ``mechanism.release`` (kind
    ``rel-kron``/``rel-marg``) or the ``mmtoolkit release`` command (``cli-kron``/
    ``cli-marg``): seconds, peak RSS, and the expected RMSE the evaluator reports against
    the empirical RMSE of that release."""
    import math

    import numpy as np

    from mmtoolkit import evaluate, mechanism, selectors
    from mmtoolkit import workloads as wl
    from mmtoolkit.linalg import Identity, Kronecker
    from mmtoolkit.privacy import PureDP

    privacy = PureDP(1.0)
    out = {"kind": kind, "N": N}
    n, d = round(N ** (1 / 3)), round(math.log10(N))
    if kind.startswith("cli-"):
        return run_cli_release(kind, out, n, d)
    t = time.perf_counter()
    if kind == "rel-tree":
        return run_tree_release(out, N, privacy)
    if kind == "rel-kron":
        W = wl.kron([wl.all_range(n), wl.all_range(n), wl.identity(n)])
        S = selectors.get_class("opt_kron")(seed=0).select(W, privacy)
        released = Kronecker([Identity(n)] * 3)  # the data-vector estimate x̂
    else:
        W = wl.marginals((10,) * d, 3, lower=True)
        S = selectors.get_class("opt_marginals")(seed=0).select(W, privacy)
        released = W
    out["select"] = time.perf_counter() - t
    out["strategy"] = f"{type(S.matrix).__name__} {S.matrix.shape[0]:.4g} rows"
    t = time.perf_counter()
    out["expected_rmse"] = evaluate.rmse(released, S, privacy)
    if released is not W:
        out["expected_rmse_W"] = evaluate.rmse(W, S, privacy)
    out["evaluate"] = time.perf_counter() - t
    x = _fill_counts(int(W.shape[1]), 1)
    out["base_mb"] = _peak_mb()
    t = time.perf_counter()
    ans = mechanism.release(released, S, x, privacy, np.random.default_rng(2))
    out["release"] = time.perf_counter() - t
    out["peak_mb"] = _peak_mb()
    out["queries"] = int(released.shape[0])
    t = time.perf_counter()
    if kind == "rel-kron":  # e = x̂ − x in place; ||e||² and eᵀ(G₁⊗G₂⊗I)e structurally
        ans -= x
        del x
        out["empirical_rmse"] = math.sqrt(float(ans @ ans) / ans.size)
        g = W.gram() @ ans  # Kronecker of the factors' O(n) Grams, no answers formed
        out["empirical_rmse_W"] = math.sqrt(float(ans @ g) / W.shape[0])
        out["sampling_sd_W"] = 0.5 * kron_sampling_sd(W, S.matrix, privacy)
    else:
        err = ans - W @ x
        out["empirical_rmse"] = math.sqrt(float(err @ err) / err.size)
    out["check"] = time.perf_counter() - t
    out["peak_mb_all"] = _peak_mb()
    return out


def run_tree_release(out, N, privacy):
    """``mechanism.release`` of ``x̂`` (the identity workload) with H_16 padded to ``16^h``
    cells (all levels regular, so the strategy holds no array of the cells' size): seconds,
    peak RSS, and the expected RMSE (the tree route's identity trace, on the node grids)
    beside the empirical one."""
    import math

    import numpy as np

    from mmtoolkit import evaluate, mechanism
    from mmtoolkit.linalg import Identity, Tree
    from mmtoolkit.linalg.tree import interval_tree

    t = time.perf_counter()
    S = Tree(N, interval_tree(N, 16, split="pad"))
    out["select"] = time.perf_counter() - t
    t = time.perf_counter()
    out["expected_rmse"] = evaluate.rmse(Identity(N), S, privacy)
    out["evaluate"] = time.perf_counter() - t
    x = _fill_counts(N, 1)
    out["base_mb"] = _peak_mb()
    t = time.perf_counter()
    ans = mechanism.release(Identity(N), S, x, privacy, np.random.default_rng(2))
    out["release"] = time.perf_counter() - t
    out["peak_mb"] = _peak_mb()
    out["queries"] = N
    ans -= x
    out["empirical_rmse"] = math.sqrt(float(ans @ ans) / N)
    return out


def run_cli_release(kind, out, n, d):
    """``python -m mmtoolkit release`` on 10^6 synthetic records of a 10^9-cell domain (its
    own process; peak RSS from RUSAGE_CHILDREN), answers read back and compared with the
    records' exact answers."""
    import math
    import tempfile

    from mmtoolkit import records
    from mmtoolkit import workloads as wl

    tmp = Path(tempfile.mkdtemp(prefix="bench_release_"))
    if kind == "cli-kron":
        sizes = {"a": n, "b": n, "c": n}
        args = ["--workload", "marginal:a,b", "--select-for", "kron:all_range,all_range,identity",
                "--selector", "opt_kron"]  # fmt: skip
    else:
        sizes = {f"a{i}": 10 for i in range(d)}
        args = ["--workload", "marginals:3:lower", "--selector", "opt_marginals"]
    (tmp / "domain.json").write_text(json.dumps(sizes))
    n_rec = 10**6
    cmd = [sys.executable, "-m", "mmtoolkit", "release", "--domain", str(tmp / "domain.json"),
           "--records", str(n_rec), "--data-seed", "3", *args, "--epsilon", "1", "--seed", "1",
           "--out", str(tmp / "answers.csv")]  # fmt: skip
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    out["release"] = time.perf_counter() - t
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    out["peak_mb"] = _peak_mb(resource.RUSAGE_CHILDREN)
    out["base_mb"] = 0.0
    summary = json.loads((tmp / "answers.csv.json").read_text())
    out["expected_rmse"] = summary["expected_rmse"]
    if summary.get("selected_for"):
        out["expected_rmse_W"] = summary["selected_for"]["expected_rmse"]
    out["seconds"] = summary["seconds"]
    out["select"] = summary["seconds"]["select"]
    import pandas as pd

    answers = pd.read_csv(tmp / "answers.csv")["answer"].to_numpy()
    recs = records.synthetic(sizes, n_rec, 3)
    if kind == "cli-kron":
        truth = recs.marginal(("a", "b")).ravel()
    else:
        truth = wl.marginals(recs.domain, 3, lower=True).answer_records(recs)
    out["queries"] = int(answers.size)
    err = answers - truth
    out["empirical_rmse"] = math.sqrt(float(err @ err) / err.size)
    for f in tmp.iterdir():
        f.unlink()
    tmp.rmdir()
    return out


def huge_table(rows):
    """The releases at 10^9 cells as a :class:`Table` (not printed)."""
    t = Table(
        "Releases at N = 10^9: expected RMSE (the evaluator) against the empirical RMSE of the "
        "release",
        ["release at N = 10^9", "queries released", "select s", "release s", "peak RSS MB",
         "expected RMSE", "empirical RMSE", "empirical / expected"],
        ["", ",", ".1f", ".1f", ".0f", ".5g", ".5g", ".4f"],
        echo=False,
    )  # fmt: skip
    names = {
        "rel-kron": "`mechanism.release`, [1000]^3, OPT_⊗ for all ranges ⊗ all ranges ⊗ "
        "identity; released: x̂ (workload identity)",
        "rel-marg": "`mechanism.release`, ≤3-way marginals of [10]^9, OPT_M",
        "cli-kron": "`mmtoolkit release`, 10^6 records on [1000]^3, `--select-for` all ranges ⊗ "
        "all ranges ⊗ identity (OPT_⊗); released: the (a, b) marginal",
        "cli-marg": "`mmtoolkit release`, 10^6 records on [10]^9, ≤3-way marginals, OPT_M",
        "rel-tree": "`mechanism.release`, H_16 padded to 16^8 cells (regular levels); "
        "released: x̂ (workload identity)",
    }
    for r in rows:
        exp, emp = _finite(r["expected_rmse"]), r["empirical_rmse"]
        t.add(names[r["kind"]], r["queries"], r.get("select"), r["release"], r["peak_mb"], exp,
              emp, None if exp is None else emp / exp)  # fmt: skip
        if "empirical_rmse_W" in r:
            t.add(
                "↳ the same release scored on all ranges ⊗ all ranges ⊗ identity (2.5·10^14 "
                "queries, eᵀ(G₁⊗G₂⊗I)e structurally; sampling sd of the ratio ≈ "
                f"{r['sampling_sd_W']:.1%})", None, None, None, None, r["expected_rmse_W"],
                r["empirical_rmse_W"], r["empirical_rmse_W"] / r["expected_rmse_W"],
            )  # fmt: skip
    return t


def _finite(value):
    """``value``, or None when it is missing or not a finite number (not known)."""
    return value if value is not None and value == value and abs(value) != float("inf") else None


def floor_of(r):
    rows = r["rows"] / r["N"]  # noise values drawn per cell
    if r["kind"] == "kron":
        return r["draw"] + 4 * r["scale"]
    if r["kind"] in UNION_BLOCKS:  # one pass per factor of each block
        return rows * r["draw"] + 4 * UNION_BLOCKS[r["kind"]] * r["scale"]
    if r["kind"] == "rp":
        return rows * r["draw"] + r["sum"] + r["scale"]
    return r["draw"] + r["sum"] + r["scale"]


def rows_table(rows):
    """The cases' rows as a :class:`Table` (not printed); a column a row lacks (a checkout
    given as ``--root`` from before it) is shown as not measured."""
    t = Table(
        "Measure and reconstruct: medians, and the floor measured in the same process",
        ["strategy", "N", "measure s (system s)", "reconstruct s",
         "floor s (draw (system s) / sum / x*=2)", "(m + r) / floor",
         "threads, kernels: CPU s (m + r) / floor", "numpy draw s: (m + r) / floor",
         "peak RSS MB", "(peak − start) / N-vector", "strategy MB"],
        ["", ".0e", "", ".2f", "", ".2f", "", "", ".0f", ".2f", ".0f"],
        echo=False,
    )  # fmt: skip
    names = {
        "kron": "Kronecker of 4 p-Identity (p = 4)",
        "marg": "≤3-way marginals of [10]^d",
        "tree": "H_16 interval tree",
        "rp": "ResidualPlanner, ≤3-way marginals of [10]^d (zCDP)",
        "union": "OPT_+ union of 2 Kronecker products of 4 p-Identity",
        "union3": "union of 3 Kronecker products of 4 p-Identity",
        "sep": "SeparateUnion of the same 2 products",
    }

    def num(key, spec=".2f"):
        value = r.get(key)
        return "—" if value is None else format(value, spec)

    for r in rows:
        name = names[r["kind"]]
        if r["kind"] == "tree" and tree_split(r["N"]) == "pad":
            name += " (padded)"
        f = floor_of(r)
        work = r["measure"] + r["reconstruct"]
        fn = f - r["draw"] + r.get("np_laplace", r["draw"])
        cpu = "—" if r.get("cpu") is None else f"{r['cpu'] / f:.2f}"
        t.add(
            name, r["N"], f"{r['measure']:.2f} ({num('measure_sys')})", r["reconstruct"],
            f"{f:.2f} ({r['draw']:.2f} ({num('draw_sys')}) / {r['sum']:.3f} / {r['scale']:.3f})",
            work / f,
            f"{r.get('threads', 1)}, {'numba' if r.get('compiled') else 'numpy'}: {cpu}",
            f"{num('np_laplace')}: {work / fn:.2f}",
            r["peak_mb"], (r["peak_mb"] - r["base_mb"]) / r["vector_mb"], r.get("strategy_mb"),
        )  # fmt: skip
    return t


def table(rows):
    """The cases' rows as Markdown text."""
    return "\n".join(rows_table(rows).markdown())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="kron,marg,tree")
    ap.add_argument("--sizes", default="1e6,1e7,1e8", help="comma-separated N")
    ap.add_argument(
        "--huge",
        action="store_true",
        help="also N = 10^9 and the 10^9 releases (about 18 GB: run under flock)",
    )
    ap.add_argument("--releases-only", action="store_true", help="only --huge's releases")
    ap.add_argument("--releases", default=",".join(RELEASES), help="which of --huge's releases")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--release-n", type=float, default=1e9, help=argparse.SUPPRESS)  # tests
    ap.add_argument("--root", default=str(HERE.parent), help="import mmtoolkit from here")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # child: kind:N
    args = add_json_option(ap).parse_args(argv)
    if args.case:
        kind, N = args.case.split(":")
        if kind.startswith(("rel-", "cli-")):
            print(json.dumps(run_release(kind, int(float(N)))))
        else:
            print(json.dumps(run_case(kind, int(float(N)), args.repeats)))
        return
    sizes = [] if args.releases_only else [int(float(s)) for s in args.sizes.split(",")]
    sizes += [10**9] if args.huge and not args.releases_only else []
    env = dict(os.environ, PYTHONPATH=args.root)
    for var in BLAS_THREADS:  # one BLAS thread unless the caller chose
        env.setdefault(var, "1")

    def child(kind, N, reps):
        cmd = [sys.executable, __file__, "--case", f"{kind}:{N}", "--repeats", str(reps)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode:
            print(f"{kind} N={N:.0e} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            return None
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(row), file=sys.stderr, flush=True)
        return row

    run = Run(__file__, argv, root=args.root)
    print(f"load average {run.load_start[0]:.2f} (1 min) before the run", file=sys.stderr)
    rows = []
    for N in sizes:
        for kind in args.kinds.split(","):
            rows.append(child(kind, N, args.repeats if N <= 10**8 else 1))
    rows = [r for r in rows if r is not None]
    run.tables.append(rows_table(rows))
    huge = []
    if args.huge or args.releases_only:
        huge = [child(k, int(args.release_n), 1) for k in args.releases.split(",")]
        huge = [r for r in huge if r is not None]
        run.tables.append(huge_table(huge))
    print("\n\n".join("\n".join(t.markdown()) for t in run.tables))
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) after the run", file=sys.stderr)
    run.write(args.json, records=rows + huge)


if __name__ == "__main__":
    main()
