"""The dashboard served by uvicorn on loopback: one real HTTP round trip, bounded in time."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import juggle
from juggle.dashboard.app import make_server, serve
from juggle.errors import ModuleError


def test_uvicorn_serves_services_on_loopback(framework: juggle.Framework) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = make_server(framework, "127.0.0.1", port, log_level="warning")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive(), "the server thread died while starting"
            assert time.monotonic() < deadline, "the server did not start within 10 s"
            time.sleep(0.02)
        response = httpx.get(f"http://127.0.0.1:{port}/api/services", timeout=5)
        assert response.status_code == 200
        assert [s["interface"] for s in response.json()] == ["crypto.EncryptionService"]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    assert not thread.is_alive()


def test_serve_refuses_a_bad_module_before_listening(tmp_path: Path) -> None:
    with pytest.raises(ModuleError, match="does not exist"):
        serve("127.0.0.1", 0, [tmp_path / "missing"])


def serve_once(framework: juggle.Framework, **options: Any) -> None:
    """Serve ``framework`` on a free loopback port, GET /api/services once, stop."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = make_server(framework, "127.0.0.1", port, **options)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        assert httpx.get(f"http://127.0.0.1:{port}/api/services", timeout=5).status_code == 200
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_access_log_is_off_unless_asked_for(
    framework: juggle.Framework, capfd: pytest.CaptureFixture[str]
) -> None:
    serve_once(framework)
    quiet = capfd.readouterr()
    assert "Started server process" in quiet.err + quiet.out  # the server did log its start
    assert "/api/services" not in quiet.err + quiet.out
    serve_once(framework, access_log=True)
    loud = capfd.readouterr()
    assert '"GET /api/services HTTP/1.1" 200' in loud.err + loud.out
    serve_once(framework)  # one server's access log does not turn on the next one's
    again = capfd.readouterr()
    assert "Started server process" in again.err and "/api/services" not in again.err + again.out
