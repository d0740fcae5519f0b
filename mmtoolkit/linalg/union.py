"""Unions of weighted Kronecker products over one factorisation of the domain (HDMM OPT_+,
Def. 11: ``A = [w_1 𝔸_1; ...; w_l 𝔸_l]``, ``𝔸_g = ⊗_i A_gi``) and their exact least squares
for two products (issue 17).

Two products, ``AᵀA = c_1 ⊗G_i + c_2 ⊗H_i`` (``c_g = w_g²``, ``G_i``, ``H_i`` the factor
Grams), are diagonalised together attribute by attribute (:class:`TwoProductBasis`): with
``G_i = L_iL_iᵀ`` (Cholesky), ``L_i⁻¹H_iL_i⁻ᵀ = U_iΛ_iU_iᵀ`` and ``V_i = L_i⁻ᵀU_i``,
``V_iᵀG_iV_i = I`` and ``V_iᵀH_iV_i = Λ_i``, so

    AᵀA = (⊗V_i)⁻ᵀ D (⊗V_i)⁻¹,   D = c_1 + c_2 ⊗Λ_i   (diagonal, N cells)

and ``x̂ = A⁺y = (⊗V_i) D⁻¹ (⊗V_iᵀ) Σ_g w_g (⊗A_giᵀ) y_g`` (:class:`TwoProductPinv`): the
blocks' transposes (structured: p-Identity factors), two Kronecker products of small dense
factors and one division, each done in place in ``y``'s memory when the caller gives ``y``
up — no N-sized array beyond ``y``, and no iterations (LSMR over the stack took 508 s on 10^6
cells and kept about 20 N-vectors). Each dense pass costs ``2 n_i`` flops per cell, so the
time grows with the attribute sizes, unlike a p-Identity product's structured pseudo-inverse
(``benchmarks/README.md``). The evaluator's two-block error route (``evaluate/stacked.py``)
sums over the same diagonal. Three or more products have no such closed form: they are
solved by conjugate gradients on the normal equations, preconditioned by two of them
(:class:`NormalEquations`).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from . import base
from .base import Dense, Matrix, VStack, peel
from .kronecker import Kronecker
from .route import RANK_RTOL, common_sizes

#: Cells of one slab of the diagonal ``D`` (its trailing attributes), generated at a time
#: (two such arrays, 0.5 MB each, in cache).
CHUNK = 1 << 16


def _cholesky_full_rank(G: np.ndarray) -> np.ndarray:
    """The Cholesky factor of the symmetric part of ``G``; ``LinAlgError`` unless ``G`` has
    full rank by numpy's rule (every eigenvalue above ``RANK_RTOL · n · eps · λ_max``) — a
    singular Gram whose factorisation succeeds by rounding would give a wrong basis."""
    S = 0.5 * (G + G.T)
    lam = np.linalg.eigvalsh(S)
    if lam[-1] <= 0 or lam[0] <= RANK_RTOL * S.shape[0] * np.finfo(float).eps * lam[-1]:
        raise np.linalg.LinAlgError("a factor Gram is singular")
    return np.linalg.cholesky(S)


class TwoProductBasis:
    """The common eigenbasis of two Kronecker Grams ``c_1 ⊗G_i + c_2 ⊗H_i`` (module
    docstring): ``V`` and ``lam`` per attribute, the weights ``c1`` (of the product whose
    factor Grams are all positive definite: the first if its Cholesky factorisations succeed,
    else the second, ``order``) and ``c2``. Raises ``LinAlgError`` when neither product's
    Grams are all positive definite."""

    def __init__(self, grams, weights):
        order = [0, 1]
        try:
            chol = [_cholesky_full_rank(G) for G in grams[0]]
        except np.linalg.LinAlgError:
            chol = [_cholesky_full_rank(G) for G in grams[1]]
            order = [1, 0]
        self.order = order
        self.c1, self.c2 = weights[order[0]], weights[order[1]]
        self.V, self.lam = [], []
        for L, H in zip(chol, grams[order[1]]):
            Li = np.linalg.solve(L, np.eye(L.shape[0]))
            lam, U = np.linalg.eigh(Li @ (0.5 * (H + H.T)) @ Li.T)
            self.V.append(Li.T @ U)
            self.lam.append(np.clip(lam, 0.0, None))

    def divide(self, X: np.ndarray) -> None:
        """``X /= D`` in place (``X``: ``N`` cells x columns, C order over the attributes):
        ``D = c1 + c2 ⊗lam`` generated one slab of trailing attributes (at most
        :data:`CHUNK` cells) at a time, never as an N-vector."""
        sizes = [len(v) for v in self.lam]
        k = X.shape[1]
        split = len(sizes)
        while split > 0 and math.prod(sizes[split - 1 :]) <= CHUNK:
            split -= 1
        tail = functools.reduce(np.kron, self.lam[split:], np.ones(1))
        rows = X.reshape(-1, tail.size, k)
        den = np.empty_like(tail)
        for h, head in enumerate(itertools.product(*(range(n) for n in sizes[:split]))):
            lh = math.prod(float(self.lam[i][j]) for i, j in enumerate(head))
            np.multiply(tail, self.c2 * lh, out=den)
            den += self.c1
            rows[h] /= den[:, None]


class KroneckerUnion(VStack):
    """A stack of weighted Kronecker products over one common factorisation of the domain
    (HDMM OPT_+, Def. 11; see the module docstring): the :class:`VStack` it is, plus the
    exact least squares of two products (``pinv_operator``: :class:`TwoProductPinv`).

    ``blocks``: matrices that are each one weighted Kronecker product (``kron_terms`` of
    length one; a bare matrix is a one-factor product) with a nonzero weight."""

    def __init__(self, blocks):
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
        """``[(w_g, [A_gi])]`` (signed weights), or None when a factor is too large to be
        read densely."""
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
        """``A⁺`` exactly for two products whose factors are small enough to be read densely
        and one of which has positive definite factor Grams (OPT_+ with two groups: p-Identity
        factors); None otherwise (:meth:`least_squares`)."""
        factors = self._factor_lists() if len(self.blocks) == 2 else None
        if factors is None:
            return None
        try:
            return TwoProductPinv(self, factors)
        except np.linalg.LinAlgError:
            return None

    def least_squares(self, y, tol, maxiter):
        """More than two products (or two with no positive definite side): conjugate
        gradients on the normal equations ``AᵀA x = Aᵀy`` (:class:`NormalEquations`), the
        implicit Gram ``Σ_g c_g ⊗G_gi`` applied term by term in place, preconditioned by the
        exact inverse of the two heaviest products that have one (:class:`TwoProductBasis`).
        Keeps ``x``, ``r``, ``p``, ``q`` and one scratch vector (5 N numbers; ``y`` is read
        once for ``Aᵀy``) — scipy's LSMR over the stack kept ``u`` (m), ``x``, ``v``, ``h``,
        ``h̄`` (N each) and created ``A v`` (m), ``Aᵀu`` and a scaled ``h̄`` (N) per iteration,
        about ``2m + 7N``. None for factors too large to read densely (LSMR then)."""
        factors = self._factor_lists()
        if factors is None or y.ndim != 1:
            return None
        return NormalEquations(self, factors).solve(y, tol, maxiter)


class NormalEquations:
    """Preconditioned conjugate gradients (Hestenes & Stiefel 1952) on ``AᵀA x = Aᵀy`` for a
    :class:`KroneckerUnion` (see :meth:`KroneckerUnion.least_squares`). Preconditioner
    ``M = c_a ⊗G_ai + c_b ⊗G_bi`` for the first pair of products, heaviest weights first,
    whose Grams one side of are positive definite (``M⁻¹ = (⊗V_i) D⁻¹ (⊗V_iᵀ)``, applied in
    place); with ``M`` positive definite, ``AᵀA ≽ M`` is too and the iteration count is
    bounded by the spread of ``M⁻¹AᵀA``'s spectrum, ``[1, 1 + λ_max(M⁻¹ Σ_{g≠a,b} c_g ⊗G_gi)]``.
    Without one (``AᵀA`` may be singular) plain CG from ``x = 0``, which stays in the row
    space: the minimum-norm solution, as LSMR's. Stops when ``|r| ≤ tol·|Aᵀy|``."""

    def __init__(self, A: KroneckerUnion, factors):
        self.A = A
        self.grams = [(w * w, Kronecker([f.gram() for f in fs])) for w, fs in factors]
        self.basis = None
        order = sorted(range(len(factors)), key=lambda g: -factors[g][0] ** 2)
        for a, b in itertools.combinations(order, 2):
            pair = [factors[a], factors[b]]
            try:
                grams = [[f.gram().dense() for f in fs] for _, fs in pair]
                self.basis = TwoProductBasis(grams, [w * w for w, _ in pair])
            except np.linalg.LinAlgError:
                continue
            self.right_t = Kronecker([Dense(V.T) for V in self.basis.V])
            self.right = Kronecker([Dense(V) for V in self.basis.V])
            break

    def _gram(self, p, q, scratch):
        """``q = Σ_g c_g (⊗G_gi) p``, each term in place in ``scratch``."""
        for j, (c, K) in enumerate(self.grams):
            scratch[...] = p
            t = K.apply_overwrite(scratch)
            if j == 0:
                np.multiply(t, c, out=q)
            else:
                t *= c
                q += t
        return q

    def _precondition(self, r, scratch):
        """``M⁻¹ r`` (in ``scratch``'s memory), or ``r`` itself without a preconditioner."""
        if self.basis is None:
            return r
        scratch[...] = r
        z = self.right_t.apply_overwrite(scratch)
        self.basis.divide(z.reshape(-1, 1))
        return self.right.apply_overwrite(z)

    def solve(self, y, tol, maxiter):
        N = self.A.shape[1]
        r = self.A._rmatmat(y.reshape(-1, 1)).reshape(N)  # b = Aᵀy, then the residual
        if not (r.flags.owndata and r.flags.writeable):
            r = r.copy()
        x = np.zeros(N)
        bound = tol * float(np.linalg.norm(r))
        if bound == 0.0:
            return x
        scratch, q = np.empty(N), np.empty(N)
        z = self._precondition(r, scratch)
        p = z.copy()
        rz = float(np.dot(r, z))
        for _ in range(maxiter):
            if float(np.linalg.norm(r)) <= bound:
                break
            q = self._gram(p, q, scratch)
            alpha = rz / float(np.dot(p, q))
            np.multiply(p, alpha, out=scratch)
            x += scratch
            np.multiply(q, alpha, out=scratch)
            r -= scratch
            z = self._precondition(r, scratch)
            rz, old = float(np.dot(r, z)), rz
            p *= rz / old
            p += z
        return x


