"""The state machine of one reconfigurable region (Ker-ONE Fig 7), plus an error state.

A region is a container that hardware tasks are loaded into. Its state says whether the
allocator may hand it out and how: an ``IDLE`` region can be assigned at once, a ``BUSY`` one
only by preemption, and every other state blocks allocation until an event moves it on::

    IDLE ──assign──────────▶ HOLD ──start──▶ BUSY ──finish──▶ IDLE
    IDLE ──assign (other client)──▶ SWITCH ──restore──▶ HOLD
    IDLE ──assign + reconfig──▶ RECONFIG ──pcap over──▶ HOLD
    BUSY ──preempt──▶ PREEMPT ──consistency point──▶ SWITCH ──▶ HOLD | RECONFIG
    HOLD ──expire / release──▶ IDLE          IDLE ──start (connected client)──▶ BUSY
    BUSY ──finish within the hold (hysteresis)──▶ HOLD ──take (higher priority)──▶ SWITCH
    RECONFIG ──pcap failed──▶ ERROR ──repair──▶ IDLE
    BUSY | IDLE | HOLD ──fault (core quarantined)──▶ ERROR

The two hysteresis transitions keep a region that was just handed over with its client between
computations (the allocator's ``hysteresis_us``): a computation that ends while the hold runs
returns the region to HOLD, where only a request of higher priority may take it.

:data:`TRANSITIONS` is the whole table; anything not in it raises
:class:`~juggle.errors.IllegalTransitionError` and leaves the state as it was.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from juggle.errors import IllegalTransitionError

__all__ = ["TRANSITIONS", "RegionMachine", "RegionPhase", "is_legal"]


class RegionPhase(enum.Enum):
    """Where a region is in Fig 7; ``ERROR`` is a region whose programming failed."""

    successors: tuple[RegionPhase, ...]
    ordinal: int

    IDLE = "Idle"
    BUSY = "Busy"
    PREEMPT = "Preempt"
    SWITCH = "Switch"
    RECONFIG = "Reconfig"
    HOLD = "Hold"
    ERROR = "Error"


_S = RegionPhase

_TABLE: dict[tuple[RegionPhase, RegionPhase], str] = {
    (_S.IDLE, _S.HOLD): "assign: the loaded design serves the request, same client",
    (_S.IDLE, _S.SWITCH): "assign: save the previous client's context first",
    (_S.IDLE, _S.RECONFIG): "assign with reconfig: no client to save",
    (_S.IDLE, _S.BUSY): "start: the connected client computes again",
    (_S.HOLD, _S.BUSY): "start: the holding client computes",
    (_S.HOLD, _S.IDLE): "expire or release: the hold time ran out or the client let go",
    (_S.BUSY, _S.IDLE): "finish: the computation is over",
    (_S.BUSY, _S.HOLD): "finish within the hold: the region stays reserved for its client",
    (_S.HOLD, _S.SWITCH): "take: a request of higher priority takes a region its client used",
    (_S.BUSY, _S.PREEMPT): "preempt: stop at the next consistency point",
    (_S.PREEMPT, _S.SWITCH): "stop: the task reached a consistency point",
    (_S.SWITCH, _S.HOLD): "restore: the new client is connected",
    (_S.SWITCH, _S.RECONFIG): "reconfig: the new client needs another design",
    (_S.RECONFIG, _S.HOLD): "pcap over: the design is loaded, the client connected",
    (_S.RECONFIG, _S.ERROR): "pcap failed: the region holds no usable design",
    (_S.BUSY, _S.ERROR): "fault: the running core hung, returned wrong data or its driver failed",
    (_S.IDLE, _S.ERROR): "fault: the loaded core was found faulty between computations",
    (_S.HOLD, _S.ERROR): "fault: the loaded core was found faulty before its client started",
    (_S.ERROR, _S.IDLE): "repair: the region was blanked and can be used again",
}

TRANSITIONS: Mapping[tuple[RegionPhase, RegionPhase], str] = MappingProxyType(_TABLE)
"""Every legal transition ``(from, to)`` with the event that causes it."""

for _ordinal, _state in enumerate(RegionPhase):
    _state.ordinal = _ordinal
    _state.successors = tuple(dst for (src, dst) in _TABLE if src is _state)


def is_legal(src: RegionPhase, dst: RegionPhase) -> bool:
    """Whether Fig 7 (plus ``ERROR``) allows going from ``src`` to ``dst``."""
    return dst in src.successors


class RegionMachine:
    """One region's state, changed only through :meth:`to`; counts how often each state is entered.

    The allocator embeds one per region; it is also usable alone (a test walks the table).
    """

    __slots__ = ("entered", "name", "state")

    def __init__(self, name: str, state: RegionPhase = RegionPhase.IDLE) -> None:
        self.name = name
        self.state = state
        self.entered = [0] * len(RegionPhase)

    def to(self, dst: RegionPhase) -> None:
        """Move to ``dst``.

        Raises:
            IllegalTransitionError: ``dst`` is not a successor of the current state; the state
                is unchanged.
        """
        if dst not in self.state.successors:
            raise IllegalTransitionError(
                f"region {self.name!r}: {self.state.value} -> {dst.value} is not a legal "
                f"transition (legal: {', '.join(s.value for s in self.state.successors)})",
                region=self.name,
            )
        self.state = dst
        self.entered[dst.ordinal] += 1

    def __repr__(self) -> str:
        return f"<RegionMachine {self.name} {self.state.value}>"
