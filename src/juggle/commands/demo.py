"""``juggle demo``: the main job, the Juggle paper's mail + music scenario
(:func:`~juggle.demo.run_demo`), as tables or with ``--json`` as one JSON document; the exit
status is 1 when a call failed or the tiers disagree."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from juggle.commands.output import JsonOpt, console, emit_json

__all__ = ["demo", "render_demo"]


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
            "in Verilator, a cycle-accurate simulator (a design's first run builds its "
            "simulator, 10-40 s, cached after)."
        ),
    ] = "model",
) -> None:
    """The main job: the Juggle paper's mail + music scenario on the simulated xupv2p board."""
    from juggle.demo import run_demo  # the runtime and the services: loaded when run

    result = run_demo(seed=seed, pace=pace, hardware=hardware, progress=_say)
    if json_out:
        emit_json(result)
    else:
        render_demo(result, console())
    if result["failed_calls"] or not result["results_agree"]:
        raise typer.Exit(1)


def _say(message: str) -> None:
    """A line of the run's progress (which engine runs, what it builds) on standard error."""
    print(f"juggle: {message}", file=sys.stderr, flush=True)


def render_demo(result: dict[str, Any], console: Console) -> None:
    """The demo's result as rich tables."""
    console.print(f"[bold]juggle demo[/bold] on {result['board']}: mail (TDES) + music (ADPCM)")
    console.print(escape(f"Hardware tier: {result['engine']['summary']}."))
    console.print(
        "A mail application decrypts messages while a music player decodes audio; whichever "
        "has the focus gets the board's one hardware region, the other runs in software."
    )
    for line in result["story"]:
        console.print(f"  {line}")
    phases = Table(title="Focus changes")
    for col in ("focus", "TDES tier", "ADPCM tier", "seconds¹"):
        phases.add_column(col)
    for p in result["phases"]:
        phases.add_row(
            str(p["focus"] or "-"),
            p["tiers"]["tdes"],
            p["tiers"]["adpcm"],
            f"{p['seconds_measured']:.3f}",
        )
    console.print(phases)
    table = Table(title="Calls and throughput per service and tier")
    for col in ("service", "tier", "calls", "bytes", "MB/s", "figure²"):
        table.add_column(col, justify="right" if col in ("calls", "bytes", "MB/s") else "left")
    for row in result["services"]:
        table.add_row(
            row["service"],
            row["tier"],
            str(row["calls"]),
            str(row["bytes"]),
            f"{row['throughput_mb_s']:.3f}",
            row["figure"],
        )
    console.print(table)
    hardware = Table(
        title="Hardware calls: modeled core + bus time per call, measured wall time beside⁴"
    )
    for col in ("service", "call", "calls", "core µs", "bus µs", "modeled µs", "MB/s", "wall µs"):
        hardware.add_column(col, justify="left" if col in ("service", "call") else "right")
    for row in result["hardware_calls"]:
        hardware.add_row(
            row["service"],
            row["call"],
            str(row["calls"]),
            "-" if row["core_us"] is None else f"{row['core_us']:.2f}",
            f"{row['bus_us']:.2f}",
            f"{row['modeled_us']:.2f}",
            f"{row['throughput_mb_s']:.3f}" if row["bytes_per_call"] else "-",
            f"{row['driver_us']:.0f}",
        )
    if result["hardware_calls"]:
        console.print(hardware)
    juggles = Table(title="Juggles (reconf ms calibrated, bridge ms input, overhead µs measured)")
    for col in ("#", "service", "to", "region", "reconf ms", "bridge ms", "overhead µs³"):
        juggles.add_column(col, justify="right" if col.endswith(("ms", "³")) else "left")
    for j in result["juggles"]:
        juggles.add_row(
            str(j["juggle"]),
            j["service"],
            j["direction"].removeprefix("to_"),
            str(j["region"]),
            f"{j['reconfiguration_ms']:.3f}",
            f"{j['bridge_ms']:.3f}",
            f"{j['overhead_us']:.0f}",
        )
    console.print(juggles)
    ok = "[green]yes[/green]" if result["results_agree"] else "[red]NO[/red]"
    console.print(f"failed calls: {result['failed_calls']}   all tiers identical: {ok}")
    notes = result["notes"]
    for mark, key in (
        ("¹", "seconds"),
        ("²", "figure"),
        ("³", "overhead"),
        ("⁴", "hardware_calls"),
    ):
        console.print(f"{mark} {notes[key]}")
    if any(row["tier"] == "native" for row in result["services"]):
        console.print(f"  {notes['native']}")
    console.print(f"  {notes['region']}")
