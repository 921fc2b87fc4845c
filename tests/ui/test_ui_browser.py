"""The dashboard page in a real browser: headless Chromium driven by Selenium.

The dashboard serves a framework with the demo's two applications (TDES and the audio decoder)
on loopback; Debian's Chromium loads the page with the admin token, the test clicks the
workload switch, sees the throughput chart draw calls, moves the encryption service to
hardware with the page's own button and waits until the page shows the new tier, the
hardware series in the chart and the region's new holder in the occupancy timeline.

Needs ``chromium`` and ``chromium-driver`` (Debian) and the ``selenium`` package: ``make test``
installs them (the Debian packages when run as root); elsewhere the test is skipped, saying so.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi import FastAPI
from ui_support import tenant_call

import juggle
from juggle.dashboard.app import live_sample, make_server
from juggle.dashboard.history import LiveHistory
from juggle.dashboard.tenants import tenant_rows

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    HAVE_SELENIUM = True
except ImportError:  # pragma: no cover - depends on the machine
    HAVE_SELENIUM = False

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

pytestmark = [
    pytest.mark.skipif(
        not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()),
        reason="Chromium or ChromeDriver is not installed (Debian: apt-get install chromium "
        "chromium-driver; `make test` installs them when run as root)",
    ),
    pytest.mark.skipif(
        not HAVE_SELENIUM,
        reason="selenium is not installed (pip install -e '.[test]'; `make test` does it)",
    ),
]

MODULES = Path(__file__).resolve().parents[2] / "examples" / "modules"
TOKEN = "browser-test-token"
WAIT_S = 10.0


@contextlib.contextmanager
def served(fw: juggle.Framework, **options: Any) -> Iterator[str]:
    """The dashboard of ``fw`` (``options`` go to make_server) on a free loopback port: its
    URL with the admin token. The server is stopped (and its workload, if any) on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = make_server(fw, "127.0.0.1", port, log_level="warning", token=TOKEN, **options)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 10
            while not server.started:
                assert thread.is_alive(), "the server thread died while starting"
                assert time.monotonic() < deadline, "the server did not start within 10 s"
                time.sleep(0.02)
            yield f"http://127.0.0.1:{port}/#token={TOKEN}"
        finally:
            workload = cast(FastAPI, server.config.app).state.workload
            if workload is not None:
                workload.stop()
            server.should_exit = True
            thread.join(timeout=10)
        assert not thread.is_alive()
    finally:
        sock.close()


@pytest.fixture
def dashboard_url() -> Iterator[tuple[str, juggle.Framework]]:
    """The dashboard of a framework with the demo's two services and the demo controls."""
    fw = juggle.Framework(fabric="xupv2p")
    try:
        fw.install(MODULES / "tdes").start()
        fw.install(MODULES / "audio").start()
        with served(fw, demo_controls=True) as url:
            yield url, fw
    finally:
        fw.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless Debian Chromium with a fresh profile, no network of its own, no download."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1000,1400",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        driver.set_page_load_timeout(20)
        yield driver
    finally:
        driver.quit()


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Poll ``probe`` (a page re-rendered every second: stale elements are retried) until it
    returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            last = probe()
        except StaleElementReferenceException:
            last = None
        if last:
            return last
        assert time.monotonic() < deadline, f"timed out waiting for {what} (last: {last!r})"
        time.sleep(0.1)


def text_of(driver: Any, selector: str) -> str:
    """The text of the element at ``selector`` now ('' when the page has none yet)."""
    found = driver.find_elements(By.CSS_SELECTOR, selector)
    return str(found[0].text) if found else ""


def series(driver: Any, service: int, tier: str) -> dict[str, float] | None:
    """The throughput chart's line of ``service`` in ``tier``: its point count and last rate."""
    line = driver.find_elements(
        By.CSS_SELECTOR, f'#throughput polyline[data-service="{service}"][data-tier="{tier}"]'
    )
    if not line:
        return None
    return {
        "points": float(line[0].get_attribute("data-points")),
        "last": float(line[0].get_attribute("data-last")),
    }


