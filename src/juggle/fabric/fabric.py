"""The fabric facade: one board's regions, its manager and bridges, behind one object.

The runtime sees the FPGA through a :class:`Fabric`: it checks a bitstream against a region
without touching anything (:meth:`Fabric.check`), programs and unloads regions
(:meth:`Fabric.program`, :meth:`Fabric.unload`), hands out the MMIO window of a loaded design
(:meth:`Fabric.window`) and reports snapshots. The backend (``"sim"`` or ``"linux"``) only
supplies operation tables; the order of steps and the rollback live in
:mod:`juggle.fabric.region`.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from juggle.errors import (
    BackendError,
    BitstreamFormatError,
    BitstreamTooLargeError,
    FabricError,
    ModelRegistrationError,
    NotPartialError,
    PartMismatchError,
    RegionMismatchError,
    ResourceError,
)
from juggle.fabric.backend import Backend
from juggle.fabric.bitstream import Bitstream, parse_any, same_part
from juggle.fabric.bridge import Bridge
from juggle.fabric.faults import FaultInjector
from juggle.fabric.manager import FpgaManager, ManagerStatistics
from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import BoardProfile, load_profile
from juggle.fabric.region import FpgaRegion, ProgramReport, RegionStatus
from juggle.fabric.resources import Resources
from juggle.fabric.sim.backend import SimBackend
from juggle.fabric.sim.catalog import ModelCatalog
from juggle.fabric.sim.clock import ModelClock

if TYPE_CHECKING:
    from juggle.fabric.rtl.catalog import RtlCatalog, RtlDesign

__all__ = ["Fabric", "FabricStatistics", "open_fabric"]

BACKENDS = ("sim", "rtl", "linux")


@dataclass(frozen=True, slots=True)
class FabricStatistics:
    """A snapshot of a fabric. ``clock_ns`` and the ``modeled_*`` totals are MODELED."""

    board: str
    backend: str
    clock_ns: int
    programs: int
    failed_programs: int
    unloads: int
    bytes_programmed: int
    modeled_reconfiguration_ms: float
    modeled_bridge_ms: float
    manager: ManagerStatistics
    regions: tuple[RegionStatus, ...]


#: How many program files the fabric remembers as checked (see ``Fabric._describes``).
_VERIFIED_FILES = 32


class Fabric:
    """A board's reconfigurable fabric, driven through ``backend``'s operation tables."""

    def __init__(
        self, profile: BoardProfile, backend: Backend, clock: ModelClock, models: ModelCatalog
    ) -> None:
        self.profile = profile
        self.clock = clock
        self.models = models
        self._backend = backend
        self._manager = FpgaManager(backend.manager_ops())
        self._regions = {
            r.name: FpgaRegion(
                r, profile, self._manager, Bridge(r.name, backend.bridge_ops(r)), backend
            )
            for r in profile.regions
        }
        self._lock = threading.Lock()
        self._programs = 0
        self._failed = 0
        self._unloads = 0
        self._bytes = 0
        self._reconfig_ms = 0.0
        self._bridge_ms = 0.0
        self._closed = False
        # immutable files already checked against their parsed header: id -> (file, header)
        self._verified: OrderedDict[int, tuple[bytes, Bitstream]] = OrderedDict()
        # design -> the RTL registered for it, oldest first: (owner, entry); owner None is what
        # the catalog held before any module (built in, or added by hand)
        self._rtl_layers: dict[str, list[tuple[str | None, RtlDesign]]] = {}
        self._rtl_lock = threading.Lock()

    @property
    def backend(self) -> str:
        """The backend's name (``"sim"``, ``"linux"``)."""
        return self._backend.name

    @property
    def faults(self) -> FaultInjector:
        """The fault injector (simulated backend only).

        Raises :class:`~juggle.errors.BackendError` on a backend without fault injection.
        """
        faults = self._backend.faults
        if faults is None:
            raise BackendError(
                f"backend {self.backend!r} offers no fault injection", value=self.backend
            )
        return faults

    @property
    def manager(self) -> FpgaManager:
        """The device's FPGA manager (one configuration port for all regions)."""
        return self._manager

    # -- RTL (the ``rtl`` backend) ------------------------------------------------------------

    @property
    def simulates_rtl(self) -> bool:
        """Whether this fabric runs designs as RTL where it has their Verilog (backend
        ``rtl``)."""
        return self._rtl_catalog() is not None

    def _rtl_catalog(self) -> RtlCatalog | None:
        if self._backend.name != "rtl":
            return None
        from juggle.fabric.rtl.backend import RtlBackend

        return self._backend.rtl if isinstance(self._backend, RtlBackend) else None

    def engine_of(self, design: str) -> str:
        """What executes ``design``'s hardware calls here: ``"rtl"`` (its Verilog, in a
        simulator), ``"model"`` (its Python register model, on a simulated board) or
        ``"fpga"`` (a real device: the ``linux`` backend)."""
        catalog = self._rtl_catalog()
        if catalog is not None and design in catalog:
            return "rtl"
        return "fpga" if self.backend == "linux" else "model"

    def add_rtl(
        self,
        design: str,
        sources: Iterable[str | Path],
        top: str,
        *,
        bus: str = "regbus",
        owner: str,
        replacing: str | None = None,
    ) -> RtlDesign:
        """Let ``owner`` (a module) provide ``design``'s Verilog: ``sources`` in compile order,
        top module ``top`` speaking ``bus``. Its simulator is built (or found in the build
        cache, by the sources' hash) when a region is programmed with the design.

        While ``owner`` holds it, it replaces what the catalog held for the design (juggle's
        built-in RTL, say); :meth:`release_rtl` gives that back. ``replacing`` names an owner
        whose entry may be taken over (the same module being updated). Raises
        :class:`~juggle.errors.BackendError` on a fabric that runs no RTL and
        :class:`~juggle.errors.ModelRegistrationError` when another module provides the
        design's RTL, or as :meth:`RtlCatalog.add <juggle.fabric.rtl.catalog.RtlCatalog.add>`
        for a malformed entry (nothing changed).
        """
        catalog = self._rtl_catalog()
        if catalog is None:
            raise BackendError(
                f"fabric {self.profile.name!r} (backend {self.backend!r}) runs no RTL: "
                f"the RTL of design {design!r} cannot be added",
                design=design,
                value=self.backend,
            )
        with self._rtl_lock:
            layers = self._rtl_layers.get(design, [])
            current = layers[-1][0] if layers else None
            if current is not None and current not in (owner, replacing):
                raise ModelRegistrationError(
                    f"the RTL of design {design!r} is provided by {current}; {owner} cannot "
                    "replace it",
                    design=design,
                )
            before = catalog.find(design)
            entry = _add_to(catalog, design, tuple(sources), top, bus)
            if not layers and before is not None:
                layers.append((None, before))
            if current == owner:
                layers[-1] = (owner, entry)
            else:
                layers.append((owner, entry))
            self._rtl_layers[design] = layers
        return entry

    def release_rtl(self, owner: str) -> tuple[str, ...]:
        """Forget every RTL entry ``owner`` added (what each replaced is back); returns their
        designs."""
        catalog = self._rtl_catalog()
        if catalog is None:
            return ()
        released = []
        with self._rtl_lock:
            for design, layers in list(self._rtl_layers.items()):
                mine = [i for i, (who, _) in enumerate(layers) if who == owner]
                if not mine:
                    continue
                released.append(design)
                was_top = mine[-1] == len(layers) - 1
                for i in reversed(mine):
                    del layers[i]
                if was_top:
                    if layers:
                        previous = layers[-1][1]
                        _add_to(
                            catalog,
                            design,
                            previous.sources,
                            previous.top,
                            previous.bus,
                            like=previous,
                        )
                    elif design in catalog:
                        catalog.remove(design)
                if not layers or (len(layers) == 1 and layers[0][0] is None):
                    del self._rtl_layers[design]
        return tuple(released)

    def rtl_of(self, design: str) -> RtlDesign | None:
        """The RTL that runs ``design`` here now (None: it has none, or this fabric runs no
        RTL)."""
        catalog = self._rtl_catalog()
        return catalog.find(design) if catalog is not None else None

    def rtl_owner(self, design: str) -> str | None:
        """The owner (module) whose RTL of ``design`` runs now (None: none, or juggle's own)."""
        with self._rtl_lock:
            layers = self._rtl_layers.get(design)
            return layers[-1][0] if layers else None

    # -- regions -------------------------------------------------------------------------------

    def region_names(self) -> tuple[str, ...]:
        """The regions' names, in profile order."""
        return tuple(self._regions)

    def region(self, name: str) -> FpgaRegion:
        """The region called ``name``. Raises :class:`~juggle.errors.UnknownRegionError`."""
        found = self._regions.get(name) if type(name) is str else None
        if found is not None:
            return found
        return self._regions[self.profile.region(name).name]  # raises, naming the regions

    def check(
        self,
        bitstream: Bitstream,
        region: str,
        resources: Resources | None = None,
        *,
        design: bool = True,
        figures: str | None = None,
    ) -> None:
        """Whether ``bitstream`` (needing ``resources``) may go into ``region``; changes nothing.
        ``design=False`` leaves out the backend's check of the design itself (a module's own
        simulated core, not yet known to the backend). ``figures`` says where ``resources``
        come from (``"synthesized"``, ``"declared"``), for the message of a refusal.

        Raises, in this order: :class:`~juggle.errors.UnknownRegionError`,
        :class:`~juggle.errors.PartMismatchError`, :class:`~juggle.errors.RegionMismatchError`
        (a ``Region=`` tag naming another region; no tag is fine: Vivado writes none, the
        region comes from the module's per-region bitstream table),
        :class:`~juggle.errors.NotPartialError` (a full-device image),
        :class:`~juggle.errors.BitstreamTooLargeError`, :class:`~juggle.errors.ResourceError`,
        then the backend's refusal (:class:`~juggle.errors.UnknownDesignError` on the
        simulator; :class:`~juggle.errors.DfxPackageError` on Linux for a dfx-mgr slot whose
        overlay is malformed), each naming the values that disagree.
        """
        target = self.region(region).profile
        board_part = self.profile.board.part
        # a headerless .bin/.pdi names no part: the manager checks the device's IDCODE
        if bitstream.part and not same_part(bitstream.part, board_part):
            raise PartMismatchError(
                f"bitstream {bitstream.source!r} is built for part {bitstream.part!r}, "
                f"board {self.profile.name!r} is {board_part!r}",
                path=bitstream.source,
                field="part",
            )
        if bitstream.region is not None and bitstream.region != region:
            raise RegionMismatchError(
                f"bitstream {bitstream.source!r} is built for region {bitstream.region!r}, "
                f"not {region!r}",
                region=region,
                path=bitstream.source,
            )
        if bitstream.partial is False:
            raise NotPartialError(
                f"bitstream {bitstream.source!r} is a full-device image (its design field "
                f"{bitstream.design_field!r} carries no PARTIAL=TRUE), region {region!r} "
                "takes a partial",
                region=region,
                path=bitstream.source,
                field="design",
            )
        if bitstream.size > target.max_bitstream_bytes:
            raise BitstreamTooLargeError(
                f"bitstream {bitstream.source!r} is {bitstream.size} bytes, region {region!r} "
                f"takes at most {target.max_bitstream_bytes}",
                region=region,
                path=bitstream.source,
            )
        if resources is not None and not resources.fits_in(target.resources):
            label = f" ({figures} figures)" if figures else ""
            raise ResourceError(
                f"design {bitstream.design!r}{label} does not fit region {region!r}: "
                f"{resources.describe_shortfall(target.resources)}",
                region=region,
                design=bitstream.design,
            )
        # a backend whose kernel takes some formats only (Linux: a ZynqMP manager takes no
        # .pdi) refuses the others here, before anything is written
        self._backend.check_bitstream(bitstream)
        if design:
            self._backend.check_design(bitstream.design, target)
            # what the bitstream's file brings beside it (Linux: a dfx-mgr slot's overlay)
            self._backend.describe(bitstream, target)

    def program(
        self,
        region: str,
        bitstream: Bitstream,
        data: bytes,
        *,
        resources: Resources | None = None,
        owner: str | None = None,
    ) -> ProgramReport:
        """Check, then program ``data`` (the whole file ``bitstream`` describes) into ``region``.

        Steps, in order: take region, close bridge, write through the manager, open bridge,
        attach the design's window. Raises what :meth:`check` raises (nothing changed),
        :class:`~juggle.errors.BitstreamFormatError` if ``data`` is not the file ``bitstream``
        was parsed from (nothing changed), :class:`~juggle.errors.RegionBusyError`, and the
        failing step's error; a failure before the write leaves the previous design loaded,
        one from the write on leaves the region in ERROR (see :mod:`juggle.fabric.region`).
        """
        self._check_open()
        self.check(bitstream, region, resources)
        if not self._describes(bitstream, data):
            raise BitstreamFormatError(
                f"data ({len(data)} bytes) is not the file {bitstream.source!r} describes "
                f"({bitstream.size} bytes)",
                path=bitstream.source,
            )
        try:
            report = self.region(region).program(bitstream, data, resources=resources, owner=owner)
        except FabricError:
            with self._lock:
                self._failed += 1
            raise
        with self._lock:
            self._programs += 1
            self._bytes += report.bytes
            self._reconfig_ms += report.reconfiguration_ms
            self._bridge_ms += report.bridge_ms
        return report

    def _describes(self, bitstream: Bitstream, data: bytes) -> bool:
        """Whether ``data`` is the file ``bitstream`` was parsed from. An immutable ``bytes``
        checked once (parsed and hashed) is not checked again while it is remembered."""
        cacheable = type(data) is bytes
        if cacheable:
            with self._lock:
                seen = self._verified.get(id(data))
                if (
                    seen is not None
                    and seen[0] is data
                    and (seen[1] is bitstream or seen[1] == bitstream)
                ):
                    self._verified.move_to_end(id(data))
                    return True
        if parse_any(data, source=bitstream.source) != bitstream:
            return False
        if cacheable:
            with self._lock:
                self._verified[id(data)] = (data, bitstream)
                if len(self._verified) > _VERIFIED_FILES:
                    self._verified.popitem(last=False)
        return True

    def unload(self, region: str) -> ProgramReport:
        """Close ``region``'s bridge and forget its design (EMPTY afterwards).

        Raises :class:`~juggle.errors.UnknownRegionError`, :class:`~juggle.errors.RegionBusyError`
        and :class:`~juggle.errors.BridgeError` (nothing changed).
        """
        self._check_open()
        report = self.region(region).unload()
        with self._lock:
            self._unloads += 1
            self._bridge_ms += report.bridge_ms
        return report

    def quarantine(self, region: str, reason: str) -> None:
        """Isolate ``region``, whose core failed: ERROR (``quarantined`` in its snapshot) until
        unloaded or programmed again; the runtime keeps it out of use until recovered.

        Raises :class:`~juggle.errors.UnknownRegionError` and
        :class:`~juggle.errors.RegionBusyError`.
        """
        self._check_open()
        self.region(region).quarantine(reason)

    def discard(self, region: str, reason: str) -> None:
        """Drop the design in ``region`` that nobody serves from, when unloading it failed:
        ERROR naming ``reason``, not quarantined (programming again recovers it).

        Raises :class:`~juggle.errors.UnknownRegionError` and
        :class:`~juggle.errors.RegionBusyError`.
        """
        self._check_open()
        self.region(region).discard(reason)

    def window(self, region: str) -> MMIO:
        """The MMIO window of the design loaded in ``region``.

        Raises :class:`~juggle.errors.UnknownRegionError`, :class:`~juggle.errors.RegionBusyError`
        while it is programmed and :class:`~juggle.errors.RegionEmptyError` when it holds none.
        """
        return self.region(region).window()

    def regions(self) -> tuple[RegionStatus, ...]:
        """Snapshots of every region, in profile order."""
        return tuple(r.snapshot() for r in self._regions.values())

    def statistics(self) -> FabricStatistics:
        """A frozen snapshot of the fabric."""
        with self._lock:
            counters = (
                self._programs,
                self._failed,
                self._unloads,
                self._bytes,
                self._reconfig_ms,
                self._bridge_ms,
            )
        return FabricStatistics(
            self.profile.name,
            self.backend,
            self.clock.now_ns,
            *counters,
            manager=self._manager.statistics(),
            regions=self.regions(),
        )

    def close(self) -> None:
        """Release the backend (windows, files). Later programs raise BackendError."""
        if not self._closed:
            self._closed = True
            self._backend.close()

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError(f"fabric {self.profile.name!r} is closed")

    def __enter__(self) -> Fabric:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{s.name}={s.state}" + (f"({s.design})" if s.design else "") for s in self.regions()
        )
        return (
            f"<Fabric {self.profile.name} on {self.backend}: {parts}; "
            f"clock {self.clock.now_ns / 1e6:.3f} ms modeled>"
        )


