"""The cluster page, fed by a fixed status document (no Ray): the API's view and figures'
kinds, a node going dead, a source that fails or answers a malformed document, the page and
the server on loopback, ``juggle cluster dashboard``, and the page in a real browser."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from test_ui_browser import CHROMEDRIVER, CHROMIUM, HAVE_SELENIUM, browser, text_of, wait_for
from typer.testing import CliRunner

from juggle.cluster.directory import (
    Directory,
    NodeReport,
    RegionReport,
    ServiceReport,
    status_document,
)
from juggle.commands.cli import app as cli
from juggle.dashboard import cluster as cluster_module
from juggle.dashboard.cluster import (
    ControllerSource,
    cluster_view,
    create_cluster_app,
    make_cluster_server,
    serve_cluster,
)
from juggle.errors import ConfigurationError, ProtocolError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the label walk's rules
from labels_support import (  # type: ignore[import-not-found, unused-ignore]
    figure_labels,
    unlabeled,
)

__all__ = ["browser"]  # the browser fixture, shared with test_ui_browser

TDES = "tdes/crypto.EncryptionService"
DES = "des/crypto.EncryptionService"
AES = "aes/crypto.EncryptionService"


def service(
    key: str, tier: str, region: str | None, calls_per_s: float, **extra: Any
) -> ServiceReport:
    """A service report of ``key`` in ``tier`` (and ``region``) at ``calls_per_s``."""
    fields: dict[str, Any] = {
        "service_id": 1,
        "interface": "crypto.EncryptionService",
        "interfaces": ("crypto.EncryptionService",),
        "module": key.split("/", 1)[0],
        "properties": {},
        "tiers": ("software", "native", "hardware"),
        "calls": 100,
        "hardware_calls": 60 if tier == "hardware" else 0,
        "software_mean_us": 20.0,
        "hardware_mean_us": 2.0 if tier == "hardware" else None,
    }
    fields.update(extra)
    return ServiceReport(key=key, tier=tier, region=region, calls_per_s=calls_per_s, **fields)


def directory(*, b2_alive: bool = True) -> Directory:
    """Three boards: b1 (two regions: TDES in prr0, prr1 empty), b2 (DES in prr0, modeled
    hardware), b3 dead since its daemon exited; b2 dead too unless ``b2_alive``."""
    b1 = NodeReport(
        "b1",
        True,
        1,
        "tls://127.0.0.1:7001",
        regions=(RegionReport("prr0", "PROGRAMMED", TDES), RegionReport("prr1", "EMPTY", None)),
        services=(service(TDES, "hardware", "prr0", 40.0), service(AES, "native", None, 2.5)),
        load_per_s=42.5,
    )
    b2 = NodeReport(
        "b2",
        True,
        3,
        "tls://127.0.0.1:7002",
        regions=(RegionReport("prr0", "PROGRAMMED", DES),),
        services=(service(DES, "hardware", "prr0", 10.0, hardware_label="modeled"),),
        load_per_s=10.0,
    )
    if not b2_alive:
        b2 = replace(b2, alive=False, error="daemon exited (signal 9)")
    b3 = NodeReport(
        "b3",
        False,
        2,
        "tls://127.0.0.1:7003",
        regions=(RegionReport("prr0", "PROGRAMMED", TDES),),
        services=(service(TDES, "hardware", "prr0", 7.0),),
        load_per_s=7.0,
        error="daemon exited (status 1)",
    )
    # the controller keeps its nodes sorted; the view sorts them anyway
    return Directory(9, 4, (b3, b1, b2))


class Source:
    """A status source the test changes: the document it returns next, or the error it
    raises; counts its reads."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document: Mapping[str, Any] = document
        self.error: Exception | None = None
        self.reads = 0

    def __call__(self) -> Mapping[str, Any]:
        self.reads += 1
        if self.error is not None:
            raise self.error
        return self.document


def client_of(source: Source) -> TestClient:
    return TestClient(create_cluster_app(source, clock=lambda: 1234.5))


