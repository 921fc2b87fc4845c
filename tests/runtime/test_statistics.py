"""Tracing through the framework: per service, per consumer, per tier; rate; snapshots."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import juggle
from juggle.core.controllers.base import StatsSnapshot

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
