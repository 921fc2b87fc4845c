"""One running simulator: a child process spoken to over pipes, one line per bus transaction.

The protocol (implemented by ``harness.cpp``; operands hexadecimal, one request per line):

=================  =====================  ==================================================
request            reply                  meaning
=================  =====================  ==================================================
``r ADDR``         ``DATA CYCLES``        read the register at byte offset ADDR
``w ADDR DATA``    ``CYCLES``             write DATA to it
``c``              ``CYCLES``             clock cycles since reset was released
``q``              (none)                 exit
=================  =====================  ==================================================

``CYCLES`` (decimal) is how many clock cycles the transaction took. At start the simulator
prints ``ready 1 TOP``. A :class:`SimProcess` turns every way the child can fail into a
:class:`~juggle.errors.FabricError` raised from the access, so the runtime contains it like any
other fault: the child died (:class:`~juggle.errors.WindowAccessError` with its exit status
and the end of its standard error), did not answer within ``timeout`` seconds
(:class:`~juggle.errors.CoreTimeoutError`), or answered something that is not a reply
(:class:`~juggle.errors.WindowAccessError`). After any of these the child is killed and every
later access raises the same error.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence

from juggle.errors import CoreTimeoutError, FabricError, WindowAccessError

__all__ = ["PROTOCOL", "SimProcess"]

#: Protocol version the harness announces in its ready line.
PROTOCOL = 1

_MAX_LINE = 256
_STDERR_TAIL = 600


class SimProcess:
    """A simulator child process (``argv``) serving bus transactions for ``label``.

    ``timeout`` bounds one transaction and ``start_timeout`` the wait for the ready line
    (seconds). Raises, from the constructor and from every transaction, the errors listed in
    the module docstring. Not thread-safe: the window serializes its accesses.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        label: str,
        timeout: float = 5.0,
        start_timeout: float = 30.0,
    ) -> None:
        self.label = label
        self.timeout = timeout
        self._buffer = b""
        self._error: FabricError | None = None
        self._cycles = 0
        self._transactions = 0
        self._frozen = False
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
        try:
            self._proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                bufsize=0,
                start_new_session=True,  # a terminal's Ctrl-C reaches the runtime, not the core
            )
        except OSError as exc:
            self._stderr.close()
            raise WindowAccessError(f"{label}: cannot start the simulator: {exc}") from exc
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in = self._proc.stdin.fileno()
        self._out = self._proc.stdout.fileno()
        try:
            line = self._reply(start_timeout, "start")
            fields = line.split()
            if len(fields) < 2 or fields[0] != "ready" or fields[1] != str(PROTOCOL):
                raise self._fail(
                    WindowAccessError(
                        f"{label}: the simulator did not announce protocol {PROTOCOL} "
                        f"(it said {line[:80]!r})"
                    )
                )
        except FabricError:
            self.close()  # release the pipes; the error stays what it was
            raise

    # -- transactions --------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._proc.pid

    @property
    def cycles(self) -> int:
        """Clock cycles the transactions so far took (reset not counted)."""
        return self._cycles

    @property
    def transactions(self) -> int:
        """Transactions completed."""
        return self._transactions

    @property
    def alive(self) -> bool:
        """Whether the child runs and has not failed."""
        return self._error is None and self._proc.poll() is None

    def read(self, offset: int) -> tuple[int, int]:
        """``(value, cycles)`` of a read transaction at byte ``offset``."""
        fields = self._transact(b"r %x\n" % offset, 2)
        value, cycles = self._number(fields[0], 16), self._number(fields[1], 10)
        if value > 0xFFFFFFFF:
            raise self._garbage(" ".join(fields))
        self._cycles += cycles
        return value, cycles

    def write(self, offset: int, value: int) -> int:
        """Cycles of a write transaction of ``value`` at byte ``offset``."""
        cycles = self._number(self._transact(b"w %x %x\n" % (offset, value), 1)[0], 10)
        self._cycles += cycles
        return cycles

    def _transact(self, request: bytes, count: int) -> list[str]:
        if self._error is not None:
            raise self._error
        try:
            os.write(self._in, request)
        except OSError:
            raise self._fail(self._died()) from None
        fields = self._reply(self.timeout, request.decode().strip()).split()
        if len(fields) != count:
            raise self._garbage(" ".join(fields))
        self._transactions += 1
        return fields

    def _number(self, text: str, base: int) -> int:
        try:
            value = int(text, base)
        except ValueError:
            raise self._garbage(text) from None
        if value < 0:
            raise self._garbage(text)
        return value

    def _reply(self, timeout: float, what: str) -> str:
        """The next line from the child; raises if it dies, stalls or floods."""
        if self._error is not None:
            raise self._error
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if len(self._buffer) > _MAX_LINE:
                raise self._garbage(self._buffer[:80].decode(errors="replace"))
            remaining = deadline - time.monotonic()
            ready = select.select([self._out], [], [], remaining)[0] if remaining > 0 else []
            if not ready:
                raise self._fail(
                    CoreTimeoutError(
                        f"{self.label}: the RTL simulator did not answer {what!r} within "
                        f"{timeout:g} s (hung); it was stopped"
                    )
                )
            chunk = os.read(self._out, 4096)
            if not chunk:
                raise self._fail(self._died())
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return line.decode("ascii")
        except UnicodeDecodeError:
            raise self._garbage(line[:80].decode(errors="replace")) from None

    # -- failures --------------------------------------------------------------------------------

    def _garbage(self, text: str) -> FabricError:
        return self._fail(
            WindowAccessError(
                f"{self.label}: the RTL simulator answered garbage ({text[:80]!r}); it was stopped"
            )
        )

    def _died(self) -> WindowAccessError:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=1.0)
        status = self._proc.returncode
        how = (
            f"was killed by signal {-status}"
            if status is not None and status < 0
            else f"exited with status {status}"
        )
        tail = self._stderr_tail()
        return WindowAccessError(
            f"{self.label}: the RTL simulator {how}" + (f": {tail}" if tail else "")
        )

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - _STDERR_TAIL))
            return self._stderr.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def _fail(self, error: FabricError) -> FabricError:
        """Remember ``error`` for every later access, stop the child, return the error."""
        if self._error is None:
            self._error = error
        self._kill()
        return self._error

    def hang(self) -> None:
        """Freeze the child (SIGSTOP), as a hung core: the next access times out."""
        if self._error is None and self._proc.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(self._proc.pid, signal.SIGSTOP)
                self._frozen = True

    def _kill(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5.0)

    def close(self) -> None:
        """Stop the child (politely, then by force) and release the pipes; idempotent."""
        if self._frozen:
            self._kill()
        elif self._proc.poll() is None:
            with contextlib.suppress(OSError):
                os.write(self._in, b"q\n")
            try:
                self._proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                self._kill()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(OSError):
            self._stderr.close()
        if self._error is None:
            self._error = WindowAccessError(f"{self.label}: the simulator was stopped")

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return f"<SimProcess {self.label} pid {self._proc.pid} {state}, {self._cycles} cycles>"
