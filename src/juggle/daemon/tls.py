"""Mutual TLS for the daemon's TCP listener and its remote clients.

TLS runs over an in-memory BIO pair (:class:`ssl.SSLObject`), not an :class:`ssl.SSLSocket`,
so the daemon's transport keeps its raw sockets, its ``poll``/``epoll`` readiness and its
threads as on the Unix socket:

- :class:`TlsSession` turns plaintext into ciphertext (:meth:`~TlsSession.seal`, called by
  the one writer of a connection, under its lock) and ciphertext read from the socket into
  plaintext (:meth:`~TlsSession.unseal`). Every read decrypts all the plaintext the bytes
  read complete, so no plaintext ever waits inside OpenSSL while the socket is not readable:
  a poll on the socket stays the truth about what there is to read.
- :class:`ServerHandshake` runs the server's handshake from the daemon's event loop without
  blocking it: non-blocking reads when the socket is readable, a deadline
  (:data:`HANDSHAKE_TIMEOUT_S`) after which a silent peer is dropped.
- :func:`client_handshake` runs a client's handshake on its blocking socket (with its
  timeout).

Contexts: TLS 1.3 only; the server requires a client certificate and verifies it against the
cluster CA alone (no system roots); the client verifies the daemon's certificate against the
same CA and its host name. Session tickets are off (no resumption): every connection is
verified in full.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from juggle.errors import (
    AccessDeniedError,
    CertificateError,
    DaemonUnavailableError,
)

__all__ = [
    "HANDSHAKE_TIMEOUT_S",
    "CertificateError",
    "ServerHandshake",
    "TlsClientConfig",
    "TlsServerConfig",
    "TlsSession",
    "client_context",
    "client_handshake",
    "parse_tls_address",
    "peer_common_name",
    "server_context",
]

log = logging.getLogger("juggle.daemon")

#: A TCP peer must complete its TLS handshake within this many seconds of its connect.
HANDSHAKE_TIMEOUT_S = 10.0
#: Ciphertext bytes read from a socket at once.
_RECV = 1 << 16
#: Plaintext bytes encrypted at once (several TLS records).
_SEAL_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class TlsClientConfig:
    """A client's certificate and key (PEM files, issued by the cluster CA) and the cluster
    CA's certificate, that the daemon's certificate must be signed by."""

    cert: Path
    key: Path
    ca: Path

    def __post_init__(self) -> None:
        for name in ("cert", "key", "ca"):
            object.__setattr__(self, name, Path(getattr(self, name)))


@dataclass(frozen=True, slots=True)
class TlsServerConfig:
    """The daemon's TLS listener: ``host``:``port`` (port 0: any free port), its node
    certificate and key, the cluster CA's certificate its clients' must be signed by, and
    the seconds a peer has for its handshake."""

    host: str
    port: int
    cert: Path
    key: Path
    ca: Path
    handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S


def parse_tls_address(text: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0..65535). Raises
    :class:`CertificateError` naming the text."""
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise CertificateError(f"TLS address {text!r} is not HOST:PORT", value=text)
    return host, int(port_text)


def _load(context: ssl.SSLContext, cert: Path | None, key: Path | None, ca: Path) -> None:
    try:
        context.load_verify_locations(cafile=str(ca))
    except (OSError, ssl.SSLError) as exc:
        raise CertificateError(
            f"cannot use CA certificate {str(ca)!r}: {exc}", path=str(ca)
        ) from None
    if cert is None or key is None:
        return
    try:
        context.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise CertificateError(
            f"cannot use certificate {str(cert)!r} with key {str(key)!r}: {exc}", path=str(cert)
        ) from None


