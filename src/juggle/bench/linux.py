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
* ``linux_program_us_p50``: juggle's own work for one load of a partial into ``rp0`` on a
  kv260 :class:`~juggle.fabric.linux.fake.FakeKernel` (the 2-RP base shell applied through
  its overlay), in µs, the median over loads. One load is :meth:`juggle.fabric.Fabric.program`
  of a parsed Vivado-style partial ``.bit`` (no ``Region=`` tag): the fabric's checks, the
  slot isolated through the SIHA registers (guarded 32-bit writes on the mapped shell UIO
  file), the image converted for ZynqMP and staged, the overlay blob built, the configfs item
  made and its ``path`` written, ``status``/``path``/``state`` re-read, the slot released,
  the UIO windows found by name, checked against the profile and mapped (``mmap``).
  EXCLUDED is the kernel: the time spent inside every call the backend makes into the fake
  (its ``SysfsOps`` methods: ``read``, ``read_bytes``, ``exists``, ``listdir``, ``write``,
  ``write_bytes``, ``write_file``, ``remove``, ``mkdir``, ``rmdir``) is measured around each
  call and subtracted. That is the fake's own processing (resolving paths as the VFS would,
  parsing the overlay, "programming" the image, creating UIO devices and their ``dev/uioN``
  files) and the file I/O behind each attribute, which on a board is the kernel's; the
  Python work around those calls stays in. Parsing the bitstream file (done once, at
  install) is not in it. Measured (wall clock, this machine, the thread pinned to one CPU);
  target ≤ 500 µs (issue 20).
* ``linux_unload_us_p50``: the same for the matching :meth:`~juggle.fabric.Fabric.unload`
  (slot isolated, windows unmapped, overlay removed, staged image removed), in µs.
* ``linux_program_wall_us_p50``: one load's whole wall-clock time, the fake's included, in
  µs (context only, not juggle's cost: the fake writes a ``dev/uioN`` file of up to 16 MiB
  per window).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from juggle.bench.sharing import one_cpu
from juggle.fabric.linux.busguard import GUARDED, GuardedMap
from juggle.fabric.linux.fake import FakeKernel

__all__ = ["linux_program_us", "run", "uio_access_ns"]

_T = TypeVar("_T")

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


class _TimedKernel(FakeKernel):
    """A :class:`FakeKernel` that adds the time spent inside every call the backend makes
    into it (the ``SysfsOps`` methods: the kernel's side of a load, which the bench leaves
    out) to :attr:`kernel_ns`. A call made from inside another is counted once."""

    kernel_ns = 0
    _depth = 0

    def _timed(self, call: Callable[[], _T]) -> _T:
        if self._depth:
            return call()
        self._depth += 1
        t = time.perf_counter_ns()
        try:
            return call()
        finally:
            self.kernel_ns += time.perf_counter_ns() - t
            self._depth -= 1

    def read(self, path: str) -> str:
        return self._timed(lambda: FakeKernel.read(self, path))

    def read_bytes(self, path: str) -> bytes:
        return self._timed(lambda: FakeKernel.read_bytes(self, path))

    def exists(self, path: str) -> bool:
        return self._timed(lambda: FakeKernel.exists(self, path))

    def listdir(self, path: str) -> list[str]:
        return self._timed(lambda: FakeKernel.listdir(self, path))

    def write(self, path: str, text: str) -> None:
        self._timed(lambda: FakeKernel.write(self, path, text))

    def write_bytes(self, path: str, data: bytes) -> None:
        self._timed(lambda: FakeKernel.write_bytes(self, path, data))

    def write_file(self, path: str, data: bytes, *, append: bool = False) -> None:
        self._timed(lambda: FakeKernel.write_file(self, path, data, append=append))

    def remove(self, path: str) -> None:
        self._timed(lambda: FakeKernel.remove(self, path))

    def mkdir(self, path: str) -> None:
        self._timed(lambda: FakeKernel.mkdir(self, path))

    def rmdir(self, path: str) -> None:
        self._timed(lambda: FakeKernel.rmdir(self, path))


#: the kv260 profile's shell (kv260.toml [shell]): its base image, overlay and SIHA manager
_KV_PART = "xck26-sfvc784-2LV-c"
_SHELL_IMAGE = "opendfx_shell_wrapper.bit.bin"
_SHELL_DTBO = "opendfx_shell_wrapper.dtbo"
_SIHA = (0xA010_0000, 0x10000)


def linux_program_us(loads: int) -> tuple[list[float], list[float], list[float]]:
    """Per load into ``rp0`` of a kv260 fake: juggle's own µs for the program, for the
    unload, and the program's wall-clock µs, the fake's time included (see the module
    docstring)."""
    from juggle.fabric import open_fabric
    from juggle.fabric.bitstream import build_vendor_bit, parse_any, to_bin
    from juggle.fabric.linux.fdt import UioNode, build_overlay

    with tempfile.TemporaryDirectory(prefix="juggle-bench-linux-") as folder:
        kernel = _TimedKernel(folder, part=_KV_PART, family="zynqmp")
        shell = build_vendor_bit("opendfx_shell", _KV_PART, partial=False)
        kernel.write_file(f"lib/firmware/{_SHELL_IMAGE}", to_bin(shell))
        siha = UioNode(node="SIHA_Manager", reg=_SIHA)
        blob = build_overlay(firmware_name=_SHELL_IMAGE, target="fpga_full", uio=[siha])
        kernel.write_file(f"lib/firmware/{_SHELL_DTBO}", blob)
        data = build_vendor_bit("accel", _KV_PART, payload_words=256)  # no Region= tag
        bitstream = parse_any(data, source="accel.bit")
        programs: list[float] = []
        unloads: list[float] = []
        walls: list[float] = []
        with open_fabric(
            "kv260", backend="linux", sysfs=kernel, load_shell=True, uio_timeout_s=5.0
        ) as fabric:
            for n in range(loads + 2):  # the first two warm the code paths
                kernel.kernel_ns = 0
                t = time.perf_counter_ns()
                fabric.program("rp0", bitstream, data)
                program_ns = time.perf_counter_ns() - t
                program_kernel = kernel.kernel_ns
                kernel.kernel_ns = 0
                t = time.perf_counter_ns()
                fabric.unload("rp0")
                unload_ns = time.perf_counter_ns() - t
                if n >= 2:
                    programs.append((program_ns - program_kernel) / 1000)
                    unloads.append((unload_ns - kernel.kernel_ns) / 1000)
                    walls.append(program_ns / 1000)
            if kernel.overlays() != ["juggle-shell"]:
                raise RuntimeError(f"the fake still holds {kernel.overlays()} after the loads")
    return programs, unloads, walls


def run(quick: bool = False) -> dict[str, float]:
    """The Linux backend figures (see the module docstring)."""
    with one_cpu():
        samples = uio_access_ns(31 if quick else 301)
        programs, unloads, walls = linux_program_us(9 if quick else 101)
    return {
        "uio_access_ns_p50": statistics.median(samples),
        "uio_access_guarded": GUARDED,
        "linux_program_us_p50": statistics.median(programs),
        "linux_unload_us_p50": statistics.median(unloads),
        "linux_program_wall_us_p50": statistics.median(walls),
    }


if __name__ == "__main__":  # pragma: no cover - a quick look by hand
    print(run(quick=bool(os.environ.get("QUICK"))))
