"""The thread runtime: creates hardware threads and places them in slots or in software.

Like ReconOS's ``reconos_thread_create``/``create_auto``: a thread is created from a
description with its resource table and init data, and started in a hardware slot obtained
from a :class:`~juggle.hwthreads.SlotProvider` (the built-in :class:`FixedSlots`, or the Ker-ONE
allocator through :class:`~juggle.hwthreads.AllocatorSlots`), or in software.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

from juggle.errors import NoFreeSlotError
from juggle.hwthreads._slots import SlotProvider, ThreadSlot
from juggle.hwthreads._thread import (
    HardwareThread,
    ThreadDescription,
    ThreadState,
    ThreadStatistics,
    ThreadTier,
)
from juggle.hwthreads._timing import HwTiming


class ThreadRuntime:
    """Creates hardware threads and runs them in slots from a provider, or in software.

    Without a slot provider every thread runs in software (``create_hw`` then refuses).
    """

    def __init__(self, slots: SlotProvider | None = None, timing: HwTiming | None = None) -> None:
        self.slots = slots
        self.timing = timing if timing is not None else HwTiming()
        self._threads: list[HardwareThread] = []
        self._lock = threading.Lock()
        self._names = itertools.count(1)

    def slots_acquire(self, priority: int | None, design: str) -> ThreadSlot | None:
        """A compatible slot from the provider, or None (always None without a provider)."""
        return None if self.slots is None else self.slots.acquire(priority, design)

    def slots_release(self, slot: ThreadSlot) -> None:
        """Give ``slot`` back to the provider."""
        if self.slots is not None:
            self.slots.release(slot)

    def create(
        self,
        description: ThreadDescription,
        resources: Sequence[object] = (),
        init_data: object = None,
        *,
        priority: int | None = None,
    ) -> HardwareThread:
        """A new thread in state INIT: ``resources`` becomes its handle table.

        ``priority`` is what the slot provider gets (None: the provider's default, such as
        the tenant's priority with the allocator).
        """
        name = f"{description.name}#{next(self._names)}"
        thread = HardwareThread(self, description, resources, init_data, priority, name)
        with self._lock:
            self._threads.append(thread)
        return thread

    def _create_started(
        self,
        tier: ThreadTier | None,
        description: ThreadDescription,
        resources: Sequence[object],
        init_data: object,
        priority: int | None,
    ) -> HardwareThread:
        thread = self.create(description, resources, init_data, priority=priority)
        try:
            thread.start(tier)
        except NoFreeSlotError:
            with self._lock:
                self._threads.remove(thread)
            raise
        return thread

    def create_hw(
        self,
        description: ThreadDescription,
        resources: Sequence[object] = (),
        init_data: object = None,
        *,
        priority: int | None = None,
    ) -> HardwareThread:
        """Create and start a thread in a hardware slot.

        Raises:
            NoFreeSlotError: no compatible slot is free (no thread is created).
        """
        return self._create_started(
            ThreadTier.HARDWARE, description, resources, init_data, priority
        )

    def create_sw(
        self,
        description: ThreadDescription,
        resources: Sequence[object] = (),
        init_data: object = None,
        *,
        priority: int | None = None,
    ) -> HardwareThread:
        """Create and start a thread in software."""
        return self._create_started(
            ThreadTier.SOFTWARE, description, resources, init_data, priority
        )

    def create_auto(
        self,
        description: ThreadDescription,
        resources: Sequence[object] = (),
        init_data: object = None,
        *,
        priority: int | None = None,
    ) -> HardwareThread:
        """Create and start a thread in hardware if a compatible slot is free, else software."""
        return self._create_started(None, description, resources, init_data, priority)

    def threads(self) -> tuple[HardwareThread, ...]:
        """Every thread created here, oldest first."""
        with self._lock:
            return tuple(self._threads)

    def statistics(self) -> tuple[ThreadStatistics, ...]:
        """Snapshots of every thread created here."""
        return tuple(thread.statistics() for thread in self.threads())

    def __repr__(self) -> str:
        running = sum(
            t.state in (ThreadState.RUNNING_HW, ThreadState.RUNNING_SW) for t in self.threads()
        )
        return (
            f"<ThreadRuntime {len(self._threads)} threads, {running} running, slots={self.slots!r}>"
        )
