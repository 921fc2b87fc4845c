"""Register-level behavioural models: what sits behind a simulated MMIO window.

A model is the simulator's stand-in for a hardware core. It sees register reads and writes
with the current core-clock cycle, and answers as the core would: a status register reads
busy until the operation's modeled latency has elapsed. Models are looked up by the design
name found in a bitstream's header.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar


class RegisterModel(ABC):
    """Base of behavioural core models.

    Subclasses set ``design`` (the design name bitstreams carry) and ``window_size`` and
    implement :meth:`read` and :meth:`write`. ``now`` is the fabric's modeled clock in core
    cycles at the moment of the access; a model schedules completion as ``now + latency``.
    ``result_offsets`` names the registers that carry the core's computed output (not status,
    control or configuration): the simulated fabric corrupts exactly these when a
    ``core_garbage`` fault (:mod:`juggle.fabric.faults`) hits the core.
    """

    design: ClassVar[str] = ""
    window_size: ClassVar[int] = 0x100
    result_offsets: ClassVar[tuple[int, ...]] = ()

    @abstractmethod
    def read(self, offset: int, now: int) -> int:
        """Value of the register at ``offset`` at cycle ``now``."""

    @abstractmethod
    def write(self, offset: int, value: int, now: int) -> None:
        """Write ``value`` to the register at ``offset`` at cycle ``now``."""

    def reset(self) -> None:  # noqa: B027 - optional hook, default: stateless
        """Return to the power-on state (after programming)."""

    def save_context(self) -> bytes:
        """The core's internal state, for preemption (empty for stateless cores)."""
        return b""

    def restore_context(self, context: bytes) -> None:  # noqa: B027 - optional hook
        """Load state produced by :meth:`save_context`."""
