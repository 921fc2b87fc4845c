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
        description="Own the fabric and serve juggle clients on a Unix socket.",
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
    return p


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
            **({} if args.spin_us is None else {"spin_us": args.spin_us}),
        )
        return daemon.run()
    except JuggleError as exc:
        logging.getLogger("juggle.daemon").error("%s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
