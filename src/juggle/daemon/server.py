"""The juggle daemon: one process owns the Framework and the fabric; clients talk to it over a
Unix socket, each as the tenant the kernel says it is.

Structure. The asyncio event loop accepts connections, checks who the peer is and starts
each connection's reader thread, which reads its blocking socket. A lone caller's call runs
on that reader thread itself (no hand-over to another thread) while a :class:`_Poller` watches
the socket; a request that arrives meanwhile is read by a pool thread and run in the pool, so
a slow call (a native tenant waiting for its device) never holds up the others. Other calls
run in a thread pool; admin operations have their own small pool, so they get through while
calls saturate the large one. Whoever runs a request sends the reply itself.

Identity. On accept, ``SO_PEERCRED`` / ``SO_PEERGROUPS`` give the peer's uid, gid and groups;
the :class:`~juggle.daemon.policy.AccessPolicy` maps them to an identity (or the connection
gets an :class:`AccessDeniedError` frame and is closed). A connection acts as its identity's
consumer: proxies are ``fw.get_service(..., consumer=<tenant>)``, so it reaches only its own
virtual devices, contexts, signals and statistics.

State isolation. Several connections (or threads) of one tenant, or tenants of a shared
service, use one service state (the proxy's state record: a loaded key). Each remote proxy
keeps its own state-setting calls; calls on one state record are serialised and, when the
state last set belongs to another remote proxy, this one's calls are replayed first. State
belongs to the tenant that set it (or to its ``share_state`` group): a remote proxy that set no
state uses its tenant's state, the one on the implementation or the one kept for the tenant
(replayed), and never state another tenant set, connected or gone
(:class:`ServiceStateError`). What a tenant set is kept for it alone after it disconnects
(Ker-ONE: a virtual device keeps its context while its VM is away) until its service is
uninstalled or the daemon stops: it reconnects and calls without ``load_key`` on its own key.

Buffers. A writable buffer argument travels inline and its new contents travel back; above a
few KiB the client puts it in a shared-memory segment the daemon created (a sealed memfd,
passed with ``SCM_RIGHTS``), which the call then reads and writes in place.

Limits. Connections, segments, the descriptors they keep and the reply bytes queued for
clients that do not read are counted per tenant and in all against the policy's ``[limits]``
(defaults from ``RLIMIT_NOFILE``, see :class:`~juggle.daemon.policy.Limits`): past one, the
connection or segment is refused with :class:`LimitExceededError`, or the connection that
does not read is closed; every other tenant is served. A frame's size is the tenant's bound,
and decoding it is bounded before it allocates (:func:`~juggle.daemon.protocol.unpack`).
Nothing waits with ``select()`` (descriptors past 1,023 work), and a failing ``accept``
pauses the listener instead of spinning.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import mmap
import os
import resource
import select
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from juggle.daemon.dashboard import DashboardServer, admin_token
from juggle.daemon.errors import (
    AccessDeniedError,
    DaemonError,
    DaemonShuttingDownError,
    LimitExceededError,
    ProtocolError,
    QuotaExceededError,
    RegionQuotaExceededError,
)
from juggle.daemon.paths import default_socket_path
from juggle.daemon.policy import (
    AccessPolicy,
    Identity,
    Limits,
    PeerCredentials,
    TenantLimits,
    peer_credentials,
)
from juggle.daemon.protocol import (
    DEFAULT_MAX_FRAME,
    HEADER,
    PROTOCOL_VERSION,
    InOut,
    ShmRef,
    error_to_wire,
    frame,
    pack,
    parse_request,
    to_wire,
)
from juggle.daemon.safefs import bind_unix_socket
from juggle.daemon.spin import DEFAULT_SPIN_US, ReadWait, Spinner, check_spin_us
from juggle.daemon.state import ModuleEntry, StateDir
from juggle.errors import JuggleError, ServiceArgumentError, ServiceStateError, UnknownServiceError
from juggle.runtime.framework import Framework, ServiceStatistics
from juggle.runtime.ldapfilter import parse_filter
from juggle.runtime.proxy import StateRecord, binding_of
from juggle.runtime.tenants import TenantSignal, VirtualDevice
from juggle.runtime.tracing import Accumulator, merge, ns_per_tick

__all__ = [
    "DEFAULT_WORKERS",
    "MAX_INFLIGHT",
    "Daemon",
    "default_socket_path",
]

log = logging.getLogger("juggle.daemon")

#: Threads that run framework calls.
DEFAULT_WORKERS = 32
#: Requests a connection may have running at once; beyond, the daemon stops reading it.
MAX_INFLIGHT = 64
#: Shared-memory budget of one connection: bytes of one segment, of all its segments (how
#: many segments: the policy's ``[limits]``, see :class:`~juggle.daemon.policy.Limits`).
MAX_SEGMENT_BYTES = 64 << 20
MAX_CONNECTION_SHM = 512 << 20
#: Bytes a connection may have waiting to be sent before signal pushes to it are dropped
#: (before it is closed: the policy's ``[limits]``).
PUSH_BACKLOG = 1 << 20
#: After ``accept`` fails (out of descriptors: EMFILE, ENFILE; out of memory), the listener
#: is not watched for a pause that doubles from the first to the last value while accepting
#: keeps failing (one log line per pause), and is reset by an accept that succeeds.
ACCEPT_PAUSE_MIN_S = 0.01
ACCEPT_PAUSE_MAX_S = 1.0
#: Characters of an error's message sent back (one quoting a large argument is cut).
MAX_ERROR_MESSAGE = 4096
#: How long a SIGTERM waits for running calls before closing anyway.
DEFAULT_DRAIN_S = 30.0
#: Once a frame's first bytes came, the rest must come within this many seconds.
FRAME_TIMEOUT_S = 30.0
#: Bytes read from a socket at once.
_RECV = 1 << 16
_BUFFER_REFS = (InOut, ShmRef)
_NO_KW: dict[str, Any] = {}  # never changed
_SHUTTING_DOWN = "the daemon is shutting down: calls running finish, new ones are refused"
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


# -- per-connection records ------------------------------------------------------------------


#: Whose state a service state is: ``("tenant", name)`` (an admin's ``admin:<user>`` too),
#: or ``("share", group)`` for the tenants of one ``share_state`` group.
StateKey = tuple[str, str]
#: The state-setting calls one remote proxy made: method -> (args, kwargs).
StateCalls = dict[str, tuple[tuple[Any, ...], dict[str, Any]]]


def _state_key(ident: Identity) -> StateKey:
    """The key of the state ``ident`` may use: its share group's, else its own."""
    share = ident.share_state
    return ("share", share) if share else ("tenant", ident.name)


class _StateGuard:
    """Serialises the calls on one state record and knows whose state it holds.

    ``owner`` is the state-setting calls (a remote proxy's :attr:`_Handle.own`, or a state
    kept for a tenant) whose state the implementation holds now, ``holder`` the key of the
    tenant (or share group) they belong to; both None while the record holds no state a
    connected client set (a fresh guard: what is there was left by someone gone).
    """

    __slots__ = ("holder", "lock", "owner", "record", "users")

    def __init__(self, record: StateRecord) -> None:
        self.record = record  # kept alive: guards are found by id(record)
        self.lock = threading.Lock()
        self.owner: StateCalls | None = None
        self.holder: StateKey | None = None
        self.users = 0


@dataclass(eq=False, slots=True)
class _Handle:
    """A remote proxy: the daemon's proxy for the connection's consumer, and the state
    this remote proxy set."""

    handle_id: int
    proxy: Any
    service_id: int
    methods: dict[str, bool]
    guard: _StateGuard | None
    device: str | None = None  # the tenant's virtual device (arbitrated service), if any
    key: StateKey = ("", "")  # whose state this remote proxy may use (_state_key)
    own: StateCalls = field(default_factory=dict)
    bound: dict[str, Callable[..., Any]] = field(default_factory=dict)  # proxy methods

    def method(self, name: str) -> Callable[..., Any]:
        """The proxy's method ``name`` (looked up once)."""
        found = self.bound.get(name)
        if found is None:
            found = self.bound[name] = getattr(self.proxy, name)
        return found


@dataclass(eq=False, slots=True)
class _Segment:
    segment_id: int
    size: int
    mm: mmap.mmap


