"""What each tenant holds in the daemon, counted against the policy's limits, and its call rate.

Connections, shared-memory segments (the descriptors both keep) and reply bytes queued for
clients that do not read are counted per tenant and in all (:class:`Accounts`) against the
policy's ``[limits]`` (:class:`~juggle.daemon.policy.Limits`, defaults from
``RLIMIT_NOFILE``): a connection or segment past one is refused with
:class:`LimitExceededError` naming the limit and its value, before anything is made; a
tenant's ``calls_per_s`` is a token bucket (:class:`Bucket`).
"""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from juggle.daemon.policy import Identity, Limits, TenantLimits
from juggle.errors import LimitExceededError, QuotaExceededError

__all__ = ["Accounts", "Bucket", "Usage", "nofile"]


def nofile() -> int:
    """The daemon's ``RLIMIT_NOFILE`` (soft; "unlimited" counts as 2**20)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else int(soft)


@dataclass(slots=True)
class Usage:
    """What one tenant (or all together) holds: connections, shared-memory segments, and
    reply bytes queued for clients that do not read. Descriptors: connections + segments."""

    connections: int = 0
    segments: int = 0
    queued: int = 0

    @property
    def descriptors(self) -> int:
        return self.connections + self.segments


class Bucket:
    """A token bucket: ``rate`` calls per second, bursts of up to one second's worth."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = self.capacity
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Accounts:
    """The daemon's books: what every tenant holds against ``limits`` (replaced on a policy
    reload), and each tenant's call-rate bucket."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._usage: dict[str, Usage] = {}
        self._total = Usage()
        self._bucket_lock = threading.Lock()
        self._buckets: dict[str, Bucket] = {}

    def take(self, ident: Identity, mine: TenantLimits, *, connection: bool) -> None:
        """Count one more connection (``connection``) or segment of ``ident``'s tenant, whose
        own limits are ``mine``. Raises :class:`LimitExceededError` naming the limit (nothing
        is counted then)."""
        limits = self.limits
        name = ident.name
        with self._lock:
            use = self._usage.get(name)
            if use is None:
                use = self._usage[name] = Usage()
            total = self._total
            checks: tuple[tuple[str, int, int, str], ...]
            if connection:
                checks = (
                    ("tenant_max_connections", use.connections, mine.connections, "tenant"),
                    ("max_connections", total.connections, limits.connections, "daemon"),
                )
            else:
                checks = (
                    ("tenant_max_segments", use.segments, mine.segments, "tenant"),
                    ("max_segments", total.segments, limits.segments, "daemon"),
                )
            checks += (
                ("tenant_max_descriptors", use.descriptors, mine.descriptors, "tenant"),
                ("max_descriptors", total.descriptors, limits.descriptors, "daemon"),
            )
            for limit, held, bound, whose in checks:
                if held + 1 > bound:
                    owner = f"tenant {name!r}" if whose == "tenant" else "the daemon (all tenants)"
                    what = "connections" if connection else "shared-memory segments"
                    raise LimitExceededError(
                        f"{owner} holds {held} {limit.rsplit('_', 1)[-1]}; its limit "
                        f"{limit} is {bound}: no more {what}",
                        limit=limit,
                        value=bound,
                    )
            if connection:
                use.connections += 1
                total.connections += 1
            else:
                use.segments += 1
                total.segments += 1

    def give(self, name: str, *, connections: int = 0, segments: int = 0) -> None:
        """Count connections / segments of tenant ``name`` given back."""
        with self._lock:
            use = self._usage.get(name)
            if use is not None:
                use.connections -= connections
                use.segments -= segments
                if not use.connections and not use.segments and not use.queued:
                    del self._usage[name]
            self._total.connections -= connections
            self._total.segments -= segments

    def queue_account(self, name: str, mine: TenantLimits) -> Callable[[int], str | None]:
        """The function a connection of tenant ``name`` tells its queued bytes' changes to:
        it names the limit an increase went past (None: within them)."""

        def account(delta: int) -> str | None:
            with self._lock:
                use = self._usage.get(name)
                if use is None:
                    use = self._usage[name] = Usage()
                use.queued += delta
                self._total.queued += delta
                if delta <= 0:
                    return None
                if use.queued > mine.queued_bytes:
                    return "tenant_max_queued_bytes"
                if self._total.queued > self.limits.queued_bytes:
                    return "max_queued_bytes"
                return None

        return account

    def check_rate(self, ident: Identity) -> None:
        """Take one call from ``ident``'s bucket. Raises :class:`QuotaExceededError` when
        its tenant is over its ``calls_per_s``."""
        if ident.calls_per_s is None:
            return
        with self._bucket_lock:
            bucket = self._buckets.get(ident.name)
            if bucket is None or bucket.rate != ident.calls_per_s:
                bucket = self._buckets[ident.name] = Bucket(ident.calls_per_s)
            taken = bucket.take()
        if not taken:
            raise QuotaExceededError(
                f"tenant {ident.name!r} is over its quota of {ident.calls_per_s:g} calls/s",
                tenant=ident.name,
            )
