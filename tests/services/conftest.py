"""Fixtures of the services suite: a tiny MMIO window over a register model.

The window advances a fake core-clock counter on every access, so a driver that polls a status
register sees the core finish after ``latency`` accesses, independent of the fabric's timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from juggle.fabric.sim.model import RegisterModel


class CycleWindow:
    """An MMIO window over ``model``; every access costs ``cycles_per_access`` core cycles.

    Counts reads and writes; with ``yield_gil`` each access sleeps 0 s so concurrent callers
    get every chance to interleave their register sequences.
    """

    def __init__(
        self, model: RegisterModel, cycles_per_access: int = 1, yield_gil: bool = False
    ) -> None:
        self.model = model
        self.now = 0
        self.cycles_per_access = cycles_per_access
        self.yield_gil = yield_gil
        self.reads = 0
        self.writes = 0

    @property
    def size(self) -> int:
        return self.model.window_size

    def _check(self, offset: int) -> None:
        assert offset % 4 == 0 and 0 <= offset < self.size, f"bad offset {offset:#x}"
        if self.yield_gil:
            time.sleep(0)

    def read32(self, offset: int) -> int:
        self._check(offset)
        self.now += self.cycles_per_access
        self.reads += 1
        value = self.model.read(offset, self.now)
        assert 0 <= value < 1 << 32
        return value

    def write32(self, offset: int, value: int) -> None:
        self._check(offset)
        assert 0 <= value < 1 << 32, f"write of {value} to {offset:#x} is not a 32-bit value"
        self.now += self.cycles_per_access
        self.writes += 1
        self.model.write(offset, value, self.now)


WindowFactory = Callable[..., CycleWindow]


@pytest.fixture
def window() -> WindowFactory:
    """``window(model, cycles_per_access=1, yield_gil=False)`` → a :class:`CycleWindow`."""
    return CycleWindow
