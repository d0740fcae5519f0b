"""Samples per second of exact discrete noise: ours (compiled and numpy paths), OpenDP's, and
numpy's floating-point Laplace / Gaussian, in the same run.

Ours: ``mmtoolkit.noise.discrete_gaussian`` / ``discrete_laplace`` (Canonne–Kamath–Steinke
2020, integers only) with ``MMTOOLKIT_NUMBA`` 1 (the numba kernel, the ``fast`` extra) and 0
(vectorised numpy), from ``numpy.random.default_rng`` (PCG64) and, for the kernel, also from
the private mode's ChaCha20 (:func:`mmtoolkit.releasing.secure_generator`); OpenDP's
discrete Gaussian / Laplace measurement on a zero vector of integers; numpy's ``normal`` /
``laplace`` (float, not exact) as the floor. One process, one thread; the median wall-clock
(``perf_counter``) of ``--repeats`` draws of ``--n`` samples (OpenDP: ``--n-opendp``, it is
~100x slower), and for the kernel on PCG64 also the median CPU time (``process_time``), the
better guide on a shared machine. σ² = 10^8 on the numpy path takes the element-by-element
Python-integer form: a small draw, scaled.
"""

import argparse
import math
import os
import statistics
import time
from fractions import Fraction

import numpy as np
from _util import Run, add_json_option, median_seconds

from mmtoolkit import noise
from mmtoolkit.linalg import kernels
from mmtoolkit.releasing import secure_generator

GAUSSIAN = [Fraction(1, 2), Fraction(3), Fraction(100), Fraction(10**4), Fraction(10**8)]
LAPLACE = [(1, 1), (3, 7), (1, 100), (1, 10**6)]


def _ours(path, draw, n, repeats, rng=None, cpu=False):
    """Samples/s of ``draw(n, rng)`` (default ``rng``: PCG64) with ``MMTOOLKIT_NUMBA`` set to
    ``path`` for the call: wall-clock, and with ``cpu`` also CPU time, ``(wall, cpu)``."""
    old = os.environ.get(kernels.ENV)
    os.environ[kernels.ENV] = path
    try:
        rng = np.random.default_rng(0) if rng is None else rng
        draw(min(n, 1000), rng)  # compile / warm up
        seconds, _ = median_seconds(lambda: draw(n, rng), repeats)
        if cpu:
            times = []
            for _ in range(repeats):
                start = time.process_time()
                draw(n, rng)
                times.append(time.process_time() - start)
            return n / seconds, n / statistics.median(times)
    finally:
        if old is None:
            del os.environ[kernels.ENV]
        else:
            os.environ[kernels.ENV] = old
    return n / seconds


def _opendp(kind, scale, n, repeats):
    """Samples/s of OpenDP's vector sampler, or None when opendp is not installed."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    metric = dp.l2_distance(T=int) if kind == "gaussian" else dp.l1_distance(T=int)
    make = dp.m.make_gaussian if kind == "gaussian" else dp.m.make_laplace
    meas = make(dp.vector_domain(dp.atom_domain(T=int)), metric, scale=scale)
    zeros = [0] * n
    seconds, _ = median_seconds(lambda: meas(zeros), repeats)
    return n / seconds


def _float(kind, scale, n, repeats):
    rng = np.random.default_rng(0)
    draw = rng.normal if kind == "gaussian" else rng.laplace
    seconds, _ = median_seconds(lambda: draw(0.0, scale, n), repeats)
    return n / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=4_000_000, help="samples per draw")
    parser.add_argument("--n-opendp", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = add_json_option(parser).parse_args()
    run = Run(__file__)
    columns = ["scale", "ours, numba M/s", "ours, numba, CPU M/s", "ours, numba, ChaCha20 M/s",
               "ours, numpy M/s", "OpenDP M/s", "numpy float M/s", "float / numba",
               "numba / OpenDP"]  # fmt: skip
    formats = ["", ".3g", ".3g", ".3g", ".3g", ".3g", ".3g", ".1f", ".0f"]
    note = ("Samples per second (millions), median of the repeats, one core; PCG64 unless "
            "ChaCha20 is named; 'CPU': per CPU second (process_time). When the machine is "
            "shared with other jobs (see the load average) the wall-clock figures are low: "
            "the CPU column and the ratios within a row are the better guide.")  # fmt: skip
    g = run.table(f"Discrete Gaussian N_Z(0, σ²), {args.n:,} samples a draw",
                  columns, formats, note)  # fmt: skip
    for s2 in GAUSSIAN:
        sigma = math.sqrt(s2)
        small = args.n if s2 < 10**8 else 20_000  # Python integers on the numpy path

        def draw(k, rng, s2=s2):
            return noise.discrete_gaussian(s2, k, rng)

        fast, cpu = _ours("1", draw, args.n, args.repeats, cpu=True)
        chacha = _ours("1", draw, args.n, args.repeats, secure_generator())
        slow = _ours("0", draw, small, 1 if small < args.n else args.repeats)
        other = _opendp("gaussian", sigma, args.n_opendp, args.repeats)
        fl = _float("gaussian", sigma, args.n, args.repeats)
        g.add(f"σ² = {s2}", fast / 1e6, cpu / 1e6, chacha / 1e6, slow / 1e6,
              None if other is None else other / 1e6, fl / 1e6, fl / fast,
              None if other is None else fast / other)  # fmt: skip
    lap = run.table(f"Discrete Laplace Lap_Z(t/s), {args.n:,} samples a draw",
                    columns, formats, note)  # fmt: skip
    for s, t in LAPLACE:

        def draw(k, rng, s=s, t=t):
            return noise.discrete_laplace(s, t, rng, size=k)

        fast, cpu = _ours("1", draw, args.n, args.repeats, cpu=True)
        chacha = _ours("1", draw, args.n, args.repeats, secure_generator())
        slow = _ours("0", draw, args.n, args.repeats)
        other = _opendp("laplace", t / s, args.n_opendp, args.repeats)
        fl = _float("laplace", t / s, args.n, args.repeats)
        lap.add(f"t/s = {Fraction(t, s)}", fast / 1e6, cpu / 1e6, chacha / 1e6, slow / 1e6,
                None if other is None else other / 1e6, fl / 1e6, fl / fast,
                None if other is None else fast / other)  # fmt: skip
    run.write(args.json)


if __name__ == "__main__":
    main()
