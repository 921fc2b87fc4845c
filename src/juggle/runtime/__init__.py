"""The live runtime: the Framework and the names its readers may use.

Applications import :mod:`juggle`; the daemon, the dashboard and other clients inside juggle
import the runtime's public names from here, never from its submodules: the
:class:`Framework` (a facade over its parts), its options, and the frozen snapshots and
records its methods return.
"""

from juggle.core.tiers import Tier
from juggle.runtime.framework import Framework
from juggle.runtime.integrity import fingerprint, load_public_keys
from juggle.runtime.interfaces import state_setting
from juggle.runtime.ldapfilter import parse_filter
from juggle.runtime.modules import Module, ModuleSnapshot, ModuleState
from juggle.runtime.options import FrameworkOptions
from juggle.runtime.proxy import ServiceProxy
from juggle.runtime.signals import SignalChannel, TenantSignal, TenantSnapshot
from juggle.runtime.snapshots import (
    JuggleReport,
    ProxyInfo,
    RegionSnapshot,
    ServiceSnapshot,
    ServiceStatistics,
)
from juggle.runtime.tracing import CallStats

__all__ = [
    "CallStats",
    "Framework",
    "FrameworkOptions",
    "JuggleReport",
    "Module",
    "ModuleSnapshot",
    "ModuleState",
    "ProxyInfo",
    "RegionSnapshot",
    "ServiceProxy",
    "ServiceSnapshot",
    "ServiceStatistics",
    "SignalChannel",
    "TenantSignal",
    "TenantSnapshot",
    "Tier",
    "fingerprint",
    "load_public_keys",
    "parse_filter",
    "state_setting",
]
