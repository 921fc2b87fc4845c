"""The router model: unit pools, FIFOs, the reconfigurable part, the pipeline, snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from juggle.core.controllers import JuggleAction, StatsSnapshot
from juggle.errors import ConfigurationError, ControllerError, ProfileError, RegionBusyError
from juggle.simulate.router import KINDS, RouterSim, load_router_model
from juggle.simulate.units import CoprocessorPool, Fifo, service_us

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
    with pytest.raises(ControllerError, match="evicts service 2"):
        sim.apply(JuggleAction(1, (2,)))


def test_a_profile_without_a_router_scenario_is_refused() -> None:
    with pytest.raises(ProfileError, match="not an edge-router scenario"):
        load_router_model("xupv2p")
