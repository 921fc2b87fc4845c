"""File operations the Linux backend needs, behind one small interface.

Everything the backend touches (``sys/class/fpga_manager``, ``sys/class/fpga_bridge``,
``sys/class/uio``, ``lib/firmware``, ``dev/uioN``) is a path relative to a root, so a test can
point the backend at a directory and plug in a fake that reacts like the kernel
(:class:`juggle.fabric.linux.fake.FakeKernel`). :class:`HostSysfs` is the real thing.
"""

from __future__ import annotations

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

    def __repr__(self) -> str:
        return f"<HostSysfs root={str(self._root)!r}>"
