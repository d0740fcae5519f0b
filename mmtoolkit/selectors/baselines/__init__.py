"""The comparison baselines of the matrix-mechanism papers (HDMM §8 and digest §15; Li &
Miklau 2012 §5; Li et al. 2010 Example 4.8), one module per family: Identity and LM
(:mod:`.identity`), H_b / HB / Quadtree (:mod:`.hierarchical`), Privelet (:mod:`.privelet`),
GreedyH (:mod:`.greedy_h`) and LRM (:mod:`.lrm`). Importing this package registers them.
"""

from . import greedy_h, hierarchical, identity, lrm, privelet  # noqa: F401  (registers the selectors)
