"""A juggle never wedges, and faulty hardware is contained (issue 8, items 5 and 6).

A caller thread keeps encrypting through the TDES co-module while juggles fail at each step,
in each direction; afterwards no consumer call has failed, every service serves from the tier
it was on, the snapshots agree with each other, and the next juggle works. Faulty cores (hung,
garbage, raising) are served around by software and quarantined until recovered.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sharing_support import (
    KEYS,
    MODULES,
    Caller,
    encrypt,
    start_tdes,
    tdes_module,
    tdes_reference,
)

import juggle
from juggle.errors import (
    BridgeError,
    DrainTimeoutError,
    HardwareFaultError,
    JuggleError,
    ProgrammingError,
    SanityCheckError,
)
from juggle.fabric.faults import ACCESS_FAULT_STEPS, FaultInjector
from juggle.services.crypto import TdesDriver

PLAIN = b"sixteen bytes!!!"

GATE_CODE = '''
"""A gate a test opens: while shut, gated calls wait in the middle (after their work)."""
import threading

SHUT = threading.Event()
OPEN = threading.Event()
OPEN.set()
INSIDE = threading.Semaphore(0)


def pass_through():
    if SHUT.is_set():
        INSIDE.release()
        OPEN.wait(30)
'''

MODULE_CODE = """
from juggle.services.crypto import NativeTDES, SoftwareTDES, TdesDriver
from juggle.services.crypto.model import TdesCore
import fault_gate


class SlowSoftware(SoftwareTDES):
    def encrypt(self, buf, size):
        done = super().encrypt(buf, size)
        fault_gate.pass_through()
        return done


class SlowDriver(TdesDriver):
    def encrypt(self, buf, size):
        done = super().encrypt(buf, size)
        fault_gate.pass_through()
        return done
"""


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """A tdes co-module whose software and hardware encrypt can be held in the middle."""
    import importlib

    root = tmp_path_factory.mktemp("faults")
    lib = root / "lib"
    lib.mkdir()
    (lib / "fault_gate.py").write_text(GATE_CODE)
    sys.path.insert(0, str(lib))
    importlib.invalidate_caches()
    gate = importlib.import_module("fault_gate")
    folder = root / "gated"
    folder.mkdir()
    (folder / "bitstreams").mkdir()
    (folder / "bitstreams" / "tdes_prr0.bit").write_bytes(
        (MODULES / "tdes" / "bitstreams" / "tdes_prr0.bit").read_bytes()
    )
    (folder / "gated_module.py").write_text(MODULE_CODE)
    toml = (MODULES / "tdes" / "juggle.toml").read_text()
    toml = toml.replace('name = "tdes"', 'name = "gated"').replace("tdes_module.", "gated_module.")
    toml = toml.replace("gated_module.SoftwareTDES", "gated_module.SlowSoftware")
    toml = toml.replace("gated_module.TdesDriver", "gated_module.SlowDriver")
    toml = toml.replace('[services.native]\nclass = "gated_module.NativeTDES"\n', "")
    (folder / "juggle.toml").write_text(toml)
    yield folder, gate
    sys.path.remove(str(lib))


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p", drain_timeout_s=0.2, call_timeout_s=0.2)
    yield framework
    framework.close()


def consistent(fw: juggle.Framework) -> None:
    """Services and regions agree: a service in hardware sits in a PROGRAMMED region that
    names it; every other region is EMPTY or ERROR or holds nobody's design."""
    regions = {r.name: r for r in fw.regions()}
    for s in fw.services():
        if s.tier == "hardware":
            assert s.region is not None
            assert regions[s.region].state == "PROGRAMMED"
            assert regions[s.region].service_id == s.service_id
        else:
            assert s.region is None
    for r in regions.values():
        if r.service_id is None:
            assert r.state in ("EMPTY", "ERROR")


def caller_for(proxy: Any, key: bytes) -> Caller:
    def call() -> None:
        data = PLAIN
        assert encrypt(proxy, data) == tdes_reference(key, data)

    return Caller(call)


STEPS = ("bridge_disable", "config_write", "bridge_enable", "driver_error")

#: The error each step's fault raises out of the juggle (juggle.fabric.faults).
STEP_ERRORS: dict[str, type[JuggleError]] = {
    "bridge_disable": BridgeError,
    "config_write": ProgrammingError,
    "bridge_enable": BridgeError,
    "driver_error": HardwareFaultError,
}

