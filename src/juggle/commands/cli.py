"""The ``juggle`` command line. Every command takes ``--json`` and then prints one JSON document.

This module assembles the typer app from the command modules beside it and runs it
(:func:`main`, the ``juggle`` console script); the operator commands against a running daemon
(``--connect``) are here too. Commands read snapshots and send commands through the public API
only (ARCHITECTURE principle 6); errors are printed as one line naming the bad value, with exit
status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import typer.main
from rich.console import Console

from juggle.commands.bench import bench
from juggle.commands.cluster import cluster_app
from juggle.commands.demo import demo
from juggle.commands.module import module_app
from juggle.commands.output import (
    JsonOpt,
    console,
    emit_json,
    fail,
    fail_usage,
    speak_flags,
)
from juggle.commands.profile import register as register_profile
from juggle.daemon.command import daemon as daemon_command
from juggle.errors import ConfigurationError, JuggleError

__all__ = ["app", "main", "simulate_app"]

app = typer.Typer(
    name="juggle",
    help="Co-manage software, native and FPGA implementations of services.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
simulate_app = typer.Typer(
    help="Virtual-time experiments of the seed papers.", no_args_is_help=True
)
app.add_typer(simulate_app, name="simulate")
app.add_typer(module_app, name="module")
app.add_typer(cluster_app, name="cluster")
register_profile(app)
app.command()(demo)
app.command()(bench)


@app.command()
def shell(
    fabric: Annotated[str, typer.Option(help="Board profile.")] = "xupv2p",
    json_out: Annotated[
        bool, typer.Option("--json", help="Answer each command with one JSON line.")
    ] = False,
) -> None:
    """Interactive: install/start/stop/services/regions/juggle/stats."""
    from juggle.commands.shell import run_shell

    raise typer.Exit(run_shell(fabric=fabric, json_lines=json_out))


@app.command()
def dashboard(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8321,
    module: Annotated[
        list[Path] | None, typer.Option(help="Module to install and start (repeatable).")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the URL as one JSON document, then serve.")
    ] = False,
    workload: Annotated[
        str | None,
        typer.Option(
            help="demo: install the demo's services, run the foreground controller and keep "
            "calling them (the page's workload switch does the same)."
        ),
    ] = None,
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log", help="Log one line per HTTP request (off: the page polls every second)."
        ),
    ] = False,
) -> None:
    """Live web view of services, regions and statistics (with Prometheus metrics)."""
    from juggle.dashboard.app import serve

    announced = False

    def ready(url: str) -> None:
        nonlocal announced
        announced = True
        base = url.split("#", 1)[0]
        if json_out:
            emit_json({"url": url, "metrics": f"{base}metrics", "api": f"{base}api/services"})
            sys.stdout.flush()
        else:
            Console(stderr=True).print(
                f"dashboard: {url} (the #token part lets the page change state)"
            )

    if workload not in (None, "demo"):
        raise typer.BadParameter(f'"--workload" must be demo, got {workload!r}')
    _check_listen(host, port)
    try:
        serve(
            host=host,
            port=port,
            modules=module or [],
            on_ready=ready,
            workload=bool(workload),
            access_log=access_log,
        )
    except SystemExit as exc:  # uvicorn exits when it cannot bind (a race after the check)
        if announced:
            raise
        raise ConfigurationError(
            f"the dashboard cannot listen on {host}:{port} (the server exited with status "
            f"{exc.code} before announcing; its log above says why)",
            value=port,
        ) from None


def _check_listen(host: str, port: int) -> None:
    """Bind ``host:port`` once (as the server will, address reuse on) and let it go, so a busy
    port or a bad address is an error before anything is announced. Raises
    :class:`~juggle.errors.ConfigurationError` naming the address."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        raise ConfigurationError(
            f"the dashboard cannot listen on {host}:{port}: {exc.strerror or exc}", value=port
        ) from None


ConnectOpt = Annotated[
    Path | None,
    typer.Option("--connect", help="Operate the juggle daemon listening on this socket."),
]


