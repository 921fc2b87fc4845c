"""Faulty cores are contained the same way for tenant-arbitrated and juggle-placed services
(issue 21, item 1 and its first acceptance line).

A board with two regions: ``prr0`` serves a hardware-only TDES service that two tenants call
(``placement``: arbitrated, i.e. started while the tenants are registered and placed by their
requests; or juggle-placed, i.e. started before them and put in ``prr0`` by a juggle), and
``prr1`` serves the TDES co-module (software and hardware tiers), juggle-placed, which a third
consumer calls all along. A fault armed on the simulated fabric (``core_hang``, a driver that
raises: ``driver_error``, or ``core_garbage`` under ``verify_sample=1``) fires on the next
hardware access; the callers of the other region are parked between two calls while it is armed
(events, no sleeps), so it fires in the call the test aims it at. Every test runs unchanged for
both placements: the call path, the guard, quarantine, fallback and verification are one code.

A hardware-only service has no software tier to check its results against, so it is not
verified (docs/verification.md): ``core_garbage`` is aimed at the co-module's core only.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sharing_support import KEYS, MODULES, encrypt, tdes_reference

import juggle
from juggle.errors import HardwareFaultError, RegionEmptyError
from juggle.fabric.bitstream import write_bitstream
from juggle.runtime.hardware import GuardedWindow

PLAIN = b"sixteen bytes!!!"
WAIT_S = 10.0
#: The guard's call timeout: a hung call must end soon after it.
CALL_TIMEOUT_S = 0.2
#: How long a hung call may take in all: the call timeout, plus room for a loaded machine to
#: schedule the guard's look at the clock (every 64 reads) and the fallback; a core that the
#: guard does not stop polls for ever (the driver's own cap is 2**62 polls)
HUNG_CALL_BOUND_S = CALL_TIMEOUT_S + 3.0
PLACEMENTS = ("arbitrated", "juggle-placed")

SECOND_REGION = """
[[regions]]
name = "prr1"
slices = 2240
flipflops = 4480
mult18 = 20
ram16 = 20
tbuf = 6848
max_bitstream_bytes = 160_000
bitstream_bytes = 149_088
adjacent = []
window_base = 0x4101_0000
window_size = 0x1_0000
"""

HW_ONLY_CODE = """
from juggle.services.crypto import TdesDriver


class PatientTdes(TdesDriver):
    # polls a core for ever: only the runtime's guard ends a hung call
    def __init__(self, mmio):
        super().__init__(mmio, max_polls=2**62)
"""

HW_ONLY_DESCRIPTOR = """
[module]
name = "hwonly"
version = "1.0.0"

[[services]]
interfaces = ["crypto.EncryptionService"]
per_consumer = true
properties = { algorithm = "hwonly" }

[services.hardware]
driver = "hw_module.PatientTdes"
bitstreams = { prr0 = "tdes_prr0.bit" }
"""


@pytest.fixture
def board(tmp_path: Path) -> Path:
    """The xupv2p profile with a second region like its first."""
    source = Path(juggle.__file__).parent / "fabric" / "profiles" / "xupv2p.toml"
    profile = tmp_path / "twoprr.toml"
    profile.write_text(source.read_text() + SECOND_REGION)
    return profile


@pytest.fixture
def modules(tmp_path: Path) -> dict[str, Path]:
    """The hardware-only TDES module (prr0) and the TDES co-module (prr1)."""
    hw = tmp_path / "hwonly"
    hw.mkdir()
    shutil.copy(MODULES / "tdes" / "bitstreams" / "tdes_prr0.bit", hw / "tdes_prr0.bit")
    (hw / "hw_module.py").write_text(HW_ONLY_CODE)
    (hw / "juggle.toml").write_text(HW_ONLY_DESCRIPTOR)
    co = tmp_path / "comod"
    shutil.copytree(MODULES / "tdes", co)
    write_bitstream(co / "bitstreams" / "tdes_prr1.bit", "tdes", "2vp30ff896", "prr1", 149_088)
    toml = (co / "juggle.toml").read_text().replace('name = "tdes"', 'name = "comod"')
    toml = toml.replace('prr0 = "bitstreams/tdes_prr0.bit"', 'prr1 = "bitstreams/tdes_prr1.bit"')
    (co / "juggle.toml").write_text(toml)
    return {"hwonly": hw, "comod": co}


class Call:
    """One call in a thread; ``join`` bounds it, returns its result or raises what it raised,
    and ``elapsed`` is how long it took."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.elapsed = 0.0
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        t0 = time.monotonic()
        try:
            self.result = fn()
        except BaseException as exc:
            self.error = exc
        self.elapsed = time.monotonic() - t0

    def join(self) -> Any:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), f"the call did not end within {WAIT_S} s"
        if self.error is not None:
            raise self.error
        return self.result


