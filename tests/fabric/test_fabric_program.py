"""Programming regions: checks refuse before anything changes, steps run in the kernel's order,
every injected fault is rolled back, and the modeled times match the paper (Table 3, 6.1)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import asdict, replace

import pytest
from fabric_support import ADD_BYTES, TDES_BYTES, RegFile

from juggle.errors import (
    BitstreamFormatError,
    BitstreamTooLargeError,
    BridgeError,
    FabricError,
    NotPartialError,
    PartMismatchError,
    ProgrammingError,
    RegionBusyError,
    RegionEmptyError,
    RegionMismatchError,
    ResourceError,
    UnknownDesignError,
    UnknownRegionError,
    WindowAttachError,
)
from juggle.fabric import (
    Bitstream,
    Fabric,
    ManagerState,
    ModelCatalog,
    ModelClock,
    RegionState,
    RegionStatus,
    Resources,
    load_profile,
    open_fabric,
)
from juggle.fabric.profiles import RegionProfile
from juggle.fabric.sim.backend import SimBackend

BitsFactory = Callable[..., tuple[Bitstream, bytes]]


# -- the paper's numbers (modeled) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("design", "size", "paper_ms"), [("add", ADD_BYTES, 11.159), ("tdes", TDES_BYTES, 13.374)]
)
def test_modeled_reconfiguration_matches_table_3(
    fabric: Fabric, bits: BitsFactory, design: str, size: int, paper_ms: float
) -> None:
    bs, data = bits(design, size)
    before = fabric.clock.now_ns
    report = fabric.program("prr0", bs, data)
    assert report.bytes == size
    assert report.reconfiguration_ms == pytest.approx(paper_ms, rel=0.10)
    assert report.bridge_ms == pytest.approx(3.0, rel=0.10)  # section 6.1: about 3 ms
    total = report.reconfiguration_ms + report.bridge_ms
    assert report.modeled_total_ms == pytest.approx(total)
    # the simulated clock advanced by exactly what the report says
    assert (fabric.clock.now_ns - before) / 1e6 == pytest.approx(total, abs=1e-6)


def test_unload_costs_one_bridge_switch(fabric: Fabric, bits: BitsFactory) -> None:
    fabric.program("prr0", *bits("tdes"))
    before = fabric.clock.now_ns
    report = fabric.unload("prr0")
    assert (report.design, report.bytes, report.reconfiguration_ms) == ("tdes", 0, 0.0)
    assert report.bridge_ms == pytest.approx(1.5)
    assert (fabric.clock.now_ns - before) / 1e6 == pytest.approx(1.5)
    (snap,) = fabric.regions()
    assert (snap.state, snap.design, snap.bridge_enabled) == ("EMPTY", None, False)
    again = fabric.unload("prr0")  # unloading an empty region changes nothing
    assert (again.design, again.modeled_total_ms) == (None, 0.0)


# -- program / window / snapshots -----------------------------------------------------------


def test_program_loads_model_behind_window(fabric: Fabric, bits: BitsFactory) -> None:
    used = Resources(slices=1835, flipflops=1527)
    fabric.program("prr0", *bits("tdes"), resources=used, owner="mail")
    (snap,) = fabric.regions()
    assert (snap.state, snap.design, snap.owner, snap.used) == ("PROGRAMMED", "tdes", "mail", used)
    assert snap.bitstreams_loaded == 1 and snap.bridge_enabled and snap.error is None
    window = fabric.window("prr0")
    window.write32(8, 0xDEADBEEF)
    assert window.read32(8) == 0xDEADBEEF
    assert "prr0=PROGRAMMED(tdes)" in repr(fabric)
    stats = fabric.statistics()
    assert (stats.programs, stats.bytes_programmed, stats.manager.loads) == (1, TDES_BYTES, 1)
    assert stats.manager.state == "OPERATING"


def test_region_states_are_an_enum_shown_as_their_names(fabric: Fabric, bits: BitsFactory) -> None:
    """A status carries a :class:`RegionState`; JSON, reprs and the CLI show its name."""
    assert [s.value for s in RegionState] == ["EMPTY", "PROGRAMMING", "PROGRAMMED", "ERROR"]
    (empty,) = fabric.regions()
    assert isinstance(empty, RegionStatus) and empty.state is RegionState.EMPTY
    fabric.program("prr0", *bits("tdes"))
    (snap,) = fabric.regions()
    assert snap.state is RegionState.PROGRAMMED and snap.state == "PROGRAMMED"
    assert json.loads(json.dumps(asdict(snap), default=str))["state"] == "PROGRAMMED"
    assert f"{snap.state}" == "PROGRAMMED" and "PROGRAMMED" in repr(fabric.region("prr0"))


def test_reprogramming_gives_a_fresh_model_and_closes_the_old_window(
    fabric: Fabric, bits: BitsFactory
) -> None:
    fabric.program("prr0", *bits("des", 149_087))
    old = fabric.window("prr0")
    old.write32(0, 5)
    fabric.program("prr0", *bits("tdes"))
    new = fabric.window("prr0")
    assert new is not old and new.read32(0) == 0
    with pytest.raises(RegionEmptyError, match="closed"):
        old.read32(0)
    assert fabric.regions()[0].bitstreams_loaded == 2


def test_window_of_empty_region(fabric: Fabric) -> None:
    with pytest.raises(RegionEmptyError, match="'prr0' holds no design: EMPTY"):
        fabric.window("prr0")
    with pytest.raises(UnknownRegionError):
        fabric.window("prr7")


# -- refusals: nothing changes --------------------------------------------------------------


def _refusals(bits: BitsFactory) -> list[tuple[Callable[[Fabric], object], type[FabricError], str]]:
    tdes, data = bits("tdes")
    return [
        (lambda f: f.program("prr1", tdes, data), UnknownRegionError, "no region 'prr1'"),
        (
            lambda f: f.program("prr0", *bits("tdes", part="2vp50ff1152")),
            PartMismatchError,
            "part '2vp50ff1152', board 'xupv2p' is '2vp30ff896'",
        ),
        (
            lambda f: f.program("prr0", *bits("tdes", region="prr1")),
            RegionMismatchError,
            "built for region 'prr1', not 'prr0'",
        ),
        (  # no Region= tag is fine (Vivado writes none); a full-device image is not
            lambda f: f.program("prr0", replace(tdes, partial=False), data),
            NotPartialError,
            "is a full-device image",
        ),
        (
            lambda f: f.program("prr0", *bits("tdes", 170_000)),
            BitstreamTooLargeError,
            "170000 bytes, region 'prr0' takes at most 160000",
        ),
        (
            lambda f: f.program("prr0", tdes, data, resources=Resources(slices=3008, mult18=21)),
            ResourceError,
            "slices 3008 > 2240, mult18 21 > 20",
        ),
        (
            lambda f: f.program("prr0", *bits("fft")),
            UnknownDesignError,
            "no register model for design 'fft'",
        ),
        (
            lambda f: f.program("prr0", tdes, data[:-1] + b"\0"),
            BitstreamFormatError,
            "is not the file",
        ),
        (
            lambda f: f.program("prr0", tdes, bits("des")[1]),
            BitstreamFormatError,
            "is not the file",
        ),
    ]


@pytest.mark.parametrize("case", range(9))
@pytest.mark.parametrize("loaded", [False, True])
def test_refusals_change_nothing(
    fabric: Fabric, bits: BitsFactory, case: int, loaded: bool
) -> None:
    if loaded:
        fabric.program("prr0", *bits("add", ADD_BYTES), owner="calc")
        fabric.window("prr0").write32(4, 42)
    action, error, message = _refusals(bits)[case]
    before, clock, stats = fabric.regions(), fabric.clock.now_ns, fabric.manager.statistics()
    with pytest.raises(error, match=message):
        action(fabric)
    assert fabric.regions() == before
    assert fabric.clock.now_ns == clock
    assert fabric.manager.statistics() == stats
    if loaded:
        assert fabric.window("prr0").read32(4) == 42


def test_check_is_pure_and_accepts_a_fitting_bitstream(fabric: Fabric, bits: BitsFactory) -> None:
    tdes, _ = bits("tdes")
    fabric.check(tdes, "prr0", Resources(slices=1835, flipflops=1527))
    with pytest.raises(ResourceError):
        fabric.check(tdes, "prr0", Resources(slices=2241))
    assert fabric.regions()[0].state == "EMPTY" and fabric.clock.now_ns == 0


# -- rollback on each injected fault --------------------------------------------------------


@pytest.mark.parametrize("loaded", [False, True])
def test_bridge_disable_fault_keeps_the_previous_design(
    fabric: Fabric, bits: BitsFactory, loaded: bool
) -> None:
    if loaded:
        fabric.program("prr0", *bits("add", ADD_BYTES), owner="calc")
        fabric.window("prr0").write32(4, 42)
    before, clock = fabric.regions(), fabric.clock.now_ns
    fabric.faults.arm("bridge_disable")
    with pytest.raises(BridgeError, match="injected fault: bridge_disable"):
        fabric.program("prr0", *bits("tdes"))
    assert fabric.regions() == before
    assert fabric.clock.now_ns == clock  # the bridge never moved: no switch was modeled
    assert fabric.statistics().failed_programs == 1
    if loaded:
        assert fabric.window("prr0").read32(4) == 42  # still serving, bridge open
    fabric.program("prr0", *bits("tdes"))  # the fault was consumed
    assert fabric.regions()[0].design == "tdes"


@pytest.mark.parametrize(
    ("step", "error", "match"),
    [
        ("config_write", ProgrammingError, "failed in step WRITE: injected fault"),
        ("bridge_enable", BridgeError, "injected fault: bridge_enable"),
        ("model_load", WindowAttachError, "injected fault: model_load"),
    ],
)
def test_faults_from_the_write_on_leave_region_in_error(
    fabric: Fabric, bits: BitsFactory, step: str, error: type[FabricError], match: str
) -> None:
    fabric.program("prr0", *bits("add", ADD_BYTES), owner="calc")
    old = fabric.window("prr0")
    fabric.faults.arm(step)
    with pytest.raises(error, match=match):
        fabric.program("prr0", *bits("tdes"), owner="mail")
    (snap,) = fabric.regions()
    assert (snap.state, snap.design, snap.owner) == ("ERROR", None, None)
    assert snap.error is not None and snap.error.startswith(step)
    assert snap.bridge_enabled is False  # a broken region stays isolated
    assert snap.bitstreams_loaded == 1
    with pytest.raises(RegionEmptyError, match="ERROR after a failed program"):
        fabric.window("prr0")
    with pytest.raises(RegionEmptyError):
        old.read32(0)
    # programming again recovers the region
    fabric.program("prr0", *bits("tdes"))
    assert fabric.regions()[0].state == "PROGRAMMED"
    assert fabric.faults.statistics().fired[step] == 1


def test_config_write_fault_names_the_manager_step(fabric: Fabric, bits: BitsFactory) -> None:
    fabric.faults.arm("config_write")
    with pytest.raises(ProgrammingError) as caught:
        fabric.program("prr0", *bits("tdes"))
    assert caught.value.value == ManagerState.WRITE_ERR.value
    assert fabric.manager.state is ManagerState.WRITE_ERR
    assert fabric.manager.device_state() == "write error"


def test_error_region_can_be_unloaded(fabric: Fabric, bits: BitsFactory) -> None:
    fabric.faults.arm("model_load")
    with pytest.raises(WindowAttachError):
        fabric.program("prr0", *bits("tdes"))
    fabric.unload("prr0")
    snap = fabric.regions()[0]
    assert (snap.state, snap.error) == ("EMPTY", None)


def test_model_that_cannot_be_built_is_an_attach_error(bits: BitsFactory) -> None:
    catalog = ModelCatalog({"tdes": "juggle.fabric.sim.model:RegisterModel"})  # abstract
    fab = Fabric(load_profile("xupv2p"), _sim(catalog), ModelClock(), catalog)
    with pytest.raises(WindowAttachError, match="could not be built"):
        fab.program("prr0", *bits("tdes"))
    assert fab.regions()[0].state == "ERROR"


def test_fault_arming_is_validated(fabric: Fabric) -> None:
    with pytest.raises(FabricError, match="unknown fault step 'bridge'"):
        fabric.faults.arm("bridge")
    with pytest.raises(FabricError, match='"count" must be >= 1'):
        fabric.faults.arm("model_load", 0)
    fabric.faults.arm("model_load", 2)
    fabric.faults.disarm()
    assert fabric.faults.statistics().armed["model_load"] == 0


# -- order of steps, with a backend that only records calls --------------------------------


class _Window:
    size = 4

    def read32(self, offset: int) -> int:
        return 0

    def write32(self, offset: int, value: int) -> None:
        pass


class Recorder:
    """A backend whose operations only append their name to ``calls``."""

    name = "recorder"
    faults = None

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.enabled = False
        self.during_write: Callable[[], None] | None = None

    def manager_ops(self) -> Recorder:
        return self

    def write_init(self, bitstream: Bitstream) -> None:
        self.calls.append("write_init")
        if self.during_write is not None:
            self.during_write()

    def write(self, chunk: bytes) -> None:
        self.calls.append("write")

    def write_complete(self) -> None:
        self.calls.append("write_complete")

    def state(self) -> str:
        return "operating"

    def bridge_ops(self, region: RegionProfile) -> Recorder:
        return self

    def enable_set(self, enable: bool) -> None:
        self.calls.append("bridge_enable" if enable else "bridge_disable")
        self.enabled = enable

    def enable_show(self) -> bool:
        return self.enabled

    def check_bitstream(self, bitstream: Bitstream) -> None:
        pass  # the Backend contract's format check: the recorder takes every bitstream

    def check_design(self, design: str, region: RegionProfile) -> None:
        self.calls.append("check_design")

    def describe(self, bitstream: Bitstream, region: RegionProfile) -> None:
        pass  # nothing comes beside a bitstream here

    def unload(self, region: RegionProfile) -> None:
        pass  # the recorder's regions hold nothing beyond their window

    def attach(self, region: RegionProfile, design: str) -> _Window:
        self.calls.append(f"attach {design}")
        return _Window()

    def detach(self, region: RegionProfile) -> None:
        self.calls.append("detach")

    def close(self) -> None:
        self.calls.append("close")


def _recorded() -> tuple[Fabric, Recorder]:
    rec = Recorder()
    return Fabric(load_profile("xupv2p"), rec, ModelClock(), ModelCatalog()), rec


def test_program_and_unload_run_in_the_kernel_order(bits: BitsFactory) -> None:
    fab, rec = _recorded()
    bs, data = bits("tdes")
    fab.program("prr0", bs, data)
    writes = -(-TDES_BYTES // 4096)
    assert rec.calls == [
        "check_design",
        "bridge_disable",
        "detach",
        "write_init",
        *["write"] * writes,
        "write_complete",
        "bridge_enable",
        "attach tdes",
    ]
    rec.calls.clear()
    fab.unload("prr0")
    assert rec.calls == ["bridge_disable", "detach"]
    rec.calls.clear()
    fab.close()
    assert rec.calls == ["close"]
    with pytest.raises(FabricError, match="closed"):
        fab.program("prr0", bs, data)


def test_region_is_busy_while_programmed(bits: BitsFactory) -> None:
    fab, rec = _recorded()
    seen: list[BaseException] = []

    def meddle() -> None:
        for attempt in (lambda: fab.unload("prr0"), lambda: fab.window("prr0")):
            try:
                attempt()
            except RegionBusyError as exc:
                seen.append(exc)
        assert fab.regions()[0].state == "PROGRAMMING"

    rec.during_write = meddle
    fab.program("prr0", *bits("tdes"))
    assert len(seen) == 2 and all("prr0" in str(e) for e in seen)
    assert fab.regions()[0].state == "PROGRAMMED"


def _sim(catalog: ModelCatalog) -> SimBackend:
    return SimBackend(load_profile("xupv2p"), ModelClock(), catalog)


def test_regfile_is_what_the_catalog_serves(catalog: ModelCatalog) -> None:
    assert catalog.resolve("tdes") is RegFile


def test_regions_of_a_multi_region_board_program_concurrently(bits: BitsFactory) -> None:
    catalog = ModelCatalog({"qam16": RegFile, "fft512": RegFile})
    with open_fabric("zedboard", models=catalog) as fab:
        jobs = [("prr1", "qam16", 92_400), ("prr2", "fft512", 324_000)]
        errors: list[BaseException] = []

        def program(region: str, design: str, size: int) -> None:
            try:
                fab.program(region, *bits(design, size, region=region, part="7z020clg484"))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=program, args=job) for job in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        states = {s.name: (s.state, s.design) for s in fab.regions()}
        assert states == {
            "prr1": ("PROGRAMMED", "qam16"),
            "prr2": ("PROGRAMMED", "fft512"),
            "prr3": ("EMPTY", None),
        }
        assert fab.manager.statistics().loads == 2
        # one config port: the two transfers are serialized on the modeled clock
        assert fab.clock.now_ns / 1e3 == pytest.approx(231 + 810 + 4 * 0.5, rel=1e-3)
        with pytest.raises(RegionMismatchError, match="'prr1', not 'prr3'"):
            fab.program("prr3", *bits("qam16", 92_400, region="prr1", part="7z020clg484"))