def test_the_api_shows_nodes_regions_services_and_load_with_their_kinds() -> None:
    source = Source(status_document(directory()))
    body = client_of(source).get("/api/cluster").json()
    assert source.reads == 1
    assert (body["generation"], body["period"], body["fetched_at"]) == (9, 4, 1234.5)
    nodes = {n["name"]: n for n in body["nodes"]}
    assert [n["name"] for n in body["nodes"]] == ["b1", "b2", "b3"]
    assert [(nodes[n]["alive"], nodes[n]["epoch"]) for n in nodes] == [
        (True, 1),
        (True, 3),
        (False, 2),
    ]
    assert nodes["b3"]["error"] == "daemon exited (status 1)"
    assert nodes["b1"]["regions"] == [
        {"name": "prr0", "state": "PROGRAMMED", "service": TDES},
        {"name": "prr1", "state": "EMPTY", "service": None},
    ]
    assert nodes["b1"]["load_per_s"] == 42.5
    by_key = {s["key"]: s for s in nodes["b1"]["services"]}
    assert by_key[TDES]["tier"] == "hardware" and by_key[TDES]["region"] == "prr0"
    assert by_key[TDES]["calls_per_s"] == 40.0 and by_key[TDES]["hardware_mean_us"] == 2.0
    assert by_key[AES]["hardware_mean_us"] is None
    assert by_key[TDES]["labels"] == {"hardware_mean_us": "measured"}
    assert nodes["b2"]["services"][0]["labels"] == {"hardware_mean_us": "modeled"}
    # the dead board's regions and load are not counted
    assert body["summary"] == {
        "nodes": 3,
        "alive": 2,
        "regions": 4,
        "regions_held": 2,
        "services_in_hardware": 2,
        "load_per_s": 52.5,
    }
    # every figure has a kind by the rule of the --json documents
    labelled = {path: label for path, _, label in figure_labels(body)}
    assert unlabeled(body) == []
    assert labelled["nodes[0].load_per_s"] == "measured"
    assert labelled["nodes[1].services[0].hardware_mean_us"] == "modeled"
    assert labelled["nodes[0].services[0].hardware_mean_us"] == "measured"
    assert labelled["fetched_at"] == labelled["summary.load_per_s"] == "measured"


def test_a_node_going_dead_is_shown_dead_and_leaves_the_summary() -> None:
    source = Source(status_document(directory()))
    client = client_of(source)
    before = client.get("/api/cluster").json()
    assert before["summary"]["alive"] == 2 and before["summary"]["load_per_s"] == 52.5
    source.document = status_document(directory(b2_alive=False))
    after = client.get("/api/cluster").json()
    b2 = next(n for n in after["nodes"] if n["name"] == "b2")
    assert b2["alive"] is False and b2["error"] == "daemon exited (signal 9)"
    assert b2["regions"] == [{"name": "prr0", "state": "PROGRAMMED", "service": DES}]
    assert after["summary"]["alive"] == 1
    assert after["summary"]["regions_held"] == 1  # b1's prr0 only
    assert after["summary"]["services_in_hardware"] == 1  # DES was in hardware on b2 alone
    assert after["summary"]["load_per_s"] == 42.5


def test_a_failing_source_answers_503_with_the_error_and_its_attributes() -> None:
    source = Source(status_document(directory()))
    source.error = ConfigurationError("no Ray cluster answers at 'h:1'", value="h:1")
    response = client_of(source).get("/api/cluster")
    assert response.status_code == 503
    assert response.json() == {
        "error": "no Ray cluster answers at 'h:1'",
        "type": "ConfigurationError",
        "path": None,
        "value": "h:1",
    }


def _broken(change: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(status_document(directory())))
    if change == "no nodes":
        del doc["nodes"]
    elif change == "alive as text":
        doc["nodes"][1]["alive"] = "yes"
    elif change == "epoch as bool":
        doc["nodes"][0]["epoch"] = True
    elif change == "region service a number":
        doc["nodes"][0]["regions"][0]["service"] = 3
    elif change == "a service without calls":
        del doc["nodes"][0]["services"][0]["calls"]
    elif change == "a node not an object":
        doc["nodes"][2] = "b3"
    elif change == "a hardware mean of no kind":
        doc["nodes"][2]["services"][0]["labels"]["hardware_mean_us"] = "guessed"
        doc["nodes"][2]["services"][0]["hardware_mean_label"] = "guessed"
    return doc


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("no nodes", "document.nodes"),
        ("alive as text", "nodes[1].alive"),
        ("epoch as bool", "nodes[0].epoch"),
        ("region service a number", "nodes[0].regions[0].service"),
        ("a service without calls", "nodes[0].services[0].calls"),
        ("a node not an object", "nodes[2]"),
        ("a hardware mean of no kind", "nodes[2].services[0].labels.hardware_mean_us"),
    ],
)
def test_a_malformed_document_is_refused_naming_the_field(change: str, field: str) -> None:
    doc = _broken(change)
    with pytest.raises(ProtocolError) as caught:
        cluster_view(doc, 0.0)
    assert caught.value.value == field and caught.value.operation == "cluster status"
    response = client_of(Source(doc)).get("/api/cluster")
    assert response.status_code == 503
    assert response.json()["type"] == "ProtocolError" and response.json()["value"] == field


