"""Sensitivity of a stack of Kronecker products (HDMM eq. 1) without an N-length vector."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from linalg_oracle import random_factor

from mmtoolkit import census
from mmtoolkit.linalg import Dense, Identity, Kronecker, Matrix, Prefix, VStack
from mmtoolkit.linalg import base as base_module

RTOL = 1e-12


def random_stack(seed):
    rng = np.random.default_rng(seed)
    sizes = [int(n) for n in rng.integers(1, 6, size=int(rng.integers(2, 5)))]
    blocks = []
    for _ in range(int(rng.integers(1, 7))):
        K = Kronecker([random_factor(rng, n) for n in sizes])
        blocks.append(float(rng.normal()) * K if rng.random() < 0.5 else K)
    return VStack(blocks)


def dense_sensitivity(M, p):
    D = M.dense()
    col = np.abs(D).sum(axis=0) if p == 1 else (D * D).sum(axis=0)
    return float(col.max()) if p == 1 else math.sqrt(float(col.max()))


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("block", [base_module.KRON_MAX_BLOCK, 7])
def test_stack_sensitivity_matches_dense_column_norms(seed, block, monkeypatch):
    monkeypatch.setattr(base_module, "KRON_MAX_BLOCK", block)  # 7: many small blocks
    W = random_stack(seed)
    for p in (1, 2):
        assert W.sensitivity(p) == pytest.approx(dense_sensitivity(W, p), rel=RTOL, abs=1e-300)


def test_stack_without_common_factors_falls_back_to_column_norms():
    rng = np.random.default_rng(1)
    W = VStack([Kronecker([Identity(3), Prefix(4)]), Dense(rng.normal(size=(5, 12)))])
    for p in (1, 2):
        assert W.sensitivity(p) == pytest.approx(dense_sensitivity(W, p), rel=RTOL)


def test_sf1_sensitivity_matches_the_n_length_column_norms():
    W = census.sf1(relationship=False)  # N = 29,440: the generic N-vector is cheap here
    for p in (1, 2):
        assert W.sensitivity(p) == pytest.approx(Matrix.sensitivity(W, p), rel=RTOL)


def test_sf1_plus_sensitivity_without_an_n_length_array():
    W = census.sf1_plus()
    N = W.shape[1]
    tracemalloc.start()
    s1, s2 = W.sensitivity(1), W.sensitivity(2)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < N * 8 / 100, f"peak {peak} bytes for N = {N}"
    # every SF1 query asked nationally and per state: [T_51; I_51] has column norms 2 (p = 1, 2)
    sf1 = census.sf1()
    assert s1 == pytest.approx(2 * sf1.sensitivity(1), rel=RTOL)
    assert s2 == pytest.approx(math.sqrt(2) * sf1.sensitivity(2), rel=RTOL)
