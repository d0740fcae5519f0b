"""Li & Miklau 2012, Example 4 / Figure 2: the Fig. 1 workload (8 cells) answered by the
workload itself, identity, wavelet, Eigen-Design, the (ε,δ) optimum (mm_sdp, Program 5.2)
and the lower bound. The paper's absolute numbers use its own calibration (digest §10.3:
none of the natural readings of Prop. 4 reproduce them), so we compare RMSE ratios to the
identity strategy. Run: python experiments/eigen_design/example4.py
"""

import math

from _table import write_table

from mmtoolkit import evaluate, selectors, workloads
from mmtoolkit.linalg import Dense, Haar, Identity
from mmtoolkit.privacy import ApproxDP

FIG1 = workloads.eigen_design_figure1().dense()  # Li & Miklau 2012, Fig. 1(b)
SPEC = {"kind": "approx", "epsilon": 0.5, "delta": 1.0e-4, "calibration": "eigen_design"}


def main():
    pr = ApproxDP(0.5, 1e-4, calibration="eigen_design")
    W = Dense(FIG1)
    rmse = {
        "Workload (Gaussian on W)": evaluate.rmse(W, selectors.get("laplace").select(W, pr), pr),
        "Identity": evaluate.rmse(W, Identity(8), pr),
        "Wavelet": evaluate.rmse(W, Haar(8), pr),
        "Eigen-Design": evaluate.rmse(W, selectors.get("eigen_design").select(W, pr), pr),
        "mm_sdp (optimum)": evaluate.rmse(W, selectors.get("mm_sdp").select(W, pr), pr),
        "SVD strategy": evaluate.rmse(W, selectors.get("svd_strategy").select(W, pr), pr),
        "Lower bound": evaluate.svd_bound_rmse(W, pr),
    }
    paper = {
        "Workload (Gaussian on W)": 47.78,
        "Identity": 45.36,
        "Wavelet": 34.62,
        "Eigen-Design": 29.79,
        "Lower bound": 29.18,
    }
    cols = ["ratio to Identity", "RMSE"]
    rows = []
    for name, v in rmse.items():
        ours = {"ratio to Identity": v / rmse["Identity"], "RMSE": v}
        pap = {}
        notes = {}
        if name in paper:
            pap["ratio to Identity"] = paper[name] / paper["Identity"]
            pap["RMSE"] = paper[name]
            factor = math.sqrt(57.15 * 8 / pr.noise_variance())
            notes["RMSE"] = (
                "absolute scale differs: the paper's numbers match sqrt(K·units) with "
                f"K ≈ 57.1, ours use P(ε,δ)·units/m (digest §10.3); ours·{factor:.4f} "
                "is the paper's scale"
            )
        if name == "Eigen-Design":
            notes["ratio to Identity"] = (
                "paper 29.79 vs ours 29.74 on its scale: the paper's strategy keeps weighted "
                "null-space rows (Fig. 2 fragments), we drop zero eigenvalues (§4.1)"
            )
        rows.append((name, ours, pap, notes))
    write_table(
        "example4",
        "Example 4 / Fig. 2 — error on the Fig. 1 workload (8 cells), ε = 0.5, δ = 1e-4",
        "Li & Miklau 2012, Example 4 and Fig. 2",
        "RMSE (P(ε,δ) = 2 ln(2/δ)/ε², 1/m) and its ratio to the identity strategy",
        SPEC,
        {"rel": 0.005},
        cols,
        rows,
        notes="mm_sdp (Program 5.2 of Li et al. 2010) and the SVD strategy have no printed value.",
    )
    for name, v in rmse.items():
        print(f"{name:28s} {v:9.4f}  ratio {v / rmse['Identity']:.4f}")


if __name__ == "__main__":
    main()