def test_non_finite_figures_become_null() -> None:
    doc: dict[str, Any] = json.loads(json.dumps(status_document(directory())))
    doc["nodes"][0]["load_per_s"] = float("nan")
    doc["nodes"][0]["services"][0]["software_mean_us"] = float("inf")
    view = cluster_view(doc, 0.0)
    b3 = view["nodes"][2]  # the document's first node, sorted last
    assert b3["load_per_s"] is None and b3["services"][0]["software_mean_us"] is None
    assert json.loads(json.dumps(view, allow_nan=False)) == view


def test_the_page_and_the_host_guard() -> None:
    source = Source(status_document(directory()))
    app = create_cluster_app(source, hosts=frozenset({"127.0.0.1"}))
    client = TestClient(app, base_url="http://127.0.0.1")
    page = client.get("/cluster")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for table in ('id="nodes"', 'id="regions"', 'id="services"', "/api/cluster"):
        assert table in page.text
    assert "innerHTML" not in page.text  # names from the boards are set as text only
    root = client.get("/", follow_redirects=False)
    assert root.status_code == 307 and root.headers["location"] == "/cluster"
    assert source.reads == 0  # the page itself reads nothing
    rebound = TestClient(app, base_url="http://evil.example").get("/api/cluster")
    assert rebound.status_code == 403 and source.reads == 0


@contextlib.contextmanager
def served(source: Source) -> Iterator[str]:
    """The cluster page over ``source`` on a free loopback port (uvicorn in a thread): its
    URL. The server is stopped on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = make_cluster_server(source, "127.0.0.1", port, log_level="warning")
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 10
            while not server.started:
                assert thread.is_alive(), "the server thread died while starting"
                assert time.monotonic() < deadline, "the server did not start within 10 s"
                time.sleep(0.02)
            yield f"http://127.0.0.1:{port}/cluster"
        finally:
            server.should_exit = True
            thread.join(timeout=10)
        assert not thread.is_alive()
    finally:
        sock.close()


def test_uvicorn_serves_the_cluster_api_on_loopback() -> None:
    source = Source(status_document(directory()))
    with served(source) as url:
        answer = httpx.get(url.replace("/cluster", "/api/cluster"), timeout=5)
    assert answer.status_code == 200
    assert answer.json()["summary"]["alive"] == 2 and source.reads == 1


def test_serve_cluster_refuses_a_busy_port() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        announced: list[str] = []
        with pytest.raises(ConfigurationError, match="cannot listen on 127.0.0.1") as caught:
            serve_cluster(Source({}), "127.0.0.1", port, on_ready=announced.append)
    assert caught.value.value == port and announced == []


def test_controller_source_refuses_a_bad_timeout() -> None:
    for bad in (0, -1.0, float("nan"), True, "5"):
        with pytest.raises(ConfigurationError, match="timeout_s must be a number > 0"):
            ControllerSource("auto", timeout_s=bad)  # type: ignore[arg-type]


class FakeControllerSource:
    """Stands in for ControllerSource in ``juggle cluster dashboard``: a fixed document, or
    the error of an unreachable cluster; records whether it was closed."""

    instances: list[FakeControllerSource] = []
    fail = False

    def __init__(self, address: str, *, timeout_s: float) -> None:
        self.address, self.timeout_s, self.closed = address, timeout_s, False
        FakeControllerSource.instances.append(self)

    def __call__(self) -> Mapping[str, Any]:
        if FakeControllerSource.fail:
            raise ConfigurationError(
                f"no Ray cluster answers at {self.address!r}", value=self.address
            )
        return status_document(directory())

    def close(self) -> None:
        self.closed = True


def test_the_command_reads_the_cluster_once_announces_the_url_and_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served_with: list[tuple[Any, str, int]] = []

    def fake_serve(source: Any, host: str, port: int, on_ready: Any = None) -> None:
        served_with.append((source, host, port))
        on_ready(f"http://{host}:{port}/cluster")

    monkeypatch.setattr(cluster_module, "ControllerSource", FakeControllerSource)
    monkeypatch.setattr(cluster_module, "serve_cluster", fake_serve)
    monkeypatch.setattr(FakeControllerSource, "instances", [])
    args = ["cluster", "dashboard", "--address", "head:6379", "--port", "9000", "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "url": "http://127.0.0.1:9000/cluster",
        "api": "http://127.0.0.1:9000/api/cluster",
    }
    (source,) = FakeControllerSource.instances
    assert (source.address, source.timeout_s, source.closed) == ("head:6379", 5.0, True)
    assert served_with == [(source, "127.0.0.1", 9000)]

    monkeypatch.setattr(FakeControllerSource, "fail", True)
    served_with.clear()
    result = CliRunner().invoke(cli, [*args[:-1], "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "error": "no Ray cluster answers at 'head:6379'",
        "type": "ConfigurationError",
    }
    assert served_with == [] and FakeControllerSource.instances[-1].closed


def test_controller_source_names_an_address_where_no_ray_cluster_answers() -> None:
    ray = pytest.importorskip("ray", reason="the cluster extra is not installed")
    assert not ray.is_initialized()
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{closed.getsockname()[1]}"
    source = ControllerSource(address, timeout_s=1.0)
    with pytest.raises(ConfigurationError, match="no Ray cluster answers") as caught:
        source()
    assert caught.value.value == address and not ray.is_initialized()
    source.close()


# -- the page in a real browser (the harness of test_ui_browser) ------------------------------


def row_of(driver: Any, table: str, node: str) -> dict[str, str]:
    """The cells (by class) and the class of ``node``'s row in ``table`` ({} when none)."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f'#{table} tr[data-node="{node}"]')
    if not rows:
        return {}
    cells = {
        str(td.get_attribute("class")).split()[0]: str(td.text)
        for td in rows[0].find_elements(By.CSS_SELECTOR, "td[class]")
    }
    cells["row_class"] = str(rows[0].get_attribute("class") or "")
    return cells


