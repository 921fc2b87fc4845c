"""A fake fabric that carries out allocator actions at once, for tests and benchmarks.

Like httpx's ``MockTransport``, it ships with the library: it is the smallest shell an
:class:`~juggle.core.allocator.Allocator` can run against. Each region holds a fake device
whose whole state is a byte string (``live``); the device's save routine returns it and its
restore routine replaces it, and loading a new design blanks it. The shell counts every action
it executes, keeps the signals it delivered, and records anything an allocator must never ask
for (connecting a region that is already connected, restoring a context that is not the one
saved) in ``violations`` instead of raising, so a test can report them all. It fills the
table of :class:`~juggle.core.execute.Operations` and lets :func:`~juggle.core.execute.execute`
dispatch, so a value that is no action at all raises
:class:`~juggle.errors.UnknownActionError`.

Reconfigurations and preemption stops are left pending until the caller completes them
(:meth:`complete_reconfig`, :meth:`complete_stop`), or :meth:`settle` completes them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from juggle.core.actions import (
    Action,
    Connect,
    Disconnect,
    Reconfigure,
    RestoreContext,
    SaveContext,
    Signal,
    Solution,
    StopAtConsistencyPoint,
)
from juggle.core.allocator import Allocator
from juggle.core.execute import execute as execute_actions

__all__ = ["LoopbackShell"]


class LoopbackShell:
    """Executes ``allocator``'s actions immediately against fake region devices."""

    def __init__(self, allocator: Allocator) -> None:
        self.allocator = allocator
        self.connected: dict[str, tuple[str, str]] = {}
        self.live: dict[str, bytes] = {s.name: b"" for s in allocator.index.regions}
        self.saved: dict[tuple[str, str], bytes] = {}
        self.pending_reconfig: dict[str, Reconfigure] = {}
        self.pending_stop: dict[str, StopAtConsistencyPoint] = {}
        self.signals: list[Signal] = []
        self.solutions: list[Solution] = []
        self.calls: Counter[str] = Counter()
        self.violations: list[str] = []

    def run(self, solution: Solution) -> Solution:
        """Execute ``solution``'s actions and return it."""
        self.solutions.append(solution)
        self.execute(solution.actions)
        return solution

    def execute(self, actions: Iterable[Action]) -> int:
        """Carry out ``actions`` in order; return how many.

        Raises:
            UnknownActionError: an item of ``actions`` is not an allocator action.
        """
        return execute_actions(self, actions)

    # -- the operations (juggle.core.execute.Operations) -------------------------------------

    def reconfigure(self, action: Reconfigure) -> None:
        """Blank the region's device and leave the load pending until it is completed."""
        self._tally(action)
        if action.region in self.pending_reconfig:
            self.violations.append(f"{action.region}: reconfigured twice at once")
        self.pending_reconfig[action.region] = action
        self.live[action.region] = b""

    def connect(self, action: Connect) -> None:
        """Connect the device to the region, noting a region that was already held."""
        self._tally(action)
        holder = self.connected.get(action.region)
        if holder is not None:
            self.violations.append(
                f"connect {action.tenant}/{action.device} to {action.region} held by {holder}"
            )
        self.connected[action.region] = (action.tenant, action.device)

    def disconnect(self, action: Disconnect) -> None:
        """Disconnect the device from the region, noting one that was not connected there."""
        self._tally(action)
        if self.connected.get(action.region) != (action.tenant, action.device):
            self.violations.append(
                f"disconnect {action.tenant}/{action.device} from {action.region}: not connected"
            )
        self.connected.pop(action.region, None)

    def save_context(self, action: SaveContext) -> None:
        """Store the region's device state in the interface (and here, to check restores)."""
        self._tally(action)
        if self.connected.get(action.region) != (action.tenant, action.device):
            self.violations.append(f"save of {action.tenant}/{action.device}: not connected")
        data = self.live[action.region]
        action.interface.save(data)
        self.saved[(action.tenant, action.device)] = data

    def restore_context(self, action: RestoreContext) -> None:
        """Put the interface's context into the region's device, noting one never saved."""
        self._tally(action)
        data = action.interface.load()
        expected = self.saved.get((action.tenant, action.device), b"")
        if data != expected:
            self.violations.append(
                f"restore of {action.tenant}/{action.device}: got {data!r}, saved {expected!r}"
            )
        self.live[action.region] = data

    def stop_at_consistency_point(self, action: StopAtConsistencyPoint) -> None:
        """Leave the stop pending until it is completed."""
        self._tally(action)
        self.pending_stop[action.region] = action

    def signal(self, action: Signal) -> None:
        """Keep the signal in ``signals``."""
        self._tally(action)
        self.signals.append(action)

    def solution(self, action: Solution) -> None:
        """Keep the announced solution in ``solutions``."""
        self._tally(action)
        self.solutions.append(action)

    def _tally(self, action: Action) -> None:
        """Count ``action`` in ``calls`` under its type's name."""
        self.calls[type(action).__name__] += 1

    # -- completing what is pending ----------------------------------------------------------

    def complete_reconfig(self, region: str, now: float, *, ok: bool = True) -> None:
        """The pending reconfiguration of ``region`` ends (``ok`` or failed)."""
        del self.pending_reconfig[region]
        self.execute(self.allocator.reconfigured(region, now, ok=ok))

    def complete_stop(self, region: str, now: float) -> None:
        """The task being preempted in ``region`` reaches its consistency point."""
        del self.pending_stop[region]
        self.execute(self.allocator.stopped(region, now))

    def settle(self, now: float) -> None:
        """Complete every pending stop and reconfiguration (successfully) at ``now``."""
        while self.pending_stop or self.pending_reconfig:
            if self.pending_stop:
                self.complete_stop(next(iter(self.pending_stop)), now)
            else:
                self.complete_reconfig(next(iter(self.pending_reconfig)), now)

    def __repr__(self) -> str:
        return (
            f"<LoopbackShell {len(self.connected)} connected, {len(self.pending_reconfig)} "
            f"reconfiguring, {len(self.pending_stop)} stopping, {len(self.violations)} violations>"
        )
