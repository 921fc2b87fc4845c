"""Controllers: policies that read statistics snapshots and ask for juggles.

Every controller is a plugin (pluggy): juggle's own and third-party ones alike are found by
name through :func:`load_controller`, and each one runs unchanged on the live runtime and in
the virtual-time simulator (ARCHITECTURE principle 1). Built in: ``static``, ``manual``,
``foreground``, ``distribution``, ``fifo``, ``adaptive``, ``cost-aware``, ``oracle``.
"""

from juggle.core.controllers.adaptive import AdaptiveController
from juggle.core.controllers.base import (
    Controller,
    JuggleAction,
    RegionStats,
    ServiceStats,
    StatsSnapshot,
)
from juggle.core.controllers.cost_aware import CostAwareController
from juggle.core.controllers.distribution import DistributionController
from juggle.core.controllers.fifo import FifoController
from juggle.core.controllers.foreground import ForegroundController
from juggle.core.controllers.hookspecs import ControllerSpec, hookimpl, hookspec
from juggle.core.controllers.manual import ManualController
from juggle.core.controllers.oracle import OracleController, OraclePhase, plan_phases
from juggle.core.controllers.plugins import (
    ENTRY_POINT_GROUP,
    ControllerRegistry,
    available_controllers,
    default_registry,
    load_controller,
)
from juggle.core.controllers.static import StaticController

__all__ = [
    "ENTRY_POINT_GROUP",
    "AdaptiveController",
    "Controller",
    "ControllerRegistry",
    "ControllerSpec",
    "CostAwareController",
    "DistributionController",
    "FifoController",
    "ForegroundController",
    "JuggleAction",
    "ManualController",
    "OracleController",
    "OraclePhase",
    "RegionStats",
    "ServiceStats",
    "StaticController",
    "StatsSnapshot",
    "available_controllers",
    "default_registry",
    "hookimpl",
    "hookspec",
    "load_controller",
    "plan_phases",
]
