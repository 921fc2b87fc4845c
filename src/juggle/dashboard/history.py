"""What the dashboard's server remembers: the last minutes of chart samples and tenant signals.

A :class:`LiveHistory` samples a framework every ``period_s`` seconds in a thread of its own
(:meth:`LiveHistory.start`) and keeps the samples of the last ``span_s`` seconds in a bounded
ring buffer, so a page opened late draws the charts from before it was opened
(``GET /api/history``). It also listens to every tenant's signal channel (without reading it:
the tenant still gets its signals) and keeps the last :data:`EVENT_BACKLOG` WAIT / READY /
PREEMPT signals with the wall-clock time each was told, and the time each juggle was first
seen by a sample. Its clocks are injectable: a test fills the buffer through :meth:`sample`
with a clock of its own, no sleeping.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from juggle.errors import ConfigurationError, JuggleError, UnknownTenantError
from juggle.runtime import Framework, TenantSignal

__all__ = [
    "EVENT_BACKLOG",
    "HISTORY_PERIOD_S",
    "HISTORY_SPAN_S",
    "JUGGLE_BACKLOG",
    "LiveHistory",
]

#: Seconds between samples: the page's refresh period.
HISTORY_PERIOD_S = 1.0
#: Seconds of samples kept (ten minutes).
HISTORY_SPAN_S = 600.0
#: Tenant signals kept (older ones are dropped).
EVENT_BACKLOG = 500
#: Juggles whose first-seen time is kept.
JUGGLE_BACKLOG = 1000


def _positive(name: str, value: object) -> float:
    """``value`` as a float; raises :class:`ConfigurationError` unless a finite number > 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not value > 0
        or not math.isfinite(value)
    ):
        shown = value if isinstance(value, str | int | float) else repr(value)[:80]
        raise ConfigurationError(
            f'"{name}" must be a finite number > 0, got {value!r:.80}', value=shown
        )
    return float(value)


class LiveHistory:
    """Samples of ``framework`` of the last ``span_s`` seconds (each ``sampler(framework,
    time_s)``, a JSON object whose ``time_s`` is ``clock()`` then, as
    :func:`~juggle.dashboard.app.live_sample` makes), and its tenants' recent signals.

    ``clock`` gives the samples' time in seconds (default: the monotonic clock), ``wall_clock``
    the wall-clock time of a signal or juggle (default: :func:`time.time`). At most
    ``ceil(span_s / period_s) + 1`` samples are kept, and none older than ``span_s`` before the
    newest. Raises :class:`~juggle.errors.ConfigurationError` naming a ``period_s`` or
    ``span_s`` that is not a finite number > 0, or a span shorter than the period.
    """

    def __init__(
        self,
        framework: Framework,
        sampler: Callable[[Framework, float], dict[str, Any]],
        *,
        period_s: float = HISTORY_PERIOD_S,
        span_s: float = HISTORY_SPAN_S,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        period = _positive("period_s", period_s)
        span = _positive("span_s", span_s)
        if span < period:
            raise ConfigurationError(
                f'"span_s" ({span_s!r}) must be at least "period_s" ({period_s!r})', value=span_s
            )
        self.framework = framework
        self.period_s = period
        self.span_s = span
        self._sampler = sampler
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._samples: deque[dict[str, Any]] = deque(maxlen=math.ceil(span / period) + 1)
        self._events: deque[dict[str, Any]] = deque(maxlen=EVENT_BACKLOG)
        self._juggles_seen: deque[tuple[int, float]] = deque(maxlen=JUGGLE_BACKLOG)
        self._juggle_count: int | None = None
        self._listen_lock = threading.Lock()
        self._listening: dict[str, Callable[[], None]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.listen()

    # -- tenants' signals ------------------------------------------------------------------

    def listen(self) -> None:
        """Listen to the signal channel of every tenant registered now and not listened to
        yet (each :meth:`sample` does it too, so later tenants are heard from then on)."""
        try:
            names = [t.name for t in self.framework.tenants()]
        except JuggleError:  # a closed framework has no tenants to hear
            return
        with self._listen_lock:  # one listener per tenant, whoever samples at the same time
            for name in names:
                if name in self._listening:
                    continue
                with contextlib.suppress(UnknownTenantError):
                    self._listening[name] = self.framework.signals(name).listen(self._heard)

    def _heard(self, signal: TenantSignal) -> None:
        event = {
            "seq": signal.seq,
            "kind": str(signal.kind),
            "tenant": signal.tenant,
            "device": signal.device,
            "service_id": signal.service_id,
            "at_us": signal.at_us,
            "time": self._wall(),
        }
        with self._lock:
            self._events.append(event)

    def events(self, limit: int = EVENT_BACKLOG) -> list[dict[str, Any]]:
        """The last ``limit`` tenant signals heard, oldest first: ``seq``, ``kind``,
        ``tenant``, ``device``, ``service_id``, ``at_us`` (the arbiter's monotonic clock) and
        ``time`` (the wall clock when it was told)."""
        with self._lock:
            kept = list(self._events)
        return kept[-limit:] if limit > 0 else []

    def juggle_times(self) -> dict[int, float]:
        """The wall-clock time of the first sample that saw each recent juggle, by its number
        (1 for the framework's first juggle): within one period after it was made."""
        with self._lock:
            return dict(self._juggles_seen)

    # -- samples -----------------------------------------------------------------------------

    def sample(self) -> dict[str, Any] | None:
        """Take one sample now and keep it; returns it, or None when ``clock`` did not move
        past the newest sample (nothing is kept then). Raises what the sampler raises (a
        :class:`~juggle.errors.JuggleError` for a closed framework)."""
        self.listen()
        now = self._clock()
        taken = self._sampler(self.framework, now)
        count = taken.get("juggles")
        with self._lock:
            if self._samples and not now > self._samples[-1]["time_s"]:
                return None
            self._samples.append(taken)
            while now - self._samples[0]["time_s"] > self.span_s:
                self._samples.popleft()
            if isinstance(count, int):
                seen_from = count if self._juggle_count is None else self._juggle_count
                wall = self._wall()
                self._juggles_seen.extend((n, wall) for n in range(seen_from + 1, count + 1))
                self._juggle_count = count
        return taken

    def samples(self, after: float | None = None) -> list[dict[str, Any]]:
        """The samples kept, oldest first; with ``after``, only those taken later."""
        with self._lock:
            kept = list(self._samples)
        if after is None:
            return kept
        return [s for s in kept if s["time_s"] > after]

    def __len__(self) -> int:
        with self._lock:
            return len(self._samples)

    # -- the sampling thread -----------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the sampling thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Sample every ``period_s`` seconds in a thread, the first sample at once; nothing
        when already sampling. The thread ends on :meth:`stop` or once the framework is
        closed."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="dashboard-history", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self.sample()
            except JuggleError:  # the framework closed under us
                return
            if self._stop.wait(self.period_s):
                return

    def stop(self) -> None:
        """Stop sampling, wait for the thread and stop listening to the tenants' signals
        (the samples and events kept stay readable)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join()
            self._thread = None
        with self._listen_lock:
            undos = list(self._listening.values())
            self._listening.clear()
        for undo in undos:
            undo()
