"""Named domain presets used in the papers' experiments (:func:`domain`, :func:`available`).

Only the domains are here (names, sizes, numeric flags): every accuracy number in these
papers depends on the domain and the workload, never on the records.

User guide: docs/guide/records.md (named domains of the papers).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from .checks import check_bool, check_int
from .domain import Domain

__all__ = ["available", "domain", "source"]


@dataclass(frozen=True)
class _Preset:
    build: Callable[..., Domain]
    note: str


def _fixed(names, sizes, numeric_names=()) -> Callable[[], Domain]:
    numeric = tuple(n in numeric_names for n in names)
    unknown = set(numeric_names).difference(names)
    if unknown:
        raise ValueError(f"preset numeric attributes {sorted(unknown)} are not in {names}")
    return lambda: Domain(names, sizes, numeric)


def _synth(n: int, d: int, numeric: bool = False) -> Domain:
    check_bool(numeric, "synth parameter 'numeric'")
    n = check_int(n, "synth parameter 'n'", minimum=1)
    d = check_int(d, "synth parameter 'd'", minimum=1)
    return Domain.from_sizes([n] * d, [numeric] * d)


_ADULT_NAMES = (
    "age", "workclass", "fnlwgt", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
    "native-country", "income>50K",
)  # fmt: skip

_PRESETS: dict[str, _Preset] = {
    "adult": _Preset(
        _fixed(
            _ADULT_NAMES,
            (85, 9, 100, 16, 7, 15, 6, 5, 2, 100, 100, 99, 42, 2),
            ("age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week"),
        ),
        "UCI Adult, 14 attributes as discretised for the ResidualPlanner experiments (He et "
        "al. 2023, §8; column order of shared/data/adult/adult-domain.json; 6.4e17 cells).",
    ),
    "cps": _Preset(
        _fixed(("income", "age", "marital", "race", "sex"), (100, 50, 7, 4, 2), ("income", "age")),
        "Census CPS: income 100 x age 50 x marital 7 x race 4 x sex 2 (ResidualPlanner §8, "
        "CPS 2023; same shape as HDMM §8.1's March-2000 CPS; 280,000 cells).",
    ),
    "loans": _Preset(
        _fixed(
            ("loan_amount", "interest_rate", "annual_income", "debt_to_income",
             "verification_status", "grade", "sub_grade", "home_ownership", "state",
             "application_type", "loan_status", "purpose"),
            (101, 101, 101, 101, 3, 8, 36, 6, 51, 4, 5, 15),
            ("loan_amount", "interest_rate", "annual_income", "debt_to_income"),
        ),
        "Kaggle loan data as used by ResidualPlanner §8: sizes as published (four numeric "
        "101-value attributes); the attribute NAMES are invented, the paper gives only sizes.",
    ),
    "adult_hdmm": _Preset(
        _fixed(("age", "education", "race", "sex", "hours-per-week"), (75, 16, 5, 2, 20),
               ("age", "hours-per-week")),
        "UCI Adult, HDMM's 5-attribute version: age 75 x education 16 x race 5 x sex 2 x "
        "hours-per-week 20 (McKenna et al. 2018, §8.1; 240,000 cells).",
    ),
    "cph": _Preset(
        _fixed(("sex", "hispanic", "race", "relationship", "age"), (2, 2, 64, 17, 115), ("age",)),
        "Census of Population and Housing, Person relation of 2010 SF1 (race = six "
        "binary race flags merged into 64 values; age 0..114; 500,480 cells; HDMM §2, §8.1).",
    ),
    "cph_state": _Preset(
        _fixed(("sex", "hispanic", "race", "relationship", "age", "state"),
               (2, 2, 64, 17, 115, 51), ("age",)),
        "CPH with State (51 values) appended, the SF1+ domain of HDMM §8.1 (25,524,480 cells).",
    ),
    "nltcs": _Preset(
        _fixed(tuple(f"nltcs{i}" for i in range(16)), (2,) * 16),
        "NLTCS (National Long-Term Care Survey): 16 binary disability measures, 6 ADL + 10 "
        "IADL (Cormode et al. datacube paper §5; 65,536 cells).",
    ),
    "patent": _Preset(
        _fixed(("patent",), (1024,), ("patent",)),
        "DPBench 1-D dataset Patent, 1024 cells (HDMM §8.1, Tables 3-4a).",
    ),
    "taxi": _Preset(
        _fixed(("x", "y"), (256, 256), ("x", "y")),
        "DPBench 2-D dataset BeijingTaxiE, 256 x 256 cells (HDMM §8.1, Tables 3-4b).",
    ),
    "adult_datacube": _Preset(
        _fixed(("workclass", "education", "marital-status", "occupation", "relationship", "race",
                "sex", "salary"), (9, 16, 7, 15, 6, 5, 2, 2)),
        "UCI Adult, the 8 categorical attributes of the datacube paper (Cormode et al. 2012, "
        "§5; 1,814,400 cells; the paper binary-encodes them in 4+4+3+4+3+3+1+1 = 23 bits).",
    ),
    "census_eigen": _Preset(
        _fixed(("age", "occupation", "income"), (8, 16, 16), ("age", "income")),
        "IPUMS US Census of the Eigen-Design paper (Li & Miklau 2012, §5 Table 1: 8 x 16 x 16 "
        "= 2048 cells); the attribute-to-size mapping is by listed order, not stated.",
    ),
    "adult_eigen": _Preset(
        _fixed(("age", "workclass", "education", "income"), (8, 8, 16, 2), ("age",)),
        "UCI Adult of the Eigen-Design paper (Li & Miklau 2012, §5 Table 1: 8 x 8 x 16 x 2 = "
        "2048 cells); the attribute-to-size mapping is by listed order, not stated.",
    ),
    "synth": _Preset(
        _synth,
        "Synthetic Synth-n^d: d attributes of n values each (ResidualPlanner §8, HDMM §8.3 "
        "scalability); params n, d and numeric (bool, default False).",
    ),
}


def available() -> list[str]:
    """The preset names, sorted.

    Returns
    -------
    list of str
        The names :func:`domain` and :func:`source` accept.
    """
    return sorted(_PRESETS)


def _preset(name) -> _Preset:
    if not isinstance(name, str) or name not in _PRESETS:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(available())}")
    return _PRESETS[name]


def source(name: str) -> str:
    """The one-line source note of a preset: the paper and section it comes from.

    Parameters
    ----------
    name : str
        A preset name (:func:`available`).

    Returns
    -------
    str
        The note.

    Raises
    ------
    ValueError
        An unknown name (the message lists the presets).
    """
    return _preset(name).note


def domain(name: str, **params) -> Domain:
    """The :class:`~mmtoolkit.Domain` of a named preset.

    Parameters
    ----------
    name : str
        A preset name (:func:`available`).
    **params : object
        Only for ``"synth"`` (Synth-n^d): ``n`` and ``d`` (ints ≥ 1, required) and
        ``numeric`` (bool, default False).

    Returns
    -------
    Domain
        The preset's attributes, sizes and numeric flags (unlabelled).

    Raises
    ------
    ValueError
        An unknown name, a parameter the preset does not take, a missing or bad one.
    """
    preset = _preset(name)
    accepted = inspect.signature(preset.build).parameters
    unknown = sorted(set(params).difference(accepted))
    if unknown:
        allowed = ", ".join(accepted) if accepted else "none"
        raise ValueError(
            f"dataset {name!r} got unexpected parameter(s) {', '.join(unknown)}; "
            f"accepted: {allowed}"
        )
    empty = inspect.Parameter.empty
    missing = [p for p, spec in accepted.items() if spec.default is empty and p not in params]
    if missing:
        raise ValueError(f"dataset {name!r} needs parameter(s) {', '.join(missing)}")
    return preset.build(**params)
