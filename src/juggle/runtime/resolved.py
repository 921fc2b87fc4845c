"""What installing a module resolved: each service's interface, classes and hardware.

Installing reads a module's descriptor and code once (:mod:`juggle.runtime.installer`); what
it found for each service is a :class:`ResolvedService`, frozen, so starting the module later
builds its services from settled values. A service's hardware module is a :class:`Hardware`:
its driver class, a bitstream per region, its resource needs and the pinned files to check
again before each program (:class:`PinnedFile`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from juggle.errors import IntegrityError, JuggleError
from juggle.fabric.bitstream import Bitstream
from juggle.fabric.fabric import Fabric
from juggle.fabric.region import ProgramReport
from juggle.fabric.resources import Resources
from juggle.runtime.descriptors import ServiceSpec
from juggle.runtime.integrity import sha256_of

__all__ = ["Hardware", "PinnedFile", "ResolvedService"]


class PinnedFile:
    """A module file verified against its ``sha256`` pin; :meth:`check` hashes it again only
    when the file (or the archive holding it) changed on disk since (``stat``: size, mtime,
    inode), so the check before every program costs a ``stat`` while nothing changes."""

    __slots__ = ("_read", "_seen", "digest", "path", "shown")

    def __init__(self, path: Path, shown: str, digest: str, read: Callable[[], bytes]) -> None:
        self.path = path  # the file, or the archive holding it
        self.shown = shown
        self.digest = digest
        self._read = read
        self._seen = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns, st.st_ino)

    def check(self) -> None:
        """Raises :class:`~juggle.errors.IntegrityError` naming the file and both digests."""
        now = self._stat()
        if now is not None and now == self._seen:
            return
        try:
            actual = sha256_of(self._read())
        except JuggleError as exc:
            raise IntegrityError(
                f"pinned file {self.shown!r} cannot be checked: {exc}", path=self.shown
            ) from exc
        if actual != self.digest:
            raise IntegrityError(
                f"pinned file {self.shown!r} changed since install: sha256 {actual}, "
                f"pinned {self.digest}",
                path=self.shown,
            )
        self._seen = now


@dataclass(slots=True)
class Hardware:
    """A service's hardware module: driver class, bitstream per region, resource needs, and
    the pinned files to check again before each program.

    ``resources`` are the service's needs, ``resources_origin`` where they come from:
    ``"synthesized"`` (the module's synthesis report of the design's RTL, ``resources.json``)
    or ``"declared"`` (the descriptor's table, else the register model's figures); None when
    there are none. ``region_resources`` holds each region's own, when its bitstream's design
    differs. ``engines`` says, per design, what runs it on the fabric installed on (``"rtl"``,
    ``"model"`` or ``"fpga"``; see :meth:`Fabric.engine_of
    <juggle.fabric.fabric.Fabric.engine_of>`). ``rtl_pins`` are the pinned Verilog files the
    fabric simulates, checked again before each program like the bitstreams.
    """

    driver: type
    bitstreams: dict[str, tuple[Bitstream, bytes]]
    resources: Resources | None
    pinned: dict[str, PinnedFile] = field(default_factory=dict)
    resources_origin: str | None = None
    region_resources: dict[str, Resources | None] = field(default_factory=dict)
    engines: Mapping[str, str] = field(default_factory=dict)
    rtl_pins: tuple[PinnedFile, ...] = ()

    def resources_for(self, region: str) -> Resources | None:
        """The resource needs of the design programmed into ``region``."""
        return self.region_resources.get(region, self.resources)

    def engine_on(self, fabric: Fabric) -> str:
        """What runs this hardware on ``fabric`` now: ``"rtl"`` when every design it programs
        runs as RTL, else the engine of the first that does not (``"model"``, ``"fpga"``)."""
        engines = [fabric.engine_of(bitstream.design) for bitstream, _ in self.bitstreams.values()]
        return next((e for e in engines if e != "rtl"), "rtl")

    def program(self, fabric: Fabric, region: str, *, owner: str) -> ProgramReport:
        """Program ``region``'s bitstream (with these resource needs) into it: the one way a
        service's design is loaded, whoever places the service. Raises
        :class:`~juggle.errors.IntegrityError`, before the fabric is touched, if the pinned
        file of that bitstream, or a pinned Verilog file, changed since it was verified (the
        module on disk was tampered with), else what :meth:`Fabric.program
        <juggle.fabric.fabric.Fabric.program>` raises."""
        pinned = self.pinned.get(region)
        if pinned is not None:
            pinned.check()
        for source in self.rtl_pins:
            source.check()
        bitstream, data = self.bitstreams[region]
        return fabric.program(
            region, bitstream, data, resources=self.resources_for(region), owner=owner
        )


@dataclass(frozen=True, slots=True)
class ResolvedService:
    """One service of an installed module as its code resolved: the descriptor's ``spec``,
    the ``interface`` class its proxies implement, its ``classes`` by software tier
    (``software``, ``native``) and its ``hardware`` (None: no hardware tier)."""

    spec: ServiceSpec
    interface: type
    classes: Mapping[str, type]
    hardware: Hardware | None