#: The matrix: each step failing in a juggle into hardware ("in"), in a juggle out of it
#: ("out"), and in a swap ("swap": the service juggled out while another takes its region).
#: A plain juggle out programs nothing: it switches the proxies, drains, and closes the region's
#: bridge (unload); its undo finds the design intact and reopens nothing. So config_write and
#: bridge_enable cannot fire in it by construction: they are reached on the juggle-out path
#: only when the leaving service's region is reprogrammed, the "swap" cells. driver_error fires
#: on a hardware access, which a plain juggle out makes only for a call still running on the
#: core: that cell is test_driver_error_in_a_call_a_juggle_out_drains (a held call, no race).
CELLS = [
    *[(step, "in") for step in STEPS],
    ("bridge_disable", "out"),
    *[(step, "swap") for step in STEPS],
]

#: Where each cell leaves things: the faulted service's tier and the region's state. A swap is
#: undone whatever fails: the leaving service serves from its region again (intact, or
#: programmed back by the undo), the entering one stays in software.
OUTCOMES: dict[tuple[str, str], tuple[str, str]] = {
    ("bridge_disable", "in"): ("native", "EMPTY"),  # failed before the write: nothing loaded
    ("config_write", "in"): ("native", "ERROR"),  # the next juggle's to program
    ("bridge_enable", "in"): ("native", "ERROR"),
    ("driver_error", "in"): ("native", "EMPTY"),  # the undo unloads the design
    ("bridge_disable", "out"): ("hardware", "PROGRAMMED"),  # the unload did not happen
    **{(step, "swap"): ("hardware", "PROGRAMMED") for step in STEPS},
}


def arming_driver(faults: FaultInjector, step: str) -> type:
    """A TDES driver that arms ``step`` as it is built: in a swap, once the leaving service's
    proxies are on software and its drain is over, so only the juggle's own accesses (the
    entering service's state carried onto its core) can meet the fault, not a caller's."""

    class ArmingDriver(TdesDriver):
        def __init__(self, mmio: Any) -> None:
            super().__init__(mmio)
            faults.arm(step)

    return ArmingDriver


@pytest.mark.parametrize(("step", "direction"), CELLS)
def test_fabric_faults_during_a_juggle_change_nothing(
    fw: juggle.Framework, tmp_path: Path, step: str, direction: str
) -> None:
    """Each cell: the fault fires (once, in the juggle), the juggle raises its step's error,
    no consumer call fails, and everything is where the cell's outcome says; then the next
    juggle works."""
    sid = start_tdes(fw, tmp_path, per_consumer=True)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[0])
    other: int | None = None
    other_proxy: Any = None
    if direction != "in":
        fw.juggle(to_hardware=sid)
    if direction == "swap":  # a second TDES co-module, with a consumer whose state is carried
        module = fw.install(tdes_module(tmp_path, per_consumer=True, name="other"))
        module.start()
        (other,) = module.service_ids
        other_proxy = fw.registry.get_service(other, "app2")
        other_proxy.load_key(KEYS[1])
    caller = caller_for(proxy, KEYS[0])
    wait_for(lambda: caller.calls > 0)  # the caller is under way before the fault is armed
    entering = fw._table.managed(other if other is not None else sid).hardware
    assert entering is not None
    driver = entering.driver
    try:
        if step in ACCESS_FAULT_STEPS and direction == "swap":
            entering.driver = arming_driver(fw.fabric.faults, step)
        else:
            fw.fabric.faults.arm(step)
        with pytest.raises(STEP_ERRORS[step]):
            if direction == "in":
                fw.juggle(to_hardware=sid)
            elif direction == "out":
                fw.juggle(to_software=[sid])
            else:
                fw.juggle(to_hardware=other, to_software=[sid])
    finally:
        entering.driver = driver
        caller.stop()
    faults = fw.fabric.faults.statistics()
    assert faults.fired[step] == 1 and faults.armed[step] == 0  # the fault fired, once
    assert sum(faults.fired.values()) == 1
    wait_for(lambda: not fw._supervisor.busy)
    assert list(fw.faults) == []  # the juggle met the fault, no consumer call did
    tier, state = OUTCOMES[(step, direction)]
    tiers = {s.service_id: (s.tier, s.region) for s in fw.services()}
    assert tiers[sid] == (tier, "prr0" if tier == "hardware" else None)
    if other is not None:
        assert tiers[other] == ("native", None)
    (region,) = fw.regions()
    assert region.state == state
    assert region.service_id == (sid if state == "PROGRAMMED" else None)
    consistent(fw)
    assert caller.failures == [] and caller.calls > 0
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[0], PLAIN)
    # the next juggle works (a region in ERROR is the next programming's to clear)
    if direction == "in":
        fw.juggle(to_hardware=sid)
        assert fw.services()[0].tier == "hardware"
    elif direction == "out":
        fw.juggle(to_software=[sid])
        assert fw.services()[0].tier == "native"
    else:
        fw.juggle(to_hardware=other, to_software=[sid])
        assert {s.service_id: s.tier for s in fw.services()} == {sid: "native", other: "hardware"}
        assert encrypt(other_proxy, PLAIN) == tdes_reference(KEYS[1], PLAIN)
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[0], PLAIN)
    consistent(fw)


