"""The ``juggle`` command line. Every command takes ``--json`` and then prints one JSON document.

Commands read snapshots and send commands through the public API only (ARCHITECTURE
principle 6); errors are printed as one line naming the bad value, with exit status 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from juggle.clierror import fail
from juggle.errors import JuggleError
from juggle.profile import register as register_profile
from juggle.scaffold import module_bitstream, module_new

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
module_app = typer.Typer(
    help="Modules: new, validate, build, bitstream, lock, keygen, sign, schema.",
    no_args_is_help=True,
)
app.add_typer(simulate_app, name="simulate")
app.add_typer(module_app, name="module")
register_profile(app)
module_app.command("new")(module_new)
module_app.command("bitstream")(module_bitstream)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


def emit_json(document: Any) -> None:
    """Print ``document`` as JSON on stdout."""
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")


@app.command()
def demo(
    json_out: JsonOpt = False,
    pace: Annotated[
        bool, typer.Option(help="Keep wall-clock time in step with the modeled fabric clock.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic mail and audio.")] = 1,
    hardware: Annotated[
        str,
        typer.Option(
            help="model: hardware calls run on the cores' Python models; rtl: on their Verilog "
            "in a cycle-accurate simulator."
        ),
    ] = "model",
) -> None:
    """The main job: the Juggle paper's mail + music scenario on the simulated xupv2p board."""
    from juggle.demo import render_demo, run_demo

    result = run_demo(seed=seed, pace=pace, hardware=hardware)
    if json_out:
        emit_json(result)
    else:
        render_demo(result, Console())
    if result["failed_calls"] or not result["results_agree"]:
        raise typer.Exit(1)


@app.command()
def bench(
    json_out: JsonOpt = False,
    quick: Annotated[bool, typer.Option(help="Fewer iterations (a smoke run).")] = False,
    only: Annotated[
        list[str] | None, typer.Option(help="Run only these groups (repeatable).")
    ] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar on stderr.")] = False,
) -> None:
    """The benchmark suite: ratios and latencies measured in one run (see benchmarks/)."""
    from juggle.bench import render_bench, run_bench
    from juggle.progress import progress_bar

    with progress_bar("bench", silent=json_out or quiet) as step:
        result = run_bench(quick=quick, only=only or None, progress=step)
    if json_out:
        emit_json(result)
    else:
        render_bench(result, Console())


@module_app.command("validate")
def module_validate(
    path: Annotated[Path, typer.Argument(help="Module folder, .zip, juggle.toml or XML.")],
    json_out: JsonOpt = False,
    fabric: Annotated[str, typer.Option(help="Board profile to check against.")] = "xupv2p",
    import_code: Annotated[
        bool,
        typer.Option(
            "--import", help="Also import and install the module's code (runs it) in a sandbox."
        ),
    ] = False,
    trusted_key: Annotated[
        list[Path] | None,
        typer.Option(
            help="Require a signature by this public key (repeatable), as a framework with "
            "trusted_keys does."
        ),
    ] = None,
) -> None:
    """Check a module (descriptor, pins, classes, bitstreams, resources) without running its
    code; --import also installs it in a throwaway framework."""
    from juggle.runtime.validate import validate_module

    try:
        report = validate_module(
            path, fabric=fabric, imported=import_code, trusted_keys=trusted_key or None
        )
    except JuggleError as exc:
        if json_out:
            emit_json(
                {"valid": False, "path": str(path), "error": str(exc), "type": type(exc).__name__}
            )
            exc.reported_as_json = True  # type: ignore[attr-defined]
        raise
    if json_out:
        emit_json(report)
        return
    console = Console()
    how = "imported and installed" if report["imported"] else "read without running its code"
    console.print(
        f"[green]ok[/green] module [bold]{report['name']}[/bold] {report['version']} ({how})"
    )
    for service in report["services"]:
        console.print(f"  {', '.join(service['interfaces'])}: tiers {', '.join(service['tiers'])}")
    if report["pinned"]:
        console.print(f"  {len(report['pinned'])} pinned files verified")
    if report["signed_by"]:
        console.print(f"  signed by trusted key {report['signed_by']}")


