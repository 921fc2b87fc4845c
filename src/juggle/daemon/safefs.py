"""Filesystem primitives of a daemon that trusts nothing it finds on disk.

The daemon runs as root (or as the one user it serves for), and its state directory, policy
and token files decide what runs in it and who is admin. So a file is trusted only once the
*opened descriptor* says it may be (never a ``stat`` of the path, which another process can
change between the check and the use):

- :func:`check_private_dir`: a folder must be a real folder (not a symbolic link), owned by
  the daemon's uid, and not writable by its group or others;
- :func:`open_regular_nofollow`: a file is opened with ``O_NOFOLLOW`` (a symbolic link is
  refused, never followed) and ``O_NONBLOCK`` (a FIFO cannot hang the open), then ``fstat`` of
  the descriptor must show a regular file of an accepted owner, not writable by its group or
  others (and, for a file the daemon writes, with one link only: no hard link to a file
  elsewhere);
- :func:`read_regular_file`: the same, reading at most ``limit + 1`` bytes, so the bound holds
  whatever ``st_size`` says;
- :func:`replace_file`: a file the daemon writes is replaced atomically and durably through a
  temporary file it creates itself (``O_EXCL | O_NOFOLLOW``: never a file or link planted
  there), given its mode through the descriptor;
- :func:`bind_unix_socket`: the daemon's socket gets its mode and group before any path
  reaches it, so no ``chmod``/``chown`` ever follows a symbolic link swapped in at the socket
  path (see its docstring for the design).

Every refusal is an :class:`~juggle.errors.UnsafePathError` (or the class the caller
names) whose message names the path, its owner and its mode.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import socket
import stat
import struct
from collections.abc import Collection
from pathlib import Path

from juggle.errors import DaemonError, UnsafePathError

__all__ = [
    "bind_unix_socket",
    "check_private_dir",
    "describe",
    "open_regular_nofollow",
    "read_regular_file",
    "replace_file",
]

#: Permission bits a trusted file or folder must not have: write by group or others.
GROUP_OTHER_WRITE = 0o022


def describe(info: os.stat_result) -> str:
    """``owner uid N, mode 0MMM`` of ``info``."""
    return f"owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o}"


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _owners(owner: int | Collection[int] | None) -> frozenset[int]:
    if owner is None:
        return frozenset({os.geteuid()})
    if isinstance(owner, int):
        return frozenset({owner})
    return frozenset(owner)


def _owner_text(owners: frozenset[int]) -> str:
    return " or ".join(str(u) for u in sorted(owners))


def check_private_dir(
    path: str | Path,
    owner: int | Collection[int] | None = None,
    *,
    error: type[DaemonError] = UnsafePathError,
) -> os.stat_result:
    """Check that ``path`` is a folder (not a symbolic link to one) owned by ``owner`` (the
    effective uid by default; a uid or several) and not writable by its group or others; its
    stat. Raises ``error`` naming the path, owner and mode (or why it cannot be examined)."""
    owners = _owners(owner)
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise error(
            f"cannot examine the folder {str(path)!r}: {exc.strerror}", path=str(path)
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise error(
            f"{str(path)!r} is {_kind(info.st_mode)}, not a folder ({describe(info)})",
            path=str(path),
        )
    if info.st_uid not in owners:
        raise error(
            f"the folder {str(path)!r} belongs to another user ({describe(info)}); it must be "
            f"owned by uid {_owner_text(owners)}, the daemon's",
            path=str(path),
        )
    if info.st_mode & GROUP_OTHER_WRITE:
        raise error(
            f"the folder {str(path)!r} is writable by its group or others ({describe(info)}); "
            "make it 0700 (chmod 700)",
            path=str(path),
        )
    return info


def open_regular_nofollow(
    path: str | Path,
    flags: int = os.O_RDONLY,
    *,
    owner: int | Collection[int] | None = None,
    create_mode: int = 0o600,
    forbid: int = GROUP_OTHER_WRITE,
    single_link: bool = False,
    error: type[DaemonError] = UnsafePathError,
) -> int:
    """Open ``path`` with ``flags`` plus ``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`` (``O_CREAT``
    in ``flags`` creates it with ``create_mode``) and check the opened descriptor: a regular
    file owned by ``owner`` (the effective uid by default; a uid or several), without any of
    the ``forbid`` permission bits, and with one link when ``single_link``. The descriptor
    (blocking again). Raises ``FileNotFoundError`` when the file is missing (and not
    created), else ``error`` naming the path, owner and mode."""
    owners = _owners(owner)
    try:
        fd = os.open(
            path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, create_mode
        )
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(
                f"{str(path)!r} is a symbolic link: refused, not followed", path=str(path)
            ) from None
        raise error(f"cannot open {str(path)!r}: {exc.strerror}", path=str(path)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(
                f"{str(path)!r} is {_kind(info.st_mode)}, not a regular file ({describe(info)})",
                path=str(path),
            )
        if info.st_uid not in owners:
            raise error(
                f"{str(path)!r} belongs to another user ({describe(info)}); it must be owned "
                f"by uid {_owner_text(owners)}, the daemon's",
                path=str(path),
            )
        if info.st_mode & forbid:
            raise error(
                f"{str(path)!r} is open to its group or others ({describe(info)}); make it "
                f"{0o666 & ~forbid & ~0o111:04o} or less",
                path=str(path),
            )
        if single_link and info.st_nlink != 1:
            raise error(
                f"{str(path)!r} has {info.st_nlink} hard links ({describe(info)}): it may be "
                "another file's name; remove it",
                path=str(path),
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(
    path: str | Path,
    limit: int,
    owner: int | Collection[int] | None = None,
    *,
    forbid: int = GROUP_OTHER_WRITE,
    error: type[DaemonError] = UnsafePathError,
) -> bytes:
    """The bytes of regular file ``path`` (opened as :func:`open_regular_nofollow` does),
    at most ``limit`` of them: one byte more is an ``error`` naming the path and the bound.
    Raises ``FileNotFoundError`` when it is missing."""
    fd = open_regular_nofollow(path, owner=owner, forbid=forbid, error=error)
    try:
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            try:
                chunk = os.read(fd, min(left, 1 << 16))
            except OSError as exc:
                raise error(f"cannot read {str(path)!r}: {exc.strerror}", path=str(path)) from None
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise error(f"{str(path)!r} is over {limit} bytes", path=str(path))
    return data


def replace_file(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    The bytes go to a temporary file ``.NAME.RANDOM.tmp`` in the same folder, created with
    ``O_CREAT | O_EXCL | O_NOFOLLOW`` (so never a file or a symbolic link somebody put there),
    given ``mode`` through its descriptor, synced, then renamed over ``path`` (which replaces
    a link at ``path``, not its target); the folder is synced after. A daemon killed midway
    leaves the old file and at most a temporary one (:meth:`StateDir.clean
    <juggle.daemon.state.StateDir.clean>` removes those). Raises ``OSError``; no temporary
    file is left then."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:  # 48 random bits taken: draw again
            continue
        break
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):  # the rename is durable once the folder is synced
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


# -- the socket --------------------------------------------------------------------------------

#: Name of the socket inside the private folder it is bound in.
_BOUND_NAME = "sock"


def bind_unix_socket(
    path: str | Path, mode: int, group: int | None = None, *, backlog: int = 128
) -> socket.socket:
    """A listening Unix stream socket at ``path`` whose file has ``mode`` (and group
    ``group``) from the moment it can be reached there.

    The socket folder may belong to someone else (a tenant's ``$XDG_RUNTIME_DIR``), who can
    replace any name in it at any moment, e.g. by a symbolic link to ``/etc/shadow``; so the
    daemon never changes a file through that path. Instead:

    1. a fresh folder ``.juggle-bind-<random>`` is made in the socket folder (mode 0700, by
       ``mkdirat`` on a descriptor of the socket folder) and opened with ``O_NOFOLLOW``; its
       ``fstat`` must show the daemon's uid and no group/other access (a folder swapped in
       between is refused);
    2. the socket is bound in it through ``/proc/self/fd/<fd>/sock`` (the path walk ends in
       the opened folder, whatever its name now points to; where ``/proc`` is missing, through
       its path, then checked on the descriptor);
    3. its group and mode are set by ``fchownat``/``fchmodat`` relative to that descriptor:
       nobody else can create or replace a name in a 0700 folder of the daemon, so these reach
       the socket and nothing else; then it listens;
    4. ``renameat`` moves it to ``path``, atomically replacing whatever is there (a planted
       symbolic link is replaced, its target untouched), and the private folder is removed.

    Raises :class:`DaemonError` naming the path when something other than a stale socket is
    at ``path`` (a file, a symbolic link), when a daemon listens there already, or when the
    socket cannot be made.
    """
    path = Path(path)
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    _clear_stale(path)
    pfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        private, dfd = _private_folder(pfd, path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bound = False
        try:
            via_proc = f"/proc/self/fd/{dfd}"
            if os.path.isdir(via_proc):
                sock.bind(f"{via_proc}/{_BOUND_NAME}")
            else:
                sock.bind(str(path.parent / private / _BOUND_NAME))
            bound = True
            info = os.stat(_BOUND_NAME, dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISSOCK(info.st_mode):
                raise DaemonError(
                    f"the socket folder of {str(path)!r} changed while the socket was bound",
                    path=str(path),
                )
            if group is not None:
                os.chown(_BOUND_NAME, -1, group, dir_fd=dfd, follow_symlinks=False)
            os.chmod(_BOUND_NAME, mode, dir_fd=dfd)
            sock.listen(backlog)
            os.rename(_BOUND_NAME, path.name, src_dir_fd=dfd, dst_dir_fd=pfd)
        except BaseException as exc:
            sock.close()
            if bound:
                with contextlib.suppress(OSError):
                    os.unlink(_BOUND_NAME, dir_fd=dfd)
            _remove_private(pfd, private, dfd)
            if isinstance(exc, OSError):
                raise DaemonError(
                    f"cannot listen on {str(path)!r}: {exc.strerror or exc}", path=str(path)
                ) from None
            raise
        _remove_private(pfd, private, dfd)
        return sock
    finally:
        os.close(pfd)


def _clear_stale(path: Path) -> None:
    """Remove a socket at ``path`` nobody listens on (left by a daemon that died)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise DaemonError(
            f"{str(path)!r} exists and is not a socket ({_kind(info.st_mode)}, "
            f"{describe(info)}): refused, left as it is",
            path=str(path),
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # unlink never follows a symbolic link
    else:
        pid = _listener_pid(probe)
        raise DaemonError(
            f"a daemon already listens on {str(path)!r}"
            + (f" (pid {pid})" if pid is not None else ""),
            path=str(path),
        )
    finally:
        probe.close()


def _listener_pid(probe: socket.socket) -> int | None:
    """The pid of the process listening at the other end of the connected Unix socket
    ``probe`` (``SO_PEERCRED``; None when the kernel does not say)."""
    try:
        raw = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid = struct.unpack("3i", raw)[0]
    return pid if pid > 0 else None


def _private_folder(pfd: int, path: Path) -> tuple[str, int]:
    """A new 0700 folder of the daemon in the folder ``pfd``: its name and an open
    descriptor."""
    for _ in range(16):
        name = f".juggle-bind-{secrets.token_hex(6)}"
        try:
            os.mkdir(name, 0o700, dir_fd=pfd)
        except FileExistsError:
            continue
        except OSError as exc:
            raise DaemonError(
                f"cannot bind the socket {str(path)!r}: its folder refuses a new entry "
                f"({exc.strerror})",
                path=str(path),
            ) from None
        break
    else:
        raise DaemonError(f"cannot make a private folder next to {str(path)!r}", path=str(path))
    try:
        dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
    except OSError as exc:
        raise DaemonError(
            f"the private folder next to {str(path)!r} was replaced ({exc.strerror})",
            path=str(path),
        ) from None
    info = os.fstat(dfd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        os.close(dfd)
        raise DaemonError(
            f"the private folder next to {str(path)!r} was replaced by another ({describe(info)})",
            path=str(path),
        )
    return name, dfd


def _remove_private(pfd: int, name: str, dfd: int) -> None:
    """Remove the private folder ``name`` of ``pfd`` if it is still the one ``dfd`` holds."""
    try:
        mine = os.fstat(dfd)
        now = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
            os.rmdir(name, dir_fd=pfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
