"""The Linux backend: a real board's kernel as it behaves (Kria KV260, ZCU102, ZedBoard).

Everything is a path under a root (``/`` on a board; tests point it at a directory populated
by :class:`juggle.fabric.linux.fake.FakeKernel`). What the backend drives:

* a **loader** (:mod:`juggle.fabric.linux.overlay`, :mod:`juggle.fabric.linux.dfxmgr`): the
  profile's ``[linux] load`` path, ``"overlay"`` (configfs device-tree overlays) or
  ``"sysfs"`` (the manager's ``firmware`` attribute) with juggle owning the FPGA manager, or
  AMD's dfx-mgrd when its socket answers. Never two: with dfx-mgrd running, juggle writes
  nothing to the manager itself; without it, juggle owns it and logs so.
* the **static shell** (:mod:`juggle.fabric.linux.shell`): open checks the profile's shell is
  loaded (and loads its base design when ``load_shell``); each slot is isolated and released
  through the shell's registers or the kernel's bridges, never through ``fpga_bridge`` sysfs.
* **UIO windows** (:mod:`juggle.fabric.linux.uio`): resolved after a load by the UIO name the
  slot's design brings, waited for (bounded), their addresses checked against the profile's
  region window, mapped exactly ``size`` bytes, accessed through the SIGBUS guard.

A region may have several named register windows (the shell's ``windows`` table: a Kria
accelerator has ``AccelConfig`` and ``rm_comm_box``). :meth:`LinuxBackend.attach` returns the
first (the main window, what ``Fabric.window`` hands a driver); every window of the region,
the main one included, is in that window's ``windows`` mapping and in
:meth:`LinuxBackend.windows`, by name.

**dfx-mgr packages.** A co-module's bitstream may be a slot partial of a dfx-mgr package
(``juggle module import-dfx`` writes such descriptors): its folder ``<accel>_slot<N>/`` holds
the slot's own overlay. :meth:`LinuxBackend.describe` (called by ``Fabric.check`` for every
bitstream it checks, so at install and before each program) finds it beside the file the
bitstream was read from (:func:`juggle.fabric.linux.dfxmgr.slot_design`: the overlay must load
that partial, as a partial, with its devices inside the region's window) and every load of
that design into that region then carries it (``SlotLoad.overlay``, with ``firmware-name``
set to the file the image is staged as) and the accelerator's name (``SlotLoad.package``),
whichever loader runs: dfx-mgrd applies it, or juggle's overlay loader does. A module in a zip
archive has no folder to look in: its loads bring the overlay juggle generates.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from juggle.errors import BackendError, FabricError, WindowAttachError, scalar
from juggle.fabric.bitstream import Bitstream, check_family, part_family
from juggle.fabric.linux.loader import Loader, ShellSpec, SlotLoad
from juggle.fabric.linux.ops import TOY_FAMILY, DesignExtras, LinuxManagerOps
from juggle.fabric.linux.overlay import FirmwareStage, OverlayLoader, SlotWindow, SysfsLoader
from juggle.fabric.linux.shell import ShellControl, SlotBridgeOps
from juggle.fabric.linux.sysfs import HostSysfs, SysfsOps
from juggle.fabric.linux.uio import UioWindow, read_uio_map, wait_for_uio
from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import BoardProfile, RegionProfile

__all__ = ["LinuxBackend", "family_of", "open_linux_backend"]

log = logging.getLogger("juggle.fabric.linux")

_MANAGERS = "sys/class/fpga_manager"
_DFXMGRD_SOCKET = "/var/run/dfx-mgrd.socket"
_DEFAULT_UIO_TIMEOUT_S = 5.0
_TRACE = 256
_YES = ("true", "yes", "1", "on")


def family_of(part: str) -> str:
    """The device family of a part as Vivado or a ``.bit`` header spells it
    (:func:`juggle.fabric.bitstream.part_family`: ``xck26-sfvc784-2LV-c`` is ``zynqmp``,
    ``7z020clg484`` ``zynq``). Raises :class:`~juggle.errors.BackendError` for a part juggle
    does not know."""
    family = part_family(part)
    if family is None:
        raise BackendError(
            f"cannot tell the device family of part {part!r}: give family= (zynqmp, zynq, versal)",
            value=part,
        )
    return family


_Stamp = tuple[tuple[int, int, int], ...]


def _stamp(*paths: Path) -> _Stamp:
    """What tells a file changed: (inode, size, mtime) of each path ((0, 0, 0) if absent)."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append((0, 0, 0))
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class _DescribedLoader:
    """The loader the manager's steps drive: ``inner``, with each load of a described design
    (:meth:`LinuxBackend.describe`) given its slot's overlay and accelerator, unless the load
    brings an overlay of its own (:meth:`LinuxBackend.register_design`)."""

    def __init__(self, inner: Loader, described: Mapping[tuple[str, str], DesignExtras]) -> None:
        self.inner = inner
        self.name = inner.name
        self._described = described

    def load(self, job: SlotLoad) -> None:
        extras = self._described.get((job.design, job.region))
        if extras is not None and extras.overlay is not None and job.overlay is None:
            from juggle.fabric.linux.dfxmgr import retarget_overlay

            overlay = retarget_overlay(extras.overlay, job.firmware_name, source=job.design)
            job = dataclasses.replace(job, overlay=overlay, package=job.package or extras.package)
        self.inner.load(job)

    def unload(self, region: str) -> None:
        self.inner.unload(region)

    def loaded(self) -> Mapping[str, str]:
        return self.inner.loaded()


