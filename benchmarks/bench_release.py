"""Measure and reconstruct at scale (issue 17): time, peak RSS and the same-run floor.

Two strategy kinds on N = 10^6 ... 10^8 cells (10^9 with ``--huge``, not run by default):

* ``kron`` — a Kronecker product of 4 p-Identity factors (HDMM Def. 9), ``n = N^(1/4)`` cells
  each (100 at 10^8), ``p = 4`` rows of a seeded random ``Θ ≥ 0`` per factor;
* ``marg`` — the ≤3-way marginals of ``[10]^d``, ``d = log10 N`` (93 tables at 10^8), all
  weights 1.

Each case runs in a fresh subprocess (so its peak RSS, ``getrusage(RUSAGE_SELF).ru_maxrss``,
is its own; the table shows it and, in N-vectors of 8N bytes, its growth over the RSS after
the imports and the strategy were built — the data vector counts as one): it times
``mechanism.measure`` (PureDP, ε = 1) and ``mechanism.reconstruct`` (median of
``--repeats``), and the floor on the same ``N``-vector in the same process:
``x.sum()``, ``x *= 2`` and drawing ``N`` Laplace variates. Ratios printed:

* kron: (measure + reconstruct) / (draw + 4 passes ``x *= 2``; one pass per factor);
* marg: (measure + reconstruct) / (draw + 1 pass ``x.sum()`` + 1 pass ``x *= 2``).

``--root DIR`` imports the package from ``DIR`` (default: this checkout), e.g. another
worktree to compare before/after in one run. ``--write`` replaces the "Release at scale"
section of ``benchmarks/README.md`` with the table printed.
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
SECTION = "## Release at scale (issue 17)"


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


def run_case(kind, N, repeats):
    """One case in this process: a dict of seconds and the peak RSS (MB)."""
    import numpy as np

    from mmtoolkit import mechanism
    from mmtoolkit.privacy import PureDP

    A, N = (_kron_strategy if kind == "kron" else _marg_strategy)(N)
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

    floor = {
        "sum": timed(lambda: x.sum())[0],
        "scale": timed(lambda: x.__imul__(2.0))[0],
        "draw": timed(lambda: rng.laplace(0.0, 1.0, N))[0],
    }
    x /= 2.0**repeats  # undo the scaling (exact: powers of two)
    privacy = PureDP(1.0)
    measure_s, y = timed(lambda: mechanism.measure(A, x, privacy, np.random.default_rng(2)))
    recon_s, xhat = timed(lambda: mechanism.reconstruct(A, y))
    return {
        "kind": kind,
        "N": N,
        "rows": int(A.shape[0]),
        "measure": measure_s,
        "reconstruct": recon_s,
        **floor,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "base_mb": base_mb,
        "vector_mb": N * 8 / 2**20,
        "check": float(xhat[: min(N, 1000)].sum()),
    }


def floor_of(r):
    if r["kind"] == "kron":
        return r["draw"] + 4 * r["scale"]
    return r["draw"] + r["sum"] + r["scale"]


def table(rows):
    out = [
        "| strategy | N | measure s | reconstruct s | floor s (draw / sum / x*=2) "
        "| (m + r) / floor | peak RSS MB | (peak − start) / N-vector |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    names = {"kron": "Kronecker of 4 p-Identity (p = 4)", "marg": "≤3-way marginals of [10]^d"}
    for r in rows:
        f = floor_of(r)
        out.append(
            f"| {names[r['kind']]} | {r['N']:.0e} | {r['measure']:.2f} | {r['reconstruct']:.2f} "
            f"| {f:.2f} ({r['draw']:.2f} / {r['sum']:.3f} / {r['scale']:.3f}) "
            f"| {(r['measure'] + r['reconstruct']) / f:.2f} | {r['peak_mb']:.0f} "
            f"| {(r['peak_mb'] - r['base_mb']) / r['vector_mb']:.2f} |"
        )
    return "\n".join(out)


def write_readme(text):
    path = HERE / "README.md"
    old = path.read_text()
    body = (
        f"{SECTION}\n\n    python benchmarks/bench_release.py [--write] [--huge]\n\n"
        f"Measured {time.strftime('%Y-%m-%d')} (2 cores shared with other jobs; timings are "
        f"noisy, ratios to the same-run floor are the guide):\n\n{text}\n"
    )
    if SECTION in old:
        head, rest = old.split(SECTION, 1)
        nxt = rest.find("\n## ")
        new = head + body + (rest[nxt:] if nxt >= 0 else "")
    else:
        new = old.rstrip("\n") + "\n\n" + body
    path.write_text(new)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="kron,marg")
    ap.add_argument("--sizes", default="1e6,1e7,1e8", help="comma-separated N")
    ap.add_argument("--huge", action="store_true", help="also N = 10^9 (about 20 GB)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--root", default=str(HERE.parent), help="import mmtoolkit from here")
    ap.add_argument("--write", action="store_true", help="update benchmarks/README.md")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # child: kind:N
    args = ap.parse_args(argv)
    if args.case:
        kind, N = args.case.split(":")
        print(json.dumps(run_case(kind, int(float(N)), args.repeats)))
        return
    sizes = [int(float(s)) for s in args.sizes.split(",")] + ([10**9] if args.huge else [])
    env = dict(os.environ, PYTHONPATH=args.root)
    rows = []
    for N in sizes:
        for kind in args.kinds.split(","):
            reps = args.repeats if N <= 10**8 else 1
            cmd = [sys.executable, __file__, "--case", f"{kind}:{N}", "--repeats", str(reps)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                print(f"{kind} N={N:.0e} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    text = table(rows)
    print(text)
    if args.write:
        write_readme(text)


if __name__ == "__main__":
    main()
