"""``juggle module validate``: every install-time check, without running the module's code.

By default nothing of the module executes. The descriptor is parsed, pinned files are verified,
bitstream headers are parsed and checked against the board (part, region, size, resources), and
each class the descriptor names is found by *reading* the module's source with :mod:`ast`: the
class must exist (defined in the module, or re-exported from an installed package, whose source
is read the same way), have the interface's methods (its own or inherited from classes found the
same way), and a constructor taking what the runtime passes (nothing for an implementation, the
MMIO window for a driver). Python files are located with :class:`importlib.machinery.PathFinder`
on paths, never by importing a package.

``imported=True`` (CLI ``--import``) additionally installs the module in a throwaway framework,
which imports and runs its code, and says so in the report.
"""

from __future__ import annotations

import ast
import importlib.machinery
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from juggle.errors import (
    InputLimitError,
    ModuleCodeError,
    UnknownClassError,
    UnknownInterfaceError,
)
from juggle.fabric.fabric import open_fabric
from juggle.limits import DEFAULT_LIMITS, Limits
from juggle.runtime.descriptors import Descriptor
from juggle.runtime.integrity import load_public_keys
from juggle.runtime.interfaces import InterfaceCatalog, interface_methods
from juggle.runtime.modules import ModuleSource
from juggle.runtime.rtlsources import module_rtl
from juggle.runtime.synthesis import pick_figures, read_report

__all__ = ["validate_module"]

#: re-exports followed before giving up (a chain of ``from x import y``)
_MAX_HOPS = 12


@dataclass(frozen=True, slots=True)
class _Found:
    """A class found in source: its node, the file it is in and that file's package."""

    node: ast.ClassDef
    file: str
    reader: _Reader


class _Reader:
    """Reads and parses Python source of one place: the module (through its
    :class:`ModuleSource`, bounded and confined) or an installed package folder."""

    def __init__(self, source: ModuleSource | None, folder: Path | None, limits: Limits) -> None:
        self.source = source
        self.folder = folder
        self.limits = limits

    def locate(self, dotted: str) -> str | None:
        """The relative file of module ``dotted`` (``a.b`` → ``a/b.py`` or ``a/b/__init__.py``)
        inside this place, or None."""
        parts = [p for p in dotted.split(".") if p]
        for candidate in ("/".join(parts) + ".py", "/".join([*parts, "__init__.py"])):
            if self._exists(candidate):
                return candidate
        return None

    def _exists(self, rel: str) -> bool:
        if self.source is not None:
            return self.source.exists(rel)
        assert self.folder is not None
        return (self.folder / rel).is_file()

    def parse(self, rel: str) -> ast.Module:
        shown = self.show(rel)
        if self.source is not None:
            data = self.source.read_bytes(rel, "max_source_bytes")
        else:
            assert self.folder is not None
            path = self.folder / rel
            if path.stat().st_size > self.limits.max_source_bytes:
                raise InputLimitError(f"{shown} is over Limits.max_source_bytes", path=shown)
            data = path.read_bytes()
        try:
            return ast.parse(data, filename=shown)
        except SyntaxError as exc:
            raise ModuleCodeError(
                f"{shown}:{exc.lineno}: the module's code does not parse: {exc.msg}", path=shown
            ) from exc
        except (ValueError, RecursionError, MemoryError) as exc:
            raise ModuleCodeError(
                f"{shown}: the module's code cannot be read: {exc}", path=shown
            ) from exc

    def show(self, rel: str) -> str:
        if self.source is not None:
            return self.source.display(rel)
        assert self.folder is not None
        return str(self.folder / rel)


def _installed(dotted: str, limits: Limits) -> tuple[_Reader, str] | None:
    """(reader over the package's root folder, relative file) of installed module ``dotted``,
    found on ``sys.path`` without importing anything."""
    parts = dotted.split(".")
    spec = importlib.machinery.PathFinder.find_spec(parts[0])
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    root = Path(spec.origin).parent.parent if spec.submodule_search_locations else None
    if root is None:
        root = Path(spec.origin).parent
    reader = _Reader(None, root, limits)
    rel = reader.locate(dotted)
    return (reader, rel) if rel is not None else None


def _find_class(
    reader: _Reader, rel: str, name: str, limits: Limits, hops: int = 0
) -> _Found | None:
    """The class ``name`` as seen from file ``rel`` of ``reader``'s place."""
    if hops > _MAX_HOPS:
        return None
    tree = reader.parse(rel)
    package = str(PurePosixPath(rel).parent).replace("/", ".").strip(".")
    if rel.endswith("__init__.py"):
        package = str(PurePosixPath(rel).parent).replace("/", ".").strip(".")
    for node in reversed(tree.body):  # the last binding of a name wins
        if isinstance(node, ast.ClassDef) and node.name == name:
            return _Found(node, rel, reader)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) != name:
                    continue
                if node.level:
                    base = package.split(".") if package else []
                    if node.level > 1:
                        base = base[: len(base) - (node.level - 1)]
                    target = ".".join([*base, *(node.module or "").split(".")]).strip(".")
                    target_rel = reader.locate(target) if target else "__init__.py"
                    if target_rel is None:  # ``from . import sub`` names a module, not a class
                        return None
                    return _find_class(reader, target_rel, alias.name, limits, hops + 1)
                found = _installed(node.module or "", limits)
                if found is None:
                    return None
                return _find_class(found[0], found[1], alias.name, limits, hops + 1)
    return None


