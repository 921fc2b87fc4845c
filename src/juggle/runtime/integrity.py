"""Module integrity: sha256 pins, ``lock``, ed25519 signatures and path confinement.

A module's ``juggle.toml`` may carry a top-level ``[pins]`` table mapping module-relative
POSIX paths to the lowercase hex sha256 of each file. :func:`lock_module` writes that table;
:func:`verify_pins` and :func:`verify_file` check files against it. Because the pins live in
``juggle.toml``, an ed25519 signature over the exact bytes of ``juggle.toml``
(:data:`SIGNATURE_FILE`, base64 on one line, beside the descriptor) covers every pinned file:
:func:`sign_module` writes it, :func:`verify_signature` checks it against trusted keys.

Paths are confined to the module: :func:`inside` refuses absolute paths, ``..`` and symlinks
(of the file or of any parent folder) that resolve outside the module root.

Every function raises only :class:`~juggle.errors.JuggleError` subclasses, naming the
offending path or value, with the original exception chained:

* :class:`~juggle.errors.IntegrityError` - a file does not match its pin, cannot be read,
  is not a regular file, is not pinned, or a path leaves the module;
* :class:`~juggle.errors.SignatureError` - unsigned, badly signed, or signed by no trusted key;
  signing refused (a module file is unpinned);
* :class:`~juggle.errors.ModuleError` - not a folder, no ``juggle.toml`` (co-module XML), or
  a ``juggle.toml`` whose pins cannot be rewritten;
* :class:`~juggle.errors.ConfigurationError` - a key file or key value is unusable;
* :class:`~juggle.errors.InputLimitError` - a file or folder is over a :class:`Limits` bound.

The install path calls, in this order: :func:`verify_signature` on the raw descriptor bytes
(when trusted keys are configured), then parses the descriptor, then :func:`unpinned` (no
file may escape the pins when signatures are required), then :func:`verify_pins` before any
module code is imported, and :func:`read_verified` (or :func:`verify_file`) right before a
bitstream is programmed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import os
import re
import stat
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from juggle.errors import (
    ConfigurationError,
    InputLimitError,
    IntegrityError,
    JuggleError,
    ModuleError,
    SignatureError,
)
from juggle.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "DESCRIPTOR_FILE",
    "SIGNATURE_FILE",
    "fingerprint",
    "folder_reader",
    "generate_key",
    "inside",
    "load_public_keys",
    "lock_module",
    "module_files",
    "read_verified",
    "sha256_of",
    "sign_module",
    "unpinned",
    "verify_file",
    "verify_pins",
    "verify_signature",
]

#: the descriptor that carries pins and is signed
DESCRIPTOR_FILE = "juggle.toml"
#: the signature beside the descriptor: base64 of the raw 64-byte ed25519 signature, one line
SIGNATURE_FILE = "juggle.toml.sig"

_CHUNK = 1 << 20
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_SIGNATURE_BYTES = 64
_RAW_KEY_BYTES = 32
#: a key file or signature file is tiny; anything larger is not one
_MAX_KEY_FILE_BYTES = 64 * 1024
_MAX_SIGNATURE_FILE_BYTES = 1024


# -- paths -------------------------------------------------------------------------------------


def _normalize(relpath: object) -> str:
    """The canonical POSIX form of a module-relative path, or :class:`IntegrityError`."""
    if not isinstance(relpath, str):
        raise IntegrityError(f"module path must be a str, got {type(relpath).__name__} {relpath!r}")
    if "\x00" in relpath or "\\" in relpath:
        raise IntegrityError(
            f"module path {relpath!r} contains a NUL or backslash; use POSIX '/' paths",
            path=relpath,
        )
    pure = PurePosixPath(relpath)
    if pure.is_absolute():
        raise IntegrityError(
            f"module path {relpath!r} is absolute; it must be relative to the module", path=relpath
        )
    if ".." in pure.parts:
        raise IntegrityError(f"module path {relpath!r} leaves the module ('..')", path=relpath)
    if not pure.parts:
        raise IntegrityError(f"module path {relpath!r} names no file", path=relpath)
    return "/".join(pure.parts)


def _resolve(path: Path, what: str) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop (Python 3.11)
        raise IntegrityError(f"cannot resolve {what} {str(path)!r}: {exc}", path=str(path)) from exc


def inside(root: Path, relpath: str) -> Path:
    """The resolved file for the module-relative ``relpath`` of the module folder ``root``.

    Refuses (:class:`IntegrityError` naming the path and where it points) absolute paths,
    ``..``, and a symlink - the file itself or any parent folder - that resolves outside
    ``root``. Symlinks that stay inside the module are followed. The file need not exist.
    """
    rel = _normalize(relpath)
    real_root = _resolve(Path(root), "module root")
    current = real_root
    for part in rel.split("/"):
        current = current / part
        if current.is_symlink():
            target = _resolve(current, "module path")
            if not target.is_relative_to(real_root):
                link = current.relative_to(real_root).as_posix()
                raise IntegrityError(
                    f"module path {relpath!r} leaves the module {str(root)!r}: "
                    f"{link!r} is a symlink to {str(target)!r}",
                    path=relpath,
                )
    resolved = _resolve(real_root / rel, "module path")
    if not resolved.is_relative_to(real_root):  # defensive: the walk above catches this
        raise IntegrityError(
            f"module path {relpath!r} leaves the module {str(root)!r}: "
            f"it resolves to {str(resolved)!r}",
            path=relpath,
        )
    return resolved


def module_files(root: Path, *, limits: Limits = DEFAULT_LIMITS) -> list[str]:
    """Every regular file of the module folder ``root``, as sorted POSIX relative paths.

    Skips ``__pycache__`` folders, ``*.pyc`` files and the :data:`SIGNATURE_FILE` at the
    root (the descriptor itself is listed). Symlinks inside the module are followed and listed
    under their own path (a dangling one pointing inside is no file and is skipped); a symlink
    leaving the module, a symlink loop, or a special file (FIFO, socket, device) is an
    :class:`IntegrityError`. More than ``limits.max_members`` entries (files and folders
    visited) or folders nested deeper than ``limits.max_depth`` is an
    :class:`~juggle.errors.InputLimitError`.
    """
    root = Path(root)
    real_root = _resolve(root, "module root")
    if not real_root.is_dir():
        raise ModuleError(f"module {str(root)!r} is not a folder", path=str(root))
    found: list[str] = []
    visited = 0

    def entry_stat(entry: os.DirEntry[str], target: Path, rel: str) -> os.stat_result:
        try:
            return target.stat() if entry.is_symlink() else entry.stat(follow_symlinks=False)
        except OSError as exc:
            raise IntegrityError(
                f"cannot stat module path {rel!r} of {str(root)!r}: {exc}", path=rel
            ) from exc

    def walk(folder: Path, prefix: str, ancestors: frozenset[Path]) -> None:
        nonlocal visited
        if len(ancestors) > limits.max_depth:
            raise InputLimitError(
                f"module {str(root)!r}: folder {prefix!r} is nested deeper than "
                f"{limits.max_depth} (Limits.max_depth)",
                path=str(root),
                value=prefix,
            )
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise IntegrityError(
                f"cannot list folder {prefix or '.'!r} of module {str(root)!r}: {exc}",
                path=prefix or ".",
            ) from exc
        for entry in entries:
            rel = prefix + entry.name
            if entry.name == "__pycache__":
                continue
            visited += 1
            if visited > limits.max_members:
                raise InputLimitError(
                    f"module {str(root)!r} has more than {limits.max_members:,} files and "
                    f"folders (Limits.max_members)",
                    path=str(root),
                )
            path = Path(entry.path)
            target = path
            if entry.is_symlink():
                target = _resolve(path, "module path")
                if not target.is_relative_to(real_root):
                    raise IntegrityError(
                        f"module path {rel!r} of {str(root)!r} is a symlink to "
                        f"{str(target)!r}, outside the module",
                        path=rel,
                    )
                if not target.exists():
                    continue  # dangling inside the module (an editor lock): not a file
            info = entry_stat(entry, target, rel)
            if stat.S_ISDIR(info.st_mode):
                if target in ancestors:
                    raise IntegrityError(
                        f"module path {rel!r} of {str(root)!r} is a symlink loop "
                        f"(back to {str(target)!r})",
                        path=rel,
                    )
                walk(path, rel + "/", ancestors | {target})
                continue
            if not stat.S_ISREG(info.st_mode):
                raise IntegrityError(
                    f"module path {rel!r} of {str(root)!r} is not a regular file or folder",
                    path=rel,
                )
            if rel.endswith(".pyc") or rel == SIGNATURE_FILE:
                continue
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise IntegrityError(
                    f"module file name {rel!r} of {str(root)!r} is not valid UTF-8", path=rel
                ) from exc
            found.append(_normalize(rel))  # a name with a backslash cannot be pinned

    walk(real_root, "", frozenset({real_root}))
    return sorted(found)


def unpinned(pins: Mapping[str, str], files: Iterable[str]) -> list[str]:
    """The files of ``files`` (module-relative) that ``pins`` does not cover, sorted.

    The descriptor and the signature file are never expected in the pins; names ending in
    ``/`` (archive folder entries) are skipped. ``files`` is :func:`module_files` for a
    folder, or the archive's member names with the module's top folder stripped for a
    ``.zip`` - there keep ``*.pyc`` members: zipimport prefers them over sources.
    """
    pinned = {_normalize(p) for p in pins}
    exempt = {DESCRIPTOR_FILE, SIGNATURE_FILE}
    out = {_normalize(f) for f in files if not f.endswith("/")} - pinned - exempt
    return sorted(out)


# -- digests -----------------------------------------------------------------------------------


_Limit = tuple[int, str] | None
"""A size bound and its name for messages (``"Limits.max_descriptor_bytes"``)."""


def _check_limit(path: Path, size: int, limit: _Limit) -> None:
    if limit is not None and size > limit[0]:
        raise InputLimitError(
            f"{str(path)!r} is {size:,} bytes, over the limit of {limit[0]:,} ({limit[1]})",
            path=str(path),
        )


def _open_regular(path: Path, limit: _Limit) -> BinaryIO:
    """Open ``path`` for reading, refusing non-regular files (never blocks on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise IntegrityError(f"cannot read {str(path)!r}: {exc}", path=str(path)) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise IntegrityError(f"{str(path)!r} is not a regular file", path=str(path))
        _check_limit(path, info.st_size, limit)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _stream(path: Path, limit: _Limit, sink: Callable[[bytes], object]) -> None:
    """Feed the regular file ``path`` to ``sink`` in chunks, bounded by ``limit``."""
    total = 0
    with _open_regular(path, limit) as stream:
        try:
            while chunk := stream.read(_CHUNK):
                total += len(chunk)
                _check_limit(path, total, limit)  # the file may grow while it is read
                sink(chunk)
        except OSError as exc:
            raise IntegrityError(f"cannot read {str(path)!r}: {exc}", path=str(path)) from exc


def _read_all(path: Path, limit: _Limit) -> bytes:
    parts: list[bytes] = []
    _stream(path, limit, parts.append)
    return b"".join(parts)


def _bound(max_bytes: int | None) -> _Limit:
    return None if max_bytes is None else (max_bytes, "max_bytes")


def sha256_of(
    source: Path | bytes | bytearray | memoryview | Callable[[], bytes],
    *,
    max_bytes: int | None = None,
) -> str:
    """The lowercase hex sha256 of a file, of bytes, or of what a callable returns.

    A :class:`~pathlib.Path` is streamed in 1 MiB chunks (never whole in memory); it must be
    a regular file. ``max_bytes`` bounds a path's size (:class:`InputLimitError`). A callable's
    own exceptions become :class:`IntegrityError` (JuggleErrors pass through).
    """
    digest = hashlib.sha256()
    if isinstance(source, Path):
        _stream(source, _bound(max_bytes), digest.update)
        return digest.hexdigest()
    if isinstance(source, bytes | bytearray | memoryview):
        digest.update(source)
        return digest.hexdigest()
    if callable(source):
        try:
            data = source()
        except JuggleError:
            raise
        except Exception as exc:
            raise IntegrityError(f"cannot read {source!r}: {exc}") from exc
        if not isinstance(data, bytes | bytearray | memoryview):
            raise IntegrityError(f"{source!r} returned {type(data).__name__}, not bytes")
        digest.update(data)
        return digest.hexdigest()
    raise IntegrityError(
        f"sha256_of needs a Path, bytes or a callable, got {type(source).__name__}"
    )


def _check_pin(name: str, expected: object) -> str:
    if not isinstance(expected, str) or not _SHA256_HEX.fullmatch(expected):
        raise IntegrityError(
            f"pin of {name!r} is not a lowercase hex sha256 (64 characters): {expected!r}",
            path=name,
        )
    return expected


def _mismatch(what: str, path: str, expected: str, actual: str) -> IntegrityError:
    return IntegrityError(
        f"{what} does not match its pin: expected sha256 {expected}, got {actual}", path=path
    )


def verify_pins(
    pins: Mapping[str, str], read: Callable[[str], bytes], *, origin: str = "module"
) -> None:
    """Check every pinned file: ``read(relpath)`` must return bytes whose sha256 is the pin.

    ``read`` maps a module-relative path to the file's bytes (``ModuleSource.read_bytes`` for
    a ``.zip``; :func:`folder_reader` for a folder, which also confines symlinks). Files are
    checked in sorted order; the first failure raises :class:`IntegrityError` naming
    ``origin``, the file, the expected and the actual digest. A missing or unreadable pinned
    file, a bad path (absolute, ``..``) or a malformed pin is an :class:`IntegrityError` too.
    Files without a pin are not looked at: see :func:`unpinned`.
    """
    for relpath in sorted(pins):
        expected = _check_pin(relpath, pins[relpath])
        rel = _normalize(relpath)
        try:
            data = read(rel)
        except JuggleError as exc:
            if not isinstance(exc, IntegrityError):
                raise
            raise IntegrityError(
                f"pinned file {rel!r} of {origin} cannot be read: {exc}", path=rel
            ) from exc
        except Exception as exc:
            raise IntegrityError(
                f"pinned file {rel!r} of {origin} cannot be read: {exc}", path=rel
            ) from exc
        actual = sha256_of(data)
        if actual != expected:
            raise _mismatch(f"file {rel!r} of {origin}", rel, expected, actual)


def verify_file(path: Path, expected: str, *, max_bytes: int | None = None) -> None:
    """Stream the file ``path`` and check its sha256 against ``expected``.

    For a folder module's file just before it is used (a bitstream before programming); get
    ``path`` from :func:`inside`. :class:`IntegrityError` names the path and both digests.
    Prefer :func:`read_verified` when the bytes are read afterwards anyway: it checks the very
    bytes it returns, so the file cannot change between the check and the use.
    """
    expected = _check_pin(str(path), expected)
    actual = sha256_of(Path(path), max_bytes=max_bytes)
    if actual != expected:
        raise _mismatch(f"file {str(path)!r}", str(path), expected, actual)


def read_verified(path: Path, expected: str, *, max_bytes: int | None = None) -> bytes:
    """The bytes of ``path``, read once and checked against the pin ``expected``.

    Like :func:`verify_file`, but returns what it checked (no window between check and use).
    ``max_bytes`` bounds the size (:class:`InputLimitError`), e.g.
    ``limits.max_bitstream_bytes``.
    """
    expected = _check_pin(str(path), expected)
    path = Path(path)
    data = _read_all(path, _bound(max_bytes))
    actual = sha256_of(data)
    if actual != expected:
        raise _mismatch(f"file {str(path)!r}", str(path), expected, actual)
    return data


def folder_reader(root: Path, *, max_bytes: int | None = None) -> Callable[[str], bytes]:
    """A ``read`` for :func:`verify_pins` over the module folder ``root``: each path goes
    through :func:`inside` (no escape by ``..`` or symlink) and must be a regular file."""
    root = Path(root)

    def read(relpath: str) -> bytes:
        return _read_all(inside(root, relpath), _bound(max_bytes))

    return read


# -- lock: rewrite the [pins] table -------------------------------------------------------------


def _descriptor_of(folder: Path, action: str) -> Path:
    """The ``juggle.toml`` of the module folder ``folder`` (confined), or a ModuleError."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModuleError(f"{action}: {str(folder)!r} is not a module folder", path=str(folder))
    if not (folder / DESCRIPTOR_FILE).exists():
        xml = folder / "comodule.xml"
        if xml.exists():
            raise ModuleError(
                f"{action} supports juggle.toml modules only; {str(xml)!r} is a co-module "
                f"XML descriptor (convert it to {DESCRIPTOR_FILE})",
                path=str(xml),
            )
        raise ModuleError(
            f"{action}: no {DESCRIPTOR_FILE} in {str(folder)!r}", path=str(folder / DESCRIPTOR_FILE)
        )
    return inside(folder, DESCRIPTOR_FILE)


def _read_descriptor(path: Path, limits: Limits) -> bytes:
    return _read_all(path, (limits.max_descriptor_bytes, "Limits.max_descriptor_bytes"))


def _toml_data(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModuleError(f"{origin} is not valid TOML: {exc}", path=origin) from exc


def _decode(data: bytes, origin: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModuleError(f"{origin} is not UTF-8: {exc}", path=origin) from exc


def _scan_line(line: str, state: list[Any]) -> None:
    """Advance the lexer ``state`` = [open multi-line delimiter or None, bracket depth]."""
    i, n = 0, len(line)
    while i < n:
        delim = state[0]
        if delim is not None:  # inside a multi-line string
            c = line[i]
            if delim == '"""' and c == "\\":
                i += 2
                continue
            if c == delim[0]:
                run = len(line[i:]) - len(line[i:].lstrip(c))
                if run >= 3:
                    state[0] = None
                i += run
                continue
            i += 1
            continue
        c = line[i]
        if c == "#":
            return
        if c in "\"'":
            if line.startswith(c * 3, i):
                state[0] = c * 3
                i += 3
                continue
            i += 1
            while i < n and line[i] != c:
                i += 2 if (c == '"' and line[i] == "\\") else 1
            i += 1
            continue
        if c in "[{":
            state[1] += 1
        elif c in "]}":
            state[1] -= 1
        i += 1


def _first_header_key(line: str, origin: str) -> str:
    try:
        parsed = tomllib.loads(line.strip())
    except tomllib.TOMLDecodeError as exc:
        raise ModuleError(
            f"{origin}: cannot read the table header {line.strip()!r}", path=origin
        ) from exc
    return next(iter(parsed), "")


def _without_pins(text: str, origin: str) -> str:
    """``text`` without its ``[pins]`` table(s) (header through the last key line; comments
    and blank lines that lead into the next table stay with it)."""
    lines = text.splitlines(keepends=True)
    state: list[Any] = [None, 0]
    headers: list[tuple[int, str]] = []
    trivia: list[bool] = []
    for index, line in enumerate(lines):
        top = state[0] is None and state[1] == 0
        stripped = line.strip()
        trivia.append(top and (not stripped or stripped.startswith("#")))
        if top and stripped.startswith("["):
            headers.append((index, _first_header_key(line, origin)))
            continue
        _scan_line(line, state)
    drop: set[int] = set()
    bounds = [*headers, (len(lines), "")]
    for (start, key), (end, _) in itertools.pairwise(bounds):
        if key != "pins":
            continue
        last = max(i for i in range(start, end) if not trivia[i])
        drop.update(range(start, last + 1))
    return "".join(line for i, line in enumerate(lines) if i not in drop)


def _toml_string(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _with_pins(text: str, pins: Mapping[str, str], origin: str) -> str:
    newline = "\r\n" if "\n" in text and text.split("\n", 1)[0].endswith("\r") else "\n"
    base = _without_pins(text, origin)
    if base and not base.endswith("\n"):
        base += newline
    if base and not base.endswith(newline * 2):
        base += newline
    body = "".join(f"{_toml_string(k)} = {_toml_string(v)}{newline}" for k, v in pins.items())
    return f"{base}[pins]{newline}{body}"


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` with ``data`` atomically and durably (a synced temp file in the same
    folder, given ``mode``, then renamed over it). Raises ``OSError``; no temp file is left."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """:func:`replace_file` keeping the file's mode (0644 for a new one); a failure is a
    :class:`~juggle.errors.ModuleError` naming the path."""
    try:
        if mode is None:
            mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
        replace_file(path, data, mode)
    except OSError as exc:
        raise ModuleError(f"cannot write {str(path)!r}: {exc}", path=str(path)) from exc


def lock_module(folder: Path, *, limits: Limits = DEFAULT_LIMITS) -> dict[str, str]:
    """Pin every file of the module folder ``folder`` and rewrite its ``juggle.toml``.

    Pins every file of :func:`module_files` except ``juggle.toml`` and the signature file,
    removes any existing top-level ``[pins]`` table and appends the new one at the end; every
    other byte of ``juggle.toml`` stays (the result is checked to parse with the same other
    keys before it replaces the file). Returns the pins (sorted by path). A folder described by
    a co-module XML, or whose pins are not a ``[pins]`` table (inline or dotted keys), is a
    :class:`ModuleError`. Any existing signature is now stale: sign again.
    """
    folder = Path(folder)
    descriptor = _descriptor_of(folder, "lock")
    origin = str(folder / DESCRIPTOR_FILE)
    text = _decode(_read_descriptor(descriptor, limits), origin)
    before = _toml_data(text, origin)
    pins: dict[str, str] = {}
    for rel in module_files(folder, limits=limits):
        if rel in (DESCRIPTOR_FILE, SIGNATURE_FILE):
            continue
        pins[rel] = sha256_of(inside(folder, rel))
    new_text = _with_pins(text, pins, origin)
    refused = (
        f"cannot rewrite the pins of {origin}: keep them in one top-level [pins] table "
        f"(not an inline table or dotted pins.* keys)"
    )
    try:
        after = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise ModuleError(f"{refused}: {exc}", path=origin) from exc
    before.pop("pins", None)
    got = after.pop("pins", None)
    if before != after or got != pins:
        raise ModuleError(refused, path=origin)
    _write_atomic(descriptor, new_text.encode("utf-8"))
    return pins


# -- keys and signatures -------------------------------------------------------------------------


def fingerprint(key: Ed25519PublicKey) -> str:
    """A short id of a public key: the first 16 hex characters of the sha256 of its raw bytes."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def generate_key(private_path: Path) -> Path:
    """Create an ed25519 key pair: a PEM (PKCS#8, unencrypted) private key at
    ``private_path`` with mode 0600 and the PEM public key at ``<private_path>.pub``
    (e.g. ``author.pem`` -> ``author.pem.pub``). Returns the public key's path.

    Refuses to overwrite either file (:class:`ConfigurationError`).
    """
    private_path = Path(private_path)
    public_path = private_path.with_name(private_path.name + ".pub")
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise ConfigurationError(
                f"key file {str(path)!r} exists already; not overwriting it", path=str(path)
            )
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for path, data, mode in ((private_path, private_pem, 0o600), (public_path, public_pem, 0o644)):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(path, mode)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot write key file {str(path)!r}: {exc}", path=str(path)
            ) from exc
    return public_path


def _load_private_key(path: Path, password: bytes | None) -> Ed25519PrivateKey:
    path = Path(path)
    data = _read_key_file(path)
    try:
        key = serialization.load_pem_private_key(data, password=password)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ConfigurationError(
            f"{str(path)!r} is not a usable PEM private key: {exc}", path=str(path)
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigurationError(
            f"{str(path)!r} holds a {type(key).__name__}, not an ed25519 private key",
            path=str(path),
        )
    return key


def _read_key_file(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > _MAX_KEY_FILE_BYTES:
            raise ConfigurationError(
                f"key file {str(path)!r} is {size:,} bytes: too large for a key", path=str(path)
            )
        return path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read key file {str(path)!r}: {exc}", path=str(path)
        ) from exc


def sign_module(
    folder: Path,
    private_key_path: Path,
    *,
    password: bytes | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Path:
    """Sign the exact bytes of the module's ``juggle.toml`` with an ed25519 private key (PEM)
    and write :data:`SIGNATURE_FILE` beside it (base64, one line). Returns its path.

    Refuses (:class:`SignatureError` naming the first one) unless every module file is pinned,
    and refuses (:class:`IntegrityError`) pins that no longer match the files: run
    :func:`lock_module` first. A co-module XML module is a :class:`ModuleError`.
    """
    folder = Path(folder)
    descriptor = _descriptor_of(folder, "sign")
    origin = str(folder / DESCRIPTOR_FILE)
    data = _read_descriptor(descriptor, limits)
    table = _toml_data(_decode(data, origin), origin).get("pins", {})
    if not isinstance(table, dict):
        raise SignatureError(f"cannot sign {origin}: 'pins' is not a table", path=origin)
    pins: dict[str, str] = {}
    for rel, digest in table.items():
        pins[rel] = _check_pin(rel, digest)
    missing = unpinned(pins, module_files(folder, limits=limits))
    if missing:
        raise SignatureError(
            f"cannot sign {origin}: module file {missing[0]!r} is not pinned "
            f"({len(missing)} unpinned; run lock first)",
            path=missing[0],
        )
    verify_pins(pins, folder_reader(folder), origin=f"module {str(folder)!r}")
    key = _load_private_key(Path(private_key_path), password)
    signature = base64.b64encode(key.sign(data)) + b"\n"
    target = _resolve(folder, "module root") / SIGNATURE_FILE
    _write_atomic(target, signature, 0o644)
    return target


def _public_key_from(data: bytes, what: str) -> Ed25519PublicKey:
    if len(data) == _RAW_KEY_BYTES and not data.startswith(b"-----"):
        return Ed25519PublicKey.from_public_bytes(data)
    stripped = data.strip()
    if b"PRIVATE KEY" in stripped:
        raise ConfigurationError(
            f"{what} is a private key; trust the public key (the .pub file) instead", value=what
        )
    try:
        if stripped.startswith(b"ssh-"):
            key: object = serialization.load_ssh_public_key(stripped)
        else:
            key = serialization.load_pem_public_key(stripped)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ConfigurationError(
            f"{what} is neither a PEM or OpenSSH public key nor 32 raw bytes: {exc}", value=what
        ) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigurationError(
            f"{what} holds a {type(key).__name__}, not an ed25519 public key", value=what
        )
    return key


def load_public_keys(
    keys: Sequence[Path | str | bytes | Ed25519PublicKey],
) -> list[Ed25519PublicKey]:
    """Trusted ed25519 public keys from paths (``Path`` or ``str``) of PEM files, PEM bytes,
    raw 32-byte keys (bytes or a file of them), OpenSSH ``ssh-ed25519`` lines, or key objects.

    A missing or unreadable file, a private key, a key of another algorithm or garbage is a
    :class:`ConfigurationError` naming the key.
    """
    if isinstance(keys, str | bytes | Path) or not isinstance(keys, Sequence):
        raise ConfigurationError(
            f"trusted keys must be a sequence of keys, got {type(keys).__name__} {keys!r}"
        )
    out: list[Ed25519PublicKey] = []
    for index, item in enumerate(keys):
        if isinstance(item, Ed25519PublicKey):
            out.append(item)
        elif isinstance(item, Path | str):
            path = Path(item)
            out.append(_public_key_from(_read_key_file(path), f"key file {str(path)!r}"))
        elif isinstance(item, bytes):
            out.append(_public_key_from(item, f"trusted key #{index} ({len(item)} bytes)"))
        else:
            raise ConfigurationError(
                f"trusted key #{index} is a {type(item).__name__}: give a path, PEM bytes, "
                f"32 raw bytes or an Ed25519PublicKey",
                value=index,
            )
    return out


def verify_signature(
    descriptor_bytes: bytes,
    signature: bytes | None,
    trusted: Sequence[Ed25519PublicKey],
    origin: str,
) -> str:
    """Check the signature (the contents of :data:`SIGNATURE_FILE`, or None when there is
    none) of ``descriptor_bytes`` against the ``trusted`` keys; return the fingerprint of
    the key that signed (:func:`fingerprint`).

    :class:`SignatureError` naming ``origin``: "module X is unsigned", a malformed signature
    file, or "signature of X matches no trusted key".
    """
    if signature is None:
        raise SignatureError(f"module {origin} is unsigned: no {SIGNATURE_FILE}", path=origin)
    if len(signature) > _MAX_SIGNATURE_FILE_BYTES:
        raise SignatureError(
            f"malformed signature file of {origin}: {len(signature):,} bytes, expected one "
            f"base64 line",
            path=origin,
        )
    try:
        raw = base64.b64decode(signature.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SignatureError(
            f"malformed signature file of {origin}: not base64 ({exc})", path=origin
        ) from exc
    if len(raw) != _SIGNATURE_BYTES:
        raise SignatureError(
            f"malformed signature file of {origin}: {len(raw)} bytes, an ed25519 signature "
            f"has {_SIGNATURE_BYTES}",
            path=origin,
        )
    for key in trusted:
        if not isinstance(key, Ed25519PublicKey):
            raise SignatureError(
                f"trusted key {key!r} is not an Ed25519PublicKey (use load_public_keys)"
            )
        try:
            key.verify(raw, descriptor_bytes)
        except InvalidSignature:
            continue
        return fingerprint(key)
    known = ", ".join(fingerprint(k) for k in trusted) or "none configured"
    raise SignatureError(
        f"signature of {origin} matches no trusted key (trusted: {known})", path=origin
    )
