"""Never wedged, in process (issue 19, item 7).

A juggle whose programming fails leaves its region to the next juggle; a module stopped or
uninstalled while a juggle runs can start again; a juggle whose undo fails too leaves a region
``recover`` clears; the tenancy arbiter forgets uninstalled services. Every test checks the
runtime's own snapshots: each region is EMPTY, ERROR, or holds the design of the service that
serves from it.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sharing_support import KEYS, encrypt, start_tdes, tdes_module, tdes_reference

import juggle
from juggle.errors import JuggleError, ModuleStateError, SanityCheckError
from juggle.services.crypto import TdesDriver

PLAIN = b"sixteen bytes!!!"


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p", drain_timeout_s=2.0, call_timeout_s=0.5)
    yield framework
    framework.close()


def settled(fw: juggle.Framework) -> None:
    """Every region is EMPTY, ERROR, or PROGRAMMED with the design of the service in hardware
    that serves from it; every service in hardware sits in such a region."""
    services = {s.service_id: s for s in fw.services()}
    for region in fw.regions():
        if region.state == "PROGRAMMED":
            assert region.service_id is not None, f"{region.name} holds {region.design}, unserved"
            holder = services[region.service_id]
            assert holder.tier == "hardware" and holder.region == region.name
            assert region.design == "tdes"
        else:
            assert region.state in ("EMPTY", "ERROR"), region
    for s in services.values():
        if s.tier == "hardware":
            assert s.region is not None
            assert fw.fabric.region(s.region).snapshot().state == "PROGRAMMED"


def hardware_calls(fw: juggle.Framework, sid: int) -> int:
    """Calls the service has served from its hardware tier so far."""
    per_tier = fw.statistics(sid).per_tier
    return per_tier["hardware"].calls if "hardware" in per_tier else 0


def served_from_hardware(fw: juggle.Framework, sid: int, proxy: Any, key: bytes) -> None:
    """``sid`` is in hardware, and a call through ``proxy`` is answered right, by hardware."""
    (snap,) = [s for s in fw.services() if s.service_id == sid]
    assert snap.tier == "hardware" and snap.region == "prr0"
    region = fw.fabric.region("prr0").snapshot()
    assert region.state == "PROGRAMMED" and region.design == "tdes"
    before = hardware_calls(fw, sid)
    assert encrypt(proxy, PLAIN) == tdes_reference(key, PLAIN)
    assert hardware_calls(fw, sid) == before + 1


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.005)


# -- a fault while programming: the next juggle is the recovery ---------------------------------


@pytest.mark.parametrize("step", ["config_write", "bridge_enable"])
def test_the_next_juggle_programs_a_region_a_programming_fault_left(
    fw: juggle.Framework, tmp_path: Path, step: str
) -> None:
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[0])
    fw.fabric.faults.arm(step)
    with pytest.raises(JuggleError):
        fw.juggle(to_hardware=sid)
    assert fw.fabric.faults.statistics().fired[step] == 1
    region = fw.fabric.region("prr0").snapshot()
    assert region.state == "ERROR" and not region.quarantined and step in (region.error or "")
    assert fw.services()[0].tier == "native"
    settled(fw)
    report = fw.juggle(to_hardware=sid)  # no recover: programming afresh is the recovery
    assert report.region == "prr0"
    served_from_hardware(fw, sid, proxy, KEYS[0])
    settled(fw)


def test_a_region_quarantined_for_its_core_stays_out_until_recover(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[1])
    fw.juggle(to_hardware=sid)
    fw.fabric.faults.arm("driver_error")  # a bus error: the core's doing, not programming's
    assert encrypt(proxy, PLAIN) == tdes_reference(KEYS[1], PLAIN)  # served by software
    wait_until(lambda: fw.fabric.region("prr0").snapshot().quarantined, "quarantine")
    wait_until(lambda: not fw._supervisor.busy, "the fault contained")
    with pytest.raises(SanityCheckError, match="quarantined"):
        fw.juggle(to_hardware=sid)
    assert fw.fabric.region("prr0").snapshot().state == "ERROR"
    fw.recover("prr0")  # puts the service back
    served_from_hardware(fw, sid, proxy, KEYS[1])


# -- module.stop() / uninstall while a juggle runs ------------------------------------------------


class SpyLock:
    """The framework's juggle lock, noting which threads came to take it (a test's eyes on
    'this thread now waits for the juggle')."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.takers: set[int] = set()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self.takers.add(threading.get_ident())
        return bool(self._inner.acquire(blocking, timeout))

    def release(self) -> None:
        self._inner.release()

    def __enter__(self) -> SpyLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Worker(threading.Thread):
    """Runs ``fn`` once, keeping its result or its exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self._fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._fn()
        except BaseException as exc:
            self.error = exc


def held_driver(inside: threading.Event, go: threading.Event) -> type:
    """A TDES driver whose constructor (in the middle of a juggle into hardware: the region
    is programmed, the proxies not yet switched) waits for ``go``."""

    class HeldDriver(TdesDriver):
        def __init__(self, mmio: Any) -> None:
            inside.set()
            assert go.wait(30), "the test never let the juggle go on"
            super().__init__(mmio)

    return HeldDriver


@pytest.mark.parametrize("how", ["stop", "uninstall"])
def test_a_module_stopped_during_a_juggle_starts_again(
    fw: juggle.Framework, tmp_path: Path, how: str
) -> None:
    folder = tdes_module(tmp_path, per_consumer=True)
    module = fw.install(folder)
    module.start()
    (sid,) = module.service_ids
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[2])
    inside, go = threading.Event(), threading.Event()
    managed = fw._table.managed(sid)
    assert managed.hardware is not None
    managed.hardware.driver = held_driver(inside, go)
    spy = SpyLock(fw._juggler.lock)
    fw._juggler.lock = spy  # type: ignore[assignment]
    juggling = Worker(lambda: fw.juggle(to_hardware=sid))
    juggling.start()
    try:
        assert inside.wait(10), "the juggle never reached the driver"
        assert fw.fabric.region("prr0").snapshot().state == "PROGRAMMED"  # mid-juggle
        stopping = Worker(module.stop if how == "stop" else module.uninstall)
        stopping.start()
        # the stop either waits for the juggle (takes its lock) or has run through it
        wait_until(
            lambda: stopping.ident in spy.takers or not stopping.is_alive(), "stop under way"
        )
    finally:
        go.set()
    juggling.join(30)
    stopping.join(30)
    assert not juggling.is_alive() and not stopping.is_alive()
    assert stopping.error is None, stopping.error
    assert juggling.error is None, juggling.error  # the juggle ended, then the stop
    assert fw.services() == ()
    assert [r.state for r in fw.regions()] == ["EMPTY"]  # the stop took it out again
    settled(fw)
    assert fw._juggler.arbiter.statistics().services == {}
    assert fw._juggler.arbiter._services == {} and fw._juggler.arbiter._gates == {}
    if how == "uninstall":
        module = fw.install(folder)
    module.start()  # once: "device name 'tdes' appears twice"
    (sid,) = module.service_ids
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[2])
    fw.juggle(to_hardware=sid)
    served_from_hardware(fw, sid, proxy, KEYS[2])
    settled(fw)


def test_stopping_a_module_from_inside_its_own_juggle_is_refused(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    """A driver (or any hook a juggle runs) that stops its module mid-juggle gets a
    ModuleStateError; the juggle goes on and the module stays active."""
    folder = tdes_module(tmp_path, per_consumer=False)
    module = fw.install(folder)
    module.start()
    (sid,) = module.service_ids
    refused: list[BaseException] = []

    class StoppingDriver(TdesDriver):
        def __init__(self, mmio: Any) -> None:
            try:
                module.stop()
            except ModuleStateError as exc:
                refused.append(exc)
            super().__init__(mmio)

    managed = fw._table.managed(sid)
    assert managed.hardware is not None
    managed.hardware.driver = StoppingDriver
    fw.juggle(to_hardware=sid)
    assert len(refused) == 1 and "inside a juggle" in str(refused[0])
    assert module.state.value == "active"
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[3])
    served_from_hardware(fw, sid, proxy, KEYS[3])
    module.stop()  # from here, outside the juggle: fine
    assert [r.state for r in fw.regions()] == ["EMPTY"]


# -- a swap whose undo fails too --------------------------------------------------------------


def two_services(fw: juggle.Framework, tmp_path: Path) -> tuple[int, int, Any, Any]:
    """Two TDES co-modules (a, b) competing for prr0; their ids and a proxy of each."""
    a = fw.install(tdes_module(tmp_path, per_consumer=False, name="ta"))
    b = fw.install(tdes_module(tmp_path, per_consumer=False, name="tb"))
    a.start()
    b.start()
    (sa,), (sb,) = a.service_ids, b.service_ids
    proxies = {sid: fw.registry.get_service(sid, "app") for sid in (sa, sb)}
    return sa, sb, proxies[sa], proxies[sb]


@pytest.mark.parametrize(
    ("step", "count", "after"),
    [
        ("bridge_disable", 2, "EMPTY"),  # the sequence; the stale design is unloaded
        ("bridge_disable", 3, "ERROR"),  # ... and even unloading it fails: discarded
        ("config_write", 2, "ERROR"),  # the old design overwritten, the undo's write fails
    ],
)
def test_a_failed_rollback_leaves_a_region_recover_clears(
    fw: juggle.Framework, tmp_path: Path, step: str, count: int, after: str
) -> None:
    sa, sb, pa, pb = two_services(fw, tmp_path)
    pa.load_key(KEYS[4])
    pb.load_key(KEYS[5])
    fw.juggle(to_hardware=sa)
    fw.fabric.faults.arm(step, count)
    with pytest.raises(JuggleError):
        fw.juggle(to_hardware=sb, to_software=[sa])
    steps = fw.fabric.faults.statistics()
    assert steps.fired[step] == count and steps.armed[step] == 0  # the undo failed as well
    tiers = {s.service_id: s.tier for s in fw.services()}
    assert tiers == {sa: "native", sb: "native"}  # both serve, from software
    region = fw.fabric.region("prr0").snapshot()
    assert region.state == after and not region.quarantined
    settled(fw)
    (booked,) = fw._juggler.arbiter.statistics().allocator.regions
    assert booked.state == "Idle" and booked.client is None  # the allocator agrees: free
    assert encrypt(pa, PLAIN) == tdes_reference(KEYS[4], PLAIN)
    assert encrypt(pb, PLAIN) == tdes_reference(KEYS[5], PLAIN)
    assert fw.recover("prr0") is None  # not ERROR-only: any region nobody serves from
    assert fw.fabric.region("prr0").snapshot().state == "EMPTY"
    fw.juggle(to_hardware=sa)
    served_from_hardware(fw, sa, pa, KEYS[4])
    fw.juggle(to_hardware=sb, to_software=[sa])  # the swap works now
    served_from_hardware(fw, sb, pb, KEYS[5])
    assert encrypt(pa, PLAIN) == tdes_reference(KEYS[4], PLAIN)
    settled(fw)


def test_recover_refuses_a_region_a_service_serves_from(
    fw: juggle.Framework, tmp_path: Path
) -> None:
    sid = start_tdes(fw, tmp_path, per_consumer=False)
    proxy = fw.get_service("EncryptionService", consumer="app")
    proxy.load_key(KEYS[0])
    fw.juggle(to_hardware=sid)
    with pytest.raises(SanityCheckError, match=f"serves service {sid} "):
        fw.recover("prr0")
    served_from_hardware(fw, sid, proxy, KEYS[0])  # nothing changed
    fw.juggle(to_software=[sid])
    assert fw.recover("prr0") is None  # EMPTY now: nothing to do, nothing refused
    assert fw.fabric.region("prr0").snapshot().state == "EMPTY"


# -- the arbiter forgets uninstalled services -------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_install_uninstall_cycles_keep_memory_flat(tmp_path: Path) -> None:
    folder = tdes_module(tmp_path, per_consumer=False)
    with juggle.Framework("xupv2p") as fw:

        def cycles(n: int) -> None:
            for _ in range(n):
                module = fw.install(folder)
                module.start()
                module.uninstall()

        cycles(50)  # warm up: caches, interned names, allocator arenas
        gc.collect()
        before = _rss_bytes()
        cycles(500)
        gc.collect()
        growth = _rss_bytes() - before
        arbiter = fw._juggler.arbiter
        assert arbiter._services == {} and arbiter._by_device == {}
        assert arbiter._unindexed == {} and arbiter._gates == {}
        assert arbiter.statistics().allocator.regions[0].design is None
        assert growth < 10 * 2**20, f"RSS grew {growth / 2**20:.1f} MiB in 500 cycles"
