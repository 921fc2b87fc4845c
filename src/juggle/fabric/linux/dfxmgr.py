"""AMD's dfx-mgr, with it or instead of it: its package folders and its daemon's socket.

**Package folders.** dfx-mgr (github.com/Xilinx/dfx-mgr, ``README.md``, "Files required")
finds designs under ``/lib/firmware/xilinx``: a *base* folder holds ``shell.json``, the
static shell's full image (``.bit.bin``/``.bin``/``.pdi``) and its overlay (``.dtbo``); each
accelerator is a sub-folder ``<accel>/`` holding one folder ``<accel>_slot<N>/`` per slot it
was built for, each with ``accel.json``, the slot's partial and its ``.dtbo``.
:func:`read_package` reads such a folder into a :class:`DfxPackage`: the shell as a
:class:`~juggle.fabric.linux.loader.ShellSpec` (``isolation_slots`` becoming each slot's
release writes) and the accelerators with their per-slot partial and overlay paths. dfx-mgr
writes numbers as JSON strings, hex (``"0x4000"``) or decimal (``"3"``), and uses ``""`` for
"not given" (``README.md``, shell.json and accel.json examples; ``example/sys/linux/
shell.json``); both are read here. Every malformed file is a
:class:`~juggle.errors.DfxPackageError` naming the file and the field, raised before anything
is written anywhere.

**The daemon.** ``dfx-mgrd`` listens on ``/var/run/dfx-mgrd.socket`` (``src/dfxmgr_client.h``:
``SERVER_SOCKET``), an ``AF_UNIX`` ``SOCK_SEQPACKET`` socket (``initSocket`` in
``src/dfxmgr_client.c``). One packet is one ``struct message``: ``uint32 id, size, flags``,
``uint32 slot`` (a union with ``fdcount``), then ``data``, a NUL-terminated string of at most
32 KiB; clients send ``HEADERSIZE`` (24) ``+ size`` bytes, so the data travels with 8 bytes of
zero padding. Replies are the same struct, their data a decimal number as text (``"%d"``,
``example/sys/linux/dfx-mgrd.c``: ``process_dfx_req``), a negative number for an error, and
newer daemons may append ``":<fpga_manager state>"`` (``dfxmgr_split_fpga_state``). The
requests juggle uses:

- ``USER_LOAD`` (16): ``flags`` = ``USER_LOAD_PARTIAL`` (bit 0) | ``USER_LOAD_HAS_OVERLAY``
  (bit 1); data ``"<bitstream path>:<dtbo path>:<region>"`` (split with ``strtok`` on ``" :"``,
  so no path may hold a blank or a colon; the region at most 8 characters,
  ``MAX_REGION_NAME_LEN``). dfx-mgrd programs the image and applies the overlay under
  configfs ``overlays/<region>`` itself; the reply is the load's handle (``user_load`` in
  ``src/daemon_helper.c``: "unique handle id on success, -1 on failure").
- ``UNLOAD_ACCEL`` (7): data the handle in decimal; reply ``"0"`` when it took (dfx-mgrd
  removes the overlay of a user load, ``user_unload``).
- ``LIST_ACCEL_UIO`` (9): ``slot`` = the handle, data a UIO device name; the reply is the
  ``/dev/uioN`` path whose device name contains it, or empty (``get_accel_uio_by_name``).
- ``LIST_PACKAGE`` (8): the package table as text; juggle sends it to see that the daemon
  answers (:func:`dfxmgrd_answers`).

:class:`DfxMgrdLoader` implements :class:`~juggle.fabric.linux.loader.Loader` over this
protocol, so dfx-mgrd and juggle agree on who holds each slot and juggle never writes the
FPGA manager itself while dfx-mgrd runs. A dfx-mgr package becomes the hardware tier of a
co-module with :func:`juggle.runtime.dfximport.import_package` (``juggle module
import-dfx``), which writes a
``juggle.toml`` whose per-region bitstream table names each slot's partial; the slot's overlay
is the ``.dtbo`` beside it (:func:`slot_overlay`). When such a module is installed on the Linux
backend, the backend reads that overlay (:func:`slot_design`, which checks it loads that very
partial, as a partial, with its devices inside the region's window) and every load of the
design carries it, its ``firmware-name`` set to the file the image is staged as
(:func:`retarget_overlay`), through dfx-mgrd or juggle's own overlay loader alike.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from juggle.errors import DfxPackageError, ProgrammingError
from juggle.fabric.linux.loader import IsolationWrite, ShellSpec, SlotLoad, SlotSpec

__all__ = [
    "BASE_REGION",
    "DEFAULT_SOCKET",
    "DfxAccel",
    "DfxMgrdLoader",
    "DfxPackage",
    "DfxSlot",
    "MAX_JSON_BYTES",
    "SlotDesign",
    "decode_message",
    "dfxmgrd_answers",
    "encode_message",
    "in_slot_folder",
    "read_package",
    "retarget_overlay",
    "slot_design",
    "slot_overlay",
]

#: where dfx-mgrd listens (``src/dfxmgr_client.h``: ``SERVER_SOCKET``)
DEFAULT_SOCKET: Final = "/var/run/dfx-mgrd.socket"
#: the largest ``shell.json`` or ``accel.json`` read (dfx-mgr's own are a few hundred bytes)
MAX_JSON_BYTES: Final = 64 * 1024

# -- the socket protocol (src/dfxmgr_client.h) -------------------------------------------------

LIST_PACKAGE: Final = 8
LIST_ACCEL_UIO: Final = 9
LOAD_ACCEL: Final = 6
UNLOAD_ACCEL: Final = 7
USER_LOAD: Final = 16
USER_UNLOAD: Final = 17
USER_LOAD_PARTIAL: Final = 1 << 0
USER_LOAD_HAS_OVERLAY: Final = 1 << 1
#: ``struct message`` without its data: id, size, flags, slot (native byte order, as the C
#: struct is written with ``write(2)``)
_HEADER: Final = struct.Struct("=IIII")
#: clients send ``HEADERSIZE + size`` bytes with ``HEADERSIZE`` 24: 8 bytes of data padding
_PADDING: Final = 24 - _HEADER.size
#: ``sizeof(struct message)``: the header and 32 KiB of data
MAX_MESSAGE: Final = _HEADER.size + 32 * 1024
#: ``MAX_REGION_NAME_LEN`` in ``src/dfxmgr_client.h``
MAX_REGION_NAME: Final = 8
#: the dfx-mgr region of a full (base) load: dfx-mgr-client's default (README.md, "-R")
BASE_REGION: Final = "full"

_ERRORS: Final = {
    # dfx-mgr-client's print_load_result names these reply codes
    2: "no package found",
    3: "no empty slot",
    4: "secure load is supported on ZynqMP only",
}


def encode_message(msg_id: int, text: str = "", *, flags: int = 0, slot: int = 0) -> bytes:
    """One ``struct message`` packet as a client writes it: header, ``text`` NUL-terminated,
    the 8 bytes of padding ``HEADERSIZE`` implies."""
    data = text.encode("utf-8") + b"\0"
    if len(data) > MAX_MESSAGE - _HEADER.size:
        raise ValueError(f"dfx-mgrd message data of {len(data)} bytes is over 32 KiB")
    return _HEADER.pack(msg_id, len(data), flags, slot) + data + b"\0" * _PADDING


def decode_message(packet: bytes) -> tuple[int, int, int, str]:
    """``(id, flags, slot, text)`` of one packet; ``text`` is the data up to its first NUL
    (the data is a C string), at most ``size`` bytes. ValueError for a short packet."""
    if len(packet) < _HEADER.size:
        raise ValueError(f"dfx-mgrd packet of {len(packet)} bytes, shorter than its header")
    msg_id, size, flags, slot = _HEADER.unpack_from(packet)
    data = packet[_HEADER.size : _HEADER.size + min(size, MAX_MESSAGE)]
    text = data.split(b"\0", 1)[0].decode("utf-8", errors="replace")
    return msg_id, flags, slot, text


def _exchange(socket_path: str, packet: bytes, timeout_s: float) -> bytes:
    """Connect, send one packet, read one reply (OSError on any failure or timeout)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(timeout_s)
        sock.connect(socket_path)
        sock.sendall(packet)
        reply = sock.recv(MAX_MESSAGE)
    if not reply:
        raise ConnectionError(f"dfx-mgrd at {socket_path} closed without a reply")
    return reply


