"""workloads.random_predicates: the "uniformly sampled predicate queries" of Li & Miklau 2012
(§5.1, Table 2 "Predicate"), seeded, explicit 0/1 rows, and its runner kind."""

import numpy as np
import pytest

from mmtoolkit import linalg, workloads
from mmtoolkit.runner.config import load_config
from mmtoolkit.workload_specs import workload_kinds
from mmtoolkit.workloads import random_predicates


def test_shape_entries_and_determinism():
    W = random_predicates(64, 40, seed=3)
    assert isinstance(W, linalg.Dense)
    A = W.dense()
    assert A.shape == (40, 64) and W.shape == (40, 64)
    assert set(np.unique(A)) <= {0.0, 1.0}
    np.testing.assert_array_equal(A, random_predicates(64, 40, seed=3).dense())
    assert not np.array_equal(A, random_predicates(64, 40, seed=4).dense())
    # the same rows as the Table 2 script drew them: fair bits from default_rng(seed)
    ref = np.random.default_rng(3).integers(0, 2, size=(40, 64))
    np.testing.assert_array_equal(A, ref)


def test_uniform_subsets_statistics():
    """A uniform random subset has independent fair bits, so E[WᵀW] = m (I + J) / 4: the
    diagonal averages m/2, off-diagonal entries m/4 (tolerances are ~10 standard errors)."""
    m, n = 4000, 50
    G = random_predicates(n, m, seed=0).dense()
    G = G.T @ G / m
    diag = np.diag(G)
    off = G[~np.eye(n, dtype=bool)]
    assert abs(diag.mean() - 0.5) < 0.01
    assert abs(off.mean() - 0.25) < 0.005
    assert np.all(np.abs(diag - 0.5) < 0.05) and np.all(np.abs(off - 0.25) < 0.05)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": 0, "m": 4, "seed": 0}, "n: must be >= 1, got 0"),
        ({"n": 4, "m": -1, "seed": 0}, "m: must be >= 1, got -1"),
        ({"n": 4.0, "m": 4, "seed": 0}, "n: expected an integer, got float 4.0"),
        ({"n": 4, "m": 4, "seed": -1}, "seed: must be >= 0, got -1"),
        ({"n": 4, "m": 4, "seed": 1.5}, "seed: expected an integer, got float 1.5"),
        ({"n": 4, "m": 4, "seed": True}, "seed: expected an integer, got bool True"),
        ({"n": 4, "m": 4, "seed": None}, "seed: expected an integer, got null None"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        random_predicates(**kwargs)


def test_size_guard():
    with pytest.raises(linalg.TooLargeError):
        random_predicates(10**5, 10**4, seed=0)


def test_runner_kind(tmp_path):
    assert "random_predicates" in workload_kinds()
    assert "random_predicates" in workloads.__all__
    cfg = tmp_path / "pred.yaml"
    cfg.write_text(
        "paper: test\ntable: pred\nmetric: rmse\n"
        "privacy: {kind: approx, epsilon: 0.5, delta: 1.0e-4}\n"
        "columns: [{name: I, selector: identity}]\n"
        "rows:\n  - name: Predicate\n"
        "    workload: {kind: random_predicates, n: 32, m: 16, seed: 7}\n"
    )
    W = load_config(cfg).rows[0].workload.build()
    np.testing.assert_array_equal(W.dense(), random_predicates(32, 16, seed=7).dense())
