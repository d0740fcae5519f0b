"""The implicit-matrix algebra: the abstract ``Matrix`` and the generic combinators.

A ``Matrix`` is a linear map known through its products with dense arrays; structured kinds
override what they do in closed form, and every dense fallback here is guarded by
:data:`MAX_DENSE_ENTRIES`. Data vectors are in C order (HDMM, McKenna et al. 2018, App. A.1).

User guide: docs/algorithms/implicit-algebra.md.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from functools import reduce
from numbers import Number
from typing import TYPE_CHECKING, cast, overload

import numpy as np
from numpy.typing import ArrayLike
from scipy.sparse.linalg import LinearOperator

if TYPE_CHECKING:  # route.py is the protocol's error half; nothing here needs it at run time
    from .route import ErrorRoute

#: Largest number of entries a dense fallback may allocate (float64: 8 bytes each).
MAX_DENSE_ENTRIES = 50_000_000
#: Singular values below PINV_RCOND · σ_max are treated as zero by dense pseudo-inverses.
PINV_RCOND = 1e-12
#: Entries up to which a strategy without structure for a step is read densely.
SMALL_DENSE_ENTRIES = 4_000_000
#: Largest integer a strategy row may hold, its scale divided out, for exact integer noise.
MAX_ROW_INTEGER = 2**20


class TooLargeError(ValueError):
    """A dense fallback was asked for an array larger than :data:`MAX_DENSE_ENTRIES`.

    Also raised, never a ``MemoryError``, when an array the structure needs anyway would
    exceed this machine's physical memory, and for the other size limits of the algebra
    (:data:`MAX_MARGINALS_DIM`, ``MAX_EIGEN_N``). The message names the array and the limit.
    """


class NotSupportedByKindError(ValueError):
    """An unsupported operation: "not supported by this strategy kind (<Kind>): <reason>".

    E.g. exact integer noise for a strategy whose rows are not integer vectors up to a scale.
    """


def integer_row_scales(M: np.ndarray) -> np.ndarray | None:
    """``d > 0`` per row with ``diag(d)⁻¹ M`` an integer matrix of entries at most
    :data:`MAX_ROW_INTEGER` to within ``12 eps |k|``, else None (see implicit-algebra.md)."""
    absM = np.abs(M)
    d = np.where(absM > 0, absM, np.inf).min(axis=1)
    d[~np.isfinite(d)] = 1.0
    B = M / d[:, None]
    K = np.rint(B)
    if B.size and float(np.abs(K).max()) > MAX_ROW_INTEGER:
        return None
    tol = 12 * np.finfo(float).eps * np.maximum(1.0, np.abs(K))
    if np.any(np.abs(B - K) > tol):
        return None
    return d


def check_dense_size(rows: int, cols: int, what: str) -> None:
    """Raise :class:`TooLargeError` if a ``rows x cols`` dense array would be too large.

    Parameters
    ----------
    rows, cols : int
        The shape of the dense array a caller is about to allocate.
    what : str
        What the array is for, named in the error message (e.g. ``"dense() of Prefix"``).

    Raises
    ------
    TooLargeError
        When ``rows * cols`` exceeds :data:`MAX_DENSE_ENTRIES`.
    """
    if rows * cols > MAX_DENSE_ENTRIES:
        raise TooLargeError(
            f"{what} would materialise a dense {rows} x {cols} array "
            f"({rows * cols:.3g} entries > MAX_DENSE_ENTRIES = {MAX_DENSE_ENTRIES:.3g}); "
            "use a structured representation instead"
        )


def physical_memory() -> int | None:
    """This machine's physical memory in bytes, or None where POSIX ``sysconf`` cannot tell."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_fits_memory(nbytes: float, what: str, advice: str) -> None:
    """Raise :class:`TooLargeError`, never a MemoryError, if ``nbytes`` exceed physical memory."""
    ram = physical_memory()
    if ram is not None and nbytes > ram:
        raise TooLargeError(
            f"{what} needs {nbytes / 2**30:.3g} GiB, more than this machine's memory "
            f"({ram / 2**30:.3g} GiB); {advice}"
        )


def float_dtype(x) -> np.dtype:
    """float32 for float32 data (the opt-in float32 path), else float64."""
    return np.dtype(np.float32) if x.dtype == np.float32 else np.dtype(np.float64)


def _as_2d(x: np.ndarray) -> tuple[np.ndarray, bool]:
    # float32 stays float32 (the opt-in float32 data path of mechanism.measure)
    if not (isinstance(x, np.ndarray) and x.dtype == np.float32):
        x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        return x[:, None], True
    if x.ndim == 2:
        return x, False
    raise ValueError(f"expected a vector or a 2-D array, got an array with {x.ndim} dimensions")


