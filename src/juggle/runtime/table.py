"""The service table: every managed service by id, its consumers' proxies, and its figures.

A :class:`ServiceTable` is the framework's book of services, like a library's catalogue: it
registers a managed service with the registry, hands consumers proxies of the best match
(``get_service``), takes them back, and reads the frozen snapshots and call statistics of
what it holds. It neither places services nor contains faults; the other parts look services
up here (:meth:`ServiceTable.managed`) and account the modeled bus time of a service's stay in
a region here (:meth:`ServiceTable.enter_region`, :meth:`ServiceTable.bank_modeled_time`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from juggle.core.tiers import Tier
from juggle.errors import FabricError, ServiceUnavailableError, UnknownServiceError, scalar
from juggle.fabric.fabric import Fabric
from juggle.runtime.interfaces import InterfaceCatalog, short_name
from juggle.runtime.proxy import ServiceProxy, binding_of
from juggle.runtime.registry import Registry
from juggle.runtime.services import ManagedService, ProxyFactory
from juggle.runtime.snapshots import ProxyInfo, RegionSnapshot, ServiceSnapshot, ServiceStatistics
from juggle.runtime.tracing import Accumulator, RateWindow, merge, ns_per_tick

__all__ = ["ServiceTable"]

#: tier → method → accumulator: one consumer's calls
Traces = Mapping[str, Mapping[str, Accumulator]]


class ServiceTable:
    """The managed services of one framework, its registry and its interface catalogue.

    Thread-safe: lookups and snapshots take the table's lock only to copy what they read.
    """

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.registry = Registry()
        self.interfaces = InterfaceCatalog()
        self._managed: dict[int, ManagedService] = {}
        self._lock = threading.RLock()

    # -- the book ----------------------------------------------------------------------------

    def add(self, managed: ManagedService, *, ranking: int, module_id: int | None) -> None:
        """Register ``managed`` (its tiers listed in property ``juggle.tiers``) and keep it."""
        props = dict(managed.properties)
        props["juggle.tiers"] = [str(t) for t in managed.tiers()]
        registration = self.registry.register(
            list(managed.interfaces),
            ProxyFactory(managed),
            props,
            ranking=ranking,
            module_id=module_id,
        )
        managed.registered(registration)
        with self._lock:
            self._managed[managed.service_id] = managed

    def remove(self, service_id: int) -> None:
        """Forget ``service_id`` (unregistered already, or never to be served again)."""
        with self._lock:
            self._managed.pop(service_id, None)

    def find(self, service_id: int) -> ManagedService | None:
        """The managed service ``service_id`` (None: none)."""
        with self._lock:
            return self._managed.get(service_id)

    def managed(self, service_id: object) -> ManagedService:
        """The managed service ``service_id``. Raises :class:`UnknownServiceError` naming the
        value (and hinting at ``service_id`` when a proxy was passed)."""
        with self._lock:
            managed = (
                self._managed.get(service_id)
                if isinstance(service_id, int) and not isinstance(service_id, bool)
                else None
            )
        if managed is None:
            message = f"no service with id {service_id!r:.80}"
            if isinstance(service_id, int) and not isinstance(service_id, bool):
                raise UnknownServiceError(message, service_id=service_id)
            if isinstance(service_id, ServiceProxy):
                message += f" (a proxy was passed: use its service_id, {service_id.service_id})"
            raise UnknownServiceError(message, value=scalar(service_id))
        return managed

    def all(self) -> list[ManagedService]:
        """Every managed service now, by id."""
        with self._lock:
            return sorted(self._managed.values(), key=lambda m: m.service_id)

    # -- consumers ---------------------------------------------------------------------------

    def get_service(self, interface: str, consumer: str, filter: str | None) -> Any:
        """A proxy of the best service for ``interface`` (full or short name) for
        ``consumer``, among those matching LDAP ``filter``. Raises
        :class:`ServiceUnavailableError` when nothing matches."""
        if not isinstance(interface, str) or not interface:
            raise ServiceUnavailableError(
                f'"interface" must be a non-empty string, got {interface!r:.80}',
                interface=interface,
            )
        refs = [
            ref
            for name in self._interface_names(interface)
            for ref in self.registry.get_references(name, filter)
        ]
        if not refs:
            where = f" matching {filter!r}" if filter else ""
            raise ServiceUnavailableError(
                f"no service for interface {interface!r}{where}", interface=interface
            )
        best = min(refs, key=lambda r: r.sort_key)
        return self.registry.get_service(best, consumer)

    def _interface_names(self, interface: str) -> list[str]:
        if "." in interface:
            return [interface]
        names = {full for m in self.all() for full in m.interfaces if short_name(full) == interface}
        return sorted(names) or [interface]

    def unget_service(self, proxy: ServiceProxy) -> bool:
        """Give ``proxy`` back. Raises :class:`UnknownServiceError` for a non-proxy."""
        if not isinstance(proxy, ServiceProxy):
            raise UnknownServiceError(
                f'"proxy" must be a proxy from get_service, got {type(proxy).__name__} '
                f"{proxy!r:.80}"
            )
        return self.registry.unget_service(proxy.service_id, proxy.consumer)

    def proxy_info(self, proxy: ServiceProxy, device_of: Callable[[int], str | None]) -> ProxyInfo:
        """What live ``proxy`` is (``device_of`` names a service's tenant device). Raises
        :class:`UnknownServiceError` for an object that is no live proxy of this table (a
        proxy given back, or of a stopped service, included)."""
        found = self.find(proxy.service_id) if isinstance(proxy, ServiceProxy) else None
        if found is None or found.proxies.get(proxy.consumer) is not proxy:
            raise UnknownServiceError(
                f'"proxy" must be a live proxy from get_service, got {proxy!r:.80}'
            )
        binding = binding_of(proxy)
        return ProxyInfo(
            service_id=proxy.service_id,
            interface=proxy.interface,
            consumer=proxy.consumer,
            methods=tuple((spec.name, spec.state_setting) for spec in binding.methods),
            state=binding.record,
            device=device_of(proxy.service_id),
        )

    # -- snapshots ---------------------------------------------------------------------------

    def services(self) -> tuple[ServiceSnapshot, ...]:
        """Snapshots of every managed service, by id."""
        return tuple(_service_snapshot(m) for m in self.all())

    def regions(self) -> tuple[RegionSnapshot, ...]:
        """Snapshots of the fabric's regions with the service and module each holds."""
        holders = {m.region: m for m in self.all() if m.region}
        out = []
        for region in self.fabric.regions():
            holder = holders.get(region.name)
            out.append(
                RegionSnapshot(
                    name=region.name,
                    state=region.state,
                    module=holder.module.name if holder and holder.module else None,
                    service_id=holder.service_id if holder else None,
                    design=region.design,
                    resources=region.resources,
                )
            )
        return tuple(out)

    def statistics(self, service_id: int, consumer: str | None = None) -> ServiceStatistics:
        """Measured call statistics of ``service_id`` (per tier, consumer and method); with
        ``consumer``, of that consumer's calls through the proxy it holds now (zero, and no
        ``per_consumer`` entry, when it holds none). The hardware figures (modeled time,
        fallbacks, verification) are the service's either way. Raises
        :class:`UnknownServiceError`."""
        m = self.managed(service_id)
        with m.lock:
            traces: dict[str, Traces] = dict(m.traces())
            hardware_calls = sum(
                a.calls for tiers in traces.values() for a in tiers.get(Tier.HARDWARE, {}).values()
            )
            proxies = list(m.proxies.values())
            window: RateWindow | None = m.rate
            if consumer is not None:
                held = m.proxies.get(consumer)
                proxies = [held] if held is not None else []
                traces = {consumer: traces[consumer]} if held is not None else {}
                window = m.consumer_rates.get(consumer)
            counters = dict(m.counters)
            inflight = sum(binding_of(p).inflight() for p in proxies)
        per_tier, per_consumer, per_method = _folded(traces)
        total = merge(a for accs in per_consumer.values() for a in accs)
        modeled_mean = None
        if hardware_calls and self.fabric.backend in ("sim", "rtl"):
            modeled_mean = (m.hw_modeled_ns + self.busy_since_entry(m)) / 1000.0 / hardware_calls
        ratio = ns_per_tick()
        return ServiceStatistics(
            service_id=service_id,
            interface=m.interface_name,
            tier=m.tier,
            total=total.snapshot(ratio),
            rate_per_s=window.rate(total.calls) if window is not None else 0.0,
            per_tier={t: merge(a).snapshot(ratio) for t, a in sorted(per_tier.items())},
            per_consumer={c: merge(a).snapshot(ratio) for c, a in sorted(per_consumer.items())},
            per_method={n: merge(a).snapshot(ratio) for n, a in sorted(per_method.items())},
            inflight=inflight,
            hardware_modeled_mean_us=modeled_mean,
            fallbacks=counters["fallbacks"],
            verified=counters["verified"],
            mismatches=counters["mismatches"],
            engine=m.hardware.engine_on(self.fabric) if m.hardware is not None else None,
        )

    # -- modeled bus time --------------------------------------------------------------------

    def enter_region(self, m: ManagedService, region: str) -> None:
        """``m`` now lives in ``region``; its modeled time there counts from here."""
        m.region = region
        m.hw_busy_base = self._window_busy_ns(region) or 0

    def bank_modeled_time(self, m: ManagedService) -> None:
        """``m`` is about to leave its region: keep the modeled time it spent there."""
        m.hw_modeled_ns += self.busy_since_entry(m)

    def busy_since_entry(self, m: ManagedService) -> int:
        """Modeled bus time ``m`` has used in its current region (0: none or not simulated)."""
        if m.region is None:
            return 0
        busy = self._window_busy_ns(m.region)
        return 0 if busy is None else busy - m.hw_busy_base

    def _window_busy_ns(self, region: str) -> int | None:
        """Modeled bus time of ``region``'s window so far (None: not a simulated window)."""
        try:
            window = self.fabric.window(region)
        except FabricError:
            return None
        busy = getattr(window, "busy_ns", None)  # a simulated window counts it
        return busy if isinstance(busy, int) else None

    def __repr__(self) -> str:
        services = self.all()
        in_hw = sum(1 for m in services if m.tier == Tier.HARDWARE)
        return f"<ServiceTable {len(services)} services, {in_hw} in hardware>"


def _service_snapshot(m: ManagedService) -> ServiceSnapshot:
    return ServiceSnapshot(
        service_id=m.service_id,
        interface=m.interface_name,
        interfaces=m.interfaces,
        properties=dict(m.properties),
        tier=m.tier,
        region=m.region,
        tiers=m.tiers(),
        module=m.module.name if m.module else None,
        consumers=tuple(sorted(m.proxies)),
    )


def _folded(
    traces: Mapping[str, Traces],
) -> tuple[
    dict[str, list[Accumulator]], dict[str, list[Accumulator]], dict[str, list[Accumulator]]
]:
    """Consumer → tier → method traces regrouped per tier (without ``"gone"``, the calls
    refused after a proxy was given back), per consumer and per method."""
    per_tier: dict[str, list[Accumulator]] = {}
    per_consumer: dict[str, list[Accumulator]] = {}
    per_method: dict[str, list[Accumulator]] = {}
    for consumer, tiers in traces.items():
        for tier, methods in tiers.items():
            for name, acc in methods.items():
                if tier != "gone":
                    per_tier.setdefault(tier, []).append(acc)
                per_consumer.setdefault(consumer, []).append(acc)
                per_method.setdefault(name, []).append(acc)
    return per_tier, per_consumer, per_method