class Lockstep:
    """A consumer's caller thread: encrypts and checks the result until stopped, counting
    calls, wrong results and failures. :meth:`pause` parks it between two calls (so none of
    its hardware accesses can take a fault armed meanwhile), :meth:`resume` lets it go on."""

    def __init__(self, proxy: Any, key: bytes) -> None:
        self._proxy, self._key = proxy, key
        self._cond = threading.Condition()
        self._paused = self._parked = self._stopped = False
        self.calls = self.wrong = 0
        self.failures: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._paused and not self._stopped:
                    self._parked = True
                    self._cond.notify_all()
                    self._cond.wait()
                self._parked = False
                if self._stopped:
                    return
            try:
                if encrypt(self._proxy, PLAIN) != tdes_reference(self._key, PLAIN):
                    self.wrong += 1
            except BaseException as exc:
                self.failures.append(exc)
            with self._cond:
                self.calls += 1
                self._cond.notify_all()

    def pause(self) -> None:
        with self._cond:
            self._paused = True
            assert self._cond.wait_for(lambda: self._parked, WAIT_S), "caller never parked"

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def more_calls(self, n: int) -> None:
        """Wait until it made ``n`` more calls."""
        with self._cond:
            target = self.calls + n
            assert self._cond.wait_for(lambda: self.calls >= target, WAIT_S), "no calls"

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "a caller hung"


class Shared:
    """The scene: a framework on the two-region board, the hardware-only service ``sid`` in
    prr0 with tenants ``a`` and ``b`` (proxies), the co-module ``co`` in prr1 with consumer
    ``c``, each proxy keyed."""

    def __init__(self, fw: juggle.Framework, modules: dict[str, Path], placement: str) -> None:
        self.fw = fw
        if placement == "juggle-placed":  # started with no tenant: a juggle places it
            self.sid = self._start(modules["hwonly"])
        fw.add_tenant("A")
        fw.add_tenant("B")
        if placement == "arbitrated":  # started among tenants: their requests place it
            self.sid = self._start(modules["hwonly"])
        assert self._arbiter().arbitrates(self.sid) is (placement == "arbitrated")
        self.co = self._start(modules["comod"])
        fw.juggle(to_hardware=self.co)
        self.a = self._proxy("A", "hwonly")
        self.b = self._proxy("B", "hwonly")
        self.c = self._proxy("calc", "tdes")
        for proxy, key in ((self.a, KEYS[0]), (self.b, KEYS[1]), (self.c, KEYS[2])):
            proxy.load_key(key)
            assert encrypt(proxy, PLAIN) == tdes_reference(key, PLAIN)
        assert self.region("prr0").state == "PROGRAMMED"
        assert self.tier(self.co) == ("hardware", "prr1")

    def _start(self, folder: Path) -> int:
        module = self.fw.install(folder)
        module.start()
        (sid,) = module.service_ids
        return int(sid)

    def _proxy(self, consumer: str, algorithm: str) -> Any:
        return self.fw.get_service(
            "EncryptionService", consumer=consumer, filter=f"(algorithm={algorithm})"
        )

    def _arbiter(self) -> Any:
        return self.fw._arbiter  # the one allocator's shell (no public view of it)

    def region(self, name: str) -> Any:
        return self.fw.fabric.region(name).snapshot()

    def allocator_state(self, name: str) -> str:
        (snap,) = [r for r in self._arbiter().statistics().allocator.regions if r.name == name]
        return str(snap.state)

    def faulted(self) -> dict[str, str]:
        return dict(self._arbiter().statistics().faulted)

    def tier(self, sid: int) -> tuple[str, str | None]:
        (snap,) = [s for s in self.fw.services() if s.service_id == sid]
        return str(snap.tier), snap.region

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        """Until ``condition()`` holds (containment runs in a background thread), at most
        WAIT_S."""
        deadline = time.monotonic() + WAIT_S
        while not condition():
            assert time.monotonic() < deadline, f"never: {what}"
            time.sleep(0.005)

    def contained(self, region: str, sid: int) -> None:
        """Wait until the fault of ``sid`` in ``region`` is contained, whichever thread does
        it: the region quarantined on the fabric (ERROR), in Error for the allocator
        (``TenantArbiter.fault()`` ran: the arbiter lists it as faulted), noted in
        ``fw.faults``."""
        self.wait_for(lambda: self.region(region).state == "ERROR", f"{region} in ERROR")
        self.wait_for(lambda: region in self.faulted(), f"{region} faulted for the arbiter")
        self.wait_for(
            lambda: any(f.startswith(f"{region}: service {sid}:") for f in self.fw.faults),
            f"the fault of {region} noted",
        )
        assert self.region(region).quarantined
        assert self.allocator_state(region) == "Error"

    def arm(self, fault: str) -> None:
        self.fw.fabric.faults.arm(fault)

    def fired(self, fault: str) -> bool:
        return self.fw.fabric.faults.statistics().fired[fault] >= 1


