"""Modules: a folder or archive with a descriptor, code and bitstreams, and its lifecycle.

A module is what an operator installs (an OSGi bundle, Juggle 2.3): ``install`` reads and checks
everything (descriptor, classes, bitstreams against the fabric) before anything changes;
``start`` lets the extender register its services; ``stop`` unregisters them; ``update``
replaces the code under running consumers; ``uninstall`` unloads the code.

Module code is imported in a namespace of its own (a synthetic package whose ``__path__`` is the
module folder or the archive), so a class named ``math.MathAddImpl`` in a descriptor resolves to
the module's ``math`` package and never to Python's ``math``. Inside a module, refer to sibling
files with relative imports (``from . import helpers``).
"""

from __future__ import annotations

import enum
import importlib
import importlib.machinery
import inspect
import itertools
import os
import sys
import types
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

from juggle.errors import (
    InputLimitError,
    IntegrityError,
    JuggleError,
    MissingBitstreamError,
    ModuleCodeError,
    ModuleError,
    ModuleStateError,
    SignatureError,
    UnknownClassError,
)
from juggle.fabric.bitstream import Bitstream, parse_any
from juggle.limits import DEFAULT_LIMITS, Limits, check_size
from juggle.runtime.descriptors import (
    DESCRIPTOR_NAMES,
    Descriptor,
    parse_comodule_xml,
    parse_toml,
)
from juggle.runtime.integrity import (
    DESCRIPTOR_FILE,
    SIGNATURE_FILE,
    inside,
    module_files,
    sha256_of,
    unpinned,
    verify_pins,
    verify_signature,
)
from juggle.runtime.interfaces import interface_methods
from juggle.runtime.resolved import PinnedFile, ResolvedService

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

_namespace_ids = itertools.count(1)

#: archive members smaller than this are not held to the compression-ratio limit (a small
#: file of zeros compresses well and harms no one)
_RATIO_FLOOR = 1 << 20


def code_error(module: str, doing: str, exc: BaseException, root: str = "") -> ModuleCodeError:
    """The error for module code that failed while ``doing`` something (chain ``exc``): names
    the module, the exception and, where the traceback passes through files under ``root``
    (the module's code), the last such line."""
    where = ""
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f" ({exc.filename}:{exc.lineno})"
    elif root:
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.startswith(root):
                where = f" ({tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"
            tb = tb.tb_next
    return ModuleCodeError(
        f"module {module!r}: {doing} raised {type(exc).__name__}: {exc}{where}", module=module
    )


