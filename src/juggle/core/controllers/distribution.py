"""``distribution``: follow the flow distribution (the edge-router paper's first RMU, 3.2).

Counters of calls per service (packets per flow) are read every period; when one service's
share of the calls over the last ``window_s`` reaches ``threshold`` (the paper's 50 %) and it
is not in the fabric, it is juggled in. Quick to react, so it follows short bursts too, which
is its weakness on spiky traffic.
"""

from __future__ import annotations

from collections.abc import Sequence

from juggle.core.controllers._common import (
    CallWindow,
    argmax,
    check_fraction,
    check_positive,
    juggle_to,
    reconfiguring,
)
from juggle.core.controllers.base import JuggleAction, StatsSnapshot

__all__ = ["DistributionController"]


class DistributionController:
    """Juggle in the service whose share of calls reaches ``threshold``.

    Raises :class:`~juggle.errors.ControllerError` for a threshold outside (0, 1] or a
    non-positive window.
    """

    name: str = "distribution"

    def __init__(self, threshold: float = 0.5, window_s: float = 0.4e-3) -> None:
        self.threshold = check_fraction("threshold", threshold)
        self.window = CallWindow(check_positive("window_s", window_s))

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """One juggle when a hardware-capable service outside the fabric has the share."""
        shares = self.window.update(snapshot)
        if reconfiguring(snapshot):
            return []
        eligible = {
            s.service_id: shares.get(s.service_id, 0.0)
            for s in snapshot.services
            if s.hardware_capable
        }
        best = argmax(eligible)
        if best is None or eligible[best] < self.threshold:
            return []
        return juggle_to(
            snapshot, best, f"distribution: share {eligible[best]:.0%} >= {self.threshold:.0%}"
        )

    def __repr__(self) -> str:
        return f"<DistributionController threshold={self.threshold:g}>"
