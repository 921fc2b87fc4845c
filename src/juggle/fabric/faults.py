"""Fault injection: make the next fabric operation or hardware access fail on purpose.

Tests (and the runtime's rollback and fault-containment tests) arm a step with
``fabric.faults.arm(step, count=1)``; the simulated backend's operation for that step checks the
injector and fails as the hardware would. Armed faults are consumed one per failing operation.

Steps of programming a region (:data:`PROGRAM_FAULT_STEPS`):

``bridge_disable`` / ``bridge_enable``
    the bridge does not switch (:class:`~juggle.errors.BridgeError`);
``config_write``
    the configuration port write fails (:class:`~juggle.errors.ProgrammingError`);
``model_load``
    the window of the new design cannot be attached (:class:`~juggle.errors.WindowAttachError`).

Steps of a hardware access (:data:`ACCESS_FAULT_STEPS`), fired by the next ``read32`` or
``write32`` through any simulated window whose bridge is open (an access refused by a closed
bridge or a closed window reaches no core and fires nothing):

``core_hang``
    that window's core hangs: from this access on its model sees the core-cycle counter frozen
    at this access's cycle, so a started operation never completes and STATUS never reads DONE
    (the bus itself still answers and still costs modeled time). It lasts until the region is
    reprogrammed: programming attaches a new window over a fresh model and closes the old one.
``core_garbage``
    that window's core returns wrong data until the region is reprogrammed: reads of the
    model's result registers (``RegisterModel.result_offsets``) are XORed with
    :data:`GARBAGE_PATTERN`, while status and control registers behave, so a driver's protocol
    completes and hands back wrong bytes.
``driver_error``
    this one access raises ``OSError(errno.EIO, "injected fault: bus error on region ...")``,
    a non-juggle exception, as a real bus error reaches a driver; the access does not reach the
    core and is not counted in the window's statistics. One-shot: the next access works.

When several access steps are armed, one access fires one of them, in the order of
:data:`ACCESS_FAULT_STEPS`. :attr:`FaultInjector.pending` (armed access faults) is a plain
attribute a window reads without a lock on every access; only when it is non-zero does the
window call :meth:`FaultInjector.fire_access`, so the hot path stays one attribute test.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from juggle.errors import FabricError

__all__ = [
    "ACCESS_FAULT_STEPS",
    "FAULT_STEPS",
    "GARBAGE_PATTERN",
    "PROGRAM_FAULT_STEPS",
    "FaultInjector",
    "FaultStatistics",
]

#: Steps of programming a region, consulted by the config port, the bridges and ``attach``.
PROGRAM_FAULT_STEPS: tuple[str, ...] = (
    "bridge_disable",
    "config_write",
    "bridge_enable",
    "model_load",
)
#: Steps of a hardware access, consulted by every simulated window (firing order).
ACCESS_FAULT_STEPS: tuple[str, ...] = ("driver_error", "core_hang", "core_garbage")
#: Every step :meth:`FaultInjector.arm` accepts.
FAULT_STEPS: tuple[str, ...] = PROGRAM_FAULT_STEPS + ACCESS_FAULT_STEPS

#: What a ``core_garbage`` core XORs onto every read of a result register (never zero).
GARBAGE_PATTERN = 0xA5A5A5A5


@dataclass(frozen=True, slots=True)
class FaultStatistics:
    """Faults still armed and faults already fired, per step."""

    armed: dict[str, int]
    fired: dict[str, int]


class FaultInjector:
    """Counts of armed failures per step (one of :data:`FAULT_STEPS`).

    ``pending`` is the number of armed faults of the access steps; it is written only under the
    injector's lock and read without it by the windows' hot path (a stale zero only delays a
    fault armed concurrently to the following access; a stale non-zero is re-checked under the
    lock by :meth:`fire_access`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed = dict.fromkeys(FAULT_STEPS, 0)
        self._fired = dict.fromkeys(FAULT_STEPS, 0)
        #: armed faults of :data:`ACCESS_FAULT_STEPS` (0: a window access need not ask)
        self.pending = 0
        #: whether any fault is armed at all (read without the lock by :meth:`fire`)
        self._any_armed = False

    def arm(self, step: str, count: int = 1) -> None:
        """Make the next ``count`` operations of ``step`` fail.

        Raises :class:`~juggle.errors.FabricError` naming an unknown step or a count < 1.
        """
        self._check(step)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise FabricError(f'"count" must be >= 1, got {count!r}', value=count)
        with self._lock:
            self._armed[step] += count
            self._update_pending()

    def disarm(self, step: str | None = None) -> None:
        """Forget armed faults of ``step`` (all steps when ``None``).

        Raises :class:`~juggle.errors.FabricError` naming an unknown step.
        """
        if step is not None:
            self._check(step)
        with self._lock:
            for name in [step] if step else FAULT_STEPS:
                self._armed[name] = 0
            self._update_pending()

    def fire(self, step: str) -> bool:
        """Whether this operation of ``step`` must fail (consumes one armed fault).

        Raises ``KeyError`` for a step that is not one of :data:`FAULT_STEPS` (a caller's bug).
        """
        if not self._any_armed and step in self._armed:  # nothing armed (True is re-checked)
            return False
        with self._lock:
            if self._armed[step] <= 0:
                return False
            self._armed[step] -= 1
            self._fired[step] += 1
            self._update_pending()
            return True

    def fire_access(self) -> str | None:
        """The access step this hardware access must suffer, consuming it; ``None`` if none.

        Windows call it only while :attr:`pending` is non-zero. Raises nothing.
        """
        with self._lock:
            for step in ACCESS_FAULT_STEPS:
                if self._armed[step] > 0:
                    self._armed[step] -= 1
                    self._fired[step] += 1
                    self._update_pending()
                    return step
            return None

    def _update_pending(self) -> None:
        """Recompute :attr:`pending` and whether anything is armed; the caller holds the lock."""
        self.pending = sum(self._armed[step] for step in ACCESS_FAULT_STEPS)
        self._any_armed = any(count > 0 for count in self._armed.values())

    def _check(self, step: str) -> None:
        if step not in self._armed:
            raise FabricError(
                f"unknown fault step {step!r} (steps: {', '.join(FAULT_STEPS)})", value=step
            )

    def statistics(self) -> FaultStatistics:
        """A frozen snapshot (copies of the counters)."""
        with self._lock:
            return FaultStatistics(dict(self._armed), dict(self._fired))

    def __repr__(self) -> str:
        with self._lock:
            armed = {k: v for k, v in self._armed.items() if v}
        return f"<FaultInjector armed={armed}>"
