"""The control loop: a controller (a policy) reads a snapshot and its juggles are carried out.

A :class:`ControlLoop` is the framework's thermostat: :meth:`ControlLoop.snapshot` reads the
room (each service's measured rate, latency and queue, each region's state and modeled
reconfiguration time, the application in focus), the controller decides, and
:meth:`ControlLoop.control` carries out the juggles it asked for; a juggle that fails is
logged and kept, never raised. :meth:`ControlLoop.start` runs that on a background thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from juggle.core.controllers.base import (
    Controller,
    JuggleAction,
    RegionStats,
    ServiceStats,
    StatsSnapshot,
)
from juggle.core.tiers import Tier
from juggle.errors import ConfigurationError, ControllerError, JuggleError
from juggle.fabric.fabric import Fabric
from juggle.runtime.options import BOUNDED_LOG, FrameworkOptions, positive_number
from juggle.runtime.snapshots import JuggleReport, ServiceStatistics
from juggle.runtime.table import ServiceTable

__all__ = ["ControlLoop"]

log = logging.getLogger("juggle")

#: carries out one juggle: (to_hardware, to_software) → its report
Juggle = Callable[[int | None, Iterable[int]], JuggleReport]


class ControlLoop:
    """Runs ``controller`` (None: control is off) on snapshots of ``table``; ``juggle``
    carries out what it decides."""

    def __init__(
        self,
        fabric: Fabric,
        options: FrameworkOptions,
        table: ServiceTable,
        juggle: Juggle,
        controller: Controller | None,
    ) -> None:
        self._fabric = fabric
        self._options = options
        self._table = table
        self._juggle = juggle
        self.controller = controller
        self.foreground: str | None = None
        #: the newest controller failures (bounded)
        self.controller_errors: deque[str] = deque(maxlen=BOUNDED_LOG)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def set_controller(self, controller: Controller | None) -> None:
        """Use ``controller`` from now on. Raises :class:`ControllerError` for an object that
        is no controller."""
        if controller is not None and not isinstance(controller, Controller):
            raise ControllerError(
                f"{controller!r} is not a controller (needs name and decide(snapshot))"
            )
        self.controller = controller

    def set_foreground(self, app: str | None, errors: list[str] | None) -> list[JuggleReport]:
        """``app`` has the focus; runs the controller once (as :meth:`control`). Raises
        :class:`ConfigurationError` for an ``app`` that is no string or None."""
        if app is not None and not isinstance(app, str):
            raise ConfigurationError(f'"app" must be a string or None, got {app!r}', value=app)
        self.foreground = app
        return self.control(errors) if self.controller is not None else []

    def snapshot(self) -> StatsSnapshot:
        """What a controller reads (see :meth:`juggle.runtime.framework.Framework.snapshot`)."""
        snaps = self._table.services()
        stats = {s.service_id: self._table.statistics(s.service_id) for s in snaps}
        total_rate = sum(s.rate_per_s for s in stats.values()) or 1.0
        services = []
        for snap in snaps:
            st = stats[snap.service_id]
            services.append(
                ServiceStats(
                    service_id=snap.service_id,
                    interface=snap.interface,
                    tier=snap.tier,
                    region=snap.region,
                    calls=st.total.calls,
                    rate_per_s=st.rate_per_s,
                    share=st.rate_per_s / total_rate,
                    mean_us=st.total.mean_us,
                    p50_us=st.total.p50_us,
                    p99_us=st.total.p99_us,
                    queue_occupancy=min(1.0, st.inflight / self._options.queue_capacity),
                    queue_length=st.inflight,
                    hardware_capable=Tier.HARDWARE in snap.tiers,
                    per_consumer={c: s.calls for c, s in st.per_consumer.items()},
                    gain_us=gain_us(st, self._home_tier(snap.service_id, snap.tier)),
                )
            )
        regions = tuple(
            RegionStats(r.name, r.state, r.service_id, reconfig_us=self._reconfig_us(r.name))
            for r in self._table.regions()
        )
        return StatsSnapshot(time.monotonic(), tuple(services), regions, self.foreground)

    def _home_tier(self, service_id: int, tier: Tier) -> Tier:
        """The tier ``service_id`` runs from out of hardware (its ``tier`` if it just left)."""
        managed = self._table.find(service_id)
        return managed.home_tier if managed is not None else tier

    def _reconfig_us(self, region: str) -> float | None:
        """Modeled time to reprogram ``region`` with its typical bitstream (None: unknown)."""
        profile = self._fabric.profile
        size = profile.region(region).bitstream_bytes
        if size is None:
            return None
        return float(profile.config_port.transfer_ps(size)) / 1e6

    def control(self, errors: list[str] | None = None) -> list[JuggleReport]:
        """Run the controller once on a fresh snapshot and carry out its juggles; a juggle
        that fails is logged, kept in :attr:`controller_errors` and appended to ``errors``."""
        controller = self.controller
        if controller is None:
            return []
        actions: Sequence[JuggleAction] = controller.decide(self.snapshot())
        reports = []
        for action in actions:
            try:
                reports.append(self._juggle(action.to_hardware, action.to_software))
            except JuggleError as exc:
                message = f"{action}: {exc}"
                self.controller_errors.append(message)
                if errors is not None:
                    errors.append(message)
                log.warning("controller %s: %s failed: %s", controller.name, action, exc)
        return reports

    def start(self, interval_s: float) -> None:
        """Run :meth:`control` every ``interval_s`` seconds on a background thread (the one
        running before stops first). Raises :class:`ConfigurationError` for an
        ``interval_s`` that is no number > 0."""
        positive_number("interval_s", interval_s)
        self.stop()
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval_s):
                self.control()

        self._thread = threading.Thread(target=loop, name="juggle-controller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background loop, if any (waits for its round to end)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def __repr__(self) -> str:
        name = self.controller.name if self.controller is not None else None
        running = "running" if self._thread is not None else "stopped"
        return f"<ControlLoop {name} {running}, {len(self.controller_errors)} errors>"


def gain_us(stats: ServiceStatistics, home_tier: str) -> float | None:
    """Time a call saves in hardware over ``home_tier``, where it runs otherwise (None: unknown).

    Software durations are measured; the hardware duration is modeled on a simulated fabric
    (the wall time of a simulated core says nothing about the core) and measured on a board.
    """
    hardware = stats.per_tier.get(Tier.HARDWARE)
    soft = stats.per_tier.get(home_tier)
    if hardware is None or not hardware.timed or soft is None or not soft.timed:
        return None
    hw_us = stats.hardware_modeled_mean_us
    if hw_us is None:
        hw_us = hardware.mean_us
    return soft.mean_us - hw_us
