"""Faulty cores on the simulated fabric: ``core_hang``, ``core_garbage`` and ``driver_error``.

These steps hit hardware accesses, so they are checked with a real core behind the window: the
TDES core and its driver from ``juggle.services`` (and the adder for a second result register).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator

import pytest
from Crypto.Cipher import DES3

from juggle.errors import CoreTimeoutError, FabricError, RegionEmptyError
from juggle.fabric import Bitstream, Fabric, ModelCatalog, open_fabric
from juggle.fabric.faults import (
    ACCESS_FAULT_STEPS,
    FAULT_STEPS,
    GARBAGE_PATTERN,
    FaultInjector,
)
from juggle.fabric.mmio import MMIO
from juggle.fabric.sim.window import SimWindow
from juggle.services.arith import AdderCore, AdderDriver, MultiplierCore
from juggle.services.audio import PCM, AdpcmCore
from juggle.services.crypto import DesCore, TdesCore, TdesDriver
from juggle.services.crypto import registers as reg

BitsFactory = Callable[..., tuple[Bitstream, bytes]]

KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
PLAIN = b"12345678" * 4
CIPHER = DES3.new(KEY, DES3.MODE_ECB).encrypt(PLAIN)


@pytest.fixture
def fab() -> Iterator[Fabric]:
    """The simulated xupv2p board with the reference cores' models."""
    catalog = ModelCatalog({"tdes": TdesCore, "adder": AdderCore})
    with open_fabric("xupv2p", models=catalog) as fabric:
        yield fabric


def program(fab: Fabric, bits: BitsFactory, design: str = "tdes") -> MMIO:
    fab.program("prr0", *bits(design))
    return fab.window("prr0")


def encrypt(driver: TdesDriver) -> bytes:
    buf = bytearray(PLAIN)
    driver.encrypt(buf, len(buf))
    return bytes(buf)


def test_access_steps_are_known_and_unknown_steps_refused(fab: Fabric) -> None:
    assert set(ACCESS_FAULT_STEPS) == {"core_hang", "core_garbage", "driver_error"}
    assert set(ACCESS_FAULT_STEPS) < set(FAULT_STEPS)
    with pytest.raises(FabricError, match=r"unknown fault step 'core_melt'.*core_garbage"):
        fab.faults.arm("core_melt")
    with pytest.raises(FabricError, match='"count" must be >= 1'):
        fab.faults.arm("core_hang", 0)
    with pytest.raises(FabricError, match="unknown fault step"):
        fab.faults.disarm("hang")
    assert fab.faults.pending == 0


def test_pending_counts_only_armed_access_faults() -> None:
    faults = FaultInjector()
    faults.arm("bridge_disable")
    assert faults.pending == 0  # programming steps never slow a window access down
    faults.arm("core_hang", 2)
    faults.arm("driver_error")
    assert faults.pending == 3
    assert faults.fire_access() == "driver_error"  # firing order: ACCESS_FAULT_STEPS
    assert faults.pending == 2
    faults.disarm("core_hang")
    assert faults.pending == 0 and faults.fire_access() is None
    faults.arm("core_garbage")
    faults.disarm()
    assert faults.pending == 0
    assert faults.statistics().fired["driver_error"] == 1


# -- core_hang -------------------------------------------------------------------------------


def test_core_hang_freezes_the_core_until_reprogrammed(fab: Fabric, bits: BitsFactory) -> None:
    window = program(fab, bits)
    driver = TdesDriver(window, max_polls=50)
    driver.load_key(KEY)
    assert encrypt(driver) == CIPHER
    fab.faults.arm("core_hang")
    window.write32(reg.DATA_HI, 0x01234567)  # this access hangs the core
    window.write32(reg.CONTROL, reg.CTRL_START)
    before = fab.clock.now_ns
    assert all(window.read32(reg.STATUS) == reg.STATUS_BUSY for _ in range(5_000))
    assert fab.clock.now_ns > before + 5_000  # the bus still costs time; the core sees none
    with pytest.raises(CoreTimeoutError, match="not DONE after 50 status reads"):
        encrypt(driver)
    assert "core hung" in repr(window)
    assert isinstance(window, SimWindow)
    window.set_enabled(False)  # a bridge switch does not cure the core
    window.set_enabled(True)
    assert window.read32(reg.STATUS) == reg.STATUS_BUSY
    stats = fab.faults.statistics()
    assert (stats.armed["core_hang"], stats.fired["core_hang"]) == (0, 1)

    fresh = program(fab, bits)  # reprogramming replaces the core
    with pytest.raises(RegionEmptyError):
        window.read32(reg.STATUS)
    driver = TdesDriver(fresh, max_polls=50)
    driver.load_key(KEY)
    assert encrypt(driver) == CIPHER


