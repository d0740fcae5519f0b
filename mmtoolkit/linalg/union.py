"""Unions of weighted Kronecker products over one factorisation of the domain (HDMM OPT_+,
Def. 11: ``A = [w_1 𝔸_1; ...; w_l 𝔸_l]``, ``𝔸_g = ⊗_i A_gi``) and their least squares.

:class:`KroneckerUnion`; for two products an exact pseudo-inverse in a common eigenbasis of
the factor Grams (:class:`TwoProductBasis`, :class:`TwoProductPinv`), for more preconditioned
conjugate gradients on the normal equations (:class:`NormalEquations`).

User guide: docs/algorithms/implicit-algebra.md ("Unions of Kronecker products").
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import blas

from . import base
from .base import Dense, Matrix, VStack, peel
from .kronecker import Kronecker
from .route import RANK_RTOL, common_sizes

#: Cells of one slab of the diagonal ``D`` generated at a time (two 0.5 MB arrays, in cache).
CHUNK = 1 << 16

#: Alternating sweeps over the attributes in :meth:`_Preconditioner.condition`.
SWEEPS = 8

#: Restarts of :class:`NormalEquations`' CG on the true residual (iterative refinement).
REFINE = 4


def _cholesky_full_rank(G: np.ndarray) -> np.ndarray:
    """The Cholesky factor of ``G``'s symmetric part; ``LinAlgError`` unless of full rank."""
    S = 0.5 * (G + G.T)
    lam = np.linalg.eigvalsh(S)
    if lam[-1] <= 0 or lam[0] <= RANK_RTOL * S.shape[0] * np.finfo(float).eps * lam[-1]:
        raise np.linalg.LinAlgError("a factor Gram is singular")
    return np.linalg.cholesky(S)


class TwoProductBasis:
    """The common eigenbasis of two Kronecker Grams (``V``, ``lam``, ``V_inv_t``) or LinAlgError."""

    def __init__(self, grams, weights):
        order = [0, 1]
        try:
            chol = [_cholesky_full_rank(G) for G in grams[0]]
        except np.linalg.LinAlgError:
            chol = [_cholesky_full_rank(G) for G in grams[1]]
            order = [1, 0]
        self.order = order
        self.c1, self.c2 = weights[order[0]], weights[order[1]]
        self.V, self.V_inv_t, self.lam = [], [], []
        for L, H in zip(chol, grams[order[1]]):
            Li = np.linalg.solve(L, np.eye(L.shape[0]))
            lam, U = np.linalg.eigh(Li @ (0.5 * (H + H.T)) @ Li.T)
            self.V.append(Li.T @ U)
            self.V_inv_t.append(L @ U)
            self.lam.append(np.clip(lam, 0.0, None))

    def slabs(self, a: float, b: float, *arrays):
        """The diagonal ``a + b ⊗lam`` a slab of at most :data:`CHUNK` cells at a time: yields
        ``(views, den)``, the slab's rows of ``arrays`` (``N`` cells) and its reused diagonal."""
        sizes = [len(v) for v in self.lam]
        split = len(sizes)
        while split > 0 and math.prod(sizes[split - 1 :]) <= CHUNK:
            split -= 1
        tail: np.ndarray = np.ones(1)
        for lam in self.lam[split:]:
            tail = np.kron(tail, lam)
        rows = [X.reshape(-1, tail.size, *X.shape[1:]) for X in arrays]
        den = np.empty_like(tail)
        for h, head in enumerate(itertools.product(*(range(n) for n in sizes[:split]))):
            lh = math.prod(float(self.lam[i][j]) for i, j in enumerate(head))
            np.multiply(tail, b * lh, out=den)
            den += a
            yield [r[h] for r in rows], den

    def divide(self, X: np.ndarray) -> None:
        """``X /= D`` in place (``X``: ``N`` cells x columns), ``D = c1 + c2 ⊗lam``."""
        for (rows,), den in self.slabs(self.c1, self.c2, X):
            rows /= den[:, None]


