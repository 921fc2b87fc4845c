"""``juggle board check``: what the board's kernel shows, read without changing anything.

Like ``xbutil examine``, :func:`examine` reads, under a root (``/`` on a board; a test's fake
kernel elsewhere), what the Linux backend would use for a board profile:

* the FPGA manager (``sys/class/fpga_manager/<dev>/{name,state,status,flags,firmware}``;
  Documentation/ABI/testing/sysfs-class-fpga-manager), the load path the profile's
  ``[linux]`` table chooses (configfs overlays or the manager's ``firmware`` attribute) and
  the firmware search path (``sys/module/firmware_class/parameters/path``;
  Documentation/driver-api/firmware/fw_search_path.rst);
* the overlays applied through configfs (``sys/kernel/config/device-tree/overlays/<name>/
  {path,status}``, drivers/of/configfs.c);
* the bridges, read-only as the kernel has them (``name`` and ``state``;
  Documentation/ABI/testing/sysfs-class-fpga-bridge);
* the UIO devices (``sys/class/uio/uioN/{name,maps/mapM/{addr,size,offset}}`` and ``dev/uioN``;
  Documentation/driver-api/uio-howto.rst);
* the static shell of the profile's ``[shell]`` table (is its base overlay applied, is its
  isolation window there) and each slot's windows, matched by UIO name and by address
  against the region's window;
* whether AMD's dfx-mgrd answers on its socket (a ``LIST_PACKAGE`` request,
  :func:`~juggle.fabric.linux.dfxmgr.dfxmgrd_answers`), which decides who loads.

It reports what is loaded, what is missing (:attr:`BoardReport.missing`: the check fails when
it is not empty) and what juggle would do. It only reads files and asks dfx-mgrd for its
package list: no attribute is written, no directory made or removed.
"""

from __future__ import annotations

import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from juggle.errors import BackendError
from juggle.fabric.linux.dfxmgr import DEFAULT_SOCKET, dfxmgrd_answers
from juggle.fabric.linux.fdt import MAX_BLOB_BYTES
from juggle.fabric.linux.overlay import JUGGLE_FIRMWARE_DIR, overlay_item
from juggle.fabric.linux.shell import blob_loads
from juggle.fabric.profiles import BoardProfile, RegionProfile, ShellSection

__all__ = [
    "BoardReport",
    "UioDevice",
    "UioMapInfo",
    "backend_options",
    "examine",
    "render_text",
]

_MANAGERS: Final = "sys/class/fpga_manager"
_BRIDGES: Final = "sys/class/fpga_bridge"
_UIO: Final = "sys/class/uio"
_OVERLAYS: Final = "sys/kernel/config/device-tree/overlays"
_FW_PATH: Final = "sys/module/firmware_class/parameters/path"
#: the kernel's built-in firmware search path after the custom one
#: (drivers/base/firmware_loader/main.c, fw_path[])
_FW_DEFAULT: Final = ("lib/firmware/updates", "lib/firmware")
#: bounds: an attribute is at most a page (sysfs), a folder listing is cut after this many
_MAX_ATTR: Final = 4096
_MAX_ENTRIES: Final = 4096
_MAX_MAPS: Final = 5  # MAX_UIO_MAPS in include/linux/uio_driver.h


# -- --backend-option KEY=VALUE -------------------------------------------------------------


def _backend_factory(backend: str) -> Callable[..., Any]:
    if backend == "linux":
        from juggle.fabric.linux.backend import open_linux_backend

        return open_linux_backend
    if backend == "rtl":
        from juggle.fabric.rtl import RtlBackend

        return RtlBackend
    raise BackendError(f"backend {backend!r} takes no --backend-option", value=backend)


_SKIP: Final = frozenset({"profile", "clock", "models", "sysfs"})


