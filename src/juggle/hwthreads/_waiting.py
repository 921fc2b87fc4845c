"""Parking for blocked OS calls, and the meter that tells a thread how long it was blocked.

Every blocking OS call in juggle follows one pattern, like a ticket at a deli counter: under the
object's lock it tries the non-blocking twin; if that would block it takes a ticket (a
:class:`Waiter`), queues it, and parks outside the lock. Whoever makes progress possible (an
unlock, a post, a put) serves the oldest ticket *under the object's lock*, performing the
operation on the waiter's behalf (hand-over), so a wake-up can never be lost or stolen.

The :class:`CallMeter` is how the thread runtime separates an OS call's own cost from the time
it spent waiting: parked time is added to the meter of the thread that parked.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Generic, TypeVar

from juggle.errors import OsCallTimeoutError

T = TypeVar("T")

_local = threading.local()


class CallMeter:
    """Accumulates, per Python thread, the nanoseconds spent parked in blocking OS calls."""

    __slots__ = ("blocked_ns",)

    def __init__(self) -> None:
        self.blocked_ns = 0


def current_owner() -> int:
    """Who the calling Python thread acts for: a thread's token if set, else its own ident.

    A hardware thread keeps one token whether its calls are executed by its delegate or, after
    a move to software, by a software thread, so a mutex it holds stays its own.
    """
    token: int | None = getattr(_local, "owner", None)
    return threading.get_ident() if token is None else token


def act_for(token: int | None) -> None:
    """Make the calling Python thread act for ``token`` (None: for itself)."""
    _local.owner = token


def current_meter() -> CallMeter:
    """The calling thread's meter (created on first use)."""
    meter: CallMeter | None = getattr(_local, "meter", None)
    if meter is None:
        meter = CallMeter()
        _local.meter = meter
    return meter


class Waiter(Generic[T]):
    """A ticket held by one parked thread; the server stores the outcome and unparks it."""

    __slots__ = ("_gate", "done", "payload", "tag", "value")

    def __init__(self, tag: int = 0) -> None:
        self._gate = threading.Lock()
        self._gate.acquire()
        self.done = False
        self.tag = tag
        self.payload: object = None
        self.value: T | None = None

    def wake(self, value: T) -> None:
        """Hand ``value`` to the parked thread; call only under the owning object's lock."""
        self.value = value
        self.done = True
        self._gate.release()

    def park(self, timeout: float | None) -> bool:
        """Block until woken (True) or until ``timeout`` seconds pass (False)."""
        start = time.perf_counter_ns()
        woken = self._gate.acquire(timeout=-1 if timeout is None else max(timeout, 0.0))
        current_meter().blocked_ns += time.perf_counter_ns() - start
        return woken


class WaitQueue(Generic[T]):
    """FIFO of waiters of one object; all methods are called under that object's lock."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: deque[Waiter[T]] = deque()

    def __len__(self) -> int:
        return len(self._waiters)

    def enqueue(self, tag: int = 0) -> Waiter[T]:
        """Append and return a fresh ticket; ``tag`` identifies the waiter to its server."""
        waiter: Waiter[T] = Waiter(tag)
        self._waiters.append(waiter)
        return waiter

    def pop_first(self) -> Waiter[T] | None:
        """Remove and return the oldest ticket without serving it (None when empty)."""
        return self._waiters.popleft() if self._waiters else None

    def wake_first(self, value: T) -> bool:
        """Serve the oldest ticket with ``value``; False when nobody waits."""
        if not self._waiters:
            return False
        self._waiters.popleft().wake(value)
        return True

    def wake_all(self, value: T) -> int:
        """Serve every ticket with ``value``; returns how many were served."""
        count = len(self._waiters)
        while self._waiters:
            self._waiters.popleft().wake(value)
        return count

    def withdraw(self, waiter: Waiter[T]) -> None:
        """Remove an unserved ticket (after a timeout)."""
        self._waiters.remove(waiter)


def park_or_withdraw(
    lock: threading.Lock, queue: WaitQueue[T], waiter: Waiter[T], timeout: float | None, what: str
) -> T | None:
    """Park on ``waiter``; on timeout withdraw it, unless it was served meanwhile.

    Returns the value the server handed over.

    Raises:
        OsCallTimeoutError: ``timeout`` passed and the ticket was not served.
    """
    if waiter.park(timeout):
        return waiter.value
    with lock:
        if waiter.done:  # served between the timeout and taking the lock
            return waiter.value
        queue.withdraw(waiter)
    raise OsCallTimeoutError(f"{what} did not complete within timeout={timeout!r} s", value=timeout)
