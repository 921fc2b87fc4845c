"""The dashboard app through FastAPI's TestClient: every endpoint, its errors, and /metrics."""

from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

import juggle
from juggle.core.controllers.base import JuggleAction, StatsSnapshot
from juggle.dashboard.app import create_app, to_json

with warnings.catch_warnings():  # starlette warns about the httpx it still uses
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


@pytest.fixture
def client(framework: juggle.Framework) -> Iterator[TestClient]:
    with TestClient(create_app(framework)) as test_client:
        yield test_client


def make_calls(framework: juggle.Framework, consumer: str, count: int) -> None:
    enc = framework.get_service("EncryptionService", consumer=consumer)
    enc.load_key(bytes(range(24)))
    buf = bytearray(b"8 bytes!" * 2)
    for _ in range(count):
        enc.encrypt(buf, len(buf))


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_services_regions_modules(client: TestClient) -> None:
    services = client.get("/api/services").json()
    assert [(s["service_id"], s["interface"], s["tier"]) for s in services] == [
        (1, "crypto.EncryptionService", "native")
    ]
    assert services[0]["tiers"] == ["software", "native", "hardware"]
    assert services[0]["properties"]["algorithm"] == "tdes"
    regions = client.get("/api/regions").json()
    assert regions == [
        {
            "name": "prr0",
            "state": "EMPTY",
            "module": None,
            "service_id": None,
            "design": None,
            "resources": {"slices": 2240, "flipflops": 4480, "mult18": 20, "ram16": 20},
        }
    ]
    modules = client.get("/api/modules").json()
    assert [(m["module_id"], m["name"], m["state"], m["services"]) for m in modules] == [
        (1, "tdes", "active", [1])
    ]


def test_statistics_are_measured_and_unknown_ids_are_404(
    framework: juggle.Framework, client: TestClient
) -> None:
    make_calls(framework, "mail", 5)
    stats = client.get("/api/services/1/statistics").json()
    assert stats["kind"] == "measured"
    assert stats["total"]["calls"] == 6
    assert stats["per_consumer"]["mail"]["calls"] == 6
    assert stats["per_method"]["encrypt"]["calls"] == 5
    assert stats["per_tier"]["native"]["calls"] == 6
    missing = client.get("/api/services/77/statistics")
    assert missing.status_code == 404
    assert missing.json() == {
        "error": "no service with id 77",
        "type": "UnknownServiceError",
        "service_id": 77,
        "value": None,
    }
    bad = client.get("/api/services/x/statistics")
    assert bad.status_code == 422
    assert "'x'" in bad.json()["error"]


def test_statistics_of_one_consumer_are_its_calls_only(
    framework: juggle.Framework, client: TestClient
) -> None:
    """``?consumer=`` reduces the figures to that consumer's calls (the framework's
    per-consumer statistics, as the daemon gives a tenant); a consumer holding no proxy has
    none; the service-wide figures still count everybody."""
    make_calls(framework, "mail", 5)
    make_calls(framework, "web", 2)
    mail = client.get("/api/services/1/statistics", params={"consumer": "mail"}).json()
    assert mail["kind"] == "measured"
    assert mail["total"]["calls"] == 6
    assert list(mail["per_consumer"]) == ["mail"]
    assert mail["per_method"]["encrypt"]["calls"] == 5
    assert mail["per_tier"]["native"]["calls"] == 6
    web = client.get("/api/services/1/statistics", params={"consumer": "web"}).json()
    assert web["total"]["calls"] == 3 and list(web["per_consumer"]) == ["web"]
    nobody = client.get("/api/services/1/statistics", params={"consumer": "ftp"}).json()
    assert nobody["total"]["calls"] == 0 and nobody["per_consumer"] == {}
    everybody = client.get("/api/services/1/statistics").json()
    assert everybody["total"]["calls"] == 9
    assert sorted(everybody["per_consumer"]) == ["mail", "web"]
    empty = client.get("/api/services/1/statistics", params={"consumer": ""})
    assert empty.status_code == 422


