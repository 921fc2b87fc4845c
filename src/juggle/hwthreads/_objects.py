"""OS objects shared by software and hardware threads: mutex, semaphore, condition, mailbox.

These are the synchronisation objects of ReconOS's Table 1, kept by the "kernel" (this process)
and used by software threads directly and by hardware threads through their delegates. Each
blocking call is built on a non-blocking twin that raises :class:`~juggle.errors.WouldBlock`
(trio's habit); blocked callers queue first-come first-served and are served by hand-over, so
an unlock, post or put made while someone waits goes to the oldest waiter and cannot be lost.

Every object offers ``statistics()`` (a frozen snapshot) and a ``__repr__`` with live state.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from juggle.errors import HwThreadArgumentError, MutexOwnerError, WouldBlock
from juggle.hwthreads._waiting import WaitQueue, current_owner, park_or_withdraw

T = TypeVar("T")


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and timeout < 0:
        raise HwThreadArgumentError(
            f'"timeout" must be >= 0 or None, got {timeout!r}', value=timeout
        )


@dataclass(frozen=True, slots=True)
class MutexStatistics:
    """Snapshot of a :class:`Mutex`."""

    name: str
    locked: bool
    owner: int | None
    waiting: int
    locks: int
    contended_locks: int
    releases: int


class Mutex:
    """A non-recursive, owner-checked lock with FIFO hand-over (eCos ``cyg_mutex``).

    ``unlock`` passes ownership straight to the oldest waiter. ``release`` (eCos
    ``cyg_mutex_release``) wakes every waiter without the lock: their ``lock`` returns False.
    The owner is the calling thread, or the hardware thread a delegate acts for.
    """

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._waiters: WaitQueue[bool] = WaitQueue()
        self._locks = 0
        self._contended = 0
        self._releases = 0

    @property
    def locked(self) -> bool:
        """True while some thread owns the mutex."""
        return self._owner is not None

    def owned_by_caller(self) -> bool:
        """True when the calling thread (or the thread its delegate serves) owns the mutex."""
        return self._owner == current_owner()

    def trylock(self) -> None:
        """Take the mutex if it is free.

        Raises:
            WouldBlock: the mutex is owned (by anyone, the caller included).
        """
        with self._lock:
            if self._owner is not None:
                raise WouldBlock(f"mutex {self.name!r} is locked", os_object=self.name)
            self._owner = current_owner()
            self._locks += 1

    def lock(self, timeout: float | None = None) -> bool:
        """Take the mutex, waiting in line; False when woken by :meth:`release` instead.

        Raises:
            MutexOwnerError: the caller already owns it (it would wait forever).
            OsCallTimeoutError: not acquired within ``timeout`` seconds.
            HwThreadArgumentError: ``timeout`` is negative.
        """
        _check_timeout(timeout)
        me = current_owner()
        with self._lock:
            if self._owner is None:
                self._owner = me
                self._locks += 1
                return True
            if self._owner == me:
                raise MutexOwnerError(
                    f"mutex {self.name!r} is already held by the caller", os_object=self.name
                )
            waiter = self._waiters.enqueue(tag=me)
            self._contended += 1
        got = park_or_withdraw(self._lock, self._waiters, waiter, timeout, "mutex lock")
        return bool(got)

    def unlock(self) -> None:
        """Give the mutex up; the oldest waiter, if any, owns it on return.

        Raises:
            MutexOwnerError: the caller does not own the mutex.
        """
        with self._lock:
            if self._owner != current_owner():
                raise MutexOwnerError(
                    f"mutex {self.name!r} is not held by the caller", os_object=self.name
                )
            waiter = self._waiters.pop_first()
            if waiter is None:
                self._owner = None
                return
            self._owner = waiter.tag
            self._locks += 1
            waiter.wake(True)

    def release(self) -> int:
        """Wake every waiter without giving it the mutex; returns how many were woken."""
        with self._lock:
            self._releases += 1
            return self._waiters.wake_all(False)

    def statistics(self) -> MutexStatistics:
        """A frozen snapshot of the mutex's state and counters."""
        with self._lock:
            return MutexStatistics(
                self.name,
                self._owner is not None,
                self._owner,
                len(self._waiters),
                self._locks,
                self._contended,
                self._releases,
            )

    def __repr__(self) -> str:
        state = "unlocked" if self._owner is None else f"locked by {self._owner}"
        label = f" {self.name!r}" if self.name else ""
        return f"<Mutex{label} {state} with {len(self._waiters)} waiting>"


