"""The AXI4-Lite reference module (``examples/modules/gcd``): model, Verilog and runtime agree.

* The module's code on its own: both software tiers are ``math.gcd`` on unsigned 32-bit numbers
  and refuse anything else naming the value; the driver over the register model gives the same
  answers and gives up on a core that never finishes; the model's skip over idle time and over
  auto_restart loops is what edge-by-edge simulation gives.
* Model against RTL (``gcd_top.v`` in Verilator, behind juggle's AXI4-Lite harness): register
  traffic with every read compared, and the driver on edge and random operands, with equal
  results and equal modeled cycles, which are the documented schedule's; on Icarus Verilog too
  where it is installed.
* Through the runtime (``Framework(hardware="rtl")``): the module's Verilog serves the service,
  results equal software; copies of the module whose core answers SLVERR to the write of
  AP_CTRL, or never raises BVALID, are contained (no failed call, region ERROR) and the fault
  recorded is that bus error.

The faulty cores are made from the real core by :func:`faulty_core`, which changes only the
lines of its fault (each edit must match exactly once, so they follow the real core). Since
juggle's harness always raises AWVALID with WVALID and takes every response at once, the
AXI4-Lite port is also checked, under Icarus Verilog where it is installed, by a self-checking
Verilog testbench (``tests/fabric/hdl/gcd_axi_tb``) that drives the other handshake orders and
back-pressure.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import math
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import juggle
from juggle.errors import CoreTimeoutError, ServiceArgumentError, WindowAccessError
from juggle.fabric import ModelCatalog, ModelClock, load_profile
from juggle.fabric.rtl import RtlBackend, RtlCatalog, RtlWindow, VerilatorEngine
from juggle.fabric.rtl.icarus import IcarusEngine
from juggle.fabric.sim import SimBackend, SimWindow
from juggle.runtime.snapshots import RegionSnapshot

ROOT = Path(__file__).resolve().parents[2]
GCD = ROOT / "examples" / "modules" / "gcd"
CORE = GCD / "hdl" / "gcd" / "gcd_top.v"
FAULTY = ROOT / "tests" / "fabric" / "hdl"

#: variant -> (text of the real core, its replacement): the whole fault, nothing else
FAULTS: dict[str, tuple[tuple[str, str], ...]] = {
    # writes to AP_CTRL answer SLVERR (the write still takes effect)
    "gcd_slverr": (
        (
            "    assign s_axi_bresp = OKAY;\n",
            "    reg [1:0] bresp_q;  // FAULT: the response of the last write\n"
            "    assign s_axi_bresp = bresp_q;  // FAULT\n",
        ),
        (
            "            s_axi_bvalid <= 1'b0;\n        end else begin\n"
            "            if (wr_en) begin\n",
            "            s_axi_bvalid <= 1'b0;\n            bresp_q <= OKAY;  // FAULT\n"
            "        end else begin\n            if (wr_en) begin\n"
            "                bresp_q <= wr_word == R_CTRL ? 2'b10 : OKAY;  // FAULT: SLVERR\n",
        ),
    ),
    # BVALID never rises: the write response never comes
    "gcd_nobvalid": (
        (
            "                s_axi_bvalid <= 1'b1;\n",
            "                s_axi_bvalid <= 1'b0;  // FAULT: the write response never comes\n",
        ),
    ),
}


def faulty_core(variant: str, into: Path) -> Path:
    """Write the real gcd core with the fault of ``variant`` (:data:`FAULTS`) to ``into``."""
    text = CORE.read_text()
    for old, new in FAULTS[variant]:
        assert text.count(old) == 1, f"{variant}: the real core changed near {old!r}"
        text = text.replace(old, new)
    into.parent.mkdir(parents=True, exist_ok=True)
    into.write_text(f"// FAULT: the gcd core with the fault {variant!r} (tests/runtime)\n{text}")
    return into


sys.path.insert(0, str(ROOT / "tests" / "fabric"))
from rtl_support import engine  # noqa: E402

M32 = 0xFFFFFFFF
#: operands at the edges: 0, 1, equal, the largest, powers of two, odd and even neighbours
EDGES = (
    (0, 0),
    (0, 1),
    (1, 0),
    (0, M32),
    (M32, 0),
    (1, 1),
    (7, 7),
    (M32, M32),
    (M32, 1),
    (1, M32),
    (M32, 1 << 31),
    (1 << 31, 1 << 31),
    (1 << 31, 1 << 30),
    (1 << 16, 1 << 31),
    (M32 - 1, M32),
    (2**31 - 1, 2**31),
    (48, 18),
    (0xF0000000, 0x0F000000),
)
_ids = itertools.count()


# -- the module's code --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gcd() -> Iterator[ModuleType]:
    """``gcd_module``, imported from the module folder as a package of its own."""
    package = f"_test_rtl_gcd_{next(_ids)}"
    spec = importlib.util.spec_from_file_location(
        package, GCD / "__init__.py", submodule_search_locations=[str(GCD)]
    )
    assert spec is not None
    sys.modules[package] = importlib.util.module_from_spec(spec)
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in there
    try:
        yield importlib.import_module(f"{package}.gcd_module")
    finally:
        sys.dont_write_bytecode = writes
        for name in [n for n in sys.modules if n.split(".")[0] == package]:
            del sys.modules[name]


def _operands(rnd: random.Random, count: int) -> list[tuple[int, int]]:
    """Random operand pairs of random bit lengths, some with a large common power of two."""
    out = []
    for _ in range(count):
        a, b = rnd.getrandbits(rnd.randint(1, 32)), rnd.getrandbits(rnd.randint(1, 32))
        if rnd.random() < 0.3:
            shift = rnd.randint(1, 12)
            a, b = (a << shift) & M32, (b << shift) & M32
        out.append((a, b))
    return out


def test_software_tiers_are_math_gcd_and_refuse_bad_operands(gcd: ModuleType) -> None:
    tiers = gcd.SoftwareGcd(), gcd.NativeGcd()
    for a, b in [*EDGES, *_operands(random.Random(1), 300)]:
        assert [t.gcd(a, b) for t in tiers] == [math.gcd(a, b)] * 2, (a, b)
    for tier in tiers:
        for name, args, value in (
            ("a", (-1, 5), -1),
            ("b", (5, 2**32), 2**32),
            ("a", (2**40, 0), 2**40),
        ):
            with pytest.raises(ServiceArgumentError, match=str(value)) as info:
                tier.gcd(*args)
            assert (info.value.argument, info.value.value) == (name, value)
        for bad in (True, 1.0, "3", None):
            with pytest.raises(ServiceArgumentError) as info:
                tier.gcd(6, bad)
            assert info.value.argument == "b"


def test_stein_steps_bound_the_latency(gcd: ModuleType) -> None:
    worst = 0
    for a, b in [*EDGES, *_operands(random.Random(2), 2000)]:
        steps, result = gcd.stein_steps(a, b)
        assert result == math.gcd(a, b)
        worst = max(worst, steps)
    assert gcd.stein_steps(M32, 1 << 31)[0] == worst == 63  # within the documented <= 64


def _model_window(gcd: ModuleType, profile: str = "xupv2p") -> tuple[SimWindow, ModelClock]:
    board = load_profile(profile)
    clock = ModelClock()
    backend = SimBackend(board, clock, ModelCatalog({"gcd": gcd.GcdCore}))
    region = board.regions[0]
    backend.bridge_ops(region).enable_set(True)
    window = backend.attach(region, "gcd")
    assert isinstance(window, SimWindow)
    return window, clock


def test_driver_on_the_model_answers_and_checks_before_touching_the_core(
    gcd: ModuleType,
) -> None:
    window, _ = _model_window(gcd)
    driver = gcd.GcdDriver(window)
    for a, b in [*EDGES, *_operands(random.Random(3), 200)]:
        assert driver.gcd(a, b) == math.gcd(a, b), (a, b)
    before = window.statistics()
    with pytest.raises(ServiceArgumentError, match="4294967296"):
        driver.gcd(1, 2**32)
    after = window.statistics()
    assert (after.reads, after.writes) == (before.reads, before.writes)


class _NeverDone:
    """A window whose core never sets ap_done; counts the reads."""

    size = 0x40

    def __init__(self) -> None:
        self.reads = 0

    def read32(self, offset: int) -> int:
        self.reads += 1
        return 0x4  # idle, never done

    def write32(self, offset: int, value: int) -> None:
        pass


def test_driver_gives_up_on_a_core_that_never_finishes(gcd: ModuleType) -> None:
    window = _NeverDone()
    driver = gcd.GcdDriver(window, max_polls=25)
    with pytest.raises(CoreTimeoutError, match="25 reads"):
        driver.gcd(12, 18)
    assert window.reads == 25


class _FrozenClock:
    """A window over ``core`` whose clock stopped at cycle ``now`` (as a ``core_hang``)."""

    size = 0x40

    def __init__(self, core: Any, now: int) -> None:
        self.core, self.now = core, now

    def read32(self, offset: int) -> int:
        return int(self.core.read(offset, self.now))

    def write32(self, offset: int, value: int) -> None:
        self.core.write(offset, value, self.now)


def test_a_model_whose_clock_stops_never_finishes(gcd: ModuleType) -> None:
    core = gcd.GcdCore()
    driver = gcd.GcdDriver(_FrozenClock(core, 5_000), max_polls=200)
    with pytest.raises(CoreTimeoutError):
        driver.gcd(12, 18)
    assert core.read(gcd.AP_CTRL, 5_000) == gcd.AP_START | gcd.AP_IDLE  # started, never ran
    # the clock runs again: the core loads, takes its 4 steps and finishes
    assert core.read(gcd.AP_CTRL, 5_010) == gcd.AP_DONE | gcd.AP_IDLE | gcd.AP_READY
    assert core.read(gcd.RESULT, 5_020) == 6


def test_model_skips_idle_time_and_auto_restart_loops_as_edge_by_edge(gcd: ModuleType) -> None:
    """Two models looping on auto_restart: one read only after 10**6 cycles (so it skips whole
    operations), the other read every 40 cycles through RESULT, which no read changes (so it
    runs every edge). Every register and the operation count agree at the end."""
    skipping, stepping = gcd.GcdCore(), gcd.GcdCore()
    a, b = 0xFFFFFFFF, 0x80000000  # 63 steps: 65 edges an operation
    for core in (skipping, stepping):
        core.write(gcd.A, a, 1_000)  # after a long idle stretch
        core.write(gcd.B, b, 1_010)
        core.write(gcd.IER, 3, 1_020)
        core.write(gcd.AP_CTRL, gcd.AP_START | gcd.AUTO_RESTART, 1_030)
    end = 1_000_000
    for now in range(1_040, end, 40):
        assert stepping.read(gcd.RESULT, now) in (0, 1)
    regs = (gcd.AP_CTRL, gcd.ISR, gcd.RESULT, gcd.RESULT_VLD, gcd.AP_CTRL, gcd.RESULT_VLD)
    got = [skipping.read(offset, end + 10 * i) for i, offset in enumerate(regs)]
    want = [stepping.read(offset, end + 10 * i) for i, offset in enumerate(regs)]
    assert got == want
    flags = gcd.AP_DONE | gcd.AP_READY | gcd.AUTO_RESTART
    assert got[0] & flags == flags and got[1] == 3 and got[2] == math.gcd(a, b)
    assert skipping.operations == stepping.operations > (end - 1_030) // 65 - 2


def test_each_fault_edits_the_real_core() -> None:
    """Every fault's edits apply to the real core once each (else :func:`faulty_core` fails)."""
    for variant, edits in FAULTS.items():
        text = CORE.read_text()
        assert all(text.count(old) == 1 for old, _ in edits), variant


