"""What a fabric backend provides: the small operation tables the orchestration drives.

A backend (simulated board, Linux FPGA Manager + UIO, later RTL co-simulation) supplies one
:class:`~juggle.fabric.manager.ManagerOps` for the device's configuration port, one
:class:`~juggle.fabric.bridge.BridgeOps` per region, and the MMIO window of a programmed
region. Everything else (checks, ordering, rollback, statistics) lives once, in
:mod:`juggle.fabric.region` and :mod:`juggle.fabric.fabric`.
"""

from __future__ import annotations

from typing import Protocol

from juggle.fabric.bitstream import Bitstream
from juggle.fabric.bridge import BridgeOps
from juggle.fabric.faults import FaultInjector
from juggle.fabric.manager import ManagerOps
from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import RegionProfile

__all__ = ["Backend"]


class Backend(Protocol):
    """Operation tables of one board, as the :class:`~juggle.fabric.fabric.Fabric` uses them."""

    name: str

    @property
    def faults(self) -> FaultInjector | None:
        """The backend's fault injector, or ``None`` where faults cannot be injected."""
        ...

    def manager_ops(self) -> ManagerOps:
        """The configuration port's operations (one per device)."""
        ...

    def bridge_ops(self, region: RegionProfile) -> BridgeOps:
        """The operations of ``region``'s bridge."""
        ...

    def check_bitstream(self, bitstream: Bitstream) -> None:
        """Refuse, before anything changes, a bitstream whose format or device family this
        backend's configuration port does not take (the simulators take any)."""
        ...

    def check_design(self, design: str, region: RegionProfile) -> None:
        """Refuse, before anything changes, a design this backend cannot serve in ``region``."""
        ...

    def describe(self, bitstream: Bitstream, region: RegionProfile) -> None:
        """Note what ``bitstream``'s file brings beside it for loads into ``region`` (Linux: a
        dfx-mgr slot's overlay); refuse it when that is malformed. Nothing on the simulators."""
        ...

    def attach(self, region: RegionProfile, design: str) -> MMIO:
        """The window of ``design``, just programmed into ``region`` (its bridge is open)."""
        ...

    def detach(self, region: RegionProfile) -> None:
        """Drop ``region``'s current window (its design is unloaded or being overwritten)."""
        ...

    def unload(self, region: RegionProfile) -> None:
        """Take ``region``'s design out (called after its bridge closed and its window was
        dropped): Linux removes the slot's overlay; a simulated region just forgets it."""
        ...

    def close(self) -> None:
        """Release every backend resource (windows, file handles)."""
        ...