@pytest.mark.skipif(
    not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()),
    reason="Chromium or ChromeDriver is not installed (Debian: apt-get install chromium "
    "chromium-driver; `make test` installs them when run as root)",
)
@pytest.mark.skipif(not HAVE_SELENIUM, reason="selenium is not installed (pip install '.[test]')")
def test_the_page_in_a_browser_shows_the_boards_and_a_board_going_dead(
    browser: Any, tmp_path: Path
) -> None:
    """Chromium shows the three boards (b3 dead), each region's service and the modeled
    hardware mean of DES; b2's daemon dies in the source: the page marks b2 dead with its
    error and the summary counts one board alive; a screenshot is kept in ``tmp_path``."""
    source = Source(status_document(directory()))
    with served(source) as url:
        browser.get(url)
        b1 = wait_for("b1's row", lambda: row_of(browser, "nodes", "b1"))
        assert (b1["alive"], b1["epoch"], b1["load"], b1["held"]) == ("yes", "1", "42.5", "1 of 2")
        b3 = row_of(browser, "nodes", "b3")
        assert b3["alive"] == "DEAD: daemon exited (status 1)" and b3["row_class"] == "dead"
        assert b3["load"] == "-"
        assert text_of(browser, '#regions tr[data-node="b1"][data-region="prr0"] td.service') == (
            TDES
        )
        assert text_of(browser, '#regions tr[data-node="b1"][data-region="prr1"] td.service') == (
            "-"
        )
        des = row_of(browser, "services", "b2")
        assert (des["tier"], des["rate"], des["hardware"]) == ("hardware", "10.0", "2.0 (modeled)")
        summary = text_of(browser, "#summary")
        assert summary.startswith("nodes alive: 2 of 3; regions holding a service: 2 of 4")

        source.document = status_document(directory(b2_alive=False))
        b2 = wait_for(
            "b2 shown dead",
            lambda: (r := row_of(browser, "nodes", "b2")) and r["row_class"] == "dead" and r,
        )
        assert b2["alive"] == "DEAD: daemon exited (signal 9)"
        assert text_of(browser, '#regions tr[data-node="b2"] td.state') == (
            "PROGRAMMED (node dead)"
        )
        summary = text_of(browser, "#summary")
        assert summary.startswith("nodes alive: 1 of 3; regions holding a service: 1 of 4")
        assert "generation 9" in text_of(browser, "#status")

        source.error = ConfigurationError("the controller did not answer", value="auto")
        wait_for(
            "the status to say the cluster cannot be read",
            lambda: (
                "cannot read the cluster: the controller did not answer"
                in text_of(browser, "#status")
            ),
        )
        assert row_of(browser, "nodes", "b1")["alive"] == "yes"  # the last answer stays
        shot = tmp_path / "dashboard-cluster.png"
        assert browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
