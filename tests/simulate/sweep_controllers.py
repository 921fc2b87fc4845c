"""The full sweep behind ``make sweep`` (about 5 minutes; not collected by ``make test``, whose
suite holds representative points in ``test_sim_controllers_quality.py``): at every point of
Figs 3a, 3b and 4 on seeds 1-8, 11 and 23, adaptive is at least 1.0 and within 2 % of the
better of distribution and fifo, and the oracle is at least every policy."""

from __future__ import annotations

import pytest
from test_sim_controllers_quality import adaptive_shortfall, oracle_shortfall

from juggle.simulate.router.experiments import run_edge_router


@pytest.mark.slow
@pytest.mark.parametrize("figure", ["fig3a", "fig3b", "fig4"])
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6, 7, 8, 11, 23])
def test_full_sweep_every_point(figure: str, seed: int) -> None:
    doc = run_edge_router(figure, seed=seed)
    speedup = doc["speedup"]
    for i in range(len(doc["x"])):
        at = {name: values[i] for name, values in speedup.items()}
        assert adaptive_shortfall(at) <= 0, (figure, seed, doc["x"][i], at)
        assert oracle_shortfall(at) <= 0, (figure, seed, doc["x"][i], at)