def test_juggle_in_and_out_with_labeled_figures(client: TestClient) -> None:
    response = client.post("/api/juggle", json={"to_hardware": 1})
    assert response.status_code == 200
    report = response.json()
    assert report["region"] == "prr0"
    assert report["tiers"] == {"1": "hardware"}
    assert report["reconfiguration_ms"] > 0
    assert report["kinds"] == {
        "reconfiguration_ms": "calibrated",
        "bridge_ms": "input",
        "overhead_us": "measured",
    }
    region = client.get("/api/regions").json()[0]
    assert (region["state"], region["service_id"], region["module"]) == ("PROGRAMMED", 1, "tdes")
    back = client.post("/api/juggle", json={"to_software": [1]})
    assert back.status_code == 200 and back.json()["tiers"] == {"1": "native"}
    assert client.get("/api/regions").json()[0]["state"] == "EMPTY"
    history = client.get("/api/juggles").json()
    assert [(j["to_hardware"], j["to_software"]) for j in history] == [(1, []), (None, [1])]


def test_juggle_errors_are_400_409_and_422(
    framework: juggle.Framework, client: TestClient, des_path: Path
) -> None:
    framework.install(des_path).start()
    unknown = client.post("/api/juggle", json={"to_hardware": 99})
    assert unknown.status_code == 400
    assert unknown.json()["error"] == "no service with id 99"
    not_in_hw = client.post("/api/juggle", json={"to_software": [1]})
    assert not_in_hw.status_code == 409
    assert not_in_hw.json()["type"] == "SanityCheckError"
    assert client.post("/api/juggle", json={"to_hardware": 1}).status_code == 200
    busy = client.post("/api/juggle", json={"to_hardware": 2})
    assert busy.status_code == 409
    assert busy.json()["error"].startswith(
        "no region for service 2 (crypto.EncryptionService): prr0 is held by service id 1"
    )
    assert client.get("/api/services").json()[0]["tier"] == "hardware"  # nothing changed
    swapped = client.post("/api/juggle", json={"to_hardware": 2, "to_software": [1]})
    assert swapped.json()["tiers"] == {"1": "native", "2": "hardware"}
    for body in ({"to_hardware": "2"}, {"to_hardware": True}, {"to_software": 1}, {"x": 1}):
        invalid = client.post("/api/juggle", json=body)
        assert invalid.status_code == 422, body
        assert invalid.json()["type"] == "ValidationError"


def test_set_tier_endpoint(client: TestClient) -> None:
    response = client.post("/api/services/1/tier", json={"tier": "software"})
    assert response.status_code == 200
    assert response.json()["tiers"] == {"1": "software"}
    assert client.get("/api/services").json()[0]["tier"] == "software"
    to_hw = client.post("/api/services/1/tier", json={"tier": "hardware"})
    assert to_hw.status_code == 200 and to_hw.json()["region"] == "prr0"
    unknown_tier = client.post("/api/services/1/tier", json={"tier": "quantum"})
    assert unknown_tier.status_code == 400
    assert "'quantum'" in unknown_tier.json()["error"]
    assert unknown_tier.json()["tier"] == "quantum"
    unknown_id = client.post("/api/services/5/tier", json={"tier": "software"})
    assert unknown_id.status_code == 404
    assert unknown_id.json()["error"] == "no service with id 5"


@dataclass
class MailFirst:
    """Puts service 1 in hardware while ``mail`` has the focus."""

    name: str = "mail-first"

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        in_hw = {s.service_id for s in snapshot.in_hardware()}
        if snapshot.foreground == "mail" and 1 not in in_hw:
            return [JuggleAction(1)]
        return []


def test_foreground_runs_the_controller(framework: juggle.Framework, client: TestClient) -> None:
    plain = client.post("/api/foreground", json={"app": "music"}).json()
    assert plain == {
        "foreground": "music",
        "controller": None,
        "juggles": [],
        "controller_errors": [],
    }
    framework.set_controller(MailFirst())
    focused = client.post("/api/foreground", json={"app": "mail"}).json()
    assert focused["foreground"] == "mail" and focused["controller"] == "mail-first"
    assert [j["tiers"] for j in focused["juggles"]] == [{"1": "hardware"}]
    assert client.get("/api/snapshot").json()["foreground"] == "mail"
    cleared = client.post("/api/foreground", json={"app": None}).json()
    assert cleared["foreground"] is None and framework.foreground is None
    assert client.post("/api/foreground", json={}).status_code == 422


