"""RTL co-simulation speed: how fast the Verilog cores run behind a region's window.

Every figure is measured on this machine (wall clock, ``perf_counter``), in one process, on the
simulated ``xupv2p`` board with the ``rtl`` backend (:class:`~juggle.fabric.rtl.RtlBackend`,
Verilator, register accesses through shared memory): the TDES core's window, driven by the
very :class:`TdesDriver` the runtime uses. Each is the MEDIAN of repeated runs (not the best):

* ``rtl_cycles_per_s``: simulated core clock cycles per wall second while the driver encrypts
  (16 KiB, 4 KiB with ``quick``): the RTL's cycle count over the modeled clock divided by the
  wall time of the encryption; median of 9 runs (5 with ``quick``);
* ``rtl_blocks_per_s``: 8-byte TDES blocks per wall second, median of the same runs;
* ``rtl_access_us``: wall time of one register access through the window (a ``read32`` of the
  STATUS register: one bus transaction in the simulator process), median of 5,000 (1,000
  with ``quick``);
* ``rtl_axi_access_us``: the same for an AXI4-Lite core (a ``read32`` of the ``a`` argument
  register of the gcd reference module, ``examples/modules/gcd``); left out where that
  module's Verilog is not found.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from juggle.fabric.mmio import MMIO
from juggle.fabric.profiles import load_profile
from juggle.fabric.rtl import RtlBackend, RtlCatalog, RtlWindow
from juggle.fabric.sim import ModelCatalog, ModelClock
from juggle.services.crypto import registers as r
from juggle.services.crypto.driver import TdesDriver

__all__ = ["GCD_TOP", "run"]

KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")

#: the AXI4-Lite reference core (the gcd example module's Verilog, package data of juggle)
GCD_TOP = Path(__file__).resolve().parents[1] / "examples" / "modules" / "gcd" / "hdl" / "gcd"
_GCD_A = 0x10


def _access_us(window: MMIO, offset: int, count: int) -> float:
    """Median wall time of ``count`` reads of ``offset``, in microseconds."""
    read = window.read32
    samples = []
    for _ in range(count):
        t0 = time.perf_counter_ns()
        read(offset)
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e3


def run(quick: bool = False) -> dict[str, float]:
    """The RTL figures (see the module docstring)."""
    board = load_profile("xupv2p")
    hz = board.board.fabric_hz
    clock = ModelClock()
    rtl = RtlCatalog.builtin()
    gcd = sorted(GCD_TOP.glob("*.v")) if GCD_TOP.is_dir() else []
    if gcd:
        rtl.add("gcd", gcd, "gcd_top", window_size=0x40, bus="axi4-lite")
    backend = RtlBackend(board, clock, ModelCatalog.builtin(), rtl=rtl)
    figures: dict[str, float] = {}
    try:
        region = board.regions[0]
        backend.bridge_ops(region).enable_set(True)
        window = backend.attach(region, "tdes")
        assert isinstance(window, RtlWindow)
        driver = TdesDriver(window)
        driver.load_key(KEY)
        buf = bytearray((4 if quick else 16) * 1024)
        driver.encrypt(buf, len(buf))  # warm up: caches, branch predictors, the harness's spin
        rates, blocks = [], []
        for _ in range(5 if quick else 9):
            c0, t0 = clock.now_cycles(hz), time.perf_counter()
            driver.encrypt(buf, len(buf))
            wall = time.perf_counter() - t0
            rates.append((clock.now_cycles(hz) - c0) / wall)
            blocks.append(len(buf) / 8 / wall)
        figures["rtl_cycles_per_s"] = round(statistics.median(rates), 1)
        figures["rtl_access_us"] = _access_us(window, r.STATUS, 1000 if quick else 5000)
        figures["rtl_blocks_per_s"] = round(statistics.median(blocks), 1)
        if gcd:
            axi = backend.attach(region, "gcd")
            figures["rtl_axi_access_us"] = _access_us(axi, _GCD_A, 1000 if quick else 5000)
    finally:
        backend.close()
    return figures
