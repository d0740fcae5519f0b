"""The one workload-spec grammar (mmtoolkit.workload_specs): every kind written as a string
gives the same spec and workload as its mapping, the CLI's shorthands, the caller's domain,
and bad specs that name the kind and list the valid kinds / the builder's parameters."""

from __future__ import annotations

import functools
import inspect
import re

import numpy as np
import pytest
import yaml

from mmtoolkit import workloads
from mmtoolkit.domain import Domain
from mmtoolkit.linalg import Matrix
from mmtoolkit.runner import ConfigError, load_config
from mmtoolkit.workload_specs import (
    SHORTHANDS,
    SpecError,
    WorkloadSpec,
    build_workload,
    builder,
    parse_workload,
    spec_mapping,
    workload_kinds,
)

DOM = "{sizes: [3, 2, 4], names: [a, b, c], numeric: [true, false, true]}"
DOM_MAP = {"sizes": [3, 2, 4], "names": ["a", "b", "c"], "numeric": [True, False, True]}


def _examples(kind: str) -> tuple[str | None, str | None]:
    """The kind's example specs from its builder's docstring (``Spec: ``...``; caller's
    domain: ``...``.``): one over an explicit domain, one over the caller's domain."""
    doc = " ".join((builder(kind).__doc__ or "").split())
    spec = re.search(r"Spec: ``([^`]+)``", doc)
    caller = re.search(r"caller's domain: ``([^`]+)``", doc)
    return (spec and spec.group(1)), (caller and caller.group(1))


#: kind -> (example spec, example spec over the caller's domain), for every listed kind.
EXAMPLES = {kind: _examples(kind) for kind in workload_kinds()}


def _render(mapping: dict) -> str:
    """The string form ``kind:key=value,...`` of a spec mapping, each value in YAML's flow
    style (written independently of the parser)."""

    def flow(v) -> str:
        text = yaml.safe_dump(v, default_flow_style=True, width=10**6).strip()
        return text.removesuffix("...").strip()

    args = ",".join(f"{k}={flow(v)}" for k, v in mapping.items() if k != "kind")
    return mapping["kind"] + (":" + args if args else "")


def test_every_listed_kind_has_examples():
    missing = [
        f"{kind} ({inspect.getsourcefile(builder(kind))}, {builder(kind).__name__})"
        for kind, (spec, caller) in EXAMPLES.items()
        if spec is None or caller is None
    ]
    assert not missing, (
        "workload kinds without example specs: " + "; ".join(missing) + ". End the builder's "
        "docstring with 'Spec: ``KIND:key=value,...``; caller's domain: ``KIND...``.'"
    )


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_string_and_mapping_give_the_same_workload(kind):
    text = EXAMPLES[kind][0]
    mapping = spec_mapping(text)
    assert mapping["kind"] == kind
    rendered = _render(mapping)
    assert spec_mapping(rendered) == mapping  # the string form round-trips
    from_text, from_map = parse_workload(text), parse_workload(mapping)
    assert isinstance(from_text, WorkloadSpec) and from_text == from_map
    assert parse_workload(rendered) == from_map
    W1, W2 = from_text.build(), from_map.build()
    assert W1.shape == W2.shape
    if int(W1.shape[0]) * int(W1.shape[1]) <= 10**5:
        np.testing.assert_array_equal(W1.dense(), W2.dense())


def test_string_specs_build_what_the_builders_build():
    dom = Domain(["a", "b", "c"], [3, 2, 4], numeric=[True, False, True])
    cases = {
        "all_range:n=16": workloads.all_range(16),
        f"marginals:domain={DOM},k=2,lower=true": workloads.marginals(dom, 2, lower=True),
        f"prefix_marginals:domain={DOM},k=2": workloads.prefix_marginals(dom, 2),
        "permuted:workload={kind: all_range, n: 8},seed=3,legacy=true": workloads.permuted(
            workloads.all_range(8), 3, legacy=True
        ),
        "union:workloads=[total:n=4, 'prefix:n=4'],weights=[1, 2]": workloads.union(
            [workloads.total(4), workloads.prefix(4)], weights=[1, 2]
        ),
    }
    for text, W in cases.items():
        np.testing.assert_array_equal(build_workload(text).dense(), W.dense())