class Matrix(ABC):
    """An implicitly represented real matrix (ARCHITECTURE.md, "The strategy-kind protocol"):
    subclasses set ``self.shape`` and implement :meth:`_matmat` and :meth:`_rmatmat`.

    A ``Matrix`` is known through its products with dense arrays. Every other operation has a
    correct generic default (dense fallbacks guarded by :data:`MAX_DENSE_ENTRIES`), which a
    structured kind overrides with a closed form. The operators build implicit matrices:
    ``A @ B`` a :class:`Product` (with an array: the dense product), ``c * A``, ``A / c`` and
    ``-A`` a :class:`Weighted`, ``A + B`` and ``A - B`` a :class:`Sum`. The constructor takes
    no arguments: a subclass defines its own.

    Attributes
    ----------
    shape : tuple of int
        ``(m, n)``: ``m`` rows (queries), ``n`` columns (cells of the data vector, C order).
    factor_kind : str
        What this matrix is as a factor of a Kronecker term, one of :data:`FACTOR_KINDS`
        (``"matrix"`` unless a kind says otherwise).

    References
    ----------
    Li, Hay, Rastogi, Miklau & McGregor 2010, "Optimizing linear counting queries under
    differential privacy" (the matrix mechanism), Sections 2-3. McKenna et al. 2018, HDMM,
    Section 4 (implicit representations) and Appendix A.1 (C-order vectorisation).
    """

    shape: tuple[int, int]

    #: What this matrix is as a factor of a Kronecker term (one of ``FACTOR_KINDS``).
    factor_kind = "matrix"

    # numpy defers binary operators to us, so ``ndarray @ Matrix`` reaches __rmatmul__
    __array_ufunc__ = None

    # ----------------------------------------------------------------- products
    @abstractmethod
    def _matmat(self, X: np.ndarray) -> np.ndarray:
        """Return ``self @ X`` for a dense ``(n, k)`` array (required of every kind).

        Parameters
        ----------
        X : numpy.ndarray
            A 2-D ``(n, k)`` array, ``n = self.shape[1]``: float64, or float32 on the opt-in
            float32 data path (it may be a non-contiguous view).

        Returns
        -------
        numpy.ndarray
            ``A X``, an ``(m, k)`` array.
        """

    @abstractmethod
    def _rmatmat(self, Y: np.ndarray) -> np.ndarray:
        """Return ``self.T @ Y`` for a dense ``(m, k)`` array (required of every kind).

        Parameters
        ----------
        Y : numpy.ndarray
            A 2-D ``(m, k)`` array, ``m = self.shape[0]``.

        Returns
        -------
        numpy.ndarray
            ``Aᵀ Y``, an ``(n, k)`` array.
        """

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``self @ x`` for a vector or a 2-D array with ``n`` rows.

        Parameters
        ----------
        x : numpy.ndarray
            A vector of length ``n = self.shape[1]`` or an ``(n, k)`` array; float32 data is
            passed on as float32, anything else is read as float64.

        Returns
        -------
        numpy.ndarray
            ``A x``: a vector of length ``m = self.shape[0]``, or ``(m, k)`` for a 2-D ``x``.

        Raises
        ------
        ValueError
            When ``x`` has more than two dimensions or not ``n`` rows.
        """
        X, vec = _as_2d(x)
        if X.shape[0] != self.shape[1]:
            raise ValueError(f"shape mismatch: {self.shape} matrix @ array with {X.shape[0]} rows")
        out = self._matmat(X)
        return out[:, 0] if vec else out

    def rmatvec(self, y: np.ndarray) -> np.ndarray:
        """``self.T @ y`` for a vector or a 2-D array with ``m`` rows.

        Parameters
        ----------
        y : numpy.ndarray
            A vector of length ``m = self.shape[0]`` or an ``(m, k)`` array; float32 data is
            passed on as float32, anything else is read as float64.

        Returns
        -------
        numpy.ndarray
            ``Aᵀ y``: a vector of length ``n = self.shape[1]``, or ``(n, k)`` for a 2-D ``y``.

        Raises
        ------
        ValueError
            When ``y`` has more than two dimensions or not ``m`` rows.
        """
        Y, vec = _as_2d(y)
        if Y.shape[0] != self.shape[0]:
            raise ValueError(f"shape mismatch: {self.shape} matrix, transpose @ {Y.shape[0]} rows")
        out = self._rmatmat(Y)
        return out[:, 0] if vec else out

    def apply_along(self, X: np.ndarray, out: np.ndarray) -> None:
        """One kmatvec step (HDMM App. A.5): ``self`` along the middle axis of ``X`` (``a x n x b``)
        into ``out`` (``a x m x b``), which may be ``X``'s memory with its strides (in place).

        The default computes the whole product first, then writes it; a kind with a cheaper
        batched or in-place form overrides it.

        Parameters
        ----------
        X : numpy.ndarray
            A 3-D ``(a, n, b)`` array, ``n = self.shape[1]``.
        out : numpy.ndarray
            The 3-D ``(a, m, b)`` array written, ``m = self.shape[0]``; it may lie in ``X``'s
            memory with ``X``'s strides (its first ``min(m, n)`` entries along the middle axis
            those of ``X``).

        References
        ----------
        McKenna et al. 2018, HDMM, Appendix A.5 (the Kronecker product's matrix-vector
        product).
        """
        a, n, b = X.shape
        m = self.shape[0]
        if a == 1:
            out[0] = self._matmat(X[0])
        elif b == 1:
            out[:, :, 0] = self._matmat(X[:, :, 0].T).T
        else:
            res = self._matmat(X.transpose(1, 0, 2).reshape(n, a * b))
            out[...] = res.reshape(m, a, b).transpose(1, 0, 2)

    @overload
    def __matmul__(self, other: Matrix) -> Matrix: ...
    @overload
    def __matmul__(self, other: np.ndarray) -> np.ndarray: ...
    def __matmul__(self, other: Matrix | np.ndarray) -> Matrix | np.ndarray:
        if isinstance(other, Matrix):
            return Product(self, other)
        return self.matvec(other)

    def __rmatmul__(self, other: ArrayLike) -> np.ndarray:
        # dense @ Matrix  ==  (Matrix.T @ dense.T).T
        X = np.asarray(other, dtype=float)
        if X.ndim == 1:
            return self.rmatvec(X)
        return self.rmatvec(X.T).T

    # ---------------------------------------------------------------- algebra
    def __mul__(self, c: float) -> Matrix:
        if isinstance(c, Number):
            return Weighted(float(c), self)
        return NotImplemented

    __rmul__ = __mul__

    def __truediv__(self, c: float) -> Matrix:
        if isinstance(c, Number):
            return Weighted(1.0 / float(c), self)
        return NotImplemented

    def __neg__(self) -> Matrix:
        return Weighted(-1.0, self)

    def __add__(self, other: Matrix) -> Matrix:
        if isinstance(other, Matrix):
            return Sum([self, other])
        return NotImplemented

    def __sub__(self, other: Matrix) -> Matrix:
        if isinstance(other, Matrix):
            return Sum([self, Weighted(-1.0, other)])
        return NotImplemented

    @property
    def T(self) -> Matrix:
        """The transpose, implicit.

        Returns
        -------
        Matrix
            ``Aᵀ`` (``n x m``): a :class:`Transposed` unless the kind has a cheaper transpose
            (a symmetric kind returns itself).
        """
        return Transposed(self)

    def gram(self) -> Matrix:
        """``AᵀA``, kept implicit; structured kinds return a closed form.

        Returns
        -------
        Matrix
            The ``n x n`` Gram ``AᵀA``: the :class:`Product` ``A.T @ A`` by default.
        """
        return Product(self.T, self)

    def pinv(self) -> Matrix:
        """The Moore-Penrose pseudo-inverse ``A⁺`` (dense fallback, size-guarded).

        The default reads the matrix densely and treats singular values below
        ``PINV_RCOND · σ_max`` (``PINV_RCOND = 1e-12``) as zero.

        Returns
        -------
        Matrix
            ``A⁺`` (``n x m``): a :class:`Dense` by default, a closed form for structured kinds.

        Raises
        ------
        TooLargeError
            When the default's dense ``m x n`` array would exceed :data:`MAX_DENSE_ENTRIES`.
        """
        return Dense(np.linalg.pinv(self.dense(), rcond=PINV_RCOND))

    # --------------------------------------------------------------- reductions
    def colnorm_p(self, p: int) -> float | np.ndarray:
        """``Σ_i |a_ij|^p`` per column (p = 1 or 2): a float when all agree, else an array.

        Parameters
        ----------
        p : int
            The norm: 1 (sums of absolute values) or 2 (sums of squares, not their root).

        Returns
        -------
        float or numpy.ndarray
            One value per column (length ``n``), or a float standing for every column when a
            structured kind knows they are all equal (the generic default returns the array).

        Raises
        ------
        ValueError
            When ``p`` is not 1 or 2.
        TooLargeError
            When the default's dense read would exceed :data:`MAX_DENSE_ENTRIES`.
        """
        check_p(p)
        D = self.dense()
        return np.abs(D).sum(axis=0) if p == 1 else (D * D).sum(axis=0)

    def rownorm_p(self, p: int) -> float | np.ndarray:
        """``Σ_j |a_ij|^p`` per row (p = 1 or 2): a float when all rows agree, else an array.

        The default asks the transpose's :meth:`colnorm_p` when the kind has a transpose of
        its own, else reads the matrix densely.

        Parameters
        ----------
        p : int
            The norm: 1 (sums of absolute values) or 2 (sums of squares, not their root).

        Returns
        -------
        float or numpy.ndarray
            One value per row (length ``m``), or a float standing for every row when a
            structured kind knows they are all equal.

        Raises
        ------
        ValueError
            When ``p`` is not 1 or 2.
        TooLargeError
            When a dense read would exceed :data:`MAX_DENSE_ENTRIES`.
        """
        check_p(p)
        T = self.T
        if not isinstance(T, Transposed):
            return T.colnorm_p(p)
        D = self.dense()
        return np.abs(D).sum(axis=1) if p == 1 else (D * D).sum(axis=1)

    def sensitivity(self, p: int = 1) -> float:
        """Max column Lp norm: the L1 or L2 sensitivity (Li et al. 2010, Prop. 1).

        Sensitivity under add/remove-one neighbours, from :meth:`colnorm_p`; not the induced
        operator norm.

        Parameters
        ----------
        p : int, default 1
            1 for the L1 sensitivity (Laplace noise), 2 for the L2 sensitivity (Gaussian).

        Returns
        -------
        float
            ``max_j (Σ_i |a_ij|^p)^(1/p)`` (0.0 for a matrix without columns).

        Raises
        ------
        ValueError
            When ``p`` is not 1 or 2.
        TooLargeError
            When the column norms need a dense read beyond :data:`MAX_DENSE_ENTRIES`.

        References
        ----------
        Li et al. 2010, the matrix mechanism, Proposition 1 (L1); Li & Miklau 2012,
        Eigen-Design, Proposition 1 (L2); McKenna et al. 2018, HDMM, Theorem 3 (Kronecker
        products).
        """
        c = self.colnorm_p(p)
        # cast: np.isscalar's stub narrows to any numpy scalar, complex or str; c is a real norm
        top = float(cast(float, c)) if np.isscalar(c) else float(np.max(c)) if np.size(c) else 0.0
        return top if p == 1 else math.sqrt(top)

    def trace(self) -> float:
        """Sum of the diagonal (square matrices only).

        Returns
        -------
        float
            ``tr(A)``.

        Raises
        ------
        ValueError
            When the matrix is not square.
        TooLargeError
            When the default (through :meth:`diag`) would exceed :data:`MAX_DENSE_ENTRIES`.
        """
        self._require_square("trace")
        return float(np.sum(self.diag()))

    def diag(self) -> np.ndarray:
        """The diagonal as a dense vector (square matrices only).

        The default computes one product per block of columns, guarded as a dense ``n x n``
        read.

        Returns
        -------
        numpy.ndarray
            The ``n`` diagonal entries.

        Raises
        ------
        ValueError
            When the matrix is not square.
        TooLargeError
            When the default's ``n x n`` read would exceed :data:`MAX_DENSE_ENTRIES`.
        """
        self._require_square("diag")
        n = self.shape[0]
        check_dense_size(n, n, f"diag() of {type(self).__name__} (generic: one product per column)")
        out = np.empty(n)
        for s, e, block in self._column_blocks("diag()"):
            out[s:e] = block[np.arange(s, e), np.arange(e - s)]
        return out

    def dense(self) -> np.ndarray:
        """The explicit ``m x n`` array (guarded by :data:`MAX_DENSE_ENTRIES`).

        Returns
        -------
        numpy.ndarray
            A new float64 ``(m, n)`` array.

        Raises
        ------
        TooLargeError
            When ``m · n`` (or an intermediate column of the products) exceeds
            :data:`MAX_DENSE_ENTRIES`.
        """
        m, n = self.shape
        check_dense_size(m, n, f"dense() of {type(self).__name__}")
        out = np.empty((m, n))
        for s, e, block in self._column_blocks("dense()"):
            out[:, s:e] = block
        return out

    def _intermediate_rows(self) -> int:
        """Rows of the largest array a product with one column allocates on the way."""
        return self.shape[0]

    def _column_blocks(self, what: str):
        """Yield ``(s, e, self @ I[:, s:e])`` in blocks whose intermediates fit the guard."""
        m, n = self.shape
        rows = max(m, n, self._intermediate_rows())
        check_dense_size(rows, 1, f"{what} of {type(self).__name__} (an intermediate column)")
        width = max(1, min(n, MAX_DENSE_ENTRIES // rows))
        for s in range(0, n, width):
            e = min(n, s + width)
            E = np.zeros((n, e - s))
            E[np.arange(s, e), np.arange(e - s)] = 1.0
            yield s, e, self._matmat(E)

    def as_operator(self) -> LinearOperator:
        """A :class:`scipy.sparse.linalg.LinearOperator` for iterative solvers (LSMR, CG).

        Returns
        -------
        scipy.sparse.linalg.LinearOperator
            An ``(m, n)`` float64 operator whose products are :meth:`matvec` and
            :meth:`rmatvec`.
        """
        return LinearOperator(
            self.shape, matvec=lambda x: self.matvec(np.ravel(x)), matmat=self.matvec,
            rmatvec=lambda y: self.rmatvec(np.ravel(y)), rmatmat=self.rmatvec, dtype=float,
        )

    # ===================================================== the strategy-kind protocol
    # (ARCHITECTURE.md, "Where to add things", (c); docs/algorithms/implicit-algebra.md)

    def kron_terms(self, signed: bool = False) -> list[tuple[float, list[Matrix]]]:
        """This matrix as a union of weighted Kronecker products ``[(c_t, factors_t)]`` in row
        order (HDMM §4.3, ImpVec and eq. 1), ``c_t`` the *squared* weight (HDMM §16, pitfall
        11); ``signed=True``: the signed weight ``w_t`` instead.

        Term ``t``'s rows are ``w_t · (F_1 ⊗ ... ⊗ F_k)``; weights enter a Gram squared, hence
        ``c_t = w_t²`` by default. The default is one term with one factor, the matrix itself.

        Parameters
        ----------
        signed : bool, default False
            False: each term's squared weight ``c_t``; True: its signed weight ``w_t``.

        Returns
        -------
        list of (float, list of Matrix)
            ``[(c_t or w_t, [F_1, ..., F_k])]``, the terms in the matrix's row order, every
            factor with its weight peeled off (a sequence of factors; :class:`Marginals`
            gives a sequence that also knows its marginal).

        References
        ----------
        McKenna et al. 2018, HDMM, Section 4.3 (Algorithm 1, ImpVec, and equation 1).
        """
        return [(1.0, [self])]

    def frobenius_sq(self) -> float:
        """``||A||_F² = tr(AᵀA)``: the Identity strategy's trace term for this workload.

        Returns
        -------
        float
            The sum of the squares of all entries.

        Raises
        ------
        TooLargeError
            When the default (``self.gram().trace()``) needs a dense read beyond
            :data:`MAX_DENSE_ENTRIES`.
        """
        return float(self.gram().trace())

    def error_route(self, W: Matrix) -> ErrorRoute | None:
        """The ErrorRoute of ``W`` against this strategy (default: its Gram's), or None.

        The default asks this matrix's Gram for its :meth:`gram_route`; a Gram too large for
        the dense fallback gives None.

        Parameters
        ----------
        W : Matrix
            The workload, ``m_W x n`` with the strategy's ``n`` columns.

        Returns
        -------
        ErrorRoute or None
            The closed-form route of ``W`` under this strategy, or None: the evaluator then
            uses its generic routes.

        References
        ----------
        Li et al. 2010, the matrix mechanism, Proposition 4.4; McKenna et al. 2018, HDMM,
        Definition 7.
        """
        try:
            gram = self.gram()
        except TooLargeError:  # e.g. marginals beyond the dense 2^d algebra
            return None
        return gram.gram_route(W)

    def gram_route(self, W: Matrix) -> ErrorRoute | None:
        """Asked of a Gram ``G``: the route of ``W`` against any ``A`` with ``AᵀA = G``, or None.

        The error depends on ``A`` only through ``AᵀA``, so a kind whose :meth:`gram` is a
        structured kind with a route needs no :meth:`error_route` of its own.

        Parameters
        ----------
        W : Matrix
            The workload, with as many columns as this Gram.

        Returns
        -------
        ErrorRoute or None
            The route, or None (the default) when there is no closed form.
        """
        return None

    def pinv_operator(self) -> Matrix | None:
        """``A⁺`` as an implicit matrix when the structure gives it (HDMM §7.2), else None.

        Returns
        -------
        Matrix or None
            The exact pseudo-inverse (``n x m``) used by ``mechanism.reconstruct`` for
            ``x̂ = A⁺ y``, or None (the default): the mechanism then solves least squares.

        References
        ----------
        McKenna et al. 2018, HDMM, Section 7.2 (efficient MEASURE and RECONSTRUCT).
        """
        return None

    def least_squares(self, y: np.ndarray, tol: float, maxiter: int) -> np.ndarray | None:
        """The least-squares ``x̂`` of one release by the kind's own solver, or None.

        Asked by ``mechanism.reconstruct`` when :meth:`pinv_operator` is None.

        Parameters
        ----------
        y : numpy.ndarray
            One release: a vector of ``m`` noisy answers.
        tol : float
            The relative tolerance at which the solver stops.
        maxiter : int
            The largest number of iterations.

        Returns
        -------
        numpy.ndarray or None
            ``x̂ = argmin ||A x − y||``, a vector of length ``n``, or None (the default): the
            mechanism then solves it (a dense pseudo-inverse when small, else LSMR).
        """
        return None

    def apply_overwrite(self, y: np.ndarray) -> np.ndarray:
        """``self @ y`` for a vector the caller gives up (the result may be built in its memory).

        Parameters
        ----------
        y : numpy.ndarray
            A vector of length ``n``; the caller does not use it afterwards.

        Returns
        -------
        numpy.ndarray
            ``A y``, a vector of length ``m``, possibly a view of ``y``'s memory (the default:
            a new array, ``self @ y``).
        """
        return self @ y

    def answers_streamed(
        self, x: np.ndarray, each: Callable[[np.ndarray], object], out: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``self @ x`` for one data vector, calling ``each`` on consecutive final pieces of the
        result (built in ``out`` when given), or None when the kind has no such product.

        Used by ``mechanism.measure`` (one release, continuous noise) to add the noise to a
        piece of the answers while it is in cache.

        Parameters
        ----------
        x : numpy.ndarray
            One data vector of length ``n`` (float64, or float32 on the float32 path).
        each : callable
            Called once per piece, in order, with a 1-D view of the result that is final
            (it may modify the piece in place, e.g. add noise to it).
        out : numpy.ndarray, optional
            A C-contiguous 1-D array of length ``m`` to build the result in (a block of a
            stack's result); None: the kind allocates it.

        Returns
        -------
        numpy.ndarray or None
            The ``m`` answers (``out`` when given), every piece of them handed to ``each``;
            or None (the default): nothing was computed nor handed to ``each``.
        """
        return None

    # ----------------------------------------------------------------- helpers
    def _require_square(self, what: str) -> None:
        if self.shape[0] != self.shape[1]:
            raise ValueError(f"{what} needs a square matrix, {type(self).__name__} is {self.shape}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape})"


def check_p(p: int) -> None:
    """Raise ValueError unless ``p`` is a sensitivity norm this package knows (1 or 2).

    Parameters
    ----------
    p : int
        The norm asked for.

    Raises
    ------
    ValueError
        When ``p`` is not 1 or 2 (e.g. the induced operator norms are not sensitivities here).
    """
    if p not in (1, 2):
        raise ValueError(f"sensitivity norm p must be 1 or 2, got {p!r}")


def as_matrix(A: Matrix | ArrayLike) -> Matrix:
    """Wrap a numpy array (or pass a Matrix through); a string is refused with a pointer.

    Parameters
    ----------
    A : Matrix or array_like
        A Matrix (returned as it is) or a 1-D or 2-D array of finite real numbers (a 1-D
        array is one row).

    Returns
    -------
    Matrix
        ``A`` itself, or a :class:`Dense` wrapping a float64 copy of the array.

    Raises
    ------
    TypeError
        When ``A`` is a ``str`` or ``bytes`` (a workload spec is built by
        ``mmtoolkit.workload_specs.build_workload``, not read as numbers).
    ValueError
        When the array has more than two dimensions, or a NaN or infinite entry (named).
    """
    if isinstance(A, (str, bytes)):
        raise TypeError(
            f"expected a Matrix or an array, got the string {A!r} (build a workload SPEC with "
            "mmtoolkit.workload_specs.build_workload)"
        )
    return A if isinstance(A, Matrix) else Dense(A)


def peel(A: Matrix) -> tuple[float, Matrix]:
    """``(c, B)`` with ``A = c·B`` and ``B`` not a :class:`Weighted`.

    Parameters
    ----------
    A : Matrix
        Any matrix, possibly a (nested) :class:`Weighted`.

    Returns
    -------
    tuple of (float, Matrix)
        The product ``c`` of the weights peeled off (1.0 when ``A`` is not weighted) and the
        unweighted base ``B``.
    """
    weight = 1.0
    while isinstance(A, Weighted):
        weight *= A.weight
        A = A.base
    return weight, A


def kron_terms(W: Matrix | ArrayLike) -> list[tuple[float, list[Matrix]]]:
    """``W`` as ``[(c_t, factors_t)]`` (see :meth:`Matrix.kron_terms`).

    Parameters
    ----------
    W : Matrix or array_like
        The workload (an array is wrapped by :func:`as_matrix`).

    Returns
    -------
    list of (float, list of Matrix)
        ``W.kron_terms()``: each term's squared weight and factors, in row order.

    Raises
    ------
    TypeError
        When ``W`` is a string (see :func:`as_matrix`).
    ValueError
        When ``W`` is an array :func:`as_matrix` refuses.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 4.3 (Algorithm 1, ImpVec, and equation 1).
    """
    return as_matrix(W).kron_terms()


# ============================================================================ kinds
class Symmetric(Matrix):
    """A Matrix equal to its transpose (the structured Grams).

    A subclass implements ``_matmat`` only: ``_rmatmat`` is the same product and ``T`` is the
    matrix itself. The constructor takes no arguments: a subclass defines its own.
    """

    def _rmatmat(self, Y):
        return self._matmat(Y)

    @property
    def T(self) -> Matrix:
        return self


class CountingQueries(Matrix):
    """A kind whose rows are 0/1 counting queries: discrete noise needs no row scaling.

    A marker base class (identity, total, prefix, ranges): exact integer noise is calibrated
    on such a strategy's rows as they are. The constructor takes no arguments: a subclass
    defines its own.
    """


class Dense(Matrix):
    """An explicit numpy array of finite real numbers (a NaN or an infinity is refused).

    Parameters
    ----------
    array : array_like
        A 2-D array of real numbers, or a 1-D array (one row); copied as float64.

    Raises
    ------
    ValueError
        When ``array`` has neither one nor two dimensions, or an entry that is NaN or
        infinite (the first such entry is named, with the count of them), or cannot be read
        as float.
    """

    factor_kind = "dense"

    def __init__(self, array: ArrayLike):
        A = np.array(array, dtype=float)
        if A.ndim == 1:
            A = A[None, :]
        if A.ndim != 2:
            raise ValueError(f"Dense needs a 1-D or 2-D array, got {A.ndim} dimensions")
        bad = ~np.isfinite(A)
        if bad.any():
            i, j = (int(k) for k in np.argwhere(bad)[0])
            raise ValueError(
                f"Dense: entry [{i}, {j}] is {float(A[i, j])!r}; a matrix's entries must be finite "
                f"({int(bad.sum())} of {A.size} are not)"
            )
        self.array = A
        self.shape = A.shape

    def _matmat(self, X):
        return self.array @ X

    def _rmatmat(self, Y):
        return self.array.T @ Y

    @property
    def T(self):
        return Dense(self.array.T)

    def gram(self):
        return Dense(self.array.T @ self.array)

    def pinv(self):
        return Dense(np.linalg.pinv(self.array, rcond=PINV_RCOND))

    def colnorm_p(self, p):
        check_p(p)
        A = self.array
        return np.abs(A).sum(axis=0) if p == 1 else (A * A).sum(axis=0)

    def rownorm_p(self, p):
        check_p(p)
        A = self.array
        return np.abs(A).sum(axis=1) if p == 1 else (A * A).sum(axis=1)

    def trace(self):
        self._require_square("trace")
        return float(np.trace(self.array))

    def diag(self):
        self._require_square("diag")
        return np.diag(self.array).copy()

    def dense(self):
        return self.array.copy()


class Weighted(Matrix):
    """``c · A`` for a scalar ``c`` (a weighted workload block or a scaled strategy).

    A weighted :class:`Weighted` is flattened: ``Weighted(a, Weighted(b, B))`` keeps the
    weight ``a·b`` and the base ``B``. Products, norms, the Gram (weight squared), the
    pseudo-inverse, ``kron_terms`` (squared or signed weights), ``frobenius_sq``,
    ``pinv_operator``, ``apply_overwrite`` and ``answers_streamed`` are the base's, scaled.

    Parameters
    ----------
    weight : float
        The scalar ``c``; it must be finite (zero and negative weights are allowed).
    base : Matrix or array_like
        The matrix ``A`` (an array is wrapped by :func:`as_matrix`).

    Raises
    ------
    ValueError
        When ``weight`` is not finite, or ``base`` is an array :func:`as_matrix` refuses.
    TypeError
        When ``base`` is a string (see :func:`as_matrix`).
    """

    weight: float
    base: Matrix

    def __init__(self, weight: float, base: Matrix):
        w = float(weight)
        if not math.isfinite(w):
            raise ValueError(f"weight must be finite, got {weight!r}")
        if isinstance(base, Weighted):
            w, base = w * base.weight, base.base
        self.weight = w
        self.base = as_matrix(base)
        self.shape = self.base.shape

    def _matmat(self, X):
        return self.weight * self.base._matmat(X)

    def _rmatmat(self, Y):
        return self.weight * self.base._rmatmat(Y)

    @property
    def T(self):
        return Weighted(self.weight, self.base.T)

    def _intermediate_rows(self):
        return self.base._intermediate_rows()

    def gram(self):
        return Weighted(self.weight**2, self.base.gram())

    def pinv(self):
        if self.weight == 0.0:
            return Weighted(0.0, self.base.T)
        return Weighted(1.0 / self.weight, self.base.pinv())

    def colnorm_p(self, p):
        return abs(self.weight) ** p * self.base.colnorm_p(p)

    def rownorm_p(self, p):
        return abs(self.weight) ** p * self.base.rownorm_p(p)

    def sensitivity(self, p=1):
        return abs(self.weight) * self.base.sensitivity(p)

    def trace(self):
        return self.weight * self.base.trace()

    def diag(self):
        return self.weight * self.base.diag()

    def dense(self):
        return self.weight * self.base.dense()

    def kron_terms(self, signed=False):
        if signed:
            return [(self.weight * w, f) for w, f in self.base.kron_terms(True)]
        return [(self.weight**2 * c, f) for c, f in self.base.kron_terms()]

    def frobenius_sq(self):
        return self.weight**2 * self.base.frobenius_sq()

    def pinv_operator(self):
        inner = self.base.pinv_operator()
        return None if inner is None or self.weight == 0 else Weighted(1.0 / self.weight, inner)

    def apply_overwrite(self, y):
        out = self.base.apply_overwrite(y)
        out *= self.weight
        return out

    def answers_streamed(self, x, each, out=None):
        w = self.weight

        def scaled(piece):
            piece *= w
            each(piece)

        return self.base.answers_streamed(x, scaled, out)


class Transposed(Matrix):
    """The implicit transpose of a Matrix that has no cheaper transpose.

    ``Matrix.T``'s default; products, norms, trace, diagonal and pseudo-inverse are the
    base's, transposed.

    Parameters
    ----------
    base : Matrix
        The matrix ``A`` whose transpose ``Aᵀ`` this is.
    """

    def __init__(self, base: Matrix):
        self.base = base
        self.shape = (base.shape[1], base.shape[0])

    def _intermediate_rows(self):
        return max(self.base.shape[0], self.base._intermediate_rows())

    def _matmat(self, X):
        return self.base._rmatmat(X)

    def _rmatmat(self, Y):
        return self.base._matmat(Y)

    @property
    def T(self):
        return self.base

    def pinv(self):
        return self.base.pinv().T

    def colnorm_p(self, p):
        return self.base.rownorm_p(p)

    def rownorm_p(self, p):
        return self.base.colnorm_p(p)

    def trace(self):
        return self.base.trace()

    def diag(self):
        return self.base.diag()

    def dense(self):
        return self.base.dense().T


class Sum(Matrix):
    """``A_1 + ... + A_k`` (same shape); e.g. the Gram of a union = Σ of block Grams.

    Parameters
    ----------
    terms : iterable of Matrix or array_like
        The terms ``A_i``, all of one shape (arrays are wrapped by :func:`as_matrix`).

    Raises
    ------
    ValueError
        When there is no term, or two terms differ in shape.
    """

    def __init__(self, terms: Iterable[Matrix | ArrayLike]):
        matrices = [as_matrix(t) for t in terms]
        if not matrices:
            raise ValueError("Sum needs at least one term")
        shape = matrices[0].shape
        for t in matrices:
            if t.shape != shape:
                raise ValueError(f"Sum terms disagree in shape: {shape} vs {t.shape}")
        self.terms = matrices
        self.shape = shape

    def _matmat(self, X):
        return reduce(np.add, (t._matmat(X) for t in self.terms))

    def _rmatmat(self, Y):
        return reduce(np.add, (t._rmatmat(Y) for t in self.terms))

    @property
    def T(self):
        return Sum([t.T for t in self.terms])

    def _intermediate_rows(self):
        return max(t._intermediate_rows() for t in self.terms)

    def trace(self):
        self._require_square("trace")
        return float(sum(t.trace() for t in self.terms))

    def diag(self):
        self._require_square("diag")
        return reduce(np.add, (t.diag() for t in self.terms))

    def dense(self):
        check_dense_size(*self.shape, "dense() of Sum")
        return reduce(np.add, (t.dense() for t in self.terms))


class Product(Matrix):
    """``A @ B``, never formed explicitly.

    Parameters
    ----------
    left : Matrix or array_like
        ``A`` (``m x k``; an array is wrapped by :func:`as_matrix`).
    right : Matrix or array_like
        ``B`` (``k x n``).

    Raises
    ------
    ValueError
        When ``A``'s columns do not match ``B``'s rows.
    """

    def __init__(self, left: Matrix | ArrayLike, right: Matrix | ArrayLike):
        left, right = as_matrix(left), as_matrix(right)
        if left.shape[1] != right.shape[0]:
            raise ValueError(f"Product shape mismatch: {left.shape} @ {right.shape}")
        self.left, self.right = left, right
        self.shape = (left.shape[0], right.shape[1])

    def _matmat(self, X):
        return self.left._matmat(self.right._matmat(X))

    def _rmatmat(self, Y):
        return self.right._rmatmat(self.left._rmatmat(Y))

    @property
    def T(self):
        return Product(self.right.T, self.left.T)

    def _intermediate_rows(self):
        return max(self.left._intermediate_rows(), self.right._intermediate_rows())


class VStack(Matrix):
    """Vertical stacking ``[A_1; ...; A_k]`` — a union of query sets (HDMM eq. 1).

    Its Gram is the :class:`Sum` of the blocks' Grams, its :meth:`kron_terms` the blocks'
    terms in order.

    Parameters
    ----------
    blocks : iterable of Matrix or array_like
        The blocks ``A_i``, top to bottom, all with the same number of columns (the domain
        size; arrays are wrapped by :func:`as_matrix`).

    Raises
    ------
    ValueError
        When there is no block, or two blocks differ in their number of columns.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 4.3, equation 1 (a union of products as a stack).
    """

    def __init__(self, blocks: Iterable[Matrix | ArrayLike]):
        matrices = [as_matrix(b) for b in blocks]
        if not matrices:
            raise ValueError("VStack needs at least one block")
        n = matrices[0].shape[1]
        for b in matrices:
            if b.shape[1] != n:
                raise ValueError(
                    f"VStack blocks disagree in their number of columns (domain size): "
                    f"{n} vs {b.shape[1]}"
                )
        self.blocks = matrices
        self.shape = (sum(b.shape[0] for b in matrices), n)
        self._offsets = np.cumsum([0] + [b.shape[0] for b in matrices])

    def _matmat(self, X):
        o = self._offsets
        out = np.empty((self.shape[0],) + X.shape[1:], dtype=float_dtype(X))
        for i, b in enumerate(self.blocks):
            out[o[i] : o[i + 1]] = b._matmat(X)
        return out

    def answers_streamed(self, x, each, out=None):
        """Each block's answers built in its rows of one result array and handed to ``each``.

        A block that streams its own answers does so into its rows; any other block's
        product is written there (one temporary of the block's size) and handed on whole.

        Parameters
        ----------
        x : numpy.ndarray
            One data vector of length ``n``.
        each : callable
            Called on consecutive final 1-D pieces of the result, in row order.
        out : numpy.ndarray, optional
            A 1-D array of length ``m`` to build the result in; None: a new array (float32
            for float32 data, else float64).

        Returns
        -------
        numpy.ndarray or None
            The ``m`` answers, or None (nothing computed) when ``x`` is not 1-D.
        """
        if x.ndim != 1:
            return None
        if out is None:
            out = np.empty(self.shape[0], dtype=float_dtype(x))
        o = self._offsets
        for i, b in enumerate(self.blocks):
            piece = out[o[i] : o[i + 1]]
            if b.answers_streamed(x, each, piece) is None:
                piece[...] = b._matmat(x[:, None])[:, 0]
                each(piece)
        return out

    def _rmatmat(self, Y):
        o = self._offsets
        out = None
        for i, b in enumerate(self.blocks):  # summed into the first block's result
            part = b._rmatmat(Y[o[i] : o[i + 1]])
            if out is None:  # a fresh array of the block's own, else a copy (never Y's rows)
                out = part if part.flags.writeable and part.flags.owndata else part.copy()
            elif np.result_type(out, part) == out.dtype:
                out += part
            else:
                out = out + part
            del part
        return out

    def gram(self):
        grams = [b.gram() for b in self.blocks]
        return grams[0] if len(grams) == 1 else Sum(grams)

    def colnorm_p(self, p):
        return reduce(lambda a, b: a + b, (b.colnorm_p(p) for b in self.blocks))

    def sensitivity(self, p=1):
        """Max column Lp norm (Li et al. 2010, Prop. 1); for Kronecker products over common
        attribute sizes (HDMM eq. 1) by :func:`max_kron_column_sum`, no N-length vector.

        Parameters
        ----------
        p : int, default 1
            1 for the L1 sensitivity, 2 for the L2 sensitivity.

        Returns
        -------
        float
            ``max_j (Σ_i |a_ij|^p)^(1/p)`` over the stack's columns.

        Raises
        ------
        ValueError
            When ``p`` is not 1 or 2.
        TooLargeError
            When the distinct column classes' grid, or the generic column norms of a stack
            without common attribute sizes, exceed :data:`MAX_DENSE_ENTRIES`.

        References
        ----------
        Li et al. 2010, the matrix mechanism, Proposition 1; McKenna et al. 2018, HDMM,
        Section 4.3, equation 1.
        """
        check_p(p)
        terms = self.kron_terms()
        sizes = [f.shape[1] for f in terms[0][1]]
        if len(sizes) < 2 or any([f.shape[1] for f in fs] != sizes for _, fs in terms):
            return super().sensitivity(p)
        weights = [abs(c) ** (p / 2) for c, _ in terms]  # c is the squared weight
        norms = [[f.colnorm_p(p) for f in fs] for _, fs in terms]
        top = max_kron_column_sum(weights, norms, sizes)
        return top if p == 1 else math.sqrt(top)

    def rownorm_p(self, p):
        parts = [b.rownorm_p(p) for b in self.blocks]
        if all(np.isscalar(r) for r in parts) and len(set(parts)) == 1:
            return float(parts[0])
        check_dense_size(self.shape[0], 1, "row norms of a VStack")
        return np.concatenate(
            [np.full(b.shape[0], r) if np.isscalar(r) else r for b, r in zip(self.blocks, parts)]
        )

    def dense(self):
        check_dense_size(*self.shape, "dense() of VStack")
        return np.vstack([b.dense() for b in self.blocks])

    def kron_terms(self, signed=False):
        return [t for b in self.blocks for t in b.kron_terms(signed)]

    def frobenius_sq(self):
        return float(sum(b.frobenius_sq() for b in self.blocks))


#: Entries of the working arrays of :func:`max_kron_column_sum` (its blocks).
KRON_MAX_BLOCK = 4_000_000


def max_kron_column_sum(weights, norms, sizes) -> float:
    """``max_j Σ_t w_t Π_i norms[t][i][j_i]`` over the grid ``j ∈ Π_i range(sizes[i])``, exactly,
    on the attributes' distinct columns (``norms[t][i]``: a vector or a scalar)."""
    T, d = len(weights), len(sizes)
    classes = []  # per attribute: (terms x k_i) distinct columns
    for i, n in enumerate(sizes):
        C = np.empty((T, n))
        for t in range(T):
            C[t] = norms[t][i]
        classes.append(np.unique(C, axis=1))
    counts = [U.shape[1] for U in classes]
    check_dense_size(math.prod(counts), 1, "the column-norm grid of a stack of Kronecker products")
    s = d  # suffix = attributes s..d-1, as long as its table fits a block
    while s > 0 and T * math.prod(counts[s - 1 :]) <= KRON_MAX_BLOCK:
        s -= 1
    s = min(s, d - 1)
    suffix = np.ones((T, 1))
    for U in classes[s:]:
        suffix = (suffix[:, :, None] * U[:, None, :]).reshape(T, -1)
    prefix = np.asarray(weights, dtype=float)[None, :]
    for U in classes[:s]:
        check_dense_size(prefix.shape[0] * U.shape[1], T, "prefix coefficients of a column sum")
        prefix = (prefix[:, None, :] * U.T[None, :, :]).reshape(-1, T)
    step = max(1, KRON_MAX_BLOCK // suffix.shape[1])
    return max(
        float(np.max(prefix[a : a + step] @ suffix)) for a in range(0, prefix.shape[0], step)
    )