def server_context(cert: Path, key: Path, ca: Path) -> ssl.SSLContext:
    """The daemon's context: TLS 1.3 only, its certificate ``cert`` and ``key``, a client
    certificate required and verified against ``ca`` alone. Raises
    :class:`CertificateError` naming a file it cannot use."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.verify_mode = ssl.CERT_REQUIRED
    context.num_tickets = 0  # no session resumption: every peer is verified in full
    _load(context, Path(cert), Path(key), Path(ca))
    return context


def client_context(config: TlsClientConfig) -> ssl.SSLContext:
    """A client's context: TLS 1.3 only, its certificate and key, the daemon's certificate
    verified against the CA and the host name. Raises :class:`CertificateError`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    _load(context, config.cert, config.key, config.ca)
    return context


def peer_common_name(obj: ssl.SSLObject) -> str | None:
    """The subject CN of the verified peer certificate of ``obj`` (None: none)."""
    cert = obj.getpeercert()
    if not cert:
        return None
    subject: Any = cert.get("subject", ())
    for rdn in subject:
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class TlsSession:
    """One TLS connection's state over memory BIOs; usable from several threads (a lock
    guards OpenSSL's state: one thread seals while another unseals)."""

    def __init__(self, obj: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO):
        self.obj = obj
        self._in = incoming
        self._out = outgoing
        self._lock = threading.Lock()

    @classmethod
    def server(cls, context: ssl.SSLContext) -> TlsSession:
        """A session of the server side, before its handshake."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        return cls(context.wrap_bio(incoming, outgoing, server_side=True), incoming, outgoing)

    @classmethod
    def client(cls, context: ssl.SSLContext, host: str) -> TlsSession:
        """A session of the client side for the daemon at ``host``, before its handshake."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        return cls(context.wrap_bio(incoming, outgoing, server_hostname=host), incoming, outgoing)

    @property
    def common_name(self) -> str | None:
        """The subject CN of the verified peer certificate."""
        return peer_common_name(self.obj)

    def handshake(self, data: bytes) -> tuple[bool, bytes]:
        """Feed ``data`` (ciphertext read) and go on with the handshake: whether it is done,
        and the bytes to send. Raises :class:`ssl.SSLError` when it failed (the bytes of the
        alert are then in :meth:`pending`)."""
        with self._lock:
            if data:
                self._in.write(data)
            try:
                self.obj.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            return done, self._out.read()

    def pending(self) -> bytes:
        """The bytes OpenSSL wants sent (an alert after a failed handshake)."""
        with self._lock:
            return self._out.read()

    def seal(self, data: bytes | memoryview) -> bytes:
        """The ciphertext of plaintext ``data`` (and of anything else OpenSSL queued)."""
        with self._lock:
            view = memoryview(data)
            for start in range(0, len(view), _SEAL_CHUNK):
                self.obj.write(view[start : start + _SEAL_CHUNK])
            return self._out.read()

    def unseal(self, data: bytes) -> bytes:
        """All the plaintext that ciphertext ``data`` completes (b"": none yet, a record is
        not whole). Raises :class:`ssl.SSLError` for a bad record or an alert of the peer."""
        with self._lock:
            self._in.write(data)
            parts = []
            while True:
                try:
                    chunk = self.obj.read(_RECV)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:  # close_notify: the peer ends the stream
                    break
                if not chunk:
                    break
                parts.append(chunk)
            return b"".join(parts)


