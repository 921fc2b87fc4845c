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
import itertools
import sys
import types
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from juggle.errors import DescriptorError, ModuleError, ModuleStateError, UnknownClassError
from juggle.runtime.descriptors import (
    DESCRIPTOR_NAMES,
    Descriptor,
    parse_comodule_xml,
    parse_toml,
)

if TYPE_CHECKING:
    from juggle.runtime.framework import Framework

_namespace_ids = itertools.count(1)


class ModuleSource:
    """Where a module's files come from: a folder or a ``.zip`` archive.

    ``descriptor`` is the descriptor's path relative to the module root.
    """

    def __init__(self, location: Path, root: Path, zip_prefix: str | None, descriptor: str):
        self.location = location
        self.root = root
        self.zip_prefix = zip_prefix
        self.descriptor = descriptor

    @classmethod
    def open(cls, path: str | Path) -> ModuleSource:
        """Find the module at ``path`` (folder, ``.zip``, or descriptor file).

        Raises :class:`ModuleError` when the path does not exist or holds no descriptor.
        """
        location = Path(path).expanduser().resolve()
        if not location.exists():
            raise ModuleError(f"no module at {str(path)!r}: path does not exist", subject=path)
        if location.is_dir():
            for name in DESCRIPTOR_NAMES:
                if (location / name).is_file():
                    return cls(location, location, None, name)
            raise ModuleError(
                f"no descriptor in {str(location)!r}: expected one of "
                f"{', '.join(DESCRIPTOR_NAMES)}",
                subject=path,
            )
        if zipfile.is_zipfile(location):
            return cls._open_zip(location)
        if location.suffix in (".toml", ".xml"):
            return cls(location, location.parent, None, location.name)
        raise ModuleError(
            f"{str(path)!r} is neither a module folder, a .zip, nor a .toml/.xml descriptor",
            subject=path,
        )

    @classmethod
    def _open_zip(cls, location: Path) -> ModuleSource:
        with zipfile.ZipFile(location) as archive:
            names = set(archive.namelist())
        for prefix in ("", *sorted({n.split("/", 1)[0] + "/" for n in names if "/" in n})):
            for name in DESCRIPTOR_NAMES:
                if prefix + name in names:
                    return cls(location, location, prefix, name)
        raise ModuleError(
            f"no descriptor in archive {str(location)!r}: expected one of "
            f"{', '.join(DESCRIPTOR_NAMES)} at its root or in one top folder",
            subject=location,
        )

    @property
    def code_path(self) -> str:
        """Entry for a package ``__path__`` (zipimport understands ``archive.zip/prefix``)."""
        if self.zip_prefix is None:
            return str(self.root)
        return str(self.root) + ("/" + self.zip_prefix.rstrip("/") if self.zip_prefix else "")

    def _member(self, relpath: str) -> str:
        clean = PurePosixPath(relpath)
        if clean.is_absolute() or ".." in clean.parts:
            raise DescriptorError(
                f"file {relpath!r} must be a path inside the module", subject=relpath
            )
        return f"{self.zip_prefix or ''}{clean.as_posix()}"

    def exists(self, relpath: str) -> bool:
        """Whether the module has the file ``relpath``."""
        member = self._member(relpath)
        if self.zip_prefix is None:
            return (self.root / member).is_file()
        with zipfile.ZipFile(self.root) as archive:
            return member in archive.namelist()

    def read_bytes(self, relpath: str) -> bytes:
        """Contents of the module's file ``relpath``."""
        member = self._member(relpath)
        if self.zip_prefix is None:
            return (self.root / member).read_bytes()
        with zipfile.ZipFile(self.root) as archive:
            return archive.read(member)

    def display(self, relpath: str) -> str:
        """A path for messages."""
        return f"{self.code_path}/{relpath}"

    def load_descriptor(self) -> Descriptor:
        """Parse and validate the descriptor (:class:`DescriptorError` on any problem)."""
        origin = self.display(self.descriptor)
        text = self.read_bytes(self.descriptor).decode("utf-8")
        if self.descriptor.endswith(".xml"):
            base = self.location.stem if self.location.is_file() else self.location.name
            name = "".join(c if c.isalnum() or c in "-_" else "-" for c in base.lower())
            return parse_comodule_xml(text, origin, name.strip("-_") or "comodule")
        return parse_toml(text, origin)


class CodeNamespace:
    """A module's code, imported under a package name of its own."""

    def __init__(self, source: ModuleSource, module_name: str) -> None:
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
                subject=dotted,
            )
        try:
            module = importlib.import_module(f"{self.package}.{module_path}")
        except ModuleNotFoundError as exc:
            raise UnknownClassError(
                f"{what} {dotted!r}: the module has no code {module_path!r} ({exc})",
                subject=dotted,
            ) from exc
        try:
            return getattr(module, attr)
        except AttributeError as exc:
            raise UnknownClassError(
                f"{what} {dotted!r}: {module_path!r} defines no {attr!r}", subject=dotted
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


class Module:
    """An installed module; its lifecycle methods act through the framework that holds it."""

    def __init__(
        self,
        framework: Framework,
        module_id: int,
        source: ModuleSource,
        descriptor: Descriptor,
        namespace: CodeNamespace,
        resolved: list[Any],
    ) -> None:
        self._framework = framework
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
        self._framework._check_open()
        if self.state not in states:
            raise ModuleStateError(
                f"cannot {action} module {self.name!r} (id {self.module_id}): it is "
                f"{self.state.value}",
                subject=self,
            )

    def start(self) -> None:
        """Register the module's services (the extender builds their proxies)."""
        self._require(ModuleState.INSTALLED, action="start")
        self._framework._start_module(self)

    def stop(self) -> None:
        """Unregister the module's services; consumers' proxies then raise on call."""
        self._require(ModuleState.ACTIVE, action="stop")
        self._framework._stop_module(self)

    def update(self, path: str | Path | None = None) -> None:
        """Replace the module's code (from ``path`` or its original location) under load."""
        self._require(ModuleState.INSTALLED, ModuleState.ACTIVE, action="update")
        self._framework._update_module(self, path)

    def uninstall(self) -> None:
        """Stop if active, then unload the module's code."""
        self._require(ModuleState.INSTALLED, ModuleState.ACTIVE, action="uninstall")
        self._framework._uninstall_module(self)

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
