"""Hardware threads: one description, run in a fabric slot or in software, moved between them.

A :class:`ThreadDescription` is written once, as a generator that yields OS calls (see
:mod:`juggle.hwthreads._calls`). A :class:`HardwareThread` is one instance of it, with its own
resource table and init data, managed like ReconOS's runtime manages a thread:

* in **hardware** a Python thread plays the fabric: it steps the body, performs memory accesses
  as a bus master and counts modeled cycles, and relays kernel calls through its OSIF to a
  :class:`~juggle.hwthreads.Delegate` (one per running hardware thread);
* in **software** a Python thread steps the same body and executes the same calls directly,
  its time measured.

Lifecycle (an enum with explicit transitions)::

    INIT ──start──▶ RUNNING_HW / RUNNING_SW ──body ends──▶ STOPPED   (or FAILED if it raised)
                        │ suspend()
                        ▼
                    SUSPENDING ──body reaches a YieldPoint: context saved──▶ SUSPENDED
                                                                               │ resume(tier)
                                                    RUNNING_HW / RUNNING_SW ◀──┘

Each thread accounts its time on a combined timeline: *measured* nanoseconds (software work,
and the CPU side of a hardware thread's calls: OSIF hand-offs and delegate) and *modeled*
fabric cycles (user logic, bus transfers, OSIF transfers). Time spent waiting inside a blocking
call is kept apart (``blocked_ns``) so it is not mistaken for work.
"""

from __future__ import annotations

import enum
import inspect
import itertools
import pickle
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from juggle.errors import (
    HwThreadArgumentError,
    NoFreeSlotError,
    OsCallTimeoutError,
    ThreadFailedError,
    ThreadStateError,
)
from juggle.hwthreads._calls import (
    Busy,
    CallEnv,
    CheckSignal,
    KernelCall,
    MemoryCall,
    OsCall,
    ResourceTable,
    ThreadExit,
    YieldPoint,
)
from juggle.hwthreads._delegate import Delegate
from juggle.hwthreads._ports import Account, HardwarePort, Port, SoftwarePort
from juggle.hwthreads._slots import ThreadSlot
from juggle.hwthreads._waiting import act_for

if TYPE_CHECKING:
    from juggle.hwthreads._runtime import ThreadRuntime

Body = Callable[[Any], Generator[OsCall, Any, Any]]


class ThreadTier(enum.Enum):
    """Where a thread runs: in a hardware slot or on the CPU (a thread's two places, not a
    service's three tiers: software, native, hardware)."""

    HARDWARE = "hw"
    SOFTWARE = "sw"


class ThreadState(enum.Enum):
    """Lifecycle states of a hardware thread (ReconOS runtime states, plus FAILED)."""

    INIT = "INIT"
    RUNNING_HW = "RUNNING_HW"
    RUNNING_SW = "RUNNING_SW"
    SUSPENDING = "SUSPENDING"
    SUSPENDED = "SUSPENDED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"


_RUNNING = {
    ThreadTier.HARDWARE: ThreadState.RUNNING_HW,
    ThreadTier.SOFTWARE: ThreadState.RUNNING_SW,
}

TRANSITIONS: dict[ThreadState, frozenset[ThreadState]] = {
    ThreadState.INIT: frozenset({ThreadState.RUNNING_HW, ThreadState.RUNNING_SW}),
    ThreadState.RUNNING_HW: frozenset(
        {ThreadState.SUSPENDING, ThreadState.STOPPED, ThreadState.FAILED}
    ),
    ThreadState.RUNNING_SW: frozenset(
        {ThreadState.SUSPENDING, ThreadState.STOPPED, ThreadState.FAILED}
    ),
    ThreadState.SUSPENDING: frozenset(
        {ThreadState.SUSPENDED, ThreadState.STOPPED, ThreadState.FAILED}
    ),
    ThreadState.SUSPENDED: frozenset({ThreadState.RUNNING_HW, ThreadState.RUNNING_SW}),
    ThreadState.STOPPED: frozenset(),
    ThreadState.FAILED: frozenset(),
}
"""The legal lifecycle transitions: ``TRANSITIONS[old]`` holds every allowed new state."""

