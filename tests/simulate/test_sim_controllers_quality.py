"""Controllers that deserve their names, on the edge-router figures (issue 12, item 5).

* ``adaptive`` is at least the static system (speedup 1.0) and within 2 % of the better of
  the paper's two managers (max(distribution, fifo) - 0.02) at every point;
* ``oracle`` is at least as fast as every policy it is shown with (static included).

These are the training seeds adaptive was tuned on (1-8, 11, 23; the split is declared in
``controller_seeds.py``, the held-out seeds are checked by ``test_sim_controllers_heldout.py``).
``make sweep`` checks every point of Figs 3a, 3b and 4 on them. The default suite (~20 s)
checks the points where the old controllers failed, with the same code path
(:func:`figure_point`): Fig 3b / 5 ms on seeds 1-8 for adaptive, Fig 3a / 5 ms on seeds 2, 4,
6 for the oracle, Fig 4 / 8 spikes on seed 3 for both, and one point each of seeds 11 and 23.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from juggle.core.controllers import AdaptiveController, OracleController
from juggle.core.controllers.adaptive import ReconfigurationPlanner
from juggle.core.controllers.base import RegionStats, ServiceStats, StatsSnapshot
from juggle.core.controllers.plugins import default_registry
from juggle.simulate.router.experiments import (
    FIGURES,
    FigurePoint,
    Recorder,
    figure_point,
    figure_trace,
    router_options,
    run_oracle,
    run_router,
)
from juggle.simulate.router.model import load_router_model

MARGIN = 0.02


def adaptive_shortfall(speedup: Mapping[str, float]) -> float:
    """How far adaptive is below what it must reach (<= 0: it passes)."""
    need = max(1.0, speedup["distribution"] - MARGIN, speedup["fifo"] - MARGIN)
    return need - speedup["adaptive"]


def oracle_shortfall(speedup: Mapping[str, float]) -> float:
    """How far the oracle is below the best other policy or static (<= 0: it passes)."""
    others = [v for name, v in speedup.items() if name != "oracle"]
    return max([1.0, *others]) - speedup["oracle"]


def check_point(point: FigurePoint, *, oracle: bool = True) -> None:
    assert adaptive_shortfall(point.speedup) <= 0, point
    if oracle:
        assert oracle_shortfall(point.speedup) <= 0, point


# -- the points that failed before --------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6, 7, 8])
def test_adaptive_at_fig3b_5ms_beats_static_and_stays_near_the_better_manager(seed: int) -> None:
    # Before: 0.984 (seed 3, below static) and 3.6 % under fifo (seed 8).
    point = figure_point("fig3b", 0, seed=seed, policies=["distribution", "fifo", "adaptive"])
    check_point(point, oracle=False)


@pytest.mark.parametrize(("figure", "index", "seed"), [("fig3b", 0, 11), ("fig4", 6, 23)])
def test_adaptive_holds_on_training_seeds_11_and_23(figure: str, index: int, seed: int) -> None:
    # Before: 0.997 (seed 11) and 4.0 % under fifo (seed 23, Fig 4 with 7 spikes); tuned on since.
    point = figure_point(figure, index, seed=seed, policies=["distribution", "fifo", "adaptive"])
    check_point(point, oracle=False)


@pytest.mark.parametrize("seed", [2, 4, 6])
def test_oracle_at_fig3a_5ms_bounds_every_policy(seed: int) -> None:
    # Before: the oracle was 0.1-1.3 % below distribution here (seed 4: 1.3 %).
    point = figure_point("fig3a", 0, seed=seed)
    check_point(point)
    assert point.oracle_plan is not None and point.oracle_plan.startswith("plan/")


def test_fig4_with_eight_spikes_both_hold() -> None:
    # Before (seed 3): adaptive 1.6 % under fifo, the oracle 0.2 % under fifo.
    check_point(figure_point("fig4", 7, seed=3))


# -- how the oracle keeps its bound -------------------------------------------------------------


def test_a_recorded_timeline_replayed_by_the_oracle_reproduces_the_run() -> None:
    model = load_router_model()
    trace = figure_trace(model, FIGURES["fig4"], 8, 5, scale=0.1)
    registry = default_registry()
    recorder = Recorder(registry.create("fifo", **router_options("fifo", model, trace)))
    original = run_router(model, trace, recorder)
    assert original.reconfigurations > 0 and recorder.timeline()
    replay = run_router(model, trace, OracleController(timeline=recorder.timeline()))
    assert replay.makespan_us == original.makespan_us
    assert replay.switches == original.switches


def test_the_oracle_replays_a_faster_rival_and_reruns_it() -> None:
    model = load_router_model()
    trace = figure_trace(model, FIGURES["fig4"], 8, 5, scale=0.1)
    registry = default_registry()
    recorder = Recorder(registry.create("fifo", **router_options("fifo", model, trace)))
    fifo = run_router(model, trace, recorder)
    own, plan = run_oracle(model, trace, {}, registry)
    assert plan.startswith("plan/")
    # A rival claiming an impossible time: the oracle takes its timeline, reruns it, and
    # reports what the replay really gives (the rival's true run), not the claim.
    claimed = dataclasses.replace(fifo, makespan_us=1.0)
    run, plan = run_oracle(model, trace, {"fifo": (claimed, recorder.timeline())}, registry)
    assert plan == "replay/fifo" and run.makespan_us == fifo.makespan_us
    slower = dataclasses.replace(fifo, makespan_us=own.makespan_us + 1.0)
    run, plan = run_oracle(model, trace, {"fifo": (slower, recorder.timeline())}, registry)
    assert plan.startswith("plan/") and run.makespan_us == own.makespan_us


# -- the planner on its own ---------------------------------------------------------------------


def two_service_cost(shares: Mapping[int, float], held: int | None) -> float:
    """Each service's calls take 2 µs, 1 µs when it holds the fabric (a bottleneck model)."""
    return max(shares.get(sid, 0.0) * (1.0 if held == sid else 2.0) for sid in (0, 1))


