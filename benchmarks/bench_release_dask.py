"""Release on Dask: N = 10^8 / 10^9 cells on a LocalCluster of memory-limited workers.

The data is synthetic and made lazily block by block (counts 0..4 from
``SeedSequence(seed, spawn_key=(block,))``), so no process ever holds the whole vector; the
mechanism runs through :mod:`mmtoolkit.dask_release` (``mechanism.release / measure /
reconstruct`` on a dask array) on a ``distributed.LocalCluster`` of ``--workers`` worker
processes, one thread each, ``memory_limit=--memory`` each, spilling to a temporary directory
outside the repository. Two cases (the strategies of ``bench_release.py``):

* ``kron`` — a Kronecker product of 4 p-Identity factors (HDMM Def. 9), ``n = N^(1/4)`` cells
  each, ``p = 4``; one release of ``W = I ⊗ I ⊗ 1ᵀ ⊗ 1ᵀ`` (``n²`` answers, through ``x̂``),
  timed end to end together with the true answers;
* ``marg`` — the ≤3-way marginals of ``[10]^d`` (weights 1); the measurement ``y`` (with the
  true answers, one pass over the data) is timed, then the 2-way marginals are answered from
  ``y`` alone and ``V = Prefix ⊗ Prefix ⊗ 1ᵀ ⊗ ... ⊗ 1ᵀ`` through ``x̂`` expanded block by
  block (timed).

Per case: wall seconds, every worker's peak RSS (``ru_maxrss``, workers restarted before each
case), the empirical RMSE of the release against the exact answers beside the evaluator's
expected RMSE, and (``--compare``, default for N ≤ 10^8) the largest relative difference to
the in-memory mechanism with the same seed (the same noise: Kronecker, the release;
marginals, ``y`` and the answers through ``x̂`` from it; also the RMSE of the noise ``y − A x``
itself, i.i.d. over all rows). PureDP, ε = 1. ``--rechunk``: dask's rechunk method for the
Kronecker route's all-to-alls (``p2p``, dask's default on a cluster, streams through disk;
``tasks`` moves the pieces as tasks).

    python benchmarks/bench_release_dask.py --sizes 1e7     # quick
    python benchmarks/bench_release_dask.py --sizes 1e8
    flock /tmp/mmtk-bigmem.lock python benchmarks/bench_release_dask.py --sizes 1e9

``--json [FILE]`` also writes the run's record (default ``benchmarks/results/
bench_release_dask.json``) for ``benchmarks/render.py``.
"""

import argparse
import math
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# the worker processes import this checkout's package too
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
sys.path.insert(0, str(ROOT / "benchmarks"))

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import distributed  # noqa: E402
import numpy as np  # noqa: E402
from _util import Run, add_json_option  # noqa: E402

from mmtoolkit import dask_release, evaluate, mechanism, workloads  # noqa: E402
from mmtoolkit.linalg import Identity, Kronecker, Marginals, PIdentity, Prefix, Total  # noqa: E402
from mmtoolkit.privacy import PureDP  # noqa: E402

#: Cells of one data block (80 MB of float64).
DATA_CELLS = 10**7


def _counts_block(seed, numblocks, block_info=None):
    info = block_info[None]
    b = int(np.ravel_multi_index(info["chunk-location"], numblocks))
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(b,)))
    return rng.integers(0, 5, info["chunk-shape"]).astype(float)


def synthetic(sizes, seed=1):
    """A lazy data tensor of counts, each block drawn from its own seed."""
    chunks = da.core.normalize_chunks(dask_release.data_chunks(sizes, DATA_CELLS), sizes)
    numblocks = tuple(len(c) for c in chunks)
    return da.map_blocks(_counts_block, seed, numblocks, chunks=chunks, dtype=float,
                         meta=np.empty((0,) * len(sizes)))  # fmt: skip


def worker_peaks(client):
    return sorted(
        client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024).values()
    )


def rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def rel_diff(a, b):
    return float(np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b))))


def kron_case(N, client, compare):
    n = round(N**0.25)
    rng = np.random.default_rng(0)
    A = Kronecker([PIdentity(rng.random((4, n))) for _ in range(4)])
    W = Kronecker([Identity(n), Identity(n), Total(n), Total(n)])
    X = synthetic((n,) * 4)
    privacy = PureDP(1.0)
    t = time.perf_counter()
    answers, truth = dask.compute(
        mechanism.release(W, A, X, privacy, np.random.default_rng(2)), dask_release.apply(W, X)
    )
    out = {"kind": "kron", "N": n**4, "release_s": time.perf_counter() - t,
           "peaks": worker_peaks(client), "answers": W.shape[0],
           "expected": evaluate.rmse(W, A, privacy), "empirical": rmse(answers, truth)}  # fmt: skip
    if compare:  # the in-memory release with the same seed (the same noise)
        x = X.compute().ravel()
        in_memory = mechanism.release(W, A, x, privacy, np.random.default_rng(2))
        out["vs_memory"] = rel_diff(answers, in_memory)
    return out


