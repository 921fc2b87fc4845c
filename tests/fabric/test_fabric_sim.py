"""The simulated board's pieces: modeled clock and pacing, windows, the model catalog."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from fabric_support import RegFile, Timer

from juggle.errors import (
    BridgeError,
    FabricError,
    ModelRegistrationError,
    RegionEmptyError,
    UnknownDesignError,
    WindowAccessError,
)
from juggle.fabric import Bitstream, Fabric, ModelCatalog, ModelClock, SimWindow, open_fabric
from juggle.fabric.sim.catalog import BUILTIN_MODELS
from juggle.fabric.sim.model import RegisterModel

BitsFactory = Callable[..., tuple[Bitstream, bytes]]


# -- clock ----------------------------------------------------------------------------------


def test_clock_counts_ns_and_cycles() -> None:
    clock = ModelClock()
    assert clock.advance_cycles(12, 100_000_000) == 120
    assert clock.advance_ns(1.5) == 121  # 121.5 ns, reported in whole ns
    assert clock.now_ps == 121_500
    assert clock.now_cycles(100_000_000) == 12
    clock.advance_cycles(3, 667_000_000)  # 4.4978 ns: ps resolution keeps odd clocks exact
    assert clock.now_ps == 121_500 + 4_498
    with pytest.raises(FabricError, match='"hz" must be > 0'):
        clock.advance_cycles(1, 0)
    with pytest.raises(FabricError, match='"ps" must be >= 0'):
        clock.advance_ps(-1)


class FakeWall:
    """A wall clock that only moves when told to, or when somebody sleeps."""

    def __init__(self) -> None:
        self.t = 100.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


def test_pacing_sleeps_only_past_the_slack() -> None:
    wall = FakeWall()
    clock = ModelClock(pace=True, wall=wall.now, sleep=wall.sleep)
    clock.advance_ns(500_000)  # 0.5 ms ahead of the wall: within slack, no sleep
    assert wall.sleeps == []
    clock.advance_ns(5_000_000)  # 5.5 ms ahead: sleep until the wall catches up
    assert wall.sleeps == [pytest.approx(0.0055)]
    assert wall.t - 100.0 == pytest.approx(clock.now_ns / 1e9)
    clock.advance_ps(100_000, settle=True)  # settle: any lead is slept away
    assert wall.sleeps[-1] == pytest.approx(1e-7, rel=1e-3)
    stats = clock.statistics()
    assert stats.paced and stats.pace_sleeps == 2


def test_paced_clock_follows_the_wall_while_idle() -> None:
    wall = FakeWall()
    clock = ModelClock(pace=True, wall=wall.now, sleep=wall.sleep)
    wall.t += 0.010  # 10 ms of idle wall time
    clock.advance_ns(1_000)
    assert clock.now_ns == 10_001_000
    assert wall.sleeps == []


def test_unpaced_clock_never_sleeps() -> None:
    wall = FakeWall()
    clock = ModelClock(wall=wall.now, sleep=wall.sleep)
    clock.advance_ns(1e9)
    assert wall.sleeps == [] and clock.now_ns == 1_000_000_000


def test_paced_fabric_keeps_wall_at_least_modeled(catalog: ModelCatalog, bits: BitsFactory) -> None:
    with open_fabric(pace=True, models=catalog) as fab:
        started = time.monotonic()
        report = fab.program("prr0", *bits("tdes"))
        wall_ms = (time.monotonic() - started) * 1e3
        assert wall_ms >= report.modeled_total_ms - 1.0  # 1 ms pacing slack
        assert report.measured_wall_ms >= report.modeled_total_ms - 1.0
        assert wall_ms < report.modeled_total_ms + 500  # and no runaway sleeping


def test_unpaced_fabric_runs_ahead_of_the_wall(fabric: Fabric, bits: BitsFactory) -> None:
    report = fabric.program("prr0", *bits("tdes"))
    assert report.measured_wall_ms < report.modeled_total_ms


# -- windows --------------------------------------------------------------------------------


def _window(model: RegisterModel | None = None) -> tuple[SimWindow, ModelClock]:
    clock = ModelClock()
    window = SimWindow(
        "prr0", model or RegFile(), clock, hz=100_000_000, read_cycles=12, write_cycles=8
    )
    return window, clock


def test_window_accesses_cost_bus_cycles_and_pass_the_core_cycle() -> None:
    model = RegFile()
    window, clock = _window(model)
    window.write32(0, 7)
    assert clock.now_ns == 80
    assert window.read32(0) == 7
    assert clock.now_ns == 200
    assert model.seen == [8, 20]  # the core cycle at each access
    clock.advance_ns(1000)  # other activity on the bus
    window.read32(4)
    assert model.seen[-1] == 132
    stats = window.statistics()
    assert (stats.reads, stats.writes, stats.busy_cycles, stats.busy_ns) == (2, 1, 32, 320)
    assert stats.size == 0x100 and stats.state == "open"


def test_timer_core_is_busy_for_its_latency() -> None:
    window, _ = _window(Timer())
    window.write32(0, 1)  # start: done 100 core cycles later
    polls = 0
    while window.read32(4):
        polls += 1
    assert polls == 100 // 12  # each poll costs 12 bus cycles
    assert window.statistics().busy_cycles >= 100


@pytest.mark.parametrize(
    ("offset", "message"),
    [
        (2, "offset 0x2 is not 4-byte aligned"),
        (0x100, r"offset 0x100 is outside 0\.\.0xfc"),
        (-4, "is outside"),
    ],
)
def test_bad_offsets_are_named(offset: int, message: str) -> None:
    window, clock = _window()
    with pytest.raises(WindowAccessError, match=message) as caught:
        window.read32(offset)
    assert (caught.value.region, caught.value.offset) == ("prr0", offset)
    with pytest.raises(WindowAccessError, match=message):
        window.write32(offset, 0)
    assert clock.now_ns == 0  # refused accesses cost nothing


def test_bad_values_are_named() -> None:
    window, _ = _window()
    with pytest.raises(WindowAccessError, match="got 4294967296"):
        window.write32(0, 1 << 32)
    with pytest.raises(WindowAccessError, match="got -1"):
        window.write32(0, -1)


def test_decoupled_and_closed_windows_refuse() -> None:
    window, _ = _window()
    window.set_enabled(False)
    with pytest.raises(BridgeError, match="decoupled"):
        window.read32(0)
    window.set_enabled(True)
    assert window.read32(0) == 0
    window.close()
    window.set_enabled(True)  # a closed window stays closed
    with pytest.raises(RegionEmptyError, match="closed"):
        window.write32(0, 1)
    assert window.statistics().state == "closed"


def test_window_is_thread_safe() -> None:
    model = RegFile()
    window, clock = _window(model)

    def hammer(slot: int) -> None:
        for i in range(300):
            window.write32(slot * 4, i)
            window.read32(slot * 4)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = window.statistics()
    assert (stats.reads, stats.writes) == (1200, 1200)
    assert clock.now_ns == 1200 * 200
    assert model.seen == sorted(model.seen)  # every access saw a later core cycle


def test_fabric_window_gates_with_the_bridge(fabric: Fabric, bits: BitsFactory) -> None:
    fabric.program("prr0", *bits("tdes"))
    window = fabric.window("prr0")
    fabric.region("prr0").bridge.disable()
    with pytest.raises(BridgeError, match="decoupled"):
        window.read32(0)
    fabric.region("prr0").bridge.enable()
    assert window.read32(0) == 0


# -- model catalog --------------------------------------------------------------------------


def test_builtin_catalog_names_the_reference_cores() -> None:
    catalog = ModelCatalog.builtin()
    assert set(catalog.designs()) == {"des", "tdes", "adder", "multiplier", "adpcm", "aes"}
    assert BUILTIN_MODELS["tdes"] == "juggle.services.crypto.model:TdesCore"
    assert ModelCatalog.builtin() is not catalog  # no shared global state


def test_lazy_entries_resolve_or_fail_specifically() -> None:
    catalog = ModelCatalog(
        {
            "gone": "juggle_no_such_module:Core",
            "notmodel": "collections:OrderedDict",
            "noattr": "collections:NoSuchCore",
            "real": "fabric_support:Timer",
        }
    )
    with pytest.raises(UnknownDesignError, match="cannot be imported"):
        catalog.resolve("gone")
    with pytest.raises(ModelRegistrationError, match="RegisterModel subclass"):
        catalog.resolve("notmodel")
    with pytest.raises(UnknownDesignError, match="has no 'NoSuchCore'"):
        catalog.resolve("noattr")
    assert catalog.resolve("real") is Timer
    assert "resolved" not in repr(catalog)
    with pytest.raises(UnknownDesignError, match=r"no register model for design 'fft' \(models:"):
        catalog.resolve("fft")


def test_registration_validates_now() -> None:
    catalog = ModelCatalog()

    class Odd(RegFile):
        window_size = 6

    with pytest.raises(ModelRegistrationError, match="multiple of 4, got 6"):
        catalog.register("odd", Odd)
    with pytest.raises(ModelRegistrationError, match="RegisterModel subclass"):
        catalog.register("x", dict)  # type: ignore[arg-type]
    with pytest.raises(ModelRegistrationError, match='"module:Class"'):
        catalog.register("x", "not a path")
    with pytest.raises(ModelRegistrationError, match='"design" must be'):
        catalog.register("", RegFile)
    catalog.register("regs", RegFile)
    assert "regs" in catalog and isinstance(catalog.create("regs"), RegFile)
    catalog.unregister("regs")
    with pytest.raises(UnknownDesignError):
        catalog.unregister("regs")


def test_a_failed_update_gives_the_installed_versions_model_back() -> None:
    """An update's code claims the design over the installed version (``replacing``); when the
    update fails and its claims are released, the installed version's model plays the design
    again. When the update succeeds, releasing the old version leaves the new model."""

    class NewRegs(RegFile):
        pass

    catalog = ModelCatalog()
    assert catalog.claim("regs", RegFile, "mod_v1")
    assert catalog.claim("regs", NewRegs, "mod_v2", replacing="mod_v1")
    assert catalog.resolve("regs") is NewRegs
    assert catalog.release("mod_v2") == ("regs",)  # the update failed
    assert catalog.resolve("regs") is RegFile
    assert catalog.release("mod_v1") == ("regs",)  # the installed version goes later
    assert "regs" not in catalog

    assert catalog.claim("regs", RegFile, "mod_v1")
    assert catalog.claim("regs", NewRegs, "mod_v2", replacing="mod_v1")
    assert catalog.release("mod_v1") == ()  # the update succeeded: the old version goes
    assert catalog.resolve("regs") is NewRegs
    assert catalog.release("mod_v2") == ("regs",)
    assert "regs" not in catalog
