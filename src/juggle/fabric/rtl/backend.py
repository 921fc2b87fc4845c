"""The ``rtl`` fabric backend: the simulated board, with cores running as RTL.

:class:`RtlBackend` is the simulated board of :class:`~juggle.fabric.sim.backend.SimBackend`
(same configuration port, bridges, modeled clock and fault injector) whose windows run the
design's RTL where the :class:`~juggle.fabric.rtl.catalog.RtlCatalog` has it: ``attach`` builds
the simulator for the design's bus (cached, see :mod:`juggle.fabric.rtl.engine`), starts it as a
child process speaking the engine's transport (shared memory for Verilator, pipes for Icarus;
:mod:`juggle.fabric.rtl.process`) and puts an :class:`~juggle.fabric.rtl.window.RtlWindow` over
it; ``detach`` and ``close`` stop it. A design without RTL runs as its Python register model,
exactly as on ``sim``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from juggle.errors import (
    BackendError,
    FabricError,
    ResourceError,
    WindowAttachError,
)
from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import BoardProfile, RegionProfile
from juggle.fabric.rtl.catalog import RtlCatalog, RtlDesign
from juggle.fabric.rtl.engine import Progress, VerilatorEngine, stderr_progress
from juggle.fabric.rtl.icarus import IcarusEngine
from juggle.fabric.rtl.window import RtlWindow
from juggle.fabric.sim.backend import SimBackend
from juggle.fabric.sim.catalog import ModelCatalog
from juggle.fabric.sim.clock import ModelClock
from juggle.fabric.sim.model import RegisterModel

__all__ = ["DEFAULT_ACCESS_TIMEOUT", "DEFAULT_HANDSHAKE_CYCLES", "RtlBackend"]

log = logging.getLogger("juggle.fabric.rtl")

#: Seconds one register access may take before the simulator counts as hung.
DEFAULT_ACCESS_TIMEOUT = 5.0

#: Clock cycles an AXI4-Lite handshake may wait before the core counts as hung.
DEFAULT_HANDSHAKE_CYCLES = 1024
_MAX_HANDSHAKE_CYCLES = 1_000_000


class RtlBackend(SimBackend):
    """The simulated board ``profile`` with RTL cores (``rtl``) behind its windows.

    ``models`` plays the designs that have no RTL and supplies window sizes and result
    registers; ``rtl`` defaults to :meth:`RtlCatalog.builtin`; ``engine`` to a
    :class:`~juggle.fabric.rtl.engine.VerilatorEngine` caching under ``cache_dir`` and
    reporting builds through ``progress``. ``access_timeout`` (seconds) bounds one register
    access; ``handshake_cycles`` (clock cycles) one AXI4-Lite handshake: a core that keeps a
    ready or valid low longer hangs, and the access raises
    :class:`~juggle.errors.CoreTimeoutError`. Raises :class:`~juggle.errors.BackendError` when
    no simulator can be found or an option is out of range (naming it).
    """

    name = "rtl"

    def __init__(
        self,
        profile: BoardProfile,
        clock: ModelClock,
        models: ModelCatalog,
        *,
        rtl: RtlCatalog | None = None,
        engine: VerilatorEngine | IcarusEngine | None = None,
        cache_dir: str | Path | None = None,
        progress: Progress | None = stderr_progress,
        access_timeout: float = DEFAULT_ACCESS_TIMEOUT,
        handshake_cycles: int = DEFAULT_HANDSHAKE_CYCLES,
    ) -> None:
        if not access_timeout > 0:
            raise BackendError(f'"access_timeout" must be > 0, got {access_timeout!r}')
        if (
            isinstance(handshake_cycles, bool)
            or not isinstance(handshake_cycles, int)
            or not 1 <= handshake_cycles <= _MAX_HANDSHAKE_CYCLES
        ):
            raise BackendError(
                f'"handshake_cycles" must be an int in 1..{_MAX_HANDSHAKE_CYCLES}, '
                f"got {handshake_cycles!r}",
                value=handshake_cycles if isinstance(handshake_cycles, int | float) else None,
            )
        super().__init__(profile, clock, models)
        self.rtl = rtl if rtl is not None else RtlCatalog.builtin()
        if engine is None:
            engine = VerilatorEngine(cache_dir=cache_dir, progress=progress)
        self.engine = engine
        self.access_timeout = access_timeout
        self.handshake_cycles = handshake_cycles

    # -- designs -------------------------------------------------------------------------------

    def runs_rtl(self, design: str) -> bool:
        """Whether ``design`` runs as RTL here (else as its register model)."""
        return design in self.rtl

    def prepare(self, designs: Iterable[str] | None = None, *, jobs: int = 1) -> dict[str, Path]:
        """Build (or find in the cache) the simulators of ``designs`` (default: every RTL
        design), ``jobs`` builds at a time; design -> executable.

        Raises :class:`~juggle.errors.BackendError` (a build failed) or
        :class:`~juggle.errors.UnknownDesignError`.
        """
        specs = [
            self.rtl.get(name) for name in (self.rtl.designs() if designs is None else designs)
        ]
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            built = list(pool.map(self.engine.build, specs))
        return {spec.design: path for spec, path in zip(specs, built, strict=True)}

    def check_design(self, design: str, region: RegionProfile) -> None:
        """Refuse a design with neither RTL nor model, or whose window exceeds the region's.

        Raises :class:`~juggle.errors.UnknownDesignError` or
        :class:`~juggle.errors.ResourceError`.
        """
        spec = self.rtl.find(design)
        if spec is None:
            super().check_design(design, region)
            return
        size = self._window_size(spec, region)
        if size > region.window_size:
            raise ResourceError(
                f"design {design!r} needs a {size:#x}-byte window, region {region.name!r} "
                f"maps {region.window_size:#x}",
                region=region.name,
                design=design,
            )

    def _window_size(self, spec: RtlDesign, region: RegionProfile) -> int:
        if spec.window_size is not None:
            return spec.window_size
        model = self._model_of(spec.design)
        return model.window_size if model is not None else region.window_size

    def _result_offsets(self, spec: RtlDesign) -> tuple[int, ...]:
        if spec.result_offsets is not None:
            return spec.result_offsets
        model = self._model_of(spec.design)
        return tuple(model.result_offsets) if model is not None else ()

    def _model_of(self, design: str) -> type[RegisterModel] | None:
        """``design``'s register model, if one is registered and importable."""
        if design not in self.models:
            return None
        try:
            return self.models.resolve(design)
        except Exception:  # an unknown or broken model: the RTL runs without its figures
            return None

    # -- windows -------------------------------------------------------------------------------

    def attach(self, region: RegionProfile, design: str) -> MMIO:
        """Start ``design``'s RTL behind a fresh window for ``region`` (its model if it has
        no RTL).

        Raises :class:`~juggle.errors.WindowAttachError` (a ``model_load`` fault, a failed
        build, or a simulator that does not start).
        """
        self.detach(region)  # a window left attached would keep its simulator running
        spec = self.rtl.find(design)
        if spec is None:
            return super().attach(region, design)
        if self.faults.fire("model_load"):
            raise WindowAttachError(
                f"injected fault: model_load of {design!r} in {region.name!r}",
                region=region.name,
                design=design,
            )
        bus = self.profile.bus
        try:
            exe = self.engine.build(spec)
            sim = self.engine.process(
                [str(exe), str(bus.read_cycles), str(bus.write_cycles), str(self.handshake_cycles)],
                label=f"region {region.name!r} ({design})",
                region=region.name,
                timeout=self.access_timeout,
            )
        except (BackendError, FabricError, OSError) as exc:
            raise WindowAttachError(
                f"RTL of {design!r} could not be started in {region.name!r}: {exc}",
                region=region.name,
                design=design,
            ) from exc
        window = RtlWindow(
            region.name,
            design,
            sim,
            self.clock,
            hz=self.profile.board.fabric_hz,
            read_cycles=bus.read_cycles,
            write_cycles=bus.write_cycles,
            window_size=self._window_size(spec, region),
            result_offsets=self._result_offsets(spec),
            enabled=self.bridge_ops(region).enable_show(),
            faults=self.faults,
        )
        self._windows[region.name] = window
        log.debug(
            "region %s: %s runs as RTL on %s (pid %d)", region.name, design, spec.bus, sim.pid
        )
        return window

    def __repr__(self) -> str:
        return (
            f"<RtlBackend {self.profile.name}, {len(self._windows)} windows, "
            f"RTL: {', '.join(self.rtl.designs()) or 'none'}>"
        )
