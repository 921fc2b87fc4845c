"""AXI4-Lite cores behind the rtl backend: the harness drives the five channels cycle-true.

The test core (``hdl/axi_regs/axi_regs.v``: four R/W registers, an ID, a register whose write
answers SLVERR, an address answering DECERR, a slow register, the last write's WSTRB, and a
second top that never raises BVALID nor ARREADY) runs on Verilator and, where it is installed,
on Icarus Verilog. Values, strobes and the cycles of known handshakes must be exact; an error
response must raise BusResponseError naming region, offset and response (the simulator keeps
running); a handshake that never completes must raise CoreTimeoutError after the handshake
limit, not the access timeout, and leave the window stopped.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rtl_support import engine

from juggle.errors import (
    BackendError,
    BusResponseError,
    CoreTimeoutError,
    FabricError,
    ModelRegistrationError,
    WindowAccessError,
    WindowAttachError,
)
from juggle.fabric import ModelCatalog, ModelClock, load_profile
from juggle.fabric.profiles import RegionProfile
from juggle.fabric.rtl import (
    BUSES,
    IcarusEngine,
    RtlBackend,
    RtlCatalog,
    RtlDesign,
    RtlWindow,
    VerilatorEngine,
)

AXI_REGS = Path(__file__).resolve().parent / "hdl" / "axi_regs" / "axi_regs.v"
ID, LOCKED, HOLE, SLOW, STRB = 0x10, 0x14, 0x18, 0x1C, 0x20
#: xupv2p's bus: a read of 8 cycles, a write of 5
READ, WRITE = 8, 5
#: the handshake limit of these tests, and the access timeout (far longer: a hang must be
#: found by the limit)
LIMIT, TIMEOUT = 64, 60.0

_NO_ICARUS = shutil.which("iverilog") is None or shutil.which("vvp") is None
ENGINES = [
    "verilator",
    pytest.param(
        "icarus",
        marks=pytest.mark.skipif(
            _NO_ICARUS, reason="Icarus Verilog is not installed (Debian: apt-get install iverilog)"
        ),
    ),
]


def _engine(name: str, tmp_path_factory: pytest.TempPathFactory) -> VerilatorEngine | IcarusEngine:
    if name == "verilator":
        return engine()
    return IcarusEngine(cache_dir=tmp_path_factory.getbasetemp() / "icarus-cache", progress=None)


def _catalog() -> RtlCatalog:
    catalog = RtlCatalog()
    for design, top in (("axi_regs", "axi_regs_top"), ("axi_stuck", "axi_regs_stuck_top")):
        catalog.add(design, [AXI_REGS], top, window_size=0x40, bus="axi4-lite")
    return catalog


@pytest.fixture(params=ENGINES)
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RtlBackend]:
    eng: Any = _engine(request.param, tmp_path_factory)  # either engine has the interface
    rtl = RtlBackend(
        load_profile("xupv2p"),
        ModelClock(),
        ModelCatalog.builtin(),
        rtl=_catalog(),
        engine=eng,
        access_timeout=TIMEOUT,
        handshake_cycles=LIMIT,
    )
    rtl.bridge_ops(rtl.profile.regions[0]).enable_set(True)
    yield rtl
    rtl.close()


@pytest.fixture
def region(backend: RtlBackend) -> RegionProfile:
    return backend.profile.regions[0]


def _attach(backend: RtlBackend, region: RegionProfile, design: str = "axi_regs") -> RtlWindow:
    window = backend.attach(region, design)
    assert isinstance(window, RtlWindow)
    return window


def test_registers_read_back_what_was_written(backend: RtlBackend, region: RegionProfile) -> None:
    window = _attach(backend, region)
    assert [window.read32(o) for o in (0x0, 0x4, 0x8, 0xC)] == [0, 0, 0, 0]  # cleared by reset
    assert window.read32(STRB) == 0
    values = [0x12345678, 0xFFFFFFFF, 0x80000001, 0xA5A5A5A5]
    for offset, value in zip((0x0, 0x4, 0x8, 0xC), values, strict=True):
        window.write32(offset, value)
    assert [window.read32(o) for o in (0x0, 0x4, 0x8, 0xC)] == values
    assert window.read32(STRB) == 0xF  # every write drives all four byte strobes
    window.write32(0x4, 0x01020304)  # a full-word write replaces every byte
    assert window.read32(0x4) == 0x01020304
    window.write32(ID, 0)  # read-only: ignored with OKAY
    assert window.read32(ID) == 0xA11E0001
    assert window.read32(0x3C) == 0  # unmapped inside the window
    with pytest.raises(WindowAccessError):
        window.read32(0x40)  # outside the window: refused before the bus


def test_cycles_of_known_handshakes(backend: RtlBackend, region: RegionProfile) -> None:
    """The slave answers a read at the edge after AR (2 cycles: the harness idles READ - 2
    before, so READ in all), SLOW 3 edges later, and a write's BVALID at the edge after AW/W
    (3 cycles: WRITE + 1 in all); the modeled clock advances by what the RTL took."""
    window = _attach(backend, region)
    hz = backend.profile.board.fabric_hz
    steps: list[tuple[Callable[[], object], int]] = [
        (lambda: window.read32(0x0), READ),
        (lambda: window.read32(SLOW), READ + 3),
        (lambda: window.write32(0x0, 7), WRITE + 1),
        (lambda: window.read32(0x3C), READ),  # unmapped: answered at once too
    ]
    for access, cycles in steps:
        clock0, rtl0 = backend.clock.now_cycles(hz), window.rtl_cycles
        access()
        assert window.rtl_cycles - rtl0 == cycles
        assert backend.clock.now_cycles(hz) - clock0 == cycles
    assert window.read32(SLOW) == 0x51055105


def test_quickest_transactions_take_two_and_three_cycles(
    backend: RtlBackend, region: RegionProfile
) -> None:
    """With a one-cycle bus there is nothing to idle: the handshakes alone."""
    exe = backend.engine.build(backend.rtl.get("axi_regs"))
    sim = backend.engine.process([str(exe), "1", "1", "16"], label="axi_regs", region="r")
    try:
        assert sim.write(0x8, 0xCAFE) == 3
        assert sim.read(0x8) == (0xCAFE, 2)
        assert sim.read(SLOW) == (0x51055105, 5)
        assert sim.cycles == 10 and sim.transactions == 3
    finally:
        sim.close()


def test_error_responses_are_bus_response_errors(
    backend: RtlBackend, region: RegionProfile
) -> None:
    window = _attach(backend, region)
    window.write32(0x0, 11)
    cases: list[tuple[Callable[[], object], int, str, str]] = [
        (lambda: window.write32(LOCKED, 1), LOCKED, "SLVERR", "write"),
        (lambda: window.write32(HOLE, 1), HOLE, "DECERR", "write"),
        (lambda: window.read32(HOLE), HOLE, "DECERR", "read"),
    ]
    for access, offset, response, what in cases:
        with pytest.raises(BusResponseError) as caught:
            access()
        error = caught.value
        assert isinstance(error, WindowAccessError) and isinstance(error, FabricError)
        assert (error.region, error.offset, error.response) == (region.name, offset, response)
        assert f"{what} at offset {offset:#x} answered {response}" in str(error)
    # the transactions completed: the simulator runs on, and LOCKED's write changed nothing
    assert window.simulator.alive
    assert window.read32(0x0) == 11 and window.read32(LOCKED) == 0


@pytest.mark.parametrize(
    ("access", "missing", "cycles"),
    [
        ("write", "BVALID", WRITE - 2 + 1 + LIMIT),  # idle, AW/W taken, then LIMIT edges
        ("read", "ARREADY", READ - 2 + LIMIT),
    ],
)
def test_a_handshake_that_never_completes_is_a_hang(
    backend: RtlBackend, region: RegionProfile, access: str, missing: str, cycles: int
) -> None:
    window = _attach(backend, region, "axi_stuck")
    with pytest.raises(CoreTimeoutError) as caught:
        if access == "write":
            window.write32(0x0, 1)
        else:
            window.read32(0x0)
    message = str(caught.value)
    # found by the handshake limit, in the cycles it allows, not by the 60 s access timeout
    assert f"no {missing} within the handshake limit ({cycles} cycles" in message
    assert caught.value.region == region.name
    assert not window.simulator.alive
    with pytest.raises(CoreTimeoutError):  # the window stays stopped
        window.read32(ID)
    backend.detach(region)
    assert _attach(backend, region).read32(ID) == 0xA11E0001  # a fresh core works


def test_the_catalog_knows_the_bus(tmp_path: Path) -> None:
    assert BUSES == ("regbus", "axi4-lite")
    catalog = RtlCatalog()
    with pytest.raises(ModelRegistrationError, match="'axi'") as caught:
        catalog.add("x", [AXI_REGS], "axi_regs_top", bus="axi")
    assert caught.value.design == "x" and caught.value.value == "axi"
    assert "x" not in catalog  # unchanged
    entry = catalog.add("x", [AXI_REGS], "axi_regs_top", bus="axi4-lite")
    assert entry.bus == "axi4-lite" and RtlCatalog([entry]).get("x").bus == "axi4-lite"
    assert catalog.add("y", [AXI_REGS], "axi_regs_top").bus == "regbus"
    assert RtlDesign("z", (AXI_REGS,), "axi_regs_top").bus == "regbus"
    tdes = RtlCatalog.builtin().get("tdes")
    assert tdes.bus == "regbus"
    axi = RtlCatalog().add("tdes", tdes.sources, tdes.top, bus="axi4-lite")
    engines: list[Any] = [engine()]
    if not _NO_ICARUS:
        engines.append(IcarusEngine(cache_dir=tmp_path, progress=None))
    for eng in engines:
        assert eng.build_key(axi) != eng.build_key(tdes)  # the bus keys the build


def test_a_top_without_the_bus_ports_is_refused(backend: RtlBackend, region: RegionProfile) -> None:
    tdes = RtlCatalog.builtin().get("tdes")  # a register-bus top declared AXI4-Lite
    backend.rtl.add("wrong", tdes.sources, tdes.top, window_size=0x40, bus="axi4-lite")
    with pytest.raises(WindowAttachError, match="could not") as caught:
        backend.attach(region, "wrong")
    if backend.engine.name == "verilator":
        assert "lacks the axi4-lite port(s)" in str(caught.value)
        assert "s_axi_awaddr" in str(caught.value)


def test_an_address_width_outside_2_to_16_is_refused(tmp_path: Path) -> None:
    wide = tmp_path / "wide.v"
    text = AXI_REGS.read_text().replace("[5:0]  s_axi_awaddr", "[16:0] s_axi_awaddr")
    wide.write_text(text)
    design = RtlCatalog().add("wide", [wide], "axi_regs_top", bus="axi4-lite")
    with pytest.raises(BackendError, match="between 2 and 16 bits, got 17/6"):
        engine().build(design)  # Verilated, then refused before the compiler runs


def test_handshake_cycles_is_checked() -> None:
    profile, models = load_profile("xupv2p"), ModelCatalog()
    for bad in (0, -1, 1_000_001, 2.5, True):
        with pytest.raises(BackendError, match="handshake_cycles"):
            RtlBackend(profile, ModelClock(), models, engine=engine(), handshake_cycles=bad)  # type: ignore[arg-type]
    assert RtlBackend(profile, ModelClock(), models, engine=engine()).handshake_cycles == 1024