def test_metrics_exposition(framework: juggle.Framework, client: TestClient) -> None:
    make_calls(framework, "mail", 3)
    client.post("/api/juggle", json={"to_hardware": 1})
    make_calls(framework, "music", 2)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    got = samples(response.text)
    svc = {("service", "1"), ("interface", "crypto.EncryptionService")}

    def value(name: str, **labels: str) -> float:
        return got[(name, frozenset(svc | set(labels.items())))]

    assert value("juggle_service_calls_total", tier="native") == 4
    assert value("juggle_service_calls_total", tier="hardware") == 3
    assert value("juggle_service_calls_total", tier="software") == 0
    assert 0 < value("juggle_service_call_duration_p99_seconds") < 1
    assert value("juggle_service_inflight") == 0
    assert value("juggle_service_info", tier="hardware", region="prr0", module="tdes") == 1
    region = {("region", "prr0")}
    info = frozenset(region | {("design", "tdes"), ("module", "tdes"), ("service", "1")})
    assert got[("juggle_region_info", info)] == 1
    for state, expected in (("PROGRAMMED", 1), ("EMPTY", 0), ("ERROR", 0)):
        key = frozenset(region | {("juggle_region_state", state)})
        assert got[("juggle_region_state", key)] == expected
    assert got[("juggle_juggles_total", frozenset())] == 1
    assert 0 < got[("juggle_reconfiguration_seconds_total", frozenset())] < 1


def test_metrics_use_a_registry_per_app(framework: juggle.Framework) -> None:
    other = juggle.Framework(fabric="xupv2p")
    try:
        with TestClient(create_app(other)) as empty, TestClient(create_app(framework)) as full:
            assert "juggle_service_calls_total{" not in empty.get("/metrics").text
            assert "juggle_service_calls_total{" in full.get("/metrics").text
    finally:
        other.close()
    assert b"juggle_" not in prometheus_client.generate_latest(prometheus_client.REGISTRY)


