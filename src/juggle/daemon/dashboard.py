"""The dashboard and ``/metrics`` served by the daemon, over the daemon's own Framework.

``python -m juggle.daemon --dashboard [HOST:]PORT`` runs :mod:`juggle.dashboard`'s app (its
token, Host and Origin checks included) on a uvicorn server in a thread of the daemon process,
bound to ``127.0.0.1`` unless HOST says otherwise. Reads (the page, ``/api/...`` GETs,
``/metrics``) need no token; a state-changing request (POST) needs
``Authorization: Bearer <token>`` with the admin token kept in ``STATE/dashboard-token``
(mode 0600, made on first use), and a ``Host`` (and, when sent, ``Origin``) naming the
dashboard's host.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juggle.daemon.safefs import open_regular_nofollow
from juggle.errors import DashboardError

if TYPE_CHECKING:
    import uvicorn

    from juggle.runtime import Framework

__all__ = ["TOKEN_FILE", "DashboardServer", "admin_token", "parse_address"]

log = logging.getLogger("juggle.daemon")

#: Name of the admin token file in the state directory.
TOKEN_FILE = "dashboard-token"
#: Host the dashboard binds to when ``--dashboard`` names only a port.
DEFAULT_HOST = "127.0.0.1"
_START_TIMEOUT_S = 15.0


def parse_address(value: str) -> tuple[str, int]:
    """``(host, port)`` of ``[HOST:]PORT`` (``[::1]:8321`` for IPv6; HOST defaults to
    127.0.0.1). Raises :class:`DashboardError` naming the value."""
    text = value.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host = DEFAULT_HOST
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise DashboardError(
            f"dashboard address {value!r}: write an IPv6 host in brackets ([::1]:PORT)", value=value
        )
    if not host:
        host = DEFAULT_HOST
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise DashboardError(
            f"dashboard address {value!r}: the port must be a number in 0..65535", value=value
        )
    return host, int(port_text)


def admin_token(state_dir: str | Path) -> str:
    """The dashboard's admin token, read from ``state_dir/dashboard-token``; a new random one
    is written there first when the file does not exist (created with ``O_EXCL``, mode 0600).

    Raises :class:`DashboardError` (naming the path) for a file that is not a regular file of
    this uid (a symbolic link is refused, not followed; a FIFO is refused at once, it cannot
    hang the start), is readable or writable by its group or others, or holds no token.
    """
    path = Path(state_dir) / TOKEN_FILE
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        return _read_token(path)
    except OSError as exc:
        raise DashboardError(
            f"cannot create the token file {str(path)!r}: {exc}", path=str(path)
        ) from None
    token = secrets.token_urlsafe(32)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask left
        os.write(fd, token.encode() + b"\n")
    finally:
        os.close(fd)
    log.info("dashboard admin token written to %s", path)
    return token


def _read_token(path: Path) -> str:
    # O_NOFOLLOW | O_NONBLOCK: a symbolic link is refused, a FIFO cannot hang the start; the
    # kind, owner and mode are those of the opened descriptor.
    try:
        fd = open_regular_nofollow(path, forbid=0o022, error=DashboardError)
    except FileNotFoundError:
        raise DashboardError(
            f"the token file {str(path)!r} vanished while read", path=str(path)
        ) from None
    try:
        info = os.fstat(fd)
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise DashboardError(
                f"the token file {str(path)!r} has mode {mode:04o}: others may read it; "
                "make it 0600 (chmod 600) or remove it to get a new token",
                path=str(path),
            )
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    token = data.decode("ascii", errors="replace").strip()
    if len(token) < 16 or not token.isprintable() or " " in token:
        raise DashboardError(
            f"the token file {str(path)!r} holds no usable token (16 or more printable "
            "characters, no spaces); remove it to get a new one",
            path=str(path),
        )
    return token


class DashboardServer:
    """The dashboard of ``framework`` on ``host:port``, served by uvicorn in a thread of its
    own (its own event loop), so the daemon's loop and call threads never wait for it."""

    def __init__(self, framework: Framework, host: str, port: int, token: str) -> None:
        from juggle.dashboard.app import make_server

        self.host = host
        self.port = port
        self._server: uvicorn.Server = make_server(
            framework, host, port, log_level="warning", token=token
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port/`` (the port bound, when 0 was asked for)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> None:
        """Listen; returns once the server accepts. Raises :class:`DashboardError` when it
        cannot (the port is taken, the host is not this machine's)."""
        thread = threading.Thread(target=self._run, name="juggle-dashboard", daemon=True)
        self._thread = thread
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self._server.should_exit = True
                raise DashboardError(
                    f"the dashboard cannot listen on {self.host}:{self.port} (see the log)",
                    value=f"{self.host}:{self.port}",
                )
            time.sleep(0.01)
        for server in getattr(self._server, "servers", ()):
            for sock in server.sockets:
                self.port = int(sock.getsockname()[1])
                break
        log.info("dashboard on %s (POSTs need the admin token)", self.url)

    def _run(self) -> None:
        try:
            self._server.run()
        except SystemExit:  # uvicorn exits when it cannot bind
            log.error("the dashboard on %s:%d stopped", self.host, self.port)
        except Exception:
            log.exception("the dashboard on %s:%d failed", self.host, self.port)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving (and a workload the page started) and wait for the thread."""
        self._server.should_exit = True
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        app: Any = self._server.config.app
        workload = getattr(getattr(app, "state", None), "workload", None)
        if workload is not None:
            workload.stop()
