"""Shared timing helpers for the benchmark scripts."""

import resource
import statistics
import time


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