class KroneckerUnion(VStack):
    """A stack of weighted Kronecker products over one factorisation of the domain (Def. 11).

    ``A = [w_1 𝔸_1; ...; w_l 𝔸_l]`` with ``𝔸_g = ⊗_i A_gi``: a :class:`VStack` whose
    reconstruction is exact for two products (a common eigenbasis of the factor Grams,
    ``pinv_operator``) and preconditioned conjugate gradients for more (``least_squares``).

    Parameters
    ----------
    blocks : iterable of Matrix or array_like
        The products ``w_g 𝔸_g``, top to bottom: each one (weighted) Kronecker product (or a
        single matrix, a one-factor product) with a nonzero weight, all with the same
        factor sizes (column counts).

    Raises
    ------
    ValueError
        When there is no block, the blocks differ in their number of columns, a block is a
        union of several Kronecker products or has weight 0, or the blocks do not share one
        factorisation of the domain.

    References
    ----------
    McKenna et al. 2018, HDMM, Section 6.2 (Definition 11, OPT_+: unions of products);
    Hestenes & Stiefel 1952 (conjugate gradients).
    """

    def __init__(self, blocks: Iterable[Matrix | ArrayLike]):
        super().__init__(blocks)
        self.parsed = []
        for g, b in enumerate(self.blocks):
            terms = b.kron_terms()
            if len(terms) != 1:
                raise ValueError(
                    f"{type(self).__name__} block {g} is a union of {len(terms)} Kronecker "
                    "products; each block must be one (weighted) product"
                )
            if terms[0][0] <= 0.0:
                raise ValueError(f"{type(self).__name__} block {g} has weight 0")
            self.parsed.append(terms[0])
        self.sizes = common_sizes(self.parsed)
        if self.sizes is None:
            raise ValueError(
                f"{type(self).__name__} blocks do not share one factorisation of the domain: "
                f"{sorted({tuple(f.shape[1] for f in fs) for _, fs in self.parsed})}"
            )

    def _factor_lists(self):
        """``[(w_g, [A_gi])]`` (signed weights), or None for a factor too large to read densely."""
        out = []
        for b in self.blocks:
            w, inner = peel(b)
            fs = inner.factors if isinstance(inner, Kronecker) else [inner]
            if len(fs) != len(self.sizes) or any(
                f.shape[0] * f.shape[1] > base.MAX_DENSE_ENTRIES for f in fs
            ):
                return None
            out.append((w, fs))
        return out

    def pinv_operator(self):
        """``A⁺`` exactly for two dense-readable products, one positive definite; else None.

        Returns
        -------
        Matrix or None
            The exact pseudo-inverse (``n x m``; its ``apply_overwrite`` builds ``x̂`` in
            ``y``'s memory) when the union has two products whose factors are small enough to
            read densely and one of which has factor Grams of full rank; else None.
        """
        factors = self._factor_lists() if len(self.blocks) == 2 else None
        if factors is None:
            return None
        try:
            return TwoProductPinv(self, factors)
        except np.linalg.LinAlgError:
            return None

    def least_squares(self, y, tol, maxiter):
        """Preconditioned CG on the normal equations; None for factors too large to read densely.

        Parameters
        ----------
        y : numpy.ndarray
            One release: the ``m`` noisy answers, a vector.
        tol : float
            The relative residual at which CG stops: ``‖AᵀA x̂ − Aᵀy‖ ≤ tol ‖Aᵀy‖``.
        maxiter : int
            The largest number of CG iterations (restarts included).

        Returns
        -------
        numpy.ndarray or None
            ``x̂`` (length ``n``), or None when ``y`` is not 1-D or a factor is too large to
            read densely (the mechanism then runs LSMR).

        Warns
        -----
        RuntimeWarning
            When ``maxiter`` (or the restarts) end the solve above ``tol``; ``x̂`` is then
            returned as it is.
        """
        factors = self._factor_lists()
        if factors is None or y.ndim != 1:
            return None
        return NormalEquations(self, factors).solve(y, tol, maxiter)