@pytest.fixture(params=PLACEMENTS)
def placement(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def framework(board: Path, *, verify_sample: int = 16) -> juggle.Framework:
    return juggle.Framework(
        board, call_timeout_s=CALL_TIMEOUT_S, drain_timeout_s=30.0, verify_sample=verify_sample
    )


@pytest.mark.parametrize("fault", ["core_hang", "driver_error"])
def test_a_fault_in_the_shared_hardware_only_core_is_contained(
    board: Path, modules: dict[str, Path], placement: str, fault: str
) -> None:
    """Tenant A's call meets the fault: it ends (a hang within the call timeout) raising
    HardwareFaultError naming the service and prr0, and so does tenant B's call, made while
    A's runs; prr0 goes to ERROR, the allocator's region to Error, the fault is listed; the
    co-module's calls go on in prr1 with no failure; recover brings prr0 back: both tenants
    are served by hardware again (the service has no other tier), each with the key it set
    last (A's, set on the core that failed, is rebuilt from its recorded calls)."""
    with framework(board) as fw:
        s = Shared(fw, modules, placement)
        c = Lockstep(s.c, KEYS[2])
        c.more_calls(2)
        c.pause()
        s.a.load_key(KEYS[3])  # A holds the core, with a key its saved context lacks
        assert encrypt(s.a, PLAIN) == tdes_reference(KEYS[3], PLAIN)
        s.arm(fault)
        a = Call(lambda: encrypt(s.a, PLAIN))  # the fault fires in its own call
        s.wait_for(lambda: s.fired(fault), f"{fault} fired")
        b = Call(lambda: encrypt(s.b, PLAIN))
        c.resume()
        named = rf"service {s.sid} \(crypto\.EncryptionService\) failed in region 'prr0'"
        with pytest.raises(HardwareFaultError, match=named) as raised:
            a.join()
        assert (raised.value.service_id, raised.value.region) == (s.sid, "prr0")
        assert a.elapsed < HUNG_CALL_BOUND_S, a.elapsed
        with pytest.raises(HardwareFaultError, match=named):
            b.join()

        s.contained("prr0", s.sid)
        with pytest.raises(HardwareFaultError, match=named):  # until recovered
            encrypt(s.a, PLAIN)
        c.more_calls(3)
        c.stop()
        assert (c.failures, c.wrong) == ([], 0)
        assert s.tier(s.co) == ("hardware", "prr1")
        assert s.region("prr1").state == "PROGRAMMED"

        programs = fw.fabric.statistics().programs
        fw.recover("prr0")
        assert encrypt(s.a, PLAIN) == tdes_reference(KEYS[3], PLAIN)
        assert encrypt(s.b, PLAIN) == tdes_reference(KEYS[1], PLAIN)
        assert encrypt(s.a, PLAIN) == tdes_reference(KEYS[3], PLAIN)
        assert s.region("prr0").state == "PROGRAMMED" and not s.region("prr0").quarantined
        assert fw.fabric.statistics().programs > programs
        assert s.allocator_state("prr0") != "Error" and "prr0" not in s.faulted()


@pytest.mark.parametrize("fault", ["core_hang", "driver_error", "core_garbage"])
def test_a_fault_in_the_co_modules_core_is_contained_beside_the_shared_one(
    board: Path, modules: dict[str, Path], placement: str, fault: str
) -> None:
    """The co-module's call meets the fault (a wrong result caught by checking every call):
    its consumer gets every result right from software, with no failure; prr1 goes to ERROR
    and the allocator's region to Error; both tenants go on being served by hardware in prr0;
    recover puts the co-module back into prr1."""
    with framework(board, verify_sample=1 if fault == "core_garbage" else 16) as fw:
        s = Shared(fw, modules, placement)
        callers = [Lockstep(s.a, KEYS[0]), Lockstep(s.b, KEYS[1])]
        c = Lockstep(s.c, KEYS[2])
        for caller in (*callers, c):
            caller.more_calls(2)
            caller.pause()
        s.arm(fault)
        c.resume()  # the only caller running: its next call takes the fault
        s.wait_for(lambda: s.fired(fault), f"{fault} fired")
        for caller in callers:
            caller.resume()

        s.contained("prr1", s.co)
        assert s.tier(s.co) == ("native", None)  # its home tier serves it now
        for caller in (*callers, c):
            caller.more_calls(3)
            caller.stop()
            assert (caller.failures, caller.wrong) == ([], 0)
        stats = fw.statistics(s.co)
        assert stats.fallbacks + stats.mismatches >= 1
        assert s.region("prr0").state == "PROGRAMMED" and "prr0" not in s.faulted()

        fw.recover("prr1")
        assert s.tier(s.co) == ("hardware", "prr1")
        assert encrypt(s.c, PLAIN) == tdes_reference(KEYS[2], PLAIN)
        assert encrypt(s.a, PLAIN) == tdes_reference(KEYS[0], PLAIN)


def test_a_driver_that_cannot_start_quarantines_the_tenants_region(
    board: Path, modules: dict[str, Path], tmp_path: Path
) -> None:
    """An arbitrated service whose driver's constructor raises: the programming for the
    tenant fails as a fault of the region (wrapped as ModuleCodeError, noted, prr0
    quarantined), and the tenant's call raises HardwareFaultError naming the region and the
    failing driver instead of waiting."""
    code = modules["hwonly"] / "hw_module.py"
    code.write_text(
        code.read_text()
        + "\n\nclass Broken(PatientTdes):\n"
        + "    def __init__(self, mmio):\n"
        + '        raise RuntimeError("driver cannot start")\n'
    )
    toml = modules["hwonly"] / "juggle.toml"
    toml.write_text(toml.read_text().replace("hw_module.PatientTdes", "hw_module.Broken"))
    with framework(board) as fw:
        fw.add_tenant("A")
        module = fw.install(modules["hwonly"])
        module.start()
        (sid,) = module.service_ids
        proxy = fw.get_service("EncryptionService", consumer="A")
        with pytest.raises(HardwareFaultError, match=r"'prr0' \(.*Broken.*cannot start"):
            Call(lambda: proxy.load_key(KEYS[0])).join()
        region = fw.fabric.region("prr0").snapshot()
        assert region.state == "ERROR" and region.quarantined
        assert any(f.startswith(f"prr0: service {sid}:") for f in fw.faults)


class Registers:
    """An MMIO window of 16 registers that remembers what was written."""

    size = 64

    def __init__(self) -> None:
        self.values = [0] * 16

    def read32(self, offset: int) -> int:
        return self.values[offset // 4]

    def write32(self, offset: int, value: int) -> None:
        self.values[offset // 4] = value


def test_a_guarded_window_is_attached_detached_and_cut_for_good() -> None:
    first, second = Registers(), Registers()
    window = GuardedWindow(first, "prr0", 1.0)
    window.write32(4, 7)
    assert first.values[1] == 7 and window.read32(4) == 7 and window.size == 64
    window.detach()  # its core left the region
    with pytest.raises(RegionEmptyError, match="'prr0' is not attached"):
        window.read32(4)
    window.attach(second)
    window.write32(4, 9)
    assert (first.values[1], second.values[1]) == (7, 9)
    window.cut("hung")  # quarantined: off the bus for good
    with pytest.raises(RegionEmptyError, match="cut off by the runtime: hung"):
        window.write32(4, 1)
    with pytest.raises(RegionEmptyError, match="hung"):
        window.attach(first)
    assert (first.values[1], second.values[1]) == (7, 9)
