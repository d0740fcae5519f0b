"""The comparison baselines of the matrix-mechanism papers (HDMM §8 and digest §15; Li &
Miklau 2012 §5; Li et al. 2010 Example 4.8), one module per baseline family:

* :mod:`.identity` — Identity and LM (the Laplace/Gaussian mechanism on W),
  registered as ``identity`` and ``laplace``;
* :mod:`.hierarchical` — H_b trees (Hay et al. 2010), HB (Qardaji et al. 2013) and
  Quadtree (Cormode et al. 2012): ``hierarchical``, ``hb``, ``quadtree``;
* :mod:`.privelet` — the Haar wavelet strategy (Xiao et al. 2010): ``privelet``;
* :mod:`.greedy_h` — DAWA's GreedyH tree weighting (Li et al. 2014): ``greedy_h``;
* :mod:`.lrm` — the Low-Rank Mechanism (Yuan et al. 2012): ``lrm``;
* :mod:`.sizes` — the per-attribute sizes the tree and wavelet baselines are built on.

Importing this package registers every baseline selector.
"""

from . import greedy_h, hierarchical, identity, lrm, privelet  # noqa: F401  (registers the selectors)
