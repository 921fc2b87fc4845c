"""The daemon's state directory: installed modules and the tenant policy, across restarts.

Layout (created with mode 0700)::

    STATE/daemon.lock     held (flock) by the one daemon using this directory
    STATE/policy.toml     the tenant policy in force (copied from --policy)
    STATE/modules/<dir>   a copy of every module installed through the daemon
    STATE/modules.json    the install order: [{"path": "tdes", "name": "tdes", "started": true}]

Files are replaced atomically (write, fsync, rename), so a daemon killed at any moment finds
either the old or the new manifest.

Nothing found here is trusted on sight (see :mod:`juggle.daemon.safefs`): the directory and
``modules/`` must belong to the daemon's uid and not be writable by group or others, and every
file is opened with ``O_NOFOLLOW`` and judged by ``fstat`` of the opened descriptor (a regular
file of the daemon's uid, not group/other-writable; the lock file with one link only), else
:class:`~juggle.errors.UnsafePathError` naming the path, owner and mode. A symbolic
link planted as ``daemon.lock`` is refused, never followed or truncated; a ``modules.json``
planted by another uid is refused, never installed from. Once the lock is held, what a daemon
killed mid-install left behind (a copy under ``modules/`` that ``modules.json`` does not
record, a temporary file of an atomic write) is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from juggle.daemon.safefs import (
    check_private_dir,
    open_regular_nofollow,
    read_regular_file,
    replace_file,
)
from juggle.errors import DaemonError, UnsafePathError

__all__ = ["ModuleEntry", "StateDir"]

log = logging.getLogger("juggle.daemon")

MANIFEST = "modules.json"
POLICY = "policy.toml"
LOCK = "daemon.lock"
#: A manifest larger than this is refused (it lists module paths: a few hundred bytes each).
MAX_MANIFEST_BYTES = 4 << 20


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


def _holder_pid(fd: int) -> int | None:
    """The pid the daemon holding the lock file ``fd`` wrote into it (None: none readable)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class StateDir:
    """The state directory at ``root`` (created if missing)."""

    def __init__(self, root: str | Path) -> None:
        """Raises :class:`UnsafePathError` (naming the path, owner and mode) when the
        directory or its ``modules/`` is not the daemon's own: another owner, or writable by
        group or others (or ``root`` is a symbolic link another uid planted)."""
        given = Path(root)
        with contextlib.suppress(OSError):
            link = given.lstat()
            if stat.S_ISLNK(link.st_mode) and link.st_uid not in (0, os.geteuid()):
                raise UnsafePathError(
                    f"the state directory {str(given)!r} is a symbolic link of another user "
                    f"(owner uid {link.st_uid}): refused, not followed",
                    path=str(given),
                )
        self.root = given.resolve()
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise UnsafePathError(
                f"cannot create the state directory {str(self.root)!r}: {exc.strerror}",
                path=str(self.root),
            ) from None
        check_private_dir(self.root)
        self.modules = self.root / "modules"
        with contextlib.suppress(FileExistsError):
            self.modules.mkdir(mode=0o700)
        check_private_dir(self.modules)
        self._lock_fd: int | None = None

    @property
    def policy(self) -> Path:
        """Where the policy in force is kept."""
        return self.root / POLICY

    def lock(self) -> None:
        """Hold the directory for this process, then remove what a killed daemon left behind
        (:meth:`clean`). Raises :class:`DaemonError` when another daemon holds it (naming
        its pid), :class:`UnsafePathError` when the directory, the lock file (a symbolic
        link, not a regular file, another owner, another file's hard link) or the manifest
        is not the daemon's own; nothing is written then."""
        check_private_dir(self.root)
        check_private_dir(self.modules)
        fd = open_regular_nofollow(self.root / LOCK, os.O_RDWR | os.O_CREAT, single_link=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder_pid(fd)
            os.close(fd)
            raise DaemonError(
                f"state directory {str(self.root)!r} is in use by another daemon"
                + (f" (pid {holder})" if holder is not None else ""),
                path=str(self.root),
            ) from None
        try:
            self.clean()
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def clean(self) -> list[str]:
        """Remove the copies under ``modules/`` that the manifest does not record (a daemon
        killed during an install leaves one) and temporary files of interrupted atomic writes;
        their names. Call it holding the lock. Raises :class:`UnsafePathError` for a manifest
        that is not the daemon's own, or a recorded copy owned by another uid."""
        recorded = {e.path.split("/", 1)[0] for e in self.entries()}
        removed = []
        for child in sorted(self.modules.iterdir()):
            info = child.lstat()
            if child.name in recorded:
                if info.st_uid != os.geteuid():
                    raise UnsafePathError(
                        f"the module copy {str(child)!r} belongs to another user "
                        f"(owner uid {info.st_uid}, mode {info.st_mode & 0o7777:04o})",
                        path=str(child),
                    )
                continue
            self._remove(child)
            removed.append(f"modules/{child.name}")
        for child in sorted(self.root.iterdir()):
            if child.name.startswith((f".{MANIFEST}.", f".{POLICY}.")) and child.name.endswith(
                ".tmp"
            ):
                self._remove(child)
                removed.append(child.name)
        if removed:
            log.warning("state directory %s: removed crash leftovers %s", self.root, removed)
        return removed

    @staticmethod
    def _remove(path: Path) -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)  # fd-based: follows no symbolic link
        else:
            with contextlib.suppress(OSError):
                path.unlink()

    def unlock(self) -> None:
        """Let the directory go."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- modules ---------------------------------------------------------------------------

    def entries(self) -> list[ModuleEntry]:
        """The installed modules, in install order (a missing or malformed manifest reads as
        none). Raises :class:`UnsafePathError` for a manifest that is not the daemon's own (a
        symbolic link, not a regular file, another owner, group/other-writable, too large):
        a planted manifest never names what the daemon installs."""
        try:
            raw = read_regular_file(self.root / MANIFEST, MAX_MANIFEST_BYTES)
        except FileNotFoundError:
            return []
        try:
            data = json.loads(raw.decode("utf-8"))
            return [
                ModuleEntry(str(e["path"]), e.get("name"), bool(e.get("started", True)))
                for e in data
            ]
        except (ValueError, TypeError, KeyError, AttributeError):
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
            raise DaemonError(f"no module at {str(src)!r}", path=str(src))
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