class LinuxBackend:
    """Operation tables over a loader, the static shell and UIO (see the module doc)."""

    name = "linux"

    def __init__(
        self,
        sysfs: SysfsOps,
        profile: BoardProfile,
        loader: Loader,
        shell: ShellControl,
        *,
        family: str,
        windows: Mapping[str, Mapping[str, str]],
        uio_timeout_s: float = _DEFAULT_UIO_TIMEOUT_S,
        manager: str | None = None,
    ) -> None:
        self.sysfs = sysfs
        self.profile = profile
        self.loader = loader
        self.shell = shell
        self.family = family
        #: the newest steps taken (``"isolate rp0"``, ``"load rp0"``, ``"release rp0"``,
        #: ``"attach rp0"``, ...), bounded: what a test or ``board check`` reads
        self.trace: deque[str] = deque(maxlen=_TRACE)
        shell._trace = self.trace.append
        self._window_names = {r: dict(w) for r, w in windows.items()}
        self._timeout = uio_timeout_s
        self._manager_dir = f"{_MANAGERS}/{manager}" if manager else None
        self._extras: dict[str, DesignExtras] = {}
        # (design, region) -> what describe() found beside the design's file, and the file
        # (source, stamp) it was read from
        self._described: dict[tuple[str, str], DesignExtras] = {}
        self._described_from: dict[tuple[str, str], tuple[str, _Stamp]] = {}
        self._describe_lock = threading.Lock()
        self._windows: dict[str, dict[str, UioWindow]] = {}
        self._manager = LinuxManagerOps(
            _DescribedLoader(loader, self._described),
            family=family,
            slots={region: spec.slot for region, spec in shell.slots.items()},
            extras=lambda design: self._extras.get(design, DesignExtras()),
            state=self._device_state,
            trace=self.trace.append,
        )
        self._bridges = {r.name: SlotBridgeOps(shell, r.name, self._holds) for r in profile.regions}

    @property
    def faults(self) -> None:
        """No fault injection on real hardware (a fake kernel injects its own failures)."""
        return None

    def _holds(self, region: str) -> bool:
        return region in self.loader.loaded()

    def _device_state(self) -> str:
        state = getattr(self.loader, "state", None)
        if callable(state):
            return str(state())
        if self._manager_dir is None:
            return "unknown"
        try:
            return self.sysfs.read(f"{self._manager_dir}/state").strip()
        except OSError:
            return "unknown"

    def manager_ops(self) -> LinuxManagerOps:
        """The manager's steps over the loader."""
        return self._manager

    def bridge_ops(self, region: RegionProfile) -> SlotBridgeOps:
        """``region``'s slot isolation, as a bridge."""
        return self._bridges[region.name]

    def register_design(
        self, design: str, *, overlay: bytes | None = None, package: str | None = None
    ) -> None:
        """Record what ``design`` brings beside its bitstream: its own overlay blob (else the
        overlay loader generates one from the shell's windows) and its dfx-mgr accelerator."""
        self._extras[design] = DesignExtras(overlay, package)

    def check_design(self, design: str, region: RegionProfile) -> None:
        """Any design goes: the bitstream itself is the hardware."""

    def check_bitstream(self, bitstream: Bitstream) -> None:
        """Whether this family's FPGA manager takes ``bitstream`` (its format and the family
        of its part), before anything is written; raises
        :class:`~juggle.errors.BitstreamFamilyError` naming the file and the field. juggle's
        own toy family (``virtex2p``) goes to the kernel as it is."""
        if self.family != TOY_FAMILY:
            check_family(bitstream, self.family)

    def describe(self, bitstream: Bitstream, region: RegionProfile) -> None:
        """Note what ``bitstream``'s file brings beside it for loads into ``region``: a
        dfx-mgr slot's overlay and accelerator (see the module doc), read once per version of
        the files (a changed partial or overlay is read again). A bitstream from anywhere else
        describes nothing (and forgets what an earlier file of that design said).

        Raises :class:`~juggle.errors.DfxPackageError` naming the ``.dtbo`` and the field
        when the slot's overlay is malformed, loads another file or a full image, or puts a
        device outside ``region``'s window (nothing is noted then)."""
        from juggle.fabric.linux.dfxmgr import in_slot_folder, slot_design

        key = (bitstream.design, region.name)
        partial = Path(bitstream.source)
        if not in_slot_folder(partial):  # no dfx-mgr slot folder: no I/O
            with self._describe_lock:
                self._described.pop(key, None)
                self._described_from.pop(key, None)
            return
        folder = partial.parent
        dtbos = sorted(folder.glob("*.dtbo")) if folder.is_dir() else []
        stamp = _stamp(partial, folder, *dtbos)
        with self._describe_lock:
            if self._described_from.get(key) == (bitstream.source, stamp):
                return
        found = slot_design(partial, window=(region.window_base, region.window_size))
        with self._describe_lock:
            if found is None:
                self._described.pop(key, None)
            else:
                self._described[key] = DesignExtras(found.overlay, found.accel)
                self.trace.append(f"describe {region.name} {found.accel}_slot{found.slot}")
            self._described_from[key] = (bitstream.source, stamp)

    def attach(self, region: RegionProfile, design: str) -> MMIO:
        """Map ``region``'s windows, now that ``design`` is loaded and its slot released.

        Raises :class:`~juggle.errors.WindowAttachError` when the design is not what the
        loader holds there, the slot is isolated, or a window is missing, misplaced or
        cannot be mapped (nothing stays mapped)."""
        held = self.loader.loaded().get(region.name)
        if held != design:
            raise WindowAttachError(
                f"region {region.name!r}: cannot attach {design!r}, the slot holds {held!r}",
                region=region.name,
            )
        if not self.shell.released(region.name):
            raise WindowAttachError(
                f"region {region.name!r}: its slot is isolated, its windows stay untouched",
                region=region.name,
            )
        names = self._window_names.get(region.name) or {"main": region.name}
        opened: dict[str, UioWindow] = {}
        try:
            for index, (window, uio_name) in enumerate(names.items()):
                opened[window] = self._open_window(region, window, uio_name, main=index == 0)
        except FabricError as exc:
            for done in opened.values():
                done.close()
            raise WindowAttachError(
                f"region {region.name!r}: window {window!r} ({uio_name!r}): {exc}",
                region=region.name,
            ) from exc
        for done in opened.values():
            done.windows = opened
        self.detach(region)
        self._windows[region.name] = opened
        self.trace.append(f"attach {region.name}")
        return next(iter(opened.values()))

    def _open_window(
        self, region: RegionProfile, window: str, uio_name: str, *, main: bool
    ) -> UioWindow:
        span = (region.window_base, region.window_size)
        device = wait_for_uio(self.sysfs, uio_name, timeout_s=self._timeout, within=span)
        uio_map = read_uio_map(self.sysfs, device)
        start = uio_map.register_base
        inside = region.window_base <= start < region.window_base + region.window_size
        if (main and start != region.window_base) or not inside:
            where = (
                f"at {region.window_base:#x}"
                if main
                else f"inside {region.window_base:#x}+{region.window_size:#x}"
            )
            raise BackendError(
                f"{device} map 0 starts at {start:#x} (addr {uio_map.addr:#x} + offset "
                f"{uio_map.offset:#x}); the profile puts region {region.name!r}'s window {where}",
                region=region.name,
                path=device,
            )
        return UioWindow(
            region.name,
            self.sysfs.root / "dev" / device,
            uio_map,
            gate=self.shell.gates[region.name],
            name=window,
        )

    def windows(self, region: str) -> Mapping[str, MMIO]:
        """Every mapped window of ``region``, by name (empty when none is mapped)."""
        return dict(self._windows.get(region, {}))

    def detach(self, region: RegionProfile) -> None:
        """Unmap the region's windows; stale handles raise RegionEmptyError."""
        for window in self._windows.pop(region.name, {}).values():
            window.close()

    def unload(self, region: RegionProfile) -> None:
        """Take ``region``'s design out of its slot (called after the slot was isolated).
        Raises :class:`~juggle.errors.ProgrammingError` when the kernel keeps it."""
        self.detach(region)
        if region.name in self.loader.loaded():
            self.trace.append(f"unload {region.name}")
            self.loader.unload(region.name)

    def close(self) -> None:
        """Unmap every window and the shell's isolation window (loads stay as they are)."""
        for name in list(self._windows):
            for window in self._windows.pop(name).values():
                window.close()
        self.shell.close()
        closer = getattr(self.loader, "close", None)
        if callable(closer):
            closer()

    def __repr__(self) -> str:
        return (
            f"<LinuxBackend through {self.loader.name}, family {self.family}, "
            f"root={str(self.sysfs.root)!r}>"
        )


