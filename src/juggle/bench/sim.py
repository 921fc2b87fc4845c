"""Simulator speed, on one core: discrete events per wall-clock second of a packet-level run,
and, under names that say so, the speed of the fluid model the edge-router experiments use.

``sim_events_*`` (packet-level): the edge router's pipeline (Kachris & Vassiliadis) with every
packet its own events, in SimPy: it arrives in FIFO_IN, one of the processors takes it and
spends its flow's cycles on it, then an encrypt or compress packet waits for room in FIFO_DES
or FIFO_LZC (a place is held from the hand-over until its unit is done, as in the fluid model)
and one of the DES or LZ units serves it. The configuration stays fixed (Config_A: the
reconfigurable part holds processors; no controller). ``sim_events`` counts the events SimPy
processed (timeouts, FIFO hand-overs, room taken and given back, process starts); trace
generation and model building are excluded. The run also reports its makespan beside the fluid
model's on the same trace (``sim_fluid_vs_packet_makespan_pct``), a check of the fluid
approximation.

``sim_fluid_*``: one run of the Fig 4 workload (20 ms stability, 4 spikes per period) under
the ``adaptive`` controller, as the experiments run it: SimPy carries the control ticks and
reconfigurations, and between them the pipeline advances in 50 µs steps in which each unit
pool serves a fluid of whole packets (:mod:`juggle.simulate.router.units`). A step's cost does not
depend on how many packets it moves, so ``sim_fluid_packets_per_s`` (trace packets per wall
second) is not a per-packet simulation speed; ``sim_fluid_steps_per_s`` is the rate of the
work it does.

Speeds are measured (wall clock, best of a few runs); counts are counted; the makespan
deviation is modeled. :data:`LABELS` says which for every key :func:`run` returns.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import simpy

from juggle.core.controllers.plugins import default_registry
from juggle.simulate.router.experiments import FIGURES, figure_trace, router_options
from juggle.simulate.router.model import RouterModel, RouterSim, load_router_model
from juggle.simulate.router.traffic import Trace

__all__ = ["LABELS", "PacketRun", "run", "run_packet_level"]

LABELS: dict[str, str] = {
    "sim_events_per_s": "measured",
    "sim_events": "measured",
    "sim_event_packets_per_s": "measured",
    "sim_event_packets": "input",
    "sim_event_virtual_s": "modeled",
    "sim_fluid_vs_packet_makespan_pct": "modeled",
    "sim_fluid_packets_per_s": "measured",
    "sim_fluid_steps_per_s": "measured",
    "sim_fluid_steps": "measured",
    "sim_fluid_packets": "input",
    "sim_fluid_virtual_s": "input",
}
"""Every key :func:`run` returns: ``measured`` (wall clock of this machine, or counted),
``modeled`` (virtual time of the simulated router) or ``input`` (the size of the workload)."""


@dataclass(frozen=True, slots=True)
class PacketRun:
    """One packet-level run: events SimPy processed, packets done, when the last one left."""

    events: int
    packets: int
    makespan_us: float


def run_packet_level(
    model: RouterModel,
    flows: npt.NDArray[np.int8],
    arrival_us: npt.NDArray[np.float64],
    holds: str | None = "processor",
) -> PacketRun:
    """Simulate every packet of ``flows`` (arriving at ``arrival_us``) through the router with
    the reconfigurable part holding ``holds``; see the module's docstring."""
    p = model.params
    env = simpy.Environment()
    n_proc, n_des, n_lz = model.units(holds)
    cycles = model.flow_cycles
    proc_us = [c / p.processor_clock_mhz for c in cycles]
    fifo_in: simpy.Store = simpy.Store(env)
    fifo_des: simpy.Store = simpy.Store(env)
    fifo_lzc: simpy.Store = simpy.Store(env)
    room_des = simpy.Container(env, p.fifo_des_packets, init=p.fifo_des_packets)
    room_lzc = simpy.Container(env, p.fifo_lzc_packets, init=p.fifo_lzc_packets)
    done = [0, 0.0]  # packets finished, time of the last

    def finish() -> None:
        done[0] += 1
        done[1] = env.now

    def source() -> Generator[simpy.Event, Any, None]:
        for flow, at in zip(flows.tolist(), arrival_us.tolist(), strict=True):
            if at > env.now:
                yield env.timeout(at - env.now)
            yield fifo_in.put(flow)

    def processor() -> Generator[simpy.Event, Any, None]:
        while True:
            flow = yield fifo_in.get()
            yield env.timeout(proc_us[flow])
            if flow == 1:
                yield room_des.get(1)
                yield fifo_des.put(flow)
            elif flow == 2:
                yield room_lzc.get(1)
                yield fifo_lzc.put(flow)
            else:
                finish()

    def unit(
        fifo: simpy.Store, room: simpy.Container, service_us: float
    ) -> Generator[simpy.Event, Any, None]:
        while True:
            yield fifo.get()
            yield env.timeout(service_us)
            yield room.put(1)
            finish()

    env.process(source())
    for _ in range(n_proc):
        env.process(processor())
    for _ in range(n_des):
        env.process(unit(fifo_des, room_des, model.des_us))
    for _ in range(n_lz):
        env.process(unit(fifo_lzc, room_lzc, model.lz_us))
    events = 0
    step = env.step
    try:
        while True:
            step()
            events += 1
    except simpy.core.EmptySchedule:
        pass
    return PacketRun(events, int(done[0]), float(done[1]))


