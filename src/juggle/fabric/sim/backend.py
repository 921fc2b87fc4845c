"""The simulated board: a config port, bridges and windows that cost modeled time.

The configuration port advances the modeled clock by the bytes written over the profile's
throughput; a bridge state change by ``[bridge] switch_us``; window accesses by the bus cycles.
Armed faults (:mod:`juggle.fabric.faults`) make the matching operation fail: the config port,
the bridges and :meth:`SimBackend.attach` consult the programming steps; every window this
backend attaches shares its injector and consults the access steps (``core_hang``,
``core_garbage``, ``driver_error``) on each access, so a faulty core lasts until the region is
reprogrammed and its window replaced.
"""

from __future__ import annotations

from juggle.errors import BridgeError, ProgrammingError, ResourceError, WindowAttachError
from juggle.fabric.bitstream import Bitstream
from juggle.fabric.faults import FaultInjector
from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import BoardProfile, ConfigPortSection, RegionProfile
from juggle.fabric.sim.catalog import ModelCatalog
from juggle.fabric.sim.clock import ModelClock
from juggle.fabric.sim.window import SimWindow

__all__ = ["SimBackend", "SimBridgeOps", "SimConfigPort"]


class SimConfigPort:
    """The simulated ICAP/PCAP (``ManagerOps``): charges modeled time per chunk written."""

    def __init__(self, port: ConfigPortSection, clock: ModelClock, faults: FaultInjector) -> None:
        self._port = port
        self._clock = clock
        self._faults = faults
        self._written = 0
        self._charged = 0  # port time charged for the bytes written so far, in ps
        self._state = "unknown"

    def write_init(self, bitstream: Bitstream) -> None:
        """Start a transfer of ``bitstream``."""
        self._written = 0
        self._charged = 0
        self._state = "write init"

    def write(self, chunk: bytes) -> None:
        """Push ``chunk``; costs the port time of the bytes so far minus what was charged.

        Raises :class:`~juggle.errors.ProgrammingError` when a ``config_write`` fault is armed.
        """
        self._state = "write"
        if self._faults.fire("config_write"):
            self._state = "write error"
            raise ProgrammingError("injected fault: config port write failed", value="config_write")
        self._written += len(chunk)
        charged = self._port.transfer_ps(self._written)
        self._clock.advance_ps(charged - self._charged)
        self._charged = charged

    def write_complete(self) -> None:
        """End the transfer; with pacing, wall time has caught up when this returns."""
        self._clock.advance_ps(0, settle=True)
        self._state = "operating"

    def state(self) -> str:
        """The port's state as Linux names it (``"operating"``, ``"write error"``...)."""
        return self._state


class SimBridgeOps:
    """A simulated bridge (``BridgeOps``): each state change costs ``switch_us`` modeled.

    It gates the region's window, so a driver touching a decoupled region gets a
    :class:`~juggle.errors.BridgeError`.
    """

    def __init__(self, region: str, backend: SimBackend, switch_ps: int) -> None:
        self._region = region
        self._backend = backend
        self._switch_ps = switch_ps
        self._enabled = False  # regions start empty and isolated

    def enable_set(self, enable: bool) -> None:
        """Open or close the bridge (raises BridgeError when a fault is armed for it)."""
        step = "bridge_enable" if enable else "bridge_disable"
        if self._backend.faults.fire(step):
            raise BridgeError(
                f"injected fault: {step} of region {self._region!r}", region=self._region
            )
        self._backend.clock.advance_ps(self._switch_ps, settle=True)
        self._enabled = enable
        window = self._backend.window_of(self._region)
        if window is not None:
            window.set_enabled(enable)

    def enable_show(self) -> bool:
        """Whether the bridge is open."""
        return self._enabled


class SimBackend:
    """Operation tables of the simulated board described by ``profile``."""

    name = "sim"

    def __init__(self, profile: BoardProfile, clock: ModelClock, models: ModelCatalog) -> None:
        self.profile = profile
        self.clock = clock
        self.models = models
        self._faults = FaultInjector()
        self._port = SimConfigPort(profile.config_port, clock, self._faults)
        self._bridges = {
            r.name: SimBridgeOps(r.name, self, profile.bridge.switch_ps) for r in profile.regions
        }
        self._windows: dict[str, SimWindow] = {}

    @property
    def faults(self) -> FaultInjector:
        """The fault injector the simulated operations consult."""
        return self._faults

    def manager_ops(self) -> SimConfigPort:
        """The simulated configuration port."""
        return self._port

    def bridge_ops(self, region: RegionProfile) -> SimBridgeOps:
        """The simulated bridge of ``region``."""
        return self._bridges[region.name]

    def check_bitstream(self, bitstream: Bitstream) -> None:
        """Any format goes: the simulated configuration port takes every bitstream."""

    def describe(self, bitstream: Bitstream, region: RegionProfile) -> None:
        """Nothing comes beside a bitstream on the simulated board."""

    def unload(self, region: RegionProfile) -> None:
        """Nothing to take out: the detached window was the design."""

    def check_design(self, design: str, region: RegionProfile) -> None:
        """Refuse a design with no model, or whose window exceeds the region's.

        Raises :class:`~juggle.errors.UnknownDesignError` or
        :class:`~juggle.errors.ResourceError` naming the window sizes.
        """
        model = self.models.resolve(design)
        if model.window_size > region.window_size:
            raise ResourceError(
                f"design {design!r} needs a {model.window_size:#x}-byte window, region "
                f"{region.name!r} maps {region.window_size:#x}",
                region=region.name,
                design=design,
            )

    def window_of(self, region: str) -> SimWindow | None:
        """The window currently attached to ``region``, if any."""
        return self._windows.get(region)

    def attach(self, region: RegionProfile, design: str) -> MMIO:
        """Instantiate ``design``'s model behind a fresh window for ``region``.

        Raises :class:`~juggle.errors.WindowAttachError` (a ``model_load`` fault, or the
        model failing to build).
        """
        if self._faults.fire("model_load"):
            raise WindowAttachError(
                f"injected fault: model_load of {design!r} in {region.name!r}",
                region=region.name,
                design=design,
            )
        try:
            model = self.models.create(design)
        except Exception as exc:  # a model's constructor is third-party code
            raise WindowAttachError(
                f"model of {design!r} could not be built for {region.name!r}: {exc}",
                region=region.name,
                design=design,
            ) from exc
        bus = self.profile.bus
        window = SimWindow(
            region.name,
            model,
            self.clock,
            hz=self.profile.board.fabric_hz,
            read_cycles=bus.read_cycles,
            write_cycles=bus.write_cycles,
            enabled=self._bridges[region.name].enable_show(),
            faults=self._faults,
        )
        self._windows[region.name] = window
        return window

    def detach(self, region: RegionProfile) -> None:
        """Close ``region``'s window: stale handles now raise RegionEmptyError."""
        window = self._windows.pop(region.name, None)
        if window is not None:
            window.close()

    def close(self) -> None:
        """Close every window."""
        for name in list(self._windows):
            self._windows.pop(name).close()

    def __repr__(self) -> str:
        return f"<SimBackend {self.profile.name}, {len(self._windows)} windows>"
