"""The juggle daemon end to end: real daemon processes, clients in this and other processes,
other uids (when the tests run as root), crashes, restarts and malformed frames (issue 11)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
from Crypto.Cipher import DES3
from daemon_support import (
    MODULES,
    NOBODY,
    DaemonProcess,
    run_as,
    running_as_root,
    start_worker,
    wait_until,
    worker_json,
)
from daemon_worker import probe_mode, realtime_mode, tenant_mode

from juggle.commands.remote import run_remote
from juggle.daemon import (
    DaemonShuttingDownError,
    DaemonUnavailableError,
    connect,
)
from juggle.daemon.protocol import PROTOCOL_VERSION
from juggle.errors import (
    BlockSizeError,
    ConfigurationError,
    FilterSyntaxError,
    KeyLengthError,
    ServiceUnavailableError,
    UnknownServiceError,
)
from juggle.runtime.snapshots import RegionSnapshot, ServiceSnapshot, ServiceStatistics
from juggle.runtime.tracing import CallStats

#: Seconds the socket is fuzzed for (``make fuzz-daemon`` sets 30).
FUZZ_SECONDS = float(os.environ.get("JUGGLE_FUZZ_SECONDS", "2"))
KEY = bytes.fromhex("0123456789ABCDEF23456789ABCDEF01456789ABCDEF0123")
OTHER_KEY = bytes.fromhex("FEDCBA9876543210A1B2C3D4E5F60718293A4B5C6D7E8F90")


def tdes(key: bytes, data: bytes) -> bytes:
    return bytes(DES3.new(key, DES3.MODE_ECB).encrypt(data))


def service_id(client: Any) -> int:
    (snap,) = [s for s in client.services() if s.module == "tdes"]
    return int(snap.service_id)


def policy(*tenants: str, admin_uids: str = "[0]") -> str:
    return f'version = 1\nadmin_uids = {admin_uids}\nsocket_mode = "0666"\n' + "".join(tenants)


def tenant(name: str, uid: int, extra: str = "") -> str:
    return f'\n[[tenants]]\nname = "{name}"\nuids = [{uid}]\n{extra}'


# -- calls ------------------------------------------------------------------------------------


def test_calls_in_place_through_socket_and_shared_memory(shared_daemon: DaemonProcess) -> None:
    with shared_daemon.client() as client:
        enc = client.get_service("EncryptionService")
        assert enc.methods == ("load_key", "encrypt", "decrypt")
        enc.load_key(KEY)
        for size in (8, 4096, 8 << 10, 64 << 10, 200 << 10):  # inline, then shared memory
            data = os.urandom(size)
            buf = bytearray(data)
            assert enc.encrypt(buf, size) == size
            assert bytes(buf) == tdes(KEY, data), size
            assert enc.decrypt(buf, size) == size
            assert bytes(buf) == data
        # a writable memoryview, only part of it encrypted
        backing = bytearray(os.urandom(32 << 10))
        view = memoryview(backing)[8:]
        before = bytes(backing)
        enc.encrypt(view, 16 << 10)
        assert backing[:8] == before[:8]
        assert bytes(backing[8 : 8 + (16 << 10)]) == tdes(KEY, before[8 : 8 + (16 << 10)])
        assert backing[8 + (16 << 10) :] == before[8 + (16 << 10) :]
        # a shared buffer: no copy at all, also for a slice of its view
        shared = client.buffer(64 << 10)
        data = os.urandom(64 << 10)
        shared[:] = data
        enc.encrypt(shared, 64 << 10)
        assert bytes(shared) == tdes(KEY, data)
        part = shared.view[1024:2048]
        part[:] = data[:1024]
        enc.encrypt(part, 1024)
        assert bytes(shared.view[1024:2048]) == tdes(KEY, data[:1024])


def test_errors_come_back_as_the_same_classes(shared_daemon: DaemonProcess) -> None:
    with shared_daemon.client() as client:
        enc = client.get_service("EncryptionService")
        with pytest.raises(KeyLengthError):
            enc.load_key(b"short")
        enc.load_key(KEY)
        with pytest.raises(BlockSizeError, match="multiple of the 8-byte block"):
            enc.encrypt(bytearray(7), 7)
        with pytest.raises(ServiceUnavailableError):
            client.get_service("NoSuchService")
        with pytest.raises(FilterSyntaxError):
            client.get_service("EncryptionService", filter="(((")
        with pytest.raises(UnknownServiceError):
            client.statistics(9999)
        sid = service_id(client)
        stats = client.statistics(sid)
        assert isinstance(stats, ServiceStatistics)
        assert isinstance(stats.total, CallStats)
        assert stats.per_consumer["root"].calls >= 2
        assert all(isinstance(s, ServiceSnapshot) for s in client.services())
        assert all(isinstance(r, RegionSnapshot) for r in client.regions())
        assert [m.name for m in client.modules()] == ["tdes"]


#: The storm of issue 11's acceptance line: client processes x threads, and admin juggles.
STORM_PROCESSES, STORM_THREADS, STORM_JUGGLES = 4, 4, 100


def test_processes_and_threads_with_distinct_keys_while_juggling(
    shared_daemon: DaemonProcess,
) -> None:
    """4 client processes x 4 threads, each with its own key, while the admin juggles the
    service 100 times: every result equals pycryptodome's. The juggles start once every thread
    of every process has a checked result, and the threads call until the last juggle is done."""
    workers = [
        start_worker("encrypt", str(shared_daemon.socket), str(seed), str(STORM_THREADS))
        for seed in range(STORM_PROCESSES)
    ]
    try:
        for proc in workers:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "calling", proc.communicate(timeout=60)
        with shared_daemon.client() as admin:
            sid = service_id(admin)
            before = admin.statistics(sid).per_tier
            tiers = []
            for juggle in range(STORM_JUGGLES):
                if juggle % 2 == 0:
                    tiers.append(admin.juggle(to_hardware=sid).tiers[sid])
                else:
                    tiers.append(admin.juggle(to_software=[sid]).tiers[sid])
            during = admin.statistics(sid).per_tier
            results = []
            for proc in workers:
                out, err = proc.communicate(input="", timeout=60)  # stdin closes: they stop
                assert proc.returncode == 0, err[-3000:]
                results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
    assert tiers == ["hardware", "native"] * (STORM_JUGGLES // 2)
    threads = [t for r in results for t in r["threads"]]
    assert len(threads) == STORM_PROCESSES * STORM_THREADS
    for t in threads:
        assert t["errors"] == [] and t["mismatches"] == 0, t
        assert t["calls"] > 1
    # calls were served by both tiers while the admin juggled
    for tier in ("hardware", "native"):
        assert during[tier].calls > (before[tier].calls if tier in before else 0), tier


def test_many_threads_share_one_connection(shared_daemon: DaemonProcess) -> None:
    """Threads take turns reading the one socket (leader and followers): none is left
    waiting for a reply another thread read, whatever the interleaving. Every round all
    threads call at once, so most wait while one reads."""
    rounds, count = 120, 8
    with shared_daemon.client(call_timeout=10.0) as client:
        failures: list[str] = []
        barrier = threading.Barrier(count, timeout=30)

        def run(seed: int) -> None:
            rng = random.Random(seed)
            key = bytes(rng.randrange(256) for _ in range(24))
            enc = client.get_service("EncryptionService")
            try:
                enc.load_key(key)
                for _ in range(rounds):
                    barrier.wait()
                    if rng.random() < 0.3:
                        client.ping()
                        continue
                    data = rng.randbytes(8 * rng.randrange(1, 4))
                    buf = bytearray(data)
                    enc.encrypt(buf, len(buf))
                    if bytes(buf) != tdes(key, data):
                        failures.append("mismatch")
            except Exception as exc:
                failures.append(repr(exc))
                barrier.abort()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(t.is_alive() for t in threads), "a thread hangs"
        assert failures == []


def test_client_killed_mid_call_releases_its_regions(spawn: Any, tmp_path: Any) -> None:
    """A client SIGKILLed while its call runs on the hardware-only DES service: within 1 s its
    tenant's virtual device is disconnected and holds no region, and its consumer is gone.

    The call is held in the driver (``HELD_DES_DRIVER``: the core is done, the region Busy)
    until the test writes the FIFO, right after the kill: the client dies during its call,
    whatever the machine's load."""
    release = tmp_path / "release"
    os.mkfifo(release)
    release_fd = os.open(release, os.O_RDWR | os.O_NONBLOCK)  # held open: the byte stays
    deshw = tmp_path / "deshw"
    shutil.copytree(MODULES / "des", deshw)
    (deshw / "held_des.py").write_text(HELD_DES_DRIVER.format(release=str(release)))
    (deshw / "juggle.toml").write_text(
        DES_HARDWARE_ONLY.replace("des_module.DesDriver", "held_des.HeldDesDriver")
    )
    uid = os.getuid()
    daemon = spawn(policy(tenant("holder", uid), admin_uids=f"[{uid}]"))
    holder: Any = None
    try:
        with daemon.client() as admin:
            admin.install(deshw)
            (des,) = [s for s in admin.services() if s.module == "deshw"]

            def device() -> Any:
                (snap,) = [t for t in admin.tenants() if t.name == "holder"]
                (dev,) = [d for d in snap.devices if d.device == "des"]
                return dev

            assert device().region is None
            holder = start_worker("hold", str(daemon.socket), "des")
            assert wait_until(lambda: device().running and device().region == "prr0", 30.0)
            (snap,) = [s for s in admin.services() if s.service_id == des.service_id]
            assert snap.consumers == ("holder",)
            holder.send_signal(signal.SIGKILL)
            holder.wait(10)
            t0 = time.monotonic()
            os.write(release_fd, b"x")  # the call the client died in ends now

            def released() -> bool:
                dev = device()
                (s,) = [s for s in admin.services() if s.service_id == des.service_id]
                return (
                    dev.state == "disconnected"
                    and dev.region is None
                    and not dev.running
                    and s.consumers == ()
                )

            assert wait_until(released, 1.0), (device(), admin.services())
            assert time.monotonic() - t0 < 1.0
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
        with contextlib.suppress(OSError):
            os.write(release_fd, b"x")
        os.close(release_fd)


