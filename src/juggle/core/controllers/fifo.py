"""``fifo``: follow queue occupancy (the edge-router paper's second RMU, 3.2).

A service whose input queue (FIFO_DES, FIFO_LZC) is filled to ``threshold`` is juggled into
the fabric (the paper: the configuration stays "until the occupancy of one of the FIFOs
reaches a certain threshold"). A queue fills only after its unit has been short of
capacity for a while, so the policy reacts late but lets pass bursts too short to fill a
queue. The paper leaves open how the processors come back; here the ``fallback`` service (the
router's processors, fed by FIFO_IN) is juggled in when every watched queue is below ``low``
while the fallback's own queue has grown by at least ``rise`` of the call rate over the last
``fallback_s`` (the processors take in less than arrives, and have for a while: the input
FIFO plays the part of the processors' own queue filling up).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from juggle.core.controllers._common import (
    check_fraction,
    check_positive,
    find_service,
    juggle_to,
    reconfiguring,
)
from juggle.core.controllers.base import JuggleAction, ServiceStats, StatsSnapshot
from juggle.errors import ControllerError

__all__ = ["FifoController"]


@dataclass(frozen=True, slots=True)
class _Reading:
    time_s: float
    occupancy: dict[int, float]
    length: dict[int, int]


class FifoController:
    """Juggle in the service whose queue crosses ``threshold`` while filling.

    ``watch`` names the services (ids or interfaces) whose queues trigger juggles (default:
    every service that reports a queue, except ``fallback``).

    Raises :class:`~juggle.errors.ControllerError` for thresholds outside (0, 1], ``low`` not
    below ``threshold``, or a non-positive ``fallback_s``.
    """

    name: str = "fifo"

    def __init__(
        self,
        threshold: float = 0.5,
        low: float = 0.1,
        rise: float = 0.25,
        fallback_s: float = 5e-3,
        watch: Sequence[int | str] | None = None,
        fallback: int | str | None = None,
    ) -> None:
        self.threshold = check_fraction("threshold", threshold)
        self.low = check_fraction("low", low, inclusive_zero=True)
        if self.low >= self.threshold:
            raise ControllerError(
                f'"low" ({low!r}) must be below "threshold" ({threshold!r})', value=low
            )
        self.rise = check_fraction("rise", rise)
        self.fallback_s = check_positive("fallback_s", fallback_s)
        self.watch = None if watch is None else tuple(watch)
        self.fallback = fallback
        self._history: deque[_Reading] = deque()

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """One juggle when a watched queue (or the fallback's) crosses the threshold."""
        self._remember(snapshot)
        if reconfiguring(snapshot):
            return []
        fallback = None if self.fallback is None else find_service(snapshot, self.fallback)
        watched = self._watched(snapshot, fallback)
        filling = [s for s in watched if (s.queue_occupancy or 0.0) >= self.threshold]
        if filling:
            top = max(filling, key=lambda s: (s.queue_occupancy or 0.0, -s.service_id))
            return juggle_to(snapshot, top.service_id, f"fifo: queue of {top.interface} full")
        quiet = all((s.queue_occupancy or 0.0) < self.low for s in watched)
        long_ago = self._before(snapshot.time_s - self.fallback_s)
        if fallback is not None and quiet and self._growing(snapshot, fallback, long_ago):
            return juggle_to(
                snapshot, fallback.service_id, f"fifo: queue of {fallback.interface} growing"
            )
        return []

    def _watched(
        self, snapshot: StatsSnapshot, fallback: ServiceStats | None
    ) -> list[ServiceStats]:
        out = []
        for s in snapshot.services:
            if s.queue_occupancy is None or not s.hardware_capable:
                continue
            if fallback is not None and s.service_id == fallback.service_id:
                continue
            if self.watch is None or s.service_id in self.watch or s.interface in self.watch:
                out.append(s)
        return out

    def _growing(
        self, snapshot: StatsSnapshot, service: ServiceStats, past: _Reading | None
    ) -> bool:
        """The queue grew by ``rise`` of the call rate since ``past`` (occupancy if no length)."""
        if past is None:
            return False
        sid = service.service_id
        if service.queue_length is not None and sid in past.length:
            elapsed = snapshot.time_s - past.time_s
            rate = sum(s.rate_per_s for s in snapshot.services)
            grown = service.queue_length - past.length[sid]
            return elapsed > 0 and rate > 0 and grown >= self.rise * rate * elapsed
        occupancy = service.queue_occupancy
        if occupancy is None or sid not in past.occupancy:
            return False
        return occupancy >= self.threshold and occupancy - past.occupancy[sid] >= self.rise

    def _remember(self, snapshot: StatsSnapshot) -> None:
        """Record this reading; keep what the longest look-back needs."""
        now = snapshot.time_s
        occupancy = {
            s.service_id: s.queue_occupancy
            for s in snapshot.services
            if s.queue_occupancy is not None
        }
        length = {
            s.service_id: s.queue_length for s in snapshot.services if s.queue_length is not None
        }
        self._history.append(_Reading(now, occupancy, length))
        while len(self._history) > 1 and self._history[1].time_s <= now - self.fallback_s:
            self._history.popleft()

    def _before(self, t: float) -> _Reading | None:
        """The latest reading taken at or before ``t`` (None if none is that old)."""
        found = None
        for reading in self._history:
            if reading.time_s > t:
                break
            found = reading
        return found

    def __repr__(self) -> str:
        return f"<FifoController threshold={self.threshold:g} fallback={self.fallback!r}>"
