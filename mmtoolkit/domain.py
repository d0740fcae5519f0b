"""Attribute domains: names, sizes, which attributes are ordered, the labels of their values,
and records → data vector.

:class:`Domain` numbers the cells of the product domain in C order (the first attribute most
significant: HDMM App. A.1; ResidualPlanner §2, Example 1), keeps ``N`` as a Python int (only
:meth:`Domain.vectorize` allocates ``N`` entries) and carries optional value labels, which
name the cells of released tables and never change the algebra.

User guide: docs/guide/records.md (cells and labels).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from numbers import Integral
from typing import TypeGuard

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

__all__ = ["Domain", "MAX_VECTOR_SIZE"]

#: Largest domain :meth:`Domain.vectorize` will build a dense count vector for.
MAX_VECTOR_SIZE = 10**9


def _is_int(x: object) -> TypeGuard[int]:
    """An integer of any integer type (numpy's too), not a bool."""
    return isinstance(x, Integral) and not isinstance(x, (bool, np.bool_))


class Domain:
    """An immutable product domain of named attributes.

    Its cells are numbered in C order (the first attribute most significant); two domains
    are equal when their names, sizes, numeric flags and labels are.

    Parameters
    ----------
    names : iterable of str
        Unique non-empty attribute names, in data-vector order (first = most significant).
    sizes : iterable of int
        The number of values ``n_i`` of each attribute: positive ints, one per name.
    numeric : iterable of bool, optional
        One flag per attribute, ``True`` for an ordered attribute (range and prefix queries
        make sense on it); default (None): all categorical.
    labels : sequence or mapping, optional
        Value labels: per attribute ``None`` (labelled by its codes) or ``n_i`` distinct
        strings, as a sequence in attribute order or a mapping ``{name: labels}`` (attributes
        left out: None); default (None): every attribute labelled by its codes.

    Raises
    ------
    ValueError
        A name that is not a non-empty string or is repeated; a size that is not a positive
        int; ``sizes``, ``numeric`` or ``labels`` not one entry per attribute; a numeric flag
        that is not a bool; labels of an unknown attribute, not strings, of the wrong count
        or repeated. The message names the attribute.

    References
    ----------
    McKenna et al. 2018, HDMM, Appendix A.1 (vectorisation in C order); He et al.,
    ResidualPlanner+, Section 2, Example 1.
    """

    __slots__ = ("_names", "_sizes", "_numeric", "_labels", "_index")
    _names: tuple[str, ...]
    _sizes: tuple[int, ...]
    _numeric: tuple[bool, ...]
    _labels: tuple[tuple[str, ...] | None, ...]
    _index: dict[str, int]

    def __init__(
        self,
        names: Iterable[str],
        sizes: Iterable[int],
        numeric: Iterable[bool] | None = None,
        labels: Sequence[Sequence[str] | None] | Mapping[str, Sequence[str] | None] | None = None,
    ):
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise ValueError(f"names must be a sequence of strings, got {names!r}")
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable):
            raise ValueError(f"sizes must be a sequence of positive ints, got {sizes!r}")
        names = tuple(names)
        sizes = tuple(sizes)
        for name in names:
            if not isinstance(name, str) or not name:
                raise ValueError(f"attribute names must be non-empty strings, got {name!r}")
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"attribute names must be unique: {dup!r} appears twice")
        if len(names) != len(sizes):
            raise ValueError(
                f"names and sizes must have the same length: {len(names)} names, {len(sizes)} sizes"
            )
        for name, n in zip(names, sizes, strict=True):
            if not _is_int(n) or n < 1:
                raise ValueError(f"size of attribute {name!r} must be a positive int, got {n!r}")
        if numeric is None:
            numeric = (False,) * len(names)
        else:
            numeric = _per_attribute(numeric, names, "numeric", "flag")
            for name, flag in zip(names, numeric, strict=True):
                if not isinstance(flag, (bool, np.bool_)):
                    raise ValueError(
                        f"numeric flag of attribute {name!r} must be a bool, got {flag!r}"
                    )
            numeric = tuple(bool(f) for f in numeric)
        labels = _check_labels(labels, names, sizes)
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_sizes", tuple(int(n) for n in sizes))
        object.__setattr__(self, "_numeric", numeric)
        object.__setattr__(self, "_labels", labels)
        object.__setattr__(self, "_index", {name: i for i, name in enumerate(names)})

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_sizes(cls, sizes: Iterable[int], numeric: Iterable[bool] | None = None) -> Domain:
        """A domain with attributes named ``a0, a1, …`` of the given sizes.

        Parameters
        ----------
        sizes : iterable of int
            The attributes' sizes, positive ints.
        numeric : iterable of bool, optional
            One flag per attribute, ``True`` for an ordered one; default: all categorical.

        Returns
        -------
        Domain
            ``len(sizes)`` attributes, unlabelled.

        Raises
        ------
        ValueError
            ``sizes`` is not a sequence of positive ints, or ``numeric`` not one bool per
            attribute.
        """
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable):
            raise ValueError(f"sizes must be a sequence of positive ints, got {sizes!r}")
        sizes = tuple(sizes)
        return cls([f"a{i}" for i in range(len(sizes))], sizes, numeric)

    @classmethod
    def from_dict(cls, sizes: Mapping, numeric: Iterable[str] = ()) -> Domain:
        """A domain from ``{name: size}`` (e.g. ``adult-domain.json``), in mapping order.

        Parameters
        ----------
        sizes : Mapping
            ``{name: size}``: the attributes in data-vector order, each with its size.
        numeric : iterable of str, optional
            The names of the ordered attributes; default: none.

        Returns
        -------
        Domain
            The attributes of ``sizes``, unlabelled.

        Raises
        ------
        ValueError
            ``sizes`` is not a mapping or holds a bad name or size, or ``numeric`` names an
            attribute it does not have.
        """
        if not isinstance(sizes, Mapping):
            raise ValueError(f"from_dict needs a mapping name -> size, got {type(sizes).__name__}")
        names = tuple(sizes)
        numeric = set(numeric)
        unknown = numeric.difference(names)
        if unknown:
            raise ValueError(f"numeric names unknown attribute(s) {sorted(unknown)}")
        return cls(names, [sizes[k] for k in names], [k in numeric for k in names])

    # --------------------------------------------------------------- accessors
    @property
    def names(self) -> tuple[str, ...]:
        """The attribute names, in data-vector order."""
        return self._names

    @property
    def sizes(self) -> tuple[int, ...]:
        """The attributes' sizes ``n_i``, in the order of :attr:`names`."""
        return self._sizes

    @property
    def shape(self) -> tuple[int, ...]:
        """Same as :attr:`sizes` (the shape of the data cube)."""
        return self._sizes

    @property
    def numeric(self) -> tuple[bool, ...]:
        """Per attribute: ``True`` when it is ordered (numeric), ``False`` when categorical."""
        return self._numeric

    @property
    def labels(self) -> tuple[tuple[str, ...] | None, ...]:
        """Per attribute: its value labels, or ``None`` when it is labelled by its codes."""
        return self._labels

    def value_labels(self, attr: str | int) -> tuple[str, ...]:
        """The labels of an attribute's codes ``0 … n−1`` (the codes as strings if unlabelled).

        Parameters
        ----------
        attr : str or int
            The attribute, by name or by index.

        Returns
        -------
        tuple of str
            ``n_i`` labels, the label of code ``j`` at position ``j``.

        Raises
        ------
        ValueError
            ``attr`` is not an attribute of this domain (:meth:`index`).
        """
        i = self.index(attr)
        lab = self._labels[i]
        return lab if lab is not None else tuple(str(j) for j in range(self._sizes[i]))

    def with_labels(
        self, labels: Sequence[Sequence[str] | None] | Mapping[str, Sequence[str] | None] | None
    ) -> Domain:
        """This domain with the given value labels (its own are replaced).

        Parameters
        ----------
        labels : sequence or mapping or None
            As the constructor's ``labels``.

        Returns
        -------
        Domain
            The same names, sizes and numeric flags, with ``labels``.

        Raises
        ------
        ValueError
            Labels as the constructor refuses them.
        """
        return Domain(self._names, self._sizes, self._numeric, labels)

    @property
    def size(self) -> int:
        """The number of cells ``Π n_i`` (a Python int: exact for any number of attributes)."""
        return math.prod(self._sizes)

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, attr: str | int) -> int:
        """The size of an attribute given by name or index.

        Parameters
        ----------
        attr : str or int
            The attribute, by name or by index.

        Returns
        -------
        int
            Its size ``n_i``.

        Raises
        ------
        ValueError
            ``attr`` is not an attribute of this domain (:meth:`index`).
        """
        return self._sizes[self.index(attr)]

    def index(self, attr: str | int) -> int:
        """Position of an attribute given by name or by index (0 ≤ index < len).

        Parameters
        ----------
        attr : str or int
            The attribute's name, or its index (returned as it is when in range).

        Returns
        -------
        int
            Its position in :attr:`names`.

        Raises
        ------
        ValueError
            An unknown name, an index out of range, or neither a str nor an int.
        """
        if isinstance(attr, str):
            try:
                return self._index[attr]
            except KeyError:
                raise ValueError(
                    f"unknown attribute {attr!r}; the domain has {', '.join(self._names)}"
                ) from None
        if _is_int(attr):
            if 0 <= attr < len(self._names):
                return int(attr)
            raise ValueError(
                f"attribute index {attr} out of range for a domain of {len(self._names)} attributes"
            )
        raise ValueError(f"attributes are given by name (str) or index (int), got {attr!r}")

    def indices(self, attrs: str | int | Iterable[str | int]) -> tuple[int, ...]:
        """Positions of several attributes (names or indices), sorted.

        Parameters
        ----------
        attrs : iterable of str or int, or str or int
            The attributes; a single name or index is a one-attribute set.

        Returns
        -------
        tuple of int
            Their positions, in increasing order.

        Raises
        ------
        ValueError
            An attribute given twice, one that :meth:`index` refuses, or ``attrs`` not a
            sequence.
        """
        if isinstance(attrs, str) or _is_int(attrs):
            attrs = [attrs]
        if not isinstance(attrs, Iterable):
            raise ValueError(f"attributes must be a sequence of names or indices, got {attrs!r}")
        idx = [self.index(a) for a in attrs]
        if len(set(idx)) != len(idx):
            dup = next(self._names[i] for i in idx if idx.count(i) > 1)
            raise ValueError(f"attribute {dup!r} is given more than once")
        return tuple(sorted(idx))

    def project(self, attrs: str | int | Iterable[str | int]) -> Domain:
        """The sub-domain of the given attributes, kept in this domain's order.

        Parameters
        ----------
        attrs : iterable of str or int, or str or int
            The attributes to keep, by name or index (:meth:`indices`).

        Returns
        -------
        Domain
            Those attributes with their sizes, numeric flags and labels.

        Raises
        ------
        ValueError
            As :meth:`indices`.
        """
        idx = self.indices(attrs)
        return Domain(
            [self._names[i] for i in idx],
            [self._sizes[i] for i in idx],
            [self._numeric[i] for i in idx],
            [self._labels[i] for i in idx],
        )

    # --------------------------------------------------------------- records
    def vectorize(self, records: ArrayLike, dtype: DTypeLike = np.int64) -> np.ndarray:
        """The C-order count vector of integer-coded ``records`` (the data vector ``x``).

        Parameters
        ----------
        records : array_like
            Shape ``(num_records, len(self))`` (1-D for a one-attribute domain), column ``i``
            holding integer codes ``0 … n_i − 1`` (integer-valued floats are accepted).
        dtype : numpy dtype, optional
            ``numpy.float64`` counts straight into float64; anything else (default
            ``numpy.int64``) gives int64 counts.

        Returns
        -------
        numpy.ndarray
            Shape ``(size,)``: the number of records in each cell, in C order (a domain of no
            attributes: one cell, the number of records).

        Raises
        ------
        ValueError
            The domain has more than :data:`MAX_VECTOR_SIZE` cells; ``records`` of another
            shape, not integer codes, or with a value outside its attribute's range (the
            message names the attribute and the record).
        """
        N = self.size
        if N > MAX_VECTOR_SIZE:
            raise ValueError(
                f"vectorize would allocate a count vector of {format_count(N)} cells "
                f"(> {MAX_VECTOR_SIZE:.0e}); this domain is too large for a dense data vector"
            )
        d = len(self)
        R = np.asarray(records)
        if R.ndim == 1 and d == 1:
            R = R[:, None]
        if R.ndim == 1 and R.size == 0:
            R = R.reshape(0, d)
        if R.ndim != 2 or R.shape[1] != d:
            raise ValueError(
                f"records must have shape (num_records, {d}) for this {d}-attribute domain, "
                f"got shape {R.shape}"
            )
        if R.dtype == bool or not (
            np.issubdtype(R.dtype, np.integer) or np.issubdtype(R.dtype, np.floating)
        ):
            if R.size:
                raise ValueError(f"records must be integer codes, got dtype {R.dtype}")
            R = R.astype(np.int64)
        if np.issubdtype(R.dtype, np.floating):
            bad = ~np.isfinite(R) | (R != np.round(R))
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise ValueError(
                    f"attribute {self._names[c]!r} has a non-integer value {R[r, c].item()!r} "
                    f"(record {r})"
                )
        for i, (name, n) in enumerate(zip(self._names, self._sizes, strict=True)):
            col = R[:, i]
            out = (col < 0) | (col >= n)
            if out.any():
                r = int(np.argmax(out))
                raise ValueError(
                    f"attribute {name!r} has value {col[r].item()!r} (record {r}) "
                    f"outside 0..{n - 1}"
                )
        R = R.astype(np.int64)
        if d == 0:
            return np.array([R.shape[0]], dtype=np.int64)
        flat = np.ravel_multi_index(tuple(R.T), self._sizes)
        if np.dtype(dtype) == np.float64:
            return np.bincount(flat, weights=np.ones(flat.size), minlength=N)
        return np.bincount(flat, minlength=N).astype(np.int64, copy=False)

    # ------------------------------------------------------------- value semantics
    def __setattr__(self, name, value):
        raise AttributeError("Domain is immutable")

    def __delattr__(self, name):
        raise AttributeError("Domain is immutable")

    def _state(self) -> tuple:
        return (self._names, self._sizes, self._numeric, self._labels)

    def __eq__(self, other):
        return self._state() == other._state() if isinstance(other, Domain) else NotImplemented

    def __hash__(self):
        return hash(self._state())

    def __reduce__(self):
        return (Domain, self._state())

    def __repr__(self):
        parts = [
            f"{name}={n}{'*' if num else ''}"
            for name, n, num in zip(self._names, self._sizes, self._numeric, strict=True)
        ]
        if len(parts) > 12:
            parts = parts[:6] + [f"... {len(parts) - 12} more ..."] + parts[-6:]
        return f"Domain({', '.join(parts)}; size={format_count(self.size)})"


