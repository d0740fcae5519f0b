"""A workload's normal form: its rows as weighted Kronecker terms, each factor with its kind.

Every reader that recognises a workload's structure (a union of marginals, ranges and
prefixes per attribute, per-factor closed forms) reads :func:`normal_form` instead of asking
what class the workload is: :class:`Term` lists, built from :meth:`Matrix.kron_terms` and each
factor's ``factor_kind`` (one of :data:`FACTOR_KINDS`).

User guide: docs/algorithms/implicit-algebra.md ("The normal form").
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Sequence

from numpy.typing import ArrayLike

from .base import Matrix, as_matrix

__all__ = ["FACTOR_KINDS", "NormalForm", "Term", "marginal_key", "normal_form"]

FACTOR_KINDS = ("identity", "total", "ones", "prefix", "all_range", "dense", "matrix")


def marginal_key(factors) -> int | None:
    """The bitmask of a Kronecker product of identity / total factors, else None."""
    known = getattr(factors, "marginal", None)
    if known is not None:
        return known[1]
    key = 0
    for i, f in enumerate(factors):
        kind = f.factor_kind
        if kind == "identity":
            key |= 1 << i
        elif kind != "total":
            return None
    return key


def _bits(key: int) -> tuple[int, ...]:
    """The set bits of ``key``, ascending (a pass over the set bits only)."""
    out = []
    while key:
        low = key & -key
        out.append(low.bit_length() - 1)
        key ^= low
    return tuple(out)


class Term:
    """One term ``weight · (F_1 ⊗ … ⊗ F_k)`` of a normal form on rows ``start:stop`` (its fields:
    docs/algorithms/implicit-algebra.md, "The normal form").

    Built by :class:`NormalForm`, not by callers.

    Parameters
    ----------
    form : NormalForm
        The normal form the term belongs to (it gives the sign of the weight).
    index : int
        The term's position in the form's terms.
    c : float
        The squared weight ``w²``.
    factors : sequence of Matrix
        The factors ``F_i``, weights peeled; a sequence with a ``marginal = (sizes, key)``
        attribute (as :class:`Marginals` gives) answers without a pass over its factors.
    start : int
        The term's first row in the workload.

    Attributes
    ----------
    c : float
        The squared weight.
    factors : sequence of Matrix
        The factors.
    sizes : tuple of int
        The factors' column counts (the attribute sizes).
    key : int or None
        The marginal's bitmask of identity attributes when every factor is an identity or a
        total, else None.
    attrs : tuple of int
        The attributes whose factor is not a total.
    start : int
        The term's first row in the workload.
    stop : int
        One past its last row: the term is rows ``start:stop``.
    """

    __slots__ = ("_form", "_index", "_kinds", "attrs", "c", "factors", "key", "sizes", "start",
                 "stop")  # fmt: skip

    def __init__(
        self, form: NormalForm, index: int, c: float, factors: Sequence[Matrix], start: int
    ):
        self._form, self._index = form, index
        self.c = float(c)
        self.factors = factors
        known = getattr(factors, "marginal", None)
        if known is not None:
            self.sizes, self.key = known
            self._kinds = None  # built when asked: a key may have hundreds of attributes
            self.attrs = _bits(self.key)
            rows = math.prod([self.sizes[i] for i in self.attrs])
        else:
            self.sizes = tuple(int(f.shape[1]) for f in factors)
            self._kinds = tuple(f.factor_kind for f in factors)
            self.key = marginal_key(factors)
            self.attrs = tuple(i for i, k in enumerate(self._kinds) if k != "total")
            rows = math.prod(int(f.shape[0]) for f in factors)
        self.start = start
        self.stop = start + rows

    @property
    def weight(self) -> float:
        """The signed weight ``±√c`` (its sign read from ``kron_terms(signed=True)``).

        Returns
        -------
        float
            ``w`` with ``w² = c``.

        Raises
        ------
        ValueError
            When the workload matrix no longer exists (see :attr:`NormalForm.signs`).
        """
        return math.copysign(math.sqrt(self.c), self._form.signs[self._index])

    @property
    def kinds(self) -> tuple[str, ...]:
        """Each factor's ``factor_kind`` (one of :data:`FACTOR_KINDS`).

        Returns
        -------
        tuple of str
            One kind per factor, in attribute order.
        """
        if self._kinds is None:
            self._kinds = tuple(
                "identity" if (self.key >> i) & 1 else "total" for i in range(len(self.sizes))
            )
        return self._kinds

    def __repr__(self):
        return f"Term(weight={self.weight!r}, kinds={self.kinds}, rows={self.start}:{self.stop})"


class NormalForm:
    """A workload as its :class:`Term` list, in row order (:func:`normal_form`).

    Read from ``W.kron_terms()`` (squared weights and factors, in row order); the weights'
    signs are read from ``W.kron_terms(signed=True)`` when first asked (:attr:`signs`).

    Parameters
    ----------
    W : Matrix
        The workload.
    hold : bool, default False
        Whether the form keeps ``W`` alive; False: a weak reference (the cached form of
        :func:`normal_form` does not keep its matrix alive).

    Attributes
    ----------
    shape : tuple of int
        ``W``'s shape.
    terms : tuple of Term
        The terms, in row order.

    Raises
    ------
    ValueError
        When the rows of ``W``'s Kronecker terms do not add up to ``W``'s rows.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 4.3 (a workload as a union of weighted Kronecker
    products, equation 1).
    """

    def __init__(self, W: Matrix, hold: bool = False):
        self._matrix = (lambda: W) if hold else weakref.ref(W)
        self.shape = W.shape
        terms, row = [], 0
        for t, (c, factors) in enumerate(W.kron_terms()):
            terms.append(Term(self, t, c, factors, row))
            row = terms[-1].stop
        if row != W.shape[0]:
            raise ValueError(
                f"{type(W).__name__}: its Kronecker terms have {row} rows, the matrix has "
                f"{W.shape[0]}"
            )
        self.terms: tuple[Term, ...] = tuple(terms)

    @functools.cached_property
    def signs(self) -> list[float]:
        """The sign of each term's weight (``kron_terms(signed=True)``).

        Returns
        -------
        list of float
            ``+1.0`` or ``-1.0`` per term (cached).

        Raises
        ------
        ValueError
            When the matrix, held weakly, no longer exists, or its signed terms disagree in
            number with its terms.
        """
        W = self._matrix()
        if W is None:
            raise ValueError("the matrix of this normal form no longer exists")
        signs = [math.copysign(1.0, w) for w, _ in W.kron_terms(signed=True)]
        if len(signs) != len(self.terms):
            raise ValueError(
                f"{type(W).__name__}: kron_terms(signed=True) gives {len(signs)} terms, "
                f"kron_terms() {len(self.terms)}"
            )
        return signs

    @functools.cached_property
    def sizes(self) -> tuple[int, ...] | None:
        """The attribute sizes every term shares, else None.

        Returns
        -------
        tuple of int or None
            The common factor sizes (one factorisation of the domain), or None.
        """
        first = self.terms[0].sizes
        for t in self.terms[1:]:
            if t.sizes is not first and t.sizes != first:
                return None
        return first

    @functools.cached_property
    def marginals(self) -> bool:
        """Whether the workload is a union of marginals on one factorisation of the domain.

        Returns
        -------
        bool
            True when the terms share their sizes and every term is a marginal.
        """
        return self.sizes is not None and all(t.key is not None for t in self.terms)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def normal_form(W: Matrix | ArrayLike) -> NormalForm:
    """The :class:`NormalForm` of ``W`` (a Matrix, cached per matrix, or an array).

    Parameters
    ----------
    W : Matrix or array_like
        The workload. A Matrix's form is cached per matrix without keeping it alive (an
        unhashable kind's is built every time); an array is wrapped by :func:`as_matrix`.

    Returns
    -------
    NormalForm
        Its weighted Kronecker terms in row order, each factor with its kind.

    Raises
    ------
    TypeError
        When ``W`` is a string (see :func:`as_matrix`).
    ValueError
        When ``W`` is an array :func:`as_matrix` refuses, or its Kronecker terms do not
        cover its rows.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 4.3 (Algorithm 1, ImpVec, and equation 1).
    """
    if not isinstance(W, Matrix):
        return NormalForm(as_matrix(W), hold=True)
    try:
        return _CACHE[W]
    except KeyError:
        pass
    except TypeError:  # an unhashable kind: built every time
        return NormalForm(W, hold=True)
    nf = _CACHE[W] = NormalForm(W)
    return nf
