"""RTL windows: an MMIO window whose registers live in a running RTL simulation.

An :class:`RtlWindow` is a :class:`~juggle.fabric.sim.window.SimWindow` (same offset checks,
bridge gating, closing, statistics and injected access faults) whose core is the design's
RTL in a :class:`~juggle.fabric.rtl.process.SimProcess` instead of a Python register model.
Every ``read32``/``write32`` is one bus transaction of real clock cycles in the simulator:
on the register bus the profile's ``[bus] read_cycles`` (``write_cycles``) long, the strobe in
its last cycle (at least one cycle); on AXI4-Lite that long for a core answering at once,
longer by every wait state the core adds (``docs/rtl.md``). The modeled clock advances by
the cycles the RTL reports at the profile's ``fabric_hz``: the window charges the profile's
bus cost as every simulated window does, and the core adds any cycles the transaction took
beyond it.

Injected access faults (:mod:`juggle.fabric.faults`): ``driver_error`` raises ``OSError`` as on
every simulated window; ``core_garbage`` XORs ``GARBAGE_PATTERN`` onto reads of the design's
result registers; ``core_hang`` freezes the simulator process (SIGSTOP), so the next access
times out with :class:`~juggle.errors.CoreTimeoutError`, as a real hung simulator would.
"""

from __future__ import annotations

import errno

from juggle.fabric.faults import GARBAGE_PATTERN, FaultInjector
from juggle.fabric.rtl.process import SimProcess
from juggle.fabric.sim.clock import ModelClock, cycles_to_ps
from juggle.fabric.sim.model import RegisterModel
from juggle.fabric.sim.window import SimWindow

__all__ = ["RtlWindow"]


class _RtlCore(RegisterModel):
    """Stands in the window for a register model: forwards each access to the simulator."""

    def __init__(
        self, sim: SimProcess, clock: ModelClock, hz: int, read_cycles: int, write_cycles: int
    ) -> None:
        self._sim = sim
        self._advance = clock.advance_ps
        self._hz = hz
        self._read_cycles = read_cycles
        self._write_cycles = write_cycles

    def read(self, offset: int, now: int) -> int:
        value, cycles = self._sim.read(offset)
        if cycles > self._read_cycles:  # the window charged the profile's cost already
            self._advance(cycles_to_ps(cycles - self._read_cycles, self._hz))
        return value

    def write(self, offset: int, value: int, now: int) -> None:
        cycles = self._sim.write(offset, value)
        if cycles > self._write_cycles:
            self._advance(cycles_to_ps(cycles - self._write_cycles, self._hz))


class _Garbled(RegisterModel):
    """A core answering wrong data (``core_garbage``): result registers read XORed."""

    def __init__(self, inner: RegisterModel, result_offsets: tuple[int, ...]) -> None:
        self._inner = inner
        self._results = frozenset(result_offsets)

    def read(self, offset: int, now: int) -> int:
        value = self._inner.read(offset, now)
        return value ^ GARBAGE_PATTERN if offset in self._results else value

    def write(self, offset: int, value: int, now: int) -> None:
        self._inner.write(offset, value, now)


class RtlWindow(SimWindow):
    """The window of ``design`` in ``region``, served by the simulator ``sim``.

    Raises what :class:`~juggle.fabric.sim.window.SimWindow` raises, plus the simulator's
    failures (:class:`~juggle.errors.WindowAccessError` when it died or answered garbage,
    :class:`~juggle.errors.BusResponseError` when an AXI4-Lite core answered SLVERR or
    DECERR, :class:`~juggle.errors.CoreTimeoutError` when it hung or a handshake went over the
    limit). Closing the window stops the simulator.
    """

    def __init__(
        self,
        region: str,
        design: str,
        sim: SimProcess,
        clock: ModelClock,
        *,
        hz: int,
        read_cycles: int,
        write_cycles: int,
        window_size: int,
        result_offsets: tuple[int, ...] = (),
        enabled: bool = True,
        faults: FaultInjector | None = None,
    ) -> None:
        core_type = type(
            f"Rtl_{design}",
            (_RtlCore,),
            {"design": design, "window_size": window_size, "result_offsets": result_offsets},
        )
        core = core_type(sim, clock, hz, read_cycles, write_cycles)
        self._sim = sim
        self._result_offsets = result_offsets
        super().__init__(
            region,
            core,
            clock,
            hz=hz,
            read_cycles=read_cycles,
            write_cycles=write_cycles,
            enabled=enabled,
            faults=faults,
        )

    @property
    def pid(self) -> int:
        """Process id of the simulator (tests and operators only)."""
        return self._sim.pid

    @property
    def rtl_cycles(self) -> int:
        """Clock cycles the RTL ran for this window's transactions."""
        return self._sim.cycles

    @property
    def simulator(self) -> SimProcess:
        """The simulator process behind the window."""
        return self._sim

    def _inject(self, offset: int) -> None:
        """Apply the armed access fault this access fires (the caller holds the lock)."""
        if self._state != "open":
            return
        step = self._faults.fire_access()
        if step == "driver_error":
            raise OSError(
                errno.EIO,
                f"injected fault: bus error on region {self.region!r} ({self.design}) "
                f"at offset {offset:#x}",
            )
        if step == "core_hang":
            self._sim.hang()
        elif step == "core_garbage":
            self._core = _Garbled(self._core, self._result_offsets)
            self._target = self._core

    def close(self) -> None:
        """The design is gone: later accesses raise, and the simulator is stopped."""
        super().close()
        with self._lock:
            self._sim.close()

    def __repr__(self) -> str:
        state = "running" if self._sim.alive else "stopped"
        return (
            f"<RtlWindow {self.region}:{self.design} {self.size:#x} bytes, {self._state}, "
            f"simulator {state}, {self._reads} reads, {self._writes} writes, "
            f"{self._sim.cycles} RTL cycles>"
        )
