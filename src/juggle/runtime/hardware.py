"""The hardware tier: one core in a region, time-multiplexed among virtual devices, guarded.

Think of a shared workbench with one vice. Every consumer of a hardware service has its own
*virtual device* (a :class:`HardwareDevice`: Ker-ONE's interface) holding that consumer's
context; the physical core in the region (a :class:`HardwareCore`: the driver on the region's
window) serves one virtual device at a time. Before a consumer's call runs, the core holds that
consumer's context: the previous owner's context is saved with the driver's own
``save_context()`` and the next one's restored with ``restore_context(data)``, both built from
the driver's register accesses, so they work on every backend. A driver that declares neither
gets the next owner's recorded state-setting calls (``load_key``) replayed instead. A shared
service has one virtual device, so its core never switches.

This is the one device model of the runtime. A juggle-placed service's devices are bound to
the core the juggle programmed. A tenant-arbitrated service's devices are :class:`GatedDevice`
instances: the tenant arbiter (:mod:`juggle.runtime.tenancy`) decides only *when* a device
holds a region's core (its gate connects it before a call and marks the call's end, the
consistency point); the call itself is the same :meth:`HardwareDevice._call`.

The driver sees a :class:`GuardedWindow`, the runtime's MMIO in front of the fabric's: it lets
the runtime cut a quarantined core off the bus and stops a driver that polls a core that never
finishes (no register written for ``call_timeout_s``) with :class:`CoreTimeoutError`.

A hardware call that hangs or raises (anything but the consumer's own argument or state error)
is a *fault*: the core is quarantined, its host is told (it marks the region ERROR and moves
the service to software), and the call runs again on the virtual device's software twin, brought
to the consumer's state first, so the consumer sees no failure. A service without a software
tier raises :class:`HardwareFaultError` instead, naming the service and the region.

Calls are also *verified*: run on the twin too and compared; a mismatch is a fault, and the
consumer gets the software result. Which calls is a :class:`VerifySchedule` of the core, by
counters, never dice: every call for a warm-up after the region is programmed, then checks
thinning out geometrically down to one call in ``verify_sample``; a core that follows a
mismatch of its service warms up longer. A call is sampled, run and checked while it holds the
core, so no later call reaches a core before the check of an earlier one has quarantined it:
a core turning to garbage hands out at most ``verify_sample - 1`` wrong results, none during
a warm-up. (A service without a software tier has nothing to compare with: it is not verified.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from juggle.errors import (
    CoreTimeoutError,
    HardwareFaultError,
    JuggleError,
    ModuleCodeError,
    RegionEmptyError,
    ServiceArgumentError,
    ServiceStateError,
)
from juggle.fabric.mmio import MMIO
from juggle.runtime.interfaces import interface_methods, short_name
from juggle.runtime.proxy import StateRecord, has_context

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "DeviceGate",
    "GatedDevice",
    "GuardedWindow",
    "HardwareCore",
    "HardwareDevice",
    "HardwareHost",
    "VerifySchedule",
    "device_class",
    "has_core_context",
]

#: How long a driver may poll a core without writing a register before its call is a fault.
DEFAULT_CALL_TIMEOUT_S = 1.0
#: Reads between two looks at the clock while a driver polls.
_CHECK_EVERY = 64

#: Errors that are the consumer's own (bad argument, no key): they reach the consumer as they
#: would from software, and say nothing about the hardware.
CONSUMER_ERRORS: tuple[type[BaseException], ...] = (ServiceArgumentError, ServiceStateError)


def has_core_context(driver: object) -> bool:
    """Whether ``driver`` saves and restores its core's context itself."""
    return callable(getattr(driver, "save_context", None)) and callable(
        getattr(driver, "restore_context", None)
    )


