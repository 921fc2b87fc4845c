"""A fake dfx-mgrd for tests: the daemon's socket protocol, with a record of what it was asked.

It speaks what :mod:`juggle.fabric.linux.dfxmgr` documents (``SOCK_SEQPACKET`` on a Unix
socket, one ``struct message`` per packet, replies ``"%d"``), as dfx-mgrd's
``process_dfx_req`` does (github.com/Xilinx/dfx-mgr, ``example/sys/linux/dfx-mgrd.c``):

- ``USER_LOAD``: data ``"<image>:<dtbo>:<region>"`` (split on blanks and colons, as
  ``strtok(tmp, " : ")``); a partial (``USER_LOAD_PARTIAL``) is refused with ``-1`` while no
  base design is active ("Load Full bitstream before loading bitstream to any partial
  reconfiguration region", ``user_load`` in ``src/daemon_helper.c``), and so is a region that
  holds a load already. The reply is a new handle (the smallest free one).
- ``UNLOAD_ACCEL``: data a handle; ``0``, or ``-1`` for a handle it does not hold.
- ``LIST_ACCEL_UIO``: ``slot`` a handle, data a name; the ``/dev/uioN`` of the first UIO
  device of that load whose name contains it (``strstr``), or an empty reply.
- ``LIST_PACKAGE``: a one-line table. Anything else: ``"Unsupported message id N"``.

With a :class:`~juggle.fabric.linux.fake.FakeKernel`, a load with an overlay is applied the
way dfx-mgrd applies one: the image is copied where the kernel's firmware loader looks
(``lib/firmware``, always on the search path: Documentation/driver-api/firmware/
fw_search_path.rst) under the name the overlay's ``firmware-name`` gives, the folder
``overlays/<region>`` is made under configfs and the blob written to its ``dtbo`` attribute
(drivers/of/configfs.c), and ``status`` is read back; the UIO nodes that appear belong to the
load and vanish with it (``rmdir``). Without a kernel the fake only records.

``FakeDfxMgrd`` runs its loop on a thread from construction; :meth:`FakeDfxMgrd.close` stops
it, closes every socket and removes the socket file.
"""

from __future__ import annotations

import os
import selectors
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from juggle.fabric.linux.dfxmgr import (
    LIST_ACCEL_UIO,
    LIST_PACKAGE,
    MAX_MESSAGE,
    UNLOAD_ACCEL,
    USER_LOAD,
    USER_LOAD_HAS_OVERLAY,
    USER_LOAD_PARTIAL,
    USER_UNLOAD,
    decode_message,
    encode_message,
)

if TYPE_CHECKING:
    from juggle.fabric.linux.fake import FakeKernel

__all__ = ["FakeDfxMgrd", "FakeLoad"]

_OVERLAYS = "sys/kernel/config/device-tree/overlays"
_UIO = "sys/class/uio"


@dataclass(slots=True)
class FakeLoad:
    """One ``USER_LOAD`` the fake took: its handle, flags, region (None without overlay),
    the files it named and their bytes as they were when it took them, and (with a kernel)
    the UIO nodes the overlay created."""

    handle: int
    flags: int
    region: str | None
    image_path: str
    overlay_path: str | None
    image: bytes
    overlay: bytes | None
    uio_nodes: tuple[str, ...] = ()
    firmware: str | None = None

    @property
    def partial(self) -> bool:
        """Whether it was a partial (``USER_LOAD_PARTIAL``)."""
        return bool(self.flags & USER_LOAD_PARTIAL)


@dataclass(slots=True)
class _State:
    held: dict[int, FakeLoad] = field(default_factory=dict)
    base_active: bool = True


