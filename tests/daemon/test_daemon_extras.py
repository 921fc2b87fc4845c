"""The daemon's dashboard and ``/metrics`` (token file, Host/Origin checks) and its quota of
regions held at once, with real daemon processes (issue 11)."""

from __future__ import annotations

import os
import shutil
import stat
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from daemon_support import MODULES, DaemonProcess, free_port, make_base, wait_until
from test_daemon import DES_HARDWARE_ONLY, policy, tenant

from juggle.daemon.dashboard import TOKEN_FILE, admin_token, parse_address
from juggle.errors import DashboardError, RegionQuotaExceededError

DES_KEY = bytes.fromhex("133457799BBCDFF1")
AES_KEY = bytes(range(16))

# -- dashboard --------------------------------------------------------------------------------


def test_dashboard_and_metrics_are_served_by_the_daemon(spawn: Any) -> None:
    port = free_port()
    daemon = spawn(extra=("--dashboard", str(port)))
    token_file = daemon.state / TOKEN_FILE
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert len(token) >= 32
    with daemon.client() as client:
        client.install(MODULES / "tdes")
        (snap,) = client.services()
        sid = snap.service_id
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10.0) as web:
            metrics = web.get("/metrics")
            assert metrics.status_code == 200
            assert metrics.headers["content-type"].startswith("text/plain")
            assert "# TYPE juggle_service_calls" in metrics.text
            assert f'service="{sid}"' in metrics.text  # the daemon's own framework
            (listed,) = web.get("/api/services").json()
            assert listed["service_id"] == sid and listed["tier"] == snap.tier
            body = {"tier": "software"}
            url = f"/api/services/{sid}/tier"
            assert web.post(url, json=body).status_code == 401
            auth = {"Authorization": f"Bearer {token}"}
            assert (
                web.post(url, json=body, headers={"Authorization": "Bearer nope"}).status_code
                == 401
            )
            foreign_host = web.post(url, json=body, headers={**auth, "Host": "evil.example"})
            assert foreign_host.status_code == 403
            foreign_origin = web.post(
                url, json=body, headers={**auth, "Origin": "http://evil.example"}
            )
            assert foreign_origin.status_code == 403
            assert client.statistics(sid).tier != "software"  # nothing refused has run
            done = web.post(url, json=body, headers={**auth, "Origin": f"http://127.0.0.1:{port}"})
            assert done.status_code == 200, done.text
        assert client.statistics(sid).tier == "software"  # the daemon's framework changed


def test_dashboard_is_off_by_default(spawn: Any) -> None:
    daemon = spawn()
    assert not (daemon.state / TOKEN_FILE).exists()
    assert "dashboard" not in daemon.logs()


def test_token_file_readable_by_others_stops_the_daemon() -> None:
    base = make_base()
    try:
        daemon = DaemonProcess(base, extra=("--dashboard", str(free_port())))
        daemon.state.mkdir(mode=0o700)
        token_file = daemon.state / TOKEN_FILE
        token_file.write_text("a-token-that-others-may-read\n")
        token_file.chmod(0o644)
        try:
            with pytest.raises(AssertionError, match="daemon exited with 1"):
                daemon.start()
        finally:
            daemon.kill()
        assert "mode 0644" in daemon.logs() and str(token_file) in daemon.logs()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_admin_token_is_made_once_with_mode_0600(tmp_path: Path) -> None:
    old = os.umask(0)  # a careless umask does not widen the mode
    try:
        first = admin_token(tmp_path)
    finally:
        os.umask(old)
    path = tmp_path / TOKEN_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert admin_token(tmp_path) == first  # read back, not replaced
    path.chmod(0o640)
    with pytest.raises(DashboardError, match="mode 0640"):
        admin_token(tmp_path)
    path.unlink()
    (tmp_path / "elsewhere").write_text("x" * 40)
    (tmp_path / "elsewhere").chmod(0o600)
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DashboardError, match="symbolic link"):
        admin_token(tmp_path)
    path.unlink()
    path.write_text("short")
    path.chmod(0o600)
    with pytest.raises(DashboardError, match="no usable token"):
        admin_token(tmp_path)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("8321", ("127.0.0.1", 8321)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:9000", ("::1", 9000)),
        (":7", ("127.0.0.1", 7)),
    ],
)
def test_dashboard_addresses(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["", "web", "host:", "host:70000", "::1:80", "1.2.3.4:-1"])
def test_bad_dashboard_addresses_are_refused(text: str) -> None:
    with pytest.raises(DashboardError) as refused:
        parse_address(text)
    assert refused.value.value == text


