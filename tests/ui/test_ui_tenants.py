"""The dashboard's tenants: the tenants API, tenant and region-holder series in ``/metrics``
(parsed with prometheus_client's parser), the server-side chart history (a ring buffer filled
through its public API with a clock of the test's own, no sleeping), the tenant signals heard
with their times, juggle times, and no demo controls unless asked for."""

from __future__ import annotations

import importlib
import shutil
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from ui_support import MODULES, tenant_call

import juggle
from juggle.dashboard.app import create_app, live_sample
from juggle.dashboard.history import LiveHistory
from juggle.dashboard.tenants import region_holders, tenant_rows
from juggle.errors import ConfigurationError

with warnings.catch_warnings():  # starlette warns about the httpx it still uses
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

WAIT_S = 10.0


class FakeClock:
    """A clock the test moves: ``now`` seconds, advanced by :meth:`tick`."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float = 1.0) -> float:
        self.now += seconds
        return self.now


def history_of(fw: juggle.Framework, clock: FakeClock, **options: Any) -> LiveHistory:
    return LiveHistory(fw, live_sample, clock=clock, wall_clock=lambda: 1_800_000_000.25, **options)


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(text: str, name: str, **labels: str) -> float:
    """The value of the sample ``name`` with exactly ``labels`` in the exposition ``text``."""
    found = [
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name and s.labels == labels
    ]
    assert len(found) == 1, (name, labels, found)
    return float(found[0])


# -- the ring buffer ----------------------------------------------------------------------------


def test_history_keeps_the_last_span_in_a_bounded_ring(tenants_fw: juggle.Framework) -> None:
    clock = FakeClock(100.0)
    history = history_of(tenants_fw, clock, period_s=1.0, span_s=10.0)
    for _ in range(25):
        clock.tick()
        assert history.sample() is not None
    kept = history.samples()
    assert len(history) == len(kept) == 11  # ceil(10 / 1) + 1: ten intervals
    assert [s["time_s"] for s in kept] == [115.0 + i for i in range(11)]
    assert [s["time_s"] for s in history.samples(after=123.0)] == [124.0, 125.0]
    assert history.sample() is None  # the clock did not move: nothing kept
    assert len(history) == 11 and history.samples()[-1]["time_s"] == 125.0
    clock.tick(30.0)  # a gap longer than the span: the older samples are out of it
    history.sample()
    assert [s["time_s"] for s in history.samples()] == [155.0]
    for _ in range(40):  # sampled faster than the period: the count bound holds memory
        clock.tick(0.25)
        history.sample()
    assert len(history) == 11 and history.samples()[0]["time_s"] == 162.5


def test_history_samples_carry_calls_and_tenant_holders(tenants_fw: juggle.Framework) -> None:
    clock = FakeClock(0.0)
    history = history_of(tenants_fw, clock)
    history.sample()
    tenant_call(tenants_fw, "alice", 3)
    clock.tick()
    second = history.sample()
    assert second is not None
    assert second["services"] == [
        {
            "service_id": 1,
            "interface": "crypto.EncryptionService",
            "tier": "hardware",
            "calls": {"hardware": 4},
        }
    ]
    (region,) = second["regions"]
    assert (region["holder"], region["tenant"], region["device"]) == ("tenant", "alice", "tdes")
    assert region["label"] == "alice: tdes" and region["service_id"] is None
    first = history.samples()[0]
    assert first["regions"][0]["holder"] is None and first["regions"][0]["label"] == "empty"


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"period_s": 0}, 0),
        ({"period_s": -1.0}, -1.0),
        ({"period_s": True}, True),
        ({"span_s": float("inf")}, float("inf")),
        ({"span_s": "600"}, "600"),
        ({"period_s": 5.0, "span_s": 1.0}, 1.0),
    ],
)
def test_history_refuses_a_bad_period_or_span(
    tenants_fw: juggle.Framework, options: dict[str, Any], shown: object
) -> None:
    with pytest.raises(ConfigurationError, match="period_s|span_s") as caught:
        LiveHistory(tenants_fw, live_sample, **options)
    assert caught.value.value == shown


def test_the_sampling_thread_runs_while_the_app_runs(tenants_fw: juggle.Framework) -> None:
    sampled = threading.Event()

    def sampler(fw: juggle.Framework, time_s: float) -> dict[str, Any]:
        taken = live_sample(fw, time_s)
        sampled.set()
        return taken

    history = LiveHistory(tenants_fw, sampler)
    assert not history.running
    with TestClient(create_app(tenants_fw, history=history)):
        assert history.running
        assert sampled.wait(WAIT_S), "the history never sampled"
        assert len(history) >= 1
    assert not history.running  # the app's shutdown stopped it
    # ... and stopped listening: a later signal is not heard
    heard = len(history.events())
    tenant_call(tenants_fw, "bob")
    assert len(history.events()) == heard


# -- tenant signals with their times -------------------------------------------------------------


def test_signals_are_heard_with_times_and_left_for_the_tenant(
    tenants_fw: juggle.Framework,
) -> None:
    history = history_of(tenants_fw, FakeClock(0.0))
    client = TestClient(create_app(tenants_fw, history=history))
    tenant_call(tenants_fw, "alice")
    events = client.get("/api/tenants/events").json()
    assert events["kinds"] == {"at_us": "measured", "time": "measured"}
    assert [(e["kind"], e["tenant"], e["device"], e["service_id"]) for e in events["events"]] == [
        ("wait", "alice", "tdes", 1),
        ("ready", "alice", "tdes", 1),
    ]
    assert {e["time"] for e in events["events"]} == {1_800_000_000.25}
    assert events["events"][0]["at_us"] < events["events"][1]["at_us"]
    assert len(tenants_fw.signals("alice")) == 2  # heard, not read: the tenant still has them
    assert len(client.get("/api/tenants/events", params={"limit": 1}).json()["events"]) == 1
    assert client.get("/api/tenants/events", params={"limit": 0}).status_code == 422


GATE_CODE = '''
"""The first call through pass_through() after arm() waits until release is set."""
import threading

entered = threading.Event()
release = threading.Event()
armed = False


def arm():
    global armed
    entered.clear()
    release.clear()
    armed = True


def pass_through():
    global armed
    if armed:
        armed = False
        entered.set()
        release.wait(30)
'''

DRIVER_CODE = """
import dashboard_gate
from juggle.services.crypto import TdesDriver


