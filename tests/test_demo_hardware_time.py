"""One definition of hardware throughput (``juggle.throughput``): ``juggle demo`` and
``juggle profile`` give the same modeled core + bus time for a call of the same service and
size, neither counts the Python driver (shown beside, measured), and the demo says which
engine runs its hardware tier (the cores' Python models, or their Verilog in Verilator, and
whether it builds a simulator first)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from juggle.commands.cli import app
from juggle.commands.demo import render_demo
from juggle.commands.profile import render_profile
from juggle.demo import run_demo
from juggle.errors import ConfigurationError
from juggle.fabric.profiles import load_profile
from juggle.profile import profile_service
from juggle.services.audio import AdpcmCore
from juggle.services.crypto.model import TdesCore
from juggle.throughput import HardwareTime, count_calls, modeled_us, throughput_mb_s

sys.path.insert(0, str(Path(__file__).resolve().parent / "fabric"))
from rtl_support import engine  # type: ignore[import-not-found, unused-ignore]

FAST: dict[str, Any] = {"vectors": 2, "rounds": 1, "round_ms": 1.0}
BOARD = load_profile("xupv2p")
HZ = BOARD.board.fabric_hz


def _tdes_block_us() -> float:
    """One 8-byte block through TdesDriver, from the board's bus costs alone: DATA0/1 and
    CONTROL written, STATUS polled until the core is done, RESULT0/1 read (the polls hide
    the core's cycles). No measured figure enters it."""
    read, write = BOARD.bus.read_cycles, BOARD.bus.write_cycles
    polls = -(-TdesCore.latency // read)  # the core is done at the first poll after it
    return (3 * write + (polls + 2) * read) * 1e6 / HZ


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    return run_demo(scale=0.1)


def _row(doc: dict[str, Any], service: str, call: str) -> dict[str, Any]:
    rows: list[dict[str, Any]] = doc["hardware_calls"]
    [row] = [r for r in rows if r["service"] == service and r["call"] == call]
    return row


def _hardware(profile: dict[str, Any]) -> dict[str, Any]:
    [service] = profile["services"]
    return service["tiers"]["hardware"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("service", "target", "call", "size"),
    [("tdes", "tdes", "decrypt(2048 bytes)", 2048), ("adpcm", "audio", "decode(512 bytes)", 512)],
)
def test_demo_and_profile_give_the_same_hardware_time_for_a_call_of_the_same_size(
    demo: dict[str, Any], service: str, target: str, call: str, size: int
) -> None:
    row = _row(demo, service, call)
    hw = _hardware(profile_service(target, size=size, **FAST))
    flow = hw["throughput"]
    assert row["calls"] > 0 and row["bytes_per_call"] == flow["bytes_per_call"] == size
    for key in ("modeled_us", "core_us", "bus_us", "throughput_mb_s"):
        assert row[key] == flow[key], key
    assert row["modeled_us"] == pytest.approx(row["core_us"] + row["bus_us"], abs=1e-3)
    # profile's hardware total is that time, its gain is computed from it
    assert hw["total_us"] == flow["modeled_us"] and hw["labels"]["total_us"] == "modeled"
    assert flow["throughput_mb_s"] == pytest.approx(size / flow["modeled_us"], rel=1e-4)
    # the measured driver time stands beside it, labeled, in both
    for figures in (row, flow):
        assert figures["driver_us"] > 0 and figures["labels"]["driver_us"] == "measured"
        assert figures["labels"]["modeled_us"] == figures["labels"]["throughput_mb_s"] == "modeled"
        assert "not in the hardware time" in figures["driver_is"]


def test_neither_counts_the_python_driver(demo: dict[str, Any]) -> None:
    """The hardware time is the board's cycles: TDES's is the block count times the bus
    sequence of a block, whatever this machine's Python costs; the driver's measured time
    would add to it."""
    block_us = _tdes_block_us()
    assert _row(demo, "tdes", "decrypt(2048 bytes)")["modeled_us"] == pytest.approx(
        256 * block_us, abs=1e-3
    )
    hw = _hardware(profile_service("tdes", size=2048, **FAST))
    assert hw["total_us"] == pytest.approx(256 * block_us, abs=1e-3)
    assert hw["not_counted"] == ["proxy_us", "runtime_us", "driver_us"]
    assert hw["interface"]["driver_us"] > 0  # measured, and not in the total
    assert hw["total_us"] == pytest.approx(hw["core_us"] + hw["interface"]["bus_us"], abs=1e-3)
    # the demo's per-tier throughput is the same definition: 8 bytes a block-time
    [tdes_hw] = [r for r in demo["services"] if r["service"] == "tdes" and r["tier"] == "hardware"]
    assert tdes_hw["throughput_mb_s"] == pytest.approx(8 / block_us, rel=1e-4)
    # ADPCM: the core's part is the samples it decoded, 2 a byte, one cycle each
    decode = _row(demo, "adpcm", "decode(512 bytes)")
    assert decode["core_us"] == pytest.approx(1024 * AdpcmCore.cycles_per_sample * 1e6 / HZ)
    [adpcm_hw] = [
        r for r in demo["services"] if r["service"] == "adpcm" and r["tier"] == "hardware"
    ]
    rows = [r for r in demo["hardware_calls"] if r["service"] == "adpcm"]
    total_us = sum(r["modeled_us"] * r["calls"] for r in rows)
    total_bytes = sum(r["bytes_per_call"] * r["calls"] for r in rows)
    assert adpcm_hw["bytes"] == total_bytes
    assert adpcm_hw["throughput_mb_s"] == pytest.approx(total_bytes / total_us, rel=1e-3)


def test_the_demo_says_the_model_engine_runs_its_hardware_tier(demo: dict[str, Any]) -> None:
    engine_doc = demo["engine"]
    assert engine_doc["hardware_tier"] == {"tdes": "model", "adpcm": "model"}
    assert engine_doc["simulator"] is None and engine_doc["built"] == []
    assert "Python register models" in engine_doc["summary"]
    out = io.StringIO()
    render_demo(demo, Console(file=out, width=200))
    text = out.getvalue()
    assert "Hardware tier: tdes and adpcm on the cores' Python register models" in text
    assert "decrypt(2048 bytes)" in text and "wall µs" in text


def test_the_profile_table_shows_the_driver_beside_the_hardware_total() -> None:
    doc = profile_service("audio", size=512, **FAST)
    out = io.StringIO()
    render_profile(doc, Console(file=out, width=200))
    text = out.getvalue()
    hw = _hardware(doc)
    assert f"({hw['interface']['driver_us']:,.2f})" in text  # in parentheses: not counted
    assert f"{hw['total_us']:,.2f}" in text
    assert "MB/s modeled (512 bytes in" in text and "measured beside, not counted" in text


def test_rtl_demo_says_verilator_runs_and_whether_it_builds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    eng = engine()  # skips without Verilator
    said: list[str] = []
    cached = run_demo(hardware="rtl", scale=0.05, progress=said.append)
    assert said and "Verilog in Verilator" in said[0]
    assert cached["engine"]["cached_before_run"] == {"tdes": True, "adpcm": True}
    assert cached["engine"]["hardware_tier"] == {
        "tdes": f"rtl ({eng.tool})",
        "adpcm": f"rtl ({eng.tool})",
    }
    assert "simulators from the cache" in cached["engine"]["summary"]
    # the same hardware time on the Verilog as on the models
    assert _row(cached, "tdes", "decrypt(2048 bytes)")["modeled_us"] == pytest.approx(
        256 * _tdes_block_us(), abs=1e-3
    )

    # a cold cache: the demo says so before the run and passes each build step on
    from juggle.fabric.rtl.engine import CachedBuilds

    build = CachedBuilds.build

    def cold_build(self: CachedBuilds, design: Any) -> Path:
        self._say(f"building the RTL simulator of {design.design!r} (stand-in)")
        return build(self, design)

    monkeypatch.setattr(CachedBuilds, "is_built", lambda self, design: False)
    monkeypatch.setattr(CachedBuilds, "build", cold_build)
    said.clear()
    cold = run_demo(hardware="rtl", scale=0.05, progress=said.append)
    assert "tdes's simulator is built first" in said[0]
    assert any("building the RTL simulator of 'tdes'" in line for line in said[1:])
    assert cold["engine"]["cached_before_run"] == {"tdes": False, "adpcm": False}
    assert any("'tdes'" in line for line in cold["engine"]["built"])
    assert "simulators built before the run: tdes, adpcm" in cold["engine"]["summary"]


def test_juggle_demo_hardware_rtl_names_verilator_on_the_command_line() -> None:
    engine()  # skips without Verilator
    result = CliRunner().invoke(app, ["demo", "--hardware", "rtl", "--json"])
    assert result.exit_code == 0, result.output
    assert "juggle: the hardware tier runs the cores' Verilog in Verilator" in result.stderr
    doc = json.loads(result.stdout)
    assert doc["hardware"] == "rtl"
    assert set(doc["engine"]["hardware_tier"].values()) == {f"rtl ({doc['engine']['simulator']})"}


def test_the_definition_itself() -> None:
    assert modeled_us(79, 100_000_000) == pytest.approx(0.79)
    assert throughput_mb_s(8, 0.79) == pytest.approx(10.1266, rel=1e-4)
    assert throughput_mb_s(8, 0.0) == 0.0
    with pytest.raises(ConfigurationError) as info:
        modeled_us(79, 0)
    assert info.value.value == 0.0
    time = HardwareTime(79.0, 48.0, 8.0, 3.0, 1.0, 1e8)
    assert time.bus_cycles == 31.0 and time.core_us == 0.48
    assert time.us == pytest.approx(0.79)
    assert time.plus(time).per(2) == time

    calls: list[int] = []

    def call() -> int:
        calls.append(1)
        return len(calls)

    # a window that counts nothing (a real board's): the time is not modeled, the calls run
    assert count_calls(object(), 1e8, call, 3) == (None, 3)