class ServerHandshake:
    """Runs the TLS handshake of accepted socket ``sock`` from event loop ``loop``: reads
    when it is readable, sends what OpenSSL wants sent (a handshake flight is a few KiB, so a
    fresh socket's send buffer takes it whole), and calls ``done(sock, session)`` once it is
    complete, or ``failed(sock, reason)`` once it failed or ``timeout_s`` passed (the socket
    is then closed, an alert sent first where OpenSSL made one)."""

    def __init__(
        self,
        sock: socket.socket,
        context: ssl.SSLContext,
        loop: asyncio.AbstractEventLoop,
        done: Callable[[socket.socket, TlsSession], None],
        failed: Callable[[socket.socket, str], None],
        timeout_s: float = HANDSHAKE_TIMEOUT_S,
    ) -> None:
        self.sock = sock
        self.session = TlsSession.server(context)
        self._loop = loop
        self._done = done
        self._failed = failed
        self._fd = sock.fileno()
        self._finished = False
        self._timer = loop.call_later(timeout_s, self._expire, timeout_s)

    def start(self) -> None:
        """Wait for the client's hello (loop thread)."""
        self._loop.add_reader(self._fd, self._step)

    def cancel(self) -> None:
        """Drop the handshake and close the socket (loop thread; a daemon shutting down)."""
        self._finish()
        self.sock.close()

    def _finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._timer.cancel()
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._fd)

    def _step(self) -> None:
        try:
            data = self.sock.recv(_RECV)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._fail(f"reading failed: {exc}")
            return
        if not data:
            self._fail("the peer closed the connection during the handshake")
            return
        try:
            done, out = self.session.handshake(data)
        except ssl.SSLError as exc:
            self._fail(_ssl_reason(exc), self.session.pending())
            return
        if out and not self._send(out):
            self._fail("the peer does not read the handshake")
            return
        if done:
            self._finish()
            self._done(self.sock, self.session)

    def _send(self, data: bytes) -> bool:
        """Send ``data`` without blocking; whether the socket took all of it."""
        try:
            return self.sock.send(data, socket.MSG_DONTWAIT) == len(data)
        except OSError:
            return False

    def _expire(self, timeout_s: float) -> None:
        self._fail(f"no complete handshake within {timeout_s:g} s")

    def _fail(self, reason: str, alert: bytes = b"") -> None:
        """Count and log the failure (``failed``), then send ``alert`` and close."""
        if self._finished:
            return
        self._finish()
        try:
            self._failed(self.sock, reason)
        finally:
            if alert:
                self._send(alert)
            self.sock.close()


def _ssl_reason(exc: ssl.SSLError) -> str:
    """ssl's reason of ``exc`` in words (with the verification's message, if any)."""
    reason = str(exc.reason or exc).lower().replace("_", " ")
    verify = getattr(exc, "verify_message", None)
    return f"{reason}: {verify}" if verify else reason


def denied(exc: ssl.SSLError, where: str) -> AccessDeniedError:
    """The :class:`AccessDeniedError` of a TLS handshake with ``where`` that ``exc`` ended,
    naming ssl's reason."""
    return AccessDeniedError(
        f"the TLS handshake with the daemon at {where} failed: {_ssl_reason(exc)}", path=where
    )


def client_handshake(
    sock: socket.socket, context: ssl.SSLContext, host: str, where: str
) -> TlsSession:
    """Run a client's handshake on blocking ``sock`` (its timeout bounds each read) with the
    daemon at ``host``; the session. Raises :class:`AccessDeniedError` (naming ssl's reason)
    when the handshake fails, :class:`DaemonUnavailableError` when the connection does."""
    try:
        host_name = str(ipaddress.ip_address(host))
    except ValueError:
        host_name = host
    session = TlsSession.client(context, host_name)
    data = b""
    try:
        while True:
            try:
                done, out = session.handshake(data)
            except ssl.SSLError as exc:
                with contextlib.suppress(OSError):
                    sock.sendall(session.pending())
                raise denied(exc, where) from None
            if out:
                sock.sendall(out)
            if done:
                return session
            data = sock.recv(_RECV)
            if not data:
                raise DaemonUnavailableError(
                    f"the daemon at {where} closed the connection during the TLS handshake",
                    path=where,
                )
    except (AccessDeniedError, DaemonUnavailableError):  # OSErrors too: raised as they are
        raise
    except TimeoutError:
        raise DaemonUnavailableError(
            f"the TLS handshake with the daemon at {where} did not finish in time", path=where
        ) from None
    except OSError as exc:
        if isinstance(exc, ssl.SSLError):
            raise denied(exc, where) from None
        raise DaemonUnavailableError(
            f"connection to {where} failed during the TLS handshake: {exc}", path=where
        ) from None
