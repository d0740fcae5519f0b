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
    docs/algorithms/implicit-algebra.md, "The normal form")."""

    __slots__ = ("_form", "_index", "_kinds", "attrs", "c", "factors", "key", "sizes", "start",
                 "stop")  # fmt: skip

    def __init__(self, form: NormalForm, index: int, c: float, factors: Sequence[Matrix], start):
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
        return math.copysign(math.sqrt(self.c), self._form.signs[self._index])

    @property
    def kinds(self) -> tuple[str, ...]:
        if self._kinds is None:
            self._kinds = tuple(
                "identity" if (self.key >> i) & 1 else "total" for i in range(len(self.sizes))
            )
        return self._kinds

    def __repr__(self):
        return f"Term(weight={self.weight!r}, kinds={self.kinds}, rows={self.start}:{self.stop})"


class NormalForm:
    """A workload as its :class:`Term` list, in row order (:func:`normal_form`)."""

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
        """The sign of each term's weight (``kron_terms(signed=True)``)."""
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
        """The attribute sizes every term shares, else None."""
        first = self.terms[0].sizes
        for t in self.terms[1:]:
            if t.sizes is not first and t.sizes != first:
                return None
        return first

    @functools.cached_property
    def marginals(self) -> bool:
        """Whether the workload is a union of marginals on one factorisation of the domain."""
        return self.sizes is not None and all(t.key is not None for t in self.terms)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def normal_form(W) -> NormalForm:
    """The :class:`NormalForm` of ``W`` (a Matrix, cached per matrix, or an array)."""
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
