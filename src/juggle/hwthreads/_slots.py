"""Hardware slots: where a hardware thread runs, and who hands them out.

A *slot* is a reconfigurable region able to host some thread designs (ReconOS's hwslot). The
runtime does not own the fabric: it asks a :class:`SlotProvider` for a slot compatible with a
thread's design at the thread's (tenant's) priority and gives it back when the thread stops or
is suspended. :class:`FixedSlots` is the built-in provider over a fixed set of slots, like a
parking lot with numbered bays; the allocator adapter maps the same protocol onto the Ker-ONE
allocator of :mod:`juggle.core`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from juggle.errors import HwThreadArgumentError


@dataclass(frozen=True, slots=True)
class ThreadSlot:
    """A hardware slot: its name and the thread designs (description names) it can host."""

    name: str
    designs: frozenset[str]

    def hosts(self, design: str) -> bool:
        """True when a thread of ``design`` can run in this slot."""
        return design in self.designs


@runtime_checkable
class SlotProvider(Protocol):
    """Hands out slots: ``acquire`` a free compatible slot or None; ``release`` it later."""

    def acquire(self, priority: int | None, design: str) -> ThreadSlot | None:
        """A free slot hosting ``design`` for a thread of ``priority`` (None: the provider's
        default, e.g. the tenant's), or None when there is none."""
        ...

    def release(self, slot: ThreadSlot) -> None:
        """Give back a slot obtained from :meth:`acquire`."""
        ...


@dataclass(frozen=True, slots=True)
class SlotStatistics:
    """Snapshot of a :class:`FixedSlots` provider."""

    slots: tuple[str, ...]
    busy: tuple[str, ...]
    acquisitions: int
    refusals: int


class FixedSlots:
    """A fixed set of slots, granted first-fit in declaration order; no preemption.

    ``priority`` is accepted for the protocol but does not reorder anything: a slot is either
    free or not.
    """

    def __init__(self, slots: Iterable[ThreadSlot]) -> None:
        """Manage ``slots``.

        Raises:
            HwThreadArgumentError: two slots share a name.
        """
        self._slots = tuple(slots)
        names = [slot.name for slot in self._slots]
        if len(set(names)) != len(names):
            raise HwThreadArgumentError(f"slot names must be unique, got {names}")
        self._lock = threading.Lock()
        self._busy: set[str] = set()
        self._acquisitions = 0
        self._refusals = 0

    @classmethod
    def uniform(cls, count: int, designs: Iterable[str], prefix: str = "slot") -> FixedSlots:
        """``count`` slots named ``slot0``… that all host ``designs``.

        Raises:
            HwThreadArgumentError: ``count`` is negative.
        """
        if count < 0:
            raise HwThreadArgumentError(f'"count" must be >= 0, got {count!r}', value=count)
        kinds = frozenset(designs)
        return cls(ThreadSlot(f"{prefix}{i}", kinds) for i in range(count))

    def acquire(self, priority: int | None, design: str) -> ThreadSlot | None:
        """The first free slot hosting ``design``, marked busy; None when there is none."""
        with self._lock:
            for slot in self._slots:
                if slot.name not in self._busy and slot.hosts(design):
                    self._busy.add(slot.name)
                    self._acquisitions += 1
                    return slot
            self._refusals += 1
            return None

    def release(self, slot: ThreadSlot) -> None:
        """Mark ``slot`` free again.

        Raises:
            HwThreadArgumentError: ``slot`` is not held from this provider.
        """
        with self._lock:
            if slot.name not in self._busy:
                raise HwThreadArgumentError(f"slot {slot.name!r} is not held", value=slot.name)
            self._busy.remove(slot.name)

    def statistics(self) -> SlotStatistics:
        """A frozen snapshot: slot names, busy ones, counters."""
        with self._lock:
            busy = tuple(s.name for s in self._slots if s.name in self._busy)
            names = tuple(s.name for s in self._slots)
            return SlotStatistics(names, busy, self._acquisitions, self._refusals)

    def __repr__(self) -> str:
        return f"<FixedSlots {len(self._busy)}/{len(self._slots)} busy>"