@module_app.command("build")
def module_build(
    path: Annotated[Path, typer.Argument(help="Module folder.")],
    json_out: JsonOpt = False,
    fabric: Annotated[str, typer.Option(help="Board profile whose part family to target.")] = (
        "xupv2p"
    ),
    quiet: Annotated[bool, typer.Option(help="No progress bar on stderr.")] = False,
) -> None:
    """Synthesize the module's RTL (Yosys synth_xilinx) and write resources.json beside its
    descriptor; install then checks those figures against the region."""
    from juggle.build import build_module
    from juggle.progress import progress_bar

    with progress_bar("synthesis", silent=json_out or quiet) as step:
        report = build_module(path, fabric=fabric, progress=step)
    if json_out:
        emit_json(report)
        return
    console = Console()
    console.print(f"[green]built[/green] {report['path']} ({report['family']}, modeled)")
    for design, entry in report["designs"].items():
        console.print(
            f"  {design}: {entry['luts']} LUTs, {entry['flipflops']} flip-flops, "
            f"~{entry['slices']} slices (estimate), {entry['multipliers']} multipliers, "
            f"{entry['block_rams']} block RAMs"
        )


@module_app.command("lock")
def module_lock(
    path: Annotated[Path, typer.Argument(help="Module folder with a juggle.toml.")],
    json_out: JsonOpt = False,
) -> None:
    """Pin every file of the module with its sha256 (the [pins] table of juggle.toml)."""
    from juggle.runtime.integrity import lock_module

    pins = lock_module(path)
    if json_out:
        emit_json({"path": str(path), "pins": pins})
        return
    Console().print(f"[green]locked[/green] {len(pins)} files of {path}")


@module_app.command("keygen")
def module_keygen(
    key: Annotated[Path, typer.Argument(help="Private key file to write (PEM, mode 0600).")],
    json_out: JsonOpt = False,
) -> None:
    """Write an ed25519 key pair for signing modules (KEY and KEY.pub)."""
    from juggle.runtime.integrity import generate_key

    public = generate_key(key)
    if json_out:
        emit_json({"private": str(key), "public": str(public)})
        return
    Console().print(f"[green]wrote[/green] {key} (keep it private) and {public}")


@module_app.command("sign")
def module_sign(
    path: Annotated[Path, typer.Argument(help="Locked module folder with a juggle.toml.")],
    key: Annotated[Path, typer.Option("--key", help="ed25519 private key (PEM).")],
    json_out: JsonOpt = False,
) -> None:
    """Sign the module's pinned manifest (juggle.toml) with KEY: juggle.toml.sig."""
    from juggle.runtime.integrity import sign_module

    signature = sign_module(path, key)
    if json_out:
        emit_json({"path": str(path), "signature": str(signature)})
        return
    Console().print(f"[green]signed[/green] {path}: {signature}")


@module_app.command("schema")
def module_schema(json_out: JsonOpt = False) -> None:
    """Print the JSON schema of juggle.toml (it is one JSON document, with or without --json)."""
    from juggle.runtime.descriptors import descriptor_schema_json

    del json_out  # the schema is JSON either way
    sys.stdout.write(descriptor_schema_json())


