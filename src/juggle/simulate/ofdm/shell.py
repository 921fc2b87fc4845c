"""The virtual-time shell of the OFDM experiment: it carries out allocator actions in SimPy.

The allocator decides; this shell is the fabric and the Virtual Device Manager around it. A
``Reconfigure`` takes the region's modeled T_RCFG of virtual time, a ``StopAtConsistencyPoint``
raises a flag the running task checks at its next consistency point, contexts are saved and
restored through each region's fake device (its whole state is ``(job id, chunks done)``), and
READY reaches a waiting task after the Ker-ONE path overhead (Eq. 6). Every allocator call is
timed with the wall clock (measured) and every allocation's latency is computed in virtual time
(modeled); the two are kept apart.

The shell also keeps a :class:`Timeline` of who held each region when (modeled, virtual µs):
connections, reconfigurations, the jobs' runs and every preemption from its stop order to the
consistency point. Keeping it changes nothing in the simulation; ``simulate ofdm --plot``
draws it.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from juggle.core.actions import (
    Connect,
    Disconnect,
    Reconfigure,
    RestoreContext,
    SaveContext,
    Signal,
    Solution,
    StopAtConsistencyPoint,
)
from juggle.core.allocator import Allocator
from juggle.core.execute import execute
from juggle.core.tenants import SignalKind
from juggle.simulate.ofdm.costs import PATH_US

__all__ = ["Allocation", "Interval", "OfdmFabric", "Preemption", "Timeline"]

_CTX = struct.Struct("<II")

Key = tuple[str, str]


@dataclass(slots=True)
class Allocation:
    """One solved request, as the experiment saw it (virtual µs unless named measured)."""

    tenant: str
    device: str
    path: int
    requested_at: float
    solved_at: float
    decision_ns_measured: int
    stop_ordered_at: float | None = None
    stopped_at: float | None = None
    rcfg_us: float = 0.0
    ready_at: float | None = None

    @property
    def queued_us(self) -> float:
        """Time on the wait list before the solution was found."""
        return self.solved_at - self.requested_at

    @property
    def preempt_us(self) -> float:
        """Wait from the stop order to the consistency point (paths 3 and 4)."""
        if self.stop_ordered_at is None or self.stopped_at is None:
            return 0.0
        return self.stopped_at - self.stop_ordered_at

    @property
    def latency_us(self) -> float:
        """Eq. 6 as it happened: the path overhead plus the preemption wait plus T_RCFG."""
        assert self.ready_at is not None
        return self.ready_at - self.solved_at


@dataclass(frozen=True, slots=True)
class Interval:
    """A stretch of virtual time (µs) on one region.

    ``kind``: ``held`` (the region connected to ``tenant``'s ``device``), ``run`` (job ``job``
    computing there) or ``rcfg`` (the region reconfigured for ``device``). ``end`` says how it
    ended: for a run ``done`` or ``stopped`` (at a consistency point, preempted); ``cut`` when
    the simulation ended first; empty otherwise.
    """

    region: str
    kind: str
    start_us: float
    end_us: float
    tenant: str
    device: str
    job: int = 0
    end: str = ""


@dataclass(slots=True)
class Preemption:
    """A stop order on ``region`` (virtual µs): ``tenant``'s ``device`` is asked to stop at
    ``ordered_us`` for ``by_tenant``'s ``by_device``; ``stopped_us`` is its consistency point
    (None if the simulation ended first)."""

    region: str
    tenant: str
    device: str
    by_tenant: str
    by_device: str
    ordered_us: float
    stopped_us: float | None = None


@dataclass(slots=True)
class Timeline:
    """Who had each region when (all modeled, virtual µs), in the order things ended."""

    regions: tuple[str, ...]
    intervals: list[Interval] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    end_us: float = 0.0

    def of(self, region: str, kind: str) -> list[Interval]:
        """The intervals of one kind on one region, by start time."""
        found = [i for i in self.intervals if i.region == region and i.kind == kind]
        return sorted(found, key=lambda i: (i.start_us, i.end_us))


@dataclass(slots=True)
class _Counters:
    signals: dict[str, int] = field(default_factory=dict)
    context_mismatches: int = 0
    violations: list[str] = field(default_factory=list)
    unavailable_ns_measured: list[int] = field(default_factory=list)


class OfdmFabric:
    """Executes an allocator's actions in a SimPy environment and records allocations.

    It implements :class:`~juggle.core.execute.Operations`; :meth:`call` hands what an
    allocator entry point returns to :func:`~juggle.core.execute.execute`.
    """

    def __init__(self, env: simpy.Environment, allocator: Allocator) -> None:
        self.env = env
        self.alloc = allocator
        self.device_ctx: dict[str, bytes] = {r.name: b"" for r in allocator.index.regions}
        self.connected: dict[str, Key] = {}
        self.stop_flag: dict[str, bool] = {r.name: False for r in allocator.index.regions}
        self.saved: dict[Key, bytes] = {}
        self.done: list[Allocation] = []
        self.counters = _Counters()
        self._open: dict[Key, Allocation] = {}
        self._requested: dict[Key, float] = {}
        self._ready: dict[Key, simpy.Event] = {}
        self._preempted: dict[Key, bool] = {}
        self.running: dict[str, simpy.Process] = {}
        self._timers: set[float] = set()
        self._in_delivery: set[Key] = set()
        self._preempting: dict[str, Allocation] = {}
        self._reconfiguring: dict[str, Allocation] = {}
        self._elapsed = 0  # wall-clock ns of the allocator call whose actions are executing
        self.timeline = Timeline(tuple(self.device_ctx))
        self._held: dict[str, tuple[str, str, float]] = {}
        self._rcfg_since: dict[str, tuple[float, str, str]] = {}
        self._runs: dict[str, tuple[str, str, int, float]] = {}
        self._stops: dict[str, Preemption] = {}

    def __repr__(self) -> str:
        return (
            f"<OfdmFabric t={self.env.now:.1f}us {len(self.connected)} connected, "
            f"{len(self.done)} allocations, {len(self._open)} in progress>"
        )

    # -- calling the allocator -------------------------------------------------------------

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Call an allocator entry point, time it (wall clock), carry out what it returns."""
        t0 = time.perf_counter_ns()
        result = fn(*args)
        self._elapsed = time.perf_counter_ns() - t0
        if isinstance(result, Solution):  # request(): the solution, then its actions
            self.solution(result)
            execute(self, result.actions)
        else:
            execute(self, result)
        deadline = self.alloc.next_deadline()
        if deadline is not None and deadline not in self._timers:
            self._timers.add(deadline)
            self.env.process(self._timer(deadline))

    def request(self, tenant: str, device: str) -> None:
        """The tenant touched its disconnected device."""
        self._requested[(tenant, device)] = self.env.now
        self.call(self.alloc.request, tenant, device, self.env.now)

    def ready_event(self, key: Key) -> simpy.Event:
        """The event a task waits on until its device is READY (created on demand)."""
        event = self._ready.get(key)
        if event is None:
            event = self._ready[key] = self.env.event()
        return event

    def awaiting(self, key: Key) -> bool:
        """Whether a READY for ``key`` is still on its way or not yet consumed."""
        return key in self._open or key in self._in_delivery or key in self._ready

    def consume_ready(self, key: Key) -> None:
        """Forget a READY that was waited for."""
        self._ready.pop(key, None)

    def take_preempted(self, key: Key) -> bool:
        """Whether ``key`` got a PREEMPT signal since the last call (then clear it)."""
        return self._preempted.pop(key, False)

    def _timer(self, deadline: float) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(max(0.0, deadline - self.env.now))
        self._timers.discard(deadline)
        self.call(self.alloc.advance, self.env.now)

    # -- the operations (juggle.core.execute.Operations) -------------------------------------

    def reconfigure(self, action: Reconfigure) -> None:
        """Blank the region's device and load through PCAP for the modeled T_RCFG."""
        self.device_ctx[action.region] = b""
        by = self._reconfiguring.get(action.region)
        tenant = "" if by is None else by.tenant
        self._rcfg_since[action.region] = (self.env.now, tenant, action.device)
        self.env.process(self._pcap(action))

    def connect(self, action: Connect) -> None:
        """Connect the device to the region, noting a region connected twice."""
        if action.region in self.connected:
            self.counters.violations.append(f"{action.region} connected twice")
            self._end_held(action.region)
        self.connected[action.region] = (action.tenant, action.device)
        self._held[action.region] = (action.tenant, action.device, self.env.now)

    def disconnect(self, action: Disconnect) -> None:
        """Disconnect the region."""
        self.connected.pop(action.region, None)
        self._end_held(action.region)

    def save_context(self, action: SaveContext) -> None:
        """Store the region's device context in the interface (and here, to check restores)."""
        data = self.device_ctx[action.region]
        action.interface.save(data)
        self.saved[(action.tenant, action.device)] = data

    def restore_context(self, action: RestoreContext) -> None:
        """Put the interface's context into the region's device, counting a mismatch."""
        data = action.interface.load()
        if data != self.saved.get((action.tenant, action.device), b""):
            self.counters.context_mismatches += 1
        self.device_ctx[action.region] = data

    def stop_at_consistency_point(self, action: StopAtConsistencyPoint) -> None:
        """Raise the region's stop flag and wake its task so it checks the flag."""
        self.stop_flag[action.region] = True
        by = self._preempting.get(action.region)
        self._stops[action.region] = Preemption(
            action.region,
            action.tenant,
            action.device,
            "" if by is None else by.tenant,
            "" if by is None else by.device,
            self.env.now,
        )
        task = self.running.get(action.region)
        if task is not None and task is not self.env.active_process:
            task.interrupt("stop at the next consistency point")

    def solution(self, action: Solution) -> None:
        """Open the allocation of a solved request (or note an Unavailable one), stamped with
        the measured time of the allocator call that returned it."""
        elapsed = self._elapsed
        key = (action.tenant, action.device)
        if action.path == 0:
            self._requested.setdefault(key, action.at)
            self.counters.unavailable_ns_measured.append(elapsed)
            return
        allocation = Allocation(
            action.tenant,
            action.device,
            action.path,
            self._requested.pop(key, action.at),
            action.at,
            elapsed,
        )
        region = action.region
        assert region is not None
        if action.path in (3, 4):
            allocation.stop_ordered_at = action.at
            self._preempting[region] = allocation
        if action.reconfig:
            self._reconfiguring[region] = allocation
        self._open[key] = allocation

    def signal(self, action: Signal) -> None:
        """Count the signal; PREEMPT marks the task, READY reaches it after the path overhead."""
        name = action.signal.value
        self.counters.signals[name] = self.counters.signals.get(name, 0) + 1
        key = (action.tenant, action.device)
        if action.signal is SignalKind.PREEMPT:
            self._preempted[key] = True
            return
        if action.signal is SignalKind.WAIT:
            return
        allocation = self._open.pop(key, None)
        if allocation is None:
            self.counters.violations.append(f"READY for {key} without a solution")
            return
        self._in_delivery.add(key)
        self.env.process(self._deliver(key, allocation))

    def _deliver(self, key: Key, allocation: Allocation) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(PATH_US[allocation.path])
        allocation.ready_at = self.env.now
        self._in_delivery.discard(key)
        self.done.append(allocation)
        self.ready_event(key).succeed()

    def _pcap(self, action: Reconfigure) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(action.t_rcfg_us)
        allocation = self._reconfiguring.pop(action.region, None)
        if allocation is not None:
            allocation.rcfg_us = action.t_rcfg_us
        since, tenant, device = self._rcfg_since.pop(
            action.region, (self.env.now - action.t_rcfg_us, "", action.device)
        )
        self.timeline.intervals.append(
            Interval(action.region, "rcfg", since, self.env.now, tenant, device)
        )
        self.call(self.alloc.reconfigured, action.region, self.env.now)

    # -- the device model ----------------------------------------------------------------

    def consistency_point(self, region: str) -> bool:
        """The task in ``region`` reached a consistency point; returns whether it must stop
        there (a preemption is pending), noting when the stop happened."""
        if not self.stop_flag[region]:
            return False
        self.stop_flag[region] = False
        allocation = self._preempting.pop(region, None)
        if allocation is not None:
            allocation.stopped_at = self.env.now
        stop = self._stops.pop(region, None)
        if stop is not None:
            stop.stopped_us = self.env.now
            self.timeline.preemptions.append(stop)
        return True

    def progress(self, region: str, job_id: int) -> int:
        """Chunks of job ``job_id`` already done, from the device's (restored) context."""
        data = self.device_ctx[region]
        if len(data) != _CTX.size:
            return 0
        saved_job, chunks = _CTX.unpack(data)
        return int(chunks) if saved_job == job_id else 0

    def record_progress(self, region: str, job_id: int, chunks: int) -> None:
        """The device in ``region`` finished chunk number ``chunks`` of job ``job_id``."""
        self.device_ctx[region] = _CTX.pack(job_id & 0xFFFFFFFF, chunks)

    # -- the timeline ---------------------------------------------------------------------

    def run_started(self, region: str, tenant: str, device: str, job: int) -> None:
        """Job ``job`` of ``tenant``'s ``device`` starts (or resumes) computing in ``region``."""
        self._runs[region] = (tenant, device, job, self.env.now)

    def run_ended(self, region: str, how: str) -> None:
        """The job computing in ``region`` ended (``done``) or reached the consistency point
        it was told to stop at (``stopped``); a run of no length is not kept."""
        started = self._runs.pop(region, None)
        if started is None:
            return
        tenant, device, job, since = started
        if self.env.now > since:
            self.timeline.intervals.append(
                Interval(region, "run", since, self.env.now, tenant, device, job, how)
            )

    def close_timeline(self) -> Timeline:
        """End every interval still open at the simulation's end (``cut``); the timeline."""
        now = self.env.now
        for region in list(self._runs):
            tenant, device, job, since = self._runs.pop(region)
            if now > since:
                self.timeline.intervals.append(
                    Interval(region, "run", since, now, tenant, device, job, "cut")
                )
        for region, (since, tenant, device) in self._rcfg_since.items():
            self.timeline.intervals.append(
                Interval(region, "rcfg", since, now, tenant, device, 0, "cut")
            )
        self._rcfg_since.clear()
        for region in list(self._held):
            self._end_held(region, "cut")
        self.timeline.preemptions.extend(self._stops.values())
        self._stops.clear()
        self.timeline.end_us = now
        return self.timeline

    def _end_held(self, region: str, how: str = "") -> None:
        held = self._held.pop(region, None)
        if held is not None and self.env.now > held[2]:
            tenant, device, since = held
            self.timeline.intervals.append(
                Interval(region, "held", since, self.env.now, tenant, device, 0, how)
            )
