"""What tenants see and hold when they share the fabric live (see :mod:`juggle.runtime.tenancy`).

A tenant reads its WAIT / READY / PREEMPT signals from a :class:`SignalChannel` and gets frozen
:class:`TenantSnapshot` views. Each of its consumers' proxies of an arbitrated service calls a
:class:`VirtualDevice`, whose driver sits on a :class:`SeatWindow`: an MMIO that follows the
region the virtual device is connected to (the paper's interface connect and disconnect).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from juggle.core.allocstats import AllocatorStats
from juggle.core.tenants import ProgrammingModel, SignalKind
from juggle.errors import ProgrammingModelError, RegionEmptyError, TenancyError
from juggle.fabric.mmio import MMIO
from juggle.runtime.interfaces import interface_methods, short_name
from juggle.runtime.proxy import StateRecord

if TYPE_CHECKING:
    from juggle.runtime.tenancy import TenantArbiter

__all__ = [
    "SIGNAL_BACKLOG",
    "Seat",
    "SeatWindow",
    "SignalChannel",
    "TenancyStatistics",
    "TenantDeviceSnapshot",
    "TenantSignal",
    "TenantSnapshot",
    "VirtualDevice",
    "parse_model",
    "virtual_device_class",
]

#: Signals a channel keeps for a reader that does not read (older ones are dropped).
SIGNAL_BACKLOG = 1024


@dataclass(frozen=True, slots=True)
class TenantSignal:
    """One WAIT / READY / PREEMPT told to ``tenant`` about its ``device`` (of ``service_id``).

    ``kind`` is ``"wait"``, ``"ready"`` or ``"preempt"``; ``at_us`` is the monotonic clock in
    microseconds; ``seq`` numbers the arbiter's signals in emission order.
    """

    tenant: str
    device: str
    service_id: int | None
    kind: str
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
        """Read signals until one of ``kind`` (about ``device``, if given) arrives, within
        ``timeout`` seconds; the signals read before it are consumed. None on timeout.

        Raises :class:`~juggle.errors.TenancyError` for a ``kind`` that is no signal.
        """
        valid = {k.value for k in SignalKind}
        if kind not in valid:
            raise TenancyError(
                f'"kind" must be one of {", ".join(sorted(valid))}; got {kind!r}', subject=kind
            )
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
    """A tenant: its class and priority, programming model, virtual devices, unread signals."""

    name: str
    priority: int
    realtime: bool
    model: str
    devices: tuple[TenantDeviceSnapshot, ...]
    unread_signals: int


@dataclass(frozen=True, slots=True)
class TenancyStatistics:
    """The arbiter: the allocator's snapshot, every indexed service (id → device), programs
    done for tenants, failed ones, and actions that failed to execute."""

    allocator: AllocatorStats
    services: Mapping[int, str]
    programs: int
    program_failures: int
    action_faults: int


class SeatWindow:
    """The MMIO a tenant's driver holds: forwards to the window of the region its virtual
    device is connected to (the paper's IF connect/disconnect); refuses while disconnected."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._target: MMIO | None = None
        self._size = 0

    @property
    def size(self) -> int:
        """Size of the connected window (of the last one while disconnected)."""
        return self._size

    def attach(self, window: MMIO) -> None:
        """Connect: accesses go to ``window`` from now on."""
        self._target = window
        self._size = window.size

    def detach(self) -> None:
        """Disconnect: accesses raise until the next :meth:`attach`."""
        self._target = None

    def _window(self) -> MMIO:
        target = self._target
        if target is None:
            raise RegionEmptyError(
                f"virtual device {self._label} is not connected to a region", self._label
            )
        return target

    def read32(self, offset: int) -> int:
        """Read the connected window. Raises :class:`~juggle.errors.RegionEmptyError` while
        disconnected, else what the window raises."""
        return self._window().read32(offset)

    def write32(self, offset: int, value: int) -> None:
        """Write the connected window; raises as :meth:`read32`."""
        self._window().write32(offset, value)


class Seat:
    """The live side of one (tenant, device): its window, its driver, where it is attached."""

    def __init__(self, tenant: str, device: str) -> None:
        self.tenant = tenant
        self.device = device
        self.window = SeatWindow(f"{tenant}/{device}")
        self.driver: object | None = None
        self.region: str | None = None
        self.running = False
        self.call_lock = threading.Lock()
        self.record = StateRecord()  # the tenant's state-setting calls, replayed where needed
        self.needs_replay = False
        self.pending_context: bytes | None = None  # restored by the driver once connected
        self.calls = 0
        self.waits = 0
        self.preemptions = 0
        self.gone = False  # the tenant gave the service back: release when the call ends


class VirtualDevice:
    """What a tenant consumer's proxy calls for an arbitrated service: every method obtains
    the device's region through the arbiter (blocking or raising
    :class:`~juggle.errors.WaitSignal`), then runs on the tenant's own driver.

    One per (tenant, service); a subclass per interface adds the interface's methods.
    """

    __slots__ = ("_arbiter", "device", "service_id", "tenant")

    def __init__(self, arbiter: TenantArbiter, tenant: str, device: str, service_id: int):
        self._arbiter = arbiter
        self.tenant = tenant
        self.device = device
        self.service_id = service_id

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self._arbiter.run_call(self, name, args, kwargs)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.tenant}/{self.device} service {self.service_id}>"


def virtual_device_class(interface: type, name: str) -> type[VirtualDevice]:
    """A :class:`VirtualDevice` subclass with one method per method of ``interface``."""

    def make(method: str) -> Callable[..., Any]:
        def call(self: VirtualDevice, *args: Any, **kwargs: Any) -> Any:
            return self._call(method, args, kwargs)

        call.__name__ = method
        return call

    attrs: dict[str, Any] = {"__slots__": (), "__doc__": interface.__doc__}
    for spec in interface_methods(interface):
        attrs[spec.name] = make(spec.name)
    return type(f"{short_name(name)}VirtualDevice", (VirtualDevice,), attrs)


def parse_model(model: str | ProgrammingModel) -> ProgrammingModel:
    """``"native"`` / ``"aware"`` (or the enum) as a :class:`ProgrammingModel`.

    Raises :class:`~juggle.errors.ProgrammingModelError` naming the value.
    """
    if isinstance(model, ProgrammingModel):
        return model
    for candidate in ProgrammingModel:
        if model == candidate.value:
            return candidate
    raise ProgrammingModelError(
        f'"model" must be "native" or "aware"; got {model!r}', subject=model
    )