class GuardedWindow:
    """The MMIO a driver gets: the fabric window of its region, behind the runtime's guard.

    Accesses pass through to the window it is attached to. :meth:`detach` unbinds it (its
    core left the region: accesses raise :class:`~juggle.errors.RegionEmptyError` until
    :meth:`attach`); :meth:`cut` takes it off the bus for good (a quarantined core: every later
    access raises, and it cannot be attached again). While a driver only reads (polls) for
    longer than ``timeout_s`` without writing, the next read raises
    :class:`~juggle.errors.CoreTimeoutError`: a core that never finishes cannot hold a caller.
    """

    __slots__ = ("_reads", "_since", "_target", "_why", "region", "timeout_s")

    def __init__(self, target: MMIO, region: str, timeout_s: float) -> None:
        self._target: MMIO | None = None
        self.region = region
        self.timeout_s = timeout_s
        self._reads = 0
        self._since = 0.0
        self._why = ""  # why it was cut ("": it was not)
        self.attach(target)

    @property
    def size(self) -> int:
        """Size of the window in bytes."""
        return self._live().size

    def _live(self) -> MMIO:
        target = self._target
        if target is None:
            if self._why:
                why = f"is cut off by the runtime: {self._why}"
            else:
                why = "is not attached to its window (the core left the region)"
            raise RegionEmptyError(f"the core of region {self.region!r} {why}", region=self.region)
        return target

    def read32(self, offset: int) -> int:
        """Read through to the fabric window (raises as it does, and see the class doc)."""
        target = self._target
        if target is None:
            target = self._live()
        n = self._reads = self._reads + 1
        if not n % _CHECK_EVERY:
            self._check(n)
        return target.read32(offset)

    def write32(self, offset: int, value: int) -> None:
        """Write through to the fabric window; a write is progress (the poll clock restarts)."""
        target = self._target
        if target is None:
            target = self._live()
        self._reads = 0
        target.write32(offset, value)

    def _check(self, reads: int) -> None:
        now = time.monotonic()
        if reads == _CHECK_EVERY:
            self._since = now
        elif now - self._since > self.timeout_s:
            raise CoreTimeoutError(
                f"core in region {self.region!r} did not finish: {reads} reads and no write "
                f"for {self.timeout_s} s",
                region=self.region,
            )

    def attach(self, target: MMIO) -> None:
        """Pass accesses to ``target`` (the region's fabric window) from now on; the poll
        clock restarts. Raises :class:`~juggle.errors.RegionEmptyError` for a cut window."""
        if self._why:
            self._live()
        self._reads = 0
        self._target = target

    def detach(self) -> None:
        """Stop passing accesses on: they raise until :meth:`attach` (a cut window stays cut)."""
        self._target = None

    def cut(self, why: str) -> None:
        """Take the core off the bus for good: every later access raises, naming ``why``."""
        self._why = why or "quarantined"
        self._target = None


#: The portable-state methods: carried between tiers, never verified or captured themselves.
_PORTABLE = frozenset({"juggle_save_state", "juggle_restore_state"})

#: The default base rate: one hardware call in 16 is checked once a core's warm-up is over.
DEFAULT_VERIFY_SAMPLE = 16
#: The default warm-up: the first 32 calls on a freshly programmed core are all checked.
DEFAULT_VERIFY_WARMUP = 32
#: How far mismatches raise a service's verification level (warm-ups up to 16 times longer).
MAX_VERIFY_LEVEL = 4


class VerifySchedule:
    """Which calls on one core are checked against software: a plan by counters, not dice.

    Like a new hire's work: every piece is checked for the first ``warmup * 2**level`` calls,
    then one in 2, one in 4, one in 8 … (each for ``warmup`` calls) until one in ``every`` (the
    base rate, given on each call so a changed setting applies at once). ``level`` is 0 for a
    core of a service that never mismatched, higher after mismatches. ``every`` 0 checks no call
    at all, 1 every call; ``warmup`` 0 starts at the base rate. Between two checks there are
    never more than ``every - 1`` calls, so a core that turns to garbage hands out at most
    ``every - 1`` wrong results before a check catches it, and none during the warm-up.

    Not thread-safe: the core's lock orders the calls (the caller holds it).
    """

    __slots__ = ("_wait", "calls", "checked", "level", "mismatched", "warmup")

    def __init__(self, warmup: int = DEFAULT_VERIFY_WARMUP, level: int = 0) -> None:
        self.warmup = warmup
        self.level = level
        self.calls = 0
        self.checked = 0
        self.mismatched = False
        self._wait = 1  # calls until the next check: the first call is checked

    @property
    def full(self) -> int:
        """Calls of the every-call warm-up (``warmup * 2**level``)."""
        return self.warmup << self.level

    def interval(self, every: int) -> int:
        """The gap between checks after the calls made so far (at most ``every``)."""
        done = self.calls - self.full
        if done < 0:
            return 1
        if self.warmup <= 0:
            return max(every, 1)
        stage = done // self.warmup + 1
        return min(max(every, 1), 1 << min(stage, 62))

    def due(self, every: int) -> bool:
        """Count one call; whether it is checked (``every``: the base rate, 0 for none)."""
        if every <= 0:
            return False
        self.calls += 1
        self._wait -= 1
        if self._wait > 0:
            return False
        self._wait = self.interval(every)
        self.checked += 1
        return True

    def again(self) -> None:
        """The checked call compared nothing (no result, no buffer, or it raised the consumer's
        error): the next call is checked in its place."""
        self._wait = 1

    def settled(self, every: int) -> bool:
        """Whether the checks have thinned out to the base rate."""
        return self.calls >= self.full and self.interval(every) >= every

    def __repr__(self) -> str:
        return (
            f"<VerifySchedule level {self.level}, {self.checked}/{self.calls} calls checked"
            f"{', mismatched' if self.mismatched else ''}>"
        )


