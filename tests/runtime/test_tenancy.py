"""Tenants contend live for the fabric through the Ker-ONE allocator (issue 3, item 9).

Two hardware-only modules (TDES and DES, whose drivers come from juggle's crypto service) share
the single region of the xupv2p board. Their drivers pass through a one-shot gate after the
core computed, so a test can hold one tenant's call in the middle (its region Busy) and make
another tenant ask for the region then: preemption, WAIT/READY and blocking become
deterministic, with events and no sleeps. Only the public API is used: Framework, add_tenant,
get_service, calls, signals, tenants.
"""

from __future__ import annotations

import importlib
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from Crypto.Cipher import DES, DES3

import juggle
from juggle.errors import (
    DeviceWaitTimeoutError,
    DuplicateTenantError,
    InvalidConsumerError,
    NotATenantError,
    PriorityError,
    ProgrammingModelError,
    SanityCheckError,
    ServiceFactoryError,
    ServiceUnavailableError,
    TenancyError,
    UnknownTenantError,
    WaitSignal,
)

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "examples" / "modules"
WAIT_S = 10.0

K_LOW = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
K_HIGH = bytes.fromhex("FEDCBA9876543210A1B2C3D4E5F60718293A4B5C6D7E8F90")
K_DES = bytes.fromhex("133457799BBCDFF1")
PLAIN = b"juggle! tenancy."  # two blocks

GATE_CODE = '''
"""A one-shot gate: the first call through it after arm() waits until release is set."""
import threading


class Gate:
    def __init__(self):
        self.entered = threading.Event()
        self.release = threading.Event()
        self._armed = False
        self._lock = threading.Lock()

    def arm(self):
        self.entered.clear()
        self.release.clear()
        with self._lock:
            self._armed = True

    def pass_through(self):
        with self._lock:
            armed, self._armed = self._armed, False
        if armed:
            self.entered.set()
            if not self.release.wait(30):
                raise RuntimeError("gate never released")


GATE = Gate()
'''

DRIVER_CODE = """
from juggle.services.crypto import {cls}
from tenancy_gate import GATE


class Gated({cls}):
    def encrypt(self, buf, size):
        done = super().encrypt(buf, size)
        GATE.pass_through()  # the core is done; the call is still running (region Busy)
        return done


class Forgetful(Gated):  # a TDES driver without context routines: its state is replayed
    save_context = None
    restore_context = None
"""

DESCRIPTOR = """
[module]
name = "{name}"
version = "1.0.0"

[[services]]
interfaces = ["crypto.EncryptionService"]
properties = {{ algorithm = "{algorithm}" }}

[services.hardware]
driver = "gated.{driver}"
bitstreams = {{ prr0 = "core.bit" }}
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The gate helper on sys.path and two hardware-only modules (tdes, des) on disk."""
    root = tmp_path_factory.mktemp("tenancy")
    lib = root / "lib"
    lib.mkdir()
    (lib / "tenancy_gate.py").write_text(GATE_CODE)
    sys.path.insert(0, str(lib))
    importlib.invalidate_caches()
    gate_module: ModuleType = importlib.import_module("tenancy_gate")
    paths = {}
    for name, algorithm, cls, driver in (
        ("tdeshw", "tdes", "TdesDriver", "Gated"),
        ("deshw", "des", "DesDriver", "Gated"),
        ("forgetful", "tdes", "TdesDriver", "Forgetful"),
    ):
        folder = root / name
        folder.mkdir()
        shutil.copy(
            MODULES / algorithm / "bitstreams" / f"{algorithm}_prr0.bit", folder / "core.bit"
        )
        (folder / "gated.py").write_text(DRIVER_CODE.format(cls=cls))
        descriptor = DESCRIPTOR.format(name=name, algorithm=algorithm, driver=driver)
        (folder / "juggle.toml").write_text(descriptor)
        paths[name] = folder
    yield {"gate": gate_module.GATE, **paths}
    sys.path.remove(str(lib))


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p")
    yield framework
    framework.close()


