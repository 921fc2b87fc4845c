"""``python -m juggle.daemon``: run the juggle daemon (see :mod:`juggle.daemon.server`)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from juggle.daemon.paths import default_socket_path

__all__ = ["main", "parser"]


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/juggle`` (``~/.local/state/juggle``), ``/var/lib/juggle`` for root."""
    import os

    if os.getuid() == 0:
        return Path("/var/lib/juggle")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "juggle"


def parser() -> argparse.ArgumentParser:
    """The command line of the daemon."""
    p = argparse.ArgumentParser(
        prog="juggle daemon",
        description="Own the fabric and serve juggle clients on a Unix socket (and, with "
        "--tls, remote clients over mutual TLS).",
    )
    p.add_argument("--socket", type=Path, default=None, help="socket path (default: %(default)s)")
    p.add_argument("--state", type=Path, default=None, help="state directory (modules, policy)")
    p.add_argument("--fabric", default="xupv2p", help="board profile name or path")
    p.add_argument("--backend", default="sim", help="fabric backend (sim, linux, ...)")
    p.add_argument(
        "--backend-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the fabric backend, repeatable (linux: root=DIR, manager=fpgaN, "
        "load=overlay|sysfs, firmware_dir=DIR, ...); the board profile's [linux] table gives "
        "the defaults",
    )
    p.add_argument("--policy", type=Path, default=None, help="tenant policy file (TOML)")
    p.add_argument("--workers", type=int, default=32, help="threads running calls")
    p.add_argument("--log-level", default="INFO", help="logging level")
    p.add_argument(
        "--spin-us",
        type=float,
        default=None,
        help="after a request, a connection's reader thread polls for the next one this "
        "many µs before blocking (0..1000, 0: off; default 50)",
    )
    p.add_argument(
        "--dashboard",
        metavar="[HOST:]PORT",
        default=None,
        help="serve the dashboard and /metrics on HOST:PORT (HOST defaults to 127.0.0.1; "
        "POSTs need the admin token of STATE/dashboard-token); off by default",
    )
    p.add_argument(
        "--tls",
        metavar="HOST:PORT",
        default=None,
        help="also serve remote clients over TCP with mutual TLS 1.3 on HOST:PORT (port 0: "
        "any free port; the address bound is logged and written to STATE/tls-address); "
        "needs --tls-cert, --tls-key and --tls-ca",
    )
    p.add_argument("--tls-cert", type=Path, default=None, help="the daemon's certificate (PEM)")
    p.add_argument("--tls-key", type=Path, default=None, help="its private key (PEM)")
    p.add_argument(
        "--tls-ca",
        type=Path,
        default=None,
        help="the cluster CA certificate (PEM): clients must present a certificate it signed",
    )
    return p


def tls_config(args: argparse.Namespace) -> Any:
    """The :class:`~juggle.daemon.tls.TlsServerConfig` of ``--tls*`` (None without
    ``--tls``). Raises :class:`~juggle.daemon.tls.CertificateError` for a bad address, a
    missing file option, or a file option without ``--tls``."""
    from juggle.daemon.tls import CertificateError, TlsServerConfig, parse_tls_address

    files = {"--tls-cert": args.tls_cert, "--tls-key": args.tls_key, "--tls-ca": args.tls_ca}
    if args.tls is None:
        given = [name for name, value in files.items() if value is not None]
        if given:
            raise CertificateError(f"{given[0]} needs --tls HOST:PORT", value=given[0])
        return None
    host, port = parse_tls_address(args.tls)
    missing = [name for name, value in files.items() if value is None]
    if missing:
        raise CertificateError(f"--tls needs {', '.join(missing)}", value=missing[0])
    return TlsServerConfig(host, port, args.tls_cert, args.tls_key, args.tls_ca)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the daemon until SIGTERM; the exit status."""
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s juggle-daemon %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    from juggle.daemon.dashboard import parse_address
    from juggle.daemon.server import Daemon
    from juggle.errors import JuggleError

    try:
        dashboard = parse_address(args.dashboard) if args.dashboard is not None else None
        framework_options: dict[str, Any] = {}
        if args.backend_option:
            from juggle.fabric.linux.check import backend_options

            framework_options["backend_options"] = backend_options(
                args.backend_option, args.backend
            )
        daemon = Daemon(
            args.socket or default_socket_path(),
            args.state or default_state_dir(),
            fabric=args.fabric,
            backend=args.backend,
            policy_path=args.policy,
            workers=args.workers,
            dashboard=dashboard,
            framework_options=framework_options,
            tls=tls_config(args),
            **({} if args.spin_us is None else {"spin_us": args.spin_us}),
        )
        return daemon.run()
    except JuggleError as exc:
        logging.getLogger("juggle.daemon").error("%s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
