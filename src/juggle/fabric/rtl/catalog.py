"""The RTL catalog: which Verilog sources and top module implement a design.

Like :class:`~juggle.fabric.sim.catalog.ModelCatalog` for register models, an
:class:`RtlCatalog` maps the design name a bitstream carries (``"tdes"``) to an
:class:`RtlDesign`: its source files, its top module and the bus that top speaks (one of
:data:`BUSES`): juggle's register bus (``clk``, ``rst_n``, ``bus_addr[15:0]``,
``bus_wdata[31:0]``, ``bus_we``, ``bus_re``, ``bus_rdata[31:0]``; timing in
``juggle/services/hdl/common/jg_regbus.v``) or an AXI4-Lite slave (``s_axi_*``). Both are
specified, cycle by cycle, in ``docs/rtl.md``.

:meth:`RtlCatalog.builtin` registers juggle's reference cores, whose sources ship as package
data in ``juggle/services/hdl/``; :meth:`RtlCatalog.add` registers a module's own ``hdl/``.
Each catalog is its own object: no global registry.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from juggle.errors import ModelRegistrationError, UnknownDesignError

__all__ = ["BUILTIN_RTL", "BUSES", "HDL_ROOT", "RtlCatalog", "RtlDesign"]

#: The buses a design's top module may speak.
BUSES = ("regbus", "axi4-lite")

#: Where the reference cores' Verilog lives (package data of :mod:`juggle.services`).
HDL_ROOT = Path(__file__).resolve().parents[2] / "services" / "hdl"

_BUS = "common/jg_regbus.v"
_DES = "des/des_core.v"

#: design -> (sources relative to :data:`HDL_ROOT`, top module) of the reference cores.
BUILTIN_RTL: Mapping[str, tuple[tuple[str, ...], str]] = {
    "des": ((_BUS, _DES, "des/des_top.v"), "des_top"),
    "tdes": ((_BUS, _DES, "tdes/tdes_top.v"), "tdes_top"),
    "adder": ((_BUS, "arith/arith_core.v", "adder/adder_top.v"), "adder_top"),
    "multiplier": ((_BUS, "arith/arith_core.v", "multiplier/multiplier_top.v"), "multiplier_top"),
    "adpcm": ((_BUS, "adpcm/adpcm_core.v", "adpcm/adpcm_top.v"), "adpcm_top"),
    "aes": ((_BUS, "aes/aes_core.v", "aes/aes_top.v"), "aes_top"),
}

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


@dataclass(frozen=True, slots=True)
class RtlDesign:
    """One design's RTL: ``sources`` (absolute paths, in compile order), ``top`` and the
    ``bus`` it speaks (one of :data:`BUSES`).

    ``window_size`` (bytes) and ``result_offsets`` (the registers a ``core_garbage`` fault
    corrupts) are ``None`` when the design's register model, if any, should supply them.
    """

    design: str
    sources: tuple[Path, ...]
    top: str
    window_size: int | None = None
    result_offsets: tuple[int, ...] | None = None
    bus: str = "regbus"


class RtlCatalog:
    """Design name -> :class:`RtlDesign`; thread-safe.

    Raises :class:`~juggle.errors.ModelRegistrationError` for a malformed entry and
    :class:`~juggle.errors.UnknownDesignError` for a design it does not hold.
    """

    def __init__(self, designs: Iterable[RtlDesign] = ()) -> None:
        self._designs: dict[str, RtlDesign] = {}
        self._lock = threading.Lock()
        for entry in designs:
            self.add(
                entry.design,
                entry.sources,
                entry.top,
                window_size=entry.window_size,
                result_offsets=entry.result_offsets,
                bus=entry.bus,
            )

    @classmethod
    def builtin(cls) -> RtlCatalog:
        """A new catalog holding juggle's reference cores (:data:`BUILTIN_RTL`)."""
        catalog = cls()
        for design, (sources, top) in BUILTIN_RTL.items():
            catalog.add(design, [HDL_ROOT / s for s in sources], top)
        return catalog

    def add(
        self,
        design: str,
        sources: Iterable[str | Path],
        top: str,
        *,
        window_size: int | None = None,
        result_offsets: Iterable[int] | None = None,
        bus: str = "regbus",
    ) -> RtlDesign:
        """Register (or replace) ``design`` as the Verilog ``sources`` with top module ``top``
        speaking ``bus``; returns the entry.

        Sources are compiled in the order given; each must be an existing file. Raises
        :class:`~juggle.errors.ModelRegistrationError` naming an empty design name, no or a
        missing source, a top that is not a Verilog identifier, a ``window_size`` /
        ``result_offsets`` that is not a positive multiple of 4 / a list of aligned offsets,
        or a ``bus`` not in :data:`BUSES`; the catalog is then unchanged.
        """
        if not isinstance(design, str) or not design:
            raise ModelRegistrationError(f'"design" must be a non-empty string, got {design!r}')
        paths = tuple(Path(s).resolve() for s in sources)
        if not paths:
            raise ModelRegistrationError(f"RTL of {design!r} names no source file", design=design)
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise ModelRegistrationError(
                f"RTL of {design!r}: source file(s) not found: {', '.join(missing)}",
                design=design,
                value=", ".join(missing),
            )
        if not isinstance(top, str) or not _IDENT_RE.fullmatch(top):
            raise ModelRegistrationError(
                f'RTL of {design!r}: "top" must be a Verilog module name, got {top!r}',
                design=design,
                value=top,
            )
        if window_size is not None and (
            isinstance(window_size, bool)
            or not isinstance(window_size, int)
            or window_size <= 0
            or window_size % 4
        ):
            raise ModelRegistrationError(
                f'RTL of {design!r}: "window_size" must be a positive multiple of 4, '
                f"got {window_size!r}",
                design=design,
                value=window_size,
            )
        offsets = None if result_offsets is None else tuple(result_offsets)
        if offsets is not None and any(
            isinstance(o, bool) or not isinstance(o, int) or o < 0 or o % 4 for o in offsets
        ):
            raise ModelRegistrationError(
                f'RTL of {design!r}: "result_offsets" must be 4-byte aligned offsets >= 0, '
                f"got {offsets!r}",
                design=design,
            )
        if bus not in BUSES:
            raise ModelRegistrationError(
                f'RTL of {design!r}: "bus" must be one of {", ".join(BUSES)}, got {bus!r}',
                design=design,
                value=bus if isinstance(bus, str) else None,
            )
        entry = RtlDesign(design, paths, top, window_size, offsets, bus)
        with self._lock:
            self._designs[design] = entry
        return entry

    def remove(self, design: str) -> None:
        """Forget ``design``. Raises :class:`~juggle.errors.UnknownDesignError` if unknown."""
        with self._lock:
            if self._designs.pop(design, None) is None:
                raise UnknownDesignError(f"RTL catalog has no design {design!r}", design=design)

    def get(self, design: str) -> RtlDesign:
        """The RTL of ``design``. Raises :class:`~juggle.errors.UnknownDesignError`."""
        with self._lock:
            entry = self._designs.get(design)
        if entry is None:
            known = ", ".join(self.designs()) or "none"
            raise UnknownDesignError(f"no RTL for design {design!r} (RTL: {known})", design=design)
        return entry

    def find(self, design: str) -> RtlDesign | None:
        """The RTL of ``design``, or ``None`` when it has none (it then runs as a model)."""
        with self._lock:
            return self._designs.get(design)

    def designs(self) -> tuple[str, ...]:
        """Registered design names, sorted."""
        with self._lock:
            return tuple(sorted(self._designs))

    def __contains__(self, design: object) -> bool:
        with self._lock:
            return design in self._designs

    def __repr__(self) -> str:
        return f"<RtlCatalog {', '.join(self.designs()) or 'empty'}>"