def marg_case(N, client, compare):
    from itertools import combinations

    d = round(math.log10(N))
    sizes = (10,) * d
    keys = [sum(1 << i for i in c) for k in range(4) for c in combinations(range(d), k)]
    A = Marginals(sizes, dict.fromkeys(keys, 1.0))
    W = workloads.marginals(sizes, 2)
    V = Kronecker([Prefix(10), Prefix(10)] + [Total(10)] * (d - 2))
    X = synthetic(sizes)
    privacy = PureDP(1.0)
    t = time.perf_counter()
    y, w_true, v_true = dask.compute(
        mechanism.measure(A, X, privacy, np.random.default_rng(2)),
        dask_release.apply(W, X),
        dask_release.apply(V, X),
    )
    measure_s = time.perf_counter() - t
    y_true = dask_release.apply(A, X).compute()  # the noise itself: y − A x
    w_ans = mechanism.answer_marginals(W, A, y)
    t = time.perf_counter()
    v_ans = dask_release.apply(V, mechanism.reconstruct(A, da.from_array(y))).compute()
    out = {"kind": "marg", "N": N, "measure_s": measure_s,
           "reconstruct_s": time.perf_counter() - t, "peaks": worker_peaks(client),
           "answers": W.shape[0], "expected": evaluate.rmse(W, A, privacy),
           "empirical": rmse(w_ans, w_true), "v_answers": V.shape[0],
           "v_expected": evaluate.rmse(V, A, privacy), "v_empirical": rmse(v_ans, v_true),
           "rows": A.shape[0], "z_empirical": rmse(y, y_true),
           "z_expected": math.sqrt(privacy.noise_variance(A.sensitivity(1)))}  # fmt: skip
    if compare:
        x = X.compute().ravel()
        out["vs_memory"] = max(
            rel_diff(y, mechanism.measure(A, x, privacy, np.random.default_rng(2))),
            rel_diff(v_ans, V @ mechanism.reconstruct(A, y)),
        )
    return out


def add_row(table, r, workers, memory, rechunk):
    """One case's row of the table."""
    peaks = " / ".join(f"{p / 1024:.2f}" for p in r["peaks"])
    if r["kind"] == "kron":
        name = "Kronecker of 4 p-Identity (p = 4)"
        times = f"release {r['release_s']:.1f}"
        check = f"{r['answers']} answers: {r['empirical']:.4g} / {r['expected']:.4g}"
    else:
        name = "≤3-way marginals of [10]^d"
        times = f"measure {r['measure_s']:.1f}, x̂ + V {r['reconstruct_s']:.1f}"
        check = (
            f"noise of y ({r['rows']}): {r['z_empirical']:.4g} / {r['z_expected']:.4g}; "
            f"2-way ({r['answers']}): {r['empirical']:.4g} / {r['expected']:.4g}; "
            f"V ({r['v_answers']}): {r['v_empirical']:.4g} / {r['v_expected']:.4g}"
        )
    table.add(name, r["N"], f"{workers} × 1 thread, {memory}, {rechunk}", times, peaks, check,
              r.get("vs_memory"))  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="kron,marg")
    ap.add_argument("--sizes", default="1e8", help="comma-separated N")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory", default="6GB", help="memory_limit of each worker")
    ap.add_argument("--compare", choices=["auto", "yes", "no"], default="auto",
                    help="compare with the in-memory path (auto: N <= 1e8)")  # fmt: skip
    ap.add_argument("--rechunk", choices=["p2p", "tasks"], default="p2p",
                    help="dask's rechunk method (array.rechunk.method)")  # fmt: skip
    args = add_json_option(ap).parse_args(argv)
    dask.config.set({"array.rechunk.method": args.rechunk})
    run = Run(__file__, argv)
    table = run.table(
        "Release on a Dask LocalCluster, PureDP ε = 1",
        ["strategy", "N", "workers, rechunk", "seconds", "worker peak RSS GB",
         "empirical / expected RMSE", "max rel. diff to in-memory"],
        ["", ".2e", "", "", "", "", ".1e"],
    )  # fmt: skip
    records = []
    with tempfile.TemporaryDirectory(prefix="mmtk-dask-") as spill:
        with distributed.LocalCluster(
            n_workers=args.workers, threads_per_worker=1, processes=True,
            memory_limit=args.memory, local_directory=spill, dashboard_address=None,
        ) as cluster, distributed.Client(cluster) as client:  # fmt: skip
            for N in (int(float(s)) for s in args.sizes.split(",")):
                for kind in args.kinds.split(","):
                    client.restart()
                    compare = args.compare == "yes" or (args.compare == "auto" and N <= 10**8)
                    case = kron_case if kind == "kron" else marg_case
                    records.append(case(N, client, compare))
                    add_row(table, records[-1], args.workers, args.memory, args.rechunk)
    run.write(args.json, records=records)


if __name__ == "__main__":
    main()
