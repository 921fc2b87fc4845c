"""The client library: the shapes of in-process use, with the calls made in the daemon.

::

    from juggle.daemon import connect
    client = connect()                                   # $JUGGLE_SOCKET or the default
    enc = client.get_service("EncryptionService")        # a proxy with the interface's methods
    enc.load_key(key)
    enc.encrypt(buf, len(buf))                           # buf (a bytearray) changes in place
    client.statistics(enc.service_id)                    # a juggle.ServiceStatistics
    for signal in client.signals(): ...                  # WAIT / READY / PREEMPT
    client.juggle(to_hardware=enc.service_id)            # admins only

One socket carries every thread's requests (each with its id; the replies are matched by a
reader thread). A writable buffer argument up to ``shm_threshold`` bytes travels in the
request and its new contents come back in the reply; a larger one is copied into a shared-
memory segment the daemon made (passed over the socket with ``SCM_RIGHTS``) and the call works
on it in place. A :meth:`Client.buffer` is such a segment of your own: passing it (or a slice
of its ``view``) costs no copy at all.

A dropped daemon makes calls raise :class:`DaemonUnavailableError`. With ``retry=True`` the
next request reconnects (waiting up to ``timeout`` for the daemon to come back), proxies are
acquired again and their state-setting calls (``load_key``) replayed, and signals resubscribed.
A call in flight when the connection dropped raises and is not repeated: it may have run.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import itertools
import mmap
import os
import socket
import ssl
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from juggle.daemon.paths import default_socket_path
from juggle.daemon.protocol import (
    DEFAULT_MAX_FRAME,
    PROTOCOL_VERSION,
    FrameDecoder,
    InOut,
    ShmRef,
    error_from_wire,
    frame,
    from_wire,
    pack,
    unpack,
)
from juggle.daemon.spin import DEFAULT_SPIN_US, ReadWait, Spinner, check_spin_us
from juggle.daemon.tls import (
    CertificateError,
    TlsClientConfig,
    TlsSession,
    client_context,
    client_handshake,
    denied,
    parse_tls_address,
)
from juggle.errors import (
    AccessDeniedError,
    DaemonIdentityError,
    DaemonShuttingDownError,
    DaemonUnavailableError,
    JuggleError,
    ProtocolError,
    ServiceUnavailableError,
)
from juggle.runtime import (
    JuggleReport,
    ModuleSnapshot,
    RegionSnapshot,
    ServiceSnapshot,
    ServiceStatistics,
    SignalChannel,
    TenantSignal,
    TenantSnapshot,
)

__all__ = [
    "DEFAULT_SHM_THRESHOLD",
    "Client",
    "RemoteProxy",
    "RemoteSignalChannel",
    "SharedBuffer",
    "connect",
]

#: Writable buffers of at least this many bytes travel through shared memory.
DEFAULT_SHM_THRESHOLD = 8 << 10
#: Smallest shared-memory segment asked for.
MIN_SEGMENT = 64 << 10
_MAX_FDS = 16
_RECV = 1 << 16
_ANCILLARY = socket.CMSG_SPACE(_MAX_FDS * 4)
_MSG_CTRUNC = int(getattr(socket, "MSG_CTRUNC", 0))  # a plain int: IntFlag's & is slow
#: Argument types sent as they are (no buffer handling).
_PLAIN = frozenset({int, float, str, bool, type(None), bytes})
#: The scheme of a daemon's TLS address.
TLS_SCHEME = "tls://"


# -- one connection --------------------------------------------------------------------------


class _Pending:
    """A request waiting for its reply (or a waiting thread's wake-up token)."""

    __slots__ = ("done", "error", "event", "fd", "reply")

    def wake(self) -> None:
        """Wake the thread waiting for this (if it waits)."""
        event = self.event
        if event is not None:
            event.set()

    def __init__(self) -> None:
        self.event: threading.Event | None = None  # made when the thread has to wait
        self.done = False
        self.reply: dict[str, Any] | None = None
        self.error: JuggleError | None = None
        self.fd: int | None = None


class _Segment:
    """A shared-memory segment the daemon made for this connection, mapped here."""

    __slots__ = ("base", "mm", "segment_id", "size")

    def __init__(self, segment_id: int, size: int, mm: mmap.mmap) -> None:
        self.segment_id = segment_id
        self.size = size
        self.mm = mm
        anchor = ctypes.c_char.from_buffer(mm)
        self.base = ctypes.addressof(anchor)
        del anchor  # releases the export again


def _address(view: memoryview) -> int:
    anchor = ctypes.c_char.from_buffer(view)
    try:
        return ctypes.addressof(anchor)
    finally:
        del anchor


class _Link:
    """One connection to the daemon: the socket and the pending requests.

    Replies are read by the threads waiting for them (leader/followers): one waiting thread
    reads the socket and hands out every reply it finds; when its own has come it passes the
    reading on to another waiting thread. So a lone caller reads its reply itself, with no
    thread in between. Once signals are wanted, a listener thread reads whenever no caller does.
    """

    def __init__(
        self,
        client: Client,
        sock: socket.socket,
        timeout: float,
        tls: TlsSession | None = None,
    ) -> None:
        self._client = client
        self.sock = sock
        self.tls = tls
        self._send_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._decoder = FrameDecoder(DEFAULT_MAX_FRAME)
        self._backlog: deque[bytes] = deque()
        self._fds: deque[int] = deque()
        self.alive = True
        self.error: JuggleError | None = None
        self.segments: dict[int, _Segment] = {}
        self._free: list[_Segment] = []
        self.shm_ok = tls is None  # a TLS connection carries no descriptors: calls copy
        self.hello = self._read_hello(timeout)
        self.max_frame = int(self.hello.get("max_frame", DEFAULT_MAX_FRAME))
        self._decoder.max_frame = max(self.max_frame, DEFAULT_MAX_FRAME)
        sock.settimeout(None)
        self._reading = False
        self._waiting: list[_Pending] = []
        self._listener: threading.Thread | None = None
        spin_us = client.spin_us
        self._spinner = Spinner(sock.fileno(), spin_us) if spin_us else None
        self._readable = ReadWait(sock.fileno())  # a reply's deadline (any fd number)

    # -- receiving -------------------------------------------------------------------------

    def _recv(self) -> bool:
        """Read once from the socket into the backlog of payloads; False at end of stream.
        (On TLS, all the plaintext the bytes read complete: maybe none yet.)"""
        tls = self.tls
        if tls is not None:
            raw = self.sock.recv(_RECV)
            if not raw:
                return False
            data = tls.unseal(raw)
            if data:
                self._backlog.extend(self._decoder.feed(data))
            return True
        data, ancdata, flags, _ = self.sock.recvmsg(_RECV, _ANCILLARY)
        if ancdata:
            for level, kind, cdata in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds = array.array("i")
                    fds.frombytes(cdata[: len(cdata) - len(cdata) % fds.itemsize])
                    self._fds.extend(fds)
        if flags & _MSG_CTRUNC:
            raise ProtocolError("file descriptors from the daemon were cut off")
        if not data:
            return False
        self._backlog.extend(self._decoder.feed(data))
        return True

    def _read_hello(self, timeout: float) -> dict[str, Any]:
        self.sock.settimeout(timeout)
        try:
            while not self._backlog:
                if not self._recv():
                    raise DaemonUnavailableError(
                        "the daemon closed the connection before greeting",
                        path=self._client.where,
                    )
        except TimeoutError:
            raise DaemonUnavailableError(
                f"the daemon at {self._client.where} did not greet within {timeout} s",
                path=self._client.where,
            ) from None
        except ssl.SSLError as exc:  # TLS 1.3: the daemon refuses a certificate after ours
            raise denied(exc, self._client.where) from None
        except OSError as exc:
            raise DaemonUnavailableError(
                f"connection to {self._client.where} failed: {exc}", path=self._client.where
            ) from None
        message = unpack(self._backlog.popleft(), trusted=True)
        if "err" in message:
            raise error_from_wire(message["err"])
        hello = message.get("hello")
        if not isinstance(hello, dict):
            raise ProtocolError("the daemon did not greet")
        return hello

    def _pump(self, pending: _Pending, deadline: float | None) -> None:
        """Read and hand out replies until ``pending`` is answered, the link is down, or
        ``deadline`` passes (the caller holds the reading)."""
        spinner = self._spinner
        try:
            while True:
                while self._backlog:
                    self._handle(unpack(self._backlog.popleft(), trusted=True))
                if pending.done or not self.alive:
                    return
                if spinner is not None and spinner.spin(
                    None if deadline is None else int((deadline - time.monotonic()) * 1e9)
                ):
                    if not self._recv():  # readable now: no wake-up to pay
                        break
                    continue
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._readable.wait(remaining):
                        return
                if not self._recv():
                    break
        except (OSError, JuggleError) as exc:
            if isinstance(exc, JuggleError) and self.error is None:
                self.error = exc
        self._down()

    def _await(self, pending: _Pending, timeout: float | None) -> bool:
        """Wait until ``pending`` is answered (reading the socket when nobody else does);
        False when ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._state_lock:
                if pending.done or not self.alive:
                    return pending.done
                lead = not self._reading
                if lead:
                    self._reading = True
                else:
                    event = pending.event = pending.event or threading.Event()
                    event.clear()
                    self._waiting.append(pending)
            if lead:
                try:
                    self._pump(pending, deadline)
                finally:
                    self._pass_reading()
                if pending.done:
                    return True
            else:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is None or remaining > 0:
                    event.wait(remaining)
                with self._state_lock, contextlib.suppress(ValueError):
                    self._waiting.remove(pending)
            if pending.done:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                self._pass_reading(reading=False)  # it may have been woken to read: pass it on
                return False

    def _pass_reading(self, *, reading: bool = True) -> None:
        """Give up the reading (``reading``: this thread had it); if nobody reads, wake one
        waiting thread that is not answered yet to take it."""
        with self._state_lock:
            if reading:
                self._reading = False
            heir = None
            while not self._reading and self._waiting and heir is None:
                candidate = self._waiting.pop(0)
                if not candidate.done:
                    heir = candidate
        if heir is not None:
            heir.wake()

    def listen(self) -> None:
        """Start the listener thread: pushes (signals) arrive while no call is made."""
        with self._state_lock:
            if self._listener is not None:
                return
            self._listener = threading.Thread(
                target=self._await, args=(_Pending(), None), name="juggle-client", daemon=True
            )
        self._listener.start()

    def poll_alive(self) -> bool:
        """Whether the daemon is still there (an end of stream, unread, says it left)."""
        if not self.alive:
            return False
        try:
            if self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                with self._state_lock:
                    reading = self._reading
                if not reading:
                    self._down()
                return False
        except BlockingIOError:
            pass
        except OSError:
            return False
        return True

    def _handle(self, message: dict[str, Any]) -> None:
        request_id = message["id"]
        if request_id == 0:
            if "push" in message:
                self._client._on_push(message)
            elif "err" in message and self.error is None:
                self.error = error_from_wire(message["err"])
            return
        fd = self._fds.popleft() if "fd" in message and message["fd"] and self._fds else None
        error = error_from_wire(message["err"]) if "err" in message else None
        with self._state_lock:
            pending = self._pending.pop(request_id, None)
            if pending is not None:
                pending.fd = fd
                if error is not None:
                    pending.error = error
                else:
                    pending.reply = message
                pending.done = True
                event = pending.event
                if event is not None:  # answered: it is no heir for the reading any more
                    with contextlib.suppress(ValueError):
                        self._waiting.remove(pending)
        if pending is None:
            if fd is not None:
                os.close(fd)
            return
        if event is not None:
            event.set()

    def _down(self) -> None:
        with self._state_lock:
            self.alive = False
            pending = list(self._pending.values())
            self._pending.clear()
            waiting, self._waiting = self._waiting, []
        error = self.error
        for p in pending:
            p.error = (
                error
                if isinstance(error, DaemonUnavailableError)
                else DaemonUnavailableError(
                    f"the connection to the daemon at {self._client.where} dropped"
                    + (f" ({error})" if error is not None else "")
                    + "; the call may or may not have run",
                    path=self._client.where,
                )
            )
            p.done = True
            p.wake()
        for w in waiting:
            w.wake()
        while self._fds:
            with contextlib.suppress(OSError):
                os.close(self._fds.popleft())
        with contextlib.suppress(OSError):
            self.sock.close()

    # -- sending ---------------------------------------------------------------------------

    def request(self, message: dict[str, Any], timeout: float | None) -> _Pending:
        """Send ``message`` (a fresh map of the caller's: its ``v`` and ``id`` are set here)
        and wait for its reply; the answered request. Raises the error the daemon sent, or
        :class:`DaemonUnavailableError`."""
        pending = _Pending()
        with self._state_lock:
            if not self.alive:
                raise DaemonUnavailableError(
                    f"not connected to the daemon at {self._client.where}",
                    path=self._client.where,
                )
            request_id = next(self._ids)
            self._pending[request_id] = pending
        message["v"] = PROTOCOL_VERSION
        message["id"] = request_id
        try:
            data = frame(pack(message))
        except (TypeError, ValueError, OverflowError) as exc:
            with self._state_lock:
                self._pending.pop(request_id, None)
            raise JuggleError(f"the request cannot travel to the daemon: {exc}") from None
        try:
            with self._send_lock:
                tls = self.tls
                self.sock.sendall(data if tls is None else tls.seal(data))
        except OSError:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)  # the reader ends and fails the request
        if not self._await(pending, timeout):
            with self._state_lock:
                self._pending.pop(request_id, None)
            raise DaemonUnavailableError(
                f"no reply from the daemon within {timeout} s", path=self._client.where
            )
        if pending.error is not None:
            if pending.fd is not None:
                os.close(pending.fd)
            raise pending.error
        return pending

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # a thread reading gets the end of stream
        with self._state_lock:
            reading = self._reading
        if not reading:
            self._down()  # nobody reads: wake the waiting threads here
        listener = self._listener
        if listener is not None and listener is not threading.current_thread():
            listener.join(5.0)
        for seg in [*self.segments.values()]:
            with contextlib.suppress(BufferError):
                seg.mm.close()
        self.segments.clear()
        self._free.clear()

    # -- shared memory ---------------------------------------------------------------------

    def new_segment(self, size: int, timeout: float | None) -> _Segment:
        """A fresh segment of ``size`` bytes from the daemon. Raises :class:`ProtocolError`
        over TLS (a TCP connection carries no descriptors)."""
        if self.tls is not None:
            raise ProtocolError(
                f"no shared memory with the daemon at {self._client.where} over TLS: pass "
                "bytearrays (they travel in the frames)",
                operation="segment",
            )
        answered = self.request({"op": "segment", "size": size}, timeout)
        assert answered.reply is not None
        info = answered.reply["ok"]
        fd = answered.fd
        if fd is None:
            raise ProtocolError("the daemon sent a segment without its file descriptor")
        try:
            if os.fstat(fd).st_size < info["size"]:
                raise ProtocolError("the daemon's segment is smaller than it says")
            mm = mmap.mmap(fd, info["size"])
        finally:
            os.close(fd)
        seg = _Segment(int(info["seg"]), int(info["size"]), mm)
        with self._state_lock:
            self.segments[seg.segment_id] = seg
        return seg

    def take_scratch(self, size: int, timeout: float | None) -> _Segment | None:
        """A segment of at least ``size`` bytes for one call (give it back with
        :meth:`give_scratch`); None when the daemon has none to give."""
        with self._state_lock:
            fits = [s for s in self._free if s.size >= size]
            if fits:
                seg = min(fits, key=lambda s: s.size)
                self._free.remove(seg)
                return seg
        if not self.shm_ok:
            return None
        want = max(MIN_SEGMENT, 1 << (size - 1).bit_length())
        try:
            return self.new_segment(want, timeout)
        except JuggleError:
            if not self.alive:
                raise
            self.shm_ok = False  # the daemon will not (quota, no memfd): inline from now on
            return None

    def give_scratch(self, seg: _Segment) -> None:
        with self._state_lock:
            self._free.append(seg)

    def locate(self, view: memoryview) -> ShmRef | None:
        """The segment range ``view`` lies in, if it is one of this connection's segments."""
        for seg in list(self.segments.values()):
            if view.obj is seg.mm and view.c_contiguous and view.nbytes:
                offset = _address(view) - seg.base
                return ShmRef(seg.segment_id, offset, view.nbytes)
        return None


# -- proxies ---------------------------------------------------------------------------------


class SharedBuffer:
    """``size`` bytes of shared memory with the daemon: passed to a call (itself, or a slice
    of :attr:`view`), the daemon reads and writes it in place, no byte is copied."""

    def __init__(self, link: _Link, segment: _Segment, size: int) -> None:
        self._link = link
        self._segment = segment
        self.size = size
        self.view = memoryview(segment.mm)[:size]

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return self.view.tobytes()

    def __getitem__(self, index: int | slice) -> Any:
        return self.view[index]

    def __setitem__(self, index: int | slice, value: Any) -> None:
        self.view[index] = value

    def __repr__(self) -> str:
        return f"<SharedBuffer {self.size} bytes, segment {self._segment.segment_id}>"


class RemoteProxy:
    """A proxy of a service in the daemon: its methods are the interface's; ``service_id``,
    ``interface`` and ``consumer`` as on an in-process proxy."""

    service_id: int
    interface: str
    consumer: str
    methods: tuple[str, ...]

    def __init__(
        self, client: Client, interface: str, filter: str | None, info: dict[str, Any]
    ) -> None:
        self._client = client
        self._wanted = (interface, filter)
        self._lock = threading.Lock()
        self._record: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self._released = False
        self._bind(info, client._generation)

    def _bind(self, info: dict[str, Any], generation: int) -> None:
        self._handle = int(info["h"])
        self._generation = generation
        self.service_id = int(info["service_id"])
        self.interface = str(info["interface"])
        self.consumer = str(info["consumer"])
        self._setters = {str(n) for n, s in info["methods"] if s}

    def _current(self) -> tuple[_Link, int]:
        if self._released:
            raise ServiceUnavailableError(
                f"proxy of service {self.service_id} was released", service_id=self.service_id
            )
        client = self._client
        link = client._current_link()
        if self._generation == client._generation:  # the usual case (checked again below)
            return link, self._handle
        with self._lock:
            if self._generation != client._generation:  # reconnected: acquire it again
                answered = link.request(
                    {"op": "get_service", "interface": self._wanted[0], "filter": self._wanted[1]},
                    client.call_timeout,
                )
                assert answered.reply is not None
                self._bind(answered.reply["ok"], client._generation)
                for name, (args, kwargs) in self._record.items():
                    link.request(
                        {
                            "op": "call",
                            "h": self._handle,
                            "m": name,
                            "args": list(args),
                            "kw": kwargs,
                        },
                        client.call_timeout,
                    )
            return link, self._handle

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        link, handle = self._current()
        client = self._client
        plain = not kwargs
        if plain:
            for arg in args:
                if type(arg) not in _PLAIN:
                    plain = False
                    break
        if plain:  # the usual small call: the arguments travel as they are
            reply = link.request(
                {"op": "call", "h": handle, "m": name, "args": args}, client.call_timeout
            ).reply
            assert reply is not None
        else:
            wire: list[Any] = []
            after: list[Callable[[dict[int | str, bytes]], None]] = []
            scratch: list[Any] = []
            try:
                for index, arg in enumerate(args):
                    wire.append(self._encode(link, index, arg, after, scratch))
                wire_kw = {k: self._encode(link, k, v, after, scratch) for k, v in kwargs.items()}
                message: dict[str, Any] = {"op": "call", "h": handle, "m": name, "args": wire}
                if wire_kw:
                    message["kw"] = wire_kw
                reply = link.request(message, client.call_timeout).reply
                assert reply is not None
                outs: dict[int | str, bytes] = {}
                for key, data in reply.get("out") or ():
                    outs[key] = data
                for step in after:
                    step(outs)
            finally:
                for seg in scratch:
                    link.give_scratch(seg)
        if name in self._setters:
            with self._lock:
                self._record[name] = (
                    tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args),
                    dict(kwargs),
                )
        return reply.get("ok")

    def _encode(
        self,
        link: _Link,
        key: int | str,
        arg: Any,
        after: list[Callable[[dict[int | str, bytes]], None]],
        scratch: list[Any],
    ) -> Any:
        if isinstance(arg, SharedBuffer):
            if arg._link is link:
                return ShmRef(arg._segment.segment_id, 0, arg.size)
            arg = arg.view  # a buffer of a connection that dropped: copy through
        if isinstance(arg, memoryview) and not arg.readonly:
            ref = link.locate(arg)
            if ref is not None:
                return ref
        if not isinstance(arg, bytearray | memoryview) or (
            isinstance(arg, memoryview) and arg.readonly
        ):
            return arg
        raw = memoryview(arg)
        view = raw.cast("B") if raw.c_contiguous else None
        if view is None:
            raise JuggleError("a buffer argument must be C-contiguous")
        size = view.nbytes
        if size >= self._client.shm_threshold:
            seg = link.take_scratch(size, self._client.call_timeout)
            if seg is not None:
                scratch.append(seg)
                seg.mm[:size] = view

                def back(outs: dict[int | str, bytes], seg: _Segment = seg) -> None:
                    view[:] = memoryview(seg.mm)[:size]

                after.append(back)
                return ShmRef(seg.segment_id, 0, size)

        def write(outs: dict[int | str, bytes]) -> None:
            data = outs.get(key)
            if data is None:
                return
            if isinstance(arg, bytearray):
                arg[:] = data
            else:
                n = min(len(data), size)
                view[:n] = data[:n]

        after.append(write)
        return InOut(view.tobytes())

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} service {self.service_id} for {self.consumer!r} "
            f"through {self._client.where}>"
        )


