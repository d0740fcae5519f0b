"""The two baselines every table uses: Identity and the Laplace/Gaussian mechanism on W (HDMM §2
and §15; Li, Hay, Rastogi, Miklau & McGregor, PODS 2010, Example 4.8).
User guide: docs/algorithms/baselines.md.
"""

from __future__ import annotations

from ...linalg import Identity, Matrix
from ...privacy import Privacy
from ...strategy import Strategy
from ..base import Selector, register


@register
class IdentitySelector(Selector):
    """A = I_N: noise on every cell; Err = v · tr(WᵀW) (HDMM §15; Li et al. 2010 Ex. 4.8)."""

    name = "identity"
    method = "Identity (A = I)"
    paper = "Li, Hay, Rastogi, Miklau & McGregor, PODS 2010 (the matrix mechanism), Example 4.8"

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        return Strategy(matrix=Identity(workload.shape[1]), selector=self.name)


@register
class LaplaceSelector(Selector):
    """LM: noise on each workload query, no inference; Err = v · m · sens_p(W)² (HDMM §2,
    §15; Li et al. 2010 Example 4.8); the Gaussian mechanism under ApproxDP / ZCDP."""

    name = "laplace"
    method = "LM: the Laplace / Gaussian mechanism on W, no inference"
    paper = (
        "Dwork, McSherry, Nissim & Smith, TCC 2006; "
        "the LM baseline of McKenna et al., PVLDB 2018 (HDMM), §8"
    )

    def _select(self, workload: Matrix, privacy: Privacy, objective: str) -> Strategy:
        return Strategy(matrix=workload, selector=self.name, inference="none")
