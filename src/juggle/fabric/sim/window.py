"""Simulated MMIO windows: a register model behind a bus with a modeled cost per access.

A :class:`SimWindow` is what a driver gets on the simulated board. Each ``read32``/``write32``
advances the shared modeled clock by the bus cost (``[bus] read_cycles``/``write_cycles``),
then hands the access to the core's :class:`~juggle.fabric.sim.model.RegisterModel` with the
current core cycle, so a status register reads busy until the core's modeled latency passed.
The window counts its own accesses, so a driver's modeled bus time can be attributed to it.

While the region's bridge is closed, or after the design was unloaded or overwritten, the
window refuses accesses (the model is swapped for a refusal, so the hot path has no extra test).

Injected faults (:mod:`juggle.fabric.faults`): every access that reaches the core tests the
backend injector's ``pending`` attribute (one attribute read, no lock while nothing is armed);
only when it is non-zero does it ask the injector which fault this access suffers.
``driver_error`` raises ``OSError(EIO)`` for that one access (neither the core nor the
statistics see it); ``core_hang`` and ``core_garbage`` wrap the model, from that access until
the window is closed (the region reprogrammed), in a stand-in that passes the core a frozen
cycle counter, or XORs ``GARBAGE_PATTERN`` onto reads of the model's ``result_offsets``.
The wrapped model is what the bridge reconnects to, so a faulty core stays faulty across a
bridge switch; ``model`` still returns the real model.
"""

from __future__ import annotations

import errno
import threading
from dataclasses import dataclass

from juggle.errors import BridgeError, FabricError, RegionEmptyError, WindowAccessError
from juggle.fabric.faults import GARBAGE_PATTERN, FaultInjector
from juggle.fabric.sim.clock import PS_PER_S, ModelClock, cycles_to_ps
from juggle.fabric.sim.model import RegisterModel

__all__ = ["SimWindow", "WindowStatistics"]

_MASK32 = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class WindowStatistics:
    """Accesses through one window and the modeled bus time they took."""

    region: str
    design: str
    size: int
    reads: int
    writes: int
    busy_cycles: int
    busy_ns: int
    state: str


class _Refusal(RegisterModel):
    """Stands in for the model while the window cannot be used; every access raises."""

    def __init__(self, error: type[FabricError], message: str, region: str) -> None:
        self._error, self._message, self._region = error, message, region

    def read(self, offset: int, now: int) -> int:
        raise self._error(self._message, region=self._region)

    def write(self, offset: int, value: int, now: int) -> None:
        raise self._error(self._message, region=self._region)


class _HungCore(RegisterModel):
    """A hung core (``core_hang``): ``inner`` sees the cycle of the first access for ever."""

    def __init__(self, inner: RegisterModel) -> None:
        self._inner = inner
        self._frozen: int | None = None

    def _now(self, now: int) -> int:
        if self._frozen is None:
            self._frozen = now
        return self._frozen

    def read(self, offset: int, now: int) -> int:
        return self._inner.read(offset, self._now(now))

    def write(self, offset: int, value: int, now: int) -> None:
        self._inner.write(offset, value, self._now(now))


class _GarbageCore(RegisterModel):
    """A core returning wrong data (``core_garbage``): result registers read XORed."""

    def __init__(self, inner: RegisterModel, result_offsets: tuple[int, ...]) -> None:
        self._inner = inner
        self._results = frozenset(result_offsets)

    def read(self, offset: int, now: int) -> int:
        value = self._inner.read(offset, now)
        return value ^ GARBAGE_PATTERN if offset in self._results else value

    def write(self, offset: int, value: int, now: int) -> None:
        self._inner.write(offset, value, now)


