"""Shared pieces of the fabric suite: the paper's constants and two tiny register models.

``RegFile`` remembers what is written and records the core cycle every access saw; ``Timer``
reads busy until ``latency`` core cycles after a start.
"""

from __future__ import annotations

from juggle.fabric.sim.model import RegisterModel

PART = "2vp30ff896"
TDES_BYTES = 149_088  # Juggle Table 3
ADD_BYTES = 123_249


class RegFile(RegisterModel):
    """64 plain registers."""

    design = "regfile"
    window_size = 0x100

    def __init__(self) -> None:
        self.regs = [0] * (self.window_size // 4)
        self.seen: list[int] = []

    def read(self, offset: int, now: int) -> int:
        self.seen.append(now)
        return self.regs[offset // 4]

    def write(self, offset: int, value: int, now: int) -> None:
        self.seen.append(now)
        self.regs[offset // 4] = value


class Timer(RegisterModel):
    """Write anything to 0x0 to start; 0x4 reads 1 until ``latency`` cycles later, then 0."""

    design = "timer"
    window_size = 0x10
    latency = 100

    def __init__(self) -> None:
        self.done_at = 0

    def read(self, offset: int, now: int) -> int:
        return 1 if offset == 4 and now < self.done_at else 0

    def write(self, offset: int, value: int, now: int) -> None:
        if offset == 0:
            self.done_at = now + self.latency