def dfxmgrd_answers(socket_path: str | Path = DEFAULT_SOCKET, timeout_s: float = 0.5) -> bool:
    """Whether a dfx-mgrd listens at ``socket_path`` and answers a ``LIST_PACKAGE`` request
    within ``timeout_s`` (a stale socket file of a dead daemon does not answer)."""
    try:
        _exchange(str(socket_path), encode_message(LIST_PACKAGE), timeout_s)
    except (OSError, ValueError):
        return False
    return True


def _split_reply(text: str) -> tuple[int | None, str | None]:
    """A reply ``"<value>[:<fpga state>]"`` as (value, state); value None when not a number
    (a daemon prefixes warnings: "WARNING: ... 3", the number is the last word)."""
    value, _, state = text.partition(":")
    words = value.split()
    number: int | None = None
    if words:
        try:
            number = int(words[-1])
        except ValueError:
            number = None
    return number, (state.strip() or None)


@dataclass(slots=True)
class _Held:
    design: str
    handle: int
    files: tuple[Path, ...]


class DfxMgrdLoader:
    """A :class:`~juggle.fabric.linux.loader.Loader` that asks dfx-mgrd (see the module doc).

    A load stages the kernel-ready image (and the overlay) as files under ``stage_dir`` (a
    private temporary folder by default; dfx-mgrd reads them by path) and sends ``USER_LOAD``
    naming the juggle region as dfx-mgr's region; an unload sends ``UNLOAD_ACCEL`` with the
    handle dfx-mgrd returned. Every refusal is a :class:`~juggle.errors.ProgrammingError`
    naming dfx-mgrd's reply (and the FPGA manager state it reports), with nothing held.
    """

    name = "dfx-mgrd"

    def __init__(
        self,
        socket_path: str | Path = DEFAULT_SOCKET,
        *,
        stage_dir: str | Path | None = None,
        timeout_s: float = 30.0,
        firmware_dir: str | Path | None = None,
    ) -> None:
        self.socket_path = str(socket_path)
        self.firmware_dir = Path(firmware_dir) if firmware_dir is not None else None
        self.timeout_s = timeout_s
        self._own_stage = stage_dir is None
        self._stage = Path(stage_dir) if stage_dir is not None else None
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()

    def _stage_dir(self) -> Path:
        if self._stage is None:
            self._stage = Path(tempfile.mkdtemp(prefix="juggle-dfx-"))
        return self._stage

    def _ask(self, msg_id: int, text: str, *, flags: int = 0, slot: int = 0) -> str:
        packet = encode_message(msg_id, text, flags=flags, slot=slot)
        try:
            reply = _exchange(self.socket_path, packet, self.timeout_s)
        except OSError as exc:
            raise ProgrammingError(
                f"dfx-mgrd at {self.socket_path} did not answer request {msg_id}: {exc}",
                path=self.socket_path,
            ) from exc
        return decode_message(reply)[3]

    def load(self, job: SlotLoad) -> None:
        """Stage ``job`` and ask dfx-mgrd to program it into ``job.region`` (see the class
        doc). A region that already holds a design is unloaded first."""
        region = job.region
        if not region or len(region) > MAX_REGION_NAME or _BAD_WORD.search(region):
            raise ProgrammingError(
                f"region {region!r} cannot be a dfx-mgr region: at most {MAX_REGION_NAME} "
                "characters, no blank or colon (MAX_REGION_NAME_LEN in dfxmgr_client.h)",
                region=region,
            )
        with self._lock:
            if region in self._held:
                self._unload_locked(region)
            folder = self._stage_dir() / region
            image = folder / _safe_name(job.firmware_name, "firmware_name")
            files = [image]
            flags = USER_LOAD_PARTIAL if job.partial else 0
            text = str(image)
            if job.overlay is not None:
                dtbo = folder / (image.name + ".dtbo")
                files.append(dtbo)
                flags |= USER_LOAD_HAS_OVERLAY
                text = f"{image}:{dtbo}:{region}"
            if _BAD_WORD.search(str(folder)):
                raise ProgrammingError(
                    f"staging folder {str(folder)!r} holds a blank or colon, which dfx-mgrd's "
                    "request parser splits on; choose another stage_dir",
                    path=str(folder),
                )
            folder.mkdir(parents=True, exist_ok=True)
            image.write_bytes(job.image)
            if job.overlay is not None:
                files[1].write_bytes(job.overlay)
            try:
                reply = self._ask(USER_LOAD, text, flags=flags)
            except ProgrammingError:
                _remove(files)
                raise
            handle, state = _split_reply(reply)
            if handle is None or handle < 0:
                _remove(files)
                code = "" if handle is None else f" ({_ERRORS.get(-handle, 'load failed')})"
                where = f"; FPGA manager state {state!r}" if state else ""
                raise ProgrammingError(
                    f"dfx-mgrd refused to load {job.design!r} into region {region!r}: "
                    f"reply {reply!r}{code}{where}",
                    region=region,
                    design=job.design,
                )
            self._held[region] = _Held(job.design, handle, tuple(files))

    def load_base(self, spec: ShellSpec) -> None:
        """Ask dfx-mgrd to load the shell's base design: a full ``USER_LOAD`` of
        ``base_image`` with ``base_overlay`` (both file names in ``firmware_dir``) under
        dfx-mgr's region ``full`` (dfx-mgr-client's default region). Held as region
        :data:`BASE_REGION`."""
        if spec.base_image is None or self.firmware_dir is None:
            raise ProgrammingError(
                f"shell {spec.name!r}: loading its base through dfx-mgrd needs base_image "
                f"(it is {spec.base_image!r}) and the loader's firmware_dir "
                f"(it is {self.firmware_dir})",
                design=spec.name,
            )
        image = self.firmware_dir / _safe_name(spec.base_image, "base_image")
        text, flags = str(image), 0
        if spec.base_overlay is not None:
            dtbo = self.firmware_dir / _safe_name(spec.base_overlay, "base_overlay")
            text, flags = f"{image}:{dtbo}:{BASE_REGION}", USER_LOAD_HAS_OVERLAY
        if _BAD_WORD.search(str(self.firmware_dir)):
            raise ProgrammingError(
                f"firmware_dir {str(self.firmware_dir)!r} holds a blank or colon, which "
                "dfx-mgrd's request parser splits on",
                path=str(self.firmware_dir),
            )
        with self._lock:
            reply = self._ask(USER_LOAD, text, flags=flags)
            handle, state = _split_reply(reply)
            if handle is None or handle < 0:
                where = f"; FPGA manager state {state!r}" if state else ""
                raise ProgrammingError(
                    f"dfx-mgrd refused to load shell {spec.name!r} ({spec.base_image}): "
                    f"reply {reply!r}{where}",
                    design=spec.name,
                )
            self._held[BASE_REGION] = _Held(spec.name, handle, ())

    def unload(self, region: str) -> None:
        """Ask dfx-mgrd to unload ``region``'s design (nothing held there: no-op)."""
        with self._lock:
            if region in self._held:
                self._unload_locked(region)

    def _unload_locked(self, region: str) -> None:
        held = self._held[region]
        reply = self._ask(UNLOAD_ACCEL, str(held.handle))
        number, state = _split_reply(reply)
        if number != 0:
            where = f"; FPGA manager state {state!r}" if state else ""
            raise ProgrammingError(
                f"dfx-mgrd refused to unload {held.design!r} (handle {held.handle}) from "
                f"region {region!r}: reply {reply!r}{where}",
                region=region,
                design=held.design,
            )
        del self._held[region]
        _remove(held.files)

    def loaded(self) -> Mapping[str, str]:
        """Region -> design of every slot loaded through this loader."""
        with self._lock:
            return {region: held.design for region, held in self._held.items()}

    def handle(self, region: str) -> int | None:
        """dfx-mgrd's handle of ``region``'s load (None when nothing is held there)."""
        with self._lock:
            held = self._held.get(region)
            return None if held is None else held.handle

    def uio(self, region: str, name: str) -> str | None:
        """The ``/dev/uioN`` dfx-mgrd reports for UIO device ``name`` of ``region``'s load
        (``LIST_ACCEL_UIO``), or None when it knows none."""
        handle = self.handle(region)
        if handle is None:
            return None
        reply = self._ask(LIST_ACCEL_UIO, name, slot=handle).strip()
        return reply or None

    def close(self) -> None:
        """Remove the private staging folder (loads stay as they are in dfx-mgrd)."""
        if self._own_stage and self._stage is not None:
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None