class HardwareHost(Protocol):
    """What a virtual device needs from the service it belongs to."""

    @property
    def service_id(self) -> int:
        """The service's id."""
        ...

    @property
    def interface_name(self) -> str:
        """The service's main interface name."""
        ...

    @property
    def has_software(self) -> bool:
        """Whether the service has a software tier to fall back to."""
        ...

    def software_twin(self, consumer: str) -> object | None:
        """A fresh implementation of the service's home software tier (None: it has none)."""
        ...

    def verify_every(self) -> int:
        """The base rate: one hardware call in N is checked after a warm-up (0: none)."""
        ...

    def verify_schedule(self) -> VerifySchedule:
        """The check plan of a core just programmed for the service (its first call asks)."""
        ...

    def hardware_fault(self, core: HardwareCore, reason: str) -> None:
        """``core`` failed a call for ``reason``: quarantine it (cut off the bus at once) and
        have the fault contained off the calling thread (the region to ERROR, a service with
        software moved there)."""
        ...

    def count(self, what: str) -> None:
        """Count one ``fallbacks``, ``verified`` or ``mismatches`` (a mismatch also raises the
        verification level of the service's next cores)."""
        ...


class _Quarantined(Exception):
    """Internal: the core was quarantined before this call reached it."""


class HardwareCore:
    """The driver of one loaded design, serving its service's virtual devices one at a time.

    ``driver_cls(window)`` is built on a :class:`GuardedWindow` over ``window``; what its
    constructor raises propagates (the caller unloads the region).
    """

    def __init__(
        self, region: str, driver_cls: type, window: MMIO, *, call_timeout_s: float
    ) -> None:
        self.region = region
        self.window = GuardedWindow(window, region, call_timeout_s)
        try:
            self.driver: Any = driver_cls(self.window)
        except JuggleError:
            raise
        except Exception as exc:  # a driver is third-party code
            raise ModuleCodeError(
                f"driver {getattr(driver_cls, '__name__', driver_cls)!r} failed to start in "
                f"region {region!r}: {type(exc).__name__}: {exc}",
                region=region,
            ) from exc
        self.saves_context = has_core_context(self.driver)
        self.lock = threading.RLock()
        self.owner: HardwareDevice | None = None
        self.fault: str | None = None
        self.switches = 0
        self._fresh = True  # just programmed: the core holds its power-on state
        #: a core whose driver has no context operations: the state-setting methods whose
        #: state in the core another consumer set (the owner must set them before other calls)
        self._foreign: frozenset[str] = frozenset()
        #: which calls are checked against software (made by the first call, under the lock)
        self.schedule: VerifySchedule | None = None

    def run(self, device: HardwareDevice, name: str, args: tuple[Any, ...], kwargs: Any) -> Any:
        """Run ``name`` on the driver with ``device``'s context in the core."""
        with self.lock:
            if self.fault is not None:
                raise _Quarantined(self.fault)
            if self.owner is not device:
                self._switch_to(device)
            foreign = self._foreign
            if not foreign:
                return getattr(self.driver, name)(*args, **kwargs)
            if name not in foreign:
                raise ServiceStateError(
                    f"the core in region {self.region!r} holds state another consumer set "
                    f"and its driver cannot clear it (no save_context/restore_context): call "
                    f"{', '.join(sorted(foreign))} first",
                    region=self.region,
                )
            result = getattr(self.driver, name)(*args, **kwargs)
            self._foreign = foreign - {name}
            return result

    def capture(self, device: HardwareDevice) -> Any:
        """``device``'s portable state (``juggle_save_state``), read from the core."""
        return self.run(device, "juggle_save_state", (), {})

    def _switch_to(self, device: HardwareDevice) -> None:
        """Save the owner's context, give the core ``device``'s (Ker-ONE's context switch)."""
        driver, owner, fresh = self.driver, self.owner, self._fresh
        self.owner = None  # a failure below leaves no owner: the next call restores again
        self._fresh = False  # ... and no longer a power-on core
        if self.saves_context:
            if owner is not None:
                owner.context = bytes(driver.save_context())
            if device.context is not None:
                driver.restore_context(device.context)
            else:
                if not fresh:
                    driver.restore_context(b"")  # nothing of the previous owner survives
                device.record.replay(driver)
        else:
            device.record.replay(driver)
            # no context operations: what earlier owners set and this device did not stays
            # in the core, and is not this device's to use (ServiceStateError in run)
            if not fresh:
                self._foreign = device.state_methods.difference(device.record.calls)
        self.owner = device
        self.switches += 1

    def save(self, device: HardwareDevice) -> bytes:
        """``device``'s context for its interface while it is disconnected (Ker-ONE's save):
        read with the driver's ``save_context()`` when ``device`` owns the core (it becomes
        ``device.context`` too), else the context ``device`` was last given (``b""``: none).
        A driver without context routines saves nothing (the device's recorded state-setting
        calls are replayed instead), nor does a quarantined core (it cannot be trusted).
        Raises what the driver's ``save_context`` raises."""
        with self.lock:
            if not self.saves_context or self.fault is not None:
                return b""
            if self.owner is device:
                device.context = bytes(self.driver.save_context())
            return device.context or b""

    def quarantine(self, reason: str) -> bool:
        """Mark the core faulty and cut it off; False if it already was."""
        if self.fault is not None:
            return False
        self.fault = reason
        self.window.cut(reason)
        return True

    def __repr__(self) -> str:
        state = f"FAULT {self.fault}" if self.fault else "ok"
        return f"<HardwareCore {self.region} {type(self.driver).__name__} {state}>"


