"""The daemon bounded per tenant and in total (issue 19, item 3): descriptors, connections,
shared-memory segments, queued reply bytes and frame sizes have per-tenant and global limits;
decoding a frame is bounded before it allocates; ``accept`` errors back off; a frame split
across reads is served past descriptor 1,024. Real daemon processes; the hostile tenant is a
forked client process as ``nobody`` (uid 65534), the other tenant the test process (root)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import select
import signal
import socket
import struct
import termios
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_support import MODULES, NOBODY, DaemonProcess, run_as, running_as_root, wait_until

from juggle.daemon import connect
from juggle.daemon.policy import AccessPolicy, Identity, PeerCredentials, default_limits
from juggle.daemon.protocol import (
    HEADER,
    PROTOCOL_VERSION,
    InOut,
    frame,
    pack,
    unpack,
)
from juggle.errors import LimitExceededError, PolicyError, ProtocolError

needs_root = pytest.mark.skipif(
    not running_as_root(), reason="needs root: clients run as another uid (nobody)"
)

DEADLINE_S = 30.0


def policy(*tenants: str, limits: str = "") -> str:
    text = 'version = 1\nadmin_uids = [0]\nsocket_mode = "0666"\n' + "".join(tenants)
    return text + (f"\n[limits]\n{limits}" if limits else "")


def tenant(name: str, uid: int, extra: str = "") -> str:
    return f'\n[[tenants]]\nname = "{name}"\nuids = [{uid}]\n{extra}'


TWO_TENANTS = (tenant("mallory", NOBODY), tenant("alice", 0))


# -- process helpers ---------------------------------------------------------------------------


@contextlib.contextmanager
def nofile(limit: int) -> Iterator[None]:
    """RLIMIT_NOFILE (soft) of this process set to ``limit`` meanwhile: a daemon started
    inside inherits it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def full_log(daemon: DaemonProcess) -> str:
    """The daemon's whole log (``DaemonProcess.logs`` keeps only its end)."""
    return daemon.log.read_text()


def pid_of(daemon: DaemonProcess) -> int:
    assert daemon.proc is not None
    return daemon.proc.pid


def max_open_files(pid: int) -> int:
    """The soft "Max open files" of ``/proc/PID/limits``."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no Max open files line")


def open_fds(pid: int) -> list[int]:
    return sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd"))


def status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def reset_peak(pid: int) -> None:
    """Reset VmHWM (the peak RSS) of ``pid`` to its RSS now."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` (all threads), in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@contextlib.contextmanager
