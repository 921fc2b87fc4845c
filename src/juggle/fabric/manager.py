"""The FPGA manager: writes a bitstream through the configuration port, step by step.

As in Linux ``drivers/fpga/fpga-mgr.c``, a backend fills one small table of operations
(:class:`ManagerOps`) and :class:`FpgaManager` walks them in order, setting its state to the
step *before* running it, so a failure leaves the state on that step's error twin and the
raised :class:`~juggle.errors.ProgrammingError` names the step that broke.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from juggle.errors import JuggleError, ProgrammingError
from juggle.fabric.bitstream import Bitstream

__all__ = ["FpgaManager", "ManagerOps", "ManagerState", "ManagerStatistics"]

DEFAULT_CHUNK_BYTES = 4096


class ManagerState(Enum):
    """Phases of programming, each paired with its error twin (``fpga_mgr_states``)."""

    UNKNOWN = "unknown"
    WRITE_INIT = "write init"
    WRITE_INIT_ERR = "write init error"
    WRITE = "write"
    WRITE_ERR = "write error"
    WRITE_COMPLETE = "write complete"
    WRITE_COMPLETE_ERR = "write complete error"
    OPERATING = "operating"

    @property
    def error_twin(self) -> ManagerState:
        """The error state paired with this phase (itself for states without a twin)."""
        return _ERROR_TWIN.get(self, self)


_ERROR_TWIN = {
    ManagerState.WRITE_INIT: ManagerState.WRITE_INIT_ERR,
    ManagerState.WRITE: ManagerState.WRITE_ERR,
    ManagerState.WRITE_COMPLETE: ManagerState.WRITE_COMPLETE_ERR,
}


class ManagerOps(Protocol):
    """What a backend implements to program its device (``struct fpga_manager_ops``)."""

    def write_init(self, bitstream: Bitstream) -> None:
        """Prepare the port for ``bitstream`` (its header is already checked)."""
        ...

    def write(self, chunk: bytes) -> None:
        """Push the next ``chunk`` of the file through the port."""
        ...

    def write_complete(self) -> None:
        """Finish programming; the new configuration is live when this returns."""
        ...

    def state(self) -> str:
        """The device's own view of its state, as text (``"operating"``, ``"write error"``)."""
        ...


@dataclass(frozen=True, slots=True)
class ManagerStatistics:
    """A snapshot of a manager: its state, loads done and failed, bytes written."""

    state: str
    device_state: str
    loads: int
    failures: int
    bytes_written: int
    last_design: str | None


class FpgaManager:
    """Programs bitstreams through one configuration port, one at a time.

    The port is shared by every region of the device: :meth:`load` holds the manager's lock,
    so a second region's program waits for the first to finish.
    """

    def __init__(self, ops: ManagerOps, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> None:
        if chunk_bytes <= 0:
            raise ProgrammingError(
                f'"chunk_bytes" must be > 0, got {chunk_bytes}', value=chunk_bytes
            )
        self._ops = ops
        self._chunk = chunk_bytes
        self._lock = threading.RLock()
        self._state = ManagerState.UNKNOWN
        self._loads = 0
        self._failures = 0
        self._bytes = 0
        self._last: str | None = None

    @property
    def state(self) -> ManagerState:
        """The phase the last (or current) load reached."""
        return self._state

    def device_state(self) -> str:
        """What the backend reports (``ManagerOps.state``); ``"unknown"`` if it cannot say.

        ``state`` is optional for a backend: one without it, or one whose read fails, reads
        as unknown (the default lives here, not in every caller).
        """
        state = getattr(self._ops, "state", None)
        if state is None:
            return ManagerState.UNKNOWN.value
        try:
            return str(state())
        except (JuggleError, OSError):
            return ManagerState.UNKNOWN.value

    def locked(self) -> AbstractContextManager[bool]:
        """Hold the port across several steps (a region holds it for a whole program): the
        port's reentrant lock, which :meth:`load` takes again."""
        return self._lock

    def load(self, bitstream: Bitstream, data: bytes) -> None:
        """Write ``data`` (the whole file ``bitstream`` was parsed from) through the port.

        Raises :class:`~juggle.errors.ProgrammingError` naming the step that failed; its
        ``value`` is the error state's value (``ManagerState.WRITE_ERR.value``, ...).
        """
        with self._lock:
            try:
                with self._step(ManagerState.WRITE_INIT, bitstream):
                    self._ops.write_init(bitstream)
                with self._step(ManagerState.WRITE, bitstream):
                    view = memoryview(data)
                    for start in range(0, len(data), self._chunk):
                        self._ops.write(bytes(view[start : start + self._chunk]))
                        self._bytes += min(self._chunk, len(data) - start)
                with self._step(ManagerState.WRITE_COMPLETE, bitstream):
                    self._ops.write_complete()
            except ProgrammingError:
                self._failures += 1
                raise
            self._state = ManagerState.OPERATING
            self._loads += 1
            self._last = bitstream.design

    @contextmanager
    def _step(self, step: ManagerState, bitstream: Bitstream) -> Iterator[None]:
        self._state = step
        try:
            yield
        except Exception as exc:
            self._state = step.error_twin
            raise ProgrammingError(
                f"programming {bitstream.design!r} ({bitstream.source}) failed in step "
                f"{step.name}: {exc}",
                design=bitstream.design,
                value=self._state.value,
            ) from exc

    def statistics(self) -> ManagerStatistics:
        """A frozen snapshot of this manager."""
        return ManagerStatistics(
            state=self._state.name,
            device_state=self.device_state(),
            loads=self._loads,
            failures=self._failures,
            bytes_written=self._bytes,
            last_design=self._last,
        )

    def __repr__(self) -> str:
        return (
            f"<FpgaManager {self._state.name}, {self._loads} loads, "
            f"{self._failures} failed, {self._bytes} bytes written>"
        )
