"""What a tenant sees of the shared fabric (see :mod:`juggle.runtime.tenancy`): its signals and
frozen snapshots.

A tenant reads its WAIT / READY / PREEMPT signals from a :class:`SignalChannel`, like a process
reading an IPC queue (Ker-ONE's Table 2), and gets :class:`TenantSnapshot` views of itself and
its virtual devices. Nothing here holds a region or runs a call: the arbiter does.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from juggle.core.allocator import HYSTERESIS_FACTOR
from juggle.core.allocstats import AllocatorStats
from juggle.core.tenants import ProgrammingModel, SignalKind
from juggle.errors import ProgrammingModelError, TenancyError

__all__ = [
    "SIGNAL_BACKLOG",
    "SignalChannel",
    "TenancyStatistics",
    "TenantDeviceSnapshot",
    "TenantSignal",
    "TenantSnapshot",
    "parse_model",
]

#: Signals a channel keeps for a reader that does not read (older ones are dropped).
SIGNAL_BACKLOG = 1024
#: The kinds :meth:`SignalChannel.wait_for` accepts (the strings match their enum members).
_KINDS = frozenset(SignalKind)


@dataclass(frozen=True, slots=True)
class TenantSignal:
    """One WAIT / READY / PREEMPT told to ``tenant`` about its ``device`` (of ``service_id``).

    ``kind`` is a :class:`~juggle.core.tenants.SignalKind`, a string enum (``kind == "wait"``
    holds, and JSON shows ``"wait"``); ``at_us`` is the monotonic clock in microseconds;
    ``seq`` numbers the arbiter's signals in emission order.
    """

    tenant: str
    device: str
    service_id: int | None
    kind: SignalKind
    at_us: float
    seq: int


class SignalChannel:
    """A tenant's mailbox of signals, oldest first, like an IPC queue of the paper's Table 2.

    Read it with :meth:`get`, :meth:`wait_for` or :meth:`drain`, or register a callback with
    :meth:`listen` (called after the arbiter's lock is released, in emission order). It keeps
    the last ``SIGNAL_BACKLOG`` signals; ``dropped`` counts older ones nobody read.
    """

    def __init__(self, tenant: str, backlog: int = SIGNAL_BACKLOG) -> None:
        self.tenant = tenant
        self._items: deque[TenantSignal] = deque(maxlen=backlog)
        self._cond = threading.Condition()
        self._listeners: tuple[Callable[[TenantSignal], None], ...] = ()
        self._closed = False
        self.dropped = 0

    def push(self, signal: TenantSignal) -> tuple[Callable[[TenantSignal], None], ...]:
        """Queue ``signal`` (the arbiter's side); returns the listeners it must be given to."""
        with self._cond:
            if len(self._items) == self._items.maxlen:
                self.dropped += 1
            self._items.append(signal)
            self._cond.notify_all()
            return self._listeners

    def close(self) -> None:
        """No more signals will come: readers waiting now, and later ones once the unread
        signals are read, get None at once."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> TenantSignal | None:
        """The oldest unread signal, waiting up to ``timeout`` seconds (None: forever, or
        until the channel is closed); None when none arrived in time."""
        with self._cond:
            self._cond.wait_for(lambda: bool(self._items) or self._closed, timeout)
            return self._items.popleft() if self._items else None

    def wait_for(
        self, kind: str, *, device: str | None = None, timeout: float | None = None
    ) -> TenantSignal | None:
        """Read signals until one of ``kind`` (``"wait"``, ``"ready"`` or ``"preempt"``, or
        the :class:`~juggle.core.tenants.SignalKind`; about ``device``, if given) arrives,
        within ``timeout`` seconds; the signals read before it are consumed. None on timeout.

        Raises :class:`~juggle.errors.TenancyError` for a ``kind`` that is no signal.
        """
        if kind not in _KINDS:
            valid = ", ".join(sorted(k.value for k in SignalKind))
            raise TenancyError(f'"kind" must be one of {valid}; got {kind!r}', value=kind)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                while self._items:
                    signal = self._items.popleft()
                    if signal.kind == kind and device in (None, signal.device):
                        return signal
                remaining = None if deadline is None else deadline - time.monotonic()
                if self._closed or (remaining is not None and remaining <= 0):
                    return None
                self._cond.wait(remaining)

    def drain(self) -> tuple[TenantSignal, ...]:
        """Every unread signal, oldest first (the channel is empty afterwards)."""
        with self._cond:
            items = tuple(self._items)
            self._items.clear()
            return items

    def listen(self, callback: Callable[[TenantSignal], None]) -> Callable[[], None]:
        """Call ``callback(signal)`` for every later signal; returns the undo function.
        A callback that raises is logged and does not stop the others."""
        with self._cond:
            self._listeners = (*self._listeners, callback)

        def undo() -> None:
            with self._cond:
                self._listeners = tuple(c for c in self._listeners if c is not callback)

        return undo

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def __repr__(self) -> str:
        return f"<SignalChannel {self.tenant}: {len(self)} unread, {self.dropped} dropped>"


@dataclass(frozen=True, slots=True)
class TenantDeviceSnapshot:
    """One virtual device of a tenant: allocator state, region, calls and signals so far."""

    device: str
    service_id: int | None
    state: str
    region: str | None
    running: bool
    calls: int
    waits: int
    preemptions: int
    context_bytes: int


@dataclass(frozen=True, slots=True)
class TenantSnapshot:
    """A tenant: its class and priority, programming model, virtual devices, unread signals,
    and its calls, waits and preemptions since it was registered (all its devices, those it
    gave back and those of stopped services included: a client's disconnect keeps them).

    A device's ``calls``, ``waits`` and ``preemptions`` count that device since the tenant
    first used it, across the proxies it took and gave back."""

    name: str
    priority: int
    realtime: bool
    model: str
    devices: tuple[TenantDeviceSnapshot, ...]
    unread_signals: int
    calls: int = 0
    waits: int = 0
    preemptions: int = 0


@dataclass(frozen=True, slots=True)
class TenancyStatistics:
    """The arbiter: the allocator's snapshot, every indexed service (id → device), programs
    done for tenants, failed ones, actions that failed to execute, and the regions whose core
    failed under a tenant's call (quarantined until recovered), each with the reason.

    ``hysteresis_us`` is the hysteresis hold (None: derived, ``hysteresis_factor`` times the
    holder's modeled reconfiguration time; 0: off); ``repeated_ready`` counts READY signals
    not sent because the device's last signal was READY already (no state change).
    """

    allocator: AllocatorStats
    services: Mapping[int, str]
    programs: int
    program_failures: int
    action_faults: int
    faulted: Mapping[str, str]
    hysteresis_us: float | None = None
    hysteresis_factor: float = HYSTERESIS_FACTOR
    repeated_ready: int = 0


def parse_model(model: str | ProgrammingModel) -> ProgrammingModel:
    """``"native"`` / ``"aware"`` (or the enum) as a :class:`ProgrammingModel`.

    Raises :class:`~juggle.errors.ProgrammingModelError` naming the value.
    """
    if isinstance(model, ProgrammingModel):
        return model
    for candidate in ProgrammingModel:
        if model == candidate.value:
            return candidate
    raise ProgrammingModelError(f'"model" must be "native" or "aware"; got {model!r}', value=model)
