"""Regions: where programming is orchestrated, in one fixed order, undone in reverse.

As ``fpga_region_program_fpga`` in Linux: take the region, hold the configuration port, close
the region's bridge, write the bitstream through the manager, open the bridge, attach the new
design's window. A failure is undone in reverse (locks released last), and what the
region looks like afterwards depends on how far it got:

* before the write (taking the region, closing the bridge): nothing changed. The previous
  design is still loaded, its bridge is reopened and its window serves again.
* from the write on (``write_init``/``write``/``write_complete``, opening the bridge,
  attaching the window): the previous configuration is overwritten, so the region goes to
  ``ERROR``, its bridge is left closed, and :attr:`RegionStatus.error` names the step that
  broke. Programming again (or unloading) recovers it: the runtime's next juggle into the
  region does exactly that.

A region also enters ERROR when the runtime takes a faulty *core* off the bus
(:meth:`FpgaRegion.quarantine`: it hung, returned garbage, raised a bus error); its snapshot then
says ``quarantined=True``, and the runtime keeps it out of use until an operator recovers it.
:meth:`FpgaRegion.discard` is the last resort for a design nobody serves from that even unloading
failed to remove: ERROR, not quarantined, to be programmed afresh.

Region states here are the fabric's physical view (EMPTY, PROGRAMMING, PROGRAMMED, ERROR);
the allocator's Ker-ONE states (Idle, Busy, Preempt, ...) live in the decision core.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType

from juggle.errors import FabricError, RegionBusyError, RegionEmptyError
from juggle.fabric.backend import Backend
from juggle.fabric.bitstream import Bitstream
from juggle.fabric.bridge import Bridge
from juggle.fabric.manager import FpgaManager
from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import BoardProfile, RegionProfile
from juggle.fabric.resources import Resources

__all__ = ["FpgaRegion", "ProgramReport", "RegionState", "RegionStatus"]

_PS_PER_MS = 10**9


class RegionState(StrEnum):
    """The physical state of a region; its value is what snapshots, JSON and the CLI show."""

    EMPTY = "EMPTY"
    PROGRAMMING = "PROGRAMMING"
    PROGRAMMED = "PROGRAMMED"
    ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class ProgramReport:
    """What one program (or unload) did and cost.

    ``reconfiguration_ms``, ``bridge_ms`` and ``modeled_total_ms`` are MODELED from the board
    profile (config port throughput, bridge switch time); ``measured_wall_ms`` is the
    wall-clock time the call took here and ``port_wall_ms`` the part of it spent writing the
    bitstream through the configuration port (measured; on the simulated fabric, the work of
    modeling that transfer).
    """

    region: str
    design: str | None
    bytes: int
    reconfiguration_ms: float
    bridge_ms: float
    modeled_total_ms: float
    measured_wall_ms: float
    port_wall_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class RegionStatus:
    """A region as it is now.

    ``resources`` is the region's capacity, ``used`` what the loaded module declared it needs
    (``None`` when not given), ``error`` the step that broke when ``state == "ERROR"``.
    ``quarantined`` says that ERROR is a faulty core taken off the bus (kept out of use until
    recovered), not a failed programming step (programming again is its recovery).
    """

    name: str
    state: RegionState
    design: str | None
    owner: str | None
    resources: Resources
    used: Resources | None
    bitstreams_loaded: int
    bridge_enabled: bool
    error: str | None
    adjacent: tuple[str, ...]
    quarantined: bool = False


@dataclass(frozen=True, slots=True)
class _Loaded:
    design: str
    owner: str | None
    used: Resources | None
    window: MMIO


class FpgaRegion:
    """One partially reconfigurable region, its bridge and the device's shared manager."""

    def __init__(
        self,
        profile: RegionProfile,
        board: BoardProfile,
        manager: FpgaManager,
        bridge: Bridge,
        backend: Backend,
    ) -> None:
        self.profile = profile
        self.name = profile.name
        self._board = board
        self._manager = manager
        self._bridge = bridge
        self._backend = backend
        self._take_lock = threading.Lock()
        self._guard = threading.Lock()
        self._state = RegionState.EMPTY
        self._loaded: _Loaded | None = None
        self._error: str | None = None
        self._quarantined = False  # ERROR because a faulty core was taken off the bus
        self._count = 0

    @property
    def state(self) -> RegionState:
        """The region's current state."""
        return self._state

    @property
    def bridge(self) -> Bridge:
        """The region's bridge."""
        return self._bridge

    def window(self) -> MMIO:
        """The loaded design's window.

        Raises :class:`~juggle.errors.RegionBusyError` while programming and
        :class:`~juggle.errors.RegionEmptyError` when no usable design is loaded.
        """
        with self._guard:
            state, loaded, error = self._state, self._loaded, self._error
        if state is RegionState.PROGRAMMING:
            raise RegionBusyError(f"region {self.name!r} is being programmed", region=self.name)
        if loaded is None:
            why = f"ERROR after a failed program ({error})" if error else "EMPTY"
            raise RegionEmptyError(f"region {self.name!r} holds no design: {why}", region=self.name)
        return loaded.window

    def program(
        self,
        bitstream: Bitstream,
        data: bytes,
        *,
        resources: Resources | None,
        owner: str | None,
    ) -> ProgramReport:
        """Program ``bitstream`` (checked by the caller) into this region.

        Raises :class:`~juggle.errors.RegionBusyError` if another program or unload holds the
        region, and the failing step's error (:class:`~juggle.errors.BridgeError`,
        :class:`~juggle.errors.ProgrammingError`, :class:`~juggle.errors.WindowAttachError`);
        see the module docstring for the state a failure leaves.
        """
        started = time.perf_counter()
        step, overwritten = "bridge_disable", False
        # 1. take the region, 2. hold the config port (both let go last, after any undo)
        with _Taken(self), self._manager.locked():
            try:
                self._bridge.disable()  # 3. isolate the region
                step, overwritten = "config_write", True
                self._detach()  # the old design's window dies with its logic
                port_started = time.perf_counter()
                # 4. write the bitstream; the manager learns the region from it (a Vivado
                # partial names none: the region comes from the module's bitstream table)
                tagged = bitstream if bitstream.region == self.name else _tag(bitstream, self.name)
                self._manager.load(tagged, data)
                port_ms = (time.perf_counter() - port_started) * 1e3
                step = "bridge_enable"
                self._bridge.enable()  # 5. reconnect
                step = "model_load"
                window = self._backend.attach(self.profile, bitstream.design)  # 6.
            except BaseException as exc:  # undo: the old design serves again, or ERROR
                if overwritten:
                    self._fail(step, exc)
                else:
                    self._reopen()
                raise
            with self._guard:
                self._loaded = _Loaded(bitstream.design, owner, resources, window)
                self._state, self._error = RegionState.PROGRAMMED, None
                self._quarantined = False
                self._count += 1
        transfer = self._board.config_port.transfer_ps(len(data)) / _PS_PER_MS
        switches = 2 * self._board.bridge.switch_ps / _PS_PER_MS
        return ProgramReport(
            region=self.name,
            design=bitstream.design,
            bytes=len(data),
            reconfiguration_ms=transfer,
            bridge_ms=switches,
            modeled_total_ms=transfer + switches,
            measured_wall_ms=(time.perf_counter() - started) * 1e3,
            port_wall_ms=port_ms,
        )

    def unload(self) -> ProgramReport:
        """Close the bridge and forget the design; the region becomes EMPTY.

        Unloading an EMPTY region changes nothing and costs nothing. Raises
        :class:`~juggle.errors.RegionBusyError` if the region is held and
        :class:`~juggle.errors.BridgeError` if the bridge does not close (nothing changes).
        """
        started = time.perf_counter()
        with _Taken(self) as before:
            if before is RegionState.EMPTY:
                return ProgramReport(self.name, None, 0, 0.0, 0.0, 0.0, 0.0)
            design = self._loaded.design if self._loaded else None
            self._bridge.disable()
            self._detach()
            try:  # slots hold designs until taken out (Linux: rmdir the overlay)
                self._backend.unload(self.profile)
            except FabricError as exc:
                self._fail("unload", exc)
                raise
            with self._guard:
                self._state, self._error = RegionState.EMPTY, None
                self._quarantined = False
        switch = self._board.bridge.switch_ps / _PS_PER_MS
        wall = (time.perf_counter() - started) * 1e3
        return ProgramReport(self.name, design, 0, 0.0, switch, switch, wall)

    def quarantine(self, reason: str) -> None:
        """Take a faulty core off the bus: bridge closed (best effort), window dropped, state
        ERROR naming ``reason``. Unloading or programming again recovers the region.

        Raises :class:`~juggle.errors.RegionBusyError` while the region is being programmed.
        """
        with _Taken(self):
            self._fail("quarantined", FabricError(reason), quarantined=True)

    def discard(self, reason: str) -> None:
        """Drop the design loaded here when nobody serves from it and unloading failed: bridge
        closed (best effort), window dropped, state ERROR naming ``reason``, not quarantined
        (programming again recovers the region). A quarantined region stays quarantined.

        Raises :class:`~juggle.errors.RegionBusyError` while the region is being programmed.
        """
        with _Taken(self):
            self._fail("discarded", FabricError(reason), quarantined=self._quarantined)

    def _detach(self) -> None:
        with self._guard:
            self._loaded = None
        self._backend.detach(self.profile)

    def _reopen(self) -> None:
        if self._loaded is None:
            return  # an empty or failed region stays isolated
        try:
            if not self._bridge.enabled:
                self._bridge.enable()  # the previous design serves again
        except FabricError as exc:
            self._fail("bridge_enable (while undoing)", exc)

    def _fail(self, step: str, exc: BaseException, *, quarantined: bool = False) -> None:
        self._detach()
        self._isolate()
        with self._guard:
            self._state = RegionState.ERROR
            self._error = f"{step}: {exc}"
            self._quarantined = quarantined

    def _isolate(self) -> None:
        """Keep a broken region off the bus (best effort: the original error wins)."""
        with contextlib.suppress(FabricError, OSError):
            if self._bridge.enabled:
                self._bridge.disable()

    def snapshot(self) -> RegionStatus:
        """A frozen snapshot of the region."""
        with self._guard:
            state, loaded, error, count = self._state, self._loaded, self._error, self._count
            quarantined = self._quarantined and state is RegionState.ERROR
        return RegionStatus(
            name=self.name,
            state=state,
            design=loaded.design if loaded else None,
            owner=loaded.owner if loaded else None,
            resources=self.profile.resources,
            used=loaded.used if loaded else None,
            bitstreams_loaded=count,
            bridge_enabled=self._bridge.enabled,
            error=error,
            adjacent=self.profile.adjacent,
            quarantined=quarantined,
        )

    def __repr__(self) -> str:
        snap = self.snapshot()
        design = f" {snap.design}" if snap.design else ""
        return f"<FpgaRegion {self.name} {snap.state}{design}, {snap.bitstreams_loaded} loaded>"


def _tag(bitstream: Bitstream, region: str) -> Bitstream:
    """``bitstream`` naming ``region`` (what the manager's operations are told)."""
    return dataclasses.replace(bitstream, region=region)


class _Taken:
    """Hold ``region`` for one program, unload or quarantine (entered: the state before; the
    region is PROGRAMMING meanwhile, and back to that state unless the holder changed it).

    Raises :class:`~juggle.errors.RegionBusyError` when another holder has it.
    """

    __slots__ = ("_before", "_region")

    def __init__(self, region: FpgaRegion) -> None:
        self._region = region
        self._before = RegionState.EMPTY

    def __enter__(self) -> RegionState:
        region = self._region
        if not region._take_lock.acquire(blocking=False):
            raise RegionBusyError(
                f"region {region.name!r} is busy being programmed", region=region.name
            )
        with region._guard:
            self._before = region._state
            region._state = RegionState.PROGRAMMING
        return self._before

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        region = self._region
        try:
            with region._guard:
                if region._state is RegionState.PROGRAMMING:
                    region._state = self._before  # nothing happened that changed the region
        finally:
            region._take_lock.release()
