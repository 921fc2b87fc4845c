"""Whether a framework is open: the one flag every part of it consults.

A framework closes in two steps: *closing* (its parts stop: no new fault is contained, a
service leaving the fabric leaves by force) and then *closed* (every public method raises
:class:`~juggle.errors.FrameworkClosedError`). The parts share one :class:`Lifecycle` and read
it; only the framework changes it.
"""

from __future__ import annotations

import threading

from juggle.errors import FrameworkClosedError

__all__ = ["Lifecycle"]


class Lifecycle:
    """Open, closing or closed; ``owner`` is what :class:`FrameworkClosedError` names."""

    __slots__ = ("_lock", "closed", "closing", "owner")

    def __init__(self, owner: object) -> None:
        self.owner = owner
        self.closing = False
        self.closed = False
        self._lock = threading.Lock()

    def begin_close(self) -> bool:
        """Enter *closing*; False when closing or closed already (the caller does nothing)."""
        with self._lock:
            if self.closing or self.closed:
                return False
            self.closing = True
            return True

    def check_open(self) -> None:
        """Raise :class:`~juggle.errors.FrameworkClosedError` once closed."""
        if self.closed:
            raise FrameworkClosedError("the framework is closed")

    def __repr__(self) -> str:
        state = "closed" if self.closed else "closing" if self.closing else "open"
        return f"<Lifecycle {state}>"