_BAD_WORD: Final = re.compile(r"[\s:]")


def _safe_name(name: str, what: str) -> str:
    if not name or "/" in name or name in (".", "..") or _BAD_WORD.search(name) or "\0" in name:
        raise ProgrammingError(
            f"{what} {name!r} is not a plain file name without blanks or colons "
            "(dfx-mgrd splits its request on them)",
            value=name,
        )
    return name


def _remove(files: Sequence[Path]) -> None:
    for path in files:
        try:
            path.unlink()
        except OSError:
            pass


# -- package folders ---------------------------------------------------------------------------

#: ``shell_type`` values (README.md "shell.json"; SIHA_SHELL in example/sys/linux/shell.json)
SHELL_TYPES: Final = frozenset({"XRT_FLAT", "PL_FLAT", "PL_DFX", "SIHA_SHELL"})
#: file name endings of a design image, longest first (README.md "Directory Structure")
IMAGE_SUFFIXES: Final = (".bit.bin", ".bin", ".pdi", ".bit")
_SLOT_DIR: Final = re.compile(r"^(?P<accel>.+)_slot(?P<slot>[0-9]{1,3})$")


@dataclass(frozen=True, slots=True)
class DfxSlot:
    """One ``<accel>_slot<N>/`` folder: the partial and its overlay (None when the folder
    has no ``.dtbo``), and ``accel.json`` as read."""

    slot: int
    folder: Path
    partial: Path
    overlay: Path | None
    accel_type: str
    devices: tuple[str, ...] = ()

    def windows(self) -> dict[str, str]:
        """Window name -> UIO name of the slot's ``accel_devices``: a device
        ``"20100000000.accel"`` is the node ``accel``, which ``uio_pdrv_genirq`` names its
        UIO device after (Documentation/driver-api/uio-howto)."""
        out: dict[str, str] = {}
        for dev in self.devices:
            node = dev.split(".", 1)[1] if "." in dev else dev
            out[node] = node
        return out


