"""The comparison baselines of the matrix-mechanism papers (HDMM §8; Li & Miklau 2012 §5; Li et
al. 2010 Example 4.8), one module per family; importing this package registers them.
User guide: docs/algorithms/baselines.md.
"""

from . import greedy_h, hierarchical, identity, lrm, privelet  # noqa: F401  (registers the selectors)