@dataclass(frozen=True, slots=True)
class SemaphoreStatistics:
    """Snapshot of a :class:`Semaphore`."""

    name: str
    value: int
    waiting: int
    posts: int
    waits: int


class Semaphore:
    """A counting semaphore: ``post`` adds a token or hands it to the oldest waiter."""

    def __init__(self, value: int = 0, name: str = "") -> None:
        """Start with ``value`` tokens.

        Raises:
            HwThreadArgumentError: ``value`` is negative.
        """
        if value < 0:
            raise HwThreadArgumentError(f'"value" must be >= 0, got {value!r}', value=value)
        self.name = name
        self._lock = threading.Lock()
        self._value = value
        self._waiters: WaitQueue[bool] = WaitQueue()
        self._posts = 0
        self._waits = 0

    @property
    def value(self) -> int:
        """Tokens available now."""
        return self._value

    def post(self) -> None:
        """Add one token; if threads wait, the oldest one takes it at once."""
        with self._lock:
            self._posts += 1
            if self._waiters.wake_first(True):
                self._waits += 1
            else:
                self._value += 1

    def trywait(self) -> None:
        """Take a token if one is available.

        Raises:
            WouldBlock: no token is available.
        """
        with self._lock:
            if self._value == 0:
                raise WouldBlock(f"semaphore {self.name!r} is 0", os_object=self.name)
            self._value -= 1
            self._waits += 1

    def wait(self, timeout: float | None = None) -> None:
        """Take a token, waiting in line for a post when none is available.

        Raises:
            OsCallTimeoutError: no token within ``timeout`` seconds.
            HwThreadArgumentError: ``timeout`` is negative.
        """
        _check_timeout(timeout)
        with self._lock:
            if self._value > 0:
                self._value -= 1
                self._waits += 1
                return
            waiter = self._waiters.enqueue()
        park_or_withdraw(self._lock, self._waiters, waiter, timeout, "semaphore wait")

    def statistics(self) -> SemaphoreStatistics:
        """A frozen snapshot of the semaphore's value and counters."""
        with self._lock:
            return SemaphoreStatistics(
                self.name, self._value, len(self._waiters), self._posts, self._waits
            )

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<Semaphore{label} value {self._value} with {len(self._waiters)} waiting>"


@dataclass(frozen=True, slots=True)
class ConditionStatistics:
    """Snapshot of a :class:`Condition`."""

    name: str
    waiting: int
    signals: int
    broadcasts: int


class Condition:
    """A condition variable bound to one :class:`Mutex` (eCos ``cyg_cond``).

    ``wait`` queues the caller *before* unlocking the mutex, so a signal sent after the unlock
    always finds it (no lost wake-up); the caller holds the mutex again when ``wait`` returns.
    """

    def __init__(self, mutex: Mutex, name: str = "") -> None:
        self.name = name
        self.mutex = mutex
        self._lock = threading.Lock()
        self._waiters: WaitQueue[bool] = WaitQueue()
        self._signals = 0
        self._broadcasts = 0

    def wait(self, timeout: float | None = None) -> bool:
        """Release the mutex, sleep until signalled, retake the mutex.

        Returns False only when the mutex was :meth:`Mutex.release`-d while retaking it.

        Raises:
            MutexOwnerError: the caller does not hold the condition's mutex.
            OsCallTimeoutError: no signal within ``timeout`` s (the mutex is held again).
            HwThreadArgumentError: ``timeout`` is negative.
        """
        _check_timeout(timeout)
        with self._lock:
            if not self.mutex.owned_by_caller():
                raise MutexOwnerError(
                    f"condition {self.name!r}: mutex not held by caller", os_object=self.name
                )
            waiter = self._waiters.enqueue()
        self.mutex.unlock()
        try:
            park_or_withdraw(self._lock, self._waiters, waiter, timeout, "condition wait")
        finally:
            retaken = self.mutex.lock()
        return retaken

    def signal(self) -> bool:
        """Wake the oldest waiter; False when nobody waited."""
        with self._lock:
            self._signals += 1
            return self._waiters.wake_first(True)

    def broadcast(self) -> int:
        """Wake every waiter; returns how many were woken."""
        with self._lock:
            self._broadcasts += 1
            return self._waiters.wake_all(True)

    def statistics(self) -> ConditionStatistics:
        """A frozen snapshot of the waiters and counters."""
        with self._lock:
            return ConditionStatistics(
                self.name, len(self._waiters), self._signals, self._broadcasts
            )

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<Condition{label} with {len(self._waiters)} waiting on {self.mutex!r}>"