@pytest.fixture
def gate(library: dict[str, Any]) -> Iterator[Any]:
    gate = library["gate"]
    yield gate
    gate.release.set()  # never leave a test's call hanging


def tdes(key: bytes, data: bytes = PLAIN) -> bytes:
    return bytes(DES3.new(key, DES3.MODE_ECB).encrypt(data))


def des(key: bytes, data: bytes = PLAIN) -> bytes:
    return bytes(DES.new(key, DES.MODE_ECB).encrypt(data))


def encrypt(proxy: Any, data: bytes = PLAIN) -> bytes:
    buf = bytearray(data)
    assert proxy.encrypt(buf, len(buf)) == len(buf)
    return bytes(buf)


class Call:
    """A call made in a thread; ``join`` returns its result or raises what it raised."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:
            self.error = exc

    def join(self) -> Any:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "call did not complete"
        if self.error is not None:
            raise self.error
        return self.result


def start(fw: juggle.Framework, library: dict[str, Any], name: str) -> int:
    module = fw.install(library[name])
    module.start()
    (snapshot,) = [s for s in fw.services() if s.module == module.name]
    return snapshot.service_id


def service(fw: juggle.Framework, algorithm: str, tenant: str) -> Any:
    return fw.get_service("EncryptionService", consumer=tenant, filter=f"(algorithm={algorithm})")


def device(fw: juggle.Framework, tenant: str, name: str) -> Any:
    (snapshot,) = [t for t in fw.tenants() if t.name == tenant]
    (dev,) = [d for d in snapshot.devices if d.device == name]
    return dev


def kinds(fw: juggle.Framework, tenant: str) -> list[str]:
    return [s.kind for s in fw.signals(tenant).drain()]


def hold_in_the_middle(gate: Any, fn: Callable[[], Any]) -> Call:
    """Start ``fn`` in a thread and return once it is inside the driver, past the core."""
    gate.arm()
    call = Call(fn)
    assert gate.entered.wait(WAIT_S), "the call never reached the driver"
    return call


# -- preemption and context restore --------------------------------------------------------------


def test_higher_priority_preempts_at_the_call_end_and_contexts_come_back(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    fw.add_tenant("low", priority=0)
    fw.add_tenant("high", priority=2)
    sid = start(fw, library, "tdeshw")
    low, high = service(fw, "tdes", "low"), service(fw, "tdes", "high")
    assert low.service_id == high.service_id == sid

    low.load_key(K_LOW)  # native: blocks through the first reconfiguration, then runs
    assert kinds(fw, "low") == ["wait", "ready"]
    running = hold_in_the_middle(gate, lambda: encrypt(low))

    waiting = Call(lambda: high.load_key(K_HIGH))
    assert fw.signals("high").wait_for("wait", timeout=WAIT_S) is not None
    assert fw.signals("low").wait_for("preempt", timeout=WAIT_S) is not None
    assert waiting.thread.is_alive()  # native: blocked until the low call reaches its end
    assert device(fw, "low", "tdes").running and device(fw, "high", "tdes").state == "pending"

    gate.release.set()
    assert running.join() == tdes(K_LOW)  # the preempted call itself completed
    waiting.join()
    assert fw.signals("high").wait_for("ready", timeout=WAIT_S) is not None
    assert device(fw, "low", "tdes").state == "disconnected"
    assert device(fw, "low", "tdes").context_bytes > 0  # saved by the core's own routine
    assert encrypt(high) == tdes(K_HIGH)

    # the low tenant never reloads its key: its context is restored into the core
    assert encrypt(low) == tdes(K_LOW)
    assert encrypt(high) == tdes(K_HIGH)
    assert encrypt(low) == tdes(K_LOW)
    assert device(fw, "low", "tdes").preemptions == 1
    assert device(fw, "high", "tdes").preemptions == 0
    assert fw.fabric.statistics().programs == 1  # context switches, no reprogramming


def test_context_survives_the_region_being_reprogrammed_by_another_tenant(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    fw.add_tenant("low", priority=0)
    fw.add_tenant("high", realtime=True)
    start(fw, library, "tdeshw")
    start(fw, library, "deshw")
    low, high = service(fw, "tdes", "low"), service(fw, "des", "high")

    low.load_key(K_LOW)
    running = hold_in_the_middle(gate, lambda: encrypt(low))
    waiting = Call(lambda: high.load_key(K_DES))  # des needs the region reprogrammed
    assert fw.signals("low").wait_for("preempt", timeout=WAIT_S) is not None
    gate.release.set()
    assert running.join() == tdes(K_LOW)
    waiting.join()
    assert fw.regions()[0].design == "des"
    assert encrypt(high) == des(K_DES)

    assert encrypt(low) == tdes(K_LOW)  # tdes loaded again, then the low context restored
    assert fw.regions()[0].design == "tdes"
    assert encrypt(high) == des(K_DES)
    assert encrypt(low) == tdes(K_LOW)
    assert fw.fabric.statistics().programs == 5  # tdes, des, tdes, des, tdes


def test_a_core_without_a_save_routine_gets_its_state_replayed(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    fw.add_tenant("low", priority=0)
    fw.add_tenant("high", priority=2)
    start(fw, library, "forgetful")
    low, high = service(fw, "tdes", "low"), service(fw, "tdes", "high")
    low.load_key(K_LOW)
    running = hold_in_the_middle(gate, lambda: encrypt(low))
    waiting = Call(lambda: high.load_key(K_HIGH))
    assert fw.signals("low").wait_for("preempt", timeout=WAIT_S) is not None
    gate.release.set()
    assert running.join() == tdes(K_LOW)
    waiting.join()
    assert encrypt(high) == tdes(K_HIGH)
    assert device(fw, "low", "tdes").context_bytes == 0  # nothing saved: the key is replayed
    assert encrypt(low) == tdes(K_LOW)
    assert encrypt(high) == tdes(K_HIGH)


def test_a_service_started_later_joins_the_index_keeping_contexts_and_requests(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    fw.add_tenant("rt", realtime=True)
    fw.add_tenant("app", priority=1, model="aware")
    start(fw, library, "tdeshw")
    rt, app = service(fw, "tdes", "rt"), service(fw, "tdes", "app")
    rt.load_key(K_HIGH)
    running = hold_in_the_middle(gate, lambda: encrypt(rt))
    with pytest.raises(WaitSignal):
        app.load_key(K_LOW)
    starting = Call(lambda: start(fw, library, "deshw"))  # a device added while a call runs
    gate.release.set()
    assert running.join() == tdes(K_HIGH)
    starting.join()
    assert [t.devices[-1].device for t in fw.tenants()] == ["des", "des"]
    assert fw.signals("app").wait_for("ready", timeout=WAIT_S) is not None
    app.load_key(K_LOW)  # no WAIT: the region still holds tdes, loaded by the arbiter
    assert encrypt(app) == tdes(K_LOW)
    assert device(fw, "rt", "tdes").context_bytes > 0  # saved when app took the region
    assert encrypt(rt) == tdes(K_HIGH)
    des_rt = service(fw, "des", "rt")
    des_rt.load_key(K_DES)
    assert encrypt(des_rt) == des(K_DES)
    assert encrypt(rt) == tdes(K_HIGH)


class Adder:
    """A caller thread adding through a proxy until stopped; counts calls, wrong results and
    failures (any exception reaching the consumer)."""

    def __init__(self, proxy: Any) -> None:
        self.proxy = proxy
        self.calls = self.wrong = self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            try:
                if self.proxy.add(i, 40) != i + 40:
                    self.wrong += 1
            except Exception:
                self.failed += 1
            self.calls += 1

    def join(self) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()


def wait_until(predicate: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def region_holder(fw: juggle.Framework) -> int | None:
    return fw.regions()[0].service_id


def test_a_lower_priority_tenants_co_module_is_preempted_to_software_then_comes_back(
    fw: juggle.Framework, library: dict[str, Any]
) -> None:
    fw.add_tenant("low", priority=0)
    fw.add_tenant("high", priority=2)
    fw.install(MODULES / "math").start()
    add = fw.get_service("math.AddService", consumer="low")  # low's co-module
    fw.juggle(to_hardware=add.service_id)
    assert region_holder(fw) == add.service_id
    caller = Adder(add)
    start(fw, library, "tdeshw")  # hardware-only, started among tenants: arbitrated
    high = service(fw, "tdes", "high")
    high.load_key(K_HIGH)  # prr0 holds low's adder (priority 0 < 2): preempted, not waited for
    assert encrypt(high) == tdes(K_HIGH)
    assert fw.signals("low").wait_for("preempt", timeout=WAIT_S) is not None
    moves = [j for j in fw.history() if j.steps and j.steps[0] == "preempted by a tenant"]
    assert moves and all(m.to_software == (add.service_id,) for m in moves)  # one per call
    # high's call is over: the region goes back to the waiting co-module, and low hears READY
    assert fw.signals("low").wait_for("ready", timeout=WAIT_S) is not None
    assert wait_until(lambda: region_holder(fw) == add.service_id)
    assert fw.regions()[0].design == "adder"
    caller.join()
    assert caller.calls > 0 and caller.failed == 0 and caller.wrong == 0
    (math,) = [s for s in fw.services() if s.service_id == add.service_id]
    assert math.tier == "hardware"
    assert encrypt(high) == tdes(K_HIGH)  # and high can take it again


def test_equal_priorities_leave_a_co_module_in_place(
    fw: juggle.Framework, library: dict[str, Any]
) -> None:
    fw.add_tenant("a", priority=1)
    fw.add_tenant("b", priority=1, model="aware")
    fw.install(MODULES / "math").start()
    add = fw.get_service("math.AddService", consumer="a")
    fw.juggle(to_hardware=add.service_id)
    start(fw, library, "tdeshw")
    b = service(fw, "tdes", "b")
    with pytest.raises(WaitSignal):
        b.load_key(K_LOW)  # same priority as the co-module's tenant: b waits
    assert region_holder(fw) == add.service_id
    assert fw.signals("a").drain() == ()
    fw.juggle(to_software=[add.service_id])  # a controller frees the region: b is served
    assert fw.signals("b").wait_for("ready", timeout=WAIT_S) is not None
    b.load_key(K_LOW)
    assert encrypt(b) == tdes(K_LOW)


def test_a_real_time_tenants_co_module_is_never_preempted(
    fw: juggle.Framework, library: dict[str, Any]
) -> None:
    fw.add_tenant("rt", realtime=True)
    fw.add_tenant("high", priority=2, model="aware")
    fw.install(MODULES / "math").start()
    add = fw.get_service("math.AddService", consumer="rt")
    fw.juggle(to_hardware=add.service_id)
    start(fw, library, "tdeshw")
    with pytest.raises(WaitSignal):
        service(fw, "tdes", "high").load_key(K_LOW)
    assert region_holder(fw) == add.service_id


def test_a_co_module_follows_its_tenants_new_standing(
    fw: juggle.Framework, library: dict[str, Any]
) -> None:
    """The co-module a tenant uses holds its region with that tenant's standing, as the
    policy says now: made real-time, it is not preempted; lowered back, it is."""
    fw.add_tenant("a", priority=1)
    fw.add_tenant("high", priority=2, model="aware")
    fw.install(MODULES / "math").start()
    add = fw.get_service("math.AddService", consumer="a")
    fw.juggle(to_hardware=add.service_id)
    start(fw, library, "tdeshw")
    fw.set_tenant("a", realtime=True)
    high = service(fw, "tdes", "high")
    with pytest.raises(WaitSignal):
        high.load_key(K_HIGH)  # 2 < real-time: high waits
    assert region_holder(fw) == add.service_id
    assert device(fw, "high", "tdes").state == "waiting"  # queued, not preempting
    assert kinds(fw, "a") == []
    fw.set_tenant("a", priority=0)  # now below the waiting request: preempted to software
    assert fw.signals("a").wait_for("preempt", timeout=WAIT_S) is not None
    assert fw.signals("high").wait_for("ready", timeout=WAIT_S) is not None
    high.load_key(K_HIGH)  # served in prr0 (then the co-module takes it back)
    assert add.add(2, 3) == 5


def test_a_co_module_no_tenant_uses_yields_to_any_tenant_and_juggles_see_the_holder(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    fw.add_tenant("t")
    fw.install(MODULES / "math").start()
    add = fw.get_service("math.AddService", consumer="calc")  # no tenant: a co-module
    fw.juggle(to_hardware=add.service_id)
    assert add.add(2, 40) == 42 and region_holder(fw) == add.service_id
    start(fw, library, "tdeshw")
    t = service(fw, "tdes", "t")
    t.load_key(K_LOW)  # the adder moves to software at its consistency point
    running = hold_in_the_middle(gate, lambda: encrypt(t))
    (math,) = [s for s in fw.services() if s.service_id == add.service_id]
    assert (math.tier, math.region) == ("software", None)
    assert add.add(2, 40) == 42  # served on, in software
    with pytest.raises(SanityCheckError, match="held by tenant 't'"):
        fw.juggle(to_hardware=add.service_id)
    gate.release.set()
    assert running.join() == tdes(K_LOW)
    assert wait_until(lambda: region_holder(fw) == add.service_id)  # back once t is done
    assert add.add(2, 40) == 42


# -- programming models --------------------------------------------------------------------------


def test_aware_tenant_gets_wait_then_ready_and_a_realtime_call_is_never_preempted(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    fw.add_tenant("rt", realtime=True)
    fw.add_tenant("app", priority=2, model="aware")
    sid = start(fw, library, "tdeshw")
    rt, app = service(fw, "tdes", "rt"), service(fw, "tdes", "app")
    rt.load_key(K_HIGH)
    running = hold_in_the_middle(gate, lambda: encrypt(rt))

    with pytest.raises(WaitSignal) as waited:
        app.load_key(K_LOW)  # returns at once: the region is busy and cannot be preempted
    assert (waited.value.tenant, waited.value.device) == ("app", "tdes")
    assert waited.value.service_id == sid
    wait = fw.signals("app").get(timeout=WAIT_S)
    assert wait is not None and (wait.kind, wait.service_id) == ("wait", sid)
    with pytest.raises(WaitSignal):  # still queued: asking again changes nothing
        app.load_key(K_LOW)
    assert fw.signals("app").get(timeout=0) is None  # no READY yet, no second WAIT
    assert device(fw, "app", "tdes").state == "waiting"

    gate.release.set()
    assert running.join() == tdes(K_HIGH)
    ready = fw.signals("app").wait_for("ready", timeout=WAIT_S)
    assert ready is not None and ready.service_id == sid
    app.load_key(K_LOW)
    assert encrypt(app) == tdes(K_LOW)
    assert "preempt" not in kinds(fw, "rt")
    assert encrypt(rt) == tdes(K_HIGH)  # its context came back too


def test_native_tenant_blocks_behind_a_realtime_call_then_completes(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    fw.add_tenant("rt", realtime=True)
    fw.add_tenant("batch", priority=1)
    start(fw, library, "tdeshw")
    rt, batch = service(fw, "tdes", "rt"), service(fw, "tdes", "batch")
    rt.load_key(K_HIGH)
    batch_thread_keyed = threading.Event()

    def batch_work() -> bytes:
        batch.load_key(K_LOW)
        batch_thread_keyed.set()
        return encrypt(batch)

    running = hold_in_the_middle(gate, lambda: encrypt(rt))
    blocked = Call(batch_work)
    assert fw.signals("batch").wait_for("wait", timeout=WAIT_S) is not None
    assert blocked.thread.is_alive() and not batch_thread_keyed.is_set()
    gate.release.set()
    assert running.join() == tdes(K_HIGH)
    assert blocked.join() == tdes(K_LOW)
    assert "preempt" not in kinds(fw, "rt")


def test_a_native_wait_is_bounded_and_withdraws_its_request(
    library: dict[str, Any], gate: Any
) -> None:
    with juggle.Framework("xupv2p", drain_timeout_s=0.3) as fw:
        fw.add_tenant("rt", realtime=True)
        fw.add_tenant("batch")
        start(fw, library, "tdeshw")
        rt, batch = service(fw, "tdes", "rt"), service(fw, "tdes", "batch")
        rt.load_key(K_HIGH)
        running = hold_in_the_middle(gate, lambda: encrypt(rt))
        with pytest.raises(DeviceWaitTimeoutError, match="batch/tdes"):
            batch.load_key(K_LOW)
        assert device(fw, "batch", "tdes").state == "disconnected"  # no longer queued
        gate.release.set()
        assert running.join() == tdes(K_HIGH)
        batch.load_key(K_LOW)
        assert encrypt(batch) == tdes(K_LOW)


def b_waits_behind_a(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> tuple[Any, Any, Call, Call]:
    """Tenants a and b of equal priority: a's call held in the core, b's load_key waiting
    (b heard WAIT). Returns both proxies and both calls."""
    fw.add_tenant("a", priority=1)
    fw.add_tenant("b", priority=1)
    start(fw, library, "tdeshw")
    a, b = service(fw, "tdes", "a"), service(fw, "tdes", "b")
    a.load_key(K_LOW)
    kinds(fw, "a")
    running = hold_in_the_middle(gate, lambda: encrypt(a))
    waiting = Call(lambda: b.load_key(K_HIGH))
    assert fw.signals("b").wait_for("wait", timeout=WAIT_S) is not None
    return a, b, running, waiting


def test_equal_priorities_never_preempt(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    a, b, running, waiting = b_waits_behind_a(fw, library, gate)
    assert kinds(fw, "a") == []  # a PREEMPT would have come with b's WAIT
    assert device(fw, "b", "tdes").state == "waiting"  # queued, not preempting
    gate.release.set()
    assert running.join() == tdes(K_LOW)
    waiting.join()
    assert encrypt(b) == tdes(K_HIGH)
    assert encrypt(a) == tdes(K_LOW)
    assert device(fw, "a", "tdes").preemptions == device(fw, "b", "tdes").preemptions == 0


def test_a_waiting_tenant_raised_by_set_tenant_preempts_the_running_one(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    """A reloaded policy takes effect where the tenants stand: b waits behind a (equal
    priority) until b's priority is raised; then a gets PREEMPT, finishes its call, and b
    runs; a's model changed to aware, so its next call raises WaitSignal instead of
    blocking."""
    a, b, running, waiting = b_waits_behind_a(fw, library, gate)
    assert kinds(fw, "a") == []  # equal priorities: no preemption yet
    snap = fw.set_tenant("b", priority=2)
    assert (snap.name, snap.priority, snap.model) == ("b", 2, "native")
    assert fw.signals("a").wait_for("preempt", timeout=WAIT_S) is not None
    fw.set_tenant("a", priority=1, model="aware")
    gate.release.set()
    assert running.join() == tdes(K_LOW)  # the preempted call itself completed
    waiting.join()
    assert encrypt(b) == tdes(K_HIGH)
    assert device(fw, "a", "tdes").preemptions == 1
    b_running = hold_in_the_middle(gate, lambda: encrypt(b))
    with pytest.raises(WaitSignal):  # aware now: told to wait, not blocked
        encrypt(a)
    gate.release.set()
    assert b_running.join() == tdes(K_HIGH)
    assert fw.signals("a").wait_for("ready", timeout=WAIT_S) is not None
    assert encrypt(a) == tdes(K_LOW)  # its context came back
    (ta,) = [t for t in fw.tenants() if t.name == "a"]
    assert (ta.priority, ta.model) == (1, "aware")


def test_set_tenant_refuses_bad_changes_and_changes_nothing(fw: juggle.Framework) -> None:
    fw.add_tenant("ok", priority=1)
    before = fw.tenants()
    bad: list[tuple[type[Exception], Callable[[], Any]]] = [
        (UnknownTenantError, lambda: fw.set_tenant("ghost", priority=1)),
        (PriorityError, lambda: fw.set_tenant("ok", priority=3)),
        (PriorityError, lambda: fw.set_tenant("ok", realtime=True, priority=0)),
        (PriorityError, lambda: fw.set_tenant("ok", priority=True)),
        (ProgrammingModelError, lambda: fw.set_tenant("ok", model="lazy")),
        (InvalidConsumerError, lambda: fw.set_tenant("")),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
        assert fw.tenants() == before


# -- the public surface and bad input ------------------------------------------------------------


def test_tenant_snapshots_and_listeners(fw: juggle.Framework, library: dict[str, Any]) -> None:
    assert fw.tenants() == ()
    fw.add_tenant("t", priority=1, model="aware")
    seen: list[str] = []
    undo = fw.signals("t").listen(lambda s: seen.append(s.kind))
    sid = start(fw, library, "tdeshw")
    t = service(fw, "tdes", "t")
    with pytest.raises(WaitSignal):
        t.load_key(K_LOW)  # the core must be loaded first
    assert fw.signals("t").wait_for("ready", timeout=WAIT_S) is not None
    t.load_key(K_LOW)
    assert encrypt(t) == tdes(K_LOW)
    assert seen == ["wait", "ready"]
    undo()
    (snap,) = fw.tenants()
    assert (snap.name, snap.priority, snap.realtime, snap.model) == ("t", 1, False, "aware")
    (dev,) = snap.devices
    assert (dev.device, dev.service_id, dev.state, dev.region) == ("tdes", sid, "connected", "prr0")
    assert dev.calls == 2 and dev.waits == 1


def test_bad_tenants_are_refused_and_change_nothing(fw: juggle.Framework) -> None:
    with pytest.raises(UnknownTenantError, match="ghost"):
        fw.signals("ghost")
    with pytest.raises(PriorityError, match="0..2"):
        fw.add_tenant("x", priority=3)
    assert fw.tenants() == ()  # a refused first tenant does not even turn tenancy on
    fw.add_tenant("ok")
    before = fw.tenants()
    bad: list[tuple[type[Exception], Callable[[], Any]]] = [
        (PriorityError, lambda: fw.add_tenant("x", priority=-1)),
        (PriorityError, lambda: fw.add_tenant("x", priority=3)),
        (PriorityError, lambda: fw.add_tenant("x", realtime=True, priority=1)),
        (PriorityError, lambda: fw.add_tenant("x", priority=True)),
        (ProgrammingModelError, lambda: fw.add_tenant("x", model="lazy")),
        (InvalidConsumerError, lambda: fw.add_tenant("")),
        (DuplicateTenantError, lambda: fw.add_tenant("ok", priority=1)),
        (UnknownTenantError, lambda: fw.signals("ghost")),
        (TenancyError, lambda: fw.signals("ok").wait_for("go", timeout=0)),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
        assert fw.tenants() == before


def test_arbitrated_service_refuses_strangers_and_juggles(
    fw: juggle.Framework, library: dict[str, Any]
) -> None:
    fw.add_tenant("member")
    sid = start(fw, library, "tdeshw")
    with pytest.raises(ServiceFactoryError) as refused:
        service(fw, "tdes", "stranger")
    assert isinstance(refused.value.__cause__, NotATenantError)
    with pytest.raises(SanityCheckError, match="arbitrated"):
        fw.juggle(to_software=[sid])
    member = service(fw, "tdes", "member")
    member.load_key(K_LOW)
    assert encrypt(member) == tdes(K_LOW)
    fw.module("tdeshw").stop()
    with pytest.raises(ServiceUnavailableError):
        encrypt(member)


def test_many_tenants_hammering_two_designs_all_get_right_results(
    fw: juggle.Framework, library: dict[str, Any]
) -> None:
    tenants = {
        "rt": {"realtime": True},
        "g2": {"priority": 2},
        "g1": {"priority": 1, "model": "aware"},
        "g1n": {"priority": 1},
        "g0": {"priority": 0, "model": "aware"},
    }
    for name, options in tenants.items():
        fw.add_tenant(name, **options)
    start(fw, library, "tdeshw")
    start(fw, library, "deshw")

    def work(name: str, index: int) -> int:
        algorithm, reference = ("tdes", tdes) if index % 2 == 0 else ("des", des)
        key = bytes((index * 37 + i * 11) & 0xFF for i in range(24 if algorithm == "tdes" else 8))
        proxy = service(fw, algorithm, name)

        def call(fn: Callable[[], Any]) -> Any:
            while True:  # an aware tenant waits for READY and calls again
                try:
                    return fn()
                except WaitSignal:
                    assert fw.signals(name).wait_for("ready", timeout=WAIT_S) is not None

        call(lambda: proxy.load_key(key))
        right = 0
        for block in range(20):
            data = bytes((block * 13 + i) & 0xFF for i in range(16))
            right += call(lambda data=data: encrypt(proxy, data)) == reference(key, data)
        return right

    calls = [Call(lambda n=n, i=i: work(n, i)) for i, n in enumerate(tenants)]
    assert [c.join() for c in calls] == [20] * len(tenants)
    assert all(d.state != "waiting" for t in fw.tenants() for d in t.devices)


def test_a_profile_with_devices_indexes_them_for_every_tenant() -> None:
    with juggle.Framework("zedboard") as zed:
        zed.add_tenant("vm1", realtime=True)
        zed.add_tenant("vm2", priority=2, model="aware")
        for tenant in zed.tenants():
            assert [d.device for d in tenant.devices] == ["qam16", "qam64", "fft512", "fft1024"]
            assert {(d.state, d.region, d.service_id) for d in tenant.devices} == {
                ("disconnected", None, None)
            }
        assert [(t.priority, t.realtime) for t in zed.tenants()] == [(3, True), (2, False)]


def test_a_tenant_giving_the_service_back_frees_its_region_and_forgets_its_state(
    fw: juggle.Framework, library: dict[str, Any], gate: Any
) -> None:
    """(issue 11: a client that dies releases what it held) Given back while idle, the region
    goes at once; given back during a call, when the call ends; the state goes with it."""
    fw.add_tenant("low", priority=0)
    fw.add_tenant("high", priority=0)
    start(fw, library, "tdeshw")
    low = service(fw, "tdes", "low")
    low.load_key(K_LOW)
    assert encrypt(low) == tdes(K_LOW)
    assert device(fw, "low", "tdes").state == "connected"
    running = hold_in_the_middle(gate, lambda: encrypt(low))
    fw.unget_service(low)  # during the call: it ends first
    assert device(fw, "low", "tdes").state == "connected"
    gate.release.set()
    assert running.join() == tdes(K_LOW)
    assert device(fw, "low", "tdes").state == "disconnected"
    high = service(fw, "tdes", "high")  # equal priority: it gets the region only if it is free
    high.load_key(K_HIGH)
    assert encrypt(high) == tdes(K_HIGH) and device(fw, "high", "tdes").state == "connected"
    again = service(fw, "tdes", "low")
    with pytest.raises(juggle.errors.KeyNotLoadedError):  # a fresh device: no key of before
        Call(lambda: encrypt(again)).join()
