"""``adaptive``: tell stable traffic from spiky traffic, and pick the manager that suits it.

The edge-router paper ends by proposing "a module [that] could capture the network stability
and activate the appropriate RMU": follow the flow distribution when the traffic is stable
(it reacts fastest), switch to the FIFO-occupancy manager when short spikes come often (its
queues absorb them). This controller is that module. Think of a driver who takes the
motorway when the road is clear and the side streets once she has been caught in a few jams.

It runs both managers on every snapshot, so each keeps its own memory warm, and uses the
answer of the one that fits the traffic it has recently seen:

* *calm*: no spike in the last ``memory_s`` seconds → :class:`DistributionController`;
* *spiky*: at least one → :class:`FifoController` (without queue statistics in the
  snapshots, as in a live runtime that reports none, it keeps the fabric as it is);
* *unstable*: spikes, and the stable stretches between real changes recently lasted
  fewer calls than ``unstable`` reconfigurations' worth, so there is little stable traffic
  to follow → keep (or bring back) what the fabric held at the start: the paper's "in case
  that the network stability is small ... keep the system to same configuration".

A *spike* is an excursion of the dominant service that came back to the previous one within
fewer calls than pass during one reconfiguration: no juggle made for it could have paid off.
An excursion that lasts longer is a *real change* and ends a stable stretch.
Lengths are counted in calls, not seconds, so a spike of 1,000 packets is one whether the
fabric happens to process it quickly or slowly.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from juggle.core.controllers._common import (
    CallWindow,
    argmax,
    check_fraction,
    check_positive,
    juggle_to,
    reconfiguring,
)
from juggle.core.controllers.base import JuggleAction, StatsSnapshot
from juggle.core.controllers.distribution import DistributionController
from juggle.core.controllers.fifo import FifoController
from juggle.errors import ControllerError

__all__ = ["AdaptiveController"]


class AdaptiveController:
    """Distribution manager on calm traffic, FIFO manager once spikes have been seen.

    ``threshold`` and ``window_s`` define the dominant service (as for ``distribution``);
    ``reconfig_s`` is the reconfiguration time used when snapshots carry none; spikes are
    remembered for ``memory_s`` seconds; ``fifo`` holds the options of the embedded
    :class:`~juggle.core.controllers.fifo.FifoController`.

    Raises :class:`~juggle.errors.ControllerError` for a threshold outside (0, 1], a
    non-positive time, or bad ``fifo`` options.
    """

    name: str = "adaptive"

    def __init__(
        self,
        threshold: float = 0.5,
        window_s: float = 0.4e-3,
        reconfig_s: float = 2.5e-3,
        memory_s: float = 0.25,
        unstable: float = 4.0,
        fifo: Mapping[str, Any] | None = None,
    ) -> None:
        self.threshold = check_fraction("threshold", threshold)
        self.unstable = check_positive("unstable", unstable)
        self.reconfig_s = check_positive("reconfig_s", reconfig_s)
        self.memory_s = check_positive("memory_s", memory_s)
        self.distribution = DistributionController(threshold=threshold, window_s=window_s)
        try:
            self.fifo = FifoController(**dict(fifo or {}))
        except TypeError as exc:
            raise ControllerError(f'bad "fifo" options {fifo!r}: {exc}', fifo) from exc
        self._window = CallWindow(check_positive("window_s", window_s))
        self.mode = "calm"
        self.baseline: int | None = None
        self._baseline_since = 0
        self._away_since: int | None = None
        self._away_ticks = 0
        self._rates: deque[tuple[float, float]] = deque()
        self.spikes: deque[tuple[float, int]] = deque()
        self.stretches: deque[tuple[float, int]] = deque()
        self.home: int | None = None
        self._started = False

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """Ask both managers; answer with the one that suits the recent traffic."""
        by_distribution = self.distribution.decide(snapshot)
        by_fifo = self.fifo.decide(snapshot)
        if not self._started:
            held = snapshot.in_hardware()
            self.home = held[0].service_id if held else None
            self._started = True
        self._learn(snapshot)
        has_queues = any(s.queue_occupancy is not None for s in snapshot.services)
        if reconfiguring(snapshot):
            return []
        chosen: Sequence[JuggleAction]
        if self.mode == "unstable":
            chosen = [] if self.home is None else juggle_to(snapshot, self.home, "back home")
        else:
            chosen = by_distribution if self.mode == "calm" else by_fifo if has_queues else []
        return [
            JuggleAction(a.to_hardware, a.to_software, f"adaptive ({self.mode}): {a.reason}")
            for a in chosen
        ]

    # -- learning what the traffic is like --------------------------------------------------------

    def _learn(self, snapshot: StatsSnapshot) -> None:
        t = snapshot.time_s
        position = sum(s.calls for s in snapshot.services)
        limit = self._reconfig_calls(snapshot)
        for memory in (self.spikes, self.stretches):
            while memory and memory[0][0] < t - self.memory_s:
                memory.popleft()
        dominant = self._dominant_now(snapshot)
        if dominant is not None:
            self._track(dominant, position, limit, t)
        self.mode = self._mode(limit)

    def _track(self, dominant: int, position: int, limit: int, t: float) -> None:
        """Follow excursions from the baseline: spikes come back, real changes do not."""
        if self.baseline is None:
            self.baseline, self._baseline_since = dominant, position
            return
        if dominant == self.baseline:
            if self._away_since is not None:
                length = position - self._away_since
                if self._away_ticks >= 2 and 0 < length < limit:
                    self.spikes.append((t, length))
            self._away_since = None
            return
        if self._away_since is None:
            self._away_since, self._away_ticks = position, 0
        self._away_ticks += 1
        if position - self._away_since >= limit:
            self.stretches.append((t, self._away_since - self._baseline_since))
            self.baseline, self._baseline_since = dominant, self._away_since
            self._away_since = None

    def _mode(self, limit: int) -> str:
        if not self.spikes:
            return "calm"
        if len(self.stretches) < 2:
            return "spiky"
        ordered = sorted(length for _, length in self.stretches)
        return "unstable" if ordered[len(ordered) // 2] < self.unstable * limit else "spiky"

    def _dominant_now(self, snapshot: StatsSnapshot) -> int | None:
        shares = self._window.update(snapshot)
        eligible = {
            s.service_id: shares.get(s.service_id, 0.0)
            for s in snapshot.services
            if s.hardware_capable
        }
        best = argmax(eligible)
        if best is None or eligible[best] < self.threshold:
            return None
        return best

    def _reconfig_calls(self, snapshot: StatsSnapshot) -> int:
        """Calls that pass during one reconfiguration, at the median recent call rate.

        The median, not the current rate: while the fabric is being reconfigured or holds
        the wrong units it serves fewer calls than arrive, and more while catching up.
        """
        known = [r.reconfig_us for r in snapshot.regions if r.reconfig_us is not None]
        reconfig_s = max(known) * 1e-6 if known else self.reconfig_s
        t = snapshot.time_s
        self._rates.append((t, sum(s.rate_per_s for s in snapshot.services)))
        while self._rates[0][0] < t - self.memory_s:
            self._rates.popleft()
        rates = sorted(rate for _, rate in self._rates)
        return int(reconfig_s * rates[len(rates) // 2])

    def __repr__(self) -> str:
        return f"<AdaptiveController {self.mode}, {len(self.spikes)} recent spikes>"
