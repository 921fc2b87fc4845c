"""``manual``: juggle exactly what a person asked for, and nothing else.

The Juggle prototype had no autonomous controller; a shell command triggered each juggle on
demand (section 5). This controller is that shell's mailbox: :meth:`request` posts a juggle,
the next :meth:`decide` hands it over, once, in the order posted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from juggle.core.controllers.base import JuggleAction, StatsSnapshot
from juggle.errors import ControllerError

__all__ = ["ManualController"]


class ManualController:
    """A queue of requested juggles, emptied by :meth:`decide`.

    ``requests`` pre-loads ``(to_hardware, to_software)`` pairs.
    """

    name: str = "manual"

    def __init__(self, requests: Iterable[tuple[int | None, Sequence[int]]] = ()) -> None:
        self._pending: deque[JuggleAction] = deque()
        for to_hardware, to_software in requests:
            self.request(to_hardware, to_software)

    def request(
        self, to_hardware: int | None, to_software: Sequence[int] = (), reason: str = "manual"
    ) -> None:
        """Queue a juggle for the next :meth:`decide`.

        Raises :class:`~juggle.errors.ControllerError` when it would do nothing, or names the
        same service on both sides.
        """
        evict = tuple(to_software)
        if to_hardware is None and not evict:
            raise ControllerError("a manual juggle needs to_hardware or to_software")
        if to_hardware is not None and to_hardware in evict:
            raise ControllerError(
                f"service {to_hardware!r} cannot go to hardware and to software at once",
                value=to_hardware,
            )
        self._pending.append(JuggleAction(to_hardware, evict, reason))

    @property
    def pending(self) -> int:
        """Requests not handed over yet."""
        return len(self._pending)

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        """Every request posted since the last call, oldest first."""
        out = list(self._pending)
        self._pending.clear()
        return out

    def __repr__(self) -> str:
        return f"<ManualController {len(self._pending)} pending>"