def _methods(found: _Found, limits: Limits, hops: int = 0) -> dict[str, ast.FunctionDef]:
    """Functions a class defines or inherits from bases found in source (nearest first)."""
    out: dict[str, ast.FunctionDef] = {}
    for base in found.node.bases:
        if hops < _MAX_HOPS and isinstance(base, ast.Name):
            parent = _find_class(found.reader, found.file, base.id, limits)
            if parent is not None:
                out.update(_methods(parent, limits, hops + 1))
    for item in found.node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            out[item.name] = item  # type: ignore[assignment]
        elif isinstance(item, ast.Assign | ast.AnnAssign):  # method = other_method
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, ast.FunctionDef(name=target.id))  # type: ignore[call-arg]
    return out


def _check_constructor(init: ast.FunctionDef | None, name: str, args: int) -> None:
    if init is None or not hasattr(init, "args"):
        if args:
            raise UnknownClassError(
                f"class {name!r}: its constructor must take the MMIO window as its one "
                "argument; it takes none",
                class_name=name,
            )
        return
    params = [*init.args.posonlyargs, *init.args.args][1:]  # after self
    required = len(params) - len(init.args.defaults)
    kw_required = sum(d is None for d in init.args.kw_defaults)
    fits = required <= args and (len(params) >= args or init.args.vararg is not None)
    if not fits or kw_required:
        takes = "no arguments" if args == 0 else "the MMIO window as its one argument"
        shown = ", ".join(a.arg for a in params)
        raise UnknownClassError(
            f"class {name!r}: its constructor __init__(self, {shown}) must take {takes}",
            class_name=name,
        )


def _check_class(
    source: ModuleSource,
    dotted: str,
    what: str,
    interface: type | None,
    args: int,
    limits: Limits,
) -> None:
    module_path, _, attr = dotted.rpartition(".")
    reader = _Reader(source, None, limits)
    rel = reader.locate(module_path) if module_path else None
    if rel is None:
        raise UnknownClassError(
            f"{what} {dotted!r}: the module has no code {module_path!r}", class_name=dotted
        )
    found = _find_class(reader, rel, attr, limits)
    if found is None:
        raise UnknownClassError(
            f"{what} {dotted!r}: {module_path!r} defines no class {attr!r} that can be read "
            "without running the module (try --import)",
            class_name=dotted,
        )
    methods = _methods(found, limits)
    if interface is not None:
        missing = [m.name for m in interface_methods(interface) if m.name not in methods]
        if missing:
            raise UnknownClassError(
                f"class {dotted!r} lacks method(s) {', '.join(missing)} of {interface.__name__}",
                class_name=dotted,
            )
    _check_constructor(methods.get("__init__"), dotted, args)


def _check_hardware(
    source: ModuleSource, spec: Any, fabric: Any, limits: Limits
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    hw = spec.hardware
    regions = fabric.profile.regions
    family = regions[0].resources.family if regions else "xc2vp"  # one family a board
    declared = hw.resources.for_family(family) if hw.resources is not None else None
    synthesized = read_report(source)
    for target, (_, bitstream, _) in source.load_bitstreams(
        hw.bitstreams, fabric.region_names()
    ).items():
        # as install: a design with RTL needs what synthesis reports for it, if it was built
        has_rtl = module_rtl(source, hw.rtl, bitstream.design) is not None
        synth = synthesized.get(bitstream.design) if has_rtl else None
        region = fabric.region(target).profile.resources
        figures, origin = pick_figures(declared, synth, region)
        fabric.check(bitstream, target, figures, design=not hw.model, figures=origin)
        out[target] = {"design": bitstream.design, "part": bitstream.part, "bytes": bitstream.size}
    return out


def _static(
    source: ModuleSource, descriptor: Descriptor, fabric_name: str, limits: Limits
) -> list[dict[str, Any]]:
    catalog = InterfaceCatalog()
    services = []
    with open_fabric(fabric_name) as fabric:
        for spec in descriptor.services:
            interface: type | None = None
            try:
                interface = catalog.resolve(spec.interfaces[0])
            except UnknownInterfaceError:
                module_path = spec.interfaces[0].rpartition(".")[0]
                if not module_path or _Reader(source, None, limits).locate(module_path) is None:
                    raise
            for tier in ("software", "native"):
                impl = getattr(spec, tier)
                if impl is not None:
                    _check_class(source, impl.class_, f"{tier} class", interface, 0, limits)
            bitstreams: dict[str, dict[str, Any]] = {}
            if spec.hardware is not None:
                _check_class(source, spec.hardware.driver, "driver", interface, 1, limits)
                if spec.hardware.model:
                    _check_class(source, spec.hardware.model, "model", None, 0, limits)
                bitstreams = _check_hardware(source, spec, fabric, limits)
            services.append(
                {
                    "interfaces": list(spec.interfaces),
                    "tiers": list(spec.tiers()),
                    "properties": dict(spec.properties),
                    "bitstreams": bitstreams,
                }
            )
    return services


def validate_module(
    path: str | Path,
    *,
    fabric: str = "xupv2p",
    limits: Limits = DEFAULT_LIMITS,
    trusted_keys: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Check the module at ``path`` against board ``fabric`` without running its code (the
    report's ``imported`` is False: to run it too, install it in a throwaway framework, as
    ``juggle module validate --import`` does). With ``trusted_keys`` (as
    :class:`juggle.Framework` takes them) the module must be signed by one of them, as such a
    framework would require.

    Raises the :class:`~juggle.errors.JuggleError` an install would raise, naming the value.
    """
    trusted = load_public_keys(trusted_keys) if trusted_keys is not None else None
    source = ModuleSource.open(path, limits)
    descriptor, signer = source.authenticate(trusted)
    services = _static(source, descriptor, fabric, limits)
    report: dict[str, Any] = {
        "name": descriptor.module.name,
        "version": descriptor.module.version,
        "format": descriptor.format,
        "services": services,
        "pinned": sorted(descriptor.pins),
        "signed_by": signer,
        "imported": False,
        "valid": True,
    }
    return report
