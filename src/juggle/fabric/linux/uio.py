"""MMIO on a board: a UIO device's register map, ``mmap``-ed into the process.

A UIO device ``uioN`` describes its memory maps in ``/sys/class/uio/uioN/maps/mapM/`` (``addr``,
``size`` and, on newer kernels, ``offset``: where the registers start inside the first page).
User space maps map M by calling ``mmap`` on ``/dev/uioN`` with file offset ``M * PAGESIZE``.
:class:`UioWindow` does that and reads/writes 32-bit words through a ``memoryview`` cast to
native unsigned ints (one aligned 4-byte access per call, in the CPU's byte order).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path

from juggle.errors import BackendError, RegionEmptyError, WindowAccessError
from juggle.fabric.linux.sysfs import SysfsOps

__all__ = ["UioMap", "UioWindow", "find_uio", "read_uio_map"]

_MASK32 = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class UioMap:
    """One UIO memory map: device, map index, physical address, size and in-page offset."""

    device: str
    index: int
    addr: int
    size: int
    offset: int


def find_uio(sysfs: SysfsOps, name: str) -> str:
    """The ``uioN`` whose ``name`` attribute is ``name``.

    Raises :class:`~juggle.errors.BackendError` naming the devices found when none matches.
    """
    found: dict[str, str] = {}
    for device in sysfs.listdir("sys/class/uio"):
        try:
            found[device] = sysfs.read(f"sys/class/uio/{device}/name").strip()
        except OSError:
            continue
        if found[device] == name:
            return device
    seen = ", ".join(f"{d}={n!r}" for d, n in found.items()) or "none"
    raise BackendError(f"no UIO device named {name!r} (found: {seen})", name)


def read_uio_map(sysfs: SysfsOps, device: str, index: int = 0) -> UioMap:
    """Parse ``sys/class/uio/<device>/maps/map<index>``.

    Raises :class:`~juggle.errors.BackendError` when the map is absent or malformed.
    """
    base = f"sys/class/uio/{device}/maps/map{index}"
    try:
        addr = int(sysfs.read(f"{base}/addr").strip(), 0)
        size = int(sysfs.read(f"{base}/size").strip(), 0)
        offset_path = f"{base}/offset"
        offset = int(sysfs.read(offset_path).strip(), 0) if sysfs.exists(offset_path) else 0
    except (OSError, ValueError) as exc:
        raise BackendError(f"UIO map {base} is unusable: {exc}", device) from exc
    if size <= 0 or size % 4:
        raise BackendError(f"UIO map {base} has size {size:#x}, not a multiple of 4", device)
    return UioMap(device, index, addr, size, offset)


class UioWindow:
    """An MMIO window over one UIO map (implements ``MMIO``).

    Raises :class:`~juggle.errors.BackendError` when the device cannot be opened or mapped;
    accesses raise :class:`~juggle.errors.WindowAccessError` for a bad offset or value and
    :class:`~juggle.errors.RegionEmptyError` after :meth:`close`.
    """

    def __init__(self, region: str, path: str | Path, uio_map: UioMap) -> None:
        self.region = region
        self.map = uio_map
        self._size = uio_map.size
        page = mmap.PAGESIZE
        length = -(-(uio_map.offset + uio_map.size) // page) * page
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_SYNC", 0))
        except OSError as exc:
            raise BackendError(f"cannot open {str(path)!r}: {exc}", path) from exc
        try:
            self._mm = mmap.mmap(fd, length, mmap.MAP_SHARED, offset=uio_map.index * page)
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"cannot mmap {length:#x} bytes of {str(path)!r}: {exc}", path
            ) from exc
        finally:
            os.close(fd)
        self._bytes = memoryview(self._mm)[uio_map.offset : uio_map.offset + uio_map.size]
        self._words = self._bytes.cast("I")

    @property
    def size(self) -> int:
        """Size of the window in bytes."""
        return self._size

    def read32(self, offset: int) -> int:
        """Read the 32-bit register at ``offset``."""
        if offset & 3 or not 0 <= offset < self._size:
            raise self._bad_offset(offset)
        try:
            return int(self._words[offset >> 2])
        except ValueError as exc:  # released view: the window was closed
            raise self._closed() from exc

    def write32(self, offset: int, value: int) -> None:
        """Write ``value`` to the register at ``offset``."""
        if offset & 3 or not 0 <= offset < self._size:
            raise self._bad_offset(offset)
        if not 0 <= value <= _MASK32:
            raise WindowAccessError(
                f'window {self.region!r}: "value" must be in 0..0xFFFFFFFF, got {value!r}', value
            )
        try:
            self._words[offset >> 2] = value
        except ValueError as exc:
            raise self._closed() from exc

    def _bad_offset(self, offset: int) -> WindowAccessError:
        why = "is not 4-byte aligned" if offset & 3 else f"is outside 0..{self._size - 4:#x}"
        return WindowAccessError(
            f"window {self.region!r} ({self.map.device}): offset {offset:#x} {why}", offset
        )

    def _closed(self) -> RegionEmptyError:
        return RegionEmptyError(
            f"window of region {self.region!r} ({self.map.device}) is closed", self.region
        )

    def close(self) -> None:
        """Unmap the registers; later accesses raise RegionEmptyError."""
        if self._mm.closed:
            return
        self._words.release()
        self._bytes.release()
        self._mm.close()

    def __repr__(self) -> str:
        state = "closed" if self._mm.closed else "open"
        return f"<UioWindow {self.region} {self.map.device} {self._size:#x} bytes, {state}>"