@dataclass(frozen=True, slots=True)
class DfxAccel:
    """One accelerator of a package: its folder name and a :class:`DfxSlot` per slot."""

    name: str
    slots: Mapping[int, DfxSlot]


@dataclass(frozen=True, slots=True)
class DfxPackage:
    """A dfx-mgr base folder read by :func:`read_package`."""

    folder: Path
    name: str
    shell_type: str
    shell: ShellSpec
    accels: Mapping[str, DfxAccel] = field(default_factory=dict)
    load_base_design: bool = True

    def accel(self, name: str) -> DfxAccel:
        """The accelerator ``name`` (DfxPackageError naming the ones there are)."""
        try:
            return self.accels[name]
        except KeyError:
            raise DfxPackageError(
                f"{self.folder}: no accelerator {name!r}; it has {sorted(self.accels)}",
                path=str(self.folder),
                field=name,
            ) from None


def _fail(path: Path, field_name: str, problem: str) -> DfxPackageError:
    return DfxPackageError(
        f"{path}: field {field_name!r}: {problem}", path=str(path), field=field_name
    )


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, bounded by :data:`MAX_JSON_BYTES`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_JSON_BYTES + 1)
    except FileNotFoundError:
        raise _fail(path, "<file>", "missing") from None
    except OSError as exc:
        raise _fail(path, "<file>", f"cannot be read: {exc.strerror}") from exc
    if len(data) > MAX_JSON_BYTES:
        raise _fail(path, "<file>", f"larger than {MAX_JSON_BYTES} bytes")
    try:
        table = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _fail(path, "<file>", f"not UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise _fail(path, "<file>", f"not JSON: {exc.msg} at line {exc.lineno}") from exc
    except RecursionError as exc:
        raise _fail(path, "<file>", "nests too deeply") from exc
    if not isinstance(table, dict):
        raise _fail(path, "<file>", f"holds a JSON {type(table).__name__}, not an object")
    return table


def _number(
    path: Path, field_name: str, value: object, *, optional: bool = False, limit: int = 2**32
) -> int | None:
    """A dfx-mgr number: a JSON integer, or a string in hex (``0x..``) or decimal; ``""``
    (dfx-mgr's "not given") or absent is None when ``optional``."""
    if value is None or value == "":
        if optional:
            return None
        raise _fail(path, field_name, "missing" if value is None else "empty, a number is needed")
    if isinstance(value, bool):
        raise _fail(path, field_name, f"{value!r} is not a number")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        if len(text) > 20:
            raise _fail(path, field_name, f"{value[:24]!r}... is not a number")
        try:
            number = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
        except ValueError:
            raise _fail(path, field_name, f"{value!r} is not a number (hex or decimal)") from None
    else:
        raise _fail(path, field_name, f"{value!r} is not a number")
    if not 0 <= number < limit:
        raise _fail(path, field_name, f"{value!r} is outside 0..{limit - 1}")
    return number


def _string(path: Path, table: Mapping[str, Any], key: str, *, optional: bool = False) -> str:
    value = table.get(key)
    if value is None and optional:
        return ""
    if not isinstance(value, str) or (not value.strip() and not optional):
        raise _fail(path, key, "missing" if value is None else f"{value!r} is not a name")
    return value.strip()


def _flag(path: Path, table: Mapping[str, Any], key: str, default: bool) -> bool:
    value = table.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("yes", "no", "true", "false"):
        return value.strip().lower() in ("yes", "true")
    raise _fail(path, key, f"{value!r} is not yes or no")


def _isolation(path: Path, value: object, slots: int) -> list[tuple[IsolationWrite, ...]]:
    """``isolation_slots``: per slot ``{"offset": [...], "values": [...]}``, the register
    writes (offset, value) that release the slot (example/sys/linux/shell.json)."""
    if value is None or value == "":
        return []
    if not isinstance(value, list):
        raise _fail(path, "isolation_slots", "not a list of {offset, values}")
    if len(value) > slots:
        raise _fail(path, "isolation_slots", f"{len(value)} entries for {slots} slots")
    out: list[tuple[IsolationWrite, ...]] = []
    for index, entry in enumerate(value):
        where = f"isolation_slots[{index}]"
        if not isinstance(entry, dict):
            raise _fail(path, where, "not an object with offset and values")
        offsets, values = entry.get("offset"), entry.get("values")
        if not isinstance(offsets, list):
            raise _fail(path, f"{where}.offset", "missing" if offsets is None else "not a list")
        if not isinstance(values, list):
            raise _fail(path, f"{where}.values", "missing" if values is None else "not a list")
        if len(offsets) != len(values):
            raise _fail(path, f"{where}.values", f"{len(values)} values for {len(offsets)} offsets")
        writes = []
        for n, (off, val) in enumerate(zip(offsets, values, strict=True)):
            offset = _number(path, f"{where}.offset[{n}]", off)
            assert offset is not None
            if offset % 4:
                raise _fail(path, f"{where}.offset[{n}]", f"{off!r} is not 32-bit aligned")
            number = _number(path, f"{where}.values[{n}]", val)
            assert number is not None
            writes.append(IsolationWrite(offset, number))
        out.append(tuple(writes))
    return out


def _images(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(IMAGE_SUFFIXES)
    )


def _one(folder: Path, paths: list[Path], what: str, *, required: bool) -> Path | None:
    if len(paths) > 1:
        names = ", ".join(p.name for p in paths)
        raise _fail(folder, what, f"more than one file ({names}); dfx-mgr takes one")
    if not paths:
        if required:
            raise _fail(folder, what, "no file (" + " / ".join(IMAGE_SUFFIXES) + ")")
        return None
    return paths[0]


def _uio_node(device: str) -> str:
    return device.split(".", 1)[1] if "." in device else device


def _read_slot(folder: Path, slot: int) -> DfxSlot:
    accel_json = folder / "accel.json"
    table = _read_json(accel_json)
    accel_type = _string(accel_json, table, "accel_type")
    devices: list[str] = []
    raw = table.get("accel_devices")
    if raw not in (None, ""):
        if not isinstance(raw, list):
            raise _fail(accel_json, "accel_devices", "not a list")
        for n, dev in enumerate(raw):
            if not isinstance(dev, dict):
                raise _fail(accel_json, f"accel_devices[{n}]", "not an object")
            name = dev.get("dev_name")
            if not isinstance(name, str) or not name.strip():
                raise _fail(accel_json, f"accel_devices[{n}].dev_name", "missing or empty")
            for key in ("reg_base", "reg_size"):
                _number(accel_json, f"accel_devices[{n}].{key}", dev.get(key), optional=True,
                        limit=2**64)  # fmt: skip
            devices.append(name.strip())
    partial = _one(folder, _images(folder), "partial", required=True)
    assert partial is not None
    dtbos = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".dtbo")
    overlay = _one(folder, dtbos, "overlay (.dtbo)", required=False)
    return DfxSlot(slot, folder, partial, overlay, accel_type, tuple(devices))


