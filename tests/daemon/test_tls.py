"""The daemon's TCP listener with mutual TLS: certificates are identities.

An in-process daemon serves a TLS listener on 127.0.0.1 (and its Unix socket) with a policy
that maps certificate CNs to tenants (``cert_cn``) and admins (``admin_cns``). The tests show
that a bad certificate (expired, self-signed, another CA's) is refused in the handshake, before
the daemon admits a connection or starts a request; that an unmapped CN is refused like an
unmapped uid; that tenant alice's certificate reaches none of tenant bob's consumers, state,
statistics or signals (and the reverse: no second uid is needed); that the frame-size limit
holds; that peers in their handshake count against ``max_connections`` and a silent one is
dropped after the handshake timeout.
"""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from Crypto.Cipher import DES3
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from juggle.cluster.pki import CertPaths, create_ca, issue
from juggle.daemon import Client, Daemon, connect
from juggle.daemon.server import TLS_ADDRESS_FILE
from juggle.daemon.tls import CertificateError, TlsClientConfig, TlsServerConfig
from juggle.errors import (
    AccessDeniedError,
    DaemonUnavailableError,
    ProtocolError,
    ServiceStateError,
)

ROOT = Path(__file__).resolve().parents[2]
TDES = ROOT / "examples" / "modules" / "tdes"
KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
BOB_KEY = bytes.fromhex("FEDCBA9876543210A1B2C3D4E5F60718293A4B5C6D7E8F90")

POLICY = """
version = 1
admin_cns = ["ops"]

[[tenants]]
name = "alice"
cert_cn = "alice"
priority = 1
max_frame_bytes = 4096

[[tenants]]
name = "bob"
cert_cn = "bob"
model = "aware"
calls_per_s = 30
max_services = 2
"""


def tdes(key: bytes, data: bytes) -> bytes:
    return bytes(DES3.new(key, DES3.MODE_ECB).encrypt(data))


@dataclass
class Pki:
    ca: CertPaths
    node: CertPaths
    certs: dict[str, CertPaths]
    root: Path

    def tls(self, name: str) -> TlsClientConfig:
        paths = self.certs[name]
        return TlsClientConfig(paths.cert, paths.key, paths.ca)