def _buffers(args: tuple[Any, ...]) -> list[tuple[int, bytes]]:
    """Copies of the writable byte buffers among ``args`` (what an in-place call may change)."""
    out = []
    for i, arg in enumerate(args):
        if isinstance(arg, bytearray) or (isinstance(arg, memoryview) and not arg.readonly):
            out.append((i, bytes(arg)))
    return out


def _put_back(args: tuple[Any, ...], saved: list[tuple[int, bytes]]) -> None:
    for i, data in saved:
        _write_into(args[i], data)


def _write_into(buf: Any, data: bytes) -> None:
    """Put ``data`` into the writable buffer ``buf`` (any shape; a strided view too)."""
    view = memoryview(buf)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")  # other shapes and formats: contiguous ones only
    view[:] = data


class HardwareDevice:
    """One consumer's virtual device of a hardware service (the whole service's, if shared).

    Its methods are the interface's (a subclass per interface adds them); each runs on the
    :class:`HardwareCore` ``core`` with this device's context, falling back to software on a
    fault. ``core`` is None while the device is connected to no region (a call then raises
    :class:`~juggle.errors.RegionEmptyError`). ``context`` is the saved core context (None:
    never saved, or to be rebuilt by replaying ``record``); ``record`` the state-setting calls
    of the consumer (of the service, if shared).
    """

    __slots__ = ("_twin", "_twin_version", "consumer", "context", "core", "host", "record")

    #: the interface's state-setting methods (set by :func:`device_class`)
    state_methods: frozenset[str] = frozenset()

    def __init__(
        self, host: HardwareHost, core: HardwareCore | None, consumer: str, record: StateRecord
    ) -> None:
        self.host = host
        self.core = core
        self.consumer = consumer
        self.record = record
        self.context: bytes | None = None
        self._twin: object | None = None
        self._twin_version = -1

    def _call(self, name: str, args: tuple[Any, ...], kwargs: Any) -> Any:
        """Run ``name`` on the core with this device's context: the one hardware call path
        (guard, verification, quarantine and fallback). Raises what the consumer's own error
        is, :class:`~juggle.errors.HardwareFaultError` (a fault, and no software tier) and
        :class:`~juggle.errors.RegionEmptyError` (connected to no region)."""
        host, core = self.host, self.core
        if core is None:
            raise RegionEmptyError(f"{self!r} is not connected to a region")
        checkable = name not in _PORTABLE
        portable = checkable and has_context(core.driver)
        saved = _buffers(args)
        before = None
        with core.lock:  # sampled, run and checked in the core's order: a check that fails
            verify = checkable and self._due(core)  # quarantines before the next call runs
            try:
                if portable and (verify or host.has_software):
                    before = core.capture(self)
                result = core.run(self, name, args, kwargs)
            except CONSUMER_ERRORS:
                if verify and core.schedule is not None:
                    core.schedule.again()
                raise
            except _Quarantined:
                pass
            except Exception as exc:  # a driver is third-party code: anything else is a fault
                host.hardware_fault(core, f"{name}() raised {type(exc).__name__}: {exc}")
            else:
                if verify:
                    return self._verify(core, name, args, kwargs, saved, before, result)
                return result
        _put_back(args, saved)
        return self._fallback(core, name, args, kwargs, before, count=True)

    def _due(self, core: HardwareCore) -> bool:
        """Whether this call is one to check (the caller holds the core's lock): the core's
        :class:`VerifySchedule`, which its first call asks the service for, says."""
        schedule = core.schedule
        if schedule is None:
            schedule = core.schedule = self.host.verify_schedule()
        return schedule.due(self.host.verify_every())

    def take_record(self, record: StateRecord) -> bool:
        """Carry ``record`` onto the core now if it is this device's own (the state a switch
        into hardware brings): the core switches to this device, which replays it. False for
        any other record. A driver failing here quarantines the core like a failing call
        (``core.fault`` is then set); a consumer error (a bad recorded argument) propagates.
        Raises :class:`~juggle.errors.RegionEmptyError` while connected to no region.
        """
        if record is not self.record:
            return False
        core = self.core
        if core is None:
            raise RegionEmptyError(f"{self!r} is not connected to a region")
        try:
            with core.lock:
                if core.fault is None and core.owner is not self:
                    core._switch_to(self)
        except CONSUMER_ERRORS:
            raise
        except Exception as exc:  # a driver is third-party code
            self.host.hardware_fault(
                core, f"taking over the state raised {type(exc).__name__}: {exc}"
            )
        return True

    def twin(self, state: Any = None) -> object | None:
        """The software twin, brought to this device's state (``state``: portable state read
        from the core before the call; else the recorded state-setting calls)."""
        twin = self._twin
        if twin is None:
            twin = self._twin = self.host.software_twin(self.consumer)
            self._twin_version = -1
            if twin is None:
                return None
        if state is not None and has_context(twin):
            twin.juggle_restore_state(state)  # type: ignore[attr-defined]
        elif self._twin_version != self.record.version:
            self.record.replay(twin)
            self._twin_version = self.record.version
        return twin

    def _fallback(
        self,
        core: HardwareCore,
        name: str,
        args: tuple[Any, ...],
        kwargs: Any,
        before: Any,
        *,
        count: bool,
    ) -> Any:
        twin = self.twin(before)
        if twin is None:
            raise HardwareFaultError(
                f"service {self.host.service_id} ({self.host.interface_name}) failed in region "
                f"{core.region!r} ({core.fault}) and has no software tier",
                service_id=self.host.service_id,
                region=core.region,
            )
        if count:
            self.host.count("fallbacks")
        return getattr(twin, name)(*args, **kwargs)

    def _verify(
        self,
        core: HardwareCore,
        name: str,
        args: tuple[Any, ...],
        kwargs: Any,
        saved: list[tuple[int, bytes]],
        before: Any,
        result: Any,
    ) -> Any:
        """The call again on the software twin, compared with the hardware's ``result`` (the
        caller holds the core's lock): a mismatch quarantines the core, marks its schedule
        and hands back the software result (buffers included)."""
        twin = self.twin(before)
        if twin is None:
            return result
        soft_args = list(args)
        for i, data in saved:
            soft_args[i] = bytearray(data)
        expected = getattr(twin, name)(*soft_args, **kwargs)
        self.host.count("verified")
        same = expected == result and all(bytes(args[i]) == soft_args[i] for i, _ in saved)
        schedule = core.schedule
        if same:
            if result is None and not saved and schedule is not None:
                schedule.again()  # nothing came back to compare: the next call is checked
            return result
        if schedule is not None:
            schedule.mismatched = True
        self.host.count("mismatches")
        self.host.hardware_fault(
            core, f"{name}() returned a result that differs from the software tier's"
        )
        for i, _ in saved:
            _write_into(args[i], soft_args[i])
        return expected

    def __repr__(self) -> str:
        core = self.core
        where = core.region if core is not None else "no region"
        return (
            f"<{type(self).__name__} service {self.host.service_id} for {self.consumer!r} on "
            f"{where}>"
        )


