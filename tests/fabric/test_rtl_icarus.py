"""The Icarus engine: the rtl backend's alternative to Verilator, where ``iverilog`` is installed.

Its simulators must answer exactly as Verilator's do (same values, same cycles per transaction,
for the same request sequence; Icarus over pipes, Verilator over shared memory), serve the real
drivers behind an RtlWindow with the model's results and modeled time, fail the way the backend
contains, and cache their builds by source. Skipped, saying why, without Icarus (or without
Verilator, for the comparison).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from rtl_support import DESIGNS, built, engine

from juggle.errors import BackendError, WindowAccessError, WindowAttachError
from juggle.fabric import ModelCatalog, ModelClock, load_profile
from juggle.fabric.rtl import RtlBackend, RtlCatalog, RtlWindow, SimProcess
from juggle.fabric.rtl.icarus import IcarusEngine
from juggle.fabric.sim import SimBackend
from juggle.services.arith import AdderDriver
from juggle.services.audio import AdpcmDriver, decode_ima_adpcm, encode_ima_adpcm, sine_sweep
from juggle.services.crypto import registers as r
from juggle.services.crypto.driver import TdesDriver

pytestmark = pytest.mark.skipif(
    shutil.which("iverilog") is None or shutil.which("vvp") is None,
    reason="Icarus Verilog is not installed: iverilog/vvp not on PATH "
    "(Debian: apt-get install iverilog)",
)

KEY = bytes.fromhex("0123456789abcdef23456789abcdef01456789abcdef0123")
PLAIN = b"The qufck brown fox jump"
CIPHER = bytes.fromhex("a826fd8ce53b855fcce21c8112256fe668d5c05dd9b6b900")


@pytest.fixture(scope="module")
def icarus(tmp_path_factory: pytest.TempPathFactory) -> IcarusEngine:
    """An Icarus engine caching in this module's own directory (builds take milliseconds)."""
    return IcarusEngine(cache_dir=tmp_path_factory.mktemp("icarus-cache"), progress=None)


@pytest.mark.parametrize("design", DESIGNS)
def test_icarus_answers_as_verilator(design: str, icarus: IcarusEngine) -> None:
    """The same random transactions, on two bus timings: equal values and cycles."""
    spec = RtlCatalog.builtin().get(design)
    verilated = built()[design]
    rnd = random.Random(design)
    for reads, writes in ((12, 8), (1, 1)):
        sims: list[SimProcess] = [
            icarus.process([str(icarus.build(spec)), str(reads), str(writes), "8"], label="icarus"),
            engine().process([str(verilated), str(reads), str(writes), "8"], label="verilator"),
        ]
        try:
            for step in range(800):
                offset = rnd.randrange(0, 0x48, 4)
                if rnd.random() < 0.5:
                    got = [sim.read(offset) for sim in sims]
                else:
                    value = rnd.getrandbits(32) if rnd.random() < 0.7 else rnd.choice((0, 1, 8))
                    got = [(sim.write(offset, value), 0) for sim in sims]
                assert got[0] == got[1], f"step {step} at {offset:#x}: {got}"
            assert sims[0].cycles == sims[1].cycles > 0
        finally:
            for sim in sims:
                sim.close()


def _backends(icarus: IcarusEngine) -> tuple[RtlBackend, SimBackend]:
    profile = load_profile("xupv2p")
    # RtlBackend's ``engine`` is typed as a VerilatorEngine; IcarusEngine has its interface
    eng: Any = icarus
    rtl = RtlBackend(profile, ModelClock(), ModelCatalog.builtin(), engine=eng)
    sim = SimBackend(profile, ModelClock(), ModelCatalog.builtin())
    for backend in (rtl, sim):
        backend.bridge_ops(profile.regions[0]).enable_set(True)
    return rtl, sim


