"""The exact integer noise of a large measurement is added chunk by chunk into the answers'
own memory: no integer array or temporary over all the rows, and the noise is the stream's
(the discrete sampler's draws, block by block)."""

from __future__ import annotations

import tracemalloc
from fractions import Fraction

import numpy as np
import pytest

from mmtoolkit import mechanism, noise
from mmtoolkit.linalg import Identity, Weighted
from mmtoolkit.measurement import BLOCK_KEY_WORDS, DISCRETE_BLOCK, block_generator
from mmtoolkit.plan import INTEGER_CHUNK, NoisePlan
from mmtoolkit.privacy import ZCDP
from mmtoolkit.threads import worker_threads


def test_discrete_measure_adds_the_streams_noise_in_the_answers_memory():
    m = 1 << 22  # 32 MB of answers
    A = Weighted(3.0, Identity(m))
    x = np.random.default_rng(0).integers(0, 5, m).astype(float)
    plan = NoisePlan(A, ZCDP(0.5), "discrete")  # its row scales are computed here
    sigma2 = plan.row_scale_parts[3][0][1]
    noise.discrete_gaussian(sigma2, 10, np.random.default_rng(2))  # the sampler loaded
    tracemalloc.start()
    try:
        y = plan.measure(x, np.random.default_rng(1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # A x (8 bytes a row, the answers' memory), the block being added and the blocks drawn
    # ahead on the worker threads (and the samplers' buffers, < 1 MB each), a few
    # chunk-sized temporaries; the integers over all rows, the row scales and each
    # temporary of the check of integrality would add 8 bytes a row each
    k = worker_threads()
    assert peak < 8 * m + 8 * DISCRETE_BLOCK * (k + 1) + 8 * 8 * INTEGER_CHUNK + (k + 1 << 20)
    # y = 3 (x + z): z the discrete Gaussian's draws of the stream, block after block, each
    # from its own generator keyed by the next words of the release's
    rng = np.random.default_rng(1)
    z = np.concatenate([
        noise.discrete_gaussian(sigma2, DISCRETE_BLOCK, block_generator(
            rng, rng.integers(0, 2**64, dtype=np.uint64, size=BLOCK_KEY_WORDS)))
        for _ in range(m // DISCRETE_BLOCK)
    ])  # fmt: skip
    assert isinstance(sigma2, Fraction) and np.array_equal(y, 3.0 * (x + z))


@pytest.mark.parametrize("kind", ["identity", "H_16"])
def test_exact_noise_beyond_the_dense_limit(monkeypatch, kind):
    """The identity's and a tree's row scales are constant vectors (one float each), so a
    strategy with more rows than a dense array may hold still takes exact noise; the row
    scales read a range at a time are the dense ones."""
    from mmtoolkit.discrete import RowScales
    from mmtoolkit.linalg import Tree, base
    from mmtoolkit.linalg.tree import interval_tree
    from mmtoolkit.release_handlers import handler

    n = 5000
    A = Identity(n) if kind == "identity" else Tree(n, interval_tree(n, 16, split="near_equal"))
    dense = handler(A).row_scales(A)
    monkeypatch.setattr(base, "MAX_DENSE_ENTRIES", 1000)  # fewer than the rows
    assert np.array_equal(RowScales(A)(0, A.shape[0]), dense)
    x = np.random.default_rng(0).integers(0, 5, n).astype(float)
    y = mechanism.measure(A, x, ZCDP(0.5), np.random.default_rng(1), noise="discrete")
    z = y - A @ x
    assert np.array_equal(z, np.rint(z)) and z.std() > 0.5  # integer noise, drawn
