"""A marginals workload read as a set of cuboids (attribute bitmasks) with weights, for the
Datacube selectors (Ding et al. SIGMOD 2011; Cormode et al. ICDE 2013, §4.1, §5):
:func:`marginal_keys` and :func:`binary_workload`.
User guide: docs/algorithms/datacube.md.
"""

from __future__ import annotations

import math

import numpy as np

from ...checks import check_option
from ...linalg import Matrix, normal_form
from ..base import NotApplicableError

__all__ = ["RANGES", "binary_workload", "marginal_keys"]

RANGES = ("refuse", "as_marginals")


def marginal_keys(W: Matrix, ranges: str = "refuse") -> dict[int, float]:
    """``{key: weight}`` of a workload of (weighted) marginals on one factorisation of the domain
    (:class:`NotApplicableError` otherwise); ``ranges="as_marginals"`` reads a range-marginal
    term as the cuboid it is summed from (Ding et al. 2011; Li & Miklau 2012 §5).

    Parameters
    ----------
    W : Matrix
        The workload: a union of Kronecker products of identities and totals (as
        ``workloads.marginals`` builds), read through its normal form.
    ranges : {"refuse", "as_marginals"}, default "refuse"
        ``"refuse"``: a term with a factor other than Identity or a total is not a marginal;
        ``"as_marginals"``: such a term is read as the cuboid on its non-total attributes.

    Returns
    -------
    dict of int to float
        Per marginal its key, the bitmask of the attributes it keeps (bit ``i``: attribute
        ``i``), and its weight ``|w| ≥ 0``; a marginal listed twice has the root of its
        squared weights summed (they add up in ``WᵀW``).

    Raises
    ------
    ValueError
        When ``ranges`` is not one of its two options.
    NotApplicableError
        When the workload is not a set of marginals (the message names the first factor
        that is not Identity or a total), or its terms do not share one factorisation of
        the domain.

    References
    ----------
    Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Section 4.1; Ding,
    Winslett, Han & Li, SIGMOD 2011; Li & Miklau 2012 (Eigen-Design), Section 5.
    """
    check_option(ranges, "ranges", RANGES)

    out: dict[int, float] = {}
    nf = normal_form(W)
    for t in nf.terms:
        key = t.key
        if key is None:
            if len(t.factors) == 1:  # a matrix with no Kronecker structure
                raise NotApplicableError(
                    f"the workload is not a set of marginals ({type(t.factors[0]).__name__}); "
                    "build it with workloads.marginals / marginals_list or "
                    "BinaryEncoding.marginals"
                )
            if ranges != "as_marginals":
                f = next(f for f, k in zip(t.factors, t.kinds) if k not in ("identity", "total"))
                raise NotApplicableError(
                    "the workload is not a set of marginals (a Kronecker factor is "
                    f"{type(f).__name__}, not Identity or Total)"
                )
            key = sum(1 << i for i in t.attrs)
        w = abs(t.weight)
        # duplicates add up in WᵀW
        out[key] = math.sqrt(out[key] ** 2 + w * w) if key in out else w
    if nf.sizes is None:
        raise NotApplicableError(
            "the workload's Kronecker terms do not share one factorisation of the domain "
            f"(attribute sizes {sorted({t.sizes for t in nf.terms})})"
        )
    return out


def binary_workload(workload: Matrix, encode: bool = False) -> tuple[int, dict[int, float]]:
    """``(d, {key: weight})`` of a marginals workload on binary attributes (an error names the first
    other one); ``encode=True``: power-of-two attributes bit by bit (Cormode et al. §4.1).

    With ``encode=True`` attribute ``i`` of size ``2^{b_i}`` becomes bits ``o_i … o_i + b_i −
    1`` (``o_i = b_0 + … + b_{i−1}``), which keeps the row-major cell order, and a marginal
    key covers every bit of its attributes.

    Parameters
    ----------
    workload : Matrix
        A workload of (weighted) marginals (:func:`marginal_keys`).
    encode : bool, default False
        Whether attributes whose sizes are powers of two are read bit by bit; False: every
        attribute must have 2 values.

    Returns
    -------
    d : int
        The number of binary attributes (with ``encode``, of bits: ``Σ_i log2 n_i``).
    keys : dict of int to float
        ``{key: weight}`` over those binary attributes, as :func:`marginal_keys` gives it.

    Raises
    ------
    NotApplicableError
        When the workload is not a set of marginals on one factorisation of the domain.
    ValueError
        When an attribute is not binary (with ``encode``: its size is not a power of two);
        the message names the attribute and, without ``encode``, how to encode it.

    References
    ----------
    Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013 (Datacube), Section 4.1.
    """
    keys = marginal_keys(workload)  # also checks that the workload is a set of marginals
    sizes = normal_form(workload).sizes
    assert sizes is not None  # marginal_keys refuses a workload without one factorisation
    if encode:
        bits = []
        for i, n in enumerate(sizes):
            if n < 1 or n & (n - 1):
                raise ValueError(
                    f"the Fourier basis needs attribute sizes that are powers of two, but "
                    f"attribute {i} has {n} values"
                )
            bits.append(n.bit_length() - 1)
        offsets = np.cumsum([0] + bits[:-1]).tolist()
        out: dict[int, float] = {}
        for key, w in keys.items():
            bkey = 0
            for i, (o, b) in enumerate(zip(offsets, bits)):
                if (key >> i) & 1:
                    bkey |= ((1 << b) - 1) << o
            # two attributes of size 1 make the same bit key
            out[bkey] = math.sqrt(out[bkey] ** 2 + w * w) if bkey in out else w
        return int(sum(bits)), out
    for i, n in enumerate(sizes):
        if n != 2:
            raise ValueError(
                f"datacube works on binary attributes, but attribute {i} has {n} values; "
                "encode the workload first (mmtoolkit.binary_encoding.BinaryEncoding(domain)"
                ".marginals(attribute_sets))"
            )
    return len(sizes), keys