class HeldTdes(TdesDriver):
    def encrypt(self, buf, size):
        done = super().encrypt(buf, size)
        dashboard_gate.pass_through()  # the core is done, the call still runs (region Busy)
        return done
"""


@pytest.fixture
def held_tdes(tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """A hardware-only TDES whose driver can hold a call in the middle, and its gate."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "dashboard_gate.py").write_text(GATE_CODE)
    sys.path.insert(0, str(lib))
    importlib.invalidate_caches()
    gate = importlib.import_module("dashboard_gate")
    folder = tmp_path / "tdesheld"
    folder.mkdir()
    shutil.copy(MODULES / "tdes" / "bitstreams" / "tdes_prr0.bit", folder / "core.bit")
    (folder / "dashheld.py").write_text(DRIVER_CODE)
    (folder / "juggle.toml").write_text(
        '[module]\nname = "tdesheld"\nversion = "1.0.0"\n\n[[services]]\n'
        'interfaces = ["crypto.EncryptionService"]\nproperties = { algorithm = "tdes" }\n\n'
        '[services.hardware]\ndriver = "dashheld.HeldTdes"\nbitstreams = { prr0 = "core.bit" }\n'
    )
    try:
        yield folder, gate
    finally:
        gate.release.set()
        sys.path.remove(str(lib))
        sys.modules.pop("dashboard_gate", None)


