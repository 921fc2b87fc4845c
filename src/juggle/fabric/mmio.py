"""The one thing a driver sees of the hardware: a window of 32-bit registers.

A driver implements a service interface on top of an :class:`MMIO` window. On the simulated
fabric the window is backed by a register-level behavioural model and a timing model; on a
board by ``mmap`` of ``/dev/uioN``. The driver does not know which (ARCHITECTURE principle 3).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class MMIO(Protocol):
    """A memory-mapped register window. Offsets are byte offsets, 4-byte aligned."""

    @property
    def size(self) -> int:
        """Size of the window in bytes."""
        ...

    def read32(self, offset: int) -> int:
        """Read the 32-bit register at ``offset``."""
        ...

    def write32(self, offset: int, value: int) -> None:
        """Write ``value`` (0 <= value < 2**32) to the 32-bit register at ``offset``."""
        ...
