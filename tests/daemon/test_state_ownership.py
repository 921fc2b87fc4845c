"""Whose state a daemon tenant uses, and recover over the socket (issue 19, items 1 and 5).

Real daemon processes; every tenant is a client process of its own uid (forked children that
drop to the uid, as the suite runs as root): ``ops`` is root (admin), ``alice`` uid 65533,
``bob`` uid 65534 (nobody), ``carol`` uid 65532. A tenant uses only state it set itself (or its
``share_state`` group's); what alice set is kept for her alone after she disconnects or is
killed: a tenant that set no key gets ``ServiceStateError`` on every tier; with its own key its
own results; alice (and bob), back, their own results without ``load_key``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from Crypto.Cipher import DES3
from daemon_support import MODULES, NOBODY, DaemonProcess, make_base, run_as, running_as_root

import juggle.commands.cli
import juggle.commands.remote
import juggle.commands.simulate.scenarios  # what the CLI's entry point imports, before setuid
from juggle.daemon import connect
from juggle.daemon.policy import AccessPolicy, PeerCredentials
from juggle.errors import PolicyError, ServiceStateError

needs_root = pytest.mark.skipif(
    not running_as_root(), reason="needs other uids (setuid in forked children): run as root"
)

ALICE = 65533  # any uid will do for the kernel; the policy maps it by number
BOB = NOBODY
CAROL = 65532
ALICE_KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
BOB_KEY = bytes.fromhex("FEDCBA9876543210A1B2C3D4E5F60718293A4B5C6D7E8F90")
CAROL_KEY = bytes.fromhex("1F2E3D4C5B6A7988A1B2C3D4E5F6071829384756AABBCCDD")
SECRET = b"alice's secret, 32 bytes long..."
BUS_ERROR = b"BUSERROR"  # the faulty test driver raises OSError on a block starting so


def policy(share: str = "") -> str:
    """ops (root, admin), alice, bob and carol; ``share`` goes into alice's and carol's rules."""
    return (
        'version = 1\nadmin_uids = [0]\nsocket_mode = "0666"\n'
        '\n[[tenants]]\nname = "ops"\nuids = [0]\n'
        f'\n[[tenants]]\nname = "alice"\nuids = [{ALICE}]\n{share}'
        f'\n[[tenants]]\nname = "bob"\nuids = [{BOB}]\n'
        f'\n[[tenants]]\nname = "carol"\nuids = [{CAROL}]\n{share}'
    )


def tdes(key: bytes, data: bytes, *, decrypt: bool = False) -> bytes:
    cipher = DES3.new(key, DES3.MODE_ECB)
    return bytes(cipher.decrypt(data) if decrypt else cipher.encrypt(data))


def error_of(fn: Any) -> dict[str, str] | None:
    try:
        fn()
    except Exception as exc:
        return {"type": type(exc).__name__, "message": str(exc)}
    return None


@pytest.fixture
def daemon() -> Any:
    """A daemon with the policy above and the tdes module installed by ops."""
    base = make_base()
    proc = DaemonProcess(base, policy()).start()
    with proc.client() as ops:
        ops.install(MODULES / "tdes")
    yield proc
    proc.kill()
    shutil.rmtree(base, ignore_errors=True)


def tdes_id(client: Any) -> int:
    (snap,) = [s for s in client.services() if s.module == "tdes"]
    return int(snap.service_id)


def consumers_gone(daemon: DaemonProcess, sid: int) -> bool:
    """The daemon released every tenant's proxy of ``sid`` (it saw its clients go)."""
    with daemon.client() as ops:
        (snap,) = [s for s in ops.services() if s.service_id == sid]
        return snap.consumers == ()


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.02)


# -- the tenants' processes (forked, then setuid: see daemon_support.run_as) -----------------


def alice_sets_her_key(socket: str) -> dict[str, Any]:
    """Alice loads her key, encrypts her secret and disconnects; her ciphertext."""
    with connect(socket) as client:
        enc = client.get_service("EncryptionService")
        enc.load_key(ALICE_KEY)
        buf = bytearray(SECRET)
        enc.encrypt(buf, len(buf))
        return {"name": client.identity["name"], "ciphertext": bytes(buf).hex()}