def test_a_preemption_is_listed_with_its_time_and_counted(
    held_tdes: tuple[Path, Any],
) -> None:
    folder, gate = held_tdes
    with juggle.Framework(fabric="xupv2p") as fw:
        fw.add_tenant("low", priority=0)
        fw.add_tenant("high", priority=2)
        fw.install(folder).start()
        history = history_of(fw, FakeClock(0.0))
        client = TestClient(create_app(fw, history=history))
        low = fw.get_service("EncryptionService", consumer="low")
        high = fw.get_service("EncryptionService", consumer="high")
        low.load_key(bytes(range(24)))
        gate.arm()
        buf = bytearray(16)
        running = threading.Thread(target=low.encrypt, args=(buf, 16), daemon=True)
        running.start()
        assert gate.entered.wait(WAIT_S), "the low call never reached the driver"
        waiting = threading.Thread(target=high.load_key, args=(bytes(24),), daemon=True)
        waiting.start()
        assert fw.signals("low").wait_for("preempt", timeout=WAIT_S) is not None
        gate.release.set()
        running.join(WAIT_S)
        waiting.join(WAIT_S)
        assert not running.is_alive() and not waiting.is_alive()

        events = client.get("/api/tenants/events").json()["events"]
        preempts = [e for e in events if e["kind"] == "preempt"]
        assert [(e["tenant"], e["device"], e["time"]) for e in preempts] == [
            ("low", "tdes", 1_800_000_000.25)
        ]
        assert any(e["kind"] == "wait" and e["tenant"] == "high" for e in events)
        rows = {t["name"]: t for t in client.get("/api/tenants").json()["tenants"]}
        assert (rows["low"]["preemptions"], rows["high"]["preemptions"]) == (1, 0)
        assert rows["high"]["holds"] == ["prr0"] and rows["low"]["holds"] == []
        text = client.get("/metrics").text
        assert value(text, "juggle_tenant_preemptions_total", tenant="low", device="tdes") == 1
        assert value(text, "juggle_tenant_preemptions_total", tenant="high", device="tdes") == 0
        assert value(text, "juggle_tenant_waits_total", tenant="high", device="tdes") == 1


# -- the tenants API and /metrics ----------------------------------------------------------------


def test_tenants_endpoint_rows(tenants_fw: juggle.Framework) -> None:
    client = TestClient(create_app(tenants_fw))
    tenant_call(tenants_fw, "alice", 2)
    tenant_call(tenants_fw, "bob", 4)
    tenants_fw.install(MODULES / "audio").start()  # not arbitrated: it has a software tier
    decoder = tenants_fw.get_service("DecoderService", consumer="alice")
    decoder.decode(b"\x00\x11\x22")
    body = client.get("/api/tenants").json()
    assert body["kinds"]["calls"] == "measured" and body["kinds"]["priority"] == "input"
    alice, bob = body["tenants"]
    assert (alice["name"], alice["priority"], alice["realtime"], alice["model"]) == (
        "alice",
        0,
        False,
        "native",
    )
    # the key, then the encryptions; alice's decode counts too (every service)
    assert (alice["calls"], bob["calls"]) == (4, 5)
    # alice waited for the first programming; bob may have waited for alice's hold to end
    # (the arbiter's hysteresis, in wall-clock time): the figures are the arbiter's counters
    assert alice["waits"] >= 1
    counters = {t.name: sum(d.waits for d in t.devices) for t in tenants_fw.tenants()}
    assert counters == {"alice": alice["waits"], "bob": bob["waits"]}
    assert bob["holds"] == ["prr0"] and alice["holds"] == []  # bob came last and stays
    assert [d["device"] for d in bob["devices"]] == ["tdes", "adpcm"]  # a device a service
    device = bob["devices"][0]
    assert (device["device"], device["state"], device["region"], device["calls"]) == (
        "tdes",
        "connected",
        "prr0",
        5,
    )
    assert tenant_rows(tenants_fw) == body["tenants"]
    (held,) = region_holders(tenants_fw)
    assert (held["holder"], held["label"]) == ("tenant", "bob: tdes")


