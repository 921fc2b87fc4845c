"""Managed services: each service's tiers, its state, its consumers' proxies and its core.

A :class:`ManagedService` is the runtime's record of one registered service. It knows how to
make an implementation of each tier for a consumer, following the service's semantics:

* a **shared** service (``per_consumer = false``) has one state: one implementation per tier,
  one :class:`~juggle.runtime.proxy.StateRecord` for all its proxies, one virtual device on the
  hardware tier;
* a **per-consumer** service gives every consumer its own state on every tier: its own software
  or native instance, its own record, its own virtual device on the hardware core, whose
  context the core holds whenever that consumer's call runs.

:meth:`ManagedService.switch` moves every proxy to another tier, all or nothing, carrying the
state (once, for a shared service); the old slots keep serving the calls already running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from juggle.core.tiers import Tier
from juggle.errors import ConfigurationError, JuggleError, TierUnavailableError
from juggle.runtime.descriptors import ServiceSpec
from juggle.runtime.hardware import (
    MAX_VERIFY_LEVEL,
    HardwareCore,
    HardwareDevice,
    VerifySchedule,
    device_class,
)
from juggle.runtime.modules import Module, code_error
from juggle.runtime.options import FrameworkOptions
from juggle.runtime.proxy import (
    ServiceProxy,
    StateRecord,
    binding_of,
    build_proxy,
    carry_state,
    has_context,
    make_gone,
    replay_onto,
    wait_drained,
)
from juggle.runtime.registry import ServiceFactory, ServiceRegistration
from juggle.runtime.resolved import Hardware
from juggle.runtime.tracing import Accumulator, RateWindow

__all__ = ["Arbitration", "FaultSink", "ManagedService", "ProxyFactory", "ServiceHost", "Switched"]

#: ``Tier.HARDWARE`` read once: a member lookup on an enum class costs ~50 ns on Python 3.11,
#: and the hot paths below (every switch, every new proxy) compare with it several times
_HARDWARE: Final = Tier.HARDWARE

#: The property that overrides the framework's ``verify_sample`` for one service (an int >= 0:
#: one hardware call in N checked against software after a warm-up; 0 checks none).
VERIFY_PROPERTY = "juggle.verify"


def verify_property(properties: Mapping[str, Any]) -> int | None:
    """The service's own ``juggle.verify`` rate (None: the framework's ``verify_sample``).

    Raises :class:`~juggle.errors.ConfigurationError` naming a value that is not an int >= 0.
    """
    value = properties.get(VERIFY_PROPERTY)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(
            f"property {VERIFY_PROPERTY!r} must be an int >= 0, got {value!r:.80}", value=value
        )
    return value


#: the consumer name under which released consumers' statistics are kept, folded together
RELEASED = "(released)"


@dataclass(slots=True)
class Switched:
    """What one :meth:`ManagedService.switch` did: the tier before, and each proxy's old slot
    (still serving the calls that started on it)."""

    previous: Tier
    slots: list[tuple[ServiceProxy, Any]]


class FaultSink(Protocol):
    """Where a managed service reports a faulty core (the fault supervisor)."""

    def hardware_fault(self, service: ManagedService, core: HardwareCore, reason: str) -> None:
        """``core`` (quarantined already) failed a call of ``service`` for ``reason``."""
        ...


class Arbitration(Protocol):
    """What a managed service asks of the tenant arbiter about its consumers."""

    def arbitrates(self, service_id: int) -> bool:
        """Whether tenants' requests place ``service_id`` (juggles do not)."""
        ...

    def virtual_device(self, managed: ManagedService, consumer: str) -> Any:
        """Tenant ``consumer``'s own device of arbitrated ``managed``."""
        ...

    def note_consumer(self, managed: ManagedService, consumer: str) -> None:
        """``consumer`` now holds a proxy of juggle-placed ``managed``."""
        ...

    def release_consumer(self, managed: ManagedService, consumer: str) -> None:
        """``consumer`` gave its proxy of arbitrated ``managed`` back."""
        ...


