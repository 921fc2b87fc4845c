"""Live policies on service-call statistics: fifo sees callers pile up, cost-aware weighs the
measured gain against the modeled reconfiguration, and hardware-only services are placed."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import juggle
from juggle.core.controllers import load_controller

MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"

SLOW_CODE = '''
import threading
from juggle.services.arith import AdderDriver, SoftwareAdd

GATE = threading.Event()
ENTERED = threading.Semaphore(0)


class SlowAdd(SoftwareAdd):
    """Waits at a gate the test opens: callers pile up inside the service."""

    def add(self, a: int, b: int) -> int:
        ENTERED.release()
        assert GATE.wait(20)
        return super().add(a, b)


class Driver(AdderDriver):
    pass
'''

DESCRIPTOR = """
[module]
name = "{name}"
[[services]]
interfaces = ["math.AddService"]
{software}
[services.hardware]
driver = "slowmod.Driver"
bitstreams = {{ prr0 = "adder.bit" }}
[services.hardware.resources]
slices = 108
flipflops = 176
"""


def make_module(tmp_path: Path, name: str, *, software: bool) -> Path:
    root = tmp_path / name
    root.mkdir()
    (root / "slowmod.py").write_text(SLOW_CODE)
    shutil.copy(MODULES / "math" / "opb_prr_0_adder_partial.bit", root / "adder.bit")
    soft = '[services.software]\nclass = "slowmod.SlowAdd"' if software else ""
    (root / "juggle.toml").write_text(DESCRIPTOR.format(name=name, software=soft))
    return root


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p", queue_capacity=8)
    yield framework
    framework.close()


def test_fifo_juggles_the_service_whose_callers_pile_up(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    module = fw.install(make_module(tmp_path, "slow", software=True))
    module.start()
    gate: threading.Event = module.namespace.resolve("slowmod.GATE", "gate")
    entered: threading.Semaphore = module.namespace.resolve("slowmod.ENTERED", "sem")
    add = fw.get_service("AddService", consumer="router")
    results: list[int] = []
    callers = [threading.Thread(target=lambda i=i: results.append(add.add(i, 1))) for i in range(6)]
    for t in callers:
        t.start()
    for _ in callers:
        assert entered.acquire(timeout=10)
    snap = fw.snapshot()
    entry = snap.service(add.service_id)
    assert entry is not None and entry.queue_length == 6
    assert entry.queue_occupancy == pytest.approx(6 / 8)
    fw.set_controller(load_controller("fifo", threshold=0.5))
    opener = threading.Timer(0.2, gate.set)  # running calls must finish where they started
    opener.start()
    reports = fw.control()
    for t in callers:
        t.join(10)
    assert [r.to_hardware for r in reports] == [add.service_id]
    assert sorted(results) == [1, 2, 3, 4, 5, 6]
    assert fw.services()[0].tier == "hardware"
    assert add.add(40, 2) == 42
    stats = fw.statistics(add.service_id)
    assert stats.per_tier["software"].calls == 6 and stats.total.errors == 0


def test_cost_aware_accelerates_only_what_pays(fw: juggle.Framework) -> None:
    """ThumbPod 2.5: the gain must beat overhead and the amortised reconfiguration."""
    fw.install(MODULES / "tdes").start()
    fw.install(MODULES / "math").start()
    enc = fw.get_service("EncryptionService", consumer="mail")
    add = fw.get_service("AddService", consumer="calc")
    enc.load_key(bytes(range(24)))
    fw.set_tier(enc.service_id, "software")
    buf = bytearray(2048)
    # observe both tiers of both services so the gain is measured, not guessed
    for target, call in ((enc, lambda: enc.encrypt(buf, 2048)), (add, lambda: add.add(1, 2))):
        for _ in range(5):
            call()
        fw.juggle(to_hardware=target.service_id)
        for _ in range(5):
            call()
        fw.juggle(to_hardware=None, to_software=[target.service_id])
    snap = fw.snapshot()
    gains: dict[int, Any] = {s.service_id: s.gain_us for s in snap.services}
    # measured pure-Python TDES against the modeled core: milliseconds saved per 2-KiB call;
    # an add saves at most a few microseconds
    assert gains[enc.service_id] > 1000
    assert gains[enc.service_id] > 10 * abs(gains[add.service_id])
    assert snap.regions[0].reconfig_us == pytest.approx(13_418, rel=0.05)
    fw.set_controller(load_controller("cost-aware", horizon_s=1e-3))
    assert fw.control() == []  # 1 ms of calls cannot pay a 13-ms reconfiguration
    fw.set_controller(load_controller("cost-aware", horizon_s=5.0))
    reports = fw.control()
    assert [r.to_hardware for r in reports] == [enc.service_id]


def test_hardware_only_service_is_placed_on_start(fw: juggle.Framework, tmp_path: Path) -> None:
    module = fw.install(make_module(tmp_path, "hwonly", software=False))
    module.start()
    (service,) = fw.services()
    assert service.tiers == ("hardware",) and service.region == "prr0"
    add = fw.get_service("AddService")
    assert add.add(2**31 - 1, 1) == -(2**31)
    second = fw.install(make_module(tmp_path, "hwonly2", software=False))
    with pytest.raises(juggle.SanityCheckError, match="prr0"):
        second.start()  # the only region is taken: refused, nothing registered
    assert len(fw.services()) == 1
    module.stop()
    assert fw.regions()[0].module is None
