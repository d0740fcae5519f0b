"""Li, Hay, Rastogi, Miklau, McGregor 2010 (the matrix mechanism): the running examples on
n = 4 and App. F's closed forms, recomputed with mmtoolkit.

* Example 2: L1 sensitivities ||I_4||₁ = 1, ||H_4||₁ = ||Y_4||₁ = 3.
* Table 1 (App. F, Thm F.45): eigenvalues of H_nᵀH_n (2n−1, then s−1 per level) and of
  Y_nᵀY_n (n, n, then s per level), n = 4 and 8.
* App. F.1: profile-equivalent strategies of lower L1 sensitivity — the paper's hand-made
  rotations (H: sqrt(2 − 1/n) + Σ_j sqrt(1 − 2^−j); Y: log₂n − 1 + √2) beside ours from
  Program 5.3 (``mm_sdp.min_sensitivity_rotation``), and the L2 floor sqrt(log₂n + 1).

Run: PYTHONPATH=. python experiments/matrix_mechanism/running_examples.py
Writes results/matrix_mechanism/running_examples.md.
"""

import math
import os
from pathlib import Path

import numpy as np

from mmtoolkit import selectors
from mmtoolkit.linalg import Haar
from mmtoolkit.selectors.eigen_design.mm_sdp import min_sensitivity_rotation
from mmtoolkit.workloads import all_range

OUT = Path(__file__).resolve().parents[2] / "results" / "matrix_mechanism" / "running_examples.md"


def hierarchical(n):
    """H_n: every node of the complete binary tree over n cells (2n − 1 rows)."""
    return selectors.get("hierarchical", branching=2).select(all_range(n), _l1()).matrix.dense()


def _l1():
    from mmtoolkit.privacy import PureDP

    return PureDP(1.0)


def sens1(A):
    return float(np.abs(A).sum(axis=0).max())


def main():
    lines = ["| quantity | ours | paper | agree |", "|---|---:|---:|:---:|"]

    def row(name, ours, paper, tol=1e-4):
        ok = "✓" if paper is not None and abs(ours - paper) <= tol * max(1, abs(paper)) else ""
        lines.append(f"| {name} | {ours:.4f} | {'' if paper is None else f'{paper:.4f}'} | {ok} |")

    I4, H4, Y4 = np.eye(4), hierarchical(4), Haar(4).dense()
    assert H4.shape == (7, 4)
    for name, A in (("I_4", I4), ("H_4", H4), ("Y_4", Y4)):
        row(f"Example 2: ||{name}||₁", sens1(A), {"I_4": 1, "H_4": 3, "Y_4": 3}[name])
    for n in (4, 8):
        k = int(math.log2(n))
        levels = [(2**j, n // 2**j) for j in range(k)]  # (count, support size s)
        paper_h = sorted([2 * n - 1] + sum([[s - 1] * c for c, s in levels], []), reverse=True)
        paper_y = sorted([n] + sum([[s] * c for c, s in levels], []), reverse=True)
        H, Y = hierarchical(n), Haar(n).dense()
        ours_h = np.sort(np.linalg.eigvalsh(H.T @ H))[::-1]
        ours_y = np.sort(np.linalg.eigvalsh(Y.T @ Y))[::-1]
        for i, (a, b) in enumerate(zip(ours_h, paper_h)):
            row(f"Table 1: eigenvalue {i + 1} of H_{n}ᵀH_{n}", a, b)
        for i, (a, b) in enumerate(zip(ours_y, paper_y)):
            row(f"Table 1: eigenvalue {i + 1} of Y_{n}ᵀY_{n}", a, b)
    for n in (4, 8):
        k = int(math.log2(n))
        H, Y = hierarchical(n), Haar(n).dense()
        paper_h = math.sqrt(2 - 1 / n) + sum(math.sqrt(1 - 2.0**-j) for j in range(1, k + 1))
        paper_y = k - 1 + math.sqrt(2)
        bh, _ = min_sensitivity_rotation(np.linalg.cholesky(H.T @ H).T)
        by, _ = min_sensitivity_rotation(Y)
        assert np.allclose(bh.T @ bh, H.T @ H) and np.allclose(by.T @ by, Y.T @ Y)
        # the paper's constructions: D_H Q_H (normalised Haar rows × sqrt of H's eigenvalues);
        # for Y, D_Y Q_Y with the total and top detail replaced by the two half indicators
        Qh = Y / np.linalg.norm(Y, axis=1)[:, None]
        lam_h = np.einsum("ij,jk,ik->i", Qh, H.T @ H, Qh)
        DQ_h = np.sqrt(lam_h)[:, None] * Qh
        halves = np.kron(np.eye(2), np.ones(n // 2)) / math.sqrt(n / 2)
        DQ_y = np.vstack([math.sqrt(n) * halves, Y[2:]])  # detail rows: sqrt(s)·y/||y|| = y
        assert np.allclose(DQ_h.T @ DQ_h, H.T @ H) and np.allclose(DQ_y.T @ DQ_y, Y.T @ Y)
        row(f"App. F.1: ||H_{n}||₁ = {k + 1}; paper's rotation D_H Q_H", sens1(DQ_h), paper_h)
        row(f"App. F.1: ours, Program 5.3 on H_{n} (profile kept)", sens1(bh), None)
        row(
            f"App. F.1: ||Y_{n}||₁ = {k + 1}; paper's rotation (half indicators)",
            sens1(DQ_y),
            paper_y,
        )
        row(f"App. F.1: ours, Program 5.3 on Y_{n} (profile kept)", sens1(by), None)
        row(
            f"L2 floor sqrt(log₂{n} + 1) for any profile-equivalent strategy",
            math.sqrt(k + 1),
            None,
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        "# Matrix mechanism running examples (Li et al. 2010, Examples 2, Table 1, App. F.1)\n\n"
        "Source: `experiments/matrix_mechanism/running_examples.py`. Paper values: Example 2 "
        "and the closed forms of Table 1 / App. F.1 (digest matrix_mechanism.md §5). Our "
        "Program 5.3 rotations must lie between the L2 floor and the paper's hand-made "
        f"rotations. Load average when run: {os.getloadavg()[0]:.1f}.\n\n" + "\n".join(lines) + "\n"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
