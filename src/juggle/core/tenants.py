"""Tenants and their virtual devices (Ker-ONE 4.1): isolated clients of a shared fabric.

A tenant is an application or a virtual machine with a priority: real-time tenants form the
highest class, general-purpose tenants share a lower one. For every accelerator function it
uses, a tenant owns a *virtual device*: an interface (registers, results and a context buffer,
the paper's IF) that keeps its values while the device is not connected to any region, like a
parked car that keeps its radio presets. Tenants only ever get their own interfaces.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from juggle.errors import InterfaceError

if TYPE_CHECKING:
    from juggle.core.allocator import RegionSlot
    from juggle.core.taskindex import TaskDescriptor

__all__ = [
    "DeviceInterface",
    "DeviceState",
    "ProgrammingModel",
    "Register",
    "SignalKind",
    "Tenant",
    "TenantDevice",
]


class ProgrammingModel(enum.Enum):
    """How a tenant deals with an unavailable device (paper 4.5).

    ``NATIVE``: the call blocks until the device is ready; WAIT and READY are not its concern.
    ``AWARE``: the call returns at once with WAIT (or runs in software), READY arrives later,
    and on PREEMPT the tenant may move the rest of its work to software.
    """

    NATIVE = "native"
    AWARE = "aware"


class SignalKind(enum.StrEnum):
    """What the allocator tells a tenant (paper Table 2, IPC signals)."""

    WAIT = "wait"
    READY = "ready"
    PREEMPT = "preempt"


class DeviceState(enum.Enum):
    """Where a virtual device stands: not connected, waiting on the list, being served
    (preemption or reconfiguration under way), or connected to a region."""

    DISCONNECTED = "disconnected"
    WAITING = "waiting"
    PENDING = "pending"
    CONNECTED = "connected"


class Register(enum.Enum):
    """The PR accelerator interface (paper Table 1): name, width in bits."""

    STAT = ("STAT", 32)
    START = ("START", 8)
    OVER = ("OVER", 8)
    CMD = ("CMD", 32)
    DATA_ADDR = ("DATA_ADDR", 32)
    DATA_SIZE = ("DATA_SIZE", 32)
    RESULT = ("RESULT", 64)
    INT_CTRL = ("INT_CTRL", 32)
    CUSTOM0 = ("CUSTOM0", 32)
    CUSTOM1 = ("CUSTOM1", 32)
    CUSTOM2 = ("CUSTOM2", 32)
    CUSTOM3 = ("CUSTOM3", 32)
    CUSTOM4 = ("CUSTOM4", 32)
    CUSTOM5 = ("CUSTOM5", 32)
    CUSTOM6 = ("CUSTOM6", 32)
    CUSTOM7 = ("CUSTOM7", 32)

    @property
    def width(self) -> int:
        """Width of the register in bits."""
        return int(self.value[1])


_REGISTER_SLOT = {reg: i for i, reg in enumerate(Register)}


class DeviceInterface:
    """A virtual device's interface: Table 1 registers plus a context buffer of fixed size.

    It belongs to one (tenant, device) and persists across connections. The shell writes the
    context here when the allocator asks it to save one (the device's own save routine fills
    it) and reads it back to restore; the allocator never looks inside.
    """

    __slots__ = ("_context", "_length", "_registers", "capacity", "device", "tenant")

    def __init__(self, tenant: str, device: str, capacity: int) -> None:
        self.tenant = tenant
        self.device = device
        self.capacity = capacity
        self._registers = [0] * len(Register)
        self._context = bytearray(capacity)
        self._length = 0

    def read(self, register: Register) -> int:
        """Current value of ``register`` (kept while disconnected)."""
        return self._registers[_REGISTER_SLOT[register]]

    def write(self, register: Register, value: int) -> None:
        """Set ``register`` to ``value``.

        Raises :class:`~juggle.errors.InterfaceError` if ``value`` does not fit its width.
        """
        if not 0 <= value < (1 << register.width):
            raise InterfaceError(
                f'"value" must fit {register.width} bits for {register.name}; got {value}',
                value=value,
            )
        self._registers[_REGISTER_SLOT[register]] = value

    def save(self, context: bytes) -> None:
        """Store a context produced by the device's save routine (replaces the previous one).

        Raises :class:`~juggle.errors.InterfaceError` if it exceeds ``capacity`` bytes; the
        stored context is then unchanged.
        """
        if len(context) > self.capacity:
            raise InterfaceError(
                f'"context" of {len(context)} bytes exceeds the {self.capacity}-byte buffer of '
                f"{self.tenant}/{self.device}",
                value=len(context),
            )
        self._context[: len(context)] = context
        self._length = len(context)

    def load(self) -> bytes:
        """The stored context, exactly as saved (empty before the first save)."""
        return bytes(self._context[: self._length])

    def __repr__(self) -> str:
        return (
            f"<DeviceInterface {self.tenant}/{self.device} context {self._length}/"
            f"{self.capacity} B>"
        )


class Tenant:
    """A client of the fabric: a name, a priority, a class and a programming model.

    Created by :meth:`juggle.core.allocator.Allocator.add_tenant`, which checks the priority.
    """

    __slots__ = ("devices", "model", "name", "priority", "realtime")

    def __init__(self, name: str, priority: int, realtime: bool, model: ProgrammingModel) -> None:
        self.name = name
        self.priority = priority
        self.realtime = realtime
        self.model = model
        self.devices: dict[str, TenantDevice] = {}

    def __repr__(self) -> str:
        kind = "real-time" if self.realtime else "general-purpose"
        return f"<Tenant {self.name} {kind} prio={self.priority} {self.model.value}>"


class TenantDevice:
    """The allocator's record of one (tenant, device): its interface, where it is connected,
    and, while a request is outstanding, the request itself (priority, FIFO number, time).

    Internal and mutable; readers get :class:`~juggle.core.allocstats.DeviceStats` snapshots.
    """

    __slots__ = (
        "compat",
        "dev_id",
        "device",
        "interface",
        "pinned",
        "priority",
        "region",
        "requested_at",
        "seq",
        "state",
        "tenant",
    )

    def __init__(
        self,
        tenant: Tenant,
        device: str,
        dev_id: int,
        compat: tuple[tuple[RegionSlot, TaskDescriptor], ...],
        context_bytes: int,
    ) -> None:
        self.tenant = tenant
        self.device = device
        self.dev_id = dev_id
        self.compat = compat
        self.interface = DeviceInterface(tenant.name, device, context_bytes)
        self.state = DeviceState.DISCONNECTED
        self.region: RegionSlot | None = None
        self.priority = tenant.priority
        self.pinned = False  # holds its region against any priority (a juggle's placement)
        self.seq = 0
        self.requested_at = 0.0

    def __repr__(self) -> str:
        return f"<TenantDevice {self.tenant.name}/{self.device} {self.state.value}>"