# -- identity and isolation ---------------------------------------------------------------------


def test_unmapped_uid_is_refused(spawn: Any, shared_daemon: DaemonProcess) -> None:
    if running_as_root():
        daemon = spawn(policy(tenant("alice", 0)))
        mapped = worker_json("probe", str(daemon.socket))
        assert mapped["identity"]["name"] == "alice"
        refused = run_as(NOBODY, probe_mode, str(daemon.socket))
        assert refused["error"] == "AccessDeniedError"
        assert f"uid {NOBODY}" in refused["message"] and "not mapped" in refused["message"]
        # without a policy only the daemon's own uid may connect (the socket is 0600, too)
        alone = run_as(NOBODY, probe_mode, str(shared_daemon.socket))
        assert alone["error"] == "AccessDeniedError"
        assert "refused" in daemon.logs()
        # the admin maps nobody and reloads the policy: now it is let in, as bob
        assert daemon.policy is not None
        daemon.policy.write_text(policy(tenant("alice", 0), tenant("bob", NOBODY)))
        with daemon.client() as admin:
            summary = admin.reload_policy()
        assert summary["tenants"] == ["alice", "bob"]
        accepted = run_as(NOBODY, probe_mode, str(daemon.socket))
        assert accepted["identity"]["name"] == "bob" and not accepted["identity"]["admin"]
    else:  # map another uid only: this one is refused, then map it: accepted
        other = os.getuid() + 1
        daemon = spawn(policy(tenant("alice", other), admin_uids="[]"))
        refused = worker_json("probe", str(daemon.socket))
        assert refused["error"] == "AccessDeniedError"
        daemon2 = spawn(policy(tenant("alice", os.getuid())))
        assert worker_json("probe", str(daemon2.socket))["identity"]["name"] == "alice"