class _CountingSim(RouterSim):
    """The fluid router, counting its pipeline steps (for an untimed run)."""

    steps = 0

    def _step(self, dt: float) -> None:
        self.steps += 1
        RouterSim._step(self, dt)


def _fluid_run(model: RouterModel, trace: Trace, counting: bool) -> tuple[float, int]:
    """Wall seconds of one fluid run under ``adaptive`` and (when ``counting``) its steps."""
    registry = default_registry(entry_points=False)
    controller = registry.create("adaptive", **router_options("adaptive", model, trace))
    cls = _CountingSim if counting else RouterSim
    sim = cls(model, trace.flows, arrival_us=trace.arrival_us, holds=model.params.initial)
    start = time.perf_counter()
    sim.run(controller)
    wall = time.perf_counter() - start
    return wall, sim.steps if isinstance(sim, _CountingSim) else 0


def run(quick: bool = False) -> dict[str, float]:
    """The figures of :data:`LABELS` (speeds best of a few runs); ``quick``: shorter runs."""
    model = load_router_model()
    fig4 = FIGURES["fig4"]
    rounds = 1 if quick else 3

    seconds = 0.05 if quick else 0.15
    trace = figure_trace(model, fig4, 4, 1, seconds / fig4.duration_s(4))
    best_events = 0.0
    packet_run = PacketRun(0, 0, 0.0)
    for _ in range(rounds):
        start = time.perf_counter()
        packet_run = run_packet_level(model, trace.flows, trace.arrival_us, model.params.initial)
        best_events = max(best_events, packet_run.events / (time.perf_counter() - start))
    fluid_fixed = RouterSim(
        model, trace.flows, arrival_us=trace.arrival_us, holds=model.params.initial
    ).run_fixed()
    deviation = 100.0 * (fluid_fixed.makespan_us / packet_run.makespan_us - 1.0)

    seconds = 0.2 if quick else 0.6
    fluid_trace = figure_trace(model, fig4, 4, 1, seconds / fig4.duration_s(4))
    best_wall = min(_fluid_run(model, fluid_trace, False)[0] for _ in range(rounds))
    _, steps = _fluid_run(model, fluid_trace, True)
    return {
        "sim_events_per_s": round(best_events, 1),
        "sim_events": packet_run.events,
        "sim_event_packets_per_s": round(best_events * packet_run.packets / packet_run.events, 1),
        "sim_event_packets": packet_run.packets,
        "sim_event_virtual_s": round(packet_run.makespan_us * 1e-6, 4),
        "sim_fluid_vs_packet_makespan_pct": round(deviation, 3),
        "sim_fluid_packets_per_s": round(fluid_trace.packets / best_wall, 1),
        "sim_fluid_steps_per_s": round(steps / best_wall, 1),
        "sim_fluid_steps": steps,
        "sim_fluid_packets": fluid_trace.packets,
        "sim_fluid_virtual_s": round(fluid_trace.duration_us * 1e-6, 3),
    }
