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

Which services are arbitrated: a hardware-only service started after the framework got its
first tenant. The framework no longer places such a service itself; the allocator places it on
demand, and only tenants may use it. The task index has one device per arbitrated service
(named after its bitstreams' design), compatible with the regions its bitstreams target, with
the reconfiguration time of the fabric's modeled configuration port; a profile's
``[[devices]]`` of the same name lend their frame and preemption times, and the others are
indexed as the profile lists them. The index is rebuilt (contexts carried over, waiting
requests asked again in order) when a new arbitrated service starts. A region the arbiter has
programmed stays its own: juggles refuse it; a service the framework had placed in a region
the allocator needs is juggled back to software first.

Locking: one lock guards the allocator and every seat; the allocator's actions run under it
except reconfiguration (the configuration port), which a manager thread carries out, and
listener callbacks, which run after the lock is released, in emission order. The manager also
expires holds at :meth:`Allocator.next_deadline`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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
from juggle.core.allocator import Allocator
from juggle.core.execute import execute
from juggle.core.taskindex import DeviceSpec, RegionSpec, TaskDescriptor, TaskIndex
from juggle.core.tenants import DeviceState, ProgrammingModel, SignalKind
from juggle.errors import (
    AllocatorError,
    DeviceStateError,
    DeviceWaitTimeoutError,
    DrainTimeoutError,
    InvalidConsumerError,
    JuggleError,
    NotATenantError,
    PriorityError,
    ServiceUnavailableError,
    TenancyClosedError,
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
    frozen,
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

#: Priorities of live tenants: general-purpose 0..2, real-time 3.
LIVE_PRIORITY_LEVELS = 4
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
    gone: bool = False


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
        self._seats: dict[tuple[str, str], Seat] = {}
        self._devices: dict[tuple[str, int], VirtualDevice] = {}
        self._classes: dict[type, type[VirtualDevice]] = {}
        self._excluded = frozenset(
            s.region for s in framework.services() if s.region and s.tiers == ("hardware",)
        )
        self._claimed: dict[str, str | None] = {}
        self._jobs: deque[tuple[Allocator, Reconfigure]] = deque()
        self._programming = 0
        self._manager: threading.Thread | None = None
        self._version = 0
        self._seq = 0
        self._closed = False
        self._rebuilding = False
        self._counters = {"rebuilds": 0, "programs": 0, "adopted": 0, "failures": 0, "faults": 0}
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
        if not isinstance(name, str) or not name:
            raise InvalidConsumerError(
                f'tenant "name" must be a non-empty string; got {name!r}', subject=name
            )
        kind = parse_model(model)
        if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
            raise PriorityError(f'"priority" must be an int; got {priority!r}', subject=priority)
        with self._cond:
            self._check_open()
            tenant = self._alloc.add_tenant(
                name, realtime=bool(realtime), priority=priority, model=kind
            )
            record = _Tenant(name, tenant.priority, bool(realtime), kind, SignalChannel(name))
            self._tenants[name] = record
            return self._tenant_snapshot(record)

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
        """Whether the allocator places ``service_id`` (an arbitrated service still running)."""
        with self._cond:
            svc = self._services.get(service_id)
            return svc is not None and not svc.gone

    def adopt(self, managed: ManagedService) -> bool:
        """Take a freshly started service if it is hardware-only: index it as a device and
        return True (the framework then does not place it); False leaves it to the framework.

        Raises :class:`~juggle.errors.DrainTimeoutError` if running calls keep the index from
        being rebuilt within the wait bound (the service is then not taken), and
        :class:`~juggle.errors.TaskIndexError` for a device the fabric cannot index.
        """
        hw = managed.hardware
        if hw is None or managed.home_tier != "hardware" or not hw.bitstreams:
            return False
        design = next(iter(hw.bitstreams.values()))[0].design
        with self._cond:
            self._check_open()
            taken = {s.device for s in self._services.values()}
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
            )
            self._services[svc.service_id] = svc
            self._by_device[device] = svc
            try:
                self._rebuild()
            except BaseException:
                del self._services[svc.service_id]
                del self._by_device[device]
                raise
        self._flush()
        return True

    def forget(self, service_id: int) -> None:
        """The service stopped: later calls of its virtual devices raise
        :class:`~juggle.errors.ServiceUnavailableError`; waiting requests are withdrawn."""
        with self._cond:
            svc = self._services.get(service_id)
            if svc is None or svc.gone:
                return
            svc.gone = True
            if not self._closed:
                for name in self._tenants:
                    if self._alloc.device_state(name, svc.device) is _WAITING:
                        self._alloc.release(name, svc.device, self._now())
            self._bump()

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
                device = cls(self, consumer, self._services[sid].device, sid)
                self._devices[(consumer, sid)] = device
            return device

    def held_regions(self) -> tuple[str, ...]:
        """Regions the arbiter programmed or is programming (the framework must not juggle
        into them)."""
        with self._cond:
            return tuple(self._claimed)

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
                    for method, (a, kw) in tuple(seat.replay.items()):
                        getattr(seat.driver, method)(*a, **kw)
                    seat.needs_replay = False
                result = getattr(seat.driver, name)(*args, **kwargs)
            finally:
                self._leave(seat)
            if name in svc.stateful:
                seat.replay[name] = (
                    tuple(frozen(a) for a in args),
                    {k: frozen(v) for k, v in kwargs.items()},
                )
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
                    self._cond.wait(remaining)

    def _try_start(self, seat: Seat) -> str:
        """Under the lock: start if connected, request if disconnected; else the verdict."""
        self._check_open()
        if self._rebuilding:
            return _BLOCK
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
            self._bump()
        self._flush()

    def _give_up(self, seat: Seat) -> None:
        """A native wait timed out: withdraw its request if it is still queued."""
        if self._alloc.device_state(seat.tenant, seat.device) is _WAITING:
            self._execute(self._alloc.release(seat.tenant, seat.device, self._now()))

    # -- carrying out actions (under the lock) --------------------------------------------------

    def _execute(self, actions: Iterable[Action]) -> None:
        """Carry out ``actions`` in order. A Reconfigure of a region that still holds the
        design (the arbiter loaded it, e.g. before an index rebuild) completes at once, after
        the list; any other goes to the manager thread, which also expires holds (it runs
        while there is a job or a hold)."""
        loaded: list[Reconfigure] = []
        for action in actions:
            try:
                if isinstance(action, Reconfigure) and self._still_loaded(action):
                    loaded.append(action)
                else:
                    execute(self, (action,))
            except JuggleError as exc:
                self._counters["faults"] += 1
                log.error("tenancy: %r failed: %s", action, exc)
        for action in loaded:
            self._counters["adopted"] += 1
            self._execute(self._alloc.reconfigured(action.region, self._now(), ok=True))
        if self._jobs or self._alloc.next_deadline() is not None:
            self._start_manager()
        self._bump()

    def _still_loaded(self, action: Reconfigure) -> bool:
        """Whether ``action.region`` holds the design of ``action.device``, loaded by us."""
        svc = self._by_device.get(action.device)
        if svc is None or action.region not in svc.bitstreams:
            return False
        design = svc.bitstreams[action.region][0].design
        snap = self._fw.fabric.region(action.region).snapshot()
        return (snap.owner, snap.design, snap.state) == (OWNER, design, "PROGRAMMED")

    # the operations of juggle.core.execute.Operations: what each allocator action does here

    def reconfigure(self, action: Reconfigure) -> None:
        """Queue the region's programming for the manager thread (the configuration port)."""
        self._claimed[action.region] = None
        self._programming += 1
        self._jobs.append((self._alloc, action))

    def connect(self, action: Connect) -> None:
        """Attach the tenant's driver to the region and give the core its context."""
        self._connect(action)

    def disconnect(self, action: Disconnect) -> None:
        """Detach the tenant's driver: its accesses raise until it is connected again."""
        seat = self._seat(action.tenant, action.device)
        seat.window.detach()
        seat.region = None

    def save_context(self, action: SaveContext) -> None:
        """The driver's own save routine fills the tenant's context buffer."""
        seat = self._seat(action.tenant, action.device)
        action.interface.save(self._save_core(seat))

    def restore_context(self, action: RestoreContext) -> None:
        """Note the context to restore: the driver restores it once connected (Connect
        follows), since its registers are reachable only then."""
        seat = self._seat(action.tenant, action.device)
        seat.pending_context = action.interface.load()

    def stop_at_consistency_point(self, action: StopAtConsistencyPoint) -> None:
        """Nothing to interrupt: a call is the unit of work, so its end is the point."""
        log.debug("%s/%s stops at its call's end", action.tenant, action.device)

    def solution(self, action: Solution) -> None:
        """A later solution is announced; its own actions follow in the list."""

    def signal(self, action: Signal) -> None:
        """Tell the tenant WAIT, READY or PREEMPT on its channel."""
        self._signal(action)

    def _signal(self, action: Signal) -> None:
        tenant = self._tenants[action.tenant]
        svc = self._by_device.get(action.device)
        self._seq += 1
        signal = TenantSignal(
            action.tenant,
            action.device,
            svc.service_id if svc else None,
            action.signal.value,
            self._now(),
            self._seq,
        )
        seat = self._seat(action.tenant, action.device)
        if action.signal is SignalKind.WAIT:
            seat.waits += 1
        elif action.signal is SignalKind.PREEMPT:
            seat.preemptions += 1
        for callback in tenant.channel.push(signal):
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
            seat.needs_replay = not data and bool(seat.replay)  # empty: a reset core
        else:  # a driver without context routines: its calls are replayed
            seat.needs_replay = bool(seat.replay)

    # -- the manager thread: configuration port and hold timer ---------------------------------

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
                alloc, action = job
                ok = self._program(action)
                with self._cond:
                    self._programming -= 1
                    if ok:
                        self._claimed[action.region] = action.device
                    if alloc is self._alloc and not self._closed:
                        self._execute(alloc.reconfigured(action.region, self._now(), ok=ok))
                    self._bump()
            self._flush()

    def _next_job(self) -> tuple[Allocator, Reconfigure] | bool | None:
        """Under the lock: the next reconfiguration, False after expiring holds, None to end
        (closed, or nothing to do: :meth:`_execute` starts a new manager when needed)."""
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
            self._cond.wait((due - now) / 1e6)
        self._manager = None
        return None

    def _program(self, action: Reconfigure) -> bool:
        """Load ``action``'s bitstream (outside the lock); False when that failed."""
        svc = self._by_device.get(action.device)
        if svc is None or action.region not in svc.bitstreams:
            log.error("tenancy: no bitstream of %s for %s", action.device, action.region)
            return self._count(False)
        bitstream, data = svc.bitstreams[action.region]
        fabric = self._fw.fabric
        try:
            self._make_room(action.region)
            fabric.program(action.region, bitstream, data, resources=svc.resources, owner=OWNER)
        except JuggleError as exc:
            log.warning("tenancy: loading %s into %s failed: %s", svc.device, action.region, exc)
            return self._count(False)
        return self._count(True)

    def _count(self, ok: bool) -> bool:
        with self._cond:
            self._counters["programs" if ok else "failures"] += 1
        return ok

    def _make_room(self, region: str) -> None:
        """Move a service the framework placed in ``region`` back to its software tier."""
        for snap in self._fw.regions():
            if snap.name == region and snap.service_id is not None:
                self._fw.juggle(to_software=[snap.service_id])

    # -- the index -------------------------------------------------------------------------------

    def _new_allocator(self) -> Allocator:
        return Allocator(self._index(), priority_levels=LIVE_PRIORITY_LEVELS, hold_us=self._hold_us)

    def _index(self) -> TaskIndex:
        """Regions of the fabric; the profile's devices, then one device per service."""
        profile = self._fw.fabric.profile
        port = profile.config_port
        devices: dict[str, tuple[DeviceSpec, list[TaskDescriptor]]] = {}
        for d in profile.devices:
            tasks = []
            for name in d.regions:
                region = profile.region(name)
                size = region.bitstream_bytes or region.max_bitstream_bytes
                t_us = port.transfer_ps(size) / 1e6
                tasks.append(TaskDescriptor(d.name, name, f"{d.name}@{name}.bit", size, t_us))
            spec = DeviceSpec(d.name, d.frame_us, d.preempt_us, d.context_bytes)
            devices[d.name] = (spec, tasks)
        for svc in self._services.values():
            base = devices.get(svc.device, (None, []))[0]  # a profile device of that name
            frame, pre, ctx = (
                (base.frame_us, base.preempt_us, base.context_bytes) if base else (0, 0, 0)
            )
            slices = svc.resources.slices if svc.resources is not None else None
            spec = DeviceSpec(svc.device, frame, pre, max(ctx, svc.context_bytes), slices)
            tasks = [
                TaskDescriptor(svc.device, r, bs.source, bs.size, port.transfer_ps(bs.size) / 1e6)
                for r, (bs, _) in svc.bitstreams.items()
            ]
            devices[svc.device] = (spec, tasks)
        regions = [RegionSpec(r.name, r.slices) for r in profile.regions]
        tasks_all = [t for _, ts in devices.values() for t in ts if t.region not in self._excluded]
        return TaskIndex(regions, [spec for spec, _ in devices.values()], tasks_all)

    def _rebuild(self) -> None:
        """Under the lock: a new allocator over the current services, once no call runs and
        no region is being programmed; contexts and waiting requests carry over."""
        self._rebuilding = True
        try:
            deadline = time.monotonic() + self._wait_timeout_s
            while self._programming or any(s.running for s in self._seats.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise DrainTimeoutError(
                        f"tenant calls still running after {self._wait_timeout_s} s: the "
                        "allocator's index cannot be rebuilt",
                        subject=tuple(self._services),
                    )
                self._cond.wait(remaining)
            old, new = self._alloc, self._new_allocator()  # a bad index raises here
            for t in self._tenants.values():
                new.add_tenant(
                    t.name,
                    realtime=t.realtime,
                    priority=None if t.realtime else t.priority,
                    model=t.model,
                )
            waiting = old.waiting()
            for seat in self._seats.values():  # park connected devices: save their contexts
                if seat.region is not None:
                    iface = old.interface(seat.tenant, seat.device)
                    iface.save(self._save_core(seat))
                    seat.window.detach()
                    seat.region = None
            known = {d.name for d in new.index.devices}
            for t in self._tenants.values():
                for dev in old.index.devices:
                    if dev.name in known:
                        new.interface(t.name, dev.name).save(old.interface(t.name, dev.name).load())
            self._alloc = new
            self._counters["rebuilds"] += 1
            for w in waiting:
                if w.device in known:
                    self._execute(
                        new.request(w.tenant, w.device, self._now(), priority=w.priority).actions
                    )
        finally:
            self._rebuilding = False
            self._bump()

    # -- helpers ---------------------------------------------------------------------------------

    def _now(self) -> float:
        return time.monotonic_ns() / 1000.0

    def _bump(self) -> None:
        self._version += 1
        self._cond.notify_all()

    def _flush(self) -> None:
        """Deliver queued listener callbacks in emission order (outside the arbiter lock)."""
        with self._deliver:
            while True:
                try:
                    callback, signal = self._outbox.popleft()
                except IndexError:
                    return
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
                claimed_regions=tuple(self._claimed),
                rebuilds=c["rebuilds"],
                programs=c["programs"],
                adopted=c["adopted"],
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
