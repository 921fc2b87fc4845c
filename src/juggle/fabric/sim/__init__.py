"""The simulated board: modeled clock, register-model windows, model catalog, sim backend."""

from juggle.fabric.sim.backend import SimBackend, SimBridgeOps, SimConfigPort
from juggle.fabric.sim.catalog import BUILTIN_MODELS, ModelCatalog
from juggle.fabric.sim.clock import ClockStatistics, ModelClock
from juggle.fabric.sim.model import RegisterModel
from juggle.fabric.sim.window import SimWindow, WindowStatistics

__all__ = [
    "BUILTIN_MODELS",
    "ClockStatistics",
    "ModelCatalog",
    "ModelClock",
    "RegisterModel",
    "SimBackend",
    "SimBridgeOps",
    "SimConfigPort",
    "SimWindow",
    "WindowStatistics",
]
