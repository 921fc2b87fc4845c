"""Slots from the Ker-ONE allocator: the :class:`SlotProvider` protocol over :mod:`juggle.core`.

The allocator decides who gets which region; this module is its shell for hardware threads.
A thread's design name is the allocator's device name and each tenant asks through its own
view (:meth:`AllocatorSlots.for_tenant`), so requests carry the tenant's priority:

* ``acquire`` requests the device. *Assign* (after completing any reconfiguration at once,
  its modeled time counted) starts the device in its region and returns that region as the
  slot. *Unavailable* withdraws the request and returns None (the thread may run in
  software). *Preempt* returns None too: the running lower-priority task must first reach a
  consistency point. The shell hands that order to ``on_preempt`` (for a hardware thread,
  suspending it at its next yield point is exactly that); when the victim gives its slot back
  the region passes to this tenant, and its next ``acquire`` of the design gets it.
* ``release`` reports the end of the computation (a consistency point) and gives the device
  up, so the region is free for others.

A tenant holds at most one region per design (one virtual device per device, as in Ker-ONE);
a second instance of the same design gets None and may run in software.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from juggle.core.actions import (
    Action,
    Connect,
    Disconnect,
    Reconfigure,
    RestoreContext,
    SaveContext,
    Signal,
    Solution,
    SolutionKind,
    StopAtConsistencyPoint,
)
from juggle.core.allocator import Allocator
from juggle.core.execute import execute
from juggle.core.tenants import DeviceState
from juggle.errors import DeviceStateError
from juggle.hwthreads._slots import ThreadSlot


def _monotonic_us() -> float:
    return time.monotonic() * 1e6


@dataclass(frozen=True, slots=True)
class AllocatorSlotStatistics:
    """Snapshot of an :class:`AllocatorSlots` shell's counters."""

    requests: int
    assigned: int
    unavailable: int
    preemptions_started: int
    handovers: int
    reconfigurations: int
    reconfig_us_modeled: float
    actions: int


