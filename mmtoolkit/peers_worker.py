"""One run of a data-dependent peer (AIM or MST) through OpenDP, in its own interpreter.

``python peers_worker.py IN.npz OUT.npz`` reads integer-coded records and what to run from
``IN.npz`` (written by :func:`mmtoolkit.compare_data.run_peer`), runs OpenDP's
``opendp.extras.mbi.AIM`` or ``MST`` (``dp.Context.compositor(...).contingency_table``, the
library's public API) under ρ-zCDP with one record per individual, and writes the fitted
model's marginal on each requested clique to ``OUT.npz``. It imports numpy, polars and
OpenDP only — not mmtoolkit — because OpenDP's ``mbi`` extra pins an ``mbi`` release that
differs from the one the ``pgm`` extra needs, so the peers may live in another environment
(``MMTOOLKIT_PEERS_PYTHON``; docs/guide/compare.md, "Compare on your data").

The noise of these runs is drawn by OpenDP's own cryptographic generator, which takes no
seed: a peer's trial is not reproducible from the comparison's seed.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

#: Runs of a peer whose OpenDP budget split fails by a rounding error (see :func:`run`).
RETRIES = 4


def probe() -> None:
    """Import what a run needs (exit code 0 when the peers' extra is usable here)."""
    import jax  # noqa: F401
    import mbi.estimation  # noqa: F401
    import numpy  # noqa: F401
    import opendp.extras.mbi  # noqa: F401
    import polars  # noqa: F401
    import pyarrow  # noqa: F401

    if not hasattr(mbi.estimation, "mirror_descent"):
        raise ImportError("OpenDP's mbi extra needs mbi 1.x (mbi.estimation.mirror_descent)")


def run(inp: str, out: str) -> None:
    """Run the peer described by ``inp`` and write the marginals to ``out``."""
    import jax

    jax.config.update("jax_enable_x64", True)  # mbi stalls in float32 on ~10^5 records
    import numpy as np
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    with np.load(inp, allow_pickle=False) as f:
        codes = f["codes"]
        meta = json.loads(str(f["meta"]))
    names, sizes = meta["names"], meta["sizes"]
    cliques = [tuple(c) for c in meta["cliques"]]
    frame = pl.DataFrame({n: codes[:, i] for i, n in enumerate(names)})
    keys = {n: list(range(s)) for n, s in zip(names, sizes)}
    algorithm: Any
    if meta["method"] == "aim":
        algorithm = dp.mbi.AIM(queries=[dp.mbi.Count(c) for c in cliques])
    else:
        algorithm = dp.mbi.MST()
    start = time.perf_counter()
    rho, attempts = float(meta["rho"]), 0
    while True:
        attempts += 1
        context = dp.Context.compositor(
            data=frame.lazy(),
            privacy_unit=dp.unit_of(contributions=1),
            privacy_loss=dp.loss_of(rho=rho),
            split_evenly_over=1,
        )
        try:
            table = context.query().contingency_table(keys=keys, algorithm=algorithm).release()
            break
        except dp.OpenDPException as exc:
            # OpenDP 0.16 splits a budget into parts whose floating-point sum can exceed it
            # by an ulp ("insufficient budget for query: 0.000748...258 > 0.000748...252",
            # MST at some ρ): run again at a ρ a little smaller (never larger); the failed
            # run's outputs are discarded, never used
            if "insufficient budget" not in str(exc) or attempts == RETRIES:
                raise
            rho *= 1.0 - 1e-9 * 100 ** (attempts - 1)
    arrays: dict[str, Any] = {}
    for j, clique in enumerate(cliques):
        values = np.asarray(table.project(clique), dtype=float)
        # OpenDP adds a null category to each attribute's keys: take the declared codes
        where = [
            [table.keys[n].to_list().index(v) for v in range(sizes[names.index(n)])]
            for n in clique
        ]
        arrays[f"m{j}"] = values[np.ix_(*where)] if clique else values
    arrays["seconds"] = np.array(time.perf_counter() - start)
    arrays["rho"], arrays["attempts"] = np.array(rho), np.array(attempts)
    np.savez(out, **arrays)


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        probe()
    else:
        run(sys.argv[1], sys.argv[2])
