"""The router model: unit pools, FIFOs, the reconfigurable part, the pipeline, snapshots."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from juggle.core import placement
from juggle.core.controllers import JuggleAction, StatsSnapshot
from juggle.core.placement import JugglePlan, RegionView, ServiceView, plan_juggle
from juggle.errors import (
    ConfigurationError,
    ControllerError,
    ProfileError,
    RegionBusyError,
    SanityCheckError,
)
from juggle.simulate.router import model as router
from juggle.simulate.router.model import KINDS, RouterSim, load_router_model
from juggle.simulate.router.units import CoprocessorPool, Fifo, service_us

MODEL = load_router_model()


def flows_of(mix: tuple[float, float, float], n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).choice(3, size=n, p=mix).astype(np.int8)


def test_paper_parameters_come_from_the_profile() -> None:
    assert MODEL.reconfig_us == pytest.approx(2500.0)
    assert MODEL.flow_cycles == (1105 + 303, 303, 303)
    assert MODEL.des_us == pytest.approx(10.24) and MODEL.lz_us == pytest.approx(12.8)
    assert MODEL.units("des") == (2, 4, 2) and MODEL.units(None) == (2, 2, 2)


def test_a_coprocessor_pool_serves_whole_packets_at_its_throughput() -> None:
    fifo = Fifo("F", 100, 100, level=50)
    pool = CoprocessorPool("des", 2, service_us(512, 400))
    served = sum(pool.serve(fifo, 1.0) for _ in range(100))
    assert served == 19  # 2 units x 100 us / 10.24 us
    assert fifo.level == 31 and fifo.occupancy == pytest.approx(0.31)
    with pytest.raises(ConfigurationError, match="mbit_per_s"):
        service_us(512, 0)


@pytest.mark.parametrize("mix", [(0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6)])
@pytest.mark.parametrize("holds", [*KINDS, None])
def test_saturated_throughput_matches_the_bottleneck(
    mix: tuple[float, float, float], holds: str | None
) -> None:
    n = 20_000
    sim = RouterSim(MODEL, flows_of(mix, n), arrival_us=None, holds=holds)
    per_packet = sim.run_fixed().makespan_us / n
    assert per_packet == pytest.approx(MODEL.per_packet_us(mix, holds), rel=0.02)


def test_while_reconfiguring_the_part_holds_nothing() -> None:
    flows = flows_of((0.2, 0.6, 0.2), 40_000)
    sim = RouterSim(MODEL, flows, arrival_us=None, holds="processor")
    sim.env.process(sim.part.reprogram(sim.env, "des"))
    sim.env.run(until=100.0)
    sim.advance_to(100.0)
    stats = sim.statistics()
    assert stats.units == (2, 2, 2) and stats.holds is None
    assert stats.part_state == "Reconfig" and "Reconfig" in repr(sim)
    with pytest.raises(RegionBusyError):
        sim.part.check("lz")
    sim.env.run(until=2600.0)
    sim.advance_to(2600.0)
    assert (sim.processors.count, sim.des.count, sim.lz.count) == (2, 4, 2)
    assert sim.part.holds == "des" and sim.part.reconfigurations == 1


def test_reconfiguring_pays_off_on_a_long_des_heavy_trace() -> None:
    flows = flows_of((0.2, 0.6, 0.2), 40_000)

    class ToDes:
        name = "to-des"

        def decide(self, snapshot: StatsSnapshot) -> list[JuggleAction]:
            held = tuple(s.service_id for s in snapshot.in_hardware())
            if 1 in held or snapshot.regions[0].state == "Reconfig":
                return []
            return [JuggleAction(1, held, "des")]

    stay = RouterSim(MODEL, flows, arrival_us=None).run_fixed()
    switched = RouterSim(MODEL, flows, arrival_us=None).run(ToDes())
    assert switched.reconfigurations == 1
    assert stay.makespan_us / switched.makespan_us > 1.4


def test_snapshot_reports_shares_queues_and_modeled_gains() -> None:
    flows = flows_of((0.2, 0.6, 0.2), 5_000)
    arrivals = np.arange(5_000, dtype=np.float64) * 1.9
    sim = RouterSim(MODEL, flows, arrival_us=arrivals)
    sim.advance_to(2_000.0)
    snap = sim.snapshot()
    by_kind = {s.interface: s for s in snap.services}
    assert by_kind["des"].share == pytest.approx(0.6, abs=0.05)
    assert by_kind["processor"].tier == "hardware" and by_kind["des"].tier == "static"
    assert by_kind["des"].queue_occupancy is not None and by_kind["des"].queue_occupancy > 0.3
    assert by_kind["des"].gain_us is not None and by_kind["des"].gain_us > 0
    assert snap.regions[0].reconfig_us == pytest.approx(2500.0)
    assert sum(s.calls for s in snap.services) == sim.head


def test_bad_juggles_are_refused_naming_the_controller() -> None:
    sim = RouterSim(MODEL, flows_of((1, 0, 0), 10), arrival_us=None)
    with pytest.raises(ControllerError, match="asked for service 7"):
        sim.apply(JuggleAction(7, ()))
    with pytest.raises(ControllerError, match="evicts service 9"):
        sim.apply(JuggleAction(1, (9,)))
    with pytest.raises(ControllerError, match=r"'to-des'.*to_software=\(2,\)"):
        sim.apply(JuggleAction(1, (2,)), Named("to-des"))


class Named:
    """A controller that only has a name (``apply`` names it in its errors)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def decide(self, snapshot: StatsSnapshot) -> list[JuggleAction]:
        return []