# -- a call run on the connection's reader thread holds nothing up ------------------------------


def test_slow_call_holds_up_no_other_request_of_its_connection(spawn: Any) -> None:
    """A lone caller's call runs on its connection's reader thread (no hand-over to the
    pool); requests that arrive meanwhile, from another thread of the same client or from
    another client, are still read and answered at once."""
    daemon = spawn()
    with daemon.client() as client, daemon.client() as other:
        client.install(MODULES / "tdes")
        (snap,) = client.services()
        client.set_tier(snap.service_id, "software")  # pure Python: a slow call
        slow = client.get_service("EncryptionService")
        slow.load_key(bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123"))
        buf = bytearray(os.urandom(192 << 10))
        t0 = time.monotonic()
        slow.encrypt(buf, len(buf))
        alone_s = time.monotonic() - t0
        assert alone_s > 0.2, alone_s  # slow enough to see a hold-up
        big = bytearray(os.urandom(8 * len(buf)))  # ~8 x alone_s: pings take a fraction
        done = threading.Event()

        def call() -> None:
            slow.encrypt(big, len(big))
            done.set()

        caller = threading.Thread(target=call)
        caller.start()
        try:
            # the slow call is running in the daemon now (its statistics say so)
            assert wait_until(lambda: client.statistics(snap.service_id).inflight == 1, 10.0)
            for _ in range(5):
                client.ping()  # same connection
                other.ping()  # another client
            # every ping was answered while the slow call still ran: none waited for it
            assert not done.is_set(), "the pings were answered only after the slow call"
        finally:
            caller.join(60)
        assert done.is_set()


# -- quota: regions held at once ----------------------------------------------------------------


AES_HARDWARE_ONLY = """
[module]
name = "aeshw"
version = "1.0.0"

[[services]]
interfaces = ["crypto.EncryptionService"]
properties = { algorithm = "aes" }

[services.hardware]
driver = "aes_module.AesDriver"
bitstreams = { prr0 = "bitstreams/aes_prr0.bit" }
model = "aes_module.AesCore"
"""


def _hardware_only(tmp_path: Path) -> tuple[Path, Path]:
    deshw, aeshw = tmp_path / "deshw", tmp_path / "aeshw"
    shutil.copytree(MODULES / "des", deshw)
    (deshw / "juggle.toml").write_text(DES_HARDWARE_ONLY)
    shutil.copytree(MODULES / "aes", aeshw)
    (aeshw / "juggle.toml").write_text(AES_HARDWARE_ONLY)
    return deshw, aeshw


def _regions_held(client: Any) -> list[str]:
    (me,) = client.tenants()
    return sorted(d.region for d in me.devices if d.region is not None)


@pytest.mark.parametrize("quota", [1, None])
def test_quota_of_regions_held_at_once(spawn: Any, tmp_path: Path, quota: int | None) -> None:
    """A tenant with max_regions = 1 holding a region for hardware-only DES is refused a call
    of hardware-only AES (another region) until it gives DES back; without the quota the same
    calls all run (the allocator hands the one region over)."""
    deshw, aeshw = _hardware_only(tmp_path)
    extra = "admin = true\n" + (f"max_regions = {quota}\n" if quota else "")
    daemon = spawn(policy(tenant("alice", os.getuid(), extra)))
    with daemon.client() as client:
        client.install(deshw)
        client.install(aeshw)
        des = client.get_service("EncryptionService", filter="(algorithm=des)")
        aes = client.get_service("EncryptionService", filter="(algorithm=aes)")
        des.load_key(DES_KEY)
        des.encrypt(bytearray(8), 8)
        assert _regions_held(client) == ["prr0"]
        if quota is None:
            aes.load_key(AES_KEY)  # the region goes over to alice's AES device
            aes.encrypt(bytearray(16), 16)
            return
        with pytest.raises(RegionQuotaExceededError, match="max_regions") as refused:
            aes.load_key(AES_KEY)
        assert refused.value.tenant == "alice"
        des.encrypt(bytearray(8), 8)  # the region it holds still serves it
        client.unget_service(des)  # gives its region back
        aes.load_key(AES_KEY)
        aes.encrypt(bytearray(16), 16)
        assert _regions_held(client) == ["prr0"]