def geometric_mean(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A # B = A^½ (A^-½ B A^-½)^½ A^½``, the geometric mean of a positive definite ``A``
    and a positive semidefinite ``B`` (Pusz & Woronowicz 1975; Ando 1979)."""
    lam, U = np.linalg.eigh(0.5 * (A + A.T))
    half = (U * np.sqrt(lam)) @ U.T
    C = (U / np.sqrt(lam)) @ U.T
    C = C @ B @ C
    mu, W = np.linalg.eigh(0.5 * (C + C.T))
    M = half @ ((W * np.sqrt(np.clip(mu, 0.0, None))) @ W.T) @ half
    return 0.5 * (M + M.T)


def _positive_definite(grams) -> bool:
    """Whether every factor Gram is positive definite by :func:`_cholesky_full_rank`'s rule."""
    try:
        for G in grams:
            _cholesky_full_rank(G)
    except np.linalg.LinAlgError:
        return False
    return True


class _Preconditioner:
    """One preconditioner candidate ``P = c_a K_a + h ⊗H_i``: the kept product, its ``partners``
    (one exactly, several by their geometric mean), the pair's basis and the other products."""

    def __init__(self, keep, partners, weights, grams):
        h, H = weights[partners[0]], grams[partners[0]]
        for g in partners[1:]:
            h, H = 2.0 * math.sqrt(h * weights[g]), list(map(geometric_mean, H, grams[g]))
        self.basis = TwoProductBasis([grams[keep], H], [weights[keep], h])
        # diagonal in the basis: the kept product and the partner of an unmerged pair
        exact = [True, len(partners) == 1]
        self.diag = (
            self.basis.c1 if exact[self.basis.order[0]] else 0.0,
            self.basis.c2 if exact[self.basis.order[1]] else 0.0,
        )
        self.factors = []  # the other products' ⊗(V_iᵀG_giV_i), the weight in the first
        for g in range(len(weights)):
            if g == keep or (exact[1] and g == partners[0]):
                continue
            F = [V.T @ G @ V for V, G in zip(self.basis.V, grams[g])]
            F[0] *= weights[g]
            self.factors.append([0.5 * (X + X.T) for X in F])

    def condition(self, sweeps: int = SWEEPS) -> float:
        """A lower estimate of ``λ_max(P⁻¹AᵀA)``, which CG's iteration count follows."""
        b = self.basis
        lam = b.lam
        d = len(lam)
        # the quadratic forms as lists of (coefficient, per-attribute matrices): T, then D
        num = [(self.diag[0], [None] * d), (self.diag[1], lam)] + [(1.0, F) for F in self.factors]
        den = [(b.c1, [None] * d), (b.c2, lam)]

        def form(M, u):
            if M is None:
                return float(u @ u)
            return float(u @ (M * u)) if M.ndim == 1 else float(u @ M @ u)

        def quotient(us):
            top = sum(c * math.prod(form(M[i], u) for i, u in enumerate(us)) for c, M in num)
            return top / sum(c * math.prod(form(M[i], u) for i, u in enumerate(us)) for c, M in den)

        def dense(M, n):
            if M is None:
                return np.eye(n)
            return np.diag(M) if M.ndim == 1 else M

        rng = np.random.default_rng(0)
        starts = [[np.ones(len(v)) for v in lam], [rng.standard_normal(len(v)) for v in lam]]
        best = 1.0
        for us in starts:
            for _ in range(sweeps):
                for j in range(d):
                    n = len(lam[j])
                    others = [i for i in range(d) if i != j]
                    Nj = sum(c * math.prod(form(M[i], us[i]) for i in others) * dense(M[j], n)
                             for c, M in num)  # fmt: skip
                    s = sum(c * math.prod(form(M[i], us[i]) for i in others) * dense(M[j], n)
                            for c, M in den).diagonal()  # fmt: skip
                    r = 1.0 / np.sqrt(s)
                    _, W = np.linalg.eigh(r[:, None] * (0.5 * (Nj + Nj.T)) * r)
                    us[j] = r * W[:, -1]
                    us[j] /= np.linalg.norm(us[j])
            best = max(best, quotient(us))
        return best


class NormalEquations:
    """Preconditioned conjugate gradients (Hestenes & Stiefel 1952) on ``AᵀA x = Aᵀy`` for a
    :class:`KroneckerUnion` (docs/algorithms/implicit-algebra.md, "More products")."""

    def __init__(self, A: KroneckerUnion, factors):
        self.A = A
        weights = [w * w for w, _ in factors]
        grams = [[f.gram().dense() for f in fs] for _, fs in factors]
        order = sorted(range(len(factors)), key=lambda g: -weights[g])
        keep = order[0]
        merged = [g for g in order[1:] if _positive_definite(grams[g])]
        # pairs with the next heaviest and the heaviest positive definite product; the merge
        pd_keep = len(order) > 1 and _positive_definite(grams[keep])  # one product: plain
        candidates = [[order[1]]] if pd_keep else []
        candidates += [c for c in (merged[:1], merged) if c and c not in candidates]
        # AᵀA in the cells' basis: plain CG's operator and the true residual
        self.grams = [(c, Kronecker([f.gram() for f in fs])) for c, (_, fs) in
                      zip(weights, factors)]  # fmt: skip
        self.basis, self.diag, self.terms = None, (0.0, 0.0), self.grams
        self.choice = None  # the index of the preconditioner run (None: plain CG)
        if not candidates:
            return
        options = [_Preconditioner(keep, p, weights, grams) for p in candidates]
        self.choice = 0
        if len(options) > 1:
            work = [math.sqrt(o.condition()) * (len(o.factors) + 1) for o in options]
            self.choice = int(np.argmin(work))
        chosen = options[self.choice]
        self.basis, self.diag = chosen.basis, chosen.diag
        self.terms = [(1.0, Kronecker([Dense(X) for X in F])) for F in chosen.factors]
        self.right_t = Kronecker([Dense(V.T) for V in self.basis.V])
        self.right = Kronecker([Dense(V) for V in self.basis.V])
        self.back = Kronecker([Dense(X) for X in self.basis.V_inv_t])

    def _operator(self, p, q, scratch):
        """``q = T p`` (``T = AᵀA`` without a basis): the diagonal products a slab at a time,
        the others each in place in ``scratch``."""
        first = True
        if any(self.diag):
            for (pv, qv), den in self.basis.slabs(*self.diag, p, q):
                np.multiply(pv, den, out=qv)
            first = False
        for c, K in self.terms:
            scratch[...] = p
            t = K.apply_overwrite(scratch)
            if c != 1.0:
                t *= c
            if first:
                q[...] = t
                first = False
            else:
                q += t
        return q

    def _cells_norm2(self, r, scratch) -> float:
        """``‖r‖²`` of the residual in the cells' basis (``r = (⊗V_i)⁻ᵀ r̃``, in ``scratch``)."""
        if self.basis is None:
            return float(np.dot(r, r))
        scratch[...] = r
        t = self.back.apply_overwrite(scratch)
        return float(np.dot(t, t))

    def solve(self, y, tol, maxiter):
        N = self.A.shape[1]
        b = self._rhs(y)
        b2 = float(np.dot(b, b))
        if b2 == 0.0:
            return np.zeros(N)
        target = tol * tol * b2  # on ‖r‖² in the cells' basis
        x, used = self._cg(b, target, maxiter)
        del b
        refines = REFINE if self.basis is not None else 0
        while True:
            if self.basis is None and used < maxiter:
                return x  # plain CG stopped on its residual (the true one up to rounding)
            r = self._residual(x, y)
            rr = float(np.dot(r, r))
            if rr <= target:
                return x
            if used >= maxiter or not refines:
                break
            e, k = self._cg(r, target, maxiter - used)
            x += e
            used += k
            refines -= 1
        warnings.warn(
            f"least squares of the {type(self.A).__name__} stopped at relative residual "
            f"‖AᵀAx̂ − Aᵀy‖/‖Aᵀy‖ = {math.sqrt(rr / b2):.3g}, above tol = {tol:.3g}, after "
            f"{used} iterations (maxiter {maxiter}"
            + ("" if used >= maxiter else f", {REFINE} restarts")
            + "); x̂ is not the least-squares solution to that tolerance",
            RuntimeWarning,
            stacklevel=2,
        )
        return x

    def _rhs(self, y):
        """``Aᵀy`` as an array of its own (the solve overwrites it)."""
        b = self.A._rmatmat(y.reshape(-1, 1)).reshape(self.A.shape[1])
        if not (b.flags.owndata and b.flags.writeable):
            b = b.copy()
        return b

    def _residual(self, x, y):
        """``Aᵀy − AᵀA x`` with the structured Grams (in a new vector; one scratch)."""
        r, scratch = self._rhs(y), np.empty_like(x)
        for c, K in self.grams:
            scratch[...] = x
            blas.daxpy(K.apply_overwrite(scratch), r, a=-c)
        return r

    def _cg(self, r, target: float, maxiter: int):
        """CG from ``x = 0`` on ``AᵀA x = r`` (``r`` overwritten) until the residual's
        ``‖·‖²`` in the cells' basis is at most ``target``: ``(x, iterations)``."""
        N = self.A.shape[1]
        b2 = float(np.dot(r, r))
        if self.basis is not None:
            r = self.right_t.apply_overwrite(r)  # in the basis: (⊗V_iᵀ) r
        x, p = np.zeros(N), np.empty(N)
        rz = self._rz(r)
        bound = rz * target / b2  # the same fraction, first in the P⁻¹ norm
        q, scratch = np.empty(N), np.empty(N)
        self._update(r, p, 0.0)
        k = 0
        while k < maxiter:
            if rz <= bound:
                rr = self._cells_norm2(r, scratch)
                if rr <= target:
                    break
                bound = rz * target / rr  # what is left, in the P⁻¹ norm
            q = self._operator(p, q, scratch)
            alpha = rz / float(np.dot(p, q))
            blas.daxpy(p, x, a=alpha)
            blas.daxpy(q, r, a=-alpha)
            rz, old = self._rz(r), rz
            self._update(r, p, rz / old)
            k += 1
        if self.basis is not None:
            x = self.right.apply_overwrite(x)
        return x, k

    def _rz(self, r) -> float:
        """``rᵀD⁻¹r`` (``D = 1`` without a basis)."""
        if self.basis is None:
            return float(np.dot(r, r))
        return sum(
            float(np.dot(rv, rv / den))
            for (rv,), den in self.basis.slabs(self.basis.c1, self.basis.c2, r)
        )

    def _update(self, r, p, beta: float) -> None:
        """``p = D⁻¹r + βp`` in place (``β = 0``: overwritten)."""
        if self.basis is None:
            if beta == 0.0:
                p[...] = r
            else:
                p *= beta
                p += r
            return
        for (rv, pv), den in self.basis.slabs(self.basis.c1, self.basis.c2, r, p):
            if beta == 0.0:
                np.divide(rv, den, out=pv)
            else:
                pv *= beta
                pv += rv / den


class TwoProductPinv(Matrix):
    """``A⁺`` of a :class:`KroneckerUnion` of two products (``apply_overwrite``: in ``y``)."""

    def __init__(self, A: KroneckerUnion, factors):
        self.shape = (A.shape[1], A.shape[0])
        self._offsets = A._offsets
        grams = [[f.gram().dense() for f in fs] for _, fs in factors]
        self.basis = TwoProductBasis(grams, [w * w for w, _ in factors])
        self.weights = [w for w, _ in factors]
        # structured ⊗A_giᵀ per block, then dense ⊗V_iᵀ and ⊗V_i once each on the sum
        self.left = [Kronecker([f.T for f in fs]) for _, fs in factors]
        self.right_t = Kronecker([Dense(V.T) for V in self.basis.V])
        self.right = Kronecker([Dense(V) for V in self.basis.V])

    def _combine(self, parts, into: int = 0):
        """``Σ_g w_g parts[g]`` into ``parts[into]`` (in place)."""
        u, v = parts[into], parts[1 - into]
        u *= self.weights[into]
        v *= self.weights[1 - into]
        u += v
        return u

    def _solve(self, u, overwrite: bool):
        """``(⊗V_i) D⁻¹ (⊗V_iᵀ) u`` (``u = Aᵀy``; in ``u``'s memory with ``overwrite``)."""
        u = self.right_t.apply_overwrite(u) if overwrite else self.right_t @ u
        self.basis.divide(u.reshape(self.shape[0], -1))
        return self.right.apply_overwrite(u) if overwrite else self.right @ u

    def _matmat(self, Y):
        o = self._offsets
        u = self._combine([self.left[g] @ Y[o[g] : o[g + 1]] for g in range(2)])
        return self._solve(u, False)

    def _rmatmat(self, X):
        t = self._solve(X, False)  # (AᵀA)⁻¹ is symmetric
        return np.vstack([w * (L.T @ t) for w, L in zip(self.weights, self.left)])

    def apply_overwrite(self, y):
        o = self._offsets
        if not (y.ndim == 1 and y.flags.c_contiguous and y.flags.writeable):
            return self @ y
        parts = [self.left[g].apply_overwrite(y[o[g] : o[g + 1]]) for g in range(2)]
        # the sum goes where a block's product was built in place (not a Total-factor block)
        into = 0 if np.shares_memory(parts[0], y) else 1
        return self._solve(self._combine(parts, into), True)
