"""RTL co-simulation speed: how fast the Verilog cores run behind a region's window.

Both figures are measured on this machine (wall clock, ``perf_counter``), from one run on the
simulated ``xupv2p`` board with the ``rtl`` backend (:class:`~juggle.fabric.rtl.RtlBackend`,
Verilator): the TDES core's window, driven by the very :class:`TdesDriver` the runtime uses.

* ``rtl_cycles_per_s``: simulated core clock cycles per wall second while the driver encrypts
  (64 KiB, 8 KiB with ``quick``): the RTL's cycle count over the modeled clock, divided by the
  wall time of the encryption (best of 3);
* ``rtl_access_us``: wall time of one register access through the window (a ``read32`` of the
  STATUS register: one bus transaction in the simulator process, a pipe round trip), median of
  2,000 (400 with ``quick``);
* ``rtl_blocks_per_s``: 8-byte TDES blocks per wall second in that run.
"""

from __future__ import annotations

import statistics
import time

from juggle.fabric.profiles import load_profile
from juggle.fabric.rtl import RtlBackend, RtlWindow
from juggle.fabric.sim import ModelCatalog, ModelClock
from juggle.services.crypto import registers as r
from juggle.services.crypto.driver import TdesDriver

__all__ = ["run"]

KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")


def run(quick: bool = False) -> dict[str, float]:
    """The RTL figures (see the module docstring)."""
    board = load_profile("xupv2p")
    hz = board.board.fabric_hz
    clock = ModelClock()
    backend = RtlBackend(board, clock, ModelCatalog.builtin())
    try:
        region = board.regions[0]
        backend.bridge_ops(region).enable_set(True)
        window = backend.attach(region, "tdes")
        assert isinstance(window, RtlWindow)
        driver = TdesDriver(window)
        driver.load_key(KEY)
        buf = bytearray((8 if quick else 64) * 1024)
        best_rate, best_blocks = 0.0, 0.0
        for _ in range(3):
            c0, t0 = clock.now_cycles(hz), time.perf_counter()
            driver.encrypt(buf, len(buf))
            wall = time.perf_counter() - t0
            best_rate = max(best_rate, (clock.now_cycles(hz) - c0) / wall)
            best_blocks = max(best_blocks, len(buf) / 8 / wall)
        samples = []
        for _ in range(400 if quick else 2000):
            t0 = time.perf_counter_ns()
            window.read32(r.STATUS)
            samples.append(time.perf_counter_ns() - t0)
    finally:
        backend.close()
    return {
        "rtl_cycles_per_s": round(best_rate, 1),
        "rtl_access_us": statistics.median(samples) / 1e3,
        "rtl_blocks_per_s": round(best_blocks, 1),
    }
