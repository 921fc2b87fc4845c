"""A fake kernel: a sysfs/configfs tree in a directory that reacts to writes as Linux does.

Shipped with the library (as httpx ships ``MockTransport``) so the Linux backend can be run,
tested and demonstrated without a board. Every rule below comes from the kernel's documented
behaviour; the comment at each rule names the ABI file or source it follows. The tree::

    sys/class/fpga_manager/fpga0/{name,state,status}  + {flags,firmware} (Xilinx kernels)
    sys/class/fpga_bridge/brN/{name,state}            read-only
    sys/kernel/config/device-tree/overlays/           configfs: mkdir NAME -> {path,dtbo,status}
    sys/module/firmware_class/parameters/path         the firmware loader's custom search path
    sys/devices/platform/axi/<addr>.<node>/           devices an overlay adds, with uio/uioN/
    sys/bus/platform/devices/<addr>.<node>            -> the device (symlink)
    sys/bus/platform/drivers/uio_pdrv_genirq/{bind,unbind}, sys/bus/platform/drivers_probe
    sys/class/uio/uioN                                -> the device's uio/uioN (symlink)
    dev/uioN                                          a plain file standing in for the maps
    lib/firmware/                                     the default firmware folder

What it cannot model: ``mmap`` of ``dev/uioN``. The file holds map M's registers from byte
``M * PAGESIZE`` on (the file offset that selects map M, as ``uio_mmap`` reads it), so a map
longer than a page overlaps the next map's bytes; a plain file lets any length be mapped, so
the length check of ``uio_mmap_physical`` (a mapping longer than the map's ``size`` is
refused) is left to the caller, and :meth:`FakeKernel.map_uio` shows the kernel's answer.

Images: the kernel does not parse bitstream headers; the fake checks what the device (or the
family's manager driver) checks, per ``family``: ``zynq`` needs the byte-swapped sync word,
``zynqmp`` a header-less image (sync word in either byte order, padding before it),
``versal`` any non-empty ``.pdi``; ``virtex2p`` is juggle's own toy family (the XUPV2P board
of the paper, no mainline driver) whose fake takes juggle's ``.bit`` with its header and
checks its part.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from juggle.errors import BackendError, BitstreamError
from juggle.fabric.bitstream import normalize_part, parse_bitstream
from juggle.fabric.linux.fdt import OverlayInfo, UioNode, read_overlay
from juggle.fabric.linux.sysfs import HostSysfs

__all__ = ["FakeKernel"]

_OVERLAYS = "sys/kernel/config/device-tree/overlays"
_FW_PARAM = "sys/module/firmware_class/parameters/path"
_DEVICES = "sys/devices/platform/axi"
_PLATFORM = "sys/bus/platform/devices"
_DRIVER = "sys/bus/platform/drivers/uio_pdrv_genirq"
_DRIVERS_PROBE = "sys/bus/platform/drivers_probe"
_UIO_CLASS = "sys/class/uio"
_UIO_DRIVER = "uio_pdrv_genirq"

# Manager names the low-level drivers register (drivers/fpga/zynq-fpga.c, zynqmp-fpga.c,
# versal-fpga.c); the `name` attribute shows it (sysfs-class-fpga-manager: "name").
_MANAGER_NAMES = {
    "zynqmp": "Xilinx ZynqMP FPGA Manager",
    "zynq": "Xilinx Zynq FPGA Manager",
    "versal": "Xilinx Versal FPGA Manager",
    "virtex2p": "Fake FPGA Manager",
}
_SYNC = bytes.fromhex("aa995566")
_SYNC_SWAPPED = bytes.fromhex("665599aa")
# Words a .bin may carry before the sync word: dummy/pad words and the bus-width detection
# pattern (UG570 "Bitstream Composition": FFFFFFFF, 000000BB, 11220044).
_PADDING = {
    bytes.fromhex(w)
    for w in ("ffffffff", "00000000", "000000bb", "11220044", "bb000000", "44002211")
}  # the last two: the bus-width words in the swapped order
_FW_PARAM_MAX = 255  # module_param_string(path, fw_path_para, 256, 0644): 255 chars + NUL


class _LoadFailed(Exception):
    def __init__(self, state: str, code: int, why: str, status: str = "") -> None:
        super().__init__(why)
        self.state, self.code, self.status = state, code, status


@dataclass
class _Device:
    """A platform device an overlay (or the boot tree) added."""

    name: str
    node: UioNode
    overlay: str | None
    uio: str | None = None
    override: str | None = None


@dataclass
class _Overlay:
    name: str
    info: OverlayInfo | None = None
    applied: bool = False
    devices: list[str] = field(default_factory=list)
    region: str | None = None  # the fpga-region it programmed
    full: bool = False


class FakeKernel(HostSysfs):
    """A kernel for one FPGA manager (implements ``SysfsOps``); see the module doc.

    ``part``/``family`` say what the device is; ``sysfs_loading`` adds the Xilinx ``flags``
    and ``firmware`` attributes; ``firmware_path`` presets the loader's custom search path
    (``firmware_class.path=`` on the kernel command line). ``bridges`` maps a bridge device
    (``br0``) to its driver's name; an overlay's ``fpga-bridges`` names them by
    ``bridge_labels`` (label -> device) or by device name. ``regions`` lists the fpga-region
    labels the live tree has besides ``fpga_full`` (None: any label is one). ``shell_loaded``
    says the boot loader left a DFX shell in the device (else a partial image fails until a
    full image is loaded). ``uio`` lays out boot-time UIO devices (device -> (name, size));
    ``writable_bridges`` adds the ``enable`` attribute of juggle's older fake (no mainline
    kernel has it; kept for old tests). ``overlay_store_errors`` makes a failed overlay apply
    fail the write of ``path``/``dtbo``; by default the store reports success and only
    ``status`` (``unapplied``) and the cleared ``path`` tell, which a loader must re-read.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        part: str,
        family: str = "zynqmp",
        manager: str = "fpga0",
        sysfs_loading: bool = True,
        firmware_path: str | None = None,
        bridges: Mapping[str, str] | None = None,
        bridge_labels: Mapping[str, str] | None = None,
        regions: Sequence[str] | None = None,
        shell_loaded: bool = False,
        uio: Mapping[str, tuple[str, int]] | None = None,
        writable_bridges: bool = False,
        uio_of_id: str | None = "generic-uio",
        overlay_store_errors: bool = False,
        release: str = "6.8.0-fake",
    ) -> None:
        super().__init__(root)
        if family not in _MANAGER_NAMES:
            raise BackendError(
                f'"family" must be one of {sorted(_MANAGER_NAMES)}, got {family!r}', value=family
            )
        self.part = part
        self.family = family
        self.manager = manager
        self.sysfs_loading = sysfs_loading
        self.release = release
        self.uio_of_id = uio_of_id
        self.overlay_store_errors = overlay_store_errors
        self.log: list[tuple[str, str]] = []
        self.received: list[tuple[str, bytes]] = []
        self.loaded: list[str] = []
        self.full_image: str | None = "<boot shell>" if shell_loaded else None
        self.slots: dict[str, str] = {}
        self._bridges = dict(bridges or {})
        self._bridge_labels = dict(bridge_labels or {})
        self._regions = None if regions is None else {"fpga_full", *regions}
        self._writable_bridges = writable_bridges
        self._fail_next: tuple[str, str] | None = None
        self._overlays: dict[str, _Overlay] = {}
        self._devices: dict[str, _Device] = {}
        self._lock = threading.RLock()
        self._real_root: Path | None = None
        self._build(firmware_path, uio or {})

    # -- layout ----------------------------------------------------------------------------

    @property
    def manager_dir(self) -> str:
        """``sys/class/fpga_manager/<manager>``."""
        return f"sys/class/fpga_manager/{self.manager}"

    def _build(self, firmware_path: str | None, uio: Mapping[str, tuple[str, int]]) -> None:
        mgr = self.manager_dir
        # sysfs-class-fpga-manager: name, state (read-only), status (read-only, empty when
        # the driver reports no error). Xilinx kernels add flags (hex) and firmware (write-only).
        super().write_file(f"{mgr}/name", f"{_MANAGER_NAMES[self.family]}\n".encode())
        super().write_file(f"{mgr}/state", b"operating\n")
        super().write_file(f"{mgr}/status", b"")
        if self.sysfs_loading:
            super().write_file(f"{mgr}/flags", b"0\n")
            super().write_file(f"{mgr}/firmware", b"")
        for device, name in self._bridges.items():
            # sysfs-class-fpga-bridge: name (the low-level driver's name), state; both 0444.
            super().write_file(f"sys/class/fpga_bridge/{device}/name", f"{name}\n".encode())
            super().write_file(f"sys/class/fpga_bridge/{device}/state", b"disabled\n")
            if self._writable_bridges:
                super().write_file(f"sys/class/fpga_bridge/{device}/enable", b"0\n")
        for folder in (_OVERLAYS, _DEVICES, _PLATFORM, _UIO_CLASS, "lib/firmware", "dev"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        super().write_file(_FW_PARAM, f"{(firmware_path or '').rstrip()}\n".encode())
        for file in ("bind", "unbind"):
            super().write_file(f"{_DRIVER}/{file}", b"")
        super().write_file(_DRIVERS_PROBE, b"")
        self._real_root = self.root.resolve()
        for index, (device, (name, size)) in enumerate(uio.items()):
            node = UioNode(name, (0x43C00000 + index * 0x10000, size))
            pdev = self._add_device(node, overlay=None)
            self._bind(pdev, want=device)

    # -- path handling ---------------------------------------------------------------------

    def _canon(self, path: str) -> str:
        """``path`` relative to the root with symlinks resolved (as the kernel's VFS would)."""
        text = os.path.normpath(path.lstrip("/"))
        assert self._real_root is not None
        try:
            return (self.root / text).resolve().relative_to(self._real_root).as_posix()
        except ValueError:
            return text

    def _writable(self, path: str) -> bool:
        mgr = self.manager_dir
        if path in (_FW_PARAM, f"{_DRIVER}/bind", f"{_DRIVER}/unbind", _DRIVERS_PROBE):
            return True
        if self.sysfs_loading and path in (f"{mgr}/flags", f"{mgr}/firmware"):
            return True
        if re.fullmatch(rf"{_OVERLAYS}/[^/]+/(path|dtbo)", path):
            return True
        if re.fullmatch(rf"{_DEVICES}/[^/]+/driver_override", path):
            return True
        return self._writable_bridges and bool(
            re.fullmatch(r"sys/class/fpga_bridge/[^/]+/enable", path)
        )

    def _write_only(self, path: str) -> bool:
        # Xilinx fpga-mgr.c: DEVICE_ATTR_WO(firmware); driver bind/unbind and drivers_probe
        # are write-only (Documentation/ABI/testing/sysfs-bus-platform... "bind", "unbind").
        return path in (
            f"{self.manager_dir}/firmware",
            f"{_DRIVER}/bind",
            f"{_DRIVER}/unbind",
            _DRIVERS_PROBE,
        )

    # -- SysfsOps --------------------------------------------------------------------------

    def read(self, path: str) -> str:
        """Read an attribute; a write-only one raises ``OSError(EACCES)`` as kernfs does."""
        canon = self._canon(path)
        if self._write_only(canon):
            raise OSError(errno.EACCES, "write-only attribute", path)
        return super().read(canon)

    def read_bytes(self, path: str) -> bytes:
        """Read a (binary) attribute, e.g. an overlay's ``dtbo``."""
        canon = self._canon(path)
        if self._write_only(canon):
            raise OSError(errno.EACCES, "write-only attribute", path)
        return super().read_bytes(canon)

    def write(self, path: str, text: str) -> None:
        """Write an attribute and react like the kernel (may raise ``OSError``)."""
        with self._lock:
            self.log.append((path.lstrip("/"), text))
            canon = self._canon(path)
            if not canon.startswith("sys/"):
                super().write(canon, text)  # a plain file
                return
            self._store(canon, text.encode("ascii", "replace"), path)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a binary attribute (an overlay's ``dtbo``) in one open/write/close."""
        with self._lock:
            self.log.append((path.lstrip("/"), f"<{len(data)} bytes>"))
            canon = self._canon(path)
            if not canon.startswith("sys/"):
                super().write_bytes(canon, data)  # a plain file
                return
            self._store(canon, bytes(data), path)

    def mkdir(self, path: str) -> None:
        """configfs: ``mkdir`` under the overlays folder creates an overlay item."""
        with self._lock:
            self.log.append((path.lstrip("/"), "<mkdir>"))
            canon = self._canon(path)
            parent, _, name = canon.rpartition("/")
            if parent == _OVERLAYS:
                if name in self._overlays:
                    raise OSError(errno.EEXIST, "overlay exists", path)
                # drivers/of/configfs.c: an item has path (rw), dtbo (binary, rw), status (ro)
                super().mkdir(canon)
                super().write_file(f"{canon}/path", b"\n")
                super().write_file(f"{canon}/dtbo", b"")
                super().write_file(f"{canon}/status", b"unapplied\n")
                self._overlays[name] = _Overlay(name)
            elif canon.startswith("sys/"):
                raise OSError(errno.EPERM, "sysfs has no mkdir", path)  # kernfs: no mkdir op
            else:
                super().mkdir(canon)

    def rmdir(self, path: str) -> None:
        """configfs: ``rmdir`` of an overlay item removes the overlay (and what it added)."""
        with self._lock:
            self.log.append((path.lstrip("/"), "<rmdir>"))
            canon = self._canon(path)
            parent, _, name = canon.rpartition("/")
            if parent == _OVERLAYS and name in self._overlays:
                self._remove_overlay(self._overlays.pop(name))
                shutil.rmtree(self.root / canon)
            elif canon.startswith("sys/"):
                raise OSError(errno.EPERM, "sysfs has no rmdir", path)
            else:
                super().rmdir(canon)

    # -- reactions ---------------------------------------------------------------------------

    def _store(self, canon: str, data: bytes, shown: str) -> None:
        if not (self.root / canon).is_file():
            # sysfs files are created by the kernel only: a missing attribute is -ENOENT
            raise OSError(errno.ENOENT, "no such attribute", shown)
        if not self._writable(canon):
            # kernfs_fop_open: an attribute without a store method opens read-only -> EACCES,
            # for root too (sysfs-class-fpga-bridge, sysfs-class-fpga-manager: name, state).
            raise OSError(errno.EACCES, "read-only attribute", shown)
        text = data.decode("ascii", "replace")
        mgr = self.manager_dir
        if canon == f"{mgr}/flags":
            self._store_flags(text, shown)
        elif canon == f"{mgr}/firmware":
            self._store_firmware(text.rstrip("\n"), shown)
        elif canon == _FW_PARAM:
            # module_param_string: at most 255 characters (ENOSPC); firmware_loader strips a
            # trailing newline from the custom path (since Linux 6.0).
            value = text.rstrip("\n")
            if len(value) > _FW_PARAM_MAX:
                raise OSError(errno.ENOSPC, "path longer than 255 characters", shown)
            super().write_file(canon, f"{value}\n".encode())
        elif canon.endswith("/path") and canon.startswith(_OVERLAYS):
            self._store_overlay_path(canon, text.rstrip("\n"), shown)
        elif canon.endswith("/dtbo") and canon.startswith(_OVERLAYS):
            self._store_overlay_dtbo(canon, data, shown)
        elif canon.endswith("/driver_override"):
            value = text.rstrip("\n")
            self._devices[canon.split("/")[-2]].override = value or None
            super().write_file(canon, f"{value or '(null)'}\n".encode())
        elif canon == f"{_DRIVER}/bind" or canon == _DRIVERS_PROBE:
            self._store_bind(text.strip(), shown, probe=canon == _DRIVERS_PROBE)
        elif canon == f"{_DRIVER}/unbind":
            device = self._devices.get(text.strip())
            if device is None or device.uio is None:
                raise OSError(errno.ENODEV, "no such bound device", shown)
            self._unbind(device)
        elif canon.endswith("/enable"):  # the legacy writable bridge of juggle's older fake
            if text.strip() not in ("0", "1"):
                raise OSError(errno.EINVAL, "enable takes 0 or 1", shown)
            state = "enabled" if text.strip() == "1" else "disabled"
            super().write_file(canon, f"{text.strip()}\n".encode())
            super().write_file(canon.removesuffix("enable") + "state", f"{state}\n".encode())

    def _store_flags(self, text: str, shown: str) -> None:
        # linux-xlnx fpga-mgr.c flags_store: kstrtol(buf, 16) (hex, optional 0x, trailing
        # newline); flags_show prints "%lx\n".
        match = re.fullmatch(r"\s*(?:0[xX])?([0-9a-fA-F]{1,16})\n?", text)
        if match is None:
            raise OSError(errno.EINVAL, f"flags {text!r} is not hex", shown)
        value = int(match.group(1), 16)
        super().write_file(f"{self.manager_dir}/flags", f"{value:x}\n".encode())

    def _flags(self) -> int:
        if not self.sysfs_loading:
            return 0
        return int(super().read(f"{self.manager_dir}/flags").strip() or "0", 16)

    def _store_firmware(self, name: str, shown: str) -> None:
        # linux-xlnx fpga-mgr.c firmware_store: fpga_mgr_firmware_load(mgr, info, name) with
        # info.flags = mgr->flags; bit 0 is FPGA_MGR_PARTIAL_RECONFIG (include/linux/fpga/
        # fpga-mgr.h). A failure returns the error from write(2) and leaves `state` telling.
        try:
            self._load(name, partial=bool(self._flags() & 1), region=None)
        except _LoadFailed as failed:
            raise OSError(failed.code, str(failed), shown) from None

    # firmware_loader ----------------------------------------------------------------------

    def search_path(self) -> list[str]:
        """Folders the firmware loader searches, in order (drivers/base/firmware_loader/
        main.c ``fw_path[]``: the custom ``path`` parameter if set, then
        /lib/firmware/updates/<release>, /lib/firmware/updates, /lib/firmware/<release>,
        /lib/firmware), relative to the root."""
        custom = super().read(_FW_PARAM).strip()
        folders = [custom] if custom else []
        folders += [
            f"lib/firmware/updates/{self.release}",
            "lib/firmware/updates",
            f"lib/firmware/{self.release}",
            "lib/firmware",
        ]
        return [folder.strip("/") for folder in folders]

    def _request_firmware(self, name: str) -> tuple[str, bytes]:
        # request_firmware: an empty name or one with a ".." component is refused (-EINVAL,
        # firmware_loader "Block path traversal"); the first folder holding it wins; none
        # holding it is -ENOENT. No other place (not the current folder) is searched.
        if not name or ".." in name.split("/"):
            raise _LoadFailed("firmware request error", errno.EINVAL, f"bad name {name!r}")
        for folder in self.search_path():
            candidate = self.root / folder / name.lstrip("/")
            if candidate.is_file():
                return f"{folder}/{name.lstrip('/')}", candidate.read_bytes()
        raise _LoadFailed(
            "firmware request error", errno.ENOENT, f"{name!r} not on the firmware search path"
        )

    # fpga-mgr -----------------------------------------------------------------------------

    def _set_state(self, state: str, status: str = "") -> None:
        super().write_file(f"{self.manager_dir}/state", f"{state}\n".encode())
        super().write_file(f"{self.manager_dir}/status", status.encode())

    def _load(self, name: str, *, partial: bool, region: str | None) -> None:
        """fpga_mgr_firmware_load: request the image, then write_init / write / complete."""
        try:
            _, data = self._request_firmware(name)
        except _LoadFailed as failed:
            self._set_state(failed.state)
            raise
        self.received.append((name, data))
        try:
            design = self._program(name, data, partial=partial)
        except _LoadFailed as failed:
            self._set_state(failed.state, failed.status)
            raise
        self._set_state("operating")
        self.loaded.append(design)
        if partial:
            self.slots[region or "<sysfs>"] = name
        else:
            self.full_image = name
            self.slots.clear()

    def _program(self, name: str, data: bytes, *, partial: bool) -> str:
        if self._fail_next is not None:
            (state, status), self._fail_next = self._fail_next, None
            raise _LoadFailed(state, errno.EIO, f"armed failure: {state}", status)
        if not data:
            raise _LoadFailed("write init error", errno.EINVAL, "empty image")
        design = name
        if self.family == "zynq":
            # zynq-fpga.c zynq_fpga_ops_write_init: a full image must hold the sync word in
            # the byte order the PCAP takes ("Bitstream must be a byte swapped .bin file").
            # The fake also refuses a partial without it (the PCAP would ignore it silently).
            if len(data) % 4 or not _find_word(data, _SYNC_SWAPPED):
                state = "write error" if partial else "write init error"
                raise _LoadFailed(state, errno.EINVAL, "no byte-swapped sync word")
        elif self.family == "zynqmp":
            # zynqmp-fpga.c hands the buffer to the PMU firmware, which configures from a
            # header-less image (bootgen/bit2bin .bin); the fake takes either byte order but
            # only padding and bus-width words before the sync word.
            if len(data) % 4 or not _headerless(data):
                raise _LoadFailed("write error", errno.EINVAL, "not a header-less image")
        elif self.family == "versal":
            # versal-fpga.c passes the .pdi to the PLM; the fake only checks its word size.
            if len(data) % 4:
                raise _LoadFailed("write error", errno.EINVAL, "pdi is not whole words")
        else:  # virtex2p: juggle's own toy family takes juggle's .bit, header and all
            try:
                bitstream = parse_bitstream(data, source=name)
            except BitstreamError as exc:
                raise _LoadFailed("write init error", errno.EINVAL, str(exc)) from exc
            if normalize_part(bitstream.part) != normalize_part(self.part):
                raise _LoadFailed("write init error", errno.EINVAL, f"for {bitstream.part}")
            design = bitstream.design
        if partial and self.full_image is None:
            # A partial image only fits the static shell it was built against: without the
            # DFX shell in the device the configuration fails (board behaviour).
            raise _LoadFailed("write error", errno.EIO, "partial image without a shell")
        return design

    def fail_next_load(self, state: str = "write error", status: str = "") -> None:
        """Make the next image that reaches the device fail, leaving the manager in
        ``state`` with ``status`` text (sysfs-class-fpga-manager lists both)."""
        self._fail_next = (state, status)

    # configfs overlays ------------------------------------------------------------------

    def _store_overlay_path(self, canon: str, name: str, shown: str) -> None:
        # drivers/of/configfs.c cfs_overlay_item_path_store: refused (-EPERM) once a path or
        # a dtbo was given; the .dtbo is read with request_firmware (search path only).
        item = self._overlays[canon.split("/")[-2]]
        if item.info is not None or self._has_input(canon.rsplit("/", 1)[0]):
            raise OSError(errno.EPERM, "overlay already has a path or dtbo", shown)
        try:
            _, blob = self._request_firmware(name)
        except _LoadFailed as failed:
            raise OSError(failed.code, str(failed), shown) from None
        super().write_file(canon, f"{name}\n".encode())
        self._apply(item, blob, name, shown)

    def _store_overlay_dtbo(self, canon: str, blob: bytes, shown: str) -> None:
        # configfs.c cfs_overlay_item_dtbo_write: refused (-EPERM) once given; applied whole.
        item = self._overlays[canon.split("/")[-2]]
        if item.info is not None or self._has_input(canon.rsplit("/", 1)[0]):
            raise OSError(errno.EPERM, "overlay already has a path or dtbo", shown)
        super().write_file(canon, blob)
        self._apply(item, blob, None, shown)

    def _has_input(self, folder: str) -> bool:
        return bool(super().read(f"{folder}/path").strip()) or bool(
            super().read_bytes(f"{folder}/dtbo")
        )

    def _apply(self, item: _Overlay, blob: bytes, path: str | None, shown: str) -> None:
        folder = f"{_OVERLAYS}/{item.name}"
        try:
            self._apply_overlay(item, blob)
        except _LoadFailed as failed:
            # configfs.c: on failure the item keeps no overlay: path cleared, status
            # "unapplied". The fake's default: the store still returns success.
            super().write_file(f"{folder}/path", b"\n")
            super().write_file(f"{folder}/dtbo", b"")
            super().write_file(f"{folder}/status", b"unapplied\n")
            item.info = None
            if self.overlay_store_errors:
                raise OSError(failed.code, str(failed), shown) from None
            return
        item.applied = True
        super().write_file(f"{folder}/status", b"applied\n")

    def _apply_overlay(self, item: _Overlay, blob: bytes) -> None:
        try:
            info = read_overlay(blob, source=item.name)
        except BitstreamError as exc:
            raise _LoadFailed("", errno.EINVAL, str(exc)) from exc
        # of_overlay_fdt_apply resolves every __fixups__ label against the live tree's
        # __symbols__: an unknown target or bridge label fails the apply (-EINVAL).
        for target in info.targets:
            if not self._known_target(target):
                raise _LoadFailed("", errno.EINVAL, f"unknown target {target!r}")
        bridges = [self._bridge_device(label) for label in info.bridges]
        if info.firmware_name is not None:
            region = info.target or "fpga_full"
            # fpga-region.c of_fpga_region_notify_pre_apply: "Region already has overlay
            # applied." (-EINVAL) when another applied overlay programmed this region.
            if any(o.applied and o.region == region for o in self._overlays.values()):
                raise _LoadFailed("", errno.EINVAL, f"region {region!r} already has an overlay")
            # fpga_region_program_fpga: bridges disabled, image loaded, bridges enabled; on
            # failure they stay disabled (Documentation/driver-api/fpga/fpga-region.rst).
            for device in bridges:
                self._set_bridge(device, enabled=False)
            self._load(info.firmware_name, partial=info.partial, region=region)
            for device in bridges:
                self._set_bridge(device, enabled=True)
            item.region, item.full = region, not info.partial
        item.info = info
        # The fragment's child nodes become platform devices (of_platform notifier); those
        # matching uio_pdrv_genirq's of_id are bound and get a UIO device.
        for node in info.uio_nodes:
            pdev = self._add_device(node, overlay=item.name)
            item.devices.append(pdev)
            if self.uio_of_id is not None and node.compatible == self.uio_of_id:
                self._bind(pdev)

    def _known_target(self, target: str) -> bool:
        if target.startswith("/") or target in ("amba", "amba_pl", "fpga_full"):
            return True
        return self._regions is None or target in self._regions

    def _bridge_device(self, label: str) -> str:
        device = self._bridge_labels.get(label, label)
        if device not in self._bridges:
            raise _LoadFailed("", errno.EINVAL, f"unknown bridge {label!r}")
        return device

    def _set_bridge(self, device: str, *, enabled: bool) -> None:
        text = b"enabled\n" if enabled else b"disabled\n"
        super().write_file(f"sys/class/fpga_bridge/{device}/state", text)

    def _remove_overlay(self, item: _Overlay) -> None:
        # of_overlay_remove: the devices the overlay added go (their UIO nodes with them);
        # fpga-region's post-remove notifier disables the region's bridges and frees it.
        for pdev in item.devices:
            self._remove_device(pdev)
        if item.info is not None and item.region is not None:
            for label in item.info.bridges:
                self._set_bridge(self._bridge_labels.get(label, label), enabled=False)
            if item.full:
                self.full_image = None  # the shell's clocks/resets/devices are gone with it
                self.slots.clear()
            else:
                self.slots.pop(item.region, None)

    def overlays(self) -> list[str]:
        """Names of the applied overlays, in the order they were applied."""
        return [name for name, item in self._overlays.items() if item.applied]

    # platform devices and UIO --------------------------------------------------------------

    def _add_device(self, node: UioNode, *, overlay: str | None) -> str:
        # of_device_make_bus_id: "<translated address in hex>.<node name>" (drivers/of/
        # platform.c), e.g. "a4010000.AccelConfig".
        pdev = f"{node.reg[0]:x}.{node.base_name}"
        folder = f"{_DEVICES}/{pdev}"
        super().write_file(f"{folder}/driver_override", b"(null)\n")
        super().write_file(f"{folder}/of_node_name", f"{node.full_name}\n".encode())
        _symlink(self.root / _PLATFORM / pdev, self.root / folder)
        self._devices[pdev] = _Device(pdev, node, overlay)
        return pdev

    def _remove_device(self, pdev: str) -> None:
        device = self._devices.pop(pdev, None)
        if device is None:
            return
        if device.uio is not None:
            self._unbind(device)
        (self.root / _PLATFORM / pdev).unlink(missing_ok=True)
        shutil.rmtree(self.root / _DEVICES / pdev, ignore_errors=True)

    def _store_bind(self, pdev: str, shown: str, *, probe: bool) -> None:
        # bind_store (drivers/base/bus.c): -ENODEV unless the device exists and the driver
        # matches it (platform_match: driver_override first, else the of_id compatible);
        # -EBUSY when it already has a driver. drivers_probe binds a matching device.
        device = self._devices.get(pdev)
        if device is None:
            raise OSError(errno.ENODEV, f"no platform device {pdev!r}", shown)
        if device.uio is not None:
            if probe:
                return
            raise OSError(errno.EBUSY, f"{pdev} already bound", shown)
        matches = (
            device.override == _UIO_DRIVER
            if device.override is not None
            else (self.uio_of_id is not None and device.node.compatible == self.uio_of_id)
        )
        if not matches:
            raise OSError(errno.ENODEV, f"{_UIO_DRIVER} does not match {pdev}", shown)
        self._bind(pdev)

    def _bind(self, pdev: str, want: str | None = None) -> str:
        """uio_pdrv_genirq probe + uio_register_device: the lowest free uioN (idr_alloc),
        ``name`` = node name or ``linux,uio-name``, one map per ``reg`` entry."""
        device = self._devices[pdev]
        taken = {d.uio for d in self._devices.values() if d.uio is not None}
        uio = want or next(f"uio{i}" for i in range(len(taken) + 1) if f"uio{i}" not in taken)
        folder = f"{_DEVICES}/{pdev}/uio/{uio}"
        name = device.node.uio_name or device.node.base_name
        super().write_file(f"{folder}/name", f"{name}\n".encode())
        super().write_file(f"{folder}/version", b"devicetree\n")
        super().write_file(f"{folder}/event", b"0\n")
        page = mmap.PAGESIZE
        length = 0
        for index, (start, size) in enumerate(device.node.regs):
            # uio_pdrv_genirq.c: addr = start & PAGE_MASK, offs = start & ~PAGE_MASK,
            # size = (offs + resource size) rounded up to a page; uio.c prints addr and size
            # with "%pa" and offset with "0x%llx"; the map's name is the resource name (the
            # node's full name).
            offs = start % page
            map_size = -(-(offs + size) // page) * page
            base = f"{folder}/maps/map{index}"
            super().write_file(f"{base}/name", f"{device.node.full_name}\n".encode())
            super().write_file(f"{base}/addr", f"0x{start - offs:016x}\n".encode())
            super().write_file(f"{base}/size", f"0x{map_size:016x}\n".encode())
            super().write_file(f"{base}/offset", f"0x{offs:x}\n".encode())
            length = max(length, index * page + map_size)
        _symlink(self.root / folder / "device", self.root / _DEVICES / pdev)
        _symlink(self.root / _UIO_CLASS / uio, self.root / folder)
        super().write_file(f"dev/{uio}", bytes(length))
        device.uio = uio
        return uio

    def _unbind(self, device: _Device) -> None:
        uio, device.uio = device.uio, None
        if uio is None:
            return
        (self.root / _UIO_CLASS / uio).unlink(missing_ok=True)
        (self.root / "dev" / uio).unlink(missing_ok=True)
        shutil.rmtree(self.root / _DEVICES / device.name / "uio", ignore_errors=True)

    def uio_devices(self) -> dict[str, str]:
        """``uioN`` -> UIO ``name`` of every UIO device now present."""
        return {
            d.uio: (d.node.uio_name or d.node.base_name)
            for d in self._devices.values()
            if d.uio is not None
        }

    def map_uio(self, device: str, index: int, length: int) -> mmap.mmap:
        """``mmap`` map ``index`` of ``dev/<device>`` as ``uio_mmap`` would: file offset
        ``index * PAGESIZE``; a map that does not exist or a ``length`` longer than the map's
        ``size`` is ``OSError(EINVAL)`` (uio.c uio_mmap / uio_mmap_physical)."""
        base = f"{_UIO_CLASS}/{device}/maps/map{index}"
        if index < 0 or not self.exists(f"{base}/size"):
            raise OSError(errno.EINVAL, f"{device} has no map {index}", device)
        size = int(self.read(f"{base}/size").strip(), 16)
        if not 0 < length <= size:
            raise OSError(errno.EINVAL, f"length {length:#x} exceeds map size {size:#x}", device)
        with open(self.root / "dev" / device, "r+b") as handle:
            return mmap.mmap(handle.fileno(), length, offset=index * mmap.PAGESIZE)

    # -- helpers for tests ---------------------------------------------------------------

    def writes_to(self, suffix: str) -> list[str]:
        """Values written to attributes whose path ends with ``suffix``, in order."""
        return [text for path, text in self.log if path.endswith(suffix)]

    def __repr__(self) -> str:
        return (
            f"<FakeKernel {self.family} root={str(self.root)!r}, {len(self.received)} loads, "
            f"overlays {self.overlays()}>"
        )


def _find_word(data: bytes, word: bytes) -> bool:
    at = data.find(word)
    while at >= 0 and at % 4:
        at = data.find(word, at + 1)
    return at >= 0


def _headerless(data: bytes) -> bool:
    for i in range(0, len(data) - 3, 4):
        word = data[i : i + 4]
        if word in (_SYNC, _SYNC_SWAPPED):
            return True
        if word not in _PADDING:
            return False
    return False


def _symlink(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.unlink(missing_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))