def check_constructor(cls: type, name: str, args: int) -> None:
    """Raise :class:`UnknownClassError` unless ``cls(*args positional values)`` binds (what the
    runtime will call: an implementation with none, a driver with its MMIO window)."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return  # a builtin or C class: nothing to read
    try:
        signature.bind(*([None] * args))
    except TypeError as exc:
        takes = "no arguments" if args == 0 else "the MMIO window as its one argument"
        raise UnknownClassError(
            f"class {name!r}: its constructor {cls.__name__}{signature} must take {takes} ({exc})",
            class_name=name,
        ) from exc


def check_class(cls: object, name: str, interface: type, *, args: int = -1) -> type:
    """``cls`` itself, once it is found to be a class with ``interface``'s methods whose
    constructor takes ``args`` positional arguments (-1: not checked; an implementation takes
    0, a driver its MMIO window). Raises :class:`UnknownClassError` naming ``name`` (not a
    class, methods missing, or the constructor does not fit)."""
    if not isinstance(cls, type):
        raise UnknownClassError(f"{name!r} is not a class", class_name=name)
    if args >= 0:
        check_constructor(cls, name, args)
    missing = [m.name for m in interface_methods(interface) if not hasattr(cls, m.name)]
    if missing:
        raise UnknownClassError(
            f"class {name!r} lacks method(s) {', '.join(missing)} of {interface.__name__}",
            class_name=name,
        )
    return cls


class ModuleSource:
    """Where a module's files come from: a folder or a ``.zip`` archive, read within ``limits``.

    ``descriptor`` is the descriptor's path relative to the module root. Every read is
    bounded before it starts (a folder's files by ``stat``, an archive's members by their
    declared sizes, checked once when the archive is opened) and confined to the module (a path
    or symlink leading out of it raises :class:`~juggle.errors.IntegrityError`).
    """

    def __init__(
        self,
        location: Path,
        root: Path,
        zip_prefix: str | None,
        descriptor: str,
        limits: Limits = DEFAULT_LIMITS,
        members: Mapping[str, zipfile.ZipInfo] | None = None,
    ):
        self.location = location
        self.root = root
        self.zip_prefix = zip_prefix
        self.descriptor = descriptor
        self.limits = limits
        self._members = dict(members or {})
        #: module-relative path → sha256 of the files the descriptor pins (once verified)
        self.pins: dict[str, str] = {}

    @classmethod
    def open(cls, path: str | Path, limits: Limits = DEFAULT_LIMITS) -> ModuleSource:
        """Find the module at ``path`` (folder, ``.zip``, or descriptor file).

        Raises :class:`ModuleError` when the path is malformed, does not exist or holds no
        descriptor, or the archive is unreadable; :class:`~juggle.errors.InputLimitError` when
        the archive exceeds ``limits`` (size, members, declared sizes, compression ratio).
        """
        if not isinstance(path, str | os.PathLike):
            raise ModuleError(f'module "path" must be a str or path, got {type(path).__name__}')
        text = os.fspath(path)
        if not isinstance(text, str) or "\x00" in text or not text:
            raise ModuleError(f"module path {text!r} is empty or contains a NUL", path=text)
        try:
            location = Path(text).expanduser().resolve()
            exists, is_dir = location.exists(), location.is_dir()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ModuleError(f"module path {text!r} cannot be resolved: {exc}", path=text) from exc
        if not exists:
            raise ModuleError(f"no module at {text!r}: path does not exist", path=text)
        if is_dir:
            for name in DESCRIPTOR_NAMES:
                if (location / name).is_file():
                    return cls(location, location, None, name, limits)
            raise ModuleError(
                f"no descriptor in {str(location)!r}: expected one of "
                f"{', '.join(DESCRIPTOR_NAMES)}",
                path=str(location),
            )
        if location.suffix in (".toml", ".xml"):
            return cls(location, location.parent, None, location.name, limits)
        if location.suffix == ".zip" or zipfile.is_zipfile(location):
            return cls._open_zip(location, limits)
        raise ModuleError(
            f"{text!r} is neither a module folder, a .zip, nor a .toml/.xml descriptor", path=text
        )

    @classmethod
    def _open_zip(cls, location: Path, limits: Limits) -> ModuleSource:
        check_size(
            str(location), location.stat().st_size, limits.max_archive_bytes, "max_archive_bytes"
        )
        try:
            with zipfile.ZipFile(location) as archive:
                infos = archive.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise ModuleError(
                f"archive {str(location)!r} cannot be read: {type(exc).__name__}: {exc}",
                path=str(location),
            ) from exc
        members = _checked_members(location, infos, limits)
        names = set(members)
        for prefix in ("", *sorted({n.split("/", 1)[0] + "/" for n in names if "/" in n})):
            for name in DESCRIPTOR_NAMES:
                if prefix + name in names:
                    return cls(location, location, prefix, name, limits, members)
        raise ModuleError(
            f"no descriptor in archive {str(location)!r}: expected one of "
            f"{', '.join(DESCRIPTOR_NAMES)} at its root or in one top folder",
            path=str(location),
        )

    @property
    def is_zip(self) -> bool:
        """Whether the module is an archive."""
        return self.zip_prefix is not None

    @property
    def code_path(self) -> str:
        """Entry for a package ``__path__`` (zipimport understands ``archive.zip/prefix``)."""
        if self.zip_prefix is None:
            return str(self.root)
        return str(self.root) + ("/" + self.zip_prefix.rstrip("/") if self.zip_prefix else "")

    def _member(self, relpath: str) -> str:
        clean = PurePosixPath(relpath)
        if not relpath or "\x00" in relpath or clean.is_absolute() or ".." in clean.parts:
            raise IntegrityError(f"file {relpath!r} must be a path inside the module", path=relpath)
        return f"{self.zip_prefix or ''}{clean.as_posix()}"

    def exists(self, relpath: str) -> bool:
        """Whether the module has the file ``relpath`` (a path out of it raises)."""
        member = self._member(relpath)
        if self.zip_prefix is None:
            return inside(self.root, member).is_file()
        return member in self._members

    def files(self) -> list[str]:
        """Every file of the module, as module-relative POSIX paths."""
        if self.zip_prefix is None:
            return module_files(self.root, limits=self.limits)
        cut = len(self.zip_prefix)
        return sorted(
            name[cut:]
            for name, info in self._members.items()
            if name.startswith(self.zip_prefix) and not info.is_dir()
        )

    def read_bytes(self, relpath: str, limit: str = "max_bitstream_bytes") -> bytes:
        """Contents of the module's file ``relpath``, refused before reading when larger than
        the ``limit`` field of :class:`~juggle.limits.Limits`."""
        member = self._member(relpath)
        maximum = getattr(self.limits, limit)
        shown = self.display(relpath)
        if self.zip_prefix is None:
            path = inside(self.root, member)
            try:
                check_size(shown, path.stat().st_size, maximum, limit)
                with path.open("rb") as file:
                    data = file.read(maximum + 1)
            except OSError as exc:
                raise ModuleError(f"cannot read {shown!r}: {exc}", path=shown) from exc
            check_size(shown, len(data), maximum, limit)  # it grew meanwhile
            return data
        info = self._members.get(member)
        if info is None:
            raise ModuleError(f"archive has no file {shown!r}", path=shown)
        check_size(shown, info.file_size, maximum, limit)
        try:
            with zipfile.ZipFile(self.root) as archive:
                return archive.read(info)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise ModuleError(
                f"cannot read {shown!r} from the archive: {type(exc).__name__}: {exc}", path=shown
            ) from exc

    def load_bitstreams(
        self, bitstreams: Mapping[str, str], region_names: Sequence[str]
    ) -> dict[str, tuple[str, Bitstream, bytes]]:
        """The bitstream files a hardware spec names (region or ``"*"`` → module-relative
        path): read within the limits, checked against their pins (:attr:`pins`) and parsed,
        as target region → (path, header, bytes). ``"*"`` targets the bitstream's own
        ``Region=`` tag, else the first of ``region_names``.

        Raises :class:`~juggle.errors.MissingBitstreamError`,
        :class:`~juggle.errors.IntegrityError` and
        :class:`~juggle.errors.BitstreamFormatError` naming the file.
        """
        out: dict[str, tuple[str, Bitstream, bytes]] = {}
        for region, relpath in bitstreams.items():
            if not relpath or not self.exists(relpath):
                raise MissingBitstreamError(
                    f"bitstream {relpath!r} for region {region!r} not found in module "
                    f"{str(self.location)!r}",
                    region=region,
                    path=self.display(relpath),
                )
            data = self.read_bytes(relpath)
            shown = self.display(relpath)
            pin = self.pins.get(relpath)
            if pin is not None and sha256_of(data) != pin:
                raise IntegrityError(f"bitstream {shown!r} does not match its pin", path=shown)
            # any format tools write (.bit, headerless .bin/.bit.bin, .pdi)
            bitstream = parse_any(data, source=shown, limits=self.limits)
            target = region
            if region == "*":
                target = bitstream.region or (region_names[0] if region_names else "*")
            out[target] = (relpath, bitstream, data)
        return out

    def pinned_file(self, relpath: str, digest: str) -> PinnedFile:
        """A :class:`~juggle.runtime.resolved.PinnedFile` for ``relpath``, verified now."""
        path = self.root if self.zip_prefix is not None else inside(self.root, relpath)
        return PinnedFile(path, self.display(relpath), digest, lambda: self.read_bytes(relpath))

    def display(self, relpath: str) -> str:
        """A path for messages."""
        return f"{self.code_path}/{relpath}"

    def descriptor_bytes(self) -> bytes:
        """The descriptor's bytes (at most ``Limits.max_descriptor_bytes``)."""
        return self.read_bytes(self.descriptor, "max_descriptor_bytes")

    def load_descriptor(self, data: bytes | None = None) -> Descriptor:
        """Parse and validate the descriptor (``data``: its bytes, if read already)."""
        origin = self.display(self.descriptor)
        raw = self.descriptor_bytes() if data is None else data
        if self.descriptor.endswith(".xml"):
            base = self.location.stem if self.location.is_file() else self.location.name
            name = "".join(c if c.isalnum() or c in "-_" else "-" for c in base.lower())
            return parse_comodule_xml(
                raw, origin, name.strip("-_") or "comodule", limits=self.limits
            )
        return parse_toml(raw, origin, limits=self.limits)

    def signature(self) -> bytes | None:
        """The signature file beside the descriptor, if the module has one."""
        if not self.exists(SIGNATURE_FILE):
            return None
        return self.read_bytes(SIGNATURE_FILE, "max_descriptor_bytes")

    def authenticate(
        self, trusted: Sequence[Ed25519PublicKey] | None
    ) -> tuple[Descriptor, str | None]:
        """The descriptor, checked before any of the module's code runs: with ``trusted``
        keys, the signature over the descriptor's bytes first (and every module file must be
        pinned), then the descriptor, then every pinned file. Returns the descriptor and the
        fingerprint of the key that signed (None without ``trusted``); the pins are kept for
        later checks of the files.

        Raises :class:`~juggle.errors.SignatureError` (unsigned, badly signed, signed by no
        trusted key, a file not pinned, or an XML descriptor, which cannot be signed), the
        descriptor's errors and :class:`~juggle.errors.IntegrityError` (a pinned file changed).
        """
        raw = self.descriptor_bytes()
        origin = self.display(self.descriptor)
        signer = None
        if trusted is not None:
            if self.descriptor != DESCRIPTOR_FILE:
                raise SignatureError(
                    f"{origin}: only juggle.toml modules can be signed, and trusted "
                    "signatures are required",
                    path=origin,
                )
            signer = verify_signature(raw, self.signature(), trusted, origin)
        descriptor = self.load_descriptor(raw)
        if trusted is not None:
            missing = unpinned(descriptor.pins, self.files())
            if missing:
                raise SignatureError(
                    f"{origin}: signed, but file {missing[0]!r} is not pinned (run juggle "
                    "module lock, then sign again)",
                    path=missing[0],
                )
        verify_pins(descriptor.pins, self.read_bytes, origin=origin)
        self.pins = dict(descriptor.pins)
        return descriptor, signer


