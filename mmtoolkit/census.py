"""The Census SF1 and SF1+ workloads of HDMM (McKenna et al., PVLDB 2018, §2, §8.1, Ex. 7).

:func:`sf1` is 4151 national-level predicate counting queries on the Person relation of the
2010 Census (ten SF1 tabulations) as a union of 33 products over ``sex 2 x hispanic 2 x race
64 x relationship 17 x age 115`` (the ``cph`` preset of :mod:`mmtoolkit.datasets`);
:func:`sf1_plus` asks each nationally and for each of the 51 states. The paper gives the
counts but not the query list; the list here follows the structure the HDMM digest (§11.3)
records. :func:`blocks` holds the per-attribute predicate sets.

User guide: docs/guide/records.md (the Census SF1 workloads: domain, predicate sets, the
``two_or_more`` variants).
"""

from __future__ import annotations

import numpy as np

from . import linalg as la
from .checks import check_bool, check_option

#: Attribute sizes of the SF1 Person domain (HDMM §8.1), in data-vector order.
SIZES = {"sex": 2, "hispanic": 2, "race": 64, "relationship": 17, "age": 115, "state": 51}
AGE1_BREAKS = (0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75,
               80, 85, 115)  # fmt: skip
N_QUERIES = 4151  # HDMM §2 / §8.1


def _popcount(n: int) -> np.ndarray:
    return np.array([bin(r).count("1") for r in range(n)])


TWO_OR_MORE = ("flags", "race1_complement")


def _check_two_or_more(two_or_more) -> str:
    check_option(two_or_more, "two_or_more", list(TWO_OR_MORE))
    return two_or_more


def _ranges(bounds, n: int) -> np.ndarray:
    """Rows indicating ``[bounds[i], bounds[i+1])``."""
    M = np.zeros((len(bounds) - 1, n))
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        M[i, lo:hi] = 1.0
    return M


def blocks(two_or_more: str = "flags") -> dict[str, la.Matrix]:
    """The per-attribute predicate sets of SF1 (module docstring), as Matrices."""
    _check_two_or_more(two_or_more)
    pc = _popcount(64)
    singles = np.eye(64)[[1 << i for i in range(6)]]
    two = (pc >= 2).astype(float)[None, :]
    two1 = (pc != 1).astype(float)[None, :] if two_or_more == "race1_complement" else two
    exactly = np.stack([(pc == k).astype(float) for k in range(1, 7)])
    age3 = _ranges(tuple(range(101)) + (105, 110, 115), 115)
    adult = np.zeros((1, 115))
    adult[0, 18:] = 1.0
    return {
        "T2": la.Total(2),
        "I2": la.Identity(2),
        "IT2": la.VStack([la.Identity(2), la.Total(2)]),
        "is_hisp": la.Dense(np.array([[1.0, 0.0]])),
        "not_hisp": la.Dense(np.array([[0.0, 1.0]])),
        "T64": la.Total(64),
        "race1": la.Dense(np.vstack([singles, two1])),
        "race2": la.Dense(np.vstack([np.eye(64)[1:], exactly, two])),
        "white": la.Dense(np.eye(64)[[1]]),
        "T115": la.Total(115),
        "adult": la.Dense(adult),
        "age1": la.Dense(_ranges(AGE1_BREAKS, 115)),
        "age3": la.Dense(age3),
    }


