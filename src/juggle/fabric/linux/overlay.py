"""The kernel's two load paths, as loaders (:class:`~juggle.fabric.linux.loader.Loader`).

**Overlay** (:class:`OverlayLoader`, mainline and vendor kernels alike). A partial design reaches
its slot as a device-tree overlay applied through configfs (the overlay configfs interface,
drivers/of/configfs.c, Documentation/devicetree/configfs-overlays.txt): ``mkdir
/sys/kernel/config/device-tree/overlays/<name>`` creates an item with ``path``, ``dtbo`` and
``status``; writing a ``.dtbo`` file name (looked up by the kernel's firmware loader) to
``path``, or the blob itself to ``dtbo``, applies it; the fpga-region the overlay targets then
programs the ``firmware-name`` it carries (``partial-fpga-config`` for a slot), switches the
bridges it lists and creates the devices it declares, UIO nodes included
(Documentation/devicetree/bindings/fpga/fpga-region). ``rmdir`` removes the overlay and the
devices with it. The store of ``path`` can return success although the overlay was not
applied, so after it juggle re-reads ``status`` (it must be ``applied``), ``path`` (it must be
what was written) and the FPGA manager's ``state`` (``operating``;
Documentation/ABI/testing/sysfs-class-fpga-manager).

**sysfs** (:class:`SysfsLoader`, Xilinx kernels): the manager's ``flags`` attribute (parsed by
the kernel as hex, ``kstrtol(buf, 16, ...)`` in linux-xlnx fpga-mgr.c; 1 = partial) is
written and read back, the image's file name is written to ``firmware``, and ``state`` and
``status`` are read; a failure's error names both texts.

**Firmware staging.** The kernel's firmware loader looks in the folder named by
``/sys/module/firmware_class/parameters/path`` first, then ``/lib/firmware/updates`` and
``/lib/firmware`` (Documentation/driver-api/firmware/fw_search_path.rst). juggle stages
images in its own folder (:data:`JUGGLE_FIRMWARE_DIR`), setting that parameter when it is
empty; when the parameter names another folder, juggle leaves it alone and stages in
``/lib/firmware``. Staged files are removed when their design is unloaded.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from juggle.errors import BackendError, ProgrammingError
from juggle.fabric.linux.loader import ShellSpec, SlotLoad
from juggle.fabric.linux.sysfs import SysfsOps
from juggle.fabric.linux.uio import devices_inside, uio_names

__all__ = [
    "JUGGLE_FIRMWARE_DIR",
    "FirmwareStage",
    "OverlayLoader",
    "SlotWindow",
    "SysfsLoader",
    "overlay_item",
]

log = logging.getLogger("juggle.fabric.linux")

#: the folder juggle stages firmware in (relative to the root) when it may set the search path
JUGGLE_FIRMWARE_DIR = "run/juggle/firmware"
_SEARCH_PATH = "sys/module/firmware_class/parameters/path"
_OVERLAYS = "sys/kernel/config/device-tree/overlays"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def overlay_item(region: str) -> str:
    """The configfs overlay directory juggle uses for ``region``'s slot."""
    return f"juggle-{_SAFE.sub('_', region)}"


class FirmwareStage:
    """Where images go so the kernel's firmware loader finds them (see the module doc).

    ``folder`` (relative to the root) None chooses: juggle's own folder when the search-path
    parameter is empty or names it already, else ``lib/firmware``. A folder given explicitly
    other than ``lib/firmware`` is set as the search path; when the parameter already names
    another folder that is a :class:`~juggle.errors.BackendError` (juggle does not take the
    kernel's one custom path from someone else).
    """

    def __init__(self, sysfs: SysfsOps, folder: str | None = None) -> None:
        self._sysfs = sysfs
        explicit = folder is not None
        wanted = (folder or JUGGLE_FIRMWARE_DIR).strip("/")
        self.folder = "lib/firmware"
        if wanted == "lib/firmware":
            return
        if not sysfs.exists(_SEARCH_PATH):
            if explicit:
                raise BackendError(
                    f"firmware folder /{wanted} needs {_SEARCH_PATH}, which this kernel lacks",
                    path=wanted,
                )
            return
        current = sysfs.read(_SEARCH_PATH).strip().rstrip("/")
        if current in ("", f"/{wanted}"):
            if current == "":
                try:
                    sysfs.write(_SEARCH_PATH, f"/{wanted}")
                except OSError as exc:
                    raise BackendError(f"cannot set {_SEARCH_PATH}: {exc}", path=wanted) from exc
                log.info("firmware search path set to /%s", wanted)
            self.folder = wanted
            return
        if explicit:
            raise BackendError(
                f"{_SEARCH_PATH} names {current!r}, not /{wanted}: juggle does not take the "
                "firmware search path over; stage in lib/firmware or clear it",
                value=current,
            )
        log.info("firmware search path is %s (not juggle's): staging in /lib/firmware", current)

    def put(self, name: str, data: bytes) -> None:
        """Write ``data`` as ``name`` in the folder."""
        self._sysfs.write_file(f"{self.folder}/{name}", data)

    def remove(self, name: str) -> None:
        """Delete ``name`` from the folder (absent: nothing)."""
        self._sysfs.remove(f"{self.folder}/{name}")


