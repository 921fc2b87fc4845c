"""``juggle daemon`` (and ``python -m juggle.daemon``): the daemon's command line.

One typer command, :func:`daemon`, whose ``--help`` shows every option's real default (the
socket path and state directory as this user would get them). ``juggle daemon`` is this
command in the ``juggle`` app; ``python -m juggle.daemon`` runs it alone (:func:`main`).

The daemon logs to stderr and prints no document; errors at start (a bad policy, a key file
it must not trust, a state directory or socket another daemon holds, naming its pid) are
logged and end it with exit status 1. A usage error (an unknown option, a bad number) is
exit status 2.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from juggle.daemon.paths import default_socket_path
from juggle.daemon.server import DEFAULT_WORKERS
from juggle.daemon.spin import DEFAULT_SPIN_US, MAX_SPIN_US

__all__ = ["app", "daemon", "default_state_dir", "main", "tls_config"]


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/juggle`` (``~/.local/state/juggle``), ``/var/lib/juggle`` for root."""
    if os.getuid() == 0:
        return Path("/var/lib/juggle")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "juggle"


def tls_config(tls: str | None, cert: Path | None, key: Path | None, ca: Path | None) -> Any:
    """The :class:`~juggle.daemon.tls.TlsServerConfig` of ``--tls HOST:PORT`` and its files
    (None without ``--tls``). Raises :class:`~juggle.daemon.tls.CertificateError` for a bad
    address, a missing file option, or a file option without ``--tls``."""
    from juggle.daemon.tls import CertificateError, TlsServerConfig, parse_tls_address

    files = {"--tls-cert": cert, "--tls-key": key, "--tls-ca": ca}
    if tls is None:
        given = [name for name, value in files.items() if value is not None]
        if given:
            raise CertificateError(f"{given[0]} needs --tls HOST:PORT", value=given[0])
        return None
    host, port = parse_tls_address(tls)
    missing = [name for name, value in files.items() if value is None]
    if missing:
        raise CertificateError(f"--tls needs {', '.join(missing)}", value=missing[0])
    assert cert is not None and key is not None and ca is not None
    return TlsServerConfig(host, port, cert, key, ca)


