"""The service registry: who offers which interface, with which properties, to whom.

Like OSGi's service layer, a provider registers an object under one or more interface names
with properties and a ranking; consumers look services up by interface and LDAP filter, best
first, and listeners hear about every registration, modification and unregistration. A
:class:`ServiceFactory` registered as the service hands each consumer its own instance (Juggle
3.1: accelerate some consumers, leave others on software). One :class:`Registry` belongs to one
framework; it is thread-safe, and it calls listeners and factories outside its lock.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from juggle.errors import (
    AlreadyUnregisteredError,
    InvalidConsumerError,
    ModuleCodeError,
    PropertyError,
    RegistrationError,
    ServiceFactoryError,
    ServiceUnavailableError,
    UnknownServiceError,
    scalar,
)
from juggle.runtime.ldapfilter import Filter, Properties, parse_filter

__all__ = [
    "OBJECT_CLASS",
    "SERVICE_ID",
    "SERVICE_MODULE",
    "SERVICE_RANKING",
    "Registry",
    "RegistrySnapshot",
    "ServiceEvent",
    "ServiceEventKind",
    "ServiceFactory",
    "ServiceListener",
    "ServiceReference",
    "ServiceRegistration",
]

logger = logging.getLogger(__name__)

OBJECT_CLASS: Final = "objectClass"
SERVICE_ID: Final = "service.id"
SERVICE_RANKING: Final = "service.ranking"
SERVICE_MODULE: Final = "service.module"
_RESERVED: Final = frozenset(
    key.lower() for key in (OBJECT_CLASS, SERVICE_ID, SERVICE_MODULE, SERVICE_RANKING)
)


# -- values handed out -----------------------------------------------------------------------


@dataclass(frozen=True, eq=False, slots=True)
class ServiceReference:
    """A snapshot of one registered service: its id, interfaces, properties and ranking.

    ``properties`` is read-only and case-insensitive; it includes ``objectClass`` (the
    interfaces), ``service.id``, ``service.ranking`` and, for a module's service,
    ``service.module``. Two references are equal when they name the same service, even if one
    was taken before a property change.
    """

    service_id: int
    interfaces: tuple[str, ...]
    properties: Mapping[str, Any]
    ranking: int
    module_id: int | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServiceReference) and other.service_id == self.service_id

    def __hash__(self) -> int:
        return hash((ServiceReference, self.service_id))

    @property
    def sort_key(self) -> tuple[int, int]:
        """Best first: highest ranking, then oldest (lowest id)."""
        return (-self.ranking, self.service_id)


class ServiceEventKind(enum.Enum):
    """What happened to a service, as OSGi's ``ServiceEvent`` types."""

    REGISTERED = "registered"
    MODIFIED = "modified"
    MODIFIED_ENDMATCH = "modified_endmatch"  # modified, and the listener's filter stops matching
    UNREGISTERING = "unregistering"  # sent while the service is still registered


@dataclass(frozen=True, slots=True)
class ServiceEvent:
    """One change of one service, delivered to the listeners interested in it."""

    kind: ServiceEventKind
    reference: ServiceReference


ServiceListener = Callable[[ServiceEvent], None]


@dataclass(frozen=True)
class RegistrySnapshot:
    """What a registry holds at one instant; readers never touch live state."""

    services: int
    listeners: int
    per_interface: Mapping[str, int]
    uses: int  # (service, consumer) pairs with a use count above zero
    factory_instances: int
    events_delivered: int
    listener_errors: int


class ServiceFactory(ABC):
    """Register one of these as the service to give every consumer its own instance.

    The registry calls :meth:`get_service` the first time a consumer asks, caches the result
    for that consumer and counts its uses; :meth:`unget_service` runs when the count drops to
    zero or the service is unregistered. Both are called outside the registry's lock.
    """

    @abstractmethod
    def get_service(self, consumer: str, registration: ServiceRegistration) -> object:
        """Create the instance that ``consumer`` will use; raising fails its get_service."""

    def unget_service(  # noqa: B027 - optional hook with a default, as fpga_manager_ops
        self, consumer: str, registration: ServiceRegistration, service: object
    ) -> None:
        """Release ``consumer``'s instance; the default does nothing."""