def test_the_page_drives_the_workload_and_shows_a_juggle(
    dashboard_url: tuple[str, juggle.Framework], browser: Any
) -> None:
    url, fw = dashboard_url
    browser.get(url)
    switch = browser.find_element(By.ID, "workload")
    wait_for("the workload switch", lambda: switch.text == "start the workload")
    wait_for(
        "service 1 listed in native",
        lambda: text_of(browser, '#services tr[data-service="1"] td.tier') == "native",
    )

    wait_for(
        "the status to say nobody called",
        lambda: text_of(browser, "#workload-status") == "stopped: no calls",
    )
    # a call by another consumer: the workload made none, but there were calls
    fw.get_service("EncryptionService", consumer="script").load_key(bytes(range(24)))
    wait_for(
        "the status to count the other consumer's call",
        lambda: (
            text_of(browser, "#workload-status")
            == "stopped: the workload made none; 1 call by others"
        ),
    )

    switch.click()
    wait_for(
        "the workload to run",
        lambda: text_of(browser, "#workload-status").startswith("running: mail"),
    )
    # the chart derives calls/s of each service and tier from samples a second apart
    native = wait_for(
        "native calls in the throughput chart",
        lambda: (s := series(browser, 1, "native")) and s["last"] > 0 and s,
    )
    assert native["points"] >= 1
    music = wait_for("the decoder's calls", lambda: series(browser, 2, "software"))
    assert music["points"] >= 1

    def press_hardware() -> bool:
        button = browser.find_elements(
            By.CSS_SELECTOR, '#services tr[data-service="1"] button[data-tier="hardware"]'
        )
        if button:
            button[0].click()
        return bool(button)

    wait_for("the hardware button of service 1", press_hardware)
    wait_for(
        "the page to show service 1 in hardware",
        lambda: text_of(browser, '#services tr[data-service="1"] td.tier') == "hardware",
    )
    assert fw.services()[0].tier == "hardware"
    assert text_of(browser, "#notice") == ""
    wait_for(
        "hardware calls in the throughput chart",
        lambda: (s := series(browser, 1, "hardware")) and s["last"] > 0,
    )

    def newest_holder() -> str | None:
        cells = browser.find_elements(By.CSS_SELECTOR, '#occupancy rect[data-region="prr0"]')
        return cells[-1].get_attribute("data-service") if cells else None

    wait_for("prr0 held by service 1 in the timeline", lambda: newest_holder() == "1")
    cells = browser.find_elements(By.CSS_SELECTOR, '#occupancy rect[data-region="prr0"]')
    assert cells[0].get_attribute("data-service") == ""  # it was empty before the juggle

    switch = browser.find_element(By.ID, "workload")
    switch.click()
    status = wait_for(
        "the workload to stop",
        lambda: (t := text_of(browser, "#workload-status")).startswith("stopped") and t,
    )
    assert "failed" not in status