class DeviceGate(Protocol):
    """When a :class:`GatedDevice` may hold a core: the tenant arbiter's side of a device."""

    def enter(self, device: GatedDevice) -> HardwareCore:
        """Connect ``device`` to a region's core and start its computation there; the core.
        Blocks or raises (the arbiter's errors: WAIT, timeouts, a stopped service, a
        quarantined region) while none can be had."""
        ...

    def leave(self, device: GatedDevice, core: HardwareCore) -> None:
        """``device``'s call on ``core`` is over: its consistency point (a pending preemption
        happens now; a core the call found faulty fails its region)."""
        ...


class GatedDevice(HardwareDevice):
    """A virtual device that holds a core only while its gate lets it (a tenant's device of
    an arbitrated service). Each call enters the gate (which connects the device: sets
    ``core`` and hands it the context to restore), runs :meth:`HardwareDevice._call` (the same
    guard, quarantine, fallback and verification as every device), and leaves the gate at its
    end. One call at a time per device. ``record`` is the device's own: its state-setting calls
    that succeeded are recorded here, to be replayed onto a core that lost them.
    """

    __slots__ = ("_turn", "gate")

    def __init__(
        self, host: HardwareHost, consumer: str, record: StateRecord, gate: DeviceGate
    ) -> None:
        super().__init__(host, None, consumer, record)
        self.gate = gate
        self._turn = threading.Lock()

    def _call(self, name: str, args: tuple[Any, ...], kwargs: Any) -> Any:
        gate = self.gate
        with self._turn:
            core = gate.enter(self)
            try:
                result = HardwareDevice._call(self, name, args, kwargs)
                if name in self.state_methods:
                    self.record.record(name, args, kwargs)
            finally:
                gate.leave(self, core)
            return result


def device_class(
    interface: type, name: str, driver: object, base: type[HardwareDevice] = HardwareDevice
) -> type[HardwareDevice]:
    """A ``base`` subclass (:class:`HardwareDevice` or :class:`GatedDevice`) with the methods
    of ``interface``, plus the portable state methods (``juggle_save_state`` /
    ``juggle_restore_state``) where ``driver`` (an instance or its class) has them, so a
    switch out of hardware carries such state from the core."""

    def make(method: str) -> Callable[..., Any]:
        def call(self: HardwareDevice, *args: Any, **kwargs: Any) -> Any:
            return self._call(method, args, kwargs)

        call.__name__ = method
        return call

    specs = interface_methods(interface)
    attrs: dict[str, Any] = {
        "__slots__": (),
        "__doc__": interface.__doc__,
        "state_methods": frozenset(spec.name for spec in specs if spec.state_setting),
    }
    names = [spec.name for spec in specs]
    if has_context(driver):
        names += ["juggle_save_state", "juggle_restore_state"]
    for method in names:
        attrs[method] = make(method)
    kind = "Gated" if issubclass(base, GatedDevice) else "Hardware"
    return type(f"{short_name(name)}{kind}Device", (base,), attrs)