@module_app.command("import-dfx")
def module_import_dfx(
    package: Annotated[
        Path, typer.Argument(help="dfx-mgr package folder (shell.json, <accel>/<accel>_slotN/).")
    ],
    interface: Annotated[str, typer.Option(help="Interface the service offers (pkg.Class).")],
    driver: Annotated[str, typer.Option(help="Driver class of the hardware tier (mod.Class).")],
    json_out: JsonOpt = False,
    fabric: Annotated[
        str, typer.Option(help="Board profile whose region each slot N becomes.")
    ] = "kv260",
    accel: Annotated[
        str | None, typer.Option(help="Accelerator of the package (default: its only one).")
    ] = None,
    target_dir: Annotated[
        Path | None,
        typer.Option(help="Module folder to write juggle.toml in (default: the package)."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Module name (default: the accel).")] = None,
    software: Annotated[str | None, typer.Option(help="Software tier class.")] = None,
    native: Annotated[str | None, typer.Option(help="Native tier class.")] = None,
    force: Annotated[bool, typer.Option(help="Replace an existing juggle.toml.")] = False,
) -> None:
    """Write juggle.toml making a dfx-mgr package the hardware tier of a co-module: each
    slot's partial becomes the bitstream of the profile's region of that slot."""
    from juggle.fabric.linux.dfxmgr import import_package, profile_regions
    from juggle.fabric.profiles import load_profile

    try:
        report = import_package(
            package,
            interface=interface,
            driver=driver,
            accel=accel,
            regions=profile_regions(load_profile(fabric)),
            target_dir=target_dir,
            name=name,
            software=software,
            native=native,
            force=force,
        )
    except JuggleError as exc:
        fail(exc, json_out)
    if json_out:
        emit_json(report)
        return
    console = Console()
    console.print(f"[green]wrote[/green] {report['path']} (module {report['module']})")
    for region, path in report["bitstreams"].items():
        console.print(f"  {region}: {path}")


@app.command()
def shell(
    fabric: Annotated[str, typer.Option(help="Board profile.")] = "xupv2p",
    json_out: Annotated[
        bool, typer.Option("--json", help="Answer each command with one JSON line.")
    ] = False,
) -> None:
    """Interactive: install/start/stop/services/regions/juggle/stats."""
    from juggle.shell import run_shell

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

    def ready(url: str) -> None:
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
    serve(
        host=host,
        port=port,
        modules=module or [],
        on_ready=ready,
        workload=bool(workload),
        access_log=access_log,
    )


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


@app.callback()
def _root(ctx: typer.Context, connect: ConnectOpt = None, daemon_uid: DaemonUidOpt = None) -> None:
    """Co-manage software, native and FPGA implementations of services."""
    if daemon_uid is not None:
        import os

        from juggle.daemon.client import DAEMON_UID_ENV, expected_daemon_uid

        os.environ[DAEMON_UID_ENV] = str(expected_daemon_uid(daemon_uid))
    ctx.obj = {"connect": connect}


def _remote(ctx: typer.Context, command: str, **arguments: Any) -> None:
    """Run ``command`` on the daemon given with --connect and print its JSON result."""
    from juggle.daemon.commands import run_remote

    path = (ctx.obj or {}).get("connect")
    if path is None:
        raise typer.BadParameter(f"{command!r} operates a running daemon: give --connect PATH")
    emit_json(run_remote(path, command, **arguments))


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def daemon(ctx: typer.Context, json_out: JsonOpt = False) -> None:
    """Run the juggle daemon (--socket PATH --state DIR [--fabric] [--backend linux]
    [--backend-option KEY=VALUE]... [--policy FILE]; --help)."""
    from juggle.daemon.__main__ import main as daemon_main

    del json_out  # the daemon logs; it prints no document
    raise typer.Exit(daemon_main(ctx.args))


@app.command()
def services(ctx: typer.Context, json_out: JsonOpt = True) -> None:
    """Services of the daemon (with --connect)."""
    _remote(ctx, "services")


@app.command()
def regions(ctx: typer.Context, json_out: JsonOpt = True) -> None:
    """Regions of the daemon's fabric (with --connect)."""
    _remote(ctx, "regions")


@app.command()
def tenants(ctx: typer.Context, json_out: JsonOpt = True) -> None:
    """Tenants of the daemon (with --connect; a tenant sees itself)."""
    _remote(ctx, "tenants")


@app.command()
def stats(ctx: typer.Context, service_id: int, json_out: JsonOpt = True) -> None:
    """Call statistics of SERVICE_ID (with --connect)."""
    _remote(ctx, "stats", service_id=service_id)


@app.command("juggle")
def juggle_command(
    ctx: typer.Context,
    to_hardware: Annotated[int | None, typer.Option("--to-hardware")] = None,
    to_software: Annotated[list[int] | None, typer.Option("--to-software")] = None,
    json_out: JsonOpt = True,
) -> None:
    """Juggle services in the daemon (with --connect; admin)."""
    _remote(ctx, "juggle", to_hardware=to_hardware, to_software=to_software or [])


@app.command()
def tier(ctx: typer.Context, service_id: int, tier: str, json_out: JsonOpt = True) -> None:
    """Serve SERVICE_ID from TIER in the daemon (with --connect; admin)."""
    _remote(ctx, "tier", service_id=service_id, tier=tier)


@app.command()
def recover(ctx: typer.Context, region: str, json_out: JsonOpt = True) -> None:
    """Clear quarantined REGION in the daemon and put its service back (with --connect;
    admin; the daemon logs an audit line)."""
    _remote(ctx, "recover", region=region)


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
    from juggle.simulate.registry import register_all

    register_all(simulate_app)


def main() -> None:
    """Console-script entry point."""
    _register_scenarios()
    try:
        app()
    except JuggleError as exc:
        try:
            fail(exc, "--json" in sys.argv[1:])
        except typer.Exit as done:
            raise SystemExit(done.exit_code) from exc