def _accel_folders(base: Path) -> dict[str, dict[int, Path]]:
    """Accelerator -> slot -> folder, from ``<accel>/<accel>_slot<N>/`` (dfx-mgr's layout)
    and, for a package holding a single accelerator, ``<accel>_slot<N>/`` right in the base
    folder."""
    found: dict[str, dict[int, Path]] = {}
    for entry in sorted(base.iterdir()):
        if not entry.is_dir():
            continue
        direct = _SLOT_DIR.match(entry.name)
        if direct:
            found.setdefault(direct["accel"], {})[int(direct["slot"])] = entry
            continue
        for sub in sorted(entry.iterdir()):
            match = _SLOT_DIR.match(sub.name)
            if sub.is_dir() and match and match["accel"] == entry.name:
                found.setdefault(entry.name, {})[int(match["slot"])] = sub
    return found


def default_region(slot: int) -> str:
    """The juggle region of slot ``slot`` when nothing maps it: ``rp<N>`` (Kria's RP_<N>)."""
    return f"rp{slot}"


def read_package(
    folder: str | Path,
    *,
    regions: Mapping[int, str] | Sequence[str] | Callable[[int], str] | None = None,
) -> DfxPackage:
    """Read a dfx-mgr base folder (see the module doc) into a :class:`DfxPackage`.

    ``regions`` names the juggle region of each slot (a mapping, a list indexed by slot, or a
    function); by default slot N is ``rp<N>``. Raises :class:`DfxPackageError` naming the
    file and field for a missing or unreadable ``shell.json``/``accel.json``, one that is
    larger than :data:`MAX_JSON_BYTES` or not a JSON object, a missing field, a number that
    does not parse, a slot folder beyond the shell's slots or without a partial, and a slot
    with no region. Reads only; writes nothing.
    """
    base = Path(folder)
    if not base.is_dir():
        raise _fail(base, "<folder>", "not a folder")
    shell_json = base / "shell.json"
    table = _read_json(shell_json)
    shell_type = _string(shell_json, table, "shell_type")
    if shell_type not in SHELL_TYPES:
        raise _fail(shell_json, "shell_type", f"{shell_type!r} is not one of {sorted(SHELL_TYPES)}")
    flat = shell_type in ("XRT_FLAT", "PL_FLAT")
    slot_key = (
        "num_pl_slots" if "num_pl_slots" in table or "num_slots" not in table else ("num_slots")
    )
    num_slots = _number(shell_json, slot_key, table.get(slot_key), optional=flat, limit=64)
    if num_slots is None:
        num_slots = 0
    _number(shell_json, "num_aie_slots", table.get("num_aie_slots"), optional=True, limit=64)
    for key in ("reg_base", "reg_size", "clock_reg_base", "clock_reg_size"):
        _number(shell_json, key, table.get(key), optional=True, limit=2**64)
    uid = _number(shell_json, "uid", table.get("uid"), optional=True)
    load_base = _flag(shell_json, table, "load_base_design", True)
    release = _isolation(shell_json, table.get("isolation_slots"), num_slots)
    device = _string(shell_json, table, "device_name", optional=True)
    isolation_uio = _uio_node(device) if release and device else None
    if release and not device:
        raise _fail(shell_json, "device_name", "missing; isolation_slots need the shell's device")

    def region_of(slot: int) -> str:
        name: str | None
        if regions is None:
            name = default_region(slot)
        elif callable(regions):
            name = regions(slot)
        elif isinstance(regions, Mapping):
            name = regions.get(slot)
        else:
            name = regions[slot] if slot < len(regions) else None
        if not name:
            raise _fail(shell_json, slot_key, f"slot {slot} has no juggle region to map to")
        return name

    slots = tuple(
        SlotSpec(
            region=region_of(n),
            slot=n,
            # isolate: the release offsets written back to 0, last first (decoupler and
            # reset asserted again before the slot is unloaded)
            isolate=tuple(IsolationWrite(w.offset, 0) for w in reversed(release[n]))
            if n < len(release)
            else (),
            release=release[n] if n < len(release) else (),
        )
        for n in range(num_slots)
    )
    base_image = _one(base, _images(base), "base image", required=False)
    dtbos = sorted(p for p in base.iterdir() if p.is_file() and p.suffix == ".dtbo")
    base_overlay = _one(base, dtbos, "base overlay (.dtbo)", required=False)
    shell = ShellSpec(
        name=base.name,
        slots=slots,
        base_image=base_image.name if base_image else None,
        base_overlay=base_overlay.name if base_overlay else None,
        uid=uid,
        isolation_uio=isolation_uio,
    )
    accels: dict[str, DfxAccel] = {}
    for accel, by_slot in _accel_folders(base).items():
        read: dict[int, DfxSlot] = {}
        for slot, slot_folder in sorted(by_slot.items()):
            if slot >= num_slots:
                raise _fail(
                    slot_folder, "<folder>", f"slot {slot} but {shell_json.name} declares "
                    f"{num_slots} slots ({slot_key})"
                )  # fmt: skip
            read[slot] = _read_slot(slot_folder, slot)
        accels[accel] = DfxAccel(accel, read)
    return DfxPackage(base, base.name, shell_type, shell, accels, load_base)


