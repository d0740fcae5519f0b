"""Marginals route: any strategy whose Gram is a MarginalsGram, in the spectral form of the
marginals algebra (HDMM §6.3, App. A.4): (AᵀA)⁺ is a scalar on each residual subspace."""

from __future__ import annotations

import math

import numpy as np

from ..linalg import (
    Identity,
    Kronecker,
    MarginalsGram,
    Matrix,
    Ones,
    as_matrix,
    check_dense_size,
    kron_terms,
    projected_traces,
)
from ._common import SUPPORT_RTOL, UnsupportedWorkloadError, _as_vector, _common_sizes


# =================================================================== marginals algebra
def _is_total(f: Matrix) -> bool:
    return isinstance(f, Ones) and f.shape[0] == 1


def _marginal_key(factors) -> int | None:
    """The bitmask of a Kronecker product of Identity / Total factors, else None."""
    key = 0
    for i, f in enumerate(factors):
        if isinstance(f, Identity):
            key |= 1 << i
        elif not _is_total(f):
            return None
    return key


def _row_split(f: Matrix) -> tuple[np.ndarray, np.ndarray]:
    """Per row w of f: (||w − mean||², ||mean part||²) = (||w||² − (w·1)²/n, (w·1)²/n)."""
    n = f.shape[1]
    sums = f.matvec(np.ones(n))
    s = sums**2 / n
    t = np.clip(_as_vector(f.rownorm_p(2), f.shape[0]) - s, 0.0, None)
    return t, s


def _subset_products(a, b) -> np.ndarray:
    """The vector over B ⊆ attributes (bit i ↔ attribute i) of Π_{i∈B} a_i · Π_{i∉B} b_i."""
    v = np.ones(1)
    for ai, bi in zip(a, b):
        v = np.concatenate([v * bi, v * ai])
    return v


def _bit_reversed_order(d: int) -> np.ndarray:
    """Index map: C-order position (attribute 0 most significant) -> bitmask B."""
    idx = np.arange(1 << d)
    out = np.zeros_like(idx)
    for i in range(d):
        out |= ((idx >> (d - 1 - i)) & 1) << i
    return out


class _MarginalsRoute:
    """Union of Kronecker products × a strategy whose ``gram()`` is a MarginalsGram 𝔾 (e.g.
    weighted marginals 𝕄(θ), 𝔾 = 𝔾(θ²)): 𝔾⁺ is the scalar
    μ_B⁺ on each residual subspace S_B, so tr(WᵀW 𝔾⁺) = Σ_B μ_B⁺ tr(P_B WᵀW) and a query
    w = ⊗w_i has variance Σ_B μ_B⁺ Π_{i∈B} ||w_i − mean||² Π_{i∉B} ||mean part of w_i||²."""

    @classmethod
    def build(cls, W: Matrix, gram: MarginalsGram):
        terms = kron_terms(W)
        if _common_sizes(terms) != list(gram.sizes):
            return None
        return cls(terms, gram)

    def __init__(self, terms, gram: MarginalsGram):
        self.terms = terms
        self.sizes = list(gram.sizes)
        self.inv = gram.pinv_spectrum()
        self.dead = (self.inv == 0.0) & (gram.dims() > 0)
        self._splits: dict[int, tuple] = {}

    def _split(self, f: Matrix):
        if id(f) not in self._splits:
            self._splits[id(f)] = (f, _row_split(f))
        return self._splits[id(f)][1]

    def check_support(self) -> None:
        if not self.dead.any():
            return
        for c, factors in self.terms:
            if c == 0.0:
                continue
            splits = [self._split(f) for f in factors]
            fracs = []
            for t, s in splits:
                q = t + s
                live = q > 0
                if not live.any():
                    break  # a zero factor: the term is zero
                fracs.append(t[live] / q[live])
            else:
                # max over the term's rows of the fraction of ||w||² in a dead S_B factorises:
                # Π_{i∈B} max τ_i · Π_{i∉B} max (1 − τ_i)
                worst = _subset_products([f.max() for f in fracs], [1 - f.min() for f in fracs])
                if worst[self.dead].max() > SUPPORT_RTOL:
                    raise UnsupportedWorkloadError(
                        "the marginals strategy does not support the workload: a query has "
                        "weight on a residual subspace that no measured marginal covers"
                    )

    def trace(self) -> float:
        total = np.zeros(len(self.inv))
        coeffs = np.zeros(len(self.inv))
        for c, factors in self.terms:
            key = _marginal_key(factors)
            if key is not None:
                coeffs[key] += c
                continue
            splits = [self._split(f) for f in factors]
            traces = [float(np.sum(t + s)) for t, s in splits]
            sums = [float(np.sum(s)) * f.shape[1] for (t, s), f in zip(splits, factors)]
            total += c * projected_traces(self.sizes, traces, sums)
        if coeffs.any():  # Σ_a c_a tr(P_B ℂ(a)) = dim_B · μ_B of Σ_a c_a ℂ(a)
            gram = MarginalsGram(self.sizes, coeffs)
            total += gram.dims() * gram.spectrum()
        return float(np.dot(self.inv, total))

    def _term_profile(self, c, factors, unique: bool) -> np.ndarray:
        d = len(self.sizes)
        mu_c = self.inv[_bit_reversed_order(d)]
        mats = []
        for f in factors:
            t, s = self._split(f)
            M = np.column_stack([s, t])
            mats.append(np.unique(M, axis=0) if unique else M)
        rows = math.prod(M.shape[0] for M in mats)
        check_dense_size(rows, 1, "a per-query vector")
        return c * (Kronecker([as_matrix(M) for M in mats]) @ mu_c)

    def profile(self) -> np.ndarray:
        return np.concatenate([self._term_profile(c, f, unique=False) for c, f in self.terms])

    def max_profile(self) -> float:
        return max(float(np.max(self._term_profile(c, f, unique=True))) for c, f in self.terms)
