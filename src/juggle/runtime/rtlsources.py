"""A module's RTL: which Verilog files, top module and bus implement each design it names.

One resolution, used both by install (which registers the module's Verilog in an ``rtl``
fabric's catalog) and by ``juggle module build`` (which synthesizes it): for a design a
service's bitstreams name, :func:`module_rtl` looks, in order, at

1. the service's ``[services.hardware.rtl]`` table (``top``, ``sources``, ``bus``; a missing
   ``sources`` means every ``hdl/<design>/*.v`` of the module, sorted);
2. the module's ``hdl/<design>/*.v`` (sorted), top ``<design>_top``, juggle's register bus;
3. juggle's built-in RTL of that design (:data:`juggle.fabric.rtl.catalog.BUILTIN_RTL`).

The module's files are untrusted: each must be a file inside the module (no absolute path, no
``..``, no symlink out of it) and within ``Limits.max_source_bytes``, else a
:class:`~juggle.errors.DescriptorError` (or :class:`~juggle.errors.IntegrityError` /
:class:`~juggle.errors.InputLimitError`) names it. A module folder's Verilog is simulated where
it lies; an archive's is extracted (:meth:`DesignRtl.paths`) into a folder of the build cache
named by the sources' hash, so a simulator build finds it again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from juggle.errors import DescriptorError, ModuleError
from juggle.limits import check_size
from juggle.runtime.descriptors import RtlSpec
from juggle.runtime.integrity import inside
from juggle.runtime.modules import ModuleSource

__all__ = ["DesignRtl", "module_rtl", "module_sources_dir"]

#: the bus a top speaks when the module does not say
DEFAULT_BUS = "regbus"


def module_sources_dir() -> Path:
    """Where an archive module's Verilog is extracted: ``module-sources`` in the RTL build
    cache (``$XDG_CACHE_HOME/juggle/rtl``)."""
    from juggle.fabric.rtl.engine import default_cache_dir

    return default_cache_dir() / "module-sources"


@dataclass(frozen=True, slots=True)
class DesignRtl:
    """The RTL of one ``design``: its ``files`` in compile order (module-relative POSIX paths
    when ``origin`` is ``"module"``, absolute paths of juggle's package data when it is
    ``"builtin"``), its ``top`` module and the ``bus`` its ports speak."""

    design: str
    files: tuple[str, ...]
    top: str
    bus: str
    origin: Literal["module", "builtin"]

    def paths(self, source: ModuleSource, cache_dir: Path | None = None) -> tuple[Path, ...]:
        """The files on disk, in compile order: a module folder's own files, an archive's
        extracted under ``cache_dir`` (default :func:`module_sources_dir`), or juggle's own.

        Raises :class:`~juggle.errors.ModuleError` when the archive's files cannot be
        extracted, and what :meth:`ModuleSource.read_bytes` raises.
        """
        if self.origin == "builtin":
            return tuple(Path(f) for f in self.files)
        if not source.is_zip:
            return tuple(inside(source.root, f) for f in self.files)
        return _extracted(source, self.files, cache_dir or module_sources_dir())


def module_rtl(source: ModuleSource, rtl: RtlSpec | None, design: str) -> DesignRtl | None:
    """The RTL of ``design`` for a service of the module ``source`` whose hardware table has
    ``rtl`` (its ``[services.hardware.rtl]``, or None); None when neither the module nor juggle
    has any (the design runs on its register model).

    Raises :class:`~juggle.errors.DescriptorError` naming the file or folder when the table
    names a source the module lacks, or names no sources and the module has no
    ``hdl/<design>/*.v``; :class:`~juggle.errors.IntegrityError` for a source that leads out
    of the module; :class:`~juggle.errors.InputLimitError` for one over
    ``Limits.max_source_bytes``.
    """
    if rtl is not None:
        files = tuple(rtl.sources) if rtl.sources is not None else _hdl_folder(source, design)
        if not files:
            shown = source.display(f"hdl/{design}")
            raise DescriptorError(
                f"{source.display(source.descriptor)}: [services.hardware.rtl] names no "
                f"sources and the module has no Verilog of design {design!r} in {shown}/*.v",
                path=shown,
            )
        _check_files(source, files)
        return DesignRtl(design, files, rtl.top or f"{design}_top", rtl.bus, "module")
    files = _hdl_folder(source, design)
    if files:
        _check_files(source, files)
        return DesignRtl(design, files, f"{design}_top", DEFAULT_BUS, "module")
    from juggle.fabric.rtl.catalog import BUILTIN_RTL, HDL_ROOT

    builtin = BUILTIN_RTL.get(design)
    if builtin is None:
        return None
    sources, top = builtin
    return DesignRtl(design, tuple(str(HDL_ROOT / s) for s in sources), top, DEFAULT_BUS, "builtin")


def _hdl_folder(source: ModuleSource, design: str) -> tuple[str, ...]:
    """The module's ``hdl/<design>/*.v``, sorted (none: an empty tuple)."""
    folder = PurePosixPath("hdl", design)
    return tuple(
        sorted(
            name
            for name in source.files()
            if PurePosixPath(name).parent == folder and name.endswith(".v")
        )
    )


def _check_files(source: ModuleSource, files: tuple[str, ...]) -> None:
    """Each of ``files`` is a file of the module within ``Limits.max_source_bytes``."""
    maximum = source.limits.max_source_bytes
    for relpath in files:
        shown = source.display(relpath)
        if not source.exists(relpath):  # raises IntegrityError for a path out of the module
            raise DescriptorError(
                f"{source.display(source.descriptor)}: RTL source {relpath!r} is not a file of "
                f"the module ({shown})",
                path=shown,
            )
        if not source.is_zip:
            try:
                size = inside(source.root, relpath).stat().st_size
            except OSError as exc:
                raise ModuleError(f"cannot read {shown!r}: {exc}", path=shown) from exc
            check_size(shown, size, maximum, "max_source_bytes")
        # an archive's members are read (within the limit) when they are extracted


def _extracted(source: ModuleSource, files: tuple[str, ...], cache_dir: Path) -> tuple[Path, ...]:
    """``files`` of the archive module ``source``, written under ``cache_dir/<hash>/`` (the
    hash of their names and bytes; a folder written before is used as it is)."""
    contents = [(f, source.read_bytes(f, "max_source_bytes")) for f in files]
    digest = hashlib.sha256()
    for name, data in contents:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    target = cache_dir / digest.hexdigest()[:32]
    paths = tuple(target / name for name in files)
    if all(p.is_file() for p in paths):
        return paths
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".extract-", dir=cache_dir))
        try:
            for name, data in contents:
                path = work / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            try:
                os.rename(work, target)
            except OSError:  # written meanwhile by another install, or left half-written
                if not all(p.is_file() for p in paths):
                    shutil.rmtree(target, ignore_errors=True)
                    os.rename(work, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    except OSError as exc:
        where = str(source.location)
        raise ModuleError(
            f"the Verilog of archive {where!r} cannot be extracted into {str(cache_dir)!r}: {exc}",
            path=where,
        ) from exc
    return paths