def slot_overlay(partial: str | Path) -> Path | None:
    """The overlay of a slot whose partial is ``partial``: the one ``.dtbo`` in its folder
    (dfx-mgr's slot-folder convention), or None."""
    folder = Path(partial).parent
    dtbos = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".dtbo")
    return dtbos[0] if len(dtbos) == 1 else None


def in_slot_folder(partial: str | Path) -> bool:
    """Whether ``partial`` sits in a folder named as dfx-mgr names a slot's
    (``<accel>_slot<N>``); looks at the name only."""
    return _SLOT_DIR.match(Path(partial).parent.name) is not None


@dataclass(frozen=True, slots=True)
class SlotDesign:
    """What a dfx-mgr slot folder brings beside its partial (:func:`slot_design`): the
    accelerator and slot its folder ``<accel>_slot<N>`` names, its overlay's path and blob."""

    accel: str
    slot: int
    overlay_path: Path
    overlay: bytes


def slot_design(partial: str | Path, *, window: tuple[int, int] | None = None) -> SlotDesign | None:
    """The dfx-mgr slot design ``partial`` belongs to, read from its folder: None unless the
    file sits in a ``<accel>_slot<N>/`` folder holding one ``.dtbo`` (dfx-mgr's slot-folder
    convention, README.md "Directory Structure").

    The overlay is read (at most :data:`~juggle.fabric.linux.fdt.MAX_BLOB_BYTES`) and checked
    before anything uses it: it must parse, load this very partial (its ``firmware-name``
    names the file: Documentation/devicetree/bindings/fpga/fpga-region, "firmware-name"), as
    a partial (``partial-fpga-config``: without it the region would take a full image, the
    shell with it), and, with ``window`` = (base, size), declare devices only inside that
    window (a device elsewhere would hand user space someone else's registers). Raises
    :class:`~juggle.errors.DfxPackageError` naming the ``.dtbo`` and the field.
    """
    from juggle.errors import BitstreamFormatError
    from juggle.fabric.linux.fdt import MAX_BLOB_BYTES, read_overlay

    path = Path(partial)
    match = _SLOT_DIR.match(path.parent.name)
    if match is None or not path.is_file():
        return None
    folder = path.parent
    dtbos = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".dtbo")
    found = _one(folder, dtbos, "overlay (.dtbo)", required=False)
    if found is None:
        return None
    try:
        with open(found, "rb") as handle:
            blob = handle.read(MAX_BLOB_BYTES + 1)
    except OSError as exc:
        raise _fail(found, "<file>", f"cannot be read: {exc.strerror or exc}") from exc
    if len(blob) > MAX_BLOB_BYTES:
        raise _fail(found, "<file>", f"larger than {MAX_BLOB_BYTES} bytes")
    try:
        info = read_overlay(blob, source=str(found))
    except BitstreamFormatError as exc:
        raise _fail(found, "<blob>", str(exc)) from exc
    if info.firmware_name is None:
        raise _fail(found, "firmware-name", "missing: the overlay loads no partial")
    if Path(info.firmware_name).name != path.name:
        raise _fail(
            found,
            "firmware-name",
            f"{info.firmware_name!r} is not the slot's partial {path.name!r}",
        )
    if not info.partial:
        raise _fail(
            found, "partial-fpga-config", "missing: the overlay would load a full-device image"
        )
    if window is not None:
        base, size = window
        for node in info.uio_nodes:
            for address, length in node.regs:
                if not (base <= address and address + length <= base + size):
                    raise _fail(
                        found,
                        f"{node.node}/reg",
                        f"({address:#x}, {length:#x}) is outside the region's window "
                        f"{base:#x}+{size:#x}",
                    )
    return SlotDesign(match["accel"], int(match["slot"]), found, blob)


