"""The runtime's frozen snapshots: what readers (CLI, dashboard, daemon, controllers) get.

Every value here is a frozen copy taken at one moment; nothing in it changes afterwards and
nothing in it reaches back into live state (trio's ``statistics()`` habit). The
:class:`~juggle.runtime.framework.Framework` hands them out: :class:`ServiceSnapshot` and
:class:`RegionSnapshot` (``services()``, ``regions()``), :class:`ServiceStatistics`
(``statistics()``), :class:`JuggleReport` (``juggle()``, ``history()``) and
:class:`ProxyInfo` (``proxy_info()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from juggle.core.tiers import Tier
from juggle.fabric.region import RegionState
from juggle.fabric.resources import Resources
from juggle.runtime.tracing import CallStats

__all__ = [
    "JuggleReport",
    "ProxyInfo",
    "RegionSnapshot",
    "ServiceSnapshot",
    "ServiceStatistics",
    "Tier",
]


@dataclass(frozen=True, slots=True)
class ServiceSnapshot:
    """Frozen view of one managed service."""

    service_id: int
    interface: str
    interfaces: tuple[str, ...]
    properties: Mapping[str, Any]
    tier: Tier
    region: str | None
    tiers: tuple[Tier, ...]
    module: str | None
    consumers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RegionSnapshot:
    """Frozen view of one fabric region as the runtime sees it."""

    name: str
    state: RegionState
    module: str | None
    service_id: int | None
    design: str | None
    resources: Resources


@dataclass(frozen=True, slots=True)
class ServiceStatistics:
    """Measured call statistics of a service: overall, per tier, per consumer, per method."""

    service_id: int
    interface: str
    tier: Tier
    total: CallStats
    rate_per_s: float
    per_tier: Mapping[str, CallStats]
    per_consumer: Mapping[str, CallStats]
    per_method: Mapping[str, CallStats]
    inflight: int
    hardware_modeled_mean_us: float | None = None
    """On a simulated fabric: the modeled bus time per hardware call (None elsewhere)."""
    fallbacks: int = 0
    """Hardware calls that failed (hung, raised, or mismatched) and were served by software."""
    verified: int = 0
    """Hardware calls also run on the software tier and compared (``verify_sample``)."""
    mismatches: int = 0
    """Verified calls whose hardware result differed (the consumer got the software one)."""
    engine: str | None = None
    """What runs the service's hardware calls: ``"rtl"`` (its Verilog in a simulator),
    ``"model"`` (its Python register model) or ``"fpga"`` (a device); None without a hardware
    tier."""


@dataclass(frozen=True, slots=True)
class JuggleReport:
    """What one juggle did. ``*_ms`` figures are modeled (fabric clock); ``overhead_us`` is
    measured: the wall clock of this machine spent in the runtime's own work, that is the
    juggle's time less the waits for running calls to drain and less the configuration port's
    transfer of the bitstream (on the simulated fabric, the work of modeling it)."""

    to_hardware: int | None
    to_software: tuple[int, ...]
    region: str | None
    steps: tuple[str, ...]
    reconfiguration_ms: float
    bridge_ms: float
    overhead_us: float
    tiers: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ProxyInfo:
    """What a proxy is, for a client that forwards calls to it (the daemon).

    ``methods`` lists the interface's methods in interface order with whether each sets state
    (:func:`~juggle.runtime.interfaces.state_setting`). ``state`` is an opaque identity: the
    record the proxy's state is kept in, the same object for every proxy that shares that
    state (all proxies of a shared service) and a different one otherwise; compare it with
    ``is``, never look inside. ``device`` is the tenant arbiter's name of the service's device
    when tenants share the service (None: the service is placed by juggles).
    """

    service_id: int
    interface: str
    consumer: str
    methods: tuple[tuple[str, bool], ...]
    state: object
    device: str | None