def _self_signed(out: Path, cn: str) -> CertPaths:
    """A certificate for ``cn`` that signs itself (no CA behind it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    out.mkdir(mode=0o700)
    (out / "self.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (out / "self.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return CertPaths(out / "self.crt", out / "self.key", out / "ca.crt")


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    root = Path(tempfile.mkdtemp(prefix="jt", dir="/tmp"))
    ca = create_ca(root / "ca")
    node = issue(root / "ca", "node0", "node", root / "node")
    certs = {n: issue(root / "ca", n, "tenant", root / n) for n in ("alice", "bob", "ops", "carol")}
    long_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    certs["expired"] = issue(
        root / "ca", "alice", "tenant", root / "expired", days=1, not_before=long_ago
    )
    create_ca(root / "other-ca", name="another CA")
    certs["other-ca"] = issue(root / "other-ca", "alice", "tenant", root / "other")
    certs["self-signed"] = _self_signed(root / "self", "alice")
    shutil.copy(ca.cert, root / "self" / "ca.crt")  # the right CA to verify the daemon with
    shutil.copy(ca.cert, root / "other" / "ca.crt")
    yield Pki(ca, node, certs, root)
    shutil.rmtree(root, ignore_errors=True)


class InProcessDaemon:
    """A :class:`Daemon` serving on a thread of the test process (prepared here, so its TLS
    address is bound before the first client connects)."""

    def __init__(self, pki: Pki, policy: str, handshake_timeout_s: float = 10.0) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="jt", dir="/tmp"))
        (self.base / "policy.toml").write_text(policy)
        self.daemon = Daemon(
            self.base / "s.sock",
            self.base / "state",
            policy_path=self.base / "policy.toml",
            workers=8,
            tls=TlsServerConfig(
                "127.0.0.1",
                0,
                pki.node.cert,
                pki.node.key,
                pki.node.ca,
                handshake_timeout_s=handshake_timeout_s,
            ),
        )
        self.daemon.prepare()
        assert self.daemon.tls_address is not None
        host, port = self.daemon.tls_address
        self.address = f"tls://{host}:{port}"
        self.thread = threading.Thread(target=self.daemon.serve_prepared, daemon=True)
        self.thread.start()

    def client(self, pki: Pki, name: str, **kwargs: Any) -> Client:
        return connect(address=self.address, tls=pki.tls(name), **kwargs)

    def close(self) -> None:
        self.daemon.stop_threadsafe()
        self.thread.join(30)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def served(pki: Pki) -> Iterator[InProcessDaemon]:
    daemon = InProcessDaemon(pki, POLICY)
    with daemon.client(pki, "ops") as ops:
        ops.install(TDES)
    yield daemon
    daemon.close()


# -- identity -----------------------------------------------------------------------------------


def test_the_bound_address_is_written_to_the_state_directory(served: InProcessDaemon) -> None:
    text = (served.daemon.state.root / TLS_ADDRESS_FILE).read_text().strip()
    assert f"tls://{text}" == served.address


def test_a_certificate_cn_is_the_tenant(pki: Pki, served: InProcessDaemon) -> None:
    with served.client(pki, "alice") as alice:
        ident = alice.identity
        assert (ident["name"], ident["tenant"], ident["admin"]) == ("alice", True, False)
        assert ident["cert_cn"] == "alice" and ident["uid"] == -1
        assert ident["max_frame"] == 4096
    with served.client(pki, "ops") as ops:  # admin by CN, no tenant
        assert (ops.name, ops.admin, ops.identity["tenant"]) == ("admin:ops", True, False)


@pytest.mark.parametrize(
    ("cert", "reason"),
    [
        ("expired", "certificate expired"),
        ("self-signed", "unknown ca"),
        ("other-ca", "unknown ca"),
    ],
)
def test_a_bad_certificate_is_refused_in_the_handshake(
    pki: Pki, served: InProcessDaemon, cert: str, reason: str
) -> None:
    daemon = served.daemon
    refused, admitted, started = daemon.tls_refused, daemon.admitted, daemon.requests_started
    with pytest.raises(AccessDeniedError, match=reason):
        served.client(pki, cert)
    # counted as a refused handshake before the alert was sent; never admitted, no request
    assert daemon.tls_refused == refused + 1
    assert (daemon.admitted, daemon.requests_started) == (admitted, started)


def test_a_client_without_a_certificate_is_refused_in_the_handshake(
    pki: Pki, served: InProcessDaemon
) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(str(pki.ca.cert))  # it trusts the daemon, has no cert
    host, port = served.daemon.tls_address or ("", 0)
    daemon = served.daemon
    refused, admitted = daemon.tls_refused, daemon.admitted
    with (
        socket.create_connection((host, port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
        # TLS 1.3: the client's side completes first; the daemon's alert follows
        pytest.raises(ssl.SSLError, match="CERTIFICATE_REQUIRED"),
    ):
        tls.recv(1)
    assert (daemon.tls_refused, daemon.admitted) == (refused + 1, admitted)


def test_tls_below_1_3_is_refused(pki: Pki, served: InProcessDaemon) -> None:
    """A client that offers TLS 1.2 at most (with a good certificate) gets no handshake."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.load_verify_locations(str(pki.ca.cert))
    context.load_cert_chain(str(pki.certs["alice"].cert), str(pki.certs["alice"].key))
    host, port = served.daemon.tls_address or ("", 0)
    refused = served.daemon.tls_refused
    with (
        socket.create_connection((host, port), timeout=10) as raw,
        pytest.raises(ssl.SSLError, match="PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL"),
    ):
        context.wrap_socket(raw, server_hostname="localhost")
    assert served.daemon.tls_refused == refused + 1


