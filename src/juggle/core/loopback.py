"""A fake fabric that carries out allocator actions at once, for tests and benchmarks.

Like httpx's ``MockTransport``, it ships with the library: it is the smallest shell an
:class:`~juggle.core.allocator.Allocator` can run against. Each region holds a fake device
whose whole state is a byte string (``live``); the device's save routine returns it and its
restore routine replaces it, and loading a new design blanks it. The shell counts every action
it executes, keeps the signals it delivered, and records anything an allocator must never ask
for (connecting a region that is already connected, restoring a context that is not the one
saved) in ``violations`` instead of raising, so a test can report them all.

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

    def execute(self, actions: Iterable[Action]) -> None:
        """Carry out ``actions`` in order."""
        for action in actions:
            self.calls[type(action).__name__] += 1
            self._one(action)

    def _one(self, action: Action) -> None:
        if isinstance(action, Solution):
            self.solutions.append(action)
        elif isinstance(action, Signal):
            self.signals.append(action)
        elif isinstance(action, SaveContext):
            self._save(action)
        elif isinstance(action, RestoreContext):
            self._restore(action)
        elif isinstance(action, Connect):
            self._connect(action)
        elif isinstance(action, Disconnect):
            self._disconnect(action)
        elif isinstance(action, Reconfigure):
            if action.region in self.pending_reconfig:
                self.violations.append(f"{action.region}: reconfigured twice at once")
            self.pending_reconfig[action.region] = action
            self.live[action.region] = b""
        else:
            self.pending_stop[action.region] = action

    def _save(self, action: SaveContext) -> None:
        if self.connected.get(action.region) != (action.tenant, action.device):
            self.violations.append(f"save of {action.tenant}/{action.device}: not connected")
        data = self.live[action.region]
        action.interface.save(data)
        self.saved[(action.tenant, action.device)] = data

    def _restore(self, action: RestoreContext) -> None:
        data = action.interface.load()
        expected = self.saved.get((action.tenant, action.device), b"")
        if data != expected:
            self.violations.append(
                f"restore of {action.tenant}/{action.device}: got {data!r}, saved {expected!r}"
            )
        self.live[action.region] = data

    def _connect(self, action: Connect) -> None:
        holder = self.connected.get(action.region)
        if holder is not None:
            self.violations.append(
                f"connect {action.tenant}/{action.device} to {action.region} held by {holder}"
            )
        self.connected[action.region] = (action.tenant, action.device)

    def _disconnect(self, action: Disconnect) -> None:
        if self.connected.get(action.region) != (action.tenant, action.device):
            self.violations.append(
                f"disconnect {action.tenant}/{action.device} from {action.region}: not connected"
            )
        self.connected.pop(action.region, None)

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
