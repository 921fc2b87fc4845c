"""One running simulator: a child process serving bus transactions, over shared memory or pipes.

Both transports carry the same transactions (protocol version :data:`PROTOCOL`, announced in
the child's ``ready PROTOCOL TOP`` line on its standard output): a read of the register at a
byte offset answers ``(DATA, CYCLES, STATUS)``, a write of a value ``(CYCLES, STATUS)``.
``CYCLES`` is how many clock cycles the transaction took; ``STATUS`` is the bus response:

======  ===========================================================================
status  meaning
======  ===========================================================================
0       OKAY
1       EXOKAY (not an AXI4-Lite response: a faulty core)
2       SLVERR
3       DECERR
4..8    the handshake waiting for AWREADY, WREADY, BVALID, ARREADY, RVALID (in
        that order) did not complete within the handshake limit: the core hangs
======  ===========================================================================

:class:`SharedMemorySim` (Verilator's ``harness.cpp``) passes each transaction through a
shared mapping (an anonymous ``memfd`` handed to the child as its last argument: nothing is
left in ``/dev/shm``); :class:`PipeSim` (Icarus Verilog, whose harness can only read a file)
sends one line per transaction over the child's standard input and output:

=================  ==========================  =============================================
request            reply                       meaning
=================  ==========================  =============================================
``r ADDR``         ``DATA CYCLES STATUS``      read the register at byte offset ADDR
``w ADDR DATA``    ``CYCLES STATUS``           write DATA to it
``c``              ``CYCLES``                  clock cycles since reset was released
``q``              (none)                      exit (so does end of input)
=================  ==========================  =============================================

(``ADDR``, ``DATA`` hexadecimal; ``CYCLES``, ``STATUS`` decimal.)

Every way the child can fail is a :class:`~juggle.errors.FabricError` raised from the access,
so the runtime contains it like any other fault: the child died
(:class:`~juggle.errors.WindowAccessError` with its exit status and the end of its standard
error), did not answer within ``timeout`` seconds or reported a handshake over the limit
(:class:`~juggle.errors.CoreTimeoutError`), or answered something that is not a reply
(:class:`~juggle.errors.WindowAccessError`). After any of these the child is killed and every
later access raises the same error. A SLVERR, DECERR or EXOKAY response raises
:class:`~juggle.errors.BusResponseError` and leaves the simulator running: the transaction
completed and the core is in a defined state (as on a real bus); the runtime quarantines the
region anyway, which stops it.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import select
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Sequence

from juggle.errors import BusResponseError, CoreTimeoutError, FabricError, WindowAccessError

__all__ = ["PROTOCOL", "PipeSim", "SharedMemorySim", "SimProcess"]

#: Protocol version the harnesses announce in their ready line.
PROTOCOL = 2

_MAX_LINE = 256
_STDERR_TAIL = 600
_MASK32 = 0xFFFFFFFF

#: bus responses that raise BusResponseError (status -> name)
_RESPONSES = {1: "EXOKAY", 2: "SLVERR", 3: "DECERR"}
#: statuses of a handshake over the limit (status -> the signal that never came)
_HANGS = {4: "AWREADY", 5: "WREADY", 6: "BVALID", 7: "ARREADY", 8: "RVALID"}

# -- the shared-memory slots (layout shared with harness.cpp) -----------------------------------
#
# The mapping holds two slots of three 64-bit words each, on separate cache lines: the request
# at byte 0 (written by this process) and the reply at byte 64 (written by the harness).
#
#   request  [SEQ<<32 | OP]  [SEQ<<32 | ADDR]  [SEQ<<32 | DATA]      OP: 1 read, 2 write, 3 quit
#   reply    [SEQ<<32 | STATUS]  [SEQ<<32 | DATA]  [SEQ<<32 | CYCLES]
#
# SEQ counts requests 1, 2, ... 2**32-1, 1, ... (never 0, which the zero-filled mapping holds).
# A slot is whole when all three of its words carry the expected SEQ: the reader spins until
# they do. Memory ordering: this makes the protocol independent of the order in which the
# other side's stores become visible, and of the order of our own loads; it relies only on each
# aligned 64-bit word being written and read whole (single-copy atomic on x86-64 and aarch64;
# struct's native "Q" is one 8-byte memcpy, compiled to one load or store). The harness
# additionally publishes the reply's status word last with a release store and reads the
# request's words with acquire loads (std::atomic), which on x86-64 (total store order) means
# a whole slot is seen at the first matching read.
#
# Doorbells, for a side that stopped spinning: the harness, idle for a while, stores the SEQ it
# waits for at byte 128 and blocks reading its standard input; this process, having posted a
# request, rings (writes a byte there) when it finds that SEQ. This process, waiting long for a
# reply, stores the SEQ at byte 192 and blocks reading the harness's standard output; the
# harness, having replied, rings when it finds that SEQ. Each side re-checks the slot after
# storing its SEQ; a ring lost to the store/load race costs at most the blocked side's timeout
# (the harness's 5 ms, this process's _DOZE_S), never a reply.

_SHM_SIZE = 4096
_REPLY = 64
_HARNESS_DOZES = 128
_RUNTIME_DOZES = 192
_OP_READ, _OP_WRITE, _OP_QUIT = 1, 2, 3
_SLOT = struct.Struct("=QQQ")  # native byte order, standard sizes: three aligned words
_WORD = struct.Struct("=Q")
#: reply polls spun before the wait starts yielding the CPU (a poll takes ~0.2 us)
_SPINS = 100
#: how long the wait then polls, yielding the CPU between polls (so a simulator waiting for a
#: CPU gets it), before it blocks on the doorbell
_YIELD_S = 100e-6
#: the longest block on the doorbell before the reply slot is looked at again
_DOZE_S = 0.002


class SimProcess:
    """A simulator child process (``argv``) serving bus transactions for ``label``.

    ``region`` is named in the errors it raises; ``timeout`` bounds one transaction and
    ``start_timeout`` the wait for the ready line (seconds); ``pass_fds`` are descriptors the
    child inherits (the transport's). Raises, from the constructor and
    from every transaction, the errors listed in the module docstring. Not thread-safe: the
    window serializes its accesses. Use a transport: :class:`SharedMemorySim` or
    :class:`PipeSim`.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        label: str,
        region: str | None = None,
        timeout: float = 5.0,
        start_timeout: float = 30.0,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.label = label
        self.region = region
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
                pass_fds=pass_fds,
                start_new_session=True,  # a terminal's Ctrl-C reaches the runtime, not the core
            )
        except OSError as exc:
            self._stderr.close()
            raise WindowAccessError(
                f"{label}: cannot start the simulator: {exc}", region=region
            ) from exc
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
                        f"(it said {line[:80]!r})",
                        region=region,
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
        raise NotImplementedError

    def write(self, offset: int, value: int) -> int:
        """Cycles of a write transaction of ``value`` at byte ``offset``."""
        raise NotImplementedError

    def _done(self, what: str, offset: int, cycles: int, status: int) -> None:
        """Count a finished transaction; raise what a nonzero ``status`` means."""
        self._cycles += cycles
        self._transactions += 1
        if status == 0:
            return
        response = _RESPONSES.get(status)
        if response is not None:
            raise BusResponseError(
                f"{self.label}: {what} at offset {offset:#x} answered {response}",
                region=self.region,
                offset=offset,
                response=response,
            )
        signal_name = _HANGS.get(status)
        if signal_name is None:
            raise self._garbage(f"status {status}")
        raise self._fail(
            CoreTimeoutError(
                f"{self.label}: {what} at offset {offset:#x}: no {signal_name} within the "
                f"handshake limit ({cycles} cycles; hung); the simulator was stopped",
                region=self.region,
                value=offset,
            )
        )

    def _reply(self, timeout: float, what: str) -> str:
        """The next line from the child's standard output; raises if it dies, stalls or
        floods."""
        if self._error is not None:
            raise self._error
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if len(self._buffer) > _MAX_LINE:
                raise self._garbage(self._buffer[:80].decode(errors="replace"))
            remaining = deadline - time.monotonic()
            ready = select.select([self._out], [], [], remaining)[0] if remaining > 0 else []
            if not ready:
                raise self._fail(self._hung(what, timeout))
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

    def _hung(self, what: str, timeout: float) -> CoreTimeoutError:
        return CoreTimeoutError(
            f"{self.label}: the RTL simulator did not answer {what!r} within "
            f"{timeout:g} s (hung); it was stopped",
            region=self.region,
        )

    def _garbage(self, text: str) -> FabricError:
        return self._fail(
            WindowAccessError(
                f"{self.label}: the RTL simulator answered garbage ({text[:80]!r}); it was stopped",
                region=self.region,
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
            f"{self.label}: the RTL simulator {how}" + (f": {tail}" if tail else ""),
            region=self.region,
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

    def _ask_to_quit(self) -> None:
        """Tell a running child to exit (the transport's way)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the child (politely, then by force) and release the pipes; idempotent."""
        if self._frozen:
            self._kill()
        elif self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._ask_to_quit()
            if self._proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self._proc.stdin.close()  # end of input: the harness exits
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
            self._error = WindowAccessError(
                f"{self.label}: the simulator was stopped", region=self.region
            )

    def __repr__(self) -> str:
        state = "running" if self.alive else "stopped"
        return (
            f"<{type(self).__name__} {self.label} pid {self._proc.pid} {state}, "
            f"{self._cycles} cycles>"
        )


class PipeSim(SimProcess):
    """A simulator spoken to with one line per transaction over its standard input and output
    (the Icarus Verilog harness). ``argv`` is the whole command line."""

    def read(self, offset: int) -> tuple[int, int]:
        """``(value, cycles)`` of a read transaction at byte ``offset``."""
        fields = self._transact(b"r %x\n" % offset, 3)
        value, cycles = self._number(fields[0], 16), self._number(fields[1], 10)
        if value > _MASK32:
            raise self._garbage(" ".join(fields))
        self._done("read", offset, cycles, self._number(fields[2], 10))
        return value, cycles

    def write(self, offset: int, value: int) -> int:
        """Cycles of a write transaction of ``value`` at byte ``offset``."""
        fields = self._transact(b"w %x %x\n" % (offset, value), 2)
        cycles = self._number(fields[0], 10)
        self._done("write", offset, cycles, self._number(fields[1], 10))
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
        return fields

    def _number(self, text: str, base: int) -> int:
        try:
            value = int(text, base)
        except ValueError:
            raise self._garbage(text) from None
        if value < 0:
            raise self._garbage(text)
        return value

    def _ask_to_quit(self) -> None:
        os.write(self._in, b"q\n")


class SharedMemorySim(SimProcess):
    """A simulator whose transactions pass through a shared mapping (the Verilator harness).

    ``argv`` is the command line without its last argument, the number of the mapping's file
    descriptor in the child, which this class appends. Each access writes the request slot,
    then polls the reply slot: spinning for a bounded number of polls, then in short sleeps
    that check the child is alive, until ``timeout``. Raises what :class:`SimProcess` raises;
    a mapping that cannot be made is a :class:`~juggle.errors.WindowAccessError` too.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        label: str,
        region: str | None = None,
        timeout: float = 5.0,
        start_timeout: float = 30.0,
    ) -> None:
        self._seq = 0
        try:
            fd = os.memfd_create("juggle-rtl", os.MFD_CLOEXEC)
        except (OSError, AttributeError) as exc:
            raise WindowAccessError(
                f"{label}: cannot create the simulator's shared memory: {exc}", region=region
            ) from exc
        try:
            os.ftruncate(fd, _SHM_SIZE)
            self._mem = mmap.mmap(fd, _SHM_SIZE)
        except OSError as exc:
            os.close(fd)
            raise WindowAccessError(
                f"{label}: cannot map the simulator's shared memory: {exc}", region=region
            ) from exc
        try:
            super().__init__(
                [*argv, str(fd)],
                label=label,
                region=region,
                timeout=timeout,
                start_timeout=start_timeout,
                pass_fds=(fd,),
            )
        except BaseException:
            self._mem.close()
            raise
        finally:
            os.close(fd)  # the child has its copy; the mapping stays
        os.set_blocking(self._in, False)  # a ring never blocks (a full pipe wakes it anyway)

    def read(self, offset: int) -> tuple[int, int]:
        """``(value, cycles)`` of a read transaction at byte ``offset``."""
        status, value, cycles = self._transact(_OP_READ, offset, 0)
        if status:
            self._done("read", offset, cycles, status)
        self._cycles += cycles
        self._transactions += 1
        return value, cycles

    def write(self, offset: int, value: int) -> int:
        """Cycles of a write transaction of ``value`` at byte ``offset``."""
        status, _, cycles = self._transact(_OP_WRITE, offset, value)
        if status:
            self._done("write", offset, cycles, status)
        self._cycles += cycles
        self._transactions += 1
        return cycles

    def _transact(self, op: int, offset: int, value: int) -> tuple[int, int, int]:
        """Post one request and wait for its reply: ``(status, data, cycles)``."""
        if self._error is not None:
            raise self._error
        seq = self._seq = self._seq % _MASK32 + 1
        tag = seq << 32
        mem, unpack = self._mem, _SLOT.unpack_from
        _SLOT.pack_into(mem, 0, tag | op, tag | offset, tag | value)
        if _WORD.unpack_from(mem, _HARNESS_DOZES)[0] == seq:  # the harness sleeps: wake it
            self._ring()
        for _ in range(_SPINS):
            head, data, cycles = unpack(mem, _REPLY)
            if head >> 32 == seq == data >> 32 == cycles >> 32:
                return head & _MASK32, data & _MASK32, cycles & _MASK32
        return self._wait(seq, op, offset)

    def _ring(self) -> None:
        try:
            os.write(self._in, b"!")
        except BlockingIOError:
            pass  # the pipe is full of rings the harness has yet to read
        except OSError:
            raise self._fail(self._died()) from None

    def _wait(self, seq: int, op: int, offset: int) -> tuple[int, int, int]:
        """The slow path of a reply: polls yielding the CPU, then blocks on the doorbell,
        checking that the child lives, until the timeout."""
        mem = self._mem
        now = time.monotonic()
        deadline, sleepy = now + self.timeout, now + _YIELD_S
        while True:
            head, data, cycles = _SLOT.unpack_from(mem, _REPLY)
            if head >> 32 == seq == data >> 32 == cycles >> 32:
                return head & _MASK32, data & _MASK32, cycles & _MASK32
            if self._proc.poll() is not None:
                raise self._fail(self._died())
            now = time.monotonic()
            if now > deadline:
                what = f"{'read' if op == _OP_READ else 'write'} at offset {offset:#x}"
                raise self._fail(self._hung(what, self.timeout))
            if now < sleepy:
                os.sched_yield()
                continue
            _WORD.pack_into(mem, _RUNTIME_DOZES, seq)
            head, data, cycles = _SLOT.unpack_from(mem, _REPLY)
            if head >> 32 == seq == data >> 32 == cycles >> 32:
                continue  # it came meanwhile
            rung = select.select([self._out], [], [], min(_DOZE_S, deadline - now))[0]
            if rung and not os.read(self._out, 4096):  # end of output: the harness is gone
                raise self._fail(self._died())

    def _ask_to_quit(self) -> None:
        seq = self._seq % _MASK32 + 1
        _SLOT.pack_into(self._mem, 0, seq << 32 | _OP_QUIT, seq << 32, seq << 32)

    def close(self) -> None:
        """Stop the child, release the pipes and the mapping; idempotent."""
        super().close()
        with contextlib.suppress(BufferError):
            self._mem.close()
