"""What the allocator decides and what it asks its shell to do.

The allocator is sans-I/O: it never programs a region or calls a tenant itself. Each decision
is a :class:`Solution` (the paper's ``Solution{vm, dev, Method(prr), Reconfig}``) and each step
a shell must carry out is an action value: :class:`Reconfigure`, :class:`Connect`,
:class:`Disconnect`, :class:`SaveContext`, :class:`RestoreContext`, :class:`StopAtConsistencyPoint`
and :class:`Signal`. The live runtime executes them with threads and drivers, the simulator in
virtual time; both report completions back (``reconfigured``, ``stopped``) as events.

Actions are listed in the order they must run. A :class:`Solution` inside an action list
announces a solution found later for a request that had waited (the paper's
``IRQ_New_Solution``); that solution's own actions follow it in the list.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from juggle.core.tenants import DeviceInterface, ProgrammingModel, SignalKind

if TYPE_CHECKING:
    from juggle.core.allocator import RegionSlot
    from juggle.core.taskindex import TaskDescriptor
    from juggle.core.tenants import TenantDevice

__all__ = [
    "Action",
    "Connect",
    "Disconnect",
    "Reconfigure",
    "RestoreContext",
    "SaveContext",
    "Signal",
    "Solution",
    "SolutionKind",
    "StopAtConsistencyPoint",
]


@dataclass(frozen=True, slots=True)
class Reconfigure:
    """Load ``bitstream`` (``size_bytes``, modeled ``t_rcfg_us``) into ``region`` for
    ``device``; report the end with ``Allocator.reconfigured(region, now, ok=...)``."""

    region: str
    device: str
    bitstream: str
    size_bytes: int
    t_rcfg_us: float


@dataclass(frozen=True, slots=True)
class Connect:
    """Connect the interface of ``tenant``'s ``device`` to ``region`` (registers go live)."""

    tenant: str
    device: str
    region: str


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Disconnect ``tenant``'s ``device`` from ``region``; its interface keeps its values."""

    tenant: str
    device: str
    region: str


@dataclass(frozen=True, slots=True)
class SaveContext:
    """Run the device's own save routine in ``region`` and store the result with
    ``interface.save(data)`` (before the matching :class:`Disconnect`)."""

    tenant: str
    device: str
    region: str
    interface: DeviceInterface


@dataclass(frozen=True, slots=True)
class RestoreContext:
    """Give ``interface.load()`` to the device's restore routine in ``region`` (a device that
    never ran gets an empty context: nothing of a previous tenant survives)."""

    tenant: str
    device: str
    region: str
    interface: DeviceInterface


@dataclass(frozen=True, slots=True)
class StopAtConsistencyPoint:
    """Ask the task of ``tenant``/``device`` running in ``region`` to stop at its next
    consistency point; report it with ``Allocator.stopped(region, now)`` (or with
    ``Allocator.finish`` if its work ends there)."""

    region: str
    tenant: str
    device: str


@dataclass(frozen=True, slots=True)
class Signal:
    """Tell ``tenant`` about its ``device``: WAIT, READY or PREEMPT. ``model`` says how the
    shell delivers it: a NATIVE caller stays blocked until READY, an AWARE one is notified."""

    tenant: str
    device: str
    signal: SignalKind
    model: ProgrammingModel


class SolutionKind(enum.Enum):
    """The method of a solution (paper Eq. 1)."""

    ASSIGN = "assign"
    PREEMPT = "preempt"
    UNAVAILABLE = "unavailable"