def _method(name: str) -> Callable[..., Any]:
    def method(self: RemoteProxy, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, args, kwargs)

    method.__name__ = name
    method.__qualname__ = f"RemoteProxy.{name}"
    return method


_RESERVED = frozenset(dir(RemoteProxy)) | {"service_id", "interface", "consumer", "methods"}


def _proxy_class(interface: str, methods: Iterable[str]) -> type[RemoteProxy]:
    names = tuple(m for m in methods if m.isidentifier() and not m.startswith("_"))
    attrs: dict[str, Any] = {n: _method(n) for n in names if n not in _RESERVED}
    attrs["methods"] = names
    short = interface.rsplit(".", 1)[-1]
    return type(f"{short}RemoteProxy", (RemoteProxy,), attrs)


# -- signals ---------------------------------------------------------------------------------


class RemoteSignalChannel(SignalChannel):
    """The tenant's WAIT / READY / PREEMPT signals, pushed by the daemon; read like a
    :class:`~juggle.SignalChannel` (:meth:`get`, :meth:`wait_for`, :meth:`drain`), or iterate
    (blocks; ends when the client closes, which closes the channel)."""

    def __iter__(self) -> Iterator[TenantSignal]:
        while True:
            signal = self.get()
            if signal is None:
                return
            yield signal