def test_metrics_expose_tenant_series(tenants_fw: juggle.Framework) -> None:
    client = TestClient(create_app(tenants_fw))
    empty = client.get("/metrics").text
    assert value(empty, "juggle_tenant_calls_total", tenant="alice") == 0
    tenant_call(tenants_fw, "alice", 2)
    tenant_call(tenants_fw, "bob", 4)
    text = client.get("/metrics").text
    got = families(text)
    assert got["juggle_tenant_calls"].type == "counter"
    assert got["juggle_tenant_waits"].type == "counter"
    assert got["juggle_tenant_preemptions"].type == "counter"
    assert got["juggle_tenant_unread_signals"].type == "gauge"
    assert got["juggle_tenant_priority"].type == "gauge"
    # the text format shows a state set and an info family as gauges
    assert got["juggle_tenant_device_state"].type == "gauge"
    assert got["juggle_region_holder_info"].type == "gauge"
    assert value(text, "juggle_tenant_calls_total", tenant="alice") == 3
    assert value(text, "juggle_tenant_calls_total", tenant="bob") == 5
    devices = {(t.name, d.device): d for t in tenants_fw.tenants() for d in t.devices}
    for tenant in ("alice", "bob"):  # the arbiter's counters, whatever its hold made them
        device = devices[(tenant, "tdes")]
        waits = value(text, "juggle_tenant_waits_total", tenant=tenant, device="tdes")
        assert waits == device.waits
        preempted = value(text, "juggle_tenant_preemptions_total", tenant=tenant, device="tdes")
        assert preempted == device.preemptions
    assert value(text, "juggle_tenant_waits_total", tenant="alice", device="tdes") >= 1
    assert value(text, "juggle_tenant_priority", tenant="bob") == 2
    unread = {t.name: t.unread_signals for t in tenants_fw.tenants()}
    assert value(text, "juggle_tenant_unread_signals", tenant="alice") == unread["alice"] >= 2
    for state, expected in (("connected", 1), ("disconnected", 0), ("waiting", 0)):
        labels = {"tenant": "bob", "device": "tdes", "juggle_tenant_device_state": state}
        assert value(text, "juggle_tenant_device_state", **labels) == expected
    holder = {"region": "prr0", "holder": "tenant", "tenant": "bob", "device": "tdes"}
    assert value(text, "juggle_region_holder_info", **holder, service="", module="") == 1


def test_a_juggle_placed_service_holds_its_region(framework: juggle.Framework) -> None:
    client = TestClient(create_app(framework))
    assert client.post("/api/juggle", json={"to_hardware": 1}).status_code == 200
    text = client.get("/metrics").text
    labels = {"region": "prr0", "holder": "service", "tenant": "", "device": ""}
    assert value(text, "juggle_region_holder_info", **labels, service="1", module="tdes") == 1
    assert client.get("/api/tenants").json()["tenants"] == []


# -- history over HTTP, juggle times, demo controls ----------------------------------------------


def test_history_endpoint_serves_samples_from_before(tenants_fw: juggle.Framework) -> None:
    clock = FakeClock(50.0)
    history = history_of(tenants_fw, clock, span_s=30.0)
    for n in range(5):
        tenant_call(tenants_fw, "alice", n)
        clock.tick()
        history.sample()
    client = TestClient(create_app(tenants_fw, history=history))
    body = client.get("/api/history").json()
    assert (body["period_s"], body["span_s"]) == (1.0, 30.0)
    assert body["kinds"]["services.*.calls"] == "measured"
    times = [s["time_s"] for s in body["samples"]]
    assert times == [51.0, 52.0, 53.0, 54.0, 55.0]
    calls = [s["services"][0]["calls"]["hardware"] for s in body["samples"]]
    assert calls == [1, 3, 6, 10, 15]  # 1 + n calls a turn
    later = client.get("/api/history", params={"after": 53.0}).json()["samples"]
    assert [s["time_s"] for s in later] == [54.0, 55.0]
    assert client.get("/api/view").json() == {
        "demo_controls": False,
        "history": {"period_s": 1.0, "span_s": 30.0},
    }


def test_juggles_carry_their_number_and_the_time_they_were_seen(
    framework: juggle.Framework,
) -> None:
    clock = FakeClock(0.0)
    history = history_of(framework, clock)
    client = TestClient(create_app(framework, history=history))
    history.sample()
    framework.juggle(to_hardware=1)
    clock.tick()
    history.sample()
    framework.juggle(to_software=[1])  # made after the last sample: not seen yet
    rows = client.get("/api/juggles").json()
    assert [(j["number"], j["seen_at"]) for j in rows] == [(1, 1_800_000_000.25), (2, None)]
    assert rows[0]["kinds"]["seen_at"] == "measured"


def test_no_demo_controls_unless_asked_for(framework: juggle.Framework) -> None:
    plain = TestClient(create_app(framework))
    assert plain.get("/api/view").json()["demo_controls"] is False
    assert plain.get("/api/workload").status_code == 404
    assert plain.post("/api/workload", json={"on": True}).status_code == 404
    page = plain.get("/").text
    assert '<div id="demo-controls" hidden>' in page  # shown only when /api/view says so
    for needle in ('<table id="tenants"', '<table id="tenant-events"', "/api/history"):
        assert needle in page
    demo = TestClient(create_app(framework, demo_controls=True))
    assert demo.get("/api/view").json()["demo_controls"] is True
    assert demo.get("/api/workload").json()["running"] is False
