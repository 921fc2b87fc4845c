"""Juggle execution: the juggle primitive, tier changes, the juggle history, and the arbiter.

A :class:`Juggler` is the part of the framework that moves services between tiers. It owns
the juggle lock (one juggle at a time; other parts take it to keep services still) and the
tenant arbiter, the one allocator of the fabric's regions (:mod:`juggle.runtime.tenancy`):
a juggle asks the allocator first, then its plan runs as the decision core's actions through
:func:`juggle.core.execute.execute` (:mod:`juggle.runtime.juggling` carries out each step and
its undo). To the arbiter the juggler is its host (``TenancyHost``): the arbiter moves a
juggle-placed service out of a region a tenant of higher priority needs, and back later,
through :meth:`Juggler.preempt_to_software` and :meth:`Juggler.return_to_hardware`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence

from juggle.core.allocator import JuggleTicket
from juggle.core.placement import JugglePlan
from juggle.core.tiers import Tier
from juggle.errors import (
    ConfigurationError,
    FabricError,
    JuggleError,
    TierUnavailableError,
    UnknownServiceError,
)
from juggle.fabric.fabric import Fabric
from juggle.fabric.region import RegionState
from juggle.runtime.juggling import ActionMemo, JuggleAccount, JuggleSteps, juggle_actions
from juggle.runtime.lifecycle import Lifecycle
from juggle.runtime.options import FrameworkOptions
from juggle.runtime.services import ManagedService
from juggle.runtime.snapshots import JuggleReport
from juggle.runtime.supervisor import FaultLog
from juggle.runtime.table import ServiceTable
from juggle.runtime.tenancy import TenantArbiter

__all__ = ["Juggler"]

log = logging.getLogger("juggle")


class Juggler:
    """Carries out juggles on ``fabric`` for the services of ``table``, one at a time.

    ``faults`` is where the arbiter's contained faults are noted (the fault supervisor's
    log). The juggle lock is :attr:`lock`.
    """

    def __init__(
        self,
        fabric: Fabric,
        options: FrameworkOptions,
        table: ServiceTable,
        faults: FaultLog,
        lifecycle: Lifecycle,
    ) -> None:
        self.fabric = fabric
        self.options = options
        self.table = table
        self._faults = faults
        self._life = lifecycle
        #: the juggle lock: held while services move (reentrant: a juggle may start juggles)
        self.lock = threading.RLock()
        self._history: deque[JuggleReport] = deque(maxlen=options.history_capacity)
        self._history_lock = threading.Lock()
        self.juggle_count = 0
        self.reconfiguration_ms_total = 0.0
        self._running_in: int | None = None  # the thread carrying out a juggle's steps now
        self._memo: ActionMemo = {}  # the actions of juggles made before
        self._steps = JuggleSteps(fabric, options, table)  # carries out a juggle's actions
        # the one allocator: juggles and tenants; this juggler is its TenancyHost
        hold_ms = options.tenant_hold_ms
        self.arbiter = TenantArbiter(
            self,
            wait_timeout_s=options.drain_timeout_s,
            hysteresis_us=None if hold_ms is None else hold_ms * 1000.0,
        )

    # -- the juggle primitive ----------------------------------------------------------------

    def juggle(
        self, to_hardware: int | None = None, to_software: Iterable[int] = ()
    ) -> JuggleReport:
        """Put service ``to_hardware`` into the fabric and take ``to_software`` out of it (see
        :meth:`juggle.runtime.framework.Framework.juggle`, which says what it raises)."""
        if type(to_software) not in (list, tuple) and (
            isinstance(to_software, str | bytes) or not isinstance(to_software, Iterable)
        ):
            raise UnknownServiceError(
                f'"to_software" must be service ids (a list), got {to_software!r:.80}'
            )
        leaving_ids = list(to_software)
        with self.lock:
            t0 = time.perf_counter()
            entering = self.table.managed(to_hardware) if to_hardware is not None else None
            leaving = [self.table.managed(i) for i in leaving_ids]
            ticket = self._plan(entering, leaving)
            plan = ticket.plan
            try:
                done = self._run(plan, entering, leaving)
            except BaseException:
                self.arbiter.end_juggle(ticket, ok=False)
                raise
            self.arbiter.end_juggle(ticket, ok=True)
            moved = [*leaving, *([entering] if entering else [])]
            report = JuggleReport(
                to_hardware=to_hardware,
                to_software=tuple(leaving_ids),
                region=plan.region,
                steps=tuple(done.steps),
                reconfiguration_ms=done.reconfiguration_ms,
                bridge_ms=done.bridge_ms,
                overhead_us=(time.perf_counter() - t0 - done.waited_s - done.port_s) * 1e6,
                tiers={m.service_id: m.tier for m in moved},
            )
            self._remember(report)
            return report

    def _plan(
        self, entering: ManagedService | None, leaving: Sequence[ManagedService]
    ) -> JuggleTicket:
        """The allocator's decision (committed there; finish it with the arbiter's
        ``end_juggle``), with the fabric's own check of the chosen bitstream before any leaving
        service moves (with none, programming checks it first)."""
        ticket = self.arbiter.begin_juggle(entering, leaving)
        region = ticket.plan.region
        if entering is not None and region is not None and leaving:  # else program() checks
            assert entering.hardware is not None
            bitstream, _ = entering.hardware.bitstreams[region]
            try:
                self.fabric.check(bitstream, region, entering.hardware.resources_for(region))
            except BaseException:
                self.arbiter.end_juggle(ticket, ok=False)
                raise
        return ticket

    def _run(
        self,
        plan: JugglePlan,
        entering: ManagedService | None,
        leaving: Sequence[ManagedService],
    ) -> JuggleAccount:
        """Carry out ``plan`` (under the lock); on any failure undo what was done, settle the
        regions it touched and raise the error."""
        account = JuggleAccount()
        touched = {m.region for m in leaving if m.region is not None}
        if entering is not None and plan.region is not None:
            touched.add(plan.region)
        outer, self._running_in = self._running_in, threading.get_ident()
        try:
            actions = juggle_actions(plan, entering, leaving, self.fabric, self._memo)
            moving = [*leaving, entering] if entering is not None else leaving
            self._steps.run(actions, account, moving, plan.region)
        except BaseException:
            account.rollback()
            self.settle(sorted(touched), account)
            raise
        finally:
            self._running_in = outer
        return account

    def running_here(self) -> bool:
        """Whether the calling thread is inside a juggle's steps (a driver, a hook)."""
        return self._running_in == threading.get_ident()

    def settle(self, regions: Sequence[str], account: JuggleAccount | None = None) -> None:
        """After an undone juggle (or a stopped service): each of ``regions`` that holds a
        design no service serves from is unloaded, or discarded (ERROR, to be programmed
        afresh) when even the unload fails; a region some service serves from is left alone."""
        serving = {m.region for m in self.table.all() if m.region is not None}
        for region in regions:
            if region in serving:
                continue
            if self.fabric.region(region).snapshot().state is not RegionState.PROGRAMMED:
                continue  # EMPTY, or ERROR: nothing loaded that anyone could take for served
            try:
                self.fabric.unload(region)
                note = f"region {region} emptied: no service serves from it"
            except FabricError as exc:
                with contextlib.suppress(FabricError):
                    self.fabric.discard(
                        region, f"no service serves from it; unloading failed: {exc}"
                    )
                note = f"region {region} discarded (ERROR): unloading failed: {exc}"
            log.info("juggle: %s", note)
            if account is not None:
                account.steps.append(note)

    # -- tiers -------------------------------------------------------------------------------

    def set_tier(self, service_id: int, tier: str) -> JuggleReport:
        """Serve ``service_id`` from ``tier`` (see :meth:`Framework.set_tier
        <juggle.runtime.framework.Framework.set_tier>`, which says what it raises)."""
        m = self.table.managed(service_id)
        if tier not in tuple(Tier) or tier not in m.tiers():
            raise TierUnavailableError(
                f"service {service_id} ({m.interface_name}) has no {tier!r} tier "
                f"(it has: {', '.join(m.tiers())})",
                service_id=service_id,
                tier=tier,
            )
        if tier == Tier.HARDWARE:
            return self.juggle(to_hardware=service_id)
        with self.lock:
            if m.tier == Tier.HARDWARE:
                previous_home = m.home_tier
                m.home_tier = Tier(tier)
                try:
                    return self.juggle(to_hardware=None, to_software=[service_id])
                except BaseException:
                    m.home_tier = previous_home
                    raise
            t0 = time.perf_counter()
            switched = m.switch(tier)
            try:
                m.drain(switched, self.options.drain_timeout_s)
            except BaseException:
                m.drain(m.switch(switched.previous), self.options.drain_timeout_s)
                raise
            m.home_tier = Tier(tier)
            return JuggleReport(
                None,
                (),
                None,
                (f"proxies of service {service_id} switched to {tier}",),
                0.0,
                0.0,
                (time.perf_counter() - t0) * 1e6,
                {service_id: Tier(tier)},
            )

    # -- the arbiter's host (TenancyHost) ----------------------------------------------------

    @property
    def call_timeout_s(self) -> float:
        """How long a hardware call may poll a core without progress."""
        return self.options.call_timeout_s

    def note_fault(self, region: str, service_id: int, reason: str) -> None:
        """Log a contained fault of ``service_id`` in ``region`` (the framework's ``faults``)."""
        self._faults.note(region, service_id, reason)

    def preempt_to_software(self, service_id: int) -> bool:
        """A tenant of higher priority needs the region of juggle-placed ``service_id``: its
        proxies move to software (running calls finish in hardware) and the region is
        emptied, as a juggle out would (undone on failure). False: not drained yet."""
        with self.lock:
            m = self.table.find(service_id)
            if m is None or m.region is None or self._life.closed:
                return True  # it left the region meanwhile (stopped, faulted)
            t0 = time.perf_counter()
            try:
                done = self._run(JugglePlan(None, (service_id,), None, False), None, [m])
            except JuggleError as exc:
                log.warning("service %s: preemption deferred: %s", m.label, exc)
                return False
            self._note_move(None, (service_id,), None, done, t0, "preempted by a tenant", m)
            return True

    def return_to_hardware(self, service_id: int, region: str) -> bool:
        """The allocator gave preempted ``service_id`` ``region`` again: program it and switch
        the proxies back (undone on failure). False when that failed."""
        with self.lock:
            m = self.table.find(service_id)
            if m is None or self._life.closed or m.tier == Tier.HARDWARE:
                return False
            t0 = time.perf_counter()
            try:
                done = self._run(JugglePlan(service_id, (), region, False), m, [])
            except JuggleError as exc:
                log.warning("service %s: could not return to %s: %s", m.label, region, exc)
                return False
            self._note_move(service_id, (), region, done, t0, "back after a preemption", m)
            return True

    # -- history -----------------------------------------------------------------------------

    def history(self, limit: int | None = None) -> tuple[JuggleReport, ...]:
        """The newest juggles, oldest first: at most ``limit`` (None: all kept). Raises
        :class:`ConfigurationError` for a ``limit`` that is no int >= 0."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise ConfigurationError(
                f'"limit" must be an int >= 0 or None, got {limit!r}', value=limit
            )
        with self._history_lock:
            reports = tuple(self._history)
        if limit is None:
            return reports
        return reports[len(reports) - limit :] if limit else ()

    def forget_history(self) -> None:
        """Drop the kept reports (the counters stay)."""
        with self._history_lock:
            self._history.clear()

    def _note_move(
        self,
        entering: int | None,
        leaving: tuple[int, ...],
        region: str | None,
        done: JuggleAccount,
        t0: float,
        why: str,
        m: ManagedService,
    ) -> None:
        self._remember(
            JuggleReport(
                to_hardware=entering,
                to_software=leaving,
                region=region,
                steps=(why, *done.steps),
                reconfiguration_ms=done.reconfiguration_ms,
                bridge_ms=done.bridge_ms,
                overhead_us=(time.perf_counter() - t0 - done.waited_s - done.port_s) * 1e6,
                tiers={m.service_id: m.tier},
            )
        )

    def _remember(self, report: JuggleReport) -> None:
        with self._history_lock:
            self._history.append(report)
            self.juggle_count += 1
            self.reconfiguration_ms_total += report.reconfiguration_ms

    def __repr__(self) -> str:
        return f"<Juggler {self.juggle_count} juggles, {len(self._history)} kept>"