#: The 33 products of SF1 as (table, sex, hispanic, race, age) block names; Relationship is
#: Total in every product (HDMM digest §11.3).
PRODUCTS = [
    ("P1", "T2", "T2", "T64", "T115"),
    ("P3", "T2", "T2", "race1", "T115"),
    ("P3", "T2", "T2", "T64", "T115"),
    ("P4", "T2", "I2", "T64", "T115"),
    ("P4", "T2", "T2", "T64", "T115"),
    ("P5", "T2", "I2", "race1", "T115"),
    ("P5", "T2", "IT2", "T64", "T115"),
    ("P8", "T2", "T2", "race2", "T115"),
    ("P8", "T2", "T2", "T64", "T115"),
    ("P9", "T2", "I2", "T64", "T115"),
    ("P9", "T2", "not_hisp", "race2", "T115"),
    ("P9", "T2", "T2", "T64", "T115"),
    ("P10", "T2", "T2", "race2", "adult"),
    ("P10", "T2", "T2", "T64", "adult"),
    ("P11", "T2", "I2", "T64", "adult"),
    ("P11", "T2", "not_hisp", "race2", "adult"),
    ("P11", "T2", "T2", "T64", "adult"),
    ("P12", "I2", "T2", "T64", "age1"),
    ("P12", "IT2", "T2", "T64", "T115"),
    ("P12A-I", "I2", "T2", "race1", "age1"),
    ("P12A-I", "IT2", "T2", "race1", "T115"),
    ("P12A-I", "I2", "is_hisp", "T64", "age1"),
    ("P12A-I", "IT2", "is_hisp", "T64", "T115"),
    ("P12A-I", "I2", "not_hisp", "white", "age1"),
    ("P12A-I", "IT2", "not_hisp", "white", "T115"),
    ("PCT12", "I2", "T2", "T64", "age3"),
    ("PCT12", "IT2", "T2", "T64", "T115"),
    ("PCT12A-O", "I2", "T2", "race1", "age3"),
    ("PCT12A-O", "IT2", "T2", "race1", "T115"),
    ("PCT12A-O", "I2", "is_hisp", "T64", "age3"),
    ("PCT12A-O", "IT2", "is_hisp", "T64", "T115"),
    ("PCT12A-O", "I2", "not_hisp", "race1", "age3"),
    ("PCT12A-O", "IT2", "not_hisp", "race1", "T115"),
]


def sf1(relationship: bool = True, two_or_more: str = "flags") -> la.Matrix:
    """HDMM's SF1 workload (Table 3, row "CPH SF1"): 4151 queries as a union of 33 products.

    ``relationship`` keeps the Relationship attribute (17, Total in every query) in the
    domain as the paper's §8.1 states (N = 500,480); ``False`` drops it (N = 29,440).
    ``two_or_more``: "flags" (≥ 2 race flags) or "race1_complement" (module docstring).
    Spec: ``sf1:relationship=false``; caller's domain: ``sf1:relationship=false``.

    Parameters
    ----------
    relationship : bool, optional
        Keep the Relationship attribute in the domain (default True).
    two_or_more : str, optional
        ``"flags"`` (default) or ``"race1_complement"``.

    Returns
    -------
    Matrix
        ``4151 x N``: a union of 33 Kronecker products.

    Raises
    ------
    ValueError
        ``relationship`` is not a bool, or an unknown ``two_or_more``.

    References
    ----------
    McKenna et al. 2018, HDMM, Sections 2 and 8.1, Table 3.
    """
    return _build(check_bool(relationship, "relationship"), False, two_or_more)


def sf1_plus(relationship: bool = True, two_or_more: str = "flags") -> la.Matrix:
    """HDMM's SF1+ workload (Table 3, row "CPH SF1+"): SF1 asked nationally and per state,
    ``SF1 ⊗ [T_51; I_51]`` (215,852 queries; N = 25,524,480 with Relationship).
    Spec: ``sf1_plus:two_or_more=flags``; caller's domain: ``sf1_plus``.

    Parameters
    ----------
    relationship : bool, optional
        Keep the Relationship attribute in the domain (default True).
    two_or_more : str, optional
        ``"flags"`` (default) or ``"race1_complement"``.

    Returns
    -------
    Matrix
        ``215,852 x N``: SF1's 33 products, each with a State factor.

    Raises
    ------
    ValueError
        ``relationship`` is not a bool, or an unknown ``two_or_more``.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 8.1, Table 3.
    """
    return _build(check_bool(relationship, "relationship"), True, two_or_more)


def _build(relationship: bool, state: bool, two_or_more: str) -> la.Matrix:
    b = blocks(two_or_more)
    rel: list[la.Matrix] = [la.Total(SIZES["relationship"])] if relationship else []
    n = SIZES["state"]
    st: list[la.Matrix] = [la.VStack([la.Total(n), la.Identity(n)])] if state else []
    products = [
        la.Kronecker([b[sex], b[hisp], b[race]] + rel + [b[age]] + st)
        for _, sex, hisp, race, age in PRODUCTS
    ]
    return la.VStack(products)