def held_call_driver(inside: threading.Event, go: threading.Event) -> type:
    """A TDES driver whose encrypt, once ``inside`` is clear, sets it and waits for ``go``
    before touching the core: a call running on the core that a test holds."""

    class HeldCallDriver(TdesDriver):
        def encrypt(self, buf: Any, size: int) -> int:
            if not inside.is_set():
                inside.set()
                assert go.wait(30), "the test never let the call go on"
            return int(super().encrypt(buf, size))

    return HeldCallDriver


def test_driver_error_in_a_call_a_juggle_out_drains(tmp_path: Path) -> None:
    """The matrix's driver_error cell of a plain juggle out: the juggle's one hardware access
    is a call still running on the core while the juggle drains it. The call meets the bus
    error, is served by software; the juggle out completes; the fault is not the service's
    any more (it left that core), and the region is EMPTY."""
    with juggle.Framework("xupv2p", drain_timeout_s=30.0, call_timeout_s=5.0) as fw:
        sid = start_tdes(fw, tmp_path, per_consumer=False)
        proxy = fw.get_service("EncryptionService", consumer="app")
        proxy.load_key(KEYS[5])
        inside, go = threading.Event(), threading.Event()
        managed = fw._table.managed(sid)
        assert managed.hardware is not None
        managed.hardware.driver = held_call_driver(inside, go)
        fw.juggle(to_hardware=sid)
        before = fw.statistics(sid).fallbacks
        results: list[bytes] = []
        call = threading.Thread(target=lambda: results.append(encrypt(proxy, PLAIN)), daemon=True)
        call.start()
        try:
            assert inside.wait(10), "the call never reached the core"
            fw.fabric.faults.arm("driver_error")  # no other access can meet it: one caller
            errors: list[BaseException] = []

            def out() -> None:
                try:
                    fw.juggle(to_software=[sid])
                except BaseException as exc:
                    errors.append(exc)

            juggling = threading.Thread(target=out, daemon=True)
            juggling.start()
            wait_for(lambda: fw.services()[0].tier == "native")  # switched, now draining
            assert juggling.is_alive() and fw.fabric.faults.statistics().fired["driver_error"] == 0
        finally:
            go.set()
        call.join(30)
        juggling.join(30)
        assert not call.is_alive() and not juggling.is_alive()
        assert errors == []
        faults = fw.fabric.faults.statistics()
        assert faults.fired["driver_error"] == 1 and faults.armed["driver_error"] == 0
        assert results == [tdes_reference(KEYS[5], PLAIN)]  # served by software instead
        assert fw.statistics(sid).fallbacks == before + 1
        wait_for(lambda: not fw._supervisor.busy)
        assert list(fw.faults) == []  # the service had left that core: nothing to contain
        assert fw.services()[0].tier == "native" and fw.services()[0].region is None
        assert [r.state for r in fw.regions()] == ["EMPTY"]
        consistent(fw)
        fw.juggle(to_hardware=sid)  # a fresh core: the next juggle works
        assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[5], PLAIN)
        assert fw.statistics(sid).per_tier["hardware"].calls >= 1
        consistent(fw)


def test_fault_steps_in_the_middle_of_a_juggle_fire(fw: juggle.Framework, tmp_path: Path) -> None:
    """Each fabric step really fails the juggle into hardware (the matrix above is not
    vacuous), and the service stays where it was."""
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[1])
    for step in STEPS:
        fw.fabric.faults.arm(step)
        with pytest.raises(JuggleError):
            fw.juggle(to_hardware=sid)
        assert fw.fabric.faults.statistics().fired[step] >= 1
        assert fw.services()[0].tier == "native"
        assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[1], PLAIN)
        consistent(fw)
        for region in [r.name for r in fw.regions() if r.state == "ERROR"]:
            fw.recover(region)
    fw.juggle(to_hardware=sid)
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[1], PLAIN)


