"""File operations the Linux backend needs, behind one small interface.

Everything the backend touches (``sys/class/fpga_manager``, ``sys/class/fpga_bridge``,
``sys/class/uio``, ``sys/kernel/config/device-tree/overlays``, ``lib/firmware``, ``dev/uioN``)
is a path relative to a root, so a test can point the backend at a directory and plug in a fake
that reacts like the kernel (:class:`juggle.fabric.linux.fake.FakeKernel`). :class:`HostSysfs`
is the real thing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

__all__ = ["HostSysfs", "SysfsOps"]


class SysfsOps(Protocol):
    """Reads and writes of attribute files and plain files, relative to ``root``."""

    @property
    def root(self) -> Path:
        """The directory paths are relative to (``/`` on a board)."""
        ...

    def read(self, path: str) -> str:
        """The text of an attribute file (OSError when absent)."""
        ...

    def write(self, path: str, text: str) -> None:
        """Write ``text`` to an attribute file, as ``echo text > path`` (OSError on refusal)."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""
        ...

    def listdir(self, path: str) -> list[str]:
        """Entry names in a directory, sorted (empty when it does not exist)."""
        ...

    def write_file(self, path: str, data: bytes, *, append: bool = False) -> None:
        """Create (or extend) a plain file, creating its directory."""
        ...

    def remove(self, path: str) -> None:
        """Delete a plain file if it exists."""
        ...

    def mkdir(self, path: str) -> None:
        """Create one directory (configfs: a new item, e.g. an overlay); OSError if it exists."""
        ...

    def rmdir(self, path: str) -> None:
        """Remove one directory (configfs: drop the item, e.g. remove an overlay)."""
        ...

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write binary ``data`` to an existing attribute in one open/write/close (a configfs
        binary attribute such as an overlay's ``dtbo`` takes effect when the file is closed)."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """The bytes of a file or binary attribute (OSError when absent)."""
        ...


class HostSysfs:
    """The host's real files under ``root``."""

    def __init__(self, root: str | Path = "/") -> None:
        self._root = Path(root)

    @property
    def root(self) -> Path:
        """The directory paths are relative to."""
        return self._root

    def _path(self, path: str) -> Path:
        return self._root / path.lstrip("/")

    def read(self, path: str) -> str:
        """The text of an attribute file."""
        return self._path(path).read_text(encoding="ascii", errors="replace")

    def write(self, path: str, text: str) -> None:
        """One ``write(2)`` of ``text`` (sysfs takes an attribute in one write)."""
        with open(self._path(path), "w", encoding="ascii") as handle:
            handle.write(text)

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""
        return self._path(path).exists()

    def listdir(self, path: str) -> list[str]:
        """Entry names in a directory, sorted."""
        directory = self._path(path)
        return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []

    def write_file(self, path: str, data: bytes, *, append: bool = False) -> None:
        """Create or extend a plain file."""
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "ab" if append else "wb") as handle:
            handle.write(data)

    def remove(self, path: str) -> None:
        """Delete a plain file if it exists."""
        self._path(path).unlink(missing_ok=True)

    def mkdir(self, path: str) -> None:
        """``mkdir(2)`` of one directory (its parent must exist, as in configfs)."""
        os.mkdir(self._path(path))

    def rmdir(self, path: str) -> None:
        """``rmdir(2)``: configfs removes an item's directory with its attribute files."""
        os.rmdir(self._path(path))

    def write_bytes(self, path: str, data: bytes) -> None:
        """Binary ``data`` in one open/write/close; the file must exist (no ``O_CREAT``)."""
        fd = os.open(self._path(path), os.O_WRONLY | os.O_TRUNC)
        with open(fd, "wb") as handle:
            handle.write(data)

    def read_bytes(self, path: str) -> bytes:
        """The bytes of ``path``."""
        with open(self._path(path), "rb") as handle:
            return handle.read()

    def __repr__(self) -> str:
        return f"<HostSysfs root={str(self._root)!r}>"