class Solution:
    """The answer to one request: Assign(region) or Preempt(region), each possibly with
    Reconfig, or Unavailable (the request is on the wait list).

    ``path`` numbers it as the paper's Fig 15: 1 Assign, 2 Assign+Reconfig, 3 Preempt,
    4 Preempt+Reconfig, 0 Unavailable. ``actions`` lists what the shell must do now; it is
    built on first access so that deciding stays cheap.
    """

    __slots__ = (
        "_actions",
        "_desc",
        "_pre",
        "_slot",
        "_vd",
        "_victim",
        "at",
        "kind",
        "priority",
        "reconfig",
    )

    def __init__(
        self,
        kind: SolutionKind,
        vd: TenantDevice,
        slot: RegionSlot | None,
        desc: TaskDescriptor | None,
        reconfig: bool,
        victim: TenantDevice | None,
        at: float,
        pre: list[Action] | None,
    ) -> None:
        self.kind = kind
        self._vd = vd
        self.priority = vd.priority
        self._slot = slot
        self._desc = desc
        self.reconfig = reconfig
        self._victim = victim
        self.at = at
        self._pre = pre
        self._actions: tuple[Action, ...] | None = None

    @property
    def tenant(self) -> str:
        """The requesting tenant."""
        return self._vd.tenant.name

    @property
    def device(self) -> str:
        """The requested device."""
        return self._vd.device

    @property
    def region(self) -> str | None:
        """The chosen region (None when Unavailable)."""
        return None if self._slot is None else self._slot.name

    @property
    def victim(self) -> tuple[str, str] | None:
        """(tenant, device) that loses the region: the preempted task, or the idle client
        disconnected by an Assign; None if the region had no client."""
        v = self._victim
        return None if v is None else (v.tenant.name, v.device)

    @property
    def path(self) -> int:
        """1..4 as in the paper's Fig 15, 0 for Unavailable."""
        if self.kind is SolutionKind.ASSIGN:
            return 2 if self.reconfig else 1
        if self.kind is SolutionKind.PREEMPT:
            return 4 if self.reconfig else 3
        return 0

    @property
    def ready(self) -> bool:
        """Whether the device is connected now (Assign without Reconfig)."""
        return self.kind is SolutionKind.ASSIGN and not self.reconfig

    @property
    def actions(self) -> tuple[Action, ...]:
        """What the shell must do for this solution, in order (including hold expiries the
        allocator processed first because they were due)."""
        if self._actions is None:
            self._actions = tuple(self._build())
        return self._actions

    def _build(self) -> list[Action]:
        out: list[Action] = list(self._pre) if self._pre else []
        vd, slot, victim = self._vd, self._slot, self._victim
        if slot is None:
            out.append(signal(vd, SignalKind.WAIT))
        elif self.kind is SolutionKind.PREEMPT:
            assert victim is not None
            out.append(StopAtConsistencyPoint(slot.name, victim.tenant.name, victim.device))
            out.append(signal(victim, SignalKind.PREEMPT))
            out.append(signal(vd, SignalKind.WAIT))
        else:
            if victim is not None:
                out.extend(evict_actions(victim, slot))
            if self.reconfig:
                assert self._desc is not None
                out.append(reconfigure(self._desc))
                out.append(signal(vd, SignalKind.WAIT))
            else:
                out.extend(connect_actions(vd, slot))
        return out

    def __repr__(self) -> str:
        where = "" if self._slot is None else f"({self._slot.name})"
        flag = "+Reconfig" if self.reconfig else ""
        return (
            f"<Solution {self.kind.value}{where}{flag} for {self.tenant}/{self.device} "
            f"prio={self.priority} at={self.at}>"
        )


Action = (
    Reconfigure
    | Connect
    | Disconnect
    | SaveContext
    | RestoreContext
    | StopAtConsistencyPoint
    | Signal
    | Solution
)
"""Anything an allocator entry point may ask its shell to do (or announce)."""


def signal(vd: TenantDevice, kind: SignalKind) -> Signal:
    """A signal to ``vd``'s tenant about ``vd``."""
    return Signal(vd.tenant.name, vd.device, kind, vd.tenant.model)


def reconfigure(desc: TaskDescriptor) -> Reconfigure:
    """The action loading ``desc``'s bitstream."""
    return Reconfigure(desc.region, desc.device, desc.bitstream, desc.size_bytes, desc.t_rcfg_us)


def evict_actions(victim: TenantDevice, slot: RegionSlot) -> tuple[SaveContext, Disconnect]:
    """Save ``victim``'s context with its own routine, then disconnect it from ``slot``."""
    t, d = victim.tenant.name, victim.device
    return SaveContext(t, d, slot.name, victim.interface), Disconnect(t, d, slot.name)


def connect_actions(vd: TenantDevice, slot: RegionSlot) -> tuple[RestoreContext, Connect, Signal]:
    """Restore ``vd``'s context into ``slot``, connect it, tell its tenant READY."""
    t, d = vd.tenant.name, vd.device
    return (
        RestoreContext(t, d, slot.name, vd.interface),
        Connect(t, d, slot.name),
        signal(vd, SignalKind.READY),
    )
