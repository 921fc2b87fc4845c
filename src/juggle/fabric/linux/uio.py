"""MMIO on a board: a UIO device's register map, ``mmap``-ed into the process.

A UIO device ``uioN`` describes its memory maps in ``/sys/class/uio/uioN/maps/mapM/`` (``addr``,
``size``, ``offset`` and ``name``; Documentation/driver-api/uio-howto.rst, "sysfs
attributes"). User space maps map M by calling ``mmap`` on ``/dev/uioN`` with file offset
``M * PAGESIZE``. How the kernel fills those in matters:

* ``uio_pdrv_genirq`` (drivers/uio/uio_pdrv_genirq.c) rounds a register resource out to whole
  pages: ``addr`` is the page holding the registers, ``offset`` where they start inside it
  and ``size`` covers ``offset`` plus the registers, rounded up to a page. So ``size``
  already includes the in-page offset: the mapping is ``size`` bytes long and the registers
  are ``[offset, size)`` of it.
* ``uio_mmap_physical`` (drivers/uio/uio.c) refuses a mapping longer than the map's ``size``
  with ``EINVAL``; :class:`UioWindow` checks that itself before it maps (a test's fake
  kernel cannot intercept ``mmap``).

UIO devices are named by the kernel, not by juggle: a device-tree node ``AccelConfig@a0000000``
bound to ``uio_pdrv_genirq`` shows ``name`` = ``AccelConfig`` (the node name) or the node's
``linux,uio-name`` property, and appears only after the overlay bringing the node is applied.
:func:`wait_for_uio` therefore resolves a window by that name (or by platform device,
``/sys/bus/platform/devices/<dev>/uio/uioN``, binding ``uio_pdrv_genirq`` through
``driver_override`` when the device has no driver: Documentation/ABI/testing/sysfs-bus-platform)
and waits, bounded, for ``/dev/uioN``.

Register access goes through :class:`juggle.fabric.linux.busguard.GuardedMap`, so a bus error
(SIGBUS on a decoupled or reset slot) is a :class:`~juggle.errors.BusFaultError`, a
:class:`~juggle.errors.FabricError` the runtime's fault containment handles.
"""

from __future__ import annotations

import mmap
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from juggle.errors import BackendError, RegionEmptyError, WindowAccessError
from juggle.fabric.linux.busguard import GuardedMap
from juggle.fabric.linux.sysfs import SysfsOps

__all__ = [
    "SlotGate",
    "UioMap",
    "UioWindow",
    "devices_inside",
    "find_uio",
    "find_uio_by_device",
    "read_uio_map",
    "uio_names",
    "wait_for_uio",
]

_MASK32 = 0xFFFFFFFF
_CLASS = "sys/class/uio"
_PLATFORM = "sys/bus/platform/devices"
_POLL_S = 0.002


@dataclass(frozen=True, slots=True)
class UioMap:
    """One UIO memory map: device, map index, page address, size (including the in-page
    offset, see the module doc) and the offset of the registers inside the first page."""

    device: str
    index: int
    addr: int
    size: int
    offset: int
    name: str | None = None

    @property
    def register_base(self) -> int:
        """The physical address of the first register (``addr + offset``)."""
        return self.addr + self.offset

    @property
    def window_bytes(self) -> int:
        """How many bytes of registers the map covers (``size - offset``)."""
        return self.size - self.offset


class SlotGate:
    """Whether a slot's registers may be touched: its design is loaded and the slot is
    released from isolation. Windows check it on every access (one attribute read)."""

    __slots__ = ("open", "region", "why")

    def __init__(self, region: str) -> None:
        self.region = region
        self.open = False
        self.why = "its design is not loaded"

    def close(self, why: str) -> None:
        """Refuse accesses from now on, saying ``why``."""
        self.open = False
        self.why = why

    def refuse(self) -> RegionEmptyError:
        """The error an access raises while the gate is shut."""
        return RegionEmptyError(
            f"slot {self.region!r} is not accessible: {self.why}", region=self.region
        )


def uio_names(sysfs: SysfsOps) -> dict[str, str]:
    """``uioN`` -> its ``name`` attribute, for every UIO device present."""
    found: dict[str, str] = {}
    for device in sysfs.listdir(_CLASS):
        try:
            found[device] = sysfs.read(f"{_CLASS}/{device}/name").strip()
        except OSError:
            continue
    return found