class AllocatorSlots:
    """The allocator's shell for hardware threads; one view per tenant is a slot provider.

    ``clock`` gives the time in microseconds stamped on every allocator event (default: the
    monotonic clock); ``on_preempt(region)`` is called (outside the shell's lock) when the
    allocator orders the task in ``region`` to stop at its next consistency point. All views
    share one lock, since the allocator itself is not thread-safe. The shell fills the table
    of :class:`~juggle.core.execute.Operations` and lets :func:`~juggle.core.execute.execute`
    dispatch the allocator's actions.
    """

    def __init__(
        self,
        allocator: Allocator,
        *,
        clock: Callable[[], float] = _monotonic_us,
        on_preempt: Callable[[str], None] | None = None,
    ) -> None:
        self.allocator = allocator
        self._clock = clock
        self._on_preempt = on_preempt
        self._lock = threading.Lock()
        self._designs = frozenset(device.name for device in allocator.index.devices)
        self._counts = {
            "requests": 0,
            "assigned": 0,
            "unavailable": 0,
            "preemptions_started": 0,
            "handovers": 0,
            "reconfigurations": 0,
            "actions": 0,
        }
        self._reconfig_us = 0.0
        self._orders: list[str] = []  # preemption orders to pass on once the lock is free
        self._pending: deque[Action] = deque()  # actions of the current _carry_out, in order
        self._now = 0.0  # the time stamped on the allocator events of the current _carry_out

    def for_tenant(self, tenant: str) -> TenantSlots:
        """The slot provider of ``tenant``.

        Raises:
            UnknownTenantError: the allocator has no such tenant.
        """
        self.allocator.tenant(tenant)
        return TenantSlots(self, tenant)

    # -- called by the tenant views, under the shared lock ------------------------------------

    def _acquire(self, tenant: str, priority: int | None, design: str) -> ThreadSlot | None:
        if design not in self._designs:
            return None
        with self._lock:
            slot = self._acquire_locked(tenant, priority, design)
            orders, self._orders = self._orders, []
        self._notify(orders)
        return slot

    def _acquire_locked(self, tenant: str, priority: int | None, design: str) -> ThreadSlot | None:
        now = self._clock()
        state = self.allocator.device_state(tenant, design)
        if state is DeviceState.CONNECTED:  # handed over after a preemption, or held
            return self._start(tenant, design, now, handover=True)
        if state is not DeviceState.DISCONNECTED:
            return None
        self._counts["requests"] += 1
        solution = self.allocator.request(tenant, design, now, priority=priority)
        self._carry_out(solution.actions, now)
        if solution.kind is SolutionKind.ASSIGN:
            self._counts["assigned"] += 1
            return self._start(tenant, design, now, handover=False)
        if solution.kind is SolutionKind.UNAVAILABLE:
            self._counts["unavailable"] += 1
            self._carry_out(self.allocator.release(tenant, design, now), now)
        return None

    def _notify(self, regions: list[str]) -> None:
        """Pass preemption orders on, outside the lock (the callback may call back in)."""
        if self._on_preempt is not None:
            for region in regions:
                self._on_preempt(region)

    def _start(self, tenant: str, design: str, now: float, *, handover: bool) -> ThreadSlot | None:
        region = self.allocator.connected_region(tenant, design)
        if region is None:
            return None
        try:
            self._carry_out(self.allocator.start(tenant, design, now), now)
        except DeviceStateError:  # the tenant's device already runs there
            return None
        if handover:
            self._counts["handovers"] += 1
        return ThreadSlot(region, frozenset({design}))

    def _release(self, tenant: str, slot: ThreadSlot) -> None:
        with self._lock:
            now = self._clock()
            for design in slot.designs:
                if self.allocator.connected_region(tenant, design) != slot.name:
                    continue
                self._carry_out(self.allocator.finish(tenant, design, now), now)
                if self.allocator.device_state(tenant, design) is DeviceState.CONNECTED:
                    self._carry_out(self.allocator.release(tenant, design, now), now)
            orders, self._orders = self._orders, []
        self._notify(orders)

    def _carry_out(self, actions: Iterable[Action], now: float) -> None:
        """Execute the allocator's actions, stamped ``now``, and then the ones each completed
        reconfiguration brings (queued behind those already pending)."""
        self._now = now
        self._pending = deque(actions)
        execute(self, self._drain())

    def _drain(self) -> Iterator[Action]:
        """Take the pending actions one at a time, counting each, until none is left."""
        while self._pending:
            self._counts["actions"] += 1
            yield self._pending.popleft()

    # -- the operations (juggle.core.execute.Operations) -------------------------------------

    def reconfigure(self, action: Reconfigure) -> None:
        """Complete the load at once: count its modeled time, queue the actions that follow."""
        self._counts["reconfigurations"] += 1
        self._reconfig_us += action.t_rcfg_us
        self._pending.extend(self.allocator.reconfigured(action.region, self._now, ok=True))

    def connect(self, action: Connect) -> None:
        """Nothing to do: a hardware thread finds its region through the slot it acquires."""

    def disconnect(self, action: Disconnect) -> None:
        """Nothing to do: a device is disconnected only after its thread gave its slot back."""

    def save_context(self, action: SaveContext) -> None:
        """Nothing to do: a hardware thread keeps its own context."""

    def restore_context(self, action: RestoreContext) -> None:
        """Nothing to do: a hardware thread keeps its own context."""

    def stop_at_consistency_point(self, action: StopAtConsistencyPoint) -> None:
        """Queue the order for ``on_preempt``, which runs once the shell's lock is free."""
        self._counts["preemptions_started"] += 1
        self._orders.append(action.region)

    def signal(self, action: Signal) -> None:
        """Nothing to do: ``acquire``'s answer (a slot or None) and ``on_preempt`` tell threads."""

    def solution(self, action: Solution) -> None:
        """Nothing to do: it announces a later solution whose actions follow in the list."""

    def statistics(self) -> AllocatorSlotStatistics:
        """A frozen snapshot of the shell's counters."""
        with self._lock:
            c = self._counts
            return AllocatorSlotStatistics(
                c["requests"],
                c["assigned"],
                c["unavailable"],
                c["preemptions_started"],
                c["handovers"],
                c["reconfigurations"],
                self._reconfig_us,
                c["actions"],
            )

    def __repr__(self) -> str:
        c = self._counts
        return f"<AllocatorSlots {c['requests']} requests, {c['assigned']} assigned>"


class TenantSlots:
    """One tenant's :class:`SlotProvider` view of an :class:`AllocatorSlots` shell."""

    def __init__(self, shell: AllocatorSlots, tenant: str) -> None:
        self.shell = shell
        self.tenant = tenant

    def acquire(self, priority: int | None, design: str) -> ThreadSlot | None:
        """The region the allocator assigns to this tenant's ``design``, started; or None.

        ``priority`` None means the tenant's priority; a given one may only lower it.

        Raises:
            PriorityError: ``priority`` is above the tenant's.
        """
        return self.shell._acquire(self.tenant, priority, design)

    def release(self, slot: ThreadSlot) -> None:
        """The computation in ``slot`` ended: report it and give the device up."""
        self.shell._release(self.tenant, slot)

    def __repr__(self) -> str:
        return f"<TenantSlots {self.tenant!r} of {self.shell!r}>"
