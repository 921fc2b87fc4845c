"""Tenants sharing the fabric live: the Ker-ONE allocator arbitrates real calls (issue 3, item 9).

Think of a shared workshop. Each tenant (an application, a VM) owns its own toolbox for every
machine it uses (a *virtual device*: the interface and a saved context); the benches (regions)
are few. When a tenant's consumer calls a hardware service, its virtual device needs a bench:
the :class:`~juggle.core.allocator.Allocator` (the same decision core the simulator drives)
decides Assign, Preempt or Unavailable, and this module carries the decision out against the
real fabric: it programs regions, saves the leaving tenant's context with the core's own save
routine, gives the arriving tenant's to its device, and tells tenants WAIT, READY and PREEMPT
on their :class:`~juggle.runtime.signals.SignalChannel`.

The arbiter decides only *when* a device holds a region. The devices and cores are the
runtime's one device model (:mod:`juggle.runtime.hardware`): a tenant's device of an
arbitrated service is a :class:`~juggle.runtime.hardware.GatedDevice` whose gate is here; each
region programmed for such a service gets one :class:`~juggle.runtime.hardware.HardwareCore`
(the driver, built once per programming, on a guarded window). Connect and Disconnect set and
clear the device's ``core``; SaveContext reads the leaving device's context from the core with
the driver's ``save_context()`` into its interface buffer, RestoreContext hands the buffer to
the device, and the core restores it on the device's next call (a driver without context
routines gets the device's recorded state-setting calls replayed instead). So a tenant's call
has the guard, the quarantine, the verification and the fallback of every hardware call.

A hardware call is the unit of work: the consistency points are the moments between calls.
Each call is bracketed by ``start``/``finish`` on the allocator (the gate's enter and leave); a
higher-priority request that arrives while a lower-priority call runs stops it at its end
(``finish`` is then the consistency point), and the victim's next call asks again. Programming
models (paper 4.5): a ``native`` tenant's call blocks until its device is READY; an ``aware``
tenant's call raises :class:`~juggle.errors.WaitSignal` at once, its request stays queued, and
READY arrives later.

Faults. A call that finds its core faulty (it hung past the call timeout, its driver raised, or
a check against software failed) quarantines the core: its window is cut at once. At the call's
end, instead of ``finish``, the region fails: the allocator's ``fault`` (Error, the client
disconnected without a save: its recorded calls rebuild its state later), and the manager
thread quarantines the fabric region (ERROR) and has the host note the fault. The failing call
itself falls back to software, or, the service being hardware-only, raises
:class:`~juggle.errors.HardwareFaultError` naming the service and the region; while every region
of a service is quarantined, its tenants' calls raise that error too instead of waiting.
:meth:`blank` (``fw.recover``) brings the region back.

One allocator places every service. Each service with a hardware tier is a device of its task
index from the moment its module starts (named after its bitstreams' design; the profile's
``[[devices]]`` of that name lend frame, preemption and context sizes) and leaves it when the
module stops (if one of its devices is running or being placed then, as soon as it no longer
is); the arbiter then forgets the service: its record, gates, devices and cores. Juggles are
commands to the same allocator for the framework's own tenant (``SYSTEM_TENANT``;
:meth:`begin_juggle` / :meth:`end_juggle` around the juggler's steps), so they see tenants'
regions and tenants see theirs. A juggle-placed service holds its region with the highest
priority of the tenants among its consumers (below every tenant when none uses it); a tenant
of higher priority preempts it: at its consistency point the manager thread moves its proxies
to software (calls keep being answered, Ker-ONE 4.5), its tenant consumers hear PREEMPT, and
when the allocator gives it a region again it is programmed back and they hear READY. A
hardware-only service, or one a real-time tenant uses, is never preempted. A hardware-only
service started while tenants are registered is *arbitrated*: tenants' requests place it on
demand and only tenants may use it.

Locking: one lock guards the allocator, the gates and the cores table; the allocator's actions
run under it except reconfiguration (the configuration port), moves of juggle-placed services
and fault containment on the fabric, which a manager thread carries out (calling the host,
never while holding this lock), and listener callbacks, which run after the lock is released,
in emission order. The manager also expires holds at :meth:`Allocator.next_deadline`. A call
holds its core's lock only between its gate's enter and leave; the arbiter takes a core's lock
(a context save) only for a device that is not running, so the two never wait on each other.

Hysteresis (docs/daemon.md, "Priorities without thrashing"). A region handed to a tenant's
device (after a preemption, a reconfiguration or a juggle) stays held for it between its calls
for the *hysteresis hold* (:class:`~juggle.core.allocator.Allocator`, ``hysteresis_us``): a
request of lower or equal priority waits until the holder left it unused that long, one of
higher priority takes it at once. By default the hold is
:data:`~juggle.core.allocator.HYSTERESIS_FACTOR` times the modeled reconfiguration time of the
bitstream loaded for the holder (26.8 ms for a 149,088-byte bitstream through the xupv2p's
configuration port, modeled). So a high-priority tenant's stream of short calls keeps the
region instead of preempting a co-module and reprogramming the region twice per call. A tenant
hears READY only when its device becomes ready after it heard WAIT or PREEMPT (or never heard
anything): never twice in a row for one device.

Time: the arbiter reads ``clock`` (microseconds, monotonic; the wall clock by default). A
simulated board's modeled clock makes holds, signals and waits modeled time: a test moves it
and calls :meth:`TenantArbiter.advance`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

from juggle.core.actions import (
    Action,
    Connect,
    Disconnect,
    Reconfigure,
    RestoreContext,
    SaveContext,
    Signal,
    Solution,
    StopAtConsistencyPoint,
)
from juggle.core.allocator import HYSTERESIS_FACTOR, Allocator, JuggleTicket
from juggle.core.execute import execute
from juggle.core.placement import ServiceView
from juggle.core.regionfsm import RegionPhase
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceState, ProgrammingModel, SignalKind
from juggle.core.tiers import Tier
from juggle.errors import (
    AllocatorError,
    DeviceStateError,
    DeviceWaitTimeoutError,
    FabricError,
    HardwareFaultError,
    InvalidConsumerError,
    JuggleError,
    NotATenantError,
    PriorityError,
    ServiceUnavailableError,
    TenancyClosedError,
    UnknownDeviceError,
    UnknownTenantError,
    WaitSignal,
    scalar,
)
from juggle.runtime.hardware import GatedDevice, HardwareCore, VerifySchedule, device_class
from juggle.runtime.proxy import StateRecord
from juggle.runtime.signals import (
    SignalChannel,
    TenancyStatistics,
    TenantDeviceSnapshot,
    TenantSignal,
    TenantSnapshot,
    parse_model,
)

if TYPE_CHECKING:
    from juggle.fabric.bitstream import Bitstream
    from juggle.fabric.fabric import Fabric
    from juggle.fabric.resources import Resources
    from juggle.runtime.services import ManagedService

__all__ = [
    "DEFAULT_HOLD_US",
    "LIVE_PRIORITY_LEVELS",
    "TenancyHost",
    "TenantArbiter",
]

log = logging.getLogger("juggle.tenancy")

#: Priorities of live tenants: general-purpose 0..2, real-time 3. In the allocator they are
#: one higher: its priority 0 is the framework's own (services placed by juggles that no
#: tenant uses), below every tenant.
LIVE_PRIORITY_LEVELS = 4
#: The framework's own tenant: juggles place services for it.
SYSTEM_TENANT = "<juggle>"
#: The highest priority a juggle-placed service holds its region with (a general-purpose
#: tenant's highest, shifted).
SYSTEM_PRIORITY = LIVE_PRIORITY_LEVELS - 1
#: How long a region stays reserved for a tenant that was told READY (100 ms of wall clock:
#: long against a thread's wake-up, short against a human).
DEFAULT_HOLD_US = 100_000.0
#: Owner tag of the regions the arbiter programs (see ``Fabric.regions()``).
OWNER = "tenancy"
#: The paper's context buffer per interface; larger when a core's context needs more.
DEFAULT_CONTEXT_BYTES = 1024

_CONNECTED = DeviceState.CONNECTED
_DISCONNECTED = DeviceState.DISCONNECTED
_WAITING = DeviceState.WAITING
_GO, _BLOCK, _WAIT, _FAULT = "go", "block", "wait", "fault"


def _wall_us() -> float:
    """The monotonic wall clock in microseconds (the arbiter's default clock)."""
    return time.monotonic_ns() / 1000.0


class TenancyHost(Protocol):
    """What the arbiter needs of the runtime around it (the framework's parts)."""

    @property
    def fabric(self) -> Fabric:
        """The fabric whose regions the arbiter hands out."""
        ...

    @property
    def call_timeout_s(self) -> float:
        """How long a driver may poll a core without progress (each core's guard)."""
        ...

    def preempt_to_software(self, service_id: int) -> bool:
        """Move juggle-placed ``service_id`` out of its region, which a tenant of higher
        priority needs; False when its calls did not drain yet (asked again later)."""
        ...

    def return_to_hardware(self, service_id: int, region: str) -> bool:
        """Program preempted ``service_id`` into ``region`` again; False when that failed."""
        ...

    def note_fault(self, region: str, service_id: int, reason: str) -> None:
        """Record a contained fault of ``service_id`` in ``region`` (``fw.faults``)."""
        ...


# -- internal records ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Tenant:
    name: str
    priority: int
    realtime: bool
    model: ProgrammingModel
    channel: SignalChannel
    #: calls, waits and preemptions of the devices it gave back, by device (its snapshot
    #: adds them to the device's live gate: counters survive a disconnect)
    past: dict[str, list[int]] = field(default_factory=dict)
    #: the same of devices whose service stopped, and the PREEMPTs it heard about the
    #: juggle-placed co-modules it uses (in the tenant's totals only)
    gone: list[int] = field(default_factory=lambda: [0, 0, 0])


class _SharedHost:
    """The :class:`~juggle.runtime.hardware.HardwareHost` of an arbitrated service's devices:
    the service answers for itself (twin, verification, counters); a faulty core is only
    quarantined here (its window cut), and its region fails when the call leaves the gate."""

    __slots__ = ("_managed",)

    def __init__(self, managed: ManagedService) -> None:
        self._managed = managed

    @property
    def service_id(self) -> int:
        """The service's id."""
        return self._managed.service_id

    @property
    def interface_name(self) -> str:
        """The service's main interface name."""
        return self._managed.interface_name

    @property
    def has_software(self) -> bool:
        """Whether the service has a software tier to fall back to."""
        return self._managed.has_software

    def software_twin(self, consumer: str) -> object | None:
        """A fresh implementation of the service's software tier (None: it has none)."""
        return self._managed.software_twin(consumer)

    def verify_every(self) -> int:
        """The service's base verification rate."""
        return self._managed.verify_every()

    def verify_schedule(self) -> VerifySchedule:
        """The check plan of a core just programmed for the service."""
        return self._managed.verify_schedule()

    def hardware_fault(self, core: HardwareCore, reason: str) -> None:
        """Quarantine ``core`` (cut off the bus at once); the gate fails its region when the
        failing call leaves it."""
        core.quarantine(reason)

    def count(self, what: str) -> None:
        """Count a fallback, a verified call or a mismatch of the service."""
        self._managed.count(what)


@dataclass(slots=True)
class _Service:
    """A service the allocator places: device name, driver, bitstreams; for an arbitrated
    one, its devices' host and class (made on the first tenant's device)."""

    service_id: int
    device: str
    interface: str
    driver: type
    bitstreams: dict[str, tuple[Bitstream, bytes]]
    resources: Resources | None
    context_bytes: int
    managed: ManagedService
    arbitrated: bool = False
    gone: bool = False
    preempted: bool = False
    consumers: set[str] = field(default_factory=set)
    device_cls: type[GatedDevice] | None = None
    host: _SharedHost | None = None


class _Gate:
    """The arbiter's side of one tenant's device of an arbitrated service (a
    :class:`~juggle.runtime.hardware.DeviceGate`): the allocator's (tenant, device) it stands
    for, its :class:`~juggle.runtime.hardware.GatedDevice`, and what the tenant's snapshot
    counts. ``gone``: the tenant gave the service back during a call (released at its end)."""

    __slots__ = (
        "_arbiter",
        "calls",
        "device",
        "gone",
        "hardware",
        "preemptions",
        "running",
        "service_id",
        "tenant",
        "waits",
    )

    def __init__(self, arbiter: TenantArbiter, tenant: str, device: str, service_id: int) -> None:
        self._arbiter = arbiter
        self.tenant = tenant
        self.device = device
        self.service_id = service_id
        self.hardware: GatedDevice | None = None
        self.running = False
        self.gone = False
        self.calls = 0
        self.waits = 0
        self.preemptions = 0

    def enter(self, device: GatedDevice) -> HardwareCore:
        """Connect ``device`` to a region's core and start its computation (see
        :meth:`TenantArbiter._enter`)."""
        return self._arbiter._enter(self)

    def leave(self, device: GatedDevice, core: HardwareCore) -> None:
        """The call on ``core`` is over (see :meth:`TenantArbiter._leave`)."""
        self._arbiter._leave(self, core)

    def __repr__(self) -> str:
        state = "running" if self.running else "idle"
        return f"<_Gate {self.tenant}/{self.device} {state}, {self.calls} calls>"


@dataclass(frozen=True, slots=True)
class _Job:
    """Work for the manager thread: ``program`` a region for a device, ``stop`` (move) a
    juggle-placed service out of its region, or ``contain`` a core fault on the fabric."""

    kind: str
    region: str
    device: str
    service_id: int | None = None
    reason: str = ""


# -- the arbiter ---------------------------------------------------------------------------------


class TenantArbiter:
    """One allocator for the framework's fabric, its tenants, and their virtual devices.

    Created with the framework for its ``host`` (see :class:`TenancyHost`).
    ``wait_timeout_s`` bounds how long a native tenant's call waits for its device (the
    framework's drain timeout); ``hold_us`` is the allocator's hold time (a device told READY
    has that long to start). ``hysteresis_us`` is the hysteresis hold of a region between its
    holder's calls (see the module docstring): None (the default) derives it per region,
    ``hysteresis_factor`` times the modeled reconfiguration time of the holder's bitstream; 0
    turns it off. ``clock`` returns the time in microseconds (default: the monotonic wall clock).

    Raises :class:`~juggle.errors.AllocatorError` for a negative ``hold_us`` or
    ``hysteresis_us``, or a ``hysteresis_factor`` that is not a positive finite number.
    """

    def __init__(
        self,
        host: TenancyHost,
        *,
        wait_timeout_s: float,
        hold_us: float = DEFAULT_HOLD_US,
        hysteresis_us: float | None = None,
        hysteresis_factor: float = HYSTERESIS_FACTOR,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._host = host
        self._hold_us = hold_us
        self._hysteresis = (hysteresis_us, hysteresis_factor)
        self._clock = clock if clock is not None else _wall_us
        self._wait_timeout_s = wait_timeout_s
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._deliver = threading.RLock()
        self._outbox: deque[tuple[Callable[[TenantSignal], None], TenantSignal]] = deque()
        self._tenants: dict[str, _Tenant] = {}
        self._services: dict[int, _Service] = {}
        self._by_device: dict[str, _Service] = {}
        self._unindexed: dict[int, _Service] = {}  # stopped, device still in the index
        self._gates: dict[tuple[str, str], _Gate] = {}  # (tenant, device) → its gate
        self._cores: dict[str, tuple[str, HardwareCore]] = {}  # region → (device, its core)
        self._faulted: dict[str, str] = {}  # region → why its core failed (until blanked)
        self._jobs: deque[_Job] = deque()
        self._manager: threading.Thread | None = None
        self._version = 0
        self._waiters = 0  # threads in _wait (under the lock)
        self._active = 0  # jobs the manager thread is carrying out now
        self._told: dict[tuple[str, str], SignalKind] = {}  # the last signal about a device
        self._seq = 0
        self._closed = False
        self._counters = {"programs": 0, "failures": 0, "faults": 0, "repeated_ready": 0}
        self._alloc = self._new_allocator()

    # -- tenants -------------------------------------------------------------------------------

    def add_tenant(
        self,
        name: str,
        *,
        priority: int | None = None,
        realtime: bool = False,
        model: str | ProgrammingModel = "native",
    ) -> TenantSnapshot:
        """Register tenant ``name`` (the consumer name its proxies are asked with).

        General-purpose priorities are 0..``LIVE_PRIORITY_LEVELS - 2`` (default 0); a
        real-time tenant gets the top one. Nothing changes when this raises:
        :class:`~juggle.errors.InvalidConsumerError` (not a non-empty string),
        :class:`~juggle.errors.ProgrammingModelError`, :class:`~juggle.errors.PriorityError`
        (out of range, or not an int), :class:`~juggle.errors.DuplicateTenantError`,
        :class:`~juggle.errors.TenancyClosedError`.
        """
        kind, public = self._tenant_class(name, priority, realtime, model)
        with self._cond:
            self._check_open()
            self._alloc.add_tenant(
                name, realtime=realtime, priority=None if realtime else public + 1, model=kind
            )
            record = _Tenant(name, public, realtime, kind, SignalChannel(name))
            self._tenants[name] = record
            return self._tenant_snapshot(record)

    def set_tenant(
        self,
        name: str,
        *,
        priority: int | None = None,
        realtime: bool = False,
        model: str | ProgrammingModel = "native",
    ) -> TenantSnapshot:
        """Give registered tenant ``name`` a new class, priority and programming model (as
        :meth:`add_tenant` takes them; a reloaded tenant policy). Its waiting requests take
        their new place in line, the regions it holds carry the new priority, a request it now
        outranks (or that now outranks it) preempts at the next consistency point, and the
        co-modules it uses hold their regions with the new standing. Signals from now on follow
        the new model. Nothing changes when this raises: the errors of :meth:`add_tenant`
        (but :class:`~juggle.errors.UnknownTenantError` for a name not registered).
        """
        kind, public = self._tenant_class(name, priority, realtime, model)
        with self._cond:
            self._check_open()
            record = self._tenant(name)
            now = self._now()
            actions = self._alloc.set_tenant(
                name, now, realtime=realtime, priority=None if realtime else public + 1, model=kind
            )
            record.priority, record.realtime, record.model = public, realtime, kind
            for svc in self._services.values():
                if svc.arbitrated or name not in svc.consumers:
                    continue
                prio, preemptible = self._standing(svc)
                actions += self._alloc.set_priority(
                    SYSTEM_TENANT, svc.device, prio, now, preemptible=preemptible
                )
            self._execute(actions)
            snapshot = self._tenant_snapshot(record)
        self._flush()
        return snapshot

    def _tenant_class(
        self, name: str, priority: int | None, realtime: bool, model: str | ProgrammingModel
    ) -> tuple[ProgrammingModel, int]:
        """Checked arguments of :meth:`add_tenant`/:meth:`set_tenant`: the programming model
        and the public priority (``LIVE_PRIORITY_LEVELS - 1`` for a real-time tenant)."""
        if not isinstance(name, str) or not name:
            raise InvalidConsumerError(
                f'tenant "name" must be a non-empty string; got {name!r}', value=scalar(name)
            )
        kind = parse_model(model)
        if name == SYSTEM_TENANT:
            raise InvalidConsumerError(
                f"tenant name {name!r} is reserved for the framework's own placements", value=name
            )
        if not isinstance(realtime, bool):
            raise PriorityError(
                f'"realtime" of tenant {name!r} must be True or False; got {realtime!r}',
                tenant=name,
                value=scalar(realtime),
            )
        if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
            raise PriorityError(
                f'"priority" must be an int; got {priority!r}', value=scalar(priority)
            )
        top = LIVE_PRIORITY_LEVELS - 1
        if priority is not None and not realtime and not 0 <= priority < top:
            raise PriorityError(
                f'"priority" of general-purpose tenant {name!r} must be in 0..{top - 1}; got '
                f"{priority}",
                tenant=name,
                value=priority,
            )
        if priority is not None and realtime and priority != top:
            raise PriorityError(
                f'"priority" of real-time tenant {name!r} must be {top}; got {priority}',
                tenant=name,
                value=priority,
            )
        return kind, top if realtime else (priority or 0)

    def tenants(self) -> tuple[TenantSnapshot, ...]:
        """Snapshots of every tenant, in registration order."""
        with self._cond:
            return tuple(self._tenant_snapshot(t) for t in self._tenants.values())

    def signals(self, tenant: str) -> SignalChannel:
        """``tenant``'s signal channel. Raises :class:`~juggle.errors.UnknownTenantError`."""
        with self._cond:
            return self._tenant(tenant).channel

    # -- services (framework hooks) -----------------------------------------------------------

    def arbitrates(self, service_id: int) -> bool:
        """Whether tenants' requests place ``service_id`` (hardware-only, started while tenants
        were registered, still running); juggles do not."""
        with self._cond:
            svc = self._services.get(service_id)
            return svc is not None and svc.arbitrated and not svc.gone

    def device_of(self, service_id: int) -> str | None:
        """The allocator's device name of arbitrated ``service_id`` (what its tenants'
        signals and snapshots name); None when the arbiter does not arbitrate it."""
        with self._cond:
            svc = self._services.get(service_id)
            if svc is None or not svc.arbitrated or svc.gone:
                return None
            return svc.device

    def add_service(self, managed: ManagedService) -> bool:
        """Index a freshly started service with a hardware tier as a device of the allocator
        (named after its bitstreams' design); returns whether it is arbitrated: hardware-only
        and started while tenants are registered, so tenants' requests place it on demand
        and only tenants may use it. Any other is placed by juggles (the framework's own
        tenant), which this allocator decides as well.

        Raises :class:`~juggle.errors.TaskIndexError` for a device the fabric cannot index
        and :class:`~juggle.errors.TenancyClosedError`; nothing changes then.
        """
        hw = managed.hardware
        if hw is None or not hw.bitstreams:
            return False
        design = next(iter(hw.bitstreams.values()))[0].design
        with self._cond:
            self._check_open()
            taken = {d.name for d in self._alloc.index.devices} | set(self._by_device)
            device = design if design not in taken else f"{design}-{managed.service_id}"
            svc = _Service(
                managed.service_id,
                device,
                managed.interface_name,
                hw.driver,
                dict(hw.bitstreams),
                hw.resources,
                DEFAULT_CONTEXT_BYTES,
                managed,
                arbitrated=managed.home_tier == Tier.HARDWARE and len(self._tenants) > 0,
            )
            spec, tasks = self._device_of(svc)
            self._alloc.add_device(spec, tasks, owner=svc.service_id)
            self._services[svc.service_id] = svc
            self._by_device[device] = svc
            return svc.arbitrated

    def forget(self, service_id: int) -> None:
        """The service stopped (the framework took it out of the fabric first): later calls
        of its virtual devices raise :class:`~juggle.errors.ServiceUnavailableError`, waiting
        requests are withdrawn, its device leaves the index and the arbiter forgets it. A
        device running a call or being placed leaves when that ends (see :meth:`_sweep`)."""
        with self._cond:
            svc = self._services.get(service_id)
            if svc is None or svc.gone:
                return
            svc.gone = True
            self._unindexed[service_id] = svc
            self._sweep()
            if service_id in self._unindexed:
                log.info("tenancy: device %s leaves the index when its work ends", svc.device)
            self._bump()
        self._flush()

    def _sweep(self) -> None:
        """Under the lock: devices of stopped services leave the index once none of their
        virtual devices runs or is being placed; their services are forgotten."""
        for svc in list(self._unindexed.values()):
            if not self._closed:
                try:
                    self._execute(self._alloc.remove_device(svc.device, self._now()))
                except UnknownDeviceError:
                    pass  # dropped already
                except AllocatorError:
                    continue  # a call still runs, or a placement: its region stays booked
            self._purge(svc)

    def _purge(self, svc: _Service) -> None:
        """Under the lock: forget stopped ``svc``, whose device left the index: its record,
        its tenants' gates and devices, and the cores programmed for it."""
        self._unindexed.pop(svc.service_id, None)
        if self._services.get(svc.service_id) is svc:
            del self._services[svc.service_id]
        if self._by_device.get(svc.device) is svc:
            del self._by_device[svc.device]
        for key in [k for k in self._gates if k[1] == svc.device]:
            self._fold(self._gates.pop(key))
        for tenant in self._tenants.values():  # the device leaves: its counts stay in totals
            kept = tenant.past.pop(svc.device, None)
            if kept is not None:
                tenant.gone = [a + b for a, b in zip(tenant.gone, kept, strict=True)]
        for key in [k for k in self._told if k[1] == svc.device]:
            del self._told[key]
        for region in [r for r, (d, _) in self._cores.items() if d == svc.device]:
            self._retire(region)

    def virtual_device(self, managed: ManagedService, consumer: str) -> GatedDevice:
        """The virtual device of tenant ``consumer`` for arbitrated service ``managed``: a
        :class:`~juggle.runtime.hardware.GatedDevice` (one per tenant and service; a fresh
        one, with no state of before, once the tenant gave the service back).

        Raises :class:`~juggle.errors.NotATenantError` for a consumer that is no tenant,
        :class:`~juggle.errors.ServiceUnavailableError` for a stopped service and
        :class:`~juggle.errors.TenancyClosedError`.
        """
        sid = managed.service_id
        with self._cond:
            if consumer not in self._tenants:
                raise NotATenantError(
                    f"consumer {consumer!r} is not a tenant, and service {sid} "
                    f"({managed.interface_name}) is arbitrated among tenants: register it with "
                    "add_tenant() first",
                    consumer=consumer,
                )
            svc = self._live_service(sid)
            gate = self._gate(consumer, svc)
            if gate.hardware is None or gate.gone:
                gate.gone = False  # taken again before the last call ended: a fresh device
                cls, host = svc.device_cls, svc.host
                if cls is None or host is None:
                    made = device_class(managed.interface, svc.interface, svc.driver, GatedDevice)
                    cls = svc.device_cls = cast(type[GatedDevice], made)
                    host = svc.host = _SharedHost(managed)
                gate.hardware = cls(host, consumer, StateRecord(), gate)
            return gate.hardware

    def release_consumer(self, managed: ManagedService, consumer: str) -> None:
        """Tenant ``consumer`` gave its proxy of arbitrated ``managed`` back (or its client
        died): its virtual device leaves its region or the wait list and is forgotten with its
        gate (its context and state go too); a call running now does that when it ends."""
        with self._cond:
            svc = self._services.get(managed.service_id)
            if svc is None or consumer not in self._tenants:
                return
            gate = self._gates.get((consumer, svc.device))
            if gate is None:
                return
            if gate.running:
                gate.gone = True
                return
            self._let_go(gate)
        self._flush()

    def _fold(self, gate: _Gate) -> None:
        """Under the lock: keep the counts of ``gate``, which is being forgotten, with its
        tenant (the tenant's snapshot goes on counting them); the gate's counts are zeroed,
        so they are kept once."""
        tenant = self._tenants.get(gate.tenant)
        if tenant is not None:
            kept = tenant.past.setdefault(gate.device, [0, 0, 0])
            kept[0] += gate.calls
            kept[1] += gate.waits
            kept[2] += gate.preemptions
        gate.calls = gate.waits = gate.preemptions = 0

    def _let_go(self, gate: _Gate) -> None:
        """Under the lock: forget ``gate`` and release its device in the allocator (its
        interface keeps no context: :meth:`save_context` finds no gate)."""
        if self._gates.get((gate.tenant, gate.device)) is gate:
            del self._gates[(gate.tenant, gate.device)]
            self._fold(gate)
        self._told.pop((gate.tenant, gate.device), None)  # a fresh device starts unknown
        if self._closed or self._alloc.device_state(gate.tenant, gate.device) is _DISCONNECTED:
            return
        try:
            self._execute(self._alloc.release(gate.tenant, gate.device, self._now()))
        except DeviceStateError as exc:  # pragma: no cover - released between two calls
            log.warning("tenancy: release of %s/%s refused: %s", gate.tenant, gate.device, exc)
        self._bump()

    # -- a call: the gate of an arbitrated device ------------------------------------------------

    def _enter(self, gate: _Gate) -> HardwareCore:
        """Get ``gate``'s device a region and start its computation (``start``); its core.
        Blocks a native tenant until READY. Raises :class:`~juggle.errors.WaitSignal`
        (aware tenant, device not ready), :class:`~juggle.errors.DeviceWaitTimeoutError`
        (native tenant waited too long), :class:`~juggle.errors.HardwareFaultError` (every
        region of the service is quarantined), :class:`~juggle.errors.ServiceUnavailableError`
        (service stopped) and :class:`~juggle.errors.TenancyClosedError`."""
        deadline = time.monotonic() + self._wait_timeout_s
        while True:
            with self._cond:
                svc = self._live_service(gate.service_id)
                verdict = self._try_start(gate, svc)
                version = self._version
                hardware = gate.hardware
                core = hardware.core if hardware is not None else None
                failure = self._failure(svc) if verdict == _FAULT else None
            self._flush()
            if verdict == _GO:
                assert core is not None  # _try_start starts only a device bound to a core
                return core
            if failure is not None:
                raise failure
            if verdict == _WAIT:
                raise WaitSignal(
                    f"WAIT: {gate.tenant}/{gate.device} is not connected; its request is "
                    "queued, READY follows on the tenant's signal channel",
                    tenant=gate.tenant,
                    device=gate.device,
                    service_id=svc.service_id,
                )
            with self._cond:
                while self._version == version:
                    self._check_open()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._give_up(gate)
                        raise DeviceWaitTimeoutError(
                            f"{gate.tenant}/{gate.device} waited {self._wait_timeout_s} s for "
                            "a region",
                            tenant=gate.tenant,
                            device=gate.device,
                        )
                    self._wait(remaining)

    def _try_start(self, gate: _Gate, svc: _Service) -> str:
        """Under the lock: start if connected, request if disconnected, give up if every
        region of the service is quarantined; else the verdict (block or wait)."""
        self._check_open()
        alloc, t, d = self._alloc, gate.tenant, gate.device
        device = gate.hardware
        for _ in range(3):
            state = alloc.device_state(t, d)
            if state is _CONNECTED and device is not None and device.core is not None:
                try:
                    out = alloc.start(t, d, self._now())
                except DeviceStateError:  # its hold expired and the region went to another
                    continue
                gate.running = True
                gate.calls += 1
                self._execute(out)
                return _GO
            if state is not _DISCONNECTED or self._unserviceable(svc):
                break
            self._execute(alloc.request(t, d, self._now()).actions)
        if self._unserviceable(svc):
            self._give_up(gate)
            return _FAULT
        return _WAIT if self._tenants[t].model is ProgrammingModel.AWARE else _BLOCK

    def _unserviceable(self, svc: _Service) -> bool:
        """Under the lock: whether every region ``svc`` has a bitstream for is quarantined."""
        return bool(svc.bitstreams) and all(r in self._faulted for r in svc.bitstreams)

    def _failure(self, svc: _Service) -> HardwareFaultError:
        """Under the lock: the error of a call of ``svc`` while its regions are quarantined."""
        regions = sorted(r for r in svc.bitstreams if r in self._faulted)
        where = "; ".join(f"region {r!r} ({self._faulted[r]})" for r in regions)
        return HardwareFaultError(
            f"service {svc.service_id} ({svc.interface}) failed in {where}, quarantined until "
            "recovered, and has no software tier",
            service_id=svc.service_id,
            region=regions[0],
        )

    def _leave(self, gate: _Gate, core: HardwareCore) -> None:
        """The call on ``core`` is over: a consistency point (``finish``; a pending preemption
        happens). If the call found the core faulty, the region fails instead (see
        :meth:`_core_failed`)."""
        with self._cond:
            gate.running = False
            if not self._closed:
                if core.fault is not None:
                    self._core_failed(gate, core)
                elif self._alloc.device_state(gate.tenant, gate.device) is _CONNECTED:
                    try:
                        self._execute(self._alloc.finish(gate.tenant, gate.device, self._now()))
                    except AllocatorError as exc:  # pragma: no cover - an invariant broke
                        log.error("finish(%s, %s) refused: %s", gate.tenant, gate.device, exc)
                if gate.gone:  # given back during the call
                    self._let_go(gate)
                if self._unindexed:
                    self._sweep()
            self._bump()
        self._flush()

    def _core_failed(self, gate: _Gate, core: HardwareCore) -> None:
        """Under the lock: ``gate``'s call found ``core`` faulty (quarantined already). A
        pending preemption goes ahead first (the context saved is empty); then, if ``core`` is
        still its region's, the region fails (:meth:`_fail`) and the manager quarantines it on
        the fabric and notes the fault; else the computation just ends."""
        region, reason = core.region, core.fault or "quarantined"
        alloc, t, d = self._alloc, gate.tenant, gate.device
        if alloc.region_state(region) is RegionPhase.PREEMPT:
            self._execute(alloc.finish(t, d, self._now()))
        held = self._cores.get(region)
        if held is not None and held[1] is core and self._fail(region, reason):
            self._jobs.append(_Job("contain", region, d, gate.service_id, reason))
            self._start_manager()
            return
        if alloc.device_state(t, d) is _CONNECTED:
            try:
                self._execute(alloc.finish(t, d, self._now()))
            except AllocatorError as exc:  # pragma: no cover - an invariant broke
                log.error("finish(%s, %s) refused: %s", t, d, exc)

    def _fail(self, region: str, reason: str) -> bool:
        """Under the lock: the core in ``region`` failed. Its client is disconnected without a
        save (the context it was given before is dropped too: its recorded calls rebuild its
        state on the next core), the region enters Error and stays out of use, its arbitrated
        tenants' calls refused, until :meth:`blank`. False when the allocator cannot fault it
        now (it is being reprogrammed: the new design replaces the core)."""
        try:
            actions = self._alloc.fault(region, self._now())
        except AllocatorError as exc:
            log.warning("tenancy: fault of %s not recorded: %s", region, exc)
            return False
        self._faulted[region] = reason
        self._retire(region)
        self._execute(actions)
        self._forget_contexts(actions)
        return True

    def _forget_contexts(self, actions: Iterable[Action]) -> None:
        """Under the lock: the devices ``actions`` disconnected without a save keep no stale
        context (interface buffer and device alike): their recorded calls are replayed."""
        for action in actions:
            if isinstance(action, Disconnect) and action.tenant != SYSTEM_TENANT:
                self._alloc.interface(action.tenant, action.device).save(b"")
                gate = self._gates.get((action.tenant, action.device))
                if gate is not None and gate.hardware is not None:
                    gate.hardware.context = None

    def _give_up(self, gate: _Gate) -> None:
        """Under the lock: a wait ended without a region: withdraw the request if queued."""
        if self._alloc.device_state(gate.tenant, gate.device) is _WAITING:
            self._execute(self._alloc.release(gate.tenant, gate.device, self._now()))

    def _retire(self, region: str) -> None:
        """Under the lock: the core programmed in ``region`` is done with (the region is
        reprogrammed, emptied or failed): detached from its window and forgotten."""
        held = self._cores.pop(region, None)
        if held is not None:
            held[1].window.detach()

    # -- carrying out actions (under the lock) --------------------------------------------------

    def _execute(self, actions: Iterable[Action]) -> None:
        """Carry out ``actions`` in order; reconfigurations, co-module moves and fault
        containment go to the manager thread, which also expires holds (it runs while there
        is a job or a hold)."""
        for action in actions:
            try:
                execute(self, (action,))
            except JuggleError as exc:
                self._counters["faults"] += 1
                log.error("tenancy: %r failed: %s", action, exc)
        if self._jobs or self._alloc.next_deadline() is not None:
            self._start_manager()
        self._bump()

    # the operations of juggle.core.execute.Operations: what each allocator action does here.
    # Actions about the framework's own tenant (juggle-placed services) move proxies instead
    # of tenant devices: the juggler carries their state.

    def reconfigure(self, action: Reconfigure) -> None:
        """Queue the region's programming for the manager thread (the configuration port);
        the core there now is done with."""
        self._retire(action.region)
        self._jobs.append(_Job("program", action.region, action.device))

    def connect(self, action: Connect) -> None:
        """Bind the tenant's device to the core of the region (its next call restores the
        context it was given)."""
        if action.tenant == SYSTEM_TENANT:
            return
        gate = self._gates.get((action.tenant, action.device))
        if gate is None or gate.hardware is None:
            return  # given back meanwhile: the allocator releases it
        held = self._cores.get(action.region)
        if held is not None and held[0] == action.device:
            gate.hardware.core = held[1]
            return
        svc = self._by_device.get(action.device)
        if svc is not None and not svc.gone:  # (a stopped service's device is dropped now)
            log.error("tenancy: no core of %s in %s to connect", action.device, action.region)

    def disconnect(self, action: Disconnect) -> None:
        """Unbind the tenant's device: it holds no core until it is connected again."""
        if action.tenant == SYSTEM_TENANT:
            return
        gate = self._gates.get((action.tenant, action.device))
        if gate is not None and gate.hardware is not None:
            gate.hardware.core = None

    def save_context(self, action: SaveContext) -> None:
        """The core's save routine (the driver's ``save_context()``) fills the tenant's
        context buffer; a device given back leaves it empty. A driver failing here
        quarantines the core (the next call on it fails its region)."""
        if action.tenant == SYSTEM_TENANT:
            return
        gate = self._gates.get((action.tenant, action.device))
        held = self._cores.get(action.region)
        data = b""
        if (
            gate is not None
            and gate.hardware is not None
            and held is not None
            and held[0] == action.device
        ):
            core = held[1]
            try:
                data = core.save(gate.hardware)
            except Exception as exc:  # a driver is third-party code
                core.quarantine(f"save_context() raised {type(exc).__name__}: {exc}")
        action.interface.save(data)

    def restore_context(self, action: RestoreContext) -> None:
        """Give the tenant's saved context to its device: the core restores it before the
        device's next call (empty: the core is reset and the device's calls replayed)."""
        if action.tenant == SYSTEM_TENANT:
            return
        gate = self._gates.get((action.tenant, action.device))
        if gate is not None and gate.hardware is not None:
            gate.hardware.context = action.interface.load() or None

    def stop_at_consistency_point(self, action: StopAtConsistencyPoint) -> None:
        """A tenant's call is the unit of work, so its end is the point: nothing to do. A
        juggle-placed service is moved to its software tier by the manager thread (running
        calls finish in hardware, new ones go to software), which then reports the stop."""
        if action.tenant == SYSTEM_TENANT:
            self._jobs.append(_Job("stop", action.region, action.device))
        else:
            log.debug("%s/%s stops at its call's end", action.tenant, action.device)

    def solution(self, action: Solution) -> None:
        """A later solution is announced; its own actions follow in the list."""

    def signal(self, action: Signal) -> None:
        """Tell the tenant WAIT, READY or PREEMPT on its channel. For a juggle-placed
        service, the tenants among its consumers hear PREEMPT, and READY once it is back."""
        if action.tenant != SYSTEM_TENANT:
            gate = self._gates.get((action.tenant, action.device))
            if gate is not None and action.signal is SignalKind.WAIT:
                gate.waits += 1
            elif gate is not None and action.signal is SignalKind.PREEMPT:
                gate.preemptions += 1
            self._tell(action.tenant, action.device, action.signal)
            return
        svc = self._by_device.get(action.device)
        if svc is None:
            return
        if action.signal is SignalKind.PREEMPT:
            svc.preempted = True
        elif action.signal is SignalKind.READY and svc.preempted:
            svc.preempted = False
        else:
            return
        for name in sorted(svc.consumers):
            record = self._tenants.get(name)
            if record is not None and action.signal is SignalKind.PREEMPT:
                record.gone[2] += 1  # the co-module it uses was preempted: its preemption
            self._tell(name, action.device, action.signal)

    def _tell(self, tenant: str, device: str, kind: SignalKind) -> None:
        """Under the lock: queue ``kind`` on ``tenant``'s channel, unless it is a READY about
        a device whose last signal was READY already (no state change: counted, not sent)."""
        record = self._tenants.get(tenant)
        if record is None:
            return
        key = (tenant, device)
        if kind is SignalKind.READY and self._told.get(key) is SignalKind.READY:
            self._counters["repeated_ready"] += 1
            return
        self._told[key] = kind
        svc = self._by_device.get(device)
        self._seq += 1
        signal = TenantSignal(
            tenant, device, svc.service_id if svc else None, kind, self._now(), self._seq
        )
        for callback in record.channel.push(signal):
            self._outbox.append((callback, signal))

    # -- juggles: the framework's own tenant -----------------------------------------------------

    def begin_juggle(
        self, entering: ManagedService | None, leaving: Sequence[ManagedService]
    ) -> JuggleTicket:
        """Ask the allocator for a juggle (see :meth:`Allocator.juggle`); the framework
        carries it out and reports with :meth:`end_juggle`. Nothing changes when this raises:
        :class:`~juggle.errors.SanityCheckError`, :class:`~juggle.errors.TierUnavailableError`
        or :class:`~juggle.errors.TenancyClosedError`."""
        with self._cond:
            self._check_open()
            self._reprogrammable()
            ent = self._view(entering) if entering is not None else None
            prio, preemptible = (
                self._standing(self._services[entering.service_id])
                if entering is not None and entering.service_id in self._services
                else (0, True)
            )
            ticket = self._alloc.juggle(
                ent,
                [self._view(m) for m in leaving],
                self._now(),
                tenant=SYSTEM_TENANT,
                priority=prio,
                preemptible=preemptible,
            )
            self._execute(ticket.actions)
            if ticket.region is not None:  # the juggle programs it: a tenant core there goes
                self._retire(ticket.region)
        self._flush()
        return ticket

    def _reprogrammable(self) -> None:
        """Under the lock: regions in Error whose core did not fail (a failed programming
        step, here or in a tenant's placement; the fabric region is not quarantined) are free
        again: the juggle about to be planned may program them, which is their recovery."""
        fabric = self._host.fabric
        for region in fabric.region_names():
            if (
                self._alloc.region_state(region) is RegionPhase.ERROR
                and region not in self._faulted
                and not fabric.region(region).snapshot().quarantined
            ):
                self._execute(self._alloc.repair(region, self._now()))

    def end_juggle(self, ticket: JuggleTicket, *, ok: bool) -> None:
        """The framework carried ``ticket`` out (``ok``) or undid it. Undone, the regions it
        touched are settled against the fabric: one whose core was quarantined enters Error
        (out of use until recovered); one whose programming failed, or that the undo did not
        give back to the service that left it (the undo failed too), is blank and free for
        the next juggle, which programs it afresh."""
        regions: list[str] = []
        quarantined: list[str] = []
        if not ok:
            touched = {slot.name for _, slot, _, _ in ticket.legs}
            if ticket.region is not None:
                touched.add(ticket.region)
            regions = sorted(touched)
            fabric = self._host.fabric
            quarantined = [r for r in regions if fabric.region(r).snapshot().quarantined]
        with self._cond:
            if not self._closed:
                now = self._now()
                self._execute(self._alloc.juggled(ticket, now, ok=ok, faulted=quarantined))
                for region in regions:
                    if region not in quarantined:
                        self._settle(region)
                if self._unindexed:
                    self._sweep()
        self._flush()

    def _settle(self, region: str) -> None:
        """Under the lock: the framework's ``region`` (no tenant's) agrees with who serves
        from it: in Error (a failed programming step) or counted as held by a juggle-placed
        service that does not serve from it, it becomes blank and free (Idle, no design)."""
        alloc = self._alloc
        state = alloc.region_state(region)
        if state is not RegionPhase.ERROR:
            holder = self._system_client(region)
            if holder is None or holder.managed.region == region:
                return  # free, or its service serves from it
            self._execute(alloc.fault(region, self._now()))
        self._execute(alloc.repair(region, self._now()))

    def _system_client(self, region: str) -> _Service | None:
        """Under the lock: the juggle-placed service the allocator counts in ``region``."""
        for svc in self._services.values():
            if not svc.arbitrated and (
                self._alloc.connected_region(SYSTEM_TENANT, svc.device) == region
            ):
                return svc
        return None

    def holder(self, region: str) -> str | None:
        """Who holds ``region`` apart from the framework's own juggle-placed services: a
        tenant's device connected, held or being placed there, or a placement in progress
        (None: nobody, or a juggle-placed service)."""
        with self._cond:
            if self._closed:
                return None
            snap = next(r for r in self._alloc.statistics().regions if r.name == region)
        for label in (snap.client, snap.incoming):
            if label is not None and not label.startswith(f"{SYSTEM_TENANT}/"):
                return f"tenant device {label} ({snap.state})"
        if snap.state in ("Preempt", "Switch", "Reconfig"):
            return f"a placement in progress ({snap.state})"
        return None

    def blank(self, region: str) -> None:
        """The framework emptied ``region`` (a recovery, a stopped service taken out by force):
        whatever the allocator counted in it is disconnected without saving (the core is gone)
        and the region is Idle with no design, in use again (the next request programs it).
        Call it only for a region :meth:`holder` says no tenant holds."""
        with self._cond:
            if self._closed:
                return
            alloc, now = self._alloc, self._now()
            self._faulted.pop(region, None)
            self._retire(region)
            if alloc.region_state(region) in (RegionPhase.BUSY, RegionPhase.IDLE, RegionPhase.HOLD):
                actions = alloc.fault(region, now)
                self._execute(actions)
                self._forget_contexts(actions)
            if alloc.region_state(region) is RegionPhase.ERROR:
                self._execute(alloc.repair(region, now))
            if self._unindexed:
                self._sweep()
        self._flush()

    def fault(self, region: str) -> None:
        """The core in ``region`` was quarantined (a juggle-placed service's, contained by
        the framework): the allocator's region enters Error, out of use until :meth:`blank`
        (see :meth:`_fail`)."""
        with self._cond:
            if self._closed:
                return
            snap = self._host.fabric.region(region).snapshot()
            self._fail(region, snap.error or "its core was quarantined")
        self._flush()

    def repair(self, region: str) -> None:
        """``region``, in Error, was emptied: the allocator may hand it out again."""
        with self._cond:
            if self._closed or self._alloc.region_state(region) is not RegionPhase.ERROR:
                return
            self._faulted.pop(region, None)
            self._execute(self._alloc.repair(region, self._now()))
        self._flush()

    def note_consumer(self, managed: ManagedService, consumer: str) -> None:
        """``consumer`` got a proxy of ``managed``: if it is a tenant, the service's placement
        holds its region with that tenant's priority from now on (the highest of its tenant
        consumers; a real-time one makes it unpreemptible)."""
        with self._cond:
            svc = self._services.get(managed.service_id)
            if svc is None or svc.arbitrated or consumer not in self._tenants:
                return
            if consumer in svc.consumers:
                return
            svc.consumers.add(consumer)
            prio, preemptible = self._standing(svc)
            if not self._closed:
                self._execute(
                    self._alloc.set_priority(
                        SYSTEM_TENANT, svc.device, prio, self._now(), preemptible=preemptible
                    )
                )
        self._flush()

    def _standing(self, svc: _Service) -> tuple[int, bool]:
        """Priority and preemptibility of a juggle-placed service: its tenant consumers'
        highest priority (0, below every tenant, with none); a hardware-only service or one
        a real-time tenant uses is never preempted."""
        if not svc.consumers:  # no tenant uses it: below every tenant
            return 0, svc.managed.has_software
        prio = max(self._tenants[c].priority + 1 for c in svc.consumers)
        realtime = any(self._tenants[c].realtime for c in svc.consumers)
        return min(prio, SYSTEM_PRIORITY), not realtime and svc.managed.has_software

    def _view(self, m: ManagedService) -> ServiceView:
        svc = self._services.get(m.service_id)
        return ServiceView(
            service_id=m.service_id,
            label=m.interface_name,
            tier=m.tier,
            region=m.region,
            regions=tuple(m.hardware.bitstreams) if m.hardware and svc is not None else (),
            arbitrated=svc is not None and svc.arbitrated and not svc.gone,
            device=svc.device if svc is not None else "",
        )

    # -- the manager thread: configuration port, co-module moves, faults and hold timer -----------

    def _start_manager(self) -> None:
        if self._manager is None and not self._closed:
            self._manager = threading.Thread(
                target=self._manage, name="juggle-tenancy", daemon=True
            )
            self._manager.start()

    def _manage(self) -> None:
        while True:
            with self._cond:
                job = self._next_job()
                if job is None:
                    return
                if isinstance(job, _Job):
                    self._active += 1
            if isinstance(job, _Job):
                try:
                    self._run_job(job)
                finally:
                    with self._cond:
                        self._active -= 1
                        self._bump()
            self._flush()

    def _run_job(self, job: _Job) -> None:
        if job.kind == "contain":
            self._contain(job)
        elif job.kind == "stop":
            self._stop(job)
        else:
            self._place(job)

    def _contain(self, job: _Job) -> None:
        """A tenant's call found the core in ``job.region`` faulty (the region is in Error
        already): the host notes the fault, and the fabric quarantines the region (ERROR,
        until recovered) unless it was blanked meanwhile."""
        assert job.service_id is not None
        self._host.note_fault(job.region, job.service_id, job.reason)
        with self._cond:
            still = self._faulted.get(job.region) == job.reason and not self._closed
        if still:
            try:
                self._host.fabric.quarantine(job.region, f"service {job.service_id}: {job.reason}")
            except FabricError as exc:
                log.warning("tenancy: quarantining %s failed: %s", job.region, exc)

    def _stop(self, job: _Job) -> None:
        """A juggle-placed service yields its region to a tenant (asked again later while its
        calls do not drain)."""
        svc = self._by_device.get(job.device)
        assert svc is not None
        done = self._host.preempt_to_software(svc.service_id)
        with self._cond:
            if not done:  # its calls did not drain yet: try again later
                self._jobs.append(job)
                self._wait(0.05)
            elif not self._closed:
                try:
                    self._execute(self._alloc.stopped(job.region, self._now()))
                except AllocatorError as exc:  # the region faulted meanwhile
                    log.warning("tenancy: stop of %s in %s: %s", job.device, job.region, exc)
            self._bump()

    def _place(self, job: _Job) -> None:
        """Program ``job.region`` for ``job.device`` (a tenant's, or a preempted juggle-placed
        service coming back) and report it to the allocator."""
        region, device = job.region, job.device
        svc = self._by_device.get(device)
        system = svc is not None and not svc.arbitrated
        gone = svc is None or svc.gone
        if gone:
            ok = True  # nothing to load: the device is released at once below
        elif system:
            assert svc is not None
            ok = self._host.return_to_hardware(svc.service_id, region)
        else:
            ok = self._program(region, device)
        with self._cond:
            if not self._closed:
                try:
                    self._execute(self._alloc.reconfigured(region, self._now(), ok=ok))
                    if gone:
                        self._drop(device)
                    elif ok and system and svc is not None:
                        self._pin(svc)
                except AllocatorError as exc:  # pragma: no cover - an invariant broke
                    log.error("tenancy: placing %s in %s refused: %s", device, region, exc)
                if self._unindexed:
                    self._sweep()
            self._bump()

    def _drop(self, device: str) -> None:
        """Under the lock: a stopped service's device, placed after all, leaves the index."""
        now = self._now()
        for name in (SYSTEM_TENANT, *self._tenants):
            if self._alloc.device_state(name, device) is _CONNECTED:
                self._execute(self._alloc.release(name, device, now))
        self._execute(self._alloc.remove_device(device, now))
        svc = self._by_device.get(device)
        if svc is not None and svc.gone:
            self._purge(svc)

    def _pin(self, svc: _Service) -> None:
        """Under the lock: the service placed back computes until it leaves (Hold → Busy)."""
        if self._alloc.device_state(SYSTEM_TENANT, svc.device) is _CONNECTED:
            self._execute(self._alloc.start(SYSTEM_TENANT, svc.device, self._now()))

    def _next_job(self) -> _Job | bool | None:
        """Under the lock: the next job, False after expiring holds, None to end (closed, or
        nothing to do: :meth:`_execute` starts a new manager when needed)."""
        while not self._closed:
            if self._jobs:
                return self._jobs.popleft()
            due = self._alloc.next_deadline()
            if due is None:
                break
            now = self._now()
            if due <= now:
                self._execute(self._alloc.advance(now))
                return False
            self._wait((due - now) / 1e6)
        self._manager = None
        return None

    def _program(self, region: str, device: str) -> bool:
        """Load ``device``'s bitstream into ``region`` and build its core there: the driver
        on a guarded window (outside the lock); False on failure. A driver that fails to start
        is a fault of the region: quarantined (noted by the host) until recovered."""
        svc = self._by_device.get(device)
        if svc is None or region not in svc.bitstreams:
            log.error("tenancy: no bitstream of %s for %s", device, region)
            return self._count(False)
        fabric = self._host.fabric
        hardware = svc.managed.hardware
        assert hardware is not None  # only services with a hardware tier are devices here
        try:
            hardware.program(fabric, region, owner=OWNER)
            window = fabric.window(region)
        except JuggleError as exc:
            log.warning("tenancy: loading %s into %s failed: %s", svc.device, region, exc)
            return self._count(False)
        try:
            core = HardwareCore(
                region, svc.driver, window, call_timeout_s=self._host.call_timeout_s
            )
        except JuggleError as exc:  # ModuleCodeError: the driver's constructor failed
            reason = str(exc)
            log.warning("tenancy: %s", reason)
            with self._cond:
                self._faulted[region] = reason
            self._contain(_Job("contain", region, device, svc.service_id, reason))
            return self._count(False)
        with self._cond:
            self._cores[region] = (device, core)
        return self._count(True)

    def _count(self, ok: bool) -> bool:
        with self._cond:
            self._counters["programs" if ok else "failures"] += 1
        return ok

    # -- the index -------------------------------------------------------------------------------

    def _new_allocator(self) -> Allocator:
        """The allocator over the fabric's regions and its profile's devices, with the
        framework's own tenant (the one juggles place services for)."""
        profile = self._host.fabric.profile
        port = profile.config_port
        devices: list[DeviceSpec] = []
        tasks: list[TaskDescriptor] = []
        for d in profile.devices:
            for name in d.regions:
                region = profile.region(name)
                size = region.bitstream_bytes or region.max_bitstream_bytes
                t_us = port.transfer_ps(size) / 1e6
                tasks.append(TaskDescriptor(d.name, name, f"{d.name}@{name}.bit", size, t_us))
            devices.append(DeviceSpec(d.name, d.frame_us, d.preempt_us, d.context_bytes))
        regions = [RegionSpec(r.name, r.slices) for r in profile.regions]
        alloc = Allocator(
            TaskIndex(regions, devices, tasks),
            priority_levels=LIVE_PRIORITY_LEVELS + 1,
            hold_us=self._hold_us,
            hysteresis_us=self._hysteresis[0],
            hysteresis_factor=self._hysteresis[1],
        )
        alloc.add_tenant(SYSTEM_TENANT, priority=SYSTEM_PRIORITY, model=ProgrammingModel.AWARE)
        return alloc

    def _device_of(self, svc: _Service) -> tuple[DeviceSpec, list[TaskDescriptor]]:
        """``svc`` as a device of the index: a profile device of that name lends its frame,
        preemption and context sizes; its seats are the regions its bitstreams target."""
        profile = self._host.fabric.profile
        base = next((d for d in profile.devices if d.name == svc.device), None)
        frame, pre, ctx = (
            (base.frame_us, base.preempt_us, base.context_bytes) if base else (0, 0, 0)
        )
        slices = svc.resources.slices if svc.resources is not None else None
        spec = DeviceSpec(svc.device, frame, pre, max(ctx, svc.context_bytes), slices)
        port = profile.config_port
        tasks = [
            TaskDescriptor(svc.device, r, bs.source, bs.size, port.transfer_ps(bs.size) / 1e6)
            for r, (bs, _) in svc.bitstreams.items()
        ]
        return spec, tasks

    # -- helpers ---------------------------------------------------------------------------------

    def _now(self) -> float:
        return self._clock()

    def _bump(self) -> None:
        self._version += 1
        if self._waiters:  # nobody waits on most changes (a juggle, a call): no notify
            self._cond.notify_all()

    def _wait(self, timeout: float) -> None:
        """Wait (holding the lock) until :meth:`_bump` or ``timeout`` seconds."""
        self._waiters += 1
        try:
            self._cond.wait(timeout)
        finally:
            self._waiters -= 1

    def _flush(self) -> None:
        """Deliver queued listener callbacks in emission order (outside the arbiter lock)."""
        outbox = self._outbox
        with self._deliver:  # only the holder pops: a non-empty outbox has a first item
            while outbox:
                callback, signal = outbox.popleft()
                try:
                    callback(signal)
                except Exception:
                    log.exception("tenancy: signal listener %r failed", callback)

    def _gate(self, tenant: str, svc: _Service) -> _Gate:
        """Under the lock: ``tenant``'s gate of ``svc``'s device (made on first use)."""
        gate = self._gates.get((tenant, svc.device))
        if gate is None:
            gate = self._gates[(tenant, svc.device)] = _Gate(
                self, tenant, svc.device, svc.service_id
            )
        return gate

    def _tenant(self, name: str) -> _Tenant:
        tenant = self._tenants.get(name)
        if tenant is None:
            known = ", ".join(self._tenants) or "none"
            raise UnknownTenantError(f"unknown tenant {name!r} (tenants: {known})", tenant=name)
        return tenant

    def _live_service(self, service_id: int) -> _Service:
        self._check_open()
        svc = self._services.get(service_id)
        if svc is None or svc.gone:
            raise ServiceUnavailableError(
                f"service {service_id} has been stopped", service_id=service_id
            )
        return svc

    def _check_open(self) -> None:
        if self._closed:
            raise TenancyClosedError("the framework's tenant arbiter is closed")

    def _tenant_snapshot(self, t: _Tenant) -> TenantSnapshot:
        """Under the lock: ``t``'s snapshot. A device's counts are its live gate's plus those
        of the devices the tenant gave back before (folded by :meth:`_fold`); the tenant's
        totals add those of devices whose service has stopped."""
        devices = []
        totals = list(t.gone)
        for spec in self._alloc.index.devices:
            gate = self._gates.get((t.name, spec.name))
            svc = self._by_device.get(spec.name)
            calls, waits, preemptions = t.past.get(spec.name, (0, 0, 0))
            if gate is not None:
                calls, waits, preemptions = (
                    calls + gate.calls,
                    waits + gate.waits,
                    preemptions + gate.preemptions,
                )
            totals = [totals[0] + calls, totals[1] + waits, totals[2] + preemptions]
            devices.append(
                TenantDeviceSnapshot(
                    device=spec.name,
                    service_id=svc.service_id if svc is not None else None,
                    state=self._alloc.device_state(t.name, spec.name).value,
                    region=self._alloc.connected_region(t.name, spec.name),
                    running=gate.running if gate else False,
                    calls=calls,
                    waits=waits,
                    preemptions=preemptions,
                    context_bytes=len(self._alloc.interface(t.name, spec.name).load()),
                )
            )
        return TenantSnapshot(
            t.name,
            t.priority,
            t.realtime,
            t.model.value,
            tuple(devices),
            len(t.channel),
            calls=totals[0],
            waits=totals[1],
            preemptions=totals[2],
        )

    # -- snapshots and lifecycle ---------------------------------------------------------------

    def set_hysteresis(
        self, hysteresis_us: float | None, *, factor: float = HYSTERESIS_FACTOR
    ) -> None:
        """Change the hysteresis hold (a reloaded policy): holds granted or renewed from now on
        last ``hysteresis_us`` microseconds (0: off; None: ``factor`` times the modeled
        reconfiguration time of the holder's bitstream); running ones end when they were due.

        Raises :class:`~juggle.errors.AllocatorError` (negative, or a bad factor) and
        :class:`~juggle.errors.TenancyClosedError`; nothing changes then.
        """
        with self._cond:
            self._check_open()
            self._alloc.set_hysteresis(hysteresis_us, factor=factor)
            self._hysteresis = (hysteresis_us, factor)

    def hysteresis_for(self, region: str) -> float:
        """The hysteresis hold ``region`` gives the design loaded there now, in microseconds
        (0: none loaded, or hysteresis off).

        Raises :class:`~juggle.errors.UnknownRegionError`.
        """
        with self._cond:
            return self._alloc.hysteresis_for(region)

    def advance(self) -> None:
        """Let the allocator see the clock now: holds that are due expire and their regions go
        to waiting requests. The manager thread does this by itself at each deadline; call it
        after moving a modeled clock, to have it happen now.

        Raises :class:`~juggle.errors.TenancyClosedError`.
        """
        with self._cond:
            self._check_open()
            self._execute(self._alloc.advance(self._now()))
        self._flush()

    def quiesce(self, timeout_s: float) -> bool:
        """Wait until the manager thread has carried out every queued job (programming,
        co-module moves, containment), at most ``timeout_s`` seconds; whether it has. Holds
        may still run (see :meth:`advance`); listener callbacks are delivered before return.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._jobs or self._active:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return False
                self._wait(remaining)
        self._flush()
        return True

    def statistics(self) -> TenancyStatistics:
        """A frozen snapshot of the arbiter (see :class:`TenancyStatistics`)."""
        with self._cond:
            c = self._counters
            return TenancyStatistics(
                allocator=self._alloc.statistics(),
                services={s.service_id: s.device for s in self._services.values() if not s.gone},
                programs=c["programs"],
                program_failures=c["failures"],
                action_faults=c["faults"],
                faulted=dict(self._faulted),
                hysteresis_us=self._alloc.hysteresis_us,
                hysteresis_factor=self._alloc.hysteresis_factor,
                repeated_ready=c["repeated_ready"],
            )

    def close(self) -> None:
        """Stop the manager thread; waiting calls and later ones raise
        :class:`~juggle.errors.TenancyClosedError`. Running calls finish."""
        with self._cond:
            self._closed = True
            manager = self._manager
            self._bump()
        if manager is not None and manager is not threading.current_thread():
            manager.join()

    def __repr__(self) -> str:
        with self._cond:
            return (
                f"<TenantArbiter {len(self._tenants)} tenants, {len(self._services)} services, "
                f"{self._alloc!r}>"
            )