def held_as(uid: int, fn: Callable[..., Any], *args: Any) -> Iterator[Any]:
    """Run ``fn(*args)`` in a forked child that dropped to ``uid``; yield its JSON-able
    result while the child lives on, holding what it opened (its connections), until the
    block ends."""
    report_r, report_w = os.pipe()
    release_r, release_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(report_r)
            os.close(release_w)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                result: Any = {"result": fn(*args)}
            except BaseException as exc:
                result = {"crash": f"{type(exc).__name__}: {exc}"}
            os.write(report_w, json.dumps(result).encode())
            os.close(report_w)
            os.read(release_r, 1)  # until the parent closes its end
        finally:
            os._exit(0)
    os.close(report_w)
    os.close(release_r)
    try:
        chunks = []
        deadline = time.monotonic() + 120.0
        while True:
            ready, _, _ = select.select([report_r], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"child as uid {uid} did not report in time"
            chunk = os.read(report_r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        report = json.loads(b"".join(chunks) or b"{}")
        assert "result" in report, report
        yield report["result"]
    finally:
        os.close(release_w)
        os.close(report_r)
        try:
            deadline = time.monotonic() + 20.0
            while time.monotonic() < deadline and os.waitpid(pid, os.WNOHANG) == (0, 0):
                time.sleep(0.02)
        finally:
            with contextlib.suppress(ChildProcessError, ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


# -- a raw protocol client ---------------------------------------------------------------------


class Raw:
    """A client speaking the protocol by hand on a plain socket."""

    def __init__(self, path: Path | str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(DEADLINE_S)
        self.sock.connect(str(path))
        self.buf = b""
        self.hello = self.read()
        self.ids = iter(range(1, 1 << 30))

    def read(self) -> dict[str, Any]:
        """The next message (raises EOFError at the end of the stream)."""
        while True:
            if len(self.buf) >= HEADER.size:
                (length,) = HEADER.unpack_from(self.buf)
                if len(self.buf) >= HEADER.size + length:
                    payload = self.buf[HEADER.size : HEADER.size + length]
                    self.buf = self.buf[HEADER.size + length :]
                    return unpack(payload, trusted=True)
            data = self.sock.recv(1 << 20)
            if not data:
                raise EOFError
            self.buf += data

    def send(self, message: dict[str, Any]) -> int:
        request_id = next(self.ids)
        self.sock.sendall(frame(pack({"v": PROTOCOL_VERSION, "id": request_id, **message})))
        return request_id

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        request_id = self.send(message)
        while True:
            reply = self.read()
            if reply["id"] == request_id:
                return reply

    def close(self) -> None:
        self.sock.close()


def unread_bytes(sock: socket.socket) -> int:
    """Bytes sent on ``sock`` that its peer has not read yet (``SIOCOUTQ``)."""
    out = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
    return int(struct.unpack("i", out)[0])


# -- the policy's limits -------------------------------------------------------------------------


def test_default_limits_keep_a_1024_descriptor_daemon_serving() -> None:
    limits = default_limits(1024, 8 << 20)
    # headroom for the framework, the listener, logs and module files
    assert limits.descriptors == 1024 - 128
    assert limits.connections == limits.descriptors // 2
    # no tenant alone can take what the others need
    assert limits.tenant.descriptors * 4 == limits.descriptors
    assert limits.tenant.connections * 8 == limits.connections
    assert limits.tenant.segments <= limits.descriptors // 4
    assert limits.tenant.queued_bytes < limits.queued_bytes
    assert limits.connection_queued_bytes <= limits.tenant.queued_bytes
    assert limits.frame_bytes == limits.tenant.frame_bytes == 8 << 20
    huge = default_limits(1 << 20, 8 << 20)  # "unlimited": bounded all the same
    assert huge.descriptors <= 1 << 16 and huge.connections <= 1 << 12


def test_limits_table_and_tenant_fields_override_the_defaults() -> None:
    text = policy(
        tenant("alice", 1000, "max_connections = 3\nmax_frame_bytes = 65536\n"),
        tenant("bob", 1001),
        limits="max_descriptors = 500\ntenant_max_segments = 7\nmax_frame_bytes = 1048576\n"
        "connection_max_segments = 5\nmax_queued_bytes = 1048576\n",
    )
    access = AccessPolicy.parse(text, 0)
    limits = access.limits(1024, 8 << 20)
    assert limits.descriptors == 500
    assert limits.connections == 448  # not set: derived from RLIMIT_NOFILE
    assert limits.frame_bytes == 1 << 20
    assert limits.connection_segments == 5
    assert limits.queued_bytes == 1 << 20

    def ident(name: str, **kw: Any) -> Identity:
        return Identity(name, True, False, 1000, 1000, 1, **kw)

    alice = limits.for_identity(ident("alice", max_connections=3, max_frame_bytes=65536))
    assert (alice.connections, alice.segments, alice.frame_bytes) == (3, 7, 65536)
    bob = limits.for_identity(ident("bob"))
    assert (bob.connections, bob.segments) == (limits.tenant.connections, 7)
    # a tenant's frame never above the daemon's
    assert limits.for_identity(ident("x", max_frame_bytes=1 << 30)).frame_bytes == 1 << 20
    # the policy's identity carries the tenant's own fields
    found = access.identify(PeerCredentials(1, 1000, 1000))
    assert found is not None and found.max_connections == 3


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("max_connections = 0", "limits.max_connections"),
        ("max_queued_bytes = 10", "limits.max_queued_bytes"),
        ("tenant_max_frame_bytes = 1", "limits.tenant_max_frame_bytes"),
        ("max_sockets = 3", "limits.max_sockets"),
        ('max_segments = "many"', "limits.max_segments"),
    ],
)
def test_bad_limits_are_refused_naming_the_key(table: str, key: str) -> None:
    with pytest.raises(PolicyError, match=key.replace(".", r"\.")):
        AccessPolicy.parse(policy(tenant("alice", 1000), limits=table), 0)


# -- the daemon under a hostile tenant -----------------------------------------------------------


def _exhaust(path: str) -> dict[str, Any]:
    """As the hostile tenant: open connections until refused, then shared-memory segments on
    them until refused; the counts and the refusals."""
    clients: list[Any] = []
    connection_refusal: Any = None
    while len(clients) < 2000:
        try:
            clients.append(connect(path, timeout=20.0))
        except LimitExceededError as exc:
            connection_refusal = [type(exc).__name__, [exc.limit, exc.value]]
            break
    segments = []
    segment_refusals: list[Any] = []
    for client in clients:
        while True:
            try:
                segments.append(client.buffer(4096))
            except LimitExceededError as exc:
                segment_refusals.append([exc.limit, exc.value])
                break
        if segment_refusals[-1][0] != "connection_max_segments":
            break
    # a refused request leaves the connection serving
    pings = sum(1 for c in clients if c.ping() is not None) if clients else 0
    held_open.extend(clients)  # kept open while the test goes on
    held_open.extend(segments)
    return {
        "connections": len(clients),
        "connection_refusal": connection_refusal,
        "segments": len(segments),
        "segment_refusals": segment_refusals,
        "pings": pings,
    }


held_open: list[Any] = []  # what the hostile child holds (in the child)


@needs_root
def test_one_tenant_exhausting_its_limits_cannot_stop_another(spawn: Any) -> None:
    with nofile(1024):
        daemon = spawn(policy=policy(*TWO_TENANTS))
    pid = pid_of(daemon)
    assert max_open_files(pid) == 1024
    with daemon.client() as admin:
        admin.install(MODULES / "crc32")
    with held_as(NOBODY, _exhaust, str(daemon.socket)) as hostile:
        # the other tenant connects, calls, and uses shared memory as usual
        clients = [daemon.client() for _ in range(4)]
        try:
            for client in clients:
                assert client.identity["name"] == "alice"
                crc = client.get_service("ChecksumService")
                data = os.urandom(64 << 10)  # through a shared-memory segment
                assert crc.crc32(bytearray(data)) == zlib.crc32(data)
                buf = client.buffer(4096)
                buf[:] = data[:4096]
                assert crc.crc32(buf) == zlib.crc32(data[:4096])
        finally:
            for client in clients:
                client.close()
        limits = default_limits(1024, 8 << 20)
        assert hostile["connection_refusal"] == [
            "LimitExceededError",
            ["tenant_max_connections", limits.tenant.connections],
        ]
        assert hostile["connections"] == limits.tenant.connections
        assert hostile["segment_refusals"][-1] == [
            "tenant_max_descriptors",
            limits.tenant.descriptors,
        ]
        assert hostile["connections"] + hostile["segments"] == limits.tenant.descriptors
        assert hostile["pings"] == hostile["connections"]
        held = len(open_fds(pid))
        assert held < 1024 - 64, held
    assert "accept failed" not in full_log(daemon)
    assert daemon.alive


@needs_root
def test_global_connection_limit_refuses_and_the_others_are_served(spawn: Any) -> None:
    tenants = (tenant("mallory", NOBODY), tenant("alice", 0, "max_frame_bytes = 65536\n"))
    daemon = spawn(
        policy=policy(*tenants, limits="max_connections = 3\ntenant_max_connections = 2\n")
    )

    def two(path: str) -> list[Any]:
        held_open.extend(connect(path) for _ in range(2))
        try:
            connect(path)
        except LimitExceededError as exc:
            return [exc.limit, exc.value]
        return []

    with held_as(NOBODY, two, str(daemon.socket)) as refusal:
        assert refusal == ["tenant_max_connections", 2]
        with daemon.client() as alice:
            with pytest.raises(LimitExceededError, match="max_connections is 3") as info:
                daemon.client()
            assert (info.value.limit, info.value.value) == ("max_connections", 3)
            assert alice.ping() is not None

    # once the hostile tenant left, its connections count no more
    def another_two() -> bool:
        opened = [daemon.client(), daemon.client()]
        for client in opened:
            client.close()
        return True

    assert wait_until(another_two, DEADLINE_S)
    # a tenant's own frame bound: told in the hello, and a larger frame closes its connection
    admitted: list[Raw] = []

    def admit() -> bool:  # once the connections just closed are counted out
        raw = Raw(daemon.socket)
        if "hello" not in raw.hello:
            raw.close()
            return False
        admitted.append(raw)
        return True

    assert wait_until(admit, DEADLINE_S)
    (raw,) = admitted
    try:
        assert raw.hello["hello"]["max_frame"] == 65536
        payload = pack({"v": PROTOCOL_VERSION, "id": 1, "op": "ping", "pad": b"x" * 70_000})
        raw.sock.sendall(HEADER.pack(len(payload)) + payload)
        err = raw.read()["err"]
        assert err[0] == "ProtocolError" and "outside 1..65536" in err[1], err
        with pytest.raises((EOFError, ConnectionResetError)):  # closed
            raw.read()
    finally:
        raw.close()


# -- memory ------------------------------------------------------------------------------------


def _maps_frames() -> list[bytes]:
    """Payloads of 8 MiB (just under) of empty maps: one array of them, and arrays of 1000."""
    size = 8 << 20
    head = {"v": PROTOCOL_VERSION, "id": 1, "op": "ping"}
    flat = pack({**head, "x": [{}] * (size - 64)})
    nested = pack({**head, "x": [[[{}] * 1000] * 1000] * (size // 1_003_010)})
    assert len(flat) <= size and len(nested) <= size and len(nested) > size - (1 << 20)
    return [flat, nested]


@needs_root
def test_an_8_mib_frame_of_empty_maps_costs_the_daemon_under_64_mib(spawn: Any) -> None:
    daemon = spawn(policy=policy(*TWO_TENANTS))
    pid = pid_of(daemon)
    frames = _maps_frames()

    def send(path: str, payloads: list[bytes]) -> list[Any]:
        out = []
        for payload in payloads:
            raw = Raw(path)
            raw.sock.sendall(HEADER.pack(len(payload)) + payload)
            reply = raw.read()
            try:
                raw.sock.settimeout(2.0 if "err" in reply else 0.5)
                raw.read()
                closed = False
            except TimeoutError:
                closed = False
            except (EOFError, OSError):
                closed = True
            err = reply.get("err") or [None, None]
            out.append([err[0], err[1], closed])
            raw.close()
        return out

    with daemon.client() as alice:
        assert alice.ping() is not None
    reset_peak(pid)
    before = status_kib(pid, "VmHWM")
    replies = run_as(NOBODY, send, str(daemon.socket), [bytes(f) for f in frames])
    grown_mib = (status_kib(pid, "VmHWM") - before) / 1024
    assert grown_mib < 64, f"VmHWM grew by {grown_mib:.0f} MiB"
    assert [r[0] for r in replies] == ["ProtocolError", "ProtocolError"]
    assert "max_array_len" in replies[0][1]
    assert "too many elements" in replies[1][1]
    assert all(r[2] for r in replies)  # that connection closed
    with daemon.client() as alice:
        assert alice.ping() is not None


def _blast(path: str, conns: int, calls: int, size: int) -> dict[str, Any]:
    """As the hostile tenant: ``conns`` connections each sending ``calls`` crc32 calls on an
    inline buffer of ``size`` bytes (each reply carries it back), reading no reply."""
    raws = [Raw(path) for _ in range(conns)]
    handles = []
    for raw in raws:
        got = raw.request({"op": "get_service", "interface": "ChecksumService"})
        handles.append(got["ok"]["h"])
    data = InOut(bytes(size))
    broken = 0
    for _ in range(calls):
        for raw, handle in zip(raws, handles, strict=True):
            try:
                raw.send({"op": "call", "h": handle, "m": "crc32", "args": [data]})
            except OSError:
                broken += 1
    held_open.extend(raws)
    return {"broken_sends": broken}


@needs_root
def test_clients_that_never_read_are_bounded_by_the_global_queued_limit(spawn: Any) -> None:
    limit = 8 << 20
    daemon = spawn(policy=policy(*TWO_TENANTS, limits=f"max_queued_bytes = {limit}\n"))
    pid = pid_of(daemon)
    admin = daemon.client()
    try:
        admin.install(MODULES / "crc32")
        (crc_sid,) = [s.service_id for s in admin.services() if s.module == "crc32"]
        admin.set_tier(crc_sid, "native")
        reset_peak(pid)
        before = status_kib(pid, "VmHWM")
        conns, calls = 3, 40
        closing = "max_queued_bytes was passed; closing it"

        def settled() -> bool:  # every hostile connection closed, or every call answered
            done = admin.statistics(crc_sid).total.calls >= conns * calls
            return done or full_log(daemon).count(closing) >= conns

        # 3 connections x 40 replies of 1 MiB: 120 MiB unread, each connection (40 MiB) within
        # the per-connection (64 MiB) and the tenant's (128 MiB) limits: only the global one
        # bounds them
        with held_as(NOBODY, _blast, str(daemon.socket), conns, calls, 1 << 20):
            assert wait_until(settled, DEADLINE_S)
            grown_mib = (status_kib(pid, "VmHWM") - before) / 1024
            assert grown_mib < 56, f"VmHWM grew by {grown_mib:.0f} MiB"
            with daemon.client() as alice:  # served meanwhile
                crc = alice.get_service("ChecksumService")
                data = os.urandom(4096)
                assert crc.crc32(bytearray(data)) == zlib.crc32(data)
        logs = full_log(daemon)
        assert logs.count(closing) == conns, logs
        assert "tenant_max_queued_bytes" not in logs
        assert daemon.alive
    finally:
        admin.close()


# -- descriptors past 1,024 ----------------------------------------------------------------------


def _split_pings(path: str, count: int) -> list[Any]:
    """As another tenant: ``count`` connections (the first fill the holes among the daemon's
    low descriptors), each sending a ping whose frame comes in two parts, the second only once
    the daemon has read the first; whether it had, and the reply, for each."""
    raws = [Raw(path) for _ in range(count)]
    out = []
    for raw in raws:
        payload = pack({"v": PROTOCOL_VERSION, "id": 5, "op": "ping"})
        data = HEADER.pack(len(payload)) + payload
        raw.sock.sendall(data[:6])
        deadline = time.monotonic() + DEADLINE_S
        while unread_bytes(raw.sock) and time.monotonic() < deadline:
            time.sleep(0.005)
        first_read = unread_bytes(raw.sock) == 0
        try:
            raw.sock.sendall(data[6:])
            reply = raw.read().get("ok")
        except (EOFError, OSError) as exc:
            reply = repr(exc)
        out.append([first_read, reply])
    held_open.extend(raws)
    return out


def socket_fds(pid: int) -> list[int]:
    found = []
    for fd in open_fds(pid):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                found.append(fd)
    return found


@needs_root
def test_a_frame_split_across_reads_is_served_past_descriptor_1024(spawn: Any) -> None:
    daemon = spawn(policy=policy(*TWO_TENANTS, limits="connection_max_segments = 1100\n"))
    pid = pid_of(daemon)
    assert max_open_files(pid) > 1100
    with daemon.client() as alice:
        buffers = [alice.buffer(4096) for _ in range(1040)]  # 1040 descriptors in the daemon
        assert open_fds(pid)[-1] > 1024
        with held_as(NOBODY, _split_pings, str(daemon.socket), 8) as results:
            assert max(socket_fds(pid)) > 1024  # some of those connections are past 1,024
            assert results == [[True, "pong"]] * 8
        assert "reading failed" not in full_log(daemon)
        assert "out of range" not in full_log(daemon)
        del buffers


# -- accept errors ------------------------------------------------------------------------------


@needs_root
def test_accept_errors_back_off_instead_of_spinning(spawn: Any) -> None:
    daemon = spawn(policy=policy(*TWO_TENANTS))
    pid = pid_of(daemon)
    # the start's probe connection is closed (its descriptor too: the loop closed it before
    # it accepts the next one), so the daemon's descriptors stay as they are from here on
    assert wait_until(lambda: "connection 1 (alice) closed" in full_log(daemon), DEADLINE_S)
    with daemon.client() as alice:
        assert alice.ping() is not None
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        held = set(open_fds(pid))
        lowest_free = min(fd for fd in range(len(held) + 1) if fd not in held)
        # no descriptor to be had: every fd number the daemon could get is past its limit
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free, hard))
        waiting: socket.socket | None = None
        try:
            # the kernel queues this peer; the daemon's accept fails (EMFILE)
            waiting = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            waiting.settimeout(DEADLINE_S)
            waiting.connect(str(daemon.socket))
            assert wait_until(lambda: "accept failed" in full_log(daemon), DEADLINE_S)
            lines_before = full_log(daemon).count("accept failed")
            ticks_before = cpu_ticks(pid)
            started = time.monotonic()
            time.sleep(2.0)  # the measured interval (nothing is awaited here)
            elapsed = time.monotonic() - started
            cpu = (cpu_ticks(pid) - ticks_before) / os.sysconf("SC_CLK_TCK") / elapsed
            lines = full_log(daemon).count("accept failed") - lines_before
            # accept kept failing all along: the waiting peer was not greeted
            assert not select.select([waiting], [], [], 0)[0]
            assert cpu < 0.25, f"the daemon used {cpu:.0%} of a CPU at EMFILE"
            # a pause that doubles up to 1 s: one line per pause, none per attempt
            assert 1 <= lines <= 8, f"{lines} 'accept failed' lines in {elapsed:.1f} s"
            assert alice.ping() is not None  # open connections are served meanwhile
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        # descriptors again: the waiting peer is greeted
        assert waiting is not None
        header = waiting.recv(HEADER.size)
        assert len(header) == HEADER.size
        waiting.close()


def test_unpack_of_the_maps_frames_allocates_little() -> None:
    """In process, the same two frames: refused by the decoder before they allocate."""
    for payload in _maps_frames():
        with pytest.raises(ProtocolError):
            unpack(payload)


@needs_root
def test_a_client_past_descriptor_1024_waits_for_replies_with_a_deadline(spawn: Any) -> None:
    """The client's wait for a reply under ``call_timeout`` works for a socket past
    descriptor 1,023 (``poll``, where ``select()`` raises "filedescriptor out of range")."""
    daemon = spawn(policy=policy(*TWO_TENANTS))
    with daemon.client() as admin:
        admin.install(MODULES / "crc32")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard > 1100
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    low = [os.open("/dev/null", os.O_RDONLY) for _ in range(1030)]  # push new fds past 1,024
    try:
        with daemon.client(call_timeout=10.0, spin_us=0) as alice:
            link = alice._link
            assert link is not None and link.sock.fileno() > 1024
            crc = alice.get_service("ChecksumService")
            data = os.urandom(512)
            assert crc.crc32(bytearray(data)) == zlib.crc32(data)
            assert alice.ping() >= 0
    finally:
        for fd in low:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