def test_an_unmapped_cn_is_refused(pki: Pki, served: InProcessDaemon) -> None:
    daemon = served.daemon
    admitted, started = daemon.admitted, daemon.requests_started
    with pytest.raises(AccessDeniedError, match="CN 'carol'.*not mapped"):
        served.client(pki, "carol")
    assert (daemon.admitted, daemon.requests_started) == (admitted, started)


def test_the_client_verifies_the_daemon(pki: Pki, served: InProcessDaemon) -> None:
    """A daemon certificate the client's CA did not sign: refused by the client."""
    other_ca_cert = pki.root / "other-ca" / "ca.crt"
    wrong_ca = TlsClientConfig(pki.certs["alice"].cert, pki.certs["alice"].key, other_ca_cert)
    with pytest.raises(AccessDeniedError, match="certificate verify failed"):
        connect(address=served.address, tls=wrong_ca)
    # a node certificate names localhost / 127.0.0.1 only: another host name fails its check
    with pytest.raises((AccessDeniedError, DaemonUnavailableError)):
        port = served.address.rsplit(":", 1)[1]
        connect(address=f"tls://127.0.0.2:{port}", tls=pki.tls("alice"), timeout=2.0)


def test_client_argument_errors(pki: Pki) -> None:
    with pytest.raises(CertificateError, match="tls://HOST:PORT"):
        connect(address="tcp://127.0.0.1:1", tls=pki.tls("alice"))
    with pytest.raises(CertificateError, match="not both"):
        connect("/tmp/x.sock", address="tls://127.0.0.1:1", tls=pki.tls("alice"))
    missing = TlsClientConfig(pki.root / "nope.crt", pki.certs["alice"].key, pki.ca.cert)
    with pytest.raises(CertificateError) as caught:
        connect(address="tls://127.0.0.1:1", tls=missing)
    assert caught.value.path == str(pki.root / "nope.crt")


def test_nobody_listening_is_unavailable(pki: Pki) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # a port nobody listens on
    with pytest.raises(DaemonUnavailableError):
        connect(address=f"tls://127.0.0.1:{port}", tls=pki.tls("alice"))


def test_a_policy_reload_keeps_tls_connections_their_cn_still_maps(
    pki: Pki, served: InProcessDaemon
) -> None:
    with served.client(pki, "alice") as alice, served.client(pki, "ops") as ops:
        summary = ops.reload_policy()
        assert summary["closed_connections"] == []
        assert alice.ping() > 0 and alice.name == "alice"


# -- isolation ----------------------------------------------------------------------------------


def _error_of(fn: Any) -> str | None:
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__
    return None


def test_tenant_isolation_by_certificate(pki: Pki, served: InProcessDaemon) -> None:
    """Tenant bob (his certificate) sees none of alice's consumers, statistics, state or
    signals, may not run admin operations, and is held to his quotas; alice's state survives."""
    with served.client(pki, "ops") as ops, served.client(pki, "alice") as alice:
        (snap,) = [s for s in ops.services() if s.module == "tdes"]
        sid = snap.service_id
        enc = alice.get_service("EncryptionService")
        enc.load_key(KEY)
        buf = bytearray(b"alice's secret..")
        enc.encrypt(buf, 16)
        assert bytes(buf) == tdes(KEY, b"alice's secret..")
        with served.client(pki, "bob") as bob:
            assert (bob.name, bob.admin, bob.identity["tenant"]) == ("bob", False, True)
            (service,) = bob.services()
            assert "alice" not in service.consumers
            assert [t.name for t in bob.tenants()] == ["bob"]
            stats = bob.statistics(sid)
            assert "alice" not in stats.per_consumer
            proxy = bob.get_service("EncryptionService")
            with pytest.raises(ServiceStateError):  # alice's key is not his
                proxy.encrypt(bytearray(16), 16)
            proxy.load_key(BOB_KEY)
            data = bytes(range(32))
            mine = bytearray(data)
            proxy.encrypt(mine, len(mine))
            assert bytes(mine) == tdes(BOB_KEY, data)
            assert sorted(bob.statistics(sid).per_consumer) == ["bob"]
            for op in (
                lambda: bob.juggle(to_hardware=sid),
                lambda: bob.set_tier(sid, "software"),
                lambda: bob.install("/nonexistent"),
                bob.reload_policy,
            ):
                assert _error_of(op) == "AccessDeniedError"
            assert bob.signals().tenant == "bob"
            assert [_error_of(lambda: bob.get_service("EncryptionService")) for _ in range(2)] == [
                None,
                "QuotaExceededError",
            ]  # holds 1, may hold 2
            quota = {_error_of(lambda: proxy.encrypt(bytearray(8), 8)) for _ in range(60)}
            assert "QuotaExceededError" in quota
        # alice's state survived bob's key: her calls still use her key
        data = os.urandom(64)
        buf = bytearray(data)
        enc.encrypt(buf, 64)
        assert bytes(buf) == tdes(KEY, data)
        assert alice.signals().tenant == "alice"
        assert "alice" in ops.statistics(sid).per_consumer  # the admin sees every consumer
        assert {t.name for t in ops.tenants()} == {"alice", "bob"}