def backend_options(items: Sequence[str], backend: str = "linux") -> dict[str, Any]:
    """``KEY=VALUE`` strings (``--backend-option``, repeatable) as keyword options of
    ``backend``'s opener, each value converted to the option's type (``true``/``false`` for
    a flag, a number for a number; text otherwise).

    Raises :class:`~juggle.errors.BackendError` naming the item for one without ``=``, a key
    the backend has no option of (listing its options), a key given twice, or a value that
    does not convert.
    """
    if not items:
        return {}
    factory = _backend_factory(backend)
    parameters = {
        name: p
        for name, p in inspect.signature(factory).parameters.items()
        if name not in _SKIP and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    try:
        hints = typing.get_type_hints(factory)
    except (NameError, TypeError):  # an annotation that does not resolve: take text
        hints = {}
    options: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BackendError(f"--backend-option {item!r} is not KEY=VALUE", value=item)
        if key not in parameters:
            raise BackendError(
                f"backend {backend!r} has no option {key!r} (options: {', '.join(parameters)})",
                value=key,
            )
        if key in options:
            raise BackendError(f"--backend-option {key!r} is given twice", value=key)
        options[key] = _convert(key, text, hints.get(key))
    return options


_TEXT_KINDS: Final = frozenset({str, bool, int, float, Path, type(None)})
_YES: Final = ("1", "true", "yes", "on")


def _convert(key: str, text: str, hint: object) -> Any:
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    kinds = set(typing.get_args(hint)) if union else {hint}
    if hint is not None and not kinds & (_TEXT_KINDS - {type(None)}):
        raise BackendError(
            f"--backend-option {key}: the option takes a {hint}, which cannot be written as "
            "text (set it in the profile or through the Python API)",
            value=key,
        )
    lowered = text.strip().lower()
    if bool in kinds:
        if lowered in _YES:
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        if str not in kinds:
            raise BackendError(
                f"--backend-option {key}={text!r}: expected true or false", value=text
            )
    if lowered in ("", "none") and type(None) in kinds:
        return None
    if str in kinds or not kinds & {int, float}:
        return text
    try:
        return int(text.strip(), 0) if int in kinds else float(text.strip())
    except ValueError as exc:
        expected = "an integer" if int in kinds else "a number"
        raise BackendError(
            f"--backend-option {key}={text!r}: expected {expected}", value=text
        ) from exc


# -- reading the tree ---------------------------------------------------------------------


class _Tree:
    """Read-only access to files under ``root`` (never writes, never follows into ``dev``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def read(self, rel: str) -> str | None:
        """The stripped text of an attribute, None when absent or unreadable."""
        try:
            with open(self.path(rel), "rb") as handle:
                data = handle.read(_MAX_ATTR)
        except OSError:
            return None
        return data.decode("ascii", errors="replace").strip()

    def read_bytes(self, rel: str, limit: int) -> bytes | None:
        """At most ``limit`` bytes of a (binary) attribute, None when absent or unreadable."""
        try:
            with open(self.path(rel), "rb") as handle:
                return handle.read(limit)
        except OSError:
            return None

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self.path(rel))

    def listdir(self, rel: str) -> list[str]:
        try:
            with os.scandir(self.path(rel)) as entries:
                names = []
                for entry in entries:
                    names.append(entry.name)
                    if len(names) >= _MAX_ENTRIES:
                        break
        except OSError:
            return []
        return sorted(names)


@dataclass(frozen=True, slots=True)
class UioMapInfo:
    """One map of a UIO device: page address, size (with the in-page offset) and offset."""

    index: int
    addr: int
    size: int
    offset: int

    @property
    def register_base(self) -> int:
        """Where the registers start (``addr + offset``)."""
        return self.addr + self.offset


@dataclass(frozen=True, slots=True)
class UioDevice:
    """A UIO device as sysfs shows it, and whether its ``/dev`` node exists."""

    device: str
    name: str
    maps: tuple[UioMapInfo, ...]
    dev_node: bool

    def within(self, region: RegionProfile) -> bool:
        """Whether its first map's registers lie in ``region``'s window."""
        if not self.maps:
            return False
        start = self.maps[0].register_base
        return region.window_base <= start < region.window_base + region.window_size


def _read_uio(tree: _Tree) -> list[UioDevice]:
    devices = []
    for device in tree.listdir(_UIO):
        name = tree.read(f"{_UIO}/{device}/name") or ""
        maps = []
        for index in range(_MAX_MAPS):
            base = f"{_UIO}/{device}/maps/map{index}"
            addr, size = tree.read(f"{base}/addr"), tree.read(f"{base}/size")
            if addr is None or size is None:
                break
            offset = tree.read(f"{base}/offset") or "0"
            try:
                maps.append(UioMapInfo(index, int(addr, 0), int(size, 0), int(offset, 0)))
            except ValueError:
                break
        devices.append(UioDevice(device, name, tuple(maps), tree.exists(f"dev/{device}")))
    return devices


# -- the report ---------------------------------------------------------------------------


@dataclass
class BoardReport:
    """What :func:`examine` found: sections as plain data, what is ``missing`` (the check
    fails when not empty) and what juggle would do (``actions``)."""

    board: str
    root: str
    load: str
    family: str | None
    loader: str
    manager: dict[str, Any]
    firmware_path: dict[str, Any]
    overlays: list[dict[str, Any]]
    bridges: list[dict[str, Any]]
    uio: list[dict[str, Any]]
    shell: dict[str, Any] | None
    slots: list[dict[str, Any]]
    missing: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether nothing juggle needs is missing."""
        return not self.missing

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON document. Addresses and sizes are hex strings; the only
        figures are each slot's index and its count of isolation writes, INPUT from the
        profile (``labels``, per the project's rule)."""
        return {
            "board": self.board,
            "root": self.root,
            "ok": self.ok,
            "missing": list(self.missing),
            "actions": list(self.actions),
            "load": self.load,
            "family": self.family,
            "loader": self.loader,
            "manager": self.manager,
            "firmware_path": self.firmware_path,
            "shell": self.shell,
            "slots": self.slots,
            "overlays": self.overlays,
            "bridges": self.bridges,
            "uio": self.uio,
            "labels": {"slots": "input"},
        }


def examine(
    profile: BoardProfile,
    *,
    root: str | Path = "/",
    manager: str | None = None,
    load: str | None = None,
    firmware_dir: str | None = None,
    dfxmgrd: str | bool | None = None,
    **ignored: Any,
) -> BoardReport:
    """Read the board under ``root`` for ``profile`` and say what is there and what is not.

    Options are those of the Linux backend (``--backend-option``); ``manager``, ``load``,
    ``firmware_dir`` and ``dfxmgrd`` (the socket path, used as given; by default the
    profile's under ``root``; False: do not use it; True: it must answer) override the
    profile's ``[linux]`` table, the others are accepted and not used here.
    Raises :class:`~juggle.errors.BackendError` for an unknown ``load``; everything the board
    lacks is reported, not raised.
    """
    del ignored
    tree = _Tree(Path(root))
    linux = profile.linux
    load = load or (linux.load if linux else "overlay")
    if load not in ("overlay", "sysfs"):
        raise BackendError(f'load must be "overlay" or "sysfs", got {load!r}', value=load)
    missing: list[str] = []
    actions: list[str] = []

    manager_info = _manager(tree, manager or (linux.manager if linux else None), load, missing)
    fw = _firmware_path(tree, firmware_dir or (linux.firmware_dir if linux else None))
    overlays = [
        {
            "name": name,
            "status": tree.read(f"{_OVERLAYS}/{name}/status"),
            "path": tree.read(f"{_OVERLAYS}/{name}/path"),
        }
        for name in tree.listdir(_OVERLAYS)
    ]
    if load == "overlay" and not tree.exists(_OVERLAYS):
        missing.append(
            f"{_OVERLAYS} (configfs device-tree overlays: a kernel with CONFIG_OF_OVERLAY and "
            "the overlay configfs, configfs mounted on /sys/kernel/config)"
        )
    bridges = [
        {
            "device": device,
            "name": tree.read(f"{_BRIDGES}/{device}/name"),
            "state": tree.read(f"{_BRIDGES}/{device}/state"),
        }
        for device in tree.listdir(_BRIDGES)
    ]
    devices = _read_uio(tree)
    for device in devices:
        if not device.dev_node:
            missing.append(
                f"dev/{device.device} (the device node of UIO {device.device} "
                f"{device.name!r}: udev has not created it, or /dev/uio* is not readable)"
            )

    chosen = _socket_setting(tree, dfxmgrd, linux.dfxmgrd_socket if linux else None)
    socket_text = chosen[0] if chosen else None
    answers = chosen is not None and dfxmgrd_answers(chosen[1])
    manager_name = manager_info.get("device") or "the FPGA manager"
    if answers:
        loader = "dfx-mgrd"
        actions.append(
            f"load and unload through dfx-mgrd (socket {socket_text} answers): it owns "
            f"{manager_name}, juggle never writes it"
        )
    else:
        loader = load
        where = f"socket {socket_text} does not answer" if socket_text else "not used"
        if dfxmgrd is True or (isinstance(dfxmgrd, str) and dfxmgrd.lower() in _YES):
            missing.append(f"dfx-mgrd at {socket_text} (required by dfxmgrd=true): no answer")
        how = (
            f"device-tree overlays under {_OVERLAYS}"
            if load == "overlay"
            else f"the firmware attribute of {_MANAGERS}/{manager_name}"
        )
        actions.append(f"own {manager_name} (dfx-mgrd: {where}) and load through {how}")
        actions.append(f"stage firmware in {fw['stage']}")

    shell_info: dict[str, Any] | None = None
    slots: list[dict[str, Any]] = []
    if profile.shell is not None:
        shell_info = _shell(tree, profile.shell, overlays, devices, fw, loader, missing, actions)
        loaded = bool(shell_info["loaded"])
        slots = _slots(profile, profile.shell, overlays, devices, loaded, missing)
    else:
        actions.append("no [shell] table: the profile's regions are used as they are")

    return BoardReport(
        board=profile.name,
        root=str(tree.root),
        load=load,
        family=linux.family if linux else None,
        loader=loader,
        manager=manager_info,
        firmware_path=fw,
        overlays=overlays,
        bridges=bridges,
        uio=[_uio_json(d) for d in devices],
        shell=shell_info,
        slots=slots,
        missing=missing,
        actions=actions,
    )


def _socket_setting(
    tree: _Tree, option: str | bool | None, default: str | None
) -> tuple[str, Path] | None:
    """dfx-mgrd's socket as the backend resolves it: an explicit path as given, the
    profile's (or dfx-mgr's default) under the root; None when told not to use it."""
    if option is False or (isinstance(option, str) and option.lower() in ("false", "no", "0")):
        return None
    if isinstance(option, str) and option and option.lower() not in _YES:
        return option, Path(option)
    text = default or DEFAULT_SOCKET
    return text, tree.path(text)


def _manager(tree: _Tree, chosen: str | None, load: str, missing: list[str]) -> dict[str, Any]:
    found = tree.listdir(_MANAGERS)
    if chosen is None:
        if len(found) != 1:
            missing.append(
                f"{_MANAGERS}: {len(found)} FPGA managers ({', '.join(found) or 'none'}); "
                "name one with --backend-option manager=fpgaN"
            )
            return {"device": None, "found": found}
        chosen = found[0]
    base = f"{_MANAGERS}/{chosen}"
    if chosen not in found:
        missing.append(f"{base} (no FPGA manager {chosen!r}; found {', '.join(found) or 'none'})")
        return {"device": chosen, "present": False, "found": found}
    info: dict[str, Any] = {"device": chosen, "present": True}
    for attribute in ("name", "state", "status", "flags"):
        info[attribute] = tree.read(f"{base}/{attribute}")
    info["firmware_attribute"] = tree.exists(f"{base}/firmware")
    if info["state"] is None:
        missing.append(f"{base}/state (the manager's state attribute)")
    if load == "sysfs" and not info["firmware_attribute"]:
        missing.append(
            f"{base}/firmware (load = sysfs needs a Xilinx kernel's firmware attribute; "
            "use load = overlay on mainline)"
        )
    return info


def _firmware_path(tree: _Tree, firmware_dir: str | None) -> dict[str, Any]:
    """The search path and where the backend would stage images
    (:class:`~juggle.fabric.linux.overlay.FirmwareStage`: juggle's own folder when the
    search-path parameter is empty or names it, else ``/lib/firmware``)."""
    custom = tree.read(_FW_PATH) if tree.exists(_FW_PATH) else None
    search = ([custom] if custom else []) + ["/" + p for p in _FW_DEFAULT]
    own = "/" + (firmware_dir or JUGGLE_FIRMWARE_DIR).strip("/")
    takes_own = custom is not None and custom.rstrip("/") in ("", own)
    stage = own if takes_own or own == "/lib/firmware" else "/lib/firmware"
    return {
        "parameter": _FW_PATH if tree.exists(_FW_PATH) else None,
        "custom": custom or None,
        "search": search,
        "stage": stage,
    }


def _on_search_path(tree: _Tree, fw: Mapping[str, Any], name: str) -> str | None:
    for folder in fw["search"]:
        candidate = f"{folder.rstrip('/')}/{name}"
        if tree.exists(candidate):
            return candidate
    return None


def _blob_names(tree: _Tree, entry: str, image: str | None) -> bool:
    """Whether overlay ``entry``, applied through its ``dtbo`` attribute (its ``path`` empty:
    dfx-mgrd writes blobs), names ``image`` as its ``firmware-name`` (:func:`blob_loads`)."""
    if image is None:
        return False
    attribute = f"{_OVERLAYS}/{entry}/dtbo"
    return blob_loads(tree.read_bytes(attribute, MAX_BLOB_BYTES), attribute, image)


def _shell(
    tree: _Tree,
    shell: ShellSection,
    overlays: list[dict[str, Any]],
    devices: list[UioDevice],
    fw: Mapping[str, Any],
    loader: str,
    missing: list[str],
    actions: list[str],
) -> dict[str, Any]:
    base_applied: str | None = None
    if shell.base_overlay is not None:
        for overlay in overlays:
            path = overlay["path"] or ""
            if overlay["status"] != "applied":
                continue
            if Path(path).name == shell.base_overlay or (
                not path and _blob_names(tree, overlay["name"], shell.base_image)
            ):
                base_applied = overlay["name"]
    isolation = [d for d in devices if shell.isolation_uio and d.name == shell.isolation_uio]
    if shell.base_overlay is not None:
        loaded = base_applied is not None
    else:  # the boot loads the shell: it is there when its isolation window is
        loaded = shell.isolation_uio is None or bool(isolation)
    info: dict[str, Any] = {
        "name": shell.name,
        "loaded": loaded,
        "base_image": shell.base_image,
        "base_overlay": shell.base_overlay,
        "base_overlay_applied_as": base_applied,
        "uid": None if shell.uid is None else f"{shell.uid:#x}",
        "isolation_uio": shell.isolation_uio,
        "isolation_device": isolation[0].device if isolation else None,
    }
    if loaded:
        actions.append(f"use the static shell {shell.name!r} as loaded")
    elif shell.base_overlay is not None:
        missing.append(
            f"shell {shell.name!r}: its base overlay {shell.base_overlay!r} is not applied "
            f"(no overlay under {_OVERLAYS} with that path and status applied)"
        )
        if loader == "dfx-mgrd":
            actions.append(
                f"wait for the base shell: dfx-mgrd owns the manager, load {shell.name!r} with "
                "dfx-mgr's own client (xmutil loadapp / dfx-mgr-client -load)"
            )
            return info
        actions.append(
            f"load the base shell first (--backend-option load_shell=true): overlay "
            f"{shell.base_overlay!r} with image {shell.base_image!r}"
        )
        for name in (shell.base_overlay, shell.base_image):
            if name is not None and _on_search_path(tree, fw, name) is None:
                missing.append(
                    f"{name} (the shell's base design, on the firmware search path: "
                    f"{', '.join(fw['search'])})"
                )
    else:
        missing.append(
            f"shell {shell.name!r}: its isolation window, UIO {shell.isolation_uio!r}, is "
            "absent (is the static design loaded by the boot?)"
        )
    if loaded and shell.isolation_uio is not None and not isolation:
        missing.append(
            f"UIO {shell.isolation_uio!r} (the shell's isolation window: {_UIO}/uioN with "
            f"that name; the base overlay declares it)"
        )
    return info


def _slots(
    profile: BoardProfile,
    shell: ShellSection,
    overlays: list[dict[str, Any]],
    devices: list[UioDevice],
    shell_loaded: bool,
    missing: list[str],
) -> list[dict[str, Any]]:
    slots = []
    for slot in shell.slots:
        region = profile.region(slot.region)
        windows = []
        present = 0
        for window, uio_name in slot.windows.items():
            named = [d for d in devices if d.name == uio_name]
            inside = [d for d in named if d.within(region)]
            chosen = inside[0] if len(inside) == 1 else None
            entry: dict[str, Any] = {"window": window, "uio_name": uio_name}
            if chosen is not None:
                present += 1
                first = chosen.maps[0]
                entry.update(
                    device=chosen.device,
                    addr=f"{first.addr:#x}",
                    size=f"{first.size:#x}",
                    offset=f"{first.offset:#x}",
                    dev_node=chosen.dev_node,
                )
            elif len(inside) > 1:
                missing.append(
                    f"slot {slot.region!r}: window {window!r}: several UIO devices named "
                    f"{uio_name!r} inside its window ({', '.join(d.device for d in inside)})"
                )
            elif named:
                entry["outside"] = [
                    f"{d.device}@{d.maps[0].register_base:#x}" if d.maps else d.device
                    for d in named
                ]
            windows.append(entry)
        if not slot.windows:
            state = "unknown"
        elif present == len(slot.windows):
            state = "windows-present"
        elif present == 0:
            state = "empty"
        else:
            state = "incomplete"
            absent = [w["window"] for w in windows if "device" not in w]
            missing.append(
                f"slot {slot.region!r}: window(s) {', '.join(absent)} absent while others are "
                "present (an overlay half applied?)"
            )
        item = overlay_item(slot.region)
        held = next((o for o in overlays if o["name"] == item), None)
        slots.append(
            {
                "region": slot.region,
                "slot": slot.slot,
                "state": state if shell_loaded else "shell-not-loaded",
                "juggle_overlay": None if held is None else f"{item} ({held['status']})",
                "window_base": f"{region.window_base:#x}",
                "window_size": f"{region.window_size:#x}",
                "isolation_writes": {"release": len(slot.release), "isolate": len(slot.isolate)},
                "windows": windows,
            }
        )
    return slots


def _uio_json(device: UioDevice) -> dict[str, Any]:
    return {
        "device": device.device,
        "name": device.name,
        "dev_node": device.dev_node,
        "maps": [
            {
                "map": f"map{m.index}",
                "addr": f"{m.addr:#x}",
                "size": f"{m.size:#x}",
                "offset": f"{m.offset:#x}",
            }
            for m in device.maps
        ],
    }


def render_text(report: BoardReport) -> str:
    """The report as lines for a terminal."""
    lines = [f"board {report.board} under {report.root}: {'OK' if report.ok else 'MISSING'}"]
    mgr = report.manager
    if mgr.get("present"):
        lines.append(
            f"  manager {mgr['device']}: {mgr.get('name')!r}, state {mgr.get('state')!r}"
            + (f", status {mgr['status']!r}" if mgr.get("status") else "")
        )
    lines.append(f"  load path: {report.loader} (profile: {report.load})")
    if report.shell is not None:
        loaded = "loaded" if report.shell["loaded"] else "NOT loaded"
        lines.append(f"  shell {report.shell['name']}: {loaded}")
    for slot in report.slots:
        found = (
            ", ".join(f"{w['window']}={w.get('device', 'absent')}" for w in slot["windows"])
            or "no windows"
        )
        lines.append(f"  slot {slot['slot']} ({slot['region']}): {slot['state']}; {found}")
    for overlay in report.overlays:
        lines.append(f"  overlay {overlay['name']}: {overlay['status']} ({overlay['path']})")
    for bridge in report.bridges:
        lines.append(f"  bridge {bridge['device']} {bridge['name']!r}: {bridge['state']}")
    for device in report.uio:
        lines.append(f"  {device['device']} {device['name']!r}")
    for item in report.missing:
        lines.append(f"missing: {item}")
    for item in report.actions:
        lines.append(f"juggle would: {item}")
    return "\n".join(lines)