class FakeDfxMgrd:
    """dfx-mgrd's socket at ``socket_path`` (see the module doc).

    ``base_active``: whether a base design is active when it starts (dfx-mgrd loads the
    ``default_accel`` at boot). ``loads`` and ``unloads`` record every load taken and every
    handle unloaded (with its region); ``requests`` every packet as ``(id, flags, slot,
    text)``. :meth:`fail_next` makes the next load reply with a given text.
    """

    def __init__(
        self,
        socket_path: str | Path,
        *,
        kernel: FakeKernel | None = None,
        base_active: bool = True,
    ) -> None:
        self.socket_path = str(socket_path)
        self.kernel = kernel
        self.loads: list[FakeLoad] = []
        self.unloads: list[tuple[int, str | None]] = []
        self.requests: list[tuple[int, int, int, str]] = []
        self._state = _State(base_active=base_active)
        self._fail_next: str | None = None
        self._lock = threading.Lock()
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)  # as dfx-mgrd does with a stale socket
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(self.socket_path)
        self._listener.listen(10)
        self._wake_r, self._wake_w = os.pipe()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="fake-dfx-mgrd", daemon=True)
        self._thread.start()

    # -- test controls --------------------------------------------------------------------

    def fail_next(self, reply: str = "-1") -> None:
        """Answer the next ``USER_LOAD`` with ``reply`` and take nothing."""
        with self._lock:
            self._fail_next = reply

    def held(self) -> dict[int, FakeLoad]:
        """Handle -> load of everything it holds now."""
        with self._lock:
            return dict(self._state.held)

    # -- the loop ---------------------------------------------------------------------------

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, "listen")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        clients: list[socket.socket] = []
        try:
            while True:
                for key, _ in selector.select():
                    if key.data == "wake":
                        return
                    if key.data == "listen":
                        conn, _addr = self._listener.accept()
                        clients.append(conn)
                        selector.register(conn, selectors.EVENT_READ, "client")
                        continue
                    conn = key.fileobj  # type: ignore[assignment]
                    assert isinstance(conn, socket.socket)
                    try:
                        packet = conn.recv(MAX_MESSAGE)
                    except OSError:
                        packet = b""
                    if not packet:
                        selector.unregister(conn)
                        clients.remove(conn)
                        conn.close()
                        continue
                    reply = self._answer(packet)
                    if reply is not None:
                        try:
                            conn.sendall(encode_message(reply[0], reply[1]))
                        except OSError:
                            pass
        finally:
            for conn in clients:
                conn.close()
            selector.close()

    def _answer(self, packet: bytes) -> tuple[int, str] | None:
        try:
            msg_id, flags, slot, text = decode_message(packet)
        except ValueError:
            return None
        with self._lock:
            self.requests.append((msg_id, flags, slot, text))
            if msg_id == USER_LOAD:
                return msg_id, self._user_load(flags, text)
            if msg_id == UNLOAD_ACCEL:
                return msg_id, self._unload(text)
            if msg_id == USER_UNLOAD:
                return msg_id, self._unload_region(text)
            if msg_id == LIST_ACCEL_UIO:
                return msg_id, self._uio(slot, text)
            if msg_id == LIST_PACKAGE:
                rows = [f"{h} {load.region or '-'} {Path(load.image_path).name}"
                        for h, load in sorted(self._state.held.items())]  # fmt: skip
                return msg_id, "\n".join(["handle region image", *rows]) + "\n"
            return msg_id, f"Unsupported message id {msg_id}"

    # -- requests (called with the lock held) -------------------------------------------------

    def _user_load(self, flags: int, text: str) -> str:
        if self._fail_next is not None:
            reply, self._fail_next = self._fail_next, None
            return reply
        words = [w for w in text.replace(":", " ").split(" ") if w]  # strtok(tmp, " : ")
        if not words:
            return "-1"
        image_path = words[0]
        overlay_path = words[1] if flags & USER_LOAD_HAS_OVERLAY and len(words) > 1 else None
        region = words[2] if flags & USER_LOAD_HAS_OVERLAY and len(words) > 2 else None
        if flags & USER_LOAD_HAS_OVERLAY and (overlay_path is None or region is None):
            return "-1"
        if flags & USER_LOAD_PARTIAL and not self._state.base_active:
            return "-1"
        if region is not None and any(h.region == region for h in self._state.held.values()):
            return "-1"
        try:
            image = Path(image_path).read_bytes()
            overlay = Path(overlay_path).read_bytes() if overlay_path else None
        except OSError:
            return "-1"
        handle = next(n for n in range(len(self._state.held) + 1) if n not in self._state.held)
        load = FakeLoad(handle, flags, region, image_path, overlay_path, image, overlay)
        if self.kernel is not None and overlay is not None and region is not None:
            state = self._apply(load)
            if state is not None:
                return f"-1:{state}"
        if not flags & USER_LOAD_PARTIAL:
            self._state.base_active = True
        self._state.held[handle] = load
        self.loads.append(load)
        return str(handle)

    def _apply(self, load: FakeLoad) -> str | None:
        """Apply ``load``'s overlay on the fake kernel; None when it took, else the status."""
        from juggle.fabric.linux.fdt import read_overlay

        kernel = self.kernel
        assert kernel is not None and load.overlay is not None and load.region is not None
        try:
            info = read_overlay(load.overlay)
        except Exception as exc:  # a blob the kernel cannot read is a refusal, as in configfs
            return f"bad overlay: {exc}"
        firmware = info.firmware_name or Path(load.image_path).name
        kernel.write_file(f"lib/firmware/{firmware}", load.image)
        before = set(kernel.listdir(_UIO))
        folder = f"{_OVERLAYS}/{load.region}"
        kernel.mkdir(folder)
        try:
            kernel.write_bytes(f"{folder}/dtbo", load.overlay)
        except OSError:
            pass  # configfs may report the store's failure only through status
        status = kernel.read(f"{folder}/status").strip()
        if status != "applied":
            kernel.rmdir(folder)
            kernel.remove(f"lib/firmware/{firmware}")
            return status or "unapplied"
        load.firmware = firmware
        load.uio_nodes = tuple(sorted(set(kernel.listdir(_UIO)) - before))
        return None

    def _unload(self, text: str) -> str:
        try:
            handle = int(text.strip())
        except ValueError:
            return "-1"
        load = self._state.held.pop(handle, None)
        if load is None:
            return "-1"
        self._remove(load)
        if not load.partial:
            self._state.base_active = False
        self.unloads.append((handle, load.region))
        return "0"

    def _unload_region(self, region: str) -> str:
        for handle, load in self._state.held.items():
            if load.region == region.strip():
                return self._unload(str(handle))
        return "-1"

    def _remove(self, load: FakeLoad) -> None:
        kernel = self.kernel
        if kernel is None or load.region is None or load.firmware is None:
            return
        kernel.rmdir(f"{_OVERLAYS}/{load.region}")
        kernel.remove(f"lib/firmware/{load.firmware}")

    def _uio(self, handle: int, name: str) -> str:
        load = self._state.held.get(handle)
        if load is None or self.kernel is None or not name:
            return ""
        for node in load.uio_nodes:
            try:
                uio_name = self.kernel.read(f"{_UIO}/{node}/name").strip()
            except OSError:
                continue
            if name in uio_name:
                return str(self.kernel.root / "dev" / node)
        return ""

    # -- shutdown ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the loop, close every socket and remove the socket file (idempotent)."""
        if self._closed:
            return
        self._closed = True
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=10)
        self._listener.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        try:
            os.unlink(self.socket_path)
        except FileNotFoundError:
            pass

    def __enter__(self) -> FakeDfxMgrd:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