def _per_attribute(values, names, what: str, noun: str) -> tuple:
    """``values`` as a tuple with one item (a ``noun``) per attribute of ``names``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{what} must be a sequence, one {noun} per attribute, got {values!r}")
    values = tuple(values)
    if len(values) != len(names):
        raise ValueError(
            f"{what} must have one {noun} per attribute: {len(values)} given for "
            f"{len(names)} attributes"
        )
    return values


def _check_labels(labels, names, sizes) -> tuple:
    """Per-attribute label tuples (or None) from the ``labels`` argument of :class:`Domain`."""
    if labels is None:
        return (None,) * len(names)
    if isinstance(labels, Mapping):
        unknown = sorted(set(labels) - set(names))
        if unknown:
            raise ValueError(f"labels given for unknown attribute(s) {unknown}")
        labels = [labels.get(name) for name in names]
    labels = _per_attribute(labels, names, "labels", "entry")
    out: list[tuple[str, ...] | None] = []
    for name, n, lab in zip(names, sizes, labels, strict=True):
        if lab is None:
            out.append(None)
            continue
        if isinstance(lab, (str, bytes)) or not isinstance(lab, Iterable):
            raise ValueError(f"labels of attribute {name!r} must be a list of strings, got {lab!r}")
        lab = tuple(lab)
        if len(lab) != n:
            raise ValueError(f"attribute {name!r} has size {n} but {len(lab)} labels")
        for v in lab:
            if not isinstance(v, str):
                raise ValueError(f"labels of attribute {name!r} must be strings, got {v!r}")
        if len(set(lab)) != n:
            dup = next(v for v in lab if lab.count(v) > 1)
            raise ValueError(f"attribute {name!r}: label {dup!r} appears twice")
        out.append(lab)
    return tuple(out)


def format_count(n: int) -> str:
    """An exact int below 10^7, else a short ``d.ddde+XX`` form that works for any size."""
    if n < 10**7:
        return str(n)
    digits = str(n)
    return f"{digits[0]}.{digits[1:4]}e+{len(digits) - 1:02d}"