def _flag(name: str, value: object) -> bool:
    """A yes/no option, as a bool or as ``--backend-option`` text."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise BackendError(f'"{name}" must be true or false, got {value!r}', value=scalar(value))


def _seconds(name: str, value: object) -> float:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 < seconds <= 600:
        raise BackendError(
            f'"{name}" must be a number of seconds in (0, 600], got {value!r}', value=scalar(value)
        )
    return seconds


def open_linux_backend(
    profile: BoardProfile,
    *,
    root: str | Path = "/",
    sysfs: SysfsOps | None = None,
    manager: str | None = None,
    load: str | None = None,
    firmware_dir: str | None = None,
    shell: ShellSpec | None = None,
    dfxmgrd: str | bool | None = None,
    load_shell: bool | str = False,
    uio_timeout_s: float | str | None = None,
    family: str | None = None,
    uio: Mapping[str, str] | None = None,
    use_dtbo: bool | str = False,
) -> LinuxBackend:
    """Open the Linux backend for ``profile``; its ``[linux]`` and ``[shell]`` tables give the
    defaults, the keyword options override them (``--backend-option KEY=VALUE`` text is
    accepted for every option).

    ``root``: where the kernel's files are (``sysfs`` plugs in a fake directly).
    ``manager``: the ``fpga_manager`` device (default: the only one). ``load``: ``"overlay"``
    or ``"sysfs"``. ``firmware_dir``: the staging folder (see
    :class:`~juggle.fabric.linux.overlay.FirmwareStage`). ``shell``: the static shell
    (default: the profile's). ``dfxmgrd``: dfx-mgrd's socket path (default: the profile's,
    under ``root``), ``False`` never to use it, ``True`` to require it. ``load_shell``: load
    the shell's base design when it is not loaded. ``uio_timeout_s``: how long to wait for a
    UIO device after a load. ``family``: the device family (default: the profile's, else
    told from the part). ``uio``: region -> UIO name of its one window, for regions the shell
    gives no windows (default: the region's name). ``use_dtbo``: apply overlays by writing
    the blob to ``dtbo`` rather than naming a staged file in ``path``.

    Raises :class:`~juggle.errors.BackendError` naming what is missing or ambiguous.
    """
    linux = profile.linux
    fs = sysfs if sysfs is not None else HostSysfs(root)
    chosen_family = family or getattr(linux, "family", None) or family_of(profile.board.part)
    timeout = _seconds(
        "uio_timeout_s",
        uio_timeout_s
        if uio_timeout_s is not None
        else getattr(linux, "uio_timeout_s", _DEFAULT_UIO_TIMEOUT_S),
    )
    spec = shell
    if spec is None and profile.shell is not None:
        spec = profile.shell.spec()
    regions = profile.region_names()
    loader, manager_name = _choose_loader(
        fs,
        linux,
        spec,
        manager=manager,
        load=load,
        firmware_dir=firmware_dir,
        dfxmgrd=dfxmgrd,
        use_dtbo=_flag("use_dtbo", use_dtbo),
        profile=profile,
        family=chosen_family,
    )
    control = ShellControl(fs, spec, regions, uio_timeout_s=timeout)
    try:
        control.open(
            load_shell=_flag("load_shell", load_shell), load_base=getattr(loader, "load_base", None)
        )
    except BaseException:
        control.close()
        closer = getattr(loader, "close", None)
        if callable(closer):
            closer()
        raise
    windows = {
        region: dict(control.slots[region].windows) or {"main": (uio or {}).get(region, region)}
        for region in regions
    }
    return LinuxBackend(
        fs,
        profile,
        loader,
        control,
        family=chosen_family,
        windows=windows,
        uio_timeout_s=timeout,
        manager=manager_name,
    )


def _choose_loader(
    fs: SysfsOps,
    linux: Any,
    spec: ShellSpec | None,
    *,
    manager: str | None,
    load: str | None,
    firmware_dir: str | None,
    dfxmgrd: str | bool | None,
    use_dtbo: bool,
    profile: BoardProfile,
    family: str,
) -> tuple[Loader, str | None]:
    socket = _dfxmgrd_socket(fs, linux, dfxmgrd)
    if socket is not None:
        from juggle.fabric.linux.dfxmgr import DfxMgrdLoader, dfxmgrd_answers

        if dfxmgrd_answers(socket):
            log.info("dfx-mgrd answers at %s: juggle loads through it, never writing fpga0", socket)
            # where the shell's base files are when dfx-mgrd is asked to load it (load_base):
            # the firmware folder, else the kernel's default one (fw_search_path.rst)
            folder = firmware_dir or getattr(linux, "firmware_dir", None) or "lib/firmware"
            return DfxMgrdLoader(socket, firmware_dir=fs.root / folder.lstrip("/")), None
        if dfxmgrd is True or (isinstance(dfxmgrd, str) and dfxmgrd.lower() in _YES):
            raise BackendError(f"dfx-mgrd does not answer at {socket}", path=str(socket))
    found = _find_manager(fs, manager or getattr(linux, "manager", None))
    path = load or getattr(linux, "load", None) or "overlay"
    stage = FirmwareStage(fs, firmware_dir or getattr(linux, "firmware_dir", None))
    chosen: Loader
    if path == "overlay":
        slots = {s.region: s for s in spec.slots} if spec is not None else {}
        targets: dict[str, str] = {}
        windows: dict[str, tuple[SlotWindow, ...]] = {}
        for region in profile.regions:
            slot = slots.get(region.name)
            # Kria DFX slot overlays target the shell's fpga_PR<N> region (kria-apps-firmware
            # k26-dfx/2rp/*_slot<N>/*.dtsi); a board without a shell has one full region.
            targets[region.name] = f"fpga_PR{slot.slot}" if slot is not None else "fpga_full"
            names = list(slot.windows.values()) if slot is not None and slot.windows else []
            if not names:
                names = [region.name]
            # without a design's own overlay: the windows split the region's window evenly
            share = region.window_size // len(names) // 4 * 4
            windows[region.name] = tuple(
                SlotWindow(name, region.window_base + i * share, share)
                for i, name in enumerate(names)
            )
        chosen = OverlayLoader(
            fs,
            stage,
            manager=found,
            targets=targets,
            windows=windows,
            use_dtbo=use_dtbo,
            cells=1 if family == "zynq" else 2,  # Zynq-7000 is 32-bit: one address cell
        )
    elif path == "sysfs":
        chosen = SysfsLoader(fs, stage, manager=found)
    else:
        raise BackendError(f'"load" must be "overlay" or "sysfs", got {path!r}', value=path)
    where = "no dfx-mgrd socket answers" if socket is not None else "dfx-mgrd not used"
    log.info("juggle owns FPGA manager %s (%s path; %s)", found, chosen.name, where)
    return chosen, found


def _dfxmgrd_socket(fs: SysfsOps, linux: Any, dfxmgrd: str | bool | None) -> Path | None:
    if dfxmgrd is False or (isinstance(dfxmgrd, str) and dfxmgrd.lower() in ("false", "no", "0")):
        return None
    if isinstance(dfxmgrd, str) and dfxmgrd.lower() not in _YES:
        return Path(dfxmgrd)
    configured = getattr(linux, "dfxmgrd_socket", None) or _DFXMGRD_SOCKET
    return fs.root / configured.lstrip("/")


def _find_manager(fs: SysfsOps, manager: str | None) -> str:
    found = fs.listdir(_MANAGERS)
    if manager is None:
        if len(found) != 1:
            raise BackendError(
                f"{_MANAGERS} holds {found or 'no devices'}: pass manager= to choose one",
                path=_MANAGERS,
            )
        manager = found[0]
    elif manager not in found:
        raise BackendError(
            f"no FPGA manager {manager!r} in {_MANAGERS} (found {found})", value=manager
        )
    if not fs.exists(f"{_MANAGERS}/{manager}/state"):
        raise BackendError(
            f"{_MANAGERS}/{manager} has no 'state' attribute", path=f"{_MANAGERS}/{manager}"
        )
    return manager