@pytest.mark.parametrize(
    "text, mapping",
    [
        ("marginals:2", {"kind": "marginals", "k": 2}),
        ("marginals:2:lower", {"kind": "marginals", "k": 2, "lower": True}),
        ("range_marginals:1", {"kind": "range_marginals", "k": 1}),
        ("prefix_marginals:2", {"kind": "prefix_marginals", "k": 2}),
        ("prefix_marginals:3:lower", {"kind": "prefix_marginals", "k": 3, "lower": True}),
        ("marginal:age, sex", {"kind": "marginal", "attrs": ["age", "sex"]}),
        ("marginal:yes,0", {"kind": "marginal", "attrs": ["yes", "0"]}),  # names stay strings
        ("kron:prefix,identity", {"kind": "kron", "factors": ["prefix", "identity"]}),
        ("identity", {"kind": "identity"}),
        ("{kind: total, n: 3}", {"kind": "total", "n": 3}),
    ],
)
def test_shorthands(text, mapping):
    assert spec_mapping(text) == mapping
    assert len(SHORTHANDS) == 6


def test_shorthand_equals_key_form():
    dom = Domain.from_sizes([2, 3, 4])
    for short, long in [
        ("marginals:2", "marginals:k=2"),
        ("marginals:2:lower", "marginals:k=2,lower=true"),
        ("prefix_marginals:2", "prefix_marginals:k=2"),
        ("marginal:a0,a2", "marginal:attrs=[a0,a2]"),
    ]:
        assert parse_workload(short, domain=dom) == parse_workload(long, domain=dom)


def test_the_callers_domain():
    dom = Domain(["x", "y"], [4, 3], numeric=[True, False])
    W = build_workload("marginals:k=1", domain=dom)
    np.testing.assert_array_equal(W.dense(), workloads.marginals(dom, 1).dense())
    # a top-level n left out is the number of cells; kron factors get their attribute's size
    assert build_workload("identity", domain=dom).shape == (12, 12)
    assert build_workload("all_range", domain=dom).shape == (78, 12)
    np.testing.assert_array_equal(
        build_workload("kron:prefix,identity", domain=dom).dense(),
        workloads.kron([workloads.prefix(4), workloads.identity(3)]).dense(),
    )
    # nested builders with a domain get it too
    W = build_workload("{kind: union, workloads: [marginals:1, 'marginal:x']}", domain=dom)
    assert W.shape == (4 + 3 + 4, 12)
    # an explicit n wins; a spec may not name a second domain
    assert build_workload("all_range:n=5", domain=dom).shape == (15, 5)
    with pytest.raises(SpecError, match=r"w\.domain: the domain is given by --domain"):
        parse_workload("marginals:domain=adult,k=1", "w", domain=dom, domain_source="--domain")


ALL_KINDS = ", ".join(workload_kinds())


@pytest.mark.parametrize(
    "spec, message",
    [
        ("cube:2", f"w: unknown workload kind 'cube' in 'cube:2' (valid: {ALL_KINDS})"),
        ({"kind": "cube"}, f"w.kind: unknown workload kind 'cube' (valid: {ALL_KINDS})"),
        ("", "w: empty workload spec ''; use KIND, KIND:key=value,"),
        ("marginals:2:upper",
         "w: cannot parse workload spec 'marginals:2:upper' (kind 'marginals')"),
        ("marginals:k=2,lower", "(kind 'marginals'): expected key=value, got 'lower'"),
        ("marginals:k=1,k=2", "'k' is given twice"),
        ("total:n=[1", "cannot parse the value of 'n'"),
        ("{kind: [", "w: cannot parse the mapping"),
        (3, "w: expected a workload spec (a mapping, or a string"),
        ({"n": 3}, "w.kind: missing required field"),
    ],
)  # fmt: skip
def test_unparsable_specs_name_the_kind_and_list_the_kinds(spec, message):
    with pytest.raises(SpecError) as info:
        parse_workload(spec, "w")
    assert message in str(info.value)
    if isinstance(spec, str) and spec.startswith("marginals:"):
        assert ALL_KINDS in str(info.value)  # the kind is valid, the rest is not: both listed
        keys = "marginals:key=value,... with keys from (domain, k, lower=False, attrs=None)"
        assert keys in str(info.value)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("marginals:q=1",
         "marginals(): unknown parameter 'q' (parameters: domain, k, lower=False, attrs=None)"),
        ("prefix:n=3,m=2", "prefix(): unknown parameter 'm' (parameters: n)"),
        ("width_range:n=4", "width_range(): missing a required argument: 'w' (parameters: n, w)"),
        ("permuted:seed=0", "permuted(): missing a required argument: 'W' (parameters: W, seed, "
                            "legacy=False); nested workloads need the mapping form"),
        ("matrix:rows=[[1],[1,2]]", "w.rows: matrix: all rows must have the same length"),
        ("marginal:domain=adultt,attrs=[a]", "w.domain: unknown dataset 'adultt'"),
    ],
)  # fmt: skip
def test_bad_keywords_list_the_builders_parameters(spec, message):
    with pytest.raises(SpecError) as info:
        parse_workload(spec, "w")
    assert message in str(info.value)