def newcomer_tries(socket: str, ciphertext_hex: str, key_hex: str) -> dict[str, Any]:
    """A tenant that never set a key, on alice's ciphertext; then with its own key."""
    ciphertext, key = bytes.fromhex(ciphertext_hex), bytes.fromhex(key_hex)
    with connect(socket) as client:
        enc = client.get_service("EncryptionService")
        out: dict[str, Any] = {"name": client.identity["name"]}
        buf = bytearray(ciphertext)
        out["decrypt_without_key"] = error_of(lambda: enc.decrypt(buf, len(buf)))
        out["untouched"] = bytes(buf) == ciphertext
        out["encrypt_without_key"] = error_of(lambda: enc.encrypt(bytearray(8), 8))
        enc.load_key(key)
        buf = bytearray(ciphertext)
        enc.decrypt(buf, len(buf))
        out["decrypted_with_own_key"] = bytes(buf).hex()
        data = bytes(range(64))
        buf = bytearray(data)
        enc.encrypt(buf, len(buf))
        out["encrypted_with_own_key"] = bytes(buf).hex()
        out["tier"] = next(s.tier for s in client.services() if s.module == "tdes")
        return out


def comes_back(socket: str, ciphertext_hex: str) -> dict[str, Any]:
    """A tenant, reconnected, decrypts alice's ciphertext without calling load_key."""
    ciphertext = bytes.fromhex(ciphertext_hex)
    with connect(socket) as client:
        enc = client.get_service("EncryptionService")
        buf = bytearray(ciphertext)
        failed = error_of(lambda: enc.decrypt(buf, len(buf)))
        return {"name": client.identity["name"], "error": failed, "plaintext": bytes(buf).hex()}


def check_newcomer(
    uid: int, name: str, key: bytes, socket: str, ciphertext: bytes, tier: str
) -> None:
    """Tenant ``name`` (``uid``), which never set a key, gets ServiceStateError for every call
    without one, its buffer untouched; with ``key``, its own results (pycryptodome's)."""
    out = run_as(uid, newcomer_tries, socket, ciphertext.hex(), key.hex())
    assert out["name"] == name and out["tier"] == tier
    for attempt in ("decrypt_without_key", "encrypt_without_key"):
        failed = out[attempt]
        assert failed is not None, f"{name}'s {attempt} used alice's state on the {tier} tier"
        assert failed["type"] == ServiceStateError.__name__, failed
        assert f"not by tenant {name!r}" in failed["message"], failed
        assert "load_key" in failed["message"], failed
    assert out["untouched"], f"{name}'s refused call changed the buffer"
    # with its own key, its own results: alice's ciphertext stays unreadable to it
    mine = bytes.fromhex(out["decrypted_with_own_key"])
    assert mine == tdes(key, ciphertext, decrypt=True) and mine != SECRET
    assert bytes.fromhex(out["encrypted_with_own_key"]) == tdes(key, bytes(range(64)))


# -- state belongs to whoever set it ------------------------------------------------------------


@needs_root
def test_alice_state_is_unusable_by_bob_after_she_disconnects(daemon: DaemonProcess) -> None:
    """Alice sets her key and leaves; bob without a key gets ServiceStateError on the native
    tier, carol on the hardware tier (alice's key is in the core when the service is juggled
    in); with their own keys their own results. Alice and bob, back, decrypt without
    load_key, each with the key kept for them."""
    socket = str(daemon.socket)
    with daemon.client() as ops:
        sid = tdes_id(ops)
    alice = run_as(ALICE, alice_sets_her_key, socket)
    assert alice["name"] == "alice"
    ciphertext = bytes.fromhex(alice["ciphertext"])
    assert ciphertext == tdes(ALICE_KEY, SECRET)
    wait_for(lambda: consumers_gone(daemon, sid), 10.0, "the daemon released alice's proxy")

    check_newcomer(BOB, "bob", BOB_KEY, socket, ciphertext, "native")

    # alice's key goes back into the implementation (kept for her), then into the core
    back = run_as(ALICE, comes_back, socket, alice["ciphertext"])
    assert back["name"] == "alice" and back["error"] is None, back
    assert bytes.fromhex(back["plaintext"]) == SECRET
    with daemon.client() as ops:
        assert ops.juggle(to_hardware=sid).tiers[sid] == "hardware"
    check_newcomer(CAROL, "carol", CAROL_KEY, socket, ciphertext, "hardware")

    # carol's key is in the core now: bob's and alice's states are theirs still, each
    # replayed before their call
    back = run_as(BOB, comes_back, socket, alice["ciphertext"])
    assert back["name"] == "bob" and back["error"] is None, back
    assert bytes.fromhex(back["plaintext"]) == tdes(BOB_KEY, ciphertext, decrypt=True)
    back = run_as(ALICE, comes_back, socket, alice["ciphertext"])
    assert back["name"] == "alice" and back["error"] is None, back
    assert bytes.fromhex(back["plaintext"]) == SECRET


