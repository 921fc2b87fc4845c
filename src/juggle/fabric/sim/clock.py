"""The simulated fabric's modeled clock.

Every modeled cost on the simulated board (a bus access, a bridge switch, a bitstream through
the configuration port) advances one shared clock, like a taxi meter that only runs while the
hardware works. Time is kept in integer picoseconds so cycle counts at any clock rate add up
without drift; the API speaks nanoseconds and cycles.

Pacing (``pace=True``) ties the meter to the wall clock for live runs: idle wall time counts
(the modeled clock never lags the wall clock), and an operation that costs ``t`` modeled waits
until the wall clock has caught up, sleeping only when the lead exceeds ``slack_ns`` (1 ms by
default) so short bus accesses never sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from juggle.errors import FabricError

__all__ = ["ClockStatistics", "ModelClock", "PS_PER_S"]

PS_PER_S = 10**12
_PS_PER_NS = 1000


@dataclass(frozen=True, slots=True)
class ClockStatistics:
    """A snapshot of the modeled clock (``now_ns`` is modeled) and of the sleeping pacing did."""

    now_ns: int
    paced: bool
    pace_sleeps: int
    pace_slept_ns: int


class ModelClock:
    """Thread-safe modeled time, starting at 0.

    Raises :class:`~juggle.errors.FabricError` for a negative advance or a clock rate <= 0.
    """

    def __init__(
        self,
        *,
        pace: bool = False,
        slack_ns: int = 1_000_000,
        wall: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._ps = 0
        self._lock = threading.Lock()
        self._pace = pace
        self._slack_ps = slack_ns * _PS_PER_NS
        self._wall = wall
        self._sleep = sleep
        self._wall0 = wall()
        self._sleeps = 0
        self._slept_ps = 0

    @property
    def paced(self) -> bool:
        """Whether this clock holds the wall clock back to modeled time."""
        return self._pace

    @property
    def now_ps(self) -> int:
        """Modeled time in picoseconds."""
        return self._ps

    @property
    def now_ns(self) -> int:
        """Modeled time in nanoseconds."""
        return self._ps // _PS_PER_NS

    def now_cycles(self, hz: int) -> int:
        """Modeled time as whole cycles of a ``hz`` clock."""
        return self._ps * hz // PS_PER_S

    def advance_ns(self, ns: float) -> int:
        """Advance by ``ns`` nanoseconds; returns the new time in ns."""
        return self.advance_ps(round(ns * _PS_PER_NS)) // _PS_PER_NS

    def advance_cycles(self, cycles: int, hz: int) -> int:
        """Advance by ``cycles`` of a ``hz`` clock; returns the new time in ns."""
        return self.advance_ps(cycles_to_ps(cycles, hz)) // _PS_PER_NS

    def advance_ps(self, ps: int, *, settle: bool = False) -> int:
        """Advance by ``ps`` picoseconds; returns the new time in ps (the hot path).

        When paced, waits until the wall clock has caught up: past the slack, or fully
        with ``settle`` (used at the end of long operations).
        """
        if ps < 0:
            raise FabricError(f'"ps" must be >= 0, got {ps}', value=ps)
        if not self._pace:  # the hot path: only the sum
            with self._lock:
                self._ps += ps
                return self._ps
        with self._lock:
            wall_ps = self._wall_ps()
            if wall_ps > self._ps:
                self._ps = wall_ps
            self._ps += ps
            now = self._ps
        self._hold(now, 0 if settle else self._slack_ps)
        return now

    def _wall_ps(self) -> int:
        return int((self._wall() - self._wall0) * PS_PER_S)

    def _hold(self, now_ps: int, slack_ps: int) -> None:
        lead = now_ps - self._wall_ps()
        if lead > slack_ps:
            self._sleep(lead / PS_PER_S)
            with self._lock:
                self._sleeps += 1
                self._slept_ps += lead

    def statistics(self) -> ClockStatistics:
        """A frozen snapshot of the clock."""
        return ClockStatistics(self.now_ns, self._pace, self._sleeps, self._slept_ps // _PS_PER_NS)

    def __repr__(self) -> str:
        paced = "paced" if self._pace else "unpaced"
        return f"<ModelClock {self._ps / 1e9:.3f} ms modeled, {paced}>"


def cycles_to_ps(cycles: int, hz: int) -> int:
    """``cycles`` of a ``hz`` clock in picoseconds (rounded).

    Raises :class:`~juggle.errors.FabricError` for ``hz`` <= 0.
    """
    if hz <= 0:
        raise FabricError(f'"hz" must be > 0, got {hz}', value=hz)
    return round(cycles * PS_PER_S / hz)