#: generated overlay blobs kept (oldest dropped first)
_BLOB_CACHE = 64


@dataclass(frozen=True, slots=True)
class SlotWindow:
    """A register window a slot's generated overlay declares: UIO (node) name, base, size."""

    uio_name: str
    base: int
    size: int


@dataclass(frozen=True, slots=True)
class _Held:
    design: str
    files: tuple[str, ...]


class _ManagerState:
    """Reads of the FPGA manager's ``state`` and ``status`` (None: no manager to ask)."""

    def __init__(self, sysfs: SysfsOps, manager: str | None) -> None:
        self._sysfs = sysfs
        self.directory = f"sys/class/fpga_manager/{manager}" if manager else None

    def read(self, attribute: str) -> str:
        if self.directory is None:
            return "unknown"
        try:
            return self._sysfs.read(f"{self.directory}/{attribute}").strip()
        except OSError:
            return "unknown"


class OverlayLoader:
    """Loads slots through configfs device-tree overlays (see the module doc).

    ``targets`` maps a region to the fpga-region label its overlay targets (``fpga_PR0``)
    and ``windows`` to the UIO nodes a generated overlay declares, for loads that bring no
    overlay blob of their own. ``use_dtbo`` writes the blob to the item's ``dtbo`` attribute
    instead of staging it and naming it in ``path``; ``cells`` is the address and size cells
    of generated UIO nodes (1 on the 32-bit Zynq-7000, 2 on ZynqMP and Versal).
    """

    name = "overlay"

    def __init__(
        self,
        sysfs: SysfsOps,
        stage: FirmwareStage,
        *,
        manager: str | None,
        targets: Mapping[str, str],
        windows: Mapping[str, tuple[SlotWindow, ...]],
        use_dtbo: bool = False,
        cells: int = 2,
    ) -> None:
        self._sysfs = sysfs
        self._stage = stage
        self._cells = cells
        self._manager = _ManagerState(sysfs, manager)
        self._targets = dict(targets)
        self._windows = dict(windows)
        self._use_dtbo = use_dtbo
        self._blobs: dict[tuple[object, ...], bytes] = {}  # generated overlays, by content
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        if not sysfs.exists(_OVERLAYS):
            raise BackendError(
                f"no {_OVERLAYS}: this kernel has no device-tree overlay configfs (mount "
                "configfs, or use the sysfs load path on a Xilinx kernel)",
                path=_OVERLAYS,
            )

    def state(self) -> str:
        """The FPGA manager's ``state``."""
        return self._manager.read("state")

    def _overlay_blob(self, job: SlotLoad) -> bytes:
        if job.overlay is not None:
            return job.overlay
        from juggle.fabric.linux.fdt import UioNode, build_overlay

        # a window the static shell already declares (Kria's base overlay carries the slots'
        # AccelConfig and rm_comm_box nodes) is not declared again: two nodes at one address
        windows = self._windows.get(job.region, ())
        names = uio_names(self._sysfs) if windows else {}
        nodes = [
            UioNode(node=w.uio_name, reg=(w.base, w.size))
            for w in windows
            if not self._present(names, w.uio_name, w.base, w.size)
        ]
        target = self._targets.get(job.region, "fpga_full")
        key = (job.firmware_name, target, tuple(nodes), job.partial)
        blob = self._blobs.get(key)
        if blob is None:  # the same slot, design and windows: the same blob, built once
            blob = build_overlay(
                firmware_name=job.firmware_name,
                target=target,
                uio=nodes,
                partial=job.partial,
                cells=self._cells,
            )
            if len(self._blobs) >= _BLOB_CACHE:
                self._blobs.pop(next(iter(self._blobs)))
            self._blobs[key] = blob
        return blob

    def _present(self, names: Mapping[str, str], name: str, base: int, size: int) -> bool:
        """Whether a UIO device named ``name`` (of ``names``: device -> name) has its
        registers inside ``base``..``size``."""
        named = [device for device, found in names.items() if found == name]
        return bool(devices_inside(self._sysfs, named, (base, size)))

    def load(self, job: SlotLoad) -> None:
        """Apply ``job``'s overlay under ``overlays/juggle-<region>`` (replacing what the slot
        held). Raises :class:`~juggle.errors.ProgrammingError` naming ``status``, ``path``
        and the manager's ``state`` when it did not take (the item is removed again)."""
        with self._lock:
            if job.region in self._held or self._sysfs.exists(self._item(job.region)):
                self._unload_locked(job.region)
            blob = self._overlay_blob(job)
            dtbo = f"{job.firmware_name}.dtbo"
            files = (job.firmware_name,) if self._use_dtbo else (job.firmware_name, dtbo)
            self._stage.put(job.firmware_name, job.image)
            if not self._use_dtbo:
                self._stage.put(dtbo, blob)
            self._apply(self._item(job.region), None if self._use_dtbo else dtbo, blob, files)
            self._held[job.region] = _Held(job.design, files)

    def load_base(self, spec: ShellSpec) -> None:
        """Apply the shell's base overlay (``base_overlay``, which names ``base_image``; both
        already in the firmware folder) under ``overlays/juggle-shell``."""
        if spec.base_overlay is None:
            raise BackendError(
                f"shell {spec.name!r} names no base_overlay to apply on the overlay path",
                design=spec.name,
            )
        self._apply(self._item("shell"), spec.base_overlay, b"", ())

    def _item(self, region: str) -> str:
        return f"{_OVERLAYS}/{overlay_item(region)}"

    def _apply(self, item: str, path: str | None, blob: bytes, files: tuple[str, ...]) -> None:
        fs = self._sysfs
        try:
            fs.mkdir(item)
        except OSError as exc:
            self._drop(files)
            raise ProgrammingError(f"cannot create overlay {item}: {exc}", path=item) from exc
        problem: str | None = None
        try:
            if path is not None:
                fs.write(f"{item}/path", path)
            else:
                fs.write_bytes(f"{item}/dtbo", blob)
        except OSError as exc:
            problem = f"the kernel refused it ({exc})"
        status = self._read(f"{item}/status")
        shown = self._read(f"{item}/path") if path is not None else path
        state = self.state()
        if problem is None and status != "applied":
            problem = "it did not apply"
        elif problem is None and path is not None and shown != path:
            problem = f"path reads back {shown!r}"
        elif problem is None and state not in ("operating", "unknown"):
            problem = "the FPGA manager is not operating"
        if problem is None:
            return
        try:
            fs.rmdir(item)
        except OSError as exc:
            log.warning("could not remove failed overlay %s: %s", item, exc)
        self._drop(files)
        raise ProgrammingError(
            f"overlay {item} ({path or 'dtbo blob'}): {problem}; status {status!r}, "
            f"FPGA manager state {state!r}, status {self._manager.read('status')!r}",
            path=item,
        )

    def _read(self, path: str) -> str:
        try:
            return self._sysfs.read(path).strip()
        except OSError as exc:
            return f"<unreadable: {exc.strerror or exc}>"

    def _drop(self, files: tuple[str, ...]) -> None:
        for name in files:
            self._stage.remove(name)

    def unload(self, region: str) -> None:
        """``rmdir`` the slot's overlay (the kernel removes its devices and UIO nodes with it)
        and its staged files. Raises :class:`~juggle.errors.ProgrammingError` when the item
        stays."""
        with self._lock:
            self._unload_locked(region)

    def _unload_locked(self, region: str) -> None:
        item = self._item(region)
        if self._sysfs.exists(item):
            try:
                self._sysfs.rmdir(item)
            except OSError as exc:
                raise ProgrammingError(f"cannot remove overlay {item}: {exc}", path=item) from exc
            if self._sysfs.exists(item):
                raise ProgrammingError(f"overlay {item} is still there after rmdir", path=item)
        held = self._held.pop(region, None)
        if held is not None:
            self._drop(held.files)

    def loaded(self) -> Mapping[str, str]:
        """Region -> design of every slot loaded through this loader."""
        with self._lock:
            return {region: held.design for region, held in self._held.items()}

    def __repr__(self) -> str:
        return f"<OverlayLoader {len(self._held)} slots held, stage /{self._stage.folder}>"


