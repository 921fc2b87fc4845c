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

import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi import FastAPI

import juggle
from juggle.dashboard.app import make_server

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


@pytest.fixture
def dashboard_url() -> Iterator[tuple[str, juggle.Framework]]:
    """The dashboard of a framework with the demo's two services, served on a free port."""
    fw = juggle.Framework(fabric="xupv2p")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        fw.install(MODULES / "tdes").start()
        fw.install(MODULES / "audio").start()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = make_server(fw, "127.0.0.1", port, log_level="warning", token=TOKEN)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 10
            while not server.started:
                assert thread.is_alive(), "the server thread died while starting"
                assert time.monotonic() < deadline, "the server did not start within 10 s"
                time.sleep(0.02)
            yield f"http://127.0.0.1:{port}/#token={TOKEN}", fw
        finally:
            cast(FastAPI, server.config.app).state.workload.stop()
            server.should_exit = True
            thread.join(timeout=10)
        assert not thread.is_alive()
    finally:
        sock.close()
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
