"""``juggle simulate edge-router`` and ``juggle simulate tdes``: the commands.

Without ``--json`` they print rich tables (every result MODELED); with ``--json`` one JSON
document on stdout whose ``labels`` give each key its kind (modeled, input, ...). Errors go
to stderr with exit status 2. ``--plot FILE.png`` writes a figure, announced as
``wrote FILE.png`` on stderr (with ``--json``: under ``files`` in the document).
``edge-router`` shows a transient progress bar on stderr unless ``--json`` or ``--quiet``;
``--scale`` shortens its figures' traces for a quick look. ``simulate tdes --energy`` runs
Fig 8's workload instead of Fig 7's sweep: energy per implementation beside the paper's, each
figure labeled (modeled, calibrated or input).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from juggle.clierror import fail
from juggle.errors import ConfigurationError, JuggleError
from juggle.simulate.edge_router import EXPERIMENTS, run_edge_router
from juggle.simulate.plot_files import announce, check_png, progress_bar
from juggle.simulate.tdes import run_tdes, run_tdes_energy

__all__ = ["edge_router", "register", "render_edge_router", "render_tdes", "tdes"]


def register(simulate_app: typer.Typer) -> None:
    """Add the ``edge-router`` and ``tdes`` commands to ``simulate_app``."""
    simulate_app.command("edge-router")(edge_router)
    simulate_app.command("tdes")(tdes)


def edge_router(
    experiment: Annotated[
        str, typer.Option("--experiment", help=f"One of: {', '.join(EXPERIMENTS)}.")
    ] = "table4",
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the traffic.")] = 1,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a PNG figure to this file.")
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", help="Controller to compare (repeatable; figures only)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar on stderr.")] = False,
    scale: Annotated[
        float,
        typer.Option(
            "--scale",
            help="Run this fraction of each trace's length (figures only; 1: the paper's "
            "experiment, less: a quick look). Reported as duration_scale.",
        ),
    ] = 1.0,
) -> None:
    """The edge-router paper (SBCCI 2007) on the simulated virtex4-router board."""
    try:
        if not 0 < scale < math.inf:
            raise ConfigurationError(f'"--scale" must be a finite number > 0, got {scale!r}', scale)
        with progress_bar(f"edge-router {experiment}", silent=json_out or quiet) as progress:
            doc = run_edge_router(
                experiment,
                seed=seed,
                policies=policy or None,
                duration_scale=scale,
                plot=plot,
                progress=progress,
            )
    except JuggleError as exc:
        fail(exc, json_out)
    announce([] if plot is None else [plot], doc, json_out=json_out)
    if json_out and plot is not None:
        doc["labels"]["files"] = "input"
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_edge_router(doc, Console())


def tdes(
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    hardware: Annotated[
        str,
        typer.Option(
            help="model: the hardware block cost from the register sequence; rtl: also counted "
            "on the TDES core's Verilog (old and new curves side by side)."
        ),
    ] = "model",
    energy: Annotated[
        bool,
        typer.Option(
            "--energy",
            help="Fig 8 instead: joules of 30 x 1,000 encryptions of 1 KiB in Java, C and "
            "through the FPGA, from the profile's power inputs and the throughput model.",
        ),
    ] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write Fig 7 as a PNG figure to this file.")
    ] = None,
) -> None:
    """Triple-DES throughput per tier vs buffer size on the simulated xupv2p (Fig 7), or its
    energy (Fig 8) with ``--energy``."""
    try:
        if plot is not None:
            if energy:
                raise ConfigurationError('"--plot" draws Fig 7; leave out --energy', plot)
            check_png(plot)
        doc = run_tdes_energy(hardware=hardware) if energy else run_tdes(hardware=hardware)
        if plot is not None:
            from juggle.simulate.edge_router_plot import plot_tdes

            plot_tdes(doc, plot)
    except JuggleError as exc:
        fail(exc, json_out)
    announce([] if plot is None else [plot], doc, json_out=json_out)
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_tdes(doc, Console())


def render_edge_router(doc: dict[str, Any], console: Console) -> None:
    """Print an edge-router result as a table."""
    if doc["experiment"] == "table4":
        table = Table(title="Table 4: µs for 100 packets of 512 B (MODELED; paper for reference)")
        table.add_column("distribution")
        for column in doc["columns"]:
            table.add_column(f"{column} model", justify="right")
            table.add_column("paper", justify="right", style="dim")
        width = len(doc["columns"])
        for r, row in enumerate(doc["rows"]):
            cells = []
            for c in range(width):
                cells += [
                    f"{doc['cells_us'][r * width + c]:.0f}",
                    str(doc["paper_us"][r * width + c]),
                ]
            table.add_row(row, *cells)
        console.print(table)
        worst = max(abs(e) for e in doc["error_pct"])
        console.print(f"largest deviation from the paper: {worst:.1f} %")
        return
    scale = doc.get("duration_scale", 1.0)
    shortened = "" if scale == 1.0 else f", traces at {100 * scale:g} % of their length"
    table = Table(title=f"{doc['experiment']}: speedup over static Config_A (MODELED{shortened})")
    table.add_column(doc["x_label"])
    for name in doc["speedup"]:
        table.add_column(name, justify="right")
    table.add_column("static ms", justify="right", style="dim")
    for i, x in enumerate(doc["x"]):
        values = [f"{doc['speedup'][name][i]:.3f}" for name in doc["speedup"]]
        table.add_row(str(x), *values, f"{doc['static_ms'][i]:.1f}")
    console.print(table)
    if "oracle_plan" in doc:
        console.print(
            "oracle: the fastest plan it knows for each trace (own plan at a block size, or a "
            f"replayed policy): {', '.join(doc['oracle_plan'])}",
            style="dim",
        )


def render_tdes(doc: dict[str, Any], console: Console) -> None:
    """Print the TDES result (Fig 7's sweep, or Fig 8's energy) as a table."""
    if doc.get("scenario") == "tdes-energy":
        _render_energy(doc, console)
        return
    table = Table(title=f"TDES throughput on {doc['board']}, MB/s (MODELED)")
    table.add_column("buffer", justify="right")
    for tier in doc["throughput_mb_s"]:
        table.add_column(tier, justify="right")
    table.add_column("proxied/direct", justify="right")
    for i, size in enumerate(doc["sizes"]):
        values = [f"{doc['throughput_mb_s'][t][i]:.3f}" for t in doc["throughput_mb_s"]]
        table.add_row(_size(size), *values, f"{doc['proxied_vs_direct'][i]:.2f}")
    console.print(table)
    console.print(
        f"proxied hardware within {100 - doc['as_fast_threshold'] * 100:.0f} % of direct "
        f"from {doc['proxied_as_fast_from']} B up"
    )
    if doc.get("hardware") == "rtl":
        cycles = doc["block_bus_cycles"]
        rtl = Table(
            title=f"hardware paths, MB/s: register-sequence model ({cycles['model']} bus cycles "
            f"per block) vs the Verilog core ({cycles['rtl']} cycles counted) (MODELED)"
        )
        rtl.add_column("buffer", justify="right")
        for tier in doc["throughput_mb_s_rtl"]:
            rtl.add_column(f"{tier} model", justify="right")
            rtl.add_column(f"{tier} rtl", justify="right")
        for i, size in enumerate(doc["sizes"]):
            cells = []
            for tier, values in doc["throughput_mb_s_rtl"].items():
                cells += [f"{doc['throughput_mb_s'][tier][i]:.3f}", f"{values[i]:.3f}"]
            rtl.add_row(_size(size), *cells)
        console.print(rtl)


def _render_energy(doc: dict[str, Any], console: Console) -> None:
    work = doc["workload"]
    table = Table(
        title=f"TDES energy on {doc['board']} (Fig 8): {work['runs']} runs x "
        f"{work['calls_per_run']:,} encryptions of {_size(work['buffer_bytes'])}"
    )
    for col in ("tier", "power W", "runtime s", "energy J", "paper J", "deviation", "figure"):
        table.add_column(col, justify="left" if col in ("tier", "figure") else "right")
    paper_runtime = doc["paper_runtime_s"]
    for tier, joules in doc["energy_j"].items():
        runtime = f"{doc['runtime_s'][tier]:,.2f}"
        if tier in paper_runtime:
            runtime += f" (paper {paper_runtime[tier]:g})"
        table.add_row(
            tier,
            f"{doc['power_w'][tier]:g}",
            runtime,
            f"{joules:,.1f}",
            f"{doc['paper_energy_j'][tier]:,.1f}",
            f"{doc['deviation_pct'][tier]:+.1f} %",
            doc["labels"]["energy_j"][tier].upper(),
        )
    console.print(table)
    for tier, how in doc["how"]["runtime_s"].items():
        console.print(f"[dim]{tier}: {how}[/dim]")
    saving, paper = doc["saving_pct"], doc["paper_saving_pct"]
    console.print(
        f"FPGA saves {saving['vs_java']:.1f} % against Java (paper > {paper['vs_java']:g} %) "
        f"and {saving['vs_c']:.1f} % against C (paper {paper['vs_c']:g} %); idle "
        f"{doc['power_w']['idle']:g} W (input)"
    )


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 else f"{n} B"
