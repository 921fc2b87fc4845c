"""OS-call requests: what a thread body yields, like a VHDL FSM calling ``reconos.*`` procedures.

A thread body is a generator. Each ``yield`` hands the runtime one request object and gets the
call's result back::

    def adder(context):
        count = yield GetInitData()
        for _ in range(count):
            value = yield MboxGet(0)          # handle 0 of this instance's resource table
            yield MboxPut(1, value + 1)
        yield ThreadExit(0)

Requests name OS objects by small integer *handles*, indexes into the running instance's
:class:`ResourceTable`, so one description serves many instances with different objects.

Three families: :class:`KernelCall` (the OS functions of Table 1; a hardware thread's delegate
executes them on the CPU), :class:`MemoryCall` (executed by the thread itself as a bus master)
and the runtime's own control requests (:class:`Busy`, :class:`YieldPoint`,
:class:`CheckSignal`, :class:`ThreadExit`). Software and hardware threads execute kernel and
memory calls through the same :meth:`OsCall.execute`.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, cast

import numpy as np
import numpy.typing as npt

from juggle.errors import HandleError, HwThreadArgumentError, WouldBlock
from juggle.hwthreads._memory import WORD_BYTES, SharedMemory
from juggle.hwthreads._objects import Condition, Mailbox, Mutex, Semaphore
from juggle.hwthreads._timing import HwTiming

ObjT = TypeVar("ObjT")


class WouldBlockResult(enum.Enum):
    """The result a thread body gets from a ``Mbox*try*`` call that could not proceed."""

    WOULD_BLOCK = "would block"


WOULD_BLOCK: Literal[WouldBlockResult.WOULD_BLOCK] = WouldBlockResult.WOULD_BLOCK


class ResourceTable:
    """A delegate's table of OS objects: handle ``i`` names ``resources[i]`` (ReconOS sec. 3)."""

    def __init__(self, resources: Sequence[object]) -> None:
        self._resources = tuple(resources)

    def __len__(self) -> int:
        return len(self._resources)

    def lookup(self, handle: int, kind: type[ObjT]) -> ObjT:
        """The object behind ``handle``, checked to be a ``kind``.

        Raises:
            HandleError: no such handle, or it names another kind of object.
        """
        if not 0 <= handle < len(self._resources):
            raise HandleError(
                f"handle {handle!r} is not in a table of {len(self)} objects", handle=handle
            )
        obj = self._resources[handle]
        if not isinstance(obj, kind):
            raise HandleError(
                f"handle {handle} names a {type(obj).__name__}, not a {kind.__name__}",
                handle=handle,
            )
        return obj

    def __repr__(self) -> str:
        names = ", ".join(f"{i}: {type(r).__name__}" for i, r in enumerate(self._resources))
        return f"<ResourceTable {{{names}}}>"


@dataclass(frozen=True, slots=True)
class CallEnv:
    """What executing a call may touch: the instance's table and init data."""

    table: ResourceTable
    init_data: object


class OsCall(ABC):  # noqa: B024 - a marker base; the families below add the methods
    """Base of everything a thread body may yield."""

    __slots__ = ()


class KernelCall(OsCall):
    """An OS function of ReconOS's Table 1; hardware threads relay it through their delegate.

    ``request_words``/``response_words`` are the 32-bit words crossing the OSIF (opcode and
    arguments in, result out), used for the modeled hardware-side cycles.
    """

    __slots__ = ()
    request_words: ClassVar[int] = 2
    response_words: ClassVar[int] = 1

    @abstractmethod
    def execute(self, env: CallEnv) -> Any:
        """Perform the call on the instance's objects and return the body's result."""


class MemoryCall(OsCall):
    """A shared-memory access; hardware threads perform it as bus masters (modeled cycles)."""

    __slots__ = ()

    @abstractmethod
    def execute(self, env: CallEnv) -> Any:
        """Perform the access and return the body's result."""

    @abstractmethod
    def bus_cycles(self, timing: HwTiming) -> int:
        """Modeled bus cycles of this access."""


# -- initialisation and termination ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetInitData(KernelCall):
    """``reconos.get_init_data()``: the instance's init data."""

    request_words: ClassVar[int] = 1

    def execute(self, env: CallEnv) -> Any:
        return env.init_data


@dataclass(frozen=True, slots=True)
class ThreadExit(KernelCall):
    """``reconos.thread_exit()``: end the thread with ``value`` (what ``join`` returns)."""

    value: object = 0
    response_words: ClassVar[int] = 0

    def execute(self, env: CallEnv) -> Any:
        return None


# -- semaphores, mutexes, condition variables, mailboxes -------------------------------------


@dataclass(frozen=True, slots=True)
class SemPost(KernelCall):
    """``reconos.sem_post(h)``."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        env.table.lookup(self.handle, Semaphore).post()


@dataclass(frozen=True, slots=True)
class SemWait(KernelCall):
    """``reconos.sem_wait(h)``: blocks until a token is available."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        env.table.lookup(self.handle, Semaphore).wait()


@dataclass(frozen=True, slots=True)
class MutexLock(KernelCall):
    """``reconos.mutex_lock(h)``: True once held, False if the mutex was released meanwhile."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        return env.table.lookup(self.handle, Mutex).lock()


@dataclass(frozen=True, slots=True)
class MutexTrylock(KernelCall):
    """``reconos.mutex_trylock(h)``: True if taken, False if it was locked (never blocks)."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        try:
            env.table.lookup(self.handle, Mutex).trylock()
        except WouldBlock:
            return False
        return True


