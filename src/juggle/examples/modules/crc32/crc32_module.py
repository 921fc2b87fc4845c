"""Code of the ``crc32`` co-module: ``crc.ChecksumService`` at three tiers, written from scratch.

* software: :class:`SoftwareCrc32`, table-driven CRC-32 in pure Python (one table look-up per
  byte);
* native: :class:`NativeCrc32`, the C implementation in Python's :mod:`zlib`;
* hardware: :class:`Crc32Driver` over the register window of a CRC-32 core; on the simulated
  fabric :class:`Crc32Core` plays that core, a bit-serial model of a 32-bit parallel LFSR.

Register map of the core (byte offsets, 32-bit registers):

=====  ========  ====  ====================================================================
0x00   CRC       R/W   the running CRC-32 in zlib's form; write the previous value (0 to start
                       a message) first; read it once STATUS.BUSY is clear
0x04   STATUS    R     bit 0 BUSY: data written is still in the datapath
0x08   DATA      W     four message bytes, little-endian (bits 7..0 are the first byte);
                       ``latency`` core cycles
0x0C   DATA8     W     one message byte (bits 7..0), for a tail of one to three bytes;
                       ``latency`` core cycles
0x10   COUNT     R     message bytes taken since power-on, modulo 2**32 (statistics)
0x38   LATENCY   R     core cycles per word (1)
0x3C   ID        R     ``ID_CRC32`` (0x43524331, "CRC1")
=====  ========  ====  ====================================================================

The datapath takes a whole 32-bit word per cycle: an XOR tree computes the LFSR's state after
32 input bits in one step (what :meth:`Crc32Core._word` unrolls bit by bit). Data written while
BUSY queues behind the words before it; writing CRC discards it. Unmapped offsets read 0;
writes to them are ignored.
The service keeps no state between calls (the caller carries the running CRC), so the core
needs no context save: every call seeds CRC first.
"""

from __future__ import annotations

import struct
import threading
import zlib
from typing import ClassVar

from juggle.errors import CoreTimeoutError, ServiceArgumentError
from juggle.fabric.mmio import MMIO
from juggle.fabric.sim.model import RegisterModel

from .crc import ChecksumService

__all__ = [
    "ChecksumService",
    "Crc32Core",
    "Crc32Driver",
    "NativeCrc32",
    "SoftwareCrc32",
    "crc32_table",
]

POLYNOMIAL = 0xEDB88320  # x^32 + x^26 + ... + 1, bit-reversed (the LSB-first form)
MASK32 = 0xFFFFFFFF

CRC = 0x00
STATUS = 0x04
DATA = 0x08
DATA8 = 0x0C
COUNT = 0x10
LATENCY = 0x38
ID = 0x3C
STATUS_BUSY = 0x1
ID_CRC32 = 0x43524331  # "CRC1"
WINDOW_SIZE = 0x40
DEFAULT_MAX_POLLS = 100_000


def crc32_table() -> tuple[int, ...]:
    """The 256 remainders of one byte through the reflected CRC-32 LFSR."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ POLYNOMIAL if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = crc32_table()


def _message(data: object) -> memoryview:
    """``data`` as a flat view of bytes; :class:`ServiceArgumentError` if not bytes-like."""
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise ServiceArgumentError(
            f'"data" must be bytes-like, got {type(data).__name__}', argument="data"
        ) from None
    if view.format != "B" or view.ndim != 1 or not view.c_contiguous:
        view = memoryview(view.tobytes())  # any buffer, as its bytes in memory order
    return view


def _value(value: object) -> int:
    """``value`` as a CRC-32 to continue from; :class:`ServiceArgumentError` if it is none."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MASK32:
        raise ServiceArgumentError(
            f'"value" must be an int in 0..0xFFFFFFFF (a previous CRC-32), got {value!r}',
            argument="value",
            value=value,
        )
    return value


# -- software and native tiers ----------------------------------------------------------------


class SoftwareCrc32(ChecksumService):
    """CRC-32 in pure Python: one table look-up, shift and XOR per byte."""

    def crc32(self, data: bytes, value: int = 0) -> int:
        """The CRC-32 of ``data`` continuing from ``value``, as ``zlib.crc32``."""
        view = _message(data)
        crc = _value(value) ^ MASK32
        table = _TABLE
        for byte in view.tobytes():
            crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
        return crc ^ MASK32


class NativeCrc32(ChecksumService):
    """CRC-32 by the C code of :mod:`zlib` (the native tier)."""

    def crc32(self, data: bytes, value: int = 0) -> int:
        """The CRC-32 of ``data`` continuing from ``value``, as ``zlib.crc32``."""
        return zlib.crc32(_message(data), _value(value))


