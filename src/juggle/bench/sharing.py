"""Sharing benchmarks: what the runtime itself costs per juggle and per hardware context switch.

All figures come from one run on the embedded simulated board (``xupv2p``) with
``pace=False``: the simulated fabric never sleeps for its modeled clock, so wall time is only
the work this machine does. Measured figures are wall clock (``perf_counter``) on this machine;
a key with ``modeled`` in its name is modeled (fabric clock), not measured.

Juggle overhead (measured, µs): a :class:`~juggle.runtime.framework.Framework` with the example
``tdes`` co-module (one consumer, a key loaded, no callers running) is juggled into hardware and
back to its home software tier (``native`` for tdes) repeatedly (``fw.juggle(to_hardware=sid)``,
``fw.juggle(to_software=[sid])``; 600 juggles, 40 with ``quick``, after a warm-up). The
measuring thread is pinned to one CPU for the run (``os.sched_setaffinity``, restored after;
where the platform has it), as pyperf does: on a small virtual machine the scheduler otherwise
moves it between CPUs mid-juggle, and the cold caches that costs scatter the figure by a third
from run to run. Each figure is the ``overhead_us`` of the
:class:`~juggle.runtime.snapshots.JuggleReport` the runtime returns: the wall time of
``Framework.juggle`` minus the time spent waiting for running calls to drain (folding the
drained slots' statistics is work and counts) and minus the wall time of the configuration
port's bitstream transfer (``ProgramReport.port_wall_ms``: on the simulated fabric, the
simulator pushing the file through its modeled port; on a board, the reconfiguration itself).
Modeled reconfiguration and bridge time (``reconfiguration_ms``/``bridge_ms``) is never waited
for with ``pace=False``. Everything else is in: planning in the allocator, the fabric's checks
(part, resources, the bitstream matching its header), bridges, the driver, carrying the state
onto the new implementation, switching the proxies.

* ``juggle_overhead_us_p50`` / ``juggle_overhead_us_p90``: over all juggles, both directions
  (nearest rank). Half the juggles go each way and a juggle into hardware (program the region,
  build the driver, carry the state onto the core) costs about twice one out of it (which takes
  up the software implementation it left, see ``ManagedService.parked``), so the p50 sits at
  the boundary: about the cheapest juggle into hardware;
* ``juggle_overhead_us_p50_to_hardware`` / ``..._to_software``: per direction;
* ``juggle_wall_us_p50``: the whole ``fw.juggle`` call by the caller's clock (drains and the
  port's transfer included; with no callers the drain wait is nil);
* ``juggle_reconfiguration_modeled_ms``: the modeled reconfiguration + bridge time of one juggle
  into hardware, left out of the measured figures.

Context switch (measured, µs): a per-consumer copy of the ``tdes`` module in hardware, two
consumers with different keys making alternating 8-byte ``encrypt`` calls, so every call finds
the other consumer's context in the core and switches it (``HardwareCore.switches`` is checked to
grow by one per call). ``context_switch_us`` is the median duration of
``HardwareCore._switch_to`` itself, timed in place during those calls (the core instance's
method is wrapped for the run; ``perf_counter_ns`` before and after, minus the median cost of
reading the clock twice): the driver's ``save_context()`` of the outgoing consumer and
``restore_context()`` of the incoming one through the simulated window, plus the runtime's
bookkeeping. ``context_switch_caller_diff_us`` is what a caller sees on the simulator: the
median time of an alternating call minus the median time of a call when one consumer repeats
(no switch). It is *not* the runtime's switch cost: besides the switch it holds the simulated
TDES core model rebuilding its DES key schedule in pure Python on the first block after the
key registers changed (``TdesCore._start``), work a real core does in modeled cycles, so it is
many times ``context_switch_us`` here and is reported only as a cross-check.

Context switch (modeled, µs): ``context_switch_modeled_us`` is the bus time of one switch's
context operations on the board: the reads and writes ``save_context()`` + ``restore_context()``
make, counted by the simulated window's own access counters around each switch
(``context_switch_bus_reads`` / ``context_switch_bus_writes``), times the profile's ``[bus]``
``read_cycles`` / ``write_cycles`` at ``fabric_hz``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from juggle.bench.proxy import _tdes_module, binding_impl
from juggle.fabric.sim.window import SimWindow
from juggle.runtime.framework import Framework
from juggle.runtime.hardware import HardwareCore, HardwareDevice

__all__ = ["context_switch", "juggle_overhead", "run"]

INTERFACE = "crypto.EncryptionService"
KEY_A = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
KEY_B = bytes.fromhex("FEDCBA9876543210A1B2C3D4E5F60718293A4B5C6D7E8F90")


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _service_id(fw: Framework, module_name: str) -> int:
    (snap,) = [s for s in fw.services() if s.module == module_name]
    return snap.service_id


def juggle_overhead(quick: bool = False) -> dict[str, float]:
    """The runtime's own work per juggle (measured µs; see the module docstring)."""
    rounds = 20 if quick else 300  # two juggles per round
    warmup = 3 if quick else 10
    with one_cpu(), Framework("xupv2p", pace=False) as fw:
        module = fw.install(_tdes_module())
        module.start()
        sid = _service_id(fw, module.name)
        proxy = fw.get_service(INTERFACE, consumer="bench")
        proxy.load_key(KEY_A)
        to_hw: list[float] = []
        to_sw: list[float] = []
        wall: list[float] = []
        modeled_ms: list[float] = []
        for i in range(warmup + rounds):
            t0 = time.perf_counter()
            entered = fw.juggle(to_hardware=sid)
            t1 = time.perf_counter()
            left = fw.juggle(to_software=[sid])
            t2 = time.perf_counter()
            if entered.tiers.get(sid) != "hardware" or left.tiers.get(sid) == "hardware":
                raise RuntimeError(f"bench juggle did not move service {sid}: {entered}, {left}")
            if i < warmup:
                continue
            to_hw.append(entered.overhead_us)
            to_sw.append(left.overhead_us)
            wall += [(t1 - t0) * 1e6, (t2 - t1) * 1e6]
            modeled_ms.append(entered.reconfiguration_ms + entered.bridge_ms)
    both = to_hw + to_sw
    return {
        "juggle_overhead_us_p50": _quantile(both, 0.5),
        "juggle_overhead_us_p90": _quantile(both, 0.9),
        "juggle_overhead_us_p50_to_hardware": _quantile(to_hw, 0.5),
        "juggle_overhead_us_p50_to_software": _quantile(to_sw, 0.5),
        "juggle_wall_us_p50": _quantile(wall, 0.5),
        "juggle_reconfiguration_modeled_ms": statistics.median(modeled_ms),
        "juggles": len(both),
    }