def find_uio(sysfs: SysfsOps, name: str, *, within: tuple[int, int] | None = None) -> str:
    """The ``uioN`` whose ``name`` attribute is ``name``.

    When several carry the name (both slots' designs bring an ``AccelConfig``), ``within``
    (base, size) picks the one whose map 0 starts inside that address range.
    Raises :class:`~juggle.errors.BackendError` naming the devices found when none (or more
    than one) matches.
    """
    found = uio_names(sysfs)
    matches = [d for d, n in found.items() if n == name]
    if len(matches) > 1 and within is not None:
        matches = devices_inside(sysfs, matches, within)
    if len(matches) == 1:
        return matches[0]
    seen = ", ".join(f"{d}={n!r}" for d, n in found.items()) or "none"
    if matches:
        raise BackendError(
            f"several UIO devices are named {name!r} ({', '.join(matches)}) and no address "
            "range tells them apart",
            value=name,
        )
    raise BackendError(f"no UIO device named {name!r} (found: {seen})", value=name)


def devices_inside(sysfs: SysfsOps, devices: Iterable[str], within: tuple[int, int]) -> list[str]:
    """Those of ``devices`` whose map 0's registers start inside ``within`` (base, size); a
    device whose map cannot be read is left out."""
    base, size = within
    inside = []
    for device in devices:
        try:
            start = read_uio_map(sysfs, device).register_base
        except BackendError:
            continue
        if base <= start < base + size:
            inside.append(device)
    return inside


def find_uio_by_device(sysfs: SysfsOps, device: str, *, bind: bool = False) -> str | None:
    """The ``uioN`` of platform device ``device`` (``sys/bus/platform/devices/<device>/uio/``),
    or None when it has none (yet).

    With ``bind``, a device that exists without any driver is handed to ``uio_pdrv_genirq``:
    ``driver_override`` then ``drivers/uio_pdrv_genirq/bind`` (sysfs-bus-platform).
    """
    base = f"{_PLATFORM}/{device}"
    entries = sysfs.listdir(f"{base}/uio")
    if entries:
        return entries[0]
    if bind and sysfs.exists(f"{base}/driver_override") and not sysfs.exists(f"{base}/driver"):
        try:
            sysfs.write(f"{base}/driver_override", "uio_pdrv_genirq")
            sysfs.write("sys/bus/platform/drivers/uio_pdrv_genirq/bind", device)
        except OSError as exc:
            raise BackendError(
                f"cannot bind {device!r} to uio_pdrv_genirq: {exc}", path=device
            ) from exc
        entries = sysfs.listdir(f"{base}/uio")
        return entries[0] if entries else None
    return None


def wait_for_uio(
    sysfs: SysfsOps,
    name: str,
    *,
    timeout_s: float,
    within: tuple[int, int] | None = None,
) -> str:
    """The ``uioN`` named ``name`` (or of platform device ``name``) once its ``/dev/uioN``
    exists, polling until ``timeout_s`` has passed (udev creates the node after the kernel
    registers the device). Raises :class:`~juggle.errors.BackendError` naming what is
    missing when the deadline passes."""
    deadline = time.monotonic() + timeout_s
    bind = True
    while True:
        device: str | None
        try:
            device = find_uio(sysfs, name, within=within)
        except BackendError as exc:
            device = find_uio_by_device(sysfs, name, bind=bind)
            bind = False  # bind once
            if device is None:
                if time.monotonic() >= deadline:
                    raise BackendError(
                        f"{exc} after waiting {timeout_s:g} s (nor a platform device "
                        f"{_PLATFORM}/{name}/uio)",
                        value=name,
                    ) from exc
                time.sleep(_POLL_S)
                continue
        if sysfs.exists(f"dev/{device}"):
            return device
        if time.monotonic() >= deadline:
            raise BackendError(
                f"UIO device {device} ({name!r}) has no /dev/{device} after {timeout_s:g} s",
                path=device,
            )
        time.sleep(_POLL_S)


def read_uio_map(sysfs: SysfsOps, device: str, index: int = 0) -> UioMap:
    """Parse ``sys/class/uio/<device>/maps/map<index>``.

    Raises :class:`~juggle.errors.BackendError` when the map is absent or malformed.
    """
    base = f"{_CLASS}/{device}/maps/map{index}"
    try:
        addr = int(sysfs.read(f"{base}/addr").strip(), 0)
        size = int(sysfs.read(f"{base}/size").strip(), 0)
        offset_path = f"{base}/offset"
        offset = int(sysfs.read(offset_path).strip(), 0) if sysfs.exists(offset_path) else 0
        name_path = f"{base}/name"
        name = sysfs.read(name_path).strip() or None if sysfs.exists(name_path) else None
    except (OSError, ValueError) as exc:
        raise BackendError(f"UIO map {base} is unusable: {exc}", path=device) from exc
    if size <= 0 or size % 4:
        raise BackendError(f"UIO map {base} has size {size:#x}, not a multiple of 4", path=device)
    if not 0 <= offset < size or offset % 4:
        raise BackendError(
            f"UIO map {base} has offset {offset:#x}, not an aligned offset inside its size "
            f"{size:#x}",
            path=device,
        )
    return UioMap(device, index, addr, size, offset, name)