_FINAL = frozenset({ThreadState.STOPPED, ThreadState.FAILED})
_AT_REST = _FINAL | {ThreadState.SUSPENDED}


@dataclass(frozen=True, slots=True)
class ThreadDescription:
    """A thread written once: ``name`` is its design (what a slot must host), ``body`` the FSM.

    ``body(context)`` returns a generator yielding OS calls; ``context`` is None on a fresh
    start and the object saved at the last :class:`YieldPoint` on a resume.
    """

    name: str
    body: Body

    def __post_init__(self) -> None:
        """Raises: HwThreadArgumentError: empty name or a body that is not callable."""
        if not self.name:
            raise HwThreadArgumentError('"name" must be a non-empty string', value=self.name)
        if not callable(self.body):
            raise HwThreadArgumentError(
                f'"body" must be callable, got {self.body!r}', thread=self.name
            )


@dataclass(frozen=True, slots=True)
class ThreadStatistics:
    """Snapshot of a :class:`HardwareThread`; ``timeline_ns`` = measured + modeled time."""

    name: str
    state: ThreadState
    tier: ThreadTier | None
    slot: str | None
    priority: int | None
    os_calls: int
    kernel_calls: int
    memory_calls: int
    measured_ns: int
    modeled_cycles: int
    blocked_ns: int
    suspensions: int
    context_bytes: int
    timeline_ns: float


@dataclass(frozen=True, slots=True)
class _Exited:
    value: Any


@dataclass(frozen=True, slots=True)
class _Suspended:
    context: bytes


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


_Outcome = _Exited | _Suspended | _Failed

_tokens = itertools.count(-1, -1)  # owner tokens; negative so they never clash with thread ids


