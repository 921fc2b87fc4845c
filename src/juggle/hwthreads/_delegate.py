"""The OSIF and the delegate: how a hardware thread's OS calls reach the kernel.

A hardware thread cannot call the kernel itself. It writes a request into its OS interface
(OSIF) and waits; its *delegate*, an ordinary software thread on the CPU, picks the request up,
executes the kernel function on the hardware thread's behalf (so to the kernel it looks like a
software thread) and writes the result back (ReconOS sec. 3, Fig. 2-3). The delegate resolves
handles through the instance's :class:`~juggle.hwthreads.ResourceTable`.

Here the OSIF is a pair of one-slot registers (queues) between the thread that plays the
fabric and the delegate thread; the hand-offs between the two are real thread switches on this
machine, which is what the OS-call benchmark measures.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from juggle.hwthreads._calls import CallEnv, KernelCall, ThreadExit
from juggle.hwthreads._waiting import act_for, current_meter


@dataclass(frozen=True, slots=True)
class Reply:
    """What the delegate writes back: the result or the error, and how long the call waited."""

    value: Any
    error: Exception | None
    blocked_ns: int


class Osif:
    """The request/reply registers between a hardware thread and its delegate."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[KernelCall | None] = queue.SimpleQueue()
        self._replies: queue.SimpleQueue[Reply] = queue.SimpleQueue()

    def call(self, request: KernelCall) -> Reply:
        """Hardware side: raise a request and wait for the delegate's reply."""
        self._requests.put(request)
        return self._replies.get()

    def next_request(self) -> KernelCall | None:
        """Delegate side: wait for the next request (None: the thread left the slot)."""
        return self._requests.get()

    def reply(self, reply: Reply) -> None:
        """Delegate side: hand the result back."""
        self._replies.put(reply)

    def detach(self) -> None:
        """Hardware side: tell the delegate the thread left its slot."""
        self._requests.put(None)


@dataclass(frozen=True, slots=True)
class DelegateStatistics:
    """Snapshot of a :class:`Delegate`: calls served and where its time went (measured)."""

    name: str
    calls: int
    service_ns: int
    blocked_ns: int
    alive: bool


class Delegate:
    """The software thread serving one running hardware thread's kernel calls."""

    def __init__(self, name: str, osif: Osif, env: CallEnv, owner_token: int) -> None:
        self.name = name
        self._osif = osif
        self._env = env
        self._token = owner_token
        self._calls = 0
        self._service_ns = 0
        self._blocked_ns = 0
        self._thread = threading.Thread(target=self._serve, name=f"delegate:{name}", daemon=True)

    def start(self) -> None:
        """Start serving requests."""
        self._thread.start()

    @property
    def started(self) -> bool:
        """True once :meth:`start` ran."""
        return self._thread.ident is not None

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the delegate to end; True when it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _serve(self) -> None:
        act_for(self._token)  # kernel objects see the hardware thread as the caller
        meter = current_meter()
        while (request := self._osif.next_request()) is not None:
            blocked_before = meter.blocked_ns
            start = time.perf_counter_ns()
            value: Any = None
            error: Exception | None = None
            try:
                value = request.execute(self._env)
            except Exception as exc:  # handed back to the thread body, which may catch it
                error = exc
            blocked = meter.blocked_ns - blocked_before
            self._calls += 1
            self._service_ns += time.perf_counter_ns() - start - blocked
            self._blocked_ns += blocked
            self._osif.reply(Reply(value, error, blocked))
            if isinstance(request, ThreadExit):
                return

    def statistics(self) -> DelegateStatistics:
        """A frozen snapshot of the calls served and the time spent (measured)."""
        return DelegateStatistics(
            self.name, self._calls, self._service_ns, self._blocked_ns, self._thread.is_alive()
        )

    def __repr__(self) -> str:
        alive = "serving" if self._thread.is_alive() else ("ended" if self.started else "idle")
        return f"<Delegate {self.name!r} {alive}, {self._calls} calls>"
