"""Tracing through the framework: per service, per consumer, per tier; rate; snapshots."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import juggle
from juggle.core.controllers.base import StatsSnapshot
from juggle.runtime.tracing import RateWindow

MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"


@pytest.fixture
def fw() -> Iterator[juggle.Framework]:
    framework = juggle.Framework("xupv2p")
    framework.install(MODULES / "math").start()
    yield framework
    framework.close()


def test_per_consumer_and_tier(fw: juggle.Framework) -> None:
    a = fw.get_service("AddService", consumer="a")
    b = fw.get_service("math.AddService", consumer="b")
    assert a.service_id == b.service_id and a is not b
    assert fw.get_service("AddService", consumer="a") is a  # one proxy per consumer
    for i in range(30):
        a.add(i, 1)
    fw.juggle(to_hardware=a.service_id)
    for i in range(20):
        b.add(i, 2)
    st = fw.statistics(a.service_id)
    assert st.total.calls == 50 and st.total.errors == 0
    assert st.per_consumer["a"].calls == 30 and st.per_consumer["b"].calls == 20
    assert st.per_tier["software"].calls == 30 and st.per_tier["hardware"].calls == 20
    assert st.per_method["add"].calls == 50
    assert 0 < st.total.p50_us <= st.total.p99_us
    assert st.rate_per_s > 0 and st.inflight == 0
    assert st.tier == "hardware"


def test_errors_counted(fw: juggle.Framework) -> None:
    a = fw.get_service("AddService", consumer="a")
    with pytest.raises(juggle.ServiceArgumentError):
        a.add(2**40, 1)
    assert fw.statistics(a.service_id).total.errors == 1


def test_snapshot_for_controllers(fw: juggle.Framework) -> None:
    add = fw.get_service("AddService", consumer="calc")
    mul = fw.get_service("MulService", consumer="calc")
    for i in range(10):
        add.add(i, i)
    mul.mul(3, 3)
    fw.set_foreground("calc")  # no controller: only recorded
    snap = fw.snapshot()
    assert isinstance(snap, StatsSnapshot) and snap.foreground == "calc"
    entry = snap.service(add.service_id)
    assert entry is not None and entry.calls == 10 and entry.per_consumer == {"calc": 10}
    assert entry.hardware_capable and entry.tier == "software"
    assert [r.name for r in snap.regions] == ["prr0"]
    assert sum(s.share for s in snap.services) == pytest.approx(1.0)


def test_unget_makes_proxy_stale_but_keeps_counts(fw: juggle.Framework) -> None:
    add = fw.get_service("AddService", consumer="tmp")
    add.add(1, 1)
    assert fw.unget_service(add)
    with pytest.raises(juggle.ServiceUnavailableError):
        add.add(1, 1)
    stats = fw.statistics(add.service_id)
    assert "tmp" not in stats.per_consumer  # folded: memory does not grow per consumer
    assert stats.per_consumer["(released)"].calls == 1  # counts kept
    assert stats.total.calls == 1


def test_counts_survive_many_juggles_and_drained_rows_stay_bounded(fw: juggle.Framework) -> None:
    """A juggle keeps the drained slots' rows and folds them later: no call is lost across
    more juggles than a proxy keeps rows for, and the kept rows stay bounded."""
    from juggle.runtime.proxy import FOLD_AFTER, binding_of

    a = fw.get_service("AddService", consumer="a")
    expected = {"software": 0, "hardware": 0}
    for round_ in range(FOLD_AFTER + 7):
        tier = "hardware" if round_ % 2 == 0 else "software"
        if tier == "hardware":
            fw.juggle(to_hardware=a.service_id)
        else:
            fw.juggle(to_software=[a.service_id])
        for i in range(round_ % 3 + 1):
            a.add(i, 1)
        expected[tier] += round_ % 3 + 1
        assert len(binding_of(a).unfolded) < FOLD_AFTER
    st = fw.statistics(a.service_id)
    assert {t: st.per_tier[t].calls for t in expected} == expected
    assert st.total.calls == sum(expected.values())


def test_one_consumers_figures(fw: juggle.Framework) -> None:
    """``statistics(sid, consumer)``: only that consumer's calls through the proxy it holds,
    with the service's own hardware figures; a consumer holding no proxy gets zeros."""
    a = fw.get_service("AddService", consumer="a")
    b = fw.get_service("AddService", consumer="b")
    sid = a.service_id
    for i in range(30):
        a.add(i, 1)
    fw.juggle(to_hardware=sid)
    for i in range(20):
        b.add(i, 2)
    a.add(1, 1)
    mine = fw.statistics(sid, consumer="a")
    full = fw.statistics(sid)
    assert mine.total.calls == 31 and full.total.calls == 51
    assert list(mine.per_consumer) == ["a"] and mine.per_consumer["a"].calls == 31
    assert {t: s.calls for t, s in mine.per_tier.items()} == {"software": 30, "hardware": 1}
    assert mine.per_method["add"].calls == 31
    assert mine.tier == full.tier == "hardware" and mine.rate_per_s > 0
    assert mine.hardware_modeled_mean_us == full.hardware_modeled_mean_us is not None
    assert (mine.fallbacks, mine.verified, mine.mismatches) == (
        full.fallbacks,
        full.verified,
        full.mismatches,
    )
    for nobody in ("nobody", "(released)"):
        none = fw.statistics(sid, consumer=nobody)
        assert none.total.calls == 0 and none.rate_per_s == 0.0 and none.inflight == 0
        assert none.per_consumer == {} and none.per_tier == {} and none.per_method == {}
    assert fw.unget_service(b)
    gone = fw.statistics(sid, consumer="b")  # its calls are the released ones now
    assert gone.total.calls == 0 and gone.per_consumer == {}
    assert fw.statistics(sid).per_consumer["(released)"].calls == 20