@dataclass(slots=True)
class ServiceHost:
    """The runtime around the managed services, all they reach outside themselves: the
    framework's ``options`` (replaced as a whole when ``verify_sample`` changes), the
    ``faults`` sink, and the ``arbiter``. One host serves every service of a framework."""

    options: FrameworkOptions
    faults: FaultSink
    arbiter: Arbitration


class ManagedService:
    """Runtime record of a service: its tiers, current tier, proxies, state and core."""

    def __init__(
        self,
        host: ServiceHost,
        interfaces: tuple[str, ...],
        interface: type,
        spec: ServiceSpec | None,
        classes: Mapping[str, type],
        hardware: Hardware | None,
        module: Module | None,
        properties: Mapping[str, Any],
        *,
        per_consumer: bool,
        instance: object | None = None,
    ) -> None:
        self.host = host
        self.interfaces = interfaces
        self.interface_name = interfaces[0]
        self.interface = interface
        self.spec = spec
        self.classes = classes
        self.hardware = hardware
        self.module = module
        self.properties = dict(properties)
        self._verify_every = verify_property(self.properties)  # checked before anything else
        self.per_consumer = per_consumer
        self.instance = instance
        soft = [t for t in (Tier.NATIVE, Tier.SOFTWARE) if t in classes]
        if instance is not None:
            soft = [Tier.SOFTWARE]
        self.home_tier = soft[0] if soft else Tier.HARDWARE
        self.tier = self.home_tier
        self.region: str | None = None
        self.core: HardwareCore | None = None
        self.quarantined: str | None = None  # region it was taken out of after a fault
        self.record = StateRecord()  # the one state of a shared service
        self.current: object | None = None  # a shared service's implementation now
        self.devices: dict[str, HardwareDevice] = {}  # consumer (or "") -> virtual device
        #: (software tier, consumer or "") → an implementation the service left and the
        #: version of the state record it held then: taken up again on the way back, with no
        #: replay if the state did not change meanwhile (a cache: a miss makes a new one)
        self.parked: dict[tuple[str, str], tuple[object, int]] = {}
        self.proxies: dict[str, ServiceProxy] = {}
        #: tier → method → statistics of every consumer that gave its proxy back (folded
        #: into one total, so memory does not grow with the consumers ever seen)
        self.released: dict[str, dict[str, Accumulator]] = {}
        self.registration: ServiceRegistration | None = None
        #: the registry's id of this service (0 until it is registered: :meth:`registered`)
        self.service_id = 0
        self.lock = threading.RLock()
        self.started = time.monotonic()
        self.rate = RateWindow(self.started)  # the service's call rate
        #: consumer → the call rate of the proxy it holds now
        self.consumer_rates: dict[str, RateWindow] = {}
        self.hw_modeled_ns = 0  # modeled bus time spent in windows this service has left
        self.hw_busy_base = 0  # its current window's bus time when the service entered it
        self.counters = {"fallbacks": 0, "verified": 0, "mismatches": 0}
        self._counter_lock = threading.Lock()
        #: raised by each mismatch, lowered by each core whose checks thinned out cleanly
        self.verify_level = 0
        self._schedule: VerifySchedule | None = None  # the newest core's
        self._device_cls: type[HardwareDevice] | None = None

    # -- identity ----------------------------------------------------------------------------

    def registered(self, registration: ServiceRegistration) -> None:
        """The registry registered this service as ``registration``: it has its id."""
        self.registration = registration
        self.service_id = registration.service_id

    @property
    def label(self) -> str:
        """``"3 (crypto.EncryptionService)"``: how messages name the service."""
        return f"{self.service_id} ({self.interface_name})"

    def tiers(self) -> tuple[Tier, ...]:
        """The tiers this service can serve from, in :class:`Tier` order."""
        have = set(self.classes) | ({Tier.HARDWARE} if self.hardware else set())
        if self.instance is not None:
            have.add(Tier.SOFTWARE)
        return tuple(t for t in Tier if t in have)

    # -- implementations ---------------------------------------------------------------------

    def record_of(self, consumer: str) -> StateRecord:
        """The state record ``consumer``'s proxy uses (the service's own, if shared)."""
        if not self.per_consumer:
            return self.record
        proxy = self.proxies.get(consumer)
        return binding_of(proxy).record if proxy is not None else StateRecord()

    def new_impl(self, tier: str, consumer: str, record: StateRecord | None = None) -> object:
        """A new implementation at ``tier`` for ``consumer`` (on the hardware tier: the
        consumer's virtual device, whose state is ``record``, by default its proxy's)."""
        if tier == _HARDWARE:
            arbiter = self.host.arbiter  # a tenant's own virtual device
            if arbiter.arbitrates(self.service_id):
                return arbiter.virtual_device(self, consumer)
            return self.device(consumer, record)
        if self.instance is not None:
            return self.instance
        if tier not in self.classes:
            raise TierUnavailableError(
                f"service {self.label} has no {tier!r} tier", service_id=self.service_id
            )
        cls = self.classes[tier]
        try:
            return cls()
        except JuggleError:
            raise
        except Exception as exc:  # module code is third-party
            raise code_error(
                self.module.name if self.module else self.label,
                f"creating its {tier} implementation {cls.__name__}",
                exc,
                self.module.namespace.root if self.module else "",
            ) from exc

    def impl_for(self, consumer: str) -> object:
        """What a new proxy of ``consumer`` is built with: the current implementation (a
        tenant's own virtual device where the tenant arbiter places the service)."""
        arbiter = self.host.arbiter
        if self.tier == _HARDWARE and arbiter.arbitrates(self.service_id):
            return arbiter.virtual_device(self, consumer)
        arbiter.note_consumer(self, consumer)  # a tenant's priority holds the region
        if not self.per_consumer and self.current is not None:
            return self.current
        impl = self.new_impl(self.tier, consumer)
        if not self.per_consumer:
            self.current = impl
        return impl

    def device(self, consumer: str, record: StateRecord | None = None) -> HardwareDevice:
        """``consumer``'s virtual device on the core (one for all, if shared)."""
        core = self.core
        if core is None:
            raise TierUnavailableError(
                f"service {self.label} is not loaded in the fabric", service_id=self.service_id
            )
        key = consumer if self.per_consumer else ""
        device = self.devices.get(key)
        if device is None or device.core is not core:
            if self._device_cls is None:
                self._device_cls = device_class(self.interface, self.interface_name, core.driver)
            state = record if record is not None else self.record_of(consumer)
            device = self._device_cls(self, core, key, state)
            self.devices[key] = device
        return device

    # -- HardwareHost --------------------------------------------------------------------------

    @property
    def has_software(self) -> bool:
        """Whether the service has a software tier to fall back to."""
        return self.home_tier != _HARDWARE

    def software_twin(self, consumer: str) -> object | None:
        """A fresh implementation of the home software tier (None: hardware-only)."""
        if self.home_tier == _HARDWARE:
            return None
        return self.new_impl(self.home_tier, consumer)

    def verify_every(self) -> int:
        """One hardware call in N is checked after a core's warm-up (N: the ``juggle.verify``
        property, else the framework's ``verify_sample``; 0 checks none)."""
        every = self._verify_every
        return self.host.options.verify_sample if every is None else every

    def verify_schedule(self) -> VerifySchedule:
        """The check plan of a core just programmed (or recovered) for this service: every
        call for ``verify_warmup * 2**verify_level`` calls, then thinning out to the base rate.
        A previous core whose checks reached the base rate with no mismatch lowers the level."""
        with self._counter_lock:
            last = self._schedule
            if (
                last is not None
                and not last.mismatched
                and self.verify_level
                and last.settled(self.verify_every())
            ):
                self.verify_level -= 1
            self._schedule = VerifySchedule(self.host.options.verify_warmup, self.verify_level)
            return self._schedule

    def hardware_fault(self, core: HardwareCore, reason: str) -> None:
        """Quarantine ``core`` and report it to the fault sink (which moves this service to
        software)."""
        if core.quarantine(reason):
            self.host.faults.hardware_fault(self, core, reason)

    def count(self, what: str) -> None:
        """Count a fallback, a verified call or a mismatch (which also raises the verification
        level: the service's next cores warm up longer)."""
        with self._counter_lock:
            self.counters[what] += 1
            if what == "mismatches":
                self.verify_level = min(self.verify_level + 1, MAX_VERIFY_LEVEL)

    # -- switching ---------------------------------------------------------------------------

    def switch(self, tier: str, *, twins: bool = False) -> Switched:
        """Send every proxy's new calls to ``tier``, carrying the state; all or nothing.

        ``twins``: the service leaves a faulty core; each virtual device's software twin
        (already in the consumer's state) becomes the consumer's implementation, and the core
        is not read. Raises what making or carrying the implementations raises, after putting
        back every proxy already switched.
        """
        with self.lock, self.record.lock:
            previous = self.tier
            switched: list[tuple[ServiceProxy, Any]] = []
            new_current: object | None = None
            try:
                if not self.per_consumer:
                    new_current = self._shared_impl(tier, twins)
                for consumer, proxy in list(self.proxies.items()):
                    binding = binding_of(proxy)
                    if new_current is not None:
                        switched.append((proxy, binding.switch(new_current, tier, carry=False)))
                    else:
                        impl, carry = self._own_impl(tier, consumer, twins)
                        switched.append((proxy, binding.switch(impl, tier, carry=carry)))
            except BaseException:
                for proxy, old in reversed(switched):
                    binding_of(proxy).switch(old.impl, str(old.tier), carry=False)
                raise
            self.tier = tier if type(tier) is Tier else Tier(tier)
            if previous != _HARDWARE and previous != tier and self.instance is None:
                self._park(previous, switched)
            if not self.per_consumer:
                self.current = new_current
            if tier != _HARDWARE:
                self.devices.clear()
            return Switched(previous, switched)

    def _park(self, tier: str, switched: list[tuple[ServiceProxy, Any]]) -> None:
        """Keep the software implementations just left (one per consumer, or the shared one)
        with their state records' versions, for :meth:`_unpark`."""
        if not self.per_consumer:
            if self.current is not None:
                self.parked[(tier, "")] = (self.current, self.record.version)
            return
        for proxy, old in switched:
            binding = binding_of(proxy)
            self.parked[(tier, proxy.consumer)] = (old.impl, binding.record.version)

    def _unpark(self, tier: str, consumer: str, record: StateRecord) -> tuple[object, bool]:
        """An implementation at software ``tier`` for ``consumer``: the one parked there if
        any, else a new one; and whether the state must still be carried onto it (not if the
        parked one holds the record's state and has no context of its own to restore)."""
        parked = self.parked.pop((tier, consumer), None)
        if parked is None:
            return self.new_impl(tier, consumer), True
        impl, version = parked
        return impl, version != record.version or has_context(impl)

    def versions(self) -> tuple[int, ...]:
        """The state records' versions: they differ after any state-setting call."""
        if not self.per_consumer:
            return (self.record.version,)
        return tuple(binding_of(p).record.version for p in self.proxies.values())

    def revert(self, switched: Switched, *, carry: bool) -> None:
        """Undo ``switched``: every proxy back on the implementation it had (still holding the
        state it had then; ``carry`` brings it the state set since). All or nothing."""
        with self.lock, self.record.lock:
            done: list[tuple[ServiceProxy, Any]] = []
            try:
                for proxy, old in switched.slots:
                    binding = binding_of(proxy)
                    if binding.dispatcher.slot.impl is old.impl:
                        continue
                    done.append((proxy, binding.switch(old.impl, str(old.tier), carry=carry)))
            except BaseException:
                for proxy, new in reversed(done):
                    binding_of(proxy).switch(new.impl, str(new.tier), carry=False)
                raise
            self.tier = switched.previous
            if not self.per_consumer and switched.slots:
                self.current = switched.slots[0][1].impl

    def _shared_impl(self, tier: str, twins: bool) -> object:
        if twins:
            device = self.devices.get("")
            twin = device.twin() if device is not None else None
            if twin is not None:
                return twin
        if tier == _HARDWARE:
            new, carry = self.new_impl(tier, ""), True
        else:
            new, carry = self._unpark(tier, "", self.record)
        old = self.current
        if not carry:
            return new
        if old is not None:
            carry_state(old, new, self.record)
        else:
            replay_onto(new, self.record)
        return new

    def _own_impl(self, tier: str, consumer: str, twins: bool) -> tuple[object, bool]:
        """``consumer``'s implementation at ``tier`` and whether its state must be carried."""
        if twins:
            device = self.devices.get(consumer)
            twin = device.twin() if device is not None else None
            if twin is not None:
                return twin, False
        if tier == _HARDWARE:
            return self.new_impl(tier, consumer), True
        return self._unpark(tier, consumer, self.record_of(consumer))

    def drain(self, switched: Switched, timeout_s: float) -> float:
        """Wait until the calls on the old slots ended, then fold their statistics; returns
        the seconds spent waiting (the folding is work, not waiting).

        Raises :class:`~juggle.errors.DrainTimeoutError` after ``timeout_s`` in all.
        """
        started = time.monotonic()
        deadline = started + timeout_s
        for _, old in switched.slots:
            wait_drained(old, max(0.0, deadline - time.monotonic()), self.service_id)
        waited = time.monotonic() - started
        for proxy, old in switched.slots:
            binding_of(proxy).retire(old)
        return waited

    # -- consumers ---------------------------------------------------------------------------

    def traces(self) -> dict[str, dict[str, dict[str, Accumulator]]]:
        """consumer → tier → method → accumulator; the released consumers' together under
        :data:`RELEASED`."""
        out: dict[str, dict[str, dict[str, Accumulator]]] = {}
        if self.released:
            out[RELEASED] = {t: dict(m) for t, m in self.released.items()}
        for consumer, proxy in list(self.proxies.items()):
            for tier, per_method in binding_of(proxy).traces().items():
                target = out.setdefault(consumer, {}).setdefault(tier, {})
                for name, acc in per_method.items():
                    target.setdefault(name, Accumulator()).add(acc)
        return out

    def release(self, consumer: str) -> None:
        """``consumer`` gave its proxy back: keep its statistics, end its calls."""
        with self.lock:
            proxy = self.proxies.pop(consumer, None)
            if proxy is None:
                return
            binding = binding_of(proxy)
            for tier, per_method in binding.traces().items():
                for name, acc in per_method.items():
                    self.released.setdefault(tier, {}).setdefault(name, Accumulator()).add(acc)
            binding.switch(make_gone(binding, self.service_id), "gone", carry=False)
            self.consumer_rates.pop(consumer, None)
            if self.per_consumer:
                self.devices.pop(consumer, None)
                for tier in Tier:
                    self.parked.pop((tier, consumer), None)
        arbiter = self.host.arbiter
        if arbiter.arbitrates(self.service_id):  # a tenant's virtual device and region go too
            arbiter.release_consumer(self, consumer)

    def __repr__(self) -> str:
        where = f" in {self.region}" if self.region else ""
        return f"<ManagedService {self.label} {self.tier}{where}, {len(self.proxies)} consumers>"


class ProxyFactory(ServiceFactory):
    """Registry factory: each consumer gets its own proxy of the managed service."""

    def __init__(self, managed: ManagedService) -> None:
        self.managed = managed

    def get_service(self, consumer: str, registration: ServiceRegistration) -> object:
        """A new proxy for ``consumer``, serving from the service's current tier."""
        m = self.managed
        with m.lock:
            if m.per_consumer:
                m.release(consumer)
                record = StateRecord()
                impl = m.new_impl(m.tier, consumer, record)
            else:
                record = m.record
                impl = m.impl_for(consumer)
            proxy = build_proxy(
                m.interface,
                m.interface_name,
                registration.service_id,
                consumer,
                impl,
                m.tier,
                sample_period=m.host.options.trace_sample,
                record=record,
            )
            m.proxies[consumer] = proxy
            m.consumer_rates[consumer] = RateWindow()
            return proxy

    def unget_service(
        self, consumer: str, registration: ServiceRegistration, service: object
    ) -> None:
        """``consumer`` is done with its proxy."""
        self.managed.release(consumer)