def _checked_members(
    location: Path, infos: list[zipfile.ZipInfo], limits: Limits
) -> dict[str, zipfile.ZipInfo]:
    """An archive's members by name, after checking the declared figures against ``limits``
    (nothing is decompressed). Raises :class:`~juggle.errors.InputLimitError` or
    :class:`ModuleError` (two members with one name)."""
    where = str(location)
    if len(infos) > limits.max_members:
        raise InputLimitError(
            f"archive {where!r} has {len(infos):,} members, over the limit of "
            f"{limits.max_members:,} (Limits.max_members)",
            path=where,
        )
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    for info in infos:
        if info.filename in members:
            raise ModuleError(
                f"archive {where!r} holds two members named {info.filename!r}", path=where
            )
        members[info.filename] = info
        shown = f"{where}/{info.filename}"
        check_size(shown, info.file_size, limits.max_bitstream_bytes, "max_bitstream_bytes")
        total += info.file_size
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > _RATIO_FLOOR and ratio > limits.max_compression_ratio:
            raise InputLimitError(
                f"{shown} expands {ratio:,.0f}-fold ({info.compress_size:,} to "
                f"{info.file_size:,} bytes), over the limit of {limits.max_compression_ratio} "
                "(Limits.max_compression_ratio)",
                path=shown,
            )
    check_size(
        f"archive {where!r} unpacked", total, limits.max_unpacked_bytes, "max_unpacked_bytes"
    )
    return members