def test_core_hang_on_an_idle_core_stops_the_next_block(fab: Fabric, bits: BitsFactory) -> None:
    window = program(fab, bits)
    driver = TdesDriver(window, max_polls=200)
    fab.faults.arm("core_hang")
    driver.load_key(KEY)  # the first key write hangs the core
    with pytest.raises(CoreTimeoutError):
        encrypt(driver)


# -- core_garbage ----------------------------------------------------------------------------


def test_core_garbage_corrupts_results_only(fab: Fabric, bits: BitsFactory) -> None:
    window = program(fab, bits)
    driver = TdesDriver(window)
    driver.load_key(KEY)
    fab.faults.arm("core_garbage")
    out = encrypt(driver)  # the protocol completes ...
    assert out != CIPHER  # ... with wrong bytes: each result word XORed with the pattern
    mask = GARBAGE_PATTERN.to_bytes(4, "big") * (len(PLAIN) // 4)
    assert bytes(a ^ b for a, b in zip(out, CIPHER, strict=True)) == mask
    assert window.read32(reg.STATUS) == reg.STATUS_DONE  # status behaves
    assert window.read32(reg.ID) == reg.ID_TDES
    window.write32(reg.DATA_HI, 0x5555AAAA)
    assert window.read32(reg.DATA_HI) == 0x5555AAAA  # so does a data register
    assert encrypt(driver) != CIPHER  # and it lasts
    assert "core returns garbage" in repr(window)
    assert fab.faults.statistics().fired["core_garbage"] == 1

    driver = TdesDriver(program(fab, bits))
    driver.load_key(KEY)
    assert encrypt(driver) == CIPHER


def test_core_garbage_hits_the_adders_result(fab: Fabric, bits: BitsFactory) -> None:
    adder = AdderDriver(program(fab, bits, "adder"))
    assert adder.add(1, 2) == 3
    fab.faults.arm("core_garbage")
    assert adder.add(1, 2) == (3 ^ GARBAGE_PATTERN) - (1 << 32)


def test_cores_declare_their_result_registers() -> None:
    assert DesCore.result_offsets == TdesCore.result_offsets == (reg.RESULT_HI, reg.RESULT_LO)
    assert AdderCore.result_offsets == MultiplierCore.result_offsets == (0x10,)
    assert AdpcmCore.result_offsets == PCM


# -- driver_error ----------------------------------------------------------------------------


def test_driver_error_fails_exactly_one_access(fab: Fabric, bits: BitsFactory) -> None:
    window = program(fab, bits)
    assert isinstance(window, SimWindow)
    window.write32(reg.DATA_HI, 7)
    before, clock = window.statistics(), fab.clock.now_ns
    fab.faults.arm("driver_error")
    with pytest.raises(OSError, match=r"injected fault: bus error on region 'prr0'") as caught:
        window.read32(reg.DATA_HI)
    assert caught.value.errno == errno.EIO
    assert not isinstance(caught.value, FabricError)  # a bus error is not juggle's own
    assert window.statistics() == before and fab.clock.now_ns == clock  # nothing reached
    assert window.read32(reg.DATA_HI) == 7  # one-shot
    stats = fab.faults.statistics()
    assert (stats.armed["driver_error"], stats.fired["driver_error"]) == (0, 1)


def test_driver_error_reaches_the_driver_once(fab: Fabric, bits: BitsFactory) -> None:
    driver = TdesDriver(program(fab, bits))
    driver.load_key(KEY)
    fab.faults.arm("driver_error", count=2)
    for _ in range(2):
        with pytest.raises(OSError):
            encrypt(driver)
    assert encrypt(driver) == CIPHER
    assert fab.faults.statistics().fired["driver_error"] == 2


def test_refused_accesses_fire_nothing(fab: Fabric, bits: BitsFactory) -> None:
    window = program(fab, bits)
    fab.unload("prr0")
    fab.faults.arm("driver_error")
    with pytest.raises(RegionEmptyError):
        window.read32(reg.STATUS)  # reaches no core
    assert fab.faults.statistics().armed["driver_error"] == 1
    with pytest.raises(OSError):
        program(fab, bits).read32(reg.STATUS)  # the next access that reaches a core
    assert fab.faults.pending == 0
