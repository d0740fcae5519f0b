"""The workload normal form (linalg.normal_form) against each workload's own products.

Every builder of ``workloads.__all__`` (as ``workload_specs.workload_kinds`` lists them, so a
new builder must be added to ``ARGS``) is rebuilt from its normal form — each term's signed
weight times the Kronecker product of its dense factors, at its row offsets — and compared
with the workload's own product on a sample of cells (all cells when there are few).
"""

from __future__ import annotations

import numpy as np
import pytest

from mmtoolkit import Domain, workloads
from mmtoolkit.linalg import (
    FACTOR_KINDS,
    Dense,
    Identity,
    Kronecker,
    Marginals,
    Ones,
    Total,
    VStack,
    Weighted,
    normal_form,
)
from mmtoolkit.workload_specs import MATRIX_KIND, workload_kinds

NUMERIC = Domain(["a", "b", "c"], [3, 2, 4], numeric=[True, False, True])

#: Small arguments for every workload builder.
ARGS = {
    "binary_marginals": dict(domain=Domain.from_sizes([3, 2, 4]), k=2, lower=True),
    "sf1": dict(relationship=False),
    "sf1_plus": dict(relationship=False),
    "identity": dict(n=5),
    "total": dict(n=5),
    "prefix": dict(n=5),
    "all_range": dict(n=5),
    "width_range": dict(n=6, w=3),
    "permuted": dict(W=workloads.all_range(5), seed=0),
    "random_predicates": dict(n=6, m=4, seed=0),
    "kron": dict(factors=[workloads.prefix(3), workloads.total(2), workloads.identity(2)]),
    "union": dict(
        workloads=[workloads.identity(12), workloads.kron([workloads.prefix(3), Total(4)])],
        weights=[2.0, 0.5],
    ),
    "marginal": dict(domain=[3, 2, 4], attrs=[0, 2]),
    "marginals": dict(domain=[3, 2, 4], k=2, lower=True),
    "marginals_list": dict(domain=[3, 2, 4], attr_sets=[[1], [0, 2]], weights=[3.0, 0.25]),
    "range_marginals": dict(domain=NUMERIC, k=2, lower=True),
    "prefix_marginals": dict(domain=NUMERIC, k=2),
    "eigen_design_figure1": {},
}


def builders() -> list[str]:
    return [k for k in workload_kinds() if k != MATRIX_KIND]


def test_every_builder_has_arguments():
    assert sorted(ARGS) == sorted(builders())


def rebuilt_columns(nf, cols: np.ndarray) -> np.ndarray:
    """The workload's rows on the cells ``cols`` rebuilt densely from its normal form:
    row ``start + r`` of a term is ``weight · Π_i F_i[r_i, j_i]`` (C order of rows and
    cells)."""
    out = np.full((nf.shape[0], cols.size), np.nan)
    for t in nf.terms:
        idx = np.unravel_index(cols, t.sizes)
        block = np.full((1, cols.size), t.weight)
        for f, j in zip(t.factors, idx, strict=True):
            F = f.dense()[:, j]
            block = (block[:, None, :] * F[None, :, :]).reshape(-1, cols.size)
        out[t.start : t.stop] = block
    return out


def sample_cells(N: int, rng) -> np.ndarray:
    if N <= 64:
        return np.arange(N)
    k = 4 if N > 100_000 else 32  # the reference product holds N x k numbers
    return np.sort(rng.choice(N, size=k, replace=False))


def check_rebuilds(W, rng):
    nf = normal_form(W)
    assert nf.shape == W.shape
    assert nf.terms[0].start == 0 and nf.terms[-1].stop == W.shape[0]
    assert all(a.stop == b.start for a, b in zip(nf.terms, nf.terms[1:]))
    for t in nf.terms:
        assert set(t.kinds) <= set(FACTOR_KINDS) and len(t.kinds) == len(t.factors)
        assert t.c == pytest.approx(t.weight**2, rel=1e-15)
    cols = sample_cells(W.shape[1], rng)
    E = np.zeros((W.shape[1], cols.size))
    E[cols, np.arange(cols.size)] = 1.0
    want = W.matvec(E)
    got = rebuilt_columns(nf, cols)
    # A unit column makes every sum in W's own product exact (one nonzero per sum), so both
    # sides are products of at most d + 1 factor entries and weights: a few roundings of
    # eps = 2.2e-16 each, relative to the entry; 1e-13 leaves a margin of ~100x.
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * np.abs(want).max())