class _Writer:
    """The sending side of a connection, usable from any thread.

    Worker threads send their replies themselves (no hop back to the event loop on a call's
    path): under the lock, a frame goes straight to the non-blocking socket when nothing is
    queued before it; what the socket does not take is queued, and the loop sends it when the
    socket is writable again. A frame may carry a file descriptor (``SCM_RIGHTS``), sent with
    its first byte. More than ``limit`` bytes queued: the client does not read, it is closed.
    ``account`` (under the writer's lock) is told every change of the bytes queued; when an
    increase takes the tenant or the daemon past its bound it names that bound, and
    ``on_limit`` is called with that name (on the calling thread, no lock held).
    """

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        limit: int,
        account: Callable[[int], str | None] | None = None,
    ) -> None:
        self._sock = sock
        self._loop = loop
        self._lock = threading.Lock()
        self._queue: deque[tuple[memoryview, int | None]] = deque()
        self.queued = 0
        self._limit = limit
        self._account = account
        self._armed = False
        self.closed = False
        self.on_overflow: Callable[[], None] | None = None
        self.on_limit: Callable[[str], None] | None = None

    def write(self, data: bytes, fd: int | None = None) -> None:
        """Send ``data`` (and ``fd``, closed afterwards) in order after everything written
        before; dropped when the connection is closed."""
        with self._lock:
            if self.closed:
                if fd is not None:
                    os.close(fd)
                return
            if not self._queue:
                sent = self._send(memoryview(data), fd)
                if sent < 0:
                    return
                if sent == len(data):
                    return
                data, fd = data[sent:], None if sent else fd
            self._queue.append((memoryview(data), fd))
            self.queued += len(data)
            over = self._account(len(data)) if self._account is not None else None
            overflow = self.queued > self._limit
            arm = not self._armed and not overflow
            self._armed = self._armed or arm
        if overflow:
            self.close()
            if self.on_overflow is not None:
                self._loop.call_soon_threadsafe(self.on_overflow)
            return
        if arm:
            self._loop.call_soon_threadsafe(self._arm)
        if over is not None and self.on_limit is not None:
            self.on_limit(over)

    def _send(self, data: memoryview, fd: int | None) -> int:
        """Bytes of ``data`` the socket took (-1: the connection broke); lock held."""
        try:
            if fd is None:
                return self._sock.send(data, socket.MSG_DONTWAIT)
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fd.to_bytes(4, "little"))]
            sent = self._sock.sendmsg([data], ancillary, socket.MSG_DONTWAIT)
            os.close(fd)
            return sent
        except BlockingIOError:
            return 0
        except OSError:
            if fd is not None:
                os.close(fd)
            self._close_locked()
            return -1

    def _arm(self) -> None:
        if not self.closed:
            self._loop.add_writer(self._sock.fileno(), self._flush)

    def _flush(self) -> None:
        with self._lock:
            while self._queue and not self.closed:
                data, fd = self._queue[0]
                sent = self._send(data, fd)
                if sent <= 0:
                    return
                self.queued -= sent
                if self._account is not None:
                    self._account(-sent)
                if sent < len(data):
                    self._queue[0] = (data[sent:], None)
                    return
                self._queue.popleft()
            self._armed = False
        with contextlib.suppress(Exception):
            self._loop.remove_writer(self._sock.fileno())

    def _close_locked(self) -> None:
        self.closed = True
        for _, fd in self._queue:
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._queue.clear()
        if self.queued and self._account is not None:
            self._account(-self.queued)
        self.queued = 0

    def close(self) -> None:
        """Stop sending (the loop removes the socket from its watch list)."""
        with self._lock:
            if self.closed:
                return
            self._close_locked()

    def release(self) -> None:
        """Close the socket (loop thread, after :meth:`close`)."""
        self.close()
        with contextlib.suppress(Exception):
            self._loop.remove_writer(self._sock.fileno())
        self._sock.close()


_ARMED = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLONESHOT

#: How a connection is read: by its reader thread, watched by the poller while that thread
#: runs a call, or by a pool thread the poller sent (see :meth:`Daemon._read_while_busy`).
_READER, _WATCHED, _HELPER = 0, 1, 2


class _Connection:
    """One client connection: identity, socket, remote proxies, shared-memory segments.

    Its reader thread reads the (blocking) socket; replies go out through ``out`` from any
    thread. ``lock`` guards the counts of running requests and the reading mode.
    """

    def __init__(
        self,
        conn_id: int,
        identity: Identity,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        spin_us: float = 0.0,
        spin_gate: threading.Lock | None = None,
        *,
        limits: TenantLimits | None = None,
        max_segments: int = 64,
        max_queued: int = 64 << 20,
        account: Callable[[int], str | None] | None = None,
    ) -> None:
        self.conn_id = conn_id
        self.identity = identity
        self.sock = sock
        self.fd = sock.fileno()
        # the reader thread polls for the next request a little before blocking on it
        self.spinner = Spinner(self.fd, spin_us, spin_gate) if spin_us else None
        self.limits = limits
        self.max_frame = limits.frame_bytes if limits is not None else DEFAULT_MAX_FRAME
        self.max_segments = max_segments
        self.out = _Writer(sock, loop, max_queued, account)
        self.out.on_overflow = self.abort
        self._readable: ReadWait | None = None  # the frame-deadline wait
        self.handles: dict[int, _Handle] = {}
        self.segments: dict[int, _Segment] = {}
        self.shm_bytes = 0
        self._ids = iter(range(1, 1 << 62))
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        # requests running: counted by the reader (start) and the threads running them (end)
        self.running = 0
        self.mode = _READER
        self.waiters = 0  # threads waiting on ``cond`` (for room, or for the last request)
        self.backlog: deque[bytes] = deque()  # requests a helper read but had no room for
        self.buf = bytearray()  # bytes read, not yet a whole frame
        self.frame_deadline: float | None = None  # the frame begun must be whole by then
        self.eof = False
        self.closed = False
        self.thread: threading.Thread | None = None
        self.unlisten: Callable[[], None] | None = None
        self.dropped_pushes = 0

    def abort(self) -> None:
        """End the connection (any thread): its reader sees the end of stream and closes it."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def next_id(self) -> int:
        with self.lock:
            return next(self._ids)

    def wait_readable(self, timeout_s: float) -> bool:
        """Whether the socket becomes readable (or ends) within ``timeout_s`` (the reader
        thread; ``poll(2)``, so a descriptor past 1,023 is waited on like any other)."""
        readable = self._readable
        if readable is None:
            readable = self._readable = ReadWait(self.fd)
        return readable.wait(timeout_s)

    def send(self, message: dict[str, Any], fd: int | None = None) -> None:
        """Send ``message`` (from any thread); a closed connection drops it."""
        try:
            data = pack(message)
        except (TypeError, ValueError, OverflowError) as exc:
            data = pack(
                {
                    "v": PROTOCOL_VERSION,
                    "id": message.get("id", 0),
                    "err": error_to_wire(ProtocolError(f"reply cannot travel: {exc}")),
                }
            )
        self.out.write(frame(data), fd)

    def push(self, message: dict[str, Any]) -> None:
        """Send a push; dropped while the client does not read its earlier ones."""
        if self.out.queued > PUSH_BACKLOG:
            self.dropped_pushes += 1
            return
        self.send(message)

    def view(self, ref: ShmRef) -> memoryview:
        """The memory ``ref`` names. Raises :class:`ProtocolError`."""
        seg = self.segments.get(ref.segment)
        if seg is None:
            raise ProtocolError(f"no shared-memory segment {ref.segment}", ref.segment)
        if ref.offset + ref.length > seg.size:
            raise ProtocolError(
                f"range {ref.offset}+{ref.length} outside segment {ref.segment} of {seg.size}",
                ref.segment,
            )
        return memoryview(seg.mm)[ref.offset : ref.offset + ref.length]


class _Poller:
    """Watches the sockets of connections whose reader thread is running a call: a request
    that arrives meanwhile makes ``on_ready(conn)`` run on the poller's thread.

    Every connection is registered once with no events (``EPOLLONESHOT``); :meth:`arm` asks
    for one readable event and :meth:`disarm` withdraws it: one ``epoll_ctl`` each, and a
    thread blocked in ``epoll_wait`` is not woken by either.
    """

    def __init__(self, on_ready: Callable[[_Connection], None]) -> None:
        self._epoll = select.epoll()
        self._modify = self._epoll.modify
        self._conns: dict[int, _Connection] = {}
        self._on_ready = on_ready
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._epoll.register(self._wake_r, select.EPOLLIN)
        self._thread = threading.Thread(target=self._run, name="juggle-poll", daemon=True)
        self._thread.start()

    def add(self, conn: _Connection) -> None:
        self._conns[conn.fd] = conn
        self._epoll.register(conn.fd, select.EPOLLONESHOT)

    def remove(self, conn: _Connection) -> None:
        if self._conns.get(conn.fd) is conn:
            del self._conns[conn.fd]
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(conn.fd)

    def arm(self, conn: _Connection) -> None:
        try:
            self._modify(conn.fd, _ARMED)
        except (OSError, ValueError):
            pass

    def disarm(self, conn: _Connection) -> None:
        try:
            self._modify(conn.fd, select.EPOLLONESHOT)
        except (OSError, ValueError):
            pass

    def _run(self) -> None:
        while True:
            try:
                events = self._epoll.poll()
            except InterruptedError:
                continue
            except (OSError, ValueError):
                return
            for fd, _ in events:
                if fd == self._wake_r:
                    return
                conn = self._conns.get(fd)
                if conn is not None:
                    self._on_ready(conn)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._thread.join(5.0)
        self._epoll.close()
        os.close(self._wake_r)
        os.close(self._wake_w)


@dataclass(slots=True)
class _Usage:
    """What one tenant (or all together) holds: connections, shared-memory segments, and
    reply bytes queued for clients that do not read. Descriptors: connections + segments."""

    connections: int = 0
    segments: int = 0
    queued: int = 0

    @property
    def descriptors(self) -> int:
        return self.connections + self.segments


def _nofile() -> int:
    """The daemon's ``RLIMIT_NOFILE`` (soft; "unlimited" counts as 2**20)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else int(soft)