class UioWindow:
    """An MMIO window over one UIO map (implements ``MMIO``).

    The mapping is exactly the map's ``size`` bytes at file offset ``index * PAGESIZE``
    (longer is what ``uio_mmap_physical`` refuses); the registers are ``[offset, size)`` of
    it. Accesses go through a :class:`~juggle.fabric.linux.busguard.GuardedMap` and are
    refused while ``gate`` is shut (the slot isolated or its design unloaded).
    ``windows`` maps every window name of the region to its window (a driver asks for the
    extra register windows of its design by name; the main window is one of them).

    Raises :class:`~juggle.errors.BackendError` when the device cannot be opened or mapped;
    accesses raise :class:`~juggle.errors.WindowAccessError` for a bad offset or value,
    :class:`~juggle.errors.RegionEmptyError` after :meth:`close` or while the gate is shut and
    :class:`~juggle.errors.BusFaultError` on a bus error.
    """

    def __init__(
        self,
        region: str,
        path: str | Path,
        uio_map: UioMap,
        *,
        gate: SlotGate | None = None,
        name: str = "main",
        length: int | None = None,
    ) -> None:
        self.region = region
        self.name = name
        self.map = uio_map
        self.windows: Mapping[str, UioWindow] = {name: self}
        self._gate = gate
        self._base = uio_map.offset
        self._size = uio_map.window_bytes
        want = uio_map.size if length is None else length
        if want > uio_map.size:
            raise BackendError(
                f"cannot mmap {want:#x} bytes of {uio_map.device} map {uio_map.index}: the "
                f"map is {uio_map.size:#x} bytes (uio_mmap_physical refuses longer mappings)",
                path=str(path),
            )
        try:
            self._mm: GuardedMap | None = GuardedMap(
                path, uio_map.size, offset=uio_map.index * mmap.PAGESIZE
            )
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"cannot map {uio_map.size:#x} bytes of {str(path)!r}: {exc}", path=str(path)
            ) from exc

    @property
    def size(self) -> int:
        """Size of the window in bytes."""
        return self._size

    def read32(self, offset: int) -> int:
        """Read the 32-bit register at ``offset``."""
        if offset & 3 or not 0 <= offset < self._size:
            raise self._bad_offset(offset)
        gate, mm = self._gate, self._mm
        if gate is not None and not gate.open:
            raise gate.refuse()
        if mm is None:
            raise self._closed()
        return mm.read32(self._base + offset)

    def write32(self, offset: int, value: int) -> None:
        """Write ``value`` to the register at ``offset``."""
        if offset & 3 or not 0 <= offset < self._size:
            raise self._bad_offset(offset)
        if type(value) is not int or not 0 <= value <= _MASK32:
            raise WindowAccessError(
                f'window {self.region!r}: "value" must be in 0..0xFFFFFFFF, got {value!r}',
                region=self.region,
                value=value,
            )
        gate, mm = self._gate, self._mm
        if gate is not None and not gate.open:
            raise gate.refuse()
        if mm is None:
            raise self._closed()
        mm.write32(self._base + offset, value)

    def _bad_offset(self, offset: int) -> WindowAccessError:
        why = "is not 4-byte aligned" if offset & 3 else f"is outside 0..{self._size - 4:#x}"
        return WindowAccessError(
            f"window {self.region!r} ({self.map.device}): offset {offset:#x} {why}",
            region=self.region,
            path=self.map.device,
            offset=offset,
        )

    def _closed(self) -> RegionEmptyError:
        return RegionEmptyError(
            f"window of region {self.region!r} ({self.map.device}) is closed", region=self.region
        )

    @property
    def closed(self) -> bool:
        """Whether the window is unmapped."""
        return self._mm is None

    def close(self) -> None:
        """Unmap the registers; later accesses raise RegionEmptyError."""
        mm, self._mm = self._mm, None
        if mm is not None:
            mm.close()

    def __repr__(self) -> str:
        state = "closed" if self._mm is None else "open"
        return (
            f"<UioWindow {self.region}:{self.name} {self.map.device} {self._size:#x} bytes, "
            f"{state}>"
        )
