"""Small helpers the built-in controllers share: reading a snapshot, windows over calls."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from juggle.core.controllers.base import JuggleAction, ServiceStats, StatsSnapshot
from juggle.errors import ControllerError

RECONFIGURING = "Reconfig"
"""Region state (Ker-ONE Fig 7) of a region that is being programmed."""


def reconfiguring(snapshot: StatsSnapshot) -> bool:
    """True while any region is being programmed (controllers then hold their fire)."""
    return any(r.state == RECONFIGURING for r in snapshot.regions)


def juggle_to(snapshot: StatsSnapshot, service_id: int, reason: str) -> list[JuggleAction]:
    """The one action that puts ``service_id`` into the fabric, evicting what is there.

    Empty when it is already there.
    """
    held = tuple(s.service_id for s in snapshot.in_hardware())
    if service_id in held:
        return []
    return [JuggleAction(service_id, held, reason)]


def find_service(snapshot: StatsSnapshot, key: int | str) -> ServiceStats | None:
    """The service with id ``key`` (int) or interface name ``key`` (str), or None."""
    for entry in snapshot.services:
        if entry.service_id == key or entry.interface == key:
            return entry
    return None


def check_fraction(name: str, value: float, *, inclusive_zero: bool = False) -> float:
    """``value`` as float if it lies in (0, 1] ([0, 1] with ``inclusive_zero``).

    Raises :class:`~juggle.errors.ControllerError` naming the option otherwise.
    """
    low_ok = value >= 0 if inclusive_zero else value > 0
    if not (low_ok and value <= 1):
        bound = "[0, 1]" if inclusive_zero else "(0, 1]"
        raise ControllerError(f'"{name}" must be in {bound}, got {value!r}', value=value)
    return float(value)


def check_positive(name: str, value: float) -> float:
    """``value`` as float if > 0; raises :class:`~juggle.errors.ControllerError` otherwise."""
    if not value > 0:
        raise ControllerError(f'"{name}" must be > 0, got {value!r}', value=value)
    return float(value)


class CallWindow:
    """Shares of calls over the last ``window_s`` seconds, from cumulative call counters.

    Like a car's trip meter: it remembers the odometer (``calls``) at past readings and
    reports the distance (calls per service) since the oldest reading still in the window.
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._readings: deque[tuple[float, dict[int, int]]] = deque()

    def update(self, snapshot: StatsSnapshot) -> dict[int, float]:
        """Record ``snapshot`` and return each service's share of calls in the window.

        Falls back to the snapshot's own ``share`` until two readings exist and when no call
        was made within the window.
        """
        now = snapshot.time_s
        calls = {s.service_id: s.calls for s in snapshot.services}
        self._readings.append((now, calls))
        while len(self._readings) > 2 and self._readings[1][0] <= now - self.window_s:
            self._readings.popleft()
        first_t, first = self._readings[0]
        if first_t >= now:
            return {s.service_id: s.share for s in snapshot.services}
        delta = {sid: n - first.get(sid, 0) for sid, n in calls.items()}
        total = sum(delta.values())
        if total <= 0:
            return {s.service_id: s.share for s in snapshot.services}
        return {sid: d / total for sid, d in delta.items()}


def argmax(values: dict[int, float]) -> int | None:
    """Key with the largest value (smallest key on ties), None for an empty dict."""
    if not values:
        return None
    return min(values, key=lambda k: (-values[k], k))


def capable(snapshot: StatsSnapshot) -> Sequence[ServiceStats]:
    """Services that have a hardware implementation."""
    return [s for s in snapshot.services if s.hardware_capable]