def _add_to(
    catalog: RtlCatalog,
    design: str,
    sources: tuple[str | Path, ...],
    top: str,
    bus: str,
    *,
    like: RtlDesign | None = None,
) -> RtlDesign:
    """``catalog.add`` of ``design`` on ``bus`` (with the window size and result registers of
    ``like``, an entry put back)."""
    if like is None:
        return catalog.add(design, sources, top, bus=bus)
    return catalog.add(
        design,
        sources,
        top,
        bus=bus,
        window_size=like.window_size,
        result_offsets=like.result_offsets,
    )


def open_fabric(
    profile: str | Path | BoardProfile = "xupv2p",
    *,
    backend: str = "sim",
    pace: bool = False,
    models: ModelCatalog | None = None,
    **backend_options: Any,
) -> Fabric:
    """Open a board's fabric: a built-in profile name, a profile path, or a loaded profile.

    ``backend="sim"`` simulates the board (``pace=True`` keeps the modeled clock in step with
    the wall clock); ``backend="rtl"`` simulates it with the cores' Verilog behind the windows
    (:class:`~juggle.fabric.rtl.RtlBackend`, options as its constructor's);
    ``backend="linux"`` drives the kernel's FPGA Manager, bridges and UIO
    under ``root=`` (see :func:`juggle.fabric.linux.open_linux_backend` for its options).
    ``models`` defaults to :meth:`ModelCatalog.builtin`.
    Raises :class:`~juggle.errors.ProfileError` for a bad profile and
    :class:`~juggle.errors.BackendError` for an unknown backend or option.
    """
    board = profile if isinstance(profile, BoardProfile) else load_profile(profile)
    catalog = models if models is not None else ModelCatalog.builtin()
    clock = ModelClock(pace=pace)
    impl: Backend
    if backend == "sim":
        if backend_options:
            raise BackendError(f"backend 'sim' takes no options, got {sorted(backend_options)}")
        impl = SimBackend(board, clock, catalog)
    elif backend == "rtl":
        from juggle.fabric.rtl import RtlBackend

        allowed = set(inspect.signature(RtlBackend).parameters) - {"profile", "clock", "models"}
        unknown = sorted(set(backend_options) - allowed)
        if unknown:
            raise BackendError(
                f"backend 'rtl' has no option(s) {unknown} (options: {sorted(allowed)})",
                value=unknown[0],
            )
        impl = RtlBackend(board, clock, catalog, **backend_options)
    elif backend == "linux":
        from juggle.fabric.linux.backend import open_linux_backend

        allowed = set(inspect.signature(open_linux_backend).parameters) - {"profile"}
        unknown = sorted(set(backend_options) - allowed)
        if unknown:
            raise BackendError(
                f"backend 'linux' has no option(s) {unknown} (options: {sorted(allowed)})",
                value=unknown[0],
            )
        impl = open_linux_backend(board, **backend_options)
    else:
        raise BackendError(
            f'"backend" must be one of {", ".join(BACKENDS)}, got {backend!r}', value=backend
        )
    return Fabric(board, impl, clock, catalog)
