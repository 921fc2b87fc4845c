"""``juggle module validate``: every install-time check, without running the module's code.

By default nothing of the module executes. The descriptor is parsed, pinned files are verified,
bitstream headers are parsed and checked against the board (part, region, size, resources), and
each class the descriptor names is found by *reading* the module's source with :mod:`ast`: the
class must exist (defined in the module, or re-exported from an installed package, whose source
is read the same way), have the interface's methods (its own or inherited from classes found the
same way), and a constructor taking what the runtime passes (nothing for an implementation, the
MMIO window for a driver). Python files are located with :class:`importlib.machinery.PathFinder`
on paths, never by importing a package. An interface the module defines itself is read the same
way: it must exist, and its public methods are the ones the classes must have. A hardware
service's register model must carry the design name its bitstreams carry (its class-level
``design``, where it is a string literal).

The board checked against is ``fabric`` when given, else the one the descriptor records
(``[module] board``), else ``xupv2p``; the report says which (``fabric``, ``fabric_from``).

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
    ModelRegistrationError,
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

__all__ = ["DEFAULT_FABRIC", "validate_module"]

#: the board checked against when neither ``fabric`` nor the descriptor names one
DEFAULT_FABRIC = "xupv2p"

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
    interface: tuple[str, tuple[str, ...]] | None,
    args: int,
    limits: Limits,
) -> _Found:
    """Find class ``dotted`` in the module's source and check it has the methods of
    ``interface`` (its name and public method names) and a constructor taking ``args``
    arguments; returns where it was found."""
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
        name, required = interface
        missing = [m for m in required if m not in methods]
        if missing:
            raise UnknownClassError(
                f"class {dotted!r} lacks method(s) {', '.join(missing)} of {name}",
                class_name=dotted,
            )
    _check_constructor(methods.get("__init__"), dotted, args)
    return found


def _own_interface(
    source: ModuleSource, name: str, limits: Limits
) -> tuple[str, tuple[str, ...]] | None:
    """The interface ``name`` as the module's own source defines it: (its class name, its
    public method names), or None when the module has no code file for it (it resolves
    nowhere then). Raises :class:`~juggle.errors.UnknownInterfaceError` when that file
    defines no such class."""
    module_path, _, attr = name.rpartition(".")
    reader = _Reader(source, None, limits)
    rel = reader.locate(module_path) if module_path else None
    if rel is None:
        return None
    found = _find_class(reader, rel, attr, limits)
    if found is None:
        raise UnknownInterfaceError(
            f"interface {name!r}: the module's {reader.show(rel)} defines no class {attr!r}",
            path=reader.show(rel),
            interface=name,
        )
    methods = tuple(m for m in _methods(found, limits) if not m.startswith("_"))
    return attr, methods


def _literal_design(found: _Found, limits: Limits, hops: int = 0) -> str | None:
    """The string a register model class (or a base found in source) assigns to ``design``
    in its body, or None when no non-empty string literal is assigned there."""
    for item in reversed(found.node.body):
        value: ast.expr | None = None
        if (
            isinstance(item, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "design" for t in item.targets)
        ) or (
            isinstance(item, ast.AnnAssign)
            and isinstance(item.target, ast.Name)
            and item.target.id == "design"
        ):
            value = item.value
        if value is not None:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value or None  # "": RegisterModel's own, no design named
            return None
    for base in found.node.bases:
        if hops < _MAX_HOPS and isinstance(base, ast.Name):
            parent = _find_class(found.reader, found.file, base.id, limits)
            if parent is not None:
                return _literal_design(parent, limits, hops + 1)
    return None


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
            interface: tuple[str, tuple[str, ...]] | None = None
            try:
                known = catalog.resolve(spec.interfaces[0])
                interface = (known.__name__, tuple(m.name for m in interface_methods(known)))
            except UnknownInterfaceError:
                interface = _own_interface(source, spec.interfaces[0], limits)
                if interface is None:
                    raise
            for tier in ("software", "native"):
                impl = getattr(spec, tier)
                if impl is not None:
                    _check_class(source, impl.class_, f"{tier} class", interface, 0, limits)
            bitstreams: dict[str, dict[str, Any]] = {}
            if spec.hardware is not None:
                _check_class(source, spec.hardware.driver, "driver", interface, 1, limits)
                model_design: str | None = None
                if spec.hardware.model:
                    found = _check_class(source, spec.hardware.model, "model", None, 0, limits)
                    model_design = _literal_design(found, limits)
                bitstreams = _check_hardware(source, spec, fabric, limits)
                for region, entry in bitstreams.items():
                    if model_design is not None and model_design != entry["design"]:
                        raise ModelRegistrationError(
                            f"model {spec.hardware.model!r} is of design {model_design!r}, "
                            f"but the bitstream for {region} carries design "
                            f"{entry['design']!r}: the fabric would find no model for it",
                            design=entry["design"],
                            value=model_design,
                        )
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
    fabric: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    trusted_keys: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Check the module at ``path`` against board ``fabric`` without running its code (the
    report's ``imported`` is False: to run it too, install it in a throwaway framework, as
    ``juggle module validate --import`` does). ``fabric`` None: the board the descriptor
    records (``[module] board``), else :data:`DEFAULT_FABRIC`; the report's ``fabric`` names
    the board checked and ``fabric_from`` where it came from (``argument``, ``descriptor``,
    ``default``). With ``trusted_keys`` (as :class:`juggle.Framework` takes them) the module
    must be signed by one of them, as such a framework would require.

    Raises the :class:`~juggle.errors.JuggleError` an install would raise, naming the value.
    """
    trusted = load_public_keys(trusted_keys) if trusted_keys is not None else None
    source = ModuleSource.open(path, limits)
    descriptor, signer = source.authenticate(trusted)
    if fabric is not None:
        board, board_from = fabric, "argument"
    elif descriptor.module.board is not None:
        board, board_from = descriptor.module.board, "descriptor"
    else:
        board, board_from = DEFAULT_FABRIC, "default"
    services = _static(source, descriptor, board, limits)
    report: dict[str, Any] = {
        "name": descriptor.module.name,
        "version": descriptor.module.version,
        "fabric": board,
        "fabric_from": board_from,
        "format": descriptor.format,
        "services": services,
        "pinned": sorted(descriptor.pins),
        "signed_by": signer,
        "imported": False,
        "valid": True,
    }
    return report