class SysfsLoader:
    """Loads through the FPGA manager's ``flags`` and ``firmware`` attributes (Xilinx
    kernels; see the module doc). Unloading forgets the slot's design (a partial stays in
    the fabric; its slot is isolated) and removes its staged file."""

    name = "sysfs"

    def __init__(self, sysfs: SysfsOps, stage: FirmwareStage, *, manager: str) -> None:
        self._sysfs = sysfs
        self._stage = stage
        self._manager = _ManagerState(sysfs, manager)
        self._dir = f"sys/class/fpga_manager/{manager}"
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        for attribute in ("state", "flags", "firmware"):
            if not sysfs.exists(f"{self._dir}/{attribute}"):
                raise BackendError(
                    f"{self._dir} has no {attribute!r} attribute: the sysfs load path needs a "
                    "Xilinx kernel (use load='overlay')",
                    path=self._dir,
                )

    def state(self) -> str:
        """The FPGA manager's ``state``."""
        return self._manager.read("state")

    def load(self, job: SlotLoad) -> None:
        """Program ``job.image`` with ``flags`` 1 (partial) or 0. Raises
        :class:`~juggle.errors.ProgrammingError` naming the manager's state and status."""
        with self._lock:
            self._held.pop(job.region, None)
            self._stage.put(job.firmware_name, job.image)
            try:
                self._program(job.firmware_name, 1 if job.partial else 0)
            except ProgrammingError:
                self._stage.remove(job.firmware_name)
                raise
            self._held[job.region] = _Held(job.design, (job.firmware_name,))

    def load_base(self, spec: ShellSpec) -> None:
        """Program the shell's full ``base_image`` (already in the firmware folder)."""
        if spec.base_image is None:
            raise BackendError(f"shell {spec.name!r} names no base_image to load", design=spec.name)
        self._program(spec.base_image, 0)

    def _program(self, name: str, flags: int) -> None:
        fs = self._sysfs
        try:
            fs.write(f"{self._dir}/flags", f"{flags:x}")
            shown = fs.read(f"{self._dir}/flags").strip()
        except OSError as exc:
            raise ProgrammingError(
                f"{self._dir}/flags refused {flags:x}: {exc}", path=self._dir
            ) from exc
        try:
            readback = int(shown, 16)
        except ValueError:
            readback = -1
        if readback != flags:
            raise ProgrammingError(
                f"{self._dir}/flags reads back {shown!r} after writing {flags:x}", path=self._dir
            )
        refused: OSError | None = None
        try:
            fs.write(f"{self._dir}/firmware", name)
        except OSError as exc:
            refused = exc
        state, status = self._manager.read("state"), self._manager.read("status")
        if refused is not None or state != "operating":
            how = f"refused {name!r} ({refused})" if refused else f"loaded {name!r}"
            raise ProgrammingError(
                f"{self._dir}/firmware {how}: state {state!r}, status {status!r}", path=self._dir
            )

    def unload(self, region: str) -> None:
        """Forget ``region``'s design and remove its staged file."""
        with self._lock:
            held = self._held.pop(region, None)
            if held is not None:
                for name in held.files:
                    self._stage.remove(name)

    def loaded(self) -> Mapping[str, str]:
        """Region -> design of every slot loaded through this loader."""
        with self._lock:
            return {region: held.design for region, held in self._held.items()}

    def __repr__(self) -> str:
        return f"<SysfsLoader {self._dir}, {len(self._held)} slots held>"