class HardwareThread:
    """One instance of a :class:`ThreadDescription`, with its resource table and init data.

    Created by :class:`ThreadRuntime`; runs in a hardware slot or in software and can be
    suspended at a :class:`YieldPoint` and resumed in another slot or tier.
    """

    def __init__(
        self,
        runtime: ThreadRuntime,
        description: ThreadDescription,
        resources: Sequence[object],
        init_data: object,
        priority: int | None,
        name: str,
    ) -> None:
        self.runtime = runtime
        self.description = description
        self.priority = priority
        self.name = name
        self._env = CallEnv(ResourceTable(resources), init_data)
        self._token = next(_tokens)
        self._cond = threading.Condition()
        self._state = ThreadState.INIT
        self._tier: ThreadTier | None = None
        self._slot: ThreadSlot | None = None
        self._context: bytes | None = None
        self._signal = False
        self._result: Any = None
        self._error: BaseException | None = None
        self._account = Account()
        self._driver: threading.Thread | None = None
        self.delegate: Delegate | None = None

    # -- state --------------------------------------------------------------------------------

    @property
    def state(self) -> ThreadState:
        """The current lifecycle state."""
        return self._state

    @property
    def slot(self) -> ThreadSlot | None:
        """The slot the thread runs in (None unless RUNNING_HW or SUSPENDING in hardware)."""
        return self._slot

    @property
    def table(self) -> ResourceTable:
        """This instance's resource table."""
        return self._env.table

    def _set_state(self, new: ThreadState) -> None:
        if new not in TRANSITIONS[self._state]:
            raise ThreadStateError(
                f"thread {self.name!r}: {self._state.name} -> {new.name} is not allowed",
                thread=self.name,
            )
        self._state = new
        self._cond.notify_all()

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, tier: ThreadTier | None = None) -> ThreadTier:
        """Start the thread in ``tier`` (None: hardware if a compatible slot is free).

        Returns the tier it runs in.

        Raises:
            ThreadStateError: the thread is not in INIT.
            NoFreeSlotError: ``tier`` is HARDWARE and no compatible slot is free.
        """
        with self._cond:
            if self._state is not ThreadState.INIT:
                raise ThreadStateError(
                    f"start: thread {self.name!r} is {self._state.name}", thread=self.name
                )
            return self._launch(tier)

    def resume(self, tier: ThreadTier | None = None) -> ThreadTier:
        """Continue a SUSPENDED thread from its saved context in ``tier`` (None: auto).

        A hardware resume gets a slot afresh, so it may be another slot than before.

        Raises:
            ThreadStateError: the thread is not SUSPENDED.
            NoFreeSlotError: ``tier`` is HARDWARE and no compatible slot is free.
        """
        self._require_suspended()
        self._join_driver(None)  # the previous run's driver is past its last step
        with self._cond:
            self._require_suspended()
            return self._launch(tier)

    def _require_suspended(self) -> None:
        if self._state is not ThreadState.SUSPENDED:
            raise ThreadStateError(
                f"resume: thread {self.name!r} is {self._state.name}", thread=self.name
            )

    def suspend(self, timeout: float | None = None) -> ThreadState:
        """Ask the thread to stop at its next yield point and wait until it has.

        Returns SUSPENDED, or STOPPED/FAILED if the body ended before reaching a yield point.

        Raises:
            ThreadStateError: the thread is not running (or already suspending).
            OsCallTimeoutError: not at rest within ``timeout`` s (the request stays pending).
        """
        with self._cond:
            if self._state in (ThreadState.RUNNING_HW, ThreadState.RUNNING_SW):
                self._set_state(ThreadState.SUSPENDING)
            elif self._state is not ThreadState.SUSPENDING:
                raise ThreadStateError(
                    f"suspend: thread {self.name!r} is {self._state.name}", thread=self.name
                )
            if not self._cond.wait_for(lambda: self._state in _AT_REST, timeout):
                raise OsCallTimeoutError(
                    f"thread {self.name!r} did not reach a yield point", thread=self.name
                )
            state = self._state
        self._join_driver(timeout)
        return state

    def join(self, timeout: float | None = None) -> Any:
        """Wait for the thread to end and return its exit value.

        Raises:
            ThreadFailedError: the body raised (the exception is the ``__cause__``).
            OsCallTimeoutError: it did not end within ``timeout`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._state in _FINAL, timeout):
                raise OsCallTimeoutError(f"thread {self.name!r} did not end", thread=self.name)
        self._join_driver(timeout)
        if self._state is ThreadState.FAILED:
            raise ThreadFailedError(
                f"thread {self.name!r} failed: {self._error!r}", thread=self.name
            ) from self._error
        return self._result

    def signal(self) -> None:
        """Raise the thread's signal; its next :class:`CheckSignal` reads and clears it."""
        with self._cond:
            self._signal = True

    # -- driving the body ---------------------------------------------------------------------

    def _launch(self, tier: ThreadTier | None) -> ThreadTier:
        slot = None
        if tier is not ThreadTier.SOFTWARE:
            slot = self.runtime.slots_acquire(self.priority, self.description.name)
            if slot is None and tier is ThreadTier.HARDWARE:
                raise NoFreeSlotError(
                    f"no free slot hosts design {self.description.name!r}",
                    design=self.description.name,
                )
        actual = ThreadTier.SOFTWARE if slot is None else ThreadTier.HARDWARE
        port: Port
        if slot is None:
            port = SoftwarePort(self._env, self._account)
            self.delegate = None
        else:
            port = hw = HardwarePort(
                self.name,
                self._env,
                self._account,
                self._token,
                self.runtime.timing,
                slot,
                self.runtime.slots_release,
                0 if self._context is None else len(self._context),
            )
            self.delegate = hw.delegate
        self._set_state(_RUNNING[actual])
        self._tier, self._slot = actual, slot
        self._driver = threading.Thread(
            target=self._run, args=(port,), name=f"{actual.value}:{self.name}", daemon=True
        )
        self._driver.start()
        return actual

    def _run(self, port: Port) -> None:
        act_for(self._token)
        outcome: _Outcome
        try:
            port.open()
            outcome = self._drive(port)
        except BaseException as exc:  # the body failed; report it through join
            outcome = _Failed(exc)
        try:
            port.close()
        except BaseException as exc:
            if not isinstance(outcome, _Failed):
                outcome = _Failed(exc)
        self._finish(outcome)

    def _drive(self, port: Port) -> _Outcome:
        context = None if self._context is None else pickle.loads(self._context)
        body = self.description.body(context)
        if not inspect.isgenerator(body):
            raise HwThreadArgumentError(
                f"body of {self.description.name!r} is no generator", thread=self.description.name
            )
        send: Any = None
        error: Exception | None = None
        while True:
            start = time.perf_counter_ns()
            try:
                call = body.send(send) if error is None else body.throw(error)
            except StopIteration as stop:
                port.segment(time.perf_counter_ns() - start)
                return _Exited(stop.value)
            port.segment(time.perf_counter_ns() - start)
            self._account.os_calls += 1
            send, error = None, None
            if isinstance(call, ThreadExit):
                self._account.kernel_calls += 1
                port.kernel(call)
                body.close()
                return _Exited(call.value)
            if isinstance(call, KernelCall):
                self._account.kernel_calls += 1
                send, error = port.kernel(call)
            elif isinstance(call, MemoryCall):
                self._account.memory_calls += 1
                send, error = port.memory(call)
            elif isinstance(call, Busy):
                port.busy(call.cycles)
            elif isinstance(call, CheckSignal):
                send = self._take_signal()
            elif isinstance(call, YieldPoint):
                if self._state is ThreadState.SUSPENDING:
                    saved = pickle.dumps(call.context)
                    port.saved(len(saved))
                    body.close()
                    return _Suspended(saved)
            else:
                error = HwThreadArgumentError(f"thread body yielded {call!r}, not an OsCall")

    def _take_signal(self) -> bool:
        with self._cond:
            raised, self._signal = self._signal, False
            return raised

    def _finish(self, outcome: _Outcome) -> None:
        with self._cond:
            self._slot = None
            if isinstance(outcome, _Suspended):
                self._context = outcome.context
                self._account.suspensions += 1
                self._set_state(ThreadState.SUSPENDED)
            elif isinstance(outcome, _Exited):
                self._result = outcome.value
                self._set_state(ThreadState.STOPPED)
            else:
                self._error = outcome.error
                self._set_state(ThreadState.FAILED)

    def _join_driver(self, timeout: float | None) -> None:
        driver = self._driver
        if driver is not None and driver is not threading.current_thread():
            driver.join(timeout)

    # -- snapshots ----------------------------------------------------------------------------

    def statistics(self) -> ThreadStatistics:
        """A frozen snapshot: state, tier, slot, call counts and time (measured / modeled)."""
        a = self._account
        modeled_ns = self.runtime.timing.seconds(a.modeled_cycles) * 1e9
        with self._cond:
            return ThreadStatistics(
                self.name,
                self._state,
                self._tier,
                None if self._slot is None else self._slot.name,
                self.priority,
                a.os_calls,
                a.kernel_calls,
                a.memory_calls,
                a.measured_ns,
                a.modeled_cycles,
                a.blocked_ns,
                a.suspensions,
                0 if self._context is None else len(self._context),
                a.measured_ns + modeled_ns,
            )

    def __repr__(self) -> str:
        where = f" in {self._slot.name}" if self._slot is not None else ""
        return (
            f"<HardwareThread {self.name!r} {self._state.name}{where}, "
            f"{self._account.os_calls} calls>"
        )
