"""Bounded memory and a real close (issue 9, item 6): the juggle history is a ring, released
consumers fold into per-service totals, diagnostic logs are bounded, and a closed framework
refuses every method."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sharing_support import MODULES, encrypt

import juggle
from juggle.errors import ConfigurationError, FrameworkClosedError

ADD_MODULE = MODULES / "math"


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p", history_capacity=8)
    yield framework
    framework.close()


def _rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _tdes(fw: juggle.Framework) -> int:
    fw.install(MODULES / "tdes").start()
    (snap,) = fw.services()
    return snap.service_id


def test_history_is_a_ring_of_the_newest_juggles(fw: juggle.Framework) -> None:
    sid = _tdes(fw)
    for _ in range(10):
        fw.juggle(to_hardware=sid)
        fw.juggle(to_software=[sid])
    history = fw.history()
    assert len(history) == 8 and fw.juggle_count == 20
    assert history[-1].to_software == (sid,) and history[-2].to_hardware == sid
    assert fw.history(limit=3) == history[-3:]
    assert fw.history(limit=0) == ()
    assert fw.reconfiguration_ms_total == pytest.approx(
        10 * history[-2].reconfiguration_ms, rel=1e-9
    )
    with pytest.raises(ConfigurationError, match="-1"):
        fw.history(limit=-1)


def test_history_capacity_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="history_capacity.*0"):
        juggle.Framework("xupv2p", history_capacity=0)


def test_released_consumers_fold_into_one_total(fw: juggle.Framework) -> None:
    sid = _tdes(fw)
    for i in range(50):
        proxy = fw.get_service("EncryptionService", consumer=f"c{i}")
        proxy.load_key(bytes(range(24)))
        encrypt(proxy, bytes(8))
        fw.unget_service(proxy)
    stats = fw.statistics(sid)
    assert list(stats.per_consumer) == ["(released)"]
    assert stats.per_consumer["(released)"].calls == 100
    assert fw.services()[0].consumers == ()


def test_controller_errors_and_faults_are_bounded(fw: juggle.Framework) -> None:
    assert fw.controller_errors.maxlen == fw.faults.maxlen == 100


def test_ten_thousand_juggles_and_five_thousand_consumers_stay_in_bounded_memory() -> None:
    with juggle.Framework("xupv2p") as fw:
        sid = _tdes(fw)

        def churn(juggles: int, consumers: int, base: int) -> None:
            for _ in range(juggles // 2):
                fw.juggle(to_hardware=sid)
                fw.juggle(to_software=[sid])
            for i in range(consumers):
                proxy = fw.get_service("EncryptionService", consumer=f"app{base + i}")
                if i == 0:
                    proxy.load_key(bytes(range(24)))
                    encrypt(proxy, bytes(8))
                fw.unget_service(proxy)

        fw.get_service("EncryptionService", consumer="keeper").load_key(bytes(range(24)))
        churn(1_000, 500, 0)  # warm up: the ring fills, caches settle
        gc.collect()
        before = _rss_bytes()
        churn(10_000, 5_000, 1_000)
        gc.collect()
        growth = _rss_bytes() - before
        assert fw.juggle_count == 11_000 and len(fw.history()) == 1_000
        assert growth < 20 * 2**20, f"RSS grew {growth / 2**20:.1f} MiB"


def _calls(fw: juggle.Framework, module: Any) -> list[tuple[str, Callable[[], object]]]:
    return [
        ("install", lambda: fw.install(ADD_MODULE)),
        ("module", lambda: fw.module(1)),
        ("modules", fw.modules),
        ("start", module.start),
        ("register_service", lambda: fw.register_service("math.AddService", object())),
        ("get_service", lambda: fw.get_service("AddService")),
        ("services", fw.services),
        ("regions", fw.regions),
        ("statistics", lambda: fw.statistics(1)),
        ("juggle", lambda: fw.juggle(to_hardware=1)),
        ("recover", lambda: fw.recover("prr0")),
        ("set_tier", lambda: fw.set_tier(1, "software")),
        ("add_tenant", lambda: fw.add_tenant("alice")),
        ("tenants", fw.tenants),
        ("signals", lambda: fw.signals("alice")),
        ("set_foreground", lambda: fw.set_foreground("mail")),
        ("set_controller", lambda: fw.set_controller(None)),
        ("snapshot", fw.snapshot),
        ("control", fw.control),
        ("start_control_loop", fw.start_control_loop),
        ("history", fw.history),
    ]


@pytest.mark.parametrize("use_with", [False, True])
def test_a_closed_framework_refuses_every_method(use_with: bool, tmp_path: Path) -> None:
    if use_with:
        with juggle.Framework("xupv2p") as fw:
            module = fw.install(ADD_MODULE)
    else:
        fw = juggle.Framework("xupv2p")
        module = fw.install(ADD_MODULE)
        fw.close()
    fw.close()  # again: nothing happens
    for name, call in _calls(fw, module):
        with pytest.raises(FrameworkClosedError, match="closed"):
            call()
        assert name
    assert fw.fabric.regions()  # snapshots of the released fabric still read
    with pytest.raises(juggle.errors.FabricError):
        fw.fabric.window("prr0")