@pytest.mark.parametrize(
    ("variant", "verdict"),
    [
        (None, "PASS"),
        ("gcd_slverr", "FAIL: BRESP OKAY"),
        ("gcd_nobvalid", "FAIL: timeout"),
    ],
    ids=["real", "slverr", "nobvalid"],
)
def test_the_axi4_lite_port_in_every_handshake_order(
    variant: str | None, verdict: str, tmp_path: Path
) -> None:
    """``gcd_axi_tb.v`` (Icarus) drives the port as juggle's harness never does: AW and W in
    either order with gaps, BREADY and RREADY late, a read beside a write, byte strobes. The
    real core passes it; the faulty copies fail it, each for its own fault."""
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        pytest.skip("Icarus Verilog is not installed: iverilog/vvp not on PATH")
    core = CORE if variant is None else faulty_core(variant, tmp_path / "gcd_top.v")
    compiled = tmp_path / "tb.vvp"
    subprocess.run(
        [
            "iverilog",
            "-g2005",
            "-o",
            str(compiled),
            str(FAULTY / "gcd_axi_tb" / "gcd_axi_tb.v"),
            str(core),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    run = subprocess.run(
        ["vvp", "-n", str(compiled)], check=True, capture_output=True, text=True, timeout=60
    )
    lines = run.stdout.splitlines()
    if verdict == "PASS":
        assert not any(line.startswith("FAIL") for line in lines), run.stdout
        assert lines[-1].startswith("PASS") and int(lines[-1].split()[1]) > 500, run.stdout
    else:
        assert verdict in run.stdout and lines[-1].startswith("FAILED"), run.stdout


# -- model against RTL --------------------------------------------------------------------------


class _Pair:
    """The gcd design twice on ``profile``: the register model (``sim``) and the Verilog
    (``rtl``), each on its own backend and modeled clock."""

    def __init__(
        self, gcd: ModuleType, profile: str, sim_engine: VerilatorEngine | IcarusEngine
    ) -> None:
        board = load_profile(profile)
        self.hz = board.board.fabric_hz
        self.region = board.regions[0]
        models = ModelCatalog({"gcd": gcd.GcdCore})
        rtl = RtlCatalog()
        rtl.add("gcd", [CORE], "gcd_top", bus="axi4-lite")
        self.sim_clock, self.rtl_clock = ModelClock(), ModelClock()
        self.backends = (
            SimBackend(board, self.sim_clock, models),
            RtlBackend(board, self.rtl_clock, models, rtl=rtl, engine=sim_engine, progress=None),
        )
        windows = []
        for backend in self.backends:
            backend.bridge_ops(self.region).enable_set(True)
            windows.append(backend.attach(self.region, "gcd"))
        sim, rtl_window = windows
        assert isinstance(sim, SimWindow) and isinstance(rtl_window, RtlWindow)
        self.sim, self.rtl = sim, rtl_window
        self.read_cycles, self.write_cycles = board.bus.read_cycles, board.bus.write_cycles

    def cycles(self) -> tuple[int, int]:
        """Modeled time on each side, in fabric cycles: (model, RTL)."""
        return self.sim_clock.now_cycles(self.hz), self.rtl_clock.now_cycles(self.hz)

    def close(self) -> None:
        for backend in self.backends:
            backend.close()


def _engine(name: str) -> VerilatorEngine | IcarusEngine:
    """The simulator ``name``; skips, naming what is missing, where it cannot run."""
    if name == "verilator":
        return engine()
    if shutil.which("iverilog") is None or shutil.which("vvp") is None:
        pytest.skip("Icarus Verilog is not installed: iverilog/vvp not on PATH")
    return IcarusEngine(progress=None)


@pytest.fixture
def pair(gcd: ModuleType, request: pytest.FixtureRequest) -> Iterator[_Pair]:
    """A model/RTL pair; ``request.param`` is ``(profile, simulator)``."""
    profile, simulator = getattr(request, "param", ("xupv2p", "verilator"))
    made = _Pair(gcd, profile, _engine(simulator))
    yield made
    made.close()


@pytest.mark.parametrize(
    "pair",
    [
        ("xupv2p", "verilator"),
        ("virtex4-router", "verilator"),
        ("zedboard", "verilator"),
        ("xupv2p", "icarus"),
    ],
    indirect=True,
    ids=lambda p: "-".join(p),
)
def test_register_traffic_agrees_read_for_read(gcd: ModuleType, pair: _Pair) -> None:
    """Random reads and writes of every offset (starts, auto_restart, interrupt registers,
    clear-on-read bits), every read equal on model and RTL, the clocks equal after each."""
    rnd = random.Random(f"{pair.region.name}/{pair.read_cycles}")
    offsets = range(0, 0x40, 4)
    seen: set[int] = set()
    for step in range(900):
        if rnd.random() < 0.55:
            offset = gcd.AP_CTRL if rnd.random() < 0.5 else rnd.choice(offsets)
            got, want = pair.rtl.read32(offset), pair.sim.read32(offset)
            assert got == want, f"step {step}: read {offset:#x}: RTL {got:#x}, model {want:#x}"
            if offset == gcd.AP_CTRL:
                seen.add(want & (gcd.AP_START | gcd.AP_DONE | gcd.AP_IDLE))
        else:
            roll = rnd.random()
            if roll < 0.25:
                offset, value = gcd.AP_CTRL, rnd.choice((1, 1, 1, 0, 0x81, 0x80))
            elif roll < 0.7:
                offset = rnd.choice((gcd.A, gcd.B))
                value = rnd.choice((0, 1, M32, 1 << 31, rnd.getrandbits(32)))
            else:
                offset, value = rnd.choice(offsets), rnd.getrandbits(32)
            pair.rtl.write32(offset, value)
            pair.sim.write32(offset, value)
        model, rtl = pair.cycles()
        assert model == rtl, f"step {step}: clocks differ"
    with pytest.raises(WindowAccessError):
        pair.rtl.read32(0x40)
    # running (start, not idle), finished (done, idle) and started-but-not-yet-loaded were read
    assert {gcd.AP_START, gcd.AP_DONE | gcd.AP_IDLE} <= seen


@pytest.mark.parametrize(
    "pair", [("xupv2p", "verilator"), ("xupv2p", "icarus")], indirect=True, ids=lambda p: p[1]
)
def test_driver_results_and_cycles_agree_on_edge_and_random_operands(
    gcd: ModuleType, pair: _Pair
) -> None:
    """Each call: equal results, equal modeled cycles on both sides and in the RTL's own count,
    and that count is the schedule of gcd_top.v: three writes, then status reads until the one
    whose AR handshake comes at least n + 3 edges after the AP_CTRL write's, then RESULT."""
    drivers = gcd.GcdDriver(pair.sim), gcd.GcdDriver(pair.rtl)
    reads, writes = pair.read_cycles, pair.write_cycles
    latencies = set()
    for a, b in [*EDGES, *_operands(random.Random(4), 60)]:
        sim0, rtl0 = pair.cycles()
        own0 = pair.rtl.rtl_cycles
        got_sim = drivers[0].gcd(a, b)
        got_rtl = drivers[1].gcd(a, b)
        sim1, rtl1 = pair.cycles()
        assert got_rtl == got_sim == math.gcd(a, b), (a, b)
        assert sim1 - sim0 == rtl1 - rtl0 == pair.rtl.rtl_cycles - own0, (a, b)
        steps = gcd.stein_steps(a, b)[0]
        polls = -(-(steps + 3) // reads)
        assert rtl1 - rtl0 == 3 * writes + (polls + 1) * reads, (a, b, steps)
        latencies.add(rtl1 - rtl0)
    assert len(latencies) >= 5  # the latency follows the operands


# -- through the runtime --------------------------------------------------------------------------


#: how long containment (in the supervisor's thread) may take to show, in seconds
WAIT_S = 10.0


def _until(condition: Callable[[], bool], what: str) -> None:
    """Until ``condition()`` holds, at most :data:`WAIT_S` (it is checked every 5 ms)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def _region(fw: juggle.Framework, name: str) -> RegionSnapshot:
    (region,) = [r for r in fw.regions() if r.name == name]
    return region


def _framework() -> juggle.Framework:
    engine()  # skips, naming why, where Verilator cannot run
    return juggle.Framework("xupv2p", hardware="rtl")


def test_the_module_serves_gcd_from_its_verilog() -> None:
    fw = _framework()
    try:
        fw.install(GCD).start()
        proxy: Any = fw.get_service("hls.GcdService")
        sid = proxy.service_id
        fw.juggle(to_hardware=sid)
        window = fw.fabric.window("prr0")
        assert isinstance(window, RtlWindow) and window.design == "gcd"
        rtl0 = window.rtl_cycles
        rnd = random.Random(5)
        for a, b in [*EDGES, *_operands(rnd, 150)]:
            assert proxy.gcd(a, b) == math.gcd(a, b), (a, b)
        stats = fw.statistics(sid)
        assert stats.engine == "rtl"
        assert stats.per_tier["hardware"].calls == len(EDGES) + 150
        assert stats.fallbacks == 0 and stats.mismatches == 0 and not fw.faults
        assert window.rtl_cycles > rtl0 and window.simulator.alive
        assert fw.services()[0].tier == "hardware"
    finally:
        fw.close()


@pytest.mark.parametrize(
    ("variant", "error", "detail"),
    [
        ("gcd_slverr", "BusResponseError", "SLVERR"),
        ("gcd_nobvalid", "CoreTimeoutError", "BVALID"),
    ],
)
def test_a_faulty_axi_core_is_contained(
    tmp_path: Path, variant: str, error: str, detail: str
) -> None:
    """The module with its core swapped for a faulty copy: every call is answered right (from
    software once the core failed), the region ends in ERROR, and the fault the runtime
    recorded is the bus error of that core."""
    module = tmp_path / "gcd"
    shutil.copytree(GCD, module, ignore=shutil.ignore_patterns("__pycache__"))
    faulty_core(variant, module / "hdl" / "gcd" / "gcd_top.v")
    (module / "resources.json").unlink()  # the report is the real core's
    fw = _framework()
    try:
        fw.install(module).start()
        proxy: Any = fw.get_service("hls.GcdService")
        sid = proxy.service_id
        fw.juggle(to_hardware=sid)
        assert fw.services()[0].tier == "hardware"
        failures: list[Exception] = []
        wrong: list[tuple[int, int, int]] = []
        for a, b in [*EDGES, *_operands(random.Random(6), 40)]:
            try:
                got = proxy.gcd(a, b)
            except Exception as exc:  # a failed call: what this test counts
                failures.append(exc)
                continue
            if got != math.gcd(a, b):
                wrong.append((a, b, got))
        assert failures == [] and wrong == []
        # containment runs in the supervisor's thread: wait for its outcome (bounded)
        _until(lambda: _region(fw, "prr0").state == "ERROR", "prr0 in ERROR")
        _until(lambda: fw.services()[0].tier != "hardware", "the service off hardware")
        faults = [f for f in fw.faults if f.startswith(f"prr0: service {sid}:")]
        assert faults and error in faults[0] and detail in faults[0], list(fw.faults)
        assert fw.statistics(sid).fallbacks >= 1  # calls the core failed, served by software
    finally:
        fw.close()