@pytest.mark.parametrize("name", sorted(ARGS))
def test_normal_form_rebuilds_every_builder(name):
    W = getattr(workloads, name)(**ARGS[name])
    check_rebuilds(W, np.random.default_rng(0))


def test_signed_weights_and_weighted_factors():
    """A negative weight outside, inside a factor and on a stacked block is the term's sign."""
    M = Marginals((3, 2), {0b01: -2.0, 0b11: 0.5})
    W = VStack(
        [
            Weighted(-3.0, Kronecker([Weighted(-0.5, Identity(3)), Total(2)])),
            Weighted(2.0, M),
            Kronecker([Dense(np.arange(6.0).reshape(2, 3)), Ones(3, 2)]),
        ]
    )
    nf = normal_form(W)
    assert [t.weight for t in nf.terms] == [1.5, -4.0, 1.0, 1.0]
    assert [t.key for t in nf.terms] == [0b01, 0b01, 0b11, None]
    assert nf.terms[-1].kinds == ("dense", "ones") and nf.terms[-1].attrs == (0, 1)
    assert nf.sizes == (3, 2) and not nf.marginals
    check_rebuilds(W, np.random.default_rng(1))


def test_factor_kinds_and_marginal_reading():
    kinds = {
        workloads.identity(4): ("identity",),
        workloads.total(4): ("total",),
        workloads.prefix(4): ("prefix",),
        workloads.all_range(4): ("all_range",),
        workloads.width_range(4, 2): ("matrix",),
        workloads.random_predicates(4, 3, seed=1): ("dense",),
        workloads.permuted(workloads.prefix(4), seed=1): ("matrix",),
        Ones(3, 4): ("ones",),
    }
    for W, want in kinds.items():
        (term,) = normal_form(W).terms
        assert term.kinds == want, W
    (term,) = normal_form(-np.eye(2)).terms  # an array: one explicit factor, its own signs
    assert term.kinds == ("dense",) and term.weight == 1.0 and term.key is None
    nf = normal_form(workloads.range_marginals(NUMERIC, 2))
    assert [t.kinds for t in nf.terms] == [
        ("all_range", "identity", "total"),
        ("all_range", "total", "all_range"),
        ("total", "identity", "all_range"),
    ]
    assert [t.attrs for t in nf.terms] == [(0, 1), (0, 2), (1, 2)]
    assert all(t.key is None for t in nf.terms) and nf.sizes == (3, 2, 4)
    nf = normal_form(workloads.marginals([3, 2, 4], 2, lower=True))
    assert nf.marginals and [t.key for t in nf.terms] == [0, 1, 2, 3, 4, 5, 6]
    assert nf.terms[5].kinds == ("identity", "total", "identity")
    assert nf.terms[5].attrs == (0, 2)


def test_many_marginals_are_read_from_their_keys():
    """A union of many marginals on many attributes lists its terms without an object per
    attribute: the factor sequences are shared and picked on access."""
    W = workloads.marginals([2] * 60, 2, lower=True)
    nf = normal_form(W)
    assert nf.marginals and len(nf.terms) == 1 + 60 + 60 * 59 // 2
    t = nf.terms[-1]
    assert t.attrs == (58, 59) and t.stop - t.start == 4 and t.stop == W.shape[0]
    assert t.factors[59] is nf.terms[-2].factors[59]  # one Identity(2) object per attribute
    assert t.factors[0].factor_kind == "total" and t.factors[-1].factor_kind == "identity"
    assert normal_form(W) is nf  # cached per matrix


def test_a_string_is_refused_with_a_pointer_to_the_spec_grammar():
    with pytest.raises(TypeError, match="build_workload"):
        normal_form("prefix:n=4")
