"""The blocks of the exact integer noise stream: each drawn from its own generator keyed by
words of the release's generator, on the worker threads at once, the same bytes whatever
the number of threads, the exact law unchanged and no words shared between blocks."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from scipy import stats
from test_noise_exact_law import ALPHA, _edges, g_test, gaussian_cdf, laplace_cdf

from mmtoolkit import measurement
from mmtoolkit.linalg import Identity, Weighted
from mmtoolkit.measurement import (
    BLOCK_KEY_WORDS,
    DISCRETE_BLOCK,
    DiscreteNoiseStream,
    block_generator,
)
from mmtoolkit.plan import NoisePlan
from mmtoolkit.privacy import PureDP

#: A stream of three and a half blocks: two full blocks drawn beside the caller, a short last.
SIZE = 7 * DISCRETE_BLOCK // 2


def _generator(kind: str, seed: int) -> np.random.Generator:
    if kind == "pcg64":
        return np.random.default_rng(seed)
    randomgen = pytest.importorskip("randomgen")
    return np.random.Generator(randomgen.ChaCha(key=seed, rounds=20))


def _stream_values(kind, params, rng, size, releases=1, param_at=None, pieces=(5, 70_001)):
    """The stream's values, added to zeros in uneven pieces."""
    rows = size // releases
    param_at = param_at or (lambda lo, hi: np.zeros(hi - lo, dtype=np.int64))
    stream = DiscreteNoiseStream(kind, params, rng, rows, releases, param_at)
    out = np.zeros(size, dtype=np.int64)
    cuts = [0, *pieces, size]
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        piece = np.zeros(hi - lo, dtype=np.int64)
        stream.add(piece)
        out[lo:hi] = piece
    return out


@pytest.mark.parametrize("gen", ["pcg64", "chacha"])
@pytest.mark.parametrize("kind, params", [("gaussian", [(0, 30)]),
                                          ("laplace", [(0, 2, 7), (1, 1, 3)])])  # fmt: skip
def test_same_bytes_with_one_thread_or_two(monkeypatch, gen, kind, params):
    """One parameter and two (rows alternate between them, two releases a row): the values,
    and the caller's generator after the stream, do not depend on MMTOOLKIT_THREADS."""
    size, r = SIZE, 2

    def param_at(lo, hi):
        return (np.arange(lo, hi) % len(params)).astype(np.int64)

    got, states = [], []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("MMTOOLKIT_THREADS", threads)
        rng = _generator(gen, 9)
        got.append(_stream_values(kind, params, rng, size, r, param_at))
        states.append(rng.integers(0, 2**64, dtype=np.uint64, size=4))
    assert got[0].tobytes() == got[1].tobytes() == got[2].tobytes()
    assert states[0].tobytes() == states[1].tobytes() == states[2].tobytes()
    assert np.count_nonzero(got[0]) > size // 2  # noise was added everywhere


def test_a_measure_is_the_same_bytes_with_one_thread_or_two(monkeypatch):
    """The release path (the plan's chunks of integer answers, its stream closed after)."""
    m = 5 * DISCRETE_BLOCK // 2
    x = np.random.default_rng(0).integers(0, 5, m).astype(float)
    plan = NoisePlan(Weighted(2.0, Identity(m)), PureDP(0.7), "discrete")
    ys = []
    for threads in ("1", "2"):
        monkeypatch.setenv("MMTOOLKIT_THREADS", threads)
        ys.append(plan.measure(x, np.random.default_rng(3)))
    assert ys[0].tobytes() == ys[1].tobytes()


def test_blocks_are_drawn_at_once_on_two_threads(monkeypatch):
    """With two threads, two blocks are drawn at the same time (each sampler call waits at a
    barrier of two: drawn one after another, the first would wait alone until the timeout)."""
    monkeypatch.setenv("MMTOOLKIT_THREADS", "2")
    barrier = threading.Barrier(2, timeout=10)
    sample = measurement.DiscreteNoiseStream._sample
    met = []

    def spy(self, p, n, *rest):
        met.append(barrier.wait())
        return sample(self, p, n, *rest)

    monkeypatch.setattr(measurement.DiscreteNoiseStream, "_sample", spy)
    # four blocks: the first two calls meet, then the last two
    values = _stream_values("gaussian", [(0, 4)], np.random.default_rng(1), 4 * DISCRETE_BLOCK)
    assert sorted(met) == [0, 0, 1, 1] and values.size == 4 * DISCRETE_BLOCK