DaemonUidOpt = Annotated[
    str | None,
    typer.Option(
        "--daemon-uid",
        help="With --connect: the uid (or user name) the daemon must run as; a process of "
        "another uid on the socket is refused before anything is sent (default: "
        "$JUGGLE_DAEMON_UID, else root or the socket folder's owner).",
    ),
]


def _print_version(value: bool) -> None:
    """``--version``: print ``juggle VERSION`` and leave (exit status 0)."""
    if value:
        from juggle import __version__

        sys.stdout.write(f"juggle {__version__}\n")
        raise typer.Exit(0)


VersionOpt = Annotated[
    bool,
    typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print juggle's version."
    ),
]


@app.callback()
def _root(
    ctx: typer.Context,
    connect: ConnectOpt = None,
    daemon_uid: DaemonUidOpt = None,
    version: VersionOpt = False,
) -> None:
    """Co-manage software, native and FPGA implementations of services."""
    del version  # handled by its callback
    if daemon_uid is not None:
        import os

        from juggle.daemon.client import DAEMON_UID_ENV, expected_daemon_uid

        os.environ[DAEMON_UID_ENV] = str(expected_daemon_uid(daemon_uid))
    ctx.obj = {"connect": connect}


def _remote(ctx: typer.Context, command: str, json_out: bool, **arguments: Any) -> None:
    """Run ``command`` on the daemon given with --connect; print its result as tables, or
    with ``json_out`` as its JSON document."""
    from juggle.commands.remote import render, run_remote

    path = (ctx.obj or {}).get("connect")
    if path is None:
        raise typer.BadParameter(f"{command!r} operates a running daemon: give --connect PATH")
    document = run_remote(path, command, **arguments)
    if json_out:
        emit_json(document)
        return
    out = console()
    for part in render(command, document):
        out.print(part)


app.command("daemon")(daemon_command)