@dataclass(frozen=True, slots=True)
class MailboxStatistics:
    """Snapshot of a :class:`Mailbox`."""

    name: str
    size: int
    capacity: int
    waiting_getters: int
    waiting_putters: int
    puts: int
    gets: int


class Mailbox(Generic[T]):
    """A bounded FIFO message box (eCos ``cyg_mbox``): ``put`` waits when full, ``get`` when empty.

    Messages come out in the order their puts completed; a put made while getters wait is
    handed to the oldest getter, and a get from a full box admits the oldest waiting putter.
    """

    def __init__(self, capacity: int, name: str = "") -> None:
        """Hold at most ``capacity`` messages.

        Raises:
            HwThreadArgumentError: ``capacity`` is below 1.
        """
        if capacity < 1:
            raise HwThreadArgumentError(
                f'"capacity" must be >= 1, got {capacity!r}', value=capacity
            )
        self.name = name
        self.capacity = capacity
        self._lock = threading.Lock()
        self._items: deque[T] = deque()
        self._getters: WaitQueue[T] = WaitQueue()
        self._putters: WaitQueue[None] = WaitQueue()
        self._puts = 0
        self._gets = 0

    def __len__(self) -> int:
        return len(self._items)

    def _take(self) -> T:
        item = self._items.popleft()
        self._gets += 1
        putter = self._putters.pop_first()
        if putter is not None:  # the box was full: admit the oldest waiting putter
            self._items.append(cast(T, putter.payload))
            self._puts += 1
            putter.wake(None)
        return item

    def _offer(self, item: T) -> bool:
        getter = self._getters.pop_first()
        if getter is not None:  # getters wait only while the box is empty
            self._puts += 1
            self._gets += 1
            getter.wake(item)
            return True
        if len(self._items) < self.capacity:
            self._items.append(item)
            self._puts += 1
            return True
        return False

    def tryget(self) -> T:
        """Take the oldest message if there is one.

        Raises:
            WouldBlock: the mailbox is empty.
        """
        with self._lock:
            if not self._items:
                raise WouldBlock(f"mailbox {self.name!r} is empty", os_object=self.name)
            return self._take()

    def get(self, timeout: float | None = None) -> T:
        """Take the oldest message, waiting in line while the mailbox is empty.

        Raises:
            OsCallTimeoutError: nothing arrived within ``timeout`` seconds.
            HwThreadArgumentError: ``timeout`` is negative.
        """
        _check_timeout(timeout)
        with self._lock:
            if self._items:
                return self._take()
            waiter = self._getters.enqueue()
        return cast(T, park_or_withdraw(self._lock, self._getters, waiter, timeout, "mbox get"))

    def tryput(self, item: T) -> None:
        """Deposit ``item`` if there is room (or a getter waiting).

        Raises:
            WouldBlock: the mailbox is full.
        """
        with self._lock:
            if not self._offer(item):
                raise WouldBlock(f"mailbox {self.name!r} is full", os_object=self.name)

    def put(self, item: T, timeout: float | None = None) -> None:
        """Deposit ``item``, waiting in line while the mailbox is full.

        Raises:
            OsCallTimeoutError: no room within ``timeout`` seconds (the item was not put).
            HwThreadArgumentError: ``timeout`` is negative.
        """
        _check_timeout(timeout)
        with self._lock:
            if self._offer(item):
                return
            waiter = self._putters.enqueue()
            waiter.payload = item
        park_or_withdraw(self._lock, self._putters, waiter, timeout, "mbox put")

    def statistics(self) -> MailboxStatistics:
        """A frozen snapshot of fill level, waiters and counters."""
        with self._lock:
            return MailboxStatistics(
                self.name,
                len(self._items),
                self.capacity,
                len(self._getters),
                len(self._putters),
                self._puts,
                self._gets,
            )

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return (
            f"<Mailbox{label} {len(self._items)}/{self.capacity} with "
            f"{len(self._getters)} waiting getters, {len(self._putters)} waiting putters>"
        )