@dataclass(frozen=True, slots=True)
class MutexUnlock(KernelCall):
    """``reconos.mutex_unlock(h)``."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        env.table.lookup(self.handle, Mutex).unlock()


@dataclass(frozen=True, slots=True)
class MutexRelease(KernelCall):
    """``reconos.mutex_release(h)``: wake all waiters without the lock; returns how many."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        return env.table.lookup(self.handle, Mutex).release()


@dataclass(frozen=True, slots=True)
class CondWait(KernelCall):
    """``reconos.cond_wait(h)``: release the condition's mutex, wait, retake it."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        return env.table.lookup(self.handle, Condition).wait()


@dataclass(frozen=True, slots=True)
class CondSignal(KernelCall):
    """``reconos.cond_signal(h)``: wake the oldest waiter."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        return env.table.lookup(self.handle, Condition).signal()


@dataclass(frozen=True, slots=True)
class CondBroadcast(KernelCall):
    """``reconos.cond_broadcast(h)``: wake every waiter."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        return env.table.lookup(self.handle, Condition).broadcast()


@dataclass(frozen=True, slots=True)
class MboxGet(KernelCall):
    """``reconos.mbox_get(h)``: the oldest message, waiting while the mailbox is empty."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        return env.table.lookup(self.handle, Mailbox).get()


@dataclass(frozen=True, slots=True)
class MboxTryget(KernelCall):
    """``reconos.mbox_tryget(h)``: the oldest message or :data:`WOULD_BLOCK` (never blocks)."""

    handle: int

    def execute(self, env: CallEnv) -> Any:
        try:
            return env.table.lookup(self.handle, Mailbox).tryget()
        except WouldBlock:
            return WOULD_BLOCK


@dataclass(frozen=True, slots=True)
class MboxPut(KernelCall):
    """``reconos.mbox_put(h, msg)``: deposit, waiting while the mailbox is full."""

    handle: int
    message: object
    request_words: ClassVar[int] = 3

    def execute(self, env: CallEnv) -> Any:
        env.table.lookup(self.handle, Mailbox).put(self.message)


@dataclass(frozen=True, slots=True)
class MboxTryput(KernelCall):
    """``reconos.mbox_tryput(h, msg)``: True if deposited, False if full (never blocks)."""

    handle: int
    message: object
    request_words: ClassVar[int] = 3

    def execute(self, env: CallEnv) -> Any:
        try:
            env.table.lookup(self.handle, Mailbox).tryput(self.message)
        except WouldBlock:
            return False
        return True


# -- memory ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemRead(MemoryCall):
    """``reconos.read(addr)``: one 32-bit word of shared memory ``handle``."""

    handle: int
    address: int

    def execute(self, env: CallEnv) -> Any:
        return env.table.lookup(self.handle, SharedMemory).read(self.address)

    def bus_cycles(self, timing: HwTiming) -> int:
        return timing.bus_read_cycles


@dataclass(frozen=True, slots=True)
class MemWrite(MemoryCall):
    """``reconos.write(addr, value)``: store one 32-bit word."""

    handle: int
    address: int
    value: int

    def execute(self, env: CallEnv) -> Any:
        env.table.lookup(self.handle, SharedMemory).write(self.address, self.value)

    def bus_cycles(self, timing: HwTiming) -> int:
        return timing.bus_write_cycles


@dataclass(frozen=True, slots=True)
class BurstRead(MemoryCall):
    """``reconos.read_burst(addr, n)``: ``nwords`` words as a uint32 array (a copy)."""

    handle: int
    address: int
    nwords: int

    def execute(self, env: CallEnv) -> Any:
        return env.table.lookup(self.handle, SharedMemory).read_burst(self.address, self.nwords)

    def bus_cycles(self, timing: HwTiming) -> int:
        return timing.burst_cycles(self.nwords * WORD_BYTES)


@dataclass(frozen=True, slots=True, eq=False)
class BurstWrite(MemoryCall):
    """``reconos.write_burst(addr, data)``: store the words of ``data``."""

    handle: int
    address: int
    data: npt.NDArray[np.uint32]

    def execute(self, env: CallEnv) -> Any:
        env.table.lookup(self.handle, SharedMemory).write_burst(self.address, self.data)

    def bus_cycles(self, timing: HwTiming) -> int:
        return timing.burst_cycles(int(np.asarray(self.data).size) * WORD_BYTES)


# -- runtime control ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Busy(OsCall):
    """The thread's own user-logic work: ``cycles`` modeled fabric cycles (hardware only).

    In software the work between two yields is measured instead, so this counts nothing.
    """

    cycles: int

    def __post_init__(self) -> None:
        """Raises: HwThreadArgumentError: ``cycles`` is negative."""
        if self.cycles < 0:
            raise HwThreadArgumentError(
                f'"cycles" must be >= 0, got {self.cycles!r}', value=self.cycles
            )


@dataclass(frozen=True, slots=True)
class YieldPoint(OsCall):
    """A point where the thread may be suspended (ReconOS ``thread_yield``).

    If a suspend is pending, the runtime saves ``context`` (pickled), stops the body here and
    later restarts the body with the restored context as its argument; otherwise the call
    returns None and the body goes on. The body must not hold a mutex across a yield point
    it may be suspended at if it is to resume in software.
    """

    context: object = None


@dataclass(frozen=True, slots=True)
class CheckSignal(OsCall):
    """True if the thread was :meth:`~juggle.hwthreads.HardwareThread.signal`-led since the
    last check (the check clears the signal)."""


def as_words(data: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    """``data`` as a 1-D uint32 array (a helper for :class:`BurstWrite` payloads)."""
    return cast(npt.NDArray[np.uint32], np.ascontiguousarray(data, dtype=np.uint32).reshape(-1))