@app.command()
def whoami(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Who the daemon takes this connection for: tenant, admin right, uid, pid (with
    --connect)."""
    _remote(ctx, "whoami", json_out)


@app.command()
def services(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Services of the daemon (with --connect)."""
    _remote(ctx, "services", json_out)


@app.command()
def regions(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Regions of the daemon's fabric (with --connect)."""
    _remote(ctx, "regions", json_out)


@app.command()
def tenants(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Tenants of the daemon, with their calls, waits and preemptions since they were
    registered (with --connect; a tenant sees itself)."""
    _remote(ctx, "tenants", json_out)


@app.command()
def modules(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Modules installed in the daemon (with --connect)."""
    _remote(ctx, "modules", json_out)


@app.command()
def stats(ctx: typer.Context, service_id: int, json_out: JsonOpt = False) -> None:
    """Call statistics of SERVICE_ID (with --connect)."""
    _remote(ctx, "stats", json_out, service_id=service_id)


@app.command("juggle")
def juggle_command(
    ctx: typer.Context,
    to_hardware: Annotated[
        int | None, typer.Option("--to-hardware", help="Service id to put into the fabric.")
    ] = None,
    to_software: Annotated[
        list[int] | None,
        typer.Option("--to-software", help="Service id to take out of it, repeatable."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Juggle services in the daemon (with --connect; admin, audited)."""
    _remote(ctx, "juggle", json_out, to_hardware=to_hardware, to_software=to_software or [])


@app.command()
def tier(ctx: typer.Context, service_id: int, tier: str, json_out: JsonOpt = False) -> None:
    """Serve SERVICE_ID from TIER in the daemon (with --connect; admin, audited)."""
    _remote(ctx, "tier", json_out, service_id=service_id, tier=tier)


@app.command()
def install(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="The module's folder.")],
    json_out: JsonOpt = False,
) -> None:
    """Install and start the module at PATH in the daemon, which keeps a copy in its state
    directory (with --connect; admin, audited; refused unsigned when the daemon has
    trusted keys)."""
    _remote(ctx, "install", json_out, module=path)


@app.command()
def uninstall(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The module's name (see `modules`).")],
    json_out: JsonOpt = False,
) -> None:
    """Stop and uninstall module NAME in the daemon and forget its copy (with --connect;
    admin, audited)."""
    _remote(ctx, "uninstall", json_out, name=name)


@app.command("reload-policy")
def reload_policy(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Make the daemon read its tenant policy again: new tenants, priorities, limits and
    tenant_hold_ms (with --connect; admin, audited; SIGHUP does the same)."""
    _remote(ctx, "reload-policy", json_out)


@app.command()
def recover(ctx: typer.Context, region: str, json_out: JsonOpt = False) -> None:
    """Clear quarantined REGION in the daemon and put its service back (with --connect;
    admin, audited)."""
    _remote(ctx, "recover", json_out, region=region)


@app.command()
def trust(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """The public keys the daemon's modules must be signed by (with --connect). They are set
    where the daemon starts (--trusted-key, the policy's trusted_keys), never over the
    socket: an admin connection cannot widen what the daemon runs."""
    _remote(ctx, "trust", json_out)


board_app = typer.Typer(
    help="A real board under Linux: check what its kernel shows.", no_args_is_help=True
)
app.add_typer(board_app, name="board")


@board_app.command("check")
def board_check(
    fabric: Annotated[str, typer.Option("--fabric", help="Board profile name or path.")] = "kv260",
    backend_option: Annotated[
        list[str] | None,
        typer.Option(
            "--backend-option",
            metavar="KEY=VALUE",
            help="An option of the linux backend, repeatable (root=DIR, manager=fpgaN, "
            "load=overlay|sysfs, firmware_dir=DIR, dfxmgrd=SOCKET).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """What the board's kernel shows (manager, shell, slots, overlays, bridges, UIO), what is
    missing and what juggle would do; changes nothing. Exit status 1 when something is
    missing."""
    from juggle.fabric.linux.check import backend_options, examine, render_text
    from juggle.fabric.profiles import load_profile

    profile = load_profile(fabric)
    report = examine(profile, **backend_options(backend_option or [], "linux"))
    if json_out:
        emit_json(report.to_json())
    else:
        sys.stdout.write(render_text(report) + "\n")
    if not report.ok:
        raise typer.Exit(1)


def _register_scenarios() -> None:
    """Add the ``simulate`` scenario commands, once (a second call changes nothing)."""
    from juggle.commands.simulate.scenarios import register_all

    if not simulate_app.registered_commands:
        register_all(simulate_app)


def main() -> None:
    """Console-script entry point: run the command of ``sys.argv``.

    Errors keep one contract whatever raised them: a :class:`~juggle.errors.JuggleError`
    and a usage error of the command line (an unknown option, a bad option value, a
    ``typer.BadParameter`` raised by a command) print one line on stderr and, with
    ``--json``, one JSON document ``{"error", "type"}`` on stdout; exit status 2 (see
    :mod:`.output`). Their messages name the command's options as typed (``--round-ms``,
    not ``"round_ms"``).
    """
    _register_scenarios()
    json_out = "--json" in sys.argv[1:]
    speak_flags(_flags_of(sys.argv[1:]))
    try:
        try:
            code = app(standalone_mode=False, prog_name="juggle")
        except JuggleError as exc:
            code = _exit_code(fail, exc, json_out)
        except typer.TyperException as exc:
            code = _exit_code(fail_usage, exc, json_out)
        except typer.Abort:
            sys.stderr.write("aborted\n")
            code = 1
    finally:
        speak_flags({})
    raise SystemExit(code if isinstance(code, int) else 0)


def _flags_of(args: list[str]) -> dict[str, str]:
    """The options of the command ``args`` run, as ``{API name: flag}`` (``round_ms`` ->
    ``--round-ms``): the command found by following ``args``' words down the app's tree."""
    command: Any = typer.main.get_command(app)
    for word in args:
        sub = getattr(command, "commands", {}).get(word)
        if sub is not None:
            command = sub
        elif not word.startswith("-") and getattr(command, "commands", None) is None:
            break  # an argument of the command reached
    return {
        param.name: param.opts[0]
        for param in getattr(command, "params", [])
        if param.name and param.param_type_name == "option" and param.opts
    }


def _exit_code(report: Callable[[Any, bool], NoReturn], exc: Exception, json_out: bool) -> int:
    """Report ``exc`` with ``report`` (which ends in ``typer.Exit``); the exit code it raised."""
    try:
        report(exc, json_out)
    except typer.Exit as done:
        return done.exit_code
