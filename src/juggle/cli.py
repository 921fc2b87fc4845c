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

from juggle.errors import JuggleError

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
module_app = typer.Typer(help="Module descriptors: validate, schema.", no_args_is_help=True)
app.add_typer(simulate_app, name="simulate")
app.add_typer(module_app, name="module")

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
) -> None:
    """The main job: the Juggle paper's mail + music scenario on the simulated xupv2p board."""
    from juggle.demo import render_demo, run_demo

    result = run_demo(seed=seed, pace=pace)
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
) -> None:
    """The benchmark suite: ratios and latencies measured in one run (see benchmarks/)."""
    from juggle.bench import render_bench, run_bench

    result = run_bench(quick=quick, only=only or None)
    if json_out:
        emit_json(result)
    else:
        render_bench(result, Console())


@module_app.command("validate")
def module_validate(
    path: Annotated[Path, typer.Argument(help="Module folder, .zip, juggle.toml or XML.")],
    json_out: JsonOpt = False,
    fabric: Annotated[str, typer.Option(help="Board profile to check against.")] = "xupv2p",
) -> None:
    """Check a module (descriptor, classes, bitstreams, resources) without installing it."""
    from juggle.runtime.validate import validate_module

    report = validate_module(path, fabric=fabric)
    if json_out:
        emit_json(report)
        return
    console = Console()
    console.print(f"[green]ok[/green] module [bold]{report['name']}[/bold] {report['version']}")
    for service in report["services"]:
        console.print(f"  {', '.join(service['interfaces'])}: tiers {', '.join(service['tiers'])}")


@module_app.command("schema")
def module_schema() -> None:
    """Print the JSON schema of juggle.toml."""
    from juggle.runtime.descriptors import descriptor_schema_json

    sys.stdout.write(descriptor_schema_json())


@app.command()
def shell(
    fabric: Annotated[str, typer.Option(help="Board profile.")] = "xupv2p",
) -> None:
    """Interactive: install/start/stop/services/regions/juggle/stats."""
    from juggle.shell import run_shell

    raise typer.Exit(run_shell(fabric=fabric))


@app.command()
def dashboard(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8321,
    module: Annotated[
        list[Path] | None, typer.Option(help="Module to install and start (repeatable).")
    ] = None,
) -> None:
    """Live web view of services, regions and statistics (with Prometheus metrics)."""
    from juggle.dashboard.app import serve

    serve(host=host, port=port, modules=module or [])


def _register_scenarios() -> None:
    from juggle.simulate.registry import register_all

    register_all(simulate_app)


def main() -> None:
    """Console-script entry point."""
    _register_scenarios()
    try:
        app()
    except JuggleError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        raise SystemExit(2) from exc
