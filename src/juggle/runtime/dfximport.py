"""``juggle module import-dfx``: an AMD dfx-mgr package becomes the hardware tier of a co-module.

Module tooling, beside :mod:`juggle.runtime.validate` and :mod:`juggle.runtime.integrity`: the
fabric reads the package (:func:`juggle.fabric.linux.dfxmgr.read_package`), this writes the
``juggle.toml`` whose per-region bitstream table names each slot's partial, checked by the
runtime's own descriptor parser before anything is written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from juggle.errors import DescriptorError, DfxPackageError
from juggle.fabric.linux.dfxmgr import read_package
from juggle.runtime.descriptors import parse_toml

__all__ = ["import_package"]

_MODULE_NAME: Final = re.compile(r"[^a-z0-9_\-]+")


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string for these characters


def import_package(
    package: str | Path,
    *,
    interface: str,
    driver: str,
    accel: str | None = None,
    regions: Mapping[int, str] | Sequence[str] | None = None,
    target_dir: str | Path | None = None,
    name: str | None = None,
    version: str = "1.0.0",
    software: str | None = None,
    native: str | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Write ``juggle.toml`` in ``target_dir`` (the package folder by default) making the
    package's accelerator ``accel`` (the only one by default) the hardware tier of a co-module:
    ``interface`` served by ``driver`` (and ``software``/``native`` classes when given), with
    a bitstream per region, slot N's partial for the region ``regions`` maps N to.

    Everything is checked before the file is written: the package (:func:`read_package`), the
    paths (inside ``target_dir``) and the descriptor itself (``parse_toml``); an existing
    ``juggle.toml`` is replaced only with ``force``. Returns a report (path, module, regions).
    """
    pkg = read_package(package, regions=regions)
    if accel is None:
        if len(pkg.accels) != 1:
            raise DfxPackageError(
                f"{pkg.folder}: holds accelerators {sorted(pkg.accels)}; name one (--accel)",
                path=str(pkg.folder),
                field="accel",
            )
        accel = next(iter(pkg.accels))
    chosen = pkg.accel(accel)
    if not chosen.slots:
        raise DfxPackageError(
            f"{pkg.folder}: accelerator {accel!r} has no <accel>_slot<N> folder",
            path=str(pkg.folder),
            field=accel,
        )
    root = Path(target_dir) if target_dir is not None else pkg.folder
    root_resolved = root.resolve()
    bitstreams: dict[str, str] = {}
    for slot, spec in sorted(chosen.slots.items()):
        region = pkg.shell.slots[slot].region
        try:
            rel = spec.partial.resolve().relative_to(root_resolved)
        except ValueError:
            raise DescriptorError(
                f"partial {spec.partial} is outside the module folder {root}; put the package "
                "inside it",
                path=str(spec.partial),
            ) from None
        bitstreams[region] = rel.as_posix()
    module = name or _MODULE_NAME.sub("-", accel.lower()).strip("-_") or "dfx"
    lines = [
        f"# written by `juggle module import-dfx` from the dfx-mgr package {pkg.name}",
        f"# (accelerator {accel}); each slot's overlay is the .dtbo beside its partial",
        "[module]",
        f"name = {_toml_string(module)}",
        f"version = {_toml_string(version)}",
        f"description = {_toml_string(f'dfx-mgr package {pkg.name}, accelerator {accel}')}",
        "",
        "[[services]]",
        f"interfaces = [{_toml_string(interface)}]",
        "",
    ]
    for tier, cls in (("software", software), ("native", native)):
        if cls:
            lines += [f"[services.{tier}]", f"class = {_toml_string(cls)}", ""]
    table = ", ".join(f"{_toml_string(r)} = {_toml_string(p)}" for r, p in bitstreams.items())
    lines += [
        "[services.hardware]",
        f"driver = {_toml_string(driver)}",
        f"bitstreams = {{ {table} }}",
        "",
    ]
    text = "\n".join(lines)
    target = root / "juggle.toml"
    parse_toml(text.encode("utf-8"), str(target))  # the descriptor validates, or nothing
    if target.exists() and not force:
        raise DescriptorError(f"{target} exists; pass --force to replace it", path=str(target))
    tmp = target.with_name(f".juggle.toml.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return {
        "path": str(target),
        "module": module,
        "package": pkg.name,
        "accel": accel,
        "bitstreams": bitstreams,
        "overlays": {
            pkg.shell.slots[s].region: (str(spec.overlay) if spec.overlay else None)
            for s, spec in sorted(chosen.slots.items())
        },
    }
