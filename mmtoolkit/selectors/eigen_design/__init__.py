"""Eigen-Design (Li & Miklau, PVLDB 2012) and the selectors that share its eigen-queries of
``WᵀW``: the Matrix Mechanism's SDP (Li, Hay, Rastogi, Miklau & McGregor, PODS 2010, §5) and
the singular-value-bound strategy (Li et al. 2010, Thm 5.25), registered on import as
``eigen_design``, ``mm_sdp`` and ``svd_strategy``.
User guide: docs/algorithms/eigen-design.md.
"""

from . import mm_sdp, selector, svd  # noqa: F401  (registers the selectors)