def test_drivers_on_an_icarus_backend(icarus: IcarusEngine) -> None:
    """TDES, adder and ADPCM through their drivers: the model's results and modeled time."""
    rtl, sim = _backends(icarus)
    region = rtl.profile.regions[0]
    hz = rtl.profile.board.fabric_hz
    try:
        for design in ("tdes", "adder", "adpcm"):
            windows = rtl.attach(region, design), sim.attach(region, design)
            assert isinstance(windows[0], RtlWindow)
            results = []
            for window in windows:
                if design == "tdes":
                    driver = TdesDriver(window)
                    driver.load_key(KEY)
                    buf = bytearray(PLAIN)
                    driver.encrypt(buf, len(buf))
                    results.append(bytes(buf))
                elif design == "adder":
                    add = AdderDriver(window).add
                    results.append(bytes(str([add(a, 7) for a in (-8, 2**31 - 1, 5)]), "ascii"))
                else:
                    stream = encode_ima_adpcm(sine_sweep(0.01, seed=1))
                    results.append(AdpcmDriver(window).decode(stream))
            assert results[0] == results[1]
            if design == "tdes":
                assert results[0] == CIPHER
            if design == "adpcm":
                assert results[0] == decode_ima_adpcm(encode_ima_adpcm(sine_sweep(0.01, seed=1)))[0]
            assert rtl.clock.now_cycles(hz) == sim.clock.now_cycles(hz)
    finally:
        rtl.close()
        sim.close()


def test_a_dead_simulator_is_a_fabric_error(icarus: IcarusEngine) -> None:
    rtl, sim = _backends(icarus)
    region = rtl.profile.regions[0]
    try:
        window = rtl.attach(region, "tdes")
        assert isinstance(window, RtlWindow)
        window.write32(r.DATA_HI, 5)
        assert window.read32(r.DATA_HI) == 5
        os.kill(window.pid, signal.SIGKILL)  # the launcher exec'd vvp: the pid is the simulator
        with pytest.raises(WindowAccessError, match="killed by signal 9"):
            window.read32(r.DATA_HI)
    finally:
        rtl.close()
        sim.close()


def test_malformed_requests_end_the_simulator(icarus: IcarusEngine) -> None:
    exe = icarus.build(RtlCatalog.builtin().get("adder"))
    for request in (b"r zz\n", b"x 1\n", b"w 8\nq\n"):
        proc = subprocess.run(
            [str(exe), "1", "1", "8"], input=request, capture_output=True, timeout=30, check=False
        )
        assert proc.returncode != 0, request
        assert b"error" in proc.stderr, (request, proc.stderr)
    proc = subprocess.run([str(exe)], capture_output=True, timeout=30, check=False)
    assert proc.returncode == 2 and b"usage" in proc.stderr
    ok = subprocess.run(
        [str(exe), "3", "2", "8"],
        input=b"w 8 5\nr 8\nc\n",
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert ok.stdout.decode().split("\n")[:4] == ["ready 2 adder_top", "2 0", "00000005 3 0", "5"]


def test_builds_are_cached_by_source(icarus: IcarusEngine, tmp_path: Path) -> None:
    tdes = RtlCatalog.builtin().get("tdes")
    exe = icarus.build(tdes)
    again = IcarusEngine(cache_dir=icarus.cache_dir, progress=None)
    assert again.is_built(tdes)
    started = time.perf_counter()
    assert again.build(tdes) == exe == again.executable(tdes)
    assert time.perf_counter() - started < 0.5
    copies = []
    for source in tdes.sources:
        copy = tmp_path / source.name
        copy.write_bytes(source.read_bytes())
        copies.append(copy)
    assert icarus.build_key(RtlCatalog().add("tdes", copies, "tdes_top")) == icarus.build_key(tdes)
    copies[1].write_bytes(copies[1].read_bytes() + b"// changed\n")
    assert not icarus.is_built(RtlCatalog().add("tdes", copies, "tdes_top"))
    assert icarus.lint(tdes) == []
    broken = tmp_path / "broken_top.v"
    broken.write_text("module broken_top(input clk); this is not verilog; endmodule\n")
    with pytest.raises(BackendError, match="broken"):
        icarus.build(RtlCatalog().add("broken", [broken], "broken_top"))
    messages: list[str] = []
    talking = IcarusEngine(cache_dir=tmp_path / "cache", progress=messages.append)
    talking.build(RtlCatalog.builtin().get("adder"))
    assert any("building the RTL simulator of 'adder'" in m for m in messages)


def test_broken_rtl_is_an_attach_error(icarus: IcarusEngine, tmp_path: Path) -> None:
    rtl, sim = _backends(icarus)
    try:
        broken = tmp_path / "broken_top.v"
        broken.write_text("module broken_top(input clk); endmodule\n")  # no bus ports
        rtl.rtl.add("broken", [broken], "broken_top", window_size=0x40)
        with pytest.raises(WindowAttachError, match="could not"):
            rtl.attach(rtl.profile.regions[0], "broken")
    finally:
        rtl.close()
        sim.close()


def test_missing_icarus_is_a_backend_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BackendError, match="apt-get install iverilog"):
        IcarusEngine(progress=None)
