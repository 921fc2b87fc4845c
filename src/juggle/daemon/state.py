"""The daemon's state directory: installed modules and the tenant policy, across restarts.

Layout (created with mode 0700)::

    STATE/daemon.lock     held (flock) by the one daemon using this directory
    STATE/policy.toml     the tenant policy in force (copied from --policy)
    STATE/modules/<dir>   a copy of every module installed through the daemon
    STATE/modules.json    the install order: [{"path": "tdes", "name": "tdes", "started": true}]

Files are replaced atomically (write, fsync, rename), so a daemon killed at any moment finds
either the old or the new manifest.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from juggle.daemon.errors import DaemonError
from juggle.runtime.integrity import replace_file

__all__ = ["ModuleEntry", "StateDir"]

MANIFEST = "modules.json"
POLICY = "policy.toml"
LOCK = "daemon.lock"


@dataclass(frozen=True, slots=True)
class ModuleEntry:
    """One installed module: where its copy is (relative to ``modules/``), its name once
    installed, and whether it runs."""

    path: str
    name: str | None = None
    started: bool = True


def _atomic_write(path: Path, data: bytes) -> None:
    """State files are the daemon's alone: written atomically, mode 0600."""
    replace_file(path, data, 0o600)


class StateDir:
    """The state directory at ``root`` (created if missing)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.modules = self.root / "modules"
        self.modules.mkdir(mode=0o700, exist_ok=True)
        self._lock_fd: int | None = None

    @property
    def policy(self) -> Path:
        """Where the policy in force is kept."""
        return self.root / POLICY

    def lock(self) -> None:
        """Hold the directory for this process. Raises :class:`DaemonError` when another
        daemon holds it."""
        fd = os.open(self.root / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise DaemonError(
                f"state directory {str(self.root)!r} is in use by another daemon",
                str(self.root),
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        """Let the directory go."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- modules ---------------------------------------------------------------------------

    def entries(self) -> list[ModuleEntry]:
        """The installed modules, in install order (an unreadable manifest reads as none)."""
        try:
            data = json.loads((self.root / MANIFEST).read_text(encoding="utf-8"))
            return [
                ModuleEntry(str(e["path"]), e.get("name"), bool(e.get("started", True)))
                for e in data
            ]
        except (OSError, ValueError, TypeError, KeyError):
            return []

    def _save(self, entries: list[ModuleEntry]) -> None:
        data = json.dumps([asdict(e) for e in entries], indent=1).encode()
        _atomic_write(self.root / MANIFEST, data)

    def target(self, entry: ModuleEntry) -> Path:
        """What to install for ``entry``."""
        return self.modules / entry.path

    def copy_in(self, source: str | Path) -> ModuleEntry:
        """Copy the module at ``source`` (a folder, a ``.zip``, or a descriptor file whose
        folder is copied) under ``modules/``; its entry, not yet recorded. Raises
        :class:`DaemonError` when ``source`` is missing."""
        src = Path(source).resolve()
        if not src.exists():
            raise DaemonError(f"no module at {str(src)!r}", str(src))
        folder, inner = (src, None) if src.is_dir() else (src.parent, src.name)
        if src.is_file() and src.suffix == ".zip":
            folder, inner = src, None
        name = self._free_name(folder.name)
        dest = self.modules / name
        if folder.is_dir():
            shutil.copytree(folder, dest, symlinks=True)
        else:
            shutil.copy2(folder, dest)
        return ModuleEntry(f"{name}/{inner}" if inner else name)

    def _free_name(self, base: str) -> str:
        taken = {p.name for p in self.modules.iterdir()}
        name, n = base, 2
        while name in taken or name.startswith("."):
            name = f"{base.lstrip('.')}-{n}"
            n += 1
        return name

    def discard(self, entry: ModuleEntry) -> None:
        """Remove the copy of ``entry`` (not recorded, or just forgotten)."""
        top = self.modules / entry.path.split("/", 1)[0]
        if top.is_dir() and not top.is_symlink():
            shutil.rmtree(top, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                top.unlink()

    def record(self, entry: ModuleEntry) -> None:
        """Add ``entry`` (or replace the one at the same path)."""
        entries = [e for e in self.entries() if e.path != entry.path]
        self._save([*entries, entry])

    def forget(self, name: str) -> ModuleEntry | None:
        """Remove the entry of module ``name`` and its copy; the entry (None if none)."""
        entries = self.entries()
        gone = next((e for e in entries if e.name == name), None)
        if gone is not None:
            self._save([e for e in entries if e is not gone])
            self.discard(gone)
        return gone

    # -- policy ----------------------------------------------------------------------------

    def save_policy(self, text: str) -> None:
        """Keep ``text`` as the policy in force."""
        _atomic_write(self.policy, text.encode("utf-8"))
