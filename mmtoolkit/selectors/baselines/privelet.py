"""Privelet (Xiao, Wang & Gehrke, ICDE 2010 / TKDE 2011; HDMM §8, Eigen-Design §5, digest
§16.13): the unnormalised ±1 Haar wavelet strategy, padded to a power of two with the real
columns kept (:class:`PriveletHaar`, whose Gram is an exact :class:`~mmtoolkit.linalg.TreeGram`),
and the ``privelet`` selector.
User guide: docs/algorithms/baselines.md.
"""

from __future__ import annotations

import math

import numpy as np

from ...checks import check_bool
from ...linalg import MAX_DENSE_ENTRIES, Haar, Matrix, Product, TooLargeError, check_p
from ...linalg.kronecker import group
from ...linalg.tree import Tree, TreeGram, interval_tree
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import NotApplicableError, Selector, register
from .sizes import check_dims, workload_sizes

__all__ = ["PriveletHaar", "PriveletSelector", "haar_tree"]


def haar_tree(n: int, padded: int) -> Tree:
    """The tree whose Gram is ``H_lᵀ H_l`` on the first ``n`` cells: dyadic levels of
    ``[0, l)`` kept on ``[0, n)``, weights ``0, 1, …, 1, √2`` (guide page)."""
    L = padded.bit_length() - 1
    if L == 0:
        return Tree(n, [np.array([0])], [1.0])
    levels = interval_tree(n, 2, split="pad", height=L)
    weights = [0.0] + [1.0] * (L - 1) + [math.sqrt(2.0)]
    return Tree(n, levels, weights)


class PriveletHaar(Matrix):
    """``H_l[:, :n]``: the unnormalised Haar matrix of the padded size ``l = 2^⌈log2 n⌉``, real
    columns kept; ``gram()`` is a :class:`~mmtoolkit.linalg.TreeGram`."""

    def __init__(self, n: int, padded: int | None = None):
        n = int(n)
        if n < 1:
            raise ValueError(f"PriveletHaar needs n >= 1, got {n}")
        l = 1 << (n - 1).bit_length() if padded is None else int(padded)
        if l < n or l & (l - 1):
            raise ValueError(f"padded size must be a power of two >= n = {n}, got {l}")
        self.n, self.padded = n, l
        self.levels = l.bit_length() - 1
        self.H = Haar(l)
        self.shape = (l, n)

    def _matmat(self, X):
        if self.padded == self.n:
            return self.H._matmat(X)
        Z = np.zeros((self.padded, X.shape[1]))
        Z[: self.n] = X
        return self.H._matmat(Z)

    def _rmatmat(self, Y):
        return self.H._rmatmat(Y)[: self.n]

    def gram(self):
        return TreeGram(haar_tree(self.n, self.padded))

    def pinv(self):
        return Product(self.gram().pinv(), self.T)

    def pinv_operator(self):
        return self.pinv()  # exact, O(n log n): never least squares for a wavelet release

    def colnorm_p(self, p):
        check_p(p)  # every column has one ±1 per level and one in the total row
        return float(self.levels + 1)

    def rownorm_p(self, p):
        check_p(p)  # entries are 0, ±1: L1 = squared L2 = the real cells of the row's support
        out = [np.array([float(self.n)])]
        s = 1
        while s < self.padded:
            width = self.padded // s
            starts = np.arange(s) * width
            out.append(np.clip(self.n - starts, 0, width).astype(float))
            s *= 2
        return np.concatenate(out)

    def __repr__(self):
        return f"PriveletHaar(n={self.n}, padded={self.padded})"


@register
class PriveletSelector(Selector):
    """Privelet: the Haar wavelet strategy on each attribute, Kronecker across attributes (Xiao
    et al. 2010; HDMM §8, Eigen-Design §5). Parameters: ``pad``, ``dims``."""

    name = "privelet"
    method = "Privelet (Haar wavelet)"
    paper = "Xiao, Wang & Gehrke, ICDE 2010"

    def __init__(self, pad=True, dims=None):
        self.params = {"pad": check_bool(pad, "pad"), "dims": check_dims(dims)}

    def _select(self, workload, privacy: Privacy, objective: str) -> Strategy:
        sizes = workload_sizes(workload, self.params["dims"])
        factors: list[Matrix] = []
        padded = []
        for n in sizes:
            l = 1 << (n - 1).bit_length()
            if l != n and not self.params["pad"]:
                raise NotApplicableError(
                    f"Privelet needs attribute sizes that are powers of two and pad=False "
                    f"forbids padding; attribute size {n} is not (it would pad to {l})"
                )
            if l > MAX_DENSE_ENTRIES:
                raise TooLargeError(
                    f"Privelet cannot pad an attribute of size {n} to {l} cells: the wavelet "
                    f"transform works on an explicit vector (limit {MAX_DENSE_ENTRIES:.3g}); "
                    "give dims= to split the domain into attributes"
                )
            factors.append(PriveletHaar(n, l))
            padded.append(l)
        meta = {"sizes": sizes, "padded": padded}
        return Strategy(matrix=group(factors), selector=self.name, metadata=meta)
