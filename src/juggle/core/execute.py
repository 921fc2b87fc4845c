"""One executor for the allocator's actions: a shell fills a table of operations, nothing more.

The allocator (:mod:`juggle.core.allocator`) is sans-I/O: it returns action values and a shell
carries them out. As in Linux's ``drivers/fpga``, where each driver fills one
``struct fpga_manager_ops`` and ``fpga-mgr.c`` alone decides when each operation runs, a shell
here implements :class:`Operations` (one method per action type) and :func:`execute` does the
dispatching, in one place, for every shell (the loopback fake, the simulator, the hardware
threads' slots, the live runtime). mypy checks that :func:`execute` handles every action type, and
a value that is not an action is an :class:`~juggle.errors.UnknownActionError` in every shell.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, assert_never

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
from juggle.errors import UnknownActionError

__all__ = ["Operations", "execute"]


class Operations(Protocol):
    """The operations a shell offers to carry out allocator actions, one per action type.

    Each operation receives the action value and must do what the action asks:

    ``reconfigure(action: Reconfigure)``
        Load ``action.bitstream`` (``size_bytes``, modeled ``t_rcfg_us``) into
        ``action.region`` for ``action.device``; report the end with
        ``Allocator.reconfigured(region, now, ok=...)``.
    ``connect(action: Connect)``
        Connect the interface of the tenant's device to ``action.region`` (registers go live).
    ``disconnect(action: Disconnect)``
        Disconnect the tenant's device from ``action.region``; its interface keeps its values.
    ``save_context(action: SaveContext)``
        Run the device's own save routine in ``action.region`` and store the result with
        ``action.interface.save(data)`` (it comes before the matching :class:`Disconnect`).
    ``restore_context(action: RestoreContext)``
        Give ``action.interface.load()`` to the device's restore routine in ``action.region``
        (a device that never ran gets an empty context: nothing of a previous tenant survives).
    ``stop_at_consistency_point(action: StopAtConsistencyPoint)``
        Ask the task of the tenant's device running in ``action.region`` to stop at its next
        consistency point; report it with ``Allocator.stopped(region, now)`` (or with
        ``Allocator.finish`` if its work ends there).
    ``signal(action: Signal)``
        Tell the tenant about its device: WAIT, READY or PREEMPT; ``action.model`` says how:
        a NATIVE caller stays blocked until READY, an AWARE one is notified.
    ``solution(action: Solution)``
        Take note of a solution found later for a request that had waited (the paper's
        ``IRQ_New_Solution``); its own actions follow it in the list, so this operation must
        not execute ``action.actions``.

    An operation a shell does not need is still written out, as a no-op whose docstring says
    why, so that reading one class shows what the shell does with every action.
    """

    def reconfigure(self, action: Reconfigure) -> None:
        """Load a bitstream into a region; report the end with ``Allocator.reconfigured``."""
        ...

    def connect(self, action: Connect) -> None:
        """Connect a tenant's device to a region (its registers go live)."""
        ...

    def disconnect(self, action: Disconnect) -> None:
        """Disconnect a tenant's device from a region; its interface keeps its values."""
        ...

    def save_context(self, action: SaveContext) -> None:
        """Run the device's save routine and store the result with ``interface.save``."""
        ...

    def restore_context(self, action: RestoreContext) -> None:
        """Give ``interface.load()`` to the device's restore routine in the region."""
        ...

    def stop_at_consistency_point(self, action: StopAtConsistencyPoint) -> None:
        """Ask the running task to stop at its next consistency point; report it back."""
        ...

    def signal(self, action: Signal) -> None:
        """Tell a tenant WAIT, READY or PREEMPT about its device, as its model says."""
        ...

    def solution(self, action: Solution) -> None:
        """Take note of a solution announced later (its actions follow in the list)."""
        ...


def execute(ops: Operations, actions: Iterable[Action]) -> int:
    """Carry out ``actions`` in order, each through its operation in ``ops``; return how many.

    ``actions`` is read lazily, one action at a time, so a shell may feed it from a queue that
    an operation extends (the actions that follow a completed reconfiguration, say).

    Raises:
        UnknownActionError: an item of ``actions`` is not an allocator action (the actions
            before it have been carried out, the ones after it have not).
    """
    count = 0
    for action in actions:
        _dispatch(ops, action)
        count += 1
    return count


def _dispatch(ops: Operations, action: Action) -> None:
    """Call the one operation of ``ops`` that carries out ``action``."""
    match action:
        case Reconfigure():
            ops.reconfigure(action)
        case Connect():
            ops.connect(action)
        case Disconnect():
            ops.disconnect(action)
        case SaveContext():
            ops.save_context(action)
        case RestoreContext():
            ops.restore_context(action)
        case StopAtConsistencyPoint():
            ops.stop_at_consistency_point(action)
        case Signal():
            ops.signal(action)
        case Solution():
            ops.solution(action)
        case _:
            try:
                assert_never(action)  # mypy: a case above matches every type of the union
            except AssertionError:  # at run time: a value that is no action at all
                raise _unknown(action) from None


def _unknown(value: object) -> UnknownActionError:
    """The error for ``value``, which a shell was asked to execute but is not an action."""
    kind = type(value)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    return UnknownActionError(
        f"actions: {value!r} (of type {name}) is not an allocator action; expected one of "
        "Reconfigure, Connect, Disconnect, SaveContext, RestoreContext, "
        "StopAtConsistencyPoint, Signal, Solution",
        value=name,
    )
