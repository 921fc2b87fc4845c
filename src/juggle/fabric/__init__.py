"""The reconfigurable fabric: profiles, bitstreams, manager / bridge / region, backends.

Open a board with :func:`open_fabric` and drive it through the :class:`Fabric` facade; the
backends (``sim``, ``linux``) implement small operation tables underneath (Linux
``drivers/fpga``: fpga-mgr, fpga-bridge, fpga-region).
"""

from juggle.fabric.backend import Backend
from juggle.fabric.bitstream import (
    Bitstream,
    build_bitstream,
    load_bitstream,
    normalize_part,
    parse_bitstream,
    read_bitstream,
    write_bitstream,
)
from juggle.fabric.bridge import Bridge, BridgeOps, BridgeStatistics
from juggle.fabric.fabric import Fabric, FabricStatistics, open_fabric
from juggle.fabric.faults import FAULT_STEPS, FaultInjector, FaultStatistics
from juggle.fabric.manager import FpgaManager, ManagerOps, ManagerState, ManagerStatistics
from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import (
    BoardProfile,
    DeviceProfile,
    RegionProfile,
    available_profiles,
    load_profile,
)
from juggle.fabric.region import FpgaRegion, ProgramReport, RegionState, RegionStatus
from juggle.fabric.resources import Resources
from juggle.fabric.sim import ModelCatalog, ModelClock, RegisterModel, SimWindow, WindowStatistics

__all__ = [
    "Backend",
    "Bitstream",
    "BoardProfile",
    "Bridge",
    "BridgeOps",
    "BridgeStatistics",
    "DeviceProfile",
    "FAULT_STEPS",
    "Fabric",
    "FabricStatistics",
    "FaultInjector",
    "FaultStatistics",
    "FpgaManager",
    "FpgaRegion",
    "MMIO",
    "ManagerOps",
    "ManagerState",
    "ManagerStatistics",
    "ModelCatalog",
    "ModelClock",
    "ProgramReport",
    "RegionProfile",
    "RegionState",
    "RegionStatus",
    "RegisterModel",
    "Resources",
    "SimWindow",
    "WindowStatistics",
    "available_profiles",
    "build_bitstream",
    "load_bitstream",
    "load_profile",
    "normalize_part",
    "open_fabric",
    "parse_bitstream",
    "read_bitstream",
    "write_bitstream",
]