@contextmanager
def one_cpu() -> Iterator[None]:
    """Run the body on one of the CPUs this process may use (the lowest), then allow them
    all again. Does nothing where the platform cannot pin threads."""
    getaff = getattr(os, "sched_getaffinity", None)
    setaff = getattr(os, "sched_setaffinity", None)
    if getaff is None or setaff is None:
        yield
        return
    allowed = getaff(0)
    setaff(0, {min(allowed)})
    try:
        yield
    finally:
        setaff(0, allowed)


def per_consumer_module(folder: Path) -> Path:
    """A copy of the example ``tdes`` co-module in ``folder`` with ``per_consumer = true``."""
    target = folder / "tdes_pc"
    shutil.copytree(_tdes_module(), target)
    toml = target / "juggle.toml"
    text = toml.read_text(encoding="utf-8")
    if "per_consumer = false" not in text:
        raise RuntimeError(f"{toml}: no 'per_consumer = false' to turn into a per-consumer one")
    text = text.replace("per_consumer = false", "per_consumer = true")
    toml.write_text(text.replace('name = "tdes"', 'name = "tdes_pc"'), encoding="utf-8")
    return target


def _timer_cost_ns(samples: int = 2_000) -> int:
    """Median of two back-to-back ``perf_counter_ns`` reads (what timing in place adds)."""
    clock = time.perf_counter_ns
    costs = []
    for _ in range(samples):
        t0 = clock()
        costs.append(clock() - t0)
    return int(statistics.median(costs))


@contextmanager
def _timed_switches(core: HardwareCore, durations: list[int]) -> Iterator[None]:
    """Time every ``core._switch_to`` (ns, appended to ``durations``) while in the block."""
    original: Callable[[HardwareDevice], None] = core._switch_to
    clock = time.perf_counter_ns

    def timed(device: HardwareDevice) -> None:
        t0 = clock()
        original(device)
        durations.append(clock() - t0)

    setattr(core, "_switch_to", timed)  # noqa: B010 - an instance attribute over the method
    try:
        yield
    finally:
        delattr(core, "_switch_to")


