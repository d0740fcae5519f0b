"""The continuous noise a release draws, as the noise plan draws it, for tests that compare a
measurement with ``A x`` plus the values of one draw."""

import numpy as np

from mmtoolkit.measurement import continuous_stream


def one_draw(privacy, rng, shape, sensitivity: float = 1.0) -> np.ndarray:
    """The noise of ``privacy`` at ``sensitivity`` (its family and scale), of ``shape``: one
    :func:`~mmtoolkit.measurement.continuous_stream` from ``rng`` added to zeros in C order
    (what :meth:`mmtoolkit.plan.NoisePlan.noise_stream` opens with the plan's scale)."""
    z = np.zeros(shape)
    scale = privacy.noise_scale(sensitivity)
    continuous_stream(privacy.family, scale, rng, z.size).add(z.reshape(-1))
    return z