def test_page_is_self_contained_and_polls_the_api(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert page.startswith("<!doctype html>")
    for needle in ("/api/services", "/api/regions", "/statistics", "setInterval", "measured"):
        assert needle in page
    for needle in ('<svg id="throughput"', '<svg id="occupancy"', "/api/live", "/api/foreground"):
        assert needle in page
    assert "calibrated" in page and "(input)" in page
    assert "http://" not in page and "https://" not in page and "<link" not in page
    assert "innerHTML" not in page  # cells are filled with textContent only


class Colour(enum.Enum):
    RED = "red"


def test_to_json_plain_data() -> None:
    @dataclass(frozen=True)
    class Snap:
        ratio: float
        colour: Colour
        items: tuple[int, ...]
        by_id: dict[int, object]

    snap = Snap(math.nan, Colour.RED, (1, 2), {3: Path("/x"), 4: None})
    assert to_json(snap) == {
        "ratio": None,
        "colour": "red",
        "items": [1, 2],
        "by_id": {"3": "/x", "4": None},
    }
    assert to_json(math.inf) is None and to_json(True) is True and to_json(1.5) == 1.5


def test_juggle_history_is_paged(framework: juggle.Framework, client: TestClient) -> None:
    for _ in range(3):
        framework.juggle(to_hardware=1)
        framework.juggle(to_software=[1])
    page = client.get("/api/juggles", params={"limit": 2})
    assert page.headers["X-Juggle-Count"] == "6" and page.headers["X-Juggle-Kept"] == "6"
    assert [(j["to_hardware"], j["to_software"]) for j in page.json()] == [(1, []), (None, [1])]
    older = client.get("/api/juggles", params={"limit": 2, "offset": 5}).json()
    assert [(j["to_hardware"], j["to_software"]) for j in older] == [(1, [])]
    assert client.get("/api/juggles", params={"limit": 0}).status_code == 422


def test_state_changes_need_the_token_and_a_matching_host_and_origin(
    framework: juggle.Framework,
) -> None:
    from juggle.dashboard.app import LOOPBACK_HOSTS, create_app

    guarded = TestClient(
        create_app(framework, token="s3cret", hosts=LOOPBACK_HOSTS),
        base_url="http://127.0.0.1:8321",
    )
    assert guarded.get("/api/services").status_code == 200  # reading needs no token
    body = {"to_hardware": 1}
    assert guarded.post("/api/juggle", json=body).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert guarded.post("/api/juggle", json=body, headers=wrong).status_code == 401
    auth = {"Authorization": "Bearer s3cret"}
    foreign_origin = {**auth, "Origin": "http://evil.example"}
    assert guarded.post("/api/juggle", json=body, headers=foreign_origin).status_code == 403
    foreign_host = {**auth, "Host": "evil.example:8321"}
    assert guarded.post("/api/juggle", json=body, headers=foreign_host).status_code == 403
    assert guarded.get("/api/services", headers={"Host": "evil.example"}).status_code == 403
    assert framework.services()[0].tier != "hardware"  # nothing changed so far
    ok = guarded.post("/api/juggle", json=body, headers={**auth, "Origin": "http://localhost:8321"})
    assert ok.status_code == 200 and framework.services()[0].tier == "hardware"


def test_the_workload_switch_drives_calls(framework: juggle.Framework) -> None:
    import time

    client = TestClient(create_app(framework, demo_controls=True))
    assert client.get("/api/workload").json()["running"] is False
    started = client.post("/api/workload", json={"on": True}).json()
    assert started["running"] is True and "mail" in started["calls"]
    deadline = time.monotonic() + 10
    while client.get("/api/workload").json()["calls"]["mail"] < 3:
        assert time.monotonic() < deadline, "the workload made no calls"
        time.sleep(0.01)
    client.post("/api/juggle", json={"to_hardware": 1})
    stopped = client.post("/api/workload", json={"on": False}).json()
    assert stopped["running"] is False and stopped["failed"] == 0 and stopped["wrong"] == 0
    stats = client.get("/api/services/1/statistics").json()
    assert stats["total"]["calls"] >= 3


def test_live_sample_counts_calls_per_tier_and_region_holders(
    framework: juggle.Framework, client: TestClient
) -> None:
    make_calls(framework, "mail", 5)
    first = client.get("/api/live").json()
    assert first["kinds"] == {
        "time_s": "measured",
        "services.*.calls": "measured",
        "juggles": "measured",
    }
    assert first["services"] == [
        {
            "service_id": 1,
            "interface": "crypto.EncryptionService",
            "tier": "native",
            "calls": {"native": 6},
        }
    ]
    assert first["regions"] == [
        {
            "name": "prr0",
            "state": "EMPTY",
            "design": None,
            "service_id": None,
            "module": None,
            "tenant": None,
            "device": None,
            "holder": None,
            "label": "empty",
        }
    ]
    assert (first["juggles"], first["foreground"], first["controller"]) == (0, None, None)
    client.post("/api/juggle", json={"to_hardware": 1})
    make_calls(framework, "mail", 2)
    second = client.get("/api/live").json()
    assert second["time_s"] > first["time_s"]
    assert second["services"][0]["tier"] == "hardware"
    assert second["services"][0]["calls"] == {"hardware": 3, "native": 6}
    assert second["regions"][0]["service_id"] == 1 and second["regions"][0]["module"] == "tdes"
    assert second["regions"][0]["holder"] == "service"
    assert second["regions"][0]["label"] == "service 1 (tdes)"
    assert second["juggles"] == 1


def test_the_workload_switch_moves_the_focus_so_the_controller_juggles(
    framework: juggle.Framework,
) -> None:
    import time

    from juggle.core.controllers import load_controller
    from juggle.shipped import example_module

    framework.install(example_module("audio")).start()
    framework.set_controller(load_controller("foreground"))
    app = create_app(framework, focus_every_s=0.05, demo_controls=True)
    with TestClient(app) as test_client:
        assert test_client.post("/api/workload", json={"on": True}).json()["running"] is True
        assert app.state.focus.running
        seen: set[str | None] = set()
        deadline = time.monotonic() + 20
        while framework.juggle_count < 3 or seen != {"mail", "music"}:
            assert time.monotonic() < deadline, f"juggles {framework.juggle_count}, seen {seen}"
            seen.add(test_client.get("/api/live").json()["foreground"])
            time.sleep(0.01)
        holders = {r.to_hardware for r in framework.history()}
        assert holders == {1, 2}  # each application's service had the fabric in turn
        stopped = test_client.post("/api/workload", json={"on": False}).json()
        assert stopped["running"] is False and not app.state.focus.running
        count = framework.juggle_count
        time.sleep(0.2)
        assert framework.juggle_count == count  # the rotation stopped with the workload
    assert list(framework.controller_errors) == []


def test_focus_rotation_refuses_a_bad_period(framework: juggle.Framework) -> None:
    from juggle.dashboard.app import FocusRotation
    from juggle.errors import ConfigurationError

    for bad in (0, -1.5, True, "5"):
        with pytest.raises(ConfigurationError, match="focus_every_s") as caught:
            FocusRotation(framework, bad)  # type: ignore[arg-type]
        assert caught.value.value is bad
