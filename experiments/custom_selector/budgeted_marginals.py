"""A user-written selector: marginals measured directly, with the optimal noise budget split.

This is the "prototyping new selectors" example of mmtoolkit (see README.md next to this
file). It lives outside the package and is named in a config as
``selector: "budgeted_marginals:BudgetedMarginals"`` (the config's directory is searched).

The idea (Cormode, Procopiuc, Srivastava, Yaroslavtsev, "Accurate and efficient private
release of datacubes and contingency tables", ICDE 2013, §IV "budgeting"): answer every
marginal ``S`` of a marginal workload with its own noisy measurement, and split the privacy
budget between the marginals optimally instead of uniformly. Measuring marginal ``S``
(``n_S`` cells, workload weight ``c_S``) with strategy weight ``w_S`` makes every cell of it
noisy with variance ``v · sens² / w_S²`` and the strategy ``A = [w_S Q_S]`` has
``sens_p(A) = (Σ_S w_S^p)^{1/p}`` (every record falls in exactly one cell of each
marginal). Answering each marginal from its own measurement, the total error is

    Err(w) = v · sens_p(A)² · Σ_S c_S n_S / w_S²,

minimised (Lagrange; the same computation as the paper's budget split) by

* ``p = 2`` (Gaussian: zCDP, approximate DP):  ``w_S² ∝ sqrt(c_S n_S)``,
  giving ``Err = v (Σ_S sqrt(c_S n_S))²``;
* ``p = 1`` (Laplace: pure DP):  ``w_S ∝ (c_S n_S)^{1/3}``,
  giving ``Err = v (Σ_S (c_S n_S)^{1/3})³``.

The evaluator then scores ``A`` with least-squares inference, which can only improve on
answering each marginal separately (lower marginals are also estimated from the higher
ones): its error is at most the closed form above (checked in the tests).
"""

from __future__ import annotations

from mmtoolkit.linalg import Identity, Marginals, Matrix, Ones, kron_terms
from mmtoolkit.privacy import PureDP
from mmtoolkit.selectors import NotApplicableError, Selector
from mmtoolkit.strategy import Strategy


class BudgetedMarginals(Selector):
    """Every workload marginal measured once, weights = the optimal budget split.

    Parameters
    ----------
    split : "optimal" (Cormode et al. §IV, the default) or "uniform" (all weights 1, the
        naive split the paper improves on; kept for comparison).
    """

    name = "budgeted_marginals"
    method = "every workload marginal measured once, optimal budget split"
    paper = "Cormode, Procopiuc, Srivastava & Yaroslavtsev, ICDE 2013, §IV (budgeting)"

    def __init__(self, split: str = "optimal"):
        if split not in ("optimal", "uniform"):
            raise ValueError(f"split must be 'optimal' or 'uniform', got {split!r}")
        self.params = {"split": split}

    def _select(self, workload: Matrix, privacy, objective) -> Strategy:
        sizes, weights = marginal_terms(workload)
        p = 1 if isinstance(privacy, PureDP) else 2
        cells = {key: _cells(sizes, key) for key in weights}
        if self.params["split"] == "uniform":
            theta = {key: 1.0 for key in weights}
        elif p == 2:
            theta = {key: (weights[key] * cells[key]) ** 0.25 for key in weights}
        else:
            theta = {key: (weights[key] * cells[key]) ** (1 / 3) for key in weights}
        top = max(theta.values())
        theta = {k: v / top for k, v in theta.items()}  # scale-free: largest weight 1
        meta = {
            "marginals": [_attrs(k, len(sizes)) for k in sorted(theta)],
            "weights": [theta[k] for k in sorted(theta)],
            "norm": p,
        }
        return Strategy(matrix=Marginals(sizes, theta), selector=self.name, metadata=meta)


def marginal_terms(workload: Matrix) -> tuple[list[int], dict[int, float]]:
    """``(sizes, {bitmask: c_S})`` of a union of (weighted) marginals; otherwise
    ``NotApplicableError`` (the selector's refusal: ``compare`` lists it as not applicable,
    ``check_selector`` as refused; a plain ValueError would read as a bug).

    ``c_S`` is the squared workload weight of marginal ``S`` (summed if it repeats); bit
    ``i`` of the mask is attribute ``i`` (the convention of ``mmtoolkit.linalg.Marginals``).
    """
    sizes = None
    weights: dict[int, float] = {}
    for c, factors in kron_terms(workload):
        key = 0
        fsizes = []
        for i, f in enumerate(factors):
            n = f.shape[1]
            fsizes.append(n)
            if isinstance(f, Identity):
                key |= 1 << i
            elif not (isinstance(f, Ones) and f.shape[0] == 1):
                raise NotApplicableError(
                    "budgeted_marginals needs a union of marginals (Identity/Total factors), "
                    f"got a {type(f).__name__} factor"
                )
        if sizes is None:
            sizes = fsizes
        elif fsizes != sizes:
            raise NotApplicableError("the workload's terms have different attribute sizes")
        weights[key] = weights.get(key, 0.0) + float(c)
    if not weights:
        raise NotApplicableError("empty workload")
    return sizes, weights


def _cells(sizes, key) -> int:
    out = 1
    for i, n in enumerate(sizes):
        if key >> i & 1:
            out *= n
    return out


def _attrs(key: int, d: int) -> list[int]:
    return [i for i in range(d) if key >> i & 1]
