"""``static``: never reconfigure (the baseline of the edge-router paper, Config_A).

A thermostat glued to one setting. With ``hold`` it makes sure that one service (id or
interface name) is in the fabric and then keeps it there; without it, it leaves the fabric as
it finds it. In the edge-router scenario the router starts in Config_A, so ``static`` is the
paper's static system (4 processors, 2 DES, 2 LZ).
"""

from __future__ import annotations

from collections.abc import Sequence

from juggle.core.controllers._common import find_service, juggle_to, reconfiguring
from juggle.core.controllers.base import JuggleAction, StatsSnapshot

__all__ = ["StaticController"]


class StaticController:
    """Keep the fabric as it is, or keep ``hold`` in it."""

    name: str = "static"

    def __init__(self, hold: int | str | None = None) -> None:
        self.hold = hold

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """No action, except to (re)place ``hold`` when it is not in the fabric."""
        if self.hold is None or reconfiguring(snapshot):
            return []
        target = find_service(snapshot, self.hold)
        if target is None or not target.hardware_capable:
            return []
        return juggle_to(snapshot, target.service_id, f"static: hold {target.interface}")

    def __repr__(self) -> str:
        return f"<StaticController hold={self.hold!r}>"