class FakeClock:
    """The history's clock, moved by the test: a page opened later cannot have sampled the
    past itself, so what it draws of it came from the server."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_late_page_shows_tenants_and_history_from_before_it_opened(
    tenants_fw: juggle.Framework, browser: Any, tmp_path: Path
) -> None:
    """The daemon's view (no demo controls) of two tenants sharing one region: forty
    seconds of history, sampled before the page exists (alice calls, then bob, priority 2,
    takes the region), are drawn at once; the tenants panel follows both tenants while they
    call; the waits are listed with their times; a screenshot is kept in ``tmp_path``."""
    fw = tenants_fw
    clock = FakeClock(5000.0)
    history = LiveHistory(fw, live_sample, clock=clock)
    for second in range(40):
        tenant_call(fw, "alice" if second < 20 else "bob", 3)
        clock.now += 1.0
        assert history.sample() is not None
    calls_before = {t["name"]: t["calls"] for t in tenant_rows(fw)}
    assert calls_before == {"alice": 80, "bob": 80}

    stop = threading.Event()
    failures: list[BaseException] = []

    def both_call() -> None:  # the tenants take turns: each call ends before the next
        try:
            while not stop.is_set():
                tenant_call(fw, "alice")
                tenant_call(fw, "bob")
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    with served(fw, history=history) as url:
        browser.get(url)
        # the charts: the samples the server kept before the page was opened
        line = wait_for(
            "the hardware series of service 1",
            lambda: browser.find_elements(
                By.CSS_SELECTOR, '#throughput polyline[data-service="1"][data-tier="hardware"]'
            ),
        )[0]
        assert line.get_attribute("data-points") == "39"  # 40 samples, 39 intervals
        assert float(line.get_attribute("data-span-s")) == 39.0
        assert float(line.get_attribute("data-last")) == 4.0  # 4 calls in the last second
        runs = browser.find_elements(By.CSS_SELECTOR, '#occupancy rect[data-region="prr0"]')
        assert [r.get_attribute("data-tenant") for r in runs] == ["alice", "bob"]
        assert [r.get_attribute("data-holder") for r in runs] == ["alice: tdes", "bob: tdes"]
        legend = text_of(browser, "#occupancy-legend")
        assert "alice: tdes" in legend and "bob: tdes" in legend

        caller = threading.Thread(target=both_call, daemon=True)
        caller.start()
        try:

            def panel() -> dict[str, dict[str, str]]:
                rows = {}
                for row in browser.find_elements(By.CSS_SELECTOR, "#tenants tbody tr"):
                    cells = {
                        key: row.find_element(By.CSS_SELECTOR, f"td.{key}").text
                        for key in ("name", "priority", "devices", "calls", "waits")
                    }
                    rows[row.get_attribute("data-tenant")] = cells
                return rows

            shown = wait_for(
                "both tenants' calls to grow in the tenants panel",
                lambda: (
                    (p := panel()).keys() == {"alice", "bob"}
                    and all(int(p[n]["calls"]) > calls_before[n] for n in p)
                    and p
                ),
            )
            assert (shown["alice"]["priority"], shown["bob"]["priority"]) == ("0", "2")
            assert shown["alice"]["devices"].startswith("tdes: ")
            assert int(shown["alice"]["waits"]) >= 1  # the first programming made it wait
            waits = wait_for(
                "alice's waits in the signals list",
                lambda: (
                    (
                        rows := browser.find_elements(
                            By.CSS_SELECTOR,
                            '#tenant-events tr[data-kind="wait"][data-tenant="alice"]',
                        )
                    )
                    and len(rows) >= 2
                    and rows
                ),
            )
            oldest = waits[-1]  # newest first: this one has ended
            assert re.fullmatch(
                r"\d\d:\d\d:\d\d\.\d{3}", oldest.find_element(By.CSS_SELECTOR, "td.time").text
            )
            assert float(oldest.find_element(By.CSS_SELECTOR, "td.ready").text) >= 0
            assert not browser.find_elements(
                By.CSS_SELECTOR, '#tenant-events tr[data-kind="ready"]'
            )
            held_by = text_of(browser, '#regions tr[data-region="prr0"] td.holder')
            assert held_by in ("alice: tdes", "bob: tdes")
            # the daemon's view: no workload switch, no focus buttons, no "stopped: no calls"
            assert not browser.find_element(By.ID, "demo-controls").is_displayed()
            assert "no calls" not in browser.find_element(By.TAG_NAME, "body").text
            shot = tmp_path / "dashboard-tenants.png"
            assert browser.save_screenshot(str(shot))
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
        finally:
            stop.set()
            caller.join(WAIT_S)
        assert not caller.is_alive() and failures == []
