"""The daemon's sessions in process (juggle.daemon.sessions): whose service state a remote
proxy may use, and what the daemon keeps of states, through the framework's public API
(``Framework.proxy_info``) only. The same rules are checked across processes and uids in
test_state_ownership.py; here they run without sockets, so every path is quick to reach."""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from Crypto.Cipher import DES3
from daemon_support import MODULES

import juggle
from juggle.daemon.policy import Identity, default_limits
from juggle.daemon.quotas import Accounts
from juggle.daemon.sessions import Connection, Handle, Sessions
from juggle.errors import KeyNotLoadedError, ServiceStateError

KEY_A = bytes(range(1, 25))
KEY_B = bytes(range(101, 125))
DATA = bytes(range(32))


def tdes(key: bytes, data: bytes) -> bytes:
    return bytes(DES3.new(key, DES3.MODE_ECB).encrypt(data))


def tdes_module(tmp_path: Path, *, per_consumer: bool) -> Path:
    target = tmp_path / "tdes"
    shutil.copytree(MODULES / "tdes", target)
    toml = target / "juggle.toml"
    toml.write_text(
        toml.read_text().replace(
            "per_consumer = false", f"per_consumer = {str(per_consumer).lower()}"
        )
    )
    return target


class Harness:
    """A framework with the tdes module, the daemon's sessions over it, and connections
    of named tenants on socket pairs (nothing reads them: replies are not sent here)."""

    def __init__(self, tmp_path: Path, *, per_consumer: bool) -> None:
        self.fw = juggle.Framework("xupv2p")
        self.module = self.fw.install(tdes_module(tmp_path, per_consumer=per_consumer))
        self.module.start()
        self.accounts = Accounts(default_limits(1024, 8 << 20))
        self.sessions = Sessions(lambda: self.fw, self.accounts)
        self.loop = asyncio.new_event_loop()
        self._socks: list[socket.socket] = []
        self._ids = iter(range(1, 1000))

    def connect(self, tenant: str) -> Connection:
        ours, theirs = socket.socketpair()
        self._socks += [ours, theirs]
        ident = Identity(name=tenant, tenant=True, admin=False, uid=1, gid=1, pid=1)
        return Connection(
            next(self._ids), ident, ours, self.loop, limits=self.accounts.limits.tenant
        )

    def encrypt(self, handle: Handle) -> bytes:
        buf = bytearray(DATA)
        handle.invoke("encrypt", [buf, len(buf)], {})
        return bytes(buf)

    def close(self) -> None:
        self.fw.close()
        self.loop.close()
        for sock in self._socks:
            sock.close()


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path, per_consumer=False)
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def per_consumer(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path, per_consumer=True)
    try:
        yield harness
    finally:
        harness.close()


def test_a_tenant_never_uses_state_another_tenant_left_and_gets_its_own_back(
    shared: Harness,
) -> None:
    sessions = shared.sessions
    alice = shared.connect("alice")
    enc = sessions.acquire(alice, "EncryptionService", None)
    assert enc.methods == {"load_key": True, "encrypt": False, "decrypt": False}
    enc.invoke("load_key", [KEY_A], {})
    assert shared.encrypt(enc) == tdes(KEY_A, DATA)
    assert sessions.drop(alice, enc) is True
    assert sessions.drop(alice, enc) is False  # given back once
    # bob set no state: alice's key, still in the implementation, is not his
    bob = shared.connect("bob")
    benc = sessions.acquire(bob, "EncryptionService", None)
    with pytest.raises(ServiceStateError, match="tenant 'bob'.*call load_key first"):
        shared.encrypt(benc)
    benc.invoke("load_key", [KEY_B], {})
    assert shared.encrypt(benc) == tdes(KEY_B, DATA)
    # alice back, on a new connection, without load_key: her kept key, replayed
    again = shared.connect("alice")
    aenc = sessions.acquire(again, "EncryptionService", None)
    assert shared.encrypt(aenc) == tdes(KEY_A, DATA)
    assert shared.encrypt(benc) == tdes(KEY_B, DATA)  # and bob's his, replayed in turn


def test_a_state_nobody_set_is_used_as_it_is(shared: Harness) -> None:
    """No client ever set the service's state: a call runs on whatever it has (here: no key,
    the service's own error), it is not refused as another tenant's."""
    carol = shared.connect("carol")
    enc = shared.sessions.acquire(carol, "EncryptionService", None)
    with pytest.raises(KeyNotLoadedError, match="NativeTDES: load_key"):
        shared.encrypt(enc)


def test_reconnects_to_a_per_consumer_service_keep_one_guard_per_consumer(
    per_consumer: Harness,
) -> None:
    """Each new proxy of a per-consumer service has a new state: the guard of the one
    before goes with it, however often a tenant comes back (the daemon's memory stays
    bounded), and the tenant's kept key still serves it."""
    sessions = per_consumer.sessions
    for round_ in range(20):
        conn = per_consumer.connect("alice")
        enc = sessions.acquire(conn, "EncryptionService", None)
        if round_ == 0:
            enc.invoke("load_key", [KEY_A], {})
        assert per_consumer.encrypt(enc) == tdes(KEY_A, DATA)
        sessions.drop(conn, enc)
        assert len(sessions._guards) == 1, round_


def test_guards_and_kept_states_go_with_their_service(shared: Harness) -> None:
    sessions = shared.sessions
    alice = shared.connect("alice")
    enc = sessions.acquire(alice, "EncryptionService", None)
    enc.invoke("load_key", [KEY_A], {})
    assert sessions._kept and sessions._guards
    shared.module.uninstall()
    sessions.drop(alice, enc)  # the service is gone: nothing is kept for it any more
    assert sessions._kept == {} and sessions._guards == {}
