"""Tenants sharing the fabric live: the Ker-ONE allocator arbitrates real calls (issue 3, item 9).

Think of a shared workshop. Each tenant (an application, a VM) owns its own toolbox for every
machine it uses (a *virtual device*: the interface and a saved context); the benches (regions)
are few. When a tenant's consumer calls a hardware service, its virtual device needs a bench:
the :class:`~juggle.core.allocator.Allocator` (the same decision core the simulator drives)
decides Assign, Preempt or Unavailable, and this module carries the decision out against the
real fabric: it programs regions, saves the leaving tenant's context with the core's own save
routine, restores the arriving tenant's, attaches the tenant's driver, and tells tenants WAIT,
READY and PREEMPT on their :class:`SignalChannel`.

A hardware call is the unit of work: the consistency points are the moments between calls.
Each call is bracketed by ``start``/``finish`` on the allocator; a higher-priority request
that arrives while a lower-priority call runs stops it at its end (``finish`` is then the
consistency point), and the victim's next call asks again. Programming models (paper 4.5):
a ``native`` tenant's call blocks until its device is READY; an ``aware`` tenant's call raises
:class:`~juggle.errors.WaitSignal` at once, its request stays queued, and READY arrives later.

Contexts: the tenant's driver's own save routine (``save_context()``, built from its register
accesses, so it works on the simulator and on a board alike) fills the virtual device's context
buffer, and its ``restore_context`` takes it back once the device is connected again, possibly
in a region that was reprogrammed meanwhile; a device that never ran gets a reset core. Where a
driver has no such routines, the tenant's last state-setting calls (``load_key``) are replayed
onto it before its next call. Allocator actions are carried out by
:func:`juggle.core.execute.execute`: the arbiter implements its operations.

One allocator places every service. Each service with a hardware tier is a device of its task
index from the moment its module starts (named after its bitstreams' design; the profile's
``[[devices]]`` of that name lend frame, preemption and context sizes) and leaves it when the
module stops (if one of its devices is running or being placed then, as soon as it no longer
is); the arbiter then forgets the service: its record, seats, virtual devices and bitstreams.
Juggles are commands to the same allocator for the framework's own tenant
(``SYSTEM_TENANT``; :meth:`begin_juggle` / :meth:`end_juggle` around the juggler's steps), so
they see tenants' regions and tenants see theirs. A juggle-placed service holds its region with
the highest priority of the tenants among its consumers (below every tenant when none uses it);
a tenant of higher priority preempts it: at its consistency point the manager thread moves its
proxies to software (calls keep being answered, Ker-ONE 4.5), its tenant consumers hear
PREEMPT, and when the allocator gives it a region again it is programmed back and they hear
READY. A hardware-only service, or one a real-time tenant uses, is never preempted. A
hardware-only service started while tenants are registered is *arbitrated*: tenants' requests
place it on demand and only tenants may use it.

Locking: one lock guards the allocator and every seat; the allocator's actions run under it
except reconfiguration (the configuration port) and moves of juggle-placed services, which a
manager thread carries out (taking the framework's juggle lock first, never while holding this
one), and listener callbacks, which run after the lock is released, in emission order. The
manager also expires holds at :meth:`Allocator.next_deadline`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
from juggle.core.allocator import Allocator, JuggleTicket
from juggle.core.execute import execute
from juggle.core.placement import ServiceView
from juggle.core.regionfsm import RegionState
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceState, ProgrammingModel, SignalKind
from juggle.errors import (
    AllocatorError,
    DeviceStateError,
    DeviceWaitTimeoutError,
    InvalidConsumerError,
    JuggleError,
    NotATenantError,
    PriorityError,
    ServiceUnavailableError,
    TenancyClosedError,
    UnknownDeviceError,
    UnknownTenantError,
    WaitSignal,
)
from juggle.runtime.hardware import has_core_context
from juggle.runtime.interfaces import interface_methods
from juggle.runtime.tenants import (
    Seat,
    SignalChannel,
    TenancyStatistics,
    TenantDeviceSnapshot,
    TenantSignal,
    TenantSnapshot,
    VirtualDevice,
    parse_model,
    virtual_device_class,
)

if TYPE_CHECKING:
    from juggle.fabric.bitstream import Bitstream
    from juggle.fabric.resources import Resources
    from juggle.runtime.framework import Framework
    from juggle.runtime.services import ManagedService

__all__ = [
    "DEFAULT_HOLD_US",
    "LIVE_PRIORITY_LEVELS",
    "SignalChannel",
    "TenancyStatistics",
    "TenantArbiter",
    "TenantDeviceSnapshot",
    "TenantSignal",
    "TenantSnapshot",
    "VirtualDevice",
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
_GO, _BLOCK, _WAIT = "go", "block", "wait"


# -- internal records ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Tenant:
    name: str
    priority: int
    realtime: bool
    model: ProgrammingModel
    channel: SignalChannel


@dataclass(slots=True)
class _Service:
    """An arbitrated service as the arbiter places it: device name, driver, bitstreams."""

    service_id: int
    device: str
    interface: str
    driver: type
    bitstreams: dict[str, tuple[Bitstream, bytes]]
    resources: Resources | None
    context_bytes: int
    stateful: frozenset[str]
    managed: ManagedService
    arbitrated: bool = False
    gone: bool = False
    preempted: bool = False
    consumers: set[str] = field(default_factory=set)


# -- the arbiter ---------------------------------------------------------------------------------


class TenantArbiter:
    """One allocator for the framework's fabric, its tenants, and their virtual devices.

    Created by :meth:`juggle.Framework.add_tenant` for the first tenant. ``hold_us`` is the
    allocator's hold time; ``wait_timeout_s`` (default: the framework's drain timeout) bounds
    how long a native call waits for its device.
    """

    def __init__(
        self,
        framework: Framework,
        *,
        hold_us: float = DEFAULT_HOLD_US,
        wait_timeout_s: float | None = None,
    ) -> None:
        self._fw = framework
        self._hold_us = hold_us
        self._wait_timeout_s = (
            framework.drain_timeout_s if wait_timeout_s is None else wait_timeout_s
        )
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._deliver = threading.RLock()
        self._outbox: deque[tuple[Callable[[TenantSignal], None], TenantSignal]] = deque()
        self._tenants: dict[str, _Tenant] = {}
        self._services: dict[int, _Service] = {}
        self._by_device: dict[str, _Service] = {}
        self._unindexed: dict[int, _Service] = {}  # stopped, device still in the index
        self._seats: dict[tuple[str, str], Seat] = {}
        self._devices: dict[tuple[str, int], VirtualDevice] = {}
        self._classes: dict[type, type[VirtualDevice]] = {}
        self._jobs: deque[tuple[str, str, str]] = deque()
        self._programming = 0
        self._manager: threading.Thread | None = None
        self._version = 0
        self._waiters = 0  # threads in _wait (under the lock)
        self._seq = 0
        self._closed = False
        self._counters = {"programs": 0, "failures": 0, "faults": 0}
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
                f'tenant "name" must be a non-empty string; got {name!r}', subject=name
            )
        kind = parse_model(model)
        if name == SYSTEM_TENANT:
            raise InvalidConsumerError(
                f"tenant name {name!r} is reserved for the framework's own placements",
                subject=name,
            )
        if not isinstance(realtime, bool):
            raise PriorityError(
                f'"realtime" of tenant {name!r} must be True or False; got {realtime!r}',
                subject=realtime,
            )
        if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
            raise PriorityError(f'"priority" must be an int; got {priority!r}', subject=priority)
        top = LIVE_PRIORITY_LEVELS - 1
        if priority is not None and not realtime and not 0 <= priority < top:
            raise PriorityError(
                f'"priority" of general-purpose tenant {name!r} must be in 0..{top - 1}; got '
                f"{priority}",
                subject=priority,
            )
        if priority is not None and realtime and priority != top:
            raise PriorityError(
                f'"priority" of real-time tenant {name!r} must be {top}; got {priority}',
                subject=priority,
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

    def is_tenant(self, name: str) -> bool:
        """Whether ``name`` is a registered tenant."""
        with self._cond:
            return name in self._tenants

    # -- services (framework hooks) -----------------------------------------------------------

    def arbitrates(self, service_id: int) -> bool:
        """Whether tenants' requests place ``service_id`` (hardware-only, started while tenants
        were registered, still running); juggles do not."""
        with self._cond:
            svc = self._services.get(service_id)
            return svc is not None and svc.arbitrated and not svc.gone

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
                frozenset(m.name for m in interface_methods(managed.interface) if m.state_setting),
                managed,
                arbitrated=managed.home_tier == "hardware" and len(self._tenants) > 0,
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
        seats, virtual devices, and its interface's class if no other service has it."""
        self._unindexed.pop(svc.service_id, None)
        if self._services.get(svc.service_id) is svc:
            del self._services[svc.service_id]
        if self._by_device.get(svc.device) is svc:
            del self._by_device[svc.device]
        for key in [k for k in self._seats if k[1] == svc.device]:
            del self._seats[key]
        for vkey in [k for k in self._devices if k[1] == svc.service_id]:
            del self._devices[vkey]
        interface = svc.managed.interface
        if all(s.managed.interface is not interface for s in self._services.values()):
            self._classes.pop(interface, None)

    def virtual_device(self, managed: ManagedService, consumer: str) -> VirtualDevice:
        """The virtual device of tenant ``consumer`` for arbitrated service ``managed``.

        Raises :class:`~juggle.errors.NotATenantError` for a consumer that is no tenant.
        """
        sid = managed.service_id
        with self._cond:
            if consumer not in self._tenants:
                raise NotATenantError(
                    f"consumer {consumer!r} is not a tenant, and service {sid} "
                    f"({managed.interface_name}) is arbitrated among tenants: register it with "
                    "add_tenant() first",
                    subject=consumer,
                )
            device = self._devices.get((consumer, sid))
            if device is None:
                cls = self._classes.get(managed.interface)
                if cls is None:
                    cls = self._classes[managed.interface] = virtual_device_class(
                        managed.interface, managed.interface_name
                    )
                device = cls(self, consumer, self._live_service(sid).device, sid)
                self._devices[(consumer, sid)] = device
            return device

    # -- a call --------------------------------------------------------------------------------

    def run_call(
        self, vd: VirtualDevice, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Run method ``name`` of ``vd``'s service on its tenant's driver, in a region (what
        every :class:`VirtualDevice` method does). Raises what the driver raises, and
        :class:`~juggle.errors.WaitSignal` (aware tenant, device not ready),
        :class:`~juggle.errors.DeviceWaitTimeoutError` (native tenant waited too long),
        :class:`~juggle.errors.ServiceUnavailableError` (service stopped) and
        :class:`~juggle.errors.TenancyClosedError`."""
        with self._cond:
            svc = self._live_service(vd.service_id)
            seat = self._seat(vd.tenant, svc.device)
        with seat.call_lock:
            self._enter(seat, svc)
            try:
                if seat.needs_replay:  # the core kept no context: set our state again
                    seat.record.replay(seat.driver)
                    seat.needs_replay = False
                result = getattr(seat.driver, name)(*args, **kwargs)
            finally:
                self._leave(seat)
            if name in svc.stateful:
                seat.record.record(name, args, kwargs)
            return result

    def _enter(self, seat: Seat, svc: _Service) -> None:
        """Get ``seat`` a region and start its computation (``start``); blocks a native
        tenant until READY, raises WaitSignal for an aware one."""
        deadline = time.monotonic() + self._wait_timeout_s
        while True:
            with self._cond:
                self._live_service(svc.service_id)
                verdict = self._try_start(seat)
                version = self._version
            self._flush()
            if verdict == _GO:
                return
            if verdict == _WAIT:
                raise WaitSignal(
                    f"WAIT: {seat.tenant}/{seat.device} is not connected; its request is "
                    "queued, READY follows on the tenant's signal channel",
                    subject=(seat.tenant, seat.device),
                    service_id=svc.service_id,
                )
            with self._cond:
                while self._version == version:
                    self._check_open()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._give_up(seat)
                        raise DeviceWaitTimeoutError(
                            f"{seat.tenant}/{seat.device} waited {self._wait_timeout_s} s for "
                            "a region",
                            subject=(seat.tenant, seat.device),
                        )
                    self._wait(remaining)

    def _try_start(self, seat: Seat) -> str:
        """Under the lock: start if connected, request if disconnected; else the verdict."""
        self._check_open()
        alloc, t, d = self._alloc, seat.tenant, seat.device
        for _ in range(3):
            state = alloc.device_state(t, d)
            if state is _CONNECTED and seat.region is not None:
                try:
                    out = alloc.start(t, d, self._now())
                except DeviceStateError:  # its hold expired and the region went to another
                    continue
                seat.running = True
                seat.calls += 1
                self._execute(out)
                return _GO
            if state is not _DISCONNECTED:
                break
            self._execute(alloc.request(t, d, self._now()).actions)
        return _WAIT if self._tenants[t].model is ProgrammingModel.AWARE else _BLOCK

    def _leave(self, seat: Seat) -> None:
        """The call is over: a consistency point (``finish``; a pending preemption happens)."""
        with self._cond:
            seat.running = False
            if not self._closed:
                try:
                    self._execute(self._alloc.finish(seat.tenant, seat.device, self._now()))
                except AllocatorError as exc:  # pragma: no cover - an invariant broke
                    log.error("finish(%s, %s) refused: %s", seat.tenant, seat.device, exc)
                if seat.gone:  # given back during the call
                    self._let_seat_go(seat.tenant, seat.device)
                if self._unindexed:
                    self._sweep()
            self._bump()
        self._flush()

    def release_consumer(self, managed: ManagedService, consumer: str) -> None:
        """Tenant ``consumer`` gave its proxy of arbitrated ``managed`` back (or its client
        died): its virtual device leaves its region or the wait list and its seat (driver,
        saved context, state) is forgotten; a call running now does that when it ends."""
        with self._cond:
            self._devices.pop((consumer, managed.service_id), None)
            svc = self._services.get(managed.service_id)
            if svc is None or consumer not in self._tenants:
                return
            seat = self._seats.get((consumer, svc.device))
            if seat is not None and seat.running:
                seat.gone = True
                return
            self._let_seat_go(consumer, svc.device)
        self._flush()

    def _let_seat_go(self, tenant: str, device: str) -> None:
        """Under the lock: release ``tenant``'s device in the allocator, forget its seat."""
        self._seats.pop((tenant, device), None)
        if self._closed or self._alloc.device_state(tenant, device) is _DISCONNECTED:
            return
        try:
            self._execute(self._alloc.release(tenant, device, self._now()))
        except DeviceStateError as exc:  # pragma: no cover - released between two calls
            log.warning("tenancy: release of %s/%s refused: %s", tenant, device, exc)
        self._bump()

    def _give_up(self, seat: Seat) -> None:
        """A native wait timed out: withdraw its request if it is still queued."""
        if self._alloc.device_state(seat.tenant, seat.device) is _WAITING:
            self._execute(self._alloc.release(seat.tenant, seat.device, self._now()))

    # -- carrying out actions (under the lock) --------------------------------------------------

    def _execute(self, actions: Iterable[Action]) -> None:
        """Carry out ``actions`` in order; reconfigurations and co-module moves go to the
        manager thread, which also expires holds (it runs while there is a job or a hold)."""
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
    # of tenant drivers: the juggler carries their state.

    def reconfigure(self, action: Reconfigure) -> None:
        """Queue the region's programming for the manager thread (the configuration port)."""
        self._programming += 1
        self._jobs.append(("program", action.region, action.device))

    def connect(self, action: Connect) -> None:
        """Attach the tenant's driver to the region and give the core its context."""
        if action.tenant != SYSTEM_TENANT:
            self._connect(action)

    def disconnect(self, action: Disconnect) -> None:
        """Detach the tenant's driver: its accesses raise until it is connected again."""
        if action.tenant == SYSTEM_TENANT:
            return
        seat = self._seat(action.tenant, action.device)
        seat.window.detach()
        seat.region = None

    def save_context(self, action: SaveContext) -> None:
        """The driver's own save routine fills the tenant's context buffer."""
        if action.tenant != SYSTEM_TENANT:
            seat = self._seat(action.tenant, action.device)
            action.interface.save(self._save_core(seat))

    def restore_context(self, action: RestoreContext) -> None:
        """Note the context to restore: the driver restores it once connected (Connect
        follows), since its registers are reachable only then."""
        if action.tenant != SYSTEM_TENANT:
            seat = self._seat(action.tenant, action.device)
            seat.pending_context = action.interface.load()

    def stop_at_consistency_point(self, action: StopAtConsistencyPoint) -> None:
        """A tenant's call is the unit of work, so its end is the point: nothing to do. A
        juggle-placed service is moved to its software tier by the manager thread (running
        calls finish in hardware, new ones go to software), which then reports the stop."""
        if action.tenant == SYSTEM_TENANT:
            self._jobs.append(("stop", action.region, action.device))
        else:
            log.debug("%s/%s stops at its call's end", action.tenant, action.device)

    def solution(self, action: Solution) -> None:
        """A later solution is announced; its own actions follow in the list."""

    def signal(self, action: Signal) -> None:
        """Tell the tenant WAIT, READY or PREEMPT on its channel. For a juggle-placed
        service, the tenants among its consumers hear PREEMPT, and READY once it is back."""
        if action.tenant != SYSTEM_TENANT:
            seat = self._seat(action.tenant, action.device)
            if action.signal is SignalKind.WAIT:
                seat.waits += 1
            elif action.signal is SignalKind.PREEMPT:
                seat.preemptions += 1
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
            self._tell(name, action.device, action.signal)

    def _tell(self, tenant: str, device: str, kind: SignalKind) -> None:
        record = self._tenants.get(tenant)
        if record is None:
            return
        svc = self._by_device.get(device)
        self._seq += 1
        signal = TenantSignal(
            tenant, device, svc.service_id if svc else None, kind.value, self._now(), self._seq
        )
        for callback in record.channel.push(signal):
            self._outbox.append((callback, signal))

    @staticmethod
    def _save_core(seat: Seat) -> bytes:
        """The core's context read by ``seat``'s driver (empty when the driver saves none,
        and the tenant's state-setting calls are replayed instead)."""
        driver = seat.driver
        if driver is None or not has_core_context(driver):
            return b""
        return bytes(driver.save_context())  # type: ignore[attr-defined]

    def _connect(self, action: Connect) -> None:
        seat = self._seat(action.tenant, action.device)
        seat.window.attach(self._fw.fabric.window(action.region))
        seat.region = action.region
        svc = self._by_device.get(action.device)
        if seat.driver is None and svc is not None:
            seat.driver = svc.driver(seat.window)
        data, seat.pending_context = seat.pending_context, None
        if data is None:
            return
        if seat.driver is not None and has_core_context(seat.driver):
            seat.driver.restore_context(data)  # type: ignore[attr-defined]
            seat.needs_replay = not data and bool(seat.record.calls)  # empty: a reset core
        else:  # a driver without context routines: its calls are replayed
            seat.needs_replay = bool(seat.record.calls)

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
        self._flush()
        return ticket

    def _reprogrammable(self) -> None:
        """Under the lock: regions in Error whose fabric region is not quarantined (a failed
        programming step, here or in a tenant's placement) are free again: the juggle about
        to be planned may program them, which is their recovery."""
        fabric = self._fw.fabric
        for region in fabric.region_names():
            if self._alloc.region_state(region) is RegionState.ERROR and (
                not fabric.region(region).snapshot().quarantined
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
            fabric = self._fw.fabric
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
        if state is not RegionState.ERROR:
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
        and the region is Idle with no design. Call it only for a region :meth:`holder` says
        no tenant holds."""
        with self._cond:
            if self._closed:
                return
            alloc, now = self._alloc, self._now()
            if alloc.region_state(region) in (RegionState.BUSY, RegionState.IDLE, RegionState.HOLD):
                self._execute(alloc.fault(region, now))
            if alloc.region_state(region) is RegionState.ERROR:
                self._execute(alloc.repair(region, now))
            if self._unindexed:
                self._sweep()
        self._flush()

    def fault(self, region: str) -> None:
        """The core in ``region`` was quarantined: the allocator's region enters Error."""
        with self._cond:
            if self._closed:
                return
            try:
                self._execute(self._alloc.fault(region, self._now()))
            except AllocatorError as exc:
                log.warning("tenancy: fault of %s not recorded: %s", region, exc)
        self._flush()

    def repair(self, region: str) -> None:
        """Quarantined ``region`` was emptied: the allocator may hand it out again."""
        with self._cond:
            if self._closed or self._alloc.region_state(region) is not RegionState.ERROR:
                return
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

    # -- the manager thread: configuration port, co-module moves and hold timer -------------------

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
            if isinstance(job, tuple):
                self._run_job(*job)
            self._flush()

    def _run_job(self, kind: str, region: str, device: str) -> None:
        svc = self._by_device.get(device)
        if kind == "stop":  # a juggle-placed service yields its region to a tenant
            assert svc is not None
            done = self._fw._preempt_to_software(svc.service_id)
            with self._cond:
                if not done:  # its calls did not drain yet: try again later
                    self._jobs.append((kind, region, device))
                    self._wait(0.05)
                elif not self._closed:
                    try:
                        self._execute(self._alloc.stopped(region, self._now()))
                    except AllocatorError as exc:  # the region faulted meanwhile
                        log.warning("tenancy: stop of %s in %s: %s", device, region, exc)
                self._bump()
            return
        system = svc is not None and not svc.arbitrated
        gone = svc is None or svc.gone
        if gone:
            ok = True  # nothing to load: the device is released at once below
        elif system:
            assert svc is not None
            ok = self._fw._return_to_hardware(svc.service_id, region)
        else:
            ok = self._program(region, device)
        with self._cond:
            self._programming -= 1
            if not self._closed:
                try:
                    self._execute(self._alloc.reconfigured(region, self._now(), ok=ok))
                    if gone:
                        self._drop(device)
                    elif ok and system and svc is not None:
                        self._pin(svc)
                except AllocatorError as exc:  # pragma: no cover - an invariant broke
                    log.error("tenancy: %s of %s in %s refused: %s", kind, device, region, exc)
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

    def _next_job(self) -> tuple[str, str, str] | bool | None:
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
        """Load ``device``'s bitstream into ``region`` (outside the lock); False on failure."""
        svc = self._by_device.get(device)
        if svc is None or region not in svc.bitstreams:
            log.error("tenancy: no bitstream of %s for %s", device, region)
            return self._count(False)
        bitstream, data = svc.bitstreams[region]
        try:
            self._fw.fabric.program(region, bitstream, data, resources=svc.resources, owner=OWNER)
        except JuggleError as exc:
            log.warning("tenancy: loading %s into %s failed: %s", svc.device, region, exc)
            return self._count(False)
        return self._count(True)

    def _count(self, ok: bool) -> bool:
        with self._cond:
            self._counters["programs" if ok else "failures"] += 1
        return ok

    # -- the index -------------------------------------------------------------------------------

    def _new_allocator(self) -> Allocator:
        """The allocator over the fabric's regions and its profile's devices, with the
        framework's own tenant (the one juggles place services for)."""
        profile = self._fw.fabric.profile
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
        )
        alloc.add_tenant(SYSTEM_TENANT, priority=SYSTEM_PRIORITY, model=ProgrammingModel.AWARE)
        return alloc

    def _device_of(self, svc: _Service) -> tuple[DeviceSpec, list[TaskDescriptor]]:
        """``svc`` as a device of the index: a profile device of that name lends its frame,
        preemption and context sizes; its seats are the regions its bitstreams target."""
        profile = self._fw.fabric.profile
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
        return time.monotonic_ns() / 1000.0

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

    def _seat(self, tenant: str, device: str) -> Seat:
        seat = self._seats.get((tenant, device))
        if seat is None:
            seat = self._seats[(tenant, device)] = Seat(tenant, device)
        return seat

    def _tenant(self, name: str) -> _Tenant:
        tenant = self._tenants.get(name)
        if tenant is None:
            known = ", ".join(self._tenants) or "none"
            raise UnknownTenantError(f"unknown tenant {name!r} (tenants: {known})", subject=name)
        return tenant

    def _live_service(self, service_id: int) -> _Service:
        self._check_open()
        svc = self._services.get(service_id)
        if svc is None or svc.gone:
            raise ServiceUnavailableError(
                f"service {service_id} has been stopped", subject=service_id
            )
        return svc

    def _check_open(self) -> None:
        if self._closed:
            raise TenancyClosedError("the framework's tenant arbiter is closed", subject=self)

    def _tenant_snapshot(self, t: _Tenant) -> TenantSnapshot:
        devices = []
        for spec in self._alloc.index.devices:
            seat = self._seats.get((t.name, spec.name))
            svc = self._by_device.get(spec.name)
            devices.append(
                TenantDeviceSnapshot(
                    device=spec.name,
                    service_id=svc.service_id if svc is not None else None,
                    state=self._alloc.device_state(t.name, spec.name).value,
                    region=self._alloc.connected_region(t.name, spec.name),
                    running=seat.running if seat else False,
                    calls=seat.calls if seat else 0,
                    waits=seat.waits if seat else 0,
                    preemptions=seat.preemptions if seat else 0,
                    context_bytes=len(self._alloc.interface(t.name, spec.name).load()),
                )
            )
        return TenantSnapshot(
            t.name, t.priority, t.realtime, t.model.value, tuple(devices), len(t.channel)
        )

    # -- snapshots and lifecycle ---------------------------------------------------------------

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
