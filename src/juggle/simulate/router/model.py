"""The reconfigurable multi-service edge router (Kachris & Vassiliadis, SBCCI 2007) in virtual time.

Packets arrive at line rate into ``FIFO_IN``; a pool of processors classifies each one and
does its header work (forward-flow packets: DRR scheduling + IP forward; encrypt and compress
flows: IP forward), then hands encrypt packets to ``FIFO_DES`` and compress packets to
``FIFO_LZC``, where pools of DES and LZ co-processors finish them. The static part of the
fabric holds 2 processors, 2 DES and 2 LZ units; the reconfigurable part holds two more units
of one kind (configurations A, B, C of Table 1) and nothing while it is being reconfigured.

A controller reads a :class:`~juggle.core.controllers.base.StatsSnapshot` every control period
(a service = a unit kind: ``processor``, ``des``, ``lz``; a call = a packet of that kind's
flow) and answers with juggles; ``to_hardware`` names the kind the reconfigurable part should
hold. The same controller objects drive the live runtime.

Juggles are decided by :func:`juggle.core.placement.plan_juggle`, the same sans-I/O planner
the live runtime asks: each kind is a service whose only region is the reconfigurable part,
and the part is a region holding its kind. So a juggle means the same here as on a board: the
kind the part holds must be listed in ``to_software`` to make room for another one, and only
a kind the part holds can be evicted; the planner's refusals become
:class:`~juggle.errors.ControllerError` naming the controller and the action. A juggle asked
for while the part is being reconfigured (the region is busy) is refused and counted.

How it runs: SimPy carries the events (control ticks, reconfiguration start and end); between
two events the packet pipeline is advanced in fixed steps by the fluid-with-whole-packets
model of :mod:`juggle.simulate.router.units`, with prefix sums over the trace so a step costs
the same whatever number of packets it moves. Every calibration assumption is listed in
``docs/edge-router.md`` and in the ``[scenario]`` table of the ``virtex4-router`` profile.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import simpy
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from juggle.core.controllers.base import (
    Controller,
    JuggleAction,
    RegionStats,
    ServiceStats,
    StatsSnapshot,
)
from juggle.core.placement import JugglePlan, RegionView, ServiceView, plan_juggle
from juggle.errors import (
    ConfigurationError,
    ControllerError,
    JuggleError,
    ProfileError,
    SanityCheckError,
    TierUnavailableError,
)
from juggle.fabric.profiles import BoardProfile, load_profile
from juggle.simulate.router.reconfig import ReconfigurablePart
from juggle.simulate.router.units import CoprocessorPool, Fifo, ProcessorPool, service_us

__all__ = [
    "FLOWS",
    "KINDS",
    "RouterModel",
    "RouterParams",
    "RouterRun",
    "RouterSim",
    "RouterStatistics",
    "load_router_model",
]

FLOWS = ("forward", "encrypt", "compress")
"""The three flows, in trace order (flow i is served by unit kind ``KINDS[i]``)."""
KINDS = ("processor", "des", "lz")
"""Unit kinds; service id i in snapshots is ``KINDS[i]``."""
CONFIGURATIONS = {"A": "processor", "B": "des", "C": "lz"}
"""Table 1: the kind the reconfigurable part holds in each configuration."""


class RouterParams(BaseModel):
    """The ``[scenario]`` table of the ``virtex4-router`` profile (see the profile's comments).

    Cycle counts are Table 2, co-processor rates Table 3; the rest is calibration.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    packet_bytes: int = Field(default=512, gt=0)
    processor_clock_mhz: float = Field(gt=0)
    ip_forward_cycles: int = Field(default=303, gt=0)
    drr_cycles: int = Field(default=1105, gt=0)
    des_mbit_s: float = Field(default=400.0, gt=0)
    lz_mbit_s: float = Field(default=320.0, gt=0)
    static_processors: int = Field(default=2, ge=1)
    static_des: int = Field(default=2, ge=1)
    static_lz: int = Field(default=2, ge=1)
    reconfigurable_units: int = Field(default=2, ge=1)
    region: str = Field(min_length=1)
    initial: str = "processor"
    fifo_in_packets: int = Field(gt=0)
    fifo_des_packets: int = Field(gt=0)
    fifo_lzc_packets: int = Field(gt=0)
    epoch_us: float = Field(gt=0)
    control_period_us: float = Field(gt=0)
    distribution_threshold: float = Field(default=0.5, gt=0, le=1)
    fifo_threshold: float = Field(default=1.0, gt=0, le=1)


@dataclass(frozen=True, slots=True)
class RouterModel:
    """Parameters of the router plus the reconfiguration time derived from the board profile.

    ``reconfig_us`` = config-port time of the region's bitstream + two bridge switches.
    """

    params: RouterParams
    reconfig_us: float
    board: str = "virtex4-router"

    @property
    def flow_cycles(self) -> tuple[int, int, int]:
        """Processor cycles per packet of each flow (forward: DRR + IP forward)."""
        p = self.params
        return (p.drr_cycles + p.ip_forward_cycles, p.ip_forward_cycles, p.ip_forward_cycles)

    @property
    def des_us(self) -> float:
        """DES co-processor time per packet."""
        return service_us(self.params.packet_bytes, self.params.des_mbit_s)

    @property
    def lz_us(self) -> float:
        """LZ co-processor time per packet."""
        return service_us(self.params.packet_bytes, self.params.lz_mbit_s)

    def units(self, holds: str | None) -> tuple[int, int, int]:
        """Processors, DES and LZ units when the reconfigurable part holds ``holds``."""
        p = self.params
        counts = [p.static_processors, p.static_des, p.static_lz]
        if holds is not None:
            counts[KINDS.index(holds)] += p.reconfigurable_units
        return (counts[0], counts[1], counts[2])

    def per_packet_us(self, shares: Sequence[float], holds: str | None) -> float:
        """Bottleneck time per packet of a mix when saturated: the busiest pool decides."""
        p = self.params
        n_p, n_d, n_l = p.static_processors, p.static_des, p.static_lz
        if holds == "processor":
            n_p += p.reconfigurable_units
        elif holds == "des":
            n_d += p.reconfigurable_units
        elif holds == "lz":
            n_l += p.reconfigurable_units
        forward, header = p.drr_cycles + p.ip_forward_cycles, p.ip_forward_cycles
        cycles = shares[0] * forward + (shares[1] + shares[2]) * header
        proc = cycles / p.processor_clock_mhz / n_p
        bits = 8.0 * p.packet_bytes
        des = shares[1] * bits / p.des_mbit_s / n_d
        lz = shares[2] * bits / p.lz_mbit_s / n_l
        return max(proc, des, lz)

    def best_kind(self, shares: Sequence[float]) -> str:
        """The kind whose configuration serves ``shares`` fastest (ties: Table 1 order)."""
        return min(KINDS, key=lambda k: self.per_packet_us(shares, k))


def load_router_model(profile: str | BoardProfile = "virtex4-router") -> RouterModel:
    """Build the router model from a board profile's ``[scenario]`` table.

    Raises :class:`~juggle.errors.ProfileError` when the profile or its scenario is invalid.
    """
    board = load_profile(profile) if isinstance(profile, str) else profile
    try:
        params = RouterParams.model_validate(board.scenario)
    except ValidationError as exc:
        raise ProfileError(
            f"profile {board.name!r}: [scenario] is not an edge-router scenario: {exc}",
            profile=board.name,
        ) from exc
    region = board.region(params.region)
    if region.bitstream_bytes is None:
        raise ProfileError(
            f"profile {board.name!r}: region {region.name!r} needs bitstream_bytes",
            profile=board.name,
        )
    if params.initial not in KINDS:
        raise ProfileError(
            f"profile {board.name!r}: initial must be one of {list(KINDS)}, got {params.initial!r}",
            profile=board.name,
            value=params.initial,
        )
    ps = board.config_port.transfer_ps(region.bitstream_bytes) + 2 * board.bridge.switch_ps
    return RouterModel(params, ps / 1e6, board.name)


@dataclass(frozen=True, slots=True)
class RouterStatistics:
    """A frozen view of a :class:`RouterSim` at one virtual instant."""

    now_us: float
    packets: int
    classified: int
    done: int
    units: tuple[int, int, int]
    fifo_levels: tuple[int, int, int]
    holds: str | None
    part_state: str
    reconfigurations: int
    refused: int


@dataclass(frozen=True, slots=True)
class RouterRun:
    """Outcome of one simulated run: when the last packet left and what the fabric did."""

    policy: str
    packets: int
    makespan_us: float
    reconfigurations: int
    reconfiguring_us: float
    refused: int
    switches: tuple[tuple[float, str | None], ...] = field(default=())

    @property
    def packets_per_s(self) -> float:
        """Simulated throughput over the run."""
        return self.packets / (self.makespan_us * 1e-6) if self.makespan_us > 0 else 0.0


class RouterSim:
    """One router fed by one trace of flows; run it with :meth:`run` or :meth:`run_fixed`.

    ``arrival_us`` gives each packet's arrival time (non-decreasing); None means every packet
    is waiting in FIFO_IN at time 0 (Table 4).
    Raises :class:`~juggle.errors.ConfigurationError` (from the unit models) for bad values.
    """

    def __init__(
        self,
        model: RouterModel,
        flows: npt.NDArray[np.int8],
        *,
        arrival_us: npt.NDArray[np.float64] | None,
        holds: str | None = "processor",
        epoch_us: float | None = None,
    ) -> None:
        p = model.params
        self.model = model
        self.env = simpy.Environment()
        self.packets = int(flows.shape[0])
        if arrival_us is not None and arrival_us.shape[0] != self.packets:
            raise ConfigurationError(
                f'"arrival_us" has {arrival_us.shape[0]} entries for {self.packets} packets'
            )
        self._arrivals = None if arrival_us is None else array("d", arrival_us.tobytes())
        self._last_arrival = 0.0 if arrival_us is None or not self.packets else arrival_us[-1]
        self.epoch_us = p.epoch_us if epoch_us is None else epoch_us
        n_p, n_d, n_l = model.units(holds)
        self.processors = ProcessorPool("processors", n_p, p.processor_clock_mhz)
        self.des = CoprocessorPool("des", n_d, model.des_us)
        self.lz = CoprocessorPool("lz", n_l, model.lz_us)
        self.fifo_in = Fifo("FIFO_IN", None, p.fifo_in_packets)
        self.fifo_des = Fifo("FIFO_DES", p.fifo_des_packets, p.fifo_des_packets)
        self.fifo_lzc = Fifo("FIFO_LZC", p.fifo_lzc_packets, p.fifo_lzc_packets)
        self.part = ReconfigurablePart(
            KINDS, p.reconfigurable_units, model.reconfig_us, holds, self._units_changed, p.region
        )
        cycles = np.asarray(model.flow_cycles, dtype=np.int64)[flows]
        self._cum_cycles = array("q", np.concatenate(([0], np.cumsum(cycles))).tobytes())
        self._cum_des = array("q", _prefix(flows == 1).tobytes())
        self._cum_lz = array("q", _prefix(flows == 2).tobytes())
        self.now = 0.0
        self.head = 0
        self._arrived = 0
        self.done = 0
        self.finished_at: float | None = None
        self.refused = 0
        self.switches: list[tuple[float, str | None]] = []
        self._window_start = 0.0
        self._window_head = 0

    # -- the packet pipeline -------------------------------------------------------------------

    def arrived(self, t_us: float) -> int:
        """Packets that have arrived by ``t_us``."""
        if self._arrivals is None:
            return self.packets
        self._arrived = bisect_right(self._arrivals, t_us + 1e-9, self._arrived)
        return self._arrived

    def advance_to(self, t_us: float) -> None:
        """Move the pipeline from :attr:`now` to ``t_us`` in steps of at most ``epoch_us``."""
        while self.now < t_us - 1e-9 and self.finished_at is None:
            self._step(min(self.epoch_us, t_us - self.now))

    def _step(self, dt: float) -> None:
        t1 = self.now + dt
        done = self.des.serve(self.fifo_des, dt) + self.lz.serve(self.fifo_lzc, dt)
        h = self.head
        a = self.arrived(t1)
        proc = self.processors
        if a > h and proc.count > 0:
            cum_c, cum_d, cum_l = self._cum_cycles, self._cum_des, self._cum_lz
            busy = (proc.count if a - h >= proc.count else a - h) * dt
            proc.busy_us += busy
            target = cum_c[h] + proc.credit + busy * proc.clock_mhz
            j = bisect_right(cum_c, target, h, a + 1) - 1
            limit = j
            d0, l0 = cum_d[h], cum_l[h]
            room = self.fifo_des.room
            if cum_d[limit] - d0 > room:
                limit = bisect_right(cum_d, d0 + room, h, limit + 1) - 1
            room = self.fifo_lzc.room
            if cum_l[limit] - l0 > room:
                limit = bisect_right(cum_l, l0 + room, h, limit + 1) - 1
            proc.credit = target - cum_c[j] if limit == j and j < a else 0.0
            to_des = cum_d[limit] - d0
            to_lz = cum_l[limit] - l0
            self.fifo_des.put(to_des)
            self.fifo_lzc.put(to_lz)
            done += limit - h - to_des - to_lz
            self.head = h = limit
        self.fifo_in.set_level(a - h)
        self.done += done
        self.now = t1
        if self.done >= self.packets:
            self.finished_at = t1

    def _units_changed(self, kind: str, delta: int) -> None:
        self.advance_to(self.env.now)
        if kind == "processor":
            self.processors.count += delta
        elif kind == "des":
            self.des.count += delta
        else:
            self.lz.count += delta
        if delta > 0:
            self.switches.append((self.env.now, kind))

    # -- running ---------------------------------------------------------------------------------

    def run_fixed(self) -> RouterRun:
        """Run to the last packet without a controller (the configuration never changes)."""
        while self.finished_at is None:
            self._step(self.epoch_us)
        return self._result("fixed")

    def run(self, controller: Controller, *, limit_us: float | None = None) -> RouterRun:
        """Run to the last packet, asking ``controller`` every control period.

        Raises :class:`~juggle.errors.ControllerError` when the controller fails or asks for
        a service the router does not have.
        """
        self.env.process(self._control(controller))
        horizon = limit_us if limit_us is not None else self._horizon_us()
        self.env.run(until=horizon)
        if self.finished_at is None:
            self.advance_to(horizon)
        return self._result(controller.name)

    def _horizon_us(self) -> float:
        last = float(self._last_arrival)
        slowest = self.model.per_packet_us((0.0, 0.0, 1.0), None)
        slowest = max(slowest, self.model.per_packet_us((1.0, 0.0, 0.0), None))
        return last + 2 * self.packets * slowest + 10 * self.model.reconfig_us + 1.0

    def _control(self, controller: Controller) -> Generator[simpy.Event, Any, None]:
        period = self.model.params.control_period_us
        while self.finished_at is None:
            yield self.env.timeout(period)
            self.advance_to(self.env.now)
            if self.finished_at is not None:
                return
            snapshot = self.snapshot()
            try:
                actions = controller.decide(snapshot)
            except JuggleError:
                raise
            except Exception as exc:
                raise ControllerError(
                    f"controller {controller.name!r} failed at t={self.env.now:.1f} us: {exc}",
                    controller=controller.name,
                ) from exc
            for action in actions:
                self.apply(action, controller)

    def apply(self, action: JuggleAction, controller: Controller | None = None) -> bool:
        """Carry out one juggle as :func:`~juggle.core.placement.plan_juggle` decides it.

        True when done or nothing to do (the kind is already held); False when refused
        because a reconfiguration is already running (counted in :attr:`refused`).
        Raises :class:`~juggle.errors.ControllerError` for a service id the router lacks and
        for any juggle the planner refuses (its message included), e.g. evicting a kind the
        part does not hold or bringing a kind in without evicting the one held.
        """
        plan = self.plan(action, controller)
        if self.part.reconfiguring:
            self.refused += 1
            return False
        held = self.part.holds
        kind: str | None
        if plan.region is not None and plan.entering is not None:
            kind = KINDS[plan.entering]
        elif held is not None and KINDS.index(held) in plan.leaving:
            kind = None
        else:
            return True
        self.advance_to(self.env.now)
        self.env.process(self.part.reprogram(self.env, kind))
        if kind is None:
            self.switches.append((self.env.now, None))
        return True

    def plan(self, action: JuggleAction, controller: Controller | None = None) -> JugglePlan:
        """The planner's decision on ``action`` for the part as it is now; changes nothing.

        Raises :class:`~juggle.errors.ControllerError` as :meth:`apply` does.
        """
        name = controller.name if controller is not None else "?"
        target = action.to_hardware
        if target is not None and not 0 <= target < len(KINDS):
            raise ControllerError(
                f"controller {name!r} asked for service {target!r}; the router has "
                f"{dict(enumerate(KINDS))}",
                controller=name,
                value=target,
            )
        for sid in action.to_software:
            if not 0 <= sid < len(KINDS):
                raise ControllerError(
                    f"controller {name!r} evicts service {sid!r}; the router has "
                    f"{dict(enumerate(KINDS))}",
                    controller=name,
                    value=sid,
                )
        views = self.service_views()
        try:
            return plan_juggle(
                None if target is None else views[target],
                [views[sid] for sid in action.to_software],
                self.region_views(),
            )
        except (SanityCheckError, TierUnavailableError) as exc:
            raise ControllerError(
                f"controller {name!r}: juggle to_hardware={target!r} "
                f"to_software={action.to_software!r} refused: {exc}",
                controller=name,
                value=target,
            ) from exc

    def service_views(self) -> tuple[ServiceView, ...]:
        """How the planner sees each kind (service id = index in :data:`KINDS`)."""
        part = self.part
        return tuple(
            ServiceView(
                service_id=i,
                label=kind,
                tier="hardware" if part.holds == kind else "software",
                region=part.name if part.holds == kind else None,
                regions=(part.name,) if kind in part.kinds else (),
            )
            for i, kind in enumerate(KINDS)
        )

    def region_views(self) -> dict[str, RegionView]:
        """How the planner sees the reconfigurable part: a region holding its kind."""
        held = self.part.holds
        sid = None if held is None else KINDS.index(held)
        return {self.part.name: RegionView(self.part.name, sid, error=False)}

    # -- what controllers see --------------------------------------------------------------------

    def flow_counts(self, upto: int | None = None) -> tuple[int, int, int]:
        """Packets of each flow among the first ``upto`` (default: all classified so far)."""
        h = self.head if upto is None else upto
        d, lz = self._cum_des[h], self._cum_lz[h]
        return (h - d - lz, d, lz)

    def snapshot(self) -> StatsSnapshot:
        """The statistics a controller reads now; starts the next statistics window."""
        now = self.now
        window_s = max(1e-12, (now - self._window_start) * 1e-6)
        total_now = self.flow_counts()
        before = self.flow_counts(self._window_head)
        counts = [n - b for n, b in zip(total_now, before, strict=True)]
        window_total = sum(counts)
        shares = [c / window_total if window_total else 0.0 for c in counts]
        self._window_start, self._window_head = now, self.head
        held = self.part.holds
        fifos = (self.fifo_in, self.fifo_des, self.fifo_lzc)
        unit_us = (
            self.model.flow_cycles[0] / self.model.params.processor_clock_mhz,
            self.model.des_us,
            self.model.lz_us,
        )
        gains = self._gains(shares) if window_total else (0.0, 0.0, 0.0)
        services = tuple(
            ServiceStats(
                service_id=i,
                interface=KINDS[i],
                tier="hardware" if held == KINDS[i] else "static",
                region=self.part.name if held == KINDS[i] else None,
                calls=total_now[i],
                rate_per_s=counts[i] / window_s,
                share=shares[i],
                mean_us=unit_us[i],
                queue_occupancy=fifos[i].occupancy,
                queue_length=fifos[i].level,
                hardware_capable=True,
                gain_us=gains[i],
            )
            for i in range(len(KINDS))
        )
        region = RegionStats(
            self.part.name,
            self.part.state.value,
            None if held is None else KINDS.index(held),
            reconfig_us=self.model.reconfig_us,
        )
        return StatsSnapshot(now * 1e-6, services, (region,), None)

    def _gains(self, shares: Sequence[float]) -> tuple[float, float, float]:
        """Modeled µs saved per call of each kind's flow if that kind held the part."""
        empty = self.model.per_packet_us(shares, None)
        out = []
        for i, kind in enumerate(KINDS):
            saved = empty - self.model.per_packet_us(shares, kind)
            out.append(saved / shares[i] if shares[i] > 0 else 0.0)
        return (out[0], out[1], out[2])

    def statistics(self) -> RouterStatistics:
        """A frozen snapshot of the pipeline (no side effects, unlike :meth:`snapshot`)."""
        return RouterStatistics(
            self.now,
            self.packets,
            self.head,
            self.done,
            (self.processors.count, self.des.count, self.lz.count),
            (self.fifo_in.level, self.fifo_des.level, self.fifo_lzc.level),
            self.part.holds,
            self.part.state.value,
            self.part.reconfigurations,
            self.refused,
        )

    def _result(self, policy: str) -> RouterRun:
        end = self.finished_at if self.finished_at is not None else math.inf
        return RouterRun(
            policy,
            self.packets,
            end,
            self.part.reconfigurations,
            self.part.reconfiguring_us,
            self.refused,
            tuple(self.switches),
        )

    def __repr__(self) -> str:
        return (
            f"<RouterSim t={self.now:.1f}us {self.done}/{self.packets} done, "
            f"units={self.processors.count}/{self.des.count}/{self.lz.count}, {self.part!r}>"
        )


def _prefix(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    out: npt.NDArray[np.int64] = np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))
    return out