class ServiceRegistration:
    """The provider's handle on one registration: change its properties or unregister it."""

    __slots__ = ("_registry", "_service_id")

    def __init__(self, registry: Registry, service_id: int) -> None:
        self._registry = registry
        self._service_id = service_id

    @property
    def service_id(self) -> int:
        """The id the registry gave the service."""
        return self._service_id

    @property
    def reference(self) -> ServiceReference:
        """The current reference (with the latest properties).

        Raises :class:`AlreadyUnregisteredError` once unregistration has finished.
        """
        return self._registry._current(self._service_id)

    @property
    def registered(self) -> bool:
        """Whether the service is still in the registry (true while UNREGISTERING runs)."""
        return self._registry._has(self._service_id)

    def set_properties(self, properties: Mapping[str, Any]) -> ServiceReference:
        """Replace the service's properties and fire MODIFIED; returns the new reference.

        ``objectClass``, ``service.id`` and ``service.module`` stay as the registry set them;
        ``service.ranking`` (an int), if given, changes the ranking. Raises
        :class:`PropertyError` for bad properties and :class:`AlreadyUnregisteredError` after
        :meth:`unregister`.
        """
        return self._registry._set_properties(self._service_id, properties)

    def unregister(self) -> None:
        """Fire UNREGISTERING, then remove the service and release every consumer's instance.

        Raises :class:`AlreadyUnregisteredError` when called a second time.
        """
        self._registry._unregister(self._service_id)

    def __repr__(self) -> str:
        state = "registered" if self.registered else "unregistered"
        return f"<ServiceRegistration #{self._service_id} {state}>"


# -- live state (guarded by the registry lock) -----------------------------------------------


class _State(enum.Enum):
    REGISTERED = "registered"
    UNREGISTERING = "unregistering"
    REMOVED = "removed"


@dataclass(eq=False)
class _Use:
    instance: object
    count: int = 0


@dataclass(eq=False)
class _Entry:
    registration: ServiceRegistration
    reference: ServiceReference
    service: object
    state: _State = _State.REGISTERED
    uses: dict[str, _Use] = field(default_factory=dict)
    factory_lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def factory(self) -> ServiceFactory | None:
        return self.service if isinstance(self.service, ServiceFactory) else None


@dataclass(eq=False)
class _Listener:
    callback: ServiceListener
    interface: str | None
    filter: Filter | None
    active: bool = True

    def wants(self, reference: ServiceReference) -> bool:
        if self.interface is not None and self.interface not in reference.interfaces:
            return False
        return self.filter is None or self.filter.matches(reference.properties)


_Delivery = tuple[_Listener, ServiceEvent]


# -- validation (before any state changes) ---------------------------------------------------


def _check_interfaces(interfaces: str | Sequence[str]) -> tuple[str, ...]:
    names = (interfaces,) if isinstance(interfaces, str) else interfaces
    if not isinstance(names, Sequence) or not names:
        raise RegistrationError(
            f'"interfaces" must be a non-empty name or sequence of names, got {interfaces!r}'
        )
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise RegistrationError(
                f'"interfaces" must hold non-empty strings, got {name!r} in {interfaces!r}',
                value=name,
            )
    return tuple(dict.fromkeys(names))


def _freeze(value: Any) -> Any:
    """A read-only copy of a property value: lists become tuples, sets frozensets."""
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    if isinstance(value, set):
        return frozenset(value)
    if isinstance(value, dict):
        return MappingProxyType({key: _freeze(item) for key, item in value.items()})
    return value


def _check_properties(properties: Mapping[str, Any] | None) -> dict[str, Any]:
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise PropertyError(f'"properties" must be a mapping, got {properties!r}')
    checked = Properties(properties)  # raises PropertyError on bad or case-duplicate keys
    return {key: _freeze(value) for key, value in checked.items()}


def _check_ranking(ranking: object, name: str = "ranking") -> int:
    if isinstance(ranking, bool) or not isinstance(ranking, int):
        raise PropertyError(
            f'"{name}" must be an int, got {ranking!r}', key=name, value=scalar(ranking)
        )
    return ranking


def _ranking_in(properties: Mapping[str, Any], default: int) -> int:
    for key, value in properties.items():
        if key.lower() == SERVICE_RANKING:
            return _check_ranking(value, SERVICE_RANKING)
    return default


def _check_consumer(consumer: object) -> str:
    if not isinstance(consumer, str) or not consumer:
        raise InvalidConsumerError(f'"consumer" must be a non-empty string, got {consumer!r}')
    return consumer


def _as_filter(value: str | Filter | None) -> Filter | None:
    if value is None or isinstance(value, Filter):
        return value
    return parse_filter(value)  # raises FilterSyntaxError, also for a non-string