class _Bucket:
    """A token bucket: ``rate`` calls per second, bursts of up to one second's worth."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = self.capacity
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass(frozen=True, slots=True)
class _Op:
    fn: Callable[[_Connection, dict[str, Any]], Any]
    admin: bool = False
    pool: str = "calls"  # "calls", "admin" or "inline" (runs on the reader, must be quick)
    quota: bool = False  # counts against the tenant's calls_per_s


# -- argument checks -------------------------------------------------------------------------


def _field(
    msg: dict[str, Any], key: str, kind: type | tuple[type, ...], *, optional: bool = False
) -> Any:
    value = msg.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) and kind is int:
        value = object()  # an int field takes no bool
    if not isinstance(value, kind):
        raise ProtocolError(
            f'request field "{key}" is missing or of the wrong type ({value!r:.40})'
        )
    return value


def _service_id(msg: dict[str, Any], key: str = "service_id") -> int:
    return int(_field(msg, key, int))


# -- the daemon ------------------------------------------------------------------------------


class Daemon:
    """The daemon: a Framework on ``fabric``, its state in ``state_dir``, served on
    ``socket_path``.

    ``policy_path`` is the tenant policy (TOML); without it the one kept in the state
    directory is used, and without that only the daemon's own uid may connect. ``workers``
    threads run calls; ``max_frame`` bounds a frame's payload. ``framework_options`` go to
    :class:`~juggle.Framework`. ``dashboard`` ``(host, port)`` serves the dashboard and
    ``/metrics`` of the daemon's framework there (see :mod:`juggle.daemon.dashboard`).
    """

    def __init__(
        self,
        socket_path: str | Path,
        state_dir: str | Path,
        *,
        fabric: str = "xupv2p",
        backend: str = "sim",
        policy_path: str | Path | None = None,
        workers: int = DEFAULT_WORKERS,
        max_frame: int = DEFAULT_MAX_FRAME,
        drain_s: float = DEFAULT_DRAIN_S,
        framework_options: dict[str, Any] | None = None,
        dashboard: tuple[str, int] | None = None,
        spin_us: float = DEFAULT_SPIN_US,
    ) -> None:
        self.spin_us = check_spin_us(spin_us)
        self._spin_gate = threading.Lock()  # one reader thread spins at a time
        self.socket_path = Path(socket_path)
        self.state = StateDir(state_dir)
        self.fabric = fabric
        self.backend = backend
        self.policy_path = Path(policy_path) if policy_path is not None else None
        self.max_frame = max_frame
        self.drain_s = drain_s
        self._framework_options = dict(framework_options or {})
        self._workers = workers
        self.dashboard_address = dashboard
        self.dashboard: DashboardServer | None = None
        self.fw: Framework | None = None
        self.policy = AccessPolicy(None, os.getuid())
        self._lock = threading.Lock()
        self._guards: dict[int, _StateGuard] = {}
        #: (service id, state key) -> the state a tenant (or share group) set last on that
        #: service: kept while it is away, for it alone (see _invoke)
        self._kept: dict[tuple[int, StateKey], StateCalls] = {}
        self._held: dict[str, int] = {}
        self._tenant_proxies: dict[tuple[str, int], list[Any]] = {}
        self._rates: dict[tuple[str, int], deque[tuple[float, int]]] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._region_lock = threading.Lock()
        self._region_claims: dict[str, dict[str, int]] = {}
        self._connections: dict[int, _Connection] = {}
        # what each tenant holds (and all together), against self.limits
        self.limits: Limits = self.policy.limits(_nofile(), max_frame)
        self._limit_lock = threading.Lock()
        self._usage: dict[str, _Usage] = {}
        self._total = _Usage()
        self._accept_pause = 0.0
        self._conn_ids = iter(range(1, 1 << 62))
        self._segment_ids = iter(range(1, 1 << 62))
        self._closing = False
        self._active = 0
        self._count_lock = threading.Lock()
        self._idle: asyncio.Event | None = None
        self._stopped: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._poller: _Poller | None = None
        self._bucket_lock = threading.Lock()
        self._calls = ThreadPoolExecutor(workers, thread_name_prefix="juggle-call")
        self._admin = ThreadPoolExecutor(4, thread_name_prefix="juggle-admin")
        self._ops: dict[str, _Op] = {
            "ping": _Op(self._op_ping, pool="inline"),
            "whoami": _Op(self._op_whoami, pool="inline"),
            "subscribe": _Op(self._op_subscribe, pool="inline"),
            "unsubscribe": _Op(self._op_unsubscribe, pool="inline"),
            "segment": _Op(self._op_segment, pool="inline"),
            "segment_free": _Op(self._op_segment_free, pool="inline"),
            "get_service": _Op(self._op_get_service),
            "release": _Op(self._op_release),
            "call": _Op(self._op_call, quota=True),
            "services": _Op(self._op_services),
            "regions": _Op(self._op_regions),
            "statistics": _Op(self._op_statistics),
            "tenants": _Op(self._op_tenants),
            "modules": _Op(self._op_modules),
            "install": _Op(self._op_install, admin=True, pool="admin"),
            "uninstall": _Op(self._op_uninstall, admin=True, pool="admin"),
            "juggle": _Op(self._op_juggle, admin=True, pool="admin"),
            "set_tier": _Op(self._op_set_tier, admin=True, pool="admin"),
            "reload_policy": _Op(self._op_reload_policy, admin=True, pool="admin"),
            "recover": _Op(self._op_recover, pool="admin"),  # checks admin itself: audited
        }

    # -- start and stop --------------------------------------------------------------------

    def prepare(self) -> None:
        """Take the state directory, load the policy, open the framework, register the
        policy's tenants and reinstall (and start) the modules the state directory holds."""
        self.state.lock()
        self.policy = self._load_policy()
        self._set_limits()
        self.fw = Framework(self.fabric, backend=self.backend, **self._framework_options)
        self._add_tenants()
        for entry in self.state.entries():
            try:
                module = self.fw.install(self.state.target(entry))
                if entry.started:
                    module.start()
                if entry.name != module.name:
                    self.state.record(ModuleEntry(entry.path, module.name, entry.started))
                log.info("module %s reinstalled from %s", module.name, entry.path)
            except JuggleError as exc:
                log.error("module %s could not be reinstalled: %s", entry.path, exc)
        if self.dashboard_address is not None:
            host, port = self.dashboard_address
            token = admin_token(self.state.root)
            self.dashboard = DashboardServer(self.fw, host, port, token)
            self.dashboard.start()

    def _set_limits(self) -> None:
        """The limits of the policy in force, for this process's ``RLIMIT_NOFILE``."""
        nofile = _nofile()
        limits = self.limits = self.policy.limits(nofile, self.max_frame)
        tenant = limits.tenant
        log.info(
            "limits (RLIMIT_NOFILE %d): descriptors %d (%d per tenant), connections %d (%d), "
            "segments %d (%d; %d per connection), queued reply bytes %d (%d; %d per "
            "connection), frame bytes %d (%d)",
            nofile,
            limits.descriptors,
            tenant.descriptors,
            limits.connections,
            tenant.connections,
            limits.segments,
            tenant.segments,
            limits.connection_segments,
            limits.queued_bytes,
            tenant.queued_bytes,
            limits.connection_queued_bytes,
            limits.frame_bytes,
            tenant.frame_bytes,
        )

    def _load_policy(self) -> AccessPolicy:
        if self.policy_path is not None:
            policy = AccessPolicy.load(self.policy_path)
            self.state.save_policy(self.policy_path.read_text(encoding="utf-8"))
            return policy
        if self.state.policy.exists():
            return AccessPolicy.load(self.state.policy)
        return AccessPolicy(None, os.getuid())

    def _add_tenants(self) -> list[str]:
        """Register the policy's tenants not registered yet and give the registered ones the
        class, priority and model the policy says now (where they stand: waiting requests move
        in line, held regions carry the new priority); the names of those that changed."""
        fw = self._framework()
        known = {t.name: t for t in fw.tenants()}
        changed = []
        for rule in self.policy.tenants:
            have = known.get(rule.name)
            priority = None if rule.realtime else rule.priority
            if have is None:
                fw.add_tenant(
                    rule.name, priority=priority, realtime=rule.realtime, model=rule.model
                )
            elif (have.realtime, have.model) != (rule.realtime, rule.model) or (
                not rule.realtime and have.priority != (rule.priority or 0)
            ):
                fw.set_tenant(
                    rule.name, priority=priority, realtime=rule.realtime, model=rule.model
                )
                changed.append(rule.name)
        return changed

    def _framework(self) -> Framework:
        if self.fw is None:
            raise DaemonError("the daemon's framework is not open")
        return self.fw

    def run(self) -> int:
        """Prepare, serve until SIGTERM/SIGINT, shut down; the exit status."""
        try:
            self.prepare()
        except JuggleError as exc:
            log.error("%s", exc)
            self._stop_dashboard()
            self._close_framework()
            self.state.unlock()
            return 1
        try:
            asyncio.run(self.serve())
        except BaseException:
            self._stop_dashboard()
            self._close_framework()  # the regions are released whatever went wrong
            raise
        finally:
            self._calls.shutdown(wait=False, cancel_futures=True)
            self._admin.shutdown(wait=False, cancel_futures=True)
            self.state.unlock()
        return 0

    async def serve(self) -> None:
        """Listen until :meth:`stop` (or SIGTERM / SIGINT; SIGHUP reloads the policy)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._idle = asyncio.Event()
        self._stopped = asyncio.Event()
        self._bind_socket()
        self._poller = _Poller(self._on_watched)
        self.start_listening()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self.stop)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, self._reload_on_signal)
        log.info("juggle daemon %d listening on %s", os.getpid(), self.socket_path)
        await self._stopped.wait()
        await self._shutdown()

    def stop(self) -> None:
        """Begin the shutdown (from the loop thread)."""
        if self._stopped is not None:
            self._stopped.set()

    def _bind_socket(self) -> None:
        """Listen on the socket path, its file given the policy's mode and group before it
        can be reached there: bound in a private 0700 folder of the daemon, given its mode and
        group through that folder's descriptor, then renamed into place (see
        :func:`juggle.daemon.safefs.bind_unix_socket`): no ``chmod``/``chown`` follows a
        symbolic link a tenant swaps in at the path. Raises :class:`DaemonError`."""
        sock = bind_unix_socket(
            self.socket_path, self.policy.socket_mode, self.policy.socket_group, backlog=128
        )
        sock.setblocking(False)
        self._listener = sock

    def start_listening(self) -> None:
        """Accept connections on the bound socket (the event loop accepts)."""
        assert self._loop is not None
        self._loop.add_reader(self._listener.fileno(), self._on_accept)

    async def _shutdown(self) -> None:
        log.info("shutting down: refusing new calls, waiting for running ones")
        with self._count_lock:
            self._closing = True
            busy = self._active > 0
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            loop.remove_reader(self._listener.fileno())
        self._listener.close()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()
        assert self._idle is not None
        try:
            if busy:
                await asyncio.wait_for(self._idle.wait(), self.drain_s)
        except TimeoutError:
            log.warning(
                "%d call(s) still running after %.0f s; closing anyway", self._active, self.drain_s
            )
        conns = list(self._connections.values())
        for conn in conns:
            conn.out.close()
            conn.abort()
        await loop.run_in_executor(self._admin, self._join_readers, conns)
        if self._poller is not None:
            self._poller.close()
        await loop.run_in_executor(self._admin, self._stop_dashboard)
        await loop.run_in_executor(self._admin, self._close_framework)
        log.info("daemon stopped")

    @staticmethod
    def _join_readers(conns: list[_Connection], timeout: float = 5.0) -> None:
        """Wait (up to ``timeout`` in all) for the connections' reader threads to end, so
        their proxies are given back before the framework closes."""
        deadline = time.monotonic() + timeout
        for conn in conns:
            thread = conn.thread
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))

    def _stop_dashboard(self) -> None:
        dashboard, self.dashboard = self.dashboard, None
        if dashboard is not None:
            dashboard.stop()

    def _close_framework(self) -> None:
        if self.fw is not None:
            self.fw.close()

    def _reload_on_signal(self) -> None:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._admin, self._reload_policy)
        future.add_done_callback(
            lambda f: (
                log.error("policy reload failed: %s", f.exception())
                if f.exception() is not None
                else None
            )
        )

    # -- connections -----------------------------------------------------------------------

    def _on_accept(self) -> None:
        """The listening socket is readable (loop thread): admit every waiting peer."""
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._pause_accepting(exc)
                return
            self._accept_pause = 0.0
            try:
                self._admit(sock)
            except Exception:
                log.exception("admitting a connection failed")
                sock.close()

    def _pause_accepting(self, exc: OSError) -> None:
        """``accept`` failed (loop thread): stop watching the listener for a pause that
        doubles while it keeps failing (out of descriptors, the peer waiting in the backlog
        would make it fail again at once), with one log line per pause."""
        loop = self._loop
        if exc.errno == errno.ECONNABORTED or loop is None:  # that peer gave up: go on
            log.info("accept failed: %s", exc)
            return
        pause = min(ACCEPT_PAUSE_MAX_S, max(ACCEPT_PAUSE_MIN_S, 2 * self._accept_pause))
        self._accept_pause = pause
        log.warning(
            "accept failed: %s; not accepting for %.2f s (open connections %d)",
            exc,
            pause,
            len(self._connections),
        )
        with contextlib.suppress(Exception):
            loop.remove_reader(self._listener.fileno())
        loop.call_later(pause, self._resume_accepting)

    def _resume_accepting(self) -> None:
        if self._closing or self._listener.fileno() < 0:
            return
        assert self._loop is not None
        self._loop.add_reader(self._listener.fileno(), self._on_accept)

    # -- limits ----------------------------------------------------------------------------

    def _take(self, ident: Identity, mine: TenantLimits, *, connection: bool) -> None:
        """Count one more connection (``connection``) or segment of ``ident``'s tenant.
        Raises :class:`LimitExceededError` naming the limit (nothing is counted then)."""
        limits = self.limits
        name = ident.name
        with self._limit_lock:
            use = self._usage.get(name)
            if use is None:
                use = self._usage[name] = _Usage()
            total = self._total
            checks: tuple[tuple[str, int, int, str], ...]
            if connection:
                checks = (
                    ("tenant_max_connections", use.connections, mine.connections, "tenant"),
                    ("max_connections", total.connections, limits.connections, "daemon"),
                )
            else:
                checks = (
                    ("tenant_max_segments", use.segments, mine.segments, "tenant"),
                    ("max_segments", total.segments, limits.segments, "daemon"),
                )
            checks += (
                ("tenant_max_descriptors", use.descriptors, mine.descriptors, "tenant"),
                ("max_descriptors", total.descriptors, limits.descriptors, "daemon"),
            )
            for limit, held, bound, whose in checks:
                if held + 1 > bound:
                    owner = f"tenant {name!r}" if whose == "tenant" else "the daemon (all tenants)"
                    what = "connections" if connection else "shared-memory segments"
                    raise LimitExceededError(
                        f"{owner} holds {held} {limit.rsplit('_', 1)[-1]}; its limit "
                        f"{limit} is {bound}: no more {what}",
                        (limit, bound),
                    )
            if connection:
                use.connections += 1
                total.connections += 1
            else:
                use.segments += 1
                total.segments += 1

    def _give(self, name: str, *, connections: int = 0, segments: int = 0) -> None:
        """Count connections / segments of tenant ``name`` given back."""
        with self._limit_lock:
            use = self._usage.get(name)
            if use is not None:
                use.connections -= connections
                use.segments -= segments
                if not use.connections and not use.segments and not use.queued:
                    del self._usage[name]
            self._total.connections -= connections
            self._total.segments -= segments

    def _queue_account(self, name: str, mine: TenantLimits) -> Callable[[int], str | None]:
        """The function a connection of tenant ``name`` tells its queued bytes' changes to:
        it names the limit an increase went past (None: within them)."""

        def account(delta: int) -> str | None:
            with self._limit_lock:
                use = self._usage.get(name)
                if use is None:
                    use = self._usage[name] = _Usage()
                use.queued += delta
                self._total.queued += delta
                if delta <= 0:
                    return None
                if use.queued > mine.queued_bytes:
                    return "tenant_max_queued_bytes"
                if self._total.queued > self.limits.queued_bytes:
                    return "max_queued_bytes"
                return None

        return account

    def _over_queued(self, conn: _Connection, limit: str) -> None:
        """Replies queued for clients that do not read went past ``limit`` while ``conn``
        wrote (any thread): over the tenant's limit, ``conn`` is closed; over the daemon's,
        the connection with the most bytes queued (any tenant's) is."""
        victim = conn
        if limit == "max_queued_bytes":
            victim = max(list(self._connections.values()), key=lambda c: c.out.queued, default=conn)
        queued = victim.out.queued
        victim.out.close()
        victim.abort()
        log.warning(
            "connection %d (%s): %d reply bytes unread when %s was passed; closing it",
            victim.conn_id,
            victim.identity.name,
            queued,
            limit,
        )

    def _admit(self, sock: socket.socket) -> None:
        """Identify the peer of ``sock``; refuse it, or greet it and start its reader."""
        sock.setblocking(True)
        try:
            peer = peer_credentials(sock)
        except OSError as exc:
            log.warning("no peer credentials: %s", exc)
            sock.close()
            return
        identity = self.policy.identify(peer)
        error: JuggleError | None = None
        mine = self.limits.tenant
        if identity is None:
            error = AccessDeniedError(
                f"uid {peer.uid} (pid {peer.pid}) is not mapped to a tenant by the daemon's policy",
                peer.uid,
            )
        elif self._closing:
            error = DaemonShuttingDownError("the daemon is shutting down")
        else:
            mine = self.limits.for_identity(identity)
            try:
                self._take(identity, mine, connection=True)
            except LimitExceededError as exc:
                error = exc
        if error is not None or identity is None:
            assert error is not None
            log.warning("refused pid %d uid %d: %s", peer.pid, peer.uid, error)
            sock.settimeout(1.0)
            with contextlib.suppress(OSError):
                sock.sendall(
                    frame(pack({"v": PROTOCOL_VERSION, "id": 0, "err": error_to_wire(error)}))
                )
            sock.close()
            return
        assert self._loop is not None
        conn = _Connection(
            next(self._conn_ids),
            identity,
            sock,
            self._loop,
            self.spin_us,
            self._spin_gate,
            limits=mine,
            max_segments=self.limits.connection_segments,
            max_queued=self.limits.connection_queued_bytes,
            account=self._queue_account(identity.name, mine),
        )
        conn.out.on_limit = lambda limit: self._over_queued(conn, limit)
        self._connections[conn.conn_id] = conn
        log.info(
            "connection %d: pid %d uid %d as %s%s",
            conn.conn_id,
            peer.pid,
            peer.uid,
            identity.name,
            " (admin)" if identity.admin else "",
        )
        if self._poller is not None:
            self._poller.add(conn)
        conn.send({"v": PROTOCOL_VERSION, "id": 0, "hello": self._hello(conn, peer)})
        conn.thread = threading.Thread(
            target=self._serve_connection,
            args=(conn,),
            name=f"juggle-conn-{conn.conn_id}",
            daemon=True,
        )
        try:
            conn.thread.start()
        except RuntimeError as exc:  # no thread to be had: that connection only is closed
            log.error("connection %d: no reader thread (%s); closing it", conn.conn_id, exc)
            conn.thread = None
            if self._poller is not None:
                self._poller.remove(conn)
            self._connections.pop(conn.conn_id, None)
            conn.out.release()
            self._give(identity.name, connections=1)

    def _hello(self, conn: _Connection, peer: PeerCredentials) -> dict[str, Any]:
        ident = conn.identity
        return {
            "name": ident.name,
            "tenant": ident.tenant,
            "admin": ident.admin,
            "uid": peer.uid,
            "gid": peer.gid,
            "pid": peer.pid,
            "daemon_pid": os.getpid(),
            "max_frame": conn.max_frame,
            "protocol": PROTOCOL_VERSION,
        }

    def _serve_connection(self, conn: _Connection) -> None:
        """The reader thread of ``conn``: read and start its requests until it ends."""
        try:
            self._read_connection(conn)
        except ProtocolError as exc:
            log.warning("connection %d: %s; closing it", conn.conn_id, exc)
            conn.send({"v": PROTOCOL_VERSION, "id": 0, "err": error_to_wire(exc)})
        except Exception:
            log.exception("connection %d: reading failed", conn.conn_id)
        finally:
            self._finish(conn)

    def _read_connection(self, conn: _Connection) -> None:
        """Read frames from the blocking socket and start each request; returns at the end
        of the stream. Raises :class:`ProtocolError` for a malformed frame."""
        sock = conn.sock
        spinner = conn.spinner
        while True:
            # eof and backlog change only while this thread runs a call (a helper reads);
            # the helper is done by the time the call returns, so no lock is needed here
            if conn.eof:  # seen by a helper while this thread ran a call
                if conn.buf:
                    raise ProtocolError("connection closed inside a frame")
                return
            batch: list[bytes] = []
            if conn.backlog:
                with conn.lock:
                    batch = list(conn.backlog)
                    conn.backlog.clear()
            if not batch:
                deadline = conn.frame_deadline
                if deadline is not None:  # a frame has begun: the rest must come in time
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not conn.wait_readable(remaining):
                        raise ProtocolError(
                            f"a frame did not come whole within {FRAME_TIMEOUT_S:g} s"
                        )
                try:
                    if spinner is not None:
                        spinner.spin()  # poll a little before blocking (see spin.py)
                    data = sock.recv(_RECV)
                except OSError:
                    return
                if not data:
                    if conn.buf:
                        raise ProtocolError("connection closed inside a frame")
                    return
                batch = self._split(conn, data)
            last = len(batch) - 1
            for i, payload in enumerate(batch):
                self._wait_for_room(conn)
                self._dispatch(conn, parse_request(payload), inline=i == last and not conn.buf)

    def _split(self, conn: _Connection, data: bytes) -> list[bytes]:
        """The payloads ``data`` completes (the rest stays in ``conn.buf``). Raises
        :class:`ProtocolError` for a length of 0 or over the maximum."""
        if not conn.buf and len(data) > HEADER.size:  # the usual case: one whole frame
            (length,) = HEADER.unpack_from(data)
            if len(data) == HEADER.size + length and length <= conn.max_frame:
                return [data[HEADER.size :]]
        buf = conn.buf
        buf += data
        out: list[bytes] = []
        while len(buf) >= HEADER.size:
            (length,) = HEADER.unpack_from(buf)
            if length == 0 or length > conn.max_frame:
                raise ProtocolError(f"frame length {length} outside 1..{conn.max_frame}", length)
            end = HEADER.size + length
            if len(buf) < end:
                break
            with memoryview(buf) as view:  # one copy, not two (a slice, then bytes)
                out.append(bytes(view[HEADER.size : end]))
            del buf[:end]
        if not buf:
            conn.frame_deadline = None
        elif out or conn.frame_deadline is None:
            conn.frame_deadline = time.monotonic() + FRAME_TIMEOUT_S
        return out

    @staticmethod
    def _wait_for_room(conn: _Connection) -> None:
        """Block while ``conn`` has its maximum of requests running."""
        if conn.running < MAX_INFLIGHT:  # only this thread raises it: room stays
            return
        with conn.lock:
            while conn.running >= MAX_INFLIGHT:
                conn.waiters += 1
                try:
                    conn.cond.wait()
                finally:
                    conn.waiters -= 1

    def _on_watched(self, conn: _Connection) -> None:
        """The poller saw data on ``conn`` while its reader runs a call (poller thread)."""
        try:
            self._calls.submit(self._read_while_busy, conn)
        except RuntimeError:  # the pool is shut down
            pass

    def _read_while_busy(self, conn: _Connection) -> None:
        """Read what came on ``conn`` while its reader thread runs a call, and hand the
        requests to the pool (a pool thread sent by the poller)."""
        with conn.lock:
            if conn.mode != _WATCHED:
                return  # the reader has taken its socket back
            conn.mode = _HELPER
        rearm = True
        try:
            try:
                data = conn.sock.recv(_RECV, socket.MSG_DONTWAIT)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data == b"":
                rearm = False
                with conn.lock:
                    conn.eof = True  # the reader ends the connection after its call
            elif data:
                for payload in self._split(conn, data):
                    msg = parse_request(payload)
                    with conn.lock:
                        full = conn.running >= MAX_INFLIGHT or bool(conn.backlog)
                        if full:  # the reader starts it once it has room
                            conn.backlog.append(payload)
                            rearm = False
                    if not full:
                        self._dispatch(conn, msg, inline=False)
        except ProtocolError as exc:
            log.warning("connection %d: %s; closing it", conn.conn_id, exc)
            conn.send({"v": PROTOCOL_VERSION, "id": 0, "err": error_to_wire(exc)})
            rearm = False
            with conn.lock:
                conn.eof = True
                conn.buf.clear()
        finally:
            with conn.lock:
                conn.mode = _WATCHED
                if rearm and not conn.eof and self._poller is not None:
                    self._poller.arm(conn)
                conn.cond.notify_all()

    def _finish(self, conn: _Connection) -> None:
        """``conn`` ended (its reader thread): its running calls finish, then its proxies
        and segments are given back and its socket closed."""
        conn.closed = True
        if conn.unlisten is not None:
            conn.unlisten()
            conn.unlisten = None
        with conn.lock:
            while conn.running > 0:  # calls running for it finish first
                conn.waiters += 1
                try:
                    conn.cond.wait()
                finally:
                    conn.waiters -= 1
        if self._poller is not None:
            self._poller.remove(conn)
        conn.out.close()
        self._release_all(conn)
        loop = self._loop
        try:
            if loop is None:
                raise RuntimeError
            loop.call_soon_threadsafe(conn.out.release)  # the loop may watch its socket
        except RuntimeError:  # the loop is gone
            conn.sock.close()
        self._connections.pop(conn.conn_id, None)
        self._give(conn.identity.name, connections=1)
        log.info("connection %d (%s) closed", conn.conn_id, conn.identity.name)

    def _dispatch(self, conn: _Connection, msg: dict[str, Any], *, inline: bool) -> None:
        """Start request ``msg`` (the reader thread, or a helper): refuse it, run it here,
        or hand it to a pool whose thread sends the reply itself. ``inline``: no other
        request is known to be waiting, so a call may run on this thread while the poller
        watches the socket."""
        op = self._ops.get(msg["op"])
        try:
            if op is None:
                raise ProtocolError(f"unknown operation {msg['op']!r:.40}", msg["op"][:40])
            if op.admin and not conn.identity.admin:
                raise AccessDeniedError(
                    f"{msg['op']} needs the admin group; {conn.identity.name!r} is no admin",
                    msg["op"],
                )
            if self._closing:
                raise DaemonShuttingDownError(_SHUTTING_DOWN)
            if op.quota:
                self._check_quota(conn.identity)
            with self._count_lock:
                if self._closing:  # checked again where the shutdown counts the running
                    raise DaemonShuttingDownError(_SHUTTING_DOWN)
                self._active += 1
        except Exception as exc:
            conn.send({"v": PROTOCOL_VERSION, "id": msg["id"], "err": error_to_wire(exc)})
            return
        pool = op.pool
        poller = self._poller
        with conn.lock:
            conn.running += 1
            watched = (
                pool == "calls"
                and inline
                and conn.running == 1
                and conn.mode == _READER
                and poller is not None
            )
            if watched:
                conn.mode = _WATCHED
        if watched:
            assert poller is not None
            self._run_watched(conn, op, msg, poller)
        elif pool == "inline":
            self._run(conn, op, msg)
        else:
            executor = self._admin if pool == "admin" else self._calls
            executor.submit(self._run, conn, op, msg)

    def _run_watched(
        self, conn: _Connection, op: _Op, msg: dict[str, Any], poller: _Poller
    ) -> None:
        """Run ``op`` on the reader thread itself (no hand-over to the pool: the fast path
        of a lone caller; ``conn.mode`` is already ``_WATCHED``); meanwhile the poller watches
        the socket, and a request that comes is read and started by a pool thread, so a slow
        call holds up nothing."""
        poller.arm(conn)
        try:
            message, fd = self._reply(conn, op, msg)
        finally:
            with conn.lock:
                while conn.mode == _HELPER:  # a helper is reading: let it finish
                    conn.waiters += 1
                    try:
                        conn.cond.wait()
                    finally:
                        conn.waiters -= 1
                conn.mode = _READER
                poller.disarm(conn)
                # this request no longer counts against the connection's limit (only this
                # thread, the reader, ends the connection, and it sends the reply first)
                conn.running -= 1
                if conn.waiters:
                    conn.cond.notify_all()
        conn.send(message, fd)
        self._count_done()

    def _reply(
        self, conn: _Connection, op: _Op, msg: dict[str, Any]
    ) -> tuple[dict[str, Any], int | None]:
        """Run ``op``; its reply message (and a descriptor to send with it)."""
        request_id = msg["id"]
        try:
            reply = op.fn(conn, msg)
            if type(reply) is dict:  # a fresh map of the operation's: completed in place
                reply["v"] = PROTOCOL_VERSION
                reply["id"] = request_id
                return reply, None
            if isinstance(reply, _FdReply):
                return {"v": PROTOCOL_VERSION, "id": request_id, **reply.body}, reply.fd
            return {"v": PROTOCOL_VERSION, "id": request_id, **reply}, None
        except Exception as exc:
            if not isinstance(exc, JuggleError):
                log.exception("connection %d: %s failed", conn.conn_id, msg.get("op"))
            wire = error_to_wire(exc)
            if len(wire[1]) > MAX_ERROR_MESSAGE:  # a message quoting a large argument
                wire[1] = wire[1][:MAX_ERROR_MESSAGE] + " [...]"
            return {"v": PROTOCOL_VERSION, "id": request_id, "err": wire}, None

    def _run(self, conn: _Connection, op: _Op, msg: dict[str, Any]) -> None:
        """Run ``op`` and send its reply (a pool thread, or the reader for inline ones)."""
        try:
            message, fd = self._reply(conn, op, msg)
            conn.send(message, fd)
        finally:
            self._done(conn)

    def _done(self, conn: _Connection) -> None:
        """A request of ``conn`` ended (any thread): count it; wake whoever waits for room
        on this connection or for its last request, and the loop when it waits for the
        daemon's last one."""
        with conn.lock:
            conn.running -= 1
            if conn.waiters:
                conn.cond.notify_all()
        self._count_done()

    def _count_done(self) -> None:
        """A request ended and its reply is sent: count it; wake the loop when it waits for
        the daemon's last one."""
        with self._count_lock:
            self._active -= 1
            stopped = self._closing and self._active == 0
        loop = self._loop
        if not stopped or loop is None or self._idle is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(self._idle.set)

    def _check_quota(self, ident: Identity) -> None:
        if ident.calls_per_s is None:
            return
        with self._bucket_lock:
            bucket = self._buckets.get(ident.name)
            if bucket is None or bucket.rate != ident.calls_per_s:
                bucket = self._buckets[ident.name] = _Bucket(ident.calls_per_s)
            taken = bucket.take()
        if not taken:
            raise QuotaExceededError(
                f"tenant {ident.name!r} is over its quota of {ident.calls_per_s:g} calls/s",
                ident.name,
            )

    def _release_all(self, conn: _Connection) -> None:
        for handle in list(conn.handles.values()):
            self._drop_handle(conn, handle)
        segments = list(conn.segments.values())
        conn.segments.clear()
        conn.shm_bytes = 0
        for seg in segments:
            with contextlib.suppress(BufferError):
                seg.mm.close()
        if segments:
            self._give(conn.identity.name, segments=len(segments))

    # -- inline operations -----------------------------------------------------------------

    def _op_ping(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        return {"ok": "pong"}

    def _op_whoami(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        ident = conn.identity
        return {
            "ok": {
                "name": ident.name,
                "tenant": ident.tenant,
                "admin": ident.admin,
                "uid": ident.uid,
            }
        }

    def _op_subscribe(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        if conn.unlisten is None:
            channel = self._framework().signals(conn.identity.name)

            def forward(sig: TenantSignal) -> None:
                conn.push({"v": PROTOCOL_VERSION, "id": 0, "push": "signal", "sig": to_wire(sig)})
                channel.drain()  # delivered: the daemon has read it

            conn.unlisten = channel.listen(forward)
        return {"ok": True}

    def _op_unsubscribe(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        if conn.unlisten is not None:
            conn.unlisten()
            conn.unlisten = None
        return {"ok": True}

    def _op_segment(self, conn: _Connection, msg: dict[str, Any]) -> _FdReply:
        size = _field(msg, "size", int)
        if not 0 < size <= MAX_SEGMENT_BYTES:
            raise ServiceArgumentError(f"segment size {size} outside 1..{MAX_SEGMENT_BYTES}", size)
        if len(conn.segments) >= conn.max_segments:
            raise LimitExceededError(
                f"connection {conn.conn_id} holds {len(conn.segments)} shared-memory segments; "
                f"its limit connection_max_segments is {conn.max_segments}",
                ("connection_max_segments", conn.max_segments),
            )
        if conn.shm_bytes + size > MAX_CONNECTION_SHM:
            raise QuotaExceededError(
                f"connection holds {len(conn.segments)} segments of {conn.shm_bytes} bytes; "
                f"a segment of {size} more would pass {MAX_CONNECTION_SHM}",
                conn.identity.name,
            )
        assert conn.limits is not None
        # counted before the descriptor exists: the daemon never opens one past the limits
        self._take(conn.identity, conn.limits, connection=False)
        fd = -1
        try:
            fd = os.memfd_create("juggle-shm", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)  # nobody can shrink it under a call
            mm = mmap.mmap(fd, size)  # keeps a descriptor of its own (a dup)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            self._give(conn.identity.name, segments=1)
            raise
        seg = _Segment(next(self._segment_ids), size, mm)
        conn.segments[seg.segment_id] = seg
        conn.shm_bytes += size
        return _FdReply({"ok": {"seg": seg.segment_id, "size": size}, "fd": 1}, fd)

    def _op_segment_free(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        seg = conn.segments.pop(_field(msg, "seg", int), None)
        if seg is None:
            return {"ok": False}
        conn.shm_bytes -= seg.size
        with contextlib.suppress(BufferError):  # a call still holds a view: the GC frees it
            seg.mm.close()
        self._give(conn.identity.name, segments=1)
        return {"ok": True}

    # -- services and calls ----------------------------------------------------------------

    def _allowed_filter(self, ident: Identity, extra: str | None) -> str | None:
        parts = [str(parse_filter(f)) for f in (ident.services, extra) if f]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else f"(&{''.join(parts)})"

    def _allowed_ids(self, ident: Identity) -> set[int] | None:
        """Ids of the services ``ident`` may use (None: all)."""
        if ident.services is None or ident.admin:
            return None
        fw = self._framework()
        return {ref.service_id for ref in fw.registry.get_references(None, ident.services)}

    def _op_get_service(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        fw = self._framework()
        interface = _field(msg, "interface", str)
        wanted = _field(msg, "filter", str, optional=True)
        ident = conn.identity
        combined = self._allowed_filter(ident, wanted)
        with self._lock:
            held = self._held.get(ident.name, 0)
            if ident.max_services is not None and held >= ident.max_services:
                raise QuotaExceededError(
                    f"tenant {ident.name!r} holds {held} services, its quota is "
                    f"{ident.max_services}",
                    ident.name,
                )
            self._held[ident.name] = held + 1
        try:
            proxy = fw.get_service(interface, consumer=ident.name, filter=combined)
        except BaseException:
            with self._lock:
                self._held[ident.name] -= 1
            raise
        binding = binding_of(proxy)
        methods = {m.name: m.state_setting for m in binding.methods}
        with self._lock:
            guard = None
            if any(methods.values()):
                guard = self._guards.get(id(binding.record))
                if guard is None or guard.record is not binding.record:
                    guard = self._guards[id(binding.record)] = _StateGuard(binding.record)
                guard.users += 1
            impl = binding.impl
            device = impl.device if isinstance(impl, VirtualDevice) else None
            handle = _Handle(
                conn.next_id(), proxy, proxy.service_id, methods, guard, device, _state_key(ident)
            )
            conn.handles[handle.handle_id] = handle
            self._tenant_proxies.setdefault((ident.name, proxy.service_id), []).append(proxy)
            self._forget_kept(fw)
        if conn.closed:  # the client left while we got it
            self._drop_handle(conn, handle)
        return {
            "ok": {
                "h": handle.handle_id,
                "service_id": proxy.service_id,
                "interface": proxy.interface,
                "consumer": proxy.consumer,
                "methods": [[name, setting] for name, setting in methods.items()],
            }
        }

    def _drop_handle(self, conn: _Connection, handle: _Handle) -> bool:
        ident = conn.identity
        with self._lock:
            if conn.handles.pop(handle.handle_id, None) is None:
                return False
            self._held[ident.name] = self._held.get(ident.name, 1) - 1
            proxies = self._tenant_proxies.get((ident.name, handle.service_id), [])
            with contextlib.suppress(ValueError):
                proxies.remove(handle.proxy)
            if not proxies:
                self._tenant_proxies.pop((ident.name, handle.service_id), None)
            guard = handle.guard
            if guard is not None:
                # the state this remote proxy set stays kept for its tenant (self._kept), not
                # for whoever comes next: a new guard starts with no owner, and a remote proxy
                # that set no state uses none another tenant left (see _invoke)
                guard.users -= 1
                if guard.users <= 0 and self._guards.get(id(guard.record)) is guard:
                    del self._guards[id(guard.record)]
            fw = self._framework()
            self._forget_kept(fw)
        try:
            return fw.unget_service(handle.proxy)
        except JuggleError as exc:  # the framework is closed, the service gone
            log.debug("release of service %d: %s", handle.service_id, exc)
            return False

    def _forget_kept(self, fw: Framework) -> None:
        """Drop the states kept for services no longer registered (the caller holds
        ``self._lock``)."""
        for key in [k for k in self._kept if not self._registered(fw, k[0])]:
            del self._kept[key]

    @staticmethod
    def _registered(fw: Framework, service_id: int) -> bool:
        try:
            fw.registry.reference(service_id)
        except JuggleError:
            return False
        return True

    def _handle(self, conn: _Connection, msg: dict[str, Any]) -> _Handle:
        handle_id = _field(msg, "h", int)
        handle = conn.handles.get(handle_id)
        if handle is None:
            raise UnknownServiceError(
                f"no service handle {handle_id} on this connection", handle_id
            )
        return handle

    def _op_release(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        return {"ok": self._drop_handle(conn, self._handle(conn, msg))}

    def _arg(self, conn: _Connection, value: Any, views: list[memoryview]) -> Any:
        if isinstance(value, InOut):
            return bytearray(value.data)
        if isinstance(value, ShmRef):
            view = conn.view(value)
            views.append(view)
            return view
        return value

    def _op_call(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        handle_id = msg.get("h")
        handle = conn.handles.get(handle_id) if type(handle_id) is int else None
        if handle is None:
            handle = self._handle(conn, msg)  # raises the error that fits
        name = msg.get("m")
        if type(name) is not str or name not in handle.methods:
            name = _field(msg, "m", str)
            raise ServiceArgumentError(
                f"service {handle.service_id} has no method {name!r:.60}", name[:60]
            )
        raw_args = msg.get("args") or []
        raw_kw = msg.get("kw") or {}
        if type(raw_args) is not list or type(raw_kw) is not dict:
            raise ProtocolError('"args" must be a list and "kw" a map')
        buffers = False
        for a in raw_args:
            if isinstance(a, _BUFFER_REFS):
                buffers = True
                break
        ident = conn.identity
        if (
            not buffers and not raw_kw and (handle.device is None or ident.max_regions is None)
        ):  # the usual small call: plain values, called with as they came, no region claim
            return {"ok": self._invoke(handle, name, raw_args, _NO_KW)}
        views: list[memoryview] = []
        claim = self._claim_region(ident, handle)
        try:
            # plain values are called with as they came
            args = [self._arg(conn, a, views) for a in raw_args] if buffers else raw_args
            kwargs = {str(k): self._arg(conn, v, views) for k, v in raw_kw.items()}
            result = self._invoke(handle, name, args, kwargs)
            out = []
            if buffers:
                out = [[i, bytes(a)] for i, a in enumerate(args) if isinstance(raw_args[i], InOut)]
            if kwargs:
                out += [[k, bytes(v)] for k, v in kwargs.items() if isinstance(raw_kw[k], InOut)]
        finally:
            if claim is not None:
                self._unclaim_region(ident.name, claim)
            for view in views:
                with contextlib.suppress(BufferError):
                    view.release()
        reply: dict[str, Any] = {"ok": result}
        if out:
            reply["out"] = out
        return reply

    def _claim_region(self, ident: Identity, handle: _Handle) -> str | None:
        """Before a call of ``handle``: the device it claims a region for (None: no claim to
        make). Raises :class:`RegionQuotaExceededError` when the tenant's virtual devices
        holding, waiting for or calling for a region are as many as its ``max_regions`` and
        this device is not one of them."""
        device, quota = handle.device, ident.max_regions
        if device is None or quota is None:
            return None
        with self._region_lock:
            claims = self._region_claims.setdefault(ident.name, {})
            if device not in claims:
                held = self._devices_placed(ident.name) | set(claims)
                if device not in held and len(held) >= quota:
                    raise RegionQuotaExceededError(
                        f"tenant {ident.name!r} holds or waits for {len(held)} region(s) (for "
                        f"{', '.join(sorted(held))}); its max_regions quota is {quota}: give "
                        "one of those services back (unget_service) to free its region",
                        ident.name,
                    )
            claims[device] = claims.get(device, 0) + 1
        return device

    def _unclaim_region(self, tenant: str, device: str) -> None:
        with self._region_lock:
            claims = self._region_claims.get(tenant, {})
            left = claims.get(device, 1) - 1
            if left > 0:
                claims[device] = left
            else:
                claims.pop(device, None)

    def _devices_placed(self, tenant: str) -> set[str]:
        """Devices of ``tenant`` connected to a region, being placed, or waiting for one."""
        for snap in self._framework().tenants():
            if snap.name == tenant:
                return {d.device for d in snap.devices if d.state != "disconnected"}
        return set()

    def _invoke(self, handle: _Handle, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call ``name`` on ``handle``'s proxy with the state this client may use.

        A state-setting call becomes the remote proxy's own state and its tenant's kept state.
        Any other call runs on the remote proxy's own state (replayed first when the
        implementation holds another), else on its tenant's (or share group's) state: the one
        on the implementation now, or the one kept for it, replayed. A client whose tenant has
        set no state may use no state another left (:class:`ServiceStateError`); only a state
        record nobody ever set is used as it is (a service without state).
        """
        method = handle.method(name)
        guard = handle.guard
        if guard is None:
            return method(*args, **kwargs)
        with guard.lock:
            own = handle.own
            if handle.methods[name]:  # state-setting: it becomes this remote proxy's state
                result = method(*args, **kwargs)
                own[name] = (
                    tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args),
                    dict(kwargs),
                )
                guard.owner, guard.holder = own, handle.key
                self._kept[(handle.service_id, handle.key)] = own
                return result
            if guard.owner is not own:
                if own:
                    self._replay(handle, guard, own)
                elif guard.holder != handle.key:
                    kept = self._kept.get((handle.service_id, handle.key))
                    if kept is not None:
                        self._replay(handle, guard, kept)
                    elif guard.holder is not None or guard.record.calls:
                        setters = ", ".join(n for n, s in handle.methods.items() if s)
                        kind, whose = handle.key
                        who = "tenant" if kind == "tenant" else "share_state group"
                        raise ServiceStateError(
                            f"service {handle.service_id}: its state was set by another "
                            f"client, not by {who} {whose!r}; call {setters} first",
                            handle.service_id,
                        )
            return method(*args, **kwargs)

    @staticmethod
    def _replay(handle: _Handle, guard: _StateGuard, calls: StateCalls) -> None:
        """Make ``calls`` (a state of ``handle``'s tenant) the implementation's state."""
        for setter, (a, k) in list(calls.items()):
            getattr(handle.proxy, setter)(*a, **k)
        guard.owner, guard.holder = calls, handle.key

    # -- snapshots -------------------------------------------------------------------------

    def _op_services(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        fw = self._framework()
        ident = conn.identity
        snaps = fw.services()
        if not ident.admin:
            allowed = self._allowed_ids(ident)
            out = []
            for s in snaps:
                if allowed is not None and s.service_id not in allowed:
                    continue
                wire = to_wire(s)
                wire["consumers"] = [c for c in s.consumers if c == ident.name]
                out.append(wire)
            return {"ok": out}
        return {"ok": [to_wire(s) for s in snaps]}

    def _op_regions(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        return {"ok": [to_wire(r) for r in self._framework().regions()]}

    def _op_modules(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        return {"ok": [to_wire(m) for m in self._framework().modules()]}

    def _op_tenants(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        ident = conn.identity
        snaps = self._framework().tenants()
        if not ident.admin:
            snaps = tuple(t for t in snaps if t.name == ident.name)
        return {"ok": [to_wire(t) for t in snaps]}

    def _op_statistics(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        fw = self._framework()
        service_id = _service_id(msg)
        ident = conn.identity
        full = fw.statistics(service_id)
        if ident.admin:
            return {"ok": to_wire(full)}
        allowed = self._allowed_ids(ident)
        if allowed is not None and service_id not in allowed:
            raise UnknownServiceError(f"no service with id {service_id!r}", service_id)
        return {"ok": to_wire(self._own_statistics(ident.name, full))}

    def _own_statistics(self, name: str, full: ServiceStatistics) -> ServiceStatistics:
        """``full`` reduced to consumer ``name``'s calls (through its proxy held now)."""
        with self._lock:
            proxies = list(self._tenant_proxies.get((name, full.service_id), ()))
        traces: dict[str, dict[str, Accumulator]] = {}
        inflight = 0
        if proxies:
            binding = binding_of(proxies[0])  # one proxy per consumer and service
            traces = binding.traces()
            inflight = binding.inflight()
        ratio = ns_per_tick()
        per_tier = {
            tier: merge(methods.values()).snapshot(ratio)
            for tier, methods in sorted(traces.items())
            if tier != "gone"
        }
        by_method: dict[str, list[Accumulator]] = {}
        for methods in traces.values():
            for method, acc in methods.items():
                by_method.setdefault(method, []).append(acc)
        total = merge(a for accs in by_method.values() for a in accs)
        return ServiceStatistics(
            service_id=full.service_id,
            interface=full.interface,
            tier=full.tier,
            total=total.snapshot(ratio),
            rate_per_s=self._rate((name, full.service_id), total.calls),
            per_tier=per_tier,
            per_consumer={name: total.snapshot(ratio)} if proxies else {},
            per_method={m: merge(a).snapshot(ratio) for m, a in sorted(by_method.items())},
            inflight=inflight,
            hardware_modeled_mean_us=full.hardware_modeled_mean_us,
            fallbacks=full.fallbacks,
            verified=full.verified,
            mismatches=full.mismatches,
        )

    def _rate(self, key: tuple[str, int], calls: int, window_s: float = 1.0) -> float:
        now = time.monotonic()
        with self._lock:
            samples = self._rates.setdefault(key, deque(maxlen=64))
            base = samples[0] if samples else (now, calls)
            for t, c in samples:
                if now - t >= window_s:
                    base = (t, c)
            samples.append((now, calls))
        span = now - base[0]
        return (calls - base[1]) / span if span > 0 else 0.0

    # -- admin -----------------------------------------------------------------------------

    def _op_install(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        fw = self._framework()
        path = _field(msg, "path", str)
        start = msg.get("start", True) is not False
        entry = self.state.copy_in(path)
        try:
            module = fw.install(self.state.target(entry))
        except BaseException:
            self.state.discard(entry)
            raise
        try:
            if start:
                module.start()
        except BaseException:
            with contextlib.suppress(JuggleError):
                module.uninstall()
            self.state.discard(entry)
            raise
        self.state.record(ModuleEntry(entry.path, module.name, start))
        log.info("%s installed module %s (%s)", conn.identity.name, module.name, path)
        return {"ok": to_wire(module.snapshot())}

    def _op_uninstall(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        fw = self._framework()
        name = _field(msg, "name", str)
        module = fw.module(name)
        module.uninstall()
        self.state.forget(module.name)
        log.info("%s uninstalled module %s", conn.identity.name, module.name)
        return {"ok": True}

    def _op_juggle(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        to_hardware = _field(msg, "to_hardware", int, optional=True)
        to_software = msg.get("to_software") or []
        if not isinstance(to_software, list) or not all(type(i) is int for i in to_software):
            raise ProtocolError('"to_software" must be a list of service ids')
        report = self._framework().juggle(to_hardware=to_hardware, to_software=to_software)
        return {"ok": to_wire(report)}

    def _op_set_tier(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        report = self._framework().set_tier(_service_id(msg), _field(msg, "tier", str))
        return {"ok": to_wire(report)}

    def _op_reload_policy(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        return {"ok": self._reload_policy()}

    def _reload_policy(self) -> dict[str, Any]:
        """Read the policy again, register new tenants, close the connections whose identity
        changed; a summary."""
        policy = self._load_policy()
        self.policy = policy
        self._set_limits()
        changed = self._add_tenants()
        closed = []
        for conn in list(self._connections.values()):
            peer = PeerCredentials(conn.identity.pid, conn.identity.uid, conn.identity.gid)
            with contextlib.suppress(OSError):
                peer = peer_credentials(conn.sock)
            now = policy.identify(peer)
            if now != conn.identity:
                closed.append(conn.conn_id)
                conn.abort()
        log.info(
            "policy reloaded: %d tenants, %d connections closed", len(policy.tenants), len(closed)
        )
        return {
            "tenants": [t.name for t in policy.tenants],
            "changed": changed,
            "closed_connections": closed,
        }

    def _op_recover(self, conn: _Connection, msg: dict[str, Any]) -> dict[str, Any]:
        """Admin: :meth:`~juggle.Framework.recover` ``region``. Every request, refused or not,
        leaves an audit line in the log: who (tenant, uid, pid), what, when (the log line's
        time, and the UTC time in it) and the result."""
        ident = conn.identity
        region = msg.get("region")
        who = f"{ident.name!r} (uid {ident.uid}, pid {ident.pid}, connection {conn.conn_id})"
        what = f"recover {region!r:.80}"
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            if not ident.admin:
                raise AccessDeniedError(
                    f"recover needs the admin group; {ident.name!r} is no admin", "recover"
                )
            region = _field(msg, "region", str)
            report = self._framework().recover(region)
        except Exception as exc:
            log.warning(
                "audit: %s asked to %s at %s: refused: %s: %s",
                who,
                what,
                when,
                type(exc).__name__,
                exc,
            )
            raise
        done = (
            "region emptied, nothing to put back"
            if report is None
            else f"region emptied, service {report.to_hardware} back in {report.region!r}"
        )
        log.warning("audit: %s asked to %s at %s: done: %s", who, what, when, done)
        return {"ok": None if report is None else to_wire(report)}


@dataclass(frozen=True, slots=True)
class _FdReply:
    """A reply that carries a file descriptor."""

    body: dict[str, Any]
    fd: int
