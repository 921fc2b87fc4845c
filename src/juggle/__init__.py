"""juggle: co-manage software, native and hardware (FPGA) implementations of services.

An application calls a service through a proxy and never knows whether pure Python, native
code or a hardware module in a region of a reconfigurable fabric serves the call::

    import juggle
    fw = juggle.Framework(fabric="xupv2p")        # the embedded simulated board
    mod = fw.install("examples/modules/tdes"); mod.start()
    enc = fw.get_service("EncryptionService", consumer="mail")
    enc.load_key(key); enc.encrypt(buf, len(buf))
    fw.juggle(to_hardware=enc.service_id)         # the Juggle primitive
"""

from typing import TYPE_CHECKING, Any

from juggle.errors import (
    AllocatorError,
    BitstreamError,
    ConfigurationError,
    ControllerError,
    DescriptorError,
    FabricError,
    HardwareThreadError,
    JuggleError,
    JuggleOperationError,
    ModuleError,
    RegistryError,
    SanityCheckError,
    ServiceArgumentError,
    ServiceUnavailableError,
    TierUnavailableError,
    UnknownServiceError,
    WaitSignal,
)
from juggle.runtime.framework import Framework
from juggle.runtime.interfaces import state_setting
from juggle.runtime.modules import Module, ModuleState
from juggle.runtime.proxy import ServiceProxy
from juggle.runtime.signals import SignalChannel, TenantSignal, TenantSnapshot
from juggle.runtime.snapshots import (
    JuggleReport,
    RegionSnapshot,
    ServiceSnapshot,
    ServiceStatistics,
)

__version__ = "0.1.0"

if TYPE_CHECKING:
    from juggle.daemon.client import connect

__all__ = [
    "AllocatorError",
    "BitstreamError",
    "ConfigurationError",
    "ControllerError",
    "DescriptorError",
    "FabricError",
    "Framework",
    "HardwareThreadError",
    "JuggleError",
    "JuggleOperationError",
    "JuggleReport",
    "Module",
    "ModuleError",
    "ModuleState",
    "RegionSnapshot",
    "RegistryError",
    "SanityCheckError",
    "ServiceArgumentError",
    "ServiceProxy",
    "ServiceSnapshot",
    "ServiceStatistics",
    "ServiceUnavailableError",
    "SignalChannel",
    "TenantSignal",
    "TenantSnapshot",
    "TierUnavailableError",
    "UnknownServiceError",
    "WaitSignal",
    "__version__",
    "connect",
    "state_setting",
]


def __getattr__(name: str) -> Any:
    """``juggle.connect`` loads the daemon client (asyncio, msgpack) only when first used."""
    if name == "connect":
        from juggle.daemon.client import connect

        return connect
    raise AttributeError(f"module 'juggle' has no attribute {name!r}")