@pytest.mark.skipif(not running_as_root(), reason="needs a second uid (setuid in a child)")
def test_tenant_isolation(spawn: Any) -> None:
    """Tenant bob (another uid, another process) sees none of alice's consumers, statistics,
    state or signals, may not run admin operations, and is held to its quota."""
    daemon = spawn(
        policy(
            tenant("alice", 0, "priority = 1\n"),
            tenant("bob", NOBODY, 'model = "aware"\ncalls_per_s = 30\nmax_services = 2\n'),
        )
    )
    with daemon.client() as alice:
        assert alice.identity["name"] == "alice" and alice.admin
        alice.install(MODULES / "tdes")
        sid = service_id(alice)
        enc = alice.get_service("EncryptionService")
        enc.load_key(KEY)
        buf = bytearray(b"alice's secret..")
        enc.encrypt(buf, 16)
        bob = run_as(NOBODY, tenant_mode, str(daemon.socket))
        assert bob["identity"]["name"] == "bob"
        assert bob["identity"]["admin"] is False and bob["identity"]["tenant"] is True
        assert bob["service_consumers"] == []  # alice's consumer is not shown
        assert bob["tenants"] == ["bob"]
        assert bob["stats_consumers"] == [] and bob["stats_calls"] == 0
        assert bob["encrypt_without_key"] == "ServiceStateError"  # alice's key is not his
        assert bob["own_key_ok"] is True
        assert bob["stats_consumers_after"] == ["bob"] and bob["stats_calls_after"] == 2
        for op in ("juggle", "set_tier", "install", "reload_policy"):
            assert bob[op] == "AccessDeniedError", op
        assert bob["signals_tenant"] == "bob"
        assert bob["quota_errors"] == ["QuotaExceededError"]
        assert bob["services_quota"] == [None, "QuotaExceededError"]  # holds 1, may hold 2
        # alice's state survived bob's key: her calls still use her key
        data = os.urandom(64)
        buf = bytearray(data)
        enc.encrypt(buf, 64)
        assert bytes(buf) == tdes(KEY, data)
        stats = alice.statistics(sid)  # the admin sees every consumer
        assert "alice" in stats.per_consumer
        names = {t.name for t in alice.tenants()}
        assert names == {"alice", "bob"}