class CodeNamespace:
    """A module's code, imported under a package name of its own."""

    def __init__(self, source: ModuleSource, module_name: str) -> None:
        self.module_name = module_name
        self.root = source.code_path
        #: the namespace this one replaces (an update): its model claims may be taken over
        self.replacing: str | None = None
        safe = "".join(c if c.isalnum() else "_" for c in module_name)
        self.package = f"_juggle_module_{next(_namespace_ids)}_{safe}"
        package = types.ModuleType(self.package, f"code of juggle module {module_name!r}")
        package.__path__ = [source.code_path]
        package.__package__ = self.package
        spec = importlib.machinery.ModuleSpec(self.package, None, is_package=True)
        spec.submodule_search_locations = [source.code_path]
        package.__spec__ = spec
        sys.modules[self.package] = package
        self.loaded = True

    def resolve(self, dotted: str, what: str) -> Any:
        """The object ``dotted`` (``"pkg.mod.Class"``) inside the module.

        Raises :class:`UnknownClassError` naming ``dotted`` when it does not exist.
        """
        module_path, _, attr = dotted.rpartition(".")
        if not module_path:
            raise UnknownClassError(
                f"{what} {dotted!r} must be written module.Class (a file or package of the "
                "module, then the class)",
                class_name=dotted,
            )
        target = f"{self.package}.{module_path}"
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name is None or not target.startswith(exc.name):  # its code imports wrongly
                raise code_error(
                    self.module_name, f"importing {module_path!r}", exc, self.root
                ) from exc
            raise UnknownClassError(
                f"{what} {dotted!r}: the module has no code {module_path!r} ({exc})",
                class_name=dotted,
            ) from exc
        except JuggleError:
            raise
        except Exception as exc:  # module code is third-party: anything may fail at import
            raise code_error(
                self.module_name, f"importing {module_path!r}", exc, self.root
            ) from exc
        try:
            return getattr(module, attr)
        except AttributeError as exc:
            raise UnknownClassError(
                f"{what} {dotted!r}: {module_path!r} defines no {attr!r}", class_name=dotted
            ) from exc

    def unload(self) -> None:
        """Remove every module of this namespace from ``sys.modules``."""
        prefix = self.package + "."
        for name in [n for n in sys.modules if n == self.package or n.startswith(prefix)]:
            del sys.modules[name]
        importlib.invalidate_caches()
        self.loaded = False