def _reference(
    service_id: int,
    interfaces: tuple[str, ...],
    properties: Mapping[str, Any],
    ranking: int,
    module_id: int | None,
) -> ServiceReference:
    merged = {key: value for key, value in properties.items() if key.lower() not in _RESERVED}
    merged[OBJECT_CLASS] = interfaces
    merged[SERVICE_ID] = service_id
    merged[SERVICE_RANKING] = ranking
    if module_id is not None:
        merged[SERVICE_MODULE] = module_id
    return ServiceReference(service_id, interfaces, Properties(merged), ranking, module_id)


# -- the registry ----------------------------------------------------------------------------


class Registry:
    """Registrations, look-ups by interface and filter, per-consumer factories and listeners.

    Think of a notice board: providers pin services with labels (properties), consumers pick
    the best notice matching their question, and listeners are told when notices change. State
    changes happen under one lock; listeners and factories run after it is released, so they
    may call back into the registry.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._entries: dict[int, _Entry] = {}
        self._by_interface: dict[str, dict[int, _Entry]] = {}
        self._listeners: list[_Listener] = []
        self._events_delivered = 0
        self._listener_errors = 0

    # -- registering -------------------------------------------------------------------------

    def register(
        self,
        interfaces: str | Sequence[str],
        service: object,
        properties: Mapping[str, Any] | None = None,
        *,
        ranking: int = 0,
        module_id: int | None = None,
    ) -> ServiceRegistration:
        """Offer ``service`` under ``interfaces`` and fire REGISTERED.

        ``ranking`` wins over a ``service.ranking`` property unless it is 0. ``service`` may be
        a :class:`ServiceFactory`. Raises :class:`RegistrationError` for no interfaces, a
        non-string or empty name, a None service or a bad module id, and
        :class:`PropertyError` for bad properties or ranking; nothing is registered then.
        """
        names = _check_interfaces(interfaces)
        if service is None:
            raise RegistrationError(f'"service" must be an object, got None for {names!r}')
        if module_id is not None and (
            isinstance(module_id, bool) or not isinstance(module_id, int)
        ):
            raise RegistrationError(
                f'"module_id" must be an int or None, got {module_id!r}', value=module_id
            )
        user = _check_properties(properties)
        rank = _check_ranking(ranking) or _ranking_in(user, 0)
        with self._lock:
            service_id = next(self._ids)
            reference = _reference(service_id, names, user, rank, module_id)
            registration = ServiceRegistration(self, service_id)
            entry = _Entry(registration, reference, service)
            self._entries[service_id] = entry
            for name in names:
                self._by_interface.setdefault(name, {})[service_id] = entry
            event = ServiceEvent(ServiceEventKind.REGISTERED, reference)
            deliveries = [(lst, event) for lst in self._listeners if lst.wants(reference)]
        self._deliver(deliveries)
        return registration

    def _set_properties(self, service_id: int, properties: Mapping[str, Any]) -> ServiceReference:
        user = _check_properties(properties)
        with self._lock:
            entry = self._live(service_id)
            old = entry.reference
            rank = _ranking_in(user, old.ranking)
            new = _reference(service_id, old.interfaces, user, rank, old.module_id)
            entry.reference = new
            deliveries = [
                (listener, ServiceEvent(kind, new))
                for listener in self._listeners
                if (kind := _modified_kind(listener, old, new)) is not None
            ]
        self._deliver(deliveries)
        return new

    def _unregister(self, service_id: int) -> None:
        with self._lock:
            entry = self._live(service_id)
            entry.state = _State.UNREGISTERING
            event = ServiceEvent(ServiceEventKind.UNREGISTERING, entry.reference)
            deliveries = [(lst, event) for lst in self._listeners if lst.wants(entry.reference)]
        self._deliver(deliveries)
        with self._lock:
            del self._entries[service_id]
            for name in entry.reference.interfaces:
                index = self._by_interface[name]
                del index[service_id]
                if not index:
                    del self._by_interface[name]
            entry.state = _State.REMOVED
            uses, entry.uses = entry.uses, {}
        for consumer, use in uses.items():
            self._release(entry, consumer, use.instance)

    def unregister_module(self, module_id: int) -> int:
        """Unregister every service the module registered; returns how many were."""
        with self._lock:
            ids = [sid for sid, e in self._entries.items() if e.reference.module_id == module_id]
        count = 0
        for service_id in ids:
            try:
                self._unregister(service_id)
                count += 1
            except AlreadyUnregisteredError:  # unregistered meanwhile by its provider
                pass
        return count

    def _live(self, service_id: int) -> _Entry:
        entry = self._entries.get(service_id)
        if entry is None or entry.state is not _State.REGISTERED:
            raise AlreadyUnregisteredError(
                f"service {service_id} is already unregistered", service_id=service_id
            )
        return entry

    def _current(self, service_id: int) -> ServiceReference:
        with self._lock:
            entry = self._entries.get(service_id)
            if entry is None:
                raise AlreadyUnregisteredError(
                    f"service {service_id} is already unregistered", service_id=service_id
                )
            return entry.reference

    def _has(self, service_id: int) -> bool:
        with self._lock:
            return service_id in self._entries

    # -- looking up --------------------------------------------------------------------------

    def get_references(
        self, interface: str | None = None, filter: str | Filter | None = None
    ) -> list[ServiceReference]:
        """Services offering ``interface`` (any if None) whose properties match ``filter``.

        Sorted best first: highest ranking, then lowest service id. Raises
        :class:`FilterSyntaxError` for a filter that does not parse.
        """
        compiled = _as_filter(filter)
        with self._lock:
            pool = self._entries if interface is None else self._by_interface.get(interface, {})
            references = [entry.reference for entry in pool.values()]
        if compiled is not None:
            references = [ref for ref in references if compiled.matches(ref.properties)]
        references.sort(key=lambda ref: ref.sort_key)
        return references

    def get_reference(
        self, interface: str | None = None, filter: str | Filter | None = None
    ) -> ServiceReference | None:
        """The best service matching, or None. Raises :class:`FilterSyntaxError`."""
        references = self.get_references(interface, filter)
        return references[0] if references else None

    def require_reference(
        self, interface: str | None = None, filter: str | Filter | None = None
    ) -> ServiceReference:
        """The best service matching.

        Raises :class:`ServiceUnavailableError` naming the interface and filter when none does,
        and :class:`FilterSyntaxError` for a filter that does not parse.
        """
        found = self.get_reference(interface, filter)
        if found is None:
            raise ServiceUnavailableError(
                f"no service offers {interface!r} with filter {str(filter)!r}"
                if filter is not None
                else f"no service offers {interface!r}",
                interface=interface,
            )
        return found

    def reference(self, service_id: int) -> ServiceReference:
        """The current reference of a service. Raises :class:`UnknownServiceError`."""
        with self._lock:
            entry = self._entries.get(service_id)
            if entry is None:
                raise UnknownServiceError(
                    f"no service with id {service_id!r}", service_id=service_id
                )
            return entry.reference

    # -- using -------------------------------------------------------------------------------

    def get_service(self, reference: ServiceReference | int, consumer: str) -> object:
        """The service object for ``consumer``, counting one more use.

        For a :class:`ServiceFactory` this is the consumer's own instance, created on its first
        use. Raises :class:`UnknownServiceError` when the service is gone,
        :class:`ServiceFactoryError` when the factory raises or returns None, and
        :class:`InvalidConsumerError` for a bad consumer name.
        """
        _check_consumer(consumer)
        service_id = _service_id(reference)
        with self._lock:
            entry = self._known(service_id)
            factory = entry.factory
            if factory is None:
                entry.uses.setdefault(consumer, _Use(entry.service)).count += 1
                return entry.service
        with entry.factory_lock:  # one instance per consumer, even when asked concurrently
            with self._lock:
                use = self._known(service_id).uses.get(consumer)
                if use is not None:
                    use.count += 1
                    return use.instance
            instance = self._create(factory, consumer, entry)
            with self._lock:
                if entry.state is not _State.REMOVED:
                    entry.uses[consumer] = _Use(instance, 1)
                    return instance
            self._release(entry, consumer, instance)
            raise UnknownServiceError(
                f"service {service_id} was unregistered", service_id=service_id
            )

    def _create(self, factory: ServiceFactory, consumer: str, entry: _Entry) -> object:
        try:
            instance = factory.get_service(consumer, entry.registration)
        except ModuleCodeError:
            raise  # a module's own code failed: the error says so already
        except Exception as exc:
            raise ServiceFactoryError(
                f"factory of service {entry.reference.service_id} failed for {consumer!r}: {exc}",
                service_id=entry.reference.service_id,
            ) from exc
        if instance is None:
            raise ServiceFactoryError(
                f"factory of service {entry.reference.service_id} returned None for {consumer!r}",
                service_id=entry.reference.service_id,
            )
        return instance

    def unget_service(self, reference: ServiceReference | int, consumer: str) -> bool:
        """Count one use fewer; a factory's instance is released when the count reaches zero.

        Returns False when ``consumer`` was not using the service (or it is gone). Raises
        :class:`InvalidConsumerError` for a bad consumer name.
        """
        _check_consumer(consumer)
        service_id = _service_id(reference)
        with self._lock:
            entry = self._entries.get(service_id)
            if entry is None:
                return False
        with entry.factory_lock:
            with self._lock:
                use = entry.uses.get(consumer)
                if use is None:
                    return False
                use.count -= 1
                if use.count > 0:
                    return True
                del entry.uses[consumer]
            self._release(entry, consumer, use.instance)
        return True

    def release_consumer(self, consumer: str) -> int:
        """Drop every use ``consumer`` holds (it stopped); returns how many services it used."""
        _check_consumer(consumer)
        released: list[tuple[_Entry, _Use]] = []
        with self._lock:
            for entry in self._entries.values():
                use = entry.uses.pop(consumer, None)
                if use is not None:
                    released.append((entry, use))
        for entry, use in released:
            self._release(entry, consumer, use.instance)
        return len(released)

    def uses(self, reference: ServiceReference | int) -> Mapping[str, int]:
        """Use counts by consumer for one service. Raises :class:`UnknownServiceError`."""
        with self._lock:
            entry = self._known(_service_id(reference))
            return MappingProxyType({name: use.count for name, use in entry.uses.items()})

    def _known(self, service_id: int) -> _Entry:
        entry = self._entries.get(service_id)
        if entry is None:
            raise UnknownServiceError(f"no service with id {service_id!r}", service_id=service_id)
        return entry

    def _release(self, entry: _Entry, consumer: str, instance: object) -> None:
        factory = entry.factory
        if factory is None:
            return
        try:
            factory.unget_service(consumer, entry.registration, instance)
        except Exception:
            logger.exception(
                "factory of service %d failed to release %r's instance",
                entry.reference.service_id,
                consumer,
            )

    # -- listening ---------------------------------------------------------------------------

    def add_listener(
        self,
        callback: ServiceListener,
        *,
        interface: str | None = None,
        filter: str | Filter | None = None,
    ) -> Callable[[], None]:
        """Call ``callback`` with every event of services matching ``interface`` and ``filter``.

        Returns an undo function that removes the listener (calling it again does nothing).
        Raises :class:`RegistrationError` for a callback that is not callable and
        :class:`FilterSyntaxError` for a filter that does not parse.
        """
        if not callable(callback):
            raise RegistrationError(f'"callback" must be callable, got {callback!r}')
        if interface is not None and not isinstance(interface, str):
            raise RegistrationError(
                f'"interface" must be a string, got {interface!r}', value=interface
            )
        listener = _Listener(callback, interface, _as_filter(filter))
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                listener.active = False
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def _deliver(self, deliveries: list[_Delivery]) -> None:
        delivered = failed = 0
        for listener, event in deliveries:
            if not listener.active:  # removed after the change, before its turn
                continue
            delivered += 1
            try:
                listener.callback(event)
            except Exception:
                failed += 1
                logger.exception("service listener %r failed on %s", listener.callback, event)
        if delivered:
            with self._lock:
                self._events_delivered += delivered
                self._listener_errors += failed

    # -- observing ---------------------------------------------------------------------------

    def statistics(self) -> RegistrySnapshot:
        """A frozen snapshot of counts: services, listeners, per interface, uses, events."""
        with self._lock:
            uses = [use for entry in self._entries.values() for use in entry.uses.values()]
            factories = sum(
                len(entry.uses) for entry in self._entries.values() if entry.factory is not None
            )
            return RegistrySnapshot(
                services=len(self._entries),
                listeners=len(self._listeners),
                per_interface=MappingProxyType(
                    {name: len(index) for name, index in sorted(self._by_interface.items())}
                ),
                uses=len(uses),
                factory_instances=factories,
                events_delivered=self._events_delivered,
                listener_errors=self._listener_errors,
            )

    def __repr__(self) -> str:
        with self._lock:
            services, listeners = len(self._entries), len(self._listeners)
        return f"<Registry {services} services, {listeners} listeners>"


def _modified_kind(
    listener: _Listener, old: ServiceReference, new: ServiceReference
) -> ServiceEventKind | None:
    """MODIFIED if the listener's filter matches now, MODIFIED_ENDMATCH if only before."""
    if listener.interface is not None and listener.interface not in new.interfaces:
        return None
    if listener.filter is None or listener.filter.matches(new.properties):
        return ServiceEventKind.MODIFIED
    if listener.filter.matches(old.properties):
        return ServiceEventKind.MODIFIED_ENDMATCH
    return None


def _service_id(reference: ServiceReference | int) -> int:
    if isinstance(reference, ServiceReference):
        return reference.service_id
    if isinstance(reference, int) and not isinstance(reference, bool):
        return reference
    raise UnknownServiceError(f'"reference" must be a ServiceReference or id, got {reference!r}')