def alice_holds_on(socket: str, write_fd: int) -> None:
    """Alice loads her key, encrypts, reports the ciphertext on ``write_fd`` and stays
    connected until killed."""
    client = connect(socket)
    enc = client.get_service("EncryptionService")
    enc.load_key(ALICE_KEY)
    buf = bytearray(SECRET)
    enc.encrypt(buf, len(buf))
    os.write(write_fd, bytes(buf).hex().encode() + b"\n")
    while True:  # connected, calling, until SIGKILL
        enc.encrypt(bytearray(SECRET), len(SECRET))


@needs_root
def test_alice_state_is_unusable_by_bob_after_she_is_killed(daemon: DaemonProcess) -> None:
    """Alice, in a process of her own uid, is SIGKILLed while connected (and calling): once
    the daemon has seen her go, bob without a key gets ServiceStateError, with his key his
    own results."""
    socket = str(daemon.socket)
    with daemon.client() as ops:
        sid = tdes_id(ops)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # alice
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(ALICE)
            os.setuid(ALICE)
            alice_holds_on(socket, write_end)
        finally:
            os._exit(1)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as reader:
            line = reader.readline()
        assert line, "alice's process ended before it encrypted"
        ciphertext = bytes.fromhex(line.decode().strip())
        assert ciphertext == tdes(ALICE_KEY, SECRET)
        with daemon.client() as ops:
            (snap,) = [s for s in ops.services() if s.service_id == sid]
            assert snap.consumers == ("alice",)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    wait_for(lambda: consumers_gone(daemon, sid), 10.0, "the daemon saw alice killed")
    check_newcomer(BOB, "bob", BOB_KEY, socket, ciphertext, "native")


def carol_uses_the_group_key(socket: str) -> dict[str, Any]:
    with connect(socket) as client:
        enc = client.get_service("EncryptionService")
        buf = bytearray(SECRET)
        failed = error_of(lambda: enc.encrypt(buf, len(buf)))
        return {"name": client.identity["name"], "error": failed, "out": bytes(buf).hex()}


@needs_root
def test_share_state_group_uses_one_state(tmp_path: Path) -> None:
    """Tenants of one ``share_state`` group use the state one of them set (gone or not); a
    tenant outside it does not."""
    base = make_base()
    proc = DaemonProcess(base, policy('share_state = "mail"\n')).start()
    try:
        with proc.client() as ops:
            ops.install(MODULES / "tdes")
        socket = str(proc.socket)
        alice = run_as(ALICE, alice_sets_her_key, socket)
        carol = run_as(CAROL, carol_uses_the_group_key, socket)
        assert carol["name"] == "carol" and carol["error"] is None, carol
        assert bytes.fromhex(carol["out"]) == bytes.fromhex(alice["ciphertext"])
        bob = run_as(BOB, carol_uses_the_group_key, socket)
        assert bob["name"] == "bob"
        assert bob["error"] is not None and bob["error"]["type"] == "ServiceStateError"
    finally:
        proc.kill()
        shutil.rmtree(base, ignore_errors=True)


# -- recover over the socket --------------------------------------------------------------------

FAULTY_CODE = '''
from juggle.services.crypto import NativeTDES, SoftwareTDES, TdesDriver
from juggle.services.crypto.model import TdesCore


class FaultyDriver(TdesDriver):
    """The TDES driver, with a bus error on a block that starts with b"BUSERROR"."""

    def encrypt(self, buf, size):
        if bytes(memoryview(buf)[:8]) == b"BUSERROR":
            raise OSError(5, "bus error (test driver)")
        return super().encrypt(buf, size)
'''


def faulty_module(where: Path) -> Path:
    """The tdes co-module whose driver raises a bus error on demand (a hardware fault)."""
    target = where / "tdesfault"
    shutil.copytree(MODULES / "tdes", target)
    (target / "tdes_module.py").write_text(FAULTY_CODE)
    toml = (target / "juggle.toml").read_text()
    toml = toml.replace('name = "tdes"', 'name = "tdesfault"')
    toml = toml.replace('"tdes_module.TdesDriver"', '"tdes_module.FaultyDriver"')
    (target / "juggle.toml").write_text(toml)
    return target


