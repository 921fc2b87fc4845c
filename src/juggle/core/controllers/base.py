"""What a controller sees and what it may ask for: statistics snapshots in, juggles out.

A controller (policy) is deterministic and clock-free (ARCHITECTURE principle 1): it gets a
:class:`StatsSnapshot` stamped with a time and returns :class:`JuggleAction` values. The live
runtime builds snapshots from proxy tracing and executes actions with ``Framework.juggle``; the
virtual-time simulator builds them from its models and executes them in virtual time. The same
controller object runs in both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from juggle.core.tiers import Tier


@dataclass(frozen=True, slots=True)
class ServiceStats:
    """Statistics of one service (live: a registered service; simulated: a unit kind).

    ``calls`` is cumulative; ``rate_per_s`` is calls per second over the last window;
    ``share`` is this service's fraction of all calls in that window (0..1);
    ``queue_occupancy`` is the fill level of its input FIFO (0..1) where one exists.
    ``per_consumer`` maps consumer (application) name to its cumulative calls.
    ``gain_us`` is the time one call saves when served from the fabric rather than from
    elsewhere (measured live, modeled in simulation; None: unknown); ``overhead_us`` is the
    per-call interface overhead of the hardware tier (ThumbPod 2.5), 0 when unknown.
    ``queue_length`` is the number of calls waiting in that input FIFO (not clipped).
    """

    service_id: int
    interface: str
    tier: str
    region: str | None
    calls: int
    rate_per_s: float = 0.0
    share: float = 0.0
    mean_us: float = 0.0
    p50_us: float = 0.0
    p99_us: float = 0.0
    queue_occupancy: float | None = None
    hardware_capable: bool = True
    per_consumer: Mapping[str, int] = field(default_factory=dict)
    gain_us: float | None = None
    overhead_us: float = 0.0
    queue_length: int | None = None


@dataclass(frozen=True, slots=True)
class RegionStats:
    """One fabric region: who holds it and whether it can take work now.

    ``reconfig_us`` is the time to reprogram it (None: unknown).
    """

    name: str
    state: str
    service_id: int | None
    reconfig_us: float | None = None


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """Everything a controller reads, at one instant ``time_s`` (real or virtual seconds)."""

    time_s: float
    services: tuple[ServiceStats, ...]
    regions: tuple[RegionStats, ...] = ()
    foreground: str | None = None

    def service(self, service_id: int) -> ServiceStats | None:
        """The entry for ``service_id``, or None."""
        for entry in self.services:
            if entry.service_id == service_id:
                return entry
        return None

    def in_hardware(self) -> tuple[ServiceStats, ...]:
        """Services currently served from the fabric."""
        return tuple(s for s in self.services if s.tier == Tier.HARDWARE)


@dataclass(frozen=True, slots=True)
class JuggleAction:
    """Put ``to_hardware`` into the fabric (None: only evict) and ``to_software`` out of it."""

    to_hardware: int | None
    to_software: tuple[int, ...] = ()
    reason: str = ""


@runtime_checkable
class Controller(Protocol):
    """A policy: reads a snapshot, returns the juggles it wants (often none)."""

    name: str

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """Actions for this snapshot; must not read a clock or touch the runtime."""
        ...