def test_one_consumers_calls_in_flight(fw: juggle.Framework) -> None:
    """The in-flight count with ``consumer`` is that of its own proxy."""
    entered, release = threading.Event(), threading.Event()

    class Blocking:
        def add(self, a: int, b: int) -> int:
            entered.set()
            assert release.wait(30), "the test never released the call"
            return a + b

    sid = fw.register_service("math.AddService", Blocking(), ranking=10)
    a = fw.get_service("AddService", consumer="a")
    b = fw.get_service("AddService", consumer="b")
    assert a.service_id == b.service_id == sid
    caller = threading.Thread(target=a.add, args=(1, 2))
    caller.start()
    try:
        assert entered.wait(10), "the call never started"
        assert fw.statistics(sid, consumer="a").inflight == 1
        assert fw.statistics(sid, consumer="b").inflight == 0
        assert fw.statistics(sid).inflight == 1
    finally:
        release.set()
        caller.join(10)
    assert fw.statistics(sid, consumer="a").inflight == 0


def test_rate_window_counts_since_the_newest_reading_a_window_old() -> None:
    """The windowed rate rule every statistics() rate uses (service, or consumer)."""
    window = RateWindow(started=100.0)
    assert window.rate(10, now=100.5) == pytest.approx(20.0)  # younger than a window: since start
    assert window.rate(20, now=101.0) == pytest.approx(20.0)  # 100.5 is not a window old yet
    assert window.rate(30, now=101.6) == pytest.approx((30 - 10) / 1.1)  # since 100.5
    assert window.rate(30, now=101.6) == pytest.approx((30 - 10) / 1.1)  # 101.0: 0.6 s old
    assert RateWindow(started=5.0).rate(0, now=5.0) == 0.0  # no span yet


def test_one_consumers_rate_counts_from_its_own_proxy(fw: juggle.Framework) -> None:
    """A consumer's rate is its calls over the time since it took its proxy (bounded on both
    sides by clock readings around the steps), not over the service's lifetime."""
    x = fw.get_service("AddService", consumer="x")
    for i in range(500):
        x.add(i, 1)
    before = time.monotonic()
    a = fw.get_service("AddService", consumer="a")
    after = time.monotonic()
    for i in range(31):
        a.add(i, 1)
    asked = time.monotonic()
    rate = fw.statistics(a.service_id, consumer="a").rate_per_s
    answered = time.monotonic()
    assert 31 / (answered - before) <= rate <= 31 / (asked - after)