@contextmanager
def _counted_switches(
    core: HardwareCore, window: SimWindow, counts: list[tuple[int, int]]
) -> Iterator[None]:
    """Count the window's reads and writes inside every ``core._switch_to`` while in the block."""
    original: Callable[[HardwareDevice], None] = core._switch_to

    def counted(device: HardwareDevice) -> None:
        before = window.statistics()
        original(device)
        after = window.statistics()
        counts.append((after.reads - before.reads, after.writes - before.writes))

    setattr(core, "_switch_to", counted)  # noqa: B010 - an instance attribute over the method
    try:
        yield
    finally:
        delattr(core, "_switch_to")


def _per_call_ns(calls: list[Callable[[], Any]]) -> list[int]:
    """Each of ``calls`` made in order, timed one at a time (ns)."""
    clock = time.perf_counter_ns
    out = []
    for call in calls:
        t0 = clock()
        call()
        out.append(clock() - t0)
    return out


def context_switch(quick: bool = False) -> dict[str, float]:
    """Per-consumer TDES in hardware, two consumers alternating (see the module docstring)."""
    calls = 200 if quick else 1_000
    rounds = 2 if quick else 3
    with tempfile.TemporaryDirectory(prefix="juggle-bench-") as tmp:
        module_path = per_consumer_module(Path(tmp))
        with Framework("xupv2p", pace=False) as fw:
            module = fw.install(module_path)
            module.start()
            sid = _service_id(fw, module.name)
            a = fw.get_service(INTERFACE, consumer="a")
            b = fw.get_service(INTERFACE, consumer="b")
            a.load_key(KEY_A)
            b.load_key(KEY_B)
            report = fw.juggle(to_hardware=sid)
            if report.region is None:
                raise RuntimeError(f"per-consumer tdes stayed out of hardware: {report}")
            device = binding_impl(a)
            if not isinstance(device, HardwareDevice) or binding_impl(b) is device:
                raise RuntimeError("the two consumers do not have virtual devices of their own")
            core = device.core
            if core is None:
                raise RuntimeError(f"{device!r} is bound to no core")
            window = fw.fabric.window(report.region)
            if not isinstance(window, SimWindow):
                raise RuntimeError(f"not a simulated window: {window!r}")
            buf_a, buf_b = bytearray(8), bytearray(8)

            def call_a() -> Any:
                return a.encrypt(buf_a, 8)

            def call_b() -> Any:
                return b.encrypt(buf_b, 8)

            # the core holds a's context before and after every phase: each alternating call
            # switches it, no repeated call does
            alternating = [call_b, call_a] * (calls // 2)
            repeating = [call_a] * calls
            for call in alternating[:20] + repeating[:20]:  # warm up both paths
                call()

            counts: list[tuple[int, int]] = []
            with _counted_switches(core, window, counts):
                for call in alternating[:8]:
                    call()
            if len(counts) != 8 or len(set(counts)) != 1:
                raise RuntimeError(f"context switches made differing bus accesses: {counts}")
            reads, writes = counts[0]

            timer_ns = _timer_cost_ns()
            switch_ns: list[int] = []
            alt_ns: list[int] = []
            rep_ns: list[int] = []
            for _ in range(rounds):
                switches = core.switches
                with _timed_switches(core, switch_ns):
                    alt_ns += _per_call_ns(alternating)
                if core.switches - switches != len(alternating):
                    raise RuntimeError(
                        f"{core.switches - switches} switches for {len(alternating)} "
                        "alternating calls: not every call switched the core"
                    )
                switches = core.switches
                rep_ns += _per_call_ns(repeating)
                if core.switches != switches:
                    raise RuntimeError("repeated calls of one consumer switched the core")
    bus = fw.fabric.profile.bus
    hz = fw.fabric.profile.board.fabric_hz
    modeled_s = (reads * bus.read_cycles + writes * bus.write_cycles) / hz
    return {
        "context_switch_us": max(0, statistics.median(switch_ns) - timer_ns) / 1e3,
        "context_switch_caller_diff_us": (statistics.median(alt_ns) - statistics.median(rep_ns))
        / 1e3,
        "context_switch_modeled_us": modeled_s * 1e6,
        "context_switch_bus_reads": reads,
        "context_switch_bus_writes": writes,
        "context_switches": len(switch_ns),
    }


def run(quick: bool = False) -> dict[str, float]:
    """All sharing figures."""
    return {**juggle_overhead(quick), **context_switch(quick)}
