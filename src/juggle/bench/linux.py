"""Linux backend bench: what a register access costs on the board path.

* ``uio_access_ns_p50``: one SIGBUS-guarded 32-bit read through
  :meth:`juggle.fabric.linux.busguard.GuardedMap.read32`, called from Python, in ns (the
  median over batches). The map is one page of a temporary file (``MAP_SHARED``, as a UIO
  map of ``/dev/uioN`` is), so the figure is juggle's own cost per access (the Python call,
  the bounds check, arming and disarming the guard, the volatile load); a board adds the bus
  latency of the register itself. Each batch is a loop of reads of one word, timed with
  ``perf_counter_ns``; the loop's own overhead is included, not subtracted, so the figure is
  an upper bound of the access. The measuring thread is pinned to one CPU for the run, as in
  the ``sharing`` group. Measured (wall clock, this machine); target ≤ 500 ns (issue 20).
* ``uio_access_guarded``: true when the C extension's guard was measured, false when it was
  the plain-mmap fallback (a platform without the extension); a flag, not a figure.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from juggle.bench.sharing import one_cpu
from juggle.fabric.linux.busguard import GUARDED, GuardedMap

__all__ = ["run", "uio_access_ns"]

#: reads per timed batch: long enough to dwarf the timer, short enough to fit between two
#: preemptions on a busy machine
BATCH = 2000


def uio_access_ns(batches: int, batch: int = BATCH) -> list[float]:
    """ns per guarded read, one figure per batch of ``batch`` reads of a mapped file's word."""
    with tempfile.TemporaryDirectory(prefix="juggle-bench-uio-") as folder:
        path = Path(folder) / "map"
        path.write_bytes(bytes(4096))
        out: list[float] = []
        with GuardedMap(path, 4096) as window:
            read = window.read32
            window.write32(0x10, 0x600DF00D)
            for _ in range(batch):  # warm the page and the code path
                read(0x10)
            for _ in range(batches):
                t = time.perf_counter_ns()
                for _ in range(batch):
                    read(0x10)
                out.append((time.perf_counter_ns() - t) / batch)
            if read(0x10) != 0x600DF00D:
                raise RuntimeError(f"the mapped word of {path} reads back wrong")
    return out


def run(quick: bool = False) -> dict[str, float]:
    """The Linux backend figures (see the module docstring)."""
    with one_cpu():
        samples = uio_access_ns(31 if quick else 301)
    return {
        "uio_access_ns_p50": statistics.median(samples),
        "uio_access_guarded": GUARDED,
    }


if __name__ == "__main__":  # pragma: no cover - a quick look by hand
    print(run(quick=bool(os.environ.get("QUICK"))))