@pytest.mark.parametrize("gen", ["pcg64", "chacha"])
def test_block_generators_are_keyed_by_the_callers_words(gen):
    """A block's generator is a fresh one of the caller's bit-generator type: ChaCha20 keyed
    by the 256 bits (same rounds), else seeded by SeedSequence(words); every block's key is
    the next four words of the caller's generator."""
    rng = _generator(gen, 5)
    key = np.array([1, 2**64 - 1, 3, 2**63], dtype=np.uint64)
    g = block_generator(rng, key)
    assert type(g.bit_generator) is type(rng.bit_generator)
    if gen == "chacha":
        from randomgen import ChaCha

        want = ChaCha(key=1 + ((2**64 - 1) << 64) + (3 << 128) + (2**63 << 192), rounds=20)
        assert g.bit_generator.state["state"]["rounds"] == 20
    else:
        want = np.random.PCG64(np.random.SeedSequence([1, 2**64 - 1, 3, 2**63]))
    np.testing.assert_array_equal(
        g.integers(0, 2**64, dtype=np.uint64, size=8),
        np.random.Generator(want).integers(0, 2**64, dtype=np.uint64, size=8),
    )


@pytest.mark.parametrize("gen", ["pcg64", "chacha"])
def test_blocks_do_not_share_words(gen):
    """The words the blocks of one stream read (their generators' first 2^16 words each),
    the keys and the caller's next words after them are all distinct: 64-bit words of
    independent uniform streams coincide with probability ≈ n²/2^65 ≈ 1e-9 here, while
    blocks keyed alike, or reading the caller's own stream, would repeat them all."""
    rng = _generator(gen, 2)
    words = []
    for _ in range(4):  # the keys of a four-block stream, in order
        key = rng.integers(0, 2**64, dtype=np.uint64, size=BLOCK_KEY_WORDS)
        words.append(key)
        words.append(block_generator(rng, key).integers(0, 2**64, dtype=np.uint64,
                                                        size=1 << 16))  # fmt: skip
    words.append(rng.integers(0, 2**64, dtype=np.uint64, size=1 << 16))
    allw = np.concatenate(words)
    assert np.unique(allw).size == allw.size


@pytest.mark.parametrize("kind, param", [("gaussian", 10**4), ("laplace", 100)])
def test_exact_law_over_blocks(monkeypatch, kind, param):
    """The law of a multi-block stream drawn on two threads is the sampler's (the G-test of
    tests/test_noise_exact_law.py, at its false-alarm rate), in every block and over all."""
    monkeypatch.setenv("MMTOOLKIT_THREADS", "2")
    params = [(0, param)] if kind == "gaussian" else [(0, 1, param)]
    x = _stream_values(kind, params, np.random.default_rng(21), SIZE)
    if kind == "gaussian":
        edges = _edges(lambda q: stats.norm.ppf(q) * math.sqrt(param))
        cdf = gaussian_cdf(param)
    else:
        edges = _edges(lambda q: stats.laplace.ppf(q, scale=param))
        cdf = laplace_cdf(1, param)
    # Bonferroni over the four blocks and the whole: ALPHA in all
    for a in range(0, SIZE, DISCRETE_BLOCK):
        assert g_test(x[a : a + DISCRETE_BLOCK], edges, cdf) > ALPHA / 5
    assert g_test(x, edges, cdf) > ALPHA / 5


def test_in_order_makes_tasks_in_order_on_the_calling_thread():
    """InOrder: ``make`` runs on the caller's thread, in order, at most ``threads`` tasks
    ahead of the result taken; results come back in order; close drops the rest."""
    from mmtoolkit.threads import InOrder

    caller, made, ran = threading.get_ident(), [], []

    def make(i):
        made.append((i, threading.get_ident() == caller))
        return lambda: ran.append(i) or i * i

    tasks = InOrder(make, 10, threads=3)
    assert [tasks.next() for _ in range(4)] == [0, 1, 4, 9]
    assert made == [(i, True) for i in range(len(made))] and len(made) == 4 + 3
    tasks.close()
    assert tasks._pool is None and len(made) == 7 and set(ran) <= set(range(7))
    with pytest.raises(ValueError, match="closed"):
        tasks.next()
