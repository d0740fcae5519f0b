"""Workload SPECs (``mmtoolkit.workload_specs``: the grammar of configs and the command line)
under hostile input.

Random kinds, keys and values — sizes kept tiny so that a spec that is accepted builds in
milliseconds — in the mapping form, the ``KIND:key=value,...`` form and as arbitrary text,
with and without a caller's domain. The property: a spec builds a workload whose entries
are finite, or is refused with a ``ValueError`` (``SpecError``) with a message; never
another exception, never a hang. The two written forms of one mapping give the same
outcome (the module docstring: they give the same ``WorkloadSpec``). And specs of absurd
size (10^8 ... 10^30 cells, 10^5 attributes) are refused, or built as structured (implicit)
matrices, within seconds and without allocating gigabytes.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from property_support import outcome, profile

from mmtoolkit.domain import Domain
from mmtoolkit.workload_specs import build_workload, builder_parameters, workload_kinds

KINDS = workload_kinds()
#: A caller's domain (the command line's --domain / --data), or none.
CALLER_DOMAINS = st.sampled_from(
    [
        None,
        Domain.from_sizes([2, 3]),
        Domain(["age", "sex"], [3, 2], numeric=[True, False]),
        Domain.from_sizes([4]),
    ]
)
#: Small values of every type: sizes stay tiny.
SCALARS = st.one_of(
    st.integers(-2, 5),
    st.sampled_from([0, 1, 2, 3, "adult", "synth", "a0", "age", "Q1", "flags", "attributes"]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text("abc01 ", max_size=3),
)


def _nested():
    return st.one_of(
        st.sampled_from(["prefix", "identity", "total", "all_range"]),
        st.fixed_dictionaries(
            {
                "kind": st.sampled_from(["prefix", "identity", "total", "nope"]),
                "n": st.integers(-1, 4),
            }
        ),
    )


VALUES = st.one_of(
    SCALARS,
    SCALARS,
    st.lists(
        st.one_of(st.integers(-1, 3), st.sampled_from(["a0", "a1", "age", "sex"])), max_size=3
    ),
    st.lists(st.lists(st.integers(0, 2), max_size=3), max_size=3),
    st.lists(
        st.lists(st.one_of(st.integers(-1, 2), st.floats()), min_size=1, max_size=3),
        min_size=1,
        max_size=3,
    ),
    st.fixed_dictionaries(
        {"preset": st.just("synth"), "n": st.integers(-1, 3), "d": st.integers(-1, 3)}
    ),
    st.fixed_dictionaries({"sizes": st.lists(st.integers(-1, 3), max_size=3)}),
    _nested(),
    st.lists(_nested(), max_size=3),
)


#: Plausible values of each builder parameter (by name), so that most specs build; any
#: parameter is sometimes replaced by a value of :data:`VALUES` instead.
DOMAIN_SPECS = st.sampled_from(
    [
        "synth",
        {"sizes": [2, 3]},
        {"preset": "synth", "n": 2, "d": 2},
        {"sizes": [3, 2], "names": ["age", "sex"], "numeric": [True, False]},
    ]
)
PLAUSIBLE = {
    "n": st.integers(1, 6),
    "k": st.integers(0, 3),
    "w": st.integers(1, 4),
    "m": st.integers(1, 4),
    "seed": st.integers(0, 3),
    "lower": st.booleans(),
    "legacy": st.booleans(),
    "relationship": st.booleans(),
    "two_or_more": st.sampled_from(["flags", "race1_complement"]),
    "variant": st.sampled_from(["Q1", "Q2", "Q3"]),
    "over": st.sampled_from(["attributes", "bits"]),
    "fixed": st.sampled_from([None, 0, "a0"]),
    "max_cells": st.one_of(st.none(), st.integers(1, 12)),
    "domain": DOMAIN_SPECS,
    "attrs": st.lists(st.sampled_from(["a0", "a1", 0, 1, "age", "sex"]), max_size=2, unique=True),
    "attr_sets": st.lists(
        st.lists(st.sampled_from([0, 1]), max_size=2, unique=True), min_size=1, max_size=3
    ),
    "weights": st.one_of(
        st.none(), st.lists(st.one_of(st.floats(0.5, 2), st.floats()), min_size=1, max_size=3)
    ),
    "factors": st.lists(_nested(), min_size=1, max_size=2),
    "workloads": st.lists(_nested(), min_size=1, max_size=3),
    "W": _nested(),
    "rows": st.lists(st.lists(st.integers(-2, 2), min_size=2, max_size=2), min_size=1, max_size=3),
}


@st.composite
def specs(draw) -> tuple[dict, Domain | None]:
    """``({kind: K, key: value, ...}, caller's domain)``: K's parameters, plausible (the
    spec's ``domain`` mostly left out when the caller gives one), each sometimes hostile,
    left out, or joined by an unknown key."""
    domain = draw(CALLER_DOMAINS)
    kind = draw(st.sampled_from([*KINDS, "nope"]))
    params = (
        []
        if kind == "nope"
        else [p.split("=")[0].strip() for p in builder_parameters(kind).split(",") if p.strip()]
    )
    out = {"kind": kind}
    for name in params:
        if kind == "matrix" and name == "file":
            continue
        if domain is not None and name == "domain" and draw(st.integers(0, 9)):
            continue  # the caller's domain is given to the builder
        if domain is not None and name == "n" and draw(st.booleans()):
            continue  # n from the caller's domain
        choice = draw(st.integers(0, 9))
        if choice == 0:
            continue
        plausible = PLAUSIBLE.get(name, VALUES)
        out[name] = draw(VALUES if choice == 1 else plausible)
    if draw(st.integers(0, 9)) == 0:
        out[draw(st.sampled_from(["colour", "n", "k", "domain", "seed"]))] = draw(VALUES)
    return out, domain


def _flow(value) -> str:
    """``value`` as a YAML flow scalar / collection (JSON, with YAML's non-finite floats)."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if value != value else (".inf" if value > 0 else "-.inf")
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def check_built(W) -> None:
    """A built workload: positive integer shape, finite entries (read densely when small)."""
    m, n = W.shape
    assert isinstance(m, int) and isinstance(n, int) and m >= 1 and n >= 1, W.shape
    if m * n <= 10**5:
        assert np.all(np.isfinite(W.dense())), "a workload with non-finite entries"


@profile(200)
@given(specs())
@example(
    (
        {"kind": "union", "workloads": ["prefix", "total"], "weights": [1.0, math.nan]},
        Domain.from_sizes([4]),
    )
)
@example(({"kind": "matrix", "rows": [[1.0, math.inf]]}, None))
def test_a_spec_builds_a_finite_workload_or_is_refused(spec):
    mapping, domain = spec
    W, refused = outcome(build_workload, mapping, "workload", domain=domain)
    if refused is None:
        check_built(W)

    text = (
        mapping["kind"]
        + (":" if len(mapping) > 1 else "")
        + ",".join(f"{k}={_flow(v)}" for k, v in mapping.items() if k != "kind")
    )
    W2, refused2 = outcome(build_workload, text, "workload", domain=domain)
    assert (refused is None) == (refused2 is None), (
        f"the mapping form {'was refused' if refused else 'built'} ({refused}) but the string "
        f"form {text!r} {'was refused' if refused2 else 'built'} ({refused2})"
    )
    if refused is None:
        assert W2.shape == W.shape and type(W2) is type(W)


@profile(150)
@given(
    st.one_of(
        st.text(st.characters(codec="utf-8"), max_size=20),
        st.builds(
            lambda kind, rest: kind + rest,
            st.sampled_from([*KINDS, "marginals", "kron", "marginal"]),
            st.text(":=,[]{}'\"0123 abkn-.", max_size=16),
        ),
    ),
    CALLER_DOMAINS,
)
@example("marginals:{}", None)
def test_any_text_builds_or_is_refused(text, domain):
    W, refused = outcome(build_workload, text, "--workload", domain=domain)
    if refused is None:
        check_built(W)


#: Specs of absurd size: the workload is refused, or built as a structured matrix, in
#: seconds and in little memory (a refusal costs microseconds, a structured build
#: milliseconds; 5 s and 512 MiB leave a wide margin on a loaded machine).
ABSURD = [
    ("all_range:n=100000000", None),
    ("all_range:n=1000000000000", None),
    ("prefix:n=1000000000000000000", None),
    ("identity:n=1000000000000000000000000000000", None),
    ("total:n=1000000000000000000000000000000", None),
    ("width_range:n=1000000000000,w=2", None),
    ("random_predicates:n=1000000,m=1000000,seed=0", None),
    ("random_predicates:n=1000000000,m=1,seed=0", None),
    # 10^9 cells is a size the package releases at (a permutation of them is 8 GB, built);
    # beyond MAX_VECTOR_SIZE it is refused
    ("{kind: permuted, workload: {kind: prefix, n: 10000000000}, seed: 0}", None),
    ("{kind: kron, factors: [{kind: all_range, n: 100000000}, {kind: identity, n: 2}]}", None),
    (
        "{kind: union, workloads: [{kind: all_range, n: 100000000}, {kind: total, n: 100000000}]}",
        None,
    ),
    ("{kind: marginals, domain: {preset: synth, n: 1000000000, d: 3}, k: 2}", None),
    ("{kind: marginals, domain: {preset: synth, n: 3, d: 100000}, k: 2}", None),
    ("{kind: range_marginals, domain: {sizes: [1000000000, 1000000000]}, k: 2}", None),
    ("{kind: prefix_marginals, domain: {sizes: [1000000000, 2]}, k: 2}", None),
    ("{kind: binary_marginals, domain: {preset: synth, n: 1000000000, d: 3}, k: 2}", None),
    ("marginals:k=2", Domain.from_sizes([10**9] * 3)),
    ("identity", Domain.from_sizes([10**9] * 3)),
    ("all_range", Domain.from_sizes([10**9] * 3)),
    ("prefix", Domain.from_sizes([10**9] * 3)),
    ("{kind: permuted, workload: identity, seed: 0}", Domain.from_sizes([10**6] * 2)),
]


@pytest.mark.parametrize(
    ("spec", "domain"),
    ABSURD,
    ids=[s if d is None else f"{s} over sizes {list(d.sizes)}" for s, d in ABSURD],
)
def test_an_absurd_size_is_refused_or_built_structured_quickly(spec, domain):
    W, refused = outcome(
        build_workload, spec, "--workload", domain=domain, seconds=5.0, headroom=1 << 29
    )
    if refused is None:
        m, n = W.shape
        assert m >= 1 and n >= 1