class TwoProductPinv(Matrix):
    """``A⁺ = (AᵀA)⁻¹Aᵀ`` of a :class:`KroneckerUnion` of two products (module docstring):
    ``x̂ = (⊗V_i) D⁻¹ (⊗V_iᵀ) Σ_g w_g (⊗A_giᵀ) y_g``. ``apply_overwrite`` builds ``x̂`` in ``y``'s
    memory: each block's product in place in its own rows when its factors map ``m_gi ≥ n_i``
    rows to ``n_i`` cells (p-Identity, identity; a block with a Total factor is computed into
    one new N-vector), their weighted sum in one of them, the division by ``D`` a slab at a
    time and ``⊗V_i`` in place. Equal to the dense pseudo-inverse up to float rounding."""

    def __init__(self, A: KroneckerUnion, factors):
        self.shape = (A.shape[1], A.shape[0])
        self._offsets = A._offsets
        grams = [[f.gram().dense() for f in fs] for _, fs in factors]
        self.basis = TwoProductBasis(grams, [w * w for w, _ in factors])
        self.weights = [w for w, _ in factors]
        # ⊗A_giᵀ (m_g rows -> N cells) by the factors' own structured transposes, then the
        # dense ⊗V_iᵀ and ⊗V_i once each on the sum (2 dense passes per attribute in all)
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
        if overwrite:
            u = self.right_t.apply_overwrite(u)
            self.basis.divide(u.reshape(self.shape[0], -1))
            return self.right.apply_overwrite(u)
        u = self.right_t @ u
        self.basis.divide(u.reshape(self.shape[0], -1))
        return self.right @ u

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
        # the sum goes where a block's product was built in place (one with fewer rows than
        # cells, e.g. a Total factor, is computed into a new array)
        into = 0 if np.shares_memory(parts[0], y) else 1
        return self._solve(self._combine(parts, into), True)