def retarget_overlay(blob: bytes, firmware_name: str, *, source: str = "<dtbo>") -> bytes:
    """``blob`` with its ``firmware-name`` set to ``firmware_name``: the name juggle (or
    dfx-mgrd, for juggle) stages the kernel-ready image under, so the kernel's firmware
    loader finds what was staged and not the package's own file. Everything else of the tree
    stays as it was (the reservation map, which overlays leave empty, is written empty).
    Raises :class:`~juggle.errors.BitstreamFormatError` for a malformed blob."""
    from juggle.fabric.linux.fdt import decode_fdt, encode_fdt

    if not re.fullmatch(r"[\x21-\x7e]{1,255}", firmware_name):
        raise ValueError(f"firmware name {firmware_name!r} is not printable ASCII")
    root = decode_fdt(blob, source=source)
    for fragment in root.children:
        overlay = fragment.child("__overlay__")
        if overlay is not None and "firmware-name" in overlay.props:
            overlay.props["firmware-name"] = firmware_name.encode("ascii") + b"\0"
    return encode_fdt(root)


def profile_regions(profile: Any) -> dict[int, str]:
    """Slot -> juggle region of a board profile: its ``[shell]`` slots when it has them,
    else its regions in order (slot N is the N-th region)."""
    shell = getattr(profile, "shell", None)
    if shell is not None:
        return {spec.slot: spec.region for spec in shell.spec().slots}
    return dict(enumerate(profile.region_names))