class ModuleState(enum.Enum):
    """Lifecycle states (OSGi bundle states, reduced)."""

    INSTALLED = "installed"
    STARTING = "starting"
    ACTIVE = "active"
    STOPPING = "stopping"
    UNINSTALLED = "uninstalled"


@dataclass(frozen=True, slots=True)
class ModuleSnapshot:
    """Frozen view of a module."""

    module_id: int
    name: str
    version: str
    state: str
    location: str
    services: tuple[int, ...]


class ModuleHost(Protocol):
    """What a :class:`Module` acts through: the installer that holds it (pluggy's hook
    caller, which never calls back into the whole manager)."""

    def check_open(self) -> None:
        """Raise :class:`~juggle.errors.FrameworkClosedError` once the framework is closed."""
        ...

    def start_module(self, module: Module) -> None:
        """Register ``module``'s services."""
        ...

    def stop_module(self, module: Module) -> None:
        """Unregister ``module``'s services (out of the fabric first)."""
        ...

    def update_module(self, module: Module, path: str | Path | None) -> None:
        """Replace ``module``'s code under its running consumers."""
        ...

    def uninstall_module(self, module: Module) -> None:
        """Stop ``module`` if active and unload its code."""
        ...


class Module:
    """An installed module; its lifecycle methods act through its :class:`ModuleHost`."""

    def __init__(
        self,
        host: ModuleHost,
        module_id: int,
        source: ModuleSource,
        descriptor: Descriptor,
        namespace: CodeNamespace,
        resolved: tuple[ResolvedService, ...],
    ) -> None:
        self._host = host
        self.module_id = module_id
        self.source = source
        self.descriptor = descriptor
        self.namespace = namespace
        self.resolved = resolved
        self.state = ModuleState.INSTALLED
        self.service_ids: list[int] = []

    @property
    def name(self) -> str:
        """Module name from the descriptor."""
        return self.descriptor.module.name

    @property
    def version(self) -> str:
        """Module version from the descriptor."""
        return self.descriptor.module.version

    def _require(self, *states: ModuleState, action: str) -> None:
        self._host.check_open()
        if self.state not in states:
            raise ModuleStateError(
                f"cannot {action} module {self.name!r} (id {self.module_id}): it is "
                f"{self.state.value}",
                module=self.name,
            )

    def start(self) -> None:
        """Register the module's services (the extender builds their proxies)."""
        self._require(ModuleState.INSTALLED, action="start")
        self._host.start_module(self)

    def stop(self) -> None:
        """Unregister the module's services; consumers' proxies then raise on call.

        A juggle running now ends first, then each service in the fabric is taken out (by a
        juggle; by force if that fails), so no region is left holding the design of a stopped
        service. Raises :class:`~juggle.errors.ModuleStateError` when the module is not
        active, or when called from inside a juggle (a driver or hook it runs).
        """
        self._require(ModuleState.ACTIVE, action="stop")
        self._host.stop_module(self)

    def update(self, path: str | Path | None = None) -> None:
        """Replace the module's code (from ``path`` or its original location) under load."""
        self._require(ModuleState.INSTALLED, ModuleState.ACTIVE, action="update")
        self._host.update_module(self, path)

    def uninstall(self) -> None:
        """Stop if active (as :meth:`stop`), then unload the module's code."""
        self._require(ModuleState.INSTALLED, ModuleState.ACTIVE, action="uninstall")
        self._host.uninstall_module(self)

    def snapshot(self) -> ModuleSnapshot:
        """Frozen view."""
        return ModuleSnapshot(
            self.module_id,
            self.name,
            self.version,
            self.state.value,
            str(self.source.location),
            tuple(self.service_ids),
        )

    def __repr__(self) -> str:
        return (
            f"<Module {self.module_id} {self.name!r} {self.version} {self.state.value}, "
            f"{len(self.service_ids)} services>"
        )
