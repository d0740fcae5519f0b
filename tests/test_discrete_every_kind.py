"""Exact integer noise over every built-in strategy kind: a discrete release either succeeds
(finite answers, the ledger charged once) or is refused with the clear error of a kind that
does not support it (:class:`~mmtoolkit.linalg.NotSupportedByKindError`), or by its selector
(:class:`~mmtoolkit.selectors.NotApplicableError`) — before any noise is drawn and before the
ledger is charged, never a MemoryError or a raw traceback of another type."""

from __future__ import annotations

import numpy as np
import pytest

import mmtoolkit as mm
from mmtoolkit import mechanism, records, selectors
from mmtoolkit.domain import Domain
from mmtoolkit.ledger import Ledger
from mmtoolkit.linalg import (
    Dense,
    Haar,
    Identity,
    Kronecker,
    NotSupportedByKindError,
    Permuted,
    Prefix,
    Sum,
    Total,
    Weighted,
    WidthRange,
)
from mmtoolkit.linalg.base import integer_row_scales
from mmtoolkit.privacy import ZCDP, PureDP

CASES = [(("a",), (8,), "all_range:n=8"), (("a", "b"), (3, 4), "marginals:k=1")]
PRIVACY = {"rho": ZCDP(0.5), "epsilon": PureDP(1.0)}


def _records(names, sizes):
    dom = Domain(names, sizes)
    return records.from_codes(np.column_stack([np.arange(40) % s for s in sizes]), dom)


@pytest.mark.parametrize("names, sizes, workload", CASES)
@pytest.mark.parametrize("unit", sorted(PRIVACY))
@pytest.mark.parametrize("selector", selectors.available())
def test_discrete_release_succeeds_or_is_refused_before_the_charge(
    tmp_path, selector, unit, names, sizes, workload
):
    privacy = PRIVACY[unit]
    path = tmp_path / "ledger.json"
    Ledger.create(path, **{unit: 100.0})
    recs = _records(names, sizes)
    try:
        res = mm.release(recs, workload, privacy, selector, seed=3, noise="discrete",
                         ledger=path)  # fmt: skip
    except (NotSupportedByKindError, selectors.NotApplicableError) as exc:
        if isinstance(exc, NotSupportedByKindError):
            assert "not supported by this strategy kind (" in str(exc)
        assert Ledger(path).entries == []  # refused before the charge: nothing spent
        return
    assert np.all(np.isfinite(res.answers))
    assert [e["status"] for e in Ledger(path).entries] == ["committed"]


def test_eigen_design_discrete_is_a_clear_refusal_not_a_memory_error(tmp_path):
    """Eigen-Design's rows carry ~1e-16 rounding entries: read as integers up to the smallest
    entry, they would be ~1e16-sized integers and ask for an exabyte array."""
    path = tmp_path / "ledger.json"
    Ledger.create(path, rho=1.0)
    with pytest.raises(NotSupportedByKindError, match=r"strategy kind \(OrthoBasis\)"):
        mm.release(_records(("a",), (8,)), "all_range:n=8", ZCDP(0.5), "eigen_design",
                   noise="discrete", seed=1, ledger=path)  # fmt: skip
    assert Ledger(path).entries == []


def _kinds():
    """Kinds no selector produces on the small workloads above, each with whether its rows are
    integer vectors up to a scale."""
    rounding = np.eye(8)
    rounding[0, 3] = 1e-16  # an integer row plus one rounding entry
    return [
        (Haar(8), True),
        (Prefix(8), True),
        (WidthRange(8, 3), True),
        (Weighted(0.25, Prefix(8)), True),
        (Permuted(Prefix(8), np.arange(8)[::-1]), True),
        (Sum([Prefix(8), Identity(8)]), True),
        (Kronecker([Total(2), Prefix(4)]), True),
        (Dense(0.5 * np.triu(np.ones((8, 8)))), True),
        (Dense(rounding), False),
        (Dense(np.random.default_rng(0).standard_normal((8, 8))), False),
    ]


@pytest.mark.parametrize("A, integer", _kinds(), ids=lambda v: type(v).__name__)
def test_discrete_noise_on_kinds_no_selector_produces(A, integer):
    x = np.arange(8.0)
    rng = np.random.default_rng(2)
    state = rng.bit_generator.state
    if integer:
        y = mechanism.release(Identity(8), A, x, PureDP(1.0), rng, noise="discrete")
        assert np.all(np.isfinite(y))
        return
    with pytest.raises(NotSupportedByKindError, match=r"not supported by this strategy kind"):
        mechanism.release(Identity(8), A, x, PureDP(1.0), rng, noise="discrete")
    assert rng.bit_generator.state == state  # refused before any noise is drawn


def test_integer_row_scales_tolerance_is_float64_rounding():
    """A row that is a scale times integers passes with the scale's rounding in every entry;
    a ratio that misses an integer by more than a few ulps, or an integer beyond the bound,
    fails."""
    d = 0.1  # not a binary fraction: every entry k·d carries its own rounding
    M = d * np.array([[1.0, 3.0, 7.0, 0.0], [2.0, 2.0, 0.0, 6.0]])
    np.testing.assert_allclose(integer_row_scales(M), [d, 2 * d], rtol=0)
    off = M.copy()
    off[0, 1] *= 1 + 1e-13  # ~450 ulps away from 3·d
    assert integer_row_scales(off) is None
    assert integer_row_scales(np.array([[1e-16, 1.0]])) is None  # would be 1e16 as integers
    assert integer_row_scales(np.array([[1.0, 2.0**20]])) is not None
    assert integer_row_scales(np.array([[1.0, 2.0**20 + 1]])) is None