class SimWindow:
    """An MMIO window of ``model.window_size`` bytes over ``model`` (implements ``MMIO``).

    ``read32``/``write32`` raise :class:`~juggle.errors.WindowAccessError` naming a bad offset
    (unaligned or outside the window) or value, :class:`~juggle.errors.BridgeError` while the
    bridge is closed and :class:`~juggle.errors.RegionEmptyError` once the design is gone.
    ``faults`` is the backend's injector (a private, never armed one by default); an armed
    ``driver_error`` makes one access raise ``OSError`` (see :mod:`juggle.fabric.faults`).
    """

    def __init__(
        self,
        region: str,
        model: RegisterModel,
        clock: ModelClock,
        *,
        hz: int,
        read_cycles: int,
        write_cycles: int,
        enabled: bool = True,
        faults: FaultInjector | None = None,
    ) -> None:
        self.region = region
        self.design = model.design or type(model).__name__
        self._model = model
        self._size = model.window_size
        self._hz = hz
        self._advance = clock.advance_ps
        self._read_cycles = read_cycles
        self._write_cycles = write_cycles
        self._read_ps = cycles_to_ps(read_cycles, hz)
        self._write_ps = cycles_to_ps(write_cycles, hz)
        self._lock = threading.Lock()
        self._reads = 0
        self._writes = 0
        self._state = "open"
        self._faults = faults if faults is not None else FaultInjector()
        #: what an open bridge connects to: the model, or a faulty stand-in wrapping it
        self._core: RegisterModel = model
        self._target: RegisterModel = model
        self.set_enabled(enabled)

    @property
    def size(self) -> int:
        """Size of the window in bytes."""
        return self._size

    @property
    def model(self) -> RegisterModel:
        """The behavioural model behind the window (simulator only; drivers never use it)."""
        return self._model

    @property
    def faults(self) -> FaultInjector:
        """The fault injector this window's accesses consult."""
        return self._faults

    def read32(self, offset: int) -> int:
        """Read the 32-bit register at ``offset`` (costs ``read_cycles`` of modeled time).

        Raises the errors listed in the class docstring, and ``OSError`` for an injected
        ``driver_error``.
        """
        if offset & 3 or not 0 <= offset < self._size:
            raise self._bad_offset(offset)
        with self._lock:
            if self._faults.pending:
                self._inject(offset)
            now_ps = self._advance(self._read_ps)
            self._reads += 1
            return self._target.read(offset, now_ps * self._hz // PS_PER_S) & _MASK32

    def write32(self, offset: int, value: int) -> None:
        """Write ``value`` to the register at ``offset`` (costs ``write_cycles``).

        Raises the errors listed in the class docstring, and ``OSError`` for an injected
        ``driver_error``.
        """
        if offset & 3 or not 0 <= offset < self._size:
            raise self._bad_offset(offset)
        if not 0 <= value <= _MASK32:
            raise WindowAccessError(
                f'window {self.region!r}: "value" must be in 0..0xFFFFFFFF, got {value!r}',
                region=self.region,
                value=value,
            )
        with self._lock:
            if self._faults.pending:
                self._inject(offset)
            now_ps = self._advance(self._write_ps)
            self._writes += 1
            self._target.write(offset, value, now_ps * self._hz // PS_PER_S)

    def _inject(self, offset: int) -> None:
        """Apply the armed access fault this access fires, if any; the caller holds the lock.

        An access the bridge or a closed window refuses reaches no core and fires nothing.
        Raises ``OSError(EIO)`` for ``driver_error``.
        """
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
            self._core = _HungCore(self._core)
        elif step == "core_garbage":
            self._core = _GarbageCore(self._core, self._model.result_offsets)
        else:
            return
        self._target = self._core

    def _bad_offset(self, offset: int) -> WindowAccessError:
        why = "is not 4-byte aligned" if offset & 3 else f"is outside 0..{self._size - 4:#x}"
        return WindowAccessError(
            f"window {self.region!r} ({self.design}): offset {offset:#x} {why}",
            region=self.region,
            offset=offset,
        )

    def set_enabled(self, enabled: bool) -> None:
        """Follow the region's bridge: accesses reach the model only while it is open."""
        with self._lock:
            if self._state == "closed":
                return
            self._state = "open" if enabled else "decoupled"
            self._target = (
                self._core
                if enabled
                else _Refusal(
                    BridgeError,
                    f"region {self.region!r} is decoupled (bridge closed): "
                    f"no access to {self.design!r}",
                    self.region,
                )
            )

    def close(self) -> None:
        """The design is gone (unloaded or overwritten): every later access raises."""
        with self._lock:
            self._state = "closed"
            self._target = _Refusal(
                RegionEmptyError,
                f"window of {self.design!r} in region {self.region!r} is closed: "
                "the design was unloaded or overwritten",
                self.region,
            )

    @property
    def busy_ns(self) -> int:
        """Modeled bus time of the accesses so far, in ns (``statistics().busy_ns``, cheaper)."""
        with self._lock:
            return (self._reads * self._read_ps + self._writes * self._write_ps) // 1000

    def statistics(self) -> WindowStatistics:
        """A frozen snapshot: accesses and the modeled bus time they cost."""
        with self._lock:
            reads, writes, state = self._reads, self._writes, self._state
        cycles = reads * self._read_cycles + writes * self._write_cycles
        busy_ps = reads * self._read_ps + writes * self._write_ps
        return WindowStatistics(
            self.region, self.design, self._size, reads, writes, cycles, busy_ps // 1000, state
        )

    def __repr__(self) -> str:
        fault = {_HungCore: ", core hung", _GarbageCore: ", core returns garbage"}
        return (
            f"<SimWindow {self.region}:{self.design} {self._size:#x} bytes, {self._state}"
            f"{fault.get(type(self._core), '')}, {self._reads} reads, {self._writes} writes>"
        )
