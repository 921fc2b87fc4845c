"""Shared memory: the system memory software and hardware threads both read and write.

A :class:`SharedMemory` is a flat, byte-addressed buffer of 32-bit little-endian words (numpy
backed). Software threads may use the live :attr:`SharedMemory.words` view directly, as they
share the address space; hardware threads reach it through ``read``/``write`` (one word over the
bus) and ``read_burst``/``write_burst`` (many words per bus transaction), whose bus cycles the
thread runtime models with :class:`~juggle.hwthreads.HwTiming`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from juggle.errors import HwThreadArgumentError

WORD_BYTES = 4


@dataclass(frozen=True, slots=True)
class MemoryStatistics:
    """Snapshot of a :class:`SharedMemory`'s traffic counters."""

    name: str
    size_bytes: int
    reads: int
    writes: int
    burst_reads: int
    burst_writes: int
    bytes_read: int
    bytes_written: int


class SharedMemory:
    """A word-addressable shared buffer with single-word and burst access."""

    def __init__(self, size_bytes: int, name: str = "") -> None:
        """Allocate ``size_bytes`` zeroed bytes.

        Raises:
            HwThreadArgumentError: ``size_bytes`` is not a positive multiple of 4.
        """
        if size_bytes <= 0 or size_bytes % WORD_BYTES:
            raise HwThreadArgumentError(
                f'"size_bytes" must be a positive multiple of 4, got {size_bytes!r}',
                value=size_bytes,
            )
        self.name = name
        self.size_bytes = size_bytes
        self._words = np.zeros(size_bytes // WORD_BYTES, dtype="<u4")
        self._lock = threading.Lock()
        self._counts = [0, 0, 0, 0, 0, 0]  # reads, writes, burst r/w, bytes r/w

    @property
    def words(self) -> npt.NDArray[np.uint32]:
        """The live word view (software threads' direct access)."""
        return self._words

    def _index(self, address: int, nwords: int) -> int:
        if address % WORD_BYTES or address < 0:
            raise HwThreadArgumentError(
                f'"address" must be a non-negative multiple of 4, got {address!r}', value=address
            )
        if nwords < 0 or address + nwords * WORD_BYTES > self.size_bytes:
            raise HwThreadArgumentError(
                f"access of {nwords} words at {address:#x} exceeds {self.size_bytes} bytes",
                value=address,
            )
        return address // WORD_BYTES

    def _count(self, slot: int, nbytes: int, bytes_slot: int) -> None:
        with self._lock:
            self._counts[slot] += 1
            self._counts[bytes_slot] += nbytes

    def read(self, address: int) -> int:
        """The word at byte ``address``.

        Raises:
            HwThreadArgumentError: unaligned or outside the memory.
        """
        value = int(self._words[self._index(address, 1)])
        self._count(0, WORD_BYTES, 4)
        return value

    def write(self, address: int, value: int) -> None:
        """Store the 32-bit ``value`` at byte ``address``.

        Raises:
            HwThreadArgumentError: unaligned, outside the memory, or not a 32-bit value.
        """
        if not 0 <= value <= 0xFFFF_FFFF:
            raise HwThreadArgumentError(f'"value" must fit 32 bits, got {value!r}', value=value)
        self._words[self._index(address, 1)] = value
        self._count(1, WORD_BYTES, 5)

    def read_burst(self, address: int, nwords: int) -> npt.NDArray[np.uint32]:
        """A copy of ``nwords`` words starting at byte ``address``.

        Raises:
            HwThreadArgumentError: unaligned, negative length or outside the memory.
        """
        start = self._index(address, nwords)
        data = self._words[start : start + nwords].copy()
        self._count(2, nwords * WORD_BYTES, 4)
        return data

    def write_burst(self, address: int, data: npt.ArrayLike) -> None:
        """Store the words of ``data`` starting at byte ``address``.

        Raises:
            HwThreadArgumentError: unaligned, outside the memory, or values beyond 32 bits.
        """
        array = np.asarray(data)
        if array.ndim != 1:
            raise HwThreadArgumentError(f'"data" must be 1-D, got shape {array.shape}')
        if array.size and array.dtype != np.uint32 and (array.min() < 0 or array.max() > 2**32 - 1):
            raise HwThreadArgumentError('"data" holds values that do not fit 32 bits')
        start = self._index(address, array.size)
        self._words[start : start + array.size] = array
        self._count(3, array.size * WORD_BYTES, 5)

    def statistics(self) -> MemoryStatistics:
        """A frozen snapshot of the traffic counters."""
        with self._lock:
            return MemoryStatistics(self.name, self.size_bytes, *self._counts)

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        reads, writes, burst_r, burst_w = self._counts[:4]
        return (
            f"<SharedMemory{label} {self.size_bytes} bytes, {reads + burst_r} reads, "
            f"{writes + burst_w} writes ({burst_r + burst_w} bursts)>"
        )