@pytest.mark.parametrize(
    "action",
    [
        JuggleAction(1, (2,)),  # evicts lz, which the part does not hold
        JuggleAction(1, ()),  # des would need the part, which holds the processor
        JuggleAction(0, (0,)),  # enter and leave at once
        JuggleAction(None, (0, 0)),  # listed twice
    ],
)
def test_the_router_refuses_what_plan_juggle_refuses(action: JuggleAction) -> None:
    sim = RouterSim(MODEL, flows_of((1, 0, 0), 10), arrival_us=None, holds="processor")
    views = sim.service_views()
    with pytest.raises(SanityCheckError) as planned:
        plan_juggle(
            None if action.to_hardware is None else views[action.to_hardware],
            [views[s] for s in action.to_software],
            sim.region_views(),
        )
    with pytest.raises(ControllerError, match=re.escape(str(planned.value))) as refused:
        sim.apply(action, Named("ctl"))
    assert "'ctl'" in str(refused.value) and refused.value.controller == "ctl"
    assert refused.value.value == action.to_hardware
    assert isinstance(refused.value.__cause__, SanityCheckError)
    assert sim.part.holds == "processor" and sim.part.reconfigurations == 0


def test_the_planner_views_of_the_part() -> None:
    sim = RouterSim(MODEL, flows_of((1, 0, 0), 10), arrival_us=None, holds="des")
    part = MODEL.params.region
    views = sim.service_views()
    assert [v.label for v in views] == list(KINDS)
    assert [v.tier for v in views] == ["software", "hardware", "software"]
    assert [v.region for v in views] == [None, part, None]
    assert all(v.regions == (part,) for v in views)
    assert sim.region_views() == {part: RegionView(part, 1, error=False)}


def test_juggles_go_through_plan_juggle(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = RouterSim(MODEL, flows_of((1, 0, 0), 10), arrival_us=None, holds="processor")
    calls: list[tuple[ServiceView | None, list[ServiceView]]] = []

    def spy(
        entering: ServiceView | None,
        leaving: Sequence[ServiceView],
        regions: Mapping[str, RegionView],
    ) -> JugglePlan:
        calls.append((entering, list(leaving)))
        return placement.plan_juggle(entering, leaving, regions)

    monkeypatch.setattr(router, "plan_juggle", spy)
    assert sim.apply(JuggleAction(0, ()))  # already held: a no-op, still planned
    assert sim.part.reconfigurations == 0
    assert sim.apply(JuggleAction(1, (0,)))
    assert [(e and e.label, [v.label for v in ls]) for e, ls in calls] == [
        ("processor", []),
        ("des", ["processor"]),
    ]
    sim.env.run(until=MODEL.reconfig_us + 1)
    assert sim.part.holds == "des"

    def refuse(
        entering: ServiceView | None,
        leaving: Sequence[ServiceView],
        regions: Mapping[str, RegionView],
    ) -> JugglePlan:
        raise SanityCheckError(
            "the planner says no", service_id=None if entering is None else entering.service_id
        )

    monkeypatch.setattr(router, "plan_juggle", refuse)
    with pytest.raises(ControllerError, match="the planner says no"):
        sim.apply(JuggleAction(2, (1,)))  # a valid juggle, refused only by the planner
    with pytest.raises(ControllerError, match="the planner says no"):
        sim.apply(JuggleAction(1, ()))  # even a no-op asks the planner
    assert sim.part.holds == "des" and sim.part.reconfigurations == 1


def test_the_planners_answer_decides_what_the_router_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = RouterSim(MODEL, flows_of((1, 0, 0), 10), arrival_us=None, holds="processor")

    def nowhere(
        entering: ServiceView | None,
        leaving: Sequence[ServiceView],
        regions: Mapping[str, RegionView],
    ) -> JugglePlan:
        return JugglePlan(None, (), None, False)  # the planner decides: nothing to do

    monkeypatch.setattr(router, "plan_juggle", nowhere)
    assert sim.apply(JuggleAction(1, (0,)))
    assert sim.part.holds == "processor" and sim.part.reconfigurations == 0


def test_while_reconfiguring_juggles_are_refused_and_counted() -> None:
    sim = RouterSim(MODEL, flows_of((1, 0, 0), 10), arrival_us=None, holds="processor")
    assert sim.apply(JuggleAction(1, (0,)))
    sim.env.run(until=1.0)  # the swap starts: the part is busy and holds nothing
    assert sim.part.reconfiguring and sim.part.holds is None
    assert not sim.apply(JuggleAction(2, ()))  # the busy part holds nobody: planned, refused
    assert not sim.apply(JuggleAction(None, ()))
    assert sim.refused == 2
    with pytest.raises(ControllerError, match="not in hardware"):
        sim.apply(JuggleAction(2, (1,)))  # des is not in yet: the planner refuses first
    assert sim.refused == 2


def test_a_profile_without_a_router_scenario_is_refused() -> None:
    with pytest.raises(ProfileError, match="not an edge-router scenario"):
        load_router_model("xupv2p")