_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _no_option(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """A value option's callback: a value that looks like an option (``--socket --json``:
    the parser took ``--json`` for the path) is a usage error naming the option, so the
    daemon never starts on a socket called ``--json``."""
    values = value if isinstance(value, list) else [value]
    for item in values:
        if item is not None and str(item).startswith("-"):
            raise typer.BadParameter(f"{param.opts[0]} needs a value, got the option {str(item)!r}")
    return value


def daemon(
    socket: Annotated[
        Path | None,
        typer.Option(
            "--socket",
            callback=_no_option,
            help="The Unix socket to serve ($JUGGLE_SOCKET, else "
            "$XDG_RUNTIME_DIR/juggle/juggle.sock, else /run/juggle/juggle.sock).",
            show_default=str(default_socket_path()),
        ),
    ] = None,
    state: Annotated[
        Path | None,
        typer.Option(
            "--state",
            callback=_no_option,
            help="State directory: installed modules, the policy in force, the lock "
            "(/var/lib/juggle for root, else $XDG_STATE_HOME/juggle).",
            show_default=str(default_state_dir()),
        ),
    ] = None,
    fabric: Annotated[
        str, typer.Option("--fabric", callback=_no_option, help="Board profile name or path.")
    ] = ("xupv2p"),
    backend: Annotated[
        str,
        typer.Option("--backend", callback=_no_option, help="Fabric backend (sim, rtl, linux)."),
    ] = "sim",
    backend_option: Annotated[
        list[str] | None,
        typer.Option(
            "--backend-option",
            callback=_no_option,
            metavar="KEY=VALUE",
            help="An option of the fabric backend, repeatable (linux: root=DIR, "
            "manager=fpgaN, load=overlay|sysfs, firmware_dir=DIR, ...); the board profile's "
            "\\[linux] table gives the defaults.",
            show_default="none",
        ),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            callback=_no_option,
            help="Tenant policy file (TOML; kept in the state directory, which is read when "
            "this is not given).",
            show_default="the state directory's, else only this uid may connect, as admin",
        ),
    ] = None,
    trusted_key: Annotated[
        list[Path] | None,
        typer.Option(
            "--trusted-key",
            callback=_no_option,
            metavar="FILE",
            help="A public key (PEM, OpenSSH or 32 raw bytes; `juggle module keygen` makes "
            "one) modules must be signed by, repeatable; with the policy's trusted_keys. "
            "Given any, an unsigned module is refused.",
            show_default="none: unsigned modules are installed",
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Threads running calls.")
    ] = DEFAULT_WORKERS,
    log_level: Annotated[
        str,
        typer.Option(
            "--log-level", callback=_no_option, help=f"Logging level ({', '.join(_LEVELS)})."
        ),
    ] = "INFO",
    spin_us: Annotated[
        float,
        typer.Option(
            "--spin-us",
            help="After a request, a connection's reader thread polls for the next one this "
            f"many µs before blocking (0..{MAX_SPIN_US:g}; 0: off).",
        ),
    ] = DEFAULT_SPIN_US,
    dashboard: Annotated[
        str | None,
        typer.Option(
            "--dashboard",
            callback=_no_option,
            metavar="[HOST:]PORT",
            help="Serve the dashboard and /metrics on HOST:PORT (HOST defaults to "
            "127.0.0.1; POSTs need the admin token of STATE/dashboard-token).",
            show_default="off",
        ),
    ] = None,
    tls: Annotated[
        str | None,
        typer.Option(
            "--tls",
            callback=_no_option,
            metavar="HOST:PORT",
            help="Also serve remote clients over TCP with mutual TLS 1.3 on HOST:PORT (port "
            "0: any free port; the address bound is logged and written to STATE/tls-address); "
            "needs --tls-cert, --tls-key and --tls-ca.",
            show_default="off",
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert",
            callback=_no_option,
            help="The daemon's certificate (PEM).",
            show_default="none",
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-key", callback=_no_option, help="Its private key (PEM).", show_default="none"
        ),
    ] = None,
    tls_ca: Annotated[
        Path | None,
        typer.Option(
            "--tls-ca",
            callback=_no_option,
            help="The cluster CA certificate (PEM): clients must present a certificate it signed.",
            show_default="none",
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Accepted for the CLI contract: the daemon logs.")
    ] = False,
) -> None:
    """Own the fabric and serve juggle clients on a Unix socket (and, with --tls, remote
    clients over mutual TLS) until SIGTERM; SIGHUP reloads the policy. Logs to stderr: a
    summary line at start, an audit line per admin action, preemption and quarantine."""
    del json_out  # the daemon logs; it prints no document
    if log_level.upper() not in _LEVELS:
        raise typer.BadParameter(
            f"{log_level!r} is not one of {', '.join(_LEVELS)}", param_hint="'--log-level'"
        )
    raise typer.Exit(
        run(
            socket=socket,
            state=state,
            fabric=fabric,
            backend=backend,
            backend_option=backend_option or [],
            policy=policy,
            trusted_key=trusted_key or [],
            workers=workers,
            log_level=log_level,
            spin_us=spin_us,
            dashboard=dashboard,
            tls=(tls, tls_cert, tls_key, tls_ca),
        )
    )


def run(
    *,
    socket: Path | None,
    state: Path | None,
    fabric: str,
    backend: str,
    backend_option: Sequence[str],
    policy: Path | None,
    trusted_key: Sequence[Path],
    workers: int,
    log_level: str,
    spin_us: float,
    dashboard: str | None,
    tls: tuple[str | None, Path | None, Path | None, Path | None] = (None, None, None, None),
) -> int:
    """Set up logging, make the :class:`~juggle.daemon.server.Daemon` and run it until
    SIGTERM; the exit status (1: it could not start, the reason logged). ``tls`` is
    ``(--tls, --tls-cert, --tls-key, --tls-ca)`` (:func:`tls_config`)."""
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s juggle-daemon %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    from juggle.daemon.dashboard import parse_address
    from juggle.daemon.server import Daemon
    from juggle.errors import JuggleError

    try:
        address = parse_address(dashboard) if dashboard is not None else None
        framework_options: dict[str, Any] = {}
        if backend_option:
            from juggle.fabric.linux.check import backend_options

            framework_options["backend_options"] = backend_options(list(backend_option), backend)
        server = Daemon(
            socket or default_socket_path(),
            state or default_state_dir(),
            fabric=fabric,
            backend=backend,
            policy_path=policy,
            workers=workers,
            dashboard=address,
            framework_options=framework_options,
            tls=tls_config(*tls),
            spin_us=spin_us,
            trusted_keys=trusted_key,
        )
        return server.run()
    except JuggleError as exc:
        logging.getLogger("juggle.daemon").error("%s", exc)
        return 1


app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command()(daemon)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m juggle.daemon ARGV``: run :func:`daemon`; the exit status (2: a usage
    error, printed as typer prints them)."""
    try:
        app(args=list(sys.argv[1:] if argv is None else argv), prog_name="juggle daemon")
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
