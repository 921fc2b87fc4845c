"""Prometheus metrics of one Framework, read from its snapshots at every scrape.

A :class:`FrameworkCollector` is a custom collector: it keeps no counters of its own, it turns
the framework's frozen snapshots (services, regions, statistics, juggle reports, tenants) into
metric families when Prometheus asks. Each dashboard app gets a private
:class:`~prometheus_client.CollectorRegistry` (:func:`metrics_registry`), never the global one,
so two frameworks in one process never mix their figures. Call counts and durations are
measured; reconfiguration time is modeled (simulated board clock); the help text says which.

The tenant series follow Prometheus' naming conventions: ``juggle_tenant_calls_total{tenant}``
(its calls to every service), ``juggle_tenant_waits_total{tenant,device}`` and
``juggle_tenant_preemptions_total{tenant,device}`` (the arbiter's counters),
``juggle_tenant_unread_signals{tenant}``, ``juggle_tenant_priority{tenant}``,
``juggle_tenant_device_state{tenant,device,juggle_tenant_device_state}`` (a state set) and
``juggle_region_holder_info{region,holder,tenant,device,service,module}``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    StateSetMetricFamily,
)

from juggle.core.tenants import DeviceState
from juggle.dashboard.tenants import region_holders, tenant_rows
from juggle.errors import UnknownServiceError
from juggle.fabric.region import RegionState
from juggle.runtime import Framework, ServiceSnapshot, ServiceStatistics

__all__ = ["FrameworkCollector", "metrics_registry"]

_SERVICE = ["service", "interface"]


class FrameworkCollector:
    """Metric families of ``framework``, built from fresh snapshots on each :meth:`collect`."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework

    def collect(self) -> Iterator[Metric]:
        """Yield every juggle metric family (service, region, juggle and tenant figures)."""
        yield from self._services()
        yield from self._regions()
        yield from self._juggles()
        yield from self._tenants()

    def _statistics(self) -> list[tuple[ServiceSnapshot, ServiceStatistics]]:
        out = []
        for snap in self.framework.services():
            with contextlib.suppress(UnknownServiceError):  # unregistered since the listing
                out.append((snap, self.framework.statistics(snap.service_id)))
        return out

    def _services(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(
            "juggle_service_calls",
            "Calls served by a service, per tier (measured).",
            labels=[*_SERVICE, "tier"],
        )
        errors = CounterMetricFamily(
            "juggle_service_call_errors",
            "Calls that raised, per service (measured).",
            labels=_SERVICE,
        )
        p99 = GaugeMetricFamily(
            "juggle_service_call_duration_p99_seconds",
            "99th percentile of call durations of a service, all tiers (measured).",
            labels=_SERVICE,
        )
        inflight = GaugeMetricFamily(
            "juggle_service_inflight", "Calls running now on a service.", labels=_SERVICE
        )
        info = InfoMetricFamily("juggle_service", "Where a service runs now.", labels=_SERVICE)
        for snap, st in self._statistics():
            key = [str(snap.service_id), snap.interface]
            for tier in sorted({*snap.tiers, *st.per_tier}):
                stats = st.per_tier.get(tier)
                calls.add_metric([*key, tier], float(stats.calls if stats else 0))
            errors.add_metric(key, float(st.total.errors))
            p99.add_metric(key, st.total.p99_us / 1e6)
            inflight.add_metric(key, float(st.inflight))
            info.add_metric(
                key,
                {"tier": snap.tier, "region": snap.region or "", "module": snap.module or ""},
            )
        yield from (calls, errors, p99, inflight, info)

    def _regions(self) -> Iterator[Metric]:
        info = InfoMetricFamily("juggle_region", "What a fabric region holds.", labels=["region"])
        state = StateSetMetricFamily(
            "juggle_region_state", "The physical state of a fabric region.", labels=["region"]
        )
        names = [s.name for s in RegionState]
        for region in self.framework.regions():
            info.add_metric(
                [region.name],
                {
                    "design": region.design or "",
                    "module": region.module or "",
                    "service": "" if region.service_id is None else str(region.service_id),
                },
            )
            states = names if region.state in names else [*names, region.state]
            state.add_metric([region.name], {s: s == region.state for s in states})
        holder = InfoMetricFamily(
            "juggle_region_holder",
            "Who holds a fabric region: a juggle-placed service or a tenant's device.",
            labels=["region"],
        )
        for h in region_holders(self.framework):
            holder.add_metric(
                [h["name"]],
                {
                    "holder": h["holder"] or "",
                    "tenant": h["tenant"] or "",
                    "device": h["device"] or "",
                    "service": "" if h["service_id"] is None else str(h["service_id"]),
                    "module": h["module"] or "",
                },
            )
        yield from (info, state, holder)

    def _juggles(self) -> Iterator[Metric]:
        fw = self.framework
        yield CounterMetricFamily(
            "juggle_juggles", "Juggles carried out by the runtime.", value=float(fw.juggle_count)
        )
        yield CounterMetricFamily(
            "juggle_reconfiguration_seconds",
            "Time spent reconfiguring regions by juggles (modeled: simulated board clock).",
            value=fw.reconfiguration_ms_total / 1e3,
        )

    def _tenants(self) -> Iterator[Metric]:
        calls = CounterMetricFamily(
            "juggle_tenant_calls",
            "Calls a tenant made to every service (measured).",
            labels=["tenant"],
        )
        waits = CounterMetricFamily(
            "juggle_tenant_waits",
            "Times a tenant's virtual device was told to wait for a region (measured).",
            labels=["tenant", "device"],
        )
        preemptions = CounterMetricFamily(
            "juggle_tenant_preemptions",
            "Times a tenant's virtual device was preempted (measured).",
            labels=["tenant", "device"],
        )
        unread = GaugeMetricFamily(
            "juggle_tenant_unread_signals",
            "Signals told to a tenant it has not read yet.",
            labels=["tenant"],
        )
        priority = GaugeMetricFamily(
            "juggle_tenant_priority",
            "A tenant's priority (input: the tenant policy; real-time tenants have the top one).",
            labels=["tenant"],
        )
        state = StateSetMetricFamily(
            "juggle_tenant_device_state",
            "Where a tenant's virtual device stands with the allocator.",
            labels=["tenant", "device"],
        )
        names = [s.value for s in DeviceState]
        for row in tenant_rows(self.framework):
            tenant = row["name"]
            calls.add_metric([tenant], float(row["calls"]))
            unread.add_metric([tenant], float(row["unread_signals"]))
            priority.add_metric([tenant], float(row["priority"]))
            for d in row["devices"]:
                key = [tenant, d["device"]]
                waits.add_metric(key, float(d["waits"]))
                preemptions.add_metric(key, float(d["preemptions"]))
                states = names if d["state"] in names else [*names, d["state"]]
                state.add_metric(key, {s: s == d["state"] for s in states})
        yield from (calls, waits, preemptions, unread, priority, state)


def metrics_registry(framework: Framework) -> CollectorRegistry:
    """A fresh registry (not the process-global one) holding a collector of ``framework``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FrameworkCollector(framework))
    return registry
