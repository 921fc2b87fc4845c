"""Call tracing: counters and duration histograms of proxies, folded into frozen snapshots.

Every proxy call is counted (calls, errors, in flight) by the compiled dispatch path. Durations
go into a log-linear histogram (8 buckets per octave, ≤ 12.5 % bucket width): the first 1024
calls of each method are all timed, then one call in ``sample_period`` is, which keeps the cost
of tracing a hot service to a few nanoseconds while mean, p50 and p99 stay unbiased. All
figures here are measured (wall clock of this machine).
"""

from __future__ import annotations

import operator
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

try:
    from juggle.runtime import _dispatch as dispatch
except ImportError:  # pragma: no cover - exercised only where the C extension is missing
    from juggle.runtime import _pydispatch as dispatch  # type: ignore[no-redef]

NBUCKETS: int = dispatch.NBUCKETS
_LINEAR: int = dispatch.LINEAR
_SUB_BITS: int = dispatch.SUB_BITS
_SUBS = 1 << _SUB_BITS

COMPILED = dispatch.__name__.endswith("._dispatch")

__all__ = [
    "COMPILED",
    "NBUCKETS",
    "Accumulator",
    "CallStats",
    "RateWindow",
    "bucket_range",
    "dispatch",
    "merge",
    "ns_per_tick",
]


def bucket_range(bucket: int) -> tuple[int, int]:
    """Half-open tick range ``[low, high)`` covered by histogram ``bucket``."""
    if bucket < _LINEAR:
        return bucket, bucket + 1
    e = (bucket - _LINEAR) // _SUBS + 4
    sub = (bucket - _LINEAR) % _SUBS
    width = 1 << (e - _SUB_BITS)
    low = (1 << e) + sub * width
    return low, low + width


class Accumulator:
    """Running totals of one (method) across slots: what a retired slot leaves behind."""

    __slots__ = ("calls", "errors", "hist", "max_ticks", "timed", "total_ticks")

    def __init__(self) -> None:
        self.calls = 0
        self.timed = 0
        self.errors = 0
        self.total_ticks = 0
        self.max_ticks = 0
        self.hist = [0] * NBUCKETS

    def add_row(self, row: tuple[str, int, int, int, int, int, bytes]) -> None:
        """Fold one ``Slot.stats()`` row in."""
        _, calls, timed, errors, total, max_ticks, hist = row
        self.calls += calls
        self.timed += timed
        self.errors += errors
        self.total_ticks += total
        self.max_ticks = max(self.max_ticks, max_ticks)
        if timed:  # an untimed slot's histogram is all zeros
            self.hist = list(map(operator.add, self.hist, memoryview(hist).cast("Q")))

    def add(self, other: Accumulator) -> None:
        """Fold another accumulator in."""
        self.calls += other.calls
        self.timed += other.timed
        self.errors += other.errors
        self.total_ticks += other.total_ticks
        self.max_ticks = max(self.max_ticks, other.max_ticks)
        if other.timed:
            self.hist = list(map(operator.add, self.hist, other.hist))

    def percentile_ticks(self, q: float) -> float:
        """The ``q`` quantile (0..1) of timed durations, in ticks (bucket midpoint)."""
        if self.timed == 0:
            return 0.0
        rank = q * self.timed
        seen = 0
        for i, c in enumerate(self.hist):
            seen += c
            if c and seen >= rank:
                low, high = bucket_range(i)
                return (low + high - 1) / 2.0
        return float(self.max_ticks)

    def snapshot(self, ns_per_tick: float) -> CallStats:
        """Frozen figures in microseconds."""
        us = ns_per_tick / 1000.0
        mean = self.total_ticks / self.timed * us if self.timed else 0.0
        return CallStats(
            calls=self.calls,
            errors=self.errors,
            timed=self.timed,
            mean_us=mean,
            p50_us=self.percentile_ticks(0.50) * us,
            p99_us=self.percentile_ticks(0.99) * us,
            max_us=self.max_ticks * us,
        )


@dataclass(frozen=True, slots=True)
class CallStats:
    """Measured call figures: counts, and durations in µs (wall clock of this machine)."""

    calls: int
    errors: int
    timed: int
    mean_us: float
    p50_us: float
    p99_us: float
    max_us: float


def merge(parts: Iterable[Accumulator]) -> Accumulator:
    """One accumulator holding the sum of ``parts``."""
    total = Accumulator()
    for part in parts:
        total.add(part)
    return total


def ns_per_tick() -> float:
    """ns per duration tick of the tracer (the TSC where available), refined on each call."""
    return dispatch.tick_ratio()


class RateWindow:
    """Calls per second of one counter, over at least the last ``window_s`` seconds.

    Like a car's trip computer: each reading is kept with its time, and the rate is the calls
    since the newest reading at least a window old (since ``started``, with no calls, while
    the counter is younger than a window). Measured: wall clock of this machine.
    """

    __slots__ = ("_lock", "_samples", "started")

    def __init__(self, started: float | None = None) -> None:
        self.started = time.monotonic() if started is None else started
        self._samples: deque[tuple[float, int]] = deque(maxlen=64)
        self._lock = threading.Lock()

    def rate(self, calls: int, window_s: float = 1.0, now: float | None = None) -> float:
        """Take the reading ``calls`` (the counter's total now) and return the rate."""
        now = time.monotonic() if now is None else now
        with self._lock:
            base_t, base_calls = self.started, 0
            for t, c in self._samples:
                if now - t >= window_s:
                    base_t, base_calls = t, c  # the newest reading at least a window old
            self._samples.append((now, calls))
        span = now - base_t
        return (calls - base_calls) / span if span > 0 else 0.0

    def __repr__(self) -> str:
        return f"<RateWindow {len(self._samples)} readings since {self.started:.3f}>"