# -- hardware model -----------------------------------------------------------------------------


class Crc32Core(RegisterModel):
    """The CRC-32 core on the simulated fabric: one 32-bit word per cycle.

    Resources are an estimate for a Virtex-II Pro (4-input LUTs): the 32 next-state bits are
    XORs of up to 64 inputs, about 350 LUTs (~184 slices); 32 CRC flip-flops, a 32-bit input
    register, the byte counter and bus glue (~112 flip-flops); no multipliers, no block RAM.
    """

    design: ClassVar[str] = "crc32"
    window_size: ClassVar[int] = WINDOW_SIZE
    result_offsets: ClassVar[tuple[int, ...]] = (CRC,)
    #: core cycles per datapath step: a word written to DATA (or a byte to DATA8)
    latency: ClassVar[int] = 1
    resources: ClassVar[dict[str, int]] = {"slices": 184, "flipflops": 112, "mult18": 0, "ram16": 0}

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Power-on state: CRC 0, idle, nothing counted."""
        self._state = MASK32  # the LFSR holds the complement of zlib's value
        self._ready_at = 0
        self._settled = 0  # what CRC reads while the datapath is busy
        self._count = 0
        #: datapath steps since power-on, words and single bytes (statistics only)
        self.operations = 0
        self.words = 0
        self.bytes = 0

    @staticmethod
    def _shift(state: int, bits: int, count: int) -> int:
        """The LFSR after ``count`` input bits (LSB first), one bit per step."""
        for _ in range(count):
            feedback = (state ^ bits) & 1
            state >>= 1
            bits >>= 1
            if feedback:
                state ^= POLYNOMIAL
        return state

    def _word(self, word: int) -> int:
        return self._shift(self._state, word, 32)

    def _busy(self, now: int) -> bool:
        if now >= self._ready_at:
            self._settled = self._state ^ MASK32
            return False
        return True

    def _take(self, state: int, nbytes: int, now: int) -> None:
        if not self._busy(now):
            self._ready_at = now
        self._state = state
        self._ready_at += self.latency  # queued behind what is still in the datapath
        self._count = (self._count + nbytes) & MASK32
        self.operations += 1

    def read(self, offset: int, now: int) -> int:
        """Register value at cycle ``now`` (see the register map)."""
        busy = self._busy(now)
        if offset == CRC:
            return self._settled
        if offset == STATUS:
            return STATUS_BUSY if busy else 0
        if offset == COUNT:
            return self._count
        if offset == LATENCY:
            return self.latency
        if offset == ID:
            return ID_CRC32
        return 0

    def write(self, offset: int, value: int, now: int) -> None:
        """Write a register at cycle ``now``: seed CRC, or feed a word or a byte."""
        value &= MASK32
        if offset == CRC:
            self._state = value ^ MASK32  # discards whatever is still in the datapath
            self._settled = value
            self._ready_at = now
        elif offset == DATA:
            self._take(self._word(value), 4, now)
            self.words += 1
        elif offset == DATA8:
            self._take(self._shift(self._state, value & 0xFF, 8), 1, now)
            self.bytes += 1

    def __repr__(self) -> str:
        return f"<Crc32Core {self.words} words, {self.bytes} single bytes>"


# -- driver -------------------------------------------------------------------------------------


class Crc32Driver(ChecksumService):
    """``crc.ChecksumService`` on the CRC-32 core: seed CRC, write the message a word at a time
    (the tail a byte at a time), wait until not BUSY, read CRC. One caller at a time."""

    def __init__(self, mmio: MMIO, *, max_polls: int = DEFAULT_MAX_POLLS) -> None:
        self._mmio = mmio
        self._max_polls = max_polls
        self._lock = threading.Lock()

    def crc32(self, data: bytes, value: int = 0) -> int:
        """The CRC-32 of ``data`` continuing from ``value``, computed by the core.

        Raises :class:`~juggle.errors.ServiceArgumentError` for bad arguments and
        :class:`~juggle.errors.CoreTimeoutError` if the core stays BUSY.
        """
        view = _message(data)
        seed = _value(value)
        whole = len(view) - len(view) % 4
        read, write = self._mmio.read32, self._mmio.write32
        with self._lock:
            write(CRC, seed)
            for (word,) in struct.iter_unpack("<I", view[:whole]):
                write(DATA, word)
            for byte in view[whole:]:
                write(DATA8, byte)
            polls = 0
            while read(STATUS) & STATUS_BUSY:
                polls += 1
                if polls >= self._max_polls:
                    raise CoreTimeoutError(
                        f"Crc32Driver: core still BUSY after {polls} status reads"
                    )
            return read(CRC)

    def __repr__(self) -> str:
        return f"<Crc32Driver on {self._mmio!r}>"