# -- the client ------------------------------------------------------------------------------


class Client:
    """A connection to the juggle daemon at ``path`` (see :func:`connect`)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        retry: bool = False,
        timeout: float = 5.0,
        call_timeout: float | None = None,
        shm_threshold: int = DEFAULT_SHM_THRESHOLD,
        spin_us: float = DEFAULT_SPIN_US,
        daemon_uid: int | str | None = None,
        address: str | None = None,
        tls: TlsClientConfig | None = None,
    ) -> None:
        self.spin_us = check_spin_us(spin_us)
        self.address: tuple[str, int] | None = None
        self._tls_context: ssl.SSLContext | None = None
        self.path: Path | None
        self.daemon_uid: int | None
        if address is not None or tls is not None:
            if path is not None:
                raise CertificateError(
                    f"give a socket path ({path}) or a TLS address, not both", value=str(path)
                )
            if address is None or tls is None or not address.startswith(TLS_SCHEME):
                raise CertificateError(
                    f"a remote daemon needs address='tls://HOST:PORT' and tls=TlsClientConfig; "
                    f"got address={address!r}",
                    value=address,
                )
            self.address = parse_tls_address(address[len(TLS_SCHEME) :])
            self._tls_context = client_context(tls)
            self.where = address
            self.path = None
            self.daemon_uid = None
        else:
            self.path = Path(path) if path is not None else default_socket_path()
            self.where = str(self.path)
            self.daemon_uid = expected_daemon_uid(daemon_uid)
        self.retry = retry
        self.timeout = timeout
        self.call_timeout = call_timeout
        self.shm_threshold = shm_threshold
        self._lock = threading.RLock()
        self._closed = False
        self._generation = 0
        self._channel: RemoteSignalChannel | None = None
        self._subscribed = False
        self._classes: dict[tuple[str, tuple[str, ...]], type[RemoteProxy]] = {}
        self._link: _Link | None = self._open()

    # -- identity --------------------------------------------------------------------------

    @property
    def identity(self) -> dict[str, Any]:
        """What the daemon said this connection is: ``name`` (the consumer), ``tenant``,
        ``admin``, ``uid``, ``gid``, ``pid``."""
        link = self._link
        return dict(link.hello) if link is not None else {}

    @property
    def name(self) -> str:
        """The consumer (tenant) name this connection acts as."""
        return str(self.identity.get("name", ""))

    @property
    def admin(self) -> bool:
        """Whether admin operations are allowed."""
        return bool(self.identity.get("admin", False))

    # -- the link --------------------------------------------------------------------------

    def _open(self) -> _Link:
        deadline = time.monotonic() + self.timeout
        delay = 0.02
        while True:
            try:
                return self._try_open()
            except (DaemonUnavailableError, FileNotFoundError, ConnectionRefusedError) as exc:
                if not self.retry or time.monotonic() + delay > deadline:
                    if isinstance(exc, DaemonUnavailableError):
                        raise
                    raise DaemonUnavailableError(
                        f"no juggle daemon listens on {self.where}: {exc.strerror or exc}",
                        path=self.where,
                    ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.25)

    def _check_daemon(self, sock: socket.socket) -> None:
        """Check the credentials of the process listening (``SO_PEERCRED``, given by the
        kernel at connect) against :attr:`daemon_uid` (None: root or the owner of the socket's
        folder). Raises :class:`DaemonIdentityError` naming both uids and the peer's pid."""
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
        assert self.path is not None
        if self.daemon_uid is not None:
            expected = {self.daemon_uid}
        else:
            expected = {0}
            with contextlib.suppress(OSError):
                expected.add(os.stat(self.path.parent).st_uid)
        if uid not in expected:
            wanted = " or ".join(str(u) for u in sorted(expected))
            raise DaemonIdentityError(
                f"the process listening on {self.where} (pid {pid}) runs as uid {uid}, not as "
                f"the expected daemon uid {wanted}: refused, nothing was sent to it (set the "
                "daemon's uid with daemon_uid=, $JUGGLE_DAEMON_UID or --daemon-uid)",
                uid=uid,
                path=self.where,
            )

    def _try_open_tls(self) -> _Link:
        """Connect over TCP, run the TLS handshake (the daemon's certificate verified against
        the CA and its host name: no process but the daemon holding its key gets a byte of a
        request), read the greeting."""
        assert self.address is not None and self._tls_context is not None
        host, port = self.address
        try:
            sock = socket.create_connection((host, port), timeout=self.timeout)
        except ConnectionRefusedError:
            raise
        except OSError as exc:
            raise DaemonUnavailableError(
                f"cannot connect to {self.where}: {exc}", path=self.where
            ) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session = client_handshake(sock, self._tls_context, host, self.where)
            return _Link(self, sock, self.timeout, session)
        except BaseException:
            sock.close()
            raise

    def _try_open(self) -> _Link:
        if self.address is not None:
            return self._try_open_tls()
        assert self.path is not None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.path))
        except PermissionError:
            sock.close()
            raise AccessDeniedError(
                f"no permission to connect to {self.where} (socket file mode)", path=self.where
            ) from None
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            raise DaemonUnavailableError(
                f"cannot connect to {self.where}: {exc}", path=self.where
            ) from None
        try:
            self._check_daemon(sock)  # before a byte is sent, or the greeting read
        except BaseException:
            sock.close()
            raise
        try:
            return _Link(self, sock, self.timeout)
        except DaemonShuttingDownError:
            sock.close()
            raise
        except BaseException:
            sock.close()
            raise

    def _current_link(self) -> _Link:
        link = self._link
        if link is not None and not self.retry and link.alive and not self._closed:
            return link  # the usual case, without the lock
        with self._lock:
            if self._closed:
                raise DaemonUnavailableError("the client is closed", path=self.where)
            link = self._link
            if link is not None and (link.poll_alive() if self.retry else link.alive):
                return link
            if not self.retry:
                raise DaemonUnavailableError(
                    f"the connection to the daemon at {self.where} dropped", path=self.where
                )
            if link is not None:
                link.close()
            self._link = None
            link = self._open()
            self._link = link
            self._generation += 1
            if self._subscribed:
                link.request({"op": "subscribe"}, self.call_timeout)
                link.listen()
            return link

    def _ok(self, op: str, **fields: Any) -> Any:
        answered = self._current_link().request({"op": op, **fields}, self.call_timeout)
        assert answered.reply is not None
        return answered.reply.get("ok")

    def _on_push(self, message: dict[str, Any]) -> None:
        if message.get("push") == "signal" and self._channel is not None:
            with contextlib.suppress(ProtocolError):
                self._channel.push(from_wire(TenantSignal, message.get("sig")))

    # -- services --------------------------------------------------------------------------

    def get_service(self, interface: str, filter: str | None = None) -> Any:
        """A proxy of the best service for ``interface`` (full or short name) that the
        tenant may use, matching LDAP ``filter``. Raises what the daemon raises
        (:class:`~juggle.errors.ServiceUnavailableError`, ...)."""
        info = self._ok("get_service", interface=interface, filter=filter)
        names = tuple(str(n) for n, _ in info["methods"])
        key = (str(info["interface"]), names)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = _proxy_class(key[0], names)
        return cls(self, interface, filter, info)

    def unget_service(self, proxy: RemoteProxy) -> bool:
        """Give ``proxy`` back; its further calls raise."""
        if proxy._released:
            return False
        proxy._released = True
        if proxy._generation != self._generation:
            return False
        with contextlib.suppress(DaemonUnavailableError):
            return bool(self._ok("release", h=proxy._handle))
        return False

    def buffer(self, size: int) -> SharedBuffer:
        """``size`` bytes shared with the daemon: calls work on it in place, without copies.
        Raises :class:`ProtocolError` over TLS (no shared memory with a remote daemon: pass
        bytearrays, they travel in the frames)."""
        if size <= 0:
            raise JuggleError(f'"size" must be > 0, got {size!r}')
        link = self._current_link()
        seg = link.new_segment(max(size, 4096), self.call_timeout)
        return SharedBuffer(link, seg, size)

    # -- snapshots -------------------------------------------------------------------------

    def services(self) -> tuple[ServiceSnapshot, ...]:
        """Snapshots of the services (a tenant sees those it may use, and itself only among
        their consumers)."""
        return tuple(from_wire(ServiceSnapshot, s) for s in self._ok("services"))

    def regions(self) -> tuple[RegionSnapshot, ...]:
        """Snapshots of the fabric's regions."""
        return tuple(from_wire(RegionSnapshot, r) for r in self._ok("regions"))

    def statistics(self, service_id: int) -> ServiceStatistics:
        """Call statistics of ``service_id``: every consumer's for an admin, the tenant's own
        calls otherwise."""
        return from_wire(ServiceStatistics, self._ok("statistics", service_id=service_id))

    def tenants(self) -> tuple[TenantSnapshot, ...]:
        """Tenant snapshots (a tenant sees itself only)."""
        return tuple(from_wire(TenantSnapshot, t) for t in self._ok("tenants"))

    def modules(self) -> tuple[ModuleSnapshot, ...]:
        """Snapshots of the installed modules."""
        return tuple(from_wire(ModuleSnapshot, m) for m in self._ok("modules"))

    def signals(self) -> RemoteSignalChannel:
        """This tenant's WAIT / READY / PREEMPT signals, as the daemon pushes them. Raises
        :class:`~juggle.errors.UnknownTenantError` when the connection is no tenant."""
        with self._lock:
            if self._channel is None:
                self._channel = RemoteSignalChannel(self.name)
            if not self._subscribed:
                self._ok("subscribe")
                self._subscribed = True
                self._current_link().listen()
            return self._channel

    def ping(self) -> float:
        """Seconds of one round trip to the daemon (not through its thread pool)."""
        t0 = time.perf_counter()
        self._ok("ping")
        return time.perf_counter() - t0

    # -- admin -----------------------------------------------------------------------------

    def install(self, path: str | Path, *, start: bool = True) -> ModuleSnapshot:
        """Install (and start) the module at ``path``; the daemon copies it into its state
        directory, so it is back after a restart. Admins only."""
        resolved = str(Path(path).resolve())
        return from_wire(ModuleSnapshot, self._ok("install", path=resolved, start=start))

    def uninstall(self, name: str) -> ModuleSnapshot:
        """Uninstall module ``name`` and forget it; its snapshot as it was before. Admins
        only."""
        return from_wire(ModuleSnapshot, self._ok("uninstall", name=name))

    def trusted_keys(self) -> dict[str, Any]:
        """The public keys the daemon's modules must be signed by: ``required`` (False:
        unsigned modules are installed) and ``keys``, each ``{"fingerprint", "source"}``."""
        return dict(self._ok("trusted_keys"))

    def juggle(
        self, to_hardware: int | None = None, to_software: Iterable[int] = ()
    ) -> JuggleReport:
        """:meth:`juggle.Framework.juggle` in the daemon. Admins only."""
        report = self._ok("juggle", to_hardware=to_hardware, to_software=list(to_software))
        return from_wire(JuggleReport, report)

    def set_tier(self, service_id: int, tier: str) -> JuggleReport:
        """:meth:`juggle.Framework.set_tier` in the daemon. Admins only."""
        return from_wire(JuggleReport, self._ok("set_tier", service_id=service_id, tier=tier))

    def reload_policy(self) -> dict[str, Any]:
        """Make the daemon read its tenant policy again. Admins only."""
        return dict(self._ok("reload_policy"))

    def recover(self, region: str) -> JuggleReport | None:
        """:meth:`juggle.Framework.recover` in the daemon: clear quarantined ``region`` and
        put back the service that failed there; that juggle's report (None: nothing to put
        back). Admins only (:class:`AccessDeniedError`); the daemon logs an audit line."""
        report = self._ok("recover", region=region)
        return None if report is None else from_wire(JuggleReport, report)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether the connection is up now."""
        link = self._link
        return link is not None and link.alive

    def close(self) -> None:
        """Close the connection (the daemon releases this client's proxies)."""
        with self._lock:
            self._closed = True
            link, self._link = self._link, None
        if link is not None:
            link.close()
        if self._channel is not None:
            self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "connected" if self.connected else "disconnected"
        return f"<juggle Client {self.name!r} {state} to {self.where}>"


def connect(
    path: str | Path | None = None,
    *,
    retry: bool = False,
    timeout: float = 5.0,
    call_timeout: float | None = None,
    shm_threshold: int = DEFAULT_SHM_THRESHOLD,
    spin_us: float = DEFAULT_SPIN_US,
    daemon_uid: int | str | None = None,
    address: str | None = None,
    tls: TlsClientConfig | None = None,
) -> Client:
    """Connect to the juggle daemon at ``path`` (default: ``$JUGGLE_SOCKET``, else
    ``$XDG_RUNTIME_DIR/juggle/juggle.sock``, else ``/run/juggle/juggle.sock``).

    ``retry``: wait up to ``timeout`` s for a daemon to listen, and reconnect after the
    daemon dropped (proxies are acquired again). ``call_timeout`` bounds each call (None:
    none). ``spin_us``: a caller polls the socket this many µs for its reply before it
    blocks (0..1000, 0: never; see :mod:`juggle.daemon.spin`). Raises
    :class:`~juggle.errors.SpinLimitError` for another bound,
    :class:`DaemonUnavailableError` (nobody listens) and
    :class:`AccessDeniedError` (the daemon's policy refuses this uid).

    ``daemon_uid`` (a uid or user name; default: ``$JUGGLE_DAEMON_UID``, else root or the
    owner of the socket's folder): the uid the daemon must run as. The client checks the
    listening process's credentials (``SO_PEERCRED``) at every connect, before it sends a
    byte, and raises :class:`DaemonIdentityError` (naming both uids and the pid) for another:
    a process that took the socket path is never sent a request, a key or a buffer.

    ``address="tls://HOST:PORT"`` with ``tls`` (a :class:`~juggle.daemon.tls.TlsClientConfig`:
    this client's certificate and key, and the cluster CA) connects to a daemon's TLS
    listener instead (no ``path``): TLS 1.3, the daemon's certificate verified against the CA
    and HOST, this client known by its certificate's CN. Same API; no shared memory (buffers
    travel in the frames; :meth:`Client.buffer` raises :class:`ProtocolError`). Raises
    :class:`AccessDeniedError` naming ssl's reason when the handshake fails (either side's
    certificate refused) or the CN maps to no tenant, :class:`DaemonUnavailableError` when
    nothing listens, :class:`~juggle.daemon.tls.CertificateError` for unusable files or an
    address that is not ``tls://HOST:PORT``.
    """
    return Client(
        path,
        retry=retry,
        timeout=timeout,
        call_timeout=call_timeout,
        shm_threshold=shm_threshold,
        spin_us=spin_us,
        daemon_uid=daemon_uid,
        address=address,
        tls=tls,
    )


#: Environment variable naming the uid (or user name) the daemon must run as.
DAEMON_UID_ENV = "JUGGLE_DAEMON_UID"


def expected_daemon_uid(value: int | str | None = None) -> int | None:
    """The uid ``value`` names (a uid or a user name; None: ``$JUGGLE_DAEMON_UID``, else
    None for the default: root or the socket folder's owner). Raises
    :class:`DaemonIdentityError` naming a value that is no uid or known user."""
    if value is None:
        value = os.environ.get(DAEMON_UID_ENV) or None
        if value is None:
            return None
    if isinstance(value, bool):
        raise DaemonIdentityError(f"daemon uid {value!r} is not a uid or user name", value=value)
    if isinstance(value, int):
        uid = value
    else:
        text = value.strip()
        if text.isdigit():
            uid = int(text)
        else:
            import pwd

            try:
                uid = pwd.getpwnam(text).pw_uid
            except KeyError:
                raise DaemonIdentityError(
                    f"daemon uid {value!r} is not a uid or user name", value=value
                ) from None
    if not 0 <= uid < 2**32 - 1:
        raise DaemonIdentityError(f"daemon uid {value!r} is out of range", value=value)
    return uid
