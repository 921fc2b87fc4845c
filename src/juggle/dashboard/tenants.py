"""The tenants as the dashboard shows them: one row per tenant and the holder of each region.

Both are read through the framework's public API (:meth:`Framework.tenants
<juggle.runtime.Framework.tenants>`, :meth:`~juggle.runtime.Framework.regions`,
:meth:`~juggle.runtime.Framework.statistics`) on every call; nothing is kept here. A tenant's
``calls`` are the calls its proxies made to every service (the per-consumer statistics,
measured); its ``waits`` and ``preemptions`` are its virtual devices' counters (the arbiter's).
A region's holder is the service placed there by a juggle, else the tenant whose device is
connected to it, else nobody; the ``label`` always says which, so no region is drawn unnamed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from juggle.errors import UnknownServiceError
from juggle.runtime import Framework, RegionSnapshot, TenantSnapshot

__all__ = ["TENANT_KINDS", "region_holders", "tenant_calls", "tenant_rows"]

#: The kind of each figure of a tenant row (ARCHITECTURE principle 5).
TENANT_KINDS = {
    "calls": "measured",
    "waits": "measured",
    "preemptions": "measured",
    "unread_signals": "measured",
    "priority": "input",
}

#: The device states in which a tenant's device occupies its region.
_HOLDING = frozenset({"connected"})


def tenant_calls(framework: Framework, names: Iterable[str]) -> dict[str, int]:
    """Calls made so far by each of ``names`` as a consumer, summed over every service
    (measured: the framework's per-consumer statistics); 0 for a name that made none."""
    wanted = list(names)
    out = dict.fromkeys(wanted, 0)
    for snap in framework.services():
        with contextlib.suppress(UnknownServiceError):  # unregistered since the listing
            per_consumer = framework.statistics(snap.service_id).per_consumer
            for name in wanted:
                stats = per_consumer.get(name)
                if stats is not None:
                    out[name] += stats.calls
    return out


def tenant_rows(
    framework: Framework, tenants: tuple[TenantSnapshot, ...] | None = None
) -> list[dict[str, Any]]:
    """One JSON row per tenant, in registration order: name, priority, real-time, programming
    model, calls (all services), waits, preemptions, unread signals, the regions its devices
    hold and each virtual device (state, region, calls, waits, preemptions, context bytes).

    ``tenants`` are snapshots already read (None: read them now).
    """
    snaps = framework.tenants() if tenants is None else tenants
    calls = tenant_calls(framework, [t.name for t in snaps])
    rows = []
    for t in snaps:
        devices = [
            {
                "device": d.device,
                "service_id": d.service_id,
                "state": d.state,
                "region": d.region,
                "running": d.running,
                "calls": d.calls,
                "waits": d.waits,
                "preemptions": d.preemptions,
                "context_bytes": d.context_bytes,
            }
            for d in t.devices
        ]
        rows.append(
            {
                "name": t.name,
                "priority": t.priority,
                "realtime": t.realtime,
                "model": t.model,
                "calls": calls[t.name],
                "waits": sum(d.waits for d in t.devices),
                "preemptions": sum(d.preemptions for d in t.devices),
                "unread_signals": t.unread_signals,
                "holds": sorted(
                    d.region for d in t.devices if d.region is not None and d.state in _HOLDING
                ),
                "devices": devices,
            }
        )
    return rows


def region_holders(
    framework: Framework,
    regions: tuple[RegionSnapshot, ...] | None = None,
    tenants: tuple[TenantSnapshot, ...] | None = None,
) -> list[dict[str, Any]]:
    """Each region with its holder: ``name``, ``state``, ``design``, ``service_id`` and
    ``module`` (a juggle-placed service), ``tenant`` and ``device`` (a tenant's device
    connected there), ``holder`` (``"service"``, ``"tenant"`` or None) and ``label``, a
    short text naming the holder or, for nobody, the region's state and design.

    ``regions`` and ``tenants`` are snapshots already read (None: read them now).
    """
    regs = framework.regions() if regions is None else regions
    snaps = framework.tenants() if tenants is None else tenants
    by_region: dict[str, tuple[str, str, bool]] = {}
    for t in snaps:
        for d in t.devices:
            if d.region is None or d.state not in _HOLDING:
                continue
            seen = by_region.get(d.region)
            if seen is None or (d.running and not seen[2]):  # a running call wins
                by_region[d.region] = (t.name, d.device, d.running)
    out = []
    for r in regs:
        state = str(getattr(r.state, "value", r.state))
        tenant, device = by_region.get(r.name, (None, None, False))[:2]
        if r.service_id is not None:
            holder: str | None = "service"
            label = f"service {r.service_id} ({r.module or '?'})"
            tenant = device = None
        elif tenant is not None:
            holder = "tenant"
            label = f"{tenant}: {device}"
        else:
            holder = None
            label = state.lower() + (f" ({r.design})" if r.design else "")
        out.append(
            {
                "name": r.name,
                "state": state,
                "design": r.design,
                "service_id": r.service_id,
                "module": r.module,
                "tenant": tenant,
                "device": device,
                "holder": holder,
                "label": label,
            }
        )
    return out