@pytest.mark.parametrize("direction", ["in", "out"])
def test_drain_timeout_rolls_back(
    fw: juggle.Framework, gated: tuple[Path, Any], direction: str
) -> None:
    """A call still running when the drain times out: the juggle is undone, no call fails,
    and the next juggle works (in: the software call blocks; out: the hardware one)."""
    folder, gate = gated
    module = fw.install(folder)
    module.start()
    sid = fw.services()[0].service_id
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[2])
    if direction == "out":
        fw.juggle(to_hardware=sid)
    before = fw.services()[0].tier
    gate.OPEN.clear()
    gate.SHUT.set()
    results: list[Any] = []
    held = threading.Thread(target=lambda: results.append(encrypt(proxy, PLAIN)), daemon=True)
    held.start()
    assert gate.INSIDE.acquire(timeout=10)
    gate.SHUT.clear()
    caller = caller_for(proxy, KEYS[2])
    try:
        with pytest.raises(DrainTimeoutError):
            if direction == "in":
                fw.juggle(to_hardware=sid)
            else:
                fw.juggle(to_software=[sid])
        assert fw.services()[0].tier == before
        consistent(fw)
    finally:
        gate.OPEN.set()
        held.join(10)
        caller.stop()
    assert results == [tdes_reference(KEYS[2], PLAIN)]
    assert caller.failures == []
    if direction == "in":
        fw.juggle(to_hardware=sid)
        assert fw.services()[0].tier == "hardware"
    else:
        fw.juggle(to_software=[sid])
        assert fw.services()[0].tier == "software"
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[2], PLAIN)
    consistent(fw)


def test_a_driver_failing_after_programming_leaves_no_region_loaded(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    managed = fw._table.managed(sid)
    assert managed.hardware is not None

    class Broken:
        def __init__(self, mmio: object) -> None:
            raise RuntimeError("driver cannot start")

    managed.hardware.driver = Broken
    with pytest.raises(juggle.errors.ModuleCodeError, match="Broken.*cannot start") as caught:
        fw.juggle(to_hardware=sid)
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert fw.regions()[0].state == "EMPTY" and fw.services()[0].tier == "native"


# -- faulty cores ------------------------------------------------------------------------------


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    """Until ``condition()`` holds (the fault supervisor works in its own thread)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.01)


def test_core_hang_is_served_by_software_then_recovered(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    sid = start_tdes(fw, tmp_path, per_consumer=True)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[3])
    fw.juggle(to_hardware=sid)
    fw.fabric.faults.arm("core_hang")
    for _ in range(5):  # the hung call and the next ones: all right, none fails
        assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[3], PLAIN)
    wait_for(lambda: fw.regions()[0].state == "ERROR")
    assert fw.services()[0].tier == "native"
    stats = fw.statistics(sid)
    assert stats.fallbacks >= 1
    with pytest.raises(SanityCheckError, match="quarantined"):
        fw.juggle(to_hardware=sid)
    fw.recover("prr0")
    assert fw.services()[0].tier == "hardware" and fw.regions()[0].state == "PROGRAMMED"
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[3], PLAIN)


def test_core_garbage_is_caught_by_verification(fw: juggle.Framework, tmp_path: Path) -> None:
    fw.verify_sample = 1
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[4])
    fw.juggle(to_hardware=sid)
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[4], PLAIN)
    fw.fabric.faults.arm("core_garbage")
    for _ in range(5):
        assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[4], PLAIN)
    wait_for(lambda: fw.regions()[0].state == "ERROR")
    stats = fw.statistics(sid)
    assert stats.mismatches == 1 and stats.verified >= 2
    assert fw.services()[0].tier == "native"


def test_driver_error_in_a_call_falls_back(fw: juggle.Framework, tmp_path: Path) -> None:
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[5])
    fw.juggle(to_hardware=sid)
    fw.fabric.faults.arm("driver_error")
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[5], PLAIN)
    wait_for(lambda: fw.regions()[0].state == "ERROR")
    assert fw.services()[0].tier == "native"
    assert fw.statistics(sid).fallbacks == 1
    assert any("OSError" in f for f in fw.faults)


def test_hardware_only_service_raises_hardware_fault_error(fw: juggle.Framework) -> None:
    module = fw.install(MODULES / "tdes")
    module.start()
    sid = fw.services()[0].service_id
    managed = fw._table.managed(sid)
    managed.classes = {}
    managed.home_tier = "hardware"
    fw.juggle(to_hardware=sid)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[0])
    fw.fabric.faults.arm("driver_error")
    with pytest.raises(HardwareFaultError, match=f"service {sid}.*prr0"):
        encrypt(proxy, PLAIN)
