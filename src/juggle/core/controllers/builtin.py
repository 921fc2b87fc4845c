"""juggle's own controllers, provided through the same plugin hook as third-party ones."""

from __future__ import annotations

from collections.abc import Sequence

from juggle.core.controllers.adaptive import AdaptiveController
from juggle.core.controllers.cost_aware import CostAwareController
from juggle.core.controllers.distribution import DistributionController
from juggle.core.controllers.fifo import FifoController
from juggle.core.controllers.foreground import ForegroundController
from juggle.core.controllers.hookspecs import hookimpl
from juggle.core.controllers.manual import ManualController
from juggle.core.controllers.oracle import OracleController
from juggle.core.controllers.static import StaticController

__all__ = ["BUILTIN", "juggle_controllers"]

BUILTIN: tuple[type, ...] = (
    AdaptiveController,
    CostAwareController,
    DistributionController,
    FifoController,
    ForegroundController,
    ManualController,
    OracleController,
    StaticController,
)


@hookimpl
def juggle_controllers() -> Sequence[type]:
    """The built-in controllers."""
    return BUILTIN
