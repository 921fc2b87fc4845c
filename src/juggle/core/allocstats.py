"""Frozen snapshots of the allocator: what dashboards, reports and tests read.

Readers never touch the allocator's live records; :meth:`Allocator.statistics` copies what
they may see into these values (state names as strings, times as given by the shell).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AllocatorRegion", "AllocatorStats", "DeviceStats", "TenantStats", "WaitingRequest"]


@dataclass(frozen=True, slots=True)
class AllocatorRegion:
    """One region as the allocator sees it: its Fig 7 phase, the design loaded (None: blank
    or being loaded), the connected client and the client a pending solution is for, as
    ``tenant/device``."""

    name: str
    slices: int
    state: str
    design: str | None
    client: str | None
    client_priority: int | None
    incoming: str | None
    hold_until: float | None
    entered: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class DeviceStats:
    """One virtual device of a tenant: its state and the region it is connected to."""

    device: str
    state: str
    region: str | None
    context_bytes: int


@dataclass(frozen=True, slots=True)
class TenantStats:
    """One tenant: priority, class, programming model and its virtual devices."""

    name: str
    priority: int
    realtime: bool
    model: str
    devices: tuple[DeviceStats, ...]


@dataclass(frozen=True, slots=True)
class WaitingRequest:
    """A request on the wait list; ``seq`` is its FIFO number within its priority."""

    tenant: str
    device: str
    priority: int
    seq: int
    since: float


@dataclass(frozen=True, slots=True)
class AllocatorStats:
    """The whole allocator at time ``now``.

    ``paths`` counts solutions by the paper's Fig 15 path (index 1..4; index 0 counts
    Unavailable answers). ``waiting`` is in service order: priority, then FIFO.
    """

    now: float
    regions: tuple[AllocatorRegion, ...]
    tenants: tuple[TenantStats, ...]
    waiting: tuple[WaitingRequest, ...]
    requests: int
    paths: tuple[int, int, int, int, int]
    preemptions: int
    reconfigurations: int
    reconfig_failures: int
    hold_expiries: int
    withdrawn: int

    @property
    def unavailable(self) -> int:
        """How many requests were answered Unavailable (put on the wait list)."""
        return self.paths[0]
