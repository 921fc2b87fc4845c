"""``foreground``: the application in focus gets the fabric (Juggle, section 4).

The Juggle paper's example policy: "the application currently running in the foreground and
having the focus of the user is prioritized over the background applications". The window
manager tells the runtime which application is in front (``snapshot.foreground``); this
controller puts that application's most-called hardware-capable service into the fabric,
evicting what is there. It does nothing when that service is already in hardware, when no
application is in focus, or when the focused one uses no hardware-capable service.
"""

from __future__ import annotations

from collections.abc import Sequence

from juggle.core.controllers._common import juggle_to, reconfiguring
from juggle.core.controllers.base import JuggleAction, ServiceStats, StatsSnapshot

__all__ = ["ForegroundController", "focused_service"]


def focused_service(snapshot: StatsSnapshot) -> ServiceStats | None:
    """The foreground application's most-called hardware-capable service (ties: lowest id)."""
    app = snapshot.foreground
    if app is None:
        return None
    used = [s for s in snapshot.services if s.hardware_capable and s.per_consumer.get(app, 0) > 0]
    if not used:
        return None
    return max(used, key=lambda s: (s.per_consumer.get(app, 0), -s.service_id))


class ForegroundController:
    """Give the fabric to the service the focused application calls most."""

    name: str = "foreground"

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """At most one juggle: the focused app's top service into hardware."""
        if reconfiguring(snapshot):
            return []
        target = focused_service(snapshot)
        if target is None:
            return []
        return juggle_to(
            snapshot, target.service_id, f"foreground: {snapshot.foreground} is in focus"
        )

    def __repr__(self) -> str:
        return "<ForegroundController>"
