"""Where each request of the daemon runs, and its reply.

:class:`RequestRouter` takes a parsed request of a connection (from its reader thread, or a pool
thread reading for it) and checks it: a known operation, admin rights, the tenant's call
rate, the daemon not shutting down; a refusal is one ``err`` reply. Then:

- quick protocol operations (``inline``) run right there;
- admin operations go to their pool (4 threads), so they get through while calls fill the
  other one;
- a call runs on the reader thread itself when it is the connection's only request running
  and nothing else is buffered (the fast path of a lone caller), while the poller watches
  the socket for what comes meanwhile;
- any other request goes to the call pool.

Whoever ran a request sends its reply itself. The dispatcher counts the requests running in
the daemon, so a shutdown refuses new ones and waits for those.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from juggle.daemon.operations import Context, FdReply, Operation
from juggle.daemon.policy import Identity
from juggle.daemon.protocol import PROTOCOL_VERSION, error_to_wire
from juggle.daemon.sessions import Connection
from juggle.daemon.transport import HELPER, READER, WATCHED, Poller
from juggle.errors import AccessDeniedError, DaemonShuttingDownError, JuggleError, ProtocolError

__all__ = ["ADMIN_WORKERS", "MAX_ERROR_MESSAGE", "RequestRouter"]

log = logging.getLogger("juggle.daemon")

#: Threads that run admin operations.
ADMIN_WORKERS = 4
#: Characters of an error's message sent back (one quoting a large argument is cut).
MAX_ERROR_MESSAGE = 4096
_SHUTTING_DOWN = "the daemon is shutting down: calls running finish, new ones are refused"


class RequestRouter:
    """Checks each request and runs it: inline, on the reader thread watched by ``poller``,
    or in a pool (``workers`` threads for calls). ``operations`` run with ``ctx``;
    ``check_rate(identity)`` raises when a tenant is over its ``calls_per_s``."""

    def __init__(
        self,
        ctx: Context,
        operations: Mapping[str, Operation],
        poller: Poller[Connection],
        check_rate: Callable[[Identity], None],
        workers: int,
    ) -> None:
        self._ctx = ctx
        self._ops = operations
        self._poller = poller
        self._check_rate = check_rate
        self.calls = ThreadPoolExecutor(workers, thread_name_prefix="juggle-call")
        self.admin = ThreadPoolExecutor(ADMIN_WORKERS, thread_name_prefix="juggle-admin")
        self.closing = False
        self.active = 0  # requests running in the daemon
        self.started = 0  # requests started since start (under _count_lock)
        self._count_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: asyncio.Event | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve from now on; ``loop`` is woken when a shutdown's last request ends."""
        self._loop = loop
        self._idle = asyncio.Event()

    def refuse(self) -> None:
        """Refuse every request from now on (a shutdown began)."""
        with self._count_lock:
            self.closing = True

    async def drain(self, timeout_s: float) -> None:
        """Wait (up to ``timeout_s``) for the requests running to end (loop thread, after
        :meth:`refuse`)."""
        assert self._idle is not None
        try:
            if self.active > 0:  # the last one to end sets idle (closing is set)
                await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            log.warning(
                "%d call(s) still running after %.0f s; closing anyway", self.active, timeout_s
            )

    def shutdown(self) -> None:
        """Stop the pools (what is queued there is dropped)."""
        self.calls.shutdown(wait=False, cancel_futures=True)
        self.admin.shutdown(wait=False, cancel_futures=True)

    def dispatch(self, conn: Connection, msg: dict[str, Any], inline: bool) -> None:
        """Start request ``msg`` of ``conn`` (the reader thread, or a helper): refuse it, run
        it here, or hand it to a pool whose thread sends the reply itself. ``inline``: no
        other request is known to be waiting, so a call may run on this thread while the
        poller watches the socket."""
        op = self._ops.get(msg["op"])
        try:
            if op is None:
                raise ProtocolError(
                    f"unknown operation {msg['op']!r:.40}", operation=msg["op"][:40]
                )
            if op.admin and not conn.identity.admin:
                raise AccessDeniedError(
                    f"{msg['op']} needs the admin group; {conn.identity.name!r} is no admin",
                    operation=msg["op"],
                )
            if self.closing:
                raise DaemonShuttingDownError(_SHUTTING_DOWN)
            if op.quota:
                self._check_rate(conn.identity)
            with self._count_lock:
                if self.closing:  # checked again where the shutdown counts the running
                    raise DaemonShuttingDownError(_SHUTTING_DOWN)
                self.active += 1
                self.started += 1
        except Exception as exc:
            conn.send({"v": PROTOCOL_VERSION, "id": msg["id"], "err": error_to_wire(exc)})
            return
        pool = op.pool
        with conn.lock:
            conn.running += 1
            watched = pool == "calls" and inline and conn.running == 1 and conn.mode == READER
            if watched:
                conn.mode = WATCHED
        if watched:
            self._run_watched(conn, op, msg)
        elif pool == "inline":
            self._run(conn, op, msg)
        else:
            executor = self.admin if pool == "admin" else self.calls
            executor.submit(self._run, conn, op, msg)

    def _run_watched(self, conn: Connection, op: Operation, msg: dict[str, Any]) -> None:
        """Run ``op`` on the reader thread itself (no hand-over to the pool: the fast path
        of a lone caller; ``conn.mode`` is already ``WATCHED``); meanwhile the poller watches
        the socket, and a request that comes is read and started by a pool thread, so a slow
        call holds up nothing."""
        poller = self._poller
        poller.arm(conn)
        try:
            message, fd = self._reply(conn, op, msg)
        finally:
            with conn.lock:
                while conn.mode == HELPER:  # a helper is reading: let it finish
                    conn.wait_locked()
                conn.mode = READER
                poller.disarm(conn)
                # this request no longer counts against the connection's limit (only this
                # thread, the reader, ends the connection, and it sends the reply first)
                conn.running -= 1
                if conn.waiters:
                    conn.cond.notify_all()
        conn.send(message, fd)
        self._count_done()

    def _reply(
        self, conn: Connection, op: Operation, msg: dict[str, Any]
    ) -> tuple[dict[str, Any], int | None]:
        """Run ``op``; its reply message (and a descriptor to send with it)."""
        request_id = msg["id"]
        try:
            reply = op.fn(self._ctx, conn, msg)
            if type(reply) is dict:  # a fresh map of the operation's: completed in place
                reply["v"] = PROTOCOL_VERSION
                reply["id"] = request_id
                return reply, None
            if isinstance(reply, FdReply):
                return {"v": PROTOCOL_VERSION, "id": request_id, **reply.body}, reply.fd
            return {"v": PROTOCOL_VERSION, "id": request_id, **reply}, None
        except Exception as exc:
            if not isinstance(exc, JuggleError):
                log.exception("connection %d: %s failed", conn.conn_id, msg.get("op"))
            wire = error_to_wire(exc)
            if len(wire[1]) > MAX_ERROR_MESSAGE:  # a message quoting a large argument
                wire[1] = wire[1][:MAX_ERROR_MESSAGE] + " [...]"
            return {"v": PROTOCOL_VERSION, "id": request_id, "err": wire}, None

    def _run(self, conn: Connection, op: Operation, msg: dict[str, Any]) -> None:
        """Run ``op`` and send its reply (a pool thread, or the reader for inline ones)."""
        try:
            message, fd = self._reply(conn, op, msg)
            conn.send(message, fd)
        finally:
            with conn.lock:
                conn.running -= 1
                if conn.waiters:
                    conn.cond.notify_all()
            self._count_done()

    def _count_done(self) -> None:
        """A request ended and its reply is sent: count it; wake the loop when a shutdown
        waits for the daemon's last one."""
        with self._count_lock:
            self.active -= 1
            stopped = self.closing and self.active == 0
        loop = self._loop
        if not stopped or loop is None or self._idle is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(self._idle.set)