DES_HARDWARE_ONLY = """
[module]
name = "deshw"
version = "1.0.0"

[[services]]
interfaces = ["crypto.EncryptionService"]
properties = { algorithm = "des" }

[services.hardware]
driver = "des_module.DesDriver"
bitstreams = { prr0 = "bitstreams/des_prr0.bit" }
"""


#: The driver of the hardware-only DES copy of the next test: each call of a consumer, once
#: the core is done (the call still running, its region Busy), waits until the FIFO
#: ``RELEASE`` is readable. The test holds the FIFO open read-write and writes one byte,
#: which releases every call from then on; a call never released fails after 60 s.
HELD_DES_DRIVER = """
import os
import select

from juggle.services.crypto import DesDriver

RELEASE = {release!r}


def held():
    fd = os.open(RELEASE, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not select.select([fd], [], [], 60.0)[0]:
            raise RuntimeError("the test never released the call")
    finally:
        os.close(fd)


class HeldDesDriver(DesDriver):
    def load_key(self, key):
        super().load_key(key)
        held()

    def encrypt(self, buf, size):
        done = super().encrypt(buf, size)
        held()
        return done

    def decrypt(self, buf, size):
        done = super().decrypt(buf, size)
        held()
        return done
"""


@pytest.mark.skipif(not running_as_root(), reason="needs a second uid (setuid in a child)")
def test_aware_tenant_is_preempted_by_a_realtime_tenant_in_another_process(
    spawn: Any, tmp_path: Any
) -> None:
    """low (aware, priority 0) uses the TDES co-module in hardware; rt (real-time, another
    uid and process) needs the only region for hardware-only DES: low hears PREEMPT, its calls
    are answered from software while rt computes, and READY comes once the region is back.

    A real-time tenant holds the region only while its call runs: when the call ends, the
    region goes back to the preempted co-module waiting for it (Ker-ONE: the end of a call is
    the consistency point). So rt's DES driver holds each call, after the core is done, until
    the test releases it through a FIFO: low's calls land in software while rt's first call
    is held.
    """
    release = tmp_path / "release"
    os.mkfifo(release)
    release_fd = os.open(release, os.O_RDWR | os.O_NONBLOCK)  # held open: the byte stays
    deshw = tmp_path / "deshw"
    shutil.copytree(MODULES / "des", deshw)
    (deshw / "held_des.py").write_text(HELD_DES_DRIVER.format(release=str(release)))
    (deshw / "juggle.toml").write_text(
        DES_HARDWARE_ONLY.replace("des_module.DesDriver", "held_des.HeldDesDriver")
    )
    daemon = spawn(
        policy(
            tenant("low", 0, 'priority = 0\nmodel = "aware"\n'),
            tenant("rt", NOBODY, "realtime = true\n"),
        )
    )
    with daemon.client() as low:
        low.install(MODULES / "tdes")
        low.install(deshw)
        channel = low.signals()
        enc = low.get_service("EncryptionService", filter="(algorithm=tdes)")
        enc.load_key(KEY)
        low.juggle(to_hardware=enc.service_id)
        stop = threading.Event()
        seen: dict[str, int] = {"calls": 0, "wrong": 0, "failed": 0}

        def calls() -> None:
            while not stop.is_set():
                data = os.urandom(64)
                buf = bytearray(data)
                try:
                    enc.encrypt(buf, 64)
                    seen["wrong"] += bytes(buf) != tdes(KEY, data)
                except Exception:
                    seen["failed"] += 1
                seen["calls"] += 1

        def native_calls() -> int:
            return int(low.statistics(enc.service_id).per_tier["native"].calls)

        def rt_computes() -> bool:  # rt's first call, held: no other call of rt runs
            (rt_tenant,) = [t for t in low.tenants() if t.name == "rt"]
            (des,) = [d for d in rt_tenant.devices if d.device == "des"]
            return bool(des.running) and low.regions()[0].design == "des"

        caller = threading.Thread(target=calls)
        caller.start()
        outcome: dict[str, Any] = {}
        holder = threading.Thread(
            target=lambda: outcome.update(rt=run_as(NOBODY, realtime_mode, str(daemon.socket)))
        )
        holder.start()
        try:
            preempt = channel.wait_for("preempt", timeout=30)
            assert preempt is not None and preempt.tenant == "low"
            assert preempt.service_id == enc.service_id
            # rt's first call holds the region until released: low's calls go on meanwhile,
            # answered from software
            assert wait_until(rt_computes, 30.0)
            held_from = native_calls()
            assert wait_until(lambda: native_calls() > held_from, 30.0)
            assert rt_computes() and low.statistics(enc.service_id).tier == "native"
            os.write(release_fd, b"x")
            holder.join(60)
            rt = outcome["rt"]
            assert rt["identity"]["name"] == "rt" and rt["right"] == 3
            # rt is done: the co-module is back in hardware, and every PREEMPT low heard
            # (one per call of rt) was followed by READY once the region was back
            assert wait_until(lambda: low.statistics(enc.service_id).tier == "hardware", 30.0)
            heard = [str(preempt.kind)]

            def every_preempt_answered() -> bool:
                heard.extend(str(s.kind) for s in channel.drain())
                return heard.count("ready") == heard.count("preempt")

            assert wait_until(every_preempt_answered, 30.0), heard
            assert heard == ["preempt", "ready"] * (len(heard) // 2), heard
        finally:
            with contextlib.suppress(OSError):
                os.write(release_fd, b"x")
            stop.set()
            caller.join(30)
            holder.join(60)
            os.close(release_fd)
        assert seen["calls"] > 0 and seen["wrong"] == 0 and seen["failed"] == 0, seen
        per_tier = low.statistics(enc.service_id).per_tier
        assert per_tier["native"].calls > held_from  # answered from software meanwhile
        assert per_tier["hardware"].calls > 0


def test_operator_commands(shared_daemon: DaemonProcess) -> None:
    sock = shared_daemon.socket
    (service,) = run_remote(sock, "services")
    assert service["module"] == "tdes" and "tiers" in service
    assert run_remote(sock, "whoami")["admin"] is True
    assert run_remote(sock, "regions")[0]["name"] == "prr0"
    assert run_remote(sock, "stats", service_id=service["service_id"])["service_id"] == 1
    report = run_remote(sock, "tier", service_id=service["service_id"], tier="software")
    assert report["tiers"] == {service["service_id"]: "software"}
    run_remote(sock, "tier", service_id=service["service_id"], tier="native")
    assert json.dumps(run_remote(sock, "modules"))
    with pytest.raises(ConfigurationError, match="unknown daemon command"):
        run_remote(sock, "reboot")
    with pytest.raises(ConfigurationError, match="needs"):
        run_remote(sock, "stats")


# -- lifecycle ----------------------------------------------------------------------------------


def test_daemon_killed_and_restarted_keeps_modules_and_policy(spawn: Any) -> None:
    daemon = spawn(policy(tenant("alice", os.getuid(), "admin = true\n")))
    client = daemon.client(retry=True, timeout=15.0)
    try:
        channel = client.signals()  # a listener thread reads pushes from now on
        assert channel.tenant == "alice"
        client.install(MODULES / "tdes")
        enc = client.get_service("EncryptionService")
        enc.load_key(KEY)
        data = os.urandom(32)
        buf = bytearray(data)
        enc.encrypt(buf, 32)
        assert bytes(buf) == tdes(KEY, data)
        daemon.kill()  # SIGKILL: no cleanup at all
        with pytest.raises(DaemonUnavailableError):
            connect(daemon.socket, timeout=0.5)
        restarted = DaemonProcess(daemon.base)  # no --policy: the kept one
        restarted.start(with_policy=False)
        try:
            buf = bytearray(data)
            enc.encrypt(buf, 32)  # reconnects, gets the service again, replays its key
            assert bytes(buf) == tdes(KEY, data)
            assert client.name == "alice"
            (module,) = client.modules()
            assert module.name == "tdes" and module.state == "active"
            assert client.signals() is channel  # subscribed again on the new connection
        finally:
            restarted.kill()
        t0 = time.monotonic()
    finally:
        client.close()
    assert time.monotonic() - t0 < 1.0  # the listener saw the end and left
    assert not [t for t in threading.enumerate() if t.name == "juggle-client"]


def test_sigterm_lets_running_calls_finish_and_refuses_new_ones(spawn: Any) -> None:
    daemon = spawn()
    with daemon.client() as admin:
        admin.install(MODULES / "tdes")
        sid = service_id(admin)
        admin.set_tier(sid, "software")  # pure Python: a 96 KiB call takes a while
        slow = admin.get_service("EncryptionService")
        slow.load_key(KEY)
        data = os.urandom(96 << 10)
        buf = bytearray(data)
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["size"] = slow.encrypt(buf, len(buf))
            except Exception as exc:
                outcome["error"] = exc

        caller = threading.Thread(target=run)
        caller.start()
        assert wait_until(lambda: admin.statistics(sid).inflight == 1, 5.0)
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        with pytest.raises(DaemonUnavailableError) as refused:  # shutting down, or gone
            admin.regions()
        assert isinstance(refused.value, DaemonShuttingDownError) or not daemon.alive
        caller.join(30)
        assert outcome.get("size") == len(data), outcome
        assert bytes(buf) == tdes(KEY, data)
    assert daemon.proc.wait(20) == 0
    assert not daemon.socket.exists()
    assert "daemon stopped" in daemon.logs()
    with pytest.raises(DaemonUnavailableError):
        connect(daemon.socket, timeout=0.5)


# -- malformed frames ---------------------------------------------------------------------------


def _raw(daemon: DaemonProcess) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5.0)
    sock.connect(str(daemon.socket))
    header = sock.recv(4, socket.MSG_WAITALL)
    (length,) = struct.unpack(">I", header)
    sock.recv(length, socket.MSG_WAITALL)  # hello
    return sock


