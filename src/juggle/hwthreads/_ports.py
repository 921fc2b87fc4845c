"""How a thread's calls are executed in each tier, and what each execution costs.

A *port* is the tier-specific half of running a thread body: the driver in
:mod:`juggle.hwthreads._thread` steps the body and hands every call to its port.

* :class:`SoftwarePort`: calls run on the thread's own Python thread; the body's work between
  yields and each call's own time are **measured**.
* :class:`HardwarePort`: kernel calls cross the OSIF to a :class:`Delegate` (the round trip,
  less any time the delegate waited inside the call, is **measured**: it is CPU work on the
  thread's behalf), memory calls are bus transactions and the body's declared work is user
  logic, both in **modeled** fabric cycles, like the OSIF transfers.

Time spent waiting inside a blocking call (for a token, a message, a lock) is kept apart in
``blocked_ns``: it is not work of the thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from juggle.hwthreads._calls import CallEnv, KernelCall, MemoryCall
from juggle.hwthreads._delegate import Delegate, Osif
from juggle.hwthreads._slots import ThreadSlot
from juggle.hwthreads._timing import HwTiming
from juggle.hwthreads._waiting import current_meter

Result = tuple[Any, Exception | None]
"""A call's outcome: its value, or the exception to throw into the body."""


class Account:
    """Counters written by the thread's driver only."""

    __slots__ = (
        "blocked_ns",
        "kernel_calls",
        "measured_ns",
        "memory_calls",
        "modeled_cycles",
        "os_calls",
        "suspensions",
    )

    def __init__(self) -> None:
        self.os_calls = 0
        self.kernel_calls = 0
        self.memory_calls = 0
        self.measured_ns = 0
        self.modeled_cycles = 0
        self.blocked_ns = 0
        self.suspensions = 0


class Port(Protocol):
    """How a driver executes calls in one tier."""

    def open(self) -> None:
        """Enter the tier (start the delegate, restore the context)."""
        ...

    def segment(self, ns: int) -> None:
        """The body ran ``ns`` host nanoseconds between two yields."""
        ...

    def kernel(self, call: KernelCall) -> Result:
        """Execute a kernel call."""
        ...

    def memory(self, call: MemoryCall) -> Result:
        """Execute a memory access."""
        ...

    def busy(self, cycles: int) -> None:
        """The body declared ``cycles`` of its own work."""
        ...

    def saved(self, nbytes: int) -> None:
        """The body's context (``nbytes``) was saved at a yield point."""
        ...

    def close(self) -> None:
        """Leave the tier (stop the delegate, give the slot back)."""
        ...


def execute_here(call: KernelCall | MemoryCall, env: CallEnv, account: Account) -> Result:
    """Run ``call`` on the calling Python thread; its time minus blocked time is measured."""
    meter = current_meter()
    blocked_before = meter.blocked_ns
    start = time.perf_counter_ns()
    value: Any = None
    error: Exception | None = None
    try:
        value = call.execute(env)
    except Exception as exc:  # thrown into the body, which may catch it
        error = exc
    blocked = meter.blocked_ns - blocked_before
    account.measured_ns += time.perf_counter_ns() - start - blocked
    account.blocked_ns += blocked
    return value, error


class SoftwarePort:
    """Software tier: calls run on the thread itself; everything is measured."""

    def __init__(self, env: CallEnv, account: Account) -> None:
        self._env = env
        self._account = account

    def open(self) -> None:
        pass

    def segment(self, ns: int) -> None:
        self._account.measured_ns += ns

    def kernel(self, call: KernelCall) -> Result:
        return execute_here(call, self._env, self._account)

    def memory(self, call: MemoryCall) -> Result:
        return execute_here(call, self._env, self._account)

    def busy(self, cycles: int) -> None:
        pass  # in software the work itself was measured

    def saved(self, nbytes: int) -> None:
        pass

    def close(self) -> None:
        pass


class HardwarePort:
    """Hardware tier: kernel calls through OSIF and delegate; fabric work in modeled cycles."""

    def __init__(
        self,
        name: str,
        env: CallEnv,
        account: Account,
        owner_token: int,
        timing: HwTiming,
        slot: ThreadSlot,
        give_back: Callable[[ThreadSlot], None],
        restore_bytes: int,
    ) -> None:
        self._env = env
        self._account = account
        self._timing = timing
        self._slot = slot
        self._give_back = give_back
        self._restore_bytes = restore_bytes
        self._osif = Osif()
        self.delegate = Delegate(name, self._osif, env, owner_token)

    def open(self) -> None:
        self.delegate.start()
        self._account.modeled_cycles += self._timing.burst_cycles(self._restore_bytes)

    def segment(self, ns: int) -> None:
        pass  # simulating the fabric's logic costs host time that is not the thread's time

    def kernel(self, call: KernelCall) -> Result:
        start = time.perf_counter_ns()
        reply = self._osif.call(call)
        self._account.measured_ns += time.perf_counter_ns() - start - reply.blocked_ns
        self._account.blocked_ns += reply.blocked_ns
        self._account.modeled_cycles += self._timing.osif_request_cycles(
            call.request_words
        ) + self._timing.osif_response_cycles(call.response_words)
        return reply.value, reply.error

    def memory(self, call: MemoryCall) -> Result:
        self._account.modeled_cycles += call.bus_cycles(self._timing)
        try:
            return call.execute(self._env), None
        except Exception as exc:
            return None, exc

    def busy(self, cycles: int) -> None:
        self._account.modeled_cycles += cycles

    def saved(self, nbytes: int) -> None:
        self._account.modeled_cycles += self._timing.burst_cycles(nbytes)

    def close(self) -> None:
        try:
            self._osif.detach()
            if self.delegate.started:
                self.delegate.join()
        finally:
            self._give_back(self._slot)
