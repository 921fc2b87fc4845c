"""RTL co-simulation: the ``rtl`` fabric backend, its catalog of Verilog designs, synthesis.

The hardware tier made real without a board: a region's MMIO window is backed by the core's
Verilog running cycle by cycle in a simulator process (:class:`RtlBackend`,
:class:`RtlWindow`), behind juggle's register bus or an AXI4-Lite slave port, driven by the
very same drivers; :func:`synthesize` runs a synthesis tool on the same sources for a resource
report. Which simulator and synthesis tool run is known only
inside this package.
"""

from juggle.fabric.rtl.backend import DEFAULT_ACCESS_TIMEOUT, DEFAULT_HANDSHAKE_CYCLES, RtlBackend
from juggle.fabric.rtl.catalog import BUILTIN_RTL, BUSES, HDL_ROOT, RtlCatalog, RtlDesign
from juggle.fabric.rtl.engine import VerilatorEngine, default_cache_dir, stderr_progress
from juggle.fabric.rtl.icarus import IcarusEngine
from juggle.fabric.rtl.process import PipeSim, SharedMemorySim, SimProcess
from juggle.fabric.rtl.synth import ResourceReport, family_for_part, synthesize
from juggle.fabric.rtl.window import RtlWindow

__all__ = [
    "BUILTIN_RTL",
    "BUSES",
    "DEFAULT_ACCESS_TIMEOUT",
    "DEFAULT_HANDSHAKE_CYCLES",
    "HDL_ROOT",
    "IcarusEngine",
    "PipeSim",
    "ResourceReport",
    "RtlBackend",
    "RtlCatalog",
    "RtlDesign",
    "RtlWindow",
    "SharedMemorySim",
    "SimProcess",
    "VerilatorEngine",
    "default_cache_dir",
    "family_for_part",
    "stderr_progress",
    "synthesize",
]
