"""The binary encoding of a domain and the marginal workloads on it (Cormode et al. §4.1, §5):
mmtoolkit.binary_encoding."""

from __future__ import annotations

import numpy as np
import pytest

from mmtoolkit import Domain, datasets, evaluate, selectors, workloads
from mmtoolkit.binary_encoding import BinaryEncoding, binary_marginals, workload_attribute_sets
from mmtoolkit.linalg import Marginals
from mmtoolkit.privacy import PureDP


def test_binary_encoding_of_adult_datacube():
    enc = BinaryEncoding(datasets.domain("adult_datacube"))
    assert enc.bits == (4, 4, 3, 4, 3, 3, 1, 1)
    assert enc.d == 23
    W = enc.marginals([["workclass"], ["sex", "salary"]])
    assert W.shape == (16 + 4, 2**23)


def test_binary_encoding_preserves_marginals():
    dom = Domain(["a", "b"], [3, 5])
    enc = BinaryEncoding(dom)
    assert enc.bits == (2, 3)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 9, size=15).astype(float)
    xb = enc.encode(x)
    assert xb.sum() == x.sum()
    marg_b = enc.marginals([["b"]]) @ xb
    np.testing.assert_array_equal(marg_b[:5], x.reshape(3, 5).sum(axis=0))
    np.testing.assert_array_equal(marg_b[5:], 0)  # unused codes 5..7


def test_answers_match_the_original_marginals_on_encoded_data():
    """Each binary marginal, applied to the encoded data vector, gives the original marginal's
    answers in the cells with valid codes and 0 in the structurally empty ones."""
    dom = Domain(["a", "b", "c"], [3, 2, 5])  # 2 + 1 + 3 = 6 bits
    x = np.random.default_rng(0).integers(0, 9, size=dom.size).astype(float)
    xb = BinaryEncoding(dom).encode(x)
    W = binary_marginals(dom, 2, lower=True)
    assert W.shape[1] == 64 and len(W.weights) == 1 + 3 + 3
    bits = {0: 2, 1: 1, 2: 3}
    for key in W.weights:
        # the original attribute set of this bit mask
        attrs, off = [], 0
        for i in range(3):
            if key >> off & 1:
                attrs.append(i)
            off += bits[i]
        got = Marginals((2,) * 6, {key: 1.0}) @ xb
        want = workloads.marginals_list(dom, [attrs]) @ x
        full = got.reshape([2 ** bits[i] for i in attrs])
        valid = full[tuple(slice(0, dom.sizes[i]) for i in attrs)]
        np.testing.assert_allclose(valid.ravel(), want, rtol=0, atol=1e-9)
        assert full.sum() == pytest.approx(x.sum())  # nothing in the empty codes


def test_adult_23_bits_and_paper_workload_counts():
    dom = datasets.domain("adult_datacube")
    W1 = binary_marginals(dom, 1)
    assert W1.shape[1] == 2**23 and len(W1.weights) == 8
    W2 = binary_marginals("adult_datacube", 1, variant="Q2", seed=0)
    assert len(W2.weights) == 8 + 28 // 2
    W3 = binary_marginals(dom, 1, variant="Q3", fixed=dom.names[-1])
    assert len(W3.weights) == 8 + 7
    assert W3.weights.keys() == binary_marginals(dom, 1, variant="Q3", fixed=7).weights.keys()
    # a binary-marginals workload through the datacube selector and the evaluator (a small
    # domain: the evaluator's marginals route works on 2^D vectors)
    small = binary_marginals(Domain(["a", "b", "c", "e"], [3, 2, 5, 4]), 2, variant="Q3")
    P = PureDP(1.0)
    err = {
        b: evaluate.expected_error(
            small, selectors.get("datacube", strategy="Q", budget=b).select(small, P), P
        )
        for b in ("uniform", "optimal")
    }
    assert err["optimal"] < err["uniform"] * (1 - 1e-3)


def test_q2_is_seeded_and_bits_mode():
    dom = datasets.domain("adult_datacube")
    a = binary_marginals(dom, 2, variant="Q2", seed=3)
    assert a.weights.keys() == binary_marginals(dom, 2, variant="Q2", seed=3).weights.keys()
    assert a.weights.keys() != binary_marginals(dom, 2, variant="Q2", seed=4).weights.keys()
    B = binary_marginals(dom, 1, over="bits")
    assert sorted(B.weights) == [1 << i for i in range(23)]
    nl = datasets.domain("nltcs")  # binary already: both modes agree
    assert (
        binary_marginals(nl, 2).weights.keys()
        == binary_marginals(nl, 2, over="bits").weights.keys()
    )
    assert binary_marginals(nl, 2).weights.keys() == workloads.marginals(nl, 2).weights.keys()


def test_attribute_sets():
    assert workload_attribute_sets(3, 1, lower=True) == [[], [0], [1], [2]]
    assert workload_attribute_sets(3, 1, "Q3", fixed=0) == [[0], [1], [2], [0, 1], [0, 2]]
    assert workload_attribute_sets(3, 3) == [[0, 1, 2]]
    a = workload_attribute_sets(16, 2, "Q2", seed=4)  # Q2: seeded half of the (k+1)-way
    assert a == workload_attribute_sets(16, 2, "Q2", seed=4)
    assert a != workload_attribute_sets(16, 2, "Q2", seed=5)
    assert len(a) == 120 + 560 // 2
    assert len(workload_attribute_sets(8, 1, "Q3", fixed=7)) == 8 + 7


def test_bad_input():
    dom = Domain(["a", "b"], [3, 4])
    with pytest.raises(ValueError, match="variant must be"):
        binary_marginals(dom, 1, variant="Q4")
    with pytest.raises(ValueError, match="k: must be <= d = 2, got 3"):
        binary_marginals(dom, 3)
    with pytest.raises(ValueError, match="must be < d"):
        binary_marginals(dom, 2, variant="Q2")
    with pytest.raises(ValueError, match="not one of"):
        binary_marginals(dom, 1, variant="Q3", fixed="zzz")
    with pytest.raises(ValueError, match="outside"):
        binary_marginals(dom, 1, variant="Q3", fixed=5)
    with pytest.raises(ValueError, match="over must be"):
        binary_marginals(dom, 1, over="cells")
    with pytest.raises(ValueError, match="domain must be"):
        binary_marginals([3, 4], 1)
    with pytest.raises(ValueError, match="single-value"):
        binary_marginals(Domain(["a", "b", "c"], [1, 4, 2]), 1)
    with pytest.raises(ValueError, match="seed: expected an integer"):
        binary_marginals(dom, 0, variant="Q2", seed=1.5)
    with pytest.raises(ValueError, match="Domain"):
        BinaryEncoding([2, 3])
    with pytest.raises(ValueError):
        BinaryEncoding(datasets.domain("adult_datacube")).marginals([["no-such-attribute"]])
