"""The daemon's transport: the listening socket, and each connection's frames in and out.

It knows sockets and frames, not who is on the other end nor what a request means:

- :class:`Listener` accepts on the listening socket from the event loop and hands every new
  socket to the daemon; an ``accept`` that fails (out of descriptors) pauses it instead of
  spinning.
- :class:`Link` is the socket side of one connection: its blocking socket, the bytes read
  that are not yet a whole frame (with the deadline for the rest), the count of its requests
  running, and :class:`Writer`, its sending side, usable from any thread.
- :class:`Reader` runs each connection's reader thread: it reads frames from the blocking
  socket and hands every request to a dispatch function. While that thread runs a call
  itself, :class:`Poller` watches the socket, and a request that comes meanwhile is read by a
  pool thread (:meth:`Reader.read_while_busy`), so a slow call holds up nothing.

Nothing waits with ``select()``: the frame deadline is a ``poll(2)`` (:class:`ReadWait`), the
poller ``epoll``, the event loop asyncio's ``epoll`` selector; descriptors past 1,023 work.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import select
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Generic, TypeVar

from juggle.daemon.protocol import (
    DEFAULT_MAX_FRAME,
    HEADER,
    PROTOCOL_VERSION,
    error_to_wire,
    frame,
    pack,
    parse_request,
)
from juggle.daemon.spin import ReadWait, Spinner
from juggle.daemon.tls import TlsSession
from juggle.errors import ProtocolError

__all__ = [
    "FRAME_TIMEOUT_S",
    "MAX_INFLIGHT",
    "PUSH_BACKLOG",
    "Link",
    "Listener",
    "Poller",
    "Reader",
    "Writer",
]

log = logging.getLogger("juggle.daemon")

#: Requests a connection may have running at once; beyond, the daemon stops reading it.
MAX_INFLIGHT = 64
#: Bytes a connection may have waiting to be sent before signal pushes to it are dropped
#: (before it is closed: the policy's ``[limits]``).
PUSH_BACKLOG = 1 << 20
#: After ``accept`` fails (out of descriptors: EMFILE, ENFILE; out of memory), the listener
#: is not watched for a pause that doubles from the first to the last value while accepting
#: keeps failing (one log line per pause), and is reset by an accept that succeeds.
ACCEPT_PAUSE_MIN_S = 0.01
ACCEPT_PAUSE_MAX_S = 1.0
#: Once a frame's first bytes came, the rest must come within this many seconds.
FRAME_TIMEOUT_S = 30.0
#: Bytes read from a socket at once.
_RECV = 1 << 16
_ARMED = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLONESHOT

#: How a connection is read: by its reader thread, watched by the poller while that thread
#: runs a call, or by a pool thread the poller sent (see :meth:`Reader.read_while_busy`).
READER, WATCHED, HELPER = 0, 1, 2


class Writer:
    """The sending side of a connection, usable from any thread.

    Worker threads send their replies themselves (no hop back to the event loop on a call's
    path): under the lock, a frame goes straight to the non-blocking socket when nothing is
    queued before it; what the socket does not take is queued, and the loop sends it when the
    socket is writable again. A frame may carry a file descriptor (``SCM_RIGHTS``), sent with
    its first byte. More than ``limit`` bytes queued: the client does not read, it is closed.
    ``account`` (under the writer's lock) is told every change of the bytes queued; when an
    increase takes the tenant or the daemon past its bound it names that bound, and
    ``on_limit`` is called with that name (on the calling thread, no lock held). ``seal``
    (a TLS connection's :meth:`~juggle.daemon.tls.TlsSession.seal`) turns each frame into
    what goes on the wire, under the lock (so in order); such a connection carries no
    descriptors.
    """

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        limit: int,
        account: Callable[[int], str | None] | None = None,
        seal: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self._sock = sock
        self._seal = seal
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
            if self.closed or (fd is not None and self._seal is not None):
                if fd is not None:
                    os.close(fd)
                return
            if self._seal is not None:
                data = self._seal(data)
                if not data:
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


class Link:
    """The socket side of connection ``conn_id``: the blocking socket its reader thread reads, the
    bytes read that are not yet a whole frame, its sending side ``out``, and the count of its
    requests running (``lock`` guards that count and the reading mode; ``cond`` wakes whoever
    waits for room or for the last request). ``tls``: the TLS session of a TCP connection
    (None on the Unix socket); what is read is unsealed by :meth:`plaintext` before framing."""

    def __init__(
        self,
        conn_id: int,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        *,
        spin_us: float = 0.0,
        spin_gate: threading.Lock | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
        max_queued: int = 64 << 20,
        account: Callable[[int], str | None] | None = None,
        tls: TlsSession | None = None,
    ) -> None:
        self.conn_id = conn_id
        self.tls = tls
        self.sock = sock
        self.fd = sock.fileno()
        # the reader thread polls for the next request a little before blocking on it
        self.spinner = Spinner(self.fd, spin_us, spin_gate) if spin_us else None
        self.max_frame = max_frame
        self.out = Writer(sock, loop, max_queued, account, tls.seal if tls is not None else None)
        self.out.on_overflow = self.abort
        self._readable: ReadWait | None = None  # the frame-deadline wait
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        # requests running: counted by the reader (start) and the threads running them (end)
        self.running = 0
        self.mode = READER
        self.waiters = 0  # threads waiting on ``cond`` (for room, or for the last request)
        self.backlog: deque[bytes] = deque()  # requests a helper read but had no room for
        self.buf = bytearray()  # bytes read, not yet a whole frame
        self.frame_deadline: float | None = None  # the frame begun must be whole by then
        self.eof = False
        self.closed = False
        self.thread: threading.Thread | None = None
        self.dropped_pushes = 0

    def abort(self) -> None:
        """End the connection (any thread): its reader sees the end of stream and closes it."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def plaintext(self, data: bytes) -> bytes:
        """What bytes ``data`` read from the socket carry: themselves, or on a TLS connection
        all the plaintext they complete (b"": a record is not whole yet; like a frame begun,
        its rest must come within :data:`FRAME_TIMEOUT_S`). Raises :class:`ProtocolError` for
        a bad TLS record or an alert of the peer."""
        tls = self.tls
        if tls is None:
            return data
        try:
            plain = tls.unseal(data)
        except ssl.SSLError as exc:
            raise ProtocolError(f"TLS: {exc.reason or exc}") from None
        if not plain:
            if self.frame_deadline is None:
                self.frame_deadline = time.monotonic() + FRAME_TIMEOUT_S
        elif not self.buf:
            self.frame_deadline = None  # split() sets it again if a frame begins
        return plain

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

    def split(self, data: bytes) -> list[bytes]:
        """The payloads ``data`` completes (the rest stays in :attr:`buf`). Raises
        :class:`ProtocolError` for a length of 0 or over the maximum."""
        if not self.buf and len(data) > HEADER.size:  # the usual case: one whole frame
            (length,) = HEADER.unpack_from(data)
            if len(data) == HEADER.size + length and length <= self.max_frame:
                return [data[HEADER.size :]]
        buf = self.buf
        buf += data
        out: list[bytes] = []
        while len(buf) >= HEADER.size:
            (length,) = HEADER.unpack_from(buf)
            if length == 0 or length > self.max_frame:
                raise ProtocolError(
                    f"frame length {length} outside 1..{self.max_frame}", value=length
                )
            end = HEADER.size + length
            if len(buf) < end:
                break
            with memoryview(buf) as view:  # one copy, not two (a slice, then bytes)
                out.append(bytes(view[HEADER.size : end]))
            del buf[:end]
        if not buf:
            self.frame_deadline = None
        elif out or self.frame_deadline is None:
            self.frame_deadline = time.monotonic() + FRAME_TIMEOUT_S
        return out

    def wait_for_room(self) -> None:
        """Block while this connection has its maximum of requests running (reader thread)."""
        if self.running < MAX_INFLIGHT:  # only the reader raises it: room stays
            return
        with self.lock:
            while self.running >= MAX_INFLIGHT:
                self.wait_locked()

    def wait_idle(self) -> None:
        """Block until no request of this connection runs."""
        with self.lock:
            while self.running > 0:
                self.wait_locked()

    def wait_locked(self) -> None:
        """Wait on ``cond`` once (``lock`` held), counted as a waiter."""
        self.waiters += 1
        try:
            self.cond.wait()
        finally:
            self.waiters -= 1

    def release(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Close the socket once the loop no longer watches it (any thread)."""
        try:
            if loop is None:
                raise RuntimeError
            loop.call_soon_threadsafe(self.out.release)  # the loop may watch its socket
        except RuntimeError:  # the loop is gone
            self.sock.close()


L = TypeVar("L", bound=Link)


class Poller(Generic[L]):
    """Watches the sockets of connections whose reader thread is running a call: a request
    that arrives meanwhile makes ``on_ready(link)`` run on the poller's thread.

    Every connection is registered once with no events (``EPOLLONESHOT``); :meth:`arm` asks
    for one readable event and :meth:`disarm` withdraws it: one ``epoll_ctl`` each, and a
    thread blocked in ``epoll_wait`` is not woken by either. :meth:`start` starts its thread.
    """

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._modify = self._epoll.modify
        self._links: dict[int, L] = {}
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None

    def start(self, on_ready: Callable[[L], None]) -> None:
        """Watch from now on, calling ``on_ready`` for each armed link that became readable."""
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._epoll.register(self._wake_r, select.EPOLLIN)
        self._thread = threading.Thread(
            target=self._run, args=(on_ready,), name="juggle-poll", daemon=True
        )
        self._thread.start()

    def add(self, link: L) -> None:
        self._links[link.fd] = link
        self._epoll.register(link.fd, select.EPOLLONESHOT)

    def remove(self, link: L) -> None:
        if self._links.get(link.fd) is link:
            del self._links[link.fd]
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(link.fd)

    def arm(self, link: L) -> None:
        try:
            self._modify(link.fd, _ARMED)
        except (OSError, ValueError):
            pass

    def disarm(self, link: L) -> None:
        try:
            self._modify(link.fd, select.EPOLLONESHOT)
        except (OSError, ValueError):
            pass

    def _run(self, on_ready: Callable[[L], None]) -> None:
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
                link = self._links.get(fd)
                if link is not None:
                    on_ready(link)

    def close(self) -> None:
        """Stop the thread and close the epoll set (once; a poller never started too)."""
        if self._epoll.closed:
            return
        if self._thread is not None:
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")
            self._thread.join(5.0)
            os.close(self._wake_r)
            os.close(self._wake_w)
        self._epoll.close()


#: Starts one request of a link: ``dispatch(link, request, inline)``; ``inline`` says no
#: other request of it is known to be waiting (so a call may run on the calling thread).
Route = Callable[[L, dict[str, Any], bool], None]


class Reader(Generic[L]):
    """Reads each connection on its reader thread and hands every request to ``dispatch``.

    ``pool`` runs :meth:`read_while_busy` when ``poller`` sees a request come while the
    reader thread runs a call; ``finish(link)`` runs on the reader thread when its connection
    ended (end of stream, a malformed frame, a broken socket).
    """

    def __init__(
        self,
        poller: Poller[L],
        dispatch: Route[L],
        pool: Executor,
        finish: Callable[[L], None],
    ) -> None:
        self._poller = poller
        self._dispatch = dispatch
        self._pool = pool
        self._finish = finish

    def serve(self, link: L) -> None:
        """The reader thread of ``link``: read and start its requests until it ends."""
        try:
            self._read(link)
        except ProtocolError as exc:
            log.warning("connection %d: %s; closing it", link.conn_id, exc)
            link.send({"v": PROTOCOL_VERSION, "id": 0, "err": error_to_wire(exc)})
        except Exception:
            log.exception("connection %d: reading failed", link.conn_id)
        finally:
            self._finish(link)

    def _read(self, link: L) -> None:
        """Read frames from the blocking socket and start each request; returns at the end
        of the stream. Raises :class:`ProtocolError` for a malformed frame."""
        sock = link.sock
        spinner = link.spinner
        dispatch = self._dispatch
        while True:
            # eof and backlog change only while this thread runs a call (a helper reads);
            # the helper is done by the time the call returns, so no lock is needed here
            if link.eof:  # seen by a helper while this thread ran a call
                if link.buf:
                    raise ProtocolError("connection closed inside a frame")
                return
            batch: list[bytes] = []
            if link.backlog:
                with link.lock:
                    batch = list(link.backlog)
                    link.backlog.clear()
            if not batch:
                deadline = link.frame_deadline
                if deadline is not None:  # a frame has begun: the rest must come in time
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not link.wait_readable(remaining):
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
                    if link.buf:
                        raise ProtocolError("connection closed inside a frame")
                    return
                if link.tls is not None:
                    data = link.plaintext(data)
                    if not data:  # a TLS record is not whole yet
                        continue
                batch = link.split(data)
            last = len(batch) - 1
            for i, payload in enumerate(batch):
                link.wait_for_room()
                dispatch(link, parse_request(payload), i == last and not link.buf)

    def on_watched(self, link: L) -> None:
        """The poller saw data on ``link`` while its reader runs a call (poller thread)."""
        try:
            self._pool.submit(self.read_while_busy, link)
        except RuntimeError:  # the pool is shut down
            pass

    def read_while_busy(self, link: L) -> None:
        """Read what came on ``link`` while its reader thread runs a call, and start those
        requests (a pool thread sent by the poller); the reader gets what finds no room."""
        with link.lock:
            if link.mode != WATCHED:
                return  # the reader has taken its socket back
            link.mode = HELPER
        rearm = True
        try:
            try:
                data = link.sock.recv(_RECV, socket.MSG_DONTWAIT)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data == b"":
                rearm = False
                with link.lock:
                    link.eof = True  # the reader ends the connection after its call
            elif data and link.tls is not None:
                data = link.plaintext(data)
            if data:
                for payload in link.split(data):
                    msg = parse_request(payload)
                    with link.lock:
                        full = link.running >= MAX_INFLIGHT or bool(link.backlog)
                        if full:  # the reader starts it once it has room
                            link.backlog.append(payload)
                            rearm = False
                    if not full:
                        self._dispatch(link, msg, False)
        except ProtocolError as exc:
            log.warning("connection %d: %s; closing it", link.conn_id, exc)
            link.send({"v": PROTOCOL_VERSION, "id": 0, "err": error_to_wire(exc)})
            rearm = False
            with link.lock:
                link.eof = True
                link.buf.clear()
        finally:
            with link.lock:
                link.mode = WATCHED
                if rearm and not link.eof:
                    self._poller.arm(link)
                link.cond.notify_all()


class Listener:
    """The listening socket ``sock`` (bound, non-blocking), accepted from the event loop
    ``loop``: every new socket goes to ``admit``. When ``accept`` fails (out of descriptors:
    the peer waiting in the backlog would make it fail again at once), the socket is not
    watched for a pause that doubles while it keeps failing, with one log line per pause;
    ``open_connections`` gives the count that line shows."""

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        admit: Callable[[socket.socket], None],
        open_connections: Callable[[], int],
    ) -> None:
        self._sock = sock
        self._loop = loop
        self._admit = admit
        self._open_connections = open_connections
        self._pause = 0.0
        self.closed = False

    def start(self) -> None:
        """Accept connections (the event loop accepts)."""
        self._loop.add_reader(self._sock.fileno(), self._on_accept)

    def close(self) -> None:
        """Stop accepting and close the listening socket (loop thread)."""
        self.closed = True
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()

    def _on_accept(self) -> None:
        """The listening socket is readable (loop thread): admit every waiting peer."""
        while True:
            try:
                sock, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._pause_accepting(exc)
                return
            self._pause = 0.0
            try:
                self._admit(sock)
            except Exception:
                log.exception("admitting a connection failed")
                sock.close()

    def _pause_accepting(self, exc: OSError) -> None:
        if exc.errno == errno.ECONNABORTED:  # that peer gave up: go on
            log.info("accept failed: %s", exc)
            return
        pause = min(ACCEPT_PAUSE_MAX_S, max(ACCEPT_PAUSE_MIN_S, 2 * self._pause))
        self._pause = pause
        log.warning(
            "accept failed: %s; not accepting for %.2f s (open connections %d)",
            exc,
            pause,
            self._open_connections(),
        )
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._sock.fileno())
        self._loop.call_later(pause, self._resume)

    def _resume(self) -> None:
        if self.closed or self._sock.fileno() < 0:
            return
        self._loop.add_reader(self._sock.fileno(), self._on_accept)
