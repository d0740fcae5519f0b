"""Named domain presets: sizes, names and numeric flags as the papers state them."""

import json
import math

import pytest

from mmtoolkit import Domain, datasets


def numeric_names(dom):
    return {n for n, f in zip(dom.names, dom.numeric, strict=True) if f}


def test_available_lists_every_preset():
    names = datasets.available()
    assert names == sorted(names)
    for required in (
        "adult", "cps", "loans", "adult_hdmm", "cph", "cph_state", "nltcs", "patent", "taxi",
        "synth", "adult_datacube",
    ):  # fmt: skip
        assert required in names
    for name in names:
        assert isinstance(datasets.source(name), str) and datasets.source(name)


def test_adult():
    d = datasets.domain("adult")
    assert d.sizes == (85, 9, 100, 16, 7, 15, 6, 5, 2, 100, 100, 99, 42, 2)
    assert numeric_names(d) == {"age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week"}
    # ResidualPlanner §8: record domain ≈ 6.41·10^17; sorted sizes as listed in the paper
    assert f"{d.size:.3g}" == "6.41e+17"
    assert sorted(d.sizes, reverse=True) == [100, 100, 100, 99, 85, 42, 16, 15, 9, 7, 6, 5, 2, 2]


def test_adult_matches_shared_domain_file(adult_dir):
    spec = json.loads((adult_dir / "adult-domain.json").read_text())
    d = datasets.domain("adult")
    assert list(d.names) == list(spec)
    assert list(d.sizes) == list(spec.values())


def test_cps_and_loans():
    cps = datasets.domain("cps")
    assert cps.sizes == (100, 50, 7, 4, 2) and cps.size == 280_000
    assert cps.numeric == (True, True, False, False, False)
    assert cps.names[:2] == ("income", "age")
    loans = datasets.domain("loans")
    assert loans.sizes == (101, 101, 101, 101, 3, 8, 36, 6, 51, 4, 5, 15)
    assert loans.numeric == (True,) * 4 + (False,) * 8
    assert f"{loans.size:.3g}" == "8.25e+15"  # ResidualPlanner §8
    assert "invented" in datasets.source("loans")


def test_hdmm_domains():
    a = datasets.domain("adult_hdmm")
    assert a.names == ("age", "education", "race", "sex", "hours-per-week")
    assert a.sizes == (75, 16, 5, 2, 20) and a.size == 240_000
    cph = datasets.domain("cph")
    assert cph.sizes == (2, 2, 64, 17, 115) and cph.size == 500_480
    st = datasets.domain("cph_state")
    assert st.sizes == (2, 2, 64, 17, 115, 51) and st.size == 25_524_480
    assert st.project(list(cph.names)) == cph
    assert datasets.domain("patent") == Domain(["patent"], [1024], [True])
    taxi = datasets.domain("taxi")
    assert taxi.sizes == (256, 256) and taxi.numeric == (True, True)


def test_datacube_and_eigen_domains():
    nl = datasets.domain("nltcs")
    assert nl.sizes == (2,) * 16 and nl.size == 65_536
    ad = datasets.domain("adult_datacube")
    assert ad.sizes == (9, 16, 7, 15, 6, 5, 2, 2) and ad.size == 1_814_400
    assert sum(math.ceil(math.log2(n)) for n in ad.sizes) == 23  # the paper's 23 bits
    assert datasets.domain("census_eigen").size == 2048
    assert datasets.domain("adult_eigen").size == 2048


def test_synth():
    s = datasets.domain("synth", n=10, d=100)
    assert s.size == 10**100 and len(s) == 100
    assert s.numeric == (False,) * 100
    s2 = datasets.domain("synth", n=3, d=4, numeric=True)
    assert s2.sizes == (3, 3, 3, 3) and all(s2.numeric)
    with pytest.raises(ValueError, match="needs parameter"):
        datasets.domain("synth", n=10)
    with pytest.raises(ValueError, match="'d'"):
        datasets.domain("synth", n=10, d=0)
    with pytest.raises(ValueError, match="numeric"):
        datasets.domain("synth", n=10, d=2, numeric="yes")


def test_errors():
    with pytest.raises(ValueError, match="unknown dataset 'adlut'.*adult.*cps"):
        datasets.domain("adlut")
    with pytest.raises(ValueError, match="unexpected parameter.*n"):
        datasets.domain("adult", n=3)
    with pytest.raises(ValueError, match="unknown dataset"):
        datasets.source("nope")


def test_presets_are_fresh_equal_values():
    assert datasets.domain("cps") == datasets.domain("cps")
