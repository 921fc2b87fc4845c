"""The Linux backend: FPGA Manager, FPGA bridges and UIO, found in sysfs under a root.

On a board the root is ``/``; tests point it at a directory populated by
:class:`juggle.fabric.linux.fake.FakeKernel`. Everything is resolved and checked when the
backend opens, so a missing node is reported before any region is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from juggle.errors import BackendError
from juggle.fabric.bridge import BridgeOps
from juggle.fabric.linux.ops import LinuxBridgeOps, LinuxManagerOps, SoftBridgeOps
from juggle.fabric.linux.sysfs import HostSysfs, SysfsOps
from juggle.fabric.linux.uio import UioMap, UioWindow, find_uio, read_uio_map
from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import BoardProfile, RegionProfile

__all__ = ["LinuxBackend", "open_linux_backend"]

_MANAGERS = "sys/class/fpga_manager"
_BRIDGES = "sys/class/fpga_bridge"


class LinuxBackend:
    """Operation tables over the kernel's sysfs ABI; windows are UIO maps."""

    name = "linux"

    def __init__(
        self,
        sysfs: SysfsOps,
        manager: LinuxManagerOps,
        bridges: Mapping[str, BridgeOps],
        uio_maps: Mapping[str, UioMap],
    ) -> None:
        self.sysfs = sysfs
        self._manager = manager
        self._bridges = dict(bridges)
        self._maps = dict(uio_maps)
        self._windows: dict[str, UioWindow] = {}

    @property
    def faults(self) -> None:
        """No fault injection on real hardware (a fake kernel injects its own failures)."""
        return None

    def manager_ops(self) -> LinuxManagerOps:
        """The sysfs FPGA Manager."""
        return self._manager

    def bridge_ops(self, region: RegionProfile) -> BridgeOps:
        """The bridge mapped to ``region``."""
        return self._bridges[region.name]

    def check_design(self, design: str, region: RegionProfile) -> None:
        """Any design goes: the bitstream itself is the hardware."""

    def attach(self, region: RegionProfile, design: str) -> MMIO:
        """``mmap`` the region's UIO map. Raises :class:`~juggle.errors.BackendError`."""
        uio_map = self._maps[region.name]
        window = UioWindow(region.name, self.sysfs.root / "dev" / uio_map.device, uio_map)
        self._windows[region.name] = window
        return window

    def detach(self, region: RegionProfile) -> None:
        """Unmap the region's window; stale handles raise RegionEmptyError."""
        window = self._windows.pop(region.name, None)
        if window is not None:
            window.close()

    def close(self) -> None:
        """Unmap every window."""
        for name in list(self._windows):
            self._windows.pop(name).close()

    def __repr__(self) -> str:
        return f"<LinuxBackend {self._manager.directory}, root={str(self.sysfs.root)!r}>"


def open_linux_backend(
    profile: BoardProfile,
    *,
    root: str | Path = "/",
    sysfs: SysfsOps | None = None,
    manager: str | None = None,
    bridges: Mapping[str, str | None] | None = None,
    uio: Mapping[str, str] | None = None,
    firmware_dir: str = "lib/firmware",
    partial: bool = True,
) -> LinuxBackend:
    """Find and check the kernel nodes serving ``profile``'s regions.

    ``manager`` names the ``fpga_manager`` device (default: the only one). ``bridges`` maps a
    region to an ``fpga_bridge`` device, or to ``None`` for a bridge kept in software (default:
    the bridge whose ``name`` is the region's name). ``uio`` maps a region to a ``uioN``
    (default: the UIO device whose ``name`` is the region's name). Bitstreams are staged in
    ``firmware_dir`` (relative to the root), loaded with ``flags`` = 1 when ``partial``.
    Raises :class:`~juggle.errors.BackendError` naming what is missing or ambiguous.
    """
    fs = sysfs if sysfs is not None else HostSysfs(root)
    mgr = _find_manager(fs, manager)
    bridge_ops = {r.name: _bridge_for(fs, r.name, bridges) for r in profile.regions}
    maps = {r.name: _uio_for(fs, r.name, uio) for r in profile.regions}
    return LinuxBackend(
        fs, LinuxManagerOps(fs, mgr, firmware_dir=firmware_dir, partial=partial), bridge_ops, maps
    )


def _find_manager(fs: SysfsOps, manager: str | None) -> str:
    found = fs.listdir(_MANAGERS)
    if manager is None:
        if len(found) != 1:
            raise BackendError(
                f"{_MANAGERS} holds {found or 'no devices'}: pass manager= to choose one", found
            )
        manager = found[0]
    elif manager not in found:
        raise BackendError(f"no FPGA manager {manager!r} in {_MANAGERS} (found {found})", manager)
    for attribute in ("state", "firmware"):
        if not fs.exists(f"{_MANAGERS}/{manager}/{attribute}"):
            raise BackendError(
                f"{_MANAGERS}/{manager} has no {attribute!r} attribute (juggle loads through "
                "the firmware attribute of vendor kernels)",
                manager,
            )
    return manager


def _bridge_for(fs: SysfsOps, region: str, bridges: Mapping[str, str | None] | None) -> BridgeOps:
    if bridges is not None and region in bridges:
        chosen = bridges[region]
        if chosen is None:
            return SoftBridgeOps()
        if not fs.exists(f"{_BRIDGES}/{chosen}/state"):
            raise BackendError(f"no FPGA bridge {chosen!r} for region {region!r}", chosen)
        return LinuxBridgeOps(fs, chosen)
    for device in fs.listdir(_BRIDGES):
        try:
            if fs.read(f"{_BRIDGES}/{device}/name").strip() == region:
                return LinuxBridgeOps(fs, device)
        except OSError:
            continue
    raise BackendError(
        f"no FPGA bridge named {region!r} in {_BRIDGES}: pass bridges={{{region!r}: 'brN'}} "
        f"or {{{region!r}: None}} for a region without one",
        region,
    )


def _uio_for(fs: SysfsOps, region: str, uio: Mapping[str, str] | None) -> UioMap:
    device = uio[region] if uio is not None and region in uio else find_uio(fs, region)
    uio_map = read_uio_map(fs, device)
    if not fs.exists(f"dev/{device}"):
        raise BackendError(f"device node /dev/{device} for region {region!r} is missing", device)
    return uio_map