def _closed_by_daemon(sock: socket.socket) -> bool:
    """Read until the daemon closes the connection (True) or 5 s pass (False)."""
    try:
        while sock.recv(65536):
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    finally:
        sock.close()


def _frame(obj: Any) -> bytes:
    payload: bytes = msgpack.packb(obj)
    return struct.pack(">I", len(payload)) + payload


MALFORMED: dict[str, Callable[[random.Random], bytes]] = {
    "random bytes": lambda rng: rng.randbytes(rng.randrange(1, 300)),
    "huge length": lambda rng: struct.pack(">I", 0xFFFFFFFF) + b"\x80",
    "zero length": lambda rng: struct.pack(">I", 0),
    "wrong version": lambda rng: _frame({"v": PROTOCOL_VERSION + 1, "id": 1, "op": "ping"}),
    "no version": lambda rng: _frame({"id": 1, "op": "ping"}),
    "not a map": lambda rng: _frame([1, 2, 3]),
    "bad id": lambda rng: _frame({"v": PROTOCOL_VERSION, "id": "x", "op": "ping"}),
    "reserved id": lambda rng: _frame({"v": PROTOCOL_VERSION, "id": 0, "op": "ping"}),
    "no op": lambda rng: _frame({"v": PROTOCOL_VERSION, "id": 1}),
    "not msgpack": lambda rng: struct.pack(">I", 3) + b"\xc1\xc1\xc1",
    "deep nesting": lambda rng: struct.pack(">I", 100001) + b"\x91" * 100000 + b"\xc0",
    "unknown ext": lambda rng: _frame(
        {"v": PROTOCOL_VERSION, "id": 1, "op": "x", "a": msgpack.ExtType(9, b"")}
    ),
    "garbage payload": lambda rng: struct.pack(">I", 64) + rng.randbytes(64),
}


