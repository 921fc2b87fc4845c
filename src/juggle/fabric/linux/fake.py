"""A fake kernel: a sysfs tree in a directory that reacts to writes like Linux would.

Shipped with the library (as httpx ships ``MockTransport``) so the Linux backend can be run,
tested and demonstrated without a board. It lays out::

    sys/class/fpga_manager/fpga0/{name,state,flags,firmware}
    sys/class/fpga_bridge/br0/{name,state,enable}
    sys/class/uio/uio0/{name,maps/map0/{addr,size,offset}}
    dev/uio0                      a plain file standing in for the register map
    lib/firmware/                 the firmware search path

and reacts: naming a file in ``firmware`` loads it (state ``"operating"``), or fails with
``"firmware request error"`` (no such file), ``"write init error"`` (not a ``.bit`` for this
part) or ``"write error"`` (armed with :meth:`FakeKernel.fail_next_load`), raising ``OSError``
as the kernel's ``write(2)`` would; writing ``enable`` switches the bridge's ``state``.
Every write is logged in :attr:`FakeKernel.log` so a test can check the order of steps.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from pathlib import Path

from juggle.errors import BitstreamError
from juggle.fabric.bitstream import normalize_part, parse_bitstream
from juggle.fabric.linux.sysfs import HostSysfs

__all__ = ["FakeKernel"]


class FakeKernel(HostSysfs):
    """A sysfs fake (implements ``SysfsOps``) for one FPGA manager, bridges and UIO maps.

    ``bridges`` maps a bridge device (``"br0"``) to its name (the region it gates);
    ``uio`` maps a UIO device (``"uio0"``) to ``(name, size)``. ``writable_bridges=False``
    lays bridges out as mainline does (``state`` only, no ``enable``).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        part: str,
        manager: str = "fpga0",
        bridges: Mapping[str, str] | None = None,
        uio: Mapping[str, tuple[str, int]] | None = None,
        writable_bridges: bool = True,
    ) -> None:
        super().__init__(root)
        self.part = part
        self.manager = manager
        self.log: list[tuple[str, str]] = []
        self.loaded: list[str] = []
        self._fail_next: str | None = None
        self._build(bridges or {"br0": "prr0"}, uio or {"uio0": ("prr0", 0x1000)}, writable_bridges)

    def _build(
        self, bridges: Mapping[str, str], uio: Mapping[str, tuple[str, int]], writable: bool
    ) -> None:
        mgr = f"sys/class/fpga_manager/{self.manager}"
        for attribute, text in (
            ("name", "Fake FPGA Manager\n"),
            ("state", "operating\n"),
            ("flags", "0\n"),
            ("firmware", ""),
        ):
            self.write_file(f"{mgr}/{attribute}", text.encode())
        for device, name in bridges.items():
            self.write_file(f"sys/class/fpga_bridge/{device}/name", f"{name}\n".encode())
            self.write_file(f"sys/class/fpga_bridge/{device}/state", b"disabled\n")
            if writable:
                self.write_file(f"sys/class/fpga_bridge/{device}/enable", b"0\n")
        for index, (device, (name, size)) in enumerate(uio.items()):
            base = f"sys/class/uio/{device}"
            self.write_file(f"{base}/name", f"{name}\n".encode())
            self.write_file(
                f"{base}/maps/map0/addr", f"{0x43C00000 + index * 0x10000:#x}\n".encode()
            )
            self.write_file(f"{base}/maps/map0/size", f"{size:#010x}\n".encode())
            self.write_file(f"{base}/maps/map0/offset", b"0x0\n")
            self.write_file(f"dev/{device}", bytes(max(size, 4096)))
        (self.root / "lib/firmware").mkdir(parents=True, exist_ok=True)

    def fail_next_load(self, state: str = "write error") -> None:
        """Make the next firmware load fail, leaving the manager in ``state``."""
        self._fail_next = state

    def write(self, path: str, text: str) -> None:
        """Write an attribute and react like the kernel (may raise ``OSError``)."""
        path = path.lstrip("/")
        self.log.append((path, text))
        if path == f"sys/class/fpga_manager/{self.manager}/firmware":
            self._load(text.strip())
        elif path.startswith("sys/class/fpga_bridge/") and path.endswith("/enable"):
            if text.strip() not in ("0", "1"):
                raise OSError(errno.EINVAL, "enable takes 0 or 1", path)
            state = "enabled" if text.strip() == "1" else "disabled"
            super().write(path, text.strip() + "\n")
            super().write(path.removesuffix("enable") + "state", state + "\n")
        else:
            super().write(path, text)

    def _load(self, name: str) -> None:
        state_path = f"sys/class/fpga_manager/{self.manager}/state"
        firmware = self.root / "lib/firmware" / name
        if not firmware.is_file():
            super().write(state_path, "firmware request error\n")
            raise OSError(errno.ENOENT, "firmware not found", name)
        try:
            bitstream = parse_bitstream(firmware.read_bytes(), source=name)
        except BitstreamError as exc:
            super().write(state_path, "write init error\n")
            raise OSError(errno.EINVAL, str(exc), name) from exc
        if normalize_part(bitstream.part) != normalize_part(self.part):
            super().write(state_path, "write init error\n")
            raise OSError(errno.EINVAL, f"bitstream is for {bitstream.part}", name)
        if self._fail_next is not None:
            failed, self._fail_next = self._fail_next, None
            super().write(state_path, failed + "\n")
            raise OSError(errno.EIO, failed, name)
        super().write(state_path, "operating\n")
        self.loaded.append(bitstream.design)

    def writes_to(self, suffix: str) -> list[str]:
        """Values written to attributes whose path ends with ``suffix``, in order."""
        return [text for path, text in self.log if path.endswith(suffix)]

    def __repr__(self) -> str:
        return f"<FakeKernel root={str(self.root)!r}, {len(self.loaded)} loads>"