def test_builder_errors_name_the_kind():
    with pytest.raises(SpecError, match=r"^w: marginals\(\): k: must be <= 2"):
        build_workload("marginals:k=5", "w", domain=Domain.from_sizes([2, 2]))


def test_configs_take_string_specs_and_name_file_and_field(tmp_path):
    rows = [
        {"name": "s", "workload": f"marginals:domain={DOM},k=1"},
        {"name": "m", "workload": {"kind": "marginals", "domain": DOM_MAP, "k": 1}},
        {"name": "nested", "workload": {"kind": "kron", "factors": ["prefix:n=3", "total:n=2"]}},
    ]
    cfg = {
        "paper": "toy",
        "table": "t",
        "metric": "rmse",
        "privacy": {"kind": "zcdp", "rho": 1},
        "columns": [{"name": "I", "selector": "identity"}],
        "rows": rows,
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    loaded = load_config(path)
    assert loaded.rows[0].workload == loaded.rows[1].workload
    assert loaded.rows[2].workload.build().shape == (3, 6)
    cfg["rows"][2]["workload"]["factors"][1] = "total:n=2,q=1"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f"{path}: rows[2].workload.factors[1]: total(): unknown parameter 'q' (parameters: n)"
    )


# --------------------------------------------------------------------------- command lines
CALLER = Domain(["a0", "a1", "a2"], [4, 2, 4], numeric=[True, False, True])
CALLER_MAP = {"sizes": [4, 2, 4], "names": ["a0", "a1", "a2"], "numeric": [True, False, True]}


def _written_out(spec, sizes: list[int]) -> dict:
    """``spec`` with what the caller's domain supplies written out: ``domain`` (the whole
    domain) and ``n`` (the cells of ``sizes``) where the builder takes them and the spec
    leaves them out, nested workloads alike (a ``kron`` factor on its attribute's size)."""
    m = dict(spec_mapping(spec) if isinstance(spec, str) else spec)
    params = inspect.signature(builder(m["kind"])).parameters
    if "domain" in params and "domain" not in m:
        m["domain"] = CALLER_MAP
    if "n" in params and "n" not in m:
        m["n"] = int(np.prod(sizes))
    for key in ("workloads", "workload", "W"):
        if key in m:
            nested = m[key]
            m[key] = (
                [_written_out(w, sizes) for w in nested]
                if isinstance(nested, list)
                else _written_out(nested, sizes)
            )
    if "factors" in m:
        m["factors"] = [_written_out(f, [n]) for f, n in zip(m["factors"], sizes)]
    return m


def _expected(spec: str) -> Matrix:
    return build_workload(_written_out(spec, list(CALLER.sizes)))


def save_files(spec: str) -> None:
    """Write the matrix file a ``matrix:file=...`` spec names (2 queries on CALLER's cells)."""
    if "file" in spec_mapping(spec):
        np.save(spec_mapping(spec)["file"], np.arange(2.0 * CALLER.size).reshape(2, -1))


#: kind -> (its example spec over the caller's domain CALLER, the workload it must build: the
#: spec with that domain written out); tests/test_compare.py runs them through the CLI.
CALLER_SPECS = {kind: (c, functools.partial(_expected, c)) for kind, (_, c) in EXAMPLES.items()}


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_every_kind_on_the_command_line(kind, tmp_path, monkeypatch):
    """What `release --workload` and `compare --workload` build from a SPEC over --domain:
    the spec with the caller's domain written out."""
    from mmtoolkit.releasing import workload_matrix as release_workload

    monkeypatch.chdir(tmp_path)
    spec, expected = CALLER_SPECS[kind]
    save_files(spec)
    W = build_workload(spec, "--workload", domain=CALLER, domain_source="--domain")
    E = expected()
    assert W.shape == E.shape
    if int(W.shape[0]) * int(W.shape[1]) <= 10**6:
        np.testing.assert_array_equal(W.dense(), E.dense())
    if W.shape[1] == CALLER.size and kind != "binary_marginals":
        np.testing.assert_array_equal(release_workload(spec, CALLER).dense(), W.dense())
    else:  # release answers queries on the records' cells only: refused with the reason
        with pytest.raises(ValueError, match="binary encoding|cells but the domain has 32"):
            release_workload(spec, CALLER)