def test_malformed_frames_close_only_their_connection(shared_daemon: DaemonProcess) -> None:
    stop = threading.Event()
    good: dict[str, Any] = {"calls": 0, "bad": []}

    def well_behaved() -> None:
        with shared_daemon.client() as client:
            enc = client.get_service("EncryptionService")
            enc.load_key(OTHER_KEY)
            rng = random.Random(5)
            while not stop.is_set():
                data = rng.randbytes(8 * rng.randrange(1, 2048))
                buf = bytearray(data)
                try:
                    enc.encrypt(buf, len(buf))
                    if bytes(buf) != tdes(OTHER_KEY, data):
                        good["bad"].append("mismatch")
                except Exception as exc:
                    good["bad"].append(repr(exc))
                good["calls"] += 1

    thread = threading.Thread(target=well_behaved)
    thread.start()
    rng = random.Random(11)
    try:
        for name, make in MALFORMED.items():
            sock = _raw(shared_daemon)
            sock.sendall(make(rng))
            assert _closed_by_daemon(sock), name
        # a well-formed request for an unknown operation is an error reply, not a close
        sock = _raw(shared_daemon)
        sock.sendall(
            _frame({"v": PROTOCOL_VERSION, "id": 5, "op": "no-such-op"})
            + _frame({"v": PROTOCOL_VERSION, "id": 6, "op": "ping"})
        )
        replies = [_read_reply(sock), _read_reply(sock)]
        sock.close()
        assert replies[0]["err"][0] == "ProtocolError" and replies[1]["ok"] == "pong"
        # then fuzz: random bytes, frames cut short, oversized lengths, wrong versions, for
        # FUZZ_SECONDS ($JUGGLE_FUZZ_SECONDS)
        deadline = time.monotonic() + FUZZ_SECONDS
        fuzzed = 0
        while time.monotonic() < deadline:
            sock = _raw(shared_daemon)
            kind = rng.randrange(5)
            if kind == 0:
                sock.sendall(rng.randbytes(rng.randrange(1, 2000)))
            elif kind == 1:
                body = rng.randbytes(rng.randrange(1, 200))
                sock.sendall(struct.pack(">I", len(body)) + body)
            elif kind == 2:
                sock.sendall(struct.pack(">I", rng.randrange(1 << 24, 1 << 32)))
            elif kind == 3:
                version = rng.choice([0, 2, 3, 255, -1, "1", None])
                sock.sendall(_frame({"v": version, "id": rng.randrange(1, 99), "op": "ping"}))
            else:
                sock.sendall(struct.pack(">I", 1000) + rng.randbytes(10))
            sock.shutdown(socket.SHUT_WR)  # a frame cut short ends with the stream
            assert _closed_by_daemon(sock)
            fuzzed += 1
    finally:
        stop.set()
        thread.join(30)
    assert shared_daemon.alive, shared_daemon.logs()
    assert good["bad"] == [] and good["calls"] > 0
    assert fuzzed > 10
    with shared_daemon.client() as client:
        assert client.ping() < 5.0


def _read_reply(sock: socket.socket) -> dict[str, Any]:
    header = sock.recv(4, socket.MSG_WAITALL)
    (length,) = struct.unpack(">I", header)
    reply: dict[str, Any] = msgpack.unpackb(sock.recv(length, socket.MSG_WAITALL))
    return reply