# -- limits -------------------------------------------------------------------------------------


def test_frames_are_bounded_as_on_the_unix_socket(pki: Pki, served: InProcessDaemon) -> None:
    with served.client(pki, "alice") as alice:
        enc = alice.get_service("EncryptionService")
        enc.load_key(KEY)
        buf = bytearray(os.urandom(2048))  # under the tenant's 4096-byte frames: copied
        want = tdes(KEY, bytes(buf))
        enc.encrypt(buf, len(buf))
        assert bytes(buf) == want
        with pytest.raises(DaemonUnavailableError, match=r"outside 1\.\.4096"):
            enc.encrypt(bytearray(8192), 8192)  # the daemon closes the connection


def test_no_shared_memory_over_tls(pki: Pki, served: InProcessDaemon) -> None:
    with served.client(pki, "ops", call_timeout=10.0) as ops:
        with pytest.raises(ProtocolError, match="pass bytearrays"):
            ops.buffer(4096)  # refused by the client
        with pytest.raises(ProtocolError, match="buffers travel in the frames"):
            ops._ok("segment", size=4096)  # and by the daemon, asked anyway
        enc = ops.get_service("EncryptionService")
        enc.load_key(KEY)
        buf = bytearray(os.urandom(64 << 10))  # above the shm threshold: copied instead
        want = tdes(KEY, bytes(buf))
        enc.encrypt(buf, len(buf))
        assert bytes(buf) == want


def test_handshakes_count_against_max_connections_and_time_out(pki: Pki) -> None:
    """Two silent TCP peers fill a daemon of max_connections = 2: a third peer is refused at
    once; the silent ones are dropped at the handshake timeout, and then a client gets in."""
    daemon = InProcessDaemon(pki, POLICY + "\n[limits]\nmax_connections = 2\n", 2.0)
    host, port = daemon.daemon.tls_address or ("", 0)
    silent = [socket.create_connection((host, port), timeout=20) for _ in range(2)]
    try:
        with pytest.raises(DaemonUnavailableError, match="during the TLS handshake"):
            daemon.client(pki, "alice")
        for peer in silent:  # the daemon closes each at its handshake deadline
            assert peer.recv(1) == b""
        assert daemon.daemon.tls_refused == 2
        with daemon.client(pki, "alice") as alice:
            assert alice.name == "alice"
    finally:
        for peer in silent:
            peer.close()
        daemon.close()


def test_tls_requires_all_its_files(pki: Pki, tmp_path: Path) -> None:
    from juggle.daemon.command import tls_config

    with pytest.raises(CertificateError, match="--tls-key, --tls-ca"):
        tls_config("127.0.0.1:0", pki.node.cert, None, None)
    with pytest.raises(CertificateError, match="--tls-ca needs --tls"):
        tls_config(None, None, None, pki.ca.cert)
    with pytest.raises(CertificateError, match="HOST:PORT"):
        tls_config("nohost", None, None, None)
    from juggle.daemon.tls import server_context

    with pytest.raises(CertificateError, match="nope.key"):
        server_context(pki.node.cert, tmp_path / "nope.key", pki.ca.cert)
