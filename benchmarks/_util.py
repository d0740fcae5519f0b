"""Shared timing helpers for the benchmark scripts."""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def median_seconds(fn, repeats=5):
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs, and the last result."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def peak_rss_mb():
    """Peak resident set size of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def score_residual_case(out, case, d, W, strategy, privacy):
    """The measured part of a ResidualPlanner(+) scalability case, added to ``out``:
    ``"sum"`` — the RMSE; ``"max"`` — the max variance; otherwise measure 10,000 random d-attribute
    records of the plan and reconstruct every workload answer (wall and CPU seconds of each;
    value = the number of answers; the answers are streamed, each batch dropped once counted,
    so the peak holds the measurements but not all answers at once). Records ``peak_mb``;
    returns ``out``."""
    import numpy as np

    from mmtoolkit import evaluate
    from mmtoolkit.selectors.residual_planner.measurements import iter_reconstruct, measure

    if case == "sum":
        out["value"] = evaluate.rmse(W, strategy, privacy)
    elif case == "max":
        out["value"] = evaluate.max_variance(W, strategy, privacy)
    else:
        plan = strategy.metadata["plan"]
        records = np.random.default_rng(0).integers(0, 10, size=(10_000, d))
        start, cpu = time.perf_counter(), time.process_time()
        m = measure(plan, records, privacy, np.random.default_rng(1))
        out["measure_s"] = time.perf_counter() - start
        out["measure_cpu_s"] = time.process_time() - cpu
        start, cpu = time.perf_counter(), time.process_time()
        count = sum(a.size for _, a in iter_reconstruct(m, plan.workload.sets))
        out["recon_s"] = time.perf_counter() - start
        out["recon_cpu_s"] = time.process_time() - cpu
        out["value"] = float(count)
    out["peak_mb"] = peak_rss_mb()
    return out


def child_cases(script, run_case, cases, description=None):
    """Run each ``(case, d)`` of a benchmark in its own child process (fresh memory, so the
    peak RSS is the case's own).

    Call from ``main()``. In a child (``--case C --d D``) prints ``run_case(C, D)`` as JSON and
    returns ``(args, None)``; in the parent (no ``--d``: every case, or only ``--case C``'s
    default sizes) returns ``(args, results)`` where ``results`` yields ``(case, d,
    record)`` — ``record`` the child's JSON dict, or a string with the last line of its
    stderr when it failed. ``args.write`` asks the script to write its results.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--case", choices=sorted({c for c, _ in cases}))
    parser.add_argument("--d", type=int)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if args.case and args.d is not None:
        print(json.dumps(run_case(args.case, args.d)))
        return args, None
    if args.d is not None:
        parser.error("--d needs --case")
    cases = [(c, d) for c, d in cases if args.case in (None, c)]
    here = Path(script).resolve().parent

    def results():
        for case, d in cases:
            proc = subprocess.run(
                [sys.executable, str(Path(script).resolve()), "--case", case, "--d", str(d)],
                capture_output=True,
                text=True,
                cwd=here,
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parent), *sys.path])},
            )
            if proc.returncode:
                yield case, d, proc.stderr.strip().splitlines()[-1]
            else:
                yield case, d, json.loads(proc.stdout.strip().splitlines()[-1])

    return args, results()
