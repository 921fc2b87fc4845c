"""The Ker-ONE fabric allocator: requests in, solutions and actions out (paper 4.3-4.4).

Think of a small restaurant with three tables of different sizes. A guest (a tenant's virtual
device) that finds its table taken asks the host (:meth:`Allocator.request`). The host seats it
at the smallest free table that fits (Assign), or, for a guest of higher rank, asks a lower-rank
diner to leave after the current course (Preempt, at the task's next consistency point); a table
laid for another menu is re-laid first (Reconfig). Otherwise the guest waits in line: highest
rank first, first come first served within a rank. A freshly seated guest's table is held for
it for ``hold_us``. Equal ranks never displace each other and a real-time diner is never asked
to leave.

Hysteresis (``hysteresis_us``, off unless set): a guest who just got a table keeps it between
courses. A computation that ends while the region's hysteresis hold runs returns the region to
Hold, reserved for its client, instead of Idle; each such end renews the hold while no request
of the same or a higher priority waits for the region. Only a request of higher priority takes
a held region its client has used (at once, as an Idle one); lower and equal ones wait until the
hold runs out. So a high-priority tenant's stream of short calls keeps its region instead of
handing it back after every call and preempting it again (two reconfigurations per call). The
default (``hysteresis_us=None``) is :data:`HYSTERESIS_FACTOR` times the modeled reconfiguration
time of the bitstream loaded for the client: a take-back costs two reconfigurations, so the
region stays reserved as long as a take-back would occupy the configuration port (the
rent-or-buy break-even).

The allocator is deterministic and clock-free: every entry point takes the current time
``now`` (microseconds, any monotonic origin) and returns what to do as action values
(:mod:`juggle.core.actions`). The shell reports back what happened: ``start``/``finish`` of a
computation, ``stopped`` at a consistency point, ``reconfigured`` (or failed), and the passing
of time with ``advance``. Time that passes also lets holds expire; the actions that causes are
returned by the next call.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from juggle.core.actions import (
    Action,
    Disconnect,
    Solution,
    SolutionKind,
    connect_actions,
    evict_actions,
    reconfigure,
)
from juggle.core.allocstats import (
    AllocatorRegion,
    AllocatorStats,
    DeviceStats,
    TenantStats,
    WaitingRequest,
)
from juggle.core.placement import JugglePlan, RegionView, ServiceView, plan_juggle
from juggle.core.regionfsm import RegionMachine, RegionPhase
from juggle.core.taskindex import DeviceSpec, ProfileSource, TaskDescriptor, TaskIndex
from juggle.core.tenants import (
    DeviceInterface,
    DeviceState,
    ProgrammingModel,
    Tenant,
    TenantDevice,
)
from juggle.errors import (
    AllocatorError,
    DeviceStateError,
    DuplicateTenantError,
    IllegalTransitionError,
    NoCompatibleRegionError,
    PriorityError,
    SanityCheckError,
    TimeOrderError,
    UnknownDeviceError,
    UnknownRegionError,
    UnknownTenantError,
)

__all__ = ["HYSTERESIS_FACTOR", "Allocator", "JuggleTicket", "RegionSlot"]

#: The derived hysteresis hold, in reconfiguration times of the bitstream loaded for the client
#: (``hysteresis_us=None``): a take-back costs two reconfigurations (the other design in, the
#: holder's back), so the region waits that long for its client before it is given away.
HYSTERESIS_FACTOR = 2.0

_IDLE = RegionPhase.IDLE
_BUSY = RegionPhase.BUSY
_PREEMPT = RegionPhase.PREEMPT
_SWITCH = RegionPhase.SWITCH
_RECONFIG = RegionPhase.RECONFIG
_HOLD = RegionPhase.HOLD
_ERROR = RegionPhase.ERROR
_DISCONNECTED = DeviceState.DISCONNECTED
_WAITING = DeviceState.WAITING
_PENDING = DeviceState.PENDING
_CONNECTED = DeviceState.CONNECTED
_ASSIGN = SolutionKind.ASSIGN
_PREEMPT_KIND = SolutionKind.PREEMPT
_UNAVAILABLE = SolutionKind.UNAVAILABLE
_INF = float("inf")
_NO_DESIGN = -1


class RegionSlot(RegionMachine):
    """The allocator's descriptor of one region (the paper's PRR Descriptor): state, loaded
    design, connected client and its priority, and the solution in progress, if any.

    Internal and mutable; readers get :class:`~juggle.core.allocstats.AllocatorRegion`.
    """

    __slots__ = (
        "client",
        "design",
        "dev_ids",
        "hold_stamp",
        "hold_until",
        "incoming",
        "incoming_desc",
        "incoming_reconfig",
        "index",
        "keep_until",
        "kept",
        "occ_prio",
        "occ_rt",
        "slices",
    )

    def __init__(self, name: str, index: int, slices: int) -> None:
        super().__init__(name)
        self.index = index
        self.slices = slices
        self.design = _NO_DESIGN
        self.client: TenantDevice | None = None
        self.occ_prio = -1
        self.occ_rt = False
        self.incoming: TenantDevice | None = None
        self.incoming_desc: TaskDescriptor | None = None
        self.incoming_reconfig = False
        self.hold_until = _INF
        self.hold_stamp = 0  # which entry of the allocator's hold heap is this region's
        self.keep_until = -_INF  # end of the client's hysteresis hold
        self.kept = False  # in Hold after its client computed (a higher priority may take it)
        self.dev_ids: tuple[int, ...] = ()


@dataclass(slots=True)
class JuggleTicket:
    """A juggle the allocator committed to (:meth:`Allocator.juggle`); the shell carries it
    out and reports the outcome with :meth:`Allocator.juggled`.

    ``plan`` is the planner's decision; ``actions`` must be carried out before the juggle's
    own steps (an idle client moved off the entering region: its context saved, then it is
    disconnected; hold expiries that were due).
    """

    plan: JugglePlan
    tenant: str
    entering: str | None
    leaving: tuple[str, ...]
    actions: tuple[Action, ...]
    vd: TenantDevice | None
    slot: RegionSlot | None
    legs: tuple[tuple[TenantDevice, RegionSlot, int, bool], ...]
    done: bool = False

    @property
    def region(self) -> str | None:
        """The region the entering device goes to (None: nothing enters)."""
        return self.plan.region


class Allocator:
    """Arbitrates the regions of one fabric among tenants (see the module docstring).

    ``priority_levels`` priorities exist, 0 (lowest) to ``priority_levels - 1``, which is the
    real-time class; general-purpose tenants get 0 unless told otherwise. ``hold_us`` is how
    long an allocated region stays reserved for its client before it may be reassigned.
    ``hysteresis_us`` is the hysteresis hold (see the module docstring): 0 (the default) turns
    it off, None derives it per region as ``hysteresis_factor`` times the modeled
    reconfiguration time of the bitstream loaded for the client.

    Raises :class:`~juggle.errors.PriorityError` if ``priority_levels < 2`` and
    :class:`~juggle.errors.AllocatorError` if ``hold_us`` or ``hysteresis_us`` is negative
    or not a number, or ``hysteresis_factor`` is not a positive finite number.
    """

    def __init__(
        self,
        index: TaskIndex,
        *,
        priority_levels: int = 2,
        hold_us: float = 100.0,
        hysteresis_us: float | None = 0.0,
        hysteresis_factor: float = HYSTERESIS_FACTOR,
    ) -> None:
        if priority_levels < 2:
            raise PriorityError(
                f'"priority_levels" must be >= 2 (one general-purpose, one real-time); got '
                f"{priority_levels}",
                value=priority_levels,
            )
        if not hold_us >= 0:
            raise AllocatorError(f'"hold_us" must be >= 0; got {hold_us}', value=hold_us)
        _check_hysteresis(hysteresis_us, hysteresis_factor)
        self._index = index
        self._levels = priority_levels
        self._top = priority_levels - 1
        self._hold_us = float(hold_us)
        self._hysteresis_us = None if hysteresis_us is None else float(hysteresis_us)
        self._hysteresis_factor = float(hysteresis_factor)
        self._slots = tuple(RegionSlot(r.name, i, r.slices) for i, r in enumerate(index.regions))
        self._slot_by_name = {s.name: s for s in self._slots}
        self._dev_names = tuple(d.name for d in index.devices)
        self._dev_id = {name: i for i, name in enumerate(self._dev_names)}
        self._compat = tuple(
            tuple((self._slot_by_name[t.region], t) for t in index.compatible(name))
            for name in self._dev_names
        )
        for slot in self._slots:
            slot.dev_ids = tuple(
                i for i, seats in enumerate(self._compat) if any(s is slot for s, _ in seats)
            )
        self._queues = tuple(
            tuple(deque[TenantDevice]() for _ in range(priority_levels)) for _ in self._dev_names
        )
        self._waiting_at = [0] * priority_levels
        # (until, stamp, region): an entry counts while the region is in Hold with that stamp
        self._holds: list[tuple[float, int, RegionSlot]] = []
        self._stamp = 0
        self._next_expiry = _INF
        self._outbox: list[Action] = []
        self._tenants: dict[str, Tenant] = {}
        self._now = float("-inf")
        self._seq = 0
        self._requests = 0
        self._paths = [0, 0, 0, 0, 0]
        self._preemptions = 0
        self._reconfigs = 0
        self._reconfig_failures = 0
        self._expiries = 0
        self._withdrawn = 0
        self._owners: dict[int, int | None] = dict.fromkeys(range(len(self._dev_names)))

    @classmethod
    def from_profile(
        cls,
        profile: ProfileSource,
        *,
        priority_levels: int = 2,
        hold_us: float = 100.0,
        hysteresis_us: float | None = 0.0,
        hysteresis_factor: float = HYSTERESIS_FACTOR,
    ) -> Allocator:
        """An allocator over a board profile's ``[[devices]]`` and regions.

        Raises :class:`~juggle.errors.TaskIndexError` if the profile lists no devices, and
        what :class:`Allocator` raises for bad arguments.
        """
        return cls(
            TaskIndex.from_profile(profile),
            priority_levels=priority_levels,
            hold_us=hold_us,
            hysteresis_us=hysteresis_us,
            hysteresis_factor=hysteresis_factor,
        )

    # -- configuration -------------------------------------------------------------------

    @property
    def index(self) -> TaskIndex:
        """The hardware task index this allocator places devices by."""
        return self._index

    @property
    def priority_levels(self) -> int:
        """Number of priority levels; the highest, ``priority_levels - 1``, is real-time."""
        return self._levels

    @property
    def realtime_priority(self) -> int:
        """The real-time class's priority."""
        return self._top

    @property
    def hold_us(self) -> float:
        """How long an allocated region stays reserved for its client."""
        return self._hold_us

    @property
    def hysteresis_us(self) -> float | None:
        """The hysteresis hold: a fixed time, 0 (off), or None (derived per region)."""
        return self._hysteresis_us

    @property
    def hysteresis_factor(self) -> float:
        """Reconfiguration times a derived hysteresis hold lasts."""
        return self._hysteresis_factor

    def set_hysteresis(
        self, hysteresis_us: float | None, *, factor: float = HYSTERESIS_FACTOR
    ) -> None:
        """Change the hysteresis hold (a reloaded policy): holds granted or renewed from now
        on last ``hysteresis_us`` (0: off; None: ``factor`` reconfiguration times); holds
        running now end when they were due.

        Raises :class:`~juggle.errors.AllocatorError` as :class:`Allocator` does; nothing
        changes then.
        """
        _check_hysteresis(hysteresis_us, factor)
        self._hysteresis_us = None if hysteresis_us is None else float(hysteresis_us)
        self._hysteresis_factor = float(factor)

    def hysteresis_for(self, region: str, device: str | None = None) -> float:
        """The hysteresis hold ``region`` gets now for a client of ``device`` (default: the
        design loaded there; 0 with none loaded and a derived hold), in microseconds.

        Raises :class:`~juggle.errors.UnknownRegionError` and
        :class:`~juggle.errors.UnknownDeviceError`.
        """
        slot = self._slot(region)
        if device is None:
            return self._keep_us(slot, slot.design)
        dev_id = self._dev_id.get(device)
        if dev_id is None:
            raise self._unknown_device(device)
        return self._keep_us(slot, dev_id)

    def add_tenant(
        self,
        name: str,
        *,
        realtime: bool = False,
        priority: int | None = None,
        model: ProgrammingModel = ProgrammingModel.NATIVE,
    ) -> Tenant:
        """Register a tenant with one virtual device per device of the index.

        A real-time tenant gets the top priority; a general-purpose one gets ``priority``
        (default 0), which must lie below it.

        Raises :class:`~juggle.errors.DuplicateTenantError` for a name already taken and
        :class:`~juggle.errors.PriorityError` for a priority out of range for the class.
        """
        if name in self._tenants:
            raise DuplicateTenantError(f"tenant {name!r} is already registered", tenant=name)
        prio = self._class_priority(name, realtime, priority)
        tenant = Tenant(name, prio, realtime, model)
        for dev_id, spec in enumerate(self._index.devices):
            tenant.devices[spec.name] = TenantDevice(
                tenant, spec.name, dev_id, self._compat[dev_id], spec.context_bytes
            )
        self._tenants[name] = tenant
        return tenant

    def tenant(self, name: str) -> Tenant:
        """The tenant called ``name``.

        Raises :class:`~juggle.errors.UnknownTenantError`.
        """
        tenant = self._tenants.get(name)
        if tenant is None:
            raise self._unknown_tenant(name)
        return tenant

    def interface(self, tenant: str, device: str) -> DeviceInterface:
        """``tenant``'s own interface of ``device`` (registers and context buffer).

        Raises :class:`~juggle.errors.UnknownTenantError` or
        :class:`~juggle.errors.UnknownDeviceError`.
        """
        return self._vdev(tenant, device).interface

    # -- events in, actions out ----------------------------------------------------------

    def request(
        self, tenant: str, device: str, now: float, *, priority: int | None = None
    ) -> Solution:
        """``tenant`` touched its disconnected ``device``: find a solution now.

        Idle compatible regions come first, smallest first (a region held for a client of lower
        priority that used it counts as Idle: hysteresis); otherwise the smallest busy region
        whose running task has a lower priority and is not real-time is preempted; otherwise
        the request waits (Unavailable). ``priority`` defaults to the tenant's and may only be
        lowered. Nothing changes when this raises.

        Raises :class:`~juggle.errors.UnknownTenantError`,
        :class:`~juggle.errors.UnknownDeviceError`, :class:`~juggle.errors.PriorityError`,
        :class:`~juggle.errors.NoCompatibleRegionError` (no region can hold the device),
        :class:`~juggle.errors.TimeOrderError` (``now`` before an earlier event) and
        :class:`~juggle.errors.DeviceStateError` (the device is connected or already has an
        outstanding request).
        """
        t, prio = self._asker(tenant, priority)
        vd = t.devices.get(device)
        if vd is None:
            raise self._unknown_device(device)
        if not vd.compat:
            raise NoCompatibleRegionError(
                f"no region of the fabric can hold device {device!r}", device=device
            )
        if not now >= self._now:  # also refuses NaN
            raise self._time_error(now)
        if vd.state is not _DISCONNECTED:
            raise self._state_error(vd, "request")
        self._now = now
        pre = self._begin(now) if (self._outbox or self._next_expiry <= now) else None
        self._seq += 1
        vd.seq = self._seq
        vd.priority = prio
        vd.requested_at = now
        self._requests += 1
        return self._search(vd, now, pre)

    def start(self, tenant: str, device: str, now: float) -> list[Action]:
        """``tenant`` starts a computation on its connected ``device`` (Hold/Idle → Busy).

        A waiting request of higher priority may then preempt it right away.

        Raises :class:`~juggle.errors.UnknownTenantError`,
        :class:`~juggle.errors.UnknownDeviceError`, :class:`~juggle.errors.TimeOrderError`
        and :class:`~juggle.errors.DeviceStateError` (not connected, already running, or its
        region was given away when its hold expired before ``now``).
        """
        vd = self._vdev(tenant, device)
        self._check_time(now)
        slot = vd.region
        if vd.state is not _CONNECTED or slot is None or slot.state not in (_HOLD, _IDLE):
            raise self._state_error(vd, "start")
        expired_at = slot.hold_until
        out = self._begin(now)
        if vd.state is not _CONNECTED:
            self._outbox = out
            raise DeviceStateError(
                f"{tenant}/{device}: its hold on region {slot.name!r} expired at "
                f"{expired_at} and the region was given to a waiting request; request again",
                tenant=tenant,
                device=device,
            )
        slot.to(_BUSY)
        if not slot.occ_rt:
            self._serve_busy(slot, now, out)
        return out

    def finish(self, tenant: str, device: str, now: float) -> list[Action]:
        """``tenant``'s computation on ``device`` is over (Busy → Idle, or Busy → Hold while
        its hysteresis hold runs; the device stays connected until someone needs the region).
        If a preemption was pending, this is the consistency point it waited for: the region
        goes to the preempting request.

        Raises :class:`~juggle.errors.UnknownTenantError`,
        :class:`~juggle.errors.UnknownDeviceError`, :class:`~juggle.errors.TimeOrderError`
        and :class:`~juggle.errors.DeviceStateError` (the device is not running).
        """
        vd = self._vdev(tenant, device)
        self._check_time(now)
        slot = vd.region
        if vd.state is not _CONNECTED or slot is None or slot.state not in (_BUSY, _PREEMPT):
            raise self._state_error(vd, "finish")
        out = self._begin(now)
        if slot.state is _PREEMPT:
            self._switch(slot, now, out, requeue=False)
            return out
        until = self._kept_until(slot, now)
        if until is None:
            slot.to(_IDLE)
            self._serve_idle(slot, now, out)
        else:  # hysteresis: held for its client; only a higher priority takes it
            slot.to(_HOLD)
            slot.kept = True
            self._arm(slot, until)
        return out

    def stopped(self, region: str, now: float) -> list[Action]:
        """The task being preempted in ``region`` reached a consistency point (IRQ_PRR_Stop):
        save its context, give the region to the preempting request, and make the rest of
        the stopped work a request of its own.

        Raises :class:`~juggle.errors.UnknownRegionError`,
        :class:`~juggle.errors.TimeOrderError` and
        :class:`~juggle.errors.IllegalTransitionError` (the region is not in Preempt).
        """
        slot = self._slot(region)
        self._check_time(now)
        if slot.state is not _PREEMPT:
            raise self._event_error(slot, "stopped", _PREEMPT)
        out = self._begin(now)
        self._switch(slot, now, out, requeue=True)
        return out

    def reconfigured(self, region: str, now: float, *, ok: bool = True) -> list[Action]:
        """Programming ``region`` ended (IRQ_PCAP_Over). On success its client is connected
        (Hold); on failure the region enters Error and the request it was for is searched
        again, keeping its place in line.

        Raises :class:`~juggle.errors.UnknownRegionError`,
        :class:`~juggle.errors.TimeOrderError` and
        :class:`~juggle.errors.IllegalTransitionError` (the region is not in Reconfig).
        """
        slot = self._slot(region)
        self._check_time(now)
        if slot.state is not _RECONFIG:
            raise self._event_error(slot, "reconfigured", _RECONFIG)
        out = self._begin(now)
        vd = slot.incoming
        assert vd is not None
        slot.incoming = None
        if ok:
            slot.to(_HOLD)
            slot.design = vd.dev_id
            self._reconfigs += 1
            self._connect(vd, slot, now)
            out.extend(connect_actions(vd, slot))
            return out
        slot.to(_ERROR)
        self._reconfig_failures += 1
        vd.state = _DISCONNECTED
        vd.region = None
        self._emit(self._search(vd, now, None), out)
        return out

    def repair(self, region: str, now: float) -> list[Action]:
        """``region`` was blanked after a failure and can be used again (Error → Idle).

        Raises :class:`~juggle.errors.UnknownRegionError`,
        :class:`~juggle.errors.TimeOrderError` and
        :class:`~juggle.errors.IllegalTransitionError` (the region is not in Error).
        """
        slot = self._slot(region)
        self._check_time(now)
        if slot.state is not _ERROR:
            raise self._event_error(slot, "repair", _ERROR)
        out = self._begin(now)
        slot.to(_IDLE)
        slot.design = _NO_DESIGN
        self._serve_idle(slot, now, out)
        return out

    def release(self, tenant: str, device: str, now: float) -> list[Action]:
        """``tenant`` gives ``device`` up: a waiting request is withdrawn (an aware tenant
        moving its work to software), a connected idle or held device is saved and
        disconnected. A device that is already disconnected is left alone.

        Raises :class:`~juggle.errors.UnknownTenantError`,
        :class:`~juggle.errors.UnknownDeviceError`, :class:`~juggle.errors.TimeOrderError`
        and :class:`~juggle.errors.DeviceStateError` (running, or a solution in progress).
        """
        vd = self._vdev(tenant, device)
        self._check_time(now)
        self._check_releasable(vd, "release")
        out = self._begin(now)
        slot = self._let_go(vd, out)
        if slot is not None:
            self._serve_idle(slot, now, out)
        return out

    def _check_releasable(self, vd: TenantDevice, call: str) -> None:
        slot = vd.region
        if vd.state is _PENDING or (
            vd.state is _CONNECTED and slot is not None and slot.state not in (_HOLD, _IDLE)
        ):
            raise self._state_error(vd, call)

    def _let_go(self, vd: TenantDevice, out: list[Action]) -> RegionSlot | None:
        """Withdraw ``vd``'s waiting request, or save and disconnect it; returns the region
        it left (Idle now), if any."""
        slot = vd.region
        if vd.state is _WAITING:
            self._dequeue(vd)
            vd.state = _DISCONNECTED
            self._withdrawn += 1
        elif vd.state is _CONNECTED and slot is not None:
            out.extend(evict_actions(vd, slot))
            self._disconnect(vd, slot)
            if slot.state is _HOLD:
                slot.to(_IDLE)
            return slot
        return None

    def advance(self, now: float) -> list[Action]:
        """Time has reached ``now``: expire holds that are due and serve the wait list.

        Raises :class:`~juggle.errors.TimeOrderError`.
        """
        self._check_time(now)
        return self._begin(now)

    def next_deadline(self) -> float | None:
        """When the next hold expires (call :meth:`advance` then), or None if none is held."""
        holds = self._holds
        while holds:
            until, stamp, slot = holds[0]
            if slot.hold_stamp != stamp or slot.state is not _HOLD:
                heapq.heappop(holds)
                continue
            self._next_expiry = until
            return until
        self._next_expiry = _INF
        return None

    # -- devices come and go (a service's module starts or stops) ------------------------

    def add_device(
        self, spec: DeviceSpec, tasks: Sequence[TaskDescriptor], *, owner: int | None = None
    ) -> None:
        """Index device ``spec`` with its seats ``tasks``; every tenant gets a virtual device of
        it. ``owner`` is the service id juggles of it name (see :meth:`juggle`).

        Raises :class:`~juggle.errors.TaskIndexError` (a name taken, a task of another device,
        a region that is unknown or too small); nothing changes then.
        """
        index = self._index.with_device(spec, tasks)
        dev_id = len(self._dev_names)
        compat = tuple((self._slot_by_name[t.region], t) for t in index.compatible(spec.name))
        self._index = index
        self._dev_names = (*self._dev_names, spec.name)
        self._dev_id[spec.name] = dev_id
        self._compat = (*self._compat, compat)
        self._queues = (
            *self._queues,
            tuple(deque[TenantDevice]() for _ in range(self._levels)),
        )
        self._owners[dev_id] = owner
        for slot, _ in compat:
            slot.dev_ids = (*slot.dev_ids, dev_id)
        for tenant in self._tenants.values():
            tenant.devices[spec.name] = TenantDevice(
                tenant, spec.name, dev_id, compat, spec.context_bytes
            )

    def remove_device(self, device: str, now: float) -> list[Action]:
        """Take ``device`` out of the index: waiting requests for it are withdrawn, connected
        idle or held virtual devices saved and disconnected, regions holding its design count
        as empty and go to waiting requests.

        Raises :class:`~juggle.errors.UnknownDeviceError`,
        :class:`~juggle.errors.TimeOrderError` and :class:`~juggle.errors.DeviceStateError`
        (one of its virtual devices is running or being placed); nothing changes then.
        """
        dev_id = self._dev_id.get(device)
        if dev_id is None:
            raise self._unknown_device(device)
        self._check_time(now)
        vds = [t.devices[device] for t in self._tenants.values()]
        for vd in vds:
            self._check_releasable(vd, "remove_device")
        out = self._begin(now)
        freed = [slot for vd in vds if (slot := self._let_go(vd, out)) is not None]
        self._index = self._index.without_device(device)
        del self._dev_id[device]
        compat = self._compat[dev_id]
        self._compat = (*self._compat[:dev_id], (), *self._compat[dev_id + 1 :])
        for slot, _ in compat:
            slot.dev_ids = tuple(i for i in slot.dev_ids if i != dev_id)
        for slot in self._slots:
            if slot.design == dev_id:
                slot.design = _NO_DESIGN
        for tenant in self._tenants.values():
            del tenant.devices[device]
        for slot in freed:
            if slot.state is _IDLE:
                self._serve_idle(slot, now, out)
        return out

    # -- juggles: commands that place a tenant's device now or not at all ------------------

    def juggle(
        self,
        entering: ServiceView | None,
        leaving: Sequence[ServiceView],
        now: float,
        *,
        tenant: str,
        priority: int | None = None,
        preemptible: bool = True,
    ) -> JuggleTicket:
        """The juggle primitive as a command: ``tenant``'s devices of the ``leaving`` services
        leave their regions and the ``entering`` one's device gets a region now, or the
        command is refused. :func:`~juggle.core.placement.plan_juggle` decides, on views of
        this allocator's regions: an Idle region is free (an idle client is moved off it), a
        region a leaving device frees is reclaimed, one in Error or held by another tenant is
        not the juggle's. Views name devices by ``device``; their regions and tier come from
        here. The entered region's client runs until it leaves (``priority`` defaults to the
        tenant's; ``preemptible=False`` keeps requests of higher priority from stopping it).
        Finish with :meth:`juggled`. Nothing changes when this raises.

        Raises what :func:`~juggle.core.placement.plan_juggle` raises
        (:class:`~juggle.errors.SanityCheckError`,
        :class:`~juggle.errors.TierUnavailableError`),
        :class:`~juggle.errors.UnknownTenantError`,
        :class:`~juggle.errors.UnknownDeviceError`, :class:`~juggle.errors.PriorityError`
        and :class:`~juggle.errors.TimeOrderError`.
        """
        t, prio = self._asker(tenant, priority)
        self._check_time(now)
        ent_vd: TenantDevice | None = None
        ent_view = entering
        if entering is not None and entering.regions:
            ent_vd = self._vdev(tenant, entering.device)
            ent_view = self._seen(entering, ent_vd)
        legs_in: list[tuple[ServiceView, TenantDevice | None]] = []
        for view in leaving:
            vd = self._vdev(tenant, view.device) if view.regions else None
            legs_in.append((self._seen(view, vd) if vd is not None else view, vd))
        plan = plan_juggle(
            ent_view,
            [v for v, _ in legs_in],
            {s.name: self._region_view(s, t) for s in self._slots},
        )
        out = self._begin(now)
        legs = tuple(
            (vd, vd.region, vd.region.occ_prio, vd.region.occ_rt)
            for _, vd in legs_in
            if vd is not None and vd.region is not None
        )
        slot = self._slot_by_name[plan.region] if plan.region is not None else None
        if slot is not None:
            assert ent_vd is not None
            if ent_vd.state is _WAITING:  # a device waiting to come back enters now
                self._dequeue(ent_vd)
                ent_vd.state = _DISCONNECTED
            self._seq += 1
            ent_vd.seq = self._seq
            ent_vd.priority = prio
            ent_vd.pinned = not preemptible
            ent_vd.requested_at = now
            if plan.reclaimed:
                leaver = slot.client
                assert leaver is not None
                slot.to(_PREEMPT)
                slot.to(_SWITCH)
                self._disconnect(leaver, slot)
            elif slot.client is not None:
                victim = slot.client
                out.extend(evict_actions(victim, slot))
                slot.to(_SWITCH)
                self._disconnect(victim, slot)
            slot.to(_RECONFIG)
            slot.design = _NO_DESIGN
            slot.incoming = ent_vd
            ent_vd.state = _PENDING
            ent_vd.region = slot
        return JuggleTicket(
            plan,
            tenant,
            entering.device if entering is not None else None,
            tuple(v.device for v in leaving),
            tuple(out),
            ent_vd if slot is not None else None,
            slot,
            legs,
        )

    def juggled(
        self, ticket: JuggleTicket, now: float, *, ok: bool, faulted: Collection[str] = ()
    ) -> list[Action]:
        """The shell carried ``ticket`` out (``ok``) or undid it. On success the leaving
        devices are disconnected and their regions, now empty, go to waiting requests; the
        entering device is connected and running. Undone, every device is where it was
        before. Regions in ``faulted`` ended in Error (quarantined) either way.

        Raises :class:`~juggle.errors.TimeOrderError` and
        :class:`~juggle.errors.AllocatorError` (the ticket was finished already).
        """
        if ticket.done:
            raise AllocatorError(
                "this juggle was finished already",
                tenant=ticket.tenant,
                device=ticket.entering,
                region=ticket.region,
            )
        self._check_time(now)
        ticket.done = True
        out = self._begin(now)
        bad = set(faulted)
        slot, vd = ticket.slot, ticket.vd
        for leaver, lslot, _, _ in ticket.legs:
            if lslot is slot or not (ok or lslot.name in bad):
                continue  # reclaimed (below), or undone: it serves from its region still
            lslot.to(_ERROR if lslot.name in bad else _IDLE)
            self._disconnect(leaver, lslot)
            lslot.design = _NO_DESIGN
            if lslot.state is _IDLE:
                self._serve_idle(lslot, now, out)
        if slot is None or vd is None:
            return out
        slot.incoming = None
        if slot.name in bad:
            slot.to(_ERROR)
            vd.state, vd.region = _DISCONNECTED, None
            return out
        if ok:
            self._reconfigs += 1
            self._pin(vd, slot, now, out)
            out.extend(connect_actions(vd, slot))
            if not slot.occ_rt:
                self._serve_busy(slot, now, out)
            return out
        vd.state, vd.region = _DISCONNECTED, None
        back = next(((lv, p, rt) for lv, ls, p, rt in ticket.legs if ls is slot), None)
        if back is not None:  # the reclaimed region serves the leaving device again
            leaver, prio, rt = back
            self._pin(leaver, slot, now, out)
            slot.occ_prio, slot.occ_rt = prio, rt
        else:  # the region was emptied: Error (nothing usable loaded), then blank again
            slot.to(_ERROR)
            slot.to(_IDLE)
            self._serve_idle(slot, now, out)
        return out

    def fault(self, region: str, now: float) -> list[Action]:
        """The core in ``region`` was found faulty and quarantined: its client is disconnected
        (its context is not saved: the core cannot be trusted) and the region enters Error
        until :meth:`repair`.

        Raises :class:`~juggle.errors.UnknownRegionError`,
        :class:`~juggle.errors.TimeOrderError` and
        :class:`~juggle.errors.IllegalTransitionError` (the region is not Busy, Idle or Hold).
        """
        slot = self._slot(region)
        self._check_time(now)
        if slot.state not in (_BUSY, _IDLE, _HOLD):
            raise self._event_error(slot, "fault", _BUSY)
        out = self._begin(now)
        client = slot.client
        if client is not None:
            out.append(Disconnect(client.tenant.name, client.device, slot.name))
            self._disconnect(client, slot)
        slot.to(_ERROR)
        slot.design = _NO_DESIGN
        return out

    def set_tenant(
        self,
        name: str,
        now: float,
        *,
        realtime: bool = False,
        priority: int | None = None,
        model: ProgrammingModel | None = None,
    ) -> list[Action]:
        """Change registered tenant ``name``'s class, priority and (unless None) programming
        model, as :meth:`add_tenant` would have set them (a reloaded tenant policy).

        Its devices that asked with the tenant's priority (the default) follow it; one that
        asked lower keeps its priority, capped at the new one. Waiting requests move to their
        new place in line (keeping their FIFO number), the regions its devices hold carry the
        new priority and class, and every preemptible busy region a waiting request now
        outranks is preempted (as on any priority change). Nothing changes when this raises:
        :class:`~juggle.errors.UnknownTenantError`, :class:`~juggle.errors.PriorityError`,
        :class:`~juggle.errors.TimeOrderError`.
        """
        t = self._tenants.get(name)
        if t is None:
            raise self._unknown_tenant(name)
        prio = self._class_priority(name, realtime, priority)
        self._check_time(now)
        out = self._begin(now)
        old = t.priority
        t.priority, t.realtime = prio, realtime
        if model is not None:
            t.model = model
        for vd in t.devices.values():
            self._reprioritize(vd, prio if vd.priority == old else min(vd.priority, prio))
        for slot in self._slots:
            if slot.state is _BUSY and not slot.occ_rt:
                self._serve_busy(slot, now, out)
            elif slot.state is _HOLD and slot.kept and not slot.occ_rt:
                self._serve_idle(slot, now, out, above=slot.occ_prio)
        return out

    def set_priority(
        self, tenant: str, device: str, priority: int, now: float, *, preemptible: bool = True
    ) -> list[Action]:
        """Change the priority ``tenant``'s ``device`` holds its region or waits with (0 up to
        the tenant's own). A running device that became preemptible by a waiting request is
        preempted.

        Raises :class:`~juggle.errors.UnknownTenantError`,
        :class:`~juggle.errors.UnknownDeviceError`, :class:`~juggle.errors.PriorityError` and
        :class:`~juggle.errors.TimeOrderError`.
        """
        vd = self._vdev(tenant, device)
        if not 0 <= priority <= vd.tenant.priority:
            raise self._bad_priority(vd.tenant, priority)
        self._check_time(now)
        out = self._begin(now)
        vd.pinned = not preemptible
        slot = self._reprioritize(vd, priority)
        if slot is not None and slot.state is _BUSY and not slot.occ_rt:
            self._serve_busy(slot, now, out)
        elif slot is not None and slot.state is _HOLD and slot.kept and not slot.occ_rt:
            self._serve_idle(slot, now, out, above=slot.occ_prio)
        return out

    def _reprioritize(self, vd: TenantDevice, priority: int) -> RegionSlot | None:
        """Give ``vd`` ``priority``: its waiting request moves to that line (keeping its FIFO
        number), the region it holds carries the priority and its class; that region, if any."""
        if vd.state is _WAITING and vd.priority != priority:
            self._dequeue(vd)
            vd.priority = priority
            self._enqueue(vd)
        vd.priority = priority
        slot = vd.region
        if vd.state is _CONNECTED and slot is not None and slot.client is vd:
            slot.occ_prio = priority
            slot.occ_rt = vd.tenant.realtime or vd.pinned
            return slot
        return None

    def _pin(self, vd: TenantDevice, slot: RegionSlot, now: float, out: list[Action]) -> None:
        """Connect ``vd`` to ``slot`` (Reconfig/Switch → Hold) and start it (→ Busy)."""
        slot.to(_HOLD)
        slot.design = vd.dev_id
        self._connect(vd, slot, now)
        slot.to(_BUSY)

    def _seen(self, view: ServiceView, vd: TenantDevice) -> ServiceView:
        """``view`` with this allocator's truth: the regions it fits (smallest first) and the
        one it is connected to."""
        slot = vd.region if vd.state is _CONNECTED else None
        if slot is not None and slot.state is not _BUSY:
            slot = None  # being preempted or placed: not the juggle's to move now
        if vd.state is _PENDING:
            raise SanityCheckError(
                f"{view.label}: device {vd.device!r} is being placed in region "
                f"{vd.region.name if vd.region else '?'} already",
                service_id=view.service_id,
            )
        return ServiceView(
            view.service_id,
            view.label,
            view.tier,
            slot.name if slot is not None else None,
            tuple(s.name for s, _ in vd.compat),
            view.arbitrated,
            view.device,
        )

    def _region_view(self, slot: RegionSlot, tenant: Tenant) -> RegionView:
        if slot.state is _ERROR:
            return RegionView(slot.name, error=True)
        if slot.state is _IDLE:
            return RegionView(slot.name)
        client = slot.client if slot.client is not None else slot.incoming
        if client is not None and client.tenant is tenant and slot.state is _BUSY:
            return RegionView(slot.name, service_id=self._owners.get(client.dev_id))
        who = (
            f"tenant {client.tenant.name!r} ({client.device}, {slot.state.value})"
            if client is not None and client.tenant is not tenant
            else f"a placement in progress ({slot.state.value})"
        )
        return RegionView(slot.name, claimed=True, holder=who)

    # -- snapshots -----------------------------------------------------------------------

    def region_state(self, region: str) -> RegionPhase:
        """The Fig 7 state of ``region``.

        Raises :class:`~juggle.errors.UnknownRegionError`.
        """
        return self._slot(region).state

    def device_state(self, tenant: str, device: str) -> DeviceState:
        """Where ``tenant``'s ``device`` stands (disconnected, waiting, pending, connected).

        Raises :class:`~juggle.errors.UnknownTenantError` or
        :class:`~juggle.errors.UnknownDeviceError`.
        """
        return self._vdev(tenant, device).state

    def connected_region(self, tenant: str, device: str) -> str | None:
        """The region ``tenant``'s ``device`` is connected to, or None.

        Raises :class:`~juggle.errors.UnknownTenantError` or
        :class:`~juggle.errors.UnknownDeviceError`.
        """
        vd = self._vdev(tenant, device)
        return vd.region.name if vd.state is _CONNECTED and vd.region is not None else None

    @property
    def waiting_count(self) -> int:
        """How many requests are on the wait list."""
        return sum(self._waiting_at)

    def waiting(self) -> tuple[WaitingRequest, ...]:
        """The wait list in service order: highest priority first, FIFO within a priority."""
        entries = [vd for queues in self._queues for q in queues for vd in q]
        entries.sort(key=lambda v: (-v.priority, v.seq))
        return tuple(
            WaitingRequest(v.tenant.name, v.device, v.priority, v.seq, v.requested_at)
            for v in entries
        )

    def statistics(self) -> AllocatorStats:
        """A frozen snapshot of regions, tenants, the wait list and the counters."""
        p = self._paths
        return AllocatorStats(
            now=self._now,
            regions=tuple(self._region_snapshot(s) for s in self._slots),
            tenants=tuple(self._tenant_stats(t) for t in self._tenants.values()),
            waiting=self.waiting(),
            requests=self._requests,
            paths=(p[0], p[1], p[2], p[3], p[4]),
            preemptions=self._preemptions,
            reconfigurations=self._reconfigs,
            reconfig_failures=self._reconfig_failures,
            hold_expiries=self._expiries,
            withdrawn=self._withdrawn,
        )

    def __repr__(self) -> str:
        regions = " ".join(
            f"{s.name}:{s.state.value}"
            + (f"({s.client.tenant.name}/{s.client.device})" if s.client else "")
            for s in self._slots
        )
        return (
            f"<Allocator [{regions}], {len(self._tenants)} tenants, "
            f"{sum(self._waiting_at)} waiting, {self._requests} requests>"
        )

    # -- the search ------------------------------------------------------------------------

    def _search(self, vd: TenantDevice, now: float, pre: list[Action] | None) -> Solution:
        prio = vd.priority
        victim_slot: RegionSlot | None = None
        victim_desc: TaskDescriptor | None = None
        for slot, desc in vd.compat:
            state = slot.state
            if state is _IDLE or (
                state is _HOLD and slot.kept and slot.occ_prio < prio and not slot.occ_rt
            ):
                victim = slot.client
                reconfig = self._assign(vd, slot, desc, now)
                self._paths[2 if reconfig else 1] += 1
                return Solution(_ASSIGN, vd, slot, desc, reconfig, victim, now, pre)
            if victim_slot is None and state is _BUSY and slot.occ_prio < prio and not slot.occ_rt:
                victim_slot = slot
                victim_desc = desc
        if victim_slot is not None:
            assert victim_desc is not None
            victim = victim_slot.client
            reconfig = self._preempt(vd, victim_slot, victim_desc)
            self._paths[4 if reconfig else 3] += 1
            return Solution(_PREEMPT_KIND, vd, victim_slot, victim_desc, reconfig, victim, now, pre)
        self._enqueue(vd)
        self._paths[0] += 1
        return Solution(_UNAVAILABLE, vd, None, None, False, None, now, pre)

    def _assign(self, vd: TenantDevice, slot: RegionSlot, desc: TaskDescriptor, now: float) -> bool:
        """Give the Idle ``slot`` to ``vd``; returns whether it must be reconfigured."""
        old = slot.client
        if old is not None:
            slot.to(_SWITCH)
            self._disconnect(old, slot)
        reconfig = slot.design != vd.dev_id
        if reconfig:
            slot.to(_RECONFIG)
            slot.design = _NO_DESIGN
            slot.incoming = vd
            vd.state = _PENDING
            vd.region = slot
        else:
            slot.to(_HOLD)
            self._connect(vd, slot, now)
        return reconfig

    def _preempt(self, vd: TenantDevice, slot: RegionSlot, desc: TaskDescriptor) -> bool:
        """Order ``slot``'s task to stop at its next consistency point, for ``vd``."""
        slot.to(_PREEMPT)
        reconfig = slot.design != vd.dev_id
        slot.incoming = vd
        slot.incoming_desc = desc
        slot.incoming_reconfig = reconfig
        vd.state = _PENDING
        vd.region = slot
        return reconfig

    def _switch(self, slot: RegionSlot, now: float, out: list[Action], *, requeue: bool) -> None:
        """Preempt → Switch: save and disconnect the stopped task, continue the pending
        solution, and (``requeue``) make the stopped work a request of its own."""
        victim, vd, desc = slot.client, slot.incoming, slot.incoming_desc
        assert victim is not None and vd is not None and desc is not None
        slot.to(_SWITCH)
        self._preemptions += 1
        out.extend(evict_actions(victim, slot))
        self._disconnect(victim, slot)
        if slot.incoming_reconfig:
            slot.to(_RECONFIG)
            slot.design = _NO_DESIGN
            out.append(reconfigure(desc))
        else:
            slot.to(_HOLD)
            slot.incoming = None
            self._connect(vd, slot, now)
            out.extend(connect_actions(vd, slot))
        if requeue:
            self._seq += 1
            victim.seq = self._seq
            victim.requested_at = now
            self._requests += 1
            self._emit(self._search(victim, now, None), out)

    def _serve_idle(self, slot: RegionSlot, now: float, out: list[Action], above: int = -1) -> None:
        """``slot`` became Idle: hand it to the first waiting request it can hold whose
        priority is above ``above``. A region held for a client that used it (hysteresis)
        is served so with ``above`` its client's priority: a higher request takes it at once,
        as an Idle region."""
        vd = self._best_waiter(slot, above)
        if vd is None:
            return
        self._dequeue(vd)
        desc = self._desc_of(vd, slot)
        victim = slot.client
        reconfig = self._assign(vd, slot, desc, now)
        self._paths[2 if reconfig else 1] += 1
        self._emit(Solution(_ASSIGN, vd, slot, desc, reconfig, victim, now, None), out)

    def _serve_busy(self, slot: RegionSlot, now: float, out: list[Action]) -> None:
        """``slot`` became Busy with a preemptible task: a waiting request of higher
        priority that fits it preempts it."""
        vd = self._best_waiter(slot, slot.occ_prio)
        if vd is None:
            return
        self._dequeue(vd)
        desc = self._desc_of(vd, slot)
        victim = slot.client
        reconfig = self._preempt(vd, slot, desc)
        self._paths[4 if reconfig else 3] += 1
        self._emit(Solution(_PREEMPT_KIND, vd, slot, desc, reconfig, victim, now, None), out)

    def _kept_until(self, slot: RegionSlot, now: float) -> float | None:
        """When the computation in ``slot`` ends at ``now``: until when the region stays held
        for its client (hysteresis), or None for Idle. The hold is renewed while no request of
        the client's priority or higher waits for the region; an equal one waits for the hold
        to run out, a higher one gets the region now."""
        client = slot.client
        assert client is not None
        keep = self._keep_us(slot, client.dev_id)
        if keep <= 0:
            return None
        waiter = self._best_waiter(slot, slot.occ_prio - 1)
        if waiter is None:
            slot.keep_until = max(slot.keep_until, now + keep)
        elif waiter.priority > slot.occ_prio:
            return None
        return slot.keep_until if slot.keep_until > now else None

    def _keep_us(self, slot: RegionSlot, dev_id: int) -> float:
        """The hysteresis hold of ``slot`` for a client of device ``dev_id``."""
        if self._hysteresis_us is not None:
            return self._hysteresis_us
        if dev_id == _NO_DESIGN:
            return 0.0
        for s, desc in self._compat[dev_id]:
            if s is slot:
                return self._hysteresis_factor * desc.t_rcfg_us
        return 0.0

    def _best_waiter(self, slot: RegionSlot, above: int) -> TenantDevice | None:
        """The first request (highest priority, then FIFO) with priority > ``above`` whose
        device fits ``slot``."""
        waiting_at = self._waiting_at
        for prio in range(self._top, above, -1):
            if not waiting_at[prio]:
                continue
            best: TenantDevice | None = None
            for dev_id in slot.dev_ids:
                q = self._queues[dev_id][prio]
                if q and (best is None or q[0].seq < best.seq):
                    best = q[0]
            if best is not None:
                return best
        return None

    # -- bookkeeping -------------------------------------------------------------------------

    def _connect(self, vd: TenantDevice, slot: RegionSlot, now: float) -> None:
        slot.client = vd
        slot.occ_prio = vd.priority
        slot.occ_rt = vd.tenant.realtime or vd.pinned
        vd.state = _CONNECTED
        vd.region = slot
        slot.kept = False
        slot.keep_until = now + self._keep_us(slot, vd.dev_id)
        self._arm(slot, now + self._hold_us)

    def _arm(self, slot: RegionSlot, until: float) -> None:
        """``slot`` (in Hold) is held until ``until``: its expiry is due then."""
        self._stamp += 1
        slot.hold_until = until
        slot.hold_stamp = self._stamp
        heapq.heappush(self._holds, (until, self._stamp, slot))
        if until < self._next_expiry:
            self._next_expiry = until

    def _disconnect(self, vd: TenantDevice, slot: RegionSlot) -> None:
        slot.client = None
        slot.occ_prio = -1
        slot.occ_rt = False
        vd.state = _DISCONNECTED
        vd.region = None

    def _enqueue(self, vd: TenantDevice) -> None:
        vd.state = _WAITING
        q = self._queues[vd.dev_id][vd.priority]
        if not q or q[-1].seq < vd.seq:
            q.append(vd)
        else:  # a retried request keeps its place in line
            pos = next(i for i, other in enumerate(q) if other.seq > vd.seq)
            q.insert(pos, vd)
        self._waiting_at[vd.priority] += 1

    def _dequeue(self, vd: TenantDevice) -> None:
        q = self._queues[vd.dev_id][vd.priority]
        if q[0] is vd:
            q.popleft()
        else:
            q.remove(vd)
        self._waiting_at[vd.priority] -= 1

    def _begin(self, now: float) -> list[Action]:
        """Stamp ``now``, expire due holds; returns the actions that time caused so far."""
        self._now = now
        out = self._outbox
        if out:
            self._outbox = []
        else:
            out = []
        if self._next_expiry <= now:
            self._expire(now, out)
        return out

    def _expire(self, now: float, out: list[Action]) -> None:
        holds = self._holds
        while holds:
            until, stamp, slot = holds[0]
            if slot.hold_stamp != stamp or slot.state is not _HOLD:
                heapq.heappop(holds)  # the region moved on since: a stale entry
                continue
            if until > now:
                break
            heapq.heappop(holds)
            slot.to(_IDLE)
            slot.kept = False
            self._expiries += 1
            self._serve_idle(slot, now, out)
        self._next_expiry = holds[0][0] if holds else _INF

    def _emit(self, solution: Solution, out: list[Action]) -> None:
        out.append(solution)
        out.extend(solution.actions)

    def _desc_of(self, vd: TenantDevice, slot: RegionSlot) -> TaskDescriptor:
        for s, desc in vd.compat:
            if s is slot:
                return desc
        raise AssertionError(f"{vd!r} does not fit {slot.name}")  # pragma: no cover

    # -- look-ups and errors ---------------------------------------------------------------

    def _class_priority(self, name: str, realtime: bool, priority: int | None) -> int:
        """The priority of tenant ``name`` of the given class: the top one if real-time (which
        ``priority`` may only repeat), else ``priority`` (default 0) below it."""
        if realtime:
            if priority is not None and priority != self._top:
                raise PriorityError(
                    f'"priority" of real-time tenant {name!r} must be {self._top}; got {priority}',
                    value=priority,
                )
            return self._top
        prio = 0 if priority is None else priority
        if not 0 <= prio < self._top:
            raise PriorityError(
                f'"priority" of general-purpose tenant {name!r} must be in 0..{self._top - 1}'
                f"; got {prio}",
                value=prio,
            )
        return prio

    def _asker(self, tenant: str, priority: int | None) -> tuple[Tenant, int]:
        """``tenant`` and the priority it asks with (its own, or lowered to ``priority``)."""
        t = self._tenants.get(tenant)
        if t is None:
            raise self._unknown_tenant(tenant)
        if priority is None:
            return t, t.priority
        if not 0 <= priority <= t.priority:
            raise self._bad_priority(t, priority)
        return t, priority

    def _vdev(self, tenant: str, device: str) -> TenantDevice:
        t = self._tenants.get(tenant)
        if t is None:
            raise self._unknown_tenant(tenant)
        vd = t.devices.get(device)
        if vd is None:
            raise self._unknown_device(device)
        return vd

    def _slot(self, region: str) -> RegionSlot:
        slot = self._slot_by_name.get(region)
        if slot is None:
            known = ", ".join(self._slot_by_name)
            raise UnknownRegionError(f"unknown region {region!r} (regions: {known})", region=region)
        return slot

    def _check_time(self, now: float) -> None:
        if not now >= self._now:
            raise self._time_error(now)

    def _time_error(self, now: float) -> TimeOrderError:
        return TimeOrderError(
            f'"now" = {now} is earlier than the last event at {self._now}', value=now
        )

    def _unknown_tenant(self, name: str) -> UnknownTenantError:
        known = ", ".join(self._tenants) or "none"
        return UnknownTenantError(f"unknown tenant {name!r} (tenants: {known})", tenant=name)

    def _unknown_device(self, name: str) -> UnknownDeviceError:
        known = ", ".join(self._dev_id) or "none"
        return UnknownDeviceError(f"unknown device {name!r} (devices: {known})", device=name)

    def _bad_priority(self, t: Tenant, priority: int) -> PriorityError:
        return PriorityError(
            f'"priority" of a request by {t.name!r} must be in 0..{t.priority}; got {priority}',
            value=priority,
        )

    def _state_error(self, vd: TenantDevice, call: str) -> DeviceStateError:
        where = f" (region {vd.region.name} is {vd.region.state.value})" if vd.region else ""
        return DeviceStateError(
            f"{call}({vd.tenant.name!r}, {vd.device!r}): the device is {vd.state.value}{where}",
            tenant=vd.tenant.name,
            device=vd.device,
        )

    def _event_error(
        self, slot: RegionSlot, event: str, expected: RegionPhase
    ) -> IllegalTransitionError:
        return IllegalTransitionError(
            f"{event}({slot.name!r}): region is {slot.state.value}, not {expected.value}",
            region=slot.name,
        )

    def _region_snapshot(self, s: RegionSlot) -> AllocatorRegion:
        def label(vd: TenantDevice | None) -> str | None:
            return None if vd is None else f"{vd.tenant.name}/{vd.device}"

        return AllocatorRegion(
            name=s.name,
            slices=s.slices,
            state=s.state.value,
            design=self._dev_names[s.design] if s.design != _NO_DESIGN else None,
            client=label(s.client),
            client_priority=s.occ_prio if s.client is not None else None,
            incoming=label(s.incoming),
            hold_until=s.hold_until if s.state is _HOLD else None,
            entered=tuple((st.value, s.entered[st.ordinal]) for st in RegionPhase),
        )

    def _tenant_stats(self, t: Tenant) -> TenantStats:
        devices = tuple(
            DeviceStats(
                device=vd.device,
                state=vd.state.value,
                region=vd.region.name if vd.region is not None else None,
                context_bytes=vd.interface.capacity,
            )
            for vd in t.devices.values()
        )
        return TenantStats(t.name, t.priority, t.realtime, t.model.value, devices)


def _check_hysteresis(hysteresis_us: float | None, factor: float) -> None:
    """Refuse a negative or NaN hysteresis hold or a factor that is not a positive finite
    number (:class:`~juggle.errors.AllocatorError` naming the value)."""
    if hysteresis_us is not None and not hysteresis_us >= 0:
        raise AllocatorError(
            f'"hysteresis_us" must be >= 0 or None (derived); got {hysteresis_us}',
            value=hysteresis_us,
        )
    if not (factor > 0 and math.isfinite(factor)):
        raise AllocatorError(
            f'"hysteresis_factor" must be a positive finite number; got {factor}', value=factor
        )
