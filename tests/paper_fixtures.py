"""Small strategy matrices from the papers, shared by the tests (not a test module)."""

import numpy as np

#: Li et al. 2010, Fig. 1: the binary hierarchy H_4 (7 x 4) and the Haar wavelet Y_4.
H4 = np.array(
    [
        [1, 1, 1, 1],
        [1, 1, 0, 0],
        [0, 0, 1, 1],
        [1, 0, 0, 0],
        [0, 1, 0, 0],
        [0, 0, 1, 0],
        [0, 0, 0, 1],
    ],
    dtype=float,
)
Y4 = np.array([[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]], dtype=float)
