"""The exact integer noise of a large measurement is added chunk by chunk into the answers'
own memory: no integer array or temporary over all the rows, and the noise is the stream's
(the discrete sampler's draws, block by block)."""

from __future__ import annotations

import tracemalloc
from fractions import Fraction

import numpy as np

from mmtoolkit import noise
from mmtoolkit.linalg import Identity, Weighted
from mmtoolkit.measurement import DISCRETE_BLOCK
from mmtoolkit.plan import INTEGER_CHUNK, NoisePlan
from mmtoolkit.privacy import ZCDP


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
    # A x (8 bytes a row, the answers' memory), a block of drawn noise (and the sampler's
    # buffers, < 1 MB), a few chunk-sized temporaries; the integers over all rows, the row
    # scales and each temporary of the check of integrality would add 8 bytes a row each
    assert peak < 8 * m + 8 * DISCRETE_BLOCK + 8 * 8 * INTEGER_CHUNK + (1 << 20)
    # y = 3 (x + z): z the discrete Gaussian's draws of the stream, block after block
    rng = np.random.default_rng(1)
    z = np.concatenate([noise.discrete_gaussian(sigma2, DISCRETE_BLOCK, rng)
                        for _ in range(m // DISCRETE_BLOCK)])  # fmt: skip
    assert isinstance(sigma2, Fraction) and np.array_equal(y, 3.0 * (x + z))
