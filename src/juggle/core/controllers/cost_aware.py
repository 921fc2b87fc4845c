"""``cost-aware``: accelerate only what pays for itself (ThumbPod, DAC 2003, section 2.5).

ThumbPod warns that "if the interface overhead outweighs the performance gains of
acceleration, then the acceleration should not be performed". This controller adds the price
of a reconfiguration: a service goes into the fabric only when, over the calls expected in
the coming horizon, the time its calls save (``gain_us`` less ``overhead_us`` per call)
beats the time the evicted service's calls lose plus one reconfiguration::

    E_s * (gain_s - overhead_s)  >  E_h * (gain_h - overhead_h) + reconfig_us

with ``E = rate_per_s * horizon``. Like buying a season ticket: only worth it if you will
ride often enough before the season ends. Without a fixed ``horizon_s`` the horizon is how
long the current call mix has lasted so far (a mix that has held for 10 ms is expected to
hold for about 10 ms more), kept within ``[min_horizon_s, max_horizon_s]``. Services whose
``gain_us`` is unknown are never moved.
"""

from __future__ import annotations

from collections.abc import Sequence

from juggle.core.controllers._common import (
    CallWindow,
    check_fraction,
    check_positive,
    juggle_to,
    reconfiguring,
)
from juggle.core.controllers.base import JuggleAction, ServiceStats, StatsSnapshot
from juggle.core.tiers import Tier
from juggle.errors import ControllerError

__all__ = ["CostAwareController"]


class CostAwareController:
    """Juggle in the service with the largest positive net saving over the horizon.

    ``change`` is the L1 distance between call mixes that counts as a new mix.

    Raises :class:`~juggle.errors.ControllerError` for non-positive horizons, a minimum
    above the maximum, or ``change`` outside (0, 1].
    """

    name: str = "cost-aware"

    def __init__(
        self,
        horizon_s: float | None = None,
        min_horizon_s: float = 1e-3,
        max_horizon_s: float = 1.0,
        change: float = 0.3,
        window_s: float = 0.4e-3,
    ) -> None:
        self.horizon_s = None if horizon_s is None else check_positive("horizon_s", horizon_s)
        self.min_horizon_s = check_positive("min_horizon_s", min_horizon_s)
        self.max_horizon_s = check_positive("max_horizon_s", max_horizon_s)
        if self.min_horizon_s > self.max_horizon_s:
            raise ControllerError(
                f'"min_horizon_s" ({min_horizon_s!r}) exceeds "max_horizon_s" ({max_horizon_s!r})',
                value=min_horizon_s,
            )
        self.change = check_fraction("change", change)
        self.window = CallWindow(check_positive("window_s", window_s))
        self._mix: dict[int, float] | None = None
        self._mix_since = 0.0

    def horizon(self, snapshot: StatsSnapshot) -> float:
        """Seconds over which savings are counted for this snapshot."""
        if self.horizon_s is not None:
            return self.horizon_s
        lasted = snapshot.time_s - self._mix_since
        return min(self.max_horizon_s, max(self.min_horizon_s, lasted))

    def net_saving_us(
        self, snapshot: StatsSnapshot, candidate: ServiceStats, horizon_s: float
    ) -> float | None:
        """µs saved over ``horizon_s`` by juggling ``candidate`` in (None: gain unknown)."""
        if candidate.gain_us is None:
            return None
        saved = candidate.rate_per_s * horizon_s * (candidate.gain_us - candidate.overhead_us)
        lost = 0.0
        for held in snapshot.in_hardware():
            gain = held.gain_us or 0.0
            lost += held.rate_per_s * horizon_s * max(0.0, gain - held.overhead_us)
        reconfig = max((r.reconfig_us or 0.0 for r in snapshot.regions), default=0.0)
        return saved - lost - reconfig

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """One juggle for the best candidate whose net saving is positive."""
        self._track_mix(snapshot)
        if reconfiguring(snapshot):
            return []
        horizon = self.horizon(snapshot)
        best: tuple[float, ServiceStats] | None = None
        for entry in snapshot.services:
            if not entry.hardware_capable or entry.tier == Tier.HARDWARE:
                continue
            net = self.net_saving_us(snapshot, entry, horizon)
            if net is not None and net > 0 and (best is None or net > best[0]):
                best = (net, entry)
        if best is None:
            return []
        net, entry = best
        return juggle_to(
            snapshot,
            entry.service_id,
            f"cost-aware: saves {net:.0f} us over {horizon * 1e3:.1f} ms",
        )

    def _track_mix(self, snapshot: StatsSnapshot) -> None:
        shares = self.window.update(snapshot)
        if self._mix is None:
            self._mix, self._mix_since = shares, snapshot.time_s
            return
        keys = set(shares) | set(self._mix)
        distance = sum(abs(shares.get(k, 0.0) - self._mix.get(k, 0.0)) for k in keys)
        if distance > self.change:
            self._mix, self._mix_since = shares, snapshot.time_s

    def __repr__(self) -> str:
        fixed = "lindy" if self.horizon_s is None else f"{self.horizon_s:g}s"
        return f"<CostAwareController horizon={fixed}>"
