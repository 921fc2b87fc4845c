"""The juggle daemon: one process owns the Framework and the fabric; clients talk to it over a
Unix socket, each as the tenant the kernel says it is, and (``tls``) over TCP with mutual TLS,
each as the tenant its client certificate names.

:class:`Daemon` wires the parts, each with one job:

- :mod:`~juggle.daemon.transport`: the listening socket (accepted from the asyncio event
  loop), each connection's reader thread reading frames from its blocking socket, the
  thread-safe writer, and the poller that watches a socket while its reader runs a call;
- :mod:`~juggle.daemon.routing`: where each request runs (inline, on the reader thread, or
  in the call or admin pool) and its reply; it counts the requests running for a shutdown;
- :mod:`~juggle.daemon.operations`: one function per operation, and their table;
- :mod:`~juggle.daemon.sessions`: what a connection holds (remote proxies, service state
  and whose it is, region claims, shared-memory segments);
- :mod:`~juggle.daemon.quotas`: what each tenant holds against the policy's limits, and its
  call rate.

The daemon itself starts and stops (state directory, policy, framework, dashboard, signals),
admits each peer (``SO_PEERCRED`` / ``SO_PEERGROUPS`` give its uid, gid and groups; the
:class:`~juggle.daemon.policy.AccessPolicy` maps them to an identity, or the connection gets
an :class:`AccessDeniedError` frame and is closed) and reloads the policy. A connection acts
as its identity's consumer: proxies are ``fw.get_service(..., consumer=<tenant>)``, so it
reaches only its own virtual devices, contexts, signals and statistics. It uses the framework
through its public API only.

Remote clients (``tls``, :mod:`juggle.daemon.tls`). A TCP listener beside the Unix socket: a
peer's TLS handshake runs from the event loop without blocking it and must finish within
:data:`~juggle.daemon.tls.HANDSHAKE_TIMEOUT_S`; peers in their handshake count against the
daemon's ``max_connections``. The handshake requires a client certificate signed by the cluster
CA (TLS 1.3), so an expired, self-signed or other CA's certificate is refused before any frame
is read; the certificate's subject CN is then mapped by the policy (``cert_cn``, ``admin_cns``)
and admitted as on the Unix socket (same frames, limits, quotas and identity rules). A TLS
connection gets no shared-memory segments: its buffers travel in the frames.

Limits. Connections, segments, the descriptors they keep and the reply bytes queued for
clients that do not read are counted per tenant and in all against the policy's ``[limits]``
(defaults from ``RLIMIT_NOFILE``, see :class:`~juggle.daemon.policy.Limits`): past one, the
connection or segment is refused with :class:`LimitExceededError`, or the connection that
does not read is closed; every other tenant is served. A frame's size is the tenant's bound,
and decoding it is bounded before it allocates (:func:`~juggle.daemon.protocol.unpack`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from juggle.core.tenants import SignalKind
from juggle.daemon import audit
from juggle.daemon.dashboard import DashboardServer, admin_token
from juggle.daemon.operations import OPERATIONS
from juggle.daemon.policy import AccessPolicy, Identity, PeerCredentials, peer_credentials
from juggle.daemon.protocol import DEFAULT_MAX_FRAME, PROTOCOL_VERSION, error_to_wire, frame, pack
from juggle.daemon.quotas import Accounts, nofile
from juggle.daemon.routing import RequestRouter
from juggle.daemon.safefs import bind_unix_socket, read_regular_file, replace_file
from juggle.daemon.sessions import Connection, Sessions
from juggle.daemon.spin import DEFAULT_SPIN_US, check_spin_us
from juggle.daemon.state import ModuleEntry, StateDir
from juggle.daemon.tls import CertificateError, ServerHandshake, TlsServerConfig, TlsSession
from juggle.daemon.tls import server_context as tls_server_context
from juggle.daemon.transport import Listener, Poller, Reader
from juggle.errors import (
    AccessDeniedError,
    ConfigurationError,
    DaemonError,
    DaemonShuttingDownError,
    JuggleError,
    LimitExceededError,
)
from juggle.runtime import Framework, TenantSignal

__all__ = ["DEFAULT_DRAIN_S", "DEFAULT_WORKERS", "TLS_ADDRESS_FILE", "Daemon"]

log = logging.getLogger("juggle.daemon")

#: Threads that run framework calls.
DEFAULT_WORKERS = 32
#: How long a SIGTERM waits for running calls before closing anyway.
DEFAULT_DRAIN_S = 30.0
#: The file of the state directory the TLS listener's bound ``HOST:PORT`` is written to.
TLS_ADDRESS_FILE = "tls-address"
#: A trusted key file larger than this is refused (a PEM public key is ~113 bytes).
MAX_KEY_FILE_BYTES = 64 << 10


class Daemon:
    """The daemon: a Framework on ``fabric``, its state in ``state_dir``, served on
    ``socket_path``.

    ``policy_path`` is the tenant policy (TOML); without it the one kept in the state
    directory is used, and without that only the daemon's own uid may connect. ``workers``
    threads run calls; ``max_frame`` bounds a frame's payload. ``framework_options`` go to
    :class:`~juggle.Framework`. ``dashboard`` ``(host, port)`` serves the dashboard and
    ``/metrics`` of the daemon's framework there (see :mod:`juggle.daemon.dashboard`).
    ``spin_us`` bounds how long a reader thread polls for the next request before it blocks
    (raises :class:`~juggle.errors.SpinLimitError` outside 0..1000). ``tls`` adds a TCP
    listener with mutual TLS (see the module doc; its bound address is :attr:`tls_address`
    once serving, and in ``STATE/tls-address``). ``trusted_keys`` are public key files
    (``--trusted-key``); with them, or the policy's ``trusted_keys``, a module must be signed
    by one of the keys or its install is refused (:class:`~juggle.errors.SignatureError`).
    The policy's ``tenant_hold_ms`` becomes the framework's (a reload applies a new one).
    Admin actions, preemptions and quarantines leave audit lines (:mod:`.audit`).
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
        tls: TlsServerConfig | None = None,
        trusted_keys: Sequence[str | Path] = (),
    ) -> None:
        self.spin_us = check_spin_us(spin_us)
        #: key files given at start (``--trusted-key``), before the policy's ``trusted_keys``
        self.trusted_key_files = tuple(Path(k) for k in trusted_keys)
        self._trusted: list[tuple[str, str]] = []  # (fingerprint, source) of the keys in force
        self._key_sources: tuple[str, ...] = ()  # the policy's key files when the keys were read
        self._audit_unlisten: dict[str, Callable[[], None]] = {}
        self._quarantine_watch = audit.QuarantineWatch()
        self.tls = tls
        self.tls_address: tuple[str, int] | None = None
        self._tls_context: ssl.SSLContext | None = None
        self._tls_sock: socket.socket | None = None
        self._tls_listener: Listener | None = None
        self._handshakes: dict[socket.socket, tuple[ServerHandshake, str]] = {}
        #: TLS peers refused at their handshake (a bad certificate, a timeout), since start
        self.tls_refused = 0
        #: connections admitted (given a reader thread), since start
        self.admitted = 0
        self._spin_gate = threading.Lock()  # one reader thread spins at a time
        self.socket_path = Path(socket_path)
        self.state = StateDir(state_dir)
        self.fabric = fabric
        self.backend = backend
        self.policy_path = Path(policy_path) if policy_path is not None else None
        self.max_frame = max_frame
        self.drain_s = drain_s
        self._framework_options = dict(framework_options or {})
        self.dashboard_address = dashboard
        self.dashboard: DashboardServer | None = None
        self.fw: Framework | None = None
        self.policy = AccessPolicy(None, os.getuid())
        self.accounts = Accounts(self.policy.limits(nofile(), max_frame))
        self.sessions = Sessions(self.framework, self.accounts)
        self._connections: dict[int, Connection] = {}
        self._conn_ids = iter(range(1, 1 << 62))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._listener: Listener | None = None
        self._poller: Poller[Connection] = Poller()
        self._dispatcher = RequestRouter(
            self, OPERATIONS, self._poller, self.accounts.check_rate, workers
        )
        self._reader = Reader(
            self._poller, self._dispatcher.dispatch, self._dispatcher.calls, self._finish
        )

    # -- start and stop --------------------------------------------------------------------

    def prepare(self) -> None:
        """Take the state directory, load the policy, open the framework, register the
        policy's tenants and reinstall (and start) the modules the state directory holds."""
        self.state.lock()
        self.policy = self._load_policy()
        self._set_limits()
        options = dict(self._framework_options)
        keys = self._read_trusted_keys(self.policy)
        if keys:
            options["trusted_keys"] = keys
        options.setdefault("tenant_hold_ms", self.policy.tenant_hold_ms)
        self.fw = Framework(self.fabric, backend=self.backend, **options)
        self._quarantine_watch.attach()
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
        if self.tls is not None:
            self._bind_tls(self.tls)
        if self.dashboard_address is not None:
            host, port = self.dashboard_address
            token = admin_token(self.state.root)
            self.dashboard = DashboardServer(self.fw, host, port, token)
            self.dashboard.start()

    def _bind_tls(self, config: TlsServerConfig) -> None:
        """Make the TLS context (raises :class:`CertificateError` naming a file it cannot
        use) and bind the TCP listener (raises it naming an address it cannot bind)."""
        self._tls_context = tls_server_context(config.cert, config.key, config.ca)
        where = f"{config.host}:{config.port}"
        try:
            infos = socket.getaddrinfo(
                config.host, config.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            family, _, _, _, address = infos[0]
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:
            raise CertificateError(
                f"cannot listen on TLS address {where}: {exc}", value=where
            ) from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise CertificateError(
                f"cannot listen on TLS address {where}: {exc.strerror or exc}", value=where
            ) from None
        host, port = sock.getsockname()[:2]
        self._tls_sock = sock
        self.tls_address = (host, port)
        text = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        replace_file(self.state.root / TLS_ADDRESS_FILE, f"{text}\n".encode())

    def framework(self) -> Framework:
        """The daemon's framework. Raises :class:`DaemonError` before :meth:`prepare`."""
        if self.fw is None:
            raise DaemonError("the daemon's framework is not open")
        return self.fw

    def run(self) -> int:
        """Prepare, serve until SIGTERM/SIGINT, shut down; the exit status."""
        try:
            self.prepare()
        except JuggleError as exc:
            log.error("%s", exc)
            self._close_tls()
            self._stop_dashboard()
            self._close_framework()
            self._poller.close()
            self.state.unlock()
            return 1
        return self.serve_prepared()

    def serve_prepared(self) -> int:
        """Serve (after :meth:`prepare`) until :meth:`stop` / :meth:`stop_threadsafe` or
        SIGTERM/SIGINT (in the main thread), then shut down; the exit status (0)."""
        try:
            asyncio.run(self.serve())
        except BaseException:
            self._stop_dashboard()
            self._close_framework()  # the regions are released whatever went wrong
            raise
        finally:
            self._dispatcher.shutdown()
            self._poller.close()
            self.state.unlock()
        return 0

    async def serve(self) -> None:
        """Listen until :meth:`stop` (or SIGTERM / SIGINT; SIGHUP reloads the policy)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stopped = asyncio.Event()
        self._dispatcher.start(loop)
        # the socket file gets its mode and group before it can be reached at its path: bound
        # in a private 0700 folder, given them through that folder's descriptor, renamed into
        # place (safefs.bind_unix_socket); no chmod/chown follows a link swapped in at the path
        sock = bind_unix_socket(
            self.socket_path, self.policy.socket_mode, self.policy.socket_group, backlog=128
        )
        sock.setblocking(False)
        self._listener = Listener(sock, loop, self._admit, lambda: len(self._connections))
        self._poller.start(self._reader.on_watched)
        self._listener.start()
        if self._tls_sock is not None:
            self._tls_listener = Listener(
                self._tls_sock, loop, self._admit_tls, lambda: len(self._connections)
            )
            self._tls_listener.start()
            log.info("juggle daemon %d listening (TLS) on %s", os.getpid(), self._tls_text())
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self.stop)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, self._reload_on_signal)
        log.info("juggle daemon %d listening on %s", os.getpid(), self.socket_path)
        log.info("%s", self.summary())
        await self._stopped.wait()
        await self._shutdown()

    def summary(self) -> str:
        """The start-up summary line: pid, fabric, backend, policy, tenants, socket, TLS
        address, the tenants' hold, trusted keys, the dashboard's address (when on) and the
        state directory."""
        policy = self.policy
        if policy.source is not None:
            where = str(policy.source)
        elif policy.file is None:
            where = f"none (only uid {policy.daemon_uid} may connect, as admin)"
        else:
            where = "<policy>"
        tenants = ", ".join(
            f"{t.name} ({'realtime' if t.realtime else f'priority {t.priority or 0}'}, {t.model})"
            for t in policy.tenants
        )
        keys = (
            ", ".join(f"{f} ({s})" for f, s in self._trusted)
            if self._trusted
            else "none (unsigned modules are installed)"
        )
        tls = self._tls_text() or "off"
        dashboard = (  # said only when on: its own line names the URL
            f", dashboard on {self.dashboard_address[0]}:{self.dashboard_address[1]}"
            if self.dashboard_address is not None
            else ""
        )
        return (
            f"juggle daemon {os.getpid()} serving: fabric {self.fabric}, backend "
            f"{self.backend}, policy {where}, tenants [{tenants}], socket {self.socket_path}, "
            f"TLS {tls}, hold {_hold_text(policy.tenant_hold_ms)}, trusted keys {keys}"
            f"{dashboard}, state {self.state.root}"
        )

    def stop(self) -> None:
        """Begin the shutdown (from the loop thread)."""
        if self._stopped is not None:
            self._stopped.set()

    def stop_threadsafe(self) -> None:
        """Begin the shutdown from any thread (the daemon serving)."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: stopped already
                loop.call_soon_threadsafe(self.stop)

    @property
    def requests_started(self) -> int:
        """Requests the daemon started (passed its checks and ran), since start."""
        return self._dispatcher.started

    async def _shutdown(self) -> None:
        log.info("shutting down: refusing new calls, waiting for running ones")
        self._dispatcher.refuse()
        assert self._listener is not None
        self._listener.close()
        self._close_tls()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()
        await self._dispatcher.drain(self.drain_s)
        conns = list(self._connections.values())
        for conn in conns:
            conn.out.close()
            conn.abort()
        loop = asyncio.get_running_loop()
        admin = self._dispatcher.admin
        await loop.run_in_executor(admin, self._join_readers, conns)
        self._poller.close()
        await loop.run_in_executor(admin, self._stop_dashboard)
        await loop.run_in_executor(admin, self._close_framework)
        log.info("daemon stopped")

    @staticmethod
    def _join_readers(conns: list[Connection], timeout: float = 5.0) -> None:
        """Wait (up to ``timeout`` in all) for the connections' reader threads to end, so
        their proxies are given back before the framework closes."""
        deadline = time.monotonic() + timeout
        for conn in conns:
            thread = conn.thread
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))

    def _tls_text(self) -> str:
        if self.tls_address is None:
            return ""
        host, port = self.tls_address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def _close_tls(self) -> None:
        """Stop accepting TLS peers, drop the handshakes running, remove STATE/tls-address."""
        if self._tls_listener is not None:
            self._tls_listener.close()
        elif self._tls_sock is not None:
            self._tls_sock.close()
        self._tls_listener = self._tls_sock = None
        for handshake, _ in list(self._handshakes.values()):
            handshake.cancel()
        self._handshakes.clear()
        if self.tls_address is not None:
            with contextlib.suppress(OSError):
                (self.state.root / TLS_ADDRESS_FILE).unlink()

    def _stop_dashboard(self) -> None:
        dashboard, self.dashboard = self.dashboard, None
        if dashboard is not None:
            dashboard.stop()

    def _close_framework(self) -> None:
        self._quarantine_watch.detach()
        for undo in self._audit_unlisten.values():
            undo()
        self._audit_unlisten.clear()
        if self.fw is not None:
            self.fw.close()

    # -- trusted keys ----------------------------------------------------------------------

    def _read_trusted_keys(self, policy: AccessPolicy) -> list[bytes]:
        """The bytes of every trusted key file (``--trusted-key`` first, then the policy's
        ``trusted_keys``), each read as the daemon reads its own files: a regular file of root
        or the daemon's uid, not writable by group or others, no symbolic link, at most
        :data:`MAX_KEY_FILE_BYTES`; each parsed as a public key. Records their fingerprints
        and sources (:meth:`trusted_keys`). Raises :class:`~juggle.errors.UnsafePathError`
        for a file it must not trust and :class:`~juggle.errors.ConfigurationError` naming
        a missing file or one that holds no ed25519 public key."""
        from juggle.runtime import fingerprint, load_public_keys

        sources = [str(k) for k in self.trusted_key_files] + list(policy.trusted_keys)
        found: list[bytes] = []
        trusted: list[tuple[str, str]] = []
        for source in sources:
            try:
                data = read_regular_file(source, MAX_KEY_FILE_BYTES, {0, os.geteuid()})
            except FileNotFoundError:
                raise ConfigurationError(
                    f"trusted key file {source!r} does not exist", path=source
                ) from None
            try:
                (key,) = load_public_keys([data])
            except ConfigurationError as exc:
                raise ConfigurationError(
                    f"trusted key file {source!r}: {exc}", path=source
                ) from None
            found.append(data)
            trusted.append((fingerprint(key), source))
        self._trusted = trusted
        self._key_sources = tuple(policy.trusted_keys)
        return found

    def trusted_keys(self) -> dict[str, Any]:
        """The keys modules must be signed by: ``required`` (False: unsigned modules are
        installed) and ``keys``, each ``{"fingerprint", "source"}`` (the file it was read
        from at start)."""
        return {
            "required": bool(self._trusted),
            "keys": [{"fingerprint": f, "source": s} for f, s in self._trusted],
        }

    # -- the policy ------------------------------------------------------------------------

    def _load_policy(self) -> AccessPolicy:
        if self.policy_path is not None:
            policy = AccessPolicy.load(self.policy_path)
            self.state.save_policy(self.policy_path.read_text(encoding="utf-8"))
            return policy
        if self.state.policy.exists():
            return AccessPolicy.load(self.state.policy)
        return AccessPolicy(None, os.getuid())

    def _set_limits(self) -> None:
        """The limits of the policy in force, for this process's ``RLIMIT_NOFILE``."""
        files = nofile()
        limits = self.accounts.limits = self.policy.limits(files, self.max_frame)
        tenant = limits.tenant
        log.info(
            "limits (RLIMIT_NOFILE %d): descriptors %d (%d per tenant), connections %d (%d), "
            "segments %d (%d; %d per connection), queued reply bytes %d (%d; %d per "
            "connection), frame bytes %d (%d)",
            files,
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

    def _add_tenants(self) -> list[str]:
        """Register the policy's tenants not registered yet and give the registered ones the
        class, priority and model the policy says now (where they stand: waiting requests move
        in line, held regions carry the new priority); the names of those that changed."""
        fw = self.framework()
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
        for rule in self.policy.tenants:
            if rule.name not in self._audit_unlisten:
                self._audit_unlisten[rule.name] = fw.signals(rule.name).listen(_audit_preemption)
        return changed

    def reload_policy(self) -> dict[str, Any]:
        """Read the policy again, register new tenants, apply the new limits, close the
        connections whose identity changed; a summary. Raises what loading the policy
        raises (:class:`~juggle.errors.PolicyError`), with nothing changed."""
        policy = self._load_policy()
        fw = self.framework()
        if policy.tenant_hold_ms != self.policy.tenant_hold_ms:
            fw.set_tenant_hold(policy.tenant_hold_ms)
        restart = []
        if tuple(policy.trusted_keys) != self._key_sources:
            restart.append("trusted_keys")
            log.warning(
                "policy reloaded with other trusted_keys %s: the keys read at start stay in "
                "force until the daemon restarts",
                list(policy.trusted_keys),
            )
        self.policy = policy
        self._set_limits()
        changed = self._add_tenants()
        closed = []
        for conn in list(self._connections.values()):
            if conn.tls is not None:  # a TLS peer is its certificate's CN
                now = policy.identify_cert(conn.identity.cert_cn)
                if now != conn.identity:
                    closed.append(conn.conn_id)
                    conn.abort()
                continue
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
        summary: dict[str, Any] = {
            "tenants": [t.name for t in policy.tenants],
            "changed": changed,
            "closed_connections": closed,
            "tenant_hold": _hold_text(policy.tenant_hold_ms),
        }
        if restart:  # what the reload read but cannot apply
            summary["restart_needed"] = restart
        return summary

    def _reload_on_signal(self) -> None:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._dispatcher.admin, self.reload_policy)
        future.add_done_callback(
            lambda f: (
                log.error("policy reload failed: %s", f.exception())
                if f.exception() is not None
                else None
            )
        )

    # -- connections -----------------------------------------------------------------------

    def _admit(self, sock: socket.socket) -> None:
        """Identify the peer of ``sock`` (loop thread); refuse it, or greet it and start its
        reader thread."""
        sock.setblocking(True)
        try:
            peer = peer_credentials(sock)
        except OSError as exc:
            log.warning("no peer credentials: %s", exc)
            sock.close()
            return
        unmapped = AccessDeniedError(
            f"uid {peer.uid} (pid {peer.pid}) is not mapped to a tenant by the daemon's policy",
            uid=peer.uid,
        )
        self._enter(
            sock,
            self.policy.identify(peer),
            unmapped,
            f"pid {peer.pid} uid {peer.uid}",
            {"uid": peer.uid, "gid": peer.gid, "pid": peer.pid},
        )

    def _admit_tls(self, sock: socket.socket) -> None:
        """Start the TLS handshake of a TCP peer (loop thread): it runs from the loop, the
        peer counting against the daemon's ``max_connections`` meanwhile; refused at once
        when the daemon is at that limit or shutting down."""
        try:
            host, port = sock.getpeername()[:2]
            where = f"{host}:{port}"
        except OSError:
            where = "?"
        waiting = len(self._connections) + len(self._handshakes)
        if self._dispatcher.closing or waiting >= self.accounts.limits.connections:
            log.warning(
                "refused TLS peer %s: %s",
                where,
                "shutting down"
                if self._dispatcher.closing
                else f"{waiting} connections and handshakes, max_connections "
                f"{self.accounts.limits.connections}",
            )
            sock.close()
            return
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        assert self._loop is not None and self._tls_context is not None
        assert self.tls is not None
        handshake = ServerHandshake(
            sock,
            self._tls_context,
            self._loop,
            self._tls_ready,
            self._tls_failed,
            self.tls.handshake_timeout_s,
        )
        self._handshakes[sock] = (handshake, where)
        handshake.start()

    def _tls_failed(self, sock: socket.socket, reason: str) -> None:
        """A TLS peer's handshake failed or timed out (loop thread; its socket is closed)."""
        _, where = self._handshakes.pop(sock, (None, "?"))
        self.tls_refused += 1
        log.warning("refused TLS peer %s at its handshake: %s", where, reason)

    def _tls_ready(self, sock: socket.socket, session: TlsSession) -> None:
        """A TLS peer's handshake verified its certificate (loop thread): admit its CN."""
        _, where = self._handshakes.pop(sock, (None, "?"))
        cn = session.common_name
        unmapped = AccessDeniedError(
            f"certificate CN {cn!r} ({where}) is not mapped to a tenant by the daemon's policy"
        )
        sock.setblocking(True)
        self._enter(
            sock,
            self.policy.identify_cert(cn),
            unmapped,
            f"TLS {where} CN {cn!r}",
            {"uid": -1, "gid": -1, "pid": -1, "cert_cn": cn, "address": where},
            session,
        )

    def _enter(
        self,
        sock: socket.socket,
        identity: Identity | None,
        unmapped: AccessDeniedError,
        who: str,
        peer: dict[str, Any],
        tls: TlsSession | None = None,
    ) -> None:
        """Refuse peer ``who`` (``identity`` None: ``unmapped``; the daemon shutting down; a
        limit reached) with one error frame, or greet it and start its reader thread (loop
        thread; ``sock`` blocking)."""
        error: JuggleError | None = None
        limits = self.accounts.limits
        mine = limits.tenant
        if identity is None:
            error = unmapped
        elif self._dispatcher.closing:
            error = DaemonShuttingDownError("the daemon is shutting down")
        else:
            mine = limits.for_identity(identity)
            try:
                self.accounts.take(identity, mine, connection=True)
            except LimitExceededError as exc:
                error = exc
        if error is not None or identity is None:
            assert error is not None
            log.warning("refused %s: %s", who, error)
            sock.settimeout(1.0)
            data = frame(pack({"v": PROTOCOL_VERSION, "id": 0, "err": error_to_wire(error)}))
            with contextlib.suppress(OSError):
                sock.sendall(tls.seal(data) if tls is not None else data)
            sock.close()
            return
        assert self._loop is not None
        conn = Connection(
            next(self._conn_ids),
            identity,
            sock,
            self._loop,
            limits=mine,
            spin_us=self.spin_us,
            spin_gate=self._spin_gate,
            max_segments=limits.connection_segments,
            max_queued=limits.connection_queued_bytes,
            account=self.accounts.queue_account(identity.name, mine),
            tls=tls,
        )
        conn.out.on_limit = lambda limit: self._over_queued(conn, limit)
        self._connections[conn.conn_id] = conn
        self.admitted += 1
        log.info(
            "connection %d: %s as %s%s",
            conn.conn_id,
            who,
            identity.name,
            " (admin)" if identity.admin else "",
        )
        self._poller.add(conn)
        conn.send({"v": PROTOCOL_VERSION, "id": 0, "hello": self._hello(conn, peer)})
        conn.thread = threading.Thread(
            target=self._reader.serve,
            args=(conn,),
            name=f"juggle-conn-{conn.conn_id}",
            daemon=True,
        )
        try:
            conn.thread.start()
        except RuntimeError as exc:  # no thread to be had: that connection only is closed
            log.error("connection %d: no reader thread (%s); closing it", conn.conn_id, exc)
            conn.thread = None
            self._poller.remove(conn)
            self._connections.pop(conn.conn_id, None)
            conn.out.release()
            self.accounts.give(identity.name, connections=1)

    @staticmethod
    def _hello(conn: Connection, peer: dict[str, Any]) -> dict[str, Any]:
        ident = conn.identity
        return {
            "name": ident.name,
            "tenant": ident.tenant,
            "admin": ident.admin,
            **peer,
            "daemon_pid": os.getpid(),
            "max_frame": conn.max_frame,
            "protocol": PROTOCOL_VERSION,
        }

    def _over_queued(self, conn: Connection, limit: str) -> None:
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

    def _finish(self, conn: Connection) -> None:
        """``conn`` ended (its reader thread): its running calls finish, then its proxies
        and segments are given back and its socket closed."""
        conn.closed = True
        if conn.unlisten is not None:
            conn.unlisten()
            conn.unlisten = None
        conn.wait_idle()  # calls running for it finish first
        self._poller.remove(conn)
        conn.out.close()
        self.sessions.release_all(conn)
        conn.release(self._loop)
        self._connections.pop(conn.conn_id, None)
        self.accounts.give(conn.identity.name, connections=1)
        log.info("connection %d (%s) closed", conn.conn_id, conn.identity.name)


def _hold_text(hold_ms: float | None) -> str:
    """The tenants' hold as the summary line and a reload's summary say it."""
    if hold_ms is None:
        return "derived (twice the region's modeled reconfiguration time)"
    if hold_ms == 0:
        return "off (0 ms)"
    return f"{hold_ms:g} ms (policy)"


def _audit_preemption(sig: TenantSignal) -> None:
    """A tenant's signal (the arbiter's listener thread): a PREEMPT leaves an audit line."""
    if sig.kind == SignalKind.PREEMPT:
        audit.preemption(sig.tenant, sig.device, sig.service_id)
