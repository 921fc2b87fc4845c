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
from sharing_support import KEYS, MODULES, Caller, encrypt, start_tdes, tdes_reference

import juggle
from juggle.errors import DrainTimeoutError, HardwareFaultError, JuggleError, SanityCheckError

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


@pytest.mark.parametrize("direction", ["in", "out"])
@pytest.mark.parametrize("step", STEPS)
def test_fabric_faults_during_a_juggle_change_nothing(
    fw: juggle.Framework, tmp_path: Path, step: str, direction: str
) -> None:
    sid = start_tdes(fw, tmp_path, per_consumer=True)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[0])
    if direction == "out":
        fw.juggle(to_hardware=sid)
    before = fw.services()[0].tier
    caller = caller_for(proxy, KEYS[0])
    try:
        fw.fabric.faults.arm(step)
        try:
            if direction == "in":
                fw.juggle(to_hardware=sid)
            else:
                fw.juggle(to_software=[sid])
        except JuggleError:
            pass
    finally:
        caller.stop()
    wait_for(lambda: fw._supervisor is None)  # a contained fault has been dealt with
    if fw.fabric.faults.statistics().fired[step]:  # the fault hit the juggle...
        if fw.faults:  # ... or the caller's hardware call: contained, moved to software
            assert fw.services()[0].tier == "native"
        else:
            assert fw.services()[0].tier == before
    consistent(fw)
    fw.fabric.faults.disarm()
    assert caller.failures == [] and caller.calls > 0
    faulted = [r.name for r in fw.regions() if r.state == "ERROR"]
    for region in faulted:
        fw.recover(region)
    target = "hardware" if fw.services()[0].tier != "hardware" else "software"
    if target == "hardware":
        fw.juggle(to_hardware=sid)
    else:
        fw.juggle(to_software=[sid])
    assert fw.services()[0].tier == ("hardware" if target == "hardware" else "native")
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[0], PLAIN)
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
    managed = fw._managed_of(sid)
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
    managed = fw._managed_of(sid)
    managed.classes = {}
    managed.home_tier = "hardware"
    fw.juggle(to_hardware=sid)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[0])
    fw.fabric.faults.arm("driver_error")
    with pytest.raises(HardwareFaultError, match=f"service {sid}.*prr0"):
        encrypt(proxy, PLAIN)
