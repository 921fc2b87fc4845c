"""Fault injection: make the next bridge switch, config write or model load fail on purpose.

Tests (and the runtime's rollback tests) arm a step; the simulated backend's operation for
that step checks the injector and fails as the hardware would (a bridge that does not switch,
a config port write error, a window that cannot be attached). Armed faults are consumed one
per failing operation.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from juggle.errors import FabricError

__all__ = ["FAULT_STEPS", "FaultInjector", "FaultStatistics"]

FAULT_STEPS: tuple[str, ...] = ("bridge_disable", "config_write", "bridge_enable", "model_load")


@dataclass(frozen=True, slots=True)
class FaultStatistics:
    """Faults still armed and faults already fired, per step."""

    armed: dict[str, int]
    fired: dict[str, int]


class FaultInjector:
    """Counts of armed failures per step (one of :data:`FAULT_STEPS`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed = dict.fromkeys(FAULT_STEPS, 0)
        self._fired = dict.fromkeys(FAULT_STEPS, 0)

    def arm(self, step: str, count: int = 1) -> None:
        """Make the next ``count`` operations of ``step`` fail.

        Raises :class:`~juggle.errors.FabricError` naming an unknown step or a count < 1.
        """
        self._check(step)
        if count < 1:
            raise FabricError(f'"count" must be >= 1, got {count}', count)
        with self._lock:
            self._armed[step] += count

    def disarm(self, step: str | None = None) -> None:
        """Forget armed faults of ``step`` (all steps when ``None``)."""
        if step is not None:
            self._check(step)
        with self._lock:
            for name in [step] if step else FAULT_STEPS:
                self._armed[name] = 0

    def fire(self, step: str) -> bool:
        """Whether this operation of ``step`` must fail (consumes one armed fault)."""
        with self._lock:
            if self._armed[step] <= 0:
                return False
            self._armed[step] -= 1
            self._fired[step] += 1
            return True

    def _check(self, step: str) -> None:
        if step not in self._armed:
            raise FabricError(
                f"unknown fault step {step!r} (steps: {', '.join(FAULT_STEPS)})", step
            )

    def statistics(self) -> FaultStatistics:
        """A frozen snapshot (copies of the counters)."""
        with self._lock:
            return FaultStatistics(dict(self._armed), dict(self._fired))

    def __repr__(self) -> str:
        with self._lock:
            armed = {k: v for k, v in self._armed.items() if v}
        return f"<FaultInjector armed={armed}>"
