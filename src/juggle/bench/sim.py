"""Simulator speed: simulated edge-router packets per wall-clock second, on one core.

One run of the Fig 4 workload (20 ms stability, 4 spikes per period) under the ``adaptive``
controller, the most expensive built-in policy: trace generation is excluded, the SimPy
event loop, the pipeline steps and every controller decision are included. The figure is
measured (wall clock) for a modeled system.

Why it is fast: SimPy carries only the events that change the model (control ticks every
200 µs of virtual time, reconfiguration start and end); between them the pipeline advances
in 50 µs steps in which each unit pool serves a fluid of whole packets, and the processors'
share is found by binary search in prefix sums of per-packet cycles over the trace. The cost
of a step does not depend on how many packets it moves (see :mod:`juggle.simulate.units`).
"""

from __future__ import annotations

import time

from juggle.core.controllers.registry import default_registry
from juggle.simulate.edge_router import FIGURES, figure_trace, router_options, run_router
from juggle.simulate.router import load_router_model

__all__ = ["run"]


def run(quick: bool = False) -> dict[str, float]:
    """``sim_packets_per_s`` (best of a few runs) and the run's size; ``quick``: shorter."""
    model = load_router_model()
    registry = default_registry(entry_points=False)
    seconds = 0.2 if quick else 0.6
    trace = figure_trace(model, FIGURES["fig4"], 4, 1, seconds / FIGURES["fig4"].duration_s(4))
    best = 0.0
    for _ in range(1 if quick else 3):
        controller = registry.create("adaptive", **router_options("adaptive", model, trace))
        start = time.perf_counter()
        run_router(model, trace, controller)
        best = max(best, trace.packets / (time.perf_counter() - start))
    return {
        "sim_packets_per_s": round(best, 1),
        "sim_packets": float(trace.packets),
        "sim_virtual_s": round(trace.duration_us * 1e-6, 3),
    }