def drive(planner: ReconfigurationPlanner, dominants: list[int], held: int) -> list[int]:
    """Ticks of 0.2 ms, 200 calls each, 90 % to the tick's dominant service; returns the
    ticks at which the planner asked to juggle (the fabric never changes: what matters is
    whether it wants to).
    """
    calls = [0, 0]
    asked = []
    for i, d in enumerate(dominants):
        calls[d] += 180
        calls[1 - d] += 20
        snapshot = StatsSnapshot(
            i * 2e-4,
            tuple(
                ServiceStats(sid, f"svc{sid}", "hardware" if sid == held else "software", None, n)
                for sid, n in enumerate(calls)
            ),
            (RegionStats("prr0", "Busy", held, reconfig_us=1000.0),),
        )
        planner.observe(snapshot)
        if planner.decide(snapshot, reconfig_calls=1000):
            asked.append(i)
    return asked


def test_planner_follows_a_change_once_changes_have_been_lasting() -> None:
    planner = ReconfigurationPlanner(two_service_cost, 1e-3, memory_s=1.0)
    # Long stretches (60-100 ticks = 12,000-20,000 calls, far more than a reconfiguration's
    # 1,000); over all of them service 0 has most calls, so only the forecast that the
    # current stretch of service 1 will last can justify the juggle.
    history = ([0] * 100 + [1] * 60) * 3
    asked = drive(planner, [*history, *([1] * 30)], held=0)
    assert asked and asked[-1] >= len(history)


def test_planner_lets_short_excursions_pass() -> None:
    planner = ReconfigurationPlanner(two_service_cost, 1e-3, memory_s=1.0)
    # Excursions of 3 ticks (600 calls, less than one reconfiguration) come back each time;
    # before it has seen one come back it has no reason to doubt the first one.
    pattern = ([0] * 12 + [1] * 3) * 20
    asked = drive(planner, pattern, held=0)
    assert all(tick < 2 * 15 for tick in asked)


def test_adaptive_plans_only_with_a_cost_model() -> None:
    policy = AdaptiveController()
    assert policy.planner is None
    with_cost = AdaptiveController(cost=two_service_cost)
    assert isinstance(with_cost.planner, ReconfigurationPlanner)
