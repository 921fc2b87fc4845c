"""Spin-then-park: poll a socket for a short, bounded time before blocking on it.

On a small virtual machine a thread that blocks in ``recv`` and is woken by the kernel when
data comes pays tens of microseconds for the wake-up (more when the other CPU is idle and has
to be woken first). A round trip through the daemon crosses two such wake-ups. Polling the
socket without blocking for a few tens of microseconds first catches a reply (client) or the
next request of a caller in a loop (the daemon's reader thread) without any wake-up, at the
price of the CPU burnt while polling: at most the bound per wait.

:class:`Spinner` is adaptive: it spins only while spinning pays. A spin that saw nothing
come within the bound makes it skip the next 1, 2, 4, ... up to :data:`MAX_BACKOFF` waits
(blocking right away) before it tries again; a spin that saw data come resets that. So an idle
connection, a peer that takes longer than the bound, or a machine where the peer cannot run
while we spin (one free CPU: the peer waits for ours) costs about one bounded spin in
:data:`MAX_BACKOFF` waits, while a caller in a loop on a machine with a CPU to spare keeps
spinning and pays no wake-ups. Every poll is a ``poll(2)`` with timeout 0, which releases the
GIL, so other threads of the process run between polls.
"""

from __future__ import annotations

import math
import select
import threading
import time

from juggle.errors import SpinLimitError, scalar

__all__ = ["DEFAULT_SPIN_US", "MAX_SPIN_US", "ReadWait", "Spinner", "check_spin_us"]

#: Default bound of one spin (µs), in the daemon's reader threads and in the client.
DEFAULT_SPIN_US = 50.0
#: Largest bound accepted (µs): spinning longer than this wastes more than it saves.
MAX_SPIN_US = 1000.0
#: Most waits skipped (blocking at once) after spins that saw nothing.
MAX_BACKOFF = 256


def check_spin_us(value: object) -> float:
    """``value`` as a spin bound in µs. Raises :class:`SpinLimitError` naming it unless it
    is a number in 0..:data:`MAX_SPIN_US` (0 disables spinning)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise SpinLimitError(
            f"spin bound must be a number of µs, got {value!r:.40}", value=scalar(value)
        )
    if not 0 <= value <= MAX_SPIN_US:
        raise SpinLimitError(
            f"spin bound {value!r} µs outside 0..{MAX_SPIN_US:g} (0 disables spinning)", value=value
        )
    return float(value)


class Spinner:
    """Spins on file descriptor ``fd`` for up to ``spin_us`` µs before the caller blocks.

    Usage: ``if not spinner.spin(): block``, then read. Used by one
    thread at a time (a poll object admits one caller). ``gate``, a lock shared by several
    spinners, lets only one of them spin at a time (the others block right away), so the
    CPU they burn together stays that of one thread.
    """

    __slots__ = ("_backoff", "_gate", "_poll", "_skip", "hits", "ns", "spins")

    def __init__(self, fd: int, spin_us: float, gate: threading.Lock | None = None) -> None:
        self.ns = int(check_spin_us(spin_us) * 1000)
        self._gate = gate
        self._skip = 0  # waits left to block at once
        self._backoff = 0  # waits to skip after the next spin that sees nothing
        self.spins = 0  # spins made
        self.hits = 0  # of those, how many saw data come in time
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN | select.POLLPRI)

    def spin(self, limit_ns: int | None = None) -> bool:
        """Poll until ``fd`` is readable (True) or the bound (or ``limit_ns``, if smaller)
        passed (False). Does nothing (False) while backing off."""
        if self._skip:
            self._skip -= 1
            return False
        if not self.ns:
            return False
        gate = self._gate
        if gate is not None and not gate.acquire(blocking=False):
            return False  # another one spins
        try:
            poll = self._poll.poll
            now = time.perf_counter_ns
            end = now() + (self.ns if limit_ns is None else min(self.ns, limit_ns))
            self.spins += 1
            while not poll(0):
                if now() >= end:
                    self._skip = self._backoff
                    self._backoff = min(MAX_BACKOFF, 2 * self._backoff or 1)
                    return False
            self.hits += 1
            self._backoff = 0
            return True
        finally:
            if gate is not None:
                gate.release()


class ReadWait:
    """Waits, with a timeout, for one descriptor to become readable (or end): a ``poll(2)``
    registered once, so a descriptor past 1,023 is waited on like any other (``select()``
    refuses those)."""

    __slots__ = ("_poller",)

    def __init__(self, fd: int) -> None:
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN | select.POLLPRI)

    def wait(self, timeout_s: float) -> bool:
        """Whether the descriptor is readable within ``timeout_s`` (rounded up to a ms)."""
        return bool(self._poller.poll(max(0, math.ceil(timeout_s * 1000))))