def juggle_cli(socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``juggle --connect SOCKET ARGS --json`` in a process of its own."""
    code = "import sys; from juggle.commands.cli import main; sys.argv[0] = 'juggle'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "--connect", str(socket), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        check=False,
    )


def cli_in_child(argv: list[str]) -> dict[str, Any]:
    """``juggle ARGV`` run by the CLI's entry point in this (forked) process: its exit code
    and output (how a tenant's uid runs it: the interpreter itself may be out of its reach)."""
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["juggle", *argv]
    code: Any = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            juggle.commands.cli.main()
        except SystemExit as done:
            code = done.code
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def audit_lines(daemon: DaemonProcess, what: str = "") -> list[str]:
    """The daemon's audit lines (those naming ``what``, when given)."""
    return [
        line for line in daemon.log.read_text().splitlines() if "audit:" in line and what in line
    ]


@needs_root
def test_recover_over_the_socket_from_the_shell(tmp_path: Path) -> None:
    """A bus error quarantines prr0 (ERROR; the call is served by software); bob's
    ``juggle --connect S recover prr0`` is refused (AccessDeniedError), ops's brings the
    region and the service back into hardware; each leaves an audit line naming who, what,
    when and the result."""
    base = make_base()
    module = faulty_module(base)
    module.chmod(0o755)
    daemon = DaemonProcess(base, policy()).start()
    try:
        with daemon.client() as ops:
            ops.install(module)
            (sid,) = [s.service_id for s in ops.services() if s.module == "tdesfault"]
            assert ops.juggle(to_hardware=sid).tiers[sid] == "hardware"
            enc = ops.get_service("EncryptionService")
            enc.load_key(ALICE_KEY)
            buf = bytearray(BUS_ERROR + SECRET[:8])
            enc.encrypt(buf, len(buf))  # a fault: served by software, region quarantined
            assert bytes(buf) == tdes(ALICE_KEY, BUS_ERROR + SECRET[:8])
            (prr0,) = [r for r in ops.regions() if r.name == "prr0"]
            assert prr0.state == "ERROR"
            assert [s.tier for s in ops.services() if s.service_id == sid] != ["hardware"]

            # the CLI in this process first: what it imports is loaded before bob's setuid
            shown = cli_in_child(["--connect", str(daemon.socket), "regions", "--json"])
            assert shown["code"] == 0 and "prr0" in shown["stdout"], shown
            argv = ["--connect", str(daemon.socket), "recover", "prr0", "--json"]
            refused = run_as(BOB, cli_in_child, argv)
            assert refused["code"] == 2, refused
            assert json.loads(refused["stdout"])["type"] == "AccessDeniedError"
            assert "recover needs the admin group; 'bob' is no admin" in refused["stderr"]
            (prr0,) = [r for r in ops.regions() if r.name == "prr0"]
            assert prr0.state == "ERROR"

            done = juggle_cli(daemon.socket, "recover", "prr0")
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout)
            assert report["to_hardware"] == sid and report["region"] == "prr0"
            (prr0,) = [r for r in ops.regions() if r.name == "prr0"]
            assert prr0.state != "ERROR" and prr0.service_id == sid
            assert [s.tier for s in ops.services() if s.service_id == sid] == ["hardware"]
            data = bytes(range(16))
            buf = bytearray(data)
            enc.encrypt(buf, len(buf))  # in hardware again, with the key replayed
            assert bytes(buf) == tdes(ALICE_KEY, data)

            again = juggle_cli(daemon.socket, "recover", "prr0")  # not in ERROR now
            assert again.returncode == 2 and json.loads(again.stdout)["type"]
        lines = audit_lines(daemon, "asked to recover")
        assert len(lines) == 3, lines
        bob_line, ops_line, again_line = lines
        assert f"'bob' (uid {BOB}, pid " in bob_line and "recover 'prr0'" in bob_line
        assert "refused: AccessDeniedError" in bob_line
        assert "'ops' (uid 0, pid " in ops_line and "recover 'prr0'" in ops_line
        assert f"done: region emptied, service {sid} back in 'prr0'" in ops_line
        assert "refused: SanityCheckError" in again_line
        for line in lines:  # when: the UTC time in the line (and the log line's own)
            assert re.search(r" at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: ", line), line
    finally:
        daemon.kill()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("group", ["", "a b", "x" * 65, "mail/1"])
def test_a_bad_share_state_group_is_refused(group: str) -> None:
    text = f'version = 1\n[[tenants]]\nname = "alice"\nuids = [1]\nshare_state = "{group}"\n'
    with pytest.raises(PolicyError, match="share_state"):
        AccessPolicy.parse(text)
    good = AccessPolicy.parse(text.replace(f'"{group}"', '"mail"'))
    ident = good.identify(PeerCredentials(10, 1, 1))
    assert ident is not None and ident.share_state == "mail"
